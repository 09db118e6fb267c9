/* SPDX-License-Identifier: GPL-2.0 */
/* Raw syscalls from frame-pointer code (glibc's wrappers have no frame pointer). */
#ifndef UD_H
#define UD_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#define CTL "/sys/kernel/debug/unwind_test/ctl"

/* The client's ctl, argv[at] if given (else CTL), open for writing; exits 2 if it cannot. */
static inline int open_ctl(int argc, char **argv, int at)
{
	int fd = open(argc > at ? argv[at] : CTL, O_WRONLY);

	if (fd < 0) {
		perror("open ctl");
		exit(2);
	}
	return fd;
}

static inline long raw_syscall3(long nr, long a, long b, long c)
{
	long ret;

	asm volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c)
		     : "rcx", "r11", "memory");
	return ret;
}

static inline long raw_write(int fd, const char *s)
{
	return raw_syscall3(SYS_write, fd, (long)s, strlen(s));
}

/* "request 1\\nrequest 2" on a command line becomes two lines. */
static inline char *unescape(const char *arg)
{
	char *s = malloc(strlen(arg) + 2), *p = s;

	for (; *arg; arg++) {
		if (arg[0] == '\\' && arg[1] == 'n') {
			*p++ = '\n';
			arg++;
		} else {
			*p++ = *arg;
		}
	}
	*p++ = '\n';
	*p = '\0';
	return s;
}

#endif
