package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/renameio/v2"
)

// atomicFile is an output file (--out, --probes, --plot, ...) written whole
// or not at all, without ever replacing what is not a regular file:
//
//   - a new path or a regular file: a temporary file beside the target,
//     fsynced and renamed over it (renameio), created 0666 minus the umask
//     or with the mode of the file it replaces;
//   - a symlink: the same, at the link's final target, so the link stays;
//   - a character device, a FIFO, a socket or a /proc magic link
//     (/dev/stdout, /dev/fd/N): written through, opened only at commit so
//     a FIFO's reader need not be there before the work is done;
//   - a directory or a block device: refused before any work;
//   - a regular file without write permission (mode 0444) or that the
//     user may not write: refused, not replaced behind its owner's back;
//   - a character device that fails an empty write (/dev/full): refused.
//
// Pending temporary files are removed on SIGINT and SIGTERM.
type atomicFile struct {
	path    string    // as given, for messages
	target  string    // what is written: the resolved path
	through bool      // write through (device, FIFO, magic link)
	w       io.Writer // "-": the command's stdout (fileSet.out)
	pending *renameio.PendingFile
}

// newAtomicFile checks that path can be written and, for a regular file
// or a new path, creates the temporary file.
func newAtomicFile(path string) (*atomicFile, error) {
	if path == "" {
		return nil, errors.New("empty path")
	}
	target, magic, err := resolveOutput(path)
	if err != nil {
		return nil, err
	}
	a := &atomicFile{path: path, target: target}
	st, err := os.Stat(target)
	switch {
	case err == nil && st.IsDir():
		return nil, fmt.Errorf("%s is a directory", path)
	case err == nil && st.Mode()&fs.ModeDevice != 0 && st.Mode()&fs.ModeCharDevice == 0:
		return nil, fmt.Errorf("%s is a block device (kpsim writes reports, not disks)", path)
	case err == nil && (magic || !st.Mode().IsRegular()):
		// A device, FIFO or socket: write through. Check access now so a
		// bad path costs nothing.
		if err := syscall.Access(target, 2 /* W_OK */); err != nil {
			return nil, fmt.Errorf("cannot write %s: %v", path, err)
		}
		if st.Mode()&fs.ModeCharDevice != 0 {
			if err := probeDevice(target); err != nil {
				return nil, fmt.Errorf("cannot write %s: %v", path, err)
			}
		}
		a.through = true
		return a, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("cannot write %s: %v", path, unwrapPathErr(err))
	case err == nil && st.Mode().Perm()&0o222 == 0:
		return nil, fmt.Errorf("%s is read-only (mode %04o): not replaced (chmod u+w it or give another path)", path, st.Mode().Perm())
	case err == nil:
		if err := syscall.Access(target, 2 /* W_OK */); err != nil {
			return nil, fmt.Errorf("cannot write %s: %v", path, err)
		}
	}
	opts := []renameio.Option{renameio.WithTempDir(filepath.Dir(target))}
	if err == nil {
		opts = append(opts, renameio.WithExistingPermissions())
	} else {
		opts = append(opts, renameio.WithPermissions(0o666)) // the umask applies
	}
	pendingMu.Lock()
	defer pendingMu.Unlock()
	p, err := renameio.NewPendingFile(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot write %s: %v", path, unwrapPathErr(err))
	}
	a.pending = p
	installCleanup()
	pending[a] = true
	return a, nil
}

// probeDevice writes nothing to a character device: a device that
// refuses every write (/dev/full: ENOSPC) fails it, /dev/null and a
// terminal take it. O_NONBLOCK: a device must not block the check.
func probeDevice(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return unwrapPathErr(err)
	}
	defer f.Close()
	if _, err := f.Write(nil); err != nil && !errors.Is(err, syscall.EAGAIN) {
		return unwrapPathErr(err)
	}
	return nil
}

// openOut checks the output path of flag name before any work (a bad
// path costs nothing): nil when path is empty. The caller defers abort.
// Commands open their outputs through their fileSet (fileSet.out), which
// checks them against their inputs and each other first.
func openOut(name, path string) (*atomicFile, error) {
	if path == "" {
		return nil, nil
	}
	a, err := newAtomicFile(path)
	if err != nil {
		return nil, usagef("--%s: %s", name, err.Error())
	}
	return a, nil
}

// emitReport writes a report whole: write fills a buffer, which goes to
// sink, or to stdout when sink is nil. Nothing is written if write fails.
func emitReport(sink *atomicFile, stdout io.Writer, write func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	if sink != nil {
		return sink.commit(buf.Bytes())
	}
	_, err := stdout.Write(buf.Bytes())
	return err
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// formatted is a report's writers (scenarios/report) by --format name.
type formatted struct {
	table, json, csv, bench func(io.Writer) error
}

// writeFormat writes a report to w in format (json, csv, bench; anything
// else is the table).
func writeFormat(w io.Writer, format string, r formatted) error {
	switch format {
	case "json":
		return r.json(w)
	case "csv":
		return r.csv(w)
	case "bench":
		return r.bench(w)
	}
	return r.table(w)
}

// resolveOutput follows symlinks in path to the file a write reaches.
// magic reports a link into /proc (/dev/stdout → /proc/self/fd/1 →
// pipe:[N]): such a link cannot be renamed over, only written through.
func resolveOutput(path string) (target string, magic bool, err error) {
	target = path
	for hops := 0; ; hops++ {
		if hops > 40 {
			return "", false, fmt.Errorf("cannot write %s: too many levels of symbolic links", path)
		}
		abs, _ := filepath.Abs(target)
		if strings.HasPrefix(abs, "/proc/") {
			return target, true, nil
		}
		st, err := os.Lstat(target)
		if err != nil || st.Mode()&fs.ModeSymlink == 0 {
			return target, false, nil
		}
		link, err := os.Readlink(target)
		if err != nil {
			return "", false, fmt.Errorf("cannot write %s: %v", path, unwrapPathErr(err))
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(target), link)
		}
		target = link
	}
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// commit writes b and makes it visible: renamed over the target, or
// written through.
func (a *atomicFile) commit(b []byte) error {
	if a.w != nil {
		_, err := a.w.Write(b)
		return err
	}
	if a.through {
		f, err := os.OpenFile(a.target, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("writing %s: %v", a.path, unwrapPathErr(err))
		}
		if _, err := f.Write(b); err != nil {
			f.Close()
			return fmt.Errorf("writing %s: %v", a.path, unwrapPathErr(err))
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("writing %s: %v", a.path, unwrapPathErr(err))
		}
		return nil
	}
	pendingMu.Lock()
	defer pendingMu.Unlock()
	if a.pending == nil {
		return fmt.Errorf("writing %s: already written", a.path)
	}
	defer delete(pending, a)
	if _, err := a.pending.Write(b); err != nil {
		a.pending.Cleanup()
		return fmt.Errorf("writing %s: %v", a.path, unwrapPathErr(err))
	}
	if err := a.pending.CloseAtomicallyReplace(); err != nil {
		a.pending.Cleanup()
		return fmt.Errorf("writing %s: %v", a.path, unwrapPathErr(err))
	}
	a.pending = nil
	return nil
}

// abort removes the temporary file if commit did not run (safe to defer,
// also on the nil file of an output not asked for).
func (a *atomicFile) abort() {
	if a == nil {
		return
	}
	pendingMu.Lock()
	defer pendingMu.Unlock()
	if a.pending != nil {
		a.pending.Cleanup()
		a.pending = nil
	}
	delete(pending, a)
}

var (
	pendingMu   sync.Mutex
	pending     = map[*atomicFile]bool{}
	tempDirs    = map[string]bool{}
	tempFiles   = map[string]bool{}
	cleanupOnce sync.Once
)

// makeTempDir creates a temporary work directory (calibrate's) that is
// removed on SIGINT and SIGTERM as the pending outputs are; the caller
// defers removeTempDir.
func makeTempDir(pattern string) (string, error) {
	pendingMu.Lock()
	defer pendingMu.Unlock()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	installCleanup()
	tempDirs[dir] = true
	return dir, nil
}

// removeTempDir removes a directory makeTempDir made.
func removeTempDir(dir string) {
	pendingMu.Lock()
	defer pendingMu.Unlock()
	os.RemoveAll(dir)
	delete(tempDirs, dir)
}

// trackTempFile registers a temporary file that is not an output (the
// cache's entries being written: cache.TempHook) for removal on SIGINT and
// SIGTERM; done unregisters it.
func trackTempFile(path string) (done func()) {
	pendingMu.Lock()
	defer pendingMu.Unlock()
	installCleanup()
	tempFiles[path] = true
	return func() {
		pendingMu.Lock()
		defer pendingMu.Unlock()
		delete(tempFiles, path)
	}
}

// installCleanup removes every pending temporary file (outputs' and the
// cache's) and temporary directory on SIGINT or SIGTERM, then dies of the same signal (so the
// shell sees 130 or 143).
func installCleanup() {
	cleanupOnce.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			sig := <-ch
			pendingMu.Lock()
			for a := range pending {
				if a.pending != nil {
					a.pending.Cleanup()
				}
			}
			for f := range tempFiles {
				os.Remove(f)
			}
			for d := range tempDirs {
				// A compiler still running in d may add a file
				// between RemoveAll's reads: try again.
				for i := 0; i < 3 && os.RemoveAll(d) != nil; i++ {
				}
			}
			signal.Reset(syscall.SIGINT, syscall.SIGTERM)
			s := sig.(syscall.Signal)
			_ = syscall.Kill(os.Getpid(), s)
			// The default action ends the process; the lock stays held so
			// no commit renames a file in the meantime. A process started
			// with the signal ignored (a `cmd &` in a script) gets SIG_IGN
			// back from Reset, and the kill does nothing: end it as the
			// default action would have, still holding the lock (a commit
			// blocked on it would otherwise wait forever).
			time.Sleep(50 * time.Millisecond)
			os.Exit(128 + int(s))
		}()
	})
}
