package image

import "fmt"

// Summary is the headline shape of an image, what `kpsim image` prints.
type Summary struct {
	Name             string          `json:"name"`
	CPU              string          `json:"cpu"` // boot CPU the text was patched for, "none" when as built
	Functions        int             `json:"functions"`
	InitFunctions    int             `json:"init_functions"`
	Symbols          int             `json:"symbols"`
	TextBytes        uint64          `json:"text_bytes"`
	CoreTextBytes    uint64          `json:"core_text_bytes"`
	InitTextBytes    uint64          `json:"init_text_bytes"`
	JumpEntries      int             `json:"jump_entries"`
	StaticCallSites  int             `json:"static_call_sites"`
	BugEntries       int             `json:"bug_entries"`
	ExceptionEntries int             `json:"exception_entries"`
	BlacklistEntries int             `json:"blacklist_entries"`
	BlacklistRanges  []RangeSummary  `json:"blacklist_ranges"`
	McountLocations  int             `json:"mcount_locations"`
	Modules          int             `json:"modules"`
	ModuleTables     []ModuleSummary `json:"module_tables"`
	ModuleTotals     ModuleSummary   `json:"module_totals"` // sums over ModuleTables, Name "total"

	Config Config   `json:"config"`
	Notes  []string `json:"notes,omitempty"`
}

// RangeSummary is a section range with hex addresses (JSON numbers cannot
// carry 64-bit kernel addresses exactly).
type RangeSummary struct {
	Name  string `json:"name"`
	Start string `json:"start"`
	End   string `json:"end"`
	Bytes uint64 `json:"bytes"`
}

// ModuleSummary is one module's line in a Summary.
type ModuleSummary struct {
	Name             string `json:"name"`
	State            string `json:"state"`
	Functions        int    `json:"functions"`
	TextBytes        uint64 `json:"text_bytes"`
	InitTextBytes    uint64 `json:"init_text_bytes"`
	JumpEntries      int    `json:"jump_entries"`
	StaticCallSites  int    `json:"static_call_sites"`
	BugEntries       int    `json:"bug_entries"`
	ExceptionEntries int    `json:"exception_entries"`
	BlacklistEntries int    `json:"blacklist_entries"`
	BlacklistRanges  int    `json:"blacklist_ranges"` // .kprobes.text / .noinstr.text ranges
	McountLocations  int    `json:"mcount_locations"`
}

func (t *ModuleSummary) add(m ModuleSummary) {
	t.Functions += m.Functions
	t.TextBytes += m.TextBytes
	t.InitTextBytes += m.InitTextBytes
	t.JumpEntries += m.JumpEntries
	t.StaticCallSites += m.StaticCallSites
	t.BugEntries += m.BugEntries
	t.ExceptionEntries += m.ExceptionEntries
	t.BlacklistEntries += m.BlacklistEntries
	t.BlacklistRanges += m.BlacklistRanges
	t.McountLocations += m.McountLocations
}

// BlacklistRangeNames are the section ranges the summary lists for the
// kprobe blacklist: __kprobes_text and __noinstr_text
// (kernel/kprobes.c:populate_kprobe_blacklist, 6.1), __entry_text
// (arch/x86/kernel/kprobes/core.c:arch_populate_kprobe_blacklist), and the
// irqentry and softirqentry texts, which 6.1 does not blacklist.
var BlacklistRangeNames = []string{RangeEntryText, RangeIRQEntryText, RangeSoftIRQEntryText, RangeNoinstrText, RangeKprobesText}

// BootCPU names the CPU the text was boot-patched for, "none" when it is
// as built.
func (k *Kernel) BootCPU() string {
	if k.Config.CPU == "" {
		return "none"
	}
	return k.Config.CPU
}

// Summarize counts what the image holds. Functions counts vmlinux function
// symbols with a size (zero-size markers such as _stext are not functions).
func (k *Kernel) Summarize() Summary {
	s := Summary{
		Name: k.Name, CPU: k.BootCPU(), Symbols: len(k.Symbols), TextBytes: k.TextBytes(),
		JumpEntries: len(k.JumpEntries), StaticCallSites: len(k.StaticCallSites),
		BugEntries: len(k.BugEntries), ExceptionEntries: len(k.ExTable),
		BlacklistEntries: len(k.Blacklist), McountLocations: len(k.McountLocs),
		Modules: len(k.Modules), Config: k.Config, Notes: k.Notes,
		BlacklistRanges: []RangeSummary{}, ModuleTables: []ModuleSummary{},
	}
	init := k.InitText()
	for _, sym := range k.Symbols {
		if sym.IsText() && !sym.IsPadding() && sym.Size > 0 {
			s.Functions++
			if init != nil && init.Contains(sym.Addr) {
				s.InitFunctions++
			}
		}
	}
	if c := k.CoreText(); c != nil {
		s.CoreTextBytes = uint64(len(c.Bytes))
	}
	if init != nil {
		s.InitTextBytes = uint64(len(init.Bytes))
	}
	for _, name := range BlacklistRangeNames {
		if r, ok := k.Range(name); ok {
			s.BlacklistRanges = append(s.BlacklistRanges, RangeSummary{r.Name, fmt.Sprintf("%x", r.Start), fmt.Sprintf("%x", r.End), r.End - r.Start})
		}
	}
	for _, m := range k.Modules {
		ms := ModuleSummary{Name: m.Name, State: m.State.String(), JumpEntries: len(m.JumpEntries),
			StaticCallSites: len(m.StaticCallSites), BugEntries: len(m.BugEntries), ExceptionEntries: len(m.ExTable),
			BlacklistEntries: len(m.Blacklist), BlacklistRanges: len(m.Ranges), McountLocations: len(m.McountLocs)}
		for _, sym := range m.Symbols {
			if sym.IsText() && !sym.IsPadding() && sym.Size > 0 {
				ms.Functions++
			}
		}
		if m.Text != nil {
			ms.TextBytes = uint64(len(m.Text.Bytes))
		}
		if m.Init != nil {
			ms.InitTextBytes = uint64(len(m.Init.Bytes))
		}
		s.ModuleTables = append(s.ModuleTables, ms)
		s.ModuleTotals.add(ms)
	}
	s.ModuleTotals.Name = "total"
	return s
}
