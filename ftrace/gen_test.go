package ftrace

import (
	"slices"
	"testing"

	"github.com/kpsim/kpsim/image"
)

// TestProcessLocsSkipsNonTextPerGeneration: a vmlinux __mcount_loc entry
// outside core and init text (a zeroed weak function's entry moved by
// KASLR) becomes a record in 6.1.192 (test_for_valid_rec then disables
// it) and is skipped by 6.12.117's and 7.3's ftrace_process_locs
// (!is_kernel_text && !is_kernel_inittext: skipped++).
func TestProcessLocsSkipsNonTextPerGeneration(t *testing.T) {
	base := smallImage(t)
	end := base.McountLocs[len(base.McountLocs)-1]
	for _, r := range []*image.Region{base.CoreText(), base.InitText()} {
		if r != nil {
			end = max(end, r.End())
		}
	}
	stray := end + 0x1000
	for _, tc := range []struct {
		g     image.Generation
		extra int
	}{{image.GenUnknown, 1}, {image.Gen61, 1}, {image.Gen612, 0}, {image.Gen73, 0}} {
		k := *base
		k.Config.Gen = tc.g
		k.McountLocs = append(slices.Clone(base.McountLocs), stray)
		plain := *base
		plain.Config.Gen = tc.g
		got, want := newOn(t, &k).NumRecords(), newOn(t, &plain).NumRecords()+tc.extra
		if got != want {
			t.Errorf("%s: %d records, want %d", tc.g, got, want)
		}
	}
}

// TestLookupSymbolsModulesPerGeneration: ftrace_lookup_symbols walks the
// module symbols after vmlinux in 6.12.117 and 7.3, never in 6.1.192.
func TestLookupSymbolsModulesPerGeneration(t *testing.T) {
	for _, tc := range []struct {
		g    image.Generation
		want bool
	}{{image.GenUnknown, false}, {image.Gen61, false}, {image.Gen612, true}, {image.Gen73, true}} {
		k := *smallImage(t)
		k.Config.Gen = tc.g
		ft := newOn(t, &k)
		if ft.LookupModules() != tc.want || ft.Generation() != tc.g.Effective() {
			t.Errorf("%s: module walk %v (generation %s), want %v", tc.g, ft.LookupModules(), ft.Generation(), tc.want)
		}
	}
}
