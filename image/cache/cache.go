// Package cache keeps what kpsim derives from its inputs and can rebuild
// at will (generated images, kallsyms tables, decompressed and loaded
// kernels) in one directory tree, so a second run skips the work.
//
// The root is $KPSIM_CACHE_DIR, else the user cache directory's kpsim
// (XDG_CACHE_HOME or ~/.cache, then kpsim); each kind of entry has its
// own subdirectory (vmlinux/, image/, kallsyms/). KPSIM_NO_CACHE=1 (or a
// command's --no-cache) bypasses every kind.
//
// An entry's file name is a SHA-256 over the entry kind, the cache format
// version, the kpsim build (the Go build ID of the running executable, or
// the executable's hash when it has none) and every input that shapes the
// entry, so neither a changed input nor a rebuilt kpsim ever reads an old
// entry (tests run as their own executable, with their own build ID).
// Entries are written to a temporary file in the same directory and
// renamed into place, so concurrent runs never see a partial entry, and
// each ends with a trailer (magic, length, CRC-32C of the payload): an
// entry that does not check out is ignored and rewritten. The cache is the
// simulator's, never a source of different bytes: any failure falls back
// to building the value.
package cache

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// Version changes whenever the entry layout (the trailer, the key
// derivation) does.
const Version = "c1"

// Root is the cache root: $KPSIM_CACHE_DIR, else UserCacheDir/kpsim; ""
// when there is none.
func Root() string {
	if d := os.Getenv("KPSIM_CACHE_DIR"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "kpsim")
}

// Dir is the subdirectory of the root that holds one kind of entry ("" when
// there is no root).
func Dir(kind string) string {
	r := Root()
	if r == "" {
		return ""
	}
	return filepath.Join(r, kind)
}

// Disabled reports whether KPSIM_NO_CACHE=1 turns every cache off.
func Disabled() bool { return os.Getenv("KPSIM_NO_CACHE") == "1" }

var build struct {
	once sync.Once
	id   string
}

// BuildID identifies the running kpsim build: the Go build ID from the
// executable's .note.go.buildid (it changes with any change to the code
// or the toolchain), else a SHA-256 of the executable; "" when neither can
// be read (the cache is then off).
func BuildID() string {
	build.once.Do(func() {
		exe, err := os.Executable()
		if err != nil {
			return
		}
		if f, err := elf.Open(exe); err == nil {
			if s := f.Section(".note.go.buildid"); s != nil {
				if d, err := s.Data(); err == nil && len(d) > 16 {
					build.id = "go:" + string(bytes.TrimRight(d[16:], "\x00"))
				}
			}
			f.Close()
		}
		if build.id != "" {
			return
		}
		f, err := os.Open(exe)
		if err != nil {
			return
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err == nil {
			build.id = "sha256:" + hex.EncodeToString(h.Sum(nil))
		}
	})
	return build.id
}

// Key names an entry of the kind from its inputs (each written with its
// length, so no two input lists share a key).
func Key(kind string, inputs ...[]byte) string {
	h := sha256.New()
	for _, in := range append([][]byte{[]byte(Version), []byte(BuildID()), []byte(kind)}, inputs...) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(in)))
		h.Write(n[:])
		h.Write(in)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// trailer: magic, payload length, CRC-32C of the payload.
const trailerMagic = "KPSIMC01"

const trailerLen = len(trailerMagic) + 8 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Usable reports whether the cache may be used at all: no --no-cache, no
// KPSIM_NO_CACHE=1, a root and a build ID.
func Usable(noCache bool) bool {
	return !noCache && !Disabled() && Root() != "" && BuildID() != ""
}

// Get returns the payload of the entry kind/key, or false when it is
// absent or does not check out. A hit marks the entry used (Touch).
func Get(kind, key string) ([]byte, bool) {
	path := filepath.Join(Dir(kind), key)
	b, err := os.ReadFile(path)
	if err != nil || len(b) < trailerLen {
		return nil, false
	}
	p, t := b[:len(b)-trailerLen], b[len(b)-trailerLen:]
	if string(t[:len(trailerMagic)]) != trailerMagic ||
		binary.LittleEndian.Uint64(t[len(trailerMagic):]) != uint64(len(p)) ||
		binary.LittleEndian.Uint32(t[len(trailerMagic)+8:]) != crc32.Checksum(p, castagnoli) {
		return nil, false
	}
	Touch(path)
	return p, true
}

// Put stores payload as the entry kind/key: written whole to a temporary
// file and renamed, so a reader sees the old entry, the new one or none;
// then the cache is trimmed to its cap (Trim). Failures are ignored (the
// value is rebuilt next time).
func Put(kind, key string, payload []byte) {
	dir := Dir(kind)
	if dir == "" || os.MkdirAll(dir, 0o755) != nil {
		return
	}
	f, done, err := CreateTemp(dir, ".tmp-*")
	if err != nil {
		return
	}
	defer done()
	var t [trailerLen]byte
	copy(t[:], trailerMagic)
	binary.LittleEndian.PutUint64(t[len(trailerMagic):], uint64(len(payload)))
	binary.LittleEndian.PutUint32(t[len(trailerMagic)+8:], crc32.Checksum(payload, castagnoli))
	_, werr := f.Write(payload)
	if werr == nil {
		_, werr = f.Write(t[:])
	}
	cerr := f.Close()
	if werr == nil && cerr == nil && os.Chmod(f.Name(), 0o644) == nil && os.Rename(f.Name(), filepath.Join(dir, key)) == nil {
		trimAfterWrite(filepath.Join(dir, key))
		return
	}
	os.Remove(f.Name())
}
