package docs_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/sim"
)

// A "Models" reference, as the tree writes them:
//
//	// Models kernel/kprobes.c:get_kprobe.
//	// Models the core part of kernel/jump_label.c:jump_label_text_reserved with patch P2 (...).
//	// Models arch/x86/kernel/alternative.c:optimize_nops and optimize_nops_range.
//	// Models kernel/kprobes.c:remove_module_kprobe_blacklist → kprobe_remove_area_blacklist / kprobe_remove_ksym_blacklist.
//	// fooBar models get_symbol_pos: ...
//	// models kstrtol(s, 0): ...
//	// copyOptimizedInstructions models opt.c:copy_optimized_instructions: ...
//
// The reference phrase runs from the word "models" to the end of its
// sentence, to a ": " that introduces an explanation, or to the first
// word that starts a context clause ("in register_kprobe", "for one
// argument", "as perf_event_open reaches it"); parenthesised asides are
// dropped. Every kernel name in the phrase counts: a path:func token, a
// lower-case identifier with an underscore (get_symbol_pos, kprobe_gone),
// or one written as a call (kstrtol(s, 0)). "struct x" names a type, not a
// function, and is skipped.

// modelStop are the words that end a reference phrase.
var modelStop = map[string]bool{
	"in": true, "for": true, "from": true, "by": true, "under": true, "on": true,
	"after": true, "before": true, "as": true, "that": true, "which": true,
	"when": true, "whose": true, "where": true, "if": true, "until": true,
	"over": true, "at": true, "to": true, "into": true, "is": true, "are": true,
	"run": true, "reached": true, "called": true, "without": true, "once": true,
	"so": true, "but": true, "because": true, "via": true, "since": true,
	"while": true, "per": true, "i.e.": true, "e.g.": true,
}

var (
	modelWord = regexp.MustCompile(`\b[Mm]odels\b`)
	// path:func, also with a space after the colon ("opt.c: foo") and
	// short paths ("opt.c:foo").
	kpathRef = regexp.MustCompile(`\b((?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_-]+\.[chS]):\s?([A-Za-z_][A-Za-z0-9_]*)`)
	kident   = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
)

// modelPhrases returns the reference phrases of a comment's text: for
// each "models", the words after it up to the end of the sentence or a
// ": " explanation (a path's own "file.c: func" colon excepted).
func modelPhrases(text string) []string {
	text = strings.Join(strings.Fields(text), " ")
	var out []string
	for _, loc := range modelWord.FindAllStringIndex(text, -1) {
		rest := text[loc[1]:]
		if strings.HasPrefix(rest, " of ") { // the noun: "models of its seq_file"
			continue
		}
		rest = strings.ReplaceAll(rest, " followed by ", " + ")
		// Join "file.c: func" so its colon does not end the phrase.
		rest = kpathRef.ReplaceAllString(rest, "$1:$2")
		end := len(rest)
		depth := 0
		for i := 0; i < len(rest); i++ {
			switch c := rest[i]; c {
			case '(':
				depth++
			case ')':
				if depth > 0 {
					depth--
				}
			case '.', ':', ';':
				if depth == 0 && (i+1 == len(rest) || rest[i+1] == ' ') {
					end = i
				}
			}
			if end != len(rest) {
				break
			}
		}
		out = append(out, rest[:end])
	}
	return out
}

// phraseNames returns the kernel names a reference phrase names, in order:
// "path:func" or a bare "func".
func phraseNames(phrase string) []string {
	// Drop parenthesised asides; an identifier right before one is a call.
	var b strings.Builder
	depth := 0
	for i := 0; i < len(phrase); i++ {
		c := phrase[i]
		switch {
		case c == '(':
			if depth == 0 && i > 0 && isIdentByte(phrase[i-1]) {
				b.WriteString("()")
			}
			depth++
		case c == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteByte(c)
		}
	}
	var names []string
	words := strings.Fields(phraseWithPaths(b.String()))
	prev := ""
	// A name listed right after a path:func ("main.c:a, b and c",
	// "jump_label.h:x / y") is in the same file; a call chain (a → b, a + b)
	// or any other word in between ends the list.
	listPath := ""
	for _, w := range words {
		if modelStop[w] {
			break
		}
		switch w {
		case ",", "/", "&", "and", "or":
			continue
		case "→", "+":
			listPath = ""
			continue
		}
		if strings.HasPrefix(w, "\x00") { // a path:func token
			p, fn, _ := strings.Cut(w[1:], ":")
			if fn == "struct" || fn == "enum" || fn == "union" {
				prev, listPath = fn, ""
				continue
			}
			names = append(names, w[1:])
			prev, listPath = w, p
			continue
		}
		w = strings.TrimSuffix(strings.TrimSuffix(strings.TrimRight(w, ",;"), "'s"), "'")
		call := strings.HasSuffix(w, "()")
		w = strings.TrimSuffix(w, "()")
		if kident.MatchString(w) && (call || strings.Contains(w, "_")) && prev != "struct" && prev != "enum" && prev != "union" {
			if listPath != "" {
				names = append(names, listPath+":"+w)
			} else {
				names = append(names, w)
			}
		} else {
			listPath = ""
		}
		prev = w
	}
	return names
}

// phraseWithPaths marks every path:func token (as "\x00path:func") and
// splits the rest of the phrase into words at list separators.
func phraseWithPaths(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range kpathRef.FindAllStringSubmatchIndex(s, -1) {
		b.WriteString(splitSeps(s[last:m[0]]))
		b.WriteString(" \x00" + s[m[2]:m[3]] + ":" + s[m[4]:m[5]] + " ")
		last = m[1]
	}
	b.WriteString(splitSeps(s[last:]))
	return b.String()
}

// splitSeps makes the list separators and call-chain arrows words of
// their own.
func splitSeps(s string) string {
	for _, sep := range []string{"→", "+", "/", ",", "&"} {
		s = strings.ReplaceAll(s, sep, " "+sep+" ")
	}
	return s
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// modelled is one Go declaration whose comments name kernel functions.
type modelled struct {
	kernel   []string // path.c:func, or a bare func
	goName   string   // pkg.Recv.Name, pkg.Type, pkg.Type.Method or "pkg (package)"
	file     string   // path:line
	ops      []string // ops its body increments (functions only)
	switches []string // switches its body tests (functions only)
}

// owner is a declaration a comment can belong to.
type owner struct {
	pos, end token.Pos
	name     string
	line     token.Pos
	fd       *ast.FuncDecl
}

// collectModels parses every non-test Go file under root (but testdata,
// hidden directories and docs itself) and returns the declarations whose
// comments, any paragraph, doc or body, say what they model.
func collectModels(t *testing.T, root string) []modelled {
	fset := token.NewFileSet()
	type pkgFile struct {
		dir string
		f   *ast.File
	}
	var files []pkgFile
	opVar := map[string]string{} // "dir.Ident" → op name
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != root || d.Name() == "testdata" || p == filepath.Join(root, "docs")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		dir = filepath.ToSlash(dir)
		files = append(files, pkgFile{dir, f})
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, v := range vs.Values {
				call, ok := v.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 || i >= len(vs.Names) {
					continue
				}
				var fn string
				switch e := call.Fun.(type) {
				case *ast.SelectorExpr:
					fn = e.Sel.Name
				case *ast.Ident:
					fn = e.Name
				}
				if fn != "NewOp" && fn != "NewMetric" {
					continue
				}
				if lit, ok := call.Args[0].(*ast.BasicLit); ok {
					name, _ := strconv.Unquote(lit.Value)
					opVar[dir+"."+vs.Names[i].Name] = name
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	switchName := map[string]string{}
	for _, pf := range files {
		if pf.dir == "sim" {
			switchConstants(pf.f, switchName)
		}
	}
	if len(switchName) == 0 {
		t.Fatal("found no sim.Switch constants")
	}
	var rows []modelled
	for _, pf := range files {
		imports := map[string]string{} // local name → dir
		for _, im := range pf.f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			rel, ok := strings.CutPrefix(path, "github.com/kpsim/kpsim/")
			if !ok {
				continue
			}
			name := filepath.Base(rel)
			if im.Name != nil {
				name = im.Name.Name
			}
			imports[name] = rel
		}
		owners := declOwners(pf.dir, pf.f)
		byOwner := map[int]*modelled{}
		var order []int
		for _, cg := range pf.f.Comments {
			var names []string
			for _, ph := range modelPhrases(cg.Text()) {
				names = append(names, phraseNames(ph)...)
			}
			if len(names) == 0 {
				continue
			}
			oi := -1 // the innermost declaration holding the comment
			for i, o := range owners {
				if o.pos <= cg.Pos() && cg.End() <= o.end && (oi < 0 || o.pos >= owners[oi].pos) {
					oi = i
				}
			}
			m := byOwner[oi]
			if m == nil {
				m = &modelled{}
				if oi >= 0 {
					o := owners[oi]
					pos := fset.Position(o.line)
					rel, _ := filepath.Rel(root, pos.Filename)
					m.goName, m.file = o.name, fmt.Sprintf("%s:%d", filepath.ToSlash(rel), pos.Line)
					if o.fd != nil && o.fd.Body != nil {
						m.ops, m.switches = bodyUses(o.fd.Body, pf.dir, imports, opVar, switchName)
					}
				} else {
					pos := fset.Position(cg.Pos())
					rel, _ := filepath.Rel(root, pos.Filename)
					m.goName, m.file = pf.dir+" (package)", fmt.Sprintf("%s:%d", filepath.ToSlash(rel), pos.Line)
				}
				byOwner[oi] = m
				order = append(order, oi)
			}
			m.kernel = append(m.kernel, names...)
		}
		for _, oi := range order {
			rows = append(rows, *byOwner[oi])
		}
	}
	return rows
}

// declOwners lists the declarations of f a comment can belong to: each
// function (its doc and body), each type (and its fields or interface
// methods), each var or const group.
func declOwners(dir string, f *ast.File) []owner {
	var out []owner
	start := func(doc *ast.CommentGroup, n ast.Node) token.Pos {
		if doc != nil {
			return doc.Pos()
		}
		return n.Pos()
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			out = append(out, owner{pos: start(d.Doc, d), end: d.End(), name: goName(dir, d), line: d.Pos(), fd: d})
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					doc := s.Doc
					if doc == nil && len(d.Specs) == 1 {
						doc = d.Doc
					}
					out = append(out, owner{pos: start(doc, s), end: s.End(), name: dir + "." + s.Name.Name, line: s.Pos()})
					var fields *ast.FieldList
					switch tt := s.Type.(type) {
					case *ast.StructType:
						fields = tt.Fields
					case *ast.InterfaceType:
						fields = tt.Methods
					}
					if fields != nil {
						for _, fl := range fields.List {
							if len(fl.Names) == 0 {
								continue
							}
							out = append(out, owner{pos: start(fl.Doc, fl), end: fl.End(), name: dir + "." + s.Name.Name + "." + fl.Names[0].Name, line: fl.Pos()})
						}
					}
				case *ast.ValueSpec:
					doc := s.Doc
					if doc == nil && len(d.Specs) == 1 {
						doc = d.Doc
					}
					out = append(out, owner{pos: start(doc, s), end: s.End(), name: dir + "." + s.Names[0].Name, line: s.Pos()})
				}
			}
			if d.Doc != nil && len(d.Specs) > 1 {
				// A group's own doc comment belongs to the group's first name.
				out = append(out, owner{pos: d.Doc.Pos(), end: d.Doc.End(), name: specName(dir, d.Specs[0]), line: d.Pos()})
			}
		}
	}
	return out
}

func specName(dir string, s ast.Spec) string {
	switch s := s.(type) {
	case *ast.TypeSpec:
		return dir + "." + s.Name.Name
	case *ast.ValueSpec:
		return dir + "." + s.Names[0].Name
	}
	return dir
}

// switchConstants adds sim's Switch constants (Go name → switch name) to m.
func switchConstants(f *ast.File, m map[string]string) {
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST || len(gd.Specs) == 0 {
			continue
		}
		first := gd.Specs[0].(*ast.ValueSpec)
		if id, ok := first.Type.(*ast.Ident); !ok || id.Name != "Switch" {
			continue
		}
		for i, s := range gd.Specs {
			name := s.(*ast.ValueSpec).Names[0].Name
			if strings.HasPrefix(name, "num") {
				break
			}
			m[name] = sim.Switch(i).String()
		}
	}
}

// bodyUses returns the ops a function body increments and the switches it
// tests, by the identifiers it names.
func bodyUses(body *ast.BlockStmt, dir string, imports, opVar, switchName map[string]string) (ops, sws []string) {
	o, s := map[string]bool{}, map[string]bool{}
	ast.Inspect(body, func(n ast.Node) bool {
		switch e := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok {
				if d, ok := imports[x.Name]; ok {
					if op, ok := opVar[d+"."+e.Sel.Name]; ok {
						o[op] = true
					}
					if d == "sim" && switchName[e.Sel.Name] != "" {
						s[switchName[e.Sel.Name]] = true
					}
				}
			}
		case *ast.Ident:
			if op, ok := opVar[dir+"."+e.Name]; ok {
				o[op] = true
			}
			if dir == "sim" && switchName[e.Name] != "" {
				s[switchName[e.Name]] = true
			}
		}
		return true
	})
	return keys(o), keys(s)
}

// resolveNames gives every bare or short-path name the full path the tree
// uses for it elsewhere, when exactly one full path is used.
func resolveNames(rows []modelled) {
	paths := map[string]map[string]bool{} // func → full paths
	files := map[string]bool{}            // every full path
	for _, m := range rows {
		for _, k := range m.kernel {
			if p, fn, ok := strings.Cut(k, ":"); ok && strings.Contains(p, "/") {
				if paths[fn] == nil {
					paths[fn] = map[string]bool{}
				}
				paths[fn][p] = true
				files[p] = true
			}
		}
	}
	for i := range rows {
		seen := map[string]bool{}
		var out []string
		for _, k := range rows[i].kernel {
			p, fn, ok := strings.Cut(k, ":")
			if !ok {
				p, fn = "", k
			}
			if !strings.Contains(p, "/") {
				var cands []string
				for full := range paths[fn] {
					if p == "" || strings.HasSuffix(full, "/"+p) {
						cands = append(cands, full)
					}
				}
				if len(cands) == 0 && p != "" {
					for full := range files {
						if strings.HasSuffix(full, "/"+p) {
							cands = append(cands, full)
						}
					}
				}
				if len(cands) == 1 {
					k = cands[0] + ":" + fn
				}
			}
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
		rows[i].kernel = out
	}
}

// TestDocsModel: docs/model.md maps every kernel function a comment says
// is modelled (any paragraph of a doc comment, a comment in a function
// body, a type's or a package's doc) to the Go declaration it belongs to,
// the counters a function's body increments and the switches it tests,
// read from the source with go/parser.
func TestDocsModel(t *testing.T) {
	rows := collectModels(t, "..")
	if len(rows) < 50 {
		t.Fatalf("found only %d modelling declarations", len(rows))
	}
	resolveNames(rows)
	type line struct{ kfn, row string }
	var lines []line
	for _, m := range rows {
		for _, k := range m.kernel {
			lines = append(lines, line{k, fmt.Sprintf("| `%s` | `%s` ([%s](../%s)) | %s | %s |", k, m.goName, m.file,
				strings.SplitN(m.file, ":", 2)[0], codeList(m.ops), codeList(m.switches))})
		}
	}
	sort.Slice(lines, func(i, j int) bool {
		if lines[i].kfn != lines[j].kfn {
			return lines[i].kfn < lines[j].kfn
		}
		return lines[i].row < lines[j].row
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%d kernel functions, modelled by %d Go declarations.\n\n", countDistinct(lines, func(l line) string { return l.kfn }), len(rows))
	b.WriteString("| kernel function | Go declaration | counters it increments (directly) | switches it tests |\n|:---|:---|:---|:---|\n")
	for _, l := range lines {
		b.WriteString(l.row + "\n")
	}
	checkGenerated(t, "model.md", b.String())
}

// TestModelPhrases: the reference forms the tree uses, and what each names.
func TestModelPhrases(t *testing.T) {
	for _, tc := range []struct{ comment, want string }{
		{"Models kernel/kprobes.c:get_kprobe.", "kernel/kprobes.c:get_kprobe"},
		{"Models the core part of kernel/static_call_inline.c:static_call_text_reserved with patch P1 (inferred from the series' cover letter).", "kernel/static_call_inline.c:static_call_text_reserved"},
		{"getSymbolPos models get_symbol_pos: the index.", "get_symbol_pos"},
		{"x models kernel/x.c:a_b and c_d.", "kernel/x.c:a_b kernel/x.c:c_d"},
		{"Models arch/x86/kernel/alternative.c:optimize_nops and optimize_nops_range.", "arch/x86/kernel/alternative.c:optimize_nops arch/x86/kernel/alternative.c:optimize_nops_range"},
		{"Models kernel/static_call_inline.c:static_call_addr/static_call_key/static_call_is_tail.", "kernel/static_call_inline.c:static_call_addr kernel/static_call_inline.c:static_call_key kernel/static_call_inline.c:static_call_is_tail"},
		{"Models arch/x86/include/asm/extable.h: ex_to_insn / ex_fixup_addr.", "arch/x86/include/asm/extable.h:ex_to_insn arch/x86/include/asm/extable.h:ex_fixup_addr"},
		{"c models opt.c:copy_optimized_instructions: copies.", "opt.c:copy_optimized_instructions"},
		{"k models kstrtol(s, 0): kstrtoul with a sign.", "kstrtol"},
		{"r models hlist_add_head_rcu(&p->hlist, &t[hash_ptr(p->addr, 6)]) in register_kprobe (6.1) and more.", "hlist_add_head_rcu"},
		{"r models copy_kprobe(ap, p) followed by kernel/kprobes.c:add_new_kprobe(ap, p) in register_aggr_kprobe.", "copy_kprobe kernel/kprobes.c:add_new_kprobe"},
		{"Models kernel/kprobes.c:remove_module_kprobe_blacklist → kprobe_remove_area_blacklist / kprobe_remove_ksym_blacklist.", "kernel/kprobes.c:remove_module_kprobe_blacklist kprobe_remove_area_blacklist kprobe_remove_ksym_blacklist"},
		{"Models include/linux/export.h:kernel_symbol and kernel/module/main.c:kernel_symbol_value / kernel_symbol_name.", "include/linux/export.h:kernel_symbol kernel/module/main.c:kernel_symbol_value kernel/module/main.c:kernel_symbol_name"},
		{"Models arch/x86/kernel/static_call.c:__static_call_fixup and the RET case of __static_call_transform.", "arch/x86/kernel/static_call.c:__static_call_fixup __static_call_transform"},
		{"m models module_address_lookup → __module_address + find_kallsyms_symbol: the closest.", "module_address_lookup __module_address find_kallsyms_symbol"},
		{"Models scripts/kallsyms.c:struct sym_entry.", ""},
		{"models struct trace_kprobe.", ""},
		{"the models of its seq_file (s_show).", ""},
		{"Models __within_kprobe_blacklist's list walk with kpsim's index.", "__within_kprobe_blacklist"},
		{"First paragraph.\n\nModels kernel/jump_label.c:jump_label_text_reserved.", "kernel/jump_label.c:jump_label_text_reserved"},
		{"p models kernel/trace/trace_event_perf.c:perf_kprobe_init as perf_event_open(2) reaches it.", "kernel/trace/trace_event_perf.c:perf_kprobe_init"},
	} {
		var got []string
		for _, ph := range modelPhrases(tc.comment) {
			got = append(got, phraseNames(ph)...)
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("%q names %q, want %q", tc.comment, g, tc.want)
		}
		var scanned []string
		for _, para := range strings.Split(tc.comment, "\n\n") {
			scanned = append(scanned, scanModels(para)...)
		}
		// The independent scan is the generator's lower bound: it skips
		// calls without an underscore (kstrtol).
		for _, n := range scanned {
			if !strings.Contains(" "+tc.want+" ", " "+n+" ") && !strings.Contains(tc.want+" ", ":"+n+" ") {
				t.Errorf("%q: the scan finds %s, which the generator does not", tc.comment, n)
			}
		}
	}
}
