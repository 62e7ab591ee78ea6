// Package jumplabel models the jump-label text-reservation check that
// kernel/kprobes.c:check_kprobe_address_safe runs for every probe:
// kernel/jump_label.c:jump_label_text_reserved, in its upstream (linear)
// form and in the indexed form of patch P2 ("jump_label: Index text
// reservation lookups"), with the jump-entry size found either by decoding
// the site (upstream arch_jump_entry_size) or from its opcode bytes (P3).
//
// One Table answers through TextReserved whatever form is active, so the
// registration pipeline never needs to know which switches are on:
//
//   - linear (upstream, and the fallback before late init or when the index
//     allocation fails): every core entry is visited in the order the
//     running kernel holds __jump_table (sorted by key, then code), each
//     visit counted as OpScanEntry; a non-init-skipped entry whose code is
//     <= end has its size computed (one x86.decode.insn, or one
//     x86.jump_size.opcode under sim.JumpSizeOpcode) and the first conflict
//     ends the scan. Then the single module whose text holds start, if any,
//     is scanned the same way.
//   - indexed (sim.JumpLabelIndex, after LateInit): a binary search
//     (OpIndexProbe per step) over the core entries sorted by code address
//     for the first entry with code >= start-4, then a walk (OpIndexEntry
//     per entry loaded) while code <= end, with the same init and conflict
//     rules. Module tables stay linear.
//
// The index itself is inferred from the series' cover letter and diffstat
// (docs/series.md, P2); the upstream code paths were read
// from Debian's linux-source-6.1 (6.1.192).
//
// A Table is not safe for concurrent use: the kernel runs these checks under
// jump_label_mutex, and the Table caches simulator work (never counts).
package jumplabel
