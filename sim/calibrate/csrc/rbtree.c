/*
 * Family: the address-ordered probe tree of the series (P4) and the
 * kernel's mod_tree: red-black trees as lib/rbtree.c keeps them (parent
 * pointer and colour packed in one word, children right then left).
 *
 * The rebalancing below is the textbook (CLRS) red-black algorithm on
 * lib/rbtree.c's node layout, not a copy of lib/rbtree.c: the same
 * invariants and node accesses, at most 2 rotations per insert and 3 per
 * erase. rb_check verifies the invariants (check=1).
 *
 * The tree's nodes: struct kprobe (128 bytes) with a struct rb_node
 * appended (152 bytes, kmalloc-192: 21 objects a slab page, free list
 * randomised), keyed by kprobe.addr at offset 40: a descent touches the
 * node's line and the key's line.
 *
 *   rb_visit     cycles per node compared during a descent (lookups of
 *                addresses that miss, as the reservation checks' queries)
 *   rb_search    cycles per descent call on an empty tree (root load)
 *   rb_step      cycles per rb_next from a random node
 *   rb_insert    cycles of rb_link_node + rb_insert_color per insert
 *                (an insert batch minus the same batch's descents)
 *   rb_erase     cycles per rb_erase by node pointer
 *   rb_replace   cycles per rb_replace_node
 *
 * hot: 8 keys or nodes repeated; cold: a distinct random one per call
 * over N = 20000 probes.
 */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

#define RB_RED 0
#define RB_BLACK 1

static inline struct rb_node *rb_parent(const struct rb_node *n)
{
	return (struct rb_node *)(n->parent_color & ~(uintptr_t)3);
}
static inline int rb_color(const struct rb_node *n) { return (int)(n->parent_color & 1); }
static inline int rb_is_black(const struct rb_node *n) { return !n || (n->parent_color & 1); }
static inline void rb_set_parent(struct rb_node *n, struct rb_node *p)
{
	n->parent_color = (uintptr_t)p | (n->parent_color & 1);
}
static inline void rb_set_color(struct rb_node *n, int c)
{
	n->parent_color = (n->parent_color & ~(uintptr_t)1) | (uintptr_t)c;
}

void rb_link_node(struct rb_node *n, struct rb_node *parent, struct rb_node **link)
{
	n->parent_color = (uintptr_t)parent; /* red */
	n->left = n->right = NULL;
	*link = n;
}

static void change_child(struct rb_node *old, struct rb_node *new, struct rb_node *parent, struct rb_root *root)
{
	if (!parent)
		root->node = new;
	else if (parent->left == old)
		parent->left = new;
	else
		parent->right = new;
}

static void rotate_left(struct rb_node *x, struct rb_root *root)
{
	struct rb_node *y = x->right, *p = rb_parent(x);
	x->right = y->left;
	if (y->left)
		rb_set_parent(y->left, x);
	rb_set_parent(y, p);
	change_child(x, y, p, root);
	y->left = x;
	rb_set_parent(x, y);
}

static void rotate_right(struct rb_node *x, struct rb_root *root)
{
	struct rb_node *y = x->left, *p = rb_parent(x);
	x->left = y->right;
	if (y->right)
		rb_set_parent(y->right, x);
	rb_set_parent(y, p);
	change_child(x, y, p, root);
	y->right = x;
	rb_set_parent(x, y);
}

void rb_insert_color(struct rb_node *z, struct rb_root *root)
{
	struct rb_node *p, *g, *u;
	while ((p = rb_parent(z)) && rb_color(p) == RB_RED) {
		g = rb_parent(p);
		if (p == g->left) {
			u = g->right;
			if (u && rb_color(u) == RB_RED) {
				rb_set_color(p, RB_BLACK);
				rb_set_color(u, RB_BLACK);
				rb_set_color(g, RB_RED);
				z = g;
				continue;
			}
			if (z == p->right) {
				z = p;
				rotate_left(z, root);
				p = rb_parent(z);
			}
			rb_set_color(p, RB_BLACK);
			rb_set_color(g, RB_RED);
			rotate_right(g, root);
		} else {
			u = g->left;
			if (u && rb_color(u) == RB_RED) {
				rb_set_color(p, RB_BLACK);
				rb_set_color(u, RB_BLACK);
				rb_set_color(g, RB_RED);
				z = g;
				continue;
			}
			if (z == p->left) {
				z = p;
				rotate_right(z, root);
				p = rb_parent(z);
			}
			rb_set_color(p, RB_BLACK);
			rb_set_color(g, RB_RED);
			rotate_left(g, root);
		}
	}
	rb_set_color(root->node, RB_BLACK);
}

static void transplant(struct rb_node *u, struct rb_node *v, struct rb_root *root)
{
	struct rb_node *p = rb_parent(u);
	change_child(u, v, p, root);
	if (v)
		rb_set_parent(v, p);
}

static void erase_fixup(struct rb_node *x, struct rb_node *xp, struct rb_root *root)
{
	struct rb_node *w;
	while (x != root->node && rb_is_black(x)) {
		if (x == xp->left) {
			w = xp->right;
			if (rb_color(w) == RB_RED) {
				rb_set_color(w, RB_BLACK);
				rb_set_color(xp, RB_RED);
				rotate_left(xp, root);
				w = xp->right;
			}
			if (rb_is_black(w->left) && rb_is_black(w->right)) {
				rb_set_color(w, RB_RED);
				x = xp;
				xp = rb_parent(x);
			} else {
				if (rb_is_black(w->right)) {
					rb_set_color(w->left, RB_BLACK);
					rb_set_color(w, RB_RED);
					rotate_right(w, root);
					w = xp->right;
				}
				rb_set_color(w, rb_color(xp));
				rb_set_color(xp, RB_BLACK);
				rb_set_color(w->right, RB_BLACK);
				rotate_left(xp, root);
				x = root->node;
				break;
			}
		} else {
			w = xp->left;
			if (rb_color(w) == RB_RED) {
				rb_set_color(w, RB_BLACK);
				rb_set_color(xp, RB_RED);
				rotate_right(xp, root);
				w = xp->left;
			}
			if (rb_is_black(w->left) && rb_is_black(w->right)) {
				rb_set_color(w, RB_RED);
				x = xp;
				xp = rb_parent(x);
			} else {
				if (rb_is_black(w->left)) {
					rb_set_color(w->right, RB_BLACK);
					rb_set_color(w, RB_RED);
					rotate_left(w, root);
					w = xp->left;
				}
				rb_set_color(w, rb_color(xp));
				rb_set_color(xp, RB_BLACK);
				rb_set_color(w->left, RB_BLACK);
				rotate_right(xp, root);
				x = root->node;
				break;
			}
		}
	}
	if (x)
		rb_set_color(x, RB_BLACK);
}

void rb_erase(struct rb_node *z, struct rb_root *root)
{
	struct rb_node *y = z, *x, *xp;
	int ycolor = rb_color(y);
	if (!z->left) {
		x = z->right;
		xp = rb_parent(z);
		transplant(z, z->right, root);
	} else if (!z->right) {
		x = z->left;
		xp = rb_parent(z);
		transplant(z, z->left, root);
	} else {
		y = z->right;
		while (y->left)
			y = y->left;
		ycolor = rb_color(y);
		x = y->right;
		if (rb_parent(y) == z) {
			xp = y;
		} else {
			xp = rb_parent(y);
			transplant(y, y->right, root);
			y->right = z->right;
			rb_set_parent(y->right, y);
		}
		transplant(z, y, root);
		y->left = z->left;
		rb_set_parent(y->left, y);
		rb_set_color(y, rb_color(z));
	}
	if (ycolor == RB_BLACK)
		erase_fixup(x, xp, root);
}

struct rb_node *rb_next(const struct rb_node *n)
{
	struct rb_node *p;
	if (n->right) {
		n = n->right;
		while (n->left)
			n = n->left;
		return (struct rb_node *)n;
	}
	while ((p = rb_parent(n)) && n == p->right)
		n = p;
	return p;
}

struct rb_node *rb_first(const struct rb_root *root)
{
	struct rb_node *n = root->node;
	if (!n)
		return NULL;
	while (n->left)
		n = n->left;
	return n;
}

void rb_replace_node(struct rb_node *victim, struct rb_node *new, struct rb_root *root)
{
	struct rb_node *p = rb_parent(victim);
	*new = *victim;
	if (victim->left)
		rb_set_parent(victim->left, new);
	if (victim->right)
		rb_set_parent(victim->right, new);
	change_child(victim, new, p, root);
}

/* Black height of the subtree, or -1 if an invariant fails. */
static int check(const struct rb_node *n, const struct rb_node *parent, long *count)
{
	if (!n)
		return 1;
	if (rb_parent(n) != parent)
		return -1;
	if (rb_color(n) == RB_RED && ((n->left && rb_color(n->left) == RB_RED) || (n->right && rb_color(n->right) == RB_RED)))
		return -1;
	(*count)++;
	int l = check(n->left, n, count), r = check(n->right, n, count);
	if (l < 0 || r < 0 || l != r)
		return -1;
	return l + rb_color(n);
}

int rb_check(const struct rb_root *root, long *count)
{
	*count = 0;
	if (root->node && rb_color(root->node) != RB_BLACK)
		return 0;
	return check(root->node, NULL, count) > 0;
}

/* The probe-tree node: struct kprobe (128 bytes, addr at 40) + rb_node. */
struct tkprobe {
	char head[40];
	uintptr_t addr;
	char rest[80];
	struct rb_node rb;
};
_Static_assert(sizeof(struct tkprobe) == 152, "struct kprobe + rb_node");
#define TK(n) ((struct tkprobe *)((char *)(n) - __builtin_offsetof(struct tkprobe, rb)))

static struct rb_root tree;

/* Lower-bound style descent: nodes compared. */
static __attribute__((noinline)) long descend(struct rb_root *root, uintptr_t key, struct rb_node **found)
{
	long v = 0;
	struct rb_node *n = root->node, *best = NULL;
	while (n) {
		uintptr_t k = TK(n)->addr;
		v++;
		if (key < k) {
			best = n;
			n = n->left;
		} else if (key > k) {
			n = n->right;
		} else {
			best = n;
			break;
		}
	}
	*found = best;
	return v;
}

/* Insert by descent; returns nodes compared during the descent. */
static long tree_insert(struct rb_root *root, struct tkprobe *p)
{
	struct rb_node **link = &root->node, *parent = NULL;
	long v = 0;
	while (*link) {
		parent = *link;
		v++;
		link = p->addr < TK(parent)->addr ? &parent->left : &parent->right;
	}
	rb_link_node(&p->rb, parent, link);
	return v;
}

static void verify(const char *what, size_t n)
{
	long c;
	if (!rb_check(&tree, &c) || (size_t)c != n)
		fail("rbtree: invariants broken after %s (%ld nodes, want %zu)", what, c, n);
	uintptr_t prev = 0;
	long k = 0;
	for (struct rb_node *x = rb_first(&tree); x; x = rb_next(x), k++) {
		if (k && TK(x)->addr <= prev)
			fail("rbtree: order broken after %s", what);
		prev = TK(x)->addr;
	}
	if ((size_t)k != n)
		fail("rbtree: in-order walk saw %ld nodes, want %zu", k, n);
}

#define NQ 2048

void bench_rbtree(void)
{
	size_t n = cfg->quick ? 2000 : 20000;
	uint64_t seed = 0x7262747265ull;
	struct tkprobe **kp = (struct tkprobe **)slab_objs(n, 192, &seed);
	const uintptr_t base = 0xffffffff82000000ull, stride = 32;
	for (size_t i = 0; i < n; i++) {
		kp[i]->addr = base + i * stride;
		tree_insert(&tree, kp[i]);
		rb_insert_color(&kp[i]->rb, &tree);
	}
	if (cfg->check)
		verify("build", n);
	uint32_t *pick = xmalloc(NQ * sizeof(*pick));
	for (int i = 0; i < NQ; i++)
		pick[i] = cfg->hot ? (uint32_t)((size_t)(i % 8) * (n / 8) + 3) : (uint32_t)(rnd(&seed) % n);
	int R = reps(), rounds = cfg->quick ? 1 : 8;
	double *s = xmalloc(R * sizeof(*s));
	struct rb_node *f;

	long calls = 0, visits = 0;
	for (int r = 0; r < R; r += clean()) {
		long v = 0;
		double t0 = now_cycles();
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ; i++) {
				v += descend(&tree, kp[pick[i]]->addr + 1, &f);
				sink += (uintptr_t)f;
			}
		s[r] = (now_cycles() - t0) / v;
		visits += v;
		calls += (long)rounds * NQ;
	}
	report("rb_visit", "node", s, R, "nodes=%zu obj=192 rb_node@128 addr@40 depth=%.1f", n, (double)visits / calls);

	static struct rb_root empty;
	TIMED_REPS(s, calls,
		for (int k = 0; k < rounds * 8; k++)
			for (int i = 0; i < NQ; i++, calls++)
				sink += descend(&empty, kp[pick[i]]->addr, &f);
	)
	report("rb_search", "call", s, R, "empty tree");

	TIMED_REPS(s, steps,
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ; i++) {
				struct rb_node *x = &kp[pick[i]]->rb;
				for (int j = 0; j < 4 && x; j++, steps++)
					x = rb_next(x);
				sink += (uintptr_t)x;
			}
	)
	report("rb_step", "step", s, R, "nodes=%zu 4 rb_next per start", n);

	/* Erase and re-insert in batches of distinct nodes (hot: the same 64
	 * neighbours in key order, a small warm subtree; cold: 256 random),
	 * each batch timed whole with the fine clock (less its overhead):
	 * the erases; then the batch's descents alone (after an untimed pass,
	 * so they are as warm as the insert's own); then descent + rb_link_node
	 * + rb_insert_color. Insert rebalancing = the third minus the second. */
	double *se = xmalloc(R * sizeof(*se));
	double ovh = timer_overhead();
	size_t B = cfg->hot ? 64 : 256;
	uint32_t *perm = xmalloc(n * sizeof(*perm));
	for (size_t i = 0; i < n; i++)
		perm[i] = (uint32_t)i;
	shuffle(perm, n, &seed);
	struct tkprobe **batch = xmalloc(B * sizeof(*batch));
	size_t nbatches = cfg->quick ? 4 : 64;
	for (int r = 0; r < R; r++) { /* fine-timed: preempted batches dropped */
		double te = 0, ti = 0;
		long ops = 0;
		for (size_t bi = 0; bi < nbatches; bi++) {
			for (size_t j = 0; j < B; j++)
				batch[j] = kp[cfg->hot ? n / 2 + j : perm[((size_t)r * nbatches * B + bi * B + j) % n]];
			double t0 = now_fine();
			for (size_t j = 0; j < B; j++)
				rb_erase(&batch[j]->rb, &tree);
			double t1 = now_fine();
			for (size_t j = 0; j < B; j++)
				sink += descend(&tree, batch[j]->addr, &f);
			double t2 = now_fine();
			for (size_t j = 0; j < B; j++)
				sink += descend(&tree, batch[j]->addr, &f);
			double t3 = now_fine();
			for (size_t j = 0; j < B; j++) {
				struct tkprobe *p = batch[j];
				struct rb_node **link = &tree.node, *parent = NULL;
				while (*link) {
					parent = *link;
					link = p->addr < TK(parent)->addr ? &parent->left : &parent->right;
				}
				rb_link_node(&p->rb, parent, link);
				rb_insert_color(&p->rb, &tree);
			}
			double t4 = now_fine();
			if (t1 - t0 > FINE_OUTLIER * B / 8 || t4 - t3 > FINE_OUTLIER * B / 8 || t3 - t2 > FINE_OUTLIER * B / 8)
				continue; /* preempted or interrupted: not this work's cost */
			te += t1 - t0 - ovh;
			ti += (t4 - t3) - (t3 - t2);
			ops += (long)B;
		}
		se[r] = ops && te > 0 ? te / ops : 0;
		s[r] = ops && ti > 0 ? ti / ops : 0;
	}
	free(perm);
	free(batch);
	if (cfg->check)
		verify("erase/insert", n);
	report("rb_erase", "op", se, R, "nodes=%zu erase by node pointer, batches of %zu distinct nodes, timer overhead %.0f removed", n, B, ovh);
	report("rb_insert", "op", s, R, "nodes=%zu rb_link_node + rb_insert_color: insert batch minus the same descents, batches of %zu", n, B);

	struct tkprobe *spare = xcalloc(1, sizeof(*spare));
	TIMED_REPS(s, ops,
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ; i++) {
				struct tkprobe *p = kp[pick[i]];
				spare->addr = p->addr;
				rb_replace_node(&p->rb, &spare->rb, &tree);
				rb_replace_node(&spare->rb, &p->rb, &tree);
				ops += 2;
			}
	)
	if (cfg->check)
		verify("replace", n);
	report("rb_replace", "op", s, R, "nodes=%zu", n);
	free(spare);
	free(s);
	free(se);
	free(pick);
}
