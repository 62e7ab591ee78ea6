package kprobes

import (
	"encoding/binary"

	"github.com/kpsim/kpsim/boot"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// The subsystems register_kprobe calls into. Each is an interface so the
// linear (upstream) and indexed (proposed) forms plug in without the
// pipeline knowing which is active.

// TextReserver models a *_text_reserved(start, end) check on an inclusive
// range: jump_label_text_reserved, static_call_text_reserved. An error is
// the kernel's BUG (e.g. a jump site whose bytes are no jump or NOP).
type TextReserver interface {
	TextReserved(c *sim.Counters, start, end uint64) (bool, error)
}

// BugFinder models lib/bug.c:find_bug.
type BugFinder interface {
	FindBug(c *sim.Counters, addr uint64) bool
}

// Blacklist models kernel/kprobes.c:within_kprobe_blacklist.
type Blacklist interface {
	WithinKprobeBlacklist(c *sim.Counters, addr uint64) bool
}

// Ftrace is what kprobes asks of ftrace (kernel/trace/ftrace.c).
type Ftrace interface {
	// Location models ftrace_location: the fentry site for ip (ip itself,
	// or the site of the function ip starts), 0 if none.
	Location(c *sim.Counters, ip uint64) uint64
	// TextReserved models ftrace_text_reserved on [start, end].
	TextReserved(c *sim.Counters, start, end uint64) bool
	// ArmKprobeFtrace / DisarmKprobeFtrace model __arm_kprobe_ftrace and
	// __disarm_kprobe_ftrace on kprobe_ftrace_ops (kprobe_ipmodify_ops when
	// ipmodify, i.e. the probe has a post handler).
	ArmKprobeFtrace(c *sim.Counters, ip uint64, ipmodify bool) error
	DisarmKprobeFtrace(c *sim.Counters, ip uint64, ipmodify bool) error
}

// ExceptionTables models kernel/extable.c:search_exception_tables.
type ExceptionTables interface {
	SearchExceptionTables(c *sim.Counters, addr uint64) bool
}

// Config holds the kernel configuration and semantics choices the
// pipeline depends on. DefaultConfig is Debian's 6.1 x86-64 kernel.
type Config struct {
	// Preemption: CONFIG_PREEMPTION (Debian: PREEMPT_DYNAMIC, so yes).
	// Without it prepare_singlestep may boost; with it, never.
	Preemption bool
	// OptprobeSlotSize is MAX_OPTINSN_SIZE: the optprobe template plus
	// MAX_OPTIMIZED_LENGTH plus a JMP32 (arch/x86/include/asm/kprobes.h,
	// 6.1; the template's length depends on the build: ≈110-130 bytes).
	OptprobeSlotSize int
	// CPUs online: each text_poke_sync IPIs all of them.
	CPUs int
	// AllowOptimization: sysctl debug.kprobes-optimization.
	AllowOptimization bool
	// Sim holds the simulator's own choices (walks or shortcuts, test
	// hooks); machine.New sets it from machine.Config.
	Sim SimOptions
}

// DefaultConfig returns Debian 6.1's settings on a small server.
func DefaultConfig() Config {
	return Config{Preemption: true, OptprobeSlotSize: 120, CPUs: 8, AllowOptimization: true}
}

// Deps are the subsystems a Kprobes instance calls.
type Deps struct {
	Image      *image.Kernel
	Syms       kallsyms.Resolver
	Ftrace     Ftrace
	Extable    ExceptionTables
	JumpLabel  TextReserver
	StaticCall TextReserver
	Bugs       BugFinder
	Blacklist  Blacklist
}

// Kprobes is the state of kernel/kprobes.c and the x86 arch code for one
// simulated kernel: the registry, the optimizer's lists, the instruction
// slot caches, and the switches that choose linear or indexed lookups.
// All calls are made under (modelled) kprobe_mutex: not safe for
// concurrent use.
type Kprobes struct {
	Deps
	recoverers []*recoverer // free recoverers (newWalkRecoverer)
	// decodes remembers recent decodes of the image text (nil with
	// Sim.Walk: decode every time).
	decodes *sim.Memo[decodeKey, decoded]
	// insn is the kernel's instruction decoder (arch/x86/lib/insn.c and
	// its opcode map) of the image's generation, chosen once.
	insn *x86.Decoder
	// g is the kprobes behaviour of the image's generation, chosen once
	// (gen.go).
	g   genModel
	Cfg Config
	Reg *Registry
	Sw  sim.Switches
	// State is system_state; the caller advances it (boot.Running after
	// late init).
	State  boot.State
	C      *sim.Counters
	Faults *sim.Faults
	// Trail, when not nil, receives the decision trail of every
	// registration (see Recorder). It never changes a count.
	Trail Recorder

	optimizing   []*Kprobe // optimizing_list, head at the end (list_add)
	unoptimizing []*Kprobe // unoptimizing_list, head at the end
	freeing      []*Kprobe // freeing_list
	kicked       bool      // kick_kprobe_optimizer: the delayed work is queued
	insnSlots    *insnCache
	optSlots     *insnCache

	core, init *image.Region
	entryText  image.Range
	thunks     image.Range
	hasThunks  bool

	kretBlacklist *uint64 // kretprobe_blacklist[0].addr, resolved once

	why      Reason   // the last failing check's reason (see refuse)
	depth    int      // the trail's current nesting
	whyCache whyCache // simulator views the reasons read

	invCounts []uint64 // CheckInvariants' previous counter snapshot
}

// New builds the kprobes state for deps with the given switches. c may be nil.
func New(d Deps, cfg Config, sw sim.Switches, c *sim.Counters) (*Kprobes, error) {
	if err := sw.Validate(); err != nil {
		return nil, err
	}
	kp := &Kprobes{
		Deps: d, Cfg: cfg, Reg: NewRegistryWith(sw, cfg.Sim), Sw: sw, C: c,
		State:     boot.Running,
		insnSlots: newInsnCache("kprobe_insn_slots", x86.MaxInsnSize, cfg.Sim.Walk),
		optSlots:  newInsnCache("kprobe_optinsn_slots", cfg.OptprobeSlotSize, cfg.Sim.Walk),
		core:      d.Image.CoreText(), init: d.Image.InitText(),
	}
	kp.insn = x86.For(d.Image.Config.Gen)
	kp.g = genModelFor(d.Image)
	kp.insnSlots.src, kp.optSlots.src = kp.g.insnPages, kp.g.insnPages
	kp.insnSlots.cpus, kp.optSlots.cpus = cfg.CPUs, cfg.CPUs
	kp.Reg.Faults = func() *sim.Faults { return kp.Faults }
	if !cfg.Sim.Walk {
		kp.decodes = newDecodeMemo()
	}
	kp.entryText, _ = d.Image.Range(image.RangeEntryText)
	kp.thunks, kp.hasThunks = d.Image.Range(image.RangeIndirectThunk)
	return kp, nil
}

// decodeAt models insn_decode_kernel on the (recovered) instruction at
// addr. ftraceSite reports whether addr is an ftrace site, whose bytes
// recover to the ideal NOP5 (arch/x86/kernel/kprobes/core.c:
// __recover_probed_insn); otherwise recovery yields the original text,
// which the model never patches.
func (kp *Kprobes) decodeAt(addr uint64, ftraceSite bool) (x86.Insn, error) {
	if ftraceSite {
		return kp.insn.DecodeKernel(kp.C, x86.NOP5[:])
	}
	code := kp.Image.Text(addr, x86.MaxInsnSize)
	if kp.decodes != nil {
		return kp.decodeMemo(code)
	}
	return kp.insn.DecodeKernel(kp.C, code)
}

// decodeKey is a decode's question: the bytes at an address. Keyed by the
// bytes themselves (insn_decode_kernel reads nothing else), so a module
// loaded where another was cannot be answered from the old text, and the
// same bytes elsewhere can.
type decodeKey struct {
	n    int
	code [x86.MaxInsnSize]byte
}

// decoded is a decode's answer.
type decoded struct {
	insn x86.Insn
	err  error
}

// newDecodeMemo remembers recent decodes of the image text: the same bytes
// decode the same way, and a registration decodes its first instructions
// again (prepare, can_optimize, the copy). The entry is chosen by the
// bytes (decodeKey.slot), so the same instruction elsewhere in the text
// (functions begin alike) is answered too: more than half the decodes
// of a 20k-probe registration run, where an entry per address answered a
// sixth.
func newDecodeMemo() *sim.Memo[decodeKey, decoded] {
	return sim.NewMemo[decodeKey, decoded](256, nil)
}

// slot spreads the keys over the memo's entries: a multiplicative hash of
// the bytes (two overlapping words cover all fifteen) and the length.
func (k *decodeKey) slot() uint64 {
	lo := binary.LittleEndian.Uint64(k.code[:8])
	hi := binary.LittleEndian.Uint64(k.code[x86.MaxInsnSize-8:])
	h := (lo ^ hi*0x9E3779B97F4A7C15 ^ uint64(k.n)) * 0xBF58476D1CE4E5B9
	return h >> 32
}

// decodeMemo is insn_decode_kernel(code) answered from the memo, counted
// as the decode it stands for.
func (kp *Kprobes) decodeMemo(code []byte) (x86.Insn, error) {
	k := decodeKey{n: len(code)}
	copy(k.code[:], code)
	h := k.slot()
	d, t, ok := kp.decodes.Find(h, 0, k)
	if !ok {
		d, t = kp.decodes.GetAt(h, 0, k, func(t *sim.Tally) decoded {
			insn, err := kp.insn.DecodeKernel(nil, code)
			t.Inc(x86.OpDecode) // DecodeKernel's one count
			return decoded{insn, err}
		})
	}
	t.AddToCounters(kp.C)
	return d.insn, d.err
}
