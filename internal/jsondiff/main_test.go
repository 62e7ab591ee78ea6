package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func parse(t *testing.T, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDiff(t *testing.T) {
	base := `{"meta":{"kpsim":{"version":"a"}},"runs":[{"name":"none","ops":{"x":1},"wall_ns":5},{"name":"series","ops":{"x":2}}]}`
	for _, tc := range []struct {
		name, new string
		want      []string
	}{
		{"equal but for ignored fields", `{"meta":{"kpsim":{"version":"b"}},"runs":[{"name":"none","ops":{"x":1},"wall_ns":9},{"name":"series","ops":{"x":2}}]}`, nil},
		{"one op", `{"meta":{},"runs":[{"name":"none","ops":{"x":1}},{"name":"series","ops":{"x":3}}]}`, []string{"$.runs[series].ops.x: 2 -> 3"}},
		{"a run added", `{"meta":{},"runs":[{"name":"none","ops":{"x":1}},{"name":"new","ops":{}},{"name":"series","ops":{"x":2}}]}`, []string{`$.runs[new]: (absent) -> {"name":"new","ops":{}}`}},
		{"runs reordered", `{"meta":{},"runs":[{"name":"series","ops":{"x":2}},{"name":"none","ops":{"x":1}}]}`, []string{`$.runs.order: ["none","series"] -> ["series","none"]`}},
		{"a field lost", `{"meta":{},"runs":[{"name":"none","ops":{}},{"name":"series","ops":{"x":2}}]}`, []string{"$.runs[none].ops.x: 1 -> (absent)"}},
		{"a float's last bit", `{"meta":{},"runs":[{"name":"none","ops":{"x":1},"c":1214168.4782000005},{"name":"series","ops":{"x":2}}]}`, []string{"$.runs[none].c: (absent) -> 1214168.4782000005"}},
		{"number type", `{"meta":{},"runs":[{"name":"none","ops":{"x":"1"}},{"name":"series","ops":{"x":2}}]}`, []string{`$.runs[none].ops.x: 1 -> "1"`}},
		// An object left with only skipped keys equals its absence
		// (omitempty); one with another key does not.
		{"only skipped keys gone", `{"meta":{},"runs":[{"name":"none","ops":{"x":1},"flags":{"wall_ns":1}},{"name":"series","ops":{"x":2}}]}`, nil},
		{"more than skipped keys", `{"meta":{},"runs":[{"name":"none","ops":{"x":1},"flags":{"wall_ns":1,"n":2}},{"name":"series","ops":{"x":2}}]}`, []string{`$.runs[none].flags: (absent) -> {"n":2,"wall_ns":1}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &differ{skip: map[string]bool{"kpsim": true, "wall_ns": true}, max: 20}
			d.diff("$", parse(t, base), parse(t, tc.new))
			if strings.Join(d.out, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(d.out, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestRel: with -rel, non-integers within the bound are equal (and
// counted as such); integers and larger differences are not.
func TestRel(t *testing.T) {
	for _, tc := range []struct {
		a, b       string
		diff, near int
	}{
		{"1214168.4782000005", "1214168.4782", 0, 1},
		{"1214168.4782", "1214168.4783", 1, 0},
		{"1000000000000", "1000000000001", 1, 0},
		{"2", "2.0000000000000004", 0, 1},
		{`"a"`, `"b"`, 1, 0},
	} {
		d := &differ{max: 20, rel: 1e-12}
		d.diff("$", parse(t, tc.a), parse(t, tc.b))
		if d.n != tc.diff || d.near != tc.near {
			t.Errorf("%s vs %s: %d differences, %d near; want %d, %d", tc.a, tc.b, d.n, d.near, tc.diff, tc.near)
		}
	}
}

// TestAdded: a key named in -added is no difference when only NEW has
// it, and is compared when both have it; other new keys still differ.
func TestAdded(t *testing.T) {
	for _, tc := range []struct {
		a, b      string
		diff, add int
	}{
		{`{"k":{"x":1}}`, `{"k":{"x":1,"generation":"6.1"}}`, 0, 1},
		{`{"k":{"generation":"6.1"}}`, `{"k":{"generation":"7.3"}}`, 1, 0},
		{`{"k":{"generation":"6.1"}}`, `{"k":{}}`, 1, 0},
		{`{"k":{}}`, `{"k":{"other":1}}`, 1, 0},
	} {
		d := &differ{max: 20, added: map[string]bool{"generation": true}}
		d.diff("$", parse(t, tc.a), parse(t, tc.b))
		if d.n != tc.diff || d.addedAt["generation"] != tc.add {
			t.Errorf("%s vs %s: %d differences, %d added; want %d, %d", tc.a, tc.b, d.n, d.addedAt["generation"], tc.diff, tc.add)
		}
	}
}
