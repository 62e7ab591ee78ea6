package scenarios

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/sim"
	"pgregory.net/rapid"
)

// tb is what both *testing.T and *rapid.T offer.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// outcome is one probe's decision as the --probes output reports it.
type outcome struct {
	Addr  uint64
	Code  int
	State string
	Why   string
}

// registerEach registers s.Targets one by one on a kernel booted under sw,
// with the optimizer on run many's schedule, and returns each probe's
// outcome after the optimizer is idle, and the counters. trail turns the
// decision trail on.
func registerEach(t tb, s *ManySetup, sw sim.Switches, trail bool) ([]outcome, *sim.Counters, *kprobes.Trail) {
	return registerEachFaults(t, s, sw, trail, "")
}

func registerEachFaults(t tb, s *ManySetup, sw sim.Switches, trail bool, faults string) ([]outcome, *sim.Counters, *kprobes.Trail) {
	t.Helper()
	f, err := sim.ParseFaults(faults)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Boot(s.Kernel, sw, s.Opts.CPUs, f)
	if err != nil {
		t.Fatal(err)
	}
	var tr *kprobes.Trail
	if trail {
		tr = &kprobes.Trail{}
		b.KP.Trail = tr
	}
	ps := make([]*kprobes.Kprobe, len(s.Targets))
	errs := make([]error, len(s.Targets))
	for i, sp := range s.Targets {
		ps[i] = &kprobes.Kprobe{SymbolName: sp.Symbol, Offset: sp.Offset, Addr: sp.Addr, HasPostHandler: sp.Post}
		errs[i] = b.KP.RegisterKprobe(ps[i])
		var e kprobes.Errno
		if errs[i] != nil && !errors.As(errs[i], &e) {
			t.Fatalf("probe %d: %v", i, errs[i])
		}
		afterRegistration(b.KP, i, s.Opts.OptimizeEvery, nil)
	}
	b.KP.Drain()
	out := make([]outcome, len(ps))
	for i, p := range ps {
		var e kprobes.Errno
		errors.As(errs[i], &e)
		out[i] = outcome{Addr: p.Addr, Code: int(e), State: p.State().String(), Why: p.Why().String()}
		switch {
		case errs[i] != nil && p.Why().IsZero():
			t.Fatalf("probe %d (%+v) refused with %v and no reason", i, s.Targets[i], errs[i])
		case errs[i] != nil && p.Why().Check == "register_kprobe" && strings.HasPrefix(p.Why().Detail, "failed with"):
			t.Fatalf("probe %d (%+v) refused with %v by a check that did not name itself", i, s.Targets[i], errs[i])
		case errs[i] == nil && p.State() != kprobes.StateOptimized && p.Why().IsZero():
			t.Fatalf("probe %d (%+v) is %s with no reason", i, s.Targets[i], p.State())
		case errs[i] == nil && p.State() == kprobes.StateOptimized && !p.Why().IsZero():
			t.Fatalf("probe %d (%+v) is optimized but has reason %q", i, s.Targets[i], p.Why())
		}
	}
	return out, b.C, tr
}

func mixedSetup(t tb, seed uint64, n, extra int) *ManySetup {
	t.Helper()
	o := testManyOptions()
	o.N, o.ImageProbes, o.Mixed, o.Via, o.Seed, o.OptimizeEvery = n, extra, true, doors.ViaRegisterKprobe, seed, 13
	o.Image = smallImage(seed)
	s, err := PrepareMany(o)
	if err != nil {
		t.Fatal(err)
	}
	// Optimized-region conflicts the mix rarely ends in: on a target
	// (+0 mov 6 bytes, +6 add 3, +9 mov 6), a probe at +9 then one at +6
	// whose jump would cover it (-EEXIST in arch_check_optimized_kprobe),
	// and a post handler joining an optimized probe.
	for i := 0; i < min(n, 4); i++ {
		name := synth.ProbeTargetName(i)
		s.Targets = append(s.Targets, Target{Symbol: name, Offset: 9}, Target{Symbol: name, Offset: 6}, Target{Symbol: name, Offset: 6, Post: i%2 == 0})
	}
	return s
}

func sameOutcomes(t tb, name string, base, got []outcome) {
	t.Helper()
	for i := range base {
		if base[i] != got[i] {
			t.Fatalf("%s: probe %d: %+v, want (none) %+v", name, i, got[i], base[i])
		}
	}
}

// TestReasonsSameUnderEverySwitchSet: on mixed probes (every awkward
// placement class), each probe's result, state and reason are the same
// under every preset and every ablation set.
func TestReasonsSameUnderEverySwitchSet(t *testing.T) {
	s := mixedSetup(t, 21, 150, 450)
	base, _, _ := registerEach(t, s, 0, false)
	classes := map[string]bool{}
	for _, o := range base {
		check, _, _ := strings.Cut(o.Why, ": ")
		if o.Why != "" {
			classes[check] = true
		}
	}
	if len(classes) < 6 {
		t.Fatalf("only %d reason classes in the mix, too tame: %v", len(classes), classes)
	}
	for _, spec := range allSpecs()[1:] {
		got, _, _ := registerEach(t, s, spec.Switches, false)
		sameOutcomes(t, spec.Name, base, got)
	}
	// With every late-init index allocation failing the series falls
	// back to the linear scans: the same reasons again.
	var faults []string
	for _, f := range sim.FaultPoints() {
		if strings.HasSuffix(f.Name, ".index.alloc") {
			faults = append(faults, f.Name)
		}
	}
	if len(faults) == 0 {
		t.Fatal("no index allocation fault points")
	}
	for _, sw := range []sim.Switches{sim.PresetSeries.Set, sim.PresetAll.Set} {
		got, _, _ := registerEachFaults(t, s, sw, false, strings.Join(faults, ","))
		sameOutcomes(t, sw.Name()+" with failing index allocations", base, got)
	}
}

// TestReasonsSameProperty: the same on random images and probe mixes,
// against a random choice of switch sets each time.
func TestReasonsSameProperty(t *testing.T) {
	// 100 images booted 5 times each is too slow for `make test`: 20
	// checks with a fixed seed, and no fail file (the seed reproduces a
	// failure), unless the command line asks otherwise.
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	checks := "20"
	if race.Enabled {
		checks = "6"
	}
	for name, v := range map[string]string{"rapid.checks": checks, "rapid.seed": "20261201", "rapid.nofailfile": "true"} {
		if f := flag.Lookup(name); f != nil && !set[name] {
			old := f.Value.String()
			_ = f.Value.Set(v)
			defer func() { _ = f.Value.Set(old) }()
		}
	}
	specs := allSpecs()
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64Range(1, 1<<20).Draw(rt, "seed")
		s := mixedSetup(rt, seed, rapid.IntRange(5, 40).Draw(rt, "targets"), rapid.IntRange(50, 200).Draw(rt, "image-probes"))
		base, _, _ := registerEach(rt, s, 0, false)
		for i := 0; i < 4; i++ {
			spec := specs[rapid.IntRange(1, len(specs)-1).Draw(rt, "spec")]
			got, _, _ := registerEach(rt, s, spec.Switches, false)
			sameOutcomes(rt, spec.Name, base, got)
		}
	})
}

// TestTrailChangesNoCount: the decision trail on or off, every counter of
// every phase is the same, and so is every decision.
func TestTrailChangesNoCount(t *testing.T) {
	s := mixedSetup(t, 22, 40, 200)
	for _, sw := range []sim.Switches{0, sim.PresetAll.Set} {
		off, coff, _ := registerEach(t, s, sw, false)
		on, con, tr := registerEach(t, s, sw, true)
		sameOutcomes(t, "trail on", off, on)
		if len(tr.Steps) < 20*len(s.Targets) {
			t.Fatalf("%s: %d trail steps for %d probes", sw.Name(), len(tr.Steps), len(s.Targets))
		}
		if a, b := coff.NonZero(), con.NonZero(); !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: counters differ with the trail on:\n%v\n%v", sw.Name(), a, b)
		}
	}
}

// TestExplainTrailSameUnderEverySwitchSet: explain's trail, step by step,
// and its outcome are the same under every preset and ablation set, for
// targets of every placement class.
func TestExplainTrailSameUnderEverySwitchSet(t *testing.T) {
	s := mixedSetup(t, 23, 4, 60)
	// Every probe of the mix, with the optimizer run after each, on one
	// kernel: later probes meet earlier ones (aggregation, recovery under
	// int3s and jumps, optimized-region conflicts).
	trailsSame(t, s.Kernel, s.Targets)
}

// trailsSame explains targets one after another on k booted under every
// preset and ablation set, and requires each trail and outcome to be the
// one under the first set (none).
func trailsSame(t *testing.T, k *image.Kernel, targets []Target) {
	t.Helper()
	want := make([]string, len(targets))
	for si, spec := range allSpecs() {
		b, err := Boot(k, spec.Switches, 8, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, tg := range targets {
			// Registrations accumulate on one kernel, as a run's do.
			x, err := Explain(b, tg, nil)
			if err != nil {
				t.Fatal(err)
			}
			var sb strings.Builder
			_, _ = x.Trail.WriteTo(&sb)
			got := fmt.Sprintf("%s= %d %s %s", sb.String(), x.Code, x.State, x.Why)
			if si == 0 {
				want[i] = got
			} else if got != want[i] {
				t.Fatalf("%s: target %d (%+v):\n%s\nwant (none):\n%s", spec.Name, i, tg, got, want[i])
			}
		}
	}
}

// The trail of a probe refused in the middle of a function.
func ExampleExplain() {
	o := testManyOptions()
	o.N, o.Image = 2, smallImage(1)
	s, err := PrepareMany(o)
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := Boot(s.Kernel, sim.PresetSeries.Set, 8, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	x, err := Explain(b, Target{Symbol: "kprobe_many_func_1", Offset: 2}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = x.Trail.WriteTo(os.Stdout)
	fmt.Println("result:", kprobes.Errno(x.Code), "state:", x.State)
	fmt.Println("reason:", x.Why)
	// Output:
	// register_kprobe(symbol_name="kprobe_many_func_1", offset=2)
	//   _kprobe_addr
	//     kallsyms_lookup_name("kprobe_many_func_1") = 0xffffffff81033130
	//     kallsyms_lookup_size_offset(0xffffffff81033132) = kprobe_many_func_1+0x2/0x20
	//     arch_adjust_kprobe_addr(kprobe_many_func_1+0x2) = 0xffffffff81033132 (is_endbr is false without CONFIG_X86_KERNEL_IBT)
	//   warn_kprobe_rereg: __get_valid_kprobe(kprobe_many_func_1+0x2) = NULL (not registered yet)
	//   check_kprobe_address_safe(kprobe_many_func_1+0x2)
	//     check_ftrace_location: ftrace_location(kprobe_many_func_1+0x2) = 0: no ftrace site
	//     core_kernel_text(kprobe_many_func_1+0x2) = true
	//     in_gate_area_no_mm(0xffffffff81033132) = false
	//     within_kprobe_blacklist(kprobe_many_func_1+0x2) = false
	//     jump_label_text_reserved([0xffffffff81033132, 0xffffffff81033132]) = false
	//     static_call_text_reserved([0xffffffff81033132, 0xffffffff81033132]) = false
	//     find_bug(0xffffffff81033132) = NULL
	//     is_cfi_preamble_symbol(kprobe_many_func_1+0x2) = false (kprobe_many_func_1)
	//   get_kprobe(kprobe_many_func_1+0x2) = NULL: a new probe address
	//   arch_prepare_kprobe(kprobe_many_func_1+0x2)
	//     alternatives_text_reserved(kprobe_many_func_1+0x2) = false (SMP: smp_alt_modules is empty)
	//     can_probe(kprobe_many_func_1+0x2) = false: walked 1 instruction from kprobe_many_func_1+0x0 to +6, past +2
	//   register_kprobe: returns -EILSEQ
	// result: -EILSEQ state: unregistered
	// reason: arch_prepare_kprobe: can_probe: +2 is not an instruction boundary: the 6-byte mov at +0 spans it
}
