// SPDX-License-Identifier: GPL-2.0
/*
 * deep DEPTH 'CMDS' [CTL]: recurse DEPTH levels, write CMDS ("\n" separates commands) to
 * the client's ctl with an inline syscall at the bottom, then print what a frame-pointer
 * walk from that syscall must find, innermost first:
 *
 *   pid PID
 *   ret WRITE_RESULT
 *   expect IP RET_BOTTOM RET_0 ... RET_{DEPTH-1} RET_MAIN
 *
 * IP is the address right after the syscall instruction (the user IP at kernel entry),
 * then the return address of every frame, as each function saw it itself.
 */
#include <stdio.h>
#include <unistd.h>
#include "ud.h"

static int ctl_fd;
static const char *cmds;
static unsigned long syscall_ip, ret_bottom, ret_main, *rets;
static long write_ret;

static __attribute__((noinline)) void bottom(void)
{
	long ret, ip;

	ret_bottom = (unsigned long)__builtin_return_address(0);
	asm volatile("syscall\n"
		     "1:\n\t"
		     "lea 1b(%%rip), %1"
		     : "=a"(ret), "=r"(ip)
		     : "a"(SYS_write), "D"(ctl_fd), "S"(cmds), "d"(strlen(cmds))
		     : "rcx", "r11", "memory");
	write_ret = ret;
	syscall_ip = ip;
}

static __attribute__((noinline)) void rec(int level)
{
	rets[level] = (unsigned long)__builtin_return_address(0);
	if (level == 0)
		bottom();
	else
		rec(level - 1);
	asm volatile("" ::: "memory");	/* not a tail call */
}

int main(int argc, char **argv)
{
	int depth, i;

	ret_main = (unsigned long)__builtin_return_address(0);
	if (argc < 3) {
		fprintf(stderr, "usage: deep DEPTH CMDS [CTL]\n");
		return 2;
	}
	depth = atoi(argv[1]);
	cmds = unescape(argv[2]);
	if (depth < 1) {
		fprintf(stderr, "deep: DEPTH must be at least 1\n");
		return 2;
	}
	ctl_fd = open_ctl(argc, argv, 3);
	rets = calloc(depth, sizeof(*rets));
	rec(depth - 1);
	printf("pid %d\nret %ld\nexpect %lx %lx", getpid(), write_ret, syscall_ip, ret_bottom);
	for (i = 0; i < depth; i++)
		printf(" %lx", rets[i]);
	printf(" %lx\n", ret_main);
	return write_ret < 0;
}
