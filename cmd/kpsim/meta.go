package main

import (
	"io"
	"strings"

	flag "github.com/spf13/pflag"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/sim"
)

// generatorFlags are the synthetic image's flags (not --profile and
// --kernel-version, which choose the profile the others are compared with
// and are recorded as the report's profile and generation, nor --kernel).
func generatorFlags() map[string]bool {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addImageFlagsProfile(fs, synth.ConfigFor(defaultGen))
	out := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name != "profile" && f.Name != "kernel" && f.Name != "kernel-version" {
			out[f.Name] = true
		}
	})
	return out
}

// reportMeta describes how a report is made: the build, the kernel (the
// profile and every generator flag whose value differs from the
// profile's, or the image file and its SHA-256), the cost file and its
// SHA-256, the faults and the CPUs.
func reportMeta(fs *flag.FlagSet, imf *imageFlags, k *image.Kernel, costs *sim.CostTable, costFile, faults, cmd string, args []string) (*scenarios.Meta, error) {
	m := &scenarios.Meta{Kpsim: scenarios.BuildVersion(), Faults: faults, CPU: costCPU(costs), Host: scenarios.HostCPU(),
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
	if m.Costs, err = costsInfo(costs, costFile); err != nil {
		return nil, err
	}
	return m, nil
}

// costsInfo is costInfo with the cost file's SHA-256.
func costsInfo(costs *sim.CostTable, costFile string) (scenarios.CostInfo, error) {
	ci := costInfo(costs, costFile)
	if costFile != "" {
		sum, err := scenarios.FileSHA256(costFile)
		if err != nil {
			return ci, usagef("--costs: %v", err)
		}
		ci.SHA256 = sum
	}
	return ci, nil
}

// costInfo names the weights: the table's description (the regime, or
// the file and where it was calibrated) and, for a file, how many weights
// its lines set.
func costInfo(costs *sim.CostTable, costFile string) scenarios.CostInfo {
	ci := scenarios.CostInfo{File: costFile, Clock: scenarios.ClockFor(costs, 0)}
	if costs != nil {
		ci.Regime = costs.Describe()
		for i := range sim.Ops() {
			if costFile != "" && strings.HasPrefix(costs.Source(sim.OpAt(i)), costFile+":") {
				ci.Overrides++
			}
		}
	}
	return ci
}

// costCPU is the CPU the weights assume: where a cost file (or a built-in
// calibrated profile) was measured, else the registered defaults' machine.
func costCPU(costs *sim.CostTable) string {
	if costs != nil && costs.Meta.CPU != "" {
		return costs.Meta.CPU + " (as calibrated)"
	}
	return scenarios.DefaultCPU
}

// kallsymsMeta describes a run kallsyms report: the synthetic image k, or
// the symbol file and its SHA-256.
func kallsymsMeta(fs *flag.FlagSet, imf *imageFlags, k *image.Kernel, costs *sim.CostTable, costFile, symbols string, args []string) (*scenarios.Meta, error) {
	if k != nil {
		return reportMeta(fs, imf, k, costs, costFile, "", "run kallsyms", args)
	}
	sum, err := scenarios.FileSHA256(symbols)
	if err != nil {
		return nil, usagef("--symbols: %v", err)
	}
	ci, err := costsInfo(costs, costFile)
	if err != nil {
		return nil, err
	}
	return &scenarios.Meta{Kpsim: scenarios.BuildVersion(), CPU: costCPU(costs), Host: scenarios.HostCPU(), Costs: ci,
		Kernel:  scenarios.KernelInfo{Source: "symbols", Name: symbols, Path: symbols, SHA256: sum, Modules: []string{}, Generation: symbolsGen(imf).String()},
		Command: append([]string{"kpsim", "run", "kallsyms"}, args...)}, nil
}

// symbolsGen is the generation a symbol file is built as: --kernel-version,
// else 6.1.
func symbolsGen(imf *imageFlags) image.Generation {
	if g, err := image.ParseGeneration(imf.kernelVersion); err == nil {
		return g
	}
	return image.Gen61
}
