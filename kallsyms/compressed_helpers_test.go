package kallsyms

import (
	"compress/gzip"
	"os"
	"sort"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/kallsyms/ktab"
)

// Table sources for the tests: the default synthetic image, the pinned
// Debian kernel's symbols and, when readable with real addresses, this
// machine's /proc/kallsyms.

var (
	procOnce sync.Once
	procTab  *ktab.Tables
	procSkip string
)

// debianSymbols is the pinned Debian 6.1.0-57-amd64 kernel's vmlinux
// symbol list (addr, type, name; as the image loader reads it from the
// kernel in .cache), committed so that what the tests reach does not
// depend on the host.
const debianSymbols = "testdata/debian-6.1.0-57-amd64.syms.gz"

// debianTables builds the table from debianSymbols as scripts/kallsyms
// builds it for that kernel (all symbols, absolute percpu, base-relative).
var debianTables = fixture.Once(func() (*ktab.Tables, error) {
	f, err := os.Open(debianSymbols)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	syms, err := ktab.ParseSymbols(debianSymbols, z)
	if err != nil {
		return nil, err
	}
	return ktab.Build(syms, ktab.Options{BaseRelative: true, AllSymbols: true, AbsolutePercpu: true})
})

// synthTables builds the default synthetic image's table (all symbols,
// base-relative).
var synthTables = fixture.Once(func() (*ktab.Tables, error) {
	k, _, err := synth.Generate(synth.DefaultConfig())
	if err != nil {
		return nil, err
	}
	return ktab.Build(fixture.KtabSymbols(k), ktab.Options{BaseRelative: true, AllSymbols: true})
})

// procTables builds the table from /proc/kallsyms as the machine's kernel
// holds it: core symbols in file (kallsyms index) order, all kept
// (--all-symbols, so the table is exactly the file's core lines).
func procTables(tb testing.TB) *ktab.Tables {
	tb.Helper()
	procOnce.Do(func() {
		f, err := os.Open("/proc/kallsyms")
		if err != nil {
			procSkip = err.Error()
			return
		}
		defer f.Close()
		syms, err := ktab.ParseSymbols("/proc/kallsyms", f)
		if err != nil {
			procSkip = err.Error()
			return
		}
		for _, s := range syms {
			if s.Addr == 0 && s.Module == "" {
				procSkip = "/proc/kallsyms addresses are hidden (kptr_restrict)"
				return
			}
		}
		procTab, err = ktab.Build(syms, ktab.Options{BaseRelative: true, AllSymbols: true})
		if err != nil {
			procSkip = err.Error()
		}
	})
	if procSkip != "" {
		tb.Skip(procSkip)
	}
	return procTab
}

// oracle is the trivially correct model: sorted Go slices.
type oracle struct {
	syms   []ktab.Symbol
	byName []int // kallsyms indices sorted by (name, index)
	c      *Compressed
}

func newOracle(c *Compressed) *oracle {
	t := c.Tables()
	o := &oracle{syms: t.Syms, c: c}
	o.byName = make([]int, len(t.Syms))
	for i := range o.byName {
		o.byName[i] = i
	}
	sort.SliceStable(o.byName, func(a, b int) bool { return t.Syms[o.byName[a]].Name < t.Syms[o.byName[b]].Name })
	return o
}

// matches returns the addresses of every symbol named name, address order.
func (o *oracle) matches(name string) []uint64 {
	k := sort.Search(len(o.byName), func(j int) bool { return o.syms[o.byName[j]].Name >= name })
	var out []uint64
	for ; k < len(o.byName) && o.syms[o.byName[k]].Name == name; k++ {
		out = append(out, o.syms[o.byName[k]].Addr)
	}
	return out
}

// pos is get_symbol_pos: first alias of the last symbol at or below addr.
func (o *oracle) pos(addr uint64) (int, uint64, uint64) {
	i := sort.Search(len(o.syms), func(j int) bool { return o.syms[j].Addr > addr }) - 1
	if i < 0 {
		i = 0
	}
	for i > 0 && o.syms[i-1].Addr == o.syms[i].Addr {
		i--
	}
	start := o.syms[i].Addr
	j := sort.Search(len(o.syms), func(j int) bool { return o.syms[j].Addr > start })
	var end uint64
	if j < len(o.syms) {
		end = o.syms[j].Addr
	} else {
		b := o.c.b
		switch {
		case addr >= b.Sinittext && addr < b.Einittext:
			end = b.Einittext
		case o.c.t.AllSymbols:
			end = b.End
		default:
			end = b.Etext
		}
	}
	return i, end - start, addr - start
}
