package cache

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestPutGet: an entry comes back byte for byte; a corrupt or truncated
// one is ignored, and Put rewrites it; nothing is left behind but the
// entry.
func TestPutGet(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KPSIM_CACHE_DIR", dir)
	t.Setenv("KPSIM_NO_CACHE", "")
	if !Usable(false) || Usable(true) {
		t.Fatal("Usable")
	}
	k := Key("test", []byte("a"), []byte("b"))
	if k == Key("test", []byte("ab")) || k == Key("test2", []byte("a"), []byte("b")) || k != Key("test", []byte("a"), []byte("b")) {
		t.Fatal("keys do not separate their inputs")
	}
	if _, ok := Get("kind", k); ok {
		t.Fatal("hit in an empty cache")
	}
	want := bytes.Repeat([]byte("payload"), 1000)
	Put("kind", k, want)
	got, ok := Get("kind", k)
	if !ok || !bytes.Equal(got, want) {
		t.Fatal("entry not read back")
	}
	path := filepath.Join(dir, "kind", k)
	b, _ := os.ReadFile(path)
	for _, bad := range [][]byte{b[:len(b)-1], append([]byte("x"), b[1:]...), b[:10]} {
		os.WriteFile(path, bad, 0o644)
		if _, ok := Get("kind", k); ok {
			t.Fatal("a corrupt entry was used")
		}
	}
	Put("kind", k, want)
	if got, ok := Get("kind", k); !ok || !bytes.Equal(got, want) {
		t.Fatal("corrupt entry not rewritten")
	}
	if e, _ := filepath.Glob(filepath.Join(dir, "kind", "*")); len(e) != 1 {
		t.Fatalf("files left: %v", e)
	}
	t.Setenv("KPSIM_NO_CACHE", "1")
	if Usable(false) {
		t.Fatal("KPSIM_NO_CACHE=1 ignored")
	}
}

// TestBuildID: the test binary has a Go build ID, and it keys the entries.
func TestBuildID(t *testing.T) {
	if id := BuildID(); len(id) < 10 {
		t.Fatalf("build ID %q", id)
	}
}
