package main

import (
	"os"
	"strings"
	"testing"
)

// TestCPUFlagErrors: an unknown --cpu, and a --returns-patched that
// contradicts the CPU, are one-line usage errors (exit 2).
func TestCPUFlagErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"image", "--cpu", "pentium"}, `unknown CPU "pentium"`},
		{[]string{"image", "--cpu", "genoa", "--returns-patched=true"}, "contradicts --cpu genoa"},
		{[]string{"image", "--cpu", "sapphire-rapids", "--returns-patched=false"}, "contradicts --cpu sapphire-rapids"},
	}
	for _, c := range cases {
		_, errs, code := runKpsim(append(c.args, small...)...)
		if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, code, errs, c.want)
		}
	}
}

// TestCPUFlagSynthetic: --cpu on a synthetic image decides the returns
// and is named in the image report.
func TestCPUFlagSynthetic(t *testing.T) {
	for cpu, patched := range map[string]string{"genoa": "returns_patched=false", "sapphire-rapids": "returns_patched=true"} {
		out := mustKpsim(t, append([]string{"image", "--cpu", cpu}, small...)...)
		if !strings.Contains(out, "boot CPU: "+cpu) || !strings.Contains(out, patched) {
			t.Errorf("--cpu %s: report lacks the CPU or %s:\n%s", cpu, patched, out)
		}
	}
	out, _, _ := runKpsim(append([]string{"image"}, small...)...)
	if !strings.Contains(out, "boot CPU: none") {
		t.Errorf("synthetic default: want boot CPU none:\n%s", out)
	}
}

// TestCPUFlagKernel: with --kernel the CPU is the default unless told,
// and --returns-patched must agree with it.
func TestCPUFlagKernel(t *testing.T) {
	cachedKernel(t)
	const k = "../../.cache/kernels/vmlinuz-6.1.0-57-amd64"
	out, errs, code := runKpsim("image", "--kernel", k)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"boot CPU: sapphire-rapids", "returns_patched=true", "paravirt 3848 sites (3763 direct calls, 85 nops"} {
		if !strings.Contains(out, want) {
			t.Errorf("default: report lacks %q", want)
		}
	}
	_, errs, code = runKpsim("image", "--kernel", k, "--returns-patched=false")
	if code != 2 || !strings.Contains(errs, "--cpu sapphire-rapids patches the returns to ret; int3") {
		t.Errorf("--returns-patched=false with the default CPU: exit %d, %q", code, errs)
	}
	out, errs, code = runKpsim("image", "--kernel", k, "--cpu", "none", "--returns-patched=false")
	if code != 0 || !strings.Contains(out, "boot CPU: none") || !strings.Contains(out, "text is as built") {
		t.Errorf("--cpu none: exit %d, %s\n%s", code, errs, out)
	}
}

// TestBootSites: --boot-sites lists every site boot patching visited.
func TestBootSites(t *testing.T) {
	_, errs, code := runKpsim(append([]string{"image", "--boot-sites", t.TempDir() + "/s.tsv"}, small...)...)
	if code != 2 || !strings.Contains(errs, "needs --kernel") {
		t.Errorf("synthetic: exit %d, %q", code, errs)
	}
	cachedKernel(t)
	p := t.TempDir() + "/sites.tsv"
	_, errs, code = runKpsim("image", "--kernel", "../../.cache/kernels/vmlinuz-6.1.0-57-amd64", "--cpu", "genoa", "--boot-sites", p)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	// 3848 pv + 8823 retpoline + 50858 return (26 trampolines) + 4667 alternatives, 2 header lines.
	if len(lines) != 2+3848+8823+50858+4667 || !strings.HasPrefix(lines[0], "# boot CPU genoa") {
		t.Fatalf("%d lines, first %q", len(lines), lines[0])
	}
	if !strings.Contains(string(b), "return\t") || !strings.Contains(string(b), "\tthunk\t") {
		t.Error("genoa: no return site patched to jmp the return thunk")
	}
}
