package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, body string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const smallMap = `ffffffff81000000 T _stext
ffffffff81000000 T startup_64
ffffffff81000100 T secondary_startup_64
ffffffff81000200 t do_one_initcall
ffffffff81000300 T tcp_sock_release
ffffffff81000400 T tcp_sock_create
ffffffff81000500 t cleanup
ffffffff81000600 t cleanup
ffffffff81000700 T _etext
ffffffff82000000 D jiffies
ffffffffc0000000 t nft_do_chain	[nf_tables]
`

func TestKallsymsDump(t *testing.T) {
	p := writeFile(t, "System.map", smallMap)
	out, errs, code := runKpsim("kallsyms", "dump", "--symbols", p, "--all-symbols", "--base-relative")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, k := range []string{"num_syms ", "names_len ", "markers_count ", "seqs_len ", "offsets_len ", "token_table_len ",
		"avg_record_len ", "names_sha256 ", "markers_sha256 ", "seqs_sha256 ", "offsets_sha256 ", "token_table_sha256 ", "token_index_sha256 "} {
		if !strings.Contains(out, "\n"+k) && !strings.HasPrefix(out, k) {
			t.Errorf("stats lack %q", k)
		}
	}
	out, _, code = runKpsim("kallsyms", "dump", "--symbols", p, "--what", "tokens")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 256 {
		t.Fatalf("tokens: exit %d, %d lines", code, len(lines))
	}
	for _, l := range lines {
		for _, c := range []byte(l) {
			if c <= 0x20 || c >= 0x7f {
				t.Fatalf("token line %q has an unescaped byte %#x", l, c)
			}
		}
	}
}

func TestKallsymsDumpBadInput(t *testing.T) {
	tests := []struct {
		body, want string
	}{
		{"ffffffff81000000 T a\nnot a line\n", ":2"},
		{"zzzz T a\n", ":1"},
		{"ffffffff81000000 T " + strings.Repeat("x", 600) + "\n", ":1"},
		{"", "no symbols"},
	}
	for _, tc := range tests {
		p := writeFile(t, "bad.map", tc.body)
		_, errs, code := runKpsim("kallsyms", "dump", "--symbols", p)
		if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "bad.map") || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 naming bad.map and %q", tc.body[:min(len(tc.body), 30)], code, errs, tc.want)
		}
	}
	if _, errs, code := runKpsim("kallsyms", "dump", "--symbols", "/no/such/file"); code != 2 || !strings.Contains(errs, "/no/such/file") {
		t.Errorf("missing file: exit %d, %q", code, errs)
	}
	if _, _, code := runKpsim("kallsyms", "dump"); code != 2 {
		t.Errorf("no --symbols: exit %d", code)
	}
}

func TestRunKallsymsJSON(t *testing.T) {
	out := mustKpsim(t, append([]string{"run", "kallsyms", "--n", "20", "--format", "json", "--variants", "baseline,offset-index+token-cmp"}, small...)...)
	var rep struct {
		Runs []map[string]json.RawMessage `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 {
		t.Fatalf("%d runs", len(rep.Runs))
	}
	for _, r := range rep.Runs {
		for _, k := range []string{"name", "hit_ns", "miss_ns", "sprint_ns", "sprint_no_offset_ns", "walk_us", "hit_ops", "miss_ops", "extra_bytes"} {
			if _, ok := r[k]; !ok {
				t.Errorf("run lacks %q", k)
			}
		}
	}
	if _, _, code := runKpsim("run", "kallsyms", "--variants", "nope"); code != 2 {
		t.Errorf("bad variant: exit %d", code)
	}
	if _, _, code := runKpsim(append([]string{"run", "kallsyms", "--hits", "no_such_symbol_x"}, small...)...); code != 2 {
		t.Errorf("hit not in table: exit %d", code)
	}
}
