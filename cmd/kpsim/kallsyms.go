package main

import (
	"bufio"
	"fmt"
	"io"

	flag "github.com/spf13/pflag"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/input"
	"github.com/kpsim/kpsim/kallsyms/ktab"
)

// kallsymsDefaults are the scripts/kallsyms flags of the pinned Debian
// kernel, the default of every command that builds kallsyms tables.
var kallsymsDefaults = ktab.Options{AllSymbols: true, AbsolutePercpu: true, BaseRelative: true}

func runKallsyms(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		fmt.Fprintln(stdout, "usage: kpsim kallsyms dump --symbols FILE [--kernel-version 6.1|6.12|7.3] [--all-symbols] [--absolute-percpu] [--base-relative] [--pc-relative] [--what tokens|stats]")
		return errHelp
	}
	if len(args) == 0 || args[0] != "dump" {
		return usagef("want a subcommand: dump")
	}
	fs := newFlagSet("kallsyms dump", stdout)
	symbols := fs.String("symbols", "", "symbol list: System.map or /proc/kallsyms lines (addr type name [module])")
	// The same defaults as run kallsyms: the pinned Debian 6.1 kernel's
	// build (CONFIG_KALLSYMS_ALL, _ABSOLUTE_PERCPU, _BASE_RELATIVE all y);
	// --X=false gives scripts/kallsyms' own (off) defaults.
	opt := kallsymsDefaults
	gen := fs.String("kernel-version", "6.1", "whose scripts/kallsyms (and symbol filter) to run: 6.1, 6.12 or 7.3; its Debian x86-64 flags are the defaults of the flags below")
	fs.BoolVar(&opt.AllSymbols, "all-symbols", opt.AllSymbols, "scripts/kallsyms --all-symbols (CONFIG_KALLSYMS_ALL)")
	fs.BoolVar(&opt.AbsolutePercpu, "absolute-percpu", opt.AbsolutePercpu, "scripts/kallsyms --absolute-percpu (6.1, 6.12; default on there)")
	fs.BoolVar(&opt.BaseRelative, "base-relative", opt.BaseRelative, "scripts/kallsyms --base-relative (6.1; always on in 6.12's tool, absent from 7.3's)")
	fs.BoolVar(&opt.PCRelative, "pc-relative", opt.PCRelative, "scripts/kallsyms --pc-relative (7.3, where it is the default)")
	what := fs.String("what", "stats", "tokens (the 256 token strings, index order) or stats (sizes and table hashes)")
	if err := parse(fs, args[1:], stdout); err != nil {
		return err
	}
	g, err := image.ParseGeneration(*gen)
	if err != nil {
		return usagef("--kernel-version: %v", err)
	}
	// The generation's flags, then what the command line set.
	set := opt
	opt = ktab.OptionsFor(g)
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "all-symbols":
			opt.AllSymbols = set.AllSymbols
		case "absolute-percpu":
			opt.AbsolutePercpu = set.AbsolutePercpu
		case "base-relative":
			opt.BaseRelative = set.BaseRelative
		case "pc-relative":
			opt.PCRelative = set.PCRelative
		}
	})
	if *symbols == "" {
		return usagef("--symbols: a symbol file is required")
	}
	if *what != "tokens" && *what != "stats" {
		return usagef("--what: want tokens or stats, got %q", *what)
	}
	syms, err := readSymbols(*symbols)
	if err != nil {
		return err
	}
	t, err := ktab.Build(syms, opt)
	if err != nil {
		return usagef("%s: %v", *symbols, err)
	}
	w := bufio.NewWriter(stdout)
	if *what == "tokens" {
		for _, tok := range t.TokenStrings() {
			fmt.Fprintln(w, ktab.FormatToken(tok))
		}
		return w.Flush()
	}
	s := t.Stats()
	rows := []struct {
		k string
		v any
	}{
		{"num_syms", s.NumSyms}, {"names_len", s.NamesLen}, {"markers_count", s.MarkersCount},
		{"seqs_len", s.SeqsLen}, {"offsets_len", s.OffsetsLen}, {"token_table_len", s.TokenTableLen},
		{"avg_record_len", fmt.Sprintf("%.4f", s.AvgRecordLen)}, {"two_byte_headers", s.TwoByteHeaders},
		{"names_sha256", s.NamesSHA256}, {"markers_sha256", s.MarkersSHA256}, {"seqs_sha256", s.SeqsSHA256},
		{"offsets_sha256", s.OffsetsSHA256}, {"token_table_sha256", s.TokenTableSHA256},
		{"token_index_sha256", s.TokenIndexSHA256},
		{"names_offsets_len", s.NamesOffsetsLen}, {"stride2_len", s.Stride2Len},
		{"offsets32_len", s.Offsets32Len}, {"offsets32_stride2_len", s.Offsets32S2Len},
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%s %v\n", r.k, r.v)
	}
	return w.Flush()
}

// readSymbols reads the symbol list of --symbols (System.map or
// /proc/kallsyms) for every command that takes one (kallsyms dump, run
// kallsyms, calibrate), with one validation: its errors are usage errors,
// and a list whose addresses are all zero is refused.
func readSymbols(path string) ([]ktab.Symbol, error) {
	f, err := input.Open(path, input.MaxSymbols)
	if err != nil {
		return nil, usagef("--symbols: %v", err)
	}
	defer f.Close()
	syms, err := ktab.ParseSymbols(path, bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return nil, usagef("%v", err)
	}
	if err := refuseZeroAddresses(path, syms); err != nil {
		return nil, err
	}
	return syms, nil
}
