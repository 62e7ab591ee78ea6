package report

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kpsim/kpsim/scenarios"
)

// estTime renders an estimated kernel time (nanoseconds, from
// scenarios.Clock) in three significant digits and the largest unit that
// keeps it at least 1: "474 ms", "1.23 µs".
func estTime(ns float64) string {
	if ns == 0 {
		return "0"
	}
	for _, u := range []struct {
		div  float64
		name string
	}{{1e9, "s"}, {1e6, "ms"}, {1e3, "µs"}} {
		if math.Abs(ns) >= u.div {
			return sig3(ns/u.div) + " " + u.name
		}
	}
	return sig3(ns) + " ns"
}

// sig3 prints v (1 <= |v| < 1000, or below 1 in ns) in three significant
// digits, keeping trailing zeros ("12.0", "416", "0.500").
func sig3(v float64) string {
	d := 2
	for a := math.Abs(v); a >= 10 && d > 0; a /= 10 {
		d--
	}
	s := strconv.FormatFloat(v, 'f', d, 64)
	if d > 0 && strings.IndexByte(s, '.') == 4 { // 9.995 rounds to 10.00
		s = strconv.FormatFloat(v, 'f', d-1, 64)
	}
	return s
}

// simWall renders kpsim's own run time (not the kernel's) in three
// significant digits; a time the clock did not resolve prints as such,
// never as "0s".
func simWall(ns int64) string {
	if ns <= 0 {
		return "<1µs"
	}
	return roundDur(time.Duration(ns))
}

// clockOf is the report's clock (the reference clock when the report
// has no meta, as a test's hand-made report).
func clockOf(m *scenarios.Meta) scenarios.Clock {
	if m == nil {
		return scenarios.Clock{}.Or()
	}
	return m.Costs.Clock.Or()
}

// kvList renders a map as sorted "key=value" pairs separated by sep (a
// nested map in braces, the same way), never as a Go map literal; an
// empty string value prints as "".
func kvList[V any](m map[string]V, sep string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+kvValue(m[k]))
	}
	return strings.Join(parts, sep)
}

func kvValue(v any) string {
	if s, ok := v.(string); ok {
		if s == "" {
			return `""`
		}
		return s
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Map && rv.Type().Key().Kind() == reflect.String {
		m := map[string]any{}
		for it := rv.MapRange(); it.Next(); {
			m[it.Key().String()] = it.Value().Interface()
		}
		return "{" + kvList(m, " ") + "}"
	}
	return fmt.Sprint(v)
}

// ratios renders the ratios of one table and remembers whether it left
// any out, so the table can say why in a footnote: a ratio with a zero
// side is a dash, never "inf" or "0.00x".
type ratios struct{ dashed bool }

// of is a/b as "1.23x" (two significant digits below 0.01: "0.0016x"),
// or "-" when either side is zero.
func (r *ratios) of(a, b float64) string {
	if a == 0 || b == 0 {
		r.dashed = true
		return "-"
	}
	q := a / b
	if q < 0.01 {
		return strconv.FormatFloat(q, 'g', 2, 64) + "x"
	}
	return strconv.FormatFloat(q, 'f', 2, 64) + "x"
}

// delta is (a-b)/b as a signed percentage ("+12.3%", "-0.4%", "0%"),
// or "-" when b is zero and a is not.
func (r *ratios) delta(a, b float64) string {
	if b == 0 {
		if a == 0 {
			return "0%"
		}
		r.dashed = true
		return "-"
	}
	d := 100 * (a - b) / b
	if d == 0 {
		return "0%"
	}
	s := strconv.FormatFloat(d, 'f', 1, 64)
	if s == "0.0" || s == "-0.0" {
		s = strconv.FormatFloat(d, 'g', 2, 64)
	}
	if d > 0 {
		s = "+" + s
	}
	return s + "%"
}

// footnote says why a table left a ratio out, when it did.
func (r *ratios) footnote(w interface{ Write([]byte) (int, error) }) {
	if r.dashed {
		fmt.Fprintln(w, " -: no ratio: a side is zero (a run spent nothing there, or kpsim's clock did not resolve it)")
	}
}
