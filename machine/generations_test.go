package machine_test

import (
	"bytes"
	"debug/elf"
	"os"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/bzimage"
	"github.com/kpsim/kpsim/image/elfload"
	"github.com/kpsim/kpsim/image/load"
	"github.com/kpsim/kpsim/internal/realkernel"
	"github.com/kpsim/kpsim/machine"
)

// TestGenerationsKallsymsTablesAreTheImages: the kallsyms tables a
// machine walks on the shipped 6.12 and 7.3 bzImages (rebuilt from the
// symbols the loader decoded, with the generation's scripts/kallsyms)
// are the tables embedded in the image, byte for byte.
func TestGenerationsKallsymsTablesAreTheImages(t *testing.T) {
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		t.Run(g.String(), func(t *testing.T) {
			p := realkernel.Find(t, g)
			b, err := os.ReadFile(p.Vmlinuz)
			if err != nil {
				t.Fatal(err)
			}
			vm, _, err := bzimage.Decompress(p.Vmlinuz, b)
			if err != nil {
				t.Fatal(err)
			}
			f, err := elf.NewFile(bytes.NewReader(vm))
			if err != nil {
				t.Fatal(err)
			}
			embedded, err := elfload.ReadKallsyms(f)
			if err != nil {
				t.Fatal(err)
			}
			k, err := load.Open(p.Vmlinuz)
			if err != nil {
				t.Fatal(err)
			}
			built, err := machine.KallsymsTables(k)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := built.Stats(), embedded.Stats(); got != want {
				t.Errorf("built %+v\nimage %+v", got, want)
			}
			t.Logf("%s: %d symbols, tables equal to the image's", g, built.NumSyms)
		})
	}
}
