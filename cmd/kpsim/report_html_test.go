package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromium finds Debian's headless browser (the test skips without it).
func chromium(t *testing.T) string {
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Skip("no chromium (apt-get install chromium)")
	return ""
}

func writeReport(t *testing.T, name string, extra ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	args := append(append([]string{"report", "many", "--out", path}, extra...), small...)
	if _, errs, code := runKpsim(args...); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReportHTMLSelfContained: one file, nothing fetched, every parameter
// and the digests in it.
func TestReportHTMLSelfContained(t *testing.T) {
	page := writeReport(t, "r.html", "--n", "100,200")
	for _, bad := range []string{"<link", " src=", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("the page fetches something: %q", bad)
		}
	}
	for _, want := range []string{"kernel text sha256", "optimize_every", "<svg", "Growth", "decisions digest", "command"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if n := strings.Count(page, "<svg"); n != 2 {
		t.Errorf("%d inline plots, want 2", n)
	}
}

// TestReportHTMLRendersInChromium loads the page in headless chromium and
// reads back the page's own check: every table and plot laid out with a
// size (and rows, and paths).
func TestReportHTMLRendersInChromium(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "r.html")
	os.WriteFile(path, []byte(writeReport(t, "r.html", "--n", "100,200")), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir="+filepath.Join(dir, "profile"), "--dump-dom", "file://"+path)
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("chromium did not run here: %v", err)
	}
	m := regexp.MustCompile(`rendered tables=(\d+) plots=(\d+) bad=(\d+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("the page's render check did not run:\n%.2000s", out)
	}
	if m[1] != "4" || m[2] != "2" || m[3] != "0" {
		t.Errorf("rendered %s tables, %s plots, %s bad; want 4, 2, 0", m[1], m[2], m[3])
	}
}

func TestReportMarkdown(t *testing.T) {
	md := writeReport(t, "r.md", "--n", "200")
	for _, want := range []string{"# kpsim: 200 probes", "| run | ops | task cycles |", "| none |", "| series |", "kernel text sha256", "## The task's estimated cycles and kernel time by phase", "sim wall", "task time (est.)", "system cycles"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

func TestReportRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report", "many", "--n", "100"}, "--out: required"},
		{[]string{"report", "many", "--n", "100", "--out", filepath.Join(dir, "r.txt")}, "FILE.html or FILE.md"},
		{[]string{"report", "many", "--n", "100", "--out", filepath.Join(dir, "r.html"), "--format", "pdf"}, "--format"},
		{[]string{"report", "many", "--n", "100", "--out", filepath.Join(dir, "r.html"), "--plot-linear"}, "--plot-linear"},
		{[]string{"report", "many", "--n", "100", "--out", filepath.Join(dir, "r.html"), "--plot", "x.svg"}, "plot"},
		{[]string{"report", "many", "--n", "x", "--out", filepath.Join(dir, "r.html")}, "--n"},
	} {
		_, errs, code := runKpsim(tc.args...)
		if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line naming %q", tc.args, code, errs, tc.want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("refused reports left files: %v", ents)
	}
}
