// SPDX-License-Identifier: GPL-2.0
/*
 * Workload for the ftrace tests and benchmark: recurse DEPTH frames (frame pointers, no
 * inlining), then make COUNT getppid() system calls with an inline `syscall` instruction
 * from the deepest frame, so that a frame-pointer walk sees the whole chain (Debian's glibc
 * has no frame pointers). Prints the number of calls made and the elapsed nanoseconds.
 *
 *   ustress DEPTH COUNT [BATCHES]
 *
 * With BATCHES, the same process runs COUNT calls BATCHES times, waiting for a line on
 * stdin before each batch and printing "done N" after it (tests drive it through FIFOs).
 *
 * With USTRESS_SPAN in the environment, it first prints "span N" to stderr: the bytes from
 * a local of the deepest frame up to the main thread's initial stack pointer
 * (/proc/self/stat's startstack), about what a walk of the whole stack must read. With
 * USTRESS_SET_TOP=N (root), it first moves that start of the stack to N bytes above the
 * same local (prctl(PR_SET_MM_START_STACK), as checkpoint/restore tools do; N may be
 * negative): a stack top that lies.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

static long raw_getppid(void)
{
	long ret;

	asm volatile("syscall" : "=a"(ret) : "a"(110L) : "rcx", "r11", "memory");
	return ret;
}

static int batches;

/* Field 28 of /proc/self/stat (startstack), 0 if it cannot be read. */
static uintptr_t start_stack(void)
{
	char buf[1024], *p;
	unsigned long value = 0;
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n;

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');	/* the command name may hold spaces */
	/* Fields 3 to 27 follow ") ", then startstack. */
	for (int field = 2; p && field < 28; field++)
		p = strchr(p + 1, ' ');
	if (p)
		value = strtoul(p + 1, NULL, 10);
	return value;
}

static long __attribute__((noinline)) ustress_leaf(long count)
{
	char line[64];
	long sum = 0;

	const char *top = getenv("USTRESS_SET_TOP");

	if (top && prctl(PR_SET_MM, PR_SET_MM_START_STACK, (uintptr_t)line + atol(top), 0, 0)) {
		perror("prctl(PR_SET_MM_START_STACK)");
		exit(1);
	}
	if (getenv("USTRESS_SPAN"))
		fprintf(stderr, "span %ld\n", (long)(start_stack() - (uintptr_t)line));
	for (int b = 0; b < (batches ? batches : 1); b++) {
		if (batches && !fgets(line, sizeof(line), stdin))
			break;
		for (long i = 0; i < count; i++)
			sum += raw_getppid();
		if (batches) {
			printf("done %d\n", b + 1);
			fflush(stdout);
		}
	}
	return sum;
}

static long __attribute__((noinline)) ustress_recurse(int depth, long count)
{
	long r;

	if (depth <= 1)
		return ustress_leaf(count);
	r = ustress_recurse(depth - 1, count);
	asm volatile("" ::: "memory"); /* keep the frame: no tail call */
	return r;
}

int main(int argc, char **argv)
{
	struct timespec a, b;
	int depth = argc > 1 ? atoi(argv[1]) : 10;
	long count = argc > 2 ? atol(argv[2]) : 1000;

	batches = argc > 3 ? atoi(argv[3]) : 0;

	clock_gettime(CLOCK_MONOTONIC, &a);
	ustress_recurse(depth, count);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%ld %lld\n", count,
	       (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec));
	return 0;
}
