// Package load opens a kernel for kpsim from a file, whatever its form: a
// bzImage (vmlinuz), a vmlinux ELF (full or stripped), detected from the
// file's magic. Every error names the file and the problem.
package load

import (
	"bytes"
	"fmt"
	"os"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/bzimage"
	"github.com/kpsim/kpsim/image/elfload"
)

// Kind is a detected file type.
type Kind int

const (
	Unknown Kind = iota
	ELF
	BzImage
)

func (k Kind) String() string { return [...]string{"unknown", "ELF", "bzImage"}[k] }

// Detect tells the file type from its first bytes.
func Detect(b []byte) Kind {
	switch {
	case bytes.HasPrefix(b, []byte("\x7fELF")):
		return ELF
	case bzimage.IsBzImage(b):
		return BzImage
	}
	return Unknown
}

// Open reads path and loads the kernel it holds.
func Open(path string) (*image.Kernel, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if pe, ok := err.(*os.PathError); ok {
			return nil, fmt.Errorf("%s: %v", path, pe.Err)
		}
		return nil, err
	}
	return Bytes(path, b)
}

// Bytes loads the kernel in b, read from the file called name.
func Bytes(name string, b []byte) (*image.Kernel, error) {
	switch Detect(b) {
	case ELF:
		return elfload.Load(name, b)
	case BzImage:
		vmlinux, _, err := bzimage.Decompress(name, b)
		if err != nil {
			return nil, err
		}
		k, err := elfload.Load(name, vmlinux)
		if err != nil {
			return nil, err
		}
		return k, nil
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%s: empty file", name)
	}
	return nil, fmt.Errorf("%s: not a kernel image (neither a bzImage nor an ELF; symbol files go to --symbols)", name)
}
