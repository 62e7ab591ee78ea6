package soak

import (
	"math/rand/v2"
	"slices"

	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/sim"
)

// kindWeights is the step mix (per mille, roughly). Registration and
// unregistration balance so the live population stays bounded by the
// slots; the small sample and near-opt classes make aggregation and
// optimized-region overlaps common.
var kindWeights = [numKinds]int{
	KLateInit: 2, KRegister: 150, KRereg: 30, KUnregister: 110, KEnable: 40, KDisable: 40,
	KBatch: 25, KBatchUnreg: 20, KKretprobe: 25, KKretUnreg: 20,
	KEvent: 40, KEventDel: 30, KEventEnable: 45, KPerf: 25, KPerfClose: 20,
	KBPF: 10, KBPFDetach: 8, KOptimize: 30, KKick: 60,
	KRange: 40, KOptWin: 50, KRecWin: 40, KCheckOpt: 40, KAddrIter: 40,
}

var classWeights = map[string]int{
	ClassEntry: 25, ClassMid: 12, ClassMidBad: 4, ClassBlacklist: 4, ClassReserved: 8,
	ClassFtrace: 6, ClassModule: 8, ClassZone: 3, ClassInit: 2, ClassDup: 4,
	ClassSample: 14, ClassNearOpt: 10, ClassMissing: 1,
}

// gen draws steps from one PCG stream.
type gen struct {
	r       *rand.Rand
	img     *Image
	kindCum []int
	clsCum  []int
}

func newGen(img *Image, seed, stream uint64) *gen {
	g := &gen{r: rand.New(rand.NewPCG(seed, stream)), img: img}
	t := 0
	for _, w := range kindWeights {
		t += w
		g.kindCum = append(g.kindCum, t)
	}
	t = 0
	for _, c := range img.Classes {
		t += classWeights[c]
		g.clsCum = append(g.clsCum, t)
	}
	return g
}

func pickCum(r *rand.Rand, cum []int) int {
	x := r.IntN(cum[len(cum)-1])
	i, _ := slices.BinarySearch(cum, x+1)
	return i
}

func (g *gen) target() Target {
	c := g.img.Classes[pickCum(g.r, g.clsCum)]
	ts := g.img.Pool[c]
	return ts[g.r.IntN(len(ts))]
}

// addr draws a query address near a target (most answers are non-empty).
func (g *gen) addr() uint64 {
	for {
		a := g.target().Addr
		if a == 0 {
			continue
		}
		// The probe addresses themselves and the byte after them are the
		// bounds an off-by-one gets wrong: half the draws land there.
		switch x := g.r.IntN(10); {
		case x < 3:
			return a
		case x < 5:
			return a + 1
		}
		return a + uint64(g.r.IntN(24)) - 4
	}
}

// Steps draws n steps. Late init runs at a drawn step in the first part of
// the campaign, so probes are registered both before and after it.
func (g *gen) Steps(n int) []Step {
	out := make([]Step, 0, n)
	late := g.r.IntN(max(1, min(n, 1500)))
	for i := 0; i < n; i++ {
		if i == late {
			out = append(out, Step{Kind: KLateInit})
			continue
		}
		out = append(out, g.step())
	}
	// Each module goes away in one campaign of three, somewhere after the
	// first quarter (drawn last, so the other steps do not depend on it).
	for m := range min(len(g.img.K.Modules), MaxModules) {
		if n >= 8 && g.r.IntN(3) == 0 {
			at := n/4 + g.r.IntN(n-n/4)
			out[at] = Step{Kind: KModuleGoing, Slot: m}
		}
	}
	return out
}

func (g *gen) step() Step {
	r := g.r
	k := Kind(pickCum(r, g.kindCum))
	s := Step{Kind: k}
	coin := func(pct int) bool { return r.IntN(100) < pct }
	switch k {
	case KRegister:
		s.Slot = r.IntN(NumKprobeSlots)
		s.T = []Target{g.target()}
		s.Post, s.Disabled, s.ByAddr = coin(20), coin(15), coin(25)
	case KRereg, KUnregister, KEnable, KDisable:
		s.Slot = r.IntN(NumKprobeSlots)
	case KBatch:
		s.Slot = r.IntN(NumBatchSlots)
		for n := 1 + r.IntN(MaxBatch); n > 0; n-- {
			s.T = append(s.T, g.target())
		}
		s.Post, s.Disabled, s.ByAddr = coin(20), coin(15), coin(25)
	case KBatchUnreg:
		s.Slot = r.IntN(NumBatchSlots)
	case KKretprobe:
		s.Slot = r.IntN(NumKretSlots)
		s.T = []Target{g.target()}
		s.ByAddr = coin(25)
	case KKretUnreg:
		s.Slot = r.IntN(NumKretSlots)
	case KEvent:
		for n := 1 + r.IntN(MaxEventLines); n > 0; n-- {
			s.Slots = append(s.Slots, r.IntN(NumEventSlots))
			s.T = append(s.T, g.target())
		}
		s.Ret, s.ByAddr = coin(20), coin(20)
	case KEventDel:
		s.Slot = r.IntN(NumEventSlots)
	case KEventEnable:
		s.Slot = r.IntN(NumEventSlots)
		s.On = coin(65)
	case KPerf:
		s.Slot = r.IntN(NumPerfSlots)
		s.T = []Target{g.target()}
		s.Ret, s.ByAddr = coin(20), coin(25)
	case KPerfClose:
		s.Slot = r.IntN(NumPerfSlots)
	case KBPF:
		s.Slot = r.IntN(NumBPFSlots)
		seen := map[string]bool{}
		for n := 1 + r.IntN(MaxBPFSyms); n > 0; n-- {
			t := g.target()
			if t.Sym == "" || seen[t.Sym] {
				continue
			}
			seen[t.Sym] = true
			// kprobe.multi attaches at symbols (or their addresses).
			s.T = append(s.T, Target{Sym: t.Sym, Addr: t.Addr - uint64(t.Off)})
		}
		if len(s.T) == 0 {
			s.T = []Target{g.img.Pool[ClassSample][0]}
		}
		s.On, s.Ret, s.ByAddr = coin(30), coin(30), coin(20)
	case KBPFDetach:
		s.Slot = r.IntN(NumBPFSlots)
	case KRange:
		s.A = g.addr()
		switch x := r.IntN(10); {
		case x < 6:
			s.B = s.A + uint64(r.IntN(64))
		case x < 9:
			s.B = s.A + uint64(r.IntN(1<<16))
		default:
			s.A, s.B = 0, ^uint64(0)
		}
		if coin(10) {
			s.A, s.B = s.B, s.A // empty (or one address when closed)
		}
		s.Desc, s.Closed = coin(50), coin(40)
	case KOptWin, KRecWin:
		s.A = g.addr()
	case KCheckOpt:
		s.A = g.addr()
		s.N = r.IntN(kprobes.MaxOptimizedLength + 2)
	case KAddrIter:
		s.N = r.IntN(kprobes.MaxLookBack + 1)
		if coin(3) {
			s.N = kprobes.MaxLookBack + 1 // refused: ErrLookBack
		}
		q := g.addr() - 8
		for n := 1 + r.IntN(MaxAddrQueries); n > 0; n-- {
			q += uint64(r.IntN(6))
			s.Q = append(s.Q, q)
		}
		if coin(5) && len(s.Q) > 1 {
			s.Q[len(s.Q)-1] = s.Q[0] - 1 // a query below the last: ErrNotMonotonic
		}
	}
	return s
}

// indexFaults are the late-init index allocations a campaign may make
// fail on an indexed machine: the build falls back to the linear walk, and
// every decision must stay the same.
var indexFaults = []string{"jump_label.index.alloc", "static_call.index.alloc", "bug.index.alloc",
	"kprobe_blacklist.index.alloc", "bug.module_index.alloc"}

// sharedFaults are the points a campaign may make fail on its N-th hit on
// every machine, none included: slot pages, the aggregator, the
// trace_kprobe, the tracefs directory, an ftrace hash, fprobe's rethook.
// The designs' own allocations (maple.node.alloc, rhashtable.tbl.alloc)
// are not among them: none never makes them.
var sharedFaults = []struct {
	point  string
	maxHit int // the hit drawn is 1..maxHit: a campaign reaches it
}{{"kprobe.insn_slot.alloc", 1}, {"kprobe.optinsn_slot.alloc", 3}, {"kprobe.aggr.alloc", 300},
	{"trace_kprobe.alloc", 150}, {"tracefs.dir", 150}, {"ftrace.hash.alloc", 200}, {"fprobe.rethook.alloc", 40}}

// conflicts are the pairs Validate refuses together.
var conflicts = [][2]sim.Switch{{sim.FtraceSingleLookup, sim.FtraceSingleLookupV1}, {sim.KprobeHashBits, sim.KprobeRhashtable}}

// maxSoakHashBits bounds the sampled kprobe-hash-bits=B: 2^14 buckets is
// past L2 already (the cost tiers all appear) without each campaign's
// machines allocating 2^20 bucket heads.
const maxSoakHashBits = 14

// SampleSet draws a random valid, non-empty switch set. One draw in eight
// is a preset (series or all), one a single switch with what it requires
// (an ablation run); the rest take each switch with a density drawn from
// 1/5, 1/2 or 4/5 (so sparse and dense sets both appear; one in four of
// them without the P4 tree and the switches that need it), closed over
// requirements, one of each conflicting pair dropped. kprobe-hash-bits
// gets a random B in 6..maxSoakHashBits.
func SampleSet(r *rand.Rand) sim.Switches {
	all := sim.AllSwitches()
	with := func(ss sim.Switches, s sim.Switch) sim.Switches {
		if s == sim.KprobeHashBits {
			return ss.WithHashBits(uint(sim.MinHashBits + r.IntN(maxSoakHashBits-sim.MinHashBits+1)))
		}
		for _, t := range s.Closure().List() {
			if !ss.Has(t) {
				ss = ss.With(t)
			}
		}
		return ss
	}
	for {
		var ss sim.Switches
		switch x := r.IntN(8); {
		case x == 0:
			ss = []sim.Switches{sim.PresetSeries.Set, sim.PresetAll.Set}[r.IntN(2)]
		case x == 1:
			ss = with(0, all[r.IntN(len(all))])
		default:
			pct := []int{20, 50, 80}[r.IntN(3)]
			// Seven switches need the P4 tree: one draw in four leaves it
			// (and them) out, so the hash-only forms get their share.
			noTree := r.IntN(4) == 0
			for _, s := range all {
				if noTree && (s == sim.KprobeTree || sim.KprobeTree.Dependents().Has(s)) {
					continue
				}
				if r.IntN(100) < pct {
					ss = with(ss, s)
				}
			}
		}
		for _, c := range conflicts {
			if ss.Has(c[0]) && ss.Has(c[1]) {
				ss = ss.Without(c[r.IntN(2)])
			}
		}
		if ss != 0 && ss.Validate() == nil {
			return ss
		}
	}
}
