package kprobes

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/mm"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// genFn is one function of a hand-made image: its name and bytes.
type genFn struct {
	name string
	code []byte
}

// genKernel lays fns out from base (16-byte aligned, int3 padding) as a
// core-text image of generation gen with config cfg.
func genKernel(gen image.Generation, cfg image.Config, fns ...genFn) *image.Kernel {
	cfg.Gen = gen
	k := &image.Kernel{Name: "gen " + gen.String(), Config: cfg}
	var text []byte
	for _, f := range fns {
		k.Symbols = append(k.Symbols, image.Symbol{Name: f.name, Addr: base + uint64(len(text)), Size: uint64(len(f.code)), Type: 't'})
		text = append(text, f.code...)
		for len(text)%16 != 0 {
			text = append(text, x86.INT3InsnOpcode)
		}
	}
	k.Regions = []*image.Region{{Name: ".text", Kind: image.CoreText, Start: base, Bytes: text}}
	return k
}

// genAddModule adds a module whose text holds fns (after the core text).
func genAddModule(k *image.Kernel, name string, state image.ModuleState, fns ...genFn) {
	start := uint64(0xffffffffc0000000)
	m := &image.Module{Name: name, State: state}
	var text []byte
	for _, f := range fns {
		m.Symbols = append(m.Symbols, image.Symbol{Name: f.name, Addr: start + uint64(len(text)), Size: uint64(len(f.code)), Type: 't', Module: name})
		text = append(text, f.code...)
	}
	m.Text = &image.Region{Name: name + " .text", Kind: image.ModuleText, Module: name, Start: start, Bytes: text}
	k.Regions = append(k.Regions, m.Text)
	k.Modules = append(k.Modules, m)
}

// genSym is the address of the first symbol named name in k.
func genSym(t *testing.T, k *image.Kernel, name string) uint64 {
	t.Helper()
	for _, s := range k.Symbols {
		if s.Name == name {
			return s.Addr
		}
	}
	for _, m := range k.Modules {
		for _, s := range m.Symbols {
			if s.Name == name {
				return s.Addr
			}
		}
	}
	t.Fatalf("no symbol %q", name)
	return 0
}

// genBlacklist refuses the listed addresses.
type genBlacklist map[uint64]bool

func (b genBlacklist) WithinKprobeBlacklist(c *sim.Counters, addr uint64) bool { return b[addr] }

// genFtrace has one fentry site, whose arming fails with err.
type genFtrace struct {
	site uint64
	err  error
}

func (f genFtrace) Location(c *sim.Counters, ip uint64) uint64 {
	if ip == f.site {
		return ip
	}
	return 0
}
func (f genFtrace) TextReserved(c *sim.Counters, start, end uint64) bool {
	return start <= f.site && f.site <= end
}
func (f genFtrace) ArmKprobeFtrace(c *sim.Counters, ip uint64, ipmodify bool) error { return f.err }
func (f genFtrace) DisarmKprobeFtrace(c *sim.Counters, ip uint64, ipmodify bool) error {
	return nil
}

// genKprobes builds a Kprobes on k with counters; deps and cfg may adjust
// the defaults.
func genKprobes(t *testing.T, k *image.Kernel, deps func(*Deps), cfg func(*Config)) *Kprobes {
	t.Helper()
	d := Deps{Image: k, Syms: kallsyms.NewSorted(k)}
	if deps != nil {
		deps(&d)
	}
	c := DefaultConfig()
	if cfg != nil {
		cfg(&c)
	}
	kp, err := New(d, c, 0, sim.NewCounters(false))
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// genRegister registers a probe at sym+off (by address, or by name when
// byName), runs the optimizer, and returns the probe and the error.
func genRegister(t *testing.T, kp *Kprobes, sym string, off uint64, byName bool) (*Kprobe, error) {
	t.Helper()
	p := &Kprobe{Addr: genSym(t, kp.Image, sym) + off}
	if byName {
		p = &Kprobe{SymbolName: sym, Offset: uint32(off)}
	}
	err := kp.RegisterKprobe(p)
	kp.Drain()
	genLast[kp] = p
	return p, err
}

func errStr(err error) string {
	if err == nil {
		return "0"
	}
	return errName(err)
}

// TestGenerationDifferences: every kprobes behaviour that differs between
// 6.1.192, 6.12.117 and 7.3 (gen.go), the same probe on the same bytes
// under each generation, with the outcome each kernel's C gives. Each row
// has at least two different outcomes, so it fails when the generation is
// ignored.
func TestGenerationDifferences(t *testing.T) {
	gens := []image.Generation{image.Gen61, image.Gen612, image.Gen73}
	// thunk: a jmp into [__indirect_thunk_start, end].
	thunkJmp := func(k *image.Kernel) {
		th := genSym(t, k, "__x86_indirect_thunk_rax")
		k.Ranges = append(k.Ranges, image.Range{Name: image.RangeIndirectThunk, Start: th, End: th + 16})
		at := genSym(t, k, "thunkjmp") + 6
		r := k.Regions[0]
		binary.LittleEndian.PutUint32(r.Bytes[at+1-r.Start:], uint32(int32(int64(th)-int64(at+5))))
	}
	rows := []struct {
		name     string
		cfg      image.Config
		fns      []genFn
		fix      func(k *image.Kernel)
		deps     func(t *testing.T, k *image.Kernel, d *Deps)
		kcfg     func(*Config)
		run      func(t *testing.T, kp *Kprobes) string
		want     [3]string // 6.1, 6.12, 7.3
		count    bool      // the last number is a count, shown relative to 6.1's ("A", "A+1")
		reason   string    // in the Why of the last probe under gens[reasonOn], when set
		reasonOn int
	}{
		{
			name: "can_probe is_exception_insn: ud2",
			fns:  []genFn{{"ud2fn", []byte{0x55, 0x0f, 0x0b, 0xc3}}},
			run: func(t *testing.T, kp *Kprobes) string {
				_, err := genRegister(t, kp, "ud2fn", 1, false)
				return errStr(err)
			},
			want:   [3]string{"0", "-EILSEQ", "-EILSEQ"},
			reason: "is_exception_insn (6.12+)", reasonOn: 1,
		},
		{
			name: "can_probe is_exception_insn: int3 (6.1: __copy_instruction)",
			fns:  []genFn{{"int3fn", []byte{0x55, 0xcc, 0xc3}}},
			run: func(t *testing.T, kp *Kprobes) string {
				_, err := genRegister(t, kp, "int3fn", 1, false)
				return errStr(err)
			},
			want: [3]string{"-EINVAL", "-EILSEQ", "-EILSEQ"},
		},
		{
			name: "can_probe is_exception_insn: int $0x80",
			fns:  []genFn{{"intfn", []byte{0x55, 0xcd, 0x80, 0xc3}}},
			run: func(t *testing.T, kp *Kprobes) string {
				_, err := genRegister(t, kp, "intfn", 1, false)
				return errStr(err)
			},
			want: [3]string{"0", "-EILSEQ", "-EILSEQ"},
		},
		{
			name: "can_probe recovers and decodes the probed instruction: one more decode",
			fns:  []genFn{{"nopfn", []byte{0x55, 0x90, 0xc3}}},
			kcfg: func(c *Config) { c.AllowOptimization = false },
			run: func(t *testing.T, kp *Kprobes) string {
				if _, err := genRegister(t, kp, "nopfn", 1, false); err != nil {
					t.Fatal(err)
				}
				return fmt.Sprint(kp.C.Total(x86.OpDecode))
			},
			count: true,
			want:  [3]string{"A", "A+1", "A+1"},
		},
		{
			name: "can_probe is_cfi_trap: kCFI movl (CONFIG_CFI_CLANG 6.12, CONFIG_CFI 7.3)",
			cfg:  image.Config{CFI: true},
			fns: []genFn{{"cfifn", []byte{0x90, 0x41, 0xba, 0x78, 0x56, 0x34, 0x12, 0x45, 0x03, 0x53, 0xfc, 0x74, 0x02, 0x0f, 0x0b,
				0x41, 0xff, 0xd3, 0xc3}}},
			run: func(t *testing.T, kp *Kprobes) string {
				_, e1 := genRegister(t, kp, "cfifn", 1, false) // movl $id, %r10d: ud2 at +12
				_, e2 := genRegister(t, kp, "cfifn", 7, false) // addl -4(%r11), %r10d: ud2 at +6
				return errStr(e1) + " " + errStr(e2)
			},
			want:   [3]string{"0 0", "-EILSEQ -EILSEQ", "-EILSEQ -EILSEQ"},
			reason: "is_cfi_trap (6.12+, CONFIG_CFI)", reasonOn: 2,
		},
		{
			name: "can_probe is_cfi_trap: no check without CFI",
			fns: []genFn{{"cfifn", []byte{0x90, 0x41, 0xba, 0x78, 0x56, 0x34, 0x12, 0x45, 0x03, 0x53, 0xfc, 0x74, 0x02, 0x0f, 0x0b,
				0x41, 0xff, 0xd3, 0xc3}}},
			run: func(t *testing.T, kp *Kprobes) string {
				_, e1 := genRegister(t, kp, "cfifn", 1, false)
				return errStr(e1) + fmt.Sprintf(" cfi lookups %d", kp.C.Total(opCFITrap))
			},
			want: [3]string{"0 cfi lookups 0", "0 cfi lookups 0", "0 cfi lookups 0"},
		},
		{
			name: "can_boost Grp4 inc in prepare_singlestep (no CONFIG_PREEMPTION)",
			fns:  []genFn{{"incfn", []byte{0x55, 0xfe, 0xc0, 0xc3}}},
			kcfg: func(c *Config) { c.Preemption = false },
			run: func(t *testing.T, kp *Kprobes) string {
				p, err := genRegister(t, kp, "incfn", 1, false)
				if err != nil {
					t.Fatal(err)
				}
				return fmt.Sprintf("boostable=%v tp_len=%d", p.ainsn.boostable, p.ainsn.tpLen)
			},
			want: [3]string{"boostable=false tp_len=3", "boostable=true tp_len=7", "boostable=true tp_len=7"},
		},
		{
			name: "can_boost Grp2 shl/shr in copy_optimized_instructions",
			fns:  []genFn{{"shlfn", []byte{0x55, 0xd1, 0xe0, 0xd1, 0xe8, 0x90, 0x90, 0x90, 0xc3}}},
			run: func(t *testing.T, kp *Kprobes) string {
				p, err := genRegister(t, kp, "shlfn", 1, false)
				if err != nil {
					t.Fatal(err)
				}
				return p.State().String()
			},
			// 6.1's reason reads as before the generations (its digest is
			// 6.1's); the explain trail adds "6.12+ boosts this group".
			want:   [3]string{"int3", "optimized", "optimized"},
			reason: "is not boostable", reasonOn: 0,
		},
		{
			name: "can_optimize skips the indirect-jump check with retpolines (6.12+)",
			cfg:  image.Config{Retpoline: true},
			fns:  []genFn{{"jmpfn", []byte{0x55, 0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0xe0, 0xc3}}},
			run: func(t *testing.T, kp *Kprobes) string {
				p, err := genRegister(t, kp, "jmpfn", 1, false)
				if err != nil {
					t.Fatal(err)
				}
				return p.State().String()
			},
			want: [3]string{"int3", "optimized", "optimized"},
		},
		{
			name: "can_optimize skips the indirect-jump check with IBT (6.12+)",
			cfg:  image.Config{IBT: true},
			fns:  []genFn{{"jmpfn", []byte{0x55, 0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0xe0, 0xc3}}},
			run: func(t *testing.T, kp *Kprobes) string {
				p, _ := genRegister(t, kp, "jmpfn", 1, false)
				return p.State().String()
			},
			want: [3]string{"int3", "optimized", "optimized"},
		},
		{
			name: "can_optimize's thunk-range check is 6.1's only (retpoline kernel)",
			cfg:  image.Config{Retpoline: true},
			fns: []genFn{{"thunkjmp", []byte{0x55, 0x90, 0x90, 0x90, 0x90, 0x90, 0xe9, 0, 0, 0, 0, 0xc3}},
				{"__x86_indirect_thunk_rax", []byte{0xff, 0xe0, 0xcc}}},
			fix: thunkJmp,
			run: func(t *testing.T, kp *Kprobes) string {
				p, _ := genRegister(t, kp, "thunkjmp", 1, false)
				return p.State().String() + ": " + p.Why().Detail
			},
			want: [3]string{"int3: jump into the indirect thunks at +6 (CONFIG_RETPOLINE)", "optimized: ", "optimized: "},
		},
		{
			name: "alternatives_text_reserved gone in 7.3: two fewer O(1) checks",
			fns:  []genFn{{"nopfn", []byte{0x55, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xc3}}},
			run: func(t *testing.T, kp *Kprobes) string {
				p, err := genRegister(t, kp, "nopfn", 1, false)
				if err != nil || p.State() != StateOptimized {
					t.Fatalf("%v %v", err, p.State())
				}
				return fmt.Sprint(kp.C.Total(opConst))
			},
			count: true,
			want:  [3]string{"A", "A", "A-2"},
		},
		{
			name: "check_kprobe_address_safe: try_module_get before the reserved checks (7.3)",
			fns:  []genFn{{"corefn", []byte{0x55, 0xc3}}},
			fix: func(k *image.Kernel) {
				genAddModule(k, "going", image.ModuleGoing, genFn{"modfn", []byte{0x55, 0x90, 0xc3}})
			},
			deps: func(t *testing.T, k *image.Kernel, d *Deps) {
				d.Blacklist = genBlacklist{genSym(t, k, "modfn") + 1: true}
			},
			run: func(t *testing.T, kp *Kprobes) string {
				_, err := genRegister(t, kp, "modfn", 1, false)
				return errStr(err)
			},
			want: [3]string{"-EINVAL", "-EINVAL", "-ENOENT"},
		},
		{
			name: "check_kprobe_address_safe: a reserved module address gets and puts the module (7.3)",
			fns:  []genFn{{"corefn", []byte{0x55, 0xc3}}},
			fix: func(k *image.Kernel) {
				genAddModule(k, "live", image.ModuleLive, genFn{"modfn", []byte{0x55, 0x90, 0xc3}})
			},
			deps: func(t *testing.T, k *image.Kernel, d *Deps) {
				d.Blacklist = genBlacklist{genSym(t, k, "modfn") + 1: true}
			},
			run: func(t *testing.T, kp *Kprobes) string {
				_, err := genRegister(t, kp, "modfn", 1, false)
				return errStr(err) + " " + fmt.Sprint(kp.C.Total(opConst))
			},
			count: true,
			want:  [3]string{"-EINVAL A", "-EINVAL A", "-EINVAL A+2"},
		},
		{
			name: "__register_kprobe swallows an arm_kprobe error (7.3)",
			cfg:  image.Config{KprobesOnFtrace: true},
			fns:  []genFn{{"ftracefn", []byte{0x0f, 0x1f, 0x44, 0x00, 0x00, 0x55, 0xc3}}},
			deps: func(t *testing.T, k *image.Kernel, d *Deps) {
				d.Ftrace = genFtrace{site: genSym(t, k, "ftracefn"), err: EBUSY}
			},
			run: func(t *testing.T, kp *Kprobes) string {
				p, err := genRegister(t, kp, "ftracefn", 0, false)
				return fmt.Sprintf("%s registered=%v state=%s arm=%s", errStr(err), p.Registered(), p.State(), errStr(p.ArmError()))
			},
			want: [3]string{"-EBUSY registered=false state=unregistered arm=0", "-EBUSY registered=false state=unregistered arm=0",
				"0 registered=false state=unregistered arm=-EBUSY"},
			reason: "__register_kprobe (7.3) returned 0", reasonOn: 2,
		},
		{
			name: "KPROBE_FLAG_ON_FUNC_ENTRY set before check_kprobe_address_safe (7.3)",
			fns:  []genFn{{"bl", []byte{0x55, 0xc3}}},
			deps: func(t *testing.T, k *image.Kernel, d *Deps) {
				d.Blacklist = genBlacklist{genSym(t, k, "bl"): true}
			},
			run: func(t *testing.T, kp *Kprobes) string {
				p, err := genRegister(t, kp, "bl", 0, true)
				return fmt.Sprintf("%s on_func_entry=%v", errStr(err), p.Flags&KprobeFlagOnFuncEntry != 0)
			},
			want: [3]string{"-EINVAL on_func_entry=false", "-EINVAL on_func_entry=false", "-EINVAL on_func_entry=true"},
		},
		{
			name: "insn slot pages: module_alloc (6.1), execmem_alloc + set_memory_rox (6.12), the execmem ROX cache (7.3)",
			fns:  []genFn{{"nopfn", []byte{0x55, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xc3}}},
			run: func(t *testing.T, kp *Kprobes) string {
				p, err := genRegister(t, kp, "nopfn", 1, false)
				if err != nil || p.State() != StateOptimized {
					t.Fatalf("%v %v", err, p.State())
				}
				kp.UnregisterKprobes([]*Kprobe{p})
				kp.Drain()
				c := kp.C
				return fmt.Sprintf("module_alloc=%d execmem=%d populate=%d carve=%d cache_free=%d", c.Total(opSlotAlloc),
					c.Total(opSlotAllocExecmem), c.Total(opExecmemCachePopulate), c.Total(opExecmemCacheAlloc), c.Total(opExecmemCacheFree))
			},
			// Both caches take a page (the insn slot and the detour);
			// the last page of a cache is kept when its slots are freed.
			want: [3]string{"module_alloc=2 execmem=0 populate=0 carve=0 cache_free=0", "module_alloc=0 execmem=2 populate=0 carve=0 cache_free=0",
				"module_alloc=0 execmem=0 populate=1 carve=2 cache_free=0"},
		},
		{
			name: "register_kretprobe: maxactive kzallocs (6.1), an objpool of one slot per possible CPU (6.12+)",
			fns:  []genFn{{"retfn", []byte{0x55, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xc3}}},
			kcfg: func(c *Config) { c.CPUs = 4 },
			run: func(t *testing.T, kp *Kprobes) string {
				rp := &Kretprobe{Kp: Kprobe{SymbolName: "retfn"}, MaxActive: 20}
				if err := kp.RegisterKretprobe(rp); err != nil {
					t.Fatal(err)
				}
				kp.Drain()
				reg := fmt.Sprintf("objpool=%d", kp.C.Total(opObjpoolSlot))
				kp.UnregisterKretprobes([]*Kretprobe{rp})
				kp.Drain()
				return fmt.Sprintf("%s instances=%d objpool=%d kmalloc %d", reg, rp.MaxActive, kp.C.Total(opObjpoolSlot), kp.C.Total(opKmalloc))
			},
			count: true,
			// 1+20 kzalloc and as many kfree (6.1); 2 and 2 (6.12+).
			want: [3]string{"objpool=0 instances=20 objpool=0 kmalloc A", "objpool=4 instances=20 objpool=8 kmalloc A-38",
				"objpool=4 instances=20 objpool=8 kmalloc A-38"},
		},
		{
			name: "text_poke_bp batch: cond_resched (6.12+), per-CPU refcount (7.3)",
			fns:  []genFn{{"nopfn", []byte{0x55, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xc3}}},
			kcfg: func(c *Config) { c.CPUs = 4 },
			run: func(t *testing.T, kp *Kprobes) string {
				p, _ := genRegister(t, kp, "nopfn", 1, false)
				return fmt.Sprintf("%s cond_resched=%d refs=%d", p.State(), kp.C.Total(opCondResched), kp.C.Total(opTextPokeRef))
			},
			want: [3]string{"optimized cond_resched=0 refs=0", "optimized cond_resched=1 refs=0", "optimized cond_resched=1 refs=8"},
		},
		{
			name: "do_free_cleaned_kprobes: get_optimized_kprobe before free_aggr_kprobe (7.3)",
			fns:  []genFn{{"nopfn", []byte{0x55, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xc3}}},
			run: func(t *testing.T, kp *Kprobes) string {
				p, _ := genRegister(t, kp, "nopfn", 1, false)
				if p.State() != StateOptimized {
					t.Fatal(p.State())
				}
				kp.C.Reset()
				kp.UnregisterKprobes([]*Kprobe{p})
				kp.Drain()
				return fmt.Sprintf("get_kprobe %d", kp.C.Total(opHashLookup))
			},
			count: true,
			want:  [3]string{"get_kprobe A", "get_kprobe A", "get_kprobe A+18"},
		},
		{
			name: "arch_adjust_kprobe_addr: 7.3's ENDBR poison (IBT)",
			cfg:  image.Config{IBT: true},
			fns:  []genFn{{"sealed", []byte{0x0f, 0x1f, 0x40, 0xd6, 0x55, 0xc3}}},
			run: func(t *testing.T, kp *Kprobes) string {
				p, err := genRegister(t, kp, "sealed", 0, true)
				return fmt.Sprintf("%s +%d", errStr(err), p.Addr-genSym(t, kp.Image, "sealed"))
			},
			want: [3]string{"0 +0", "0 +0", "0 +4"},
		},
		{
			name: "arch_adjust_kprobe_addr: no read without IBT (7.3's is_endbr stub)",
			fns:  []genFn{{"plain", []byte{0x55, 0xc3}}},
			run: func(t *testing.T, kp *Kprobes) string {
				_, err := genRegister(t, kp, "plain", 0, true)
				return fmt.Sprintf("%s reads=%d", errStr(err), kp.C.Total(opEndbrRead))
			},
			want: [3]string{"0 reads=1", "0 reads=1", "0 reads=0"},
		},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			var got [3]string
			var base61 uint64
			for i, g := range gens {
				k := genKernel(g, row.cfg, row.fns...)
				if row.fix != nil {
					row.fix(k)
				}
				kp := genKprobes(t, k, func(d *Deps) {
					if row.deps != nil {
						row.deps(t, k, d)
					}
				}, row.kcfg)
				got[i] = row.run(t, kp)
				// Counts are compared with 6.1's ("A"): the 6.1 figure
				// itself is not what the row is about.
				if row.count {
					got[i] = relCount(got[i], i, &base61)
				}
				if row.reason != "" && i == row.reasonOn {
					if w := lastWhy(kp); !contains(w, row.reason) {
						t.Errorf("%s: reason %q does not say %q", g, w, row.reason)
					}
				}
			}
			if got != row.want {
				t.Errorf("got  %q\nwant %q", got, row.want)
			}
		})
	}
}

// genLast is the last probe genRegister registered on each Kprobes.
var genLast = map[*Kprobes]*Kprobe{}

// lastWhy is the Why of the last probe genRegister registered on kp.
func lastWhy(kp *Kprobes) string { return genLast[kp].Why().String() }

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// relCount rewrites the last number of s relative to the 6.1 run's (i ==
// 0 sets it): "A", "A+1", "A-2". A string without a trailing number is
// left alone.
func relCount(s string, i int, base *uint64) string {
	j := len(s)
	for j > 0 && s[j-1] >= '0' && s[j-1] <= '9' {
		j--
	}
	if j == len(s) {
		return s
	}
	var n uint64
	fmt.Sscan(s[j:], &n)
	if i == 0 {
		*base = n
		return s[:j] + "A"
	}
	switch d := int64(n) - int64(*base); {
	case d == 0:
		return s[:j] + "A"
	case d > 0:
		return fmt.Sprintf("%sA+%d", s[:j], d)
	default:
		return fmt.Sprintf("%sA%d", s[:j], d)
	}
}

// TestInsnPageSources: a page freed from a cache of two goes back the
// generation's way (6.1, 6.12: vfree, counted as the page op; 7.3:
// execmem_cache_free into the ROX cache, and the next page is carved from
// it without growing the cache).
func TestInsnPageSources(t *testing.T) {
	for _, tc := range []struct {
		gen  image.Generation
		want string
	}{
		// set_memory_* calls, each interrupting the 15 other CPUs: 6.1
		// two per page allocated or freed; 6.12 one per execmem page
		// (set_memory_rox), two per free; 7.3 one per 2 MiB populate,
		// three per page given back.
		{image.Gen61, "module_alloc=4 execmem=0 populate=0 carve=0 cache_free=0 flush=120/120"},
		{image.Gen612, "module_alloc=1 execmem=3 populate=0 carve=0 cache_free=0 flush=75/75"},
		{image.Gen73, "module_alloc=0 execmem=0 populate=1 carve=3 cache_free=1 flush=60/60"},
	} {
		for _, walk := range []bool{false, true} {
			ic := newInsnCache("t", 2048, walk) // two slots a page
			ic.src = genModelFor(genKernel(tc.gen, image.Config{})).insnPages
			ic.cpus = 16
			c := sim.NewCounters(false)
			var slots []uint64
			for i := 0; i < 3; i++ {
				s, ok := ic.getInsnSlot(c, nil, FaultInsnSlot)
				if !ok {
					t.Fatal("no slot")
				}
				slots = append(slots, s)
			}
			ic.freeInsnSlot(c, slots[0], false)
			ic.freeInsnSlot(c, slots[1], false) // the first page empties and goes
			if _, ok := ic.getInsnSlot(c, nil, FaultInsnSlot); !ok {
				t.Fatal("no slot")
			}
			if _, ok := ic.getInsnSlot(c, nil, FaultInsnSlot); !ok {
				t.Fatal("no slot")
			}
			got := fmt.Sprintf("module_alloc=%d execmem=%d populate=%d carve=%d cache_free=%d flush=%d/%d", c.Total(opSlotAlloc),
				c.Total(opSlotAllocExecmem), c.Total(opExecmemCachePopulate), c.Total(opExecmemCacheAlloc), c.Total(opExecmemCacheFree),
				c.Total(mm.OpFlushCPU), c.Total(mm.OpFlushHandler))
			if got != tc.want {
				t.Errorf("%s walk=%v: %s, want %s", tc.gen, walk, got, tc.want)
			}
		}
	}
}

// TestCanProbe612WithIterators: 6.12's can_probe recovers the probed
// instruction after the walk; with the tree and the address iterators that
// query comes last and in order, so every switch setting decides alike.
func TestCanProbe612WithIterators(t *testing.T) {
	fns := []genFn{{"f", []byte{0x55, 0x90, 0x0f, 0x0b, 0x90, 0x90, 0x90, 0x90, 0x90, 0xc3}}}
	var want string
	for i, sw := range []sim.Switches{0, sim.Switches(0).With(sim.KprobeTree).With(sim.IterCanProbe).With(sim.IterRecoverOptprobed).With(sim.IterCopyOptimized).With(sim.IterCanOptimize)} {
		k := genKernel(image.Gen612, image.Config{}, fns...)
		kp, err := New(Deps{Image: k, Syms: kallsyms.NewSorted(k)}, DefaultConfig(), sw, sim.NewCounters(false))
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for off := uint64(0); off < 9; off++ {
			p, err := genRegister(t, kp, "f", off, false)
			got += fmt.Sprintf("+%d:%s/%s ", off, errStr(err), p.State())
		}
		if i == 0 {
			want = got
			continue
		}
		if got != want {
			t.Errorf("%v:\n got %s\nwant %s", sw, got, want)
		}
	}
	t.Log(want)
}
