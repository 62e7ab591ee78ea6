package kprobes_test

import (
	"fmt"
	"os"

	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/sim"
)

// Why names the check that refused a probe, or left it unoptimized, in
// kernel terms; State says where the probe stands.
func ExampleKprobe_Why() {
	cfg := smallConfig(3)
	cfg.ProbeTargets = 2
	k, _, err := synth.Generate(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := scenarios.Boot(k, sim.PresetSeries.Set, 8, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range []*kprobes.Kprobe{
		{SymbolName: "kprobe_many_func_0"},
		{SymbolName: "kprobe_many_func_0", Offset: 3},
		{SymbolName: "kprobe_many_func_1", HasPostHandler: true},
	} {
		err := m.KP.RegisterKprobe(p)
		m.KP.Drain()
		fmt.Printf("%s+%d: %v, %s, %q\n", p.SymbolName, p.Offset, err, p.State(), p.Why())
	}
	// Output:
	// kprobe_many_func_0+0: <nil>, optimized, ""
	// kprobe_many_func_0+3: -EILSEQ, unregistered, "arch_prepare_kprobe: can_probe: +3 is not an instruction boundary: the 6-byte mov at +0 spans it"
	// kprobe_many_func_1+0: <nil>, int3, "optimize_kprobe: a probe at this address has a post_handler (an optprobe cannot run post handlers)"
}

// A front door records its own steps and nests the core's under them.
func ExampleIndent() {
	tr := &kprobes.Trail{}
	tr.Record(kprobes.Step{Check: "trace_kprobe_create", Args: `"p vfs_read"`})
	core := kprobes.Indent(tr, 1)
	core.Record(kprobes.Step{Check: "register_kprobe", Args: `symbol_name="vfs_read"`})
	core.Record(kprobes.Step{Depth: 1, Check: "kallsyms_lookup_name", Args: `"vfs_read"`, Result: "0xffffffff813669e0"})
	tr.Record(kprobes.Step{Check: "trace_kprobe_create", Result: "0"})
	_, _ = tr.WriteTo(os.Stdout)
	// Output:
	// trace_kprobe_create("p vfs_read")
	//   register_kprobe(symbol_name="vfs_read")
	//     kallsyms_lookup_name("vfs_read") = 0xffffffff813669e0
	// trace_kprobe_create: 0
}
