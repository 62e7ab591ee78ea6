package docs_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestModelMapComplete checks docs/model.md against the tree without the
// generator's code: it reads every non-test Go file as plain lines, joins
// each run of // comment lines into paragraphs, and takes from every
// "models ..." phrase the path.c:func tokens and the snake_case names
// before the first context word (scanStop; TestDocsModel's modelStop may
// not stop any earlier, or this test fails). Every one must be a row of model.md,
// by its path when it has one, by its function name otherwise.
func TestModelMapComplete(t *testing.T) {
	want := map[string]string{} // name → where it was found
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != ".." || d.Name() == "testdata" || p == filepath.Join("..", "docs")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		for _, c := range commentParagraphs(t, p) {
			for _, n := range scanModels(c.text) {
				if _, ok := want[n]; !ok {
					want[n] = c.where
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d kernel names in Models comments", len(want))
	if len(want) < 300 {
		t.Fatalf("the tree's Models comments name only %d kernel functions; the scan is broken", len(want))
	}
	b, err := os.ReadFile("model.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}   // first column as written
	byFunc := map[string]bool{} // its function part
	var files []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		k := strings.SplitN(l[3:], "`", 2)[0]
		rows[k] = true
		p, fn, ok := strings.Cut(k, ":")
		if !ok {
			fn = k
		} else {
			files = append(files, p+":"+fn)
		}
		byFunc[fn] = true
	}
	for n, where := range want {
		p, fn, ok := strings.Cut(n, ":")
		switch {
		case !ok:
			if !byFunc[n] {
				t.Errorf("%s: a Models comment names %s; docs/model.md has no row for it", where, n)
			}
		case strings.Contains(p, "/"):
			if !rows[n] {
				t.Errorf("%s: a Models comment names %s; docs/model.md has no row for it", where, n)
			}
		default: // a short path such as opt.c:func
			found := false
			for _, f := range files {
				if f == n || strings.HasSuffix(f, "/"+n) {
					found = true
				}
			}
			if !found || !byFunc[fn] {
				t.Errorf("%s: a Models comment names %s; docs/model.md has no row for it", where, n)
			}
		}
	}
}

type commentPara struct {
	where, text string
}

// commentParagraphs returns the paragraphs of the full-line // comments of
// a file, each with the file and line it starts on.
func commentParagraphs(t *testing.T, path string) []commentPara {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []commentPara
	var cur []string
	start := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, commentPara{path + ":" + itoa(start), strings.Join(cur, " ")})
		}
		cur = nil
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		body, ok := strings.CutPrefix(l, "//")
		if !ok || strings.TrimSpace(body) == "" {
			flush()
			continue
		}
		if len(cur) == 0 {
			start = n
		}
		cur = append(cur, strings.TrimSpace(body))
	}
	flush()
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func itoa(n int) string {
	var b []byte
	for n > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

// scanStop are the words that start a context clause after a reference
// ("hlist_add_head_rcu in register_kprobe", "search_bpf_extables with no
// BPF program loaded" keeps going: "with" introduces a variant).
var scanStop = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`in for from by under on after before as that which when whose
		where if until over at to into is are run reached called without once so but because via
		since while per`) {
		scanStop[w] = true
	}
}

var (
	scanModelsWord = regexp.MustCompile(`\b[Mm]odels `)
	scanPathSpace  = regexp.MustCompile(`\.([chS]): `)
	scanParens     = regexp.MustCompile(`\([^()]*\)`)
	scanEnd        = regexp.MustCompile(`[.:;](\s|$)`)
	scanPath       = regexp.MustCompile(`^([A-Za-z0-9_./-]+\.[chS]):([A-Za-z_][A-Za-z0-9_]*)`)
	scanSnake      = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
)

// scanModels returns the kernel names the "models" phrases of one comment
// paragraph name.
func scanModels(para string) []string {
	var out []string
	for _, loc := range scanModelsWord.FindAllStringIndex(para, -1) {
		s := para[loc[1]:]
		if strings.HasPrefix(s, "of ") {
			continue
		}
		s = scanPathSpace.ReplaceAllString(s, ".$1:")
		for {
			r := scanParens.ReplaceAllString(s, " ")
			if r == s {
				break
			}
			s = r
		}
		if e := scanEnd.FindStringIndex(s); e != nil {
			s = s[:e[0]]
		}
		prev := ""
	words:
		for _, field := range strings.Fields(s) {
			if m := scanPath.FindStringSubmatch(field); m != nil {
				if m[2] == "struct" || m[2] == "enum" || m[2] == "union" {
					prev = "struct"
				} else {
					out = append(out, m[1]+":"+m[2])
					prev = ""
				}
				field = field[len(m[0]):] // "path:a/b": b is read below
			}
			for _, w := range strings.FieldsFunc(field, func(r rune) bool { return strings.ContainsRune("/,+&→", r) }) {
				if scanStop[w] {
					break words
				}
				w = strings.TrimSuffix(strings.TrimSuffix(w, "'s"), "'")
				if scanSnake.MatchString(w) && strings.Contains(w, "_") && prev != "struct" && prev != "enum" && prev != "union" {
					out = append(out, w)
				}
				prev = w
			}
		}
	}
	return out
}
