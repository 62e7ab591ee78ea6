package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/scenarios"
)

// runsOf is a run many JSON report without its wall times and metadata.
func runsOf(t *testing.T, out string) []map[string]any {
	t.Helper()
	var rep struct{ Runs []map[string]any }
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Runs {
		delete(r, "wall_ns")
		for _, p := range r["phases"].([]any) {
			delete(p.(map[string]any), "wall_ns")
		}
	}
	return rep.Runs
}

// TestCacheHitIsFreshBuild: a run from the cache (warm) reports exactly
// what a cold run and a --no-cache run report, for --jobs 1 and 2 (every
// count, digest, retained-bytes figure); the cold run wrote one image and
// one kallsyms entry, --no-cache nothing; the cached image and tables are
// deep-equal to freshly built ones.
func TestCacheHitIsFreshBuild(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KPSIM_CACHE_DIR", dir)
	args := append([]string{"run", "many", "--format", "json", "--patches", "none", "--patches", "series", "--sample-functions", "0"}, smallRun...)
	noCache := filepath.Join(t.TempDir(), "none")
	extras := [][]string{{"--jobs", "1"}, {"--jobs", "2"}, {"--jobs", "1"}, {"--no-cache", "--jobs", "2"}}
	if race.Enabled {
		extras = [][]string{{"--jobs", "1"}, {"--jobs", "2"}, {"--no-cache", "--jobs", "2"}}
	}
	var want []map[string]any
	for i, extra := range extras {
		if extra[0] == "--no-cache" {
			t.Setenv("KPSIM_CACHE_DIR", noCache) // must stay absent
		}
		out, errs, code := runKpsim(append(append([]string(nil), args...), extra...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, errs)
		}
		got := runsOf(t, out)
		if i == 0 {
			want = got
			for _, kind := range []string{"image", "kallsyms"} {
				if e, _ := filepath.Glob(filepath.Join(dir, kind, "*")); len(e) != 1 {
					t.Fatalf("cold run left %v in %s/", e, kind)
				}
			}
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("run %d (%v) differs from the cold run", i, extra)
		}
	}
	t.Setenv("KPSIM_CACHE_DIR", dir)

	// The cached values themselves.
	o := scenarios.DefaultManyOptions()
	o.N = 300
	fresh, err := scenarios.PrepareMany(withSmall(t, o))
	if err != nil {
		t.Fatal(err)
	}
	cfg := scenarios.ManyImageConfig(withSmall(t, o))
	if _, _, err := generateCached(cfg, false); err != nil { // stored, if the CLI's run did not
		t.Fatal(err)
	}
	k, truth, err := generateCached(cfg, false)
	if err != nil || truth != nil {
		t.Fatalf("not a cache hit (%v)", err)
	}
	if !reflect.DeepEqual(k, fresh.Kernel) || !reflect.DeepEqual(k.Summarize(), fresh.Kernel.Summarize()) {
		t.Fatal("cached image differs from a fresh one")
	}
	if err := kallsymsCached(k, false); err != nil {
		t.Fatal(err)
	}
	cached, _ := machine.KallsymsTables(k)
	built, _ := machine.KallsymsTables(fresh.Kernel)
	if !reflect.DeepEqual(cached, built) {
		t.Fatal("cached kallsyms tables differ from built ones")
	}
	if !race.Enabled {
		t.Setenv("KPSIM_CACHE_DIR", noCache)
		t.Setenv("KPSIM_NO_CACHE", "1")
		if _, _, code := runKpsim(args...); code != 0 {
			t.Fatal("KPSIM_NO_CACHE run failed")
		}
	}
	if _, err := os.Stat(noCache); !os.IsNotExist(err) {
		t.Fatalf("--no-cache / KPSIM_NO_CACHE=1 wrote the cache (%v)", err)
	}
}

// withSmall applies the test's small image flags to o.Image.
func withSmall(t *testing.T, o scenarios.ManyOptions) scenarios.ManyOptions {
	t.Helper()
	o.Image = configFromFlags(t, append([]string{"--sample-functions", "0"}, small...))
	return o
}

// stripWall drops every wall-clock figure and the metadata from a JSON
// document, leaving what must not depend on --jobs.
func stripWall(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if k == "meta" || strings.HasPrefix(k, "wall") {
				continue
			}
			out[k] = stripWall(e)
		}
		return out
	case []any:
		for i := range x {
			x[i] = stripWall(x[i])
		}
	}
	return v
}

// TestSweepJobs: a sweep whose points (and their runs, two doors each)
// run at once reports what the serial sweep reports, point for point.
func TestSweepJobs(t *testing.T) {
	var want any
	for _, jobs := range []string{"1", "3"} {
		out, errs, code := runKpsim(append([]string{"sweep", "many", "--n", "50,100", "--vias", "register_kprobe,kprobe_events", "--jobs", jobs, "--format", "json", "--sample-functions", "0", "--allow-refusals"}, small...)...)
		if code != 0 {
			t.Fatalf("--jobs %s: exit %d: %s", jobs, code, errs)
		}
		var got any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		got = stripWall(got)
		if want == nil {
			want = got
		} else if !reflect.DeepEqual(got, want) {
			t.Fatalf("--jobs %s differs from --jobs 1", jobs)
		}
	}
}
