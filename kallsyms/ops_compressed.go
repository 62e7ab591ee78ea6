package kallsyms

import "github.com/kpsim/kpsim/sim"

// Counted operations of the compressed-table model (compressed.go), each
// unit documented in docs/cost-model.md. Weights: see
// weights_compressed.go. get_symbol_pos counts the existing
// kallsyms.addr.probe / kallsyms.alias.step ops, so Sorted and Compressed
// agree on address lookups; module scans count module.kallsyms.sym and
// module.address.lookup as Sorted does.
var (
	OpHop = sim.NewOp("kallsyms.hop", wHop, rHop,
		"get_symbol_offset: decode one kallsyms_names record header and jump over the record")
	OpTok = sim.NewOp("kallsyms.tok", wTok, rTok,
		"decode one token byte: kallsyms_token_index load + walk of the token string")
	OpStreamTok = sim.NewOp("kallsyms.stream.tok", wStreamTok, rStreamTok,
		"decode one token byte in kallsyms_on_each_symbol's whole-table walk: records in table order, each one's offset returned by the previous kallsyms_expand_symbol (a stream, not a random record)")
	OpChrOut = sim.NewOp("kallsyms.chr_out", wChrOut, rChrOut,
		"kallsyms_expand_symbol: write one expanded character into the name buffer")
	OpChrCmp = sim.NewOp("kallsyms.chr_cmp", wChrCmp, rChrCmp,
		"compare one character (strcmp, or the on-the-fly compressed compare)")
	OpLd3 = sim.NewOp("kallsyms.ld3", wLd3, rLd3,
		"assemble one 3-byte big-endian entry (get_symbol_seq, kallsyms_names_offsets)")
	OpLd4 = sim.NewOp("kallsyms.ld4", wLd4, rLd4,
		"one u32 offset load: kallsyms_markers[i>>8] or the run-time dynamic32 table")
	OpAddr = sim.NewOp("kallsyms.addr", wAddr, rAddr,
		"kallsyms_sym_address outside get_symbol_pos (the found symbol, match callbacks, the walk)")
	OpVisit = sim.NewOp("kallsyms.visit", wVisit, rVisit,
		"per-symbol fixed cost of a table walk: indirect callback call + cond_resched")
	// OpCmp and OpBytes are metrics (weight 0): the cost is in the ops above.
	OpCmp = sim.NewMetric("kallsyms.cmp",
		"one name comparison in kallsyms_lookup_names (binary-search step or duplicate-walk step)")
	OpBytes = sim.NewMetric("kallsyms.bytes",
		"bytes of kallsyms tables touched: kallsyms_names spanned by hops and expansions, index/seq/marker/offset entries loaded (the ~1.4 KiB token table, always cache-hot, is not counted)")
)
