package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func explainArgs(extra ...string) []string {
	return append(append([]string{"explain"}, small...), append([]string{"--n", "4"}, extra...)...)
}

// wantExplain runs kpsim with args, wants exit 0 and every string of want
// in the output, and returns the output.
func wantExplain(t *testing.T, args []string, want ...string) string {
	t.Helper()
	out := mustKpsim(t, args...)
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	return out
}

// A sample target is built into the image even without --n; other
// targets get the image without them unless --n asks.
func TestExplainSampleTargets(t *testing.T) {
	wantExplain(t, append(append([]string{"explain"}, small...), "kprobe_many_func_7"), "state    optimized")
	wantExplain(t, append(append([]string{"explain"}, small...), "kprobe_many_func_7", "--n", "0"), "state    optimized")
}

func TestExplainOptimized(t *testing.T) {
	wantExplain(t, explainArgs("kprobe_many_func_1", "--patches", "series"),
		`register_kprobe(symbol_name="kprobe_many_func_1")`,
		`kallsyms_lookup_name("kprobe_many_func_1") = 0x`,
		"check_kprobe_address_safe(kprobe_many_func_1+0x0)",
		"jump_label_text_reserved([",
		"can_optimize(kprobe_many_func_1+0x0) = true",
		"arch_check_optimized_kprobe(kprobe_many_func_1+0x0) = 0: no armed probe in (+0, +6)",
		"do_optimize_kprobes: arch_optimize_kprobes",
		"state    optimized",
		"reason   -",
		"identical under every switch set",
		"safety.jump_label",
	)
}

// The target may come first; flags after it still apply.
func TestExplainRefusedVerify(t *testing.T) {
	args := append([]string{"explain", "kprobe_many_func_2+1", "--verify"}, small...)
	wantExplain(t, args,
		"result   -EILSEQ (-84)",
		"reason   arch_prepare_kprobe: can_probe: +1 is not an instruction boundary: the 6-byte mov at +0 spans it",
		"verified: the same trail, result, state and reason under all",
	)
}

func TestExplainJSON(t *testing.T) {
	out := wantExplain(t, explainArgs("--post", "--format", "json", "kprobe_many_func_0"))
	var v struct {
		Result, State, Check, Detail, Reason string
		Trail                                []struct {
			Depth               int
			Check, Args, Result string
		}
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if v.Result != "0" || v.State != "int3" || v.Check != "optimize_kprobe" || !strings.Contains(v.Detail, "post_handler") || len(v.Trail) < 20 {
		t.Fatalf("%+v", v)
	}
}

func TestExplainBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "missing TARGET"},
		{[]string{"foo+-1"}, "is not a non-negative number"},
		{[]string{"foo+x"}, "is not a non-negative number"},
		{[]string{"0xzz"}, "not a hex address"},
		{[]string{"foo", "--patches", "bogus"}, "--patches"},
		{[]string{"foo", "--format", "xml"}, "--format"},
		{[]string{"foo", "bar"}, "unexpected argument"},
		{[]string{"foo", "--n", "-1"}, "--n"},
	} {
		_, errs, code := runKpsim(append([]string{"explain"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("explain %v: exit %d, stderr %q, want exit 2 and one line with %q", c.args, code, errs, c.want)
		}
	}
}

// An unknown symbol is a per-probe result, not a usage error.
func TestExplainUnknownSymbol(t *testing.T) {
	out, errs, code := runKpsim(explainArgs("no_such_function")...)
	if code != 0 || !strings.Contains(out, `reason   _kprobe_addr: kallsyms_lookup_name: no symbol "no_such_function"`) {
		t.Fatalf("exit %d (%s):\n%s", code, errs, out)
	}
}

// --with registers other probes first: here an optprobe whose jump the
// explained probe lands in, and a refused one.
func TestExplainWith(t *testing.T) {
	wantExplain(t, explainArgs("kprobe_many_func_1+9", "--with", "kprobe_many_func_1+6", "--with", "kprobe_many_func_2+1", "--verify"),
		"kprobe_many_func_1+6: 0, int3, __arm_kprobe: get_optimized_kprobe: unoptimized: a probe was armed at +9 inside its jump [+6, +15)",
		"kprobe_many_func_2+1: -EILSEQ, unregistered, arch_prepare_kprobe: can_probe:",
		"unoptimize_kprobe(kprobe_many_func_1+0x6)",
		"state    optimized",
		"verified:",
	)
	if _, errs, code := runKpsim(explainArgs("kprobe_many_func_1", "--with", "0xnope")...); code != 2 || !strings.Contains(errs, "--with") {
		t.Errorf("bad --with: exit %d, %s", code, errs)
	}
}

// TARGET may be a kprobe_events line; --no-enable leaves the event (and
// its probe) disabled, and says why it is not optimized.
func TestExplainEventLine(t *testing.T) {
	wantExplain(t, explainArgs("--traced", "--via", "kprobe_events", "p:kprobes/f1 kprobe_many_func_1+5"),
		`trace_kprobe_create("p:kprobes/f1 kprobe_many_func_1+5")`,
		"    register_kprobe(symbol_name=\"kprobe_many_func_1\", offset=5, flags=KPROBE_FLAG_DISABLED)",
		"optimize_kprobe(kprobe_many_func_1+0x5) = not queued: the probe is disabled (KPROBE_FLAG_DISABLED)",
		"enable_kprobe(kprobe_many_func_1+0x5)",
		"state    optimized",
	)
	out, errs, code := runKpsim(explainArgs("--traced", "--via", "kprobe_events", "--no-enable", "kprobe_many_func_1+5")...)
	if code != 0 || !strings.Contains(out, "state    disabled") || !strings.Contains(out, "reason   optimize_kprobe: the probe is disabled") {
		t.Fatalf("--no-enable: exit %d (%s):\n%s", code, errs, out)
	}
	if _, errs, code := runKpsim(explainArgs("--via", "kprobe_events", "p:kprobes/x")...); code != 2 || strings.Count(errs, "\n") != 1 {
		t.Errorf("a kprobe_events line without a location: exit %d, %q", code, errs)
	}
}

// FuzzParseExplainTarget: the TARGET parser never panics, accepts only
// what names a probe, and a target it accepts reads back the same.
func FuzzParseExplainTarget(f *testing.F) {
	for _, s := range []string{"vfs_read", "vfs_read+5", "vfs_read+0x1c", "0xffffffff81000000", "foo+", "+5", "0x",
		"p:kprobes/f vfs_read+5", "r vfs_read", "ext4_sync_fs [ext4]", "foo bar baz", "foo+-1", "\x00", "a+99999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := parseExplainTarget(s)
		if err != nil {
			return
		}
		if strings.ContainsAny(s, " \t") {
			// A target-list line ("p 0" is a kprobe_events line the
			// kernel refuses per probe): scenarios' fuzzer checks those.
			return
		}
		if tg.Symbol == "" && tg.Addr == 0 {
			t.Fatalf("%q: accepted with neither symbol nor address: %+v", s, tg)
		}
		tg.Raw = "" // read back from the fields, not the text as given
		again, err := parseExplainTarget(describeTarget(tg))
		if err != nil || again.Symbol != tg.Symbol || again.Offset != tg.Offset || again.Addr != tg.Addr {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, tg, describeTarget(tg), again, err)
		}
	})
}
