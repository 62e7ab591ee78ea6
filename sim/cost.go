package sim

import (
	"bufio"
	"errors"
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
	w    []float64
	src  []string // "default" or "file:line" per op
	note []string // the comment on the op's line in a cost file
	// Meta is what a cost file's header says about where its weights were
	// measured (empty for the registered defaults).
	Meta CostMeta
	// Name says which table this is ("documented defaults", a file name,
	// "built-in cold profile").
	Name string
}

// CostMeta is a cost file's header: "#: key: value" lines, comments to any
// reader that does not know them, written by kpsim calibrate.
type CostMeta struct {
	Format   string // "kpsim-costs 1"
	CPU      string // /proc/cpuinfo "model name" of the measuring machine
	Compiler string // first line of "$CC --version"
	Date     string // RFC 3339, UTC
	Regime   string // "hot" or "cold"
	Clock    string // how cycles were taken
	Extra    map[string]string
}

// DefaultCosts returns the registered default weights.
func DefaultCosts() *CostTable {
	ops := Ops()
	t := &CostTable{w: make([]float64, len(ops)), src: make([]string, len(ops)), note: make([]string, len(ops)), Name: "documented defaults"}
	for i, o := range ops {
		t.w[i] = o.Cycles
		t.src[i] = "default"
	}
	return t
}

// Clone returns an independent copy of t.
func (t *CostTable) Clone() *CostTable {
	c := *t
	c.w = append([]float64(nil), t.w...)
	c.src = append([]string(nil), t.src...)
	c.note = append([]string(nil), t.note...)
	if t.Meta.Extra != nil {
		c.Meta.Extra = map[string]string{}
		for k, v := range t.Meta.Extra {
			c.Meta.Extra[k] = v
		}
	}
	return &c
}

// Set gives op a weight with its source and note (calibration fills
// ops a cost file has no line for).
func (t *CostTable) Set(op Op, cycles float64, source, note string) {
	i := op.Index()
	t.w[i], t.src[i], t.note[i] = cycles, source, note
}

// Note returns the comment a cost file gave op's weight ("" for defaults).
func (t *CostTable) Note(op Op) string {
	if i := op.Index(); i < len(t.note) {
		return t.note[i]
	}
	return ""
}

// Weight returns the cycles charged for one occurrence of op.
func (t *CostTable) Weight(op Op) float64 { return t.w[op.Index()] }

// Source says where op's weight came from: "default" or "FILE:LINE".
func (t *CostTable) Source(op Op) string { return t.src[op.Index()] }

// PhaseCycles returns the estimated cycles of phase ph: the correctly
// rounded sum of count times weight (see fsum), the same whatever order
// ops are numbered in.
func (t *CostTable) PhaseCycles(c *Counters, ph Phase) float64 {
	if c == nil {
		return 0
	}
	var s fsum
	i := ph.Index()
	row := c.v[i*c.nops : (i+1)*c.nops]
	for op, n := range row {
		if n != 0 && op < len(t.w) {
			s.addProduct(n, t.w[op])
		}
	}
	return s.value()
}

// Cycles returns the estimated cycles of everything counted (correctly
// rounded, as PhaseCycles).
func (t *CostTable) Cycles(c *Counters) float64 {
	if c == nil {
		return 0
	}
	var s fsum
	for i, n := range c.v {
		if n != 0 {
			s.addProduct(n, t.w[i%c.nops])
		}
	}
	return s.value()
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
//
// Header lines of the form "#: key: value" (comments to older readers)
// fill Meta; the comment after an op's weight is kept as its Note.
func ParseCosts(name string, r io.Reader) (*CostTable, error) {
	return ParseCostsOver(DefaultCosts(), name, r)
}

// ParseCostsOver is ParseCosts on top of base (which it does not change):
// a file's weights override base's, the others keep base's value and
// source. The result's Meta is the file's header.
func ParseCostsOver(base *CostTable, name string, r io.Reader) (*CostTable, error) {
	t := base.Clone()
	t.Meta = CostMeta{}
	t.Name = name
	seen := map[Op]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		s := sc.Text()
		if strings.HasPrefix(s, "#:") {
			if err := t.Meta.set(strings.TrimSpace(s[2:])); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", name, line, err)
			}
			continue
		}
		note := ""
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s, note = s[:i], strings.TrimSpace(s[i+1:])
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
		t.w[op.Index()] = v
		t.src[op.Index()] = fmt.Sprintf("%s:%d", name, line)
		t.note[op.Index()] = note
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, fmt.Errorf("%s:%d: line longer than 1 MiB (not a cost file?)", name, line+1)
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return t, nil
}

// WeightByName returns the weight of the op with that name (0 if none).
func (t *CostTable) WeightByName(name string) float64 {
	if op, ok := LookupOp(name); ok && op.Index() < len(t.w) {
		return t.w[op.Index()]
	}
	return 0
}

// The header keys a cost file may carry.
const (
	MetaFormat   = "format"
	MetaCPU      = "cpu"
	MetaCompiler = "compiler"
	MetaDate     = "date"
	MetaRegime   = "regime"
	MetaClock    = "clock"
)

func (m *CostMeta) set(kv string) error {
	k, v, ok := strings.Cut(kv, ":")
	if !ok {
		return fmt.Errorf("header line wants \"#: key: value\", got %q", kv)
	}
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	switch k {
	case MetaFormat:
		m.Format = v
	case MetaCPU:
		m.CPU = v
	case MetaCompiler:
		m.Compiler = v
	case MetaDate:
		m.Date = v
	case MetaRegime:
		if v != "hot" && v != "cold" {
			return fmt.Errorf("regime %q: want hot or cold", v)
		}
		m.Regime = v
	case MetaClock:
		m.Clock = v
	default:
		if m.Extra == nil {
			m.Extra = map[string]string{}
		}
		m.Extra[k] = v
	}
	return nil
}

// LocalCPU returns this machine's CPU model as /proc/cpuinfo names it
// ("model name", or "Hardware"/"cpu model" where there is none), or "" when
// it cannot be read.
func LocalCPU() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	return CPUModel(string(b))
}

// CPUModel extracts the CPU model from /proc/cpuinfo text.
func CPUModel(cpuinfo string) string {
	for _, key := range []string{"model name", "Hardware", "cpu model", "cpu"} {
		for _, l := range strings.Split(cpuinfo, "\n") {
			k, v, ok := strings.Cut(l, ":")
			if ok && strings.TrimSpace(k) == key {
				if v = strings.TrimSpace(v); v != "" {
					return v
				}
			}
		}
	}
	return ""
}

// ForeignCPU returns a warning when t was calibrated on a CPU other than
// local (both named), or "" when they match or either is unknown.
func (t *CostTable) ForeignCPU(local string) string {
	if t.Meta.CPU == "" || local == "" || t.Meta.CPU == local {
		return ""
	}
	return fmt.Sprintf("warning: cost file %s was calibrated on %q, this machine is %q: its weights may not fit this CPU (kpsim calibrate measures this one)", t.Name, t.Meta.CPU, local)
}

// Describe says in one line where the table's weights come from.
func (t *CostTable) Describe() string {
	if t.Meta.CPU == "" {
		return t.Name
	}
	date := t.Meta.Date
	if i := strings.IndexByte(date, 'T'); i > 0 {
		date = date[:i]
	}
	reg := ""
	if t.Meta.Regime != "" {
		reg = t.Meta.Regime + " regime, "
	}
	return fmt.Sprintf("%s (%scalibrated on %s with %s, %s)", t.Name, reg, t.Meta.CPU, t.Meta.Compiler, date)
}
