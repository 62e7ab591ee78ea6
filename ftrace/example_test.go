package ftrace_test

import (
	"fmt"

	"github.com/kpsim/kpsim/ftrace"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/sim"
)

// exampleFtrace is a small IBT kernel (the fentry site is at sym+4) and
// its ftrace records.
func exampleFtrace() (*image.Kernel, *ftrace.Ftrace) {
	cfg := synth.DefaultConfig()
	cfg.IBT = true
	cfg.Functions, cfg.InitFunctions, cfg.JumpEntries, cfg.JumpKeys = 2000, 100, 500, 100
	cfg.StaticCallSites, cfg.StaticCallKeys, cfg.BugEntries, cfg.Blacklist = 100, 20, 300, 20
	k, _, err := synth.Generate(cfg)
	if err != nil {
		panic(err)
	}
	ft, err := ftrace.New(k, kallsyms.NewSorted(k), nil)
	if err != nil {
		panic(err)
	}
	return k, ft
}

// ftrace_location maps a traced function's sym+0 (its ENDBR with IBT) to
// the __fentry__ site at sym+4, through the kallsyms fallback.
func ExampleFtrace_Location() {
	k, ft := exampleFtrace()
	site := k.McountLocs[0]
	fn := k.LookupFunction(site)
	c := sim.NewCounters(false)
	fmt.Println("sym+4 is the site:", ft.Location(nil, fn.Addr+4) == fn.Addr+4)
	fmt.Println("sym+0 maps to it:", ft.Location(c, fn.Addr) == fn.Addr+4)
	fmt.Println("ftrace_location_range calls:", c.Total(ftrace.OpLocationCall))
	// Output:
	// sym+4 is the site: true
	// sym+0 maps to it: true
	// ftrace_location_range calls: 2
}

// Arming a kprobe on an ftrace site: the first user registers
// kprobe_ftrace_ops; every arm walks every record twice in x86's
// ftrace_replace_code.
func ExampleFtrace_ArmKprobeFtrace() {
	k, ft := exampleFtrace()
	for i, ip := range k.McountLocs[:3] {
		c := sim.NewCounters(false)
		if err := ft.ArmKprobeFtrace(c, ip, false); err != nil {
			panic(err)
		}
		fmt.Printf("arm %d: hash entries copied %d, register %d, check_record = 2R: %v\n", i,
			c.Total(ftrace.OpHashCopy), c.Total(ftrace.OpOpsRegister),
			c.Total(ftrace.OpReplaceCheck) == uint64(2*ft.NumRecords()))
	}
	fmt.Println("filtered:", len(ft.KprobeOps(false).Filter()))
	// Output:
	// arm 0: hash entries copied 0, register 1, check_record = 2R: true
	// arm 1: hash entries copied 1, register 0, check_record = 2R: true
	// arm 2: hash entries copied 2, register 0, check_record = 2R: true
	// filtered: 3
}
