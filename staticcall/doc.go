// Package staticcall models the static-call text-reservation check that
// kernel/kprobes.c:check_kprobe_address_safe runs for every probe:
// kernel/static_call_inline.c:static_call_text_reserved, in its upstream
// (linear) form and in the indexed form of patch P1 ("static_call: Index
// code text reservation lookups").
//
// One Table answers through TextReserved whatever form is active:
//
//   - linear (upstream, and the fallback before late init or when the
//     index allocation fails): every core site is visited in the order the
//     running kernel holds .static_call_sites (sorted by key only), each
//     visit counted as OpScanSite; a site conflicts when site <= end and
//     site + CALL_INSN_SIZE (5) > start, init sites skipped once
//     system_state >= SYSTEM_RUNNING. Then the single module whose text
//     holds start, if any, with init = (module COMING).
//   - indexed (sim.StaticCallIndex, after LateInit): a binary search
//     (OpIndexProbe per step) over the core sites sorted by address for the
//     first site >= start-4, then a walk (OpIndexSite per site loaded) while
//     site <= end, same rules. Module sites stay linear.
//
// The index is inferred from the series' cover letter and diffstat
// (docs/series.md, P1); the upstream code was read from
// Debian's linux-source-6.1 (6.1.192).
package staticcall
