// SPDX-License-Identifier: GPL-2.0
/*
 * nofp-signal N [alt|big]: N times, three calls deep, raise(SIGUSR1); the handler writes a
 * line to stderr. Each write's stack runs through the handler, glibc's signal trampoline
 * (__restore_rt, a signal frame: 'S' in its CIE) and the interrupted raise() back to main.
 * With "alt", the handler runs on an alternate signal stack (sigaltstack) in main's frame:
 * above the interrupted frames, so the stack pointer falls across the signal frame (and
 * rises again from raise() to main); the stacks are the same frames. With "big", the middle
 * call's frame holds 40 KiB more (alloca: the same code and return addresses, one frame far
 * larger than perf's 16 KiB copy of the stack). Built -O2 -fomit-frame-pointer.
 */
#include <alloca.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static size_t extra;	/* bytes level2() adds to its frame */

static void handler(int sig)
{
	write(2, "s\n", 2);
}

static NOINLINE void level3(int i)
{
	raise(SIGUSR1);
	__asm__ volatile("" ::: "memory");
}

static NOINLINE void level2(int i)
{
	char *room = alloca(extra);

	__asm__ volatile("" : : "r"(room) : "memory");	/* kept */
	level3(i + 1);
	__asm__ volatile("" ::: "memory");
}

static NOINLINE void level1(int i)
{
	level2(i + 1);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	int i, n = argc > 1 ? atoi(argv[1]) : 100;
	struct sigaction sa = { .sa_handler = handler };

	if (argc > 2 && !strcmp(argv[2], "alt")) {
		/* (alloca: main's frame grows only in this mode; perf's 16 KiB copy of the stack
		 * reaches _start from the handler without it.) */
		stack_t ss = { .ss_sp = alloca(1 << 16), .ss_size = 1 << 16 };

		if (sigaltstack(&ss, NULL))
			return 1;
		sa.sa_flags = SA_ONSTACK;
	}
	if (argc > 2 && !strcmp(argv[2], "big"))
		extra = 40 << 10;
	sigaction(SIGUSR1, &sa, NULL);
	for (i = 0; i < n; i++)
		level1(i);
	return 0;
}
