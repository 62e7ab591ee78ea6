package scenarios

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/input"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// TargetKind is where the probed functions come from.
type TargetKind string

// The target kinds of --targets (a path or "-" is a file).
const (
	TargetsGenerated    TargetKind = "generated"     // the batch sample's N functions added to the image
	TargetsAllFunctions TargetKind = "all-functions" // every function of the image
	TargetsTraceable    TargetKind = "traceable"     // available_filter_functions, one per ftrace record
	TargetsFile         TargetKind = "file"          // a list given by the user
)

// Order is the order targets are attached in.
type Order string

// The orders of --order.
const (
	OrderFile    Order = "file"    // as listed
	OrderSorted  Order = "sorted"  // C-locale strcmp of the target as given
	OrderShuffle Order = "shuffle" // Fisher–Yates with the run's seed
)

// Target is one probe a user asks for.
type Target struct {
	// Raw is the target as given (a file line without comment, an
	// available_filter_functions line, a function name).
	Raw string
	// Source names where it came from ("FILE:LINE", "traceable:N", ...).
	Source string
	// Symbol is the symbol to probe ("MOD:SYM" for a module symbol); empty
	// for an address target.
	Symbol string
	// Offset is the byte offset from the symbol; OwnOffset says the target
	// carried it (SYM+OFF, a kprobe_events location), so --placement does
	// not replace it.
	Offset    uint32
	OwnOffset bool
	// Addr is the address of an address target.
	Addr uint64
	// Return asks for a return probe (an "r" kprobe_events line, SYM%return).
	Return bool
	// Event is a kprobe_events line as given; written verbatim through
	// --via kprobe_events (other front doors use Symbol and Offset).
	Event string
	// Post gives the probe a post handler (register_kprobe front doors).
	Post bool
}

// String is the target as the per-probe report shows it.
func (t Target) String() string { return t.Raw }

// Probe is t as a front door takes it.
func (t Target) Probe() doors.Probe {
	return doors.Probe{Symbol: t.Symbol, Offset: t.Offset, Addr: t.Addr, Return: t.Return, Post: t.Post, Line: t.Event}
}

// EventLine is the kprobe_events line that asks for t.
func (t Target) EventLine() string { return t.Probe().EventLine("") }

// ParseTargetKind reads --targets: a kind name, "-" or a path.
func ParseTargetKind(s string) (TargetKind, string) {
	switch TargetKind(s) {
	case TargetsGenerated, TargetsAllFunctions, TargetsTraceable:
		return TargetKind(s), ""
	}
	return TargetsFile, s
}

// ReadTargetFile reads a target list: path, or standard input for "-".
// Every problem is one line naming the file (and line).
func ReadTargetFile(path string, stdin io.Reader) ([]Target, error) {
	if path == "-" {
		return ParseTargets("<stdin>", stdin)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, pathError(path, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s: is a directory, not a target list", path)
	}
	f, err := input.Open(path, input.MaxList)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseTargets(path, f)
}

// pathError names the path once (an *os.PathError's own message repeats
// the operation and the path).
func pathError(path string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", path, pe.Err)
	}
	return err
}

// ParseTargets reads one target a line: "SYM", "SYM+OFF" (decimal or 0x
// hex), a kprobe_events line "p[:[GRP/]EVENT] SYM[+OFF] [ARGS]" (or "r…"),
// or an available_filter_functions line "NAME" / "NAME [MODULE]". "#"
// starts a comment; blank lines are skipped. An empty list is an error.
func ParseTargets(name string, r io.Reader) ([]Target, error) {
	var out []Target
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		t, err := parseTarget(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n, err)
		}
		t.Source = fmt.Sprintf("%s:%d", name, n)
		out = append(out, t)
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, fmt.Errorf("%s:%d: line longer than 1 MiB (not a target list?)", name, n+1)
	} else if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no targets (every line is blank or a comment)", name)
	}
	return out, nil
}

// isEventCommand reports a kprobe_events command word: p or r, an optional
// maxactive, an optional ":[GRP/]EVENT".
func isEventCommand(w string) bool {
	if w == "" || (w[0] != 'p' && w[0] != 'r') {
		return false
	}
	rest := w[1:]
	for rest != "" && rest[0] >= '0' && rest[0] <= '9' {
		rest = rest[1:]
	}
	return rest == "" || rest[0] == ':'
}

func parseTarget(line string) (Target, error) {
	f := strings.Fields(line)
	t := Target{Raw: line}
	switch {
	case len(f) >= 2 && isEventCommand(f[0]):
		t.Event = line
		t.Return = f[0][0] == 'r'
		loc := f[1]
		if strings.HasSuffix(loc, "%return") {
			loc, t.Return = strings.TrimSuffix(loc, "%return"), true
		}
		if a, err := strconv.ParseUint(loc, 0, 64); err == nil {
			t.Addr = a
			return t, nil
		}
		return t, t.symOff(loc)
	case len(f) == 2 && strings.HasPrefix(f[1], "[") && strings.HasSuffix(f[1], "]"):
		mod := f[1][1 : len(f[1])-1]
		if mod == "" || strings.ContainsAny(mod, "[]") {
			return t, fmt.Errorf("bad module name %q", f[1])
		}
		if err := t.symOff(f[0]); err != nil {
			return t, err
		}
		t.Symbol = mod + ":" + t.Symbol
		return t, nil
	case len(f) == 1:
		return t, t.symOff(f[0])
	}
	return t, fmt.Errorf("want SYM[+OFF], NAME [MODULE] or a kprobe_events line, got %q", line)
}

// symOff splits "SYM[+OFF]" as traceprobe_split_symbol_offset does (the
// first '+' or '-'), refusing a negative, empty or non-numeric offset.
func (t *Target) symOff(s string) error {
	i := strings.IndexAny(s, "+-")
	if i < 0 {
		t.Symbol = s
		return nil
	}
	if i == 0 {
		return fmt.Errorf("no symbol before the offset in %q", s)
	}
	if s[i] == '-' {
		return fmt.Errorf("negative offset in %q", s)
	}
	v, err := strconv.ParseUint(s[i+1:], 0, 32)
	if err != nil {
		return fmt.Errorf("bad offset %q in %q (decimal or 0x hex, at most 2^32-1)", s[i+1:], s)
	}
	t.Symbol, t.Offset, t.OwnOffset = s[:i], uint32(v), true
	return nil
}

// AllFunctionTargets lists every function of k (vmlinux then modules as
// MOD:SYM), by name or, with byAddress, by address.
func AllFunctionTargets(k *image.Kernel, byAddress bool) []Target {
	var out []Target
	add := func(s image.Symbol, mod string) {
		if s.Size == 0 || !s.IsText() || s.IsPadding() {
			return // linker markers such as _stext; __pfx_ padding
		}
		t := Target{Raw: s.Name, Symbol: s.Name, Source: "all-functions"}
		if mod != "" {
			t.Raw, t.Symbol = s.Name+" ["+mod+"]", mod+":"+s.Name
		}
		if byAddress {
			t.Symbol, t.Addr, t.Raw = "", s.Addr, fmt.Sprintf("0x%x", s.Addr)
		}
		out = append(out, t)
	}
	for _, s := range k.Functions() {
		if s.Module == "" {
			add(s, "")
		}
	}
	for _, m := range k.Modules {
		for _, s := range m.Symbols {
			add(s, m.Name)
		}
	}
	return out
}

// TraceableTargets lists what 6.1's available_filter_functions shows on
// the booted kernel, in its order: one line per ftrace record (ftrace
// pages in order, vmlinux then modules), t_show → print_rec: the name of
// the symbol holding the record (kallsyms_lookup), "NAME [MODULE]" for a
// module, and "__ftrace_invalid_address___OFF" for a record more than
// FTRACE_MCOUNT_MAX_OFFSET past its symbol (a discarded weak function's
// leftover). Duplicate names stay duplicated. Simulator work: not counted.
func TraceableTargets(m *machine.Machine) []Target {
	if m.Ftrace == nil || m.Syms == nil {
		return nil
	}
	maxOff := uint64(0)
	if m.Kernel.Config.IBT {
		maxOff = 4 // ENDBR_INSN_SIZE
	}
	var out []Target
	for _, pg := range m.Ftrace.Pages() {
		for _, r := range pg.Records {
			name, _, off, mod, ok := m.Syms.KallsymsLookup(nil, r.IP)
			t := Target{Source: fmt.Sprintf("traceable:%d", len(out)+1)}
			if !ok || off > maxOff {
				t.Raw = fmt.Sprintf("__ftrace_invalid_address___%d", off)
				t.Symbol = t.Raw
			} else {
				t.Raw, t.Symbol = name, name
				if mod != "" {
					t.Raw, t.Symbol = name+" ["+mod+"]", mod+":"+name
				}
			}
			out = append(out, t)
		}
	}
	return out
}

// OrderTargets puts ts in order (in place).
func OrderTargets(ts []Target, o Order, seed uint64) {
	switch o {
	case OrderSorted:
		slices.SortStableFunc(ts, func(a, b Target) int { return strings.Compare(a.Raw, b.Raw) })
	case OrderShuffle:
		// math/rand/v2's Shuffle is Fisher–Yates: for i from n-1 down to 1,
		// swap i with j uniform in [0, i], over kpsim's seeded PCG.
		rng := sim.NewRNG(seed, "scenario.targets.shuffle")
		rng.Shuffle(len(ts), func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })
	}
}

// PlaceTargets sets the offset of every target that does not carry its
// own: entry (0), after-fentry (past the ENDBR with IBT and past the
// __fentry__ call of a traced function) or a fixed offset. Address targets
// move by the same amount. Resolving a name to decide "traced" is
// simulator work (the image's symbols), not counted.
func PlaceTargets(ts []Target, k *image.Kernel, p Placement, offset int) {
	if p == PlaceEntry {
		return
	}
	mcount := map[uint64]bool{}
	var first func(string) uint64
	if p == PlaceAfterFentry {
		first = firstAddrs(k)
		for _, a := range k.McountLocs {
			mcount[a] = true
		}
		for _, m := range k.Modules {
			for _, a := range m.McountLocs {
				mcount[a] = true
			}
		}
	}
	for i := range ts {
		t := &ts[i]
		if t.OwnOffset || t.Event != "" {
			continue
		}
		var off uint32
		switch p {
		case PlaceOffset:
			off = uint32(offset)
		case PlaceAfterFentry:
			entry := t.Addr
			if t.Symbol != "" {
				entry = first(t.Symbol)
			}
			// Past an ENDBR64 (or its sealed poison): a function whose
			// address is never taken has none, and its __fentry__
			// call sits at +0.
			if k.Config.IBT && (entry == 0 || x86.For(k.Config.Gen).IsEndbr(k.Text(entry, 4))) {
				off += 4
			}
			if entry != 0 && mcount[entry+uint64(off)] {
				off += 5
			}
		}
		if t.Symbol == "" {
			t.Addr += uint64(off)
		} else {
			t.Offset = off
		}
	}
}

// firstAddrs returns a lookup of the lowest address of a name (MOD:NAME
// for a module symbol), 0 if unknown: what kallsyms_lookup_name answers.
func firstAddrs(k *image.Kernel) func(string) uint64 {
	low := make(map[string]uint64, len(k.Symbols))
	for _, s := range k.Symbols {
		if a, ok := low[s.Name]; !ok || s.Addr < a {
			low[s.Name] = s.Addr
		}
	}
	for _, m := range k.Modules {
		for _, s := range m.Symbols {
			key := m.Name + ":" + s.Name
			if _, ok := low[key]; !ok {
				low[key] = s.Addr
			}
		}
	}
	return func(name string) uint64 { return low[name] }
}
