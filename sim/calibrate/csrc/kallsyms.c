/*
 * Family: the compressed kallsyms tables (kernel/kallsyms.c on 6.1).
 *
 * The tables are kpsim's own build of the symbol list (kallsyms/ktab,
 * byte-identical to scripts/kallsyms), written by kpsim calibrate into
 * ksdir: names.bin (kallsyms_names), markers.bin (kallsyms_markers, u32),
 * token_table.bin, token_index.bin (u16 x 256), seqs.bin
 * (kallsyms_seqs_of_names, 3 bytes each), offsets.bin (kallsyms_offsets,
 * s32) and meta.txt ("num_syms relative_base absolute_percpu").
 *
 *   ks_hop         cycles per record skipped by get_symbol_offset's walk
 *                  from a marker
 *   ks_tok         cycles per token decoded (kallsyms_token_index load and
 *                  the token string walk), no store
 *   ks_chr_out     cycles per character stored by kallsyms_expand_symbol
 *                  beyond ks_tok's decode (same records, both timed)
 *   ks_chr_cmp     cycles per character compared by strcmp of neighbouring
 *                  names in name order (long shared prefixes)
 *   ks_ld3         cycles per get_symbol_seq (3 byte loads and shifts)
 *   ks_ld4         cycles per u32 load at a random index of a 4*N table
 *   ks_addr        cycles per kallsyms_sym_address at a random index
 *   ks_addr_probe  cycles per step of get_symbol_pos's binary search
 *   ks_alias_step  cycles per kallsyms_sym_address of the next entry
 *   ks_visit       cycles per callback call of kallsyms_on_each_symbol
 *                  (indirect call, cond_resched's flag test)
 *   ks_name_probe  cycles per record expanded and compared with a name
 *   ks_stream_tok  cycles per token decoded by kallsyms_on_each_symbol's
 *                  whole-table walk: every record in table order, the
 *                  offset carried from one record to the next, no store
 *                  (the full expansion per record is in the params)
 *
 * hot: 8 records, names or addresses repeated (test_kallsyms_perf's
 * loop); cold: a distinct random one per call over the whole table.
 * ks_stream_tok is the exception: a walk of the whole table in order is
 * one access pattern, a stream (the next record's bytes are the next
 * bytes read), whatever the regime, so it runs the same in both.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KSYM_NAME_LEN 512

static uint8_t *names;
static uint32_t *markers;
static uint8_t *token_table;
static uint16_t *token_index;
static uint8_t *seqs;
static int32_t *offsets;
static size_t num_syms, names_len;
static uint64_t relative_base;
static int absolute_percpu;

static void *load(const char *name, size_t *len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", cfg->ksdir, name);
	FILE *f = fopen(path, "rb");
	if (!f)
		fail("kallsyms: cannot open %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	void *p = xmalloc((size_t)n + 16);
	if (n && fread(p, 1, (size_t)n, f) != (size_t)n)
		fail("kallsyms: short read of %s", path);
	fclose(f);
	if (len)
		*len = (size_t)n;
	return p;
}

static inline unsigned get_symbol_seq(size_t i)
{
	return (unsigned)seqs[3 * i] << 16 | (unsigned)seqs[3 * i + 1] << 8 | seqs[3 * i + 2];
}

static inline uint64_t sym_address(size_t i)
{
	int32_t off = offsets[i];
	if (!absolute_percpu)
		return relative_base + (uint32_t)off;
	if (off >= 0)
		return (uint64_t)off;
	return relative_base - 1 - (uint64_t)(int64_t)off;
}

/* The record header: length, one byte or two. Returns the token count and
 * advances *p past the header. */
static inline unsigned rec_len(size_t *p)
{
	unsigned l = names[*p];
	(*p)++;
	if (l & 0x80) {
		l = (l & 0x7F) | (unsigned)names[*p] << 7;
		(*p)++;
	}
	return l;
}

static __attribute__((noinline)) size_t get_symbol_offset(size_t pos)
{
	size_t p = markers[pos >> 8];
	for (size_t i = 0; i < (pos & 0xFF); i++) {
		unsigned l = names[p];
		if (l & 0x80)
			l = ((l & 0x7F) | (unsigned)names[p + 1] << 7) + 1;
		p += l + 1;
	}
	return p;
}

/* Decode the tokens of the record at off without storing: token count. */
static __attribute__((noinline)) unsigned decode_only(size_t off, uint64_t *acc)
{
	unsigned l = rec_len(&off);
	uint64_t a = 0;
	for (unsigned k = 0; k < l; k++)
		for (const uint8_t *t = &token_table[token_index[names[off + k]]]; *t; t++)
			a += *t;
	*acc += a;
	return l;
}

/* kallsyms_expand_symbol's loop: chars stored (type char skipped). */
static __attribute__((noinline)) unsigned expand(size_t off, char *res, size_t maxlen)
{
	unsigned l = rec_len(&off), out = 0;
	int skipped = 0;
	const uint8_t *d = &names[off];
	while (l) {
		const uint8_t *t = &token_table[token_index[*d]];
		d++;
		l--;
		while (*t) {
			if (skipped) {
				if (maxlen <= 1)
					goto tail;
				*res++ = (char)*t;
				maxlen--;
				out++;
			} else {
				skipped = 1;
			}
			t++;
		}
	}
tail:
	if (maxlen)
		*res = 0;
	return out;
}

/* kallsyms_expand_symbol(off, result, maxlen) as the kernel has it: the
 * record at off expanded into result (type char skipped), and the offset
 * of the next record returned; *chars gets the characters stored. */
static __attribute__((noinline)) size_t expand_symbol(size_t off, char *result, size_t maxlen, unsigned *chars)
{
	const uint8_t *data = &names[off];
	unsigned len = *data, out = 0;
	int skipped_first = 0;
	data++;
	off++;
	if (len & 0x80) {
		len = (len & 0x7F) | (unsigned)*data << 7;
		data++;
		off++;
	}
	off += len;
	while (len) {
		const uint8_t *tptr = &token_table[token_index[*data]];
		data++;
		len--;
		while (*tptr) {
			if (skipped_first) {
				if (maxlen <= 1)
					goto tail;
				*result++ = (char)*tptr;
				maxlen--;
				out++;
			} else {
				skipped_first = 1;
			}
			tptr++;
		}
	}
tail:
	if (maxlen)
		*result = 0;
	*chars = out;
	return off;
}

/* The same record walk decoding the tokens without storing: the offset of
 * the next record; *toks gets the record's token count. */
static __attribute__((noinline)) size_t decode_symbol(size_t off, uint64_t *acc, unsigned *toks)
{
	const uint8_t *data = &names[off];
	unsigned len = *data;
	uint64_t a = 0;
	data++;
	off++;
	if (len & 0x80) {
		len = (len & 0x7F) | (unsigned)*data << 7;
		data++;
		off++;
	}
	off += len;
	*toks = len;
	while (len) {
		for (const uint8_t *t = &token_table[token_index[*data]]; *t; t++)
			a += *t;
		data++;
		len--;
	}
	*acc += a;
	return off;
}

/* strcmp, counting characters compared (as kpsim's kallsyms.chr_cmp). */
static __attribute__((noinline)) long strcmp_count(const char *a, const char *b, int *res)
{
	long n = 0;
	for (;;) {
		unsigned char x = (unsigned char)*a++, y = (unsigned char)*b++;
		n++;
		if (x != y) {
			*res = x < y ? -1 : 1;
			return n;
		}
		if (!x) {
			*res = 0;
			return n;
		}
	}
}

static volatile int need_resched_flag;
static int visit_cb(void *data, const char *name, uint64_t addr)
{
	*(uint64_t *)data += addr + (unsigned char)name[0];
	return 0;
}
static int (*volatile visit_fn)(void *, const char *, uint64_t) = visit_cb;

#define NQ 4096

void bench_kallsyms(void)
{
	if (!cfg->ksdir)
		fail("kallsyms: ksdir= is required");
	size_t l;
	names = load("names.bin", &names_len);
	markers = load("markers.bin", NULL);
	token_table = load("token_table.bin", NULL);
	token_index = load("token_index.bin", &l);
	if (l != 512)
		fail("kallsyms: token_index.bin has %zu bytes, want 512", l);
	seqs = load("seqs.bin", NULL);
	offsets = load("offsets.bin", NULL);
	{
		char path[4096];
		snprintf(path, sizeof(path), "%s/meta.txt", cfg->ksdir);
		FILE *f = fopen(path, "r");
		unsigned long long rb;
		if (!f || fscanf(f, "%zu %llu %d", &num_syms, &rb, &absolute_percpu) != 3)
			fail("kallsyms: bad %s", path);
		relative_base = rb;
		fclose(f);
	}
	if (num_syms < 16)
		fail("kallsyms: table too small (%zu symbols)", num_syms);
	size_t *offs = xmalloc(num_syms * sizeof(*offs));
	for (size_t i = 0, p = 0; i < num_syms; i++) {
		offs[i] = p;
		size_t q = p;
		unsigned rl = rec_len(&q);
		p = q + rl;
		if (p > names_len)
			fail("kallsyms: names.bin truncated at record %zu", i);
	}
	if (cfg->check)
		for (size_t i = 0; i < num_syms; i += 97)
			if (get_symbol_offset(i) != offs[i])
				fail("kallsyms: get_symbol_offset(%zu) disagrees with the record walk", i);

	uint64_t seed = 0x6b616c6c73796dull;
	uint32_t *pick = xmalloc(NQ * sizeof(*pick));
	for (int i = 0; i < NQ; i++)
		pick[i] = cfg->hot ? (uint32_t)((size_t)(i % 8) * (num_syms / 8) + 5) : (uint32_t)(rnd(&seed) % num_syms);
	int R = reps(), rounds = cfg->quick ? 1 : 8;
	double *s = xmalloc(R * sizeof(*s)), *s2 = xmalloc(R * sizeof(*s2));
	uint64_t acc = 0;
	char buf[KSYM_NAME_LEN];

	TIMED_REPS(s, hops,
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ; i++) {
				acc += get_symbol_offset(pick[i]);
				hops += pick[i] & 0xFF;
			}
	)
	report("ks_hop", "hop", s, R, "syms=%zu names=%zu", num_syms, names_len);

	/* Decode and expand the same records, after an untimed pass, so both
	 * loops see the same cache state and the difference is the stores. */
	long chars_per_pass = 0, toks_per_pass = 0;
	for (int i = 0; i < NQ; i++) {
		chars_per_pass += expand(offs[pick[i]], buf, sizeof(buf));
		decode_only(offs[pick[i]], &acc);
	}
	for (int r = 0; r < R; r += clean()) {
		long toks = 0;
		double t0 = now_cycles();
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ; i++)
				toks += decode_only(offs[pick[i]], &acc);
		double t1 = now_cycles();
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ; i++)
				acc += expand(offs[pick[i]], buf, sizeof(buf));
		double t2 = now_cycles();
		toks_per_pass = toks / rounds;
		s[r] = (t1 - t0) / toks;
		s2[r] = ((t2 - t1) - (t1 - t0)) / ((double)chars_per_pass * rounds);
		if (s2[r] < 0)
			s2[r] = 0;
	}
	report("ks_tok", "token", s, R, "syms=%zu chars/token=%.2f", num_syms, (double)chars_per_pass / toks_per_pass);
	if (cfg->hot)
		report("ks_chr_out", "char", s2, R, "expand minus decode over the same records");
	else {
		/* The stores go to the on-stack name buffer, in L1 in either
		 * regime; cold records would only bury them in miss noise. */
		for (int r = 0; r < R; r += clean()) {
			long chars = 0;
			double t0 = now_cycles();
			for (int k = 0; k < rounds * 64; k++)
				for (int i = 0; i < 8; i++)
					decode_only(offs[pick[i * 8]], &acc);
			double t1 = now_cycles();
			for (int k = 0; k < rounds * 64; k++)
				for (int i = 0; i < 8; i++)
					chars += expand(offs[pick[i * 8]], buf, sizeof(buf));
			double t2 = now_cycles();
			s2[r] = ((t2 - t1) - (t1 - t0)) / chars;
			if (s2[r] < 0)
				s2[r] = 0;
		}
		report("ks_chr_out", "char", s2, R, "expand minus decode over 8 warm records (the stores hit L1 in both regimes)");
	}

	/* Names in name order, for strcmp of neighbours. */
	char **nm = xmalloc(num_syms * sizeof(*nm));
	for (size_t i = 0; i < num_syms; i++) {
		expand(offs[i], buf, sizeof(buf));
		nm[i] = strdup(buf);
		if (!nm[i])
			fail("out of memory");
	}
	for (int r = 0; r < R; r += clean()) {
		long chars = 0;
		int res;
		double t0 = now_cycles();
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ; i++) {
				size_t j = pick[i] % (num_syms - 1);
				chars += strcmp_count(nm[get_symbol_seq(j)], nm[get_symbol_seq(j + 1)], &res);
				acc += (uint64_t)res;
			}
		s[r] = (now_cycles() - t0) / chars;
	}
	report("ks_chr_cmp", "char", s, R, "neighbours in name order (get_symbol_seq included, ~2 per pair)");

	TIMED_REPS_OF(s, (double)rounds * 4 * NQ,
		for (int k = 0; k < rounds * 4; k++)
			for (int i = 0; i < NQ; i++)
				acc += get_symbol_seq(pick[i]);
	)
	report("ks_ld3", "load", s, R, "syms=%zu table=%zu bytes", num_syms, 3 * num_syms);

	uint32_t *t32 = xmalloc(num_syms * sizeof(*t32));
	for (size_t i = 0; i < num_syms; i++)
		t32[i] = (uint32_t)offs[i];
	TIMED_REPS_OF(s, (double)rounds * 4 * NQ,
		for (int k = 0; k < rounds * 4; k++)
			for (int i = 0; i < NQ; i++)
				acc += t32[pick[i]];
	)
	report("ks_ld4", "load", s, R, "table=%zu bytes", 4 * num_syms);

	TIMED_REPS_OF(s, (double)rounds * 4 * NQ,
		for (int k = 0; k < rounds * 4; k++)
			for (int i = 0; i < NQ; i++)
				acc += sym_address(pick[i]);
	)
	report("ks_addr", "call", s, R, "absolute_percpu=%d", absolute_percpu);

	/* get_symbol_pos: binary search for the last symbol <= addr. */
	TIMED_REPS(s, steps,
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ; i++) {
				uint64_t a = sym_address(pick[i]) + 1;
				size_t low = 0, high = num_syms;
				while (high - low > 1) {
					size_t mid = low + (high - low) / 2;
					steps++;
					if (sym_address(mid) <= a)
						low = mid;
					else
						high = mid;
				}
				acc += low;
			}
	)
	report("ks_addr_probe", "step", s, R, "syms=%zu", num_syms);

	TIMED_REPS(s, reads,
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ; i++) {
				size_t j = pick[i] % (num_syms - 16);
				for (int d = 1; d <= 8; d++, reads++)
					acc += sym_address(j + d);
			}
	)
	report("ks_alias_step", "read", s, R, "8 neighbours after a random index");

	TIMED_REPS(s, calls,
		for (size_t i = 0; i < num_syms; i++, calls++) {
			if (visit_fn(&acc, nm[cfg->hot ? i & 7 : i], i))
				break;
			if (need_resched_flag)
				break;
		}
	)
	report("ks_visit", "call", s, R, "indirect call + resched test");

	for (int r = 0; r < R; r += clean()) {
		long recs = 0;
		int res;
		double t0 = now_cycles();
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < NQ; i++, recs++) {
				expand(offs[pick[i]], buf, sizeof(buf));
				acc += strcmp_count(buf, "vfs_read", &res) + res;
			}
		s[r] = (now_cycles() - t0) / recs;
	}
	report("ks_name_probe", "record", s, R, "expand + strcmp");

	/* kallsyms_on_each_symbol (ftrace_lookup_symbols' walk): every record
	 * in table order, off = kallsyms_expand_symbol(off, ...) carried from
	 * one to the next. The decode-only pass gives the per-token weight
	 * (the stores are kallsyms.chr_out's, measured above on L1-hot
	 * buffers in both regimes); the expanding pass, per record, is
	 * reported beside it. No pick[]: the same stream in hot and cold. */
	{
		long toks = 0, chars = 0;
		unsigned n;
		for (size_t i = 0, off = 0; i < num_syms; i++) {
			if (off != offs[i])
				fail("kallsyms: the record stream disagrees with the record walk at %zu", i);
			off = expand_symbol(off, buf, sizeof(buf), &n);
			chars += n;
			decode_symbol(offs[i], &acc, &n);
			toks += n;
		}
		int passes = cfg->quick ? 1 : 4;
		for (int r = 0; r < R; r += clean()) {
			double t0 = now_cycles();
			for (int k = 0; k < passes; k++)
				for (size_t i = 0, off = 0; i < num_syms; i++)
					off = decode_symbol(off, &acc, &n);
			double t1 = now_cycles();
			for (int k = 0; k < passes; k++)
				for (size_t i = 0, off = 0; i < num_syms; i++) {
					off = expand_symbol(off, buf, sizeof(buf), &n);
					acc += (unsigned char)buf[0];
				}
			double t2 = now_cycles();
			s[r] = (t1 - t0) / ((double)toks * passes);
			s2[r] = (t2 - t1) / ((double)num_syms * passes);
		}
		double rec = median(s2, R);
		report("ks_stream_tok", "token", s, R, "whole table in order, syms=%zu tokens/record=%.2f chars/token=%.2f; expanding pass %.1f cycles/record; the same stream in hot and cold",
		       num_syms, (double)toks / num_syms, (double)chars / toks, rec);
	}

	sink += acc;
	for (size_t i = 0; i < num_syms; i++)
		free(nm[i]);
	free(nm);
	free(t32);
	free(offs);
	free(pick);
	free(s);
	free(s2);
}
