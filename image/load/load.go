// Package load opens a kernel for kpsim from a file, whatever its form: a
// bzImage (vmlinuz), a vmlinux ELF (full or stripped), detected from the
// file's magic. Every error names the file and the problem.
//
// The kernel it returns is the kernel as it runs: the text went through
// the boot-time patching of alternative_instructions (paravirt,
// retpolines, returns, alternatives) for a CPU, alternative.DefaultCPU
// unless Options say otherwise, exactly as the kpsim CLI does for
// --kernel (which passes its --cpu here). Kernel.Config.CPU names it.
package load

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"sort"
	"strings"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/bzimage"
	"github.com/kpsim/kpsim/image/cache"
	"github.com/kpsim/kpsim/image/elfload"
	"github.com/kpsim/kpsim/image/kconfig"
	"github.com/kpsim/kpsim/internal/input"
)

// Kind is a detected file type.
type Kind int

const (
	Unknown Kind = iota
	ELF
	BzImage
)

func (k Kind) String() string { return [...]string{"unknown", "ELF", "bzImage"}[k] }

// Detect tells the file type from its first bytes.
func Detect(b []byte) Kind {
	switch {
	case bytes.HasPrefix(b, []byte("\x7fELF")):
		return ELF
	case bzimage.IsBzImage(b):
		return BzImage
	}
	return Unknown
}

// Options choose how a kernel is booted.
type Options struct {
	// CPU names the boot CPU whose boot-time patching the text goes
	// through (alternative.CPUNames); "" is alternative.DefaultCPU and
	// alternative.CPUNone keeps the text as built.
	CPU string
	// Record keeps every patched site's before/after bytes (Booted).
	Record bool
	// Gen loads the image as this generation (--kernel-version) instead
	// of its linux_banner's.
	Gen image.Generation
	// KConfigOverride holds --kconfig's options, which outrank the
	// kernel's own config.
	KConfigOverride *kconfig.Config
	// NoConfigBeside ignores a config file beside the image (tests that
	// want the facts the image alone shows).
	NoConfigBeside bool
	// NoCache skips the caches of loaded kernels and decompressed
	// vmlinux files (also KPSIM_NO_CACHE=1).
	NoCache bool
}

// Result is a loaded kernel and what booting it did (Booted is nil for
// CPUNone, and when the kernel came from the cache of loaded kernels,
// which Record bypasses).
type Result struct {
	Kernel *image.Kernel
	Booted *elfload.Booted
}

// cpu resolves o.CPU; nil for CPUNone.
func (o Options) cpu() (*alternative.CPU, error) {
	name := o.CPU
	if name == "" {
		name = alternative.DefaultCPU
	}
	if name == alternative.CPUNone {
		return nil, nil
	}
	return alternative.LookupCPU(name)
}

// Open reads path and loads the kernel it holds, booted for
// alternative.DefaultCPU.
func Open(path string) (*image.Kernel, error) {
	r, err := OpenWith(path, Options{})
	if err != nil {
		return nil, err
	}
	return r.Kernel, nil
}

// OpenWith reads path and loads the kernel it holds, booted as o says.
func OpenWith(path string, o Options) (*Result, error) {
	b, err := input.ReadFile(path, input.MaxKernel)
	if err != nil {
		return nil, err
	}
	return openBytes(path, b, o)
}

// openBytes is BytesWith with the config file Debian installs beside
// the image at path (config-KVER, found for the image's own release).
func openBytes(path string, b []byte, o Options) (*Result, error) {
	var kc *kconfig.Config
	if !o.NoConfigBeside {
		if cp := kconfig.Beside(path, Release(b)); cp != "" {
			c, err := kconfig.ReadFile(cp)
			if err != nil {
				return nil, fmt.Errorf("%s: config beside it: %v", path, err)
			}
			kc = c
		}
	}
	return bytesWithConfig(path, b, o, kc)
}

// Release is the kernel release an image names: the bzImage header's
// kernel_version, else the first linux_banner in the bytes; "" when
// neither is there.
func Release(b []byte) string {
	if bzimage.IsBzImage(b) {
		if in, err := bzimage.ParseSetupHeader(b); err == nil && in.Version != "" {
			v, _, _ := strings.Cut(in.Version, " ")
			return v
		}
		return ""
	}
	const banner = "Linux version "
	i := bytes.Index(b, []byte(banner))
	if i < 0 {
		return ""
	}
	rest := b[i+len(banner):]
	e := bytes.IndexAny(rest, " \x00")
	if e < 0 || e > 128 {
		return ""
	}
	return string(rest[:e])
}

// Bytes loads the kernel in b, read from the file called name, booted for
// alternative.DefaultCPU. b is not modified.
func Bytes(name string, b []byte) (*image.Kernel, error) {
	r, err := BytesWith(name, b, Options{})
	if err != nil {
		return nil, err
	}
	return r.Kernel, nil
}

// BytesWith loads the kernel in b, booted as o says. b is not modified.
//
// Loading (decompressing, parsing the ELF and its tables, booting the
// text for the CPU) is a pure function of b, name and the CPU, so the
// loaded kernel is kept in the cache's kernel/ directory (package
// image/cache: keyed by b's SHA-256, name, the CPU and the kpsim build)
// and read back on the next load; Record, which wants every patched
// site, always loads afresh.
func BytesWith(name string, b []byte, o Options) (*Result, error) {
	return bytesWithConfig(name, b, o, nil)
}

// bytesWithConfig is BytesWith with the kernel's config file kc (nil
// when none was found).
func bytesWithConfig(name string, b []byte, o Options, kc *kconfig.Config) (*Result, error) {
	cpu, err := o.cpu()
	if err != nil {
		return nil, err
	}
	if o.Record || !cache.Usable(o.NoCache) || Detect(b) == Unknown {
		return bytesWith(name, b, o, cpu, kc)
	}
	sum := sha256.Sum256(b)
	cpuName := alternative.CPUNone
	if cpu != nil {
		// Every feature and bug bit, so that a host CPU
		// whose /proc/cpuinfo changed is a different key.
		cpuName = cpu.Name + "\x00" + fmt.Sprint(cpu.Features.List())
	}
	key := cache.Key("loaded-kernel", sum[:], []byte(name), []byte(cpuName), []byte(o.Gen.String()), configKey(kc), configKey(o.KConfigOverride))
	if e, ok := cache.Get("kernel", key); ok {
		if k, err := image.DecodeKernel(e); err == nil {
			return &Result{Kernel: k}, nil
		}
	}
	r, err := bytesWith(name, b, o, cpu, kc)
	if err != nil {
		return nil, err
	}
	cache.Put("kernel", key, image.EncodeKernel(r.Kernel))
	return r, nil
}

// configKey is a config's part of the cache key: its source and options
// in a fixed order.
func configKey(c *kconfig.Config) []byte {
	if c == nil {
		return nil
	}
	keys := make([]string, 0, len(c.Opts))
	for k := range c.Opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	b.WriteString(c.From)
	for _, k := range keys {
		fmt.Fprintf(&b, "\n%s=%s", k, c.Opts[k])
	}
	return b.Bytes()
}

func bytesWith(name string, b []byte, o Options, cpu *alternative.CPU, kc *kconfig.Config) (*Result, error) {
	eo := elfload.Options{CPU: cpu, Record: o.Record, Gen: o.Gen, KConfig: kc, KConfigOverride: o.KConfigOverride}
	switch Detect(b) {
	case ELF:
		k, bt, err := elfload.LoadWith(name, b, eo)
		if err != nil {
			return nil, err
		}
		return &Result{k, bt}, nil
	case BzImage:
		vmlinux, err := decompressCached(name, b, o.NoCache)
		if err != nil {
			return nil, err
		}
		eo.Owned = true // the decompressed vmlinux is ours to patch
		k, bt, err := elfload.LoadWith(name, vmlinux, eo)
		if err != nil {
			return nil, err
		}
		return &Result{k, bt}, nil
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%s: empty file", name)
	}
	return nil, fmt.Errorf("%s: not a kernel image (neither a bzImage nor an ELF; symbol files go to --symbols)", name)
}
