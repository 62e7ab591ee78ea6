package module

import (
	"fmt"
	"os"
)

// Load Debian's dummy.ko into an image and read its tables as the LIVE
// module holds them.
func ExampleLoader_LoadFile() {
	k := fakeKernel(nil)
	b, err := os.ReadFile("testdata/dummy.ko")
	if err != nil {
		panic(err)
	}
	l := NewLoader(k, Options{})
	m, err := l.LoadFile("testdata/dummy.ko", b)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s at %#x: core %d bytes (text %d), init %d bytes (freed)\n", m.Module.Name, m.Core.Base, m.Core.Size, m.Core.TextSize, m.Init.Size)
	fmt.Printf("mcount %d, static calls %d, return sites %d\n", m.Counts.McountLocs, m.Counts.StaticCallSites, m.Counts.ReturnSites)
	// Output:
	// dummy at 0xffffffffc0001000: core 16384 bytes (text 4096), init 12288 bytes (freed)
	// mcount 10, static calls 1, return sites 10
}
