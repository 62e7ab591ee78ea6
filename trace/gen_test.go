package trace_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/trace"
)

// Each test below writes the same input on a 6.1, a 6.12 and a 7.3
// machine (a small synthetic image with Config.Gen set) and expects the
// outcome or the count the generation's C gives: ignoring the generation
// fails it.

var gens = []image.Generation{image.Gen61, image.Gen612, image.Gen73}

// genMachine boots a fresh small image of generation g; edit, when set,
// changes the image first.
func genMachine(t *testing.T, g image.Generation, edit func(k *image.Kernel)) (*image.Kernel, *machine.Machine, *trace.Tracing) {
	t.Helper()
	k := smallImage(t)
	k.Config.Gen = g
	if edit != nil {
		edit(k)
	}
	m, tr := boot(t, k, 0)
	return k, m, tr
}

// code is the errno of a front door's error (0: none).
func errnoOf(err error) errno.Errno {
	c, _, _, _ := trace.RefusalAt(err)
	return c
}

func op(t *testing.T, name string) sim.Op {
	t.Helper()
	o, ok := sim.LookupOp(name)
	if !ok {
		t.Fatalf("no op %q", name)
	}
	return o
}

// write writes one line and returns its errno (0: accepted) and the
// counts the write made.
func write(t *testing.T, m *machine.Machine, tr *trace.Tracing, line string) (errno.Errno, trace.Outcome, map[sim.Op]uint64) {
	t.Helper()
	snap := m.C.Snapshot()
	out, _ := tr.WriteKprobeEvents(line + "\n")
	if len(out) != 1 || !out[0].Attempted {
		t.Fatalf("%q: outcomes %+v", line, out)
	}
	return out[0].Code, out[0], m.C.Since(snap)
}

// shadowModule gives module 0 a symbol named like the vmlinux function
// name (at the address of the module's first function): a module symbol
// that shadows a unique vmlinux one.
func shadowModule(name string) func(k *image.Kernel) {
	return func(k *image.Kernel) {
		m := k.Modules[0]
		m.Symbols = append(m.Symbols, image.Symbol{Name: name, Addr: m.Symbols[len(m.Symbols)-1].Addr, Type: 't'})
	}
}

// TestGenUniquenessErrno: number_of_same_symbols on the tracefs path keeps
// -EADDRNOTAVAIL / -ENOENT in 6.1 (goto error) and becomes -EINVAL in 6.12
// (validate_probe_symbol, goto parse_error) and 7.3 (return -EINVAL); the
// perf PMU keeps the errno in all three.
func TestGenUniquenessErrno(t *testing.T) {
	want := map[image.Generation][2]errno.Errno{
		image.Gen61:  {errno.EADDRNOTAVAIL, errno.ENOENT},
		image.Gen612: {errno.EINVAL, errno.EINVAL},
		image.Gen73:  {errno.EINVAL, errno.EINVAL},
	}
	for _, g := range gens {
		k, _, tr := genMachine(t, g, nil)
		_, dup, _ := names(t, k)
		for i, line := range []string{"p " + dup, "p no_such_function_xyz"} {
			out, _ := tr.WriteKprobeEvents(line + "\n")
			if out[0].Code != want[g][i] {
				t.Errorf("%v %q: %v, want %v (%s)", g, line, out[0].Code, want[g][i], out[0].Reason)
			}
			if g != image.Gen61 && !strings.Contains(out[0].Reason.String(), "validate_probe_symbol (6.12+)") {
				t.Errorf("%v %q: reason %q does not name validate_probe_symbol (6.12+)", g, line, out[0].Reason)
			}
		}
		for fn, c := range map[string]errno.Errno{dup: errno.EADDRNOTAVAIL, "no_such_function_xyz": errno.ENOENT} {
			_, err := tr.PerfKprobeOpen(fn, 0, false)
			if errnoOf(err) != c {
				t.Errorf("%v perf %q: %v, want %v", g, fn, err, c)
			}
		}
	}
}

// TestGenUniquenessBeforeFuncEntry: 6.12+ validates the name before
// kprobe_on_func_entry, so a missing name costs one module-symbol walk
// (number_of_same_symbols) instead of two (kprobe_on_func_entry's
// kallsyms_lookup_name, then number_of_same_symbols) in 6.1.
func TestGenUniquenessBeforeFuncEntry(t *testing.T) {
	modSym := make(map[image.Generation]uint64)
	for _, g := range gens {
		_, m, tr := genMachine(t, g, nil)
		_, _, counts := write(t, m, tr, "p no_such_function_xyz")
		modSym[g] = counts[kallsyms.OpModSym]
	}
	if modSym[image.Gen61] == 0 || modSym[image.Gen61] != 2*modSym[image.Gen612] || modSym[image.Gen73] != modSym[image.Gen612] {
		t.Errorf("module symbols walked: %v, want 6.1 = 2 × 6.12 = 2 × 7.3", modSym)
	}
}

// TestGenModuleShadow: a name unique in vmlinux that a module also
// defines. 6.1 and 6.12 count the module copy (tracefs -EADDRNOTAVAIL in
// 6.1, -EINVAL in 6.12; perf -EADDRNOTAVAIL); 7.3's
// number_of_same_symbols returns the vmlinux count without walking the
// modules, so the probe is made and no module symbol is read.
func TestGenModuleShadow(t *testing.T) {
	uniq := synth.ProbeTargetName(0)
	want := map[image.Generation]errno.Errno{image.Gen61: errno.EADDRNOTAVAIL, image.Gen612: errno.EINVAL, image.Gen73: 0}
	perf := map[image.Generation]errno.Errno{image.Gen61: errno.EADDRNOTAVAIL, image.Gen612: errno.EADDRNOTAVAIL, image.Gen73: 0}
	for _, g := range gens {
		_, m, tr := genMachine(t, g, shadowModule(uniq))
		code, o, counts := write(t, m, tr, "p "+uniq)
		if code != want[g] {
			t.Errorf("%v: %v, want %v (%s)", g, code, want[g], o.Reason)
		}
		if g == image.Gen73 && counts[kallsyms.OpModSym] != 0 {
			t.Errorf("7.3: %d module symbols walked, want 0", counts[kallsyms.OpModSym])
		}
		if g == image.Gen612 && counts[kallsyms.OpModSym] == 0 {
			t.Errorf("6.12: no module symbol walked")
		}
		pe, err := tr.PerfKprobeOpen(uniq, 0, false)
		if errnoOf(err) != perf[g] {
			t.Errorf("%v perf: %v, want %v", g, err, perf[g])
		}
		if pe != nil {
			tr.PerfKprobeClose(pe)
		}
	}
}

// TestGenModSymValidated: 6.12+ validates MOD:SYM when MOD is loaded, by
// walking only that module: a missing symbol fails early (tracefs -EINVAL;
// in 6.1 registration fails with -ENOENT), and a symbol the module defines
// twice is refused (6.1 accepts it). A module that is not loaded is not
// checked in any generation.
func TestGenModSymValidated(t *testing.T) {
	want := map[image.Generation][3]errno.Errno{
		image.Gen61:  {errno.ENOENT, 0, 0},
		image.Gen612: {errno.EINVAL, errno.EINVAL, 0},
		image.Gen73:  {errno.EINVAL, errno.EINVAL, 0},
	}
	for _, g := range gens {
		var mod, twice string
		k, m, tr := genMachine(t, g, func(k *image.Kernel) {
			md := k.Modules[0]
			s := md.Symbols[0]
			twice = s.Name
			md.Symbols = append(md.Symbols, image.Symbol{Name: s.Name, Addr: md.Symbols[len(md.Symbols)-1].Addr, Type: 't'})
		})
		mod = k.Modules[0].Name
		for i, line := range []string{
			"p " + mod + ":no_such_function_xyz",
			"p:g/twice " + mod + ":" + twice,
			"p:g/nomod not_loaded_mod:some_function",
		} {
			code, o, _ := write(t, m, tr, line)
			if code != want[g][i] {
				t.Errorf("%v %q: %v, want %v (%s)", g, line, code, want[g][i], o.Reason)
			}
		}
	}
}

// TestGenEventDirCounts: 6.1 creates the event's tracefs directory and its
// six files, and a new group's directory with two files, at once (10
// tracefs.create); 6.12 and 7.3 make one eventfs_inode each (2
// eventfs.create_dir, no dentry). Deleting the event frees them: tracefs
// removals in 6.1, eventfs removals with call_srcu + call_rcu per inode in
// 6.12 and call_srcu only in 7.3.
func TestGenEventDirCounts(t *testing.T) {
	type counts struct{ dentry, ei, dentryRm, eiRm, rcu uint64 }
	want := map[image.Generation]counts{
		image.Gen61:  {10, 0, 10, 0, 0},
		image.Gen612: {0, 2, 0, 2, 4},
		image.Gen73:  {0, 2, 0, 2, 2},
	}
	uniq := synth.ProbeTargetName(1)
	for _, g := range gens {
		_, m, tr := genMachine(t, g, nil)
		code, o, made := write(t, m, tr, "p:newgrp/ev "+uniq)
		if code != 0 {
			t.Fatalf("%v: %v (%s)", g, code, o.Reason)
		}
		code, o, gone := write(t, m, tr, "-:newgrp/ev")
		if code != 0 {
			t.Fatalf("%v delete: %v (%s)", g, code, o.Reason)
		}
		got := counts{
			made[op(t, "tracefs.create")], made[op(t, "eventfs.create_dir")],
			gone[op(t, "tracefs.remove")], gone[op(t, "eventfs.remove_dir")], gone[op(t, "rcu.call")],
		}
		if got != want[g] {
			t.Errorf("%v: %+v, want %+v", g, got, want[g])
		}
	}
}

// TestGenArgLimits: a 100-character fetch argument is -EINVAL in 6.1
// (MAX_ARGSTR_LEN 63), -E2BIG in 6.12 (63) and accepted in 7.3 (255); 129
// arguments are accepted in 6.1 (the parse loop stops at MAX_TRACE_ARGS)
// and -E2BIG in 6.12 (no error_log entry) and 7.3 (TOO_MANY_ARGS logged).
func TestGenArgLimits(t *testing.T) {
	long := "%di"
	for len(long) < 100 {
		long = "+0000000000000000000(" + long + ")"
	}
	many := strings.Repeat(" %ax", 129)
	want := map[image.Generation][2]errno.Errno{
		image.Gen61:  {errno.EINVAL, 0},
		image.Gen612: {errno.E2BIG, errno.E2BIG},
		image.Gen73:  {0, errno.E2BIG},
	}
	logged := map[image.Generation]int{image.Gen61: 0, image.Gen612: 0, image.Gen73: 1}
	for _, g := range gens {
		_, m, tr := genMachine(t, g, nil)
		code, o, _ := write(t, m, tr, fmt.Sprintf("p:g/long %s x=%s", synth.ProbeTargetName(2), long))
		if code != want[g][0] {
			t.Errorf("%v %d-character argument: %v, want %v (%s)", g, len(long), code, want[g][0], o.Reason)
		}
		before := len(tr.ErrorLog())
		code, o, _ = write(t, m, tr, "p:g/many "+synth.ProbeTargetName(3)+many)
		if code != want[g][1] {
			t.Errorf("%v 129 arguments: %v, want %v (%s)", g, code, want[g][1], o.Reason)
		}
		if n := len(tr.ErrorLog()) - before; n != logged[g] {
			t.Errorf("%v 129 arguments: %d error_log entries, want %d", g, n, logged[g])
		}
	}
}

// TestGenCreateCbAllocs: 7.3's trace_kprobe_create_cb kzallocs its parse
// context before the p/r check (two kmalloc ops more than 6.12 for a
// command that is not a kprobe), and trace_kprobe_create_internal
// kmallocs ebuf and abuf (six more for a plain probe).
func TestGenCreateCbAllocs(t *testing.T) {
	kmalloc := op(t, "kmalloc")
	got := map[image.Generation][2]uint64{}
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		_, m, tr := genMachine(t, g, nil)
		_, _, c1 := write(t, m, tr, "x "+synth.ProbeTargetName(4))
		_, _, c2 := write(t, m, tr, "p "+synth.ProbeTargetName(4))
		got[g] = [2]uint64{c1[kmalloc], c2[kmalloc]}
	}
	if d := got[image.Gen73][0] - got[image.Gen612][0]; d != 2 {
		t.Errorf("not a kprobe command: 7.3 - 6.12 = %d kmalloc ops, want 2 (%v)", d, got)
	}
	if d := got[image.Gen73][1] - got[image.Gen612][1]; d != 6 {
		t.Errorf("p SYM: 7.3 - 6.12 = %d kmalloc ops, want 6 (%v)", d, got)
	}
}

// TestGenPerfNameCopy: perf_kprobe_init copies the name with a
// KSYM_NAME_LEN kzalloc and one strncpy_from_user in 6.1, with
// strndup_user (strnlen_user, then memdup_user: two user accesses) in 6.12
// and 7.3; a 600-character name is -E2BIG in all three, without an
// allocation in 6.12+.
func TestGenPerfNameCopy(t *testing.T) {
	copyUser := op(t, "trace.copy_from_user")
	want := map[image.Generation]uint64{image.Gen61: 1, image.Gen612: 2, image.Gen73: 2}
	for _, g := range gens {
		_, m, tr := genMachine(t, g, nil)
		snap := m.C.Snapshot()
		pe, err := tr.PerfKprobeOpen(synth.ProbeTargetName(5), 0, false)
		if err != nil {
			t.Fatalf("%v: %v", g, err)
		}
		if n := m.C.Since(snap)[copyUser]; n != want[g] {
			t.Errorf("%v: %d user copies, want %d", g, n, want[g])
		}
		tr.PerfKprobeClose(pe)
		if _, err := tr.PerfKprobeOpen(strings.Repeat("a", 600), 0, false); errnoOf(err) != errno.E2BIG {
			t.Errorf("%v 600-character name: %v, want E2BIG", g, err)
		}
	}
}

// TestGenDeleteLongHead: "-:EVENT SYM" matches through a 64-byte buffer in
// 6.1 and 6.12 (trace_kprobe_match_command_head's snprintf), so a head of
// over 63 characters never matches (-ENOENT); 7.3 compares the symbol
// itself and deletes the event.
func TestGenDeleteLongHead(t *testing.T) {
	sym := "not_loaded_mod:" + strings.Repeat("f", 70)
	want := map[image.Generation]errno.Errno{image.Gen61: errno.ENOENT, image.Gen612: errno.ENOENT, image.Gen73: 0}
	for _, g := range gens {
		_, m, tr := genMachine(t, g, nil)
		if code, o, _ := write(t, m, tr, "p:g/longhead "+sym); code != 0 {
			t.Fatalf("%v: %v (%s)", g, code, o.Reason)
		}
		code, o, _ := write(t, m, tr, "-:g/longhead "+sym)
		if code != want[g] {
			t.Errorf("%v: %v, want %v (%s)", g, code, want[g], o.Reason)
		}
	}
}

// TestGenDefineFieldsFirst: 7.3's event_create_dir defines the fields
// before event_subsystem_dir, so an event whose new group cannot be
// allocated (trace.subsystem.alloc) still has its fields (ip and two
// arguments: three allocations, freed again on delete); 6.12 (and 6.1)
// define them only once the event's directory exists.
func TestGenDefineFieldsFirst(t *testing.T) {
	kmalloc := op(t, "kmalloc")
	made := map[image.Generation]uint64{}
	gone := map[image.Generation]uint64{}
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		_, m, tr := genMachine(t, g, nil)
		m.Faults.Set(trace.FaultSubsystem, 1)
		code, o, c1 := write(t, m, tr, "p:nogrp/ev "+synth.ProbeTargetName(6)+" a=%ax b=%bx")
		if code != 0 {
			t.Fatalf("%v: %v (%s)", g, code, o.Reason)
		}
		code, o, c2 := write(t, m, tr, "-:nogrp/ev")
		if code != 0 {
			t.Fatalf("%v delete: %v (%s)", g, code, o.Reason)
		}
		made[g], gone[g] = c1[kmalloc], c2[kmalloc]
	}
	// 7.3 - 6.12 on create: trace_kprobe_create_cb's ctx, gbuf and abuf
	// (6) and the three fields; on delete: the fields.
	if d := made[image.Gen73] - made[image.Gen612]; d != 6+3 {
		t.Errorf("create: 7.3 - 6.12 = %d kmalloc ops, want 9 (%v)", d, made)
	}
	if d := gone[image.Gen73] - gone[image.Gen612]; d != 3 {
		t.Errorf("delete: 7.3 - 6.12 = %d kmalloc ops, want 3 (%v)", d, gone)
	}
}

// TestGenEventTypeIDA: 6.12+'s register_trace_event takes the lowest free
// id from an IDA, so an event made after a delete gets the deleted
// event's id back, without the ftrace_find_event check of the event_hash
// chain; 6.1 hands out next_event_type++ (the next id) and checks its
// chain.
func TestGenEventTypeIDA(t *testing.T) {
	hashVisit, ida := op(t, "trace.event_hash.visit"), op(t, "trace.event_type.ida")
	for _, g := range gens {
		_, m, tr := genMachine(t, g, nil)
		trail := &kprobes.Trail{}
		m.KP.Trail = trail
		ids := func() []string {
			var out []string
			for _, s := range trail.Steps {
				if s.Check == "register_trace_event" {
					out = append(out, s.Result)
				}
			}
			return out
		}
		_, _, c1 := write(t, m, tr, "p:g/a "+synth.ProbeTargetName(7))
		write(t, m, tr, "-:g/a")
		write(t, m, tr, "p:g/b "+synth.ProbeTargetName(8))
		got := ids()
		if len(got) != 2 {
			t.Fatalf("%v: register_trace_event steps %q", g, got)
		}
		if reused := got[0] == got[1]; reused != (g != image.Gen61) {
			t.Errorf("%v: ids %q: reused = %v, want %v", g, got, reused, g != image.Gen61)
		}
		if (c1[hashVisit] > 0) != (g == image.Gen61) || (c1[ida] > 0) == (g == image.Gen61) {
			t.Errorf("%v: event_hash visits %d, ida ops %d", g, c1[hashVisit], c1[ida])
		}
	}
}
