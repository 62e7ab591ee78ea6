package sim

// SeriesBase is the kernel generation the three series were written on
// (docs/series.md): Debian experimental's 7.3~rc7.
const SeriesBase = "7.3"

// Applicability is how a switch relates to one kernel generation: the
// series were written on SeriesBase, so on an older kernel a switch models
// a backport; a change already in a generation's own source is upstream
// there, and the switch changes nothing on it.
type Applicability struct {
	// Upstream: the generation's own source already has the change; its
	// baseline (every switch off) runs it.
	Upstream bool
	// Backport says, for a generation older than SeriesBase, what applying
	// the patch there means: whether the functions it changes are the same
	// in that generation's source (it applies as written) or which hunks a
	// backport has to redo. On SeriesBase "" or, where 7.3's own source
	// changes what the switch means, that.
	Backport string
	// Decision names the decision the switch changes on this generation
	// ("" when it keeps every decision, as a switch must): a backport whose
	// surroundings differ may not.
	Decision string
}

// genNote is one switch's applicability: the generations whose source has
// it already, and what a backport to 6.1.192 and 6.12.117 means, read from
// the three sources (docs/series.md, "Which kernels each switch applies
// to", cites the functions compared).
type genNote struct {
	upstreamIn []string
	on61       string
	on612      string
	on73       string // only where SeriesBase's own source changes what the switch means
	decision61 string // the decision the switch changes on 6.1, if any
}

// singleLookup61 is the decision the cnt == 1 fast path changes on 6.1.
const singleLookup61 = "a kprobe.multi link naming one module function: 6.1's ftrace_lookup_symbols walks vmlinux only and refuses it (-ESRCH); the fast path finds it through kallsyms_lookup_name's module lookup and attaches (bpf TestSingleLookupBackportDecision61)"

const (
	sameAll = "applies as written: the functions it changes are the same in this generation's source"
	userLib = "libbpf (user space): the same change whatever the kernel; the kernel side is the generation's"
)

var switchGen = [numSwitches]genNote{
	StaticCallIndex: {on61: sameAll, on612: sameAll},
	JumpLabelIndex:  {on61: sameAll, on612: sameAll},
	JumpSizeOpcode:  {on61: sameAll, on612: sameAll},
	KprobeTree: {
		on61:  "a backport: get_kprobe is the same, but 7.3 split register_kprobe into __register_kprobe (guard()); the hunks that insert into and erase from the tree go where 6.1's register_kprobe adds and deletes the hlist entry",
		on612: "a backport: get_kprobe is the same, but 7.3 split register_kprobe into __register_kprobe (guard()); the hunks that insert into and erase from the tree go where 6.12's register_kprobe adds and deletes the hlist entry",
	},
	IterGetOptimized:     {on61: sameAll, on612: sameAll},
	IterRecoverOptprobed: {on61: sameAll, on612: sameAll},
	IterCheckOptimized:   {on61: sameAll, on612: sameAll},
	IterCanOptimize: {
		on61:  "a backport: 6.1's can_optimize also runs the retpoline-thunk range check per instruction (insn_is_indirect_jump); the iterator hunk applies around it",
		on612: sameAll,
	},
	IterCanProbe: {
		on61:  "a backport: 6.1's can_probe ends at the boundary walk (no decode at the probed address, no is_exception_insn); the iterator replaces the same walk",
		on612: sameAll,
	},
	IterCopyOptimized: {
		on61:  "a backport: 6.1's copy_optimized_instructions also calls alternatives_text_reserved (removed in 7.3); context only",
		on612: "a backport: 6.12's copy_optimized_instructions also calls alternatives_text_reserved (removed in 7.3); context only",
	},
	BugIndex:       {on61: sameAll, on612: sameAll},
	BlacklistIndex: {on61: sameAll, on612: sameAll},
	KallsymsOffsetIndex: {
		on61:  "a backport: kernel/kallsyms.c's lookups are the same, but scripts/kallsyms.c writes other tables in another order (absolute per-cpu, base-relative offsets, kallsyms_* dropped); the hunk emitting the offsets index is redone",
		on612: "a backport: kernel/kallsyms.c's lookups are the same, but 6.12's scripts/kallsyms.c writes base-relative offsets in another object order; the hunk emitting the offsets index is redone",
	},
	KallsymsTokenCmp: {
		on61:  "a backport: 6.1's kallsyms_lookup_names compares with compare_symbol_name (the .llvm. suffix cleanup), 6.12 and 7.3 with strcmp; the compressed compare replaces that call",
		on612: sameAll,
	},
	FtraceSingleLookup: {
		upstreamIn: []string{"7.3"},
		on61:       "a backport: 6.1's ftrace_lookup_symbols has no module walk after the vmlinux walk; the cnt == 1 fallback is 6.1's walk",
		decision61: singleLookup61,
		on612:      "a backport of 7.3's ftrace_lookup_symbols (the cnt == 1 fast path, then 6.12's vmlinux and module walks)",
	},
	FtraceSingleLookupV1: {
		on61:       "a backport: 6.1's ftrace_lookup_symbols has no module walk after the vmlinux walk",
		on612:      "a backport of the RFC form onto 6.12's ftrace_lookup_symbols",
		decision61: singleLookup61,
		on73:       "replaces the merged form 7.3's ftrace_lookup_symbols already has with the RFC v1 form",
	},
	LibbpfExactSyms: {on61: userLib, on612: userLib},
	ModuleBugIndex: {
		on61:  "a backport: 7.3's module_find_bug walks under guard(rcu), 6.1's under rcu_read_lock_sched; the same walk",
		on612: "a backport: 7.3's module_find_bug walks under guard(rcu), 6.12's under rcu_read_lock_sched; the same walk",
	},
	TraceEventIndex:  {on61: sameAll, on612: sameAll},
	KprobeHashBits:   {on61: sameAll, on612: sameAll},
	KprobeRhashtable: {on61: sameAll, on612: sameAll},
	KprobeBtree: {
		on61:  "a backport, as kprobe-tree",
		on612: "a backport, as kprobe-tree",
	},
	ReservationBtree: {on61: sameAll, on612: sameAll},
}

// On says how the switch relates to kernel generation gen ("6.1", "6.12"
// or "7.3"; anything else reads as SeriesBase).
func (s Switch) On(gen string) Applicability {
	n := switchGen[s]
	a := Applicability{}
	for _, g := range n.upstreamIn {
		if g == gen {
			a.Upstream = true
		}
	}
	switch gen {
	case "6.1":
		a.Backport, a.Decision = n.on61, n.decision61
	case "6.12":
		a.Backport = n.on612
	default:
		a.Backport = n.on73
	}
	return a
}

// UpstreamIn lists the generations whose own source already has the
// switch's change.
func (s Switch) UpstreamIn() []string { return append([]string(nil), switchGen[s].upstreamIn...) }
