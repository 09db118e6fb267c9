// SPDX-License-Identifier: GPL-2.0
/*
 * spin SECONDS: burn CPU in user space a few frames deep, with a cheap raw syscall
 * (getppid) now and then, so that NMIs find it on the CPU in user mode or in the kernel.
 * Prints "pid PID loops N" at the end.
 */
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include "ud.h"

static volatile unsigned long sink;

static __attribute__((noinline)) void burn(void)
{
	unsigned long i;

	for (i = 0; i < 200000; i++)
		sink += i;
	raw_syscall3(SYS_getppid, 0, 0, 0);
	asm volatile("" ::: "memory");
}

static __attribute__((noinline)) void level2(void) { burn(); asm volatile("" ::: "memory"); }
static __attribute__((noinline)) void level1(void) { level2(); asm volatile("" ::: "memory"); }

int main(int argc, char **argv)
{
	time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 10);
	unsigned long loops = 0;

	while (time(NULL) < end) {
		level1();
		loops++;
	}
	printf("pid %d loops %lu\n", getpid(), loops);
	return 0;
}
