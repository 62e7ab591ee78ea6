package scenarios

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/kpsim/kpsim/bpf"
	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/ftrace"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/libbpf"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

// BPFOptions are what every BPF scenario's kernel takes. The generation
// is the image's (image.Kernel.Config.Gen): bpf, ftrace and fprobe follow
// it.
type BPFOptions struct {
	// Kconfig overrides ("FPROBE=y"); nil keeps what the image says.
	Kconfig map[string]bool
	// PossibleCPUs is num_possible_cpus() (rethook node preallocation),
	// and num_online_cpus() too: every text_poke_sync IPIs them.
	PossibleCPUs int
	// Clock converts the runs' estimated cycles to the reports'
	// estimated milliseconds (ClockFor; the zero Clock is the reference
	// clock).
	Clock Clock
	// Jobs is how many independent runs (switch sets, forms, variants)
	// run at once (0: GOMAXPROCS; 1: one after another). Each boots its
	// own kernel on the shared image, so the report is the same for
	// every value.
	Jobs int
}

// DefaultBPFOptions: 8 possible CPUs as kprobes.DefaultConfig's small
// server.
func DefaultBPFOptions() BPFOptions { return BPFOptions{PossibleCPUs: 8} }

// FprobeFromImage says whether the image was built with CONFIG_FPROBE:
// for a real kernel, whether kallsyms has register_fprobe_ips (built in
// whenever CONFIG_FPROBE=y; Debian 6.1.192's config has "# CONFIG_FPROBE
// is not set" and no such symbol); the generator builds its images as if
// with CONFIG_FPROBE=y.
func FprobeFromImage(k *image.Kernel) (bool, string) {
	if strings.HasPrefix(k.Name, "synthetic") {
		return true, "synthetic image: built as with CONFIG_FPROBE=y"
	}
	if len(k.SymbolsByName("register_fprobe_ips")) > 0 {
		return true, "image has register_fprobe_ips: CONFIG_FPROBE=y"
	}
	return false, "image has no register_fprobe_ips: CONFIG_FPROBE=n (bpf_kprobe_multi_link_attach is the -EOPNOTSUPP stub)"
}

// ParseKconfig parses "FPROBE=y,FPROBE=n" style overrides. Only FPROBE is
// known.
func ParseKconfig(spec string) (map[string]bool, error) {
	out := map[string]bool{}
	if strings.TrimSpace(spec) == "" {
		return out, nil
	}
	for _, part := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		k = strings.TrimPrefix(k, "CONFIG_")
		if ok && k != "FPROBE" {
			continue // an image option (--kernel's config), not the BPF layer's
		}
		if !ok || v != "y" && v != "n" {
			return nil, fmt.Errorf("--kconfig %q: want FPROBE=y or FPROBE=n", part)
		}
		out[k] = v == "y"
	}
	return out, nil
}

// bpfRun is one booted kernel with libbpf on top, for one switch set.
type bpfRun struct {
	c    *sim.Counters
	kern *bpf.Kernel
	sys  *bpf.System
	lib  *libbpf.Lib
	syms *kallsyms.Compressed
	ft   *ftrace.Ftrace
	perf *doors.PerfKprobes
}

// bootBPF boots a run's kernel (machine.Boot: the wiring, kprobes, late
// init) and puts the BPF layers on it.
func bootBPF(k *image.Kernel, sw sim.Switches, o BPFOptions, c *sim.Counters) (*bpfRun, string, error) {
	kc := kprobes.DefaultConfig()
	kc.CPUs = o.PossibleCPUs // no hotplug: every possible CPU is online, and each text_poke_sync IPIs them
	m, err := machine.Boot(k, machine.Config{Switches: sw, Counters: c, Kprobes: kc})
	if err != nil {
		return nil, "", err
	}
	syms, ft := m.Syms, m.Ftrace
	if syms == nil || ft == nil {
		return nil, "", fmt.Errorf("bpf scenarios need the compressed kallsyms and ftrace models")
	}
	fp, why := FprobeFromImage(k)
	if v, set := o.Kconfig["FPROBE"]; set {
		if v != fp {
			why = fmt.Sprintf("%s; overridden by --kconfig FPROBE=%s", why, yn(v))
		}
		fp = v
	}
	d := doors.New(m)
	kern := d.BPF(fp, o.PossibleCPUs)
	perf := d.PerfKprobes()
	sys := bpf.NewSystem(kern, syms, perf)
	r := &bpfRun{c: c, kern: kern, sys: sys, lib: libbpf.New(reasons{sys}, sw), syms: syms, ft: ft, perf: perf}
	return r, why, nil
}

// reasons is the bpf(2) door as libbpf calls it, with a refusal that
// exists only in some generations carrying its reason (bpf.Kernel.
// LastRefusal: the generation and the kernel function) to the report.
type reasons struct{ *bpf.System }

func (s reasons) LinkCreateKprobeMulti(c *sim.Counters, prog *bpf.Prog, attr bpf.KprobeMultiAttr) (int, error) {
	fd, err := s.System.LinkCreateKprobeMulti(c, prog, attr)
	var code errno.Errno
	if why := s.K.LastRefusal(); err != nil && why != "" && errors.As(err, &code) {
		return fd, &doors.Refusal{Code: code, Reason: why}
	}
	return fd, err
}

func yn(b bool) string {
	if b {
		return "y"
	}
	return "n"
}

// TraceableFunctions returns the image's functions that a kprobe.multi
// link can name unambiguously: one vmlinux symbol of that name, text, with
// an ftrace record at its start or within FTRACE_MCOUNT_MAX_OFFSET —
// address order.
func TraceableFunctions(k *image.Kernel, ft *ftrace.Ftrace) []image.Symbol {
	count := map[string]int{}
	for _, s := range k.Symbols {
		count[s.Name]++
	}
	var out []image.Symbol
	for _, s := range k.Functions() {
		if count[s.Name] != 1 || s.Name == "" {
			continue
		}
		if ft.Location(nil, s.Addr) == 0 {
			continue
		}
		out = append(out, s)
	}
	return out
}

// spread picks n of list evenly (first, …, last): positions across the
// address order, so the linear walk's early exit is exercised on average.
func spread[T any](list []T, n int) []T {
	if n >= len(list) {
		return append([]T(nil), list...)
	}
	out := make([]T, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, list[(i*len(list)+len(list)/2)/n])
	}
	return out
}

// attachResult is one attach's decision.
type attachResult struct {
	Target string   `json:"target"`
	Err    string   `json:"err,omitempty"`
	Addrs  []uint64 `json:"-"`
	Path   string   `json:"path,omitempty"`
	Why    string   `json:"why,omitempty"` // the refusal's reason, when it has one
}

// bpfDigest hashes every attach's target, error and addresses.
func bpfDigest(rs []attachResult) string {
	h := sha256.New()
	var b [8]byte
	for _, r := range rs {
		h.Write([]byte(r.Target))
		h.Write([]byte{0})
		h.Write([]byte(r.Err))
		h.Write([]byte{0})
		a := append([]uint64(nil), r.Addrs...)
		sort.Slice(a, func(i, j int) bool { return a[i] < a[j] })
		for _, x := range a {
			binary.LittleEndian.PutUint64(b[:], x)
			h.Write(b[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// diffResults names the attaches whose decisions differ.
func diffResults(a, b []attachResult) []string {
	var out []string
	for i := range a {
		if i >= len(b) {
			break
		}
		x, y := a[i], b[i]
		if x.Err != y.Err || fmt.Sprint(sortedCopy(x.Addrs)) != fmt.Sprint(sortedCopy(y.Addrs)) {
			out = append(out, fmt.Sprintf("%s: %s %s → %s %s", x.Target, errOr(x.Err), hexList(x.Addrs), errOr(y.Err), hexList(y.Addrs)))
		}
	}
	return out
}

func errOr(s string) string {
	if s == "" {
		return "ok"
	}
	return s
}

func sortedCopy(a []uint64) []uint64 {
	out := append([]uint64(nil), a...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func hexList(a []uint64) string {
	var s []string
	for i, x := range sortedCopy(a) {
		if i == 4 {
			s = append(s, fmt.Sprintf("…(%d)", len(a)))
			break
		}
		s = append(s, fmt.Sprintf("%#x", x))
	}
	return "[" + strings.Join(s, " ") + "]"
}

// linkAddrs returns the addresses of the kernel's newest link.
func (r *bpfRun) lastLinkAddrs() []uint64 {
	ls := r.kern.Links()
	if len(ls) == 0 {
		return nil
	}
	return ls[len(ls)-1].Addrs
}

// StageRow is one phase's cost in one run.
type StageRow struct {
	Phase  string            `json:"phase"`
	Ops    map[string]uint64 `json:"ops"`
	Cycles float64           `json:"est_cycles"`
	MS     float64           `json:"est_ms"`
	// PerAttachMS is MS over the run's attaches (set by finishRun).
	PerAttachMS float64 `json:"est_ms_per_attach"`
}

// stages renders the counters' phases that have counts, in phase order.
func stages(c *sim.Counters, costs *sim.CostTable, clk Clock, skip map[sim.Phase]bool) []StageRow {
	var out []StageRow
	perPhase := map[sim.Phase]map[string]uint64{}
	for _, nz := range c.NonZero() {
		if perPhase[nz.Phase] == nil {
			perPhase[nz.Phase] = map[string]uint64{}
		}
		perPhase[nz.Phase][nz.Op.Name()] = nz.N
	}
	for _, name := range PhaseNames() {
		p, _ := sim.LookupPhase(name)
		if skip[p] || c.PhaseTotal(p) == 0 {
			continue
		}
		row := StageRow{Phase: name, Ops: perPhase[p]}
		row.Cycles = costs.PhaseCycles(c, p)
		row.MS = clk.MS(row.Cycles)
		out = append(out, row)
	}
	return out
}
