// SPDX-License-Identifier: GPL-2.0
/* libud-pp.so, for pingpong: calls back into the program. */
__attribute__((noinline)) void ud_pp_call(int n, void (*f)(int))
{
	f(n);
	__asm__ volatile("" ::: "memory");
}
