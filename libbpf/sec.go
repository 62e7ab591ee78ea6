package libbpf

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/bpf"
	"github.com/kpsim/kpsim/sim"
)

// SecKind is the section_defs entry a SEC() name matched.
type SecKind uint8

const (
	SecKprobe SecKind = iota + 1
	SecKretprobe
	SecKprobeMulti
	SecKretprobeMulti
	SecKprobeSession
)

var secPrefixes = []struct {
	prefix string
	kind   SecKind
}{
	// section_defs order: "kprobe+" before "kprobe.multi+"; a '+' prefix
	// matches the bare name or the name followed by '/'.
	{"kprobe", SecKprobe},
	{"kretprobe", SecKretprobe},
	{"kprobe.multi", SecKprobeMulti},
	{"kretprobe.multi", SecKretprobeMulti},
	{"kprobe.session", SecKprobeSession},
}

func (k SecKind) String() string {
	for _, p := range secPrefixes {
		if p.kind == k {
			return p.prefix
		}
	}
	return "unknown"
}

// Sec is a parsed SEC() of a kprobe-type program.
type Sec struct {
	Name string
	Kind SecKind
	// AutoAttach is false for the bare SEC("kprobe"), SEC("kprobe.multi")
	// ... (no target: libbpf skips auto-attach).
	AutoAttach bool
	// Target is the function (kprobe/kretprobe) or pattern (multi, session).
	Target string
	Offset int64
}

// SecError is a SEC() libbpf refuses: the errno and libbpf's message.
type SecError struct {
	Err error
	Msg string
}

func (e *SecError) Error() string { return e.Msg + ": " + e.Err.Error() }
func (e *SecError) Unwrap() error { return e.Err }

// ParseSec models find_sec_def over the kprobe section_defs and the
// target parsing of attach_kprobe (sscanf "%m[a-zA-Z0-9_.]+%li": a
// negative offset, or an offset on a kretprobe, is -EINVAL),
// attach_kprobe_multi and attach_kprobe_session (sscanf
// "%m[a-zA-Z0-9_.*?]": an empty match is -EINVAL). A name no kprobe
// section_def matches is -EINVAL at load ("missing BPF prog type, check
// ELF section name").
func ParseSec(c *sim.Counters, name string) (Sec, error) {
	c.Inc(OpSecParse)
	s := Sec{Name: name}
	for _, p := range secPrefixes {
		if name == p.prefix {
			s.Kind = p.kind
			return s, nil
		}
		if strings.HasPrefix(name, p.prefix+"/") {
			s.Kind = p.kind
			s.AutoAttach = true
			spec := name[len(p.prefix)+1:]
			switch p.kind {
			case SecKprobe, SecKretprobe:
				fn, rest := scanClass(spec, isKprobeFuncChar)
				if fn == "" {
					return s, &SecError{EINVAL, "kprobe name is invalid: " + spec}
				}
				s.Target = fn
				if strings.HasPrefix(rest, "+") {
					if off, ok := scanLong(rest[1:]); ok {
						s.Offset = off
					}
				}
				if s.Offset < 0 {
					return s, &SecError{EINVAL, fmt.Sprintf("kprobe offset must be a non-negative integer: %d", s.Offset)}
				}
				if p.kind == SecKretprobe && s.Offset != 0 {
					return s, &SecError{EINVAL, "kretprobes do not support offset specification"}
				}
			default:
				pat, _ := scanClass(spec, isPatternChar)
				if pat == "" {
					what := "kprobe multi pattern is invalid: "
					if p.kind == SecKprobeSession {
						what = "kprobe session pattern is invalid: "
					}
					return s, &SecError{EINVAL, what + spec}
				}
				s.Target = pat
			}
			return s, nil
		}
	}
	return s, &SecError{EINVAL, fmt.Sprintf("missing BPF prog type, check ELF section name '%s'", name)}
}

func isKprobeFuncChar(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '.'
}

func isPatternChar(b byte) bool { return isKprobeFuncChar(b) || b == '*' || b == '?' }

// scanClass is sscanf's %[...] conversion: the longest prefix of class
// characters (empty means the conversion failed).
func scanClass(s string, in func(byte) bool) (string, string) {
	i := 0
	for i < len(s) && in(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

// scanLong is sscanf's %li: optional whitespace and sign, then strtol
// base 0 (0x hex, leading 0 octal, else decimal) over the longest valid
// prefix.
func scanLong(s string) (int64, bool) {
	s = strings.TrimLeft(s, " \t\n")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	base := 10
	digits := s
	switch {
	case strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X"):
		base, digits = 16, s[2:]
	case strings.HasPrefix(s, "0") && len(s) > 1:
		base, digits = 8, s[1:]
	}
	i := 0
	for i < len(digits) && digitVal(digits[i]) < base {
		i++
	}
	if i == 0 {
		if base != 10 { // "0x" or "0" alone: strtol reads the 0
			return 0, true
		}
		return 0, false
	}
	v, err := strconv.ParseInt(digits[:i], base, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

func digitVal(b byte) int {
	switch {
	case b >= '0' && b <= '9':
		return int(b - '0')
	case b >= 'a' && b <= 'z':
		return int(b-'a') + 10
	case b >= 'A' && b <= 'Z':
		return int(b-'A') + 10
	}
	return 99
}

// Attach models bpf_program__attach (auto-attach) for a kprobe-type
// program: the SEC is parsed and the matching attach function runs. A bare
// SEC ("kprobe", "kprobe.multi", ...) returns no link and no error.
func (l *Lib) Attach(c *sim.Counters, progName, sec string) (*Link, error) {
	prev := c.Enter(PhaseParse)
	s, err := ParseSec(c, sec)
	c.Enter(prev)
	if err != nil {
		if se, ok := err.(*SecError); ok {
			l.warn(se.Msg)
			return nil, se.Err
		}
		return nil, err
	}
	if !s.AutoAttach {
		return nil, nil
	}
	prog := &bpf.Prog{Name: progName}
	switch s.Kind {
	case SecKprobe, SecKretprobe:
		return l.AttachKprobe(c, prog, s.Target, uint64(s.Offset), s.Kind == SecKretprobe)
	case SecKprobeMulti, SecKretprobeMulti:
		return l.AttachKprobeMultiOpts(c, prog, s.Target, true, KprobeMultiOpts{Retprobe: s.Kind == SecKretprobeMulti})
	default:
		return l.AttachKprobeMultiOpts(c, prog, s.Target, true, KprobeMultiOpts{Session: true})
	}
}
