package synth

import (
	"fmt"
	"math/rand/v2"
)

// Kernel-like function names: subsystem prefix, object, verb, as in
// ext4_inode_alloc or tcp_skb_release. Real kallsyms has heavy prefix sharing,
// static functions with identical names in different files, and compiler
// clones with dotted suffixes; the kallsyms model's compression and the
// blacklist's dotted-name rule both depend on that shape.
var (
	subsystems = []string{
		"ext4", "xfs", "btrfs", "nfs", "nfsd", "fuse", "vfs", "fs", "proc", "sysfs",
		"tcp", "udp", "ip", "ipv6", "inet", "sock", "skb", "netif", "dev", "nf", "xdp",
		"sched", "rcu", "irq", "softirq", "hrtimer", "timer", "tick", "cpu", "smp",
		"mm", "page", "folio", "slab", "kmem", "vma", "mem_cgroup", "swap", "shmem", "hugetlb",
		"blk", "bio", "scsi", "nvme", "ata", "dm", "md", "loop",
		"pci", "acpi", "usb", "hid", "input", "i2c", "drm", "i915", "amdgpu", "snd",
		"kvm", "vmx", "svm", "bpf", "perf", "trace", "ftrace", "kprobe", "audit", "security",
		"selinux", "apparmor", "crypto", "key", "cgroup", "ns", "seccomp", "signal", "futex",
		"tty", "serial", "console", "printk", "klp", "module", "workqueue", "kthread", "task",
	}
	objects = []string{
		"inode", "page", "buffer", "queue", "request", "skb", "dev", "map", "lock", "entry",
		"node", "list", "tree", "table", "ctx", "state", "conn", "sk", "file", "dentry",
		"mount", "super", "block", "extent", "journal", "cache", "pool", "ring", "work",
		"timer", "event", "group", "task", "thread", "rq", "cpu", "irq", "vector", "desc",
		"region", "range", "slot", "port", "link", "route", "addr", "hdr", "msg", "attr",
	}
	verbs = []string{
		"alloc", "free", "init", "exit", "get", "put", "read", "write", "update", "lookup",
		"release", "show", "store", "handle", "process", "submit", "complete", "insert",
		"remove", "find", "add", "del", "set", "clear", "check", "validate", "prepare",
		"commit", "flush", "sync", "start", "stop", "enable", "disable", "open", "close",
		"map", "unmap", "attach", "detach", "resume", "suspend", "probe", "destroy", "create",
	}
	// Static helpers that many files define under the same name.
	commonStatics = []string{
		"cleanup", "init_once", "do_work", "show", "store", "release", "setup",
		"probe", "remove", "open", "handler", "callback", "free_rcu", "get_next",
	}
	cloneSuffixes = []string{".isra.0", ".constprop.0", ".part.0", ".isra.1", ".constprop.1"}
	srcFiles      = []string{
		"kernel/sched/core.c", "mm/page_alloc.c", "mm/slub.c", "fs/ext4/inode.c", "net/ipv4/tcp.c",
		"kernel/rcu/tree.c", "drivers/base/core.c", "kernel/workqueue.c", "block/blk-core.c",
		"fs/namei.c", "kernel/fork.c", "arch/x86/kernel/cpu/common.c", "lib/list_debug.c",
		"include/linux/mm.h", "include/linux/skbuff.h", "kernel/locking/lockdep.c",
	}
)

// namer hands out names; uniqueness is by construction (a serial fallback),
// duplicates only where asked for.
type namer struct {
	rng  *rand.Rand
	used map[string]int
}

func newNamer(rng *rand.Rand) *namer { return &namer{rng: rng, used: map[string]int{}} }

// fresh returns a name not handed out before.
func (n *namer) fresh() string {
	for try := 0; ; try++ {
		var s string
		switch n.rng.IntN(4) {
		case 0:
			s = subsystems[n.rng.IntN(len(subsystems))] + "_" + verbs[n.rng.IntN(len(verbs))]
		case 1, 2:
			s = subsystems[n.rng.IntN(len(subsystems))] + "_" + objects[n.rng.IntN(len(objects))] + "_" + verbs[n.rng.IntN(len(verbs))]
		default:
			s = "__" + subsystems[n.rng.IntN(len(subsystems))] + "_" + verbs[n.rng.IntN(len(verbs))] + "_" + objects[n.rng.IntN(len(objects))]
		}
		if try > 3 {
			s = fmt.Sprintf("%s_%d", s, n.rng.IntN(1000))
		}
		if _, ok := n.used[s]; !ok {
			n.used[s] = 1
			return s
		}
	}
}

// name returns a function name: mostly fresh, sometimes a static helper
// name shared with other files, sometimes a compiler clone of a fresh name.
func (n *namer) name(dupPercent, clonePercent float64) string {
	r := n.rng.Float64() * 100
	switch {
	case r < dupPercent:
		s := commonStatics[n.rng.IntN(len(commonStatics))]
		n.used[s]++
		return s
	case r < dupPercent+clonePercent:
		return n.fresh() + cloneSuffixes[n.rng.IntN(len(cloneSuffixes))]
	}
	return n.fresh()
}

// fixed registers a well-known name (entry code, thunks) so fresh never
// hands it out again.
func (n *namer) fixed(s string) string {
	n.used[s]++
	return s
}
