// Package kconfig reads a kernel's build configuration: a .config file
// (the config-KVER Debian installs beside the image), the copy
// CONFIG_IKCONFIG embeds in the image (kernel/configs.c: the gzipped
// .config between the "IKCFG_ST" and "IKCFG_ED" markers), and the
// --kconfig overrides of the kpsim CLI.
//
// kpsim reads only the options that decide modelled behaviour (IBT,
// call padding, function alignment, retpolines, return thunks,
// kprobes-on-ftrace, kCFI, verbose bug entries); Config keeps every
// option so that a report can name what it used.
package kconfig

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Config is one parsed configuration: option name (with its CONFIG_
// prefix) to value ("y", "m", "16", "\"str\""); an option set "is not
// set" is present with value "n". From says where it came from.
type Config struct {
	Opts map[string]string
	From string
}

// MaxSize bounds a config file or an embedded config once unpacked
// (Debian's is about 280 KB).
const MaxSize = 16 << 20

var (
	setRE   = regexp.MustCompile(`^(CONFIG_[A-Za-z0-9_]+)=(.*)$`)
	unsetRE = regexp.MustCompile(`^# (CONFIG_[A-Za-z0-9_]+) is not set$`)
)

// Parse reads .config text. A line that is neither an assignment, a
// "# CONFIG_X is not set" line, a comment nor blank is an error naming
// its line number; so is input without a single option.
func Parse(from string, text []byte) (*Config, error) {
	if len(text) > MaxSize {
		return nil, fmt.Errorf("%s: %d bytes, more than a kernel config (%d)", from, len(text), MaxSize)
	}
	c := &Config{Opts: map[string]string{}, From: from}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if m := setRE.FindStringSubmatch(line); m != nil {
			c.Opts[m[1]] = m[2]
			continue
		}
		if m := unsetRE.FindStringSubmatch(line); m != nil {
			c.Opts[m[1]] = "n"
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		return nil, fmt.Errorf("%s:%d: not a kernel config line: %.60q", from, n, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", from, err)
	}
	if len(c.Opts) == 0 {
		return nil, fmt.Errorf("%s: no CONFIG_ options: not a kernel config", from)
	}
	return c, nil
}

// ReadFile parses the config file at path.
func ReadFile(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	c, err := Parse(path, b)
	if err != nil {
		return nil, err
	}
	c.From = "config file " + path
	return c, nil
}

var (
	ikcfgStart = []byte("IKCFG_ST")
	ikcfgEnd   = []byte("IKCFG_ED")
)

// Embedded finds the configuration CONFIG_IKCONFIG puts in the image
// (kernel/configs.c: "IKCFG_ST", the gzipped .config, "IKCFG_ED"). ok is
// false when the image has none. A marker pair whose content is not
// gzip is passed over (the marker strings also sit in the code that reads
// them); gzip content that does not unpack to a config is an error.
func Embedded(image []byte) (c *Config, ok bool, err error) {
	i := bytes.Index(image, ikcfgStart)
	for i >= 0 {
		rest := image[i+len(ikcfgStart):]
		j := bytes.Index(rest, ikcfgEnd)
		if j < 0 {
			return nil, false, nil
		}
		z, err := gzip.NewReader(bytes.NewReader(rest[:j]))
		if err == nil {
			b, err := io.ReadAll(io.LimitReader(z, MaxSize+1))
			if err != nil {
				return nil, true, fmt.Errorf("embedded config (IKCFG_ST): %v", err)
			}
			c, err := Parse("config in the image (CONFIG_IKCONFIG)", b)
			return c, true, err
		}
		// The marker string also sits in the code that reads it;
		// look for the next one.
		k := bytes.Index(rest, ikcfgStart)
		if k < 0 {
			break
		}
		i += len(ikcfgStart) + k
	}
	return nil, false, nil
}

// Beside returns the path of the config file Debian installs beside the
// kernel image at path, for release rel ("" when there is none):
// config-REL or config in the image's own directory (boot/config-REL next
// to boot/vmlinuz-REL, usr/lib/modules/REL/config next to its vmlinuz),
// and for the -dbg package's vmlinux unpacked in the same tree
// (R/usr/lib/debug/boot/vmlinux-REL, R/usr/lib/debug/lib/modules/REL/vmlinux)
// the image package's files under R. It never looks above the package
// tree, so a machine's own /boot is read only for an image in /boot.
func Beside(path, rel string) string {
	if rel == "" {
		return ""
	}
	dir := filepath.Dir(path)
	cands := []string{
		filepath.Join(dir, "config-"+rel),
		filepath.Join(dir, "config"),
	}
	for _, dbg := range []string{
		filepath.Join("usr", "lib", "debug", "boot"),
		filepath.Join("usr", "lib", "debug", "lib", "modules", rel),
	} {
		if root, ok := strings.CutSuffix(dir, string(filepath.Separator)+dbg); ok {
			cands = append(cands,
				filepath.Join(root, "boot", "config-"+rel),
				filepath.Join(root, "usr", "lib", "modules", rel, "config"),
				filepath.Join(root, "lib", "modules", rel, "config"))
		}
	}
	for _, c := range cands {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			return c
		}
	}
	return ""
}

// Bool reports whether option is set to y (or m). ok is false when the
// config does not mention it.
func (c *Config) Bool(option string) (v, ok bool) {
	s, ok := c.Opts[option]
	if !ok {
		return false, false
	}
	return s == "y" || s == "m", true
}

// Int returns option's integer value.
func (c *Config) Int(option string) (int, bool) {
	s, ok := c.Opts[option]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return 0, false
	}
	return int(n), true
}

// ParseOverrides reads --kconfig: comma-separated OPTION=VALUE pairs
// (CONFIG_ prefix optional: X86_KERNEL_IBT=n,CALL_PADDING=y). Only the
// options in known are accepted (nil: any), a bool option takes y, m or
// n and an integer option (in intOpts) a number: an option kpsim would
// not read is refused, never ignored.
func ParseOverrides(s string, known []string, intOpts []string) (*Config, error) {
	c := &Config{Opts: map[string]string{}, From: "--kconfig"}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%q: want OPTION=VALUE", kv)
		}
		if !strings.HasPrefix(k, "CONFIG_") {
			k = "CONFIG_" + k
		}
		if !setRE.MatchString(k + "=" + v) {
			return nil, fmt.Errorf("%q: not a config option name", k)
		}
		if known != nil && !slices.Contains(known, k) {
			return nil, fmt.Errorf("%s: not an option kpsim reads (it reads %s)", k, strings.Join(known, ", "))
		}
		if slices.Contains(intOpts, k) {
			if _, err := strconv.ParseInt(v, 0, 64); err != nil {
				return nil, fmt.Errorf("%s=%s: want a number", k, v)
			}
		} else if v != "y" && v != "m" && v != "n" {
			return nil, fmt.Errorf("%s=%s: want y, m or n", k, v)
		}
		c.Opts[k] = v
	}
	if len(c.Opts) == 0 {
		return nil, errors.New("no OPTION=VALUE pairs")
	}
	return c, nil
}
