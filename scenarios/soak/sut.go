package soak

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/bpf"
	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/trace"
)

// eventGroup is the tracefs group every soak event lives in.
const eventGroup = "soak"

// Label bases: every struct kprobe a machine holds has a label that names
// its slot, the same on every machine, so answers compare across machines.
const (
	labKprobe = 1000 * (iota + 1)
	labKret
	labBatch
	labEvent
	labPerf
)

// sut is one machine under test: a booted kernel, its tracing and BPF
// layers, and the structs each slot holds.
type sut struct {
	sw   sim.Switches
	name string
	k    *image.Kernel
	m    *machine.Machine
	d    *doors.Doors
	tr   *trace.Tracing
	bk   *bpf.Kernel

	kps     [NumKprobeSlots]*kprobes.Kprobe
	krps    [NumKretSlots]*kprobes.Kretprobe
	batches [NumBatchSlots][]*kprobes.Kprobe
	perfs   [NumPerfSlots]*trace.PerfEvent
	links   [NumBPFSlots]*bpf.KprobeMultiLink
	label   map[*kprobes.Kprobe]int

	// Scratch reused by every step (the soak's own allocations matter at
	// a million steps).
	b       strings.Builder
	touched []*kprobes.Kprobe
	// stats of the last registryDigest.
	stats struct{ entries, aggr, opt int }
}

// newSUT builds a machine up to (not including) late init: the campaign
// draws when late init runs. wrapTree, if set, wraps the registry's P4
// tree (Image.WithWrapTree).
func newSUT(k *image.Kernel, sw sim.Switches, faults string, wrapTree func(kprobes.AddrTree) kprobes.AddrTree) (*sut, error) {
	f, err := sim.ParseFaults(faults)
	if err != nil {
		return nil, err
	}
	cfg := machine.DefaultConfig()
	cfg.Switches, cfg.Faults, cfg.Counters = sw, f, sim.NewCounters(false)
	cfg.WrapTree = wrapTree
	m, err := machine.New(k, cfg)
	if err != nil {
		return nil, err
	}
	if m.Syms == nil || m.Ftrace == nil {
		return nil, fmt.Errorf("soak needs the compressed kallsyms and ftrace models")
	}
	d := doors.New(m)
	return &sut{sw: sw, name: sw.Name(), k: k, m: m, d: d, tr: d.Tracing(), bk: d.BPF(true, 4), label: map[*kprobes.Kprobe]int{}}, nil
}

func errStr(err error) string {
	if err == nil {
		return "ok"
	}
	var be *kprobes.BugError
	if errors.As(err, &be) {
		return "BUG(" + be.Err.Error() + ")"
	}
	if code, reason, ok := trace.Refusal(err); ok {
		if reason.IsZero() {
			return code.Error()
		}
		return code.Error() + " (" + reason.String() + ")"
	}
	var e errno.Errno
	if errors.As(err, &e) {
		return e.Error()
	}
	return err.Error()
}

func codeStr(e errno.Errno) string {
	if e == 0 {
		return "ok"
	}
	return e.Error()
}

func (s *sut) fresh(t Target, post, disabled, byAddr bool, lab int) *kprobes.Kprobe {
	pr := probe(t, byAddr, false)
	pr.Post = post
	p, _ := pr.Kprobe()
	if disabled {
		p.Flags = kprobes.KprobeFlagDisabled
	}
	s.label[p] = lab
	return p
}

// probe is t as a front door takes it: by address when byAddr or when t
// has no symbol.
func probe(t Target, byAddr, ret bool) doors.Probe {
	if byAddr || t.Sym == "" {
		return doors.Probe{Addr: t.Addr, Return: ret}
	}
	return doors.Probe{Symbol: t.Sym, Offset: t.Off, Return: ret}
}

// apply runs one step and writes what the kernel decided to s.b: the
// result, the touched probes (label, registered, flags, state, reason) and
// any query answer. It returns the observation (valid until the next
// apply).
func (s *sut) apply(st *Step) string {
	s.b.Reset()
	s.touched = s.touched[:0]
	kp := s.m.KP
	res := func(err error) { s.b.WriteString(errStr(err)) }
	switch st.Kind {
	case KLateInit:
		res(s.m.LateInit())
	case KRegister:
		p := s.kps[st.Slot]
		if p == nil || !p.Registered() {
			p = s.fresh(st.T[0], st.Post, st.Disabled, st.ByAddr, labKprobe+st.Slot)
			s.kps[st.Slot] = p
		}
		res(kp.RegisterKprobe(p))
		s.touched = append(s.touched, p)
	case KRereg, KUnregister, KEnable, KDisable:
		// Steps on the slot's existing kprobe.
		p := s.kps[st.Slot]
		if p == nil {
			s.b.WriteString("empty")
			break
		}
		switch st.Kind {
		case KRereg:
			res(kp.RegisterKprobe(p))
		case KUnregister:
			fmt.Fprintf(&s.b, "n=%d", kp.UnregisterKprobes([]*kprobes.Kprobe{p}))
		case KEnable:
			res(kp.EnableKprobe(p))
		default:
			res(kp.DisableKprobe(p))
		}
		s.touched = append(s.touched, p)
	case KBatch:
		if ps := s.batches[st.Slot]; len(ps) > 0 && ps[0].Registered() {
			s.b.WriteString("live")
			break
		}
		ps := make([]*kprobes.Kprobe, len(st.T))
		for i, t := range st.T {
			ps[i] = s.fresh(t, st.Post && i == 0, st.Disabled && i == len(st.T)-1, st.ByAddr, labBatch+st.Slot*10+i)
		}
		s.batches[st.Slot] = ps
		n, err := kp.RegisterKprobes(ps)
		fmt.Fprintf(&s.b, "i=%d ", n)
		res(err)
		s.touched = append(s.touched, ps...)
	case KBatchUnreg:
		ps := s.batches[st.Slot]
		if len(ps) == 0 {
			s.b.WriteString("empty")
			break
		}
		fmt.Fprintf(&s.b, "n=%d", kp.UnregisterKprobes(ps))
		s.touched = append(s.touched, ps...)
	case KKretprobe:
		rp := s.krps[st.Slot]
		if rp == nil || !rp.Kp.Registered() {
			_, rp = probe(st.T[0], st.ByAddr, true).Kprobe()
			s.label[&rp.Kp] = labKret + st.Slot
			s.krps[st.Slot] = rp
		}
		res(kp.RegisterKretprobe(rp))
		s.touched = append(s.touched, &rp.Kp)
	case KKretUnreg:
		rp := s.krps[st.Slot]
		if rp == nil {
			s.b.WriteString("empty")
			break
		}
		fmt.Fprintf(&s.b, "n=%d", kp.UnregisterKretprobes([]*kprobes.Kretprobe{rp}))
		s.touched = append(s.touched, &rp.Kp)
	case KEvent:
		var w strings.Builder
		for i, t := range st.T {
			w.WriteString(probe(t, st.ByAddr, st.Ret).EventLine(eventGroup + "/e" + strconv.Itoa(st.Slots[i])))
			w.WriteByte('\n')
		}
		outs, err := s.d.WriteKprobeEvents(w.String())
		res(err)
		for i, o := range outs {
			if !o.Attempted {
				break
			}
			fmt.Fprintf(&s.b, " [%d %s %s]", i, codeStr(o.Code), o.Reason)
		}
		for _, x := range st.Slots {
			s.touchEvent(x)
		}
	case KEventDel:
		s.touchEvent(st.Slot) // before: the probes being released
		outs, err := s.d.WriteKprobeEvents(fmt.Sprintf("-:%s/e%d\n", eventGroup, st.Slot))
		res(err)
		if len(outs) == 1 {
			fmt.Fprintf(&s.b, " [%s %s]", codeStr(outs[0].Code), outs[0].Reason)
		}
	case KEventEnable:
		ev := s.tr.LookupEvent(eventGroup, "e"+strconv.Itoa(st.Slot))
		if ev == nil {
			s.b.WriteString("noevent")
			break
		}
		res(s.d.EnableEvent(ev, st.On))
		s.touchEvent(st.Slot)
	case KPerf:
		if s.perfs[st.Slot] != nil {
			s.b.WriteString("open")
			break
		}
		pe, err := s.d.PerfOpen(probe(st.T[0], st.ByAddr, st.Ret))
		res(err)
		if pe != nil {
			s.perfs[st.Slot] = pe
			s.label[pe.TK.Kp] = labPerf + st.Slot
			s.touched = append(s.touched, pe.TK.Kp)
		}
	case KPerfClose:
		pe := s.perfs[st.Slot]
		if pe == nil {
			s.b.WriteString("closed")
			break
		}
		s.d.PerfClose(pe)
		s.perfs[st.Slot] = nil
		s.b.WriteString("ok")
		s.touched = append(s.touched, pe.TK.Kp)
	case KBPF:
		if s.links[st.Slot] != nil {
			s.b.WriteString("open")
			break
		}
		at := bpf.AttachKprobeMulti
		if st.On {
			at = bpf.AttachKprobeSession
		}
		attr := bpf.KprobeMultiAttr{Cnt: uint32(len(st.T))}
		for _, t := range st.T {
			if st.ByAddr {
				attr.Addrs = append(attr.Addrs, t.Addr)
			} else {
				attr.Syms = append(attr.Syms, t.Sym)
			}
		}
		if st.Ret && !st.On {
			attr.Flags = 1 // BPF_F_KPROBE_MULTI_RETURN
		}
		l, err := s.bk.KprobeMultiLinkAttach(s.m.C, &bpf.Prog{Name: "soak", ExpectedAttachType: at}, attr)
		res(err)
		if l != nil {
			s.links[st.Slot] = l
			fmt.Fprintf(&s.b, " addrs=%x", l.Addrs)
		}
	case KBPFDetach:
		l := s.links[st.Slot]
		if l == nil {
			s.b.WriteString("closed")
			break
		}
		res(s.bk.ReleaseLink(s.m.C, l))
		s.links[st.Slot] = nil
	case KModuleGoing:
		if st.Slot >= len(s.k.Modules) {
			s.b.WriteString("nomodule")
			break
		}
		// The machines of a campaign share their image copy: the first
		// sets the state, every one runs its own notifier.
		m := s.k.Modules[st.Slot]
		m.State = image.ModuleGoing
		fmt.Fprintf(&s.b, "killed=%d", kp.KprobesModuleCallback(m, image.ModuleGoing))
	case KOptimize:
		kp.RunOptimizer()
		s.b.WriteString("ok")
	case KKick:
		if kp.KickPending() {
			kp.RunOptimizer()
			s.b.WriteString("ran")
		} else {
			s.b.WriteString("idle")
		}
	case KRange, KOptWin, KRecWin, KCheckOpt, KAddrIter:
		s.query(st)
	}
	for _, p := range s.touched {
		s.b.WriteString(" | ")
		s.describeProbe(p)
	}
	return s.b.String()
}

func (s *sut) touchEvent(slot int) {
	ev := s.tr.LookupEvent(eventGroup, "e"+strconv.Itoa(slot))
	if ev == nil {
		return
	}
	for i, tk := range ev.Probes() {
		if tk.Kp == nil {
			continue
		}
		if _, ok := s.label[tk.Kp]; !ok {
			s.label[tk.Kp] = labEvent + slot*10 + i
		}
		s.touched = append(s.touched, tk.Kp)
	}
}

func (s *sut) lab(p *kprobes.Kprobe) int {
	if l, ok := s.label[p]; ok {
		return l
	}
	return -1
}

// describeProbe writes what the kernel decided about p: registered, flags
// (gone, disabled, optimized, ftrace, on-entry), state, address and reason.
func (s *sut) describeProbe(p *kprobes.Kprobe) {
	fmt.Fprintf(&s.b, "%d reg=%t flags=%d state=%s addr=%#x why=%q", s.lab(p), p.Registered(), p.Flags, p.State(), p.Addr, p.Why().String())
}

// entryDigest mixes what the registry holds for one entry: its address,
// aggregator-ness, flags, optimizer list, prepared optinsn size, post
// handler and its children by label, in list order.
func (s *sut) entryDigest(p *kprobes.Kprobe) uint64 {
	h := mix(p.Addr, uint64(p.Flags)|uint64(p.Queue)<<8|uint64(p.Opt.Size)<<16|b2u(p.IsAggr())<<32|b2u(p.HasPostHandler)<<33)
	if p.IsAggr() {
		for _, c := range p.Children() {
			h = mix(h, uint64(s.lab(c))<<32|uint64(c.Flags))
		}
	} else {
		h = mix(h, uint64(s.lab(p)))
	}
	return h
}

func (s *sut) describeEntry(p *kprobes.Kprobe) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%#x flags=%d queue=%d optsize=%d post=%t", p.Addr, p.Flags, p.Queue, p.Opt.Size, p.HasPostHandler)
	if p.IsAggr() {
		b.WriteString(" aggr[")
		for i, c := range p.Children() {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%d/%d", s.lab(c), c.Flags)
		}
		b.WriteString("]")
	} else {
		fmt.Fprintf(&b, " %d", s.lab(p))
	}
	return b.String()
}

// registryDigest is an order-independent digest of every hashed entry
// (read through Registry.Entries, simulator-side and uncounted), plus the
// entry count and the optimizer's kick.
func (s *sut) registryDigest() uint64 {
	var h uint64
	es := s.m.KP.Reg.Entries()
	s.stats.entries, s.stats.aggr, s.stats.opt = len(es), 0, 0
	for _, p := range es {
		h += s.entryDigest(p)
		if p.IsAggr() {
			s.stats.aggr++
		}
		if p.Optimized() {
			s.stats.opt++
		}
	}
	h = mix(h, uint64(len(es))<<1|b2u(s.m.KP.KickPending()))
	// Beyond the registry: the slot pages and structs the probes hold
	// (kprobe.structs, insn_slots, optinsn_slots bytes: the same slots
	// whatever the index), the tracefs events and the BPF links.
	for _, nb := range s.m.KP.Bytes() {
		switch nb.Name {
		case "kprobe.structs.bytes", "kprobe.insn_slots.bytes", "kprobe.optinsn_slots.bytes":
			h = mix(h, uint64(nb.Bytes))
		}
	}
	return mix(h, uint64(s.tr.NumEvents())<<32|uint64(s.tr.NumTraceEvents())<<8|uint64(len(s.bk.Links())))
}

func (s *sut) registryDump() []string {
	var out []string
	for _, p := range s.m.KP.Reg.Entries() {
		out = append(out, s.describeEntry(p))
	}
	out = append(out, fmt.Sprintf("len=%d kick=%t", s.m.KP.Reg.Len(), s.m.KP.KickPending()))
	for _, nb := range s.m.KP.Bytes() {
		switch nb.Name {
		case "kprobe.structs.bytes", "kprobe.insn_slots.bytes", "kprobe.optinsn_slots.bytes":
			out = append(out, fmt.Sprintf("%s=%d", nb.Name, nb.Bytes))
		}
	}
	out = append(out, fmt.Sprintf("events=%d trace-events=%d links=%d", s.tr.NumEvents(), s.tr.NumTraceEvents(), len(s.bk.Links())))
	return out
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// mix is a splitmix64 step over a and b.
func mix(a, b uint64) uint64 {
	z := a ^ (b + 0x9e3779b97f4a7c15 + a<<6 + a>>2)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
