package libbpf_test

import (
	"errors"
	"testing"

	"github.com/kpsim/kpsim/bpf"
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/libbpf"
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
