package soak

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

// Options shape a soak run.
type Options struct {
	// Seed seeds every campaign (campaign i draws from PCG(Seed, i)).
	Seed uint64
	// Steps is the total number of steps, split into campaigns.
	Steps int
	// CampaignSteps is the length of one campaign (fresh machines, one late
	// init); 0 means DefaultCampaignSteps.
	CampaignSteps int
	// Sets is how many sampled switch sets each campaign runs beside none
	// (ignored when Patches is given); 0 means 2.
	Sets int
	// Patches, when not empty, are the sets every campaign runs instead of
	// sampled ones.
	Patches []sim.Switches
	// IndexFaultPercent is the chance that an indexed machine's late init
	// fails one index allocation (it must fall back to the linear form);
	// negative disables, 0 means 25.
	IndexFaultPercent int
	// Workers runs campaigns in parallel (0: GOMAXPROCS). The summary does
	// not depend on it.
	Workers int
	// Shrink shrinks each divergence to a minimal reproducer.
	Shrink bool
}

// DefaultCampaignSteps is one campaign's length.
const DefaultCampaignSteps = 10000

// Machine is one machine of a campaign: a switch set and its fault plans.
type Machine struct {
	Set sim.Switches
	// Faults fail on this machine only: a late-init index allocation,
	// which none never makes (the index falls back to the linear form).
	Faults string
	// Shared fail on none and on this machine alike (the campaign's plan,
	// e.g. the 37th insn-slot page allocation): the N-th hit of a point is
	// a decision the forms share, so both must fail the same call.
	Shared string
}

// Name is the set's name, with the fault plans if any.
func (m Machine) Name() string {
	n := m.Set.Name()
	if m.Faults != "" {
		n += " (faults " + m.Faults + ")"
	}
	if m.Shared != "" {
		n += " (shared faults " + m.Shared + ")"
	}
	return n
}

func joinPlans(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "," + b
}

// Spec is the set in ParseSwitches form.
func (m Machine) Spec() string {
	if m.Set == 0 {
		return "none"
	}
	// Name's "+" form ("series+bug-index") with commas is ParseSwitches'.
	return strings.ReplaceAll(m.Set.Name(), "+", ",")
}

// Campaign is one step list and the machines it runs on beside none.
type Campaign struct {
	Seed     uint64
	Index    int
	Steps    []Step
	Machines []Machine
}

// Divergence is the first step at which a machine decided differently
// from none.
type Divergence struct {
	Seed     uint64
	Campaign int
	Machine  Machine
	// Step is the index of the diverging step in Steps.
	Step  int
	Steps []Step
	// What differed ("result", "registry"), and each side's answer.
	What      string
	Want, Got string
	// Shrunk is the minimal reproducer (nil when not shrunk).
	Shrunk *Divergence
}

func (d *Divergence) String() string {
	return fmt.Sprintf("step %d (%s): %s differs: none %q, %s %q", d.Step, d.Steps[d.Step].Format(), d.What, d.Want, d.Machine.Name(), d.Got)
}

// Plan draws campaign i of a run.
func Plan(img *Image, o Options, i int) Campaign {
	n := o.CampaignSteps
	if n <= 0 {
		n = DefaultCampaignSteps
	}
	if rest := o.Steps - i*n; rest < n {
		n = rest
	}
	c := Campaign{Seed: o.Seed, Index: i, Steps: newGen(img, o.Seed, uint64(i)).Steps(n)}
	r := rand.New(rand.NewPCG(o.Seed, uint64(i)|1<<63))
	sets := o.Patches
	if len(sets) == 0 {
		k := o.Sets
		if k <= 0 {
			k = 2
		}
		for j := 0; j < k; j++ {
			sets = append(sets, SampleSet(r))
		}
	}
	pct := o.IndexFaultPercent
	if pct == 0 {
		pct = 25
	}
	shared := ""
	if pct > 0 && r.IntN(100) < pct {
		f := sharedFaults[r.IntN(len(sharedFaults))]
		shared = fmt.Sprintf("%s@%d", f.point, 1+r.IntN(f.maxHit))
	}
	for _, s := range sets {
		m := Machine{Set: s, Shared: shared}
		if pct > 0 && r.IntN(100) < pct {
			m.Faults = indexFaults[r.IntN(len(indexFaults))]
		}
		c.Machines = append(c.Machines, m)
	}
	return c
}

// NumCampaigns is how many campaigns o.Steps makes.
func NumCampaigns(o Options) int {
	n := o.CampaignSteps
	if n <= 0 {
		n = DefaultCampaignSteps
	}
	return (o.Steps + n - 1) / n
}

// coverage is what the none machine went through in a run: how many steps
// of each kind the kernel accepted ("ok"), and the largest registry, the
// most aggregators and the most optimized entries at once.
type coverage struct {
	OK                          [numKinds]int
	MaxEntries, MaxAggr, MaxOpt int
	// Checks: invariant checks run (every machine, every InvariantEvery
	// steps and at the campaign's end); Warned: machines whose checks
	// failed only after a __disarm_kprobe_ftrace WARN (the kernel's own
	// inconsistency, machine.ErrAfterKernelWarn), not counted as bugs.
	Checks, Warned int
}

// InvariantEvery is how often (in steps) every machine's invariants are
// checked (machine.CheckInvariants, trace.Tracing.CheckInvariants): often
// enough to catch a leak near its cause, rarely enough to cost little.
const InvariantEvery = 1000

// checkInvariants runs s's invariant checks; a failure after a kernel
// WARN is reported as warned, not as an error.
func (s *sut) checkInvariants() (warned bool, err error) {
	err = s.m.CheckInvariants()
	if err == nil {
		err = s.tr.CheckInvariants()
	}
	if errors.Is(err, machine.ErrAfterKernelWarn) {
		return true, nil
	}
	return false, err
}

// runSteps runs steps on none and on each machine, comparing after every
// step; it returns the first divergence of each machine (nil entries for
// machines that agreed throughout).
func runSteps(img *Image, steps []Step, ms []Machine) ([]*Divergence, error) {
	divs, _, err := runStepsCov(img, steps, ms)
	return divs, err
}

// accepted reads a none observation: the kernel said ok (a batch: all of
// it), unregistered something, ran the delayed work or killed a module's
// probes; a query answered at least one entry.
func accepted(k Kind, obs string) bool {
	if k == KBatch {
		_, obs, _ = strings.Cut(obs, " ")
	}
	if k >= KRange {
		return strings.Contains(obs, "[0x")
	}
	return strings.HasPrefix(obs, "ok") || strings.HasPrefix(obs, "ran") || strings.HasPrefix(obs, "killed=") ||
		(strings.HasPrefix(obs, "n=") && !strings.HasPrefix(obs, "n=0"))
}

func runStepsCov(img *Image, steps []Step, ms []Machine) ([]*Divergence, *coverage, error) {
	cov := &coverage{}
	k := img.acquire()
	defer img.release(k)
	shared := ""
	if len(ms) > 0 {
		shared = ms[0].Shared
	}
	ref, err := newSUT(k, 0, shared, img.wrapTree)
	if err != nil {
		return nil, nil, err
	}
	suts := make([]*sut, len(ms))
	for i, m := range ms {
		if m.Shared != shared {
			return nil, nil, fmt.Errorf("machines of one run must share their shared fault plan")
		}
		if suts[i], err = newSUT(k, m.Set, joinPlans(m.Faults, m.Shared), img.wrapTree); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", m.Name(), err)
		}
	}
	divs := make([]*Divergence, len(ms))
	live := len(ms)
	for i := range steps {
		st := &steps[i]
		want := ref.apply(st)
		wantDig := ref.registryDigest()
		if accepted(st.Kind, want) {
			cov.OK[st.Kind]++
		}
		cov.MaxEntries = max(cov.MaxEntries, ref.stats.entries)
		cov.MaxAggr = max(cov.MaxAggr, ref.stats.aggr)
		cov.MaxOpt = max(cov.MaxOpt, ref.stats.opt)
		for j, s := range suts {
			if divs[j] != nil {
				continue
			}
			got := s.apply(st)
			d := &Divergence{Machine: ms[j], Step: i, Steps: steps[:i+1]}
			switch {
			case got != want:
				d.What, d.Want, d.Got = "result", want, got
			case s.registryDigest() != wantDig:
				d.What = "registry"
				d.Want, d.Got = firstDiff(ref.registryDump(), s.registryDump())
			default:
				continue
			}
			divs[j] = d
			live--
		}
		if (i+1)%InvariantEvery == 0 || i == len(steps)-1 || live == 0 {
			cov.Checks++
			warned, err := ref.checkInvariants()
			if err != nil {
				return nil, nil, fmt.Errorf("none: invariant broken after step %d (%s): %w", i, st.Format(), err)
			}
			if warned {
				cov.Warned++
			}
			for j, s := range suts {
				if divs[j] != nil {
					continue
				}
				cov.Checks++
				warned, err := s.checkInvariants()
				if warned {
					cov.Warned++
				}
				if err != nil {
					divs[j] = &Divergence{Machine: ms[j], Step: i, Steps: steps[:i+1], What: "invariant", Want: "every invariant holds", Got: err.Error()}
					live--
				}
			}
		}
		if live == 0 {
			break
		}
	}
	return divs, cov, nil
}

func firstDiff(a, b []string) (string, string) {
	for i := 0; i < max(len(a), len(b)); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("entry %d: %s", i, x), fmt.Sprintf("entry %d: %s", i, y)
		}
	}
	return "", ""
}

// Replay runs steps on none and on m and returns the first divergence, or
// nil.
func Replay(img *Image, steps []Step, m Machine) (*Divergence, error) {
	divs, err := runSteps(img, steps, []Machine{m})
	if err != nil {
		return nil, err
	}
	return divs[0], nil
}

// Summary is what a soak run did.
type Summary struct {
	Seed      uint64
	Steps     int
	Campaigns int
	// CampaignSteps is one campaign's length (the last may be shorter).
	CampaignSteps int
	// Machines counts machine-steps (each step runs on none and on every
	// machine of its campaign).
	MachineSteps int
	// Sets are the distinct machines covered, in first-appearance order.
	Sets []string
	// Machines counts the machines run (campaigns × sets), BySwitch how
	// many of them had each switch, Faulted how many had a failing
	// late-init index allocation.
	Machines, Faulted, SharedFaulted int
	BySwitch                         map[sim.Switch]int
	ByKind                           [numKinds]int
	// OKByKind counts the steps the none kernel accepted (result "ok",
	// one unregistered, the delayed work ran, a module's probes killed);
	// MaxEntries, MaxAggr and MaxOpt are the largest registry, the most
	// aggregators and the most optimized entries seen at once on none.
	OKByKind                    [numKinds]int
	MaxEntries, MaxAggr, MaxOpt int
	// InvariantChecks: machine invariant checks run (every machine, every
	// InvariantEvery steps and at each campaign's end); AfterKernelWarn:
	// checks that failed only after a __disarm_kprobe_ftrace WARN (the
	// kernel's own inconsistency; see machine.ErrAfterKernelWarn).
	InvariantChecks, AfterKernelWarn int
	// Divergences, in campaign order.
	Divergences []*Divergence
	Wall        time.Duration
}

// Run runs o.Steps steps in campaigns, on all cores, and summarises them.
// progress, if not nil, is called after each campaign (in completion order).
func Run(img *Image, o Options, progress func(done, total int)) (*Summary, error) {
	start := time.Now()
	nc := NumCampaigns(o)
	type result struct {
		c    Campaign
		divs []*Divergence
		cov  *coverage
		err  error
	}
	res := make([]result, nc)
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next int
		done int
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= nc {
					return
				}
				c := Plan(img, o, i)
				divs, cov, err := runStepsCov(img, c.Steps, c.Machines)
				for _, d := range divs {
					if d != nil {
						d.Seed, d.Campaign = o.Seed, i
						if o.Shrink && err == nil {
							d.Shrunk, err = Shrink(img, d, 0)
						}
					}
				}
				res[i] = result{c, divs, cov, err}
				mu.Lock()
				done++
				if progress != nil {
					progress(done, nc)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	s := &Summary{Seed: o.Seed, Campaigns: nc, CampaignSteps: o.CampaignSteps, BySwitch: map[sim.Switch]int{}}
	if s.CampaignSteps <= 0 {
		s.CampaignSteps = DefaultCampaignSteps
	}
	seen := map[string]bool{}
	for _, r := range res {
		if r.err != nil {
			return nil, fmt.Errorf("campaign %d: %w", r.c.Index, r.err)
		}
		s.Steps += len(r.c.Steps)
		for k, n := range r.cov.OK {
			s.OKByKind[k] += n
		}
		s.MaxEntries = max(s.MaxEntries, r.cov.MaxEntries)
		s.MaxAggr = max(s.MaxAggr, r.cov.MaxAggr)
		s.MaxOpt = max(s.MaxOpt, r.cov.MaxOpt)
		s.InvariantChecks += r.cov.Checks
		s.AfterKernelWarn += r.cov.Warned
		s.MachineSteps += len(r.c.Steps) * (1 + len(r.c.Machines))
		for _, st := range r.c.Steps {
			s.ByKind[st.Kind]++
		}
		for _, m := range r.c.Machines {
			s.Machines++
			if m.Faults != "" {
				s.Faulted++
			}
			if m.Shared != "" {
				s.SharedFaulted++
			}
			for _, sw := range m.Set.List() {
				s.BySwitch[sw]++
			}
			if n := m.Name(); !seen[n] {
				seen[n] = true
				s.Sets = append(s.Sets, n)
			}
		}
		for _, d := range r.divs {
			if d != nil {
				s.Divergences = append(s.Divergences, d)
			}
		}
	}
	s.Wall = time.Since(start)
	return s, nil
}

// Write prints the summary; wall time last (the only line that varies
// between runs of one seed).
func (s *Summary) Write(w io.Writer, wall bool) {
	fmt.Fprintf(w, "soak: seed %d, %d campaigns of up to %d steps (campaign i draws from PCG(seed, i))\n", s.Seed, s.Campaigns, s.CampaignSteps)
	fmt.Fprintf(w, "steps run:        %d (%d machine-steps: none plus each campaign's sets)\n", s.Steps, s.MachineSteps)
	fmt.Fprintf(w, "switch sets:      %d distinct of %d machines (%d with a failing late-init index allocation, %d with a shared fault plan)\n",
		len(s.Sets), s.Machines, s.Faulted, s.SharedFaulted)
	fmt.Fprintf(w, "machines with each switch:\n")
	for _, sw := range sim.AllSwitches() {
		fmt.Fprintf(w, "  %-24s %4d\n", sw, s.BySwitch[sw])
	}
	fmt.Fprintf(w, "sets:\n")
	for _, n := range s.Sets {
		fmt.Fprintf(w, "  %s\n", n)
	}
	fmt.Fprintf(w, "registry on none: up to %d entries, %d aggregators, %d optimized at once\n", s.MaxEntries, s.MaxAggr, s.MaxOpt)
	fmt.Fprintf(w, "steps by kind (accepted: the none kernel said ok or unregistered something; a query: a non-empty answer):\n")
	kinds := Kinds()
	for _, k := range kinds {
		if s.ByKind[k] > 0 {
			fmt.Fprintf(w, "  %-16s %9d  (accepted %d)\n", k, s.ByKind[k], s.OKByKind[k])
		}
	}
	fmt.Fprintf(w, "invariant checks: %d machine checks (every machine every %d steps and at each campaign's end); %d failed, each\n"+
		"                  after a __disarm_kprobe_ftrace WARN (the kernel's own state is off: e.g. an ftrace probe aggregated with a\n"+
		"                  post handler is disarmed from kprobe_ipmodify_ops, which it was never armed on), not counted as bugs\n",
		s.InvariantChecks, InvariantEvery, s.AfterKernelWarn)
	fmt.Fprintf(w, "divergences:      %d\n", len(s.Divergences))
	for _, d := range s.Divergences {
		fmt.Fprintf(w, "  campaign %d: %s\n", d.Campaign, d)
		if d.Shrunk != nil {
			fmt.Fprintf(w, "    shrunk to %d steps: %s\n", len(d.Shrunk.Steps), d.Shrunk)
		}
	}
	if wall {
		fmt.Fprintf(w, "wall time:        %s (%.0f steps/s, %.0f machine-steps/s)\n", s.Wall.Round(time.Millisecond),
			float64(s.Steps)/s.Wall.Seconds(), float64(s.MachineSteps)/s.Wall.Seconds())
	}
}
