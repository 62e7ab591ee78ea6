/*
 * Family: a maple-tree-like B-tree as the probe index (the kprobe-btree
 * design, which stands in for lib/maple_tree.c): 256-byte range nodes
 * (maple_range_64: 15 pivots, 16 slots, parent), allocated 16 to a slab
 * page (free list randomised), filled ~2/3 as after sequential inserts,
 * walked as mas_walk does: a linear pivot scan in each node, then the slot.
 *
 *   bt_node   cycles per node entered by a descent over N = 20000 probes,
 *             the node's further lines taken out at l1_line's cost
 *   bt_line   cycles per further 64-byte line of a node already loaded
 *             (pivot lines past the first, the slot's line)
 *   bt_slot   cycles per mas_next step to the neighbouring slot in a leaf
 *   bt_store  cycles per leaf store: the node copied out, a pivot and slot
 *             inserted, copied back (mas_wr_node_store without RCU)
 */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

#define NQ_BT 4096
#define SLOTS 16
#define PIVOTS 15
struct mnode {
	struct mnode *parent;
	uint64_t pivot[PIVOTS];
	void *slot[SLOTS];
};
_Static_assert(sizeof(struct mnode) == 256, "maple_range_64 is 256 bytes");

static struct mnode *root;
static int height;

/* Descent: nodes entered and extra lines touched. */
static __attribute__((noinline)) void *walk(uint64_t key, long *nodes, long *lines)
{
	struct mnode *n = root;
	for (int lv = 0;; lv++) {
		(*nodes)++;
		int i = 0;
		while (i < PIVOTS && n->pivot[i] && key > n->pivot[i])
			i++;
		/* lines: pivots end at byte 8 + 8*i, the slot at 128 + 8*i */
		int pl = (8 + 8 * i) / 64, sl = (128 + 8 * i) / 64;
		*lines += pl + (sl != pl);
		void *c = n->slot[i];
		if (lv == height - 1)
			return c;
		n = c;
	}
}

void bench_btree(void)
{
	int R = reps(), rounds = cfg->quick ? 1 : 8;
	double *s = xmalloc(R * sizeof(*s));
	uint64_t seed = 0x6d61706c65ull, acc = 0;
	size_t n = cfg->quick ? 2000 : 20000, fill = 10;
	uint64_t *keys = xmalloc(n * sizeof(*keys));
	for (size_t i = 0; i < n; i++)
		keys[i] = 0xffffffff82000000ull + 32 * i + 31; /* range ends */
	/* Build bottom-up: leaves of `fill` entries, parents of `fill` children. */
	size_t cnt = (n + fill - 1) / fill, total = 0;
	for (size_t c = cnt; ; c = (c + fill - 1) / fill) {
		total += c;
		if (c == 1)
			break;
	}
	struct mnode **pool = (struct mnode **)slab_objs(total, 256, &seed);
	size_t used = 0;
	struct mnode **level = xmalloc(cnt * sizeof(*level));
	uint64_t *lmax = xmalloc(cnt * sizeof(*lmax));
	for (size_t l = 0; l < cnt; l++) {
		struct mnode *m = pool[used++];
		for (size_t j = 0; j < fill && l * fill + j < n; j++) {
			size_t k = l * fill + j;
			if (j < PIVOTS)
				m->pivot[j] = keys[k];
			m->slot[j] = &keys[k];
			lmax[l] = keys[k];
		}
		level[l] = m;
	}
	height = 1;
	while (cnt > 1) {
		size_t pc = (cnt + fill - 1) / fill;
		for (size_t p = 0; p < pc; p++) {
			struct mnode *m = pool[used++];
			for (size_t j = 0; j < fill && p * fill + j < cnt; j++) {
				size_t k = p * fill + j;
				m->pivot[j] = lmax[k];
				m->slot[j] = level[k];
				level[k]->parent = m;
				lmax[p] = lmax[k];
			}
			level[p] = m;
		}
		cnt = pc;
		height++;
	}
	root = level[0];
	if (cfg->check)
		for (size_t i = 0; i < n; i += 7) {
			long a = 0, b = 0;
			if (walk(keys[i] - 5, &a, &b) != &keys[i])
				fail("btree: walk(%zu) found the wrong entry", i);
		}

	uint64_t *q = xmalloc(NQ_BT * sizeof(*q));
	for (int i = 0; i < NQ_BT; i++)
		q[i] = keys[cfg->hot ? (uint64_t)(i % 8) * (n / 8) : rnd(&seed) % n] - 3;

	/* l1_line first: a second line of a node just loaded, i.e. an L1 load
	 * whose address is known: a pointer chase in a 4 KB ring. */
	double line;
	{
		uintptr_t *ring = page_alloc(4096);
		uint32_t perm[64];
		for (int i = 0; i < 64; i++)
			perm[i] = (uint32_t)i;
		shuffle(perm, 64, &seed);
		for (int i = 0; i < 64; i++)
			ring[perm[i] * 8] = (uintptr_t)&ring[perm[(i + 1) % 64] * 8];
		for (int r = 0; r < R; r += clean()) {
			uintptr_t *p = &ring[perm[0] * 8];
			long hops = (long)rounds * 100000;
			double t0 = now_cycles();
			for (long h = 0; h < hops; h++)
				p = (uintptr_t *)*p;
			s[r] = (now_cycles() - t0) / hops;
			acc += (uintptr_t)p;
		}
		report("l1_line", "load", s, R, "dependent loads in a 4 KB ring (L1)");
		line = s[R / 2];
		free(ring);
	}
	for (int r = 0; r < R; r += clean()) {
		long nodes = 0, lines = 0;
		double t0 = now_cycles();
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ_BT; i++)
				acc += (uintptr_t)walk(q[i], &nodes, &lines);
		double t = now_cycles() - t0 - lines * line;
		s[r] = t > 0 ? t / nodes : 0;
	}
	report("bt_node", "node", s, R, "entries=%zu height=%d fill=%zu obj=256, further lines x %.2f removed", n, height, fill, line);

	TIMED_REPS(s, steps,
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ_BT; i++) {
				/* mas_next inside a leaf: the next pivot and slot
				 * (leaves are pool[0 .. leaves), in key order) */
				size_t li = (q[i] - keys[0]) / 32 / fill;
				struct mnode *m = pool[li < used ? li : 0];
				for (int j = 0; j + 1 < (int)fill; j++, steps++)
					acc += m->pivot[j + 1] + (uintptr_t)m->slot[j + 1];
			}
	)
	report("bt_slot", "step", s, R, "pivot and slot of the next entry in a leaf");

	for (int r = 0; r < R; r += clean()) {
		long ops = 0;
		double t0 = now_cycles();
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ_BT; i++, ops++) {
				size_t li = (q[i] - keys[0]) / 32 / fill;
				struct mnode *m = pool[li < used ? li : 0], tmp;
				memcpy(&tmp, m, sizeof(tmp));
				int at = (int)(q[i] % 9);
				memmove(&tmp.pivot[at + 1], &tmp.pivot[at], (PIVOTS - 1 - at) * sizeof(uint64_t));
				memmove(&tmp.slot[at + 1], &tmp.slot[at], (SLOTS - 1 - at) * sizeof(void *));
				tmp.pivot[at] = q[i];
				tmp.slot[at] = &keys[0];
				__asm__ __volatile__("" ::"r"(&tmp) : "memory");
				/* and back: the insert is undone so the tree stays valid */
				memmove(&tmp.pivot[at], &tmp.pivot[at + 1], (PIVOTS - 1 - at) * sizeof(uint64_t));
				memmove(&tmp.slot[at], &tmp.slot[at + 1], (SLOTS - 1 - at) * sizeof(void *));
				memcpy(m, &tmp, sizeof(tmp));
			}
		s[r] = (now_cycles() - t0) / ops;
	}
	report("bt_store", "op", s, R, "256-byte node copied out, entry inserted, copied back");
	if (cfg->check)
		for (size_t i = 0; i < n; i += 7) {
			long a = 0, b = 0;
			if (walk(keys[i] - 5, &a, &b) != &keys[i])
				fail("btree: store bench corrupted the tree at %zu", i);
		}
	sink += acc;
	free(q);
	free(keys);
	free(level);
	free(lmax);
	free(s);
}
