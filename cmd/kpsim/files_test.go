package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kpsim/kpsim/image/cache"
)

// TestOutputNotAnInputNorAnotherOutput: an output on the same file as an
// input (by path, hard link or symlink) or as another output (also by
// another spelling of a new path) is refused in one line naming both
// flags, exit 2, and nothing is written: the input keeps its bytes and no
// file appears.
func TestOutputNotAnInputNorAnotherOutput(t *testing.T) {
	dir := t.TempDir()
	targets := filepath.Join(dir, "t.txt")
	costs := filepath.Join(dir, "c.costs")
	const tbody, cbody = "vfs_read\n", "kprobe.hash.visit 3\n"
	os.WriteFile(targets, []byte(tbody), 0o644)
	os.WriteFile(costs, []byte(cbody), 0o644)
	hard, sym := filepath.Join(dir, "hard.txt"), filepath.Join(dir, "sym.txt")
	if err := os.Link(targets, hard); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("t.txt", sym); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	newOut := filepath.Join(dir, "r.txt")
	sweep := []string{"sweep", "many", "--n", "50,100", "--patches", "none"}
	many := append([]string{"run", "many", "--patches", "none"}, small...)
	for _, tc := range []struct {
		name  string
		args  []string
		wants []string
	}{
		{"out is the targets", append(many, "--targets", targets, "--out", targets), []string{"--out " + targets, "--targets " + targets}},
		{"out is a hard link to the targets", append(many, "--targets", targets, "--out", hard), []string{"--out " + hard, "--targets " + targets}},
		{"out is a symlink to the targets", append(many, "--targets", targets, "--out", sym), []string{"--out " + sym, "--targets " + targets}},
		{"probes is the targets through a symlink", append(many, "--targets", sym, "--probes", targets), []string{"--probes", "--targets"}},
		{"out is the costs", append(many, "--costs", costs, "--out", costs), []string{"--out", "--costs"}},
		{"out and probes on one new path", append(many, "--out", newOut, "--probes", filepath.Join(sub, "..", "r.txt")), []string{"--out", "--probes", "one output would replace the other"}},
		{"out and probes both stdout", append(many, "--out", "-", "--probes", "-"), []string{"--probes - and --out - both write to stdout"}},
		{"probes on stdout with the report", append(many, "--probes", "-"), []string{"--probes - and the report (stdout without --out)"}},
		{"probes is the modules list", []string{"run", "many", "--kernel", targets, "--modules", "@" + costs, "--probes", costs}, []string{"--probes", "--modules"}},
		{"out is the kernel", []string{"run", "many", "--kernel", sym, "--out", targets}, []string{"--out", "--kernel"}},
		{"sweep out is the costs", append(sweep, "--costs", costs, "--out", costs), []string{"--out", "--costs"}},
		{"sweep plot and out", append(sweep, "--plot", filepath.Join(dir, "p.svg"), "--out", filepath.Join(sub, "..", "p.svg")), []string{"--out", "--plot"}},
		{"report out is the costs", []string{"report", "many", "--n", "50", "--format", "html", "--costs", costs, "--out", costs}, []string{"--out", "--costs"}},
		{"calibrate out is the symbols", []string{"calibrate", "--symbols", targets, "--out", hard}, []string{"--out", "--symbols"}},
		{"boot sites is the kernel", []string{"image", "--kernel", targets, "--boot-sites", sym}, []string{"--boot-sites", "--kernel"}},
		{"run kallsyms out is the symbols", []string{"run", "kallsyms", "--symbols", targets, "--out", targets}, []string{"--out", "--symbols"}},
		{"run session out is the costs", []string{"run", "session", "--kernel-version", "6.1", "--costs", costs, "--out", costs}, []string{"--out", "--costs"}},
	} {
		out, errs, code := runKpsim(tc.args...)
		if code != 2 || strings.Count(errs, "\n") != 1 || out != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2, one line", tc.name, code, out, errs)
		}
		for _, w := range tc.wants {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: stderr %q lacks %q", tc.name, errs, w)
			}
		}
		if b, _ := os.ReadFile(targets); string(b) != tbody {
			t.Fatalf("%s: the targets were replaced: %q", tc.name, b)
		}
		if b, _ := os.ReadFile(costs); string(b) != cbody {
			t.Fatalf("%s: the costs were replaced: %q", tc.name, b)
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 5 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Fatalf("%s: files now %v", tc.name, names)
		}
	}
}

// TestOutputDashIsStdout: --probes - writes the per-probe lines to stdout
// (no file named -) while the report goes to --out; --out - is stdout.
func TestOutputDashIsStdout(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	out, errs, code := runKpsim(append([]string{"run", "many", "--patches", "none", "--out", "r.txt", "--probes", "-"}, smallRun...)...)
	if code != 0 || !strings.HasPrefix(out, "run\ttarget\t") {
		t.Fatalf("exit %d, stderr %q, stdout %.80q", code, errs, out)
	}
	if _, err := os.Stat("-"); err == nil {
		t.Error("a file named - was written")
	}
	rep, _ := os.ReadFile("r.txt")
	out, _, code = runKpsim(append([]string{"run", "many", "--patches", "none", "--out", "-"}, smallRun...)...)
	if code != 0 || out == "" || stripWallLines(out) != stripWallLines(string(rep)) {
		t.Errorf("--out -: exit %d, stdout differs from --out FILE's report:\n%s\n---\n%s", code, out, rep)
	}
	if _, err := os.Stat("-"); err == nil {
		t.Error("a file named - was written")
	}
}

// stripWallLines drops the lines that carry the simulator's own run time.
func stripWallLines(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, "wall") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// TestOutputReadOnlyRefused: an existing file without write permission is
// refused, one line, exit 2, its bytes kept (root would replace it too:
// the check is the mode's).
func TestOutputReadOnlyRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ro.txt")
	os.WriteFile(p, []byte("keep\n"), 0o444)
	os.Chmod(p, 0o444)
	_, errs, code := runKpsim(append([]string{"run", "many", "--out", p}, smallRun...)...)
	if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "read-only (mode 0444)") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if b, _ := os.ReadFile(p); string(b) != "keep\n" {
		t.Errorf("replaced: %q", b)
	}
	if l := leftovers(t, filepath.Dir(p)); len(l) != 0 {
		t.Errorf("temporary files left: %v", l)
	}
}

// failWriter fails every write as /dev/full does.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestOutputDevFull: --out /dev/full is refused before the work (exit 2,
// one line); a stdout that takes no bytes is a runtime error (exit 1, one
// line), also for a command that prints straight to stdout.
func TestOutputDevFull(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	_, errs, code := runKpsim(append([]string{"run", "many", "--out", "/dev/full"}, smallRun...)...)
	if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "--out: cannot write /dev/full: no space left on device") {
		t.Errorf("--out /dev/full: exit %d, stderr %q", code, errs)
	}
	for _, args := range [][]string{{"list"}, append([]string{"run", "many", "--patches", "none"}, smallRun...)} {
		var e bytes.Buffer
		code := run(args, failWriter{}, &e)
		if code != 1 || strings.Count(e.String(), "\n") != 1 || !strings.HasSuffix(e.String(), ": writing stdout: no space left on device\n") {
			t.Errorf("%v to a full stdout: exit %d, stderr %q", args[0], code, e.String())
		}
	}
}

// TestCalibrateSignalRemovesWorkDir: SIGINT while calibrate compiles
// removes its work directory, and kpsim dies of the signal.
func TestCalibrateSignalRemovesWorkDir(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	// A compiler that answers --version and is slow to compile, so the
	// signal lands while it runs.
	dir := t.TempDir()
	cc := filepath.Join(dir, "slow-cc")
	os.WriteFile(cc, []byte("#!/bin/sh\ncase \"$1\" in --version) exec "+gcc+" --version;; esac\nsleep 1\nexec "+gcc+" \"$@\"\n"), 0o755)
	tmp := filepath.Join(dir, "tmp")
	os.Mkdir(tmp, 0o755)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKpsimHelper$")
	cmd.Env = append(os.Environ(), "KPSIM_MAIN_HELPER=1", "TMPDIR="+tmp)
	cmd.Args = append(cmd.Args, append([]string{"--", "calibrate", "--quick", "--cc", cc, "--out", filepath.Join(dir, "c.costs")}, small...)...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stderr)
	var work string
	for work == "" {
		line, err := r.ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("calibrate said no compiling line (%v)", err)
		}
		if _, d, ok := strings.Cut(strings.TrimSpace(line), "compiling the C benchmarks in "); ok {
			work = d
		}
	}
	time.Sleep(200 * time.Millisecond) // the slow compiler runs
	if _, err := os.Stat(work); err != nil {
		t.Fatalf("work directory %s: %v", work, err)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err = cmd.Wait()
	var ee *exec.ExitError
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !errors.As(err, &ee) || !(ws.Signaled() && ws.Signal() == syscall.SIGINT || ws.ExitStatus() == 130) {
		t.Errorf("calibrate ended with %v, not by SIGINT", err)
	}
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Errorf("work directory %s left after SIGINT (%v)", work, err)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left in TMPDIR: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(dir, "c.costs")); !os.IsNotExist(err) {
		t.Error("the cost file was written")
	}
}

// TestCacheTempRemovedOnSignal: a cache entry being written when SIGTERM
// or SIGINT comes leaves no temporary file (cache.TempHook registers it
// with installCleanup).
func TestCacheTempRemovedOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestKpsimHelper$")
		cmd.Env = append(os.Environ(), "KPSIM_MAIN_HELPER=cache-temp", "KPSIM_CACHE_DIR="+dir)
		tmp := startPending(t, cmd)
		if _, err := os.Stat(tmp); err != nil {
			t.Fatal(err)
		}
		cmd.Process.Signal(sig)
		cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != sig {
			t.Errorf("%v: helper ended with %v", sig, cmd.ProcessState)
		}
		if _, err := os.Stat(tmp); !os.IsNotExist(err) {
			t.Errorf("%v: %s left (%v)", sig, tmp, err)
		}
	}
}

// TestKpsimHelper runs kpsim in a child process: the arguments after --.
func TestKpsimHelper(t *testing.T) {
	switch os.Getenv("KPSIM_MAIN_HELPER") {
	case "":
		t.Skip("helper process only")
	case "cache-temp": // a cache write in progress
		f, done, err := cache.CreateTemp(os.Getenv("KPSIM_CACHE_DIR"), ".tmp-*")
		if err != nil {
			t.Fatal(err)
		}
		defer done()
		os.Stdout.WriteString("pending " + f.Name() + "\n")
		time.Sleep(30 * time.Second)
		return
	}
	for i, a := range os.Args {
		if a == "--" {
			os.Exit(run(os.Args[i+1:], os.Stdout, os.Stderr))
		}
	}
	os.Exit(2)
}

// TestOutputBlockDeviceRefused: a block device (a disk) is never an
// output: one line, exit 2, before any work.
func TestOutputBlockDeviceRefused(t *testing.T) {
	ents, _ := os.ReadDir("/dev")
	dev := ""
	for _, e := range ents {
		if e.Type()&os.ModeDevice != 0 && e.Type()&os.ModeCharDevice == 0 {
			dev = filepath.Join("/dev", e.Name())
			break
		}
	}
	if dev == "" {
		t.Skip("no block device in /dev")
	}
	_, errs, code := runKpsim(append([]string{"run", "many", "--probes", dev}, smallRun...)...)
	if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, dev+" is a block device") {
		t.Errorf("--probes %s: exit %d, stderr %q", dev, code, errs)
	}
}
