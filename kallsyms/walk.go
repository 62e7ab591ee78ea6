package kallsyms

import (
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
)

// Ops of the whole-table walks the BPF attach paths make: the module symtab
// walk of module_kallsyms_on_each_symbol and the /proc/kallsyms seq_file
// (kernel/kallsyms.c: kallsyms_open, s_start/s_next/update_iter,
// get_ksymbol_core, get_ksymbol_mod, s_show). Weights: weights_walk.go.
var (
	OpModIterStep = sim.NewOp("module.get_kallsym.step", wModIterStep, rModIterStep,
		"module_get_kallsym: one module passed over on the modules list while /proc/kallsyms finds the module holding position symnum")
	OpSymType = sim.NewOp("kallsyms.type", wSymType, rSymType,
		"kallsyms_get_symbol_type: skip the record header, first character of the first token")
	OpShowLine = sim.NewOp("kallsyms.s_show", wShowLine, rShowLine,
		"s_show: one seq_printf(\"%px %c %s\\n\") (or with \"\\t[mod]\") into the seq_file buffer")
	OpSeqRead = sim.NewOp("seq.read", wSeqRead, rSeqRead,
		"one read(2) of a seq_file by a buffered stdio reader: syscall entry/exit plus copy_to_user of one 4 KiB buffer")
	OpSeqBytes = sim.NewMetric("seq.bytes",
		"bytes a seq_file produced for user space (the text of /proc/kallsyms or a tracefs list)")
)

// SeqBufSize is the stdio buffer a FILE* reads with (glibc: st_blksize,
// 4096 for procfs and tracefs) and, equally, seq_file's first buffer
// (PAGE_SIZE): one read(2) moves at most this much.
const SeqBufSize = 4096

// Walker is what the batch walks need besides the Resolver lookups.
type Walker interface {
	Resolver
	// OnEachSymbol models kallsyms_on_each_symbol.
	OnEachSymbol(cn *sim.Counters, fn func(name []byte, addr uint64) int) int
	// ModuleOnEachSymbol models module_kallsyms_on_each_symbol(NULL, ...).
	ModuleOnEachSymbol(cn *sim.Counters, fn func(name string, mod *image.Module, addr uint64) int) int
	// KallsymsLookup models kallsyms_lookup.
	KallsymsLookup(cn *sim.Counters, addr uint64) (name string, size, offset uint64, modname string, ok bool)
}

var _ Walker = (*Compressed)(nil)

// symbolType is kallsyms_get_symbol_type(off).
func (c *Compressed) symbolType(off int, tl *tally) byte {
	names := c.t.Names
	p := off + 1
	if names[off]&0x80 != 0 {
		p++
	}
	tl.bytes++
	return c.t.TokenTable[c.t.TokenIndex[names[p]]]
}

// ProcKallsyms models one sequential read of /proc/kallsyms by a
// privileged reader (kallsyms_show_value true, so "%px" prints the
// address): kallsyms_open, then s_start/s_next → update_iter →
// get_ksymbol_core for every vmlinux record (the offset carried from the
// previous record: no marker hops), then get_ksymbol_mod →
// module_get_kallsym for every module symbol (each position found by
// walking the modules list from its head), each line formatted by s_show
// and copied out by read(2) in SeqBufSize pieces. fn receives each line
// as the reader sees it (valid during the call); it may be nil.
//
// Not modelled: the ftrace-trampoline, BPF and kprobe-insn-page symbols
// (get_ksymbol_ftrace_mod, get_ksymbol_bpf, get_ksymbol_kprobe), which
// have no counterpart in the image.
func (c *Compressed) ProcKallsyms(cn *sim.Counters, fn func(line []byte)) (lines int, bytes int64) {
	// The text and counts depend on the tables and modules only: replayed
	// after the first read (simulator shortcut; TestReplayCountsMatch).
	c.procReplay.Run(cn, len(c.mods), func(l []byte) {
		lines++
		bytes += int64(len(l))
		if fn != nil {
			fn(l)
		}
	}, func(emit func([]byte)) { c.procKallsyms(cn, emit) })
	return lines, bytes
}

func (c *Compressed) procKallsyms(cn *sim.Counters, fn func(line []byte)) (lines int, bytes int64) {
	var tl tally
	defer tl.flush(cn)
	var buf [KsymNameLen]byte
	line := make([]byte, 0, 64+KsymNameLen)
	emit := func() {
		lines++
		bytes += int64(len(line))
		if fn != nil {
			fn(line)
		}
	}
	off := 0
	for i := 0; i < c.n; i++ {
		a := c.symAddr(i, &tl)
		typ := c.symbolType(off, &tl)
		var n int
		n, off = c.expand(off, &buf, &tl)
		tl.visit++
		if n == 0 {
			continue // s_show: nameless debugging symbols are skipped
		}
		line = appendKsymLine(line[:0], a, typ, buf[:n], "")
		emit()
	}
	var steps uint64
	for _, m := range c.mods {
		for j := range m.Symbols {
			// module_get_kallsym walks the list from its head to m.
			for _, mm := range c.mods {
				steps++
				if mm == m {
					break
				}
			}
			if m.State == image.ModuleUnformed {
				continue
			}
			s := &m.Symbols[j]
			tl.modSym++
			tl.visit++
			if s.Name == "" {
				continue
			}
			line = appendKsymLine(line[:0], s.Addr, byte(s.Type), []byte(s.Name), m.Name)
			emit()
		}
	}
	cn.Add(OpSymType, uint64(c.n))
	cn.Add(OpModIterStep, steps)
	cn.Add(OpShowLine, uint64(lines))
	cn.Add(OpSeqRead, uint64(SeqReads(bytes)))
	cn.Add(OpSeqBytes, uint64(bytes))
	return lines, bytes
}

// SeqReads is the read(2) calls a stdio reader makes for a file of n
// bytes: one per SeqBufSize, plus the read that returns 0 at EOF.
func SeqReads(n int64) int64 { return (n+SeqBufSize-1)/SeqBufSize + 1 }

// appendKsymLine formats "%px %c %s\n" or "%px %c %s\t[%s]\n".
func appendKsymLine(b []byte, addr uint64, typ byte, name []byte, mod string) []byte {
	const hex = "0123456789abcdef"
	for sh := 60; sh >= 0; sh -= 4 {
		b = append(b, hex[(addr>>uint(sh))&0xF])
	}
	b = append(b, ' ', typ, ' ')
	b = append(b, name...)
	if mod != "" {
		b = append(b, '\t', '[')
		b = append(b, mod...)
		b = append(b, ']')
	}
	return append(b, '\n')
}

// FormatKsymLine is appendKsymLine for tests and tools.
func FormatKsymLine(addr uint64, typ byte, name, mod string) string {
	return string(appendKsymLine(nil, addr, typ, []byte(name), mod))
}
