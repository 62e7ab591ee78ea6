package soak

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/sim"
)

func loadImage(t testing.TB) *Image {
	t.Helper()
	img, err := LoadImage()
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestSmallCampaignNoDivergence(t *testing.T) {
	img := loadImage(t)
	n := 2000
	if race.Enabled || testing.Short() {
		n = 600
	}
	s, err := Run(img, Options{Seed: 1, Steps: n, CampaignSteps: n / 2, Sets: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range s.Divergences {
		t.Errorf("campaign %d: %s", d.Campaign, d)
	}
	if s.Steps != n || s.Campaigns != 2 || s.MachineSteps != 3*n {
		t.Errorf("steps %d campaigns %d machine-steps %d", s.Steps, s.Campaigns, s.MachineSteps)
	}
	for _, k := range Kinds() {
		if s.ByKind[k] == 0 {
			t.Errorf("no %s step in %d", k, n)
		}
	}
}

// TestDeterminism: the same seed draws the same steps and sets and prints
// the same summary (wall time aside), whatever the worker count.
func TestDeterminism(t *testing.T) {
	img := loadImage(t)
	o := Options{Seed: 42, Steps: 600, CampaignSteps: 300, Sets: 2}
	a, b := Plan(img, o, 1), Plan(img, o, 1)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("Plan drew different campaigns for one seed")
	}
	if c := Plan(img, Options{Seed: 43, Steps: 1200, CampaignSteps: 600}, 1); reflect.DeepEqual(a.Steps, c.Steps) {
		t.Fatal("seeds 42 and 43 drew the same steps")
	}
	var out [2]string
	for i, w := range []int{1, 2} {
		o.Workers = w
		s, err := Run(img, o, nil)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		s.Write(&buf, false)
		out[i] = buf.String()
	}
	if out[0] != out[1] {
		t.Fatalf("summaries differ:\n%s\n---\n%s", out[0], out[1])
	}
}

func TestStepFormatRoundTrip(t *testing.T) {
	img := loadImage(t)
	for _, s := range Plan(img, Options{Seed: 7, Steps: 3000, CampaignSteps: 3000}, 0).Steps {
		line := s.Format()
		got, err := ParseStep(line)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if got.Format() != line || !reflect.DeepEqual(normal(got), normal(s)) {
			t.Fatalf("%q parsed back as %q", line, got.Format())
		}
	}
}

// normal drops what Format does not write for a kind.
func normal(s Step) Step {
	if len(s.T) == 0 {
		s.T = nil
	}
	if len(s.Slots) == 0 {
		s.Slots = nil
	}
	if len(s.Q) == 0 {
		s.Q = nil
	}
	return s
}

func TestParseStepErrors(t *testing.T) {
	for _, line := range []string{"", "frobnicate", "kprobe slot=999 at=f@0x1", "kprobe slot=1", "kprobe slot=x at=f@0x1",
		"batch slot=0", "event slots=1 at=f@0x1,g@0x2", "range a=zz", "kprobe slot=1 at=f", "kprobe slot=1 at=f+q@0x1", "unreg slot=1 bogus", "kprobe slot=1 at=f@0x1 post=1", "unreg slot"} {
		if _, err := ParseStep(line); err == nil {
			t.Errorf("%q: parsed", line)
		}
	}
}

func TestSampleSetValid(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[sim.Switch]int{}
	for i := 0; i < 2000; i++ {
		ss := SampleSet(r)
		if ss == 0 || ss.Validate() != nil {
			t.Fatalf("draw %d: %s: %v", i, ss.Name(), ss.Validate())
		}
		for _, s := range ss.List() {
			seen[s]++
		}
	}
	for _, s := range sim.AllSwitches() {
		if seen[s] == 0 {
			t.Errorf("%s never drawn", s)
		}
	}
}

// TestReplayTestdata replays every reproducer under testdata/soak: each
// once diverged (or covers every step kind) and must agree now.
func TestReplayTestdata(t *testing.T) {
	img := loadImage(t)
	files, _ := filepath.Glob("testdata/soak/*.txt")
	if len(files) == 0 {
		t.Fatal("no reproducers under testdata/soak")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r, err := ReadReproducer(f)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Replay(img, r.Steps, r.Machine)
			if err != nil {
				t.Fatal(err)
			}
			if d != nil {
				t.Fatalf("diverges: %s", d)
			}
			// A reproducer of the injected bug must still find it when
			// the bug is switched on (else the file proves nothing).
			if strings.HasPrefix(filepath.Base(f), "mutant-") {
				d, err := Replay(withOffByOne(img), r.Steps, r.Machine)
				if err != nil || d == nil || d.Step != len(r.Steps)-1 {
					t.Fatalf("with the injected bug on: %v, %v (want a divergence at the last step)", d, err)
				}
			}
		})
	}
}

// treeRangeOffByOne is the soak's injected model bug: the P4 tree's floor
// descent compares < where it should compare <=, so every descending range
// (get_optimized_kprobe's window, __recover_optprobed_insn's) misses an
// entry at its top address. It wraps the tree under the registry's range
// iterators, so it reaches the model's own decisions.
type treeRangeOffByOne struct{ kprobes.AddrTree }

func (t treeRangeOffByOne) SeekLE(addr uint64, c *sim.Counters) kprobes.Cursor {
	if addr == 0 {
		return kprobes.Cursor{}
	}
	return t.AddrTree.SeekLE(addr-1, c)
}

// withOffByOne is img with the injected bug in every machine's tree.
func withOffByOne(img *Image) *Image {
	return img.WithWrapTree(func(t kprobes.AddrTree) kprobes.AddrTree { return treeRangeOffByOne{t} })
}

// TestInjectedOffByOneFoundAndShrunk: with the P4 range bound off by one
// (treeRangeOffByOne), a campaign finds the bug and shrinks it to a couple
// of steps; written out, the reproducer parses back and still diverges.
func TestInjectedOffByOneFoundAndShrunk(t *testing.T) {
	img := withOffByOne(loadImage(t))
	s, err := Run(img, Options{Seed: 3, Steps: 300, CampaignSteps: 300, Patches: []sim.Switches{sim.PresetSeries.Set}, Workers: 1, Shrink: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Divergences) == 0 {
		t.Fatal("the injected off-by-one was not found")
	}
	d := s.Divergences[0]
	if d.Shrunk == nil {
		t.Fatal("not shrunk")
	}
	t.Logf("found at step %d, shrunk to %d steps: %s", d.Step, len(d.Shrunk.Steps), d.Shrunk)
	if n := len(d.Shrunk.Steps); n > 3 {
		t.Errorf("shrunk to %d steps, want at most 3", n)
	}
	path, err := Save(t.TempDir(), d)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ReadReproducer(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Machine != d.Machine || len(r.Steps) != len(d.Shrunk.Steps) {
		t.Fatalf("reproducer %+v does not match the divergence", r.Machine)
	}
	if again, err := Replay(img, r.Steps, r.Machine); err != nil || again == nil {
		t.Fatalf("saved reproducer does not diverge: %v", err)
	}
}

// TestInjectedOffByOneReachesDecisions: with every query step removed,
// the same injected bug still diverges, through the model's own decisions
// (get_optimized_kprobe's P7 window decides whether a probe is optimized).
func TestInjectedOffByOneReachesDecisions(t *testing.T) {
	img := withOffByOne(loadImage(t))
	var steps []Step
	for _, s := range Plan(img, Options{Seed: 56, Steps: 300, CampaignSteps: 300}, 0).Steps {
		if s.Kind < KRange {
			steps = append(steps, s)
		}
	}
	m := Machine{Set: sim.PresetSeries.Set}
	d, err := Replay(img, steps, m)
	if err != nil {
		t.Fatal(err)
	}
	if d == nil {
		t.Fatal("not found without queries")
	}
	sh, err := Shrink(img, d, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("found at step %d, shrunk to %d steps: %s", d.Step, len(sh.Steps), sh)
	if len(sh.Steps) > 3 {
		t.Errorf("shrunk to %d steps", len(sh.Steps))
	}
}

func TestReproducerErrors(t *testing.T) {
	for name, text := range map[string]string{
		"noset":   "kprobe slot=1 at=f@0x1\n",
		"badset":  "# switches: iter-get-optimized\nkick\n",
		"badstep": "# switches: series\nfrob\n",
		"nosteps": "# switches: series\n",
		"badflt":  "# switches: series\n# faults: nope\nkick\n",
	} {
		if _, err := ParseReproducer(name, strings.NewReader(text)); err == nil || !strings.HasPrefix(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzParseStep(f *testing.F) {
	f.Add("kprobe slot=3 at=foo+5@0xffffffff81000005 post byaddr")
	f.Add("event slots=1,2 at=a@0x1,b+2@0x4 ret")
	f.Add("addriter n=4 q=0x10,0x12")
	f.Add("range a=0x1 b=0x100 desc closed")
	f.Fuzz(func(t *testing.T, line string) {
		s, err := ParseStep(line)
		if err != nil {
			return
		}
		again, err := ParseStep(s.Format())
		if err != nil || again.Format() != s.Format() {
			t.Fatalf("%q -> %q does not parse back (%v)", line, s.Format(), err)
		}
	})
}

func FuzzParseReproducer(f *testing.F) {
	f.Add("# switches: series\n# faults: bug.index.alloc\nlate-init\nkprobe slot=0 at=f@0x1\n")
	f.Fuzz(func(t *testing.T, text string) {
		r, err := ParseReproducer("fuzz", strings.NewReader(text))
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := r.Format(&b); err != nil {
			t.Fatal(err)
		}
		again, err := ParseReproducer("fuzz", &b)
		if err != nil || again.Machine != r.Machine || len(again.Steps) != len(r.Steps) {
			t.Fatalf("does not round-trip: %v", err)
		}
	})
}

func TestMain(m *testing.M) { os.Exit(m.Run()) }

// TestModuleGoing: kprobes_module_callback at MODULE_STATE_GOING kills the
// probes in the module (GONE, not optimized), enable_kprobe refuses them,
// a new probe there gets -ENOENT (try_module_get), unregistration works,
// and none and the series agree on every step.
func TestModuleGoing(t *testing.T) {
	img := loadImage(t)
	mod := img.K.Modules[0]
	var in []Target
	for _, tg := range img.Pool[ClassModule] {
		if mod.Text.Contains(tg.Addr) && tg.Off == 0 && len(in) < 3 {
			in = append(in, tg)
		}
	}
	steps := []Step{{Kind: KLateInit}}
	for i, tg := range in {
		steps = append(steps, Step{Kind: KRegister, Slot: i, T: []Target{tg}})
	}
	steps = append(steps, Step{Kind: KOptimize},
		Step{Kind: KModuleGoing, Slot: 0},
		Step{Kind: KEnable, Slot: 0},
		Step{Kind: KRegister, Slot: 10, T: []Target{in[0]}},
		Step{Kind: KUnregister, Slot: 0},
		Step{Kind: KOptimize})
	k := img.acquire()
	defer img.release(k)
	s, err := newSUT(k, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var obs []string
	for i := range steps {
		obs = append(obs, steps[i].Format()+" => "+s.apply(&steps[i]))
	}
	t.Log(strings.Join(obs, "\n"))
	g := len(in) + 2
	for i, want := range map[int]string{g: "killed=" + strconv.Itoa(len(in)), g + 1: "-EINVAL", g + 2: "-ENOENT", g + 3: "n=1"} {
		if !strings.Contains(obs[i], "=> "+want) {
			t.Errorf("step %d: %s, want %s", i, obs[i], want)
		}
	}
	if !strings.Contains(obs[g+1], "flags=17 state=disabled") { // GONE | ON_FUNC_ENTRY
		t.Errorf("the killed probe is not GONE: %s", obs[g+1])
	}
	if d, err := Replay(img, steps, Machine{Set: sim.PresetSeries.Set}); err != nil || d != nil {
		t.Fatalf("series: %v %v", d, err)
	}
}
