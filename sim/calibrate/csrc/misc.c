/*
 * Family: small fixed costs a user-space loop can time.
 *
 *   call_const   a non-inlined call doing two compares against globals
 *                (arch_within_kprobe_blacklist, the O(1) checks of
 *                check_kprobe_address_safe, the iterator's cursor test)
 *   call_dep2    a non-inlined call doing two dependent L1 loads and an
 *                increment/decrement of a per-task counter (PREEMPT_RCU's
 *                rcu_read_lock/unlock around a lookup)
 *   atomic2      two uncontended locked read-modify-writes on one
 *                refcount (try_module_get + module_put)
 *   modtree      one mod_tree lookup: descent of a red-black tree of 8
 *                modules (nodes inside 1 KB struct module objects),
 *                start <= addr < start + size compares
 *   strcmp_short one non-inlined strcmp of two short event names that
 *                differ within the first few bytes (the trace front doors'
 *                name lookups)
 *   syscall      one getppid system call: entry, exit and this machine's
 *                kernel's mitigations (not Debian 6.1's: the running
 *                kernel's)
 *
 * hot: the same 8 addresses; cold: a distinct random one per call (the
 * costs barely depend on it except modtree's).
 */
#include "harness.h"

#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile uintptr_t text_start = 0xffffffff81000000ul, text_end = 0xffffffff82000000ul;

static __attribute__((noinline)) int call_const(uintptr_t a)
{
	return a >= text_start && a < text_end;
}

struct task {
	int rcu_read_lock_nesting;
	void *tree_root;
};
static struct task the_task;
static struct task *volatile current_task = &the_task;
static void *volatile tree_slot;

static __attribute__((noinline)) uintptr_t call_dep2(uintptr_t a)
{
	struct task *t = current_task;
	t->rcu_read_lock_nesting++;
	__asm__ __volatile__("" ::: "memory"); /* barrier(), as rcu_read_lock */
	uintptr_t r = (uintptr_t)*(void *volatile *)&t->tree_root + a;
	__asm__ __volatile__("" ::: "memory");
	t->rcu_read_lock_nesting--;
	return r;
}

static int refcnt = 1;
static __attribute__((noinline)) void atomic2(void)
{
	__atomic_fetch_add(&refcnt, 1, __ATOMIC_SEQ_CST); /* try_module_get */
	__atomic_fetch_sub(&refcnt, 1, __ATOMIC_SEQ_CST); /* module_put */
}

struct module {
	char head[256];
	struct rb_node node; /* mod_tree_node */
	uintptr_t base, size;
	char tail[1024 - 256 - 24 - 16];
};
_Static_assert(sizeof(struct module) == 1024, "struct module stand-in");
#define MOD(n) ((struct module *)((char *)(n) - __builtin_offsetof(struct module, node)))

static __attribute__((noinline)) struct module *mod_find(struct rb_root *root, uintptr_t a)
{
	struct rb_node *n = root->node;
	while (n) {
		struct module *m = MOD(n);
		if (a < m->base)
			n = n->left;
		else if (a >= m->base + m->size)
			n = n->right;
		else
			return m;
	}
	return NULL;
}

#define NQ 4096

static __attribute__((noinline)) int strcmp_short(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return (unsigned char)*a - (unsigned char)*b;
}
static const char *const evnames[8] = {"p_vfs_read_0", "p_vfs_write_0", "sched_switch", "sys_enter", "kmalloc", "kfree", "irq_handler_entry", "p_do_sys_open_0"};
static const char *volatile evq[8] = {"p_vfs_read_1", "p_vfs_writev", "sched_waking", "sys_exit", "kmem_cache_alloc", "kfree_skb", "irq_handler_exit", "p_do_sys_openat2"};

void bench_misc(void)
{
	int R = reps(), rounds = cfg->quick ? 1 : 16;
	double *s = xmalloc(R * sizeof(*s));
	uint64_t seed = 0x6d697363ull, acc = 0;
	uintptr_t *q = xmalloc(NQ * sizeof(*q));
	for (int i = 0; i < NQ; i++)
		q[i] = 0xffffffff81000000ul + (cfg->hot ? (uintptr_t)(i % 8) * 4096 : rnd(&seed) % (16u << 20));

	TIMED_REPS_OF(s, (double)rounds * NQ,
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ; i++)
				acc += (unsigned)call_const(q[i]);
	)
	report("call_const", "call", s, R, "noinline, 2 compares on globals");
	tree_slot = &acc;
	TIMED_REPS_OF(s, (double)rounds * NQ,
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ; i++)
				acc += call_dep2(q[i]);
	)
	report("call_dep2", "call", s, R, "noinline, 2 dependent loads, nesting inc/dec");
	TIMED_REPS_OF(s, (double)rounds * NQ,
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ; i++)
				atomic2();
	)
	report("atomic2", "pair", s, R, "lock xadd x2, uncontended");

	struct rb_root root = {0};
	struct module *mods = page_alloc(8 * sizeof(*mods));
	for (int i = 0; i < 8; i++) {
		struct module *m = &mods[i];
		m->base = 0xffffffffc0000000ul + (uintptr_t)i * (1u << 20);
		m->size = 256u << 10;
		struct rb_node **link = &root.node, *parent = NULL;
		while (*link) {
			parent = *link;
			link = m->base < MOD(parent)->base ? &parent->left : &parent->right;
		}
		rb_link_node(&m->node, parent, link);
		rb_insert_color(&m->node, &root);
	}
	for (int i = 0; i < NQ; i++)
		q[i] = mods[cfg->hot ? (uint64_t)(i % 8) : rnd(&seed) % 8].base + (cfg->hot ? 64u : rnd(&seed) % (256u << 10));
	TIMED_REPS_OF(s, (double)rounds * NQ,
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ; i++)
				acc += (uintptr_t)mod_find(&root, q[i]);
	)
	report("modtree", "call", s, R, "8 modules, 1 KB struct module");

	TIMED_REPS_OF(s, (double)rounds * 4 * NQ,
		for (int k = 0; k < rounds * 4; k++)
			for (int i = 0; i < NQ; i++)
				acc += (unsigned)strcmp_short(evnames[i & 7], evq[(i + k) & 7]);
	)
	report("strcmp_short", "call", s, R, "names of 4-17 bytes differing in the first 1-12");

	for (int r = 0; r < R; r += clean()) {
		int calls = cfg->quick ? 200 : 20000;
		double t0 = now_cycles();
		for (int i = 0; i < calls; i++)
			acc += (uint64_t)syscall(SYS_getppid);
		s[r] = (now_cycles() - t0) / calls;
	}
	report("syscall", "call", s, R, "getppid round trip on the running kernel");
	if (cfg->check) {
		long c;
		if (!rb_check(&root, &c) || c != 8)
			fail("misc: mod_tree invariants broken");
		for (int i = 0; i < 8; i++)
			if (mod_find(&root, mods[i].base + 1) != &mods[i])
				fail("misc: mod_find missed module %d", i);
	}
	sink += acc;
	free(mods);
	free(q);
	free(s);
}
