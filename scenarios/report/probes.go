package report

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/scenarios"
)

// ProbeLine is one target's line of the per-probe report.
type ProbeLine struct {
	Run    string `json:"run"`
	Target string `json:"target"`
	Source string `json:"source"`
	Addr   string `json:"address"`
	SymOff string `json:"symbol"`
	Result string `json:"result"`
	State  string `json:"state"`
	Reason string `json:"reason"`
}

// ProbeLines lists every target's outcome: for the first run when every
// run decided the same (decisions and reasons digests), else for every
// run.
func ProbeLines(r *scenarios.ManyReport, k *image.Kernel) []ProbeLine {
	runs := r.Runs
	same := true
	for _, run := range runs[1:] {
		same = same && run.WhyDigest == runs[0].WhyDigest && run.Digest == runs[0].Digest
	}
	if same && len(runs) > 1 {
		runs = runs[:1]
	}
	sym := newSymbolizer(k)
	var out []ProbeLine
	for _, run := range runs {
		name := run.Name
		if same && len(r.Runs) > 1 {
			name = "all"
		}
		for i, t := range r.Targets {
			pr := run.Results[i]
			l := ProbeLine{Run: name, Target: t.Raw, Source: t.Source, State: pr.State, Reason: pr.Reason, Addr: "-", SymOff: "-"}
			if pr.Addr != 0 {
				l.Addr = fmt.Sprintf("0x%x", pr.Addr)
				l.SymOff = sym.symOff(pr.Addr)
			}
			switch {
			case pr.Code == 0:
				l.Result = "0"
			case pr.Code < 0:
				l.Result = "not-attempted"
			default:
				l.Result = errno.Errno(pr.Code).Name()
			}
			if l.Reason == "" {
				l.Reason = "-"
			}
			out = append(out, l)
		}
	}
	return out
}

// Probes writes the per-probe report: TSV with a header, or JSON
// lines.
func Probes(w io.Writer, r *scenarios.ManyReport, k *image.Kernel, jsonLines bool) error {
	lines := ProbeLines(r, k)
	if jsonLines {
		enc := json.NewEncoder(w)
		for _, l := range lines {
			if err := enc.Encode(l); err != nil {
				return err
			}
		}
		return nil
	}
	if _, err := fmt.Fprintln(w, "run\ttarget\tsource\taddress\tsymbol\tresult\tstate\treason"); err != nil {
		return err
	}
	clean := func(s string) string { return strings.NewReplacer("\t", " ", "\n", " ").Replace(s) }
	for _, l := range lines {
		if _, err := fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Run, clean(l.Target), l.Source, l.Addr, clean(l.SymOff), l.Result, l.State, clean(l.Reason)); err != nil {
			return err
		}
	}
	return nil
}

// symbolizer names addresses as SYM+OFF ([MOD] for module text) from the
// image's symbol tables. Simulator work, not counted.
type symbolizer struct {
	k    *image.Kernel
	mods map[*image.Module][]image.Symbol
}

func newSymbolizer(k *image.Kernel) *symbolizer {
	return &symbolizer{k: k, mods: map[*image.Module][]image.Symbol{}}
}

func (s *symbolizer) symOff(addr uint64) string {
	if m := s.k.ModuleAt(addr); m != nil {
		syms, ok := s.mods[m]
		if !ok {
			for _, sy := range m.Symbols {
				if sy.IsText() {
					syms = append(syms, sy)
				}
			}
			sort.Slice(syms, func(i, j int) bool { return syms[i].Addr < syms[j].Addr })
			s.mods[m] = syms
		}
		i := sort.Search(len(syms), func(i int) bool { return syms[i].Addr > addr }) - 1
		if i < 0 {
			return fmt.Sprintf("[%s]", m.Name)
		}
		return fmt.Sprintf("%s+%d [%s]", syms[i].Name, addr-syms[i].Addr, m.Name)
	}
	i := s.k.SymbolAt(addr)
	if i < 0 {
		return "?"
	}
	// Prefer a sized function among aliases at the same address.
	best := s.k.Symbols[i]
	for j := i; j >= 0 && s.k.Symbols[j].Addr == best.Addr; j-- {
		if s.k.Symbols[j].IsText() && s.k.Symbols[j].Size > 0 {
			best = s.k.Symbols[j]
			break
		}
	}
	return fmt.Sprintf("%s+%d", best.Name, addr-best.Addr)
}
