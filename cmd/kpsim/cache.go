package main

import (
	"encoding/binary"
	"fmt"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/cache"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/machine"
)

// The image cache (package image/cache): generating the synthetic image
// and building its kallsyms tables are most of a default run's set-up;
// both are pure functions of their inputs, so they are kept under the
// cache root (image/ and kallsyms/) keyed by those inputs and the kpsim
// build, and read back instead. --no-cache and KPSIM_NO_CACHE=1 bypass
// it.

// A cache entry's temporary file goes with the outputs' on SIGINT and
// SIGTERM.
func init() { cache.TempHook = trackTempFile }

// generateCached is synth.Generate through the cache: the key is every
// field of the generator's configuration. A hit returns no Truth (no
// command reads it).
func generateCached(cfg synth.Config, noCache bool) (*image.Kernel, *synth.Truth, error) {
	if !cache.Usable(noCache) {
		return synth.Generate(cfg)
	}
	key := cache.Key("synthetic-image", []byte(fmt.Sprintf("%#v", cfg)))
	if b, ok := cache.Get("image", key); ok {
		if k, err := image.DecodeKernel(b); err == nil {
			return k, nil, nil
		}
	}
	k, truth, err := synth.Generate(cfg)
	if err != nil {
		return nil, nil, err
	}
	cache.Put("image", key, image.EncodeKernel(k))
	return k, truth, nil
}

// kallsymsCached makes machine.KallsymsTables(k) answer from the cache:
// the key is the symbol list scripts/kallsyms would read (address, type,
// name, in order) and the build options, so a generated and a loaded
// kernel share the scheme. A miss builds the tables and stores them.
func kallsymsCached(k *image.Kernel, noCache bool) error {
	if !cache.Usable(noCache) {
		return nil // machine.KallsymsTables builds them when first asked
	}
	syms := machine.SymbolsOf(k)
	in := make([]byte, 0, 32*len(syms))
	for _, s := range syms {
		in = binary.LittleEndian.AppendUint64(in, s.Addr)
		in = append(in, s.Type)
		in = binary.AppendUvarint(in, uint64(len(s.Name)))
		in = append(in, s.Name...)
	}
	key := cache.Key("kallsyms-tables", in, []byte(fmt.Sprintf("%#v", machine.KallsymsBuildOptions(k))))
	if b, ok := cache.Get("kallsyms", key); ok {
		if t, err := ktab.DecodeTables(b); err == nil {
			machine.UseKallsymsTables(k, t)
			return nil
		}
	}
	t, err := machine.KallsymsTables(k)
	if err != nil {
		return err
	}
	cache.Put("kallsyms", key, ktab.EncodeTables(t))
	return nil
}
