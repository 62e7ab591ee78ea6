package main

import (
	"fmt"
	"io"
	"strings"

	flag "github.com/spf13/pflag"

	"github.com/kpsim/kpsim/scenarios/soak"
	"github.com/kpsim/kpsim/sim"
)

const soakUsage = "kpsim soak [--steps N] [--seed S] [--campaign-steps L] [--sets K | --patches SPEC ...] [--jobs N] [--out-dir DIR] [--no-shrink] | kpsim soak --replay FILE"

var soakCommand = command{"soak", soakUsage,
	"a seeded random campaign of registrations, front doors, optimizer runs, late init and registry queries, compared step by step between none and sampled switch sets; divergences are shrunk and saved",
	runSoak}

func runSoak(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("soak", stdout)
	o := soak.Options{}
	fs.IntVar(&o.Steps, "steps", 100000, "steps in all (split into campaigns; each step runs on none and on every set of its campaign)")
	fs.Uint64Var(&o.Seed, "seed", 1, "the campaign seed (fixed by default: the same seed draws the same steps and sets)")
	fs.IntVar(&o.CampaignSteps, "campaign-steps", soak.DefaultCampaignSteps, "steps per campaign (fresh machines and one late init per campaign)")
	fs.IntVar(&o.Sets, "sets", 2, "sampled switch sets per campaign (random valid subsets of every switch and design)")
	var patches patchList
	fs.Var(&patches, "patches", "run every campaign under this set instead of sampled ones: a preset or comma-separated switches; repeatable")
	fs.IntVar(&o.IndexFaultPercent, "index-faults", 25, "percent of machines whose late init fails one index allocation (the index falls back to the linear form); 0 for none")
	fs.IntVar(&o.Workers, "jobs", 0, "campaigns run in parallel (formerly --workers; 0: every core); the output does not depend on it")
	outDir := fs.String("out-dir", "testdata/soak", "where shrunk reproducers of divergences are written")
	noShrink := fs.Bool("no-shrink", false, "report divergences without shrinking them")
	replay := fs.String("replay", "", "replay a reproducer FILE (none against its switch set) and report whether it diverges")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *replay != "" {
		for _, f := range []string{"steps", "seed", "campaign-steps", "sets", "patches", "index-faults", "jobs", "out-dir", "no-shrink"} {
			if set[f] {
				return usagef("--%s: does not apply to --replay (the file gives the steps and the set)", f)
			}
		}
		return soakReplay(*replay, stdout)
	}
	switch {
	case o.Steps <= 0:
		return usagef("--steps: must be positive (got %d)", o.Steps)
	case o.CampaignSteps <= 0:
		return usagef("--campaign-steps: must be positive (got %d)", o.CampaignSteps)
	case o.Sets <= 0:
		return usagef("--sets: must be positive (got %d)", o.Sets)
	case set["sets"] && len(patches) > 0:
		return usagef("--sets and --patches are alternatives (sampled sets or given ones)")
	case o.IndexFaultPercent < 0 || o.IndexFaultPercent > 100:
		return usagef("--index-faults: a percentage 0..100 (got %d)", o.IndexFaultPercent)
	case o.Workers < 0:
		return usagef("--jobs: must not be negative (got %d)", o.Workers)
	}
	if o.IndexFaultPercent == 0 {
		o.IndexFaultPercent = -1
	}
	for _, p := range patches {
		ss, err := sim.ParseSwitches(p)
		if err != nil {
			return usagef("--patches %s: %v", p, err)
		}
		if ss == 0 {
			return usagef("--patches %s: none is the reference every set is compared with", p)
		}
		o.Patches = append(o.Patches, ss)
	}
	o.Shrink = !*noShrink
	img, err := soak.LoadImage()
	if err != nil {
		return err
	}
	s, err := soak.Run(img, o, nil)
	if err != nil {
		return err
	}
	s.Write(stdout, true)
	if len(s.Divergences) == 0 {
		return nil
	}
	var paths []string
	for _, d := range s.Divergences {
		p, err := soak.Save(*outDir, d)
		if err != nil {
			return fmt.Errorf("saving a reproducer: %v", err)
		}
		paths = append(paths, p)
		fmt.Fprintf(stdout, "reproducer: %s\n  replay: kpsim soak --replay %s\n", p, p)
	}
	return fmt.Errorf("%d divergence(s) between none and a switch set (reproducers: %s)", len(s.Divergences), strings.Join(paths, ", "))
}

func soakReplay(path string, stdout io.Writer) error {
	r, err := soak.ReadReproducer(path)
	if err != nil {
		return usagef("--replay: %v", err)
	}
	img, err := soak.LoadImage()
	if err != nil {
		return err
	}
	d, err := soak.Replay(img, r.Steps, r.Machine)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "replay %s: %d steps, none against %s\n", path, len(r.Steps), r.Machine.Name())
	if d == nil {
		fmt.Fprintln(stdout, "no divergence")
		return nil
	}
	fmt.Fprintf(stdout, "divergence at %s\n", d)
	return fmt.Errorf("%s diverges at step %d", path, d.Step)
}
