package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/realkernel"
)

// TestGenerationsTraceableEvents: on the shipped 6.12 and 7.3 bzImages,
// booted for the default CPU, every available_filter_functions line goes
// through kprobe_events one line per write, at +0 and just past the
// __fentry__ call; no line is an __ftrace_invalid_address record (none of
// these kernels' records is past FTRACE_MCOUNT_MAX_OFFSET), nothing is
// refused EILSEQ, and every refusal is one the kernel makes: a name with
// several copies (EADDRNOTAVAIL) or a reserved or blacklisted address
// (EINVAL). About 10 s per run; skipped without the packages.
func TestGenerationsTraceableEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("four whole available_filter_functions runs")
	}
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		for _, pl := range []string{"entry", "after-fentry"} {
			t.Run(g.String()+"/"+pl, func(t *testing.T) {
				p := realkernel.Find(t, g)
				probes := filepath.Join(t.TempDir(), "probes.tsv")
				mustKpsim(t, "run", "many", "--kernel", p.Vmlinuz, "--targets", "traceable", "--via", "kprobe_events",
					"--lines-per-write", "1", "--placement", pl, "--patches", "none", "--probes", probes, "--out", os.DevNull)
				f, err := os.Open(probes)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				sc := bufio.NewScanner(f)
				sc.Scan() // header
				lines, registered := 0, 0
				refused := map[string]int{}
				for sc.Scan() {
					// run target source address symbol result state reason
					c := strings.Split(sc.Text(), "\t")
					if len(c) < 8 {
						t.Fatalf("short line %q", sc.Text())
					}
					lines++
					if strings.HasPrefix(c[1], "__ftrace_invalid_address") {
						t.Errorf("line %s: %s", c[2], c[1])
					}
					if c[5] == "0" {
						registered++
						continue
					}
					reason := c[7]
					// 6.12 and 7.3 refuse a name that is not unique
					// with -EINVAL (validate_probe_symbol, then
					// parse_error; 6.1's -EADDRNOTAVAIL).
					ok := c[5] == "EINVAL" && strings.Contains(reason, "validate_probe_symbol (6.12+): symbol is not unique") ||
						c[5] == "EINVAL" && strings.HasPrefix(reason, "check_kprobe_address_safe: ")
					if !ok {
						t.Errorf("%s refused %s: %s", c[1], c[5], reason)
					}
					refused[c[5]]++
				}
				if lines < 40000 || registered < lines*95/100 {
					t.Errorf("%d lines, %d registered", lines, registered)
				}
				t.Logf("%s %s: %d lines, %d registered, refused %v", g, pl, lines, registered, refused)
			})
		}
	}
}
