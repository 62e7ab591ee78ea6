package ktab

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
)

const goldenFile = "testdata/fixture.golden"

func loadFixture(t testing.TB) []Symbol {
	return loadMap(t, "testdata/fixture.map")
}

// goldenEntry is one option set of testdata/fixture.golden: the objects
// the real 6.1 scripts/kallsyms emitted for testdata/fixture.map, or
// failed (the tool exited non-zero).
type goldenEntry struct {
	opts   string
	failed bool
	objs   []Object
}

func readGolden(t *testing.T) map[string]goldenEntry {
	f, err := os.Open(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]goldenEntry{}
	var cur *goldenEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "options "):
			cur = &goldenEntry{opts: strings.TrimPrefix(l, "options ")}
		case l == "failed":
			cur.failed = true
		case l == "end":
			out[cur.opts] = *cur
			cur = nil
		default:
			name, hx, ok := strings.Cut(l, " ")
			if !ok {
				name, hx = l, ""
			}
			data, err := hex.DecodeString(hx)
			if err != nil || cur == nil {
				t.Fatalf("%s: bad line %q", goldenFile, l)
			}
			cur.objs = append(cur.objs, Object{name, data})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGoldenFixture checks Build against the objects the real tool emitted
// for the committed fixture, for all 8 option sets. With -update-golden
// (and gcc + kernel source) it rewrites the golden file from the tool.
func TestGoldenFixture(t *testing.T) {
	syms := loadFixture(t)
	if *updateGolden {
		tool := kallsymsTool(t)
		var b strings.Builder
		b.WriteString("# Objects emitted by Linux 6.1 scripts/kallsyms for fixture.map (64-bit, little endian,\n# no alignment padding; PTR values resolved with _text from the map), hex.\n# Regenerate: go test -run TestGoldenFixture -update-golden ./kallsyms/ktab/\n")
		for _, o := range allOptions() {
			objs, ok, _ := runTool(t, tool, "testdata/fixture.map", o)
			fmt.Fprintf(&b, "\noptions %v\n", o)
			if !ok {
				b.WriteString("failed\n")
			}
			for _, ob := range objs {
				fmt.Fprintf(&b, "%s %x\n", ob.Name, ob.Data)
			}
			b.WriteString("end\n")
		}
		if err := os.WriteFile(goldenFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden := readGolden(t)
	for _, o := range allOptions() {
		g, ok := golden[o.String()]
		if !ok {
			t.Fatalf("%s has no entry for %v", goldenFile, o)
		}
		tb, err := Build(syms, o)
		if g.failed {
			if err == nil {
				t.Errorf("%v: tool failed, Build succeeded", o)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", o, err)
			continue
		}
		if err := diffObjects(g.objs, tb.Objects()); err != nil {
			t.Errorf("%v: %v", o, err)
		}
	}
}
