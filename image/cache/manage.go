package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The cache is bounded: after every write the entries are trimmed, least
// recently used first, to MaxSize (KPSIM_CACHE_MAX, default DefaultMax).
// A hit refreshes its entry's modification time (Touch), so the time is
// its last use.
//
// Trimming cannot hurt another kpsim using the cache at the same time:
// entries are only ever created by renaming a finished temporary file
// into place, so removing one makes a reader that opens it afterwards
// miss (and rebuild the value), a reader that has it open keeps reading
// the whole file (the inode lives until it is closed), and a writer's
// temporary file (a dot-file) is never trimmed while it can be in use:
// only temporary files older than StaleTemp are removed, left by a
// process that died before its rename.

// DefaultMax is the cache's size cap when KPSIM_CACHE_MAX is not set.
const DefaultMax = 1 << 30

// StaleTemp is the age past which a temporary file is a dead writer's.
const StaleTemp = time.Hour

// kinds says what each kind of entry is keyed on (kpsim cache list).
var kinds = map[string]string{
	"vmlinux":  "decompressed bzImage: its SHA-256",
	"image":    "generated synthetic image: the generator's configuration, kpsim build",
	"kallsyms": "kallsyms tables: the symbol list, build options, kpsim build",
	"kernel":   "loaded kernel image: its SHA-256, path, boot CPU, generation, config, kpsim build",
}

// Entry is one file of the cache.
type Entry struct {
	Kind    string // the subdirectory: vmlinux, image, kallsyms, kernel
	Name    string // the file name (the key)
	Path    string
	Size    int64
	Used    time.Time // last written or read (modification time)
	Temp    bool      // a temporary file of a write (dot-file)
	KeyedOn string    // what the key covers, when the kind is known
}

// Entries lists the cache's files, least recently used first: nil
// without a root or when the root does not exist yet.
func Entries() ([]Entry, error) {
	root := Root()
	if root == "" {
		return nil, nil
	}
	kindDirs, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, kd := range kindDirs {
		if !kd.IsDir() {
			continue
		}
		dir := filepath.Join(root, kd.Name())
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.Type().IsRegular() {
				continue
			}
			info, err := e.Info()
			if err != nil {
				continue // removed meanwhile
			}
			out = append(out, Entry{Kind: kd.Name(), Name: e.Name(), Path: filepath.Join(dir, e.Name()),
				Size: info.Size(), Used: info.ModTime(), Temp: strings.HasPrefix(e.Name(), "."), KeyedOn: kinds[kd.Name()]})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Used.Equal(out[j].Used) {
			return out[i].Used.Before(out[j].Used)
		}
		return out[i].Path < out[j].Path
	})
	return out, nil
}

// Total is the bytes of es.
func Total(es []Entry) int64 {
	var n int64
	for _, e := range es {
		n += e.Size
	}
	return n
}

// MaxSize is the cap: KPSIM_CACHE_MAX (ParseSize), else DefaultMax. An
// unreadable value is an error (the caller keeps DefaultMax).
func MaxSize() (int64, error) {
	v := os.Getenv("KPSIM_CACHE_MAX")
	if v == "" {
		return DefaultMax, nil
	}
	n, err := ParseSize(v)
	if err != nil {
		return DefaultMax, fmt.Errorf("KPSIM_CACHE_MAX: %v", err)
	}
	return n, nil
}

// ParseSize reads a size: bytes, or a number with K, M, G or T (powers of
// 1024; KiB, MB... accepted, all binary).
func ParseSize(s string) (int64, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	num, mult := strings.TrimSuffix(u, "B"), int64(1)
suffixes:
	for i, p := range "KMGT" {
		for _, suf := range []string{string(p) + "IB", string(p) + "B", string(p)} {
			if rest, ok := strings.CutSuffix(u, suf); ok {
				num, mult = rest, int64(1)<<(10*(i+1))
				break suffixes
			}
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("size %q: want bytes or a number with K, M, G or T (1024-based)", s)
	}
	return int64(f * float64(mult)), nil
}

// FormatSize writes n bytes as a 1024-based size.
func FormatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Remove removes the entries es (one already gone is not an error) and
// returns those it removed.
func Remove(es []Entry) []Entry {
	var done []Entry
	for _, e := range es {
		if err := os.Remove(e.Path); err == nil {
			done = append(done, e)
		}
	}
	return done
}

// Trim removes entries, least recently used first, until the cache holds
// at most max bytes, and temporary files older than StaleTemp; keep (a
// path just written, or "") is never removed. It returns what it removed.
func Trim(max int64, keep string) ([]Entry, error) {
	es, err := Entries()
	if err != nil {
		return nil, err
	}
	total := Total(es)
	var drop []Entry
	now := time.Now()
	for _, e := range es {
		switch {
		case e.Path == keep:
		case e.Temp:
			if now.Sub(e.Used) > StaleTemp {
				drop = append(drop, e)
				total -= e.Size
			}
		case total > max:
			drop = append(drop, e)
			total -= e.Size
		}
	}
	return Remove(drop), nil
}

// trimAfterWrite is Trim to MaxSize after a write of path; failures are
// ignored (the cache is the simulator's, never a reason to fail).
func trimAfterWrite(path string) {
	max, _ := MaxSize()
	_, _ = Trim(max, path)
}

// Touch marks the entry at path used now (a hit), for Trim's order.
func Touch(path string) {
	now := time.Now()
	_ = os.Chtimes(path, now, now)
}

// Stored is called after a file was renamed into the cache at path (by a
// writer outside this package, image/load's vmlinux entries): the cache is
// trimmed to its cap.
func Stored(path string) { trimAfterWrite(path) }

// TempHook, when set, is told of every temporary file a cache write
// creates and returns what to call once the file is renamed or removed:
// kpsim registers them with its SIGINT/SIGTERM cleanup, so an interrupted
// write leaves nothing behind (Trim removes what a killed one left, once
// StaleTemp old).
var TempHook func(path string) (done func())

// CreateTemp creates a temporary file in dir for an entry being written
// (os.CreateTemp), told to TempHook; the caller calls done after the
// rename or the removal.
func CreateTemp(dir, pattern string) (f *os.File, done func(), err error) {
	f, err = os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, nil, err
	}
	done = func() {}
	if TempHook != nil {
		done = TempHook(f.Name())
	}
	return f, done, nil
}
