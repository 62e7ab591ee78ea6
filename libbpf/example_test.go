package libbpf_test

import (
	"fmt"

	"github.com/kpsim/kpsim/libbpf"
)

func ExampleGlobMatch() {
	for _, p := range []string{"vfs_*", "vfs_rea?", "*write", "vfs_read"} {
		m, steps := libbpf.GlobMatch("vfs_read", p)
		fmt.Println(p, m, steps)
	}
	// Output:
	// vfs_* true 4
	// vfs_rea? true 8
	// *write false 16
	// vfs_read true 8
}

func ExampleParseSec() {
	s, err := libbpf.ParseSec(nil, "kprobe/tcp_v4_connect+0x10")
	fmt.Println(s.Kind, s.Target, s.Offset, err)
	_, err = libbpf.ParseSec(nil, "kprobe.session/")
	fmt.Println(err)
	// Output:
	// kprobe tcp_v4_connect 16 <nil>
	// kprobe session pattern is invalid: : -EINVAL
}
