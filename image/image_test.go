package image

import "testing"

// TestDerivedPerImage: one image keeps one store; a copy of the Kernel
// struct (a test editing an image) starts with a store of its own.
func TestDerivedPerImage(t *testing.T) {
	k := &Kernel{Name: "a"}
	d := k.Derived()
	if d == nil || k.Derived() != d {
		t.Fatalf("Derived() = %p then %p: want one store per image", d, k.Derived())
	}
	cp := *k
	if cp.Derived() == d {
		t.Fatal("a copied Kernel shares its original's derived store")
	}
	if k.Derived() != d {
		t.Fatal("the original's store changed after a copy took its own")
	}
}
