package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	flag "github.com/spf13/pflag"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/sim"
)

const explainUsage = "kpsim explain [image flags] [--n N] [--patches LIST] [--with TARGET]... [--post] [--verify] [--format table|json] TARGET"

// runExplain prints the decision trail of one probe: every check
// register_kprobe makes, in order, what it looked at and what it decided,
// then the result, the state and the reason.
func runExplain(args []string, stdout, stderr io.Writer) error {
	// TARGET is positional and may come before the flags.
	var target string
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			rest = append(rest, args[i+1:]...)
			i = len(args)
		case !strings.HasPrefix(a, "-") && target == "" && (i == 0 || !flagTakesValue(args[i-1])):
			target = a
		default:
			rest = append(rest, a)
		}
	}
	fs := newFlagSet("explain", stdout)
	imf := addImageFlagsFor(fs, rest)
	n := fs.Int("n", scenarios.DefaultManyOptions().N, "generated probe-target functions (kprobe_many_func_K) in the image, as run many builds it; by default only when TARGET is one of them (give --n to build run many's image for any target)")
	traced := fs.Bool("traced", false, "build the probe targets with __fentry__ calls, as run many --traced")
	patches := &onePatchSet{v: "none"}
	fs.Var(patches, "patches", "the switch set to run under: a preset (none, series, all) or comma-separated switches (one set; given twice is refused)")
	post := fs.Bool("post", false, "give the probe a post handler (it is then never optimized)")
	cpus := fs.Int("cpus", scenarios.DefaultManyOptions().CPUs, "online CPUs: every text_poke_sync and every set_memory_* TLB flush interrupts the others (their per-CPU cycles scale with it)")
	faults := fs.String("faults", "", "fault injection: POINT or POINT@N, comma-separated (kpsim list shows the points)")
	var with patchList
	fs.Var(&with, "with", "register this target first (repeatable, in order, the optimizer run after each): the probe is explained among them")
	verify := fs.Bool("verify", false, "also run the probe under every preset and ablation set and check the trail and decision are the same")
	format := fs.String("format", "table", "output: table or json (text: a deprecated spelling of table)")
	via := fs.String("via", "register_kprobe", "front door: register_kprobe, kprobe_events (a tracefs line, then its enable file) or perf_kprobe (perf_event_open on the kprobe PMU)")
	noEnable := fs.Bool("no-enable", false, "with --via kprobe_events: leave the event disabled (the probe is then prepared but never armed or optimized)")
	cf := addCostFlags(fs, "cold", "a registration probes a function not touched before")
	if err := parseImageFlags(fs, imf, rest, stdout, nil); err != nil {
		return err
	}
	costs, err := cf.load(stderr, "explain")
	if err != nil {
		return err
	}
	door := explainDoor{via: doors.Via(*via), enable: !*noEnable}
	switch door.via {
	case doors.ViaRegisterKprobe, doors.ViaKprobeEvents, doors.ViaPerfKprobe:
	case doors.ViaRegisterKprobes:
		door.via = doors.ViaRegisterKprobe // one probe: the same calls
	default:
		return usagef("--via: want register_kprobe, kprobe_events or perf_kprobe, got %q", *via)
	}
	if *noEnable && door.via != doors.ViaKprobeEvents {
		return usagef("--no-enable: applies to --via kprobe_events only (%s arms the probe itself)", door.via)
	}
	if *post && door.via != doors.ViaRegisterKprobe {
		return usagef("--post: trace kprobes have no post handler (--via %s)", door.via)
	}
	if target == "" {
		return usagef("missing TARGET (SYM, SYM+OFF, 0xADDR or a kprobe_events line)")
	}
	spec, err := parseExplainTarget(target)
	if err != nil {
		return usagef("TARGET %q: %s", target, err.Error())
	}
	spec.Post = *post
	var priors []scenarios.Target
	for _, w := range with {
		ps, err := parseExplainTarget(w)
		if err != nil {
			return usagef("--with %q: %s", w, err.Error())
		}
		priors = append(priors, ps)
	}
	sw, err := sim.ParseSwitches(patches.v)
	if err != nil {
		return usagef("--patches %q: %s%s", patches.v, err.Error(), switchSuggestion(patches.v))
	}
	if *format != "table" && *format != "json" {
		return usagef("--format: want table or json, got %q", *format)
	}
	if *n < 0 || *n > 1_000_000 {
		return usagef("--n: must be in [0, 1000000] (got %d)", *n)
	}
	if *cpus < 1 || *cpus > 8192 {
		return usagef("--cpus: must be in [1, 8192] (got %d)", *cpus)
	}
	if _, err := sim.ParseFaults(*faults); err != nil {
		return usagef("--faults: %s", err.Error())
	}
	// The sample's targets are built into the image when TARGET names one
	// of them (at least K+1 of them for kprobe_many_func_K) or --n asks.
	targets := 0
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "n" {
			targets = *n
		}
	})
	for _, ps := range append([]scenarios.Target{spec}, priors...) {
		if k, ok := probeTargetIndex(ps.Symbol); ok {
			targets = max(targets, *n, k+1)
		}
	}
	k, err := explainImage(imf, targets, *traced)
	if err != nil {
		return err
	}
	x, err := explainOn(k, sw, spec, priors, *cpus, *faults, door)
	if err != nil {
		return err
	}
	x.costs = costs
	var same *verifyResult
	if *verify {
		if same, err = verifyExplain(k, x, spec, priors, *cpus, *faults, door); err != nil {
			return err
		}
	}
	var buf bytes.Buffer
	if *format == "json" {
		err = writeExplainJSON(&buf, k, x, sw, same)
	} else {
		writeExplainText(&buf, k, x, sw, target, same)
	}
	if err != nil {
		return err
	}
	_, err = stdout.Write(buf.Bytes())
	return err
}

// flagTakesValue reports whether a flag argument consumes the next one.
func flagTakesValue(a string) bool {
	if !strings.HasPrefix(a, "-") || strings.Contains(a, "=") {
		return false
	}
	name := strings.TrimLeft(a, "-")
	switch name {
	case "post", "verify", "no-enable", "traced", "ibt", "retpoline", "rethunk", "returns-patched", "probe-targets-traced", "call-padding", "h", "help":
		return false
	}
	// --no-X turns a default-on boolean X off (noFlags); no value follows.
	return !strings.HasPrefix(name, "no-")
}

// parseExplainTarget reads SYM, SYM+OFF (decimal or 0x hex) or 0xADDR.
func parseExplainTarget(s string) (scenarios.Target, error) {
	if strings.ContainsAny(strings.TrimSpace(s), " \t") {
		// What a target list takes: a kprobe_events line, NAME [MODULE].
		ts, err := scenarios.ParseTargets("TARGET", strings.NewReader(s))
		if err != nil {
			return scenarios.Target{}, errors.New(strings.TrimPrefix(err.Error(), "TARGET:1: "))
		}
		return ts[0], nil
	}
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		a, err := strconv.ParseUint(s[2:], 16, 64)
		if err != nil || a == 0 {
			return scenarios.Target{}, errors.New("not a hex address")
		}
		return scenarios.Target{Addr: a, Raw: s}, nil
	}
	sym, off, hasOff := strings.Cut(s, "+")
	if sym == "" || strings.ContainsAny(sym, " \t:/") {
		return scenarios.Target{}, errors.New("want SYM, SYM+OFF or 0xADDR")
	}
	spec := scenarios.Target{Symbol: sym, Raw: s}
	if hasOff {
		v, err := strconv.ParseUint(off, 0, 32)
		if err != nil {
			return scenarios.Target{}, fmt.Errorf("offset %q is not a non-negative number", off)
		}
		spec.Offset, spec.OwnOffset = uint32(v), true
	}
	return spec, nil
}

// probeTargetIndex returns K for the sample's kprobe_many_func_K.
func probeTargetIndex(sym string) (int, bool) {
	const pfx = "kprobe_many_func_"
	if !strings.HasPrefix(sym, pfx) {
		return 0, false
	}
	k, err := strconv.Atoi(sym[len(pfx):])
	if err != nil || k < 0 || synth.ProbeTargetName(k) != sym {
		return 0, false
	}
	return k, true
}

// explainImage builds the image as run many does: the generator with
// --n targets, or a loaded kernel with the targets appended.
func explainImage(imf *imageFlags, n int, traced bool) (*image.Kernel, error) {
	if imf.synthetic() {
		imf.cfg.ProbeTargets, imf.cfg.ProbeTargetsTraced = n, traced
		k, _, err := imf.load()
		if err != nil {
			return nil, err
		}
		return k, kallsymsCached(k, imf.noCache)
	}
	k, _, err := imf.load()
	if err != nil {
		return nil, err
	}
	if n > 0 {
		if _, err := synth.AddProbeTargets(k, nil, n, traced, imf.seed); err != nil {
			return nil, usagef("%s", err.Error())
		}
	}
	return k, kallsymsCached(k, imf.noCache)
}

// explained is one explanation and the outcomes of the probes registered
// before it.
type explained struct {
	*scenarios.Explanation
	Priors []priorResult
	costs  *sim.CostTable // --cost-regime / --costs (calibrate.go)
}

func (x *explained) costTable() *sim.CostTable {
	if x.costs == nil {
		return sim.DefaultCosts()
	}
	return x.costs
}

type priorResult struct {
	Target string `json:"target"`
	Result string `json:"result"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// explainDoor is the front door --via names.
type explainDoor struct {
	via    doors.Via
	enable bool
}

func explainOn(k *image.Kernel, sw sim.Switches, spec scenarios.Target, priors []scenarios.Target, cpus int, faultSpec string, door explainDoor) (*explained, error) {
	faults, err := sim.ParseFaults(faultSpec)
	if err != nil {
		return nil, usagef("--faults: %s", err.Error())
	}
	m, err := scenarios.Boot(k, sw, cpus, faults)
	if err != nil {
		return nil, err
	}
	out := &explained{}
	fd := doors.New(m).Door(door.via, door.enable)
	var ps []*kprobes.Kprobe
	var errs []error
	var whys []kprobes.Reason
	for _, t := range priors {
		p, why, err := fd.Register(t.Probe())
		whys = append(whys, why)
		var e kprobes.Errno
		if err != nil && !errors.As(err, &e) {
			return nil, fmt.Errorf("--with %s: %w", describeTarget(t), err)
		}
		m.KP.Drain()
		ps, errs = append(ps, p), append(errs, err)
	}
	x, err := scenarios.Explain(m, spec, fd)
	if err != nil {
		return nil, err
	}
	out.Explanation = x
	// The priors as they stand after the explained probe (it may have
	// changed them: a probe inside an optprobe's jump unoptimizes it).
	for i, p := range ps {
		r := priorResult{Target: describeTarget(priors[i]), Result: "0", State: kprobes.StateUnregistered.String(), Reason: whys[i].String()}
		if p != nil { // nil: a front door refused it before register_kprobe
			r.State, r.Reason = p.State().String(), p.Why().String()
		}
		if errs[i] != nil {
			r.Result = errs[i].Error()
		}
		out.Priors = append(out.Priors, r)
	}
	return out, nil
}

func describeTarget(t scenarios.Target) string {
	switch {
	case t.Raw != "":
		return t.Raw
	case t.Symbol != "" && t.Offset != 0:
		return fmt.Sprintf("%s+%d", t.Symbol, t.Offset)
	case t.Symbol != "":
		return t.Symbol
	}
	return fmt.Sprintf("%#x", t.Addr)
}

type verifyResult struct {
	Sets    int    `json:"switch_sets"`
	Same    bool   `json:"same"`
	Differs string `json:"differs,omitempty"`
}

// verifyExplain reruns the probe under every preset and ablation set and
// compares trails and outcomes with x.
func verifyExplain(k *image.Kernel, x *explained, spec scenarios.Target, priors []scenarios.Target, cpus int, faults string, door explainDoor) (*verifyResult, error) {
	specs := []scenarios.RunSpec{{Name: "none"}, {Name: "series", Switches: sim.PresetSeries.Set}, {Name: "all", Switches: sim.PresetAll.Set}}
	specs = append(specs, scenarios.AblationSpecs()...)
	v := &verifyResult{Sets: len(specs), Same: true}
	want := explainKey(x)
	for _, s := range specs {
		y, err := explainOn(k, s.Switches, spec, priors, cpus, faults, door)
		if err != nil {
			return nil, fmt.Errorf("--verify under %s: %w", s.Name, err)
		}
		if got := explainKey(y); got != want {
			v.Same, v.Differs = false, s.Name
			break
		}
	}
	return v, nil
}

func explainKey(x *explained) string {
	var b strings.Builder
	_, _ = x.Trail.WriteTo(&b)
	fmt.Fprintf(&b, "%d %s %s %#x %+v", x.Code, x.State, x.Why, x.Addr, x.Priors)
	return b.String()
}

func resultString(x *explained) string {
	var bug *kprobes.BugError
	switch {
	case x.Err == nil:
		return "0"
	case errors.As(x.Err, &bug):
		return "kernel BUG: " + bug.Err.Error()
	}
	return fmt.Sprintf("-%s (%d)", kprobes.Errno(x.Code).Name(), -x.Code)
}

func writeExplainText(w io.Writer, k *image.Kernel, x *explained, sw sim.Switches, target string, v *verifyResult) {
	fmt.Fprintf(w, "explain %s on %s (%s), through %s, patches %s\n\n", target, k.Name, explainKernel(k), x.Door, sw.Name())
	if len(x.Priors) > 0 {
		fmt.Fprintln(w, "registered first (--with), as they stand at the end:")
		for _, p := range x.Priors {
			why := p.Reason
			if why == "" {
				why = "-"
			}
			fmt.Fprintf(w, "  %s: %s, %s, %s\n", p.Target, p.Result, p.State, why)
		}
		fmt.Fprintln(w)
	}
	_, _ = x.Trail.WriteTo(w)
	fmt.Fprintln(w)
	row := func(k, v string) { fmt.Fprintf(w, "%-9s%s\n", k, v) }
	row("result", resultString(x))
	if x.Addr != 0 {
		row("address", fmt.Sprintf("%#x %s", x.Addr, symPlus(k, x.Addr)))
	}
	row("state", x.State.String())
	why := x.Why.String()
	if why == "" {
		why = "-"
	}
	row("reason", why)
	fmt.Fprintln(w)
	if v != nil {
		if v.Same {
			fmt.Fprintf(w, "verified: the same trail, result, state and reason under all %d switch sets (presets and ablation sets)\n", v.Sets)
		} else {
			fmt.Fprintf(w, "MISMATCH: the trail or decision differs under %s (a kpsim bug: please report it)\n", v.Differs)
		}
	} else {
		fmt.Fprintln(w, "The trail's decisions are identical under every switch set (presets and ablation sets; kpsim's tests prove it, --verify rechecks this probe); the switches change only what the checks cost:")
	}
	costs := x.costTable()
	fmt.Fprintf(w, "weights: %s\n", costs.Describe())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "phase\tops\test. cycles\t\n")
	perPhase := map[sim.Phase]uint64{}
	for _, nz := range x.Counters.NonZero() {
		if !nz.Op.Info().Metric {
			perPhase[nz.Phase] += nz.N
		}
	}
	var total uint64
	for _, name := range scenarios.PhaseNames() {
		ph, _ := sim.LookupPhase(name)
		if n := perPhase[ph]; n > 0 {
			total += n
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t\n", name, n, costs.PhaseCycles(x.Counters, ph))
		}
	}
	fmt.Fprintf(tw, "total\t%d\t%.0f\t\n", total, costs.Cycles(x.Counters))
	tw.Flush()
}

// symPlus names addr as sym+0xoff from the image (display only).
func symPlus(k *image.Kernel, addr uint64) string {
	if m := k.ModuleAt(addr); m != nil {
		var best *image.Symbol
		for i := range m.Symbols {
			s := &m.Symbols[i]
			if s.Addr <= addr && (best == nil || s.Addr > best.Addr) {
				best = s
			}
		}
		if best != nil {
			return fmt.Sprintf("%s+%#x [%s]", best.Name, addr-best.Addr, m.Name)
		}
		return "[" + m.Name + "]"
	}
	if i := k.SymbolAt(addr); i >= 0 {
		s := k.Symbols[i]
		for j := i; j >= 0 && k.Symbols[j].Addr == s.Addr; j-- {
			if k.Symbols[j].IsText() && k.Symbols[j].Size > 0 {
				s = k.Symbols[j]
			}
		}
		return fmt.Sprintf("%s+%#x", s.Name, addr-s.Addr)
	}
	return ""
}

func writeExplainJSON(w io.Writer, k *image.Kernel, x *explained, sw sim.Switches, v *verifyResult) error {
	type step struct {
		Depth  int    `json:"depth"`
		Check  string `json:"check"`
		Args   string `json:"args,omitempty"`
		Result string `json:"result,omitempty"`
	}
	out := struct {
		Kernel  string             `json:"kernel"`
		Release string             `json:"release,omitempty"`
		Gen     string             `json:"generation"`
		Facts   []image.ConfigFact `json:"config_facts,omitempty"`
		Door    string             `json:"via"`
		Patches string             `json:"patches"`
		Addr    string             `json:"addr,omitempty"`
		Where   string             `json:"sym_off,omitempty"`
		Result  string             `json:"result"`
		Errno   int                `json:"errno"`
		State   string             `json:"state"`
		Check   string             `json:"check,omitempty"`
		Detail  string             `json:"detail,omitempty"`
		Reason  string             `json:"reason,omitempty"`
		Trail   []step             `json:"trail"`
		Ops     map[string]uint64  `json:"ops"`
		Verify  *verifyResult      `json:"verify,omitempty"`
		With    []priorResult      `json:"with,omitempty"`
		Cycles  float64            `json:"est_cycles"`
	}{Kernel: k.Name, Release: k.Config.Version, Gen: k.Config.Gen.Effective().String(), Facts: k.Config.Facts, Door: x.Door, Patches: sw.Name(), Result: resultString(x), Errno: x.Code, State: x.State.String(),
		Check: x.Why.Check, Detail: x.Why.Detail, Reason: x.Why.String(), Ops: map[string]uint64{}, Verify: v, With: x.Priors,
		Cycles: x.costTable().Cycles(x.Counters)}
	if x.Addr != 0 {
		out.Addr, out.Where = fmt.Sprintf("%#x", x.Addr), symPlus(k, x.Addr)
	}
	for _, s := range x.Trail.Steps {
		out.Trail = append(out.Trail, step{s.Depth, s.Check, s.Args, s.Result})
	}
	for _, nz := range x.Counters.NonZero() {
		out.Ops[nz.Op.Name()] += nz.N
	}
	return writeJSON(w, out)
}

// explainKernel names the release and the generation whose functions the
// trail follows.
func explainKernel(k *image.Kernel) string {
	s := image.ReleaseLine(k.Config.Version, k.Config.Gen.Effective().String())
	if on := image.FactsOn(k.Config.Facts); on != "" {
		s += "; " + on
	}
	return s
}
