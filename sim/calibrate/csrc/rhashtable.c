/*
 * Family: lib/rhashtable.c as the probe index (the kprobe-rhashtable
 * design): jhash2 of the 8-byte key, bucket heads with a bit spinlock in
 * bit 0, chains of struct rhash_head inside slab-allocated struct kprobe.
 *
 *   rht_lookup       per rhashtable_lookup_fast on an empty bucket: jhash2
 *                    and the ht->tbl and bucket-head loads (1024 buckets)
 *   rht_insert       per insert or remove: jhash2, bit_spin_lock (lock
 *                    bts), the head store, bit_spin_unlock (chain walks
 *                    are rhashtable.visit, timed as hlist_visit)
 *   rht_rehash_move  per entry moved by rhashtable_rehash_one from a 2^14
 *                    to a 2^15-bucket table: its node's first load,
 *                    jhash2 under the new seed, the new bucket's lock and
 *                    two stores
 *   rht_rehash_bucket per old bucket emptied: lock and head load
 *
 * jhash2 is Bob Jenkins' lookup3 hashword (public domain), which the
 * kernel's jhash2 implements.
 */
#include "harness.h"

#include <stdlib.h>

#define rol32(x, k) (((x) << (k)) | ((x) >> (32 - (k))))
#define JMIX(a, b, c)                           \
	do {                                    \
		a -= c; a ^= rol32(c, 4); c += b; \
		b -= a; b ^= rol32(a, 6); a += c; \
		c -= b; c ^= rol32(b, 8); b += a; \
		a -= c; a ^= rol32(c, 16); c += b; \
		b -= a; b ^= rol32(a, 19); a += c; \
		c -= b; c ^= rol32(b, 4); b += a; \
	} while (0)
#define JFINAL(a, b, c)                          \
	do {                                     \
		c ^= b; c -= rol32(b, 14);        \
		a ^= c; a -= rol32(c, 11);        \
		b ^= a; b -= rol32(a, 25);        \
		c ^= b; c -= rol32(b, 16);        \
		a ^= c; a -= rol32(c, 4);         \
		b ^= a; b -= rol32(a, 14);        \
		c ^= b; c -= rol32(b, 24);        \
	} while (0)

static inline uint32_t jhash2(const uint32_t *k, uint32_t len, uint32_t initval)
{
	uint32_t a, b, c;
	a = b = c = 0xdeadbeef + (len << 2) + initval;
	while (len > 3) {
		a += k[0];
		b += k[1];
		c += k[2];
		JMIX(a, b, c);
		len -= 3;
		k += 3;
	}
	switch (len) {
	case 3:
		c += k[2]; /* fall through */
	case 2:
		b += k[1]; /* fall through */
	case 1:
		a += k[0];
		JFINAL(a, b, c);
		break;
	}
	return c;
}

struct rhash_head {
	struct rhash_head *next;
};
/* struct kprobe with an rhash_head where the hlist_node was. */
struct rkprobe {
	struct rhash_head node;
	char pad[32];
	uintptr_t addr;
	char rest[80];
};
_Static_assert(sizeof(struct rkprobe) == 128, "128-byte probe");

struct bucket_table {
	size_t size;
	uint32_t hash_rnd;
	uintptr_t buckets[]; /* struct rhash_lock_head *: bit 0 is the lock */
};

static struct bucket_table *tbl_alloc(size_t size, uint32_t rnd)
{
	struct bucket_table *t = page_alloc(sizeof(*t) + size * sizeof(uintptr_t));
	t->size = size;
	t->hash_rnd = rnd;
	return t;
}

static inline size_t rht_hash(const struct bucket_table *t, uintptr_t key)
{
	uint32_t k[2] = {(uint32_t)key, (uint32_t)(key >> 32)};
	return jhash2(k, 2, t->hash_rnd) & (t->size - 1);
}

static inline void bit_lock(uintptr_t *b)
{
	while (__atomic_fetch_or(b, 1, __ATOMIC_ACQUIRE) & 1)
		;
}
static inline void bit_unlock_set(uintptr_t *b, uintptr_t v)
{
	__atomic_store_n(b, v & ~(uintptr_t)1, __ATOMIC_RELEASE);
}

static struct bucket_table *volatile ht_tbl;

static __attribute__((noinline)) struct rhash_head *lookup(uintptr_t key)
{
	struct bucket_table *t = ht_tbl;
	uintptr_t h = __atomic_load_n(&t->buckets[rht_hash(t, key)], __ATOMIC_CONSUME) & ~(uintptr_t)1;
	return (struct rhash_head *)h;
}

static __attribute__((noinline)) void insert(struct bucket_table *t, struct rkprobe *p)
{
	uintptr_t *b = &t->buckets[rht_hash(t, p->addr)];
	bit_lock(b);
	p->node.next = (struct rhash_head *)(*b & ~(uintptr_t)1);
	bit_unlock_set(b, (uintptr_t)&p->node);
}

static __attribute__((noinline)) void remove_head(struct bucket_table *t, struct rkprobe *p)
{
	uintptr_t *b = &t->buckets[rht_hash(t, p->addr)];
	bit_lock(b);
	struct rhash_head **pp = (struct rhash_head **)b, *h = (struct rhash_head *)(*b & ~(uintptr_t)1);
	if (h == &p->node) {
		bit_unlock_set(b, (uintptr_t)p->node.next);
		return;
	}
	for (pp = &h->next; *pp && *pp != &p->node; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = p->node.next;
	bit_unlock_set(b, *b);
}

#define NQ 4096

void bench_rhashtable(void)
{
	int R = reps(), rounds = cfg->quick ? 1 : 8;
	double *s = xmalloc(R * sizeof(*s));
	uint64_t seed = 0x72686173ull, acc = 0;
	size_t n = cfg->quick ? 2000 : 20000;
	struct rkprobe **kp = (struct rkprobe **)slab_objs(n, sizeof(struct rkprobe), &seed);
	for (size_t i = 0; i < n; i++)
		kp[i]->addr = 0xffffffff82000000ul + 32 * i;
	uintptr_t *q = xmalloc((size_t)rounds * NQ * sizeof(*q));
	uint32_t *pick = xmalloc((size_t)rounds * NQ * sizeof(*pick));
	for (int i = 0; i < rounds * NQ; i++) {
		pick[i] = (uint32_t)(cfg->hot ? (uint64_t)(i % 8) * (n / 8) : rnd(&seed) % n);
		q[i] = kp[pick[i]]->addr + 1;
	}

	ht_tbl = tbl_alloc(1024, 0x9e3779b9u);
	TIMED_REPS_OF(s, 4.0 * rounds * NQ,
		for (int k = 0; k < 4; k++)
			for (int i = 0; i < rounds * NQ; i++)
				acc += (uintptr_t)lookup(q[i]);
	)
	report("rht_lookup", "call", s, R, "buckets=1024 empty, jhash2 of 8 bytes");

	struct bucket_table *t = tbl_alloc(32768, 0x1234567u);
	for (size_t i = 0; i < n; i++)
		insert(t, kp[i]);
	TIMED_REPS_OF(s, 2.0 * rounds * NQ,
		for (int i = 0; i < rounds * NQ; i++) {
			struct rkprobe *p = kp[pick[i]];
			remove_head(t, p);
			insert(t, p);
		}
	)
	report("rht_insert", "op", s, R, "entries=%zu buckets=32768, remove+insert pairs", n);

	/* Rehash: 2^14 -> 2^15 buckets, bucket by bucket, as the worker. */
	struct bucket_table *old = tbl_alloc(16384, 0x1111u), *nw = tbl_alloc(32768, 0x2222u);
	double *sb = xmalloc(R * sizeof(*sb));
	for (int r = 0; r < R; r += clean()) {
		for (size_t b = 0; b < old->size; b++)
			old->buckets[b] = 0;
		for (size_t b = 0; b < nw->size; b++)
			nw->buckets[b] = 0;
		for (size_t i = 0; i < n; i++)
			insert(old, kp[(i * 7919) % n]);
		long moved = 0;
		double t0 = now_cycles();
		for (size_t b = 0; b < old->size; b++) {
			uintptr_t *ob = &old->buckets[b];
			bit_lock(ob);
			struct rhash_head *h = (struct rhash_head *)(*ob & ~(uintptr_t)1);
			while (h) {
				struct rhash_head *next = h->next;
				struct rkprobe *p = (struct rkprobe *)h;
				uintptr_t *nb = &nw->buckets[rht_hash(nw, p->addr)];
				bit_lock(nb);
				h->next = (struct rhash_head *)(*nb & ~(uintptr_t)1);
				bit_unlock_set(nb, (uintptr_t)h);
				h = next;
				moved++;
			}
			bit_unlock_set(ob, 0);
		}
		double t1 = now_cycles();
		/* The bucket-only part, on the emptied table. */
		for (size_t b = 0; b < old->size; b++) {
			uintptr_t *ob = &old->buckets[b];
			bit_lock(ob);
			acc += *ob & ~(uintptr_t)1;
			bit_unlock_set(ob, 0);
		}
		double t2 = now_cycles();
		sb[r] = (t2 - t1) / old->size;
		s[r] = ((t1 - t0) - (t2 - t1)) / moved;
	}
	report("rht_rehash_move", "entry", s, R, "entries=%zu 16384 -> 32768 buckets, bucket cost removed", n);
	report("rht_rehash_bucket", "bucket", sb, R, "16384 buckets: lock, head load, unlock");
	if (cfg->check) {
		size_t found = 0;
		ht_tbl = nw;
		for (size_t i = 0; i < n; i++)
			for (struct rhash_head *h = lookup(kp[i]->addr); h; h = h->next)
				found += h == &kp[i]->node;
		if (found != n)
			fail("rhashtable: %zu of %zu entries found after the rehash", found, n);
	}
	sink += acc;
	free(q);
	free(pick);
	free(s);
	free(sb);
}
