// SPDX-License-Identifier: GPL-2.0
/*
 * nofp-qsort N: sorts N pseudo-random integers with the C library's qsort(); every 64th
 * comparison writes a line to stderr from the comparator, so each write's stack runs
 * program -> libc (qsort) -> program (compare) -> libc (write). Built -O2
 * -fomit-frame-pointer (no frame pointer anywhere, as the C library), with a function
 * that realigns its stack through DRAP on the way: only CFI (.eh_frame) can unwind it.
 * With a second argument "time", prints the nanoseconds the sort took (the benchmark's
 * instructions, under icount); otherwise it makes no write of its own outside the sort.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static unsigned long compares;

static NOINLINE int compare(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	if (++compares % 64 == 0)
		write(2, "c\n", 2);
	return (x > y) - (x < y);
}

static NOINLINE void sort_level2(int *v, size_t n)
{
	qsort(v, n, sizeof(*v), compare);
	__asm__ volatile("" ::: "memory");
}

static NOINLINE void fill(void *p, int c)
{
	memset(p, c, 64);
}

static NOINLINE int sort_level1(int *v, int n)
{
	/*
	 * Over-aligned and variable-sized locals: gcc realigns the stack through a DRAP
	 * register and gives the CFA as an expression (DW_OP_breg6 -8; DW_OP_deref).
	 */
	char buf[64] __attribute__((aligned(64)));
	int i, sum = 0;

	fill(buf, n);
	int vla[n % 50 + 10];

	for (i = 0; i < n % 50 + 10; i++)
		vla[i] = buf[i & 63];
	sort_level2(v, n);
	for (i = 0; i < n % 50 + 10; i++)
		sum += vla[i];
	return sum;
}

int main(int argc, char **argv)
{
	int i, n = argc > 1 ? atoi(argv[1]) : 20000;
	int *v = malloc(n * sizeof(*v));
	unsigned int x = 12345;
	struct timespec t0, t1;

	for (i = 0; i < n; i++) {
		x = x * 1103515245 + 12345;
		v[i] = (int)(x >> 8);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	i = sort_level1(v, n);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (argc > 2 && !strcmp(argv[2], "time"))
		printf("%lld\n", (t1.tv_sec - t0.tv_sec) * 1000000000LL + t1.tv_nsec - t0.tv_nsec);
	free(v);
	return i == -1;
}
