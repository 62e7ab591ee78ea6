package soak

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind is what a step does.
type Kind uint8

// The step kinds. Each names the front door or query it exercises.
const (
	KLateInit    Kind = iota // late_initcall (the indexes are built; a fault makes one fall back)
	KRegister                // register_kprobe of a fresh struct kprobe in slot S (or of the slot's struct while it is registered: warn_kprobe_rereg)
	KRereg                   // register_kprobe of the slot's struct as its last unregistration left it
	KUnregister              // unregister_kprobe
	KEnable                  // enable_kprobe
	KDisable                 // disable_kprobe
	KBatch                   // register_kprobes of fresh structs (all or nothing)
	KBatchUnreg              // unregister_kprobes of a batch
	KKretprobe               // register_kretprobe
	KKretUnreg               // unregister_kretprobe
	KEvent                   // a kprobe_events write of one or more "p:soak/eS LOC" lines
	KEventDel                // a kprobe_events write of "-:soak/eS"
	KEventEnable             // events/soak/eS/enable
	KPerf                    // perf_event_open on the kprobe PMU
	KPerfClose               // closing the perf event
	KBPF                     // bpf(BPF_LINK_CREATE) kprobe.multi / kprobe.session on symbols
	KBPFDetach               // closing the link
	KModuleGoing             // module S goes away: MODULE_STATE_GOING, kprobes_module_callback
	KOptimize                // one run of the kprobe_optimizer worker
	KKick                    // the delayed work, if kick_kprobe_optimizer queued it
	KRange                   // Range / RangeDesc / RangeClosed [A, B)
	KOptWin                  // OptimizedWindow(A)
	KRecWin                  // RecoverWindow(A)
	KCheckOpt                // CheckOptimizedRange(A, N)
	KAddrIter                // AddrIter(N) fed Q
	numKinds
)

var kindNames = [numKinds]string{
	KLateInit: "late-init", KRegister: "kprobe", KRereg: "rereg", KUnregister: "unreg",
	KEnable: "enable", KDisable: "disable", KBatch: "batch", KBatchUnreg: "batch-unreg",
	KKretprobe: "kretprobe", KKretUnreg: "kretprobe-unreg", KEvent: "event", KEventDel: "event-del",
	KEventEnable: "event-enable", KPerf: "perf", KPerfClose: "perf-close", KBPF: "bpf",
	KBPFDetach: "bpf-detach", KModuleGoing: "module-going", KOptimize: "optimize", KKick: "kick", KRange: "range",
	KOptWin: "optwin", KRecWin: "recwin", KCheckOpt: "checkopt", KAddrIter: "addriter",
}

func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Kinds lists every step kind in order.
func Kinds() []Kind {
	out := make([]Kind, numKinds)
	for i := range out {
		out[i] = Kind(i)
	}
	return out
}

func lookupKind(s string) (Kind, bool) {
	for k, n := range kindNames {
		if n == s {
			return Kind(k), true
		}
	}
	return 0, false
}

// Target is a probe location: a symbol and offset as a user writes it, and
// the address it names (0 for a symbol that does not exist).
type Target struct {
	Sym  string
	Off  uint32
	Addr uint64
}

// String is "sym+off@0xaddr" ("@0xaddr" without a symbol).
func (t Target) String() string {
	var b strings.Builder
	if t.Sym != "" {
		b.WriteString(t.Sym)
		if t.Off != 0 {
			fmt.Fprintf(&b, "+%d", t.Off)
		}
	}
	fmt.Fprintf(&b, "@%#x", t.Addr)
	return b.String()
}

func parseTarget(s string) (Target, error) {
	loc, addr, ok := strings.Cut(s, "@")
	if !ok {
		return Target{}, fmt.Errorf("target %q: want SYM[+OFF]@0xADDR", s)
	}
	var t Target
	a, err := strconv.ParseUint(addr, 0, 64)
	if err != nil {
		return Target{}, fmt.Errorf("target %q: bad address", s)
	}
	t.Addr = a
	if loc != "" {
		sym, off, has := strings.Cut(loc, "+")
		t.Sym = sym
		if has {
			o, err := strconv.ParseUint(off, 0, 32)
			if err != nil {
				return Target{}, fmt.Errorf("target %q: bad offset", s)
			}
			t.Off = uint32(o)
		}
		if sym == "" {
			return Target{}, fmt.Errorf("target %q: empty symbol", s)
		}
	}
	return t, nil
}

// Step is one action of a campaign. Which fields matter depends on Kind;
// the rest are zero (Format omits them).
type Step struct {
	Kind Kind
	// Slot names the struct (kprobe, kretprobe, batch, event, perf event or
	// link) the step acts on. Slots of different front doors are separate.
	Slot int
	// Slots are the event slots of a multi-line kprobe_events write (one
	// per target).
	Slots []int
	// T are the targets (one for most kinds, several for batch, bpf and
	// multi-line event writes).
	T []Target
	// Post gives the probe a post handler; Disabled registers it with
	// KPROBE_FLAG_DISABLED; ByAddr passes the address instead of
	// symbol+offset; Ret asks for a return probe; On is enable (true) or
	// disable; Desc and Closed choose the Range form.
	Post, Disabled, ByAddr, Ret, On, Desc, Closed bool
	// A and B are query addresses ([A, B) or [A, B] for Range).
	A, B uint64
	// N is CheckOptimizedRange's size or AddrIter's look-back.
	N int
	// Q are AddrIter's query addresses.
	Q []uint64
}

// Format renders the step as one line: the kind, then key=value fields.
func (s Step) Format() string {
	var b strings.Builder
	b.WriteString(s.Kind.String())
	flag := func(name string, v bool) {
		if v {
			b.WriteString(" " + name)
		}
	}
	switch s.Kind {
	case KLateInit, KOptimize, KKick:
	case KEvent:
		b.WriteString(" slots=")
		for i, x := range s.Slots {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(x))
		}
	default:
		if s.Kind < KOptimize {
			fmt.Fprintf(&b, " slot=%d", s.Slot)
		}
	}
	if len(s.T) > 0 {
		b.WriteString(" at=")
		for i, t := range s.T {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(t.String())
		}
	}
	flag("post", s.Post)
	flag("disabled", s.Disabled)
	flag("byaddr", s.ByAddr)
	flag("ret", s.Ret)
	flag("on", s.On)
	flag("desc", s.Desc)
	flag("closed", s.Closed)
	switch s.Kind {
	case KRange:
		fmt.Fprintf(&b, " a=%#x b=%#x", s.A, s.B)
	case KOptWin, KRecWin:
		fmt.Fprintf(&b, " a=%#x", s.A)
	case KCheckOpt:
		fmt.Fprintf(&b, " a=%#x n=%d", s.A, s.N)
	case KAddrIter:
		fmt.Fprintf(&b, " n=%d q=", s.N)
		for i, q := range s.Q {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%#x", q)
		}
	}
	return b.String()
}

// valuedKeys are the fields written key=value; the rest are bare flags.
var valuedKeys = map[string]struct{}{"slot": {}, "slots": {}, "at": {}, "a": {}, "b": {}, "n": {}, "q": {}}

// ParseStep reads a line written by Format.
func ParseStep(line string) (Step, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return Step{}, fmt.Errorf("empty step")
	}
	k, ok := lookupKind(f[0])
	if !ok {
		return Step{}, fmt.Errorf("unknown step kind %q", f[0])
	}
	s := Step{Kind: k}
	for _, w := range f[1:] {
		key, val, hasVal := strings.Cut(w, "=")
		var err error
		switch key {
		case "post":
			s.Post = true
		case "disabled":
			s.Disabled = true
		case "byaddr":
			s.ByAddr = true
		case "ret":
			s.Ret = true
		case "on":
			s.On = true
		case "desc":
			s.Desc = true
		case "closed":
			s.Closed = true
		case "slot":
			s.Slot, err = strconv.Atoi(val)
		case "slots":
			for _, x := range strings.Split(val, ",") {
				n, e := strconv.Atoi(x)
				if e != nil {
					err = e
					break
				}
				s.Slots = append(s.Slots, n)
			}
		case "at":
			for _, x := range strings.Split(val, ",") {
				t, e := parseTarget(x)
				if e != nil {
					err = e
					break
				}
				s.T = append(s.T, t)
			}
		case "a":
			s.A, err = strconv.ParseUint(val, 0, 64)
		case "b":
			s.B, err = strconv.ParseUint(val, 0, 64)
		case "n":
			s.N, err = strconv.Atoi(val)
		case "q":
			for _, x := range strings.Split(val, ",") {
				if x == "" {
					continue
				}
				q, e := strconv.ParseUint(x, 0, 64)
				if e != nil {
					err = e
					break
				}
				s.Q = append(s.Q, q)
			}
		default:
			return Step{}, fmt.Errorf("%s: unknown field %q", f[0], w)
		}
		_, valued := valuedKeys[key]
		if err != nil || hasVal != valued {
			return Step{}, fmt.Errorf("%s: bad field %q", f[0], w)
		}
	}
	if err := s.check(); err != nil {
		return Step{}, fmt.Errorf("%s: %v", f[0], err)
	}
	return s, nil
}

// Slot counts of each front door: the live population is bounded by them
// (a few hundred probes), so a long campaign recycles structs instead of
// growing the registry.
const (
	NumKprobeSlots = 160
	NumKretSlots   = 24
	NumBatchSlots  = 12
	MaxBatch       = 6
	NumEventSlots  = 48
	NumPerfSlots   = 24
	NumBPFSlots    = 6
	MaxBPFSyms     = 4
	MaxEventLines  = 4
	MaxAddrQueries = 8
	MaxModules     = 8
)

func (s Step) check() error {
	limit := map[Kind]int{KRegister: NumKprobeSlots, KRereg: NumKprobeSlots, KUnregister: NumKprobeSlots,
		KEnable: NumKprobeSlots, KDisable: NumKprobeSlots, KBatch: NumBatchSlots, KBatchUnreg: NumBatchSlots,
		KKretprobe: NumKretSlots, KKretUnreg: NumKretSlots, KEventDel: NumEventSlots, KEventEnable: NumEventSlots,
		KPerf: NumPerfSlots, KPerfClose: NumPerfSlots, KBPF: NumBPFSlots, KBPFDetach: NumBPFSlots, KModuleGoing: MaxModules}
	if n, ok := limit[s.Kind]; ok && (s.Slot < 0 || s.Slot >= n) {
		return fmt.Errorf("slot %d outside 0..%d", s.Slot, n-1)
	}
	need := map[Kind]int{KRegister: 1, KKretprobe: 1, KPerf: 1}
	if n, ok := need[s.Kind]; ok && len(s.T) != n {
		return fmt.Errorf("wants %d target(s), has %d", n, len(s.T))
	}
	switch s.Kind {
	case KBatch:
		if len(s.T) == 0 || len(s.T) > MaxBatch {
			return fmt.Errorf("a batch holds 1..%d targets", MaxBatch)
		}
	case KBPF:
		if len(s.T) == 0 || len(s.T) > MaxBPFSyms {
			return fmt.Errorf("a link holds 1..%d symbols", MaxBPFSyms)
		}
	case KEvent:
		if len(s.T) == 0 || len(s.T) != len(s.Slots) || len(s.T) > MaxEventLines {
			return fmt.Errorf("a write holds 1..%d lines, one slot each", MaxEventLines)
		}
		for _, x := range s.Slots {
			if x < 0 || x >= NumEventSlots {
				return fmt.Errorf("slot %d outside 0..%d", x, NumEventSlots-1)
			}
		}
	case KAddrIter:
		if len(s.Q) > MaxAddrQueries {
			return fmt.Errorf("at most %d queries", MaxAddrQueries)
		}
	}
	return nil
}
