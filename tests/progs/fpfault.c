// SPDX-License-Identifier: GPL-2.0
/*
 * fpfault WHERE 'CMDS' [CTL]: writes CMDS to the client's ctl with an inline syscall whose
 * %rbp points at a readable frame record R1 = [R2, RET], with RET outside any mapping and
 * R2 a record that cannot be read; prints what a walk from that syscall must find ("pid
 * PID", "ret WRITE_RESULT", "expect IP RET"). Both records lie in the program's own stack,
 * above the stack pointer, R2 next to a page made PROT_NONE:
 *
 *   straddle  R2's first word is the last of a readable page, its second the first of the
 *             PROT_NONE page (a frame-pointer window of two words, the second faulting:
 *             a reader that took it for read would give a stale word of R1's window);
 *   inside    the whole of R2 is in the PROT_NONE page (a window whose first word faults).
 *
 * Every unwinder must stop at R2 with IP and RET: frame pointers read R1 then fail on R2;
 * CFI unwinds the syscall's function through R1 (its CFA is %rbp + 16), finds no unwind
 * information for RET and falls back to the frame pointer R2 (auto) or stops (cfi).
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include "ud.h"

/* A return address in no mapping (below mmap_min_addr), but in user space. */
#define RET 0x1000UL

static __attribute__((noinline)) long probe(int fd, const char *cmds, unsigned long fake_fp,
					    unsigned long *ip)
{
	long ret;

	/* %rbp is the frame pointer here: saved in %r12 (a clobber), not on the stack. */
	asm volatile("mov %%rbp, %%r12\n\t"
		     "mov %[fp], %%rbp\n\t"
		     "syscall\n"
		     "1:\n\t"
		     "mov %%r12, %%rbp\n\t"
		     "lea 1b(%%rip), %[ip]"
		     : "=a"(ret), [ip] "=r"(*ip)
		     : "a"(SYS_write), "D"(fd), "S"(cmds), "d"(strlen(cmds)), [fp] "r"(fake_fp)
		     : "rcx", "r11", "r12", "memory");
	return ret;
}

int main(int argc, char **argv)
{
	static const long page = 4096;
	char area[4 * 4096];
	unsigned long ip, r2, *r1;
	uintptr_t none;
	const char *cmds;
	long ret;
	int fd;

	if (argc < 3) {
		fprintf(stderr, "usage: fpfault straddle|inside CMDS [CTL]\n");
		return 2;
	}
	cmds = unescape(argv[2]);
	fd = open_ctl(argc, argv, 3);
	/* A whole page inside `area`, with a readable page below it (also in `area`). */
	none = ((uintptr_t)area + 2 * page) & ~(uintptr_t)(page - 1);
	memset(area, 0, sizeof(area));
	if (mprotect((void *)none, page, PROT_NONE)) {
		perror("mprotect");
		return 2;
	}
	if (!strcmp(argv[1], "straddle"))
		r2 = none - 8;
	else if (!strcmp(argv[1], "inside"))
		r2 = none + 64;
	else
		return 2;
	/* R1 in the readable page, its window (256 bytes) well inside it. */
	r1 = (unsigned long *)(none - page + 512);
	r1[0] = r2;
	r1[1] = RET;
	ret = probe(fd, cmds, (unsigned long)r1, &ip);
	mprotect((void *)none, page, PROT_READ | PROT_WRITE);
	printf("pid %d\nret %ld\nexpect %lx %lx\n", getpid(), ret, ip, RET);
	return ret < 0;
}
