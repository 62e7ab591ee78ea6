package synth

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/load"
	"github.com/kpsim/kpsim/internal/realkernel"
	"github.com/kpsim/kpsim/x86"
)

// sampleDigest hashes what AddProbeTargets changes: the core text, the
// symbols, __mcount_loc and the truth.
func sampleDigest(k *image.Kernel, truth *Truth) string {
	h := sha256.New()
	core := k.CoreText()
	fmt.Fprintf(h, "%x %x\n", core.Start, core.End())
	h.Write(core.Bytes)
	for _, s := range k.Symbols {
		fmt.Fprintf(h, "%s %x %x %c\n", s.Name, s.Addr, s.Size, s.Type)
	}
	for _, m := range k.McountLocs {
		binary.Write(h, binary.LittleEndian, m)
	}
	if truth != nil {
		for _, f := range truth.Funcs {
			fmt.Fprintf(h, "%v\n", f)
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil)[:12])
}

func targetsTestConfig() Config {
	cfg := DefaultConfig()
	cfg.Functions, cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.BugEntries, cfg.Blacklist = 2000, 300, 100, 50, 200, 50
	return cfg
}

// TestTargetsUnchangedWithout612Shape: where the text has room after
// _etext and no call padding (6.1, synthetic images), the targets are laid
// out byte for byte as before generations: the digests are those of the
// code before 6.12 support (commit 1da5455), synthetic and, when present,
// the pinned 6.1 kernel with the default sample (50,000 functions).
func TestTargetsUnchangedWithout612Shape(t *testing.T) {
	for _, tc := range []struct {
		ibt, traced, patched bool
		want                 string
	}{
		{true, false, true, "e2bd9ab58a2a21fe4c222ca8"},
		{true, true, true, "0a234c5eb725db01d90ab185"},
		{false, false, false, "410dfa5e8deec4cea3d86253"},
		{true, true, false, "e7fd4687259fc064623c910e"},
	} {
		cfg := targetsTestConfig()
		cfg.IBT, cfg.ReturnsPatched = tc.ibt, tc.patched
		k, truth, err := Generate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := AddProbeTargets(k, truth, 1000, tc.traced, 1); err != nil {
			t.Fatal(err)
		}
		if got := sampleDigest(k, truth); got != tc.want {
			t.Errorf("synthetic ibt=%v traced=%v patched=%v: digest %s, was %s", tc.ibt, tc.traced, tc.patched, got, tc.want)
		}
	}
	if testing.Short() {
		return
	}
	const p = "../../.cache/kernels/vmlinuz-6.1.0-57-amd64"
	if _, err := os.Stat(p); err != nil {
		t.Skip("no real kernel: run `make real-kernel` to enable")
	}
	for traced, want := range map[bool]string{false: "c22ecddc599120524670c10d", true: "d5c379a3ca5a665b2b790ce6"} {
		r, err := load.OpenWith(p, load.Options{CPU: "none"})
		if err != nil {
			t.Fatal(err)
		}
		if err := AddSample(r.Kernel, DefaultConfig(), 100, traced, 1); err != nil {
			t.Fatal(err)
		}
		if got := sampleDigest(r.Kernel, nil); got != want {
			t.Errorf("6.1 traced=%v: digest %s, was %s", traced, got, want)
		}
	}
}

// shape612 pads k's core text with int3 up to the next 2 MiB boundary and
// starts .rodata there, at _etext, as 6.12's ALIGN_ENTRY_TEXT_END leaves
// vmlinux (System.map: _etext = __start_rodata = __func__.0). Unpadded, it
// starts .rodata at that boundary after _etext, as 6.1 and 7.3 do
// (X86_ALIGN_RODATA_BEGIN).
func shape612(t *testing.T, k *image.Kernel, padded bool) {
	t.Helper()
	core := k.CoreText()
	end := alignUp(core.End(), hpage)
	if padded {
		grown := make([]byte, end-core.Start)
		copy(grown, core.Bytes)
		fill(grown[len(core.Bytes):], opINT3)
		core.Bytes = grown
	}
	var syms []image.Symbol
	for _, s := range k.Symbols {
		if s.Name == "_etext" && padded {
			s.Addr = end
		}
		if s.Name != "_etext" && s.Addr >= end && s.Addr < end+hpage {
			t.Fatalf("%s at %#x is in the way", s.Name, s.Addr)
		}
		syms = append(syms, s)
	}
	syms = append(syms, image.Symbol{Name: "__start_rodata", Addr: end, Type: 'D'},
		image.Symbol{Name: "__func__.0", Addr: end, Size: 21, Type: 'd'})
	sort.SliceStable(syms, func(i, j int) bool { return syms[i].Addr < syms[j].Addr })
	k.Symbols = syms
	if err := k.Validate(); err != nil {
		t.Fatal(err)
	}
}

// rel32Targets is the absolute target of every rel32 call or jump at the
// given sites.
func rel32Targets(k *image.Kernel, sites []uint64) map[uint64]uint64 {
	out := map[uint64]uint64{}
	for _, a := range sites {
		r := k.RegionAt(a)
		if r == nil {
			continue
		}
		in, err := x86.DecodeKernel(nil, r.Bytes[a-r.Start:])
		if err == nil && in.HasRel && in.ImmLen == 4 {
			out[a] = in.Target(a)
		}
	}
	return out
}

func initSites(k *image.Kernel) []uint64 {
	var sites []uint64
	for _, s := range k.StaticCallSites {
		sites = append(sites, s.Addr)
	}
	sites = append(sites, k.McountLocs...)
	sites = append(sites, k.ReturnSites...)
	init := k.InitText()
	var out []uint64
	for _, a := range sites {
		if init.Contains(a) {
			out = append(out, a)
		}
	}
	return out
}

func TestTargets612Shape(t *testing.T) {
	for _, tc := range []struct {
		padded bool
		n      int
		moved  bool
	}{{true, 1000, false}, {true, 60000, true}, {false, 1000, false}, {false, 60000, true}} {
		t.Run(fmt.Sprintf("padded=%v,n=%d", tc.padded, tc.n), func(t *testing.T) {
			cfg := targetsTestConfig()
			cfg.TracedPercent, cfg.ReturnsPatched = 100, false
			k, _, err := Generate(cfg)
			if err != nil {
				t.Fatal(err)
			}
			shape612(t, k, tc.padded)
			core := k.CoreText()
			oldEnd, oldInit := core.End(), k.InitText().Start
			oldRodata := k.SymbolsByName("__start_rodata")[0].Addr
			last := uint64(0)
			for _, s := range k.Symbols {
				if core.Contains(s.Addr) {
					last = max(last, s.Addr+s.Size)
				}
			}
			sites := initSites(k)
			before := rel32Targets(k, sites)
			if len(before) == 0 {
				t.Fatal("no rel32 sites in init text to check")
			}
			keys := k.JumpEntries[0].Key

			syms, err := AddProbeTargets(k, nil, tc.n, true, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := k.Validate(); err != nil {
				t.Fatal(err)
			}
			if want := alignUp(last, funcAlign); syms[0].Addr != want {
				t.Errorf("first target at %#x, want %#x (after the last function)", syms[0].Addr, want)
			}
			etext := k.SymbolsByName("_etext")[0].Addr
			rodata := k.SymbolsByName("__start_rodata")[0].Addr
			objEnd := syms[len(syms)-1].Addr + alignUp(syms[len(syms)-1].Size, funcAlign)
			var delta uint64
			if tc.moved {
				delta = alignUp(objEnd-oldRodata, hpage)
			}
			wantEtext := objEnd // 6.1, 7.3: _etext ends the text
			if tc.padded {
				wantEtext = oldEnd + delta // 6.12: .text padded to what follows
			}
			if etext != wantEtext || rodata != oldRodata+delta || k.CoreText().End() != etext {
				t.Errorf("_etext %#x, __start_rodata %#x, core end %#x; want %#x, %#x, %#x", etext, rodata, k.CoreText().End(), wantEtext, oldRodata+delta, wantEtext)
			}
			if k.InitText().Start != oldInit+delta || k.JumpEntries[0].Key != keys+delta {
				t.Errorf("init text at %#x, first key %#x: not moved by %#x", k.InitText().Start, k.JumpEntries[0].Key, delta)
			}
			// The moved init text still calls and jumps where it did.
			after := rel32Targets(k, initSites(k))
			if len(after) != len(before) {
				t.Fatalf("%d rel32 sites in init text, were %d", len(after), len(before))
			}
			for a, tgt := range before {
				want := tgt
				if tgt >= oldRodata {
					want += delta
				}
				if got, ok := after[a+delta]; !ok || got != want {
					t.Errorf("site %#x (now %#x): target %#x, want %#x", a, a+delta, got, want)
				}
			}
			for i := 0; i < tc.n; i += tc.n / 7 {
				if f := k.LookupFunction(syms[i].Addr + 5); f == nil || f.Name != ProbeTargetName(i) {
					t.Errorf("LookupFunction inside target %d = %v", i, f)
				}
			}
		})
	}
}

// TestTargetsCallPadding: with CONFIG_CALL_PADDING each target is what gcc
// emits for it on 6.12: __pfx_<name> (16 NOPs), then ENDBR64 and the
// __fentry__ call at +4; the truth decodes.
func TestTargetsCallPadding(t *testing.T) {
	cfg := targetsTestConfig()
	cfg.IBT, cfg.ReturnsPatched = true, false
	k, truth, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k.Config.CallPadding, k.Config.FunctionAlignment = true, 16
	truth.Funcs = nil
	syms, err := AddProbeTargets(k, truth, 100, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Validate(); err != nil {
		t.Fatal(err)
	}
	fentry := k.SymbolsByName("__fentry__")[0].Addr
	for i, s := range syms {
		if i > 0 && s.Addr-syms[i-1].Addr != 48 {
			t.Fatalf("target %d is %d bytes after the previous one, want 48 (16 padding + 32)", i, s.Addr-syms[i-1].Addr)
		}
		pfx := k.SymbolsByName(PfxName(s.Name))
		if len(pfx) != 1 || pfx[0].Addr != s.Addr-16 || pfx[0].Size != 16 || !pfx[0].IsText() {
			t.Fatalf("%s: __pfx_ symbol %v", s.Name, pfx)
		}
		code := k.Text(s.Addr-16, 16+int(s.Size))
		if !bytes.Equal(code[:16], bytes.Repeat([]byte{opNOP}, 16)) || !bytes.Equal(code[16:20], bENDBR64) {
			t.Fatalf("%s: % x", s.Name, code[:20])
		}
		call, err := x86.For(image.Gen612).DecodeKernel(nil, code[20:])
		if err != nil || call.Kind != x86.KindCall || call.Target(s.Addr+4) != fentry {
			t.Fatalf("%s+4: %v %v, want call __fentry__", s.Name, call, err)
		}
		if j := sort.Search(len(k.McountLocs), func(j int) bool { return k.McountLocs[j] >= s.Addr+4 }); j == len(k.McountLocs) || k.McountLocs[j] != s.Addr+4 {
			t.Fatalf("%s: __mcount_loc lacks +4", s.Name)
		}
	}
	if len(truth.Funcs) != 2*len(syms) {
		t.Fatalf("%d truths for %d targets and their __pfx_", len(truth.Funcs), len(syms))
	}
	for _, f := range truth.Funcs {
		code := k.Text(f.Addr, int(f.Size+f.Pad))
		for _, off := range append(append([]uint32{}, f.Insns...), f.PadInsns...) {
			if _, err := x86.Decode(nil, code[off:]); err != nil {
				t.Fatalf("%s+%d: %v", f.Name, off, err)
			}
		}
	}
}

// TestTargetsReal612: the default sample (50,000 functions) on the 6.12
// debug vmlinux, as its config builds it (IBT, call padding, 16-byte
// alignment): it fills the 1 MB of .text padding after
// srso_alias_return_thunk, and .rodata and everything after it move up by
// 2 MiB; the moved init text still calls __fentry__, the return thunk and
// the static-call trampolines.
func TestTargetsReal612(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the 6.12 kernel")
	}
	p := realkernel.FindDbg(t, image.Gen612)
	r, err := load.OpenWith(p.Vmlinux, load.Options{CPU: "none"})
	if err != nil {
		t.Fatal(err)
	}
	k := r.Kernel
	// config-6.12.117+deb13-amd64: CONFIG_X86_KERNEL_IBT=y,
	// CONFIG_CALL_PADDING=y, CONFIG_FUNCTION_ALIGNMENT=16 (set here until
	// the loader reads them).
	k.Config.IBT, k.Config.CallPadding, k.Config.FunctionAlignment = true, true, 16
	sym := func(name string) uint64 {
		s := k.SymbolsByName(name)
		if len(s) == 0 {
			t.Fatalf("no %s", name)
		}
		return s[0].Addr
	}
	oldEtext, oldInit := sym("_etext"), sym("_sinittext")
	sites := initSites(k)
	before := rel32Targets(k, sites)
	if err := AddSample(k, DefaultConfig(), 100, true, 1); err != nil {
		t.Fatal(err)
	}
	if err := k.Validate(); err != nil {
		t.Fatal(err)
	}
	const delta = 2 << 20
	first, last := sym(ProbeTargetName(0)), sym(ProbeTargetName(49999))
	if first != 0xffffffff81f04130 || sym(PfxName(ProbeTargetName(0))) != 0xffffffff81f04120 {
		t.Errorf("first target at %#x, want 0xffffffff81f04130 after __pfx_ at 0xffffffff81f04120 (srso_alias_return_thunk ends 0xffffffff81f04112)", first)
	}
	if last-first != 49999*48 {
		t.Errorf("targets span %#x, want 49999*48", last-first)
	}
	if sym("_etext") != oldEtext+delta || sym("__start_rodata") != oldEtext+delta || sym("_sinittext") != oldInit+delta {
		t.Errorf("_etext %#x, __start_rodata %#x, _sinittext %#x: not moved by 2 MiB", sym("_etext"), sym("__start_rodata"), sym("_sinittext"))
	}
	after := rel32Targets(k, initSites(k))
	if len(before) < 1000 || len(after) != len(before) {
		t.Fatalf("%d rel32 sites in init text, were %d", len(after), len(before))
	}
	for a, tgt := range before {
		if tgt >= oldEtext {
			tgt += delta
		}
		if got := after[a+delta]; got != tgt {
			t.Fatalf("init site %#x (now %#x): target %#x, want %#x", a, a+delta, got, tgt)
		}
	}
	d := x86.For(image.Gen612)
	code := k.Text(first, 29)
	for off := 0; off < len(code); {
		in, err := d.Decode(nil, code[off:])
		if err != nil {
			t.Fatalf("target +%d: %v", off, err)
		}
		off += in.Len
	}
}

// TestTargetsCallPaddingMatchGCC: gcc with 6.12's flags for IBT, return
// thunks, ftrace and CONFIG_CALL_PADDING (-fpatchable-function-entry=16,16
// -falign-functions=16, arch/x86/Makefile and the top Makefile) puts
// exactly the generator's bytes between two of the sample's functions: the
// gas NOPs to the 16-byte boundary, then the next function's 16 NOPs.
func TestTargetsCallPaddingMatchGCC(t *testing.T) {
	fns := compileMany(t, "-fcf-protection=branch", "-mfunction-return=thunk-extern", "-pg", "-mfentry", "-mrecord-mcount",
		"-fpatchable-function-entry=16,16", "-falign-functions=16")
	cfg := targetsTestConfig()
	cfg.IBT, cfg.ReturnsPatched = true, false
	k, _, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k.Config.CallPadding, k.Config.FunctionAlignment = true, 16
	syms, err := AddProbeTargets(k, nil, 3, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	code := k.Text(syms[0].Addr, int(syms[0].Size))
	gap := k.Text(syms[0].Addr+syms[0].Size, int(syms[1].Addr-syms[0].Addr-syms[0].Size))
	for _, fn := range fns[:len(fns)-1] {
		if len(fn.code) != len(code) || !bytes.Equal(fn.code[:4], code[:4]) || fn.code[4] != code[4] {
			t.Fatalf("%s: gcc % x\n generator % x", fn.name, fn.code, code)
		}
		if !bytes.Equal(fn.pad, gap) {
			t.Fatalf("%s: gcc's gap % x\n generator's % x", fn.name, fn.pad, gap)
		}
	}
	if fns[0].addr != 16 {
		t.Errorf("gcc's first function at %d, want 16 (after its 16 NOPs)", fns[0].addr)
	}
}
