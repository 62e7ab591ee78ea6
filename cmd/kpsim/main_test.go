package main

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/image/synth"
)

func runKpsim(args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return o.String(), e.String(), code
}

// mustKpsim runs kpsim with args and returns its stdout, failing t on a
// non-zero exit.
func mustKpsim(t testing.TB, args ...string) string {
	t.Helper()
	out, errs, code := runKpsim(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	return out
}

// smallSizes keeps tests quick where the default image is not the point.
var smallSizes = []string{"--functions", "3000", "--init-functions", "100", "--jump-entries", "1500", "--jump-keys", "400",
	"--static-calls", "300", "--static-call-keys", "40", "--bug-entries", "800", "--blacklist", "60", "--modules", "2", "--module-functions", "50"}

// small is smallSizes on the 6.1 reference profile, the image the tests'
// 6.1 figures (layouts, offsets, trails) were written on; the commands'
// default is 7.3's.
var small = append([]string{"--kernel-version", "6.1"}, smallSizes...)

func TestImageJSONDefault(t *testing.T) {
	out := mustKpsim(t, "image", "--format", "json")
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"functions", "text_bytes", "jump_entries", "static_call_sites", "bug_entries",
		"blacklist_entries", "mcount_locations", "modules"} {
		v, ok := m[key].(float64)
		if !ok || v <= 0 {
			t.Errorf("key %s = %v, want a positive count", key, m[key])
		}
	}
	def := synth.ConfigFor(defaultGen)
	if m["jump_entries"].(float64) != float64(def.JumpEntries) {
		t.Errorf("jump_entries = %v, want the default %d", m["jump_entries"], def.JumpEntries)
	}
}

func TestImageTable(t *testing.T) {
	out, _, code := runKpsim(append([]string{"image"}, small...)...)
	if code != 0 || !strings.Contains(out, "jump entries") || !strings.Contains(out, "__kprobes_text") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}

// TestDecodeSummaryMatchesGenerator: --summary lists every function, and
// each line's instruction count and SHA1 equal what the generator emitted.
func TestDecodeSummaryMatchesGenerator(t *testing.T) {
	out := mustKpsim(t, append([]string{"decode", "--summary"}, small...)...)
	k, truth, err := synth.Generate(configFromFlags(t, small))
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]string{}
	for _, ft := range truth.Funcs {
		var offs []string
		for _, o := range ft.Insns {
			offs = append(offs, strconv.Itoa(int(o)))
		}
		sum := sha1.Sum([]byte(strings.Join(offs, ",")))
		want[ft.Addr] = fmt.Sprintf("%x\t%s\t%d\t%s", ft.Addr, ft.Name, len(ft.Insns), hex.EncodeToString(sum[:]))
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if got := len(decodeTargets(k, "")); len(lines) != got {
		t.Fatalf("%d summary lines for %d functions", len(lines), got)
	}
	for _, l := range lines {
		addr, err := strconv.ParseUint(strings.SplitN(l, "\t", 2)[0], 16, 64)
		if err != nil {
			t.Fatalf("bad line %q", l)
		}
		if w, ok := want[addr]; !ok || w != l {
			t.Fatalf("line %q, generator says %q", l, w)
		}
	}
}

func configFromFlags(t *testing.T, args []string) synth.Config {
	fs := newFlagSet("test", nil)
	f := addImageFlagsFor(fs, args) // --kernel-version and --profile pick the defaults
	if err := f.parse(args, nil); err != nil {
		t.Fatal(err)
	}
	f.cfg.Seed = f.seed
	return f.cfg
}

func TestDecodeFunc(t *testing.T) {
	out, _, code := runKpsim(append([]string{"decode", "--func", "kprobe_int3_handler", "--ibt"}, small...)...)
	if code != 0 {
		t.Fatal(code)
	}
	first := strings.SplitN(out, "\n", 2)[0]
	f := strings.Split(first, "\t")
	if len(f) != 3 || f[1] != "4" || f[2] != "endbr64" || strings.HasPrefix(f[0], "0x") || strings.ToLower(f[0]) != f[0] {
		t.Fatalf("first line %q, want ADDRESS<TAB>4<TAB>endbr64", first)
	}
}

func TestBadUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"image", "--bogus"}, "-bogus"},
		{[]string{"image", "--jump-entries", "-1"}, "--jump-entries"},
		{[]string{"image", "--functions", "600", "--blacklist", "10", "--jump-entries", "90000"}, "--jump-entries"},
		{[]string{"image", "--format", "xml"}, "--format"},
		{[]string{"image", "--jump-mix", "nop3=1"}, "--jump-mix"},
		{[]string{"image", "extra"}, "unexpected argument"},
		{[]string{"decode", "--func", "x", "--all"}, "--func and --all"},
		{[]string{"decode", "--func", "no_such_function", "--functions", "700", "--blacklist", "10", "--jump-entries", "10", "--jump-keys", "5", "--static-calls", "5", "--static-call-keys", "2", "--bug-entries", "5", "--modules", "0"}, "--func"},
		{[]string{"nosuchcmd"}, "unknown command"},
		{[]string{"image", "--profile", "nope"}, "--profile"},
		{[]string{"list", "--x"}, "-x"},
	}
	for _, tc := range tests {
		_, errs, code := runKpsim(tc.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: stderr %q, want one line naming %q", tc.args, errs, tc.want)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, c := range []string{"image", "decode", "list"} {
		out, _, code := runKpsim(c, "--help")
		if code != 0 || !strings.Contains(out, "usage: kpsim "+c) {
			t.Errorf("%s --help: exit %d, output %q", c, code, out)
		}
	}
}

func TestList(t *testing.T) {
	out, _, code := runKpsim("list")
	if code != 0 {
		t.Fatal(code)
	}
	for _, want := range []string{"jump-label-index", "iter-can-probe", "kprobe-tree", "series", "x86.decode.insn"} {
		if !strings.Contains(out, want) {
			t.Errorf("list output lacks %q", want)
		}
	}
}

func TestImageProfile(t *testing.T) {
	out := mustKpsim(t, "image", "--profile", "debian-6.1", "--format", "json", "--jump-entries", "6000")
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	// The profile's counts, with an explicit flag overriding one of them.
	if m["bug_entries"].(float64) != 7743 || m["jump_entries"].(float64) != 6000 || m["modules"].(float64) != 0 {
		t.Fatalf("debian-6.1 profile gave bug %v jump %v modules %v", m["bug_entries"], m["jump_entries"], m["modules"])
	}
}
