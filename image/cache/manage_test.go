package cache

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestTrimLeastRecentlyUsedFirst: a write past the cap removes the entries
// used longest ago, never the one just written; a hit counts as a use; a
// temporary file is kept until it is StaleTemp old.
func TestTrimLeastRecentlyUsedFirst(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KPSIM_CACHE_DIR", dir)
	t.Setenv("KPSIM_CACHE_MAX", "3K")
	payload := bytes.Repeat([]byte("x"), 1000) // 1020 bytes with the trailer
	now := time.Now()
	put := func(kind, name string, age time.Duration) string {
		Put(kind, name, payload)
		p := filepath.Join(dir, kind, name)
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := put("image", "a", 3*time.Hour)
	b := put("kallsyms", "b", 2*time.Hour)
	c := put("image", "c", time.Hour)
	fresh := filepath.Join(dir, "image", ".tmp-live")
	stale := filepath.Join(dir, "image", ".tmp-dead")
	os.WriteFile(fresh, payload[:10], 0o644)
	os.WriteFile(stale, payload[:10], 0o644)
	os.Chtimes(stale, now.Add(-2*StaleTemp), now.Add(-2*StaleTemp))
	if _, ok := Get("image", "a"); !ok { // a is now the most recently used
		t.Fatal("a missing before the cap was reached")
	}
	d := put("kernel", "d", 0)
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if exists(b) || !exists(a) || !exists(c) || !exists(d) {
		t.Errorf("after d: a %v b %v c %v d %v; want b (least recently used) gone only", exists(a), exists(b), exists(c), exists(d))
	}
	if !exists(fresh) || exists(stale) {
		t.Errorf("temporary files: live %v (want kept), dead %v (want removed)", exists(fresh), exists(stale))
	}
	es, err := Entries()
	if err != nil {
		t.Fatal(err)
	}
	if tot := Total(es); tot > 3<<10 {
		t.Errorf("cache holds %d bytes, cap 3072", tot)
	}
	if es[len(es)-1].Path != a && es[len(es)-1].Path != d {
		t.Errorf("most recently used last: got %s", es[len(es)-1].Path)
	}
	// An entry larger than the cap is kept (it was just written).
	t.Setenv("KPSIM_CACHE_MAX", "100")
	Put("image", "big", payload)
	if !exists(filepath.Join(dir, "image", "big")) || exists(a) || exists(c) || exists(d) {
		t.Error("cap 100: want only the entry just written left")
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "4096": 4096, "3K": 3 << 10, "1.5M": 3 << 19, "2GiB": 2 << 30, "1gb": 1 << 30, "10B": 10, "1T": 1 << 40} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("%s: %d %v, want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1Q"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
