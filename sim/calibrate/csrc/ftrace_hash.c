/*
 * Family: ftrace filter hashes (kernel/trace/ftrace.c: struct ftrace_hash,
 * __ftrace_lookup_ip, dup_hash / __ftrace_hash_move's entry moves).
 *
 * A hash of size_bits 12 (4096 hlist buckets) holding 50k struct
 * ftrace_func_entry (32 bytes: hlist_node, ip, direct) kmalloc'd from
 * kmalloc-32 (128 objects a slab page, free list randomised), keyed by
 * hash_long(ip, 12).
 *
 *   fh_lookup       per ftrace_lookup_ip on an empty bucket: hash_64 and
 *                   the bucket-head load
 *   fh_node         per entry compared on a chain (entry->ip == ip)
 *   fh_bucket       per bucket head read iterating a whole hash
 *   fh_bucket_init  per 8-byte bucket zeroed by kcalloc's memset
 *   fh_move         per entry moved: hlist_del, hash_long, hlist_add_head
 *                   into another 4096-bucket hash
 *
 * Allocation itself (kmalloc, kfree: SLUB's per-cpu freelist) is kernel
 * code and is not timed here.
 */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

struct hlist_node {
	struct hlist_node *next, **pprev;
};
struct hlist_head {
	struct hlist_node *first;
};
struct ftrace_func_entry {
	struct hlist_node hlist;
	unsigned long ip;
	unsigned long direct;
};
_Static_assert(sizeof(struct ftrace_func_entry) == 32, "ftrace_func_entry is 32 bytes");

#define BITS 12
#define GOLDEN_RATIO_64 0x61C8864680B583EBull
static inline unsigned hash_long(unsigned long v) { return (unsigned)((v * GOLDEN_RATIO_64) >> (64 - BITS)); }

static void add_head(struct hlist_node *n, struct hlist_head *h)
{
	struct hlist_node *f = h->first;
	n->next = f;
	if (f)
		f->pprev = &n->next;
	h->first = n;
	n->pprev = &h->first;
}
static void del(struct hlist_node *n)
{
	*n->pprev = n->next;
	if (n->next)
		n->next->pprev = n->pprev;
}

static __attribute__((noinline)) struct ftrace_func_entry *lookup_ip(struct hlist_head *b, unsigned long ip, long *nodes)
{
	for (struct hlist_node *n = b[hash_long(ip)].first; n; n = n->next) {
		struct ftrace_func_entry *e = (struct ftrace_func_entry *)n;
		(*nodes)++;
		if (e->ip == ip)
			return e;
	}
	return NULL;
}

#define NQ 4096

void bench_ftrace_hash(void)
{
	int R = reps(), rounds = cfg->quick ? 1 : 8;
	double *s = xmalloc(R * sizeof(*s));
	size_t n = cfg->quick ? 5000 : 50000, nb = 1u << BITS;
	uint64_t seed = 0x6674726163ull;
	uint64_t acc = 0;
	struct hlist_head *h = xcalloc(nb, sizeof(*h)), *h2 = xcalloc(nb, sizeof(*h2)), *empty = xcalloc(nb, sizeof(*empty));
	struct ftrace_func_entry **e = (struct ftrace_func_entry **)slab_objs(n, 32, &seed);
	/* Function addresses 16-aligned with gaps of 16-400 bytes; the hash
	 * holds every other one, the queries are the others (misses walk the
	 * whole chain, as most records' lookups in a filter walk do). */
	unsigned long *miss = xmalloc(n * sizeof(*miss));
	unsigned long ip = 0xffffffff81000000ul;
	for (size_t i = 0; i < n; i++) {
		ip += 16 * (1 + rnd(&seed) % 25);
		e[i]->ip = ip;
		add_head(&e[i]->hlist, &h[hash_long(e[i]->ip)]);
		ip += 16 * (1 + rnd(&seed) % 25);
		miss[i] = ip;
	}
	unsigned long *q = xmalloc(NQ * sizeof(*q));
	uint32_t *pick = xmalloc(NQ * sizeof(*pick));
	for (int i = 0; i < NQ; i++) {
		pick[i] = (uint32_t)(cfg->hot ? (uint64_t)(i % 8) * (n / 8) : rnd(&seed) % n);
		q[i] = miss[pick[i]];
	}
	free(miss);
	for (int r = 0; r < R; r += clean()) {
		long calls = 0, nodes = 0;
		double t0 = now_cycles();
		for (int k = 0; k < rounds * 4; k++)
			for (int i = 0; i < NQ; i++, calls++)
				acc += (uintptr_t)lookup_ip(empty, q[i], &nodes);
		s[r] = (now_cycles() - t0) / calls;
	}
	report("fh_lookup", "call", s, R, "buckets=4096 empty");
	TIMED_REPS(s, nodes,
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ; i++)
				acc += (uintptr_t)lookup_ip(h, q[i], &nodes);
	)
	report("fh_node", "node", s, R, "entries=%zu buckets=4096 obj=32", n);
	for (int r = 0; r < R; r += clean()) {
		int passes = cfg->quick ? 2 : 64;
		double t0 = now_cycles();
		for (int p = 0; p < passes; p++)
			for (size_t b = 0; b < nb; b++)
				acc += h[b].first != NULL;
		s[r] = (now_cycles() - t0) / ((double)passes * nb);
	}
	report("fh_bucket", "bucket", s, R, "buckets=4096 sequential");
	for (int r = 0; r < R; r += clean()) {
		int passes = cfg->quick ? 2 : 64;
		double t0 = now_cycles();
		for (int p = 0; p < passes; p++) {
			memset(empty, 0, nb * sizeof(*empty));
			__asm__ __volatile__("" ::"r"(empty) : "memory");
		}
		s[r] = (now_cycles() - t0) / ((double)passes * nb);
	}
	report("fh_bucket_init", "bucket", s, R, "memset of 4096 x 8 bytes");
	int flip = 0;
	for (int r = 0; r < R; r += clean()) {
		struct hlist_head *from = flip ? h2 : h, *to = flip ? h : h2;
		flip ^= 1;
		long moved = 0;
		double t0 = now_cycles();
		if (cfg->hot) {
			for (int k = 0; k < rounds * NQ / 8; k++)
				for (int i = 0; i < 8; i++) {
					struct ftrace_func_entry *x = e[pick[i]];
					del(&x->hlist);
					add_head(&x->hlist, &(k % 2 ? from : to)[hash_long(x->ip)]);
					moved++;
				}
		} else {
			for (size_t b = 0; b < nb; b++) {
				struct hlist_node *nd = from[b].first, *nx;
				for (; nd; nd = nx, moved++) {
					nx = nd->next;
					del(nd);
					add_head(nd, &to[hash_long(((struct ftrace_func_entry *)nd)->ip)]);
				}
			}
		}
		s[r] = (now_cycles() - t0) / moved;
	}
	report("fh_move", "entry", s, R, "entries=%zu, %s", n, cfg->hot ? "8 entries moved back and forth" : "whole hash moved, bucket by bucket");
	if (cfg->check) {
		/* cold: rep r moved everything into rep r's "to"; hot only
		 * shuffled 8 entries between the two hashes. */
		long nodes = 0;
		size_t found = 0;
		for (size_t i = 0; i < n; i++)
			found += lookup_ip(h, e[i]->ip, &nodes) == e[i] || lookup_ip(h2, e[i]->ip, &nodes) == e[i];
		if (found != n)
			fail("ftrace_hash: %zu of %zu entries found after the moves", found, n);
	}
	sink += acc;
	free(q);
	free(pick);
	free(s);
}
