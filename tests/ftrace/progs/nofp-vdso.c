// SPDX-License-Identifier: GPL-2.0
/*
 * nofp-vdso N: N times, two calls deep, clock_gettime(CLOCK_PROCESS_CPUTIME_ID). The C
 * library calls the vDSO's __vdso_clock_gettime, which handles only the wall and
 * monotonic clocks and makes the system call itself for this one: the syscall's user IP
 * is in the vDSO, whose unwind information lives only in its own mapping (no file).
 * Built -O2 -fomit-frame-pointer.
 */
#include <stdlib.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))

static volatile long sink;

static NOINLINE void level2(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	sink += ts.tv_nsec;
}

static NOINLINE void level1(void)
{
	level2();
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	int i, n = argc > 1 ? atoi(argv[1]) : 100;

	for (i = 0; i < n; i++)
		level1();
	return 0;
}
