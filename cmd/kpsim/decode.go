package main

import (
	"bufio"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"

	flag "github.com/spf13/pflag"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/x86"
)

func runDecode(args []string, stdout, stderr io.Writer) error {
	fs, imf := newImageFlagSet("decode", args, stdout)
	fn := fs.String("func", "", "decode only the function(s) with this name (duplicates: every one)")
	all := fs.Bool("all", false, "decode every function (the default without --func)")
	summary := fs.Bool("summary", false, "one line per function: ADDRESS NAME INSTRUCTION_COUNT SHA1 of the offsets")
	if err := parseImageFlags(fs, imf, args, stdout, nil); err != nil {
		return err
	}
	if *fn != "" && *all {
		return usagef("--func and --all exclude each other")
	}
	gen, err := decodeGeneration(fs)
	if err != nil {
		return err
	}
	k, _, err := imf.load()
	if err != nil {
		return err
	}
	if gen == image.GenUnknown {
		gen = k.Config.Gen.Effective()
	}
	dec := x86.For(gen)
	funcs := decodeTargets(k, *fn)
	if *fn != "" && len(funcs) == 0 {
		return usagef("--func: no function named %q in %s", *fn, k.Name)
	}
	w := bufio.NewWriterSize(stdout, 1<<16)
	var line []byte
	var offs []byte
	for _, s := range funcs {
		code := k.Text(s.Addr, int(s.Size))
		n := 0
		offs = offs[:0]
		for off := 0; off < len(code); {
			length, mnem := decodeOne(dec, code[off:])
			if n > 0 {
				offs = append(offs, ',')
			}
			offs = strconv.AppendInt(offs, int64(off), 10)
			n++
			if !*summary {
				line = strconv.AppendUint(line[:0], s.Addr+uint64(off), 16)
				line = append(line, '\t')
				line = strconv.AppendInt(line, int64(length), 10)
				line = append(line, '\t')
				line = append(line, mnem...)
				line = append(line, '\n')
				w.Write(line)
			}
			off += length
		}
		if *summary {
			sum := sha1.Sum(offs)
			line = strconv.AppendUint(line[:0], s.Addr, 16)
			line = append(line, '\t')
			line = append(line, s.Name...)
			line = append(line, '\t')
			line = strconv.AppendInt(line, int64(n), 10)
			line = append(line, '\t')
			line = hex.AppendEncode(line, sum[:])
			line = append(line, '\n')
			w.Write(line)
		}
	}
	return w.Flush()
}

// decodeGeneration is the generation the image flag --kernel-version
// names (it also reads the image as that generation), GenUnknown when it
// is not given (the image's then decides).
func decodeGeneration(fs *flag.FlagSet) (image.Generation, error) {
	f := fs.Lookup("kernel-version")
	if f == nil || f.Value.String() == "" {
		return image.GenUnknown, nil
	}
	g, err := image.ParseGeneration(f.Value.String())
	if err != nil {
		return image.GenUnknown, usagef("--kernel-version: %v", err)
	}
	return g, nil
}

// decodeOne is the length and mnemonic of the instruction code starts
// with. An instruction x86asm (and kpsim's own table of the ones it
// misses) cannot name but the kernel's decoder of d's generation sizes,
// such as LKGS before 6.12 or anything APX, takes the kernel decoder's
// length and says so; bytes neither decodes are one "(bad)" byte.
func decodeOne(d *x86.Decoder, code []byte) (int, string) {
	insn, err := d.Decode(nil, code)
	if err == nil {
		return insn.Len, insn.Mnemonic
	}
	if k, kerr := d.DecodeKernel(nil, code); kerr == nil {
		unit := "bytes"
		if k.Len == 1 {
			unit = "byte"
		}
		return k.Len, fmt.Sprintf("(kernel decoder: %d %s; not named)", k.Len, unit)
	}
	return 1, "(bad)"
}

// decodeTargets lists the functions to decode: vmlinux function symbols in
// address order, then each module's, optionally only those named name.
func decodeTargets(k *image.Kernel, name string) []image.Symbol {
	var out []image.Symbol
	add := func(syms []image.Symbol) {
		for _, s := range syms {
			if s.IsText() && s.Size > 0 && (name == "" || s.Name == name) {
				out = append(out, s)
			}
		}
	}
	add(k.Symbols)
	for _, m := range k.Modules {
		add(m.Symbols)
	}
	return out
}
