package main

import (
	"bufio"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeOut(t *testing.T, path, data string) error {
	t.Helper()
	a, err := newAtomicFile(path)
	if err != nil {
		return err
	}
	defer a.abort()
	return a.commit([]byte(data))
}

func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var tmp []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			tmp = append(tmp, e.Name())
		}
	}
	return tmp
}

func TestOutputNewFileKeepsUmask(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	dir := t.TempDir()
	p := filepath.Join(dir, "r.txt")
	if err := writeOut(t, p, "hello\n"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o640 {
		t.Errorf("mode %o, want 0640 (0666 minus umask 027)", got)
	}
	if b, _ := os.ReadFile(p); string(b) != "hello\n" {
		t.Errorf("content %q", b)
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("temporary files left: %v", l)
	}
}

func TestOutputRegularFileReplacedAtomically(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.txt")
	if err := os.WriteFile(p, []byte("old"), 0o604); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o604)
	a, err := newAtomicFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// Until commit the old content stays.
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("target changed before commit: %q", b)
	}
	if err := a.commit([]byte("new")); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o604 {
		t.Errorf("mode %o, want the replaced file's 0604", st.Mode().Perm())
	}
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Errorf("content %q", b)
	}
}

func TestOutputAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.txt")
	a, err := newAtomicFile(p)
	if err != nil {
		t.Fatal(err)
	}
	a.abort()
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("aborted output exists: %v", err)
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("temporary files left: %v", l)
	}
}

func TestOutputSymlinkWritesTarget(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "sub", "real.txt")
	os.Mkdir(filepath.Dir(real), 0o755)
	os.WriteFile(real, []byte("old"), 0o644)
	link := filepath.Join(dir, "link.txt")
	if err := os.Symlink("sub/real.txt", link); err != nil {
		t.Fatal(err)
	}
	if err := writeOut(t, link, "new"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(link)
	if err != nil || st.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("the symlink was replaced: %v %v", st.Mode(), err)
	}
	if b, _ := os.ReadFile(real); string(b) != "new" {
		t.Errorf("target content %q", b)
	}
	// A dangling link: the target is created, the link stays.
	dangling := filepath.Join(dir, "dangling")
	os.Symlink("made.txt", dangling)
	if err := writeOut(t, dangling, "x"); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(dangling); st.Mode()&fs.ModeSymlink == 0 {
		t.Error("the dangling symlink was replaced")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "made.txt")); string(b) != "x" {
		t.Errorf("dangling target content %q", b)
	}
	// A loop is an error, not a hang.
	os.Symlink("loop2", filepath.Join(dir, "loop1"))
	os.Symlink("loop1", filepath.Join(dir, "loop2"))
	if err := writeOut(t, filepath.Join(dir, "loop1"), "x"); err == nil || !strings.Contains(err.Error(), "symbolic links") {
		t.Errorf("symlink loop: %v", err)
	}
}

func TestOutputDevNullStaysDevice(t *testing.T) {
	if err := writeOut(t, "/dev/null", "discarded\n"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat("/dev/null")
	if err != nil || st.Mode()&fs.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is no longer a character device: %v %v", st.Mode(), err)
	}
	if l := leftovers(t, "/dev"); len(l) != 0 {
		for _, n := range l {
			if strings.HasPrefix(n, ".null") {
				t.Errorf("temporary file left in /dev: %s", n)
			}
		}
	}
}

func TestOutputFIFOWrittenThrough(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	// The check must not open the FIFO (that would block without a reader).
	a, err := newAtomicFile(p)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string)
	go func() {
		f, err := os.Open(p)
		if err != nil {
			got <- err.Error()
			return
		}
		defer f.Close()
		b := make([]byte, 64)
		n, _ := f.Read(b)
		got <- string(b[:n])
	}()
	if err := a.commit([]byte("through")); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "through" {
		t.Errorf("reader got %q", s)
	}
	if st, _ := os.Lstat(p); st.Mode()&fs.ModeNamedPipe == 0 {
		t.Error("the FIFO was replaced")
	}
}

func TestOutputDevStdout(t *testing.T) {
	// /dev/stdout → /proc/self/fd/1: a magic link, written through.
	target, magic, err := resolveOutput("/dev/stdout")
	if err != nil {
		t.Skip(err)
	}
	if !magic {
		t.Errorf("/dev/stdout resolved to %s, not a /proc link", target)
	}
	// In a child whose stdout is a pipe, --out /dev/stdout reaches it.
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutputHelper$")
	cmd.Env = append(os.Environ(), "KPSIM_OUTPUT_HELPER=stdout")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	if !strings.Contains(string(out), "to-stdout") {
		t.Errorf("child's stdout %q lacks the report", out)
	}
}

func TestOutputRefusals(t *testing.T) {
	dir := t.TempDir()
	if err := writeOut(t, dir, "x"); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: %v", err)
	}
	// A symlink to a directory is refused too.
	dlink := filepath.Join(t.TempDir(), "d")
	os.Symlink(dir, dlink)
	if err := writeOut(t, dlink, "x"); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("symlink to a directory: %v", err)
	}
	unwritable := filepath.Join(dir, "ro", "r.txt")
	os.Mkdir(filepath.Dir(unwritable), 0o500)
	if os.Geteuid() == 0 {
		unwritable = "/proc/kpsim-no-such-dir/r.txt" // root writes anywhere else
	}
	if err := writeOut(t, unwritable, "x"); err == nil || !strings.Contains(err.Error(), "cannot write") {
		t.Errorf("unwritable directory: %v", err)
	}
	if err := writeOut(t, filepath.Join(dir, "missing", "r.txt"), "x"); err == nil || !strings.Contains(err.Error(), "cannot write") {
		t.Errorf("missing directory: %v", err)
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("temporary files left: %v", l)
	}
}

// TestOutputCLIRefusesDirectory: the CLI's --out names the problem in one
// line and exits 2 before any work.
func TestOutputCLIRefusesDirectory(t *testing.T) {
	_, errs, code := runKpsim(append([]string{"run", "many", "--out", t.TempDir()}, smallRun...)...)
	if code != 2 || !strings.Contains(errs, "is a directory") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

// TestOutputSignalRemovesTemp: SIGTERM while an output is pending removes
// its temporary file and ends the process by the signal.
func TestOutputSignalRemovesTemp(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestOutputHelper$")
		cmd.Env = append(os.Environ(), "KPSIM_OUTPUT_HELPER=wait", "KPSIM_OUTPUT_PATH="+filepath.Join(dir, "r.txt"))
		startPending(t, cmd)
		if l := leftovers(t, dir); len(l) != 1 {
			t.Fatalf("want one pending temporary file, have %v", l)
		}
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != sig {
			t.Errorf("%v: helper ended with %v, not by the signal", sig, err)
		}
		if l := leftovers(t, dir); len(l) != 0 {
			t.Errorf("%v: temporary files left: %v", sig, l)
		}
		if _, err := os.Stat(filepath.Join(dir, "r.txt")); !os.IsNotExist(err) {
			t.Errorf("%v: the output exists after the signal", sig)
		}
	}
}

// TestOutputSignalIgnoredAtStart: started with SIGINT ignored (a `cmd &`
// in a script), kpsim still catches it while an output is pending (Go
// installs the handler), removes the temporary file and exits within 2 s,
// the output file untouched. It used to restore SIG_IGN, send itself a
// signal that did nothing, and block the next commit on the lock the
// handler kept.
func TestOutputSignalIgnoredAtStart(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "r.txt")
	if err := os.WriteFile(out, []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The shell ignores SIGINT and execs the helper, which inherits SIG_IGN.
	cmd := exec.Command("sh", "-c", `trap "" INT; exec "$0" -test.run='^TestOutputHelper$'`, os.Args[0])
	cmd.Env = append(os.Environ(), "KPSIM_OUTPUT_HELPER=wait-commit", "KPSIM_OUTPUT_PATH="+out)
	startPending(t, cmd)
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("SIGINT with SIGINT ignored at start: still running after 2 s")
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !(ws.Signaled() && ws.Signal() == syscall.SIGINT || ws.Exited() && ws.ExitStatus() == 128+int(syscall.SIGINT)) {
		t.Errorf("helper ended with %v, want SIGINT or exit 130", cmd.ProcessState)
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("temporary files left: %v", l)
	}
	if b, _ := os.ReadFile(out); string(b) != "before\n" {
		t.Errorf("the output was touched: %q", b)
	}
}

// TestOutputHelper is the child process of the tests above.
func TestOutputHelper(t *testing.T) {
	switch os.Getenv("KPSIM_OUTPUT_HELPER") {
	case "stdout":
		if err := writeOut(t, "/dev/stdout", "to-stdout\n"); err != nil {
			t.Fatal(err)
		}
	case "wait", "wait-commit":
		a, err := newAtomicFile(os.Getenv("KPSIM_OUTPUT_PATH"))
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("pending\n")
		if os.Getenv("KPSIM_OUTPUT_HELPER") == "wait" {
			time.Sleep(30 * time.Second)
			a.abort()
			return
		}
		// As a run: work, then commit the report.
		time.Sleep(500 * time.Millisecond)
		if err := a.commit([]byte("after\n")); err != nil {
			t.Fatal(err)
		}
	default:
		t.Skip("helper process only")
	}
}

// startPending starts a helper process and waits for its "pending ..."
// line (an output or cache entry is then half-written); it returns the
// line's rest.
func startPending(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "pending") {
		t.Fatalf("helper said %q (%v)", line, err)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "pending"))
}
