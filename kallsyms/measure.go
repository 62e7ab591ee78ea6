package kallsyms

import (
	"fmt"
	"time"

	"github.com/kpsim/kpsim/sim"
)

// LookupKind names a lookup Measure drives.
type LookupKind string

// The lookups Measure knows.
const (
	KindLookupName   LookupKind = "kallsyms_lookup_name"          // per name
	KindMatch        LookupKind = "kallsyms_on_each_match_symbol" // per name
	KindSizeOffset   LookupKind = "kallsyms_lookup_size_offset"   // per address
	KindSymbolName   LookupKind = "lookup_symbol_name"            // per address
	KindSprint       LookupKind = "sprint_symbol"                 // per address
	KindOnEachSymbol LookupKind = "kallsyms_on_each_symbol"       // one full walk per call
)

// Measurement is what Measure returns for one kind of lookup.
type Measurement struct {
	Variant Variant
	Kind    LookupKind
	// Calls is the number of calls per pass (len(names), len(addrs), or 1).
	Calls int
	// NsPerCall is Go wall time per call, measured over iters passes with
	// counting off (nil counters), so the figure is the modelled loop's.
	NsPerCall float64
	// OpsPerCall are the modelled counts per call (one counted pass), by op
	// name; CyclesPerCall prices them (sim.DefaultCosts for Measure, the
	// given table for MeasureWith).
	OpsPerCall    map[string]float64
	CyclesPerCall float64
}

// Measure runs one counted pass of kind over names (name lookups) or addrs
// (address lookups), then iters timed passes, and returns Go ns per call
// and modelled ops per call. For dynamic32 the table is built (and its
// build counted) before the counted pass, so the figures are the steady
// state of a batch; call Release and measure PrepareBatch separately for
// the build. Go time depends on the machine: the weights' reference is an
// AMD EPYC at 2.6 GHz.
func (c *Compressed) Measure(kind LookupKind, names []string, addrs []uint64, iters int) (Measurement, error) {
	return c.MeasureWith(sim.DefaultCosts(), kind, names, addrs, iters)
}

// MeasureWith is Measure pricing the counts with costs.
func (c *Compressed) MeasureWith(costs *sim.CostTable, kind LookupKind, names []string, addrs []uint64, iters int) (Measurement, error) {
	m := Measurement{Variant: c.v, Kind: kind}
	var pass func(cn *sim.Counters)
	sink := 0
	switch kind {
	case KindLookupName:
		m.Calls = len(names)
		pass = func(cn *sim.Counters) {
			for _, n := range names {
				if a, ok := c.LookupName(cn, n); ok {
					sink += int(a)
				}
			}
		}
	case KindMatch:
		m.Calls = len(names)
		pass = func(cn *sim.Counters) {
			for _, n := range names {
				c.OnEachMatchSymbol(cn, n, func(a uint64) int { sink += int(a); return 0 })
			}
		}
	case KindSizeOffset:
		m.Calls = len(addrs)
		pass = func(cn *sim.Counters) {
			for _, a := range addrs {
				s, o, _ := c.LookupSizeOffset(cn, a)
				sink += int(s + o)
			}
		}
	case KindSymbolName:
		m.Calls = len(addrs)
		pass = func(cn *sim.Counters) {
			for _, a := range addrs {
				s, _ := c.LookupSymbolName(cn, a)
				sink += len(s)
			}
		}
	case KindSprint:
		m.Calls = len(addrs)
		pass = func(cn *sim.Counters) {
			for _, a := range addrs {
				sink += len(c.SprintSymbol(cn, a))
			}
		}
	case KindOnEachSymbol:
		m.Calls = 1
		pass = func(cn *sim.Counters) {
			c.OnEachSymbol(cn, func(name []byte, a uint64) int { sink += len(name); return 0 })
		}
	default:
		return m, fmt.Errorf("kallsyms: unknown lookup kind %q", kind)
	}
	if m.Calls == 0 || iters <= 0 {
		return m, fmt.Errorf("kallsyms: Measure needs inputs and iters > 0")
	}
	c.PrepareBatch(nil)
	cn := sim.NewCounters(false)
	pass(cn)
	m.OpsPerCall = map[string]float64{}
	for _, x := range cn.NonZero() {
		m.OpsPerCall[x.Op.Name()] += float64(x.N) / float64(m.Calls)
	}
	m.CyclesPerCall = costs.Cycles(cn) / float64(m.Calls)
	t0 := time.Now()
	for range iters {
		pass(nil)
	}
	m.NsPerCall = float64(time.Since(t0).Nanoseconds()) / float64(iters*m.Calls)
	_ = sink
	return m, nil
}
