package sim

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// CostTable turns operation counts into estimated cycles: one weight per op.
// Defaults come from each op's registration (with its rationale beside it);
// a user may override any weight from a file.
type CostTable struct {
	w   []float64
	src []string // "default" or "file:line" per op
}

// DefaultCosts returns the registered default weights.
func DefaultCosts() *CostTable {
	ops := Ops()
	t := &CostTable{w: make([]float64, len(ops)), src: make([]string, len(ops))}
	for i, o := range ops {
		t.w[i] = o.Cycles
		t.src[i] = "default"
	}
	return t
}

// Weight returns the cycles charged for one occurrence of op.
func (t *CostTable) Weight(op Op) float64 { return t.w[op] }

// Source says where op's weight came from: "default" or "FILE:LINE".
func (t *CostTable) Source(op Op) string { return t.src[op] }

// PhaseCycles returns the estimated cycles of phase ph.
func (t *CostTable) PhaseCycles(c *Counters, ph Phase) float64 {
	if c == nil {
		return 0
	}
	var s float64
	row := c.v[int(ph)*c.nops : (int(ph)+1)*c.nops]
	for op, n := range row {
		if n != 0 && op < len(t.w) {
			s += float64(n) * t.w[op]
		}
	}
	return s
}

// Cycles returns the estimated cycles of everything counted.
func (t *CostTable) Cycles(c *Counters) float64 {
	if c == nil {
		return 0
	}
	var s float64
	for i, n := range c.v {
		if n != 0 {
			s += float64(n) * t.w[i%c.nops]
		}
	}
	return s
}

// LoadCosts reads weight overrides from the file at path. See ParseCosts.
func LoadCosts(path string) (*CostTable, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cost file: %w", err)
	}
	defer f.Close()
	return ParseCosts(path, f)
}

// ParseCosts reads weight overrides on top of the defaults. The format is one
// "OP CYCLES" pair per line (e.g. "kprobe.hash.visit 4.5"); '#' starts a
// comment; blank lines are ignored. An unknown op, a malformed or negative
// weight, or an op given twice is an error naming the input and line.
func ParseCosts(name string, r io.Reader) (*CostTable, error) {
	t := DefaultCosts()
	seen := map[Op]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		s := sc.Text()
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = s[:i]
		}
		f := strings.Fields(s)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"OP CYCLES\", got %d fields", name, line, len(f))
		}
		op, ok := LookupOp(f[0])
		if !ok {
			return nil, fmt.Errorf("%s:%d: unknown op %q (kpsim list shows them)", name, line, f[0])
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return nil, fmt.Errorf("%s:%d: op %s: weight %q is not a finite non-negative number", name, line, f[0], f[1])
		}
		if prev, dup := seen[op]; dup {
			return nil, fmt.Errorf("%s:%d: op %s already set on line %d", name, line, f[0], prev)
		}
		seen[op] = line
		t.w[op] = v
		t.src[op] = fmt.Sprintf("%s:%d", name, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return t, nil
}

// WeightByName returns the weight of the op with that name (0 if none).
func (t *CostTable) WeightByName(name string) float64 {
	if op, ok := LookupOp(name); ok && int(op) < len(t.w) {
		return t.w[op]
	}
	return 0
}
