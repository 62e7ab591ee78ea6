package main

import (
	"strings"
	"testing"

	"github.com/kpsim/kpsim/scenarios"
)

func TestRunBPFBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "session", "--programs", "0"}, "--programs"},
		{[]string{"run", "session", "--kconfig", "KPROBES=y"}, "FPROBE"},
		{[]string{"run", "session", "--bpf-kernel", "5.15"}, "--bpf-kernel"},
		// --bpf-kernel only asserts the image's generation: the old 6.10
		// model is named by its generation, a contradiction is refused.
		{[]string{"run", "session", "--bpf-kernel", "6.10"}, "--kernel-version 6.12"},
		{[]string{"run", "multi", "--bpf-kernel", "6.12"}, "contradicts the image's generation 6.1"},
		{[]string{"run", "session", "--bpf-kernel", "7.3"}, "contradicts the image's generation 6.1"},
		{[]string{"run", "session", "--patches", "ftrace-single-lookup,ftrace-single-lookup-v1"}, "alternatives"},
		{[]string{"run", "session", "--possible-cpus", "0"}, "--possible-cpus"},
		{[]string{"run", "crossover", "--k", "0"}, "--k"},
		{[]string{"run", "crossover", "--k", "2000000"}, "--k"},
		{[]string{"run", "crossover", "--k", "1,x"}, "--k"},
		{[]string{"run", "multi", "--pattern", ""}, "empty pattern"},
		{[]string{"run", "multi", "--k", "-1"}, "--k"},
		{[]string{"run", "tracing-multi", "--variants", "nope"}, "--variants"},
		// 6.1 has no tracing multi link: refused, naming the generation.
		{[]string{"run", "tracing-multi", "--k", "3"}, "generation 6.1"},
		{[]string{"run", "tracing-multi", "--nr-args", "7"}, "--nr-args"},
		{[]string{"run", "session", "--out", "/nonexistent/dir/x.json"}, "--out"},
		{[]string{"run", "crossover", "--format", "csv"}, "--format"},
	} {
		args := append(tc.args, small...)
		_, errs, code := runKpsim(args...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line naming %s", tc.args, code, errs, tc.want)
		}
	}
}

// run tracing-multi on 7.3: every component per function, the kallsyms
// share over the complete total, what the total includes.
func TestRunTracingMulti73(t *testing.T) {
	args := append([]string{"run", "tracing-multi", "--k", "5", "--variants", "baseline", "--kernel-version", "7.3"}, smallSizes...)
	out := mustKpsim(t, args...)
	for _, w := range []string{"total includes:", "not modelled: none", "trampoline JIT", "text pokes", "kallsyms share", "%", "trampolines 5"} {
		if !strings.Contains(out, w) {
			t.Errorf("no %q in:\n%s", w, out)
		}
	}
}

// A pattern matching nothing and an invalid target are per-attach results.
func TestRunMultiNoMatchIsAResult(t *testing.T) {
	out := mustKpsim(t, append([]string{"run", "multi", "--pattern", "zzz_no_such_fn*", "--k", "5", "--patches", "none"}, small...)...)
	if !strings.Contains(out, "-ENOENT") {
		t.Errorf("no -ENOENT result:\n%s", out)
	}
}

func TestRunSessionFprobeOff(t *testing.T) {
	// kprobe.multi links on CONFIG_FPROBE=n: the -EOPNOTSUPP stub, the
	// override recorded.
	out := mustKpsim(t, append([]string{"run", "multi", "--k", "3", "--kconfig", "FPROBE=n", "--patches", "none"}, small...)...)
	if !strings.Contains(out, "-EOPNOTSUPP") || !strings.Contains(out, "FPROBE=n") {
		t.Errorf("want -EOPNOTSUPP and the override recorded:\n%s", out)
	}
	// kprobe.session on the synthetic image's generation, 6.1: 6.1.192's
	// link_create has no BPF_TRACE_KPROBE_SESSION and refuses it with
	// -EINVAL before the CONFIG_FPROBE stub; --bpf-kernel 6.1 agrees with
	// the image.
	out = mustKpsim(t, append([]string{"run", "session", "--programs", "3", "--kconfig", "FPROBE=n", "--bpf-kernel", "6.1", "--patches", "libbpf-exact-syms"}, small...)...)
	if !strings.Contains(out, "-EINVAL:3") || !strings.Contains(out, "generation 6.1") {
		t.Errorf("want 3 -EINVAL on generation 6.1:\n%s", out)
	}
}

func FuzzParseKList(f *testing.F) {
	for _, s := range []string{"1,10,100", "max", "0", "1048577", "5,max,7", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ks, err := parseKList(s)
		if err != nil {
			return
		}
		for _, k := range ks {
			if k != scenarios.KMax && (k <= 0 || k > 1<<20) {
				t.Fatalf("%q: accepted K = %d", s, k)
			}
		}
	})
}
