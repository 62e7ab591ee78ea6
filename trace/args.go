package trace

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/errno"
)

// The fetch-argument syntax of trace_probe.c:traceprobe_parse_probe_arg
// that kpsim checks: [NAME=]FETCHARG[:TYPE] with FETCHARG one of $retval
// (return probes), $stack, $stackN, $comm, $argN (not in 6.1 kprobe events
// without BTF: refused), %REG, @ADDR, @SYM[+|-OFF], +|-OFF(FETCHARG), and
// TYPE one of the basic types, string, ustring, symbol, or b<bits>@<off>/<size>.

var x86Regs = map[string]bool{
	"ax": true, "bx": true, "cx": true, "dx": true, "si": true, "di": true, "bp": true, "sp": true,
	"ip": true, "flags": true, "cs": true, "ss": true, "orig_ax": true,
	"r8": true, "r9": true, "r10": true, "r11": true, "r12": true, "r13": true, "r14": true, "r15": true,
}

var basicTypes = map[string]bool{
	"u8": true, "u16": true, "u32": true, "u64": true, "s8": true, "s16": true, "s32": true, "s64": true,
	"x8": true, "x16": true, "x32": true, "x64": true, "string": true, "ustring": true, "symbol": true,
}

// argName is the field name: NAME= or "argN" (1-based), as the kernel names it.
func argName(arg string, i int) string {
	if j := strings.IndexByte(arg, '='); j > 0 {
		return arg[:j]
	}
	return fmt.Sprintf("arg%d", i+1)
}

// argType is the :TYPE suffix, or "" (unsigned long).
func argType(arg string) string {
	body := arg
	if j := strings.IndexByte(body, '='); j > 0 {
		body = body[j+1:]
	}
	if j := strings.LastIndexByte(body, ':'); j >= 0 {
		return body[j+1:]
	}
	return ""
}

// argSymbol reports an @SYM fetch (resolved by traceprobe_update_arg).
func argSymbol(arg string) (string, bool) {
	body := arg
	if j := strings.IndexByte(body, '='); j > 0 {
		body = body[j+1:]
	}
	if j := strings.LastIndexByte(body, ':'); j >= 0 {
		body = body[:j]
	}
	for strings.HasSuffix(body, ")") {
		k := strings.IndexByte(body, '(')
		if k < 0 {
			break
		}
		body = body[k+1 : len(body)-1]
	}
	if !strings.HasPrefix(body, "@") {
		return "", false
	}
	s := body[1:]
	if _, err := strconv.ParseUint(s, 0, 64); err == nil {
		return "", false
	}
	if k := strings.IndexAny(s, "+-"); k >= 0 {
		s = s[:k]
	}
	return s, true
}

// parseProbeArg models traceprobe_parse_probe_arg for one argument: its
// allocations (name, command text, fetch instructions) and its checks.
func (t *Tracing) parseProbeArg(arg string, i int, isReturn bool, tk *TraceKprobe) *probeErr {
	c := t.counters()
	const fn = "traceprobe_parse_probe_arg"
	c.Add(opLineByte, uint64(len(arg)))
	c.Add(opKmalloc, 3)
	name := argName(arg, i)
	body := arg
	if j := strings.IndexByte(arg, '='); j > 0 {
		body = arg[j+1:]
	}
	if !isGoodName(name, false) {
		return refuse(errno.EINVAL, fn, fmt.Sprintf("argument name %q is not [A-Za-z_][A-Za-z0-9_]*", name))
	}
	for _, o := range tk.Args {
		if argName(o, 0) == name && strings.Contains(o, "=") {
			return refuse(errno.EINVAL, fn, fmt.Sprintf("argument name %q is used twice", name))
		}
	}
	if len(body) > t.g.maxArgstrLen {
		// traceprobe_parse_probe_arg_body: ARG_TOO_LONG.
		return refuse(t.g.argTooLong, fn, fmt.Sprintf("traceprobe_parse_probe_arg_body: argument is %d characters, longer than MAX_ARGSTR_LEN (%d in %s; -EINVAL in 6.1, -E2BIG from 6.12, 255 from 7.3)", len(body), t.g.maxArgstrLen, t.g.gen))
	}
	if j := strings.LastIndexByte(body, ':'); j >= 0 {
		typ := body[j+1:]
		body = body[:j]
		if !basicTypes[typ] && !validBitfield(typ) {
			return refuse(errno.EINVAL, fn, fmt.Sprintf("unknown type %q", typ))
		}
	}
	if perr := checkFetch(body, isReturn, 0); perr != nil {
		return perr
	}
	tk.Args = append(tk.Args, arg)
	return nil
}

func validBitfield(typ string) bool {
	// b<bit-width>@<bit-offset>/<container-size>
	if !strings.HasPrefix(typ, "b") {
		return false
	}
	var w, o, s int
	n, err := fmt.Sscanf(typ, "b%d@%d/%d", &w, &o, &s)
	return err == nil && n == 3 && w > 0 && s > 0 && o >= 0 && w+o <= s
}

func checkFetch(body string, isReturn bool, depth int) *probeErr {
	const fn = "traceprobe_parse_probe_arg"
	switch {
	case body == "":
		return refuse(errno.EINVAL, fn, "empty fetch argument")
	case body == "$retval":
		if !isReturn {
			return refuse(errno.EINVAL, fn, "$retval is only for return probes")
		}
	case body == "$stack", body == "$comm", body == "$COMM":
	case strings.HasPrefix(body, "$stack"):
		if _, err := strconv.ParseUint(body[6:], 10, 32); err != nil {
			return refuse(errno.EINVAL, fn, fmt.Sprintf("bad stack index %q", body))
		}
	case strings.HasPrefix(body, "$"):
		return refuse(errno.EINVAL, fn, fmt.Sprintf("unknown variable %q", body))
	case strings.HasPrefix(body, "%"):
		if !x86Regs[body[1:]] {
			return refuse(errno.EINVAL, fn, fmt.Sprintf("unknown register %q", body))
		}
	case strings.HasPrefix(body, "@"):
		if len(body) == 1 {
			return refuse(errno.EINVAL, fn, "empty @ fetch")
		}
	case body[0] == '+' || body[0] == '-':
		k := strings.IndexByte(body, '(')
		if k < 0 || !strings.HasSuffix(body, ")") {
			return refuse(errno.EINVAL, fn, fmt.Sprintf("bad dereference %q", body))
		}
		if _, ok := kstrtol(body[:k]); !ok {
			return refuse(errno.EINVAL, fn, fmt.Sprintf("bad dereference offset %q", body[:k]))
		}
		if depth >= 8 {
			return refuse(errno.EINVAL, fn, "dereference nested too deep")
		}
		return checkFetch(body[k+1:len(body)-1], isReturn, depth+1)
	default:
		if _, ok := kstrtoul(body); ok {
			return refuse(errno.EINVAL, fn, fmt.Sprintf("an immediate needs \\ (\\%s)", body))
		}
		if strings.HasPrefix(body, "\\") {
			return nil
		}
		return refuse(errno.EINVAL, fn, fmt.Sprintf("bad fetch argument %q", body))
	}
	return nil
}
