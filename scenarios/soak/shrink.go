package soak

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/sim"
)

// DefaultShrinkBudget bounds the replays one shrink may run.
const DefaultShrinkBudget = 3000

// Shrink reduces d's step list to a minimal one that still diverges on the
// same machine: delta debugging (drop chunks of halving size, then single
// steps), then simpler arguments (flags cleared, fewer targets and
// queries, slot 0), repeated until nothing changes or budget replays ran
// (0: DefaultShrinkBudget). The result's Steps end at its diverging step.
func Shrink(img *Image, d *Divergence, budget int) (*Divergence, error) {
	if budget <= 0 {
		budget = DefaultShrinkBudget
	}
	best := d
	var ferr error
	test := func(steps []Step) bool {
		if budget <= 0 || ferr != nil {
			return false
		}
		budget--
		nd, err := Replay(img, steps, d.Machine)
		if err != nil {
			ferr = err
			return false
		}
		if nd == nil {
			return false
		}
		nd.Seed, nd.Campaign = d.Seed, d.Campaign
		best = nd
		return true
	}
	steps := slices.Clone(d.Steps[:d.Step+1])
	if !test(steps) {
		if ferr != nil {
			return nil, ferr
		}
		return nil, fmt.Errorf("divergence at step %d does not replay", d.Step)
	}
	for changed := true; changed && budget > 0; {
		changed = false
		steps = slices.Clone(best.Steps)
		// ddmin over complements.
		for n := 2; len(steps) >= 2 && budget > 0; {
			chunk := (len(steps) + n - 1) / n
			reduced := false
			for i := 0; i < len(steps); i += chunk {
				cand := append(slices.Clone(steps[:i]), steps[min(i+chunk, len(steps)):]...)
				if len(cand) > 0 && test(cand) {
					steps, reduced, changed = slices.Clone(best.Steps), true, true
					n = max(n-1, 2)
					break
				}
			}
			if !reduced {
				if n >= len(steps) {
					break
				}
				n = min(2*n, len(steps))
			}
		}
		// Simpler arguments, one step at a time.
		for i := 0; i < len(steps) && budget > 0; i++ {
			for _, v := range simpler(steps[i]) {
				cand := slices.Clone(steps)
				cand[i] = v
				if test(cand) {
					steps, changed = slices.Clone(best.Steps), true
					break
				}
			}
			if i >= len(steps) {
				break
			}
		}
	}
	return best, ferr
}

// simpler lists the one-change simplifications of s.
func simpler(s Step) []Step {
	var out []Step
	flags := []*bool{&s.Post, &s.Disabled, &s.ByAddr, &s.Ret, &s.On, &s.Desc, &s.Closed}
	for i := range flags {
		if *flags[i] {
			v := s
			vf := []*bool{&v.Post, &v.Disabled, &v.ByAddr, &v.Ret, &v.On, &v.Desc, &v.Closed}
			*vf[i] = false
			out = append(out, v)
		}
	}
	if len(s.T) > 1 {
		for i := range s.T {
			v := s
			v.T = slices.Delete(slices.Clone(s.T), i, i+1)
			if len(s.Slots) == len(s.T) {
				v.Slots = slices.Delete(slices.Clone(s.Slots), i, i+1)
			}
			out = append(out, v)
		}
	}
	if len(s.Q) > 1 {
		for i := range s.Q {
			v := s
			v.Q = slices.Delete(slices.Clone(s.Q), i, i+1)
			out = append(out, v)
		}
	}
	if s.Slot != 0 {
		v := s
		v.Slot = 0
		out = append(out, v)
	}
	return out
}

// Reproducer is a saved divergence (or a regression list that once
// diverged): the machine, the steps, and the header that says where it
// came from.
type Reproducer struct {
	Name    string
	Machine Machine
	Steps   []Step
	// Header lines other than the machine's ("seed: ...", "expect: ...").
	Notes []string
}

// Format writes r in the reproducer text format:
//
//	# kpsim soak reproducer NAME
//	# switches: SPEC          (sim.ParseSwitches form)
//	# faults: PLAN            (sim.ParseFaults form, the set's machine only; may be empty)
//	# shared-faults: PLAN     (the same plan on none and on the set's machine; may be empty)
//	# seed: ... / expect: ... (notes)
//	STEP                      (one Step.Format line each)
func (r *Reproducer) Format(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# kpsim soak reproducer %s\n", r.Name)
	fmt.Fprintf(bw, "# image: the soak image (soak.ImageConfig: synthetic seed %d)\n", ImageConfig().Seed)
	fmt.Fprintf(bw, "# switches: %s\n", r.Machine.Spec())
	fmt.Fprintf(bw, "# faults: %s\n", r.Machine.Faults)
	if r.Machine.Shared != "" {
		fmt.Fprintf(bw, "# shared-faults: %s\n", r.Machine.Shared)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(bw, "# %s\n", n)
	}
	for _, s := range r.Steps {
		fmt.Fprintln(bw, s.Format())
	}
	return bw.Flush()
}

// ParseReproducer reads a reproducer; problems name the file and line.
func ParseReproducer(name string, rd io.Reader) (*Reproducer, error) {
	r := &Reproducer{Name: strings.TrimSuffix(filepath.Base(name), ".txt")}
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	haveSet := false
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if h, ok := strings.CutPrefix(line, "#"); ok {
			h = strings.TrimSpace(h)
			key, val, _ := strings.Cut(h, ":")
			val = strings.TrimSpace(val)
			switch key {
			case "switches":
				ss, err := sim.ParseSwitches(val)
				if err != nil {
					return nil, fmt.Errorf("%s:%d: %v", name, n, err)
				}
				r.Machine.Set, haveSet = ss, true
			case "faults":
				if _, err := sim.ParseFaults(val); err != nil {
					return nil, fmt.Errorf("%s:%d: %v", name, n, err)
				}
				r.Machine.Faults = val
			case "shared-faults":
				if _, err := sim.ParseFaults(val); err != nil {
					return nil, fmt.Errorf("%s:%d: %v", name, n, err)
				}
				r.Machine.Shared = val
			case "image":
			default:
				if !strings.HasPrefix(h, "kpsim soak reproducer") {
					r.Notes = append(r.Notes, h)
				}
			}
			continue
		}
		s, err := ParseStep(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n, err)
		}
		r.Steps = append(r.Steps, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if !haveSet {
		return nil, fmt.Errorf("%s: no \"# switches:\" header", name)
	}
	if len(r.Steps) == 0 {
		return nil, fmt.Errorf("%s: no steps", name)
	}
	return r, nil
}

// ReadReproducer reads a reproducer file.
func ReadReproducer(path string) (*Reproducer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseReproducer(path, f)
}

// Save writes d (its shrunk form if any) to dir/NAME.txt, whole or not at
// all, and returns the path. NAME is soak-SEED-CAMPAIGN-STEP.
func Save(dir string, d *Divergence) (string, error) {
	src := d
	if d.Shrunk != nil {
		src = d.Shrunk
	}
	name := "soak-" + strconv.FormatUint(d.Seed, 10) + "-" + strconv.Itoa(d.Campaign) + "-" + strconv.Itoa(d.Step)
	r := &Reproducer{Name: name, Machine: d.Machine, Steps: src.Steps[:src.Step+1], Notes: []string{
		fmt.Sprintf("seed: %d, campaign %d, step %d of the original campaign", d.Seed, d.Campaign, d.Step),
		"expect: divergence at the last step: " + oneLine(src.String()),
		"replay: go run ./cmd/kpsim soak --replay " + filepath.Join(dir, name+".txt"),
	}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".txt")
	tmp, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return "", err
	}
	if err := r.Format(tmp); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return path, nil
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
