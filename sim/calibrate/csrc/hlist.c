/*
 * Family: the kprobe_table hash chains (kernel/kprobes.c:get_kprobe,
 * hlist_add_head_rcu, hlist_del_rcu).
 *
 * kprobe_table has 64 buckets (KPROBE_HASH_BITS 6); each is an hlist of
 * struct kprobe (128 bytes on 6.1 x86-64: hlist_node at offset 0, addr at
 * offset 40, so one 64-byte line per node visited) kmalloc'd from
 * kmalloc-128 slab pages (32 objects a page, free list randomised). The
 * probed addresses are consecutive small functions, inserted at the head
 * of bucket hash_ptr(addr, 6) in registration order, as register_kprobes
 * does.
 *
 *   hlist_visit    cycles per chain node compared in get_kprobe's walk
 *                  (queries miss, so each walks its whole chain)
 *   hlist_lookup   cycles per get_kprobe call on an empty table: hash_ptr
 *                  and the bucket-head load
 *   hlist_add_del  cycles per hlist_add_head / hlist_del (half a pair)
 *   hlist_head_l2  extra cycles of a bucket-head load from a 2^14-bucket
 *                  (128 KB) table over hlist_lookup's 64-bucket one
 *   hlist_head_l3  the same from a 2^20-bucket (8 MB) table (the
 *                  kprobe-hash-bits=B and rhashtable designs' big arrays)
 *
 * hot: 8 addresses repeated; cold: a distinct random address per call
 * over all N probes.
 */
#include "harness.h"

#include <stdlib.h>

struct hlist_node {
	struct hlist_node *next, **pprev;
};
struct hlist_head {
	struct hlist_node *first;
};
struct list_head {
	struct list_head *next, *prev;
};

/* struct kprobe as 6.1 lays it out on x86-64 (include/linux/kprobes.h). */
struct kprobe {
	struct hlist_node hlist;
	struct list_head list;
	unsigned long nmissed;
	void *addr;
	const char *symbol_name;
	unsigned int offset;
	void *pre_handler, *post_handler;
	unsigned char opcode;
	struct {
		void *insn;
		void *emulate_op;
		unsigned char boostable_size[16];
	} ainsn; /* struct arch_specific_insn: 32 bytes */
	unsigned int flags;
};
_Static_assert(sizeof(struct kprobe) == 128, "struct kprobe is 128 bytes on 6.1 x86-64");
_Static_assert(__builtin_offsetof(struct kprobe, addr) == 40, "kprobe.addr at 40");

#define KPROBE_HASH_BITS 6
#define KPROBE_TABLE_SIZE (1 << KPROBE_HASH_BITS)
#define GOLDEN_RATIO_64 0x61C8864680B583EBull

static struct hlist_head kprobe_table[KPROBE_TABLE_SIZE];

static inline unsigned hash_ptr(const void *p)
{
	return (unsigned)(((uint64_t)(uintptr_t)p * GOLDEN_RATIO_64) >> (64 - KPROBE_HASH_BITS));
}

static void hlist_add_head(struct hlist_node *n, struct hlist_head *h)
{
	struct hlist_node *first = h->first;
	n->next = first;
	if (first)
		first->pprev = &n->next;
	__atomic_store_n(&h->first, n, __ATOMIC_RELEASE); /* rcu_assign_pointer */
	n->pprev = &h->first;
}

static void hlist_del(struct hlist_node *n)
{
	struct hlist_node *next = n->next, **pprev = n->pprev;
	__atomic_store_n(pprev, next, __ATOMIC_RELAXED); /* WRITE_ONCE */
	if (next)
		next->pprev = pprev;
}

/* get_kprobe: returns the nodes compared; *found the match. */
static __attribute__((noinline)) long get_kprobe(struct hlist_head *tbl, void *addr, struct kprobe **found)
{
	long v = 0;
	for (struct hlist_node *n = __atomic_load_n(&tbl[hash_ptr(addr)].first, __ATOMIC_CONSUME); n; n = n->next) {
		struct kprobe *p = (struct kprobe *)n;
		v++;
		if (p->addr == addr) {
			*found = p;
			return v;
		}
	}
	*found = NULL;
	return v;
}

#define NQ 2048

/* head_loads times R repetitions of the inline bucket-head load of a
 * table of 2^bits heads (hash_ptr's bucket, then its first pointer), for
 * each of q: s[r] is cycles per call. */
static void head_loads(double *s, int R, int rounds, struct hlist_head *tbl, int bits, void **q)
{
	TIMED_REPS(s, calls,
		for (int k = 0; k < rounds * 16; k++)
			for (int i = 0; i < NQ; i++, calls++) {
				/* cold: a new address each round, so the heads
				 * touched exceed L2 like the design's table */
				uintptr_t a = (uintptr_t)q[i] + (cfg->hot ? 0 : (uintptr_t)k * 0x1357100);
				struct hlist_node *nd = __atomic_load_n(&tbl[(a * GOLDEN_RATIO_64) >> (64 - bits)].first, __ATOMIC_CONSUME);
				sink += (uintptr_t)nd;
			}
	)
}

void bench_hlist(void)
{
	size_t n = cfg->quick ? 2000 : 20000;
	uint64_t seed = 0x6b70726f6265ull;
	struct kprobe **kp = (struct kprobe **)slab_objs(n, sizeof(struct kprobe), &seed);
	const uintptr_t base = 0xffffffff82000000ull, stride = 32;
	for (size_t i = 0; i < n; i++) {
		kp[i]->addr = (void *)(base + i * stride);
		hlist_add_head(&kp[i]->hlist, &kprobe_table[hash_ptr(kp[i]->addr)]);
	}
	/* Query addresses: one byte past a probed address (a miss). */
	void **q = xmalloc(NQ * sizeof(*q));
	uint32_t *pick = xmalloc(NQ * sizeof(*pick));
	for (int i = 0; i < NQ; i++) {
		size_t k = cfg->hot ? (size_t)(i % 8) * (n / 8) : rnd(&seed) % n;
		pick[i] = (uint32_t)k;
		q[i] = (char *)kp[k]->addr + 1;
	}
	int R = reps();
	double *s = xmalloc(R * sizeof(*s));
	int rounds = cfg->quick ? 1 : 4;

	for (int r = 0; r < R; r += clean()) {
		long visits = 0;
		struct kprobe *f;
		double t0 = now_cycles();
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ; i++) {
				visits += get_kprobe(kprobe_table, q[i], &f);
				sink += (uintptr_t)f;
			}
		s[r] = (now_cycles() - t0) / visits;
	}
	report("hlist_visit", "node", s, R, "nodes=%zu obj=128 buckets=64 chain=%.0f", n, (double)n / 64);

	/* The per-call part, on an empty table so no node is visited. */
	static struct hlist_head empty[KPROBE_TABLE_SIZE];
	for (int r = 0; r < R; r += clean()) {
		struct kprobe *f;
		long calls = 0;
		double t0 = now_cycles();
		for (int k = 0; k < rounds * 16; k++)
			for (int i = 0; i < NQ; i++) {
				sink += get_kprobe(empty, q[i], &f);
				calls++;
			}
		s[r] = (now_cycles() - t0) / calls;
	}
	report("hlist_lookup", "call", s, R, "buckets=64 empty");
	double base_lookup = s[R / 2];

	/* Bigger tables: the same call with more hash bits. */
	for (int bits = 14; bits <= 20; bits += 6) {
		size_t nb = (size_t)1 << bits;
		struct hlist_head *big = page_alloc(nb * sizeof(*big));
		head_loads(s, R, rounds, big, bits, q);
		/* Minus the same inline loop over the 64-bucket table. */
		double *s2 = xmalloc(R * sizeof(*s2));
		head_loads(s2, R, rounds, empty, KPROBE_HASH_BITS, q);
		double small = median(s2, R);
		for (int r = 0; r < R; r++)
			s[r] = s[r] > small ? s[r] - small : 0;
		report(bits == 14 ? "hlist_head_l2" : "hlist_head_l3", "load", s, R, "buckets=2^%d (%zu KB) minus buckets=64; base lookup %.1f", bits, nb * 8 / 1024, base_lookup);
		free(s2);
		free(big);
	}

	TIMED_REPS(s, ops,
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ; i++) {
				struct kprobe *p = kp[pick[i]];
				hlist_del(&p->hlist);
				hlist_add_head(&p->hlist, &kprobe_table[hash_ptr(p->addr)]);
				ops += 2;
			}
	)
	report("hlist_add_del", "op", s, R, "nodes=%zu obj=128 del+add_head per pair", n);

	if (cfg->check) {
		for (size_t i = 0; i < n; i++) {
			struct kprobe *f;
			get_kprobe(kprobe_table, kp[i]->addr, &f);
			if (f != kp[i])
				fail("hlist: probe %zu not found after add/del", i);
		}
	}
	free(s);
	free(q);
	free(pick);
}
