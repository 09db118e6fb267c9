// SPDX-License-Identifier: GPL-2.0
/*
 * nofp-drap N: N write(2) calls at the bottom of a 12-deep recursion whose every level
 * realigns its stack through DRAP: a function with an over-aligned local and arguments on
 * the stack, which gcc builds with a DRAP register; its CFI gives the CFA as [%rbp - k]
 * (DW_OP_breg6 -k; DW_OP_deref) and the callee-saved registers at %rbp-relative places
 * (DW_OP_breg6 -n). Each level's CFA comes from the %rbp the level below it restored: an
 * unwinder must carry the registers from one such frame to the next. Built as
 * distributions build (-O2, no frame pointers): only CFI unwinds it.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static NOINLINE int leaf(int n, int c)
{
	int i, k = 0;

	for (i = 0; i < n; i++)
		k += write(2, "d\n", 2);
	return k + c;
}

/*
 * Nine arguments: the last three on the stack, which the realigned frame reaches by DRAP
 * (noipa: gcc would otherwise propagate the constant ones and drop them from the stack).
 */
static NOINLINE __attribute__((noipa)) int level(int depth, int n, int b, int c, int d, int e, int g, int h,
			  const char *prev)
{
	_Alignas(64) char buf[64];

	memcpy(buf, prev, sizeof(buf));
	buf[depth & 63] += g + h;
	__asm__ volatile("" : : "r"(buf) : "memory");
	if (depth == 0)
		return leaf(n, buf[3]);
	/* Work after the call: no tail call. */
	return level(depth - 1, n, b, c, d, e, g + 1, h, buf) + buf[5];
}

int main(int argc, char **argv)
{
	char zero[64] = { 0 };

	return level(12, argc > 1 ? atoi(argv[1]) : 1, 1, 2, 3, 4, 5, 6, zero) == -1;
}
