package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kpsim/kpsim/image/cache"
)

// TestCacheCommand: list shows every entry least recently used first with
// its kind, size and age; size sums them; clean --older-than removes the
// idle ones, clean --max trims oldest first, clean --all empties it.
func TestCacheCommand(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KPSIM_CACHE_DIR", dir)
	t.Setenv("KPSIM_CACHE_MAX", "")
	now := time.Now()
	for _, e := range []struct {
		kind, name string
		age        time.Duration
	}{{"vmlinux", "v1-old.elf", 10 * 24 * time.Hour}, {"image", "mid", 3 * time.Hour}, {"kallsyms", "new", time.Minute}, {"kernel", "newest", 0}} {
		p := filepath.Join(dir, e.kind, e.name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, make([]byte, 2048), 0o644)
		os.Chtimes(p, now.Add(-e.age), now.Add(-e.age))
	}
	out := mustKpsim(t, "cache", "list")
	if !strings.HasPrefix(out, "cache "+dir+": 4 entries, 8.0 KiB (cap 1.0 GiB") {
		t.Errorf("list header:\n%s", out)
	}
	iv, im, ik := strings.Index(out, "v1-old.elf"), strings.Index(out, "mid"), strings.Index(out, "newest")
	if iv < 0 || im < iv || ik < im || !strings.Contains(out, "10d0h ago") || !strings.Contains(out, "decompressed bzImage") {
		t.Errorf("list (least recently used first, ages, keyed on):\n%s", out)
	}
	var js []map[string]any
	if err := json.Unmarshal([]byte(mustKpsim(t, "cache", "list", "--format", "json")), &js); err != nil || len(js) != 4 || js[0]["kind"] != "vmlinux" || js[0]["bytes"] != 2048.0 {
		t.Errorf("list json: %v %v", js, err)
	}
	if out := mustKpsim(t, "cache", "size"); !strings.Contains(out, "4 entries, 8.0 KiB") {
		t.Errorf("size: %s", out)
	}
	if out := mustKpsim(t, "cache", "clean", "--older-than", "7d"); !strings.Contains(out, "removed 1 files") || !strings.Contains(out, "3 entries") {
		t.Errorf("clean --older-than 7d: %s", out)
	}
	if out := mustKpsim(t, "cache", "clean", "--max", "4K"); !strings.Contains(out, "removed 1 files") || !strings.Contains(out, "2 entries") {
		t.Errorf("clean --max 4K: %s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "image", "mid")); !os.IsNotExist(err) {
		t.Error("clean --max kept the least recently used entry")
	}
	if out := mustKpsim(t, "cache", "clean", "--all"); !strings.Contains(out, "removed 2 files") || !strings.Contains(out, "0 entries, 0 B") {
		t.Errorf("clean --all: %s", out)
	}
	for _, args := range [][]string{{"cache"}, {"cache", "purge"}, {"cache", "clean", "--older-than", "soon"}, {"cache", "clean", "--max", "lots"}, {"cache", "clean", "--all", "--max", "1G"}} {
		if _, errs, code := runKpsim(args...); code != 2 || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
	if es, _ := cache.Entries(); len(es) != 0 {
		t.Errorf("entries left: %v", es)
	}
}
