package libbpf_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/bpf"
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/libbpf"
	"github.com/kpsim/kpsim/sim"
)

var _ libbpf.Sys = (*bpf.System)(nil)

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		str, pat string
		want     bool
	}{
		{"vfs_read", "vfs_read", true},
		{"vfs_read", "vfs_*", true},
		{"vfs_read", "*read", true},
		{"vfs_read", "v?s_read", true},
		{"vfs_read", "vfs_", false},
		{"vfs_read", "*", true},
		{"", "*", true},
		{"", "", true},
		{"a", "", false},
		{"vfs_readv", "vfs_read", false},
		{"abcabc", "*bc*bc", true},
		{"abc", "a**c", true},
		{"abc", "a?", false},
	} {
		if got, _ := libbpf.GlobMatch(tc.str, tc.pat); got != tc.want {
			t.Errorf("glob_match(%q, %q) = %v, want %v", tc.str, tc.pat, got, tc.want)
		}
	}
}

func TestParseSec(t *testing.T) {
	for _, tc := range []struct {
		sec    string
		kind   libbpf.SecKind
		target string
		off    int64
		auto   bool
		err    bool
	}{
		{"kprobe/vfs_read", libbpf.SecKprobe, "vfs_read", 0, true, false},
		{"kprobe/vfs_read+0x10", libbpf.SecKprobe, "vfs_read", 16, true, false},
		{"kprobe/vfs_read+010", libbpf.SecKprobe, "vfs_read", 8, true, false},
		{"kprobe/foo.isra.0", libbpf.SecKprobe, "foo.isra.0", 0, true, false},
		{"kprobe/vfs_read+-1", libbpf.SecKprobe, "", 0, true, true},
		{"kretprobe/vfs_read+4", libbpf.SecKretprobe, "", 0, true, true},
		{"kretprobe/vfs_read", libbpf.SecKretprobe, "vfs_read", 0, true, false},
		{"kprobe", libbpf.SecKprobe, "", 0, false, false},
		{"kprobe/", libbpf.SecKprobe, "", 0, true, true},
		{"kprobe.multi/vfs_*", libbpf.SecKprobeMulti, "vfs_*", 0, true, false},
		{"kretprobe.multi/v?s_read", libbpf.SecKretprobeMulti, "v?s_read", 0, true, false},
		{"kprobe.session/vfs_read", libbpf.SecKprobeSession, "vfs_read", 0, true, false},
		{"kprobe.session/vfs_read:x", libbpf.SecKprobeSession, "vfs_read", 0, true, false},
		{"kprobe.session/", libbpf.SecKprobeSession, "", 0, true, true},
		{"kprobe.session/-x", libbpf.SecKprobeSession, "", 0, true, true},
		{"kprobes/vfs_read", 0, "", 0, false, true},
		{"fentry/vfs_read", 0, "", 0, false, true},
	} {
		s, err := libbpf.ParseSec(nil, tc.sec)
		if (err != nil) != tc.err {
			t.Errorf("ParseSec(%q) error %v, want error %v", tc.sec, err, tc.err)
			continue
		}
		if err != nil {
			if !errors.Is(err, errno.EINVAL) {
				t.Errorf("ParseSec(%q) = %v, want -EINVAL", tc.sec, err)
			}
			continue
		}
		if s.Kind != tc.kind || s.Target != tc.target || s.Offset != tc.off || s.AutoAttach != tc.auto {
			t.Errorf("ParseSec(%q) = %+v", tc.sec, s)
		}
	}
}

func FuzzParseSec(f *testing.F) {
	for _, s := range []string{"kprobe/vfs_read+0x10", "kprobe.session/vfs_*", "kretprobe/x+", "kprobe.multi/", "kprobe/a+0x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sec, err := libbpf.ParseSec(nil, s)
		if err != nil {
			if !errors.Is(err, errno.EINVAL) {
				t.Fatalf("ParseSec(%q): %v is not -EINVAL", s, err)
			}
			return
		}
		if sec.AutoAttach && sec.Target == "" {
			t.Fatalf("ParseSec(%q): auto-attach without a target", s)
		}
		if sec.Offset < 0 {
			t.Fatalf("ParseSec(%q): negative offset accepted", s)
		}
	})
}

func FuzzGlobMatch(f *testing.F) {
	f.Add("vfs_read", "vfs_*")
	f.Add("abc", "a?c")
	f.Fuzz(func(t *testing.T, s, p string) {
		if len(s) > 64 || len(p) > 16 {
			return
		}
		m, _ := libbpf.GlobMatch(s, p)
		if p == s && !m {
			t.Fatalf("glob_match(%q, %q) false for an identical wildcard-free pattern", s, p)
		}
		if p == "*" && !m {
			t.Fatalf("'*' must match %q", s)
		}
	})
}

// fakeSys serves fixed file contents (the fuzzers' input).
type fakeSys struct {
	addrs, funcs, kallsyms string
	hasAddrs               bool
}

func (f *fakeSys) Access(_ *sim.Counters, p string) bool {
	return p != libbpf.AvailableFilterFunctionsAddrs || f.hasAddrs
}

func (f *fakeSys) ReadFile(_ *sim.Counters, p string, fn func([]byte)) error {
	var s string
	switch p {
	case libbpf.AvailableFilterFunctionsAddrs:
		s = f.addrs
	case libbpf.AvailableFilterFunctions:
		s = f.funcs
	case libbpf.ProcKallsyms:
		s = f.kallsyms
	}
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			fn([]byte(l))
		}
	}
	return nil
}

func (f *fakeSys) LinkCreateKprobeMulti(_ *sim.Counters, _ *bpf.Prog, a bpf.KprobeMultiAttr) (int, error) {
	if int(a.Cnt) != len(a.Addrs)+len(a.Syms) {
		return -1, errno.EFAULT
	}
	return 3, nil
}

func (f *fakeSys) PerfEventOpenKprobe(*sim.Counters, int, string, uint64, bool) (int, error) {
	return -1, errno.ENOENT
}

func (f *fakeSys) LinkCreatePerfEvent(*sim.Counters, *bpf.Prog, int) (int, error) {
	return -1, errno.EINVAL
}

// FuzzFileParsing feeds arbitrary file contents to both pattern paths:
// the result is a link over the matches, -ENOENT or -EINVAL, never a panic.
func FuzzFileParsing(f *testing.F) {
	f.Add("ffffffff81000000 vfs_read\n", "vfs_read\n", "ffffffff81000000 T vfs_read\n", "vfs_*", true)
	f.Add("zz vfs_read\n", "vfs_read [mod]\n", "ffffffff81000000 T\n", "*", false)
	f.Fuzz(func(t *testing.T, addrs, funcs, ks, pat string, hasAddrs bool) {
		l := &libbpf.Lib{Sys: &fakeSys{addrs, funcs, ks, hasAddrs}}
		link, err := l.AttachKprobeMultiOpts(sim.NewCounters(false), &bpf.Prog{Name: "f"}, pat, true, libbpf.KprobeMultiOpts{})
		switch {
		case err == nil:
			if link.Cnt == 0 {
				t.Fatal("a link over nothing")
			}
		case err == errno.ENOENT, err == errno.EINVAL:
		default:
			t.Fatalf("unexpected %v", err)
		}
	})
}

func TestPatternPaths(t *testing.T) {
	s := &fakeSys{
		addrs:    "ffffffff81000004 vfs_read\nffffffff81000104 vfs_write\nffffffff81000204 tcp_x [mod]\n",
		funcs:    "vfs_read\nvfs_write\nfoo\n",
		kallsyms: "ffffffff81000000 T vfs_read\nffffffff81000100 T vfs_write\nffffffff81000180 t foo.llvm.123\nffffffff81000200 t bar\n",
	}
	c := sim.NewCounters(false)
	for _, tc := range []struct {
		has  bool
		pat  string
		cnt  int
		path string
		err  error
	}{
		{true, "vfs_*", 2, "filter-addrs", nil},
		{true, "tcp_?", 1, "filter-addrs", nil},
		{true, "nope*", 0, "", errno.ENOENT},
		{false, "vfs_*", 2, "filter+kallsyms", nil},
		{false, "foo*", 1, "filter+kallsyms", nil}, // the .llvm. retry
		{false, "bar", 0, "", errno.ENOENT},        // in kallsyms, not traceable
	} {
		s.hasAddrs = tc.has
		l := &libbpf.Lib{Sys: s}
		link, err := l.AttachKprobeMultiOpts(c, &bpf.Prog{}, tc.pat, true, libbpf.KprobeMultiOpts{})
		if err != tc.err || err == nil && (link.Cnt != tc.cnt || link.Path != tc.path) {
			t.Errorf("%v %q: %+v %v", tc.has, tc.pat, link, err)
		}
	}
	if c.Total(libbpf.OpFscanfKallsyms) == 0 || c.Total(libbpf.OpFscanfAddrName) == 0 || c.Total(libbpf.OpQsortCmp) == 0 {
		t.Errorf("parse ops not counted: %s", c)
	}
	// Option checks.
	l := &libbpf.Lib{Sys: s, ExactSyms: true}
	s.hasAddrs = true
	for _, tc := range []struct {
		pat string
		o   libbpf.KprobeMultiOpts
	}{
		{"vfs_read", libbpf.KprobeMultiOpts{Retprobe: true, Session: true}},
		{"vfs_read", libbpf.KprobeMultiOpts{Cnt: 1}},
		{"vfs_*", libbpf.KprobeMultiOpts{UniqueMatch: true}}, // two matches
	} {
		if _, err := l.AttachKprobeMultiOpts(c, &bpf.Prog{}, tc.pat, true, tc.o); err != errno.EINVAL {
			t.Errorf("%q %+v: %v, want -EINVAL", tc.pat, tc.o, err)
		}
	}
	// unique_match skips the exact path: one match is fine.
	if link, err := l.AttachKprobeMultiOpts(c, &bpf.Prog{}, "vfs_read", true, libbpf.KprobeMultiOpts{UniqueMatch: true}); err != nil || link.Path != "filter-addrs" {
		t.Errorf("unique_match on one match: %+v %v", link, err)
	}
	if _, err := l.AttachKprobeMultiOpts(c, &bpf.Prog{}, "", false, libbpf.KprobeMultiOpts{}); err != errno.EINVAL {
		t.Errorf("no pattern, addrs or syms: %v", err)
	}
}
