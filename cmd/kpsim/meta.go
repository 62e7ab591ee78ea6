package main

import (
	"flag"
	"io"
	"strings"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/sim"
)

// generatorFlags are the synthetic image's flags (not --profile, --kernel).
func generatorFlags() map[string]bool {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addImageFlagsProfile(fs, synth.DefaultConfig())
	out := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name != "profile" && f.Name != "kernel" {
			out[f.Name] = true
		}
	})
	return out
}

// reportMeta describes how a report is made: the build, the kernel (the
// profile and every generator flag whose value differs from the
// profile's, or the image file and its SHA-256), the cost file and its
// SHA-256, the faults and the CPUs.
func reportMeta(fs *flag.FlagSet, imf *imageFlags, k *image.Kernel, costFile, faults, cmd string, args []string) (*scenarios.Meta, error) {
	m := &scenarios.Meta{Kpsim: scenarios.BuildVersion(), Faults: faults, CPU: scenarios.DefaultCPU, Host: scenarios.HostCPU(),
		Command: append(append([]string{"kpsim"}, strings.Fields(cmd)...), args...)}
	var err error
	if imf.synthetic() {
		gen, flags := generatorFlags(), map[string]string{}
		fs.VisitAll(func(f *flag.Flag) {
			if gen[f.Name] && f.Value.String() != f.DefValue {
				flags[f.Name] = f.Value.String()
			}
		})
		m.Kernel, err = scenarios.KernelInfoFor(k, "", imf.profile, flags)
	} else {
		m.Kernel, err = scenarios.KernelInfoFor(k, imf.kernel, "", nil)
	}
	if err != nil {
		return nil, usagef("--kernel: %v", err)
	}
	if costFile != "" {
		sum, err := scenarios.FileSHA256(costFile)
		if err != nil {
			return nil, usagef("--costs: %v", err)
		}
		m.Costs = scenarios.CostInfo{File: costFile, SHA256: sum, Overrides: costOverrides(costFile)}
	}
	return m, nil
}

// costOverrides counts the weights a cost file sets.
func costOverrides(path string) int {
	t, err := sim.LoadCosts(path)
	if err != nil {
		return 0
	}
	n := 0
	for i := range sim.Ops() {
		if t.Source(sim.Op(i)) != "default" {
			n++
		}
	}
	return n
}

// kallsymsMeta describes a run kallsyms report: the synthetic image k, or
// the symbol file and its SHA-256.
func kallsymsMeta(fs *flag.FlagSet, imf *imageFlags, k *image.Kernel, symbols string, args []string) (*scenarios.Meta, error) {
	if k != nil {
		return reportMeta(fs, imf, k, "", "", "run kallsyms", args)
	}
	sum, err := scenarios.FileSHA256(symbols)
	if err != nil {
		return nil, usagef("--symbols: %v", err)
	}
	return &scenarios.Meta{Kpsim: scenarios.BuildVersion(), CPU: scenarios.DefaultCPU, Host: scenarios.HostCPU(),
		Kernel:  scenarios.KernelInfo{Source: "symbols", Name: symbols, Path: symbols, SHA256: sum, Modules: []string{}},
		Command: append([]string{"kpsim", "run", "kallsyms"}, args...)}, nil
}
