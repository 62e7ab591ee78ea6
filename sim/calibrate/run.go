package calibrate

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/sim"
)

//go:embed csrc/*.c csrc/*.h
var csrc embed.FS

// Regimes are the two cache regimes a calibration measures.
var Regimes = []string{"hot", "cold"}

// Options parameterise Run.
type Options struct {
	// CC is the C compiler command, split on spaces ("cc", "gcc -m64").
	// Empty: $CC, else "cc".
	CC string
	// Regimes to measure: "hot", "cold" or both.
	Regimes []string
	// Quick runs tiny sizes and 3 repetitions (tests); its weights are
	// not for use.
	Quick bool
	// Check also runs the C data structures' self-checks.
	Check bool
	// Tables are the kallsyms tables the kallsyms family walks (built with
	// BaseRelative); TablesName says where they came from.
	Tables     *ktab.Tables
	TablesName string
	// Text is kernel text for the cold decode timing (nil: the built-in
	// instruction mix only).
	Text []byte
	// Progress, if set, gets one line per step.
	Progress io.Writer
	// Command is the command line, recorded in the file's header.
	Command string
	// Dir, if set, is an empty directory to build and run the benchmarks
	// in, which the caller removes (kpsim removes it on a signal too);
	// else Run makes a temporary one and removes it when it returns.
	Dir string
}

// Measure is one benchmark result: cycles per unit.
type Measure struct {
	Bench, Regime, Unit string
	Median, Min, Max    float64
	Samples             int
	Params              string
}

// Result is a calibration run.
type Result struct {
	CPU       string
	Compiler  string // first line of CC --version
	CFlags    string
	Date      time.Time
	Clock     string // "perf_event_cycles" or "thread_cputime"
	Preempted int    // repetitions re-run because the machine preempted them
	MHz       float64
	MHzSource string
	TSCMHz    float64
	L2        int64
	Quick     bool
	Kallsyms  string
	Command   string
	// Measures by regime, then bench name.
	Measures map[string]map[string]Measure
}

// ErrNoCompiler is returned (wrapped) when the C compiler cannot be run.
var ErrNoCompiler = errors.New("no C compiler")

// CFlags are the compiler flags: plain "cc -O2", nothing that changes
// code generation further.
const CFlags = "-O2"

// Sources returns the embedded C sources by file name.
func Sources() (map[string][]byte, error) {
	ents, err := csrc.ReadDir("csrc")
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, e := range ents {
		b, err := csrc.ReadFile("csrc/" + e.Name())
		if err != nil {
			return nil, err
		}
		out[e.Name()] = b
	}
	return out, nil
}

// CheckCompiler reports (as ErrNoCompiler) when the compiler command
// cannot be found.
func CheckCompiler(cc string) error {
	_, err := compilerCmd(cc)
	return err
}

// compilerCmd resolves the compiler command.
func compilerCmd(cc string) ([]string, error) {
	if cc == "" {
		cc = os.Getenv("CC")
	}
	if cc == "" {
		cc = "cc"
	}
	f := strings.Fields(cc)
	if len(f) == 0 {
		return nil, fmt.Errorf("%w: empty compiler command", ErrNoCompiler)
	}
	if _, err := exec.LookPath(f[0]); err != nil {
		return nil, fmt.Errorf("%w: %s not found (set $CC or --cc)", ErrNoCompiler, f[0])
	}
	return f, nil
}

// Compile writes the C sources into dir and builds dir/kpsim-bench with
// the compiler; it returns the binary's path and the compiler's version.
func Compile(cc, dir string) (bin, version string, err error) {
	cmd, err := compilerCmd(cc)
	if err != nil {
		return "", "", err
	}
	src, err := Sources()
	if err != nil {
		return "", "", err
	}
	var files []string
	for name, b := range src {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return "", "", err
		}
		if strings.HasSuffix(name, ".c") {
			files = append(files, name)
		}
	}
	sort.Strings(files)
	ver, err := exec.Command(cmd[0], append(cmd[1:], "--version")...).Output()
	if err != nil {
		return "", "", fmt.Errorf("%w: %s --version: %v", ErrNoCompiler, cmd[0], err)
	}
	version = strings.TrimSpace(strings.SplitN(string(ver), "\n", 2)[0])
	bin = filepath.Join(dir, "kpsim-bench")
	args := append(append(append([]string{}, cmd[1:]...), strings.Fields(CFlags)...), "-o", bin)
	args = append(args, files...)
	c := exec.Command(cmd[0], args...)
	c.Dir = dir
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		first := strings.TrimSpace(strings.SplitN(stderr.String(), "\n", 2)[0])
		return "", "", fmt.Errorf("compiling the benchmarks with %s failed: %v: %s", cmd[0], err, first)
	}
	return bin, version, nil
}

// writeTables writes the kallsyms tables the C family reads.
func writeTables(dir string, t *ktab.Tables) error {
	if t == nil {
		return errors.New("calibrate: no kallsyms tables")
	}
	if !t.BaseRelative {
		return errors.New("calibrate: the kallsyms tables must be built with --base-relative (kallsyms_offsets)")
	}
	abs := 0
	if t.AbsolutePercpu {
		abs = 1
	}
	files := map[string][]byte{
		"names.bin":       t.Names,
		"markers.bin":     t.MarkersBytes(),
		"token_table.bin": t.TokenTable,
		"token_index.bin": t.TokenIndexBytes(),
		"seqs.bin":        t.SeqsOfNames,
		"offsets.bin":     t.OffsetsBytes(),
		"meta.txt":        []byte(fmt.Sprintf("%d %d %d\n", t.NumSyms, t.RelativeBase, abs)),
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Run compiles and runs the benchmarks in every asked regime.
func Run(o Options) (*Result, error) {
	if len(o.Regimes) == 0 {
		o.Regimes = Regimes
	}
	for _, r := range o.Regimes {
		if r != "hot" && r != "cold" {
			return nil, fmt.Errorf("calibrate: regime %q: want hot or cold", r)
		}
	}
	if _, err := compilerCmd(o.CC); err != nil {
		return nil, err
	}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "kpsim-calibrate-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	progress(o, "compiling the C benchmarks in %s", dir)
	bin, ver, err := Compile(o.CC, dir)
	if err != nil {
		return nil, err
	}
	if err := writeTables(dir, o.Tables); err != nil {
		return nil, err
	}
	res := &Result{
		CPU: sim.LocalCPU(), Compiler: ver, CFlags: CFlags, Date: time.Now().UTC().Truncate(time.Second),
		L2: l2Size(), Quick: o.Quick, Kallsyms: o.TablesName, Command: o.Command,
		Measures: map[string]map[string]Measure{},
	}
	res.MHz, res.MHzSource = nominalMHz()
	for _, regime := range o.Regimes {
		progress(o, "running the %s regime", regime)
		args := []string{"regime=" + regime, "ksdir=" + dir, fmt.Sprintf("l2=%d", res.L2)}
		if res.MHz > 0 {
			args = append(args, fmt.Sprintf("mhz=%.3f", res.MHz))
		}
		if o.Quick {
			args = append(args, "quick=1")
		}
		if o.Check {
			args = append(args, "check=1")
		}
		c := exec.Command(bin, args...)
		var stdout, stderr bytes.Buffer
		c.Stdout, c.Stderr = &stdout, &stderr
		if err := c.Run(); err != nil {
			return nil, fmt.Errorf("calibrate: benchmark run (%s) failed: %v: %s", regime, err, strings.TrimSpace(stderr.String()))
		}
		ms, hdr, err := ParseOutput(&stdout)
		if err != nil {
			return nil, err
		}
		res.Clock = hdr["clock"]
		p, _ := strconv.Atoi(hdr["preempted"])
		res.Preempted += p
		res.TSCMHz, _ = strconv.ParseFloat(hdr["tsc_mhz"], 64)
		if res.MHz <= 0 {
			res.MHz, _ = strconv.ParseFloat(hdr["mhz"], 64)
			res.MHzSource = "TSC measured against CLOCK_MONOTONIC"
		}
		progress(o, "timing x86.DecodeKernel in Go (%s)", regime)
		ms[GoDecodeBench] = timeGoDecode(o.Text, regime, o.Quick, res.MHz)
		res.Measures[regime] = ms
	}
	return res, nil
}

func progress(o Options, format string, a ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "calibrate: "+format+"\n", a...)
	}
}

var resultLine = regexp.MustCompile(`^R (\S+) (hot|cold) (\S+) (\S+) (\S+) (\d+) (\S+) \| ?(.*)$`)

// ParseOutput parses the benchmark program's output: "C key value" header
// lines and "R ..." result lines (see csrc/harness.h).
func ParseOutput(r io.Reader) (map[string]Measure, map[string]string, error) {
	ms := map[string]Measure{}
	hdr := map[string]string{}
	sc := bufio.NewScanner(r)
	line := 0
	done := false
	for sc.Scan() {
		line++
		s := sc.Text()
		switch {
		case strings.HasPrefix(s, "C "):
			f := strings.SplitN(s[2:], " ", 2)
			if f[0] == "done" {
				done = true
				continue
			}
			if len(f) == 2 {
				hdr[f[0]] = f[1]
			}
		case strings.HasPrefix(s, "R "):
			m := resultLine.FindStringSubmatch(s)
			if m == nil {
				return nil, nil, fmt.Errorf("calibrate: benchmark output line %d malformed: %q", line, s)
			}
			var v [3]float64
			for i := range v {
				x, err := strconv.ParseFloat(m[3+i], 64)
				if err != nil || x < 0 || x != x || x > 1e12 {
					return nil, nil, fmt.Errorf("calibrate: benchmark %s: value %q is not a finite non-negative number", m[1], m[3+i])
				}
				v[i] = x
			}
			n, _ := strconv.Atoi(m[6])
			ms[m[1]] = Measure{Bench: m[1], Regime: m[2], Median: v[0], Min: v[1], Max: v[2], Samples: n, Unit: m[7], Params: strings.TrimSpace(m[8])}
		case s == "":
		default:
			return nil, nil, fmt.Errorf("calibrate: benchmark output line %d unexpected: %q", line, s)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	if !done {
		return nil, nil, errors.New("calibrate: benchmark output ended early")
	}
	return ms, hdr, nil
}

var ghzInName = regexp.MustCompile(`@\s*([0-9.]+)\s*GHz`)

// nominalMHz reads the nominal frequency: the "@ X GHz" of the model name,
// else "cpu MHz" (on bare metal the current frequency; under a hypervisor
// usually the TSC rate). 0 if neither: the benchmark then measures the TSC.
func nominalMHz() (float64, string) {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0, ""
	}
	if m := ghzInName.FindStringSubmatch(sim.CPUModel(string(b))); m != nil {
		if g, err := strconv.ParseFloat(m[1], 64); err == nil && g > 0 {
			return g * 1000, "model name in /proc/cpuinfo"
		}
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if ok && strings.TrimSpace(k) == "cpu MHz" {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f > 0 {
				return f, "cpu MHz in /proc/cpuinfo"
			}
		}
	}
	return 0, ""
}

// l2Size reads cpu0's L2 size from sysfs (2 MiB if unknown).
func l2Size() int64 {
	const def = 2 << 20
	for i := 0; i < 8; i++ {
		base := fmt.Sprintf("/sys/devices/system/cpu/cpu0/cache/index%d/", i)
		lv, err := os.ReadFile(base + "level")
		if err != nil {
			break
		}
		if strings.TrimSpace(string(lv)) != "2" {
			continue
		}
		sz, err := os.ReadFile(base + "size")
		if err != nil {
			return def
		}
		s := strings.TrimSpace(string(sz))
		mul := int64(1)
		switch {
		case strings.HasSuffix(s, "K"):
			mul, s = 1<<10, strings.TrimSuffix(s, "K")
		case strings.HasSuffix(s, "M"):
			mul, s = 1<<20, strings.TrimSuffix(s, "M")
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return def
		}
		return n * mul
	}
	return def
}
