// SPDX-License-Identifier: GPL-2.0
/*
 * pingpong N CALLS: CALLS times, a recursion N levels deep that goes back and forth between
 * the program and a library (libud-pp.so: ud_pp_call(n, f) calls f(n)) then calls getppid():
 * a stack whose frames change file at every frame, more runs of frames than the resolver
 * keeps in place. Frame pointers everywhere: every unwinder gives every frame.
 */
#include <stdlib.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

void ud_pp_call(int n, void (*f)(int));

NOINLINE void pp_level(int n)
{
	if (n > 0)
		ud_pp_call(n - 1, pp_level);
	else
		getppid();
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	int i, depth = argc > 1 ? atoi(argv[1]) : 30, calls = argc > 2 ? atoi(argv[2]) : 1;

	for (i = 0; i < calls; i++)
		pp_level(depth);
	return 0;
}
