// SPDX-License-Identifier: GPL-2.0
/*
 * nofp-many DEPTH N [time]: N write(2) system calls, each at the end of a DEPTH-deep call
 * chain through 512 functions, each of which calls the next through a table at an index
 * that a pseudo-random seed picks (the seed of the Kth chain is K): each write's stack is
 * another path through the 512 functions, and the stacks of a run meet about as many
 * return addresses as there are functions, as a large program's do. Built as distributions
 * build (-O2, no frame pointers): only CFI unwinds it. With "time", prints the nanoseconds
 * the N calls took (instructions, under icount).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define NR_FUNCS 512

typedef unsigned long (*step_fn)(unsigned int depth, unsigned int seed);
extern const step_fn table[NR_FUNCS];
static volatile unsigned long sink;
static volatile int quiet;	/* the warm-up: the same chains, no system call */

/* f000 to f777 (octal: 512 functions), each with its own constant 0000 to 0777. */
#define F(i)									\
	__attribute__((noinline)) unsigned long f##i(unsigned int depth, unsigned int seed) \
	{									\
		unsigned long r;						\
										\
		if (!depth) {							\
			r = quiet ? 0 : write(2, "m\n", 2);			\
		} else {							\
			seed = seed * 1103515245u + 12345u;			\
			r = table[(seed >> 8) % NR_FUNCS](depth - 1, seed);	\
		}								\
		sink += r + 0##i;	/* work after the call: no tail call */	\
		return r;							\
	}
#define F8(i) F(i##0) F(i##1) F(i##2) F(i##3) F(i##4) F(i##5) F(i##6) F(i##7)
#define F64(i) F8(i##0) F8(i##1) F8(i##2) F8(i##3) F8(i##4) F8(i##5) F8(i##6) F8(i##7)
F64(0) F64(1) F64(2) F64(3) F64(4) F64(5) F64(6) F64(7)

#define T(i) f##i,
#define T8(i) T(i##0) T(i##1) T(i##2) T(i##3) T(i##4) T(i##5) T(i##6) T(i##7)
#define T64(i) T8(i##0) T8(i##1) T8(i##2) T8(i##3) T8(i##4) T8(i##5) T8(i##6) T8(i##7)
const step_fn table[NR_FUNCS] = { T64(0) T64(1) T64(2) T64(3) T64(4) T64(5) T64(6) T64(7) };

int main(int argc, char **argv)
{
	unsigned int depth, n, i;
	struct timespec a, b;

	if (argc < 3) {
		fprintf(stderr, "usage: nofp-many DEPTH N [time]\n");
		return 2;
	}
	depth = atoi(argv[1]);
	n = atoi(argv[2]);
	/*
	 * The chains once without their system call first: their code is paged in before the
	 * timed loop (a page read from the file while it runs would stall it, and under
	 * icount the guest's clock jumps while it waits).
	 */
	quiet = 1;
	for (i = 0; i < n; i++)
		table[0](depth, i);
	quiet = 0;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < n; i++)
		table[0](depth, i);
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (argc > 3)
		printf("%llu\n", (b.tv_sec - a.tv_sec) * 1000000000ull + b.tv_nsec - a.tv_nsec);
	return 0;
}
