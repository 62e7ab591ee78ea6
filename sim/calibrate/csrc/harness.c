/*
 * kpsim calibrate: harness (clock, repetitions, medians, allocation) and
 * main. Usage: kpsim-bench regime=hot|cold [quick=1] [check=1] mhz=F
 *              l2=BYTES ksdir=DIR [only=FAMILY,...]
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

volatile uint64_t sink;
long preempted;
static struct cfg the_cfg = { .mhz = 0, .l2 = 2u << 20 };
const struct cfg *cfg = &the_cfg;
static int perf_fd = -1;

void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("kpsim-bench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		fail("out of memory (%zu bytes)", n);
	return p;
}

void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);
	if (!p)
		fail("out of memory (%zu x %zu bytes)", n, sz);
	return p;
}

void *page_alloc(size_t n)
{
	void *p = NULL;
	n = (n + 4095) & ~(size_t)4095;
	if (posix_memalign(&p, 4096, n ? n : 4096))
		fail("out of memory (%zu bytes)", n);
	memset(p, 0, n);
	return p;
}

uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

void shuffle(uint32_t *v, size_t n, uint64_t *s)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = rnd(s) % i;
		uint32_t t = v[i - 1];
		v[i - 1] = v[j];
		v[j] = t;
	}
}

static void perf_open(void)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_HARDWARE;
	a.size = sizeof(a);
	a.config = PERF_COUNT_HW_CPU_CYCLES;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	perf_fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}

static double mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* This thread's CPU time: time spent preempted on a shared machine is not
 * counted (CLOCK_MONOTONIC would count it). */
static double thread_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double tsc_rate; /* TSC MHz, 0 if none */

static double raw_cycles(void)
{
	if (perf_fd >= 0) {
		uint64_t v;
		if (read(perf_fd, &v, sizeof(v)) == sizeof(v))
			return (double)v;
	}
#if defined(__x86_64__) || defined(__i386__)
	if (tsc_rate > 0)
		return (double)__rdtsc() * cfg->mhz / tsc_rate;
#endif
	return mono_ns() * cfg->mhz / 1000.0;
}

/* The last two now_cycles() calls, in wall cycles and thread CPU ns: a
 * repetition whose wall time exceeds its CPU time was preempted (on a
 * machine shared by several jobs) and is run again. */
static double last_wall[2], last_cpu[2];
static int retries;

double now_cycles(void)
{
	last_wall[0] = last_wall[1];
	last_cpu[0] = last_cpu[1];
	last_wall[1] = raw_cycles();
	last_cpu[1] = thread_ns();
	if (perf_fd >= 0)
		return last_wall[1];
	return last_cpu[1] * cfg->mhz / 1000.0;
}

int clean(void)
{
	double wall = last_wall[1] - last_wall[0];
	double cpu = (last_cpu[1] - last_cpu[0]) * cfg->mhz / 1000.0;
	if (perf_fd >= 0 || wall <= cpu * 1.02 + 4000) {
		retries = 0;
		return 1;
	}
	preempted++;
	/* Preempted: the CPU-time figure excludes the time away, but the
	 * caches come back disturbed, so try again, a few times at most. */
	if (++retries > 3) {
		retries = 0;
		return 1;
	}
	return 0;
}

double now_fine(void) { return raw_cycles(); }

int reps(void) { return cfg->quick ? 3 : 15; }

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmpd);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double timer_overhead(void)
{
	double v[1001];
	for (int i = 0; i < 1001; i++) {
		double a = now_fine();
		v[i] = now_fine() - a;
	}
	return median(v, 1001);
}

void report(const char *bench, const char *unit, double *s, int n, const char *fmt, ...)
{
	char params[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(params, sizeof(params), fmt, ap);
	va_end(ap);
	double med = median(s, n);
	/* A benchmark that subtracts a baseline (a bucket-only pass, a
	 * compare-only pass) can fall below zero on a noisy repetition: a
	 * cost below the clock's resolution reads as 0, never negative. */
	double lo = s[0] < 0 ? 0 : s[0], hi = s[n - 1] < 0 ? 0 : s[n - 1];
	if (med < 0)
		med = 0;
	printf("R %s %s %.4f %.4f %.4f %d %s | %s\n", bench, cfg->hot ? "hot" : "cold", med, lo, hi, n, unit, params);
	fflush(stdout);
}

/* TSC rate against CLOCK_MONOTONIC over ~20 ms: a cross-check of the
 * stated frequency on machines without a cycle counter. */
static double tsc_mhz(void)
{
#if defined(__x86_64__) || defined(__i386__)
	double t0 = mono_ns();
	uint64_t c0 = __rdtsc();
	while (mono_ns() - t0 < 20e6)
		;
	uint64_t c1 = __rdtsc();
	double t1 = mono_ns();
	return (double)(c1 - c0) / (t1 - t0) * 1000.0;
#else
	return 0;
#endif
}

static int wanted(const char *only, const char *name)
{
	if (!only || !*only)
		return 1;
	size_t l = strlen(name);
	for (const char *p = only; *p;) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == l && !strncmp(p, name, l))
			return 1;
		if (!e)
			break;
		p = e + 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	int have_regime = 0;
	for (int i = 1; i < argc; i++) {
		char *a = argv[i];
		if (!strcmp(a, "regime=hot"))
			the_cfg.hot = 1, have_regime = 1;
		else if (!strcmp(a, "regime=cold"))
			the_cfg.hot = 0, have_regime = 1;
		else if (!strncmp(a, "quick=", 6))
			the_cfg.quick = atoi(a + 6);
		else if (!strncmp(a, "check=", 6))
			the_cfg.check = atoi(a + 6);
		else if (!strncmp(a, "mhz=", 4))
			the_cfg.mhz = atof(a + 4);
		else if (!strncmp(a, "l2=", 3))
			the_cfg.l2 = strtoull(a + 3, NULL, 10);
		else if (!strncmp(a, "ksdir=", 6))
			the_cfg.ksdir = a + 6;
		else if (!strncmp(a, "only=", 5))
			only = a + 5;
		else
			fail("unknown argument %s", a);
	}
	if (the_cfg.quick && the_cfg.l2 > (256u << 10))
		the_cfg.l2 = 256u << 10; /* small cold working sets in tests */
	if (!have_regime)
		fail("regime=hot|cold is required");
	perf_open();
	double tm = tsc_mhz();
	tsc_rate = tm;
	if (the_cfg.mhz <= 0)
		the_cfg.mhz = tm;
	if (the_cfg.mhz <= 0 && perf_fd < 0)
		fail("no cycle counter and no frequency (mhz=)");
	printf("C clock %s\n", perf_fd >= 0 ? "perf_event_cycles" : "thread_cputime");
	printf("C tsc_mhz %.1f\n", tm);
	printf("C mhz %.1f\n", the_cfg.mhz);
	static const struct {
		const char *name;
		void (*run)(void);
	} benches[] = {
		{"hlist", bench_hlist},
		{"rbtree", bench_rbtree},
		{"kallsyms", bench_kallsyms},
		{"tables", bench_tables},
		{"ftrace_hash", bench_ftrace_hash},
		{"misc", bench_misc},
		{"rhashtable", bench_rhashtable},
		{"btree", bench_btree},
	};
	for (size_t i = 0; i < sizeof(benches) / sizeof(benches[0]); i++)
		if (wanted(only, benches[i].name))
			benches[i].run();
	printf("C preempted %ld\n", preempted);
	printf("C done\n");
	return 0;
}

/*
 * slab_objs hands out n objects of size sz the way SLUB does for a fresh
 * kmalloc cache with CONFIG_SLAB_FREELIST_RANDOM (Debian 6.1 sets it):
 * objects packed 4096/sz to an order-0 slab page, pages one after another,
 * the free list of each page in a random order.
 */
void **slab_objs(size_t n, size_t sz, uint64_t *seed)
{
	size_t per = 4096 / sz;
	size_t pages = (n + per - 1) / per;
	char *arena = page_alloc(pages * 4096);
	void **out = xmalloc(n * sizeof(*out));
	uint32_t *perm = xmalloc(per * sizeof(*perm));
	for (size_t p = 0, i = 0; p < pages; p++) {
		for (size_t k = 0; k < per; k++)
			perm[k] = (uint32_t)k;
		shuffle(perm, per, seed);
		for (size_t k = 0; k < per && i < n; k++, i++)
			out[i] = arena + p * 4096 + perm[k] * sz;
	}
	free(perm);
	return out;
}
