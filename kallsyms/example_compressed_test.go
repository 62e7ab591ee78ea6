package kallsyms_test

import (
	"fmt"

	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/sim"
)

func exampleTables() *ktab.Tables {
	syms := []ktab.Symbol{
		{Addr: 0xffffffff81000000, Type: 'T', Name: "_stext"},
		{Addr: 0xffffffff81000000, Type: 'T', Name: "_text"},
		{Addr: 0xffffffff81000040, Type: 't', Name: "helper"},
		{Addr: 0xffffffff81000080, Type: 'T', Name: "vfs_read"},
		{Addr: 0xffffffff810000c0, Type: 't', Name: "helper"},
		{Addr: 0xffffffff81000100, Type: 'T', Name: "_etext"},
	}
	t, err := ktab.Build(syms, ktab.Options{BaseRelative: true})
	if err != nil {
		panic(err)
	}
	return t
}

func ExampleCompressed_SprintSymbol() {
	c, _ := kallsyms.NewCompressed(exampleTables(), kallsyms.Baseline, kallsyms.CompressedOptions{})
	fmt.Println(c.SprintSymbol(nil, 0xffffffff8100009f))
	fmt.Println(c.SprintSymbol(nil, 0xffffffff81000080))
	fmt.Println(c.SprintSymbolNoOffset(nil, 0xffffffff8100009f))
	fmt.Println(c.SprintSymbol(nil, 0xffffffff81000000)) // first alias
	fmt.Println(c.SprintSymbol(nil, 0xffffffff81000100)) // _etext: not kernel text
	// Output:
	// vfs_read+0x1f/0x40
	// vfs_read+0x0/0x40
	// vfs_read
	// _stext+0x0/0x40
	// 0xffffffff81000100
}

func ExampleCompressed_OnEachMatchSymbol() {
	for _, v := range kallsyms.Variants() {
		c, _ := kallsyms.NewCompressed(exampleTables(), v, kallsyms.CompressedOptions{})
		cn := sim.NewCounters(false)
		var addrs []string
		c.OnEachMatchSymbol(cn, "helper", func(a uint64) int { addrs = append(addrs, fmt.Sprintf("%#x", a)); return 0 })
		first, _ := c.LookupName(nil, "helper")
		fmt.Printf("%-22s %v first %#x hops %d\n", v, addrs, first, cn.Total(kallsyms.OpHop))
	}
	// dynamic32's 6 hops are its one build pass over the 6 records.
	// Output:
	// baseline               [0xffffffff81000040 0xffffffff810000c0] first 0xffffffff81000040 hops 11
	// offset-index           [0xffffffff81000040 0xffffffff810000c0] first 0xffffffff81000040 hops 0
	// token-cmp              [0xffffffff81000040 0xffffffff810000c0] first 0xffffffff81000040 hops 11
	// offset-index+token-cmp [0xffffffff81000040 0xffffffff810000c0] first 0xffffffff81000040 hops 0
	// stride2                [0xffffffff81000040 0xffffffff810000c0] first 0xffffffff81000040 hops 3
	// dynamic32              [0xffffffff81000040 0xffffffff810000c0] first 0xffffffff81000040 hops 6
}
