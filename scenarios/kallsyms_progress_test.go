package scenarios

import (
	"fmt"
	"testing"

	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/kallsyms/ktab"
)

type countProgress struct {
	total, last, starts, dones int
}

func (p *countProgress) Start(_ string, total int) { p.total, p.starts = total, p.starts+1 }
func (p *countProgress) Update(done int)           { p.last = done }
func (p *countProgress) Done()                     { p.dones++ }

// TestRunKallsymsProgress: the bar is told about every measurement and
// reaches its total.
func TestRunKallsymsProgress(t *testing.T) {
	var syms []ktab.Symbol
	for i := 0; i < 500; i++ {
		syms = append(syms, ktab.Symbol{Addr: 0xffffffff81000000 + uint64(i)*64, Type: 'T', Name: fmt.Sprintf("func_%d", i)})
	}
	p := &countProgress{}
	_, err := RunKallsyms("test", syms, nil, KallsymsOptions{Iters: 2, Build: ktab.Options{AllSymbols: true, AbsolutePercpu: true, BaseRelative: true},
		Variants: []kallsyms.Variant{kallsyms.AllVariants()[0], kallsyms.AllVariants()[1]}, Progress: p})
	if err != nil {
		t.Fatal(err)
	}
	if p.starts != 1 || p.dones != 1 || p.total != 8 || p.last != 8 {
		t.Errorf("progress %+v, want one start and done, 8 of 8", p)
	}
}
