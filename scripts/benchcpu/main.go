// Command benchcpu runs Go benchmarks and reports each one's cost in CPU
// time rather than wall time, so figures taken on a machine shared with
// other jobs are not inflated by the time the benchmark spent preempted:
// each benchmark runs twice, -test.benchtime=1x and Nx, and
// (CPU(Nx) - CPU(1x)) / (N-1) is its CPU time per op (the child's
// user+system time from rusage). Its own reported per-unit metric (ns/node,
// ns/tok, ...) gives the units per op, so the result is CPU ns per unit, and
// cycles at the MHz given. kpsim's notes compare these with kpsim
// calibrate's C figures.
//
//	go test -c -o /tmp/kprobes.test ./kprobes/
//	go run ./scripts/benchcpu -mhz 2600 -dir kprobes /tmp/kprobes.test 'ChainWalkLatency/N=20000$'
package main

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

var metric = regexp.MustCompile(`([0-9.]+) ns/([a-z]+)`)

type line struct {
	name  string
	nsop  float64
	units map[string]float64 // unit -> ns/unit
}

func run(bin, dir, bench, benchtime string) (map[string]line, time.Duration, error) {
	c := exec.Command(bin, "-test.run", "^$", "-test.bench", bench, "-test.benchtime", benchtime, "-test.count", "1")
	c.Dir = dir
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Run(); err != nil {
		return nil, 0, fmt.Errorf("%s: %v\n%s", bench, err, out.String())
	}
	cpu := c.ProcessState.UserTime() + c.ProcessState.SystemTime()
	res := map[string]line{}
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		ln := line{name: f[0], units: map[string]float64{}}
		for _, m := range metric.FindAllStringSubmatch(l, -1) {
			v, _ := strconv.ParseFloat(m[1], 64)
			if m[2] == "op" {
				ln.nsop = v
			} else {
				ln.units[m[2]] = v
			}
		}
		res[ln.name] = ln
	}
	return res, cpu, nil
}

func main() {
	mhz := flag.Float64("mhz", 2600, "cycles per microsecond for the cycles column")
	dir := flag.String("dir", ".", "directory to run the test binary in (its package)")
	cpuTarget := flag.Duration("cpu", 400*time.Millisecond, "CPU time to spend per benchmark")
	reps := flag.Int("reps", 3, "repetitions (the median is reported)")
	flag.Parse()
	if flag.NArg() < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchcpu [-mhz F] [-dir D] TESTBINARY BENCHREGEXP...")
		os.Exit(2)
	}
	bin := flag.Arg(0)
	for _, bench := range flag.Args()[1:] {
		probe, _, err := run(bin, *dir, bench, "50ms")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, name := range slices.Sorted(maps.Keys(probe)) {
			p := probe[name]
			exact := "^" + regexp.QuoteMeta(strings.TrimSuffix(name, suffix(name))) + "$"
			exact = strings.ReplaceAll(exact, "/", "$/^")
			n := int(float64(*cpuTarget) / max(p.nsop, 1))
			n = max(10, min(n, 50_000_000))
			var per []float64
			for r := 0; r < *reps; r++ {
				_, c1, err := run(bin, *dir, exact, "1x")
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				_, cn, err := run(bin, *dir, exact, strconv.Itoa(n)+"x")
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				per = append(per, float64((cn-c1).Nanoseconds())/float64(n-1))
			}
			sort.Float64s(per)
			nsop := per[len(per)/2]
			fmt.Printf("%s\tcpu %.4g ns/op (wall %.4g)", name, nsop, p.nsop)
			var us []string
			for u := range p.units {
				us = append(us, u)
			}
			sort.Strings(us)
			for _, u := range us {
				perOp := p.nsop / p.units[u] // units per op, exact from the counts
				fmt.Printf("\tcpu %.4g ns/%s = %.4g cycles/%s (wall %.4g ns/%s)", nsop/perOp, u, nsop/perOp**mhz/1000, u, p.units[u], u)
			}
			if len(us) == 0 {
				fmt.Printf("\t= %.4g cycles/op", nsop**mhz/1000)
			}
			fmt.Println()
		}
	}
}

// suffix is the "-2" GOMAXPROCS suffix of a benchmark name.
func suffix(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[i:]
		}
	}
	return ""
}
