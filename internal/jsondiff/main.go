// Command jsondiff compares two kpsim reports field by field, the check
// behind scripts/samecounts: a refactor must leave every op count, cycle
// figure, memory figure and digest as it was.
//
// Usage: jsondiff [-ignore KEY,...] OLD NEW
//
// Both files are JSON (one document, or JSON lines: one value a line, as
// --probes writes them). A key named in -ignore is skipped wherever it
// stands (the wall-time and version fields: kpsim's own run time and
// build, not the model's figures). Every other difference is printed as
// PATH: OLD -> NEW, at most 20 of them; the exit status is 1 if there
// was any, 2 on bad input. With -count, equal files print how many values
// (leaves) were compared.
//
// With -rel R, two numbers that are not both integers are equal when they
// differ by at most R relative to the larger: a floating-point sum
// (cycles from count times weight) can move in its last bit when the order
// of its terms changes, and -count then says how many values matched
// only so. Integers (every count, every integer cycle figure) are always
// compared exactly.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
)

func main() {
	ignore := flag.String("ignore", "", "comma-separated keys skipped wherever they stand")
	count := flag.Bool("count", false, "print the number of values compared (leaves) when equal")
	rel := flag.Float64("rel", 0, "non-integer numbers within this relative difference are equal")
	added := flag.String("added", "", "comma-separated keys a newer build added: present only in NEW they are counted as added, not as differences (present in both they are compared)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: jsondiff [-ignore KEY,...] OLD NEW")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	skip := map[string]bool{}
	for _, k := range strings.Split(*ignore, ",") {
		if k != "" {
			skip[k] = true
		}
	}
	a, err := load(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "jsondiff:", err)
		os.Exit(2)
	}
	b, err := load(flag.Arg(1))
	if err != nil {
		fmt.Fprintln(os.Stderr, "jsondiff:", err)
		os.Exit(2)
	}
	d := &differ{skip: skip, max: 20, rel: *rel, added: map[string]bool{}}
	for _, k := range strings.Split(*added, ",") {
		if k != "" {
			d.added[k] = true
		}
	}
	d.diff("$", a, b)
	for _, l := range d.out {
		fmt.Println(l)
	}
	if d.n > len(d.out) {
		fmt.Printf("... and %d more differences\n", d.n-len(d.out))
	}
	if d.n > 0 {
		os.Exit(1)
	}
	if *count {
		var notes []string
		if d.near > 0 {
			notes = append(notes, fmt.Sprintf("%d non-integer within %g", d.near, *rel))
		}
		if len(d.addedAt) > 0 {
			keys := make([]string, 0, len(d.addedAt))
			for k, n := range d.addedAt {
				keys = append(keys, fmt.Sprintf("%s x%d", k, n))
			}
			sort.Strings(keys)
			notes = append(notes, "added keys: "+strings.Join(keys, ", "))
		}
		if len(notes) > 0 {
			fmt.Printf("%d [%s]\n", d.leaves, strings.Join(notes, "; "))
		} else {
			fmt.Println(d.leaves)
		}
	}
}

// load reads one JSON document, or a sequence of them (JSON lines) as an
// array.
func load(path string) (any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReader(io.LimitReader(f, 1<<30)))
	dec.UseNumber()
	var vals []any
	for {
		var v any
		if err := dec.Decode(&v); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		vals = append(vals, v)
	}
	switch len(vals) {
	case 0:
		return nil, fmt.Errorf("%s: no JSON value", path)
	case 1:
		return vals[0], nil
	}
	return vals, nil
}

type differ struct {
	skip   map[string]bool
	max    int
	n      int
	leaves int
	rel    float64
	near   int // numbers equal only within rel
	out    []string
	// added are keys a newer build may add; addedAt counts the ones
	// found only in NEW.
	added   map[string]bool
	addedAt map[string]int
}

func (d *differ) report(path string, a, b any) {
	d.n++
	if len(d.out) < d.max {
		d.out = append(d.out, fmt.Sprintf("%s: %s -> %s", path, show(a), show(b)))
	}
}

func show(v any) string {
	if v == nil {
		return "(absent)"
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	s := strings.TrimSpace(buf.String())
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

func (d *differ) diff(path string, a, b any) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			d.report(path, a, b)
			return
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			if d.skip[k] {
				continue
			}
			x, okx := av[k]
			y, oky := bv[k]
			switch {
			case !okx && d.added[k]:
				if d.addedAt == nil {
					d.addedAt = map[string]int{}
				}
				d.addedAt[k]++
			case !okx && d.onlySkipped(y), !oky && d.onlySkipped(x):
				// An object holding only skipped keys on one side and
				// absent (omitempty) on the other: nothing to compare.
			case !okx:
				d.report(path+"."+k, nil, y)
			case !oky:
				d.report(path+"."+k, x, nil)
			default:
				d.diff(path+"."+k, x, y)
			}
		}
	case []any:
		bv, ok := b.([]any)
		if !ok {
			d.report(path, a, b)
			return
		}
		if an, bn := byName(av), byName(bv); an != nil && bn != nil {
			d.diffNamed(path, av, bv, an, bn)
			return
		}
		if len(av) != len(bv) {
			d.report(path+".length", len(av), len(bv))
		}
		for i := 0; i < min(len(av), len(bv)); i++ {
			d.diff(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i])
		}
	default:
		d.leaves++
		if fmt.Sprint(a) != fmt.Sprint(b) || fmt.Sprintf("%T", a) != fmt.Sprintf("%T", b) {
			if d.close(a, b) {
				d.near++
				return
			}
			d.report(path, a, b)
		}
	}
}

// close says whether a and b are numbers, not both integers, within the
// relative difference d.rel.
func (d *differ) close(a, b any) bool {
	x, okx := a.(json.Number)
	y, oky := b.(json.Number)
	if d.rel == 0 || !okx || !oky {
		return false
	}
	if _, err := x.Int64(); err == nil {
		if _, err := y.Int64(); err == nil {
			return false
		}
	}
	fx, errx := x.Float64()
	fy, erry := y.Float64()
	if errx != nil || erry != nil {
		return false
	}
	return math.Abs(fx-fy) <= d.rel*max(math.Abs(fx), math.Abs(fy))
}

// byName indexes a list of objects by their "name" field (the runs of a
// report, the phases of a run), or returns nil if any element lacks a
// unique string name. Such lists are compared name by name, so a run
// added by a new switch reads as one addition, not as every later run
// shifted.
func byName(l []any) map[string]int {
	idx := make(map[string]int, len(l))
	for i, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return nil
		}
		n, ok := m["name"].(string)
		if !ok {
			return nil
		}
		if _, dup := idx[n]; dup {
			return nil
		}
		idx[n] = i
	}
	return idx
}

// diffNamed compares two named lists: common names element by element,
// then the names only one side has, then the order.
func (d *differ) diffNamed(path string, a, b []any, an, bn map[string]int) {
	for _, e := range a {
		n := e.(map[string]any)["name"].(string)
		if j, ok := bn[n]; ok {
			d.diff(fmt.Sprintf("%s[%s]", path, n), e, b[j])
		} else {
			d.report(fmt.Sprintf("%s[%s]", path, n), e, nil)
		}
	}
	for _, e := range b {
		n := e.(map[string]any)["name"].(string)
		if _, ok := an[n]; !ok {
			d.report(fmt.Sprintf("%s[%s]", path, n), nil, e)
		}
	}
	common := func(l []any, other map[string]int) []string {
		var out []string
		for _, e := range l {
			n := e.(map[string]any)["name"].(string)
			if _, ok := other[n]; ok {
				out = append(out, n)
			}
		}
		return out
	}
	if ca, cb := common(a, bn), common(b, an); fmt.Sprint(ca) != fmt.Sprint(cb) {
		d.report(path+".order", ca, cb)
	}
}

// onlySkipped reports whether v is an object whose every key is skipped.
func (d *differ) onlySkipped(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for k := range m {
		if !d.skip[k] {
			return false
		}
	}
	return true
}
