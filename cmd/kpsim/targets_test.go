package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/scenarios"
)

type targetsJSON struct {
	Targets []probeTarget  `json:"targets"`
	Summary targetsSummary `json:"summary"`
}

func targetsOf(t *testing.T, args ...string) targetsJSON {
	t.Helper()
	out := mustKpsim(t, append(append([]string{"targets", "--format", "json"}, small...), args...)...)
	var j targetsJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return j
}

// TestTargets: globs, each filter and --module select what they say, and
// the summary counts the rows.
func TestTargets(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		ok   func(probeTarget) bool
	}{
		{"glob", []string{"vfs_*"}, func(p probeTarget) bool { return strings.HasPrefix(p.Name, "vfs_") }},
		{"two globs, flags between", []string{"vfs_*", "--module", "vmlinux", "ext4_?lloc*"}, func(p probeTarget) bool {
			return p.Module == "vmlinux" && (strings.HasPrefix(p.Name, "vfs_") || strings.HasPrefix(p.Name, "ext4_") && strings.Contains(p.Name, "lloc"))
		}},
		{"traceable", []string{"--traceable"}, func(p probeTarget) bool { return p.Traceable }},
		{"notrace", []string{"--notrace"}, func(p probeTarget) bool { return p.Notrace }},
		{"blacklisted", []string{"--blacklisted", "*"}, func(p probeTarget) bool { return p.Blacklisted && p.Blacklist != "" }},
		{"module", []string{"--module", "nf_tables"}, func(p probeTarget) bool { return p.Module == "nf_tables" }},
		{"after --", []string{"--", "kvm_*"}, func(p probeTarget) bool { return strings.HasPrefix(p.Name, "kvm_") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := targetsOf(t, tc.args...)
			if len(j.Targets) == 0 || j.Summary.Matched != len(j.Targets) {
				t.Fatalf("%d targets, summary %+v", len(j.Targets), j.Summary)
			}
			for _, p := range j.Targets {
				if !tc.ok(p) {
					t.Fatalf("%+v does not belong", p)
				}
			}
		})
	}
}

// TestTargetsFollowTheModel: traceable is what available_filter_functions
// lists on the booted image; the blacklist names every part of
// populate_kprobe_blacklist the image has; the table ends in the count line.
func TestTargetsFollowTheModel(t *testing.T) {
	j := targetsOf(t)
	k, _, err := synth.Generate(configFromFlags(t, small))
	if err != nil {
		t.Fatal(err)
	}
	m, err := scenarios.Boot(k, 0, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, tt := range scenarios.TraceableTargets(m) {
		listed[tt.Symbol] = true
	}
	sym := func(p probeTarget) string {
		if p.Module != "vmlinux" {
			return p.Module + ":" + p.Name
		}
		return p.Name
	}
	seen := map[string]int{}
	for _, p := range j.Targets {
		seen[sym(p)]++
	}
	reasons := map[string]bool{}
	for _, p := range j.Targets {
		sym := sym(p)
		// A name several functions share (static do_work in many files) is
		// listed once per record: the list cannot say which one.
		if p.Traceable != listed[sym] && seen[sym] == 1 {
			t.Errorf("%s: traceable %v, available_filter_functions lists it: %v", sym, p.Traceable, listed[sym])
		}
		if p.Traceable && p.Notrace {
			t.Errorf("%s: traceable and notrace", sym)
		}
		reasons[p.Blacklist] = true
	}
	for _, want := range []string{"(NOKPROBE_SYMBOL)", "(.noinstr.text)", "(.kprobes.text)", "(entry text)", "(NOKPROBE_SYMBOL in module nf_tables)"} {
		if !reasons[want] {
			t.Errorf("no function blacklisted for %s (reasons %v)", want, reasons)
		}
	}
	out := mustKpsim(t, append([]string{"targets", "vfs_*"}, small...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "function") || !strings.Contains(lines[len(lines)-1], " matched: ") || len(lines) < 3 {
		t.Fatalf("table:\n%s", out)
	}
}

func TestTargetsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--traceable", "--notrace"}, "mutually exclusive"},
		{[]string{"--blacklisted", "vfs_*", "--traceable"}, "mutually exclusive"},
		{[]string{"--module", "nosuch"}, "--module nosuch: no such module"},
		{[]string{"--format", "csv"}, "--format"},
		{[]string{""}, "empty GLOB"},
	} {
		_, errs, code := runKpsim(append([]string{"targets", "--functions", "600", "--modules", "1"}, tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q, want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestTargetsRealKernel: on the Debian 6.1 kernel with kvm and kvm-intel
// loaded, module functions are listed as [module], kvm-intel's noinstr
// text is blacklisted and named, and vfs_read is traceable.
func TestTargetsRealKernel(t *testing.T) {
	const k = "../../.cache/kernels/vmlinuz-6.1.0-57-amd64"
	cachedKernel(t)
	out := mustKpsim(t, "targets", "--kernel", k, "--modules", "kvm,kvm-intel", "vfs_read", "vmx_vcpu_enter_exit", "kvm_set_msr")
	for _, want := range []string{
		"vfs_read             vmlinux      yes        -        -",
		"vmx_vcpu_enter_exit  [kvm_intel]  -          yes      yes (.noinstr.text of module kvm_intel)",
		"kvm_set_msr          [kvm]        yes        -        -",
		"3 matched: 2 traceable, 1 blacklisted, 1 notrace",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
