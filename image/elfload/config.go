package elfload

import (
	"bytes"
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/kconfig"
)

var endbr64 = []byte{0xf3, 0x0f, 0x1e, 0xfa}

// Where a build fact came from when no config decided it.
const (
	fromVote    = "vote"
	fromSymbols = "symbols"
	fromTables  = "tables"
)

// config decides the build facts the model needs. Each comes from, in
// order: --kconfig (Options.KConfigOverride), the kernel's config
// (Options.KConfig: embedded with CONFIG_IKCONFIG, or the file beside the
// image), and otherwise what the image shows (a vote over the functions,
// padding symbols excluded; the symbols; the tables). Config.Facts names
// each fact and its source.
func (l *loader) config() {
	k := l.k
	c := &k.Config
	cfgs := l.configs()
	lookup := func(opts ...string) (bool, string, bool) { return lookupBool(cfgs, l.opts.KConfigOverride, opts...) }
	fact := func(opt string, v bool, from string) {
		val := "n"
		if v {
			val = "y"
		}
		c.Facts = append(c.Facts, image.ConfigFact{Option: opt, Value: val, From: from})
	}

	funcs, endbr, pfx := 0, 0, 0
	var alignVotes [7]int // 1..64
	core := k.CoreText()
	retpolineSyms, cfiSyms := false, false
	for _, s := range k.Symbols {
		if !s.IsText() || core == nil || !core.Contains(s.Addr) {
			continue
		}
		if strings.HasPrefix(s.Name, "__x86_indirect_thunk_") {
			retpolineSyms = true
		}
		if strings.HasPrefix(s.Name, "__cfi_") {
			cfiSyms = true
		}
		if s.IsPadding() {
			pfx++
			continue
		}
		if s.Size == 0 {
			continue
		}
		funcs++
		if bytes.HasPrefix(k.Text(s.Addr, 4), endbr64) {
			endbr++
		}
		alignVotes[min(bits.TrailingZeros64(s.Addr), 6)]++
	}

	if v, from, ok := lookup("CONFIG_X86_KERNEL_IBT"); ok {
		c.IBT = v
		fact("CONFIG_X86_KERNEL_IBT", v, from)
	} else {
		c.IBT = funcs > 0 && 2*endbr > funcs
		fact("CONFIG_X86_KERNEL_IBT", c.IBT, fromVote)
		defer func() {
			// After the kprobes-on-ftrace note, as before facts had sources.
			k.Notes = append(k.Notes, fmt.Sprintf("IBT inferred %v: %d of %d core-text functions start with ENDBR64", c.IBT, endbr, funcs))
		}()
	}
	if v, from, ok := lookup("CONFIG_CALL_PADDING"); ok {
		c.CallPadding = v
		fact("CONFIG_CALL_PADDING", v, from)
	} else if pfx > 0 {
		c.CallPadding = true
		fact("CONFIG_CALL_PADDING", true, fromSymbols)
	}
	if pfx > 0 {
		k.Notes = append(k.Notes, fmt.Sprintf("%d __pfx_/__cfi_ padding symbols are not functions", pfx))
	}
	alignFrom := ""
	for _, cf := range cfgs {
		if n, ok := cf.Int("CONFIG_FUNCTION_ALIGNMENT"); ok {
			c.FunctionAlignment, alignFrom = n, cf.From
			break
		}
	}
	if alignFrom == "" && funcs > 0 {
		// The largest alignment at least 90% of functions have.
		for b := 6; b >= 0; b-- {
			n := 0
			for j := b; j <= 6; j++ {
				n += alignVotes[j]
			}
			if 10*n >= 9*funcs {
				c.FunctionAlignment, alignFrom = 1<<b, fromVote
				break
			}
		}
	}
	if alignFrom != "" {
		c.Facts = append(c.Facts, image.ConfigFact{Option: "CONFIG_FUNCTION_ALIGNMENT", Value: strconv.Itoa(c.FunctionAlignment), From: alignFrom})
	}
	if v, from, ok := lookup("CONFIG_MITIGATION_RETPOLINE", "CONFIG_RETPOLINE"); ok {
		c.Retpoline = v
		fact("CONFIG_RETPOLINE", v, from)
	} else {
		c.Retpoline = retpolineSyms
		fact("CONFIG_RETPOLINE", c.Retpoline, fromSymbols)
	}
	if v, from, ok := lookup("CONFIG_MITIGATION_RETHUNK", "CONFIG_RETHUNK"); ok {
		c.RetThunk = v
		fact("CONFIG_RETHUNK", v, from)
	} else {
		if _, ok := l.sym("__x86_return_thunk"); ok {
			if sec := l.f.Section(".return_sites"); sec == nil || sec.Size > 0 {
				c.RetThunk = true
			}
		}
		fact("CONFIG_RETHUNK", c.RetThunk, fromSymbols)
	}
	// 7.3 renamed CONFIG_CFI_CLANG to CONFIG_CFI (arch/Kconfig; CFI_CLANG
	// stays as a transitional symbol no .config holds).
	cfiOpt := "CONFIG_CFI_CLANG"
	if c.Gen.AtLeast(image.Gen73) {
		cfiOpt = "CONFIG_CFI"
	}
	if v, from, ok := lookup(cfiOpt); ok {
		c.CFI = v
		fact(cfiOpt, v, from)
	} else {
		c.CFI = cfiSyms
		fact(cfiOpt, c.CFI, fromSymbols)
	}
	if v, from, ok := lookup("CONFIG_KPROBES_ON_FTRACE"); ok {
		c.KprobesOnFtrace = v
		fact("CONFIG_KPROBES_ON_FTRACE", v, from)
	} else {
		c.KprobesOnFtrace = len(k.McountLocs) > 0
		fact("CONFIG_KPROBES_ON_FTRACE", c.KprobesOnFtrace, fromTables)
		if c.KprobesOnFtrace {
			k.Notes = append(k.Notes, "KprobesOnFtrace inferred from the presence of __mcount_loc entries (the .config is not in the image)")
		}
	}
	fact("CONFIG_DEBUG_BUGVERBOSE", c.BugVerbose, l.bugVerboseFrom)
	c.ReturnsPatched = false
}

// embeddedConfig is the CONFIG_IKCONFIG copy in .rodata, if any.
func (l *loader) embeddedConfig() (*kconfig.Config, bool, error) {
	ro := l.f.Section(".rodata")
	if ro == nil {
		return nil, false, nil
	}
	b, ok := l.read(ro.Addr, ro.Size)
	if !ok {
		return nil, false, nil
	}
	return kconfig.Embedded(b)
}

// ConfigOptions are the options kpsim reads from a kernel config (and
// --kconfig takes); IntConfigOptions those with a number for a value.
var (
	ConfigOptions = []string{"CONFIG_X86_KERNEL_IBT", "CONFIG_CALL_PADDING", "CONFIG_FUNCTION_ALIGNMENT",
		"CONFIG_RETPOLINE", "CONFIG_MITIGATION_RETPOLINE", "CONFIG_RETHUNK", "CONFIG_MITIGATION_RETHUNK",
		"CONFIG_CFI", "CONFIG_CFI_CLANG", "CONFIG_KPROBES_ON_FTRACE", "CONFIG_DEBUG_BUGVERBOSE"}
	IntConfigOptions = []string{"CONFIG_FUNCTION_ALIGNMENT"}
)

// configs lists the configurations that decide build facts, strongest
// first: --kconfig, the image's own CONFIG_IKCONFIG copy, the config file
// beside the image. Computed once per load.
func (l *loader) configs() []*kconfig.Config {
	if l.kcfgs != nil {
		return l.kcfgs
	}
	embedded, _, err := l.embeddedConfig()
	if err != nil {
		l.k.Notes = append(l.k.Notes, err.Error())
	}
	l.kcfgs = []*kconfig.Config{}
	for _, c := range []*kconfig.Config{l.opts.KConfigOverride, embedded, l.opts.KConfig} {
		if c != nil {
			l.kcfgs = append(l.kcfgs, c)
		}
	}
	return l.kcfgs
}

// lookupBool answers a bool option from the first configuration that
// decides it: one that sets any of opts, or a full config (not the
// --kconfig overrides) that leaves it out, which make oldconfig writes
// only for visible options, so absent is off. ok is false when none does.
func lookupBool(cfgs []*kconfig.Config, override *kconfig.Config, opts ...string) (v bool, from string, ok bool) {
	for _, cf := range cfgs {
		for _, o := range opts {
			if v, ok := cf.Bool(o); ok {
				return v, cf.From, true
			}
		}
		if cf != override {
			return false, cf.From, true
		}
	}
	return false, "", false
}

// bugLayout is the generation's struct bug_entry for a table of n bytes:
// with file and line when the configuration says CONFIG_DEBUG_BUGVERBOSE,
// else the layout whose size divides n (the verbose one when both do, as
// distribution kernels are built). bugVerboseFrom records which.
func (l *loader) bugLayout(n int) image.BugEntryLayout {
	g := l.k.Config.Gen
	if v, from, ok := lookupBool(l.configs(), l.opts.KConfigOverride, "CONFIG_DEBUG_BUGVERBOSE"); ok {
		l.bugVerboseFrom = from
		return image.BugEntryLayoutFor(g, v)
	}
	l.bugVerboseFrom = fromTables
	v, s := image.BugEntryLayoutFor(g, true), image.BugEntryLayoutFor(g, false)
	if n%v.Size != 0 && n%s.Size == 0 {
		return s
	}
	return v
}
