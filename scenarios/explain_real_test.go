package scenarios

import (
	"sort"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/sim"
)

// TestRealKernelReasons: on the Debian 6.1 kernel, known functions get the
// reasons the kernel would give, and a probe at +0 and at +5 on every 11th
// function gets the same result, state and reason under none, series and
// all.
func TestRealKernelReasons(t *testing.T) {
	k := longRealKernel(t, "loads and probes the real kernel")
	for _, c := range []struct {
		target Target
		state  string
		why    string
	}{
		{Target{Symbol: "vfs_read"}, "ftrace", "try_to_optimize_kprobe: a kprobe on ftrace"},
		{Target{Symbol: "vfs_read", Offset: 5}, "optimized", ""},
		{Target{Symbol: "vfs_read", Offset: 1}, "unregistered", "arch_prepare_kprobe: can_probe: +1 is not an instruction boundary: the 5-byte __fentry__ call"},
		{Target{Symbol: "exc_int3"}, "unregistered", "check_kprobe_address_safe: within_kprobe_blacklist: blacklisted (.noinstr.text)"},
		{Target{Symbol: "kprobe_ftrace_handler"}, "unregistered", "check_kprobe_address_safe: within_kprobe_blacklist: blacklisted (NOKPROBE_SYMBOL)"},
		{Target{Symbol: "entry_SYSCALL_64"}, "unregistered", "check_kprobe_address_safe: within_kprobe_blacklist: blacklisted (entry text)"},
	} {
		m, err := Boot(k, sim.PresetSeries.Set, 8, nil)
		if err != nil {
			t.Fatal(err)
		}
		x, err := Explain(m, c.target, nil)
		if err != nil {
			t.Fatal(err)
		}
		if x.State.String() != c.state || !strings.HasPrefix(x.Why.String(), c.why) || (c.why == "") != x.Why.IsZero() {
			t.Errorf("%+v: %s, %q; want %s, %q", c.target, x.State, x.Why, c.state, c.why)
		}
	}

	o := testManyOptions()
	o.Targets, o.ByAddress, o.Via, o.CPUs, o.OptimizeEvery = TargetsAllFunctions, true, doors.ViaRegisterKprobe, 8, 256
	all := mustPrepareFor(t, k, o)
	step := 11
	if race.Enabled {
		step = 37
	}
	var sample []Target
	for i := 0; i < len(all.Targets); i += step {
		a := all.Targets[i].Addr
		sample = append(sample, Target{Addr: a}, Target{Addr: a + 5})
	}
	all.Targets = sample
	base, _, _ := registerEach(t, all, 0, false)
	for _, sw := range []sim.Switches{sim.PresetSeries.Set, sim.PresetAll.Set} {
		got, _, _ := registerEach(t, all, sw, false)
		sameOutcomes(t, sw.Name(), base, got)
	}
	classes := map[string]int{}
	for _, o := range base {
		c := o.State
		if o.Why != "" {
			parts := strings.SplitN(o.Why, ": ", 3)
			c += " " + strings.Join(parts[:len(parts)-1], ": ")
		}
		classes[c]++
	}
	var lines []string
	for c, n := range classes {
		lines = append(lines, c+"\t"+itoa(n))
	}
	sort.Strings(lines)
	t.Logf("%d probes (every %dth function at +0 and +5):\n%s", len(base), step, strings.Join(lines, "\n"))
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestRealKernelTrailsSame: on the Debian kernel, explain's whole trail
// for functions spread over the text at +0, +5 and +9, registered one
// after another on one kernel, is the same under every preset and
// ablation set.
func TestRealKernelTrailsSame(t *testing.T) {
	k := longRealKernel(t, "loads and probes the real kernel")
	fs := k.Functions()
	n := 100
	if race.Enabled {
		n = 20
	}
	var targets []Target
	for i := 100; i < len(fs) && len(targets) < 3*n; i += len(fs) / n {
		if fs[i].Size > 0 {
			for _, off := range []uint32{0, 5, 9} {
				targets = append(targets, Target{Symbol: fs[i].Name, Offset: off})
			}
		}
	}
	trailsSame(t, k, targets)
}
