package kprobes_test

import (
	"fmt"

	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/sim"
)

const text = 0xffffffff81000000

func newReg(addrs ...uint64) *kprobes.Registry {
	r := kprobes.NewRegistry(true)
	for _, a := range addrs {
		_ = r.Insert(&kprobes.Kprobe{Addr: a}, nil)
	}
	return r
}

// GetKprobe walks one hash chain; a miss costs the whole chain.
func ExampleRegistry_GetKprobe() {
	r := newReg(text, text+1, text+64)
	c := sim.NewCounters(false)
	p := r.GetKprobe(text+1, c)
	fmt.Printf("hit %#x, bucket %d\n", p.Addr, kprobes.HashPtr(text+1, kprobes.KprobeHashBits))
	fmt.Println(r.GetKprobe(text+2, nil) == nil)
	// Output:
	// hit 0xffffffff81000001, bucket 25
	// true
}

// Range is half-open: start included, end excluded. RangeClosed includes
// both ends.
func ExampleRegistry_Range() {
	r := newReg(text+10, text+11, text+20, text+40)
	for it := r.Range(text+10, text+20, nil); it.Next(); {
		fmt.Printf(" +%d", it.Probe().Addr-text)
	}
	fmt.Println()
	for it := r.RangeClosed(text+10, text+20, nil); it.Next(); {
		fmt.Printf(" +%d", it.Probe().Addr-text)
	}
	fmt.Println()
	// Output:
	//  +10 +11
	//  +10 +11 +20
}

// The windows of the kernel's per-byte loops, served by one range query
// each: get_optimized_kprobe (18 bytes strictly below, nearest first),
// __recover_optprobed_insn ([addr-4, addr], nearest first) and
// arch_check_optimized_kprobe ((addr, addr+size), ascending).
func ExampleRegistry_OptimizedWindow() {
	r := newReg(text+10, text+11, text+20, text+40)
	show := func(name string, it kprobes.RangeIter) {
		fmt.Print(name, ":")
		for it.Next() {
			fmt.Printf(" +%d", it.Probe().Addr-text)
		}
		fmt.Println()
	}
	show("get_optimized_kprobe(+29)", r.OptimizedWindow(text+29, nil))
	show("__recover_optprobed_insn(+14)", r.RecoverWindow(text+14, nil))
	show("arch_check_optimized_kprobe(+11, 10)", r.CheckOptimizedRange(text+11, 10, nil))
	// Output:
	// get_optimized_kprobe(+29): +20 +11
	// __recover_optprobed_insn(+14): +11 +10
	// arch_check_optimized_kprobe(+11, 10): +20
}

// An instruction walk over a function with the monotonic cursor: each
// query reports the probe exactly there and the probes in [addr-4, addr].
// Going backwards, or changing the registry mid-walk, is an error.
func ExampleRegistry_AddrIter() {
	r := newReg(text+3, text+8)
	it := r.AddrIter(kprobes.Jmp32InsnSize-1, nil)
	for _, insn := range []uint64{0, 3, 5, 8, 12} {
		p, err := it.Query(text + insn)
		fmt.Printf("+%-2d at=%v window=%d err=%v\n", insn, p != nil, len(it.Window()), err)
	}
	_, err := it.Query(text + 11)
	fmt.Println(err)

	it = r.AddrIter(0, nil)
	_, _ = it.Query(text + 3)
	_ = r.Insert(&kprobes.Kprobe{Addr: text + 5}, nil)
	_, err = it.Query(text + 5)
	fmt.Println(err)
	// Output:
	// +0  at=false window=0 err=<nil>
	// +3  at=true window=1 err=<nil>
	// +5  at=false window=1 err=<nil>
	// +8  at=true window=1 err=<nil>
	// +12 at=false window=1 err=<nil>
	// kprobes: address iterator queried below its previous query
	// kprobes: registry changed while an iterator was live
}

// A second probe at an address turns the entry into an aggregator at the
// same chain position; unregistering shrinks it and the last child takes it
// away.
func ExampleRegistry_UnregisterKprobe() {
	r := kprobes.NewRegistry(true)
	a, b := &kprobes.Kprobe{Addr: text}, &kprobes.Kprobe{Addr: text}
	_ = r.Insert(a, nil)
	ap := &kprobes.Kprobe{}
	_ = r.InitAggrKprobe(ap, a, nil)
	_ = r.AddNewKprobe(ap, b, nil)
	fmt.Println(r.Len(), r.GetKprobe(text, nil) == ap, ap.NumChildren())
	_ = r.UnregisterKprobe(a, nil, nil)
	fmt.Println(r.Len(), ap.NumChildren())
	_ = r.UnregisterKprobe(b, nil, nil)
	fmt.Println(r.Len(), r.GetKprobe(text, nil) == nil)
	// Output:
	// 1 true 2
	// 1 1
	// 0 true
}
