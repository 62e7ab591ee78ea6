package ftrace

import (
	"strconv"

	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/sim"
)

// InvalidFunction is FTRACE_INVALID_FUNCTION, what print_rec prints for a
// record that is not within FTRACE_MCOUNT_MAX_OFFSET of a symbol start.
const InvalidFunction = "__ftrace_invalid_address__"

// AvailableFilterFunctions models one sequential read of tracefs
// available_filter_functions (withAddrs: available_filter_functions_addrs,
// v6.5+): ftrace_avail_open, then t_start/t_next → t_func_next over every
// record of every ftrace_page in list order, and per record t_show →
// print_rec: kallsyms_lookup(rec->ip) (get_symbol_pos, the name's
// get_symbol_offset and expansion — the address→name lookup, counted in
// kallsyms ops) and seq_puts of the name, " [mod]" for a module, the
// "%lx " of rec->ip first in the _addrs file. A record that does not sit at
// most FTRACE_MCOUNT_MAX_OFFSET past a symbol start prints as
// __ftrace_invalid_address___<offset>. fn gets each line; it may be nil.
func (ft *Ftrace) AvailableFilterFunctions(c *sim.Counters, withAddrs bool, fn func(line []byte)) (lines int, bytes int64, err error) {
	w, ok := ft.ksyms.(kallsyms.Walker)
	if !ok {
		return 0, 0, ErrNoWalker
	}
	count := func(l []byte) {
		lines++
		bytes += int64(len(l))
		if fn != nil {
			fn(l)
		}
	}
	if st, ok := ft.ksyms.(interface{ Stateless() bool }); ok && st.Stateless() && !ft.NoReplay {
		// The list depends on the records only: replayed while they stay
		// put (simulator shortcut; TestReplayCountsMatch).
		ft.availReplay[b2i(withAddrs)].Run(c, ft.ver, count, func(emit func([]byte)) { ft.availableFilterFunctions(c, w, withAddrs, emit) })
		return lines, bytes, nil
	}
	ft.availableFilterFunctions(c, w, withAddrs, count)
	return lines, bytes, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (ft *Ftrace) availableFilterFunctions(c *sim.Counters, w kallsyms.Walker, withAddrs bool, fn func(line []byte)) {
	var bytes int64
	var line []byte
	for _, pg := range ft.pages {
		for i := range pg.Records {
			ip := pg.Records[i].IP
			c.Inc(OpRecVisit)
			c.Inc(OpTShow)
			line = line[:0]
			if withAddrs {
				line = strconv.AppendUint(line, ip, 16)
				line = append(line, ' ')
			}
			name, _, off, mod, ok := w.KallsymsLookup(c, ip)
			if !ok || off > ft.maxMcountOffset() {
				line = append(line, InvalidFunction...)
				line = append(line, '_')
				line = strconv.AppendUint(line, off, 10)
				mod = ""
			} else {
				line = append(line, name...)
			}
			if mod != "" {
				line = append(line, " ["...)
				line = append(line, mod...)
				line = append(line, ']')
			}
			line = append(line, '\n')
			bytes += int64(len(line))
			if fn != nil {
				fn(line)
			}
		}
	}
	c.Add(kallsyms.OpSeqRead, uint64(kallsyms.SeqReads(bytes)))
	c.Add(kallsyms.OpSeqBytes, uint64(bytes))
}
