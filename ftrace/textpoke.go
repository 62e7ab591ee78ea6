package ftrace

import (
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// textPokeLocInit counts the decode of text_poke_queue's
// text_poke_loc_init (arch/x86/kernel/alternative.c, 6.1.192, 6.12.117;
// 7.3: __smp_text_poke_batch_add): insn_decode_kernel of the new call or
// nop, once per queued site (BUG_ON on failure), to classify it for
// poke_int3_handler. Optprobes count the same decode of their JMP32
// (kprobes: archOptimizeKprobe); ftrace.replace.site's composed weight
// leaves it out.
//
// Models arch/x86/kernel/alternative.c:text_poke_loc_init (its decode).
func textPokeLocInit(c *sim.Counters) { c.Inc(x86.OpDecode) }
