// Package bpf models the kernel side of BPF kprobe attachment: the
// bpf(BPF_LINK_CREATE) syscall and kernel/trace/bpf_trace.c's
// bpf_kprobe_multi_link_attach (kprobe.multi, kretprobe.multi and
// kprobe.session links over fprobe), as Linux resolves a link's symbols
// (copy_user_syms, sort_r, ftrace_lookup_symbols), takes module references
// (get_modules_for_addrs) and registers one fprobe per link
// (register_fprobe_ips).
//
// The generation is the image's (Kernel.Gen; gen.go's fact table):
// 6.1.192 as Debian ships it (no kprobe.session, no MAX_KPROBE_MULTI_CNT,
// no module references, an ftrace_lookup_symbols that never looks at
// modules, a rethook fprobe with one kzalloc per return node); 6.12.117
// (session links, -E2BIG above 2^20 addresses, link_create.flags checked,
// get_modules_for_addrs, module symbols after vmlinux, a rethook fprobe
// on an objpool); 7.3 (as 6.12 plus the kprobe_write_ctx refusal, the
// cnt == 1 lookup fast path, and the fgraph fprobe on shared ops). All
// refuse every kprobe-multi link with -EOPNOTSUPP when CONFIG_FPROBE is
// off — the pinned Debian 6.1 kernel's configuration.
package bpf

import (
	"fmt"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/ftrace"
	"github.com/kpsim/kpsim/ftrace/fprobe"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/lib"
	"github.com/kpsim/kpsim/sim"
)

// AttachType is enum bpf_attach_type, the values this model uses.
type AttachType int

const (
	AttachPerfEvent     AttachType = 41 // BPF_PERF_EVENT
	AttachKprobeMulti   AttachType = 42 // BPF_TRACE_KPROBE_MULTI
	AttachKprobeSession AttachType = 56 // BPF_TRACE_KPROBE_SESSION (v6.10; 6.12.117, 7.3)
)

func (a AttachType) String() string {
	switch a {
	case AttachPerfEvent:
		return "BPF_PERF_EVENT"
	case AttachKprobeMulti:
		return "BPF_TRACE_KPROBE_MULTI"
	case AttachKprobeSession:
		return "BPF_TRACE_KPROBE_SESSION"
	}
	return fmt.Sprintf("attach_type(%d)", int(a))
}

// FKprobeMultiReturn is BPF_F_KPROBE_MULTI_RETURN.
const FKprobeMultiReturn = 1 << 0

// MaxKprobeMultiCnt is MAX_KPROBE_MULTI_CNT (v6.7+: 6.12.117, 7.3).
const MaxKprobeMultiCnt = 1 << 20

// Prog is the part of a loaded struct bpf_prog the attach path reads.
type Prog struct {
	Name               string
	ExpectedAttachType AttachType
	Sleepable          bool
	// KprobeWriteCtx is prog->aux->kprobe_write_ctx (7.3: the verifier
	// saw the program write its context), which 7.3's
	// bpf_kprobe_multi_link_attach refuses.
	KprobeWriteCtx bool
}

// KprobeMultiAttr is attr->link_create for a kprobe-multi link.
type KprobeMultiAttr struct {
	LinkFlags uint32 // link_create.flags (must be 0)
	Flags     uint32 // kprobe_multi.flags
	Syms      []string
	Addrs     []uint64
	Cookies   []uint64
	Cnt       uint32
}

// Kconfig is the part of the kernel configuration these paths test.
type Kconfig struct {
	// FPROBE is CONFIG_FPROBE: without it bpf_kprobe_multi_link_attach is
	// the -EOPNOTSUPP stub.
	FPROBE bool
}

// Kernel is the modelled kernel the attach paths run on.
type Kernel struct {
	// Gen is the kernel generation (the image's; GenUnknown reads as
	// 6.1). gen.go's facts follow it.
	Gen     image.Generation
	Kconfig Kconfig
	Ftrace  *ftrace.Ftrace
	Fprobe  *fprobe.Env
	// Syms answers the module address lookups.
	Syms kallsyms.Walker
	// Modules are the loaded modules (image.Kernel.Modules).
	Modules []*image.Module
	// Lookup is the cnt == 1 fast path of ftrace_lookup_symbols.
	Lookup ftrace.LookupMode

	// Faults injects FaultKprobeMultiAlloc; nil injects nothing.
	Faults *sim.Faults

	g      *genFacts
	why    string // the last attach's generation-specific refusal (LastRefusal)
	links  []*KprobeMultiLink
	nextID int
	modRef map[string]int
}

// FaultKprobeMultiAlloc makes one allocation of
// kernel/trace/bpf_trace.c:bpf_kprobe_multi_link_attach fail, in the order
// the kernel makes them: the addrs array, the cookies array (when given),
// copy_user_syms' syms and buf arrays (for names), the link. Each is
// -ENOMEM, the arrays before it kvfree'd (goto error): no link, no fprobe.
var FaultKprobeMultiAlloc = sim.NewFaultPoint("bpf.kprobe_multi.alloc",
	"bpf_kprobe_multi_link_attach: a kvmalloc_array (addrs, cookies, copy_user_syms' syms or buf) or the link's kzalloc fails: -ENOMEM, nothing attached")

// alloc counts one allocation of the attach and reports an injected failure.
func (k *Kernel) alloc(count func()) bool {
	count()
	return k.Faults.Fail(FaultKprobeMultiAlloc)
}

// KprobeMultiLink is one struct bpf_kprobe_multi_link.
type KprobeMultiLink struct {
	ID      int
	Prog    *Prog
	Addrs   []uint64 // symbol addresses (or the user's addresses)
	Cookies []uint64
	Mods    []string // modules referenced (get_modules_for_addrs)
	Fprobe  *fprobe.Fprobe
	Session bool
	Return  bool
}

// Links returns the live links.
func (k *Kernel) Links() []*KprobeMultiLink { return k.links }

// Ops of the link-create path. Weights: weights.go.
var (
	OpSyscall = sim.NewOp("bpf.syscall", wSyscall, rSyscall,
		"one bpf(2) syscall entry/exit with copy_from_bpfptr of union bpf_attr")
	OpCopyName = sim.NewOp("bpf.copy_user_syms.name", wCopyName, rCopyName,
		"copy_user_syms: one __get_user of a name pointer and the strncpy_from_user set-up (stac/clac, bounds)")
	OpUserByte = sim.NewOp("bpf.user.byte", wUserByte, rUserByte,
		"one byte of a name copied by strncpy_from_user (word-at-a-time loop)")
	OpKmalloc = sim.NewOp("mm.kmalloc", wKmalloc, rKmalloc,
		"one kmalloc/kzalloc of a small object (kvmalloc below the vmalloc threshold, the link)")
	OpVmallocPage = sim.NewOp("mm.vmalloc.page", wVmallocPage, rVmallocPage,
		"one 4 KiB page of a kvmalloc that falls back to vmalloc (alloc_pages_bulk + the PTE of vmap_pages_range)")
	OpSortCmp = sim.NewOp("bpf.sort.cmp", wSortCmp, rSortCmp,
		"one comparison of sort_r (symbols_cmp_r on names, bpf_kprobe_multi_cookie_cmp on addresses); name characters are kallsyms.chr_cmp")
	OpLinkPrime = sim.NewOp("bpf.link.prime", wLinkPrime, rLinkPrime,
		"bpf_link_init + bpf_link_prime (link id from the idr, anon_inode_getfile, get_unused_fd_flags) + bpf_link_settle (fd_install)")
	OpModBounds = sim.NewOp("module.addr.bounds", wModBounds, rModBounds,
		"__module_address's module_addr_min/max test for one address (get_modules_for_addrs)")
)

// Phases of a BPF attach.
var (
	PhaseLinkCreate = sim.NewPhase("bpf.link_create",
		"bpf(BPF_LINK_CREATE) outside symbol resolution and fprobe registration: attr checks, copy_user_syms, sort_r, allocations, link prime, get_modules_for_addrs")
	PhaseResolve = sim.NewPhase("bpf.resolve",
		"symbol resolution in the kernel: ftrace_lookup_symbols (kallsyms_on_each_symbol walk or the cnt == 1 fast path)")
	PhaseFprobe = sim.NewPhase("bpf.fprobe",
		"register_fprobe_ips: ftrace_set_filter_ips (ftrace_location per address, hash build), rethook nodes, register_ftrace_function (record walks, ftrace_replace_code)")
)

// kvmalloc counts kvmalloc(size): kmalloc up to KMALLOC_MAX_CACHE_SIZE
// (8 KiB with SLUB), else vmalloc's pages.
func kvmalloc(c *sim.Counters, size int) {
	if size <= 8192 {
		c.Inc(OpKmalloc)
		return
	}
	c.Add(OpVmallocPage, uint64((size+4095)/4096))
}

// isKprobeMulti is is_kprobe_multi(prog) (6.12.117, 7.3).
func isKprobeMulti(p *Prog) bool {
	return p.ExpectedAttachType == AttachKprobeMulti || p.ExpectedAttachType == AttachKprobeSession
}

// KprobeMultiLinkAttach models kernel/trace/bpf_trace.c:
// bpf_kprobe_multi_link_attach(attr, prog) of the Kernel's generation,
// reached from bpf(BPF_LINK_CREATE) → link_create. It returns the link
// (its fd) or the kernel's error. Counts land in PhaseLinkCreate,
// PhaseResolve and PhaseFprobe.
func (k *Kernel) KprobeMultiLinkAttach(c *sim.Counters, prog *Prog, attr KprobeMultiAttr) (*KprobeMultiLink, error) {
	prev := c.Enter(PhaseLinkCreate)
	defer c.Enter(prev)
	c.Inc(OpSyscall)
	g := k.facts()
	k.why = ""
	// link_create: a BPF_PROG_TYPE_KPROBE program links with
	// BPF_PERF_EVENT or BPF_TRACE_KPROBE_MULTI (6.12+: or
	// BPF_TRACE_KPROBE_SESSION); anything else is -EINVAL before
	// bpf_kprobe_multi_link_attach (kernel/bpf/syscall.c:link_create).
	switch prog.ExpectedAttachType {
	case AttachKprobeMulti:
	case AttachKprobeSession:
		if !g.session {
			k.why = "link_create (6.1.192, kernel/bpf/syscall.c): no BPF_TRACE_KPROBE_SESSION before 6.10"
			return nil, errno.EINVAL
		}
	default:
		return nil, errno.EINVAL
	}
	if !k.Kconfig.FPROBE {
		return nil, errno.EOPNOTSUPP // the !CONFIG_FPROBE stub
	}
	session := prog.ExpectedAttachType == AttachKprobeSession
	// 6.1.192: expected_attach_type != BPF_TRACE_KPROBE_MULTI; 6.12+:
	// attr->link_create.flags, then !is_kprobe_multi(prog).
	if g.linkFlags && attr.LinkFlags != 0 || !isKprobeMulti(prog) {
		return nil, errno.EINVAL
	}
	if prog.Sleepable {
		return nil, errno.EINVAL
	}
	if g.writeCtx && prog.KprobeWriteCtx {
		k.why = "bpf_kprobe_multi_link_attach (7.3): prog->aux->kprobe_write_ctx, writing to context is not allowed for kprobes"
		return nil, errno.EINVAL
	}
	if attr.Flags&^FKprobeMultiReturn != 0 {
		return nil, errno.EINVAL
	}
	if (attr.Addrs != nil) == (attr.Syms != nil) {
		return nil, errno.EINVAL
	}
	cnt := int(attr.Cnt)
	if cnt == 0 {
		return nil, errno.EINVAL
	}
	if g.maxCnt && cnt > MaxKprobeMultiCnt {
		k.why = fmt.Sprintf("bpf_kprobe_multi_link_attach (%s, 6.12+): cnt %d > MAX_KPROBE_MULTI_CNT", g.gen, cnt)
		return nil, errno.E2BIG
	}
	// The user arrays must hold cnt entries (copy_from_user / __get_user
	// beyond them faults).
	if attr.Addrs != nil && len(attr.Addrs) < cnt || attr.Syms != nil && len(attr.Syms) < cnt ||
		attr.Cookies != nil && len(attr.Cookies) < cnt {
		return nil, EFAULT
	}
	if k.alloc(func() { kvmalloc(c, cnt*8) }) { // addrs
		return nil, errno.ENOMEM
	}
	addrs := make([]uint64, cnt)
	var cookies []uint64
	if attr.Cookies != nil {
		if k.alloc(func() { kvmalloc(c, cnt*8) }) {
			return nil, errno.ENOMEM
		}
		cookies = append([]uint64(nil), attr.Cookies[:cnt]...)
		c.Add(OpUserByte, uint64(cnt*8))
	}
	if attr.Addrs != nil {
		copy(addrs, attr.Addrs[:cnt])
		c.Add(OpUserByte, uint64(cnt*8))
	} else {
		syms, err := k.copyUserSyms(c, attr.Syms[:cnt])
		if err != nil {
			return nil, err
		}
		var swap func(a, b int)
		if cookies != nil {
			swap = func(a, b int) { cookies[a], cookies[b] = cookies[b], cookies[a] }
		}
		fprobe.SortSyms(c, syms, OpSortCmp, swap) // sort_r(symbols_cmp_r, symbols_swap_r)
		c.Enter(PhaseResolve)
		err = k.Ftrace.LookupSymbols(c, syms, addrs, k.Lookup)
		c.Enter(PhaseLinkCreate)
		if err != nil {
			return nil, err
		}
	}
	if k.alloc(func() { c.Inc(OpKmalloc) }) { // the link
		return nil, errno.ENOMEM
	}
	c.Inc(OpLinkPrime)
	link := &KprobeMultiLink{Prog: prog, Addrs: addrs, Cookies: cookies, Session: session,
		Return: attr.Flags&FKprobeMultiReturn != 0}
	// 6.12+: entry handler unless BPF_F_KPROBE_MULTI_RETURN, exit
	// handler for a return or session link, entry_data_size 8 for a
	// session. 6.1.192 sets exactly one of them (exit for a return link):
	// the same for the links it accepts (no session).
	fp := &fprobe.Fprobe{EntryHandler: !link.Return, ExitHandler: link.Return || session}
	if session {
		fp.EntryDataSize = 8
	}
	if cookies != nil {
		// sort_r(addrs, bpf_kprobe_multi_cookie_cmp, ..._swap).
		sortAddrs(c, addrs, cookies)
	}
	if g.moduleRefs { // 6.12+: get_modules_for_addrs
		mods, err := k.getModulesForAddrs(c, addrs)
		if err != nil {
			return nil, err
		}
		link.Mods = mods
	}
	k.nextID++
	link.ID = k.nextID
	fp.Name = fmt.Sprintf("link%d", link.ID)
	c.Enter(PhaseFprobe)
	err := k.Fprobe.RegisterFprobeIPs(c, fp, addrs)
	c.Enter(PhaseLinkCreate)
	if err != nil {
		k.why = k.Fprobe.LastRefusal()
		k.putModules(link.Mods)
		return nil, err // bpf_link_cleanup
	}
	link.Fprobe = fp
	k.links = append(k.links, link)
	return link, nil
}

// LastRefusal is the reason of the last attach's refusal when it exists
// only in some generations ("link_create (6.1.192 ...): no
// BPF_TRACE_KPROBE_SESSION"), naming the generation and the kernel
// function; "" otherwise.
func (k *Kernel) LastRefusal() string { return k.why }

// EFAULT is a user array shorter than cnt.
const EFAULT = errno.EFAULT

// copyUserSyms models copy_user_syms: kvmalloc cnt pointers and cnt ×
// KSYM_NAME_LEN bytes, then per name __get_user + strncpy_from_user; a
// name of KSYM_NAME_LEN bytes or more is -E2BIG. A NUL cuts a name, as C.
func (k *Kernel) copyUserSyms(c *sim.Counters, usyms []string) ([]string, error) {
	cnt := len(usyms)
	if k.alloc(func() { kvmalloc(c, cnt*8) }) || k.alloc(func() { kvmalloc(c, cnt*kallsyms.KsymNameLen) }) {
		return nil, errno.ENOMEM
	}
	out := make([]string, cnt)
	for i, s := range usyms {
		c.Inc(OpCopyName)
		if j := indexNul(s); j >= 0 {
			s = s[:j]
		}
		if len(s) >= kallsyms.KsymNameLen {
			c.Add(OpUserByte, kallsyms.KsymNameLen)
			return nil, errno.E2BIG
		}
		c.Add(OpUserByte, uint64(len(s)+1))
		out[i] = s
	}
	return out, nil
}

func indexNul(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return i
		}
	}
	return -1
}

// sortAddrs is sort_r(addrs, cnt, bpf_kprobe_multi_cookie_cmp,
// bpf_kprobe_multi_cookie_swap): the exact heapsort, cookies following.
func sortAddrs(c *sim.Counters, addrs, cookies []uint64) {
	var n uint64
	lib.KernelSort(len(addrs), func(a, b int) int {
		n++
		switch {
		case addrs[a] < addrs[b]:
			return -1
		case addrs[a] > addrs[b]:
			return 1
		}
		return 0
	}, func(a, b int) {
		addrs[a], addrs[b] = addrs[b], addrs[a]
		cookies[a], cookies[b] = cookies[b], cookies[a]
	})
	c.Add(OpSortCmp, n)
}

// moduleOf is __module_address (UNFORMED modules skipped).
func (k *Kernel) moduleOf(c *sim.Counters, addr uint64) *image.Module {
	c.Inc(OpModBounds)
	lo, hi := uint64(0), uint64(0)
	for _, m := range k.Modules {
		if m.State == image.ModuleUnformed || m.Text == nil {
			continue
		}
		if lo == 0 || m.Text.Start < lo {
			lo = m.Text.Start
		}
		if e := m.Text.End(); e > hi {
			hi = e
		}
		if m.Init != nil {
			lo, hi = min(lo, m.Init.Start), max(hi, m.Init.End())
		}
	}
	if addr < lo || addr >= hi {
		return nil
	}
	c.Inc(kallsyms.OpModLookup)
	for _, m := range k.Modules {
		if m.State != image.ModuleUnformed && m.Contains(addr) {
			return m
		}
	}
	return nil
}

// getModulesForAddrs models kernel/trace/bpf_trace.c:get_modules_for_addrs
// (6.12.117, 7.3; absent in 6.1.192): per address
// __module_address, each module once (has_module's scan), try_module_get
// (a module going away → -EINVAL in the kernel's loop; modules here never
// go away).
func (k *Kernel) getModulesForAddrs(c *sim.Counters, addrs []uint64) ([]string, error) {
	var mods []string
	for _, a := range addrs {
		m := k.moduleOf(c, a)
		if m == nil {
			continue
		}
		dup := false
		for _, n := range mods {
			if n == m.Name {
				dup = true
				break
			}
		}
		if !dup {
			mods = append(mods, m.Name)
			if k.modRef == nil {
				k.modRef = map[string]int{}
			}
			k.modRef[m.Name]++
		}
	}
	return mods, nil
}

func (k *Kernel) putModules(mods []string) {
	for _, m := range mods {
		k.modRef[m]--
	}
}

// ModuleRefs returns the references links hold on module name.
func (k *Kernel) ModuleRefs(name string) int { return k.modRef[name] }

// ReleaseLink models closing the link fd: bpf_kprobe_multi_link_release →
// unregister_fprobe (7.3: unregister_fprobe_async, no grace period
// waited for; the fprobe.Env follows the generation), then the module
// references are put (6.12+).
func (k *Kernel) ReleaseLink(c *sim.Counters, l *KprobeMultiLink) error {
	prev := c.Enter(PhaseFprobe)
	defer c.Enter(prev)
	if err := k.Fprobe.UnregisterFprobe(c, l.Fprobe); err != nil {
		return err
	}
	k.putModules(l.Mods)
	for i, x := range k.links {
		if x == l {
			k.links = append(k.links[:i], k.links[i+1:]...)
			break
		}
	}
	return nil
}
