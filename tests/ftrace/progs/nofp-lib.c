// SPDX-License-Identifier: GPL-2.0
/*
 * A small library for nofp-dlopen, built twice (LIB_B with padding, so that its code and
 * unwind information lie elsewhere): ud_lib_write(n) recurses n levels, then writes.
 */
#include <unistd.h>

#ifdef PADDING
/* Moves the code below to other offsets than in the other build. */
__asm__(".text\n.skip " PADDING ", 0xcc\n");
#endif

__attribute__((noinline)) void ud_lib_write(int n)
{
	if (n > 0)
		ud_lib_write(n - 1);
	else
		write(2, "l\n", 2);
	__asm__ volatile("" ::: "memory");
}
