package load

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/internal/testcache"
)

// TestMain keeps the tests out of the user's kpsim cache (testcache).
func TestMain(m *testing.M) { testcache.Main(m) }

// TestLoadedKernelCache: a kernel read back from the cache of loaded
// kernels is deep-equal to one loaded afresh, for the default CPU and for
// the text as built; Record and NoCache never use it.
func TestLoadedKernelCache(t *testing.T) {
	const p = "../../.cache/kernels/vmlinuz-6.1.0-57-amd64"
	b, err := os.ReadFile(p)
	if err != nil {
		t.Skip("no real kernel: run `make real-kernel` to enable")
	}
	if testing.Short() || race.Enabled {
		t.Skip("loads the real kernel three times (slow under -short or -race)")
	}
	for _, cpuName := range []string{"", "none"} {
		o := Options{CPU: cpuName}
		cpu, err := o.cpu()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := BytesWith(p, b, o); err != nil { // fills the cache
			t.Fatal(err)
		}
		hit, err := BytesWith(p, b, o)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := bytesWith(p, b, o, cpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		if hit.Booted != nil {
			t.Fatal("the second load did not come from the cache")
		}
		if !reflect.DeepEqual(hit.Kernel, fresh.Kernel) {
			t.Fatalf("cpu %q: the cached kernel differs from a fresh load", cpuName)
		}
		rec, err := BytesWith(p, b, Options{CPU: cpuName, Record: true})
		if err != nil {
			t.Fatal(err)
		}
		if cpuName == "" && (rec.Booted == nil || len(rec.Booted.Sites) == 0) {
			t.Fatal("Record was answered from the cache")
		}
	}
	if e, _ := filepath.Glob(filepath.Join(os.Getenv("KPSIM_CACHE_DIR"), "kernel", "*")); len(e) < 2 {
		t.Fatalf("kernel entries %v", e)
	}
}
