package ktab

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// KSYM_NAME_LEN is the kernel's symbol name limit: names of KSYM_NAME_LEN
// bytes or more are refused (include/linux/kallsyms.h, scripts/kallsyms.c).
const KSYM_NAME_LEN = 512

// isSpace is C isspace() in the "C" locale, the separator set fscanf uses.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// fields splits a line on C whitespace (not Unicode whitespace: names are
// bytes, and a UTF-8 no-break space is part of a name as far as fscanf is
// concerned).
func fields(line []byte, out [][]byte) [][]byte {
	out = out[:0]
	i := 0
	for i < len(line) {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			break
		}
		j := i
		for j < len(line) && !isSpace(line[j]) {
			j++
		}
		out = append(out, line[i:j])
		i = j
	}
	return out
}

// ParseSymbols reads a symbol list in System.map / `nm -n` / /proc/kallsyms
// form: one `addr type name` per line, addr in hex (an optional 0x prefix
// is accepted, as %llx does), type a single byte. A fourth field `[mod]`
// marks a module symbol (Symbol.Module = "mod"); /proc/kallsyms pseudo
// modules such as [__builtin__ftrace] and [bpf] are module symbols too.
// Blank lines are skipped. Errors name the input and the 1-based line:
// malformed address or type, wrong field count, a name of KSYM_NAME_LEN
// (512) bytes or more, or a NUL byte; an input with no symbol is an error.
//
// Unlike scripts/kallsyms.c:read_symbol, which prints a message and skips
// a too-long name (6.1: "Symbol %s too long for kallsyms") and silently
// skips lines fscanf cannot match, ParseSymbols refuses them: a list the
// simulator loads should not lose symbols quietly. Build keeps the 6.1
// behaviour for too-long names given to it directly.
func ParseSymbols(name string, r io.Reader) ([]Symbol, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var syms []Symbol
	var fs [][]byte
	lineNo := 0
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: collect it whole.
			buf := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				buf = append(buf, line...)
			}
			line = buf
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("%s:%d: read: %w", name, lineNo+1, err)
		}
		if len(line) > 0 {
			lineNo++
			s, ok, perr := parseLine(line, fs)
			if perr != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, lineNo, perr)
			}
			if ok {
				syms = append(syms, s)
			}
		}
		if err == io.EOF {
			break
		}
	}
	if len(syms) == 0 {
		return nil, fmt.Errorf("%s: no symbols", name)
	}
	return syms, nil
}

func parseLine(line []byte, fs [][]byte) (Symbol, bool, error) {
	fs = fields(line, fs)
	switch len(fs) {
	case 0:
		return Symbol{}, false, nil
	case 3, 4:
	default:
		return Symbol{}, false, fmt.Errorf("want 3 or 4 fields (addr type name [mod]), got %d", len(fs))
	}
	a := fs[0]
	if len(a) > 2 && a[0] == '0' && (a[1] == 'x' || a[1] == 'X') {
		a = a[2:]
	}
	addr, err := strconv.ParseUint(string(a), 16, 64)
	if err != nil || len(a) == 0 || a[0] == '+' || a[0] == '-' {
		return Symbol{}, false, fmt.Errorf("malformed address %q", fs[0])
	}
	if len(fs[1]) != 1 || fs[1][0] == 0 {
		return Symbol{}, false, fmt.Errorf("malformed type %q: want one character", fs[1])
	}
	nm := fs[2]
	if len(nm) >= KSYM_NAME_LEN {
		return Symbol{}, false, fmt.Errorf("symbol name too long for kallsyms (%d >= %d)", len(nm), KSYM_NAME_LEN)
	}
	for _, c := range nm {
		if c == 0 {
			return Symbol{}, false, errors.New("NUL byte in symbol name")
		}
	}
	s := Symbol{Addr: addr, Type: fs[1][0], Name: string(nm)}
	if len(fs) == 4 {
		m := fs[3]
		if len(m) < 3 || m[0] != '[' || m[len(m)-1] != ']' {
			return Symbol{}, false, fmt.Errorf("malformed module field %q: want [name]", m)
		}
		for _, c := range m[1 : len(m)-1] {
			if c == 0 || c == '[' || c == ']' {
				return Symbol{}, false, fmt.Errorf("malformed module field %q", m)
			}
		}
		s.Module = string(m[1 : len(m)-1])
	}
	return s, true, nil
}
