package trace

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/sim"
)

// Reason says which check decided a refusal, in kernel terms (the kprobes
// core's type, so one reason reads the same from either layer).
type Reason = kprobes.Reason

// Outcome is what one command line did.
type Outcome struct {
	Line string
	// Attempted is false for a line a failed write never reached.
	Attempted bool
	// Code is 0 for an accepted line, else the errno the write returned.
	Code errno.Errno
	// Reason explains a refusal (and a pending MOD:SYM acceptance).
	Reason Reason
	// TK is the trace_kprobe created (nil when the line created none).
	TK *TraceKprobe
	// Addr is the address the kprobe resolved to, when it got that far.
	Addr uint64
}

// probeErr is a line's failure: the errno and its reason.
type probeErr struct {
	code   errno.Errno
	reason Reason
	addr   uint64
	// noLog: the kernel returns without trace_probe_log_err (6.12's
	// too-many-arguments -E2BIG), so error_log gets no entry.
	noLog bool
}

func (e *probeErr) Error() string { return e.reason.String() }

func refuse(code errno.Errno, check, detail string) *probeErr {
	return &probeErr{code: code, reason: Reason{Check: check, Detail: detail}}
}

func kprobeRefusal(p *kprobes.Kprobe, err error, ret bool) *probeErr {
	var e errno.Errno
	if !errors.As(err, &e) {
		return nil
	}
	fn := "register_kprobe"
	if ret {
		fn = "register_kretprobe"
	}
	r := p.Why()
	if r.IsZero() {
		r = Reason{Check: fn, Detail: "-" + e.Name()}
	}
	return &probeErr{code: e, reason: r, addr: p.Addr}
}

// isSpace is the kernel's isspace (lib/ctype.c): space, \t \n \v \f \r.
func isSpace(b byte) bool { return b == ' ' || (b >= '\t' && b <= '\r') }

// argvSplit models lib/argv_split.c:argv_split: words separated by
// isspace, counted as one scan and one copy of the line and two
// allocations (the argv array and the string copy).
func (t *Tracing) argvSplit(line string) []string {
	c := t.counters()
	c.Add(opLineByte, 2*uint64(len(line)))
	c.Add(opKmalloc, 2)
	return strings.FieldsFunc(line, func(r rune) bool { return r < 0x80 && isSpace(byte(r)) })
}

// kstrtoul models lib/kstrtox.c:kstrtoul(s, 0): base auto-detected, an
// optional leading '+', one trailing newline allowed, nothing else.
func kstrtoul(s string) (uint64, bool) {
	s = strings.TrimSuffix(s, "\n")
	s = strings.TrimPrefix(s, "+")
	if s == "" || s[0] == '-' || s[0] == '+' {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil || strings.ContainsAny(s, "_") {
		return 0, false
	}
	return v, true
}

// kstrtol models kstrtol(s, 0): kstrtoul with an optional '-'.
func kstrtol(s string) (int64, bool) {
	s = strings.TrimSuffix(s, "\n")
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	v, ok := kstrtoul(s)
	if !ok {
		return 0, false
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}

// isGoodName models kernel/trace/trace.h:__is_good_name.
func isGoodName(name string, hashOK bool) bool {
	if name == "" {
		return false
	}
	ok := func(b byte, first bool) bool {
		switch {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b == '_':
			return true
		case b >= '0' && b <= '9':
			return !first
		case b == '-':
			return hashOK
		}
		return false
	}
	for i := 0; i < len(name); i++ {
		if !ok(name[i], i == 0) {
			return false
		}
	}
	return true
}

// sanitizeEventName models kernel/trace/trace.h:sanitize_event_name: ':' and '.' after
// the first character become '_'.
func sanitizeEventName(name string) string {
	b := []byte(name)
	for i := 1; i < len(b); i++ {
		if b[i] == ':' || b[i] == '.' {
			b[i] = '_'
		}
	}
	return string(b)
}

// parseEventName models kernel/trace/trace_probe.c:traceprobe_parse_event_name: the
// group ends at the first '/', or if there is none the first '.'. An empty
// event after a group leaves it unnamed (default name, in that group).
func parseEventName(ev, group string) (string, string, *probeErr) {
	const fn = "traceprobe_parse_event_name"
	slash := strings.IndexByte(ev, '/')
	if slash < 0 {
		slash = strings.IndexByte(ev, '.')
	}
	if slash >= 0 {
		if slash == 0 {
			return "", "", refuse(errno.EINVAL, fn, "group name is empty")
		}
		if slash+1 > MaxEventNameLen {
			return "", "", refuse(errno.EINVAL, fn, "group name is too long")
		}
		g := ev[:slash]
		if !isGoodName(g, true) {
			return "", "", refuse(errno.EINVAL, fn, fmt.Sprintf("group name %q is not [A-Za-z_-][A-Za-z0-9_-]*", g))
		}
		group, ev = g, ev[slash+1:]
		if ev == "" {
			return "", group, nil
		}
	}
	switch {
	case ev == "":
		return "", "", refuse(errno.EINVAL, fn, "event name is empty")
	case len(ev) >= MaxEventNameLen:
		return "", "", refuse(errno.EINVAL, fn, "event name is too long")
	case !isGoodName(ev, false):
		return "", "", refuse(errno.EINVAL, fn, fmt.Sprintf("event name %q is not [A-Za-z_][A-Za-z0-9_]*", ev))
	}
	return ev, group, nil
}

// hashedPointer is %p's output: lib/vsprintf.c prints a siphash of the
// pointer keyed at boot, low 32 bits on 64-bit, as 16 hex digits. The key
// is random per boot; kpsim uses a fixed FNV-1a so names are repeatable.
func hashedPointer(addr uint64) string {
	h := uint64(14695981039346656037)
	for i := 0; i < 8; i++ {
		h ^= (addr >> (8 * i)) & 0xff
		h *= 1099511628211
	}
	return fmt.Sprintf("0x%016x", h&0xffffffff)
}

// create models kernel/trace/trace_kprobe.c:trace_kprobe_create →
// trace_probe_create → __trace_kprobe_create for one line (comment already
// cut). An empty line is accepted and does nothing.
func (t *Tracing) create(line string) (*TraceKprobe, *probeErr) {
	c := t.counters()
	prev := c.Enter(PhaseParse)
	defer c.Enter(prev)
	argv := t.argvSplit(line)
	defer c.Add(opKmalloc, 2) // argv_free
	if len(argv) == 0 {
		return nil, nil
	}
	t.note("trace_kprobe_create", strconv.Quote(line), "")
	done := t.nest()
	tk, perr := t.traceKprobeCreate(line, argv)
	done()
	if perr != nil {
		t.note("trace_kprobe_create", "", "-"+perr.code.Name()+": "+perr.reason.String())
	} else {
		t.note("trace_kprobe_create", "", "0")
	}
	if perr != nil && perr.code != errno.ENOMEM && perr.code != errno.EEXIST && !perr.noLog {
		t.logErr(line, perr.reason.String())
	}
	return tk, perr
}

func (t *Tracing) traceKprobeCreate(line string, argv []string) (*TraceKprobe, *probeErr) {
	const fn = "__trace_kprobe_create"
	c := t.counters()
	kp := t.d.KP
	if t.g.createCbAllocs {
		// trace_kprobe_create_cb (7.3): kzalloc_obj of the
		// traceprobe_parse_context and its kfree, before the p/r check.
		c.Add(opKmalloc, 2)
	}
	isReturn := false
	switch argv[0][0] {
	case 'r':
		isReturn = true
	case 'p':
	default:
		// -ECANCELED: not this parser's syntax; create_or_delete turns it into -EINVAL.
		return nil, refuse(errno.EINVAL, "create_or_delete_trace_kprobe", fmt.Sprintf("%q is not a kprobe command (p, r or -)", argv[0]))
	}
	if len(argv) < 2 {
		return nil, refuse(errno.EINVAL, fn, "no probe location")
	}
	event := ""
	hasEvent := false
	if i := strings.IndexByte(argv[0][1:], ':'); i >= 0 {
		event, hasEvent = argv[0][1+i+1:], true
	}
	maxactive := 0
	if len(argv[0]) > 1 && argv[0][1] >= '0' && argv[0][1] <= '9' {
		if !isReturn {
			return nil, refuse(errno.EINVAL, fn, "maxactive is only for return probes")
		}
		digits := argv[0][1:]
		if i := strings.IndexByte(digits, ':'); i >= 0 {
			digits = digits[:i]
		}
		if len(digits) > MaxEventNameLen-1 {
			return nil, refuse(errno.EINVAL, fn, "maxactive is too long")
		}
		if t.g.createCbAllocs {
			c.Add(opKmalloc, 2) // trace_kprobe_create_internal (7.3): kmemdup of MAXACTIVE, kfree
		}
		v, ok := kstrtoul(digits)
		if !ok || v == 0 || v > 1<<32-1 {
			return nil, refuse(errno.EINVAL, fn, fmt.Sprintf("bad maxactive %q", digits))
		}
		if v > KretprobeMaxactiveMax {
			return nil, refuse(errno.EINVAL, fn, fmt.Sprintf("maxactive %d is above KRETPROBE_MAXACTIVE_MAX (%d)", v, KretprobeMaxactiveMax))
		}
		maxactive = int(v)
	}

	var symbol string
	var offset int64
	var addr uint64
	if a, ok := kstrtoul(argv[1]); ok {
		addr = a
	} else {
		if strings.Contains(argv[1], "/") && strings.Contains(argv[1], ":") {
			return nil, refuse(errno.EINVAL, "create_or_delete_trace_kprobe", "a uprobe location, not a kprobe")
		}
		c.Inc(opKmalloc) // kstrdup(symbol)
		symbol = argv[1]
		if i := strings.IndexByte(symbol, '%'); i >= 0 {
			if symbol[i:] != "%return" {
				return nil, refuse(errno.EINVAL, fn, fmt.Sprintf("bad address suffix %q", symbol[i:]))
			}
			symbol, isReturn = symbol[:i], true
		}
		// traceprobe_split_symbol_offset: the first '+' or '-'.
		if i := strings.IndexAny(symbol, "+-"); i >= 0 {
			v, ok := kstrtol(symbol[i:])
			if !ok || v < 0 || v > 1<<32-1 {
				return nil, refuse(errno.EINVAL, fn, fmt.Sprintf("bad probe offset %q", symbol[i:]))
			}
			symbol, offset = symbol[:i], v
		}
		if t.g.validateProbeSymbol {
			// 6.12+: before kprobe_on_func_entry; a failure is -EINVAL.
			if perr := t.validateProbeSymbol(symbol, "trace_kprobe", PhaseParse); perr != nil {
				return nil, t.parseError(perr)
			}
		}
		// kprobe_on_func_entry: the -ENOENT case is deferred to registration.
		flush := kp.HoldTrail() // the summary below leads its nested steps
		done := t.nest()
		err := kp.KprobeOnFuncEntry(0, symbol, uint32(offset))
		done()
		res := errResult(err, "0: a function entry (TPARG_FL_FENTRY)")
		switch err {
		case kprobes.EINVAL:
			res += ": not a function entry (refused only for a return probe)"
		case kprobes.ENOENT:
			res += ": deferred to registration"
		}
		t.note("kprobe_on_func_entry", fmt.Sprintf("%q, %d", symbol, offset), res)
		flush()
		if err == kprobes.EINVAL && isReturn {
			return nil, refuse(errno.EINVAL, fn, "retprobe address must be a function entry")
		}
	}

	if !t.g.validateProbeSymbol {
		if perr := t.uniqueSymbol(symbol, "trace_kprobe", PhaseParse); perr != nil {
			return nil, perr
		}
	}

	group := KprobeEventSystem
	if t.g.createCbAllocs {
		c.Add(opKmalloc, 2) // trace_kprobe_create_internal (7.3): kmalloc of gbuf or ebuf, kfree
	}
	if hasEvent {
		ev, g, perr := parseEventName(event, group)
		if perr != nil {
			return nil, perr
		}
		event, group = ev, g
	}
	kind := byte('p')
	if isReturn {
		kind = 'r'
	}
	if event == "" {
		var buf string
		if symbol != "" {
			buf = fmt.Sprintf("%c_%s_%d", kind, symbol, offset)
		} else {
			buf = fmt.Sprintf("%c_%s", kind, hashedPointer(addr))
		}
		if len(buf) > MaxEventNameLen-1 {
			buf = buf[:MaxEventNameLen-1] // snprintf into a 64-byte buffer
		}
		event = sanitizeEventName(buf)
		t.note("event name", "", group+"/"+event+" (default: sanitize_event_name)")
	} else {
		t.note("traceprobe_parse_event_name", "", group+"/"+event)
	}

	args := argv[2:]
	if t.g.createCbAllocs {
		c.Add(opKmalloc, 2) // trace_kprobe_create_internal (7.3): kmalloc of abuf, kfree
	}
	if t.g.tooManyArgsE2BIG && len(args) > MaxTraceArgs {
		perr := refuse(errno.E2BIG, fn, fmt.Sprintf("%d arguments: more than MAX_TRACE_ARGS (%d) (%s)", len(args), MaxTraceArgs, since612))
		perr.noLog = !t.g.tooManyArgsLogged
		return nil, perr
	}

	if perr := t.allocTraceKprobe(symbol); perr != nil {
		return nil, perr
	}
	tk := &TraceKprobe{Symbol: symbol, Offset: uint64(offset), Addr: addr, Return: isReturn, MaxActive: maxactive}
	if isReturn {
		tk.Rp = &kprobes.Kretprobe{MaxActive: maxactive}
		tk.Kp = &tk.Rp.Kp
	} else {
		tk.Kp = &kprobes.Kprobe{}
	}
	if symbol != "" {
		tk.Kp.SymbolName, tk.Kp.Offset = symbol, uint32(offset)
	} else {
		tk.Kp.Addr = addr
	}
	ev := &Event{Group: group, Name: event, isReturn: isReturn}
	tk.ev = ev
	ev.probes = []*TraceKprobe{tk}

	for i, a := range args {
		if i >= MaxTraceArgs {
			break
		}
		if perr := t.parseProbeArg(a, i, isReturn, tk); perr != nil {
			t.freeTraceKprobe(tk)
			return nil, perr
		}
	}
	ev.nargs = len(tk.Args)
	// traceprobe_set_print_fmt: two passes over the args, one allocation.
	c.Add(opConst, 2*uint64(len(tk.Args)+1))
	c.Inc(opKmalloc)

	if perr := t.registerTraceKprobe(tk); perr != nil {
		t.freeTraceKprobe(tk)
		return nil, perr
	}
	return tk, nil
}

// uniqueSymbol models the uniqueness check both tracefs and the perf PMU
// make before allocating (__trace_kprobe_create, create_local_trace_kprobe):
// only for a plain name (no "MOD:", not an address), number_of_same_symbols
// must be exactly 1: more is -EADDRNOTAVAIL, none -ENOENT. check names the
// caller in the reason; back is the phase to count in afterwards.
func (t *Tracing) uniqueSymbol(symbol, check string, back sim.Phase) *probeErr {
	if symbol == "" || strings.Contains(symbol, ":") {
		return nil
	}
	c := t.counters()
	c.Enter(PhaseSymbols)
	n := t.numberOfSameSymbols(symbol)
	c.Enter(back)
	t.note("number_of_same_symbols", strconv.Quote(symbol), fmt.Sprintf("%d (vmlinux match walk, then all %d module symbols compared)", n, t.d.Syms.ModuleSymbols()))
	switch {
	case n > 1:
		return refuse(errno.EADDRNOTAVAIL, check, fmt.Sprintf("symbol is not unique (%d copies)", n))
	case n == 0:
		return refuse(errno.ENOENT, check, fmt.Sprintf("symbol %q not found", symbol))
	}
	return nil
}

// allocTraceKprobe models alloc_trace_kprobe + trace_probe_init's
// allocations (docs/cost-model.md: six with a symbol, five without, and
// the percpu hit counter); -ENOMEM when the fault point fires.
func (t *Tracing) allocTraceKprobe(symbol string) *probeErr {
	c := t.counters()
	allocs := uint64(allocsPerSymbolProbe)
	if symbol == "" {
		allocs--
	}
	c.Add(opKmalloc, allocs)
	c.Inc(opPercpu)
	if t.d.Faults.Fail(FaultTraceKprobeAlloc) {
		return refuse(errno.ENOMEM, "alloc_trace_kprobe", "kzalloc failed")
	}
	return nil
}

// numberOfSameSymbols models kernel/trace/trace_kprobe.c:number_of_same_symbols (in
// 6.1.192): the vmlinux copies of name (kallsyms_on_each_match_symbol, any
// symbol type) plus every module symtab entry with that name, each module
// symbol compared (module_kallsyms_on_each_symbol never stops).
func (t *Tracing) numberOfSameSymbols(name string) int {
	c := t.counters()
	count := 0
	t.d.Syms.OnEachMatchSymbol(c, name, func(uint64) int { count++; return 0 })
	t.d.Syms.ModuleOnEachSymbol(c, func(s string, _ *image.Module, _ uint64) int {
		c.Inc(opStrcmp)
		if s == name {
			count++
		}
		return 0
	})
	return count
}

// freeTraceKprobe models free_trace_kprobe: the allocations of
// alloc_trace_kprobe, the args' and the percpu counter.
func (t *Tracing) freeTraceKprobe(tk *TraceKprobe) {
	c := t.counters()
	allocs := uint64(allocsPerSymbolProbe)
	if tk.Symbol == "" {
		allocs--
	}
	c.Add(opKmalloc, allocs+3*uint64(len(tk.Args))+1)
	c.Inc(opPercpu)
}

// errResult formats a call's result for the trail.
func errResult(err error, ok string) string {
	if err == nil {
		return ok
	}
	var e errno.Errno
	if errors.As(err, &e) {
		return "-" + e.Name()
	}
	return err.Error()
}
