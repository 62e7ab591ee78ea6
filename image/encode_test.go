package image_test

import (
	"reflect"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
)

func smallKernel(t testing.TB) *image.Kernel {
	t.Helper()
	cfg := synth.DefaultConfig()
	cfg.Functions, cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.StaticCallKeys, cfg.BugEntries = 2000, 800, 100, 300, 50, 400
	cfg.ProbeTargets = 100
	k, _, err := synth.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k.PVOps = []uint64{1, 2, 3}
	k.ReturnSites = []uint64{0xffffffff81000010}
	k.Config.CPU = "test-cpu"
	return k
}

// TestEncodeKernelRoundTrip: decoding the encoding gives a kernel deep-equal
// to the original (every field, nil and empty slices kept apart).
func TestEncodeKernelRoundTrip(t *testing.T) {
	k := smallKernel(t)
	if len(k.Modules) == 0 {
		t.Fatal("want modules in the test image")
	}
	got, err := image.DecodeKernel(image.EncodeKernel(k))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, k) {
		t.Fatal("decoded kernel differs from the original")
	}
	if !reflect.DeepEqual(got.Summarize(), k.Summarize()) {
		t.Fatal("summary differs")
	}
}

// TestKernelFieldsEncoded fails when Kernel or Module gains an exported
// field: the encoder must learn it (and kernelFormat change) first.
// Unexported fields (Kernel's derived store) are simulator state, never
// encoded.
func TestKernelFieldsEncoded(t *testing.T) {
	for _, c := range []struct {
		v any
		n int
	}{{image.Kernel{}, 16}, {image.Module{}, 13}, {image.Region{}, 5}, {image.Symbol{}, 5}, {image.Config{}, 13},
		{image.JumpEntry{}, 5}, {image.StaticCallSite{}, 4}, {image.BugEntry{}, 4}, {image.ExEntry{}, 2}, {image.Range{}, 3}, {image.TraceEvent{}, 2}} {
		n := 0
		for _, f := range reflect.VisibleFields(reflect.TypeOf(c.v)) {
			if f.IsExported() {
				n++
			}
		}
		if n != c.n {
			t.Errorf("%T has %d fields, the encoder knows %d: encode the new field in image/encode.go", c.v, n, c.n)
		}
	}
}

// FuzzDecodeKernel: corrupt or truncated input is an error, never a panic.
func FuzzDecodeKernel(f *testing.F) {
	b := image.EncodeKernel(&image.Kernel{Name: "k", Regions: []*image.Region{{Name: ".text", Start: 0x1000, Bytes: []byte{0xc3}}},
		Symbols: []image.Symbol{{Name: "f", Addr: 0x1000, Size: 1, Type: 'T'}}, Modules: []*image.Module{{Name: "m", TraceEvents: []image.TraceEvent{}}}, Notes: []string{"n"},
		TraceEvents: []image.TraceEvent{{System: "s", Name: "e"}}})
	f.Add(b)
	f.Add(b[:len(b)-3])
	f.Fuzz(func(t *testing.T, b []byte) {
		if k, err := image.DecodeKernel(b); err == nil && k == nil {
			t.Fatal("nil kernel without an error")
		}
	})
}

// The cache's reason to exist: decoding the default image (what a warm
// run does) against generating it (a cold run).
func BenchmarkGenerateDefault(b *testing.B) {
	cfg := synth.DefaultConfig()
	cfg.ProbeTargets = 50000
	for i := 0; i < b.N; i++ {
		if _, _, err := synth.Generate(cfg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeKernelDefault(b *testing.B) {
	cfg := synth.DefaultConfig()
	cfg.ProbeTargets = 50000
	k, _, err := synth.Generate(cfg)
	if err != nil {
		b.Fatal(err)
	}
	enc := image.EncodeKernel(k)
	b.SetBytes(int64(len(enc)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := image.DecodeKernel(enc); err != nil {
			b.Fatal(err)
		}
	}
}
