package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	flag "github.com/spf13/pflag"

	"github.com/kpsim/kpsim/scenarios"
)

// fileSet is the registry of the files one command reads and writes: every
// command that writes a file builds one (newFileSet) from its parsed flags,
// which registers the input files they name, and opens each output through
// it (fileSet.out). An output is refused, before any work and with one
// line naming both flags, when it is the same file as an input or as
// another output: the same inode (os.SameFile, so a hard link or a symlink
// to it counts), or, for a path that does not exist yet, the same cleaned
// absolute path (its directory's symlinks resolved). "-" is stdout; the
// report a command prints when --out is not given is a stdout output too,
// so two outputs never both reach stdout. Two outputs on one character
// device (/dev/null) are allowed: nothing is lost there.
//
// Sweeps register each point's scenario inputs in the sweep's set as the
// points parse their flags (manyCaller.files), so an input given to the
// scenario is checked against the sweep's --out and --plot too.
type fileSet struct {
	stdout io.Writer
	mu     sync.Mutex
	uses   []fileUse
}

// fileUse is one file a command reads or writes.
type fileUse struct {
	flag   string // "--targets", or a description of an implicit output
	path   string // as given
	target string // an output's resolved path (symlinks followed)
	out    bool
	stdout bool        // "-" or the default report output
	st     fs.FileInfo // nil when the path does not exist (yet)
	abs    string      // cleaned absolute path, directory symlinks resolved
}

// inputFlags maps the flags that name an input file to the file their value
// names ("" when the value names none: a count, a keyword, stdin).
var inputFlags = map[string]func(v string) string{
	"kernel": func(v string) string {
		if v == "synthetic" {
			return ""
		}
		return v
	},
	"modules": func(v string) string {
		if p, ok := strings.CutPrefix(v, "@"); ok {
			return p
		}
		return ""
	},
	"targets": func(v string) string {
		if kind, p := scenarios.ParseTargetKind(v); kind == scenarios.TargetsFile && p != "-" {
			return p
		}
		return ""
	},
	"symbols": func(v string) string { return v },
	"costs":   func(v string) string { return v },
	"replay":  func(v string) string { return v },
}

// newFileSet returns the registry of a command whose parsed flags are fl
// (nil: none yet) and whose stdout is stdout, with the inputs fl names.
func newFileSet(fl *flag.FlagSet, stdout io.Writer) (*fileSet, error) {
	s := &fileSet{stdout: stdout}
	return s, s.inputsOf(fl)
}

// inputsOf registers the input files the set flags of fl name.
func (s *fileSet) inputsOf(fl *flag.FlagSet) error {
	if fl == nil {
		return nil
	}
	var err error
	fl.Visit(func(f *flag.Flag) {
		if of, ok := inputFlags[f.Name]; ok && err == nil {
			if p := of(f.Value.String()); p != "" {
				err = s.add(fileUse{flag: "--" + f.Name, path: p})
			}
		}
	})
	return err
}

// out checks the output path of flag name against every file registered
// and opens it (see openOut): nil when path is empty, stdout for "-".
// The caller defers abort.
func (s *fileSet) out(name, path string) (*atomicFile, error) {
	if path == "" {
		return nil, nil
	}
	if path == "-" {
		if err := s.add(fileUse{flag: "--" + name, path: "-", out: true, stdout: true}); err != nil {
			return nil, err
		}
		return &atomicFile{path: "stdout", w: s.stdout}, nil
	}
	target, _, err := resolveOutput(path)
	if err != nil {
		return nil, usagef("--%s: %s", name, err.Error())
	}
	if err := s.add(fileUse{flag: "--" + name, path: path, out: true, target: target}); err != nil {
		return nil, err
	}
	return openOut(name, path)
}

// report opens --out (path) for a command's report; without it the
// report goes to stdout, registered so no other output may be "-".
func (s *fileSet) report(path string) (*atomicFile, error) {
	if err := s.stdoutReport(path); err != nil {
		return nil, err
	}
	return s.out("out", path)
}

// stdoutReport registers the report a command prints on stdout when its
// --out (path) is not given, so no other output may be "-".
func (s *fileSet) stdoutReport(path string) error {
	if path != "" {
		return nil
	}
	return s.add(fileUse{flag: "the report (stdout without --out)", path: "-", out: true, stdout: true})
}

// add registers u, refusing it when it is an output on a file registered
// before, or an input that an output registered before would replace.
func (s *fileSet) add(u fileUse) error {
	if !u.stdout {
		p := u.path
		if u.target != "" {
			p = u.target
		}
		if st, err := os.Stat(p); err == nil {
			u.st = st
		}
		u.abs = cleanAbs(p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.uses {
		if !u.out && !v.out || !sameFile(u, v) {
			continue
		}
		if u.flag == v.flag && u.path == v.path {
			continue // the same flag registered again (a sweep's points)
		}
		if u.stdout {
			other := v.flag
			if strings.HasPrefix(other, "--") {
				other += " -"
			}
			return usagef("%s - and %s both write to stdout; give one of them a FILE", u.flag, other)
		}
		if u.out && v.out && u.st != nil && u.st.Mode()&fs.ModeCharDevice != 0 {
			continue
		}
		first, second := v, u
		if !v.out { // name the output first
			first, second = u, v
		}
		what := "the output would replace the input"
		if first.out && second.out {
			what = "one output would replace the other"
		}
		return usagef("%s %s and %s %s are the same file: %s; give another path", first.flag, first.path, second.flag, second.path, what)
	}
	s.uses = append(s.uses, u)
	return nil
}

// sameFile: both stdout, or the same inode, or (one not existing yet)
// the same absolute path.
func sameFile(a, b fileUse) bool {
	if a.stdout || b.stdout {
		return a.stdout && b.stdout
	}
	if a.st != nil && b.st != nil {
		return os.SameFile(a.st, b.st)
	}
	return a.abs == b.abs
}

// cleanAbs is path made absolute and clean, with the symlinks of its
// directory resolved as far as it exists (so dir-link/new and dir/new,
// neither existing yet, are one path).
func cleanAbs(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	dir, base := filepath.Dir(abs), filepath.Base(abs)
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Join(d, base)
	}
	return abs
}

// errStdout is a write to stdout that failed (a full disk, /dev/full, a
// closed pipe): reported in one line, exit status 1.
type errStdout struct{ err error }

func (e *errStdout) Error() string { return fmt.Sprintf("writing stdout: %v", e.err) }

// stdoutWriter keeps the first error a write to stdout met, so a command
// that prints straight to stdout still fails when the bytes did not go.
type stdoutWriter struct {
	w   io.Writer
	err error
}

func (s *stdoutWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	if err != nil {
		s.err = &errStdout{unwrapPathErr(err)}
		return n, s.err
	}
	return n, nil
}
