// SPDX-License-Identifier: GPL-2.0
/*
 * Demo workload for ustack: a deep, recognizable call tree whose leaves enter the
 * kernel with an inline `syscall` instruction, so that the frame-pointer walk of the
 * deferred unwinder sees every caller (Debian's glibc has no frame pointers: a syscall
 * made inside libc would lose the chain).
 *
 * Build: make -C tools/ustack/demo   (or see the Makefile for the cc line)
 * Run:   ./demo [ITERATIONS]          (default: loop for about 3 seconds)
 *
 * Call tree (each iteration):
 *   main -> demo_run -> parse_config -> demo_level_a1 -> demo_level_a2 -> demo_leaf_compute -> demo_sys_getppid
 *                    -> process_items -> demo_level_b1 -> demo_level_b2 -> demo_level_b3 -> demo_leaf_yield -> demo_sys_sched_yield
 *                    -> flush_output -> demo_level_c1 -> demo_leaf_sleep -> demo_sys_nanosleep
 *                    -> sort_items -> qsort (C library) -> demo_compare -> getppid (C library)
 *
 * The last branch crosses the C library twice, which has no frame pointers: only the
 * unwinder's CFI mode (the default, unwinder=auto) sees that whole stack.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static volatile unsigned long demo_sink;

#if defined(__x86_64__)
static NOINLINE long demo_syscall3(long nr, long a, long b, long c)
{
	long ret;

	asm volatile("syscall"
		     : "=a"(ret)
		     : "a"(nr), "D"(a), "S"(b), "d"(c)
		     : "rcx", "r11", "memory");
	return ret;
}
#else
static NOINLINE long demo_syscall3(long nr, long a, long b, long c)
{
	return syscall(nr, a, b, c);
}
#endif

NOINLINE long demo_sys_getppid(void)
{
	return demo_syscall3(SYS_getppid, 0, 0, 0);
}

NOINLINE long demo_sys_sched_yield(void)
{
	return demo_syscall3(SYS_sched_yield, 0, 0, 0);
}

NOINLINE long demo_sys_nanosleep(long nsec)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = nsec };

	return demo_syscall3(SYS_nanosleep, (long)&ts, 0, 0);
}

NOINLINE unsigned long demo_leaf_compute(unsigned long x)
{
	unsigned long i;

	for (i = 0; i < 64; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	demo_sink += demo_sys_getppid();
	return x;
}

NOINLINE unsigned long demo_leaf_yield(unsigned long x)
{
	demo_sink += demo_sys_sched_yield();
	return x ^ 0x5a5a;
}

NOINLINE unsigned long demo_leaf_sleep(unsigned long x)
{
	demo_sink += demo_sys_nanosleep(1000);
	return x + 7;
}

NOINLINE unsigned long demo_level_a2(unsigned long x) { return demo_leaf_compute(x + 2) + 1; }
NOINLINE unsigned long demo_level_a1(unsigned long x) { return demo_level_a2(x + 1) + 1; }
NOINLINE unsigned long demo_level_b3(unsigned long x) { return demo_leaf_yield(x + 3) + 1; }
NOINLINE unsigned long demo_level_b2(unsigned long x) { return demo_level_b3(x + 2) + 1; }
NOINLINE unsigned long demo_level_b1(unsigned long x) { return demo_level_b2(x + 1) + 1; }
NOINLINE unsigned long demo_level_c1(unsigned long x) { return demo_leaf_sleep(x + 1) + 1; }

static int demo_compare_calls;

NOINLINE int demo_compare(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	/* Once per sort: a system call made in the C library, under its qsort(). */
	if (demo_compare_calls++ == 0)
		demo_sink += getppid();
	return (x > y) - (x < y);
}

NOINLINE unsigned long sort_items(unsigned long x)
{
	long items[8];
	int i;

	for (i = 0; i < 8; i++)
		items[i] = (long)((x >> (i * 3)) & 0xff);
	demo_compare_calls = 0;
	qsort(items, 8, sizeof(items[0]), demo_compare);
	return x + (unsigned long)items[0];
}

NOINLINE unsigned long parse_config(unsigned long x) { return demo_level_a1(x) + 1; }
NOINLINE unsigned long process_items(unsigned long x) { return demo_level_b1(x) + 1; }
NOINLINE unsigned long flush_output(unsigned long x) { return demo_level_c1(x) + 1; }

static double demo_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

NOINLINE unsigned long demo_run(long iterations, double seconds)
{
	double end = demo_now() + seconds;
	unsigned long x = 1;
	long i;

	for (i = 0; iterations < 0 ? demo_now() < end : i < iterations; i++) {
		x = parse_config(x);
		x = process_items(x);
		x = flush_output(x);
		x = sort_items(x);
	}
	return x + (unsigned long)i;
}

int main(int argc, char **argv)
{
	long iterations = argc > 1 ? atol(argv[1]) : -1;
	unsigned long r = demo_run(iterations, 3.0);

	printf("demo: done (%lu)\n", r & 0xffff);
	return 0;
}
