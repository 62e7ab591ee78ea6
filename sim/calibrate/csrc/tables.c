/*
 * Family: linear table scans, binary searches and late-init indexes over
 * the kernel's fixed-stride tables, and the list walks next to them.
 *
 *   jump_scan       per struct jump_entry (16 B: s32 code, s32 target, long
 *                   key) visited by __jump_label_text_reserved: init-bit
 *                   test, jump_entry_code and the code <= end compare
 *   static_scan     per struct static_call_site (8 B: s32 addr, s32 key)
 *                   visited by __static_call_text_reserved: init test and
 *                   addr_conflict
 *   bug_scan        per struct bug_entry (12 B with BUGVERBOSE) compared in
 *                   find_bug: bug_addr(bug) == addr
 *   modsym_scan     per Elf64_Sym (24 B) visited by find_kallsyms_symbol
 *   ftrace_rec      per struct dyn_ftrace (16 B) in a record walk with the
 *                   flags test (do_for_each_ftrace_rec, ftrace_check_record)
 *   ftrace_group    per ftrace_page visited by lookup_rec (index, first and
 *                   last ip compared)
 *   ftrace_bsearch  per bsearch step of lookup_rec in one page (32768
 *                   records) through an ftrace_cmp_recs callback
 *   extable_bsearch per bsearch step of search_extable over 4096 relative
 *                   12-byte exception_table_entry, cmp_ex_search callback
 *   idx_{jump,static,bug}_probe  per step of a binary search over an index
 *                   of pointers into the table (slot load, dependent entry
 *                   load, compare), as the series' late-init indexes
 *   idx_blacklist_probe  per step over a sorted array of 16-byte ranges
 *   idx_fill        per entry of a sequential table read storing pointers
 *   idx_sort        per comparison of lib/sort.c's heapsort ordering an
 *                   index by the entries' addresses (cmp through a callback
 *                   loading both entries, swaps included)
 *   blacklist_walk  per struct kprobe_blacklist_entry (48 B, kmalloc-64,
 *                   allocated at boot) of __within_kprobe_blacklist's walk
 *   slot_scan       per slot_used[] byte checked by __get_insn_slot
 *   jump_size       per arch_jump_entry_size from opcode bytes (P3): the
 *                   eb/e9 test, then memcmp with the 2- and 5-byte nops, at
 *                   sites spread over a 16 MB text
 *
 * Table sizes are the synthetic default image's (30k jump entries, 6k
 * static-call sites, 18k bug entries, 1100 blacklist entries, 55k ftrace
 * records). Scans read the whole table in both regimes (see copies_for);
 * searches take 8 keys repeated (hot) or a distinct random key per call
 * (cold).
 */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

#define NQ 4096

/* One copy of each table in both regimes: a scan reads the whole table on
 * every call, so there are no distinct items to pick, and the kernel's
 * tables (48-880 KB) fit L2 as these do. (Set KPSIM_COLD_COPIES to rotate
 * over copies totalling 4 x L2 instead, so every cold scan starts in L3.) */
static size_t copies_for(size_t bytes)
{
	const char *e = getenv("KPSIM_COLD_COPIES");
	if (cfg->hot || !e || !*e || *e == '0')
		return 1;
	size_t c = (4 * cfg->l2 + bytes - 1) / bytes;
	return c < 2 ? 2 : c;
}

struct jump_entry {
	int32_t code, target;
	long key;
};
_Static_assert(sizeof(struct jump_entry) == 16, "jump_entry is 16 bytes");
struct static_call_site {
	int32_t addr, key;
};
_Static_assert(sizeof(struct static_call_site) == 8, "static_call_site is 8 bytes");
struct bug_entry {
	int32_t bug_addr_disp, file_disp;
	uint16_t line, flags;
};
_Static_assert(sizeof(struct bug_entry) == 12, "bug_entry is 12 bytes with BUGVERBOSE");
struct elf64_sym {
	uint32_t st_name;
	unsigned char st_info, st_other;
	uint16_t st_shndx;
	uint64_t st_value, st_size;
};
_Static_assert(sizeof(struct elf64_sym) == 24, "Elf64_Sym is 24 bytes");
struct dyn_ftrace {
	unsigned long ip, flags;
};
struct exception_table_entry {
	int32_t insn, fixup, data;
};
struct list_head {
	struct list_head *next, *prev;
};
struct kprobe_blacklist_entry {
	struct list_head list;
	unsigned long start_addr, end_addr;
	char pad[16]; /* 48 bytes on 6.1.192 (kprobes.md, corrected) */
};

static inline uintptr_t jump_entry_code(const struct jump_entry *e) { return (uintptr_t)&e->code + e->code; }
static inline uintptr_t static_call_addr(const struct static_call_site *s) { return (uintptr_t)&s->addr + s->addr; }
static inline uintptr_t bug_addr(const struct bug_entry *b) { return (uintptr_t)&b->bug_addr_disp + b->bug_addr_disp; }
static inline uintptr_t ex_insn(const struct exception_table_entry *e) { return (uintptr_t)&e->insn + e->insn; }

static __attribute__((noinline)) int jump_reserved(const struct jump_entry *it, const struct jump_entry *stop, uintptr_t start, uintptr_t end)
{
	for (; it < stop; it++) {
		if (it->key & 2) /* jump_entry_is_init */
			continue;
		uintptr_t c = jump_entry_code(it);
		if (c <= end && c + 5 > start)
			return 1;
	}
	return 0;
}

static __attribute__((noinline)) int static_reserved(const struct static_call_site *it, const struct static_call_site *stop, uintptr_t start, uintptr_t end)
{
	for (; it < stop; it++) {
		if (it->key & 1) /* static_call_is_init */
			continue;
		uintptr_t a = static_call_addr(it);
		if (a <= end && a + 5 > start)
			return 1;
	}
	return 0;
}

static __attribute__((noinline)) const struct bug_entry *find_bug(const struct bug_entry *b, const struct bug_entry *stop, uintptr_t addr)
{
	for (; b < stop; b++)
		if (bug_addr(b) == addr)
			return b;
	return NULL;
}

static __attribute__((noinline)) uint64_t find_sym(const struct elf64_sym *s, size_t n, uint64_t addr)
{
	uint64_t best = 0;
	for (size_t i = 1; i < n; i++) {
		if (s[i].st_shndx == 0)
			continue;
		if (s[i].st_value <= addr && s[i].st_value > best)
			best = s[i].st_value;
	}
	return best;
}

/* __get_insn_slot's scan for a SLOT_CLEAN byte (an early-exit loop gcc
 * does not vectorise, as in the kernel). */
static __attribute__((noinline)) size_t first_clean(const unsigned char *u, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (u[i] == 0)
			return i;
	return n;
}

static __attribute__((noinline)) unsigned long rec_walk(const struct dyn_ftrace *r, size_t n)
{
	unsigned long acc = 0;
	for (size_t i = 0; i < n; i++) {
		if (r[i].flags & (1ul << 31)) /* skip_record: FTRACE_FL_DISABLED */
			continue;
		acc += r[i].flags & 0xff;
	}
	return acc;
}

/* A time-consuming scan: per rep, walk every copy once (cold) or the one
 * copy as many times (hot). Returns cycles per entry. */
#define SCAN_BENCH(NAME, UNIT, TYPE, N, INIT, CALL, PARAMS)                            \
	do {                                                                           \
		size_t n_ = (N), bytes_ = n_ * sizeof(TYPE);                           \
		size_t nc_ = copies_for(bytes_);                                       \
		size_t passes_ = cfg->hot ? (cfg->quick ? 4 : 32) : nc_ * (cfg->quick ? 1 : 2); \
		size_t sp_ = (bytes_ + 63) & ~(size_t)63;                              \
		char *ar_ = page_alloc(nc_ * sp_);                                     \
		TYPE **cp_ = xmalloc(nc_ * sizeof(*cp_));                              \
		for (size_t c_ = 0; c_ < nc_; c_++) {                                  \
			TYPE *t = (TYPE *)(ar_ + c_ * sp_);                            \
			for (size_t i = 0; i < n_; i++) {                              \
				INIT;                                                  \
			}                                                              \
			cp_[c_] = t;                                                   \
		}                                                                      \
		for (int r = 0; r < R; r += clean()) {                                 \
			double t0 = now_cycles();                                      \
			for (size_t p_ = 0; p_ < passes_; p_++) {                      \
				TYPE *t = cp_[p_ % nc_];                               \
				CALL;                                                  \
			}                                                              \
			s[r] = (now_cycles() - t0) / ((double)passes_ * n_);           \
		}                                                                      \
		report(NAME, UNIT, s, R, "n=%zu stride=%zu copies=%zu " PARAMS, n_, sizeof(TYPE), nc_); \
		free(ar_);                                                             \
		free(cp_);                                                             \
	} while (0)

static int cmp_ex(const void *key, const void *elt)
{
	uintptr_t k = *(const uintptr_t *)key, a = ex_insn(elt);
	return k > a ? 1 : k < a ? -1 : 0;
}
static int cmp_rec(const void *key, const void *elt)
{
	uintptr_t k = *(const uintptr_t *)key;
	const struct dyn_ftrace *r = elt;
	return k < r->ip ? -1 : k >= r->ip + 5 ? 1 : 0;
}

/* lib/bsearch.c, counting steps, cmp through a pointer the compiler cannot
 * see through (as the kernel's indirect call). */
static int (*volatile cmp_ex_p)(const void *, const void *) = cmp_ex;
static int (*volatile cmp_rec_p)(const void *, const void *) = cmp_rec;
static __attribute__((noinline)) const void *bsearch_count(const void *key, const void *base, size_t num, size_t size,
							  int (*cmp)(const void *, const void *), long *steps)
{
	const char *pivot;
	while (num > 0) {
		pivot = (const char *)base + (num >> 1) * size;
		(*steps)++;
		int r = cmp(key, pivot);
		if (r == 0)
			return pivot;
		if (r > 0) {
			base = pivot + size;
			num--;
		}
		num >>= 1;
	}
	return NULL;
}

/* Lower bound over an index of pointers to entries keyed by key(). */
#define IDX_SEARCH(IDX, N, KEYEXPR, Q, STEPS)                          \
	({                                                             \
		size_t lo_ = 0, hi_ = (N);                             \
		while (lo_ < hi_) {                                    \
			size_t mid_ = lo_ + (hi_ - lo_) / 2;           \
			(STEPS)++;                                     \
			const void *e = (IDX)[mid_];                   \
			if ((KEYEXPR) < (Q))                           \
				lo_ = mid_ + 1;                        \
			else                                           \
				hi_ = mid_;                            \
		}                                                      \
		lo_;                                                   \
	})

static long sort_cmps;
static int cmp_jump_ptr(const void *a, const void *b)
{
	uintptr_t x = jump_entry_code(*(const struct jump_entry *const *)a);
	uintptr_t y = jump_entry_code(*(const struct jump_entry *const *)b);
	sort_cmps++;
	return x < y ? -1 : x > y;
}
static int (*volatile cmp_jump_p)(const void *, const void *) = cmp_jump_ptr;

/* lib/sort.c's heapsort of 8-byte elements (bottom-up sift-down). */
static void heapsort_ptrs(void **base, size_t num, int (*cmp)(const void *, const void *))
{
	size_t n = num, a = num / 2;
	if (num < 2)
		return;
	for (;;) {
		size_t b, c, d;
		if (a)
			a--;
		else if (n -= 1) {
			void *t = base[0];
			base[0] = base[n];
			base[n] = t;
		} else
			break;
		for (b = a; c = 2 * b + 1, (d = c + 1) < n;)
			b = cmp(&base[c], &base[d]) >= 0 ? c : d;
		if (d == n)
			b = c;
		while (b != a && cmp(&base[a], &base[b]) >= 0)
			b = (b - 1) / 2;
		c = b;
		while (b != a) {
			b = (b - 1) / 2;
			void *t = base[b];
			base[b] = base[c];
			base[c] = t;
		}
	}
}

static int cmp_uptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

static uintptr_t static_call_addr_of(const void *p) { return static_call_addr(p); }
static uintptr_t bug_addr_of(const void *p) { return bug_addr(p); }

/* sorted_index returns pointers to the n entries of tab (sz bytes each),
 * sorted by their address addr_of (a late-init index, built untimed). */
static const void **sorted_index(void *tab, size_t n, size_t sz, uintptr_t (*addr_of)(const void *))
{
	struct pair {
		uintptr_t a;
		const void *p;
	} *pr = xmalloc(n * sizeof(*pr));
	for (size_t i = 0; i < n; i++) {
		pr[i].p = (const char *)tab + i * sz;
		pr[i].a = addr_of(pr[i].p);
	}
	qsort(pr, n, sizeof(*pr), cmp_uptr);
	const void **idx = xmalloc(n * sizeof(*idx));
	for (size_t i = 0; i < n; i++)
		idx[i] = pr[i].p;
	free(pr);
	return idx;
}

/* IDX_PROBE times one binary-search step (IDX_SEARCH, ADDR inlined) over
 * the sorted index IDX of N TYPE entries, for NQ keys ADDR(entry) - BACK
 * (hot: 8 entries spread over the table; cold: random ones), and reports
 * it per step as NAME. Uses bench_tables' locals. */
#define IDX_PROBE(NAME, IDX, N, TYPE, ADDR, BACK)                                                      \
	do {                                                                                           \
		uintptr_t *keys = xmalloc(NQ * sizeof(*keys));                                         \
		for (int i = 0; i < NQ; i++)                                                           \
			keys[i] = ADDR((IDX)[cfg->hot ? (i % 8) * ((N) / 8) + 1 : rnd(&seed) % (N)]) - (BACK); \
		TIMED_REPS(s, steps,                                                                   \
			for (int k = 0; k < (q ? 1 : 8); k++)                                          \
				for (int i = 0; i < NQ; i++)                                           \
					acc += IDX_SEARCH(IDX, N, ADDR((const TYPE *)e), keys[i], steps); \
		)                                                                                      \
		report(NAME, "step", s, R, "n=%zu (table %zu KB)", (size_t)(N), (size_t)(N) * sizeof(TYPE) / 1024); \
		free(keys);                                                                            \
	} while (0)

/* SORTED_IDX_PROBE: IDX_PROBE over a table of N TYPE entries whose
 * relative field DISP points far into the text, indexed by sorted_index
 * (ADDR##_of is ADDR for it). */
#define SORTED_IDX_PROBE(NAME, TYPE, N, DISP, ADDR, BACK)                                    \
	do {                                                                                   \
		TYPE *tab = page_alloc((N) * sizeof(*tab));                                    \
		for (size_t i = 0; i < (N); i++)                                               \
			tab[i].DISP = (int32_t)(far + rnd(&seed) % far);                       \
		const TYPE **idx = (const TYPE **)sorted_index(tab, N, sizeof(*tab), ADDR##_of); \
		IDX_PROBE(NAME, idx, N, TYPE, ADDR, BACK);                                     \
		free(idx);                                                                     \
		free(tab);                                                                     \
	} while (0)

void bench_tables(void)
{
	int R = reps();
	double *s = xmalloc(R * sizeof(*s));
	uint64_t seed = 0x7461626c6573ull;
	int q = cfg->quick;
	size_t nj = q ? 3000 : 30000, ns = q ? 600 : 6000, nb = q ? 1800 : 18000, nr = q ? 5500 : 55000;
	/* Codes lie 16 MB above each table, so a query below them conflicts
	 * with nothing and every entry is visited. */
	const uintptr_t far = 16u << 20;
	volatile uintptr_t qlo = 0; /* start/end of a query below everything */
	uint64_t acc = 0;

	SCAN_BENCH("jump_scan", "entry", struct jump_entry, nj,
		   (t[i].code = (int32_t)(far + (rnd(&seed) % far)), t[i].target = 0, t[i].key = (long)((rnd(&seed) & ~7ull) | ((i % 50) == 0 ? 2 : 0))),
		   acc += jump_reserved(t, t + n_, qlo, qlo + 1), "init=2%%");
	SCAN_BENCH("static_scan", "site", struct static_call_site, ns,
		   (t[i].addr = (int32_t)(far + (rnd(&seed) % far)), t[i].key = (int32_t)(rnd(&seed) & ~3u) | ((i % 50) == 0)),
		   acc += static_reserved(t, t + n_, qlo, qlo + 1), "init=2%%");
	SCAN_BENCH("bug_scan", "entry", struct bug_entry, nb,
		   (t[i].bug_addr_disp = (int32_t)(far + (rnd(&seed) % far)), t[i].file_disp = 0, t[i].line = (uint16_t)i, t[i].flags = 0),
		   acc += (uintptr_t)find_bug(t, t + n_, qlo), "miss");
	SCAN_BENCH("modsym_scan", "sym", struct elf64_sym, (size_t)(q ? 300 : 3000),
		   (t[i].st_shndx = (uint16_t)(i % 9 ? 1 : 0), t[i].st_value = rnd(&seed) >> 16),
		   acc += find_sym(t, n_, 1ull << 40), "module symtab");
	SCAN_BENCH("ftrace_rec", "rec", struct dyn_ftrace, nr,
		   (t[i].ip = 0xffffffff81000000ul + 64 * i, t[i].flags = (i % 97) ? 1 : (1ul << 31)),
		   acc += rec_walk(t, n_), "");
	SCAN_BENCH("slot_scan", "byte", unsigned char, (size_t)273,
		   (t[i] = (unsigned char)(i < 272 ? 1 : 0)),
		   acc += first_clean(t, n_), "slot_used[] of one kprobe_insn_page, byte loop");

	/* ftrace_group: the default image's groups, a miss above every one. */
	{
		struct ftrace_page {
			struct ftrace_page *next;
			struct dyn_ftrace *records;
			int index, order;
		};
		size_t sizes[4] = {32768, 16384, 4096, 1752};
		struct dyn_ftrace *recs = page_alloc(sizeof(*recs) * 55000);
		for (size_t i = 0; i < 55000; i++)
			recs[i].ip = 0xffffffff81000000ul + 64 * i;
		struct ftrace_page *pg = NULL, **tail = &pg;
		for (size_t g = 0, off = 0; g < 4; off += sizes[g], g++) {
			struct ftrace_page *p = xcalloc(1, sizeof(*p));
			p->records = recs + off;
			p->index = (int)sizes[g];
			*tail = p;
			tail = &p->next;
		}
		uintptr_t key = recs[54999].ip + 100;
		TIMED_REPS(s, visits,
			for (int i = 0; i < NQ * 8; i++)
				for (struct ftrace_page *p = pg; p; p = p->next) {
					visits++;
					if (p->index == 0 || key < p->records[0].ip || key >= p->records[p->index - 1].ip + 5)
						continue;
					acc++;
				}
		)
		report("ftrace_group", "group", s, R, "groups=4 (32768/16384/4096/1752)");

		/* ftrace_bsearch in the 32768-record group. */
		uintptr_t *keys = xmalloc(NQ * sizeof(*keys));
		for (int i = 0; i < NQ; i++)
			keys[i] = recs[cfg->hot ? (uint64_t)(i % 8) * 4000 + 7 : rnd(&seed) % 32768].ip + 1;
		TIMED_REPS(s, steps,
			for (int k = 0; k < (q ? 1 : 8); k++)
				for (int i = 0; i < NQ; i++)
					acc += (uintptr_t)bsearch_count(&keys[i], recs, 32768, sizeof(*recs), cmp_rec_p, &steps);
		)
		report("ftrace_bsearch", "step", s, R, "records=32768 (512 KB) cmp callback");
		free(keys);
		while (pg) {
			struct ftrace_page *n = pg->next;
			free(pg);
			pg = n;
		}
		free(recs);
	}

	/* extable_bsearch: 4096 sorted relative entries. */
	{
		size_t ne = 4096;
		struct exception_table_entry *ex = page_alloc(ne * sizeof(*ex));
		uintptr_t base = (uintptr_t)ex + far;
		for (size_t i = 0; i < ne; i++)
			ex[i].insn = (int32_t)(base + i * 512 - (uintptr_t)&ex[i].insn);
		uintptr_t *keys = xmalloc(NQ * sizeof(*keys));
		for (int i = 0; i < NQ; i++)
			keys[i] = ex_insn(&ex[cfg->hot ? (uint64_t)(i % 8) * 500 + 3 : rnd(&seed) % ne]) + 1; /* misses */
		TIMED_REPS(s, steps,
			for (int k = 0; k < (q ? 1 : 8); k++)
				for (int i = 0; i < NQ; i++)
					acc += (uintptr_t)bsearch_count(&keys[i], ex, ne, sizeof(*ex), cmp_ex_p, &steps);
		)
		report("extable_bsearch", "step", s, R, "entries=4096 (48 KB) cmp callback");
		free(keys);
		free(ex);
	}

	/* Late-init indexes: pointer arrays sorted by the entries' address. */
	{
		struct jump_entry *jt = page_alloc(nj * sizeof(*jt));
		const struct jump_entry **ji = xmalloc(nj * sizeof(*ji));
		for (size_t i = 0; i < nj; i++) {
			jt[i].code = (int32_t)(far + rnd(&seed) % far);
			jt[i].key = (long)(rnd(&seed) & ~7ull);
		}
		/* idx_fill: sequential read of the table, store of pointers. */
		for (int r = 0; r < R; r += clean()) {
			int passes = q ? 2 : 16;
			double t0 = now_cycles();
			for (int p = 0; p < passes; p++) {
				size_t k = 0;
				for (size_t i = 0; i < nj; i++)
					if (!(jt[i].key & 2))
						ji[k++] = &jt[i];
				acc += k;
			}
			s[r] = (now_cycles() - t0) / ((double)passes * nj);
		}
		report("idx_fill", "entry", s, R, "n=%zu jump_entry -> pointer index", nj);
		/* idx_sort: the kernel's sort() of the index, from table order. */
		for (int r = 0; r < R; r += clean()) {
			for (size_t i = 0; i < nj; i++)
				ji[i] = &jt[i];
			sort_cmps = 0;
			double t0 = now_cycles();
			heapsort_ptrs((void **)ji, nj, cmp_jump_p);
			s[r] = (now_cycles() - t0) / sort_cmps;
		}
		for (size_t i = 1; cfg->check && i < nj; i++)
			if (jump_entry_code(ji[i - 1]) > jump_entry_code(ji[i]))
				fail("tables: heapsort left the index unsorted at %zu", i);
		report("idx_sort", "cmp", s, R, "n=%zu heapsort, cmp callback, swaps included (regime-independent: one-shot at late init)", nj);

		IDX_PROBE("idx_jump_probe", ji, nj, struct jump_entry, jump_entry_code, 4);
		free(ji);
		free(jt);
	}
	SORTED_IDX_PROBE("idx_static_probe", struct static_call_site, ns, addr, static_call_addr, 4);
	SORTED_IDX_PROBE("idx_bug_probe", struct bug_entry, nb, bug_addr_disp, bug_addr, 0);
	/* The blacklist index: a sorted array of [start, end) ranges. */
	{
		size_t nl = q ? 110 : 1100;
		struct range {
			uintptr_t start, end;
		} *rg = xmalloc(nl * sizeof(*rg));
		for (size_t i = 0; i < nl; i++)
			rg[i].start = 0xffffffff81000000ul + i * 4096, rg[i].end = rg[i].start + 200;
		uintptr_t *keys = xmalloc(NQ * sizeof(*keys));
		for (int i = 0; i < NQ; i++)
			keys[i] = rg[cfg->hot ? (i % 8) * (nl / 8) : rnd(&seed) % nl].start + 300;
		TIMED_REPS(s, steps,
			for (int k = 0; k < (q ? 1 : 16); k++)
				for (int i = 0; i < NQ; i++) {
					size_t lo = 0, hi = nl;
					while (lo < hi) {
						size_t mid = lo + (hi - lo) / 2;
						steps++;
						if (rg[mid].start <= keys[i])
							lo = mid + 1;
						else
							hi = mid;
					}
					acc += lo && keys[i] < rg[lo - 1].end;
				}
		)
		report("idx_blacklist_probe", "step", s, R, "n=%zu ranges of 16 bytes", nl);
		free(keys);
		free(rg);

		/* blacklist_walk: the list as kmalloc-64 hands it out at boot. */
		size_t nc = copies_for(nl * 64);
		struct kprobe_blacklist_entry **heads = xmalloc(nc * sizeof(*heads));
		for (size_t c = 0; c < nc; c++) {
			struct kprobe_blacklist_entry **e = (struct kprobe_blacklist_entry **)slab_objs(nl, 64, &seed);
			for (size_t i = 0; i < nl; i++) {
				e[i]->start_addr = 0xffffffff81000000ul + i * 4096;
				e[i]->end_addr = e[i]->start_addr + 200;
				e[i]->list.next = i + 1 < nl ? &e[i + 1]->list : NULL;
			}
			heads[c] = e[0];
			free(e);
		}
		size_t passes = cfg->hot ? (q ? 8 : 256) : nc * (q ? 1 : 4);
		TIMED_REPS(s, visits,
			for (size_t p = 0; p < passes; p++)
				for (struct list_head *l = &heads[p % nc]->list; l; l = l->next) {
					struct kprobe_blacklist_entry *ent = (struct kprobe_blacklist_entry *)l;
					visits++;
					if (qlo >= ent->start_addr && qlo < ent->end_addr)
						break;
				}
		)
		report("blacklist_walk", "node", s, R, "n=%zu obj=48 in kmalloc-64, copies=%zu", nl, nc);
		free(heads); /* the slab arenas stay: freed at exit */
	}

	/* jump_size: sites over a 16 MB text. */
	{
		size_t tsz = q ? (1u << 20) : (16u << 20), nsite = 30000;
		unsigned char *text = page_alloc(tsz);
		static const unsigned char nop2[2] = {0x66, 0x90}, nop5[5] = {0x0f, 0x1f, 0x44, 0x00, 0x00};
		uintptr_t *site = xmalloc(nsite * sizeof(*site));
		for (size_t i = 0; i < nsite; i++) {
			size_t off = (rnd(&seed) % (tsz - 8));
			unsigned k = (unsigned)(rnd(&seed) % 4);
			if (k == 0)
				memcpy(text + off, nop5, 5);
			else if (k == 1)
				memcpy(text + off, nop2, 2);
			else if (k == 2)
				text[off] = 0xe9;
			else
				text[off] = 0xeb;
			site[i] = off;
		}
		int rounds = q ? 1 : 8;
		uint32_t *pick = xmalloc((size_t)rounds * NQ * sizeof(*pick));
		for (int i = 0; i < rounds * NQ; i++)
			pick[i] = (uint32_t)(cfg->hot ? (uint64_t)(i % 8) * 1000 : rnd(&seed) % nsite);
		TIMED_REPS(s, calls,
			for (int i = 0; i < rounds * NQ; i++, calls++) {
					const unsigned char *c = text + site[pick[i]];
					int sz;
					if (c[0] == 0xeb)
						sz = 2;
					else if (c[0] == 0xe9)
						sz = 5;
					else if (!memcmp(c, nop2, 2))
						sz = 2;
					else if (!memcmp(c, nop5, 5))
						sz = 5;
					else
						sz = 0;
					acc += (unsigned)sz;
				}
		)
		report("jump_size", "call", s, R, "sites=%zu text=%zu MB", nsite, tsz >> 20);
		free(pick);
		free(site);
		free(text);
	}
	sink += acc;
	free(s);
}
