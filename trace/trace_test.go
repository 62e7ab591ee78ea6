package trace_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/trace"
)

func smallImage(t testing.TB) *image.Kernel {
	t.Helper()
	cfg := synth.DefaultConfig()
	cfg.Seed = 7
	cfg.Functions, cfg.InitFunctions = 3000, 100
	cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.StaticCallKeys = 1500, 300, 300, 40
	cfg.BugEntries, cfg.Blacklist, cfg.Modules, cfg.ModuleFunctions = 800, 60, 2, 60
	cfg.ProbeTargets, cfg.ProbeTargetsTraced = 200, true
	k, _, err := synth.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func boot(t testing.TB, k *image.Kernel, sw sim.Switches) (*machine.Machine, *trace.Tracing) {
	t.Helper()
	cfg := machine.DefaultConfig()
	cfg.Switches = sw
	m, err := machine.Boot(k, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := trace.New(trace.Deps{KP: m.KP, Syms: m.Syms, Ftrace: m.Ftrace, Image: k, C: m.C, Faults: m.Faults}, trace.ConfigFor(k))
	return m, tr
}

// names returns a unique traceable function, a name with two vmlinux
// copies, and a missing name.
func names(t testing.TB, k *image.Kernel) (uniq, dup string, copies int) {
	count := map[string]int{}
	for _, s := range k.Symbols {
		count[s.Name]++
	}
	for _, m := range k.Modules {
		for _, s := range m.Symbols {
			count[s.Name]++
		}
	}
	for _, s := range k.Functions() {
		if s.Module != "" || s.Size == 0 {
			continue
		}
		if count[s.Name] >= 2 && dup == "" {
			dup, copies = s.Name, count[s.Name]
		}
	}
	uniq = synth.ProbeTargetName(0)
	if dup == "" {
		t.Fatalf("image lacks a unique (%q) or a duplicated (%q) function", uniq, dup)
	}
	return
}

func TestKprobeEventsDuplicateAndMissing(t *testing.T) {
	k := smallImage(t)
	_, tr := boot(t, k, 0)
	uniq, dup, copies := names(t, k)
	cases := []struct {
		line   string
		code   errno.Errno
		reason string
	}{
		{"p " + uniq, 0, ""},
		{"p " + dup, errno.EADDRNOTAVAIL, fmt.Sprintf("trace_kprobe: symbol is not unique (%d copies)", copies)},
		{"p no_such_function_xyz", errno.ENOENT, "trace_kprobe: symbol \"no_such_function_xyz\" not found"},
		{"p " + uniq, errno.EEXIST, "append_trace_kprobe: the same probe is already on this event"},
		{"x " + uniq, errno.EINVAL, "create_or_delete_trace_kprobe"},
		{"p:bad.grp/ev " + uniq, errno.EINVAL, "traceprobe_parse_event_name"},
		{"p:g/e.v " + uniq, errno.EINVAL, "traceprobe_parse_event_name"},
		{"p5 " + uniq, errno.EINVAL, "__trace_kprobe_create: maxactive is only for return probes"},
		{"p " + uniq + "-4", errno.EINVAL, "__trace_kprobe_create: bad probe offset"},
	}
	for _, tc := range cases {
		out, err := tr.WriteKprobeEvents(tc.line + "\n")
		if len(out) != 1 || !out[0].Attempted {
			t.Fatalf("%q: outcomes %+v", tc.line, out)
		}
		if out[0].Code != tc.code {
			t.Errorf("%q: code %v, want %v (%s)", tc.line, out[0].Code, tc.code, out[0].Reason)
		}
		if (err == nil) != (tc.code == 0) {
			t.Errorf("%q: write returned %v", tc.line, err)
		}
		if !strings.HasPrefix(out[0].Reason.String(), tc.reason) {
			t.Errorf("%q: reason %q, want prefix %q", tc.line, out[0].Reason, tc.reason)
		}
	}
	if ev := tr.LookupEvent("kprobes", "p_"+uniq+"_0"); ev == nil {
		t.Fatalf("no event p_%s_0", uniq)
	}
}

func TestWriteStopsAtFirstFailure(t *testing.T) {
	k := smallImage(t)
	_, tr := boot(t, k, 0)
	var b strings.Builder
	for i := 0; i < 5; i++ {
		fmt.Fprintf(&b, "p %s\n", synth.ProbeTargetName(i))
	}
	b.WriteString("p no_such_function_xyz\n")
	for i := 5; i < 10; i++ {
		fmt.Fprintf(&b, "p %s\n", synth.ProbeTargetName(i))
	}
	out, err := tr.WriteKprobeEvents(b.String())
	if err != errno.ENOENT {
		t.Fatalf("write: %v, want ENOENT", err)
	}
	for i, o := range out {
		switch {
		case i < 5 && (!o.Attempted || o.Code != 0):
			t.Errorf("line %d: %+v, want accepted", i, o)
		case i == 5 && o.Code != errno.ENOENT:
			t.Errorf("line %d: %+v, want ENOENT", i, o)
		case i > 5 && o.Attempted:
			t.Errorf("line %d attempted after the failure", i)
		}
	}
	if tr.NumEvents() != 5 {
		t.Fatalf("%d events, want 5", tr.NumEvents())
	}
}
