// Package ftboot boots ftrace over a compressed kallsyms table of a
// synthetic image, as the tests of ftrace and its users set them up.
package ftboot

import (
	"testing"

	"github.com/kpsim/kpsim/ftrace"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/kallsyms/ktab"
)

// Syms is the baseline compressed resolver over tab with k's modules,
// failing t on an error.
func Syms(t testing.TB, k *image.Kernel, tab *ktab.Tables) *kallsyms.Compressed {
	syms, err := kallsyms.NewCompressed(tab, kallsyms.Baseline, kallsyms.CompressedOptions{Modules: k.Modules})
	if err != nil {
		t.Fatal(err)
	}
	return syms
}

// New returns Syms(t, k, tab) and ftrace's records booted over it,
// failing t on an error.
func New(t testing.TB, k *image.Kernel, tab *ktab.Tables) (*kallsyms.Compressed, *ftrace.Ftrace) {
	syms := Syms(t, k, tab)
	ft, err := ftrace.New(k, syms, nil)
	if err != nil {
		t.Fatal(err)
	}
	return syms, ft
}
