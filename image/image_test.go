package image

import "testing"

// A Kernel's derived store is its own: the same store on every call, and a
// copy of the struct (a test editing an image) starts with an empty one,
// so derived data never outlives or crosses the image it was built from.
func TestDerivedStoreFollowsTheImage(t *testing.T) {
	k := &Kernel{Name: "a"}
	d := k.Derived()
	if k.Derived() != d {
		t.Fatal("Derived returned two stores for one image")
	}
	c := *k
	if c.Derived() == d {
		t.Fatal("a copy of the Kernel shares its original's derived store")
	}
	if k.Derived() != d {
		t.Fatal("the original lost its store after a copy took its own")
	}
}
