package elfload

import (
	"bytes"
	"crypto/sha256"
	"testing"

	"github.com/kpsim/kpsim/alternative"
)

// TestLoadWithLeavesInputAlone: booting patches a private copy (the
// caller's bytes and an as-built Load of them stay as built), reports the
// CPU, and changes the text at the patched sites only.
func TestLoadWithLeavesInputAlone(t *testing.T) {
	k0, _ := loadDebian(t)
	data := debian.data
	before := sha256.Sum256(data)
	cpu, _ := alternative.LookupCPU(alternative.DefaultCPU)
	k, bt, err := LoadWith("vmlinux", data, Options{CPU: cpu, Record: true})
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(data) != before {
		t.Fatal("LoadWith modified the caller's data")
	}
	if k.Config.CPU != cpu.Name || !k.Config.ReturnsPatched || len(k.PVOps) != 84 || k0.Config.CPU != "" {
		t.Fatalf("booted config %+v (%d pv_ops slots), as built %+v", k.Config, len(k.PVOps), k0.Config)
	}
	// Every byte that differs from the as-built text lies in a recorded site.
	inSite := map[uint64]bool{}
	for _, s := range bt.Sites {
		for i := range s.After {
			inSite[s.Addr+uint64(i)] = true
		}
	}
	diff := 0
	for i, r := range k.Regions {
		r0 := k0.Regions[i]
		if r.Start != r0.Start || len(r.Bytes) != len(r0.Bytes) {
			t.Fatalf("region %s moved", r.Name)
		}
		if bytes.Equal(r.Bytes, r0.Bytes) {
			continue
		}
		for j := range r.Bytes {
			if r.Bytes[j] != r0.Bytes[j] {
				diff++
				if !inSite[r.Start+uint64(j)] {
					t.Fatalf("%#x changed outside every patched site", r.Start+uint64(j))
				}
			}
		}
	}
	if diff == 0 {
		t.Fatal("boot patching changed nothing")
	}
	t.Logf("%d text bytes changed at %d site visits", diff, len(bt.Sites))
}
