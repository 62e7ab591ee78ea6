package soak

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/kprobes"
)

// ImageConfig is the soak's kernel: a small synthetic image (boot in a few
// milliseconds, so every campaign boots fresh machines) that still has
// every class of awkward target: jump-label, static-call and bug sites,
// NOKPROBE symbols, entry and noinstr zones, init text, modules, duplicate
// names, traced and untraced functions, and the batch sample's small
// functions that optimize. Its generation is the series base, 7.3: every
// switch must keep 7.3's decisions (on 6.1 ftrace-single-lookup does not,
// by design of the backport: sim.Applicability.Decision).
func ImageConfig() synth.Config {
	c := synth.DefaultConfig()
	c.Gen = image.Gen73
	c.Seed = 11
	c.Functions, c.InitFunctions = 1200, 40
	c.JumpEntries, c.JumpKeys, c.StaticCallSites, c.StaticCallKeys = 900, 200, 200, 30
	c.BugEntries, c.Blacklist = 500, 40
	c.EntryFunctions, c.IRQEntryFunctions, c.NoinstrFunctions, c.KprobesTextFunctions = 6, 4, 12, 4
	c.Modules, c.ModuleFunctions = 2, 40
	c.ModuleJumpEntries, c.ModuleStaticCallSites, c.ModuleBugEntries = 20, 6, 12
	c.ProbeTargets, c.ProbeTargetsTraced = 64, true
	c.SampleFunctions = 64
	c.DupNamePercent = 6
	return c
}

// Image is the soak image and its target pool.
type Image struct {
	K *image.Kernel
	// Pool holds the targets steps draw from, by class.
	Pool map[string][]Target
	// Classes is the pool's classes in a fixed order.
	Classes []string

	// Copies of K whose modules a campaign may send away (module-going
	// steps change image.Module.State, which every subsystem reads): one
	// per running campaign, reset and reused.
	mu     sync.Mutex
	copies []*image.Kernel

	// wrapTree wraps every machine's P4 tree (WithWrapTree).
	wrapTree func(kprobes.AddrTree) kprobes.AddrTree
}

// WithWrapTree returns img whose machines are built with wrap around the
// kprobe registry's P4 tree (machine.Config.WrapTree): the soak's own
// tests inject a model bug under the range iterators this way. img itself
// is unchanged.
func (img *Image) WithWrapTree(wrap func(kprobes.AddrTree) kprobes.AddrTree) *Image {
	return &Image{K: img.K, Pool: img.Pool, Classes: img.Classes, wrapTree: wrap}
}

// acquire returns a copy of the image with fresh module states: the
// Kernel and its Modules are copied, everything else (text, symbols,
// tables) is shared read-only.
func (img *Image) acquire() *image.Kernel {
	img.mu.Lock()
	defer img.mu.Unlock()
	if n := len(img.copies); n > 0 {
		k := img.copies[n-1]
		img.copies = img.copies[:n-1]
		for i, m := range img.K.Modules {
			*k.Modules[i] = *m
		}
		return k
	}
	k := *img.K
	k.Modules = make([]*image.Module, len(img.K.Modules))
	for i, m := range img.K.Modules {
		mc := *m
		k.Modules[i] = &mc
	}
	return &k
}

func (img *Image) release(k *image.Kernel) {
	img.mu.Lock()
	img.copies = append(img.copies, k)
	img.mu.Unlock()
}

var (
	imgOnce sync.Once
	img     *Image
	imgErr  error
)

// LoadImage generates the soak image once per process.
func LoadImage() (*Image, error) {
	imgOnce.Do(func() { img, imgErr = buildImage(ImageConfig()) })
	return img, imgErr
}

// The target classes.
const (
	ClassEntry     = "entry"     // function entries (traced and not)
	ClassMid       = "mid"       // instruction boundaries inside a function's first bytes
	ClassMidBad    = "mid-bad"   // offsets inside an instruction
	ClassBlacklist = "blacklist" // NOKPROBE_SYMBOL entries
	ClassReserved  = "reserved"  // jump-label, static-call and bug sites (and a byte into them)
	ClassFtrace    = "ftrace"    // __fentry__ call sites and a byte past them
	ClassModule    = "module"    // module text, entries and offsets
	ClassZone      = "zone"      // entry, irqentry, noinstr and kprobes text
	ClassInit      = "init"      // freed init text
	ClassDup       = "dup"       // functions whose name has another copy
	ClassSample    = "sample"    // the batch sample's small functions (optimizable)
	ClassMissing   = "missing"   // a symbol that does not exist
	ClassNearOpt   = "near-opt"  // the bytes after a sample function's entry (inside its optprobe's jump)
	missingSymName = "soak_no_such_symbol"
)

func buildImage(cfg synth.Config) (*Image, error) {
	k, truth, err := synth.Generate(cfg)
	if err != nil {
		return nil, fmt.Errorf("soak image: %w", err)
	}
	// The pool is drawn once with a fixed stream: it depends on the image only.
	r := rand.New(rand.NewPCG(cfg.Seed, 0x736f616b)) // "soak"
	pool := map[string][]Target{}
	add := func(class string, t Target) { pool[class] = append(pool[class], t) }
	count := k.NameCounts()
	at := func(addr uint64) (Target, bool) {
		s := k.LookupFunction(addr)
		if s == nil {
			if m := k.ModuleTextAddress(addr); m != nil {
				for i := range m.Symbols {
					ms := &m.Symbols[i]
					if ms.IsText() && addr >= ms.Addr && addr < ms.Addr+ms.Size {
						return Target{Sym: ms.Name, Off: uint32(addr - ms.Addr), Addr: addr}, true
					}
				}
			}
			return Target{Addr: addr}, false
		}
		return Target{Sym: s.Name, Off: uint32(addr - s.Addr), Addr: addr}, true
	}
	var mainFuncs, sample, zone, initF, dup, mod []synth.FuncTruth
	for _, f := range truth.Funcs {
		switch {
		case f.Module != "" || f.Zone == synth.ZoneModule || f.Zone == synth.ZoneModuleInit:
			mod = append(mod, f)
		case f.Zone == synth.ZoneInit:
			initF = append(initF, f)
		case f.Zone == synth.ZoneProbeTarget:
			// the sample, below
		case f.Zone != synth.ZoneMain:
			zone = append(zone, f)
		case count[f.Name] > 1:
			dup = append(dup, f)
		default:
			mainFuncs = append(mainFuncs, f)
		}
	}
	for _, s := range k.Symbols {
		if s.IsText() && len(s.Name) > 17 && s.Name[:17] == "kprobe_many_func_" {
			sample = append(sample, synth.FuncTruth{Name: s.Name, Addr: s.Addr, Size: uint32(s.Size)})
		}
	}
	pick := func(fs []synth.FuncTruth, n int) []synth.FuncTruth {
		fs = slices.Clone(fs)
		r.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
		return fs[:min(n, len(fs))]
	}
	entry := func(f synth.FuncTruth) Target { return Target{Sym: f.Name, Addr: f.Addr} }
	for _, f := range pick(mainFuncs, 120) {
		add(ClassEntry, entry(f))
	}
	for _, f := range pick(mainFuncs, 40) {
		for _, o := range f.Insns {
			if o > 0 && o < 24 {
				add(ClassMid, Target{Sym: f.Name, Off: o, Addr: f.Addr + uint64(o)})
			}
		}
		for o := uint32(1); o < min(24, f.Size); o++ {
			if !slices.Contains(f.Insns, o) {
				add(ClassMidBad, Target{Sym: f.Name, Off: o, Addr: f.Addr + uint64(o)})
				break
			}
		}
	}
	bl := k.Blacklist
	for _, m := range k.Modules {
		bl = append(slices.Clone(bl), m.Blacklist...)
	}
	for _, a := range bl {
		if t, ok := at(a); ok {
			add(ClassBlacklist, t)
		}
	}
	var res []uint64
	for _, j := range k.JumpEntries {
		res = append(res, j.Code, j.Code+1)
	}
	for _, s := range k.StaticCallSites {
		res = append(res, s.Addr)
	}
	for _, b := range k.BugEntries {
		res = append(res, b.Addr)
	}
	r.Shuffle(len(res), func(i, j int) { res[i], res[j] = res[j], res[i] })
	for _, a := range res[:min(80, len(res))] {
		if t, ok := at(a); ok {
			add(ClassReserved, t)
		}
	}
	locs := slices.Clone(k.McountLocs)
	r.Shuffle(len(locs), func(i, j int) { locs[i], locs[j] = locs[j], locs[i] })
	for _, a := range locs[:min(30, len(locs))] {
		for _, d := range []uint64{0, 1, 5} {
			if t, ok := at(a + d); ok {
				add(ClassFtrace, t)
			}
		}
	}
	for _, f := range pick(mod, 30) {
		add(ClassModule, entry(f))
		for _, o := range f.Insns {
			if o > 0 && o < 12 {
				add(ClassModule, Target{Sym: f.Name, Off: o, Addr: f.Addr + uint64(o)})
			}
		}
	}
	for _, f := range pick(zone, 16) {
		add(ClassZone, entry(f))
	}
	for _, f := range pick(initF, 8) {
		add(ClassInit, entry(f))
	}
	for _, f := range pick(dup, 16) {
		add(ClassDup, entry(f))
	}
	for _, f := range sample {
		add(ClassSample, entry(f))
	}
	for _, f := range pick(sample, 24) {
		for d := uint32(1); d <= 8; d++ {
			add(ClassNearOpt, Target{Sym: f.Name, Off: d, Addr: f.Addr + uint64(d)})
		}
	}
	add(ClassMissing, Target{Sym: missingSymName})
	out := &Image{K: k, Pool: pool}
	for _, c := range []string{ClassEntry, ClassMid, ClassMidBad, ClassBlacklist, ClassReserved, ClassFtrace,
		ClassModule, ClassZone, ClassInit, ClassDup, ClassSample, ClassMissing, ClassNearOpt} {
		if len(pool[c]) == 0 {
			return nil, fmt.Errorf("soak image: no %s targets", c)
		}
		out.Classes = append(out.Classes, c)
	}
	return out, nil
}
