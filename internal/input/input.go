// Package input reads the files a user names on the command line (a
// kernel image, a symbol list, a module list) with a bound that fits each
// kind, and refuses what is not a regular file: a wrong path such as
// /dev/zero or a FIFO fails at once with one line, instead of growing the
// process without end or blocking it.
package input

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Bounds by kind of input, each well above the largest real one.
const (
	// MaxKernel bounds a kernel image: a bzImage is ~10 MB, a vmlinux
	// with DWARF (Debian's -dbg packages) ~1 GB.
	MaxKernel = 2 << 30
	// MaxSymbols bounds a symbol list: System.map or /proc/kallsyms of a
	// distro kernel with its modules is 10-30 MB.
	MaxSymbols = 256 << 20
	// MaxList bounds a small text list (lsmod output, a target list): a
	// few hundred KB at most.
	MaxList = 64 << 20
)

// Open opens path for reading if it is a regular file (procfs files such
// as /proc/kallsyms are), and returns a reader that fails past max bytes.
// Errors name path and say what is wrong in one line.
func Open(path string, max int64) (io.ReadCloser, error) {
	// Checked before opening: opening a FIFO for reading blocks until a
	// writer comes. O_NONBLOCK keeps a FIFO that replaced the file in
	// between from blocking the open; fstat then rechecks.
	if st, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s: %v", path, unwrap(err))
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, kind(st.Mode()))
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, unwrap(err))
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %v", path, unwrap(err))
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, kind(st.Mode()))
	}
	if st.Size() > max {
		f.Close()
		return nil, fmt.Errorf("%s: %d bytes, more than the %d this input can be", path, st.Size(), max)
	}
	return &bounded{f: f, r: io.LimitReader(f, max+1), path: path, max: max}, nil
}

// ReadFile reads the regular file at path, at most max bytes.
func ReadFile(path string, max int64) ([]byte, error) {
	r, err := Open(path, max)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// bounded fails a read that goes past max (a file that grew, or a procfs
// file whose size stat does not tell).
type bounded struct {
	f    *os.File
	r    io.Reader
	n    int64
	path string
	max  int64
}

func (b *bounded) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.n > b.max {
		return n, fmt.Errorf("%s: more than the %d bytes this input can be", b.path, b.max)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return n, fmt.Errorf("%s: %v", b.path, unwrap(err))
	}
	return n, err
}

func (b *bounded) Close() error { return b.f.Close() }

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.String()
}

func unwrap(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
