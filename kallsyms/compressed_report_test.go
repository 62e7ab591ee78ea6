package kallsyms

import (
	"math/rand/v2"
	"testing"

	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/sim"
)

// refSample is a fixed lookup sample: 16 names of the Debian 6.1 kernel
// (hits) and 8 names it does not have (misses).
var refSample = []string{"_printk", "schedule", "vfs_read", "do_sys_openat2", "kernel_clone", "tcp_v4_rcv",
	"kallsyms_lookup_names", "vm_area_alloc", "n_vclocks_show", "get_wchan", "copy_from_user_nmi",
	"__pfx___traceiter_xfs_attr_leaf_to_sf", "final_note", "__pfx_vsock_shutdown", "put_cmsg_scm_timestamping64",
	"__pfx_ipmr_fib_lookup",
	"nonexistent_symbol_0001", "xyz_dummy_missing_symbol", "__never_compiled_in_kernel", "ext4_nonexistent_func_xyz",
	"bpf_not_real_helper_stub", "vfs_missing_handler_probe", "tcp_v4_unimplemented_path", "driver_fake_init_routine"}

// TestReportFigures logs the figures of the report on /proc/kallsyms
// (go test -run ReportFigures -v ./kallsyms/). Skipped with -short/-race.
func TestReportFigures(t *testing.T) {
	if testing.Short() || race.Enabled {
		t.Skip("report figures: long")
	}
	tab := procTables(t)
	t.Logf("N=%d names=%d B markers=%d", tab.NumSyms, len(tab.Names), len(tab.Markers))
	for _, v := range AllVariants() {
		c, _ := NewCompressed(tab, v, CompressedOptions{})
		m := c.Memory()
		t.Logf("memory %-24s markers %7d index %7d heap(peak) %7d extra .rodata %+8d", v, m.Markers, m.Index, m.HeapPeak, m.ExtraRodata)
	}
	// Population: every distinct name once (kallsyms_lookup_name).
	b, _ := NewCompressed(tab, Baseline, CompressedOptions{})
	b.Stats = &LookupStats{}
	seen := map[string]bool{}
	cn := sim.NewCounters(false)
	for _, s := range tab.Syms {
		if !seen[s.Name] {
			seen[s.Name] = true
			b.LookupName(cn, s.Name)
		}
	}
	st := b.Stats
	nl := float64(st.Lookups)
	t.Logf("population (%d names, lookup_name): %.2f bsearch steps, %.2f cmps, %.1f hops/lookup (%.1f/cmp), decided at char 1 %.1f%%, within 2 %.1f%%, tok %.2f/cmp, chr_out %.2f/cmp, chr_cmp %.2f/cmp",
		st.Lookups, float64(st.BsearchSteps)/nl, float64(st.Comparisons)/nl, float64(cn.Total(OpHop))/nl, float64(cn.Total(OpHop))/float64(st.Comparisons),
		100*float64(st.DecidedAt1)/float64(st.Comparisons), 100*float64(st.DecidedWithin2)/float64(st.Comparisons),
		float64(cn.Total(OpTok))/float64(st.Comparisons), float64(cn.Total(OpChrOut))/float64(st.Comparisons), float64(st.CharsCompared)/float64(st.Comparisons))
	// The reference sample, with end (on_each_match_symbol), per variant.
	hits, misses := refSample[:16], refSample[16:]
	for _, set := range []struct {
		name  string
		names []string
	}{{"hits", hits}, {"misses", misses}} {
		for _, v := range Variants() {
			c, _ := NewCompressed(tab, v, CompressedOptions{})
			c.Stats = &LookupStats{}
			c.PrepareBatch(nil)
			cn := sim.NewCounters(false)
			for _, q := range set.names {
				c.OnEachMatchSymbol(cn, q, func(uint64) int { return 0 })
			}
			n := float64(len(set.names))
			s := c.Stats
			t.Logf("sample %-6s %-24s steps %.2f cmps %.2f hops %.1f tok %.1f chr_out %.1f chr_cmp %.1f ld3 %.1f bytes %.0f; at1 %.1f%% within2 %.1f%%",
				set.name, v, float64(s.BsearchSteps)/n, float64(s.Comparisons)/n, float64(cn.Total(OpHop))/n, float64(cn.Total(OpTok))/n,
				float64(cn.Total(OpChrOut))/n, float64(cn.Total(OpChrCmp))/n, float64(cn.Total(OpLd3))/n, float64(cn.Total(OpBytes))/n,
				100*float64(s.DecidedAt1)/float64(s.Comparisons), 100*float64(s.DecidedWithin2)/float64(s.Comparisons))
		}
	}
	// Go ns per call, random hits / misses / addresses.
	rng := rand.New(rand.NewPCG(3, 4))
	var rh, rm []string
	var ra []uint64
	for range 2000 {
		s := tab.Syms[rng.IntN(tab.NumSyms)]
		rh = append(rh, s.Name)
		rm = append(rm, s.Name+"_nx")
		ra = append(ra, s.Addr+uint64(rng.IntN(16)))
	}
	var baseNs [3]float64
	for _, v := range AllVariants() {
		c, _ := NewCompressed(tab, v, CompressedOptions{})
		var ns [3]float64
		var cyc [3]float64
		for k, x := range []struct {
			kind  LookupKind
			names []string
			addrs []uint64
		}{{KindMatch, rh, nil}, {KindMatch, rm, nil}, {KindSprint, nil, ra}} {
			m, err := c.Measure(x.kind, x.names, x.addrs, 20)
			if err != nil {
				t.Fatal(err)
			}
			ns[k], cyc[k] = m.NsPerCall, m.CyclesPerCall
		}
		if v == Baseline {
			baseNs = ns
		}
		w, _ := c.Measure(KindOnEachSymbol, nil, nil, 3)
		t.Logf("ns %-24s hit %7.0f (x%.2f, model %6.0f cyc)  miss %7.0f (x%.2f, model %6.0f cyc)  sprint %6.0f (x%.2f)  walk %.2f ms",
			v, ns[0], baseNs[0]/ns[0], cyc[0], ns[1], baseNs[1]/ns[1], cyc[1], ns[2], baseNs[2]/ns[2], w.NsPerCall/1e6)
	}
	_ = ktab.MaxNamesOffset
}
