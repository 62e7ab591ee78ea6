package module

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ListEntry is one line of /proc/modules or lsmod output.
type ListEntry struct {
	Name   string
	Size   uint64
	Refcnt int
	UsedBy []string // the modules that use this one ("-": none)
	State  string   // Live, Loading, Unloading; "" from lsmod
}

// ParseList reads a module list in either form:
//
//	/proc/modules:  name size refcount users state address [taints]
//	lsmod:          Module Size Used-by header, then name size refcount [users]
//
// Both list the newest module first (kernel/module/procfs.c:m_show walks
// the modules list from its head; lsmod prints /proc/modules in order).
// Lines are returned in file order; LoadOrder gives the order to load them
// in. name is the file's name, for errors ("FILE:LINE: problem").
func ParseList(name string, b []byte) ([]ListEntry, error) {
	var out []ListEntry
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n := 1
	for ; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if f[0] == "Module" && len(f) >= 2 && f[1] == "Size" {
			continue // lsmod's header
		}
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%s:%d: %s", name, n, fmt.Sprintf(format, a...))
		}
		if len(f) < 3 {
			return nil, bad("want \"name size refcount ...\" (/proc/modules or lsmod), got %q", line)
		}
		e := ListEntry{Name: NormalizeName(f[0])}
		if e.Name == "" || strings.ContainsAny(f[0], "/\x00") {
			return nil, bad("bad module name %q", f[0])
		}
		var err error
		if e.Size, err = strconv.ParseUint(f[1], 10, 64); err != nil {
			return nil, bad("module %s: size %q is not a number", f[0], f[1])
		}
		if e.Refcnt, err = strconv.Atoi(f[2]); err != nil || e.Refcnt < -1 {
			// module_refcount prints -1 for a module being forced out.
			return nil, bad("module %s: refcount %q is not a number", f[0], f[2])
		}
		if len(f) >= 4 && f[3] != "-" {
			for _, u := range strings.Split(strings.TrimSuffix(f[3], ","), ",") {
				if u != "" && u != "[permanent]" {
					e.UsedBy = append(e.UsedBy, NormalizeName(u))
				}
			}
		}
		if len(f) >= 6 { // /proc/modules: state and address follow
			switch f[4] {
			case "Live", "Loading", "Unloading":
				e.State = f[4]
			default:
				return nil, bad("module %s: state %q is not Live, Loading or Unloading", f[0], f[4])
			}
			if !strings.HasPrefix(f[5], "0x") {
				return nil, bad("module %s: address %q is not 0x...", f[0], f[5])
			}
		} else if len(f) == 5 {
			return nil, bad("module %s: /proc/modules lines have a state and an address, got %q", f[0], line)
		}
		if seen[e.Name] {
			return nil, bad("module %s listed twice", e.Name)
		}
		seen[e.Name] = true
		out = append(out, e)
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, fmt.Errorf("%s:%d: line longer than 1 MiB (not a module list?)", name, n)
	} else if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no modules listed", name)
	}
	return out, nil
}

// LoadOrder returns the names to load, oldest first: the reverse of the
// file's newest-first order. (Loader.Load still loads each one's
// dependencies before it.)
func LoadOrder(l []ListEntry) []string {
	out := make([]string, len(l))
	for i, e := range l {
		out[i] = e.Name
	}
	slices.Reverse(out)
	return out
}

// ParseNames splits a comma-separated module list ("kvm_intel,xfs"),
// given in load order.
func ParseNames(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			return nil, fmt.Errorf("empty module name in %q", s)
		}
		if strings.ContainsAny(n, "/\x00 ") {
			return nil, fmt.Errorf("bad module name %q", n)
		}
		n = NormalizeName(n)
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}
