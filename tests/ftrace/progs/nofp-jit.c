// SPDX-License-Identifier: GPL-2.0
/*
 * nofp-jit N [jit]: N times, caller() calls a thunk with a callback that writes a line to
 * stderr. The thunk is a C function (built like the rest: CFI, no frame pointer) or, with
 * "jit", the same call in machine code copied into anonymous memory, which has no unwind
 * information but sets up a frame pointer (push %rbp; mov %rsp, %rbp), as JIT code and
 * hand-written assembly do. A walk in unwinder=auto then crosses from CFI (the callback) to
 * the frame-pointer chain (the thunk) and back to CFI (caller, main): the stacks of the
 * two modes differ only in the thunk's frame. With "jit", prints the thunk's address.
 * Built -O2 -fomit-frame-pointer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

typedef void (*thunk_fn)(void (*cb)(void));

static NOINLINE void callback(void)
{
	write(2, "j\n", 2);
	__asm__ volatile("" ::: "memory");
}

static NOINLINE void thunk_c(void (*cb)(void))
{
	cb();
	__asm__ volatile("" ::: "memory");
}

static NOINLINE void caller(thunk_fn thunk)
{
	thunk(callback);
	__asm__ volatile("" ::: "memory");
}

/* push %rbp; mov %rsp, %rbp; call *%rdi; pop %rbp; ret */
static const unsigned char thunk_code[] = { 0x55, 0x48, 0x89, 0xe5, 0xff, 0xd7, 0x5d, 0xc3 };

int main(int argc, char **argv)
{
	int i, n = argc > 1 ? atoi(argv[1]) : 100;
	thunk_fn thunk = thunk_c;

	if (argc > 2 && !strcmp(argv[2], "jit")) {
		void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				  -1, 0);

		if (page == MAP_FAILED)
			return 1;
		memcpy(page, thunk_code, sizeof(thunk_code));
		if (mprotect(page, 4096, PROT_READ | PROT_EXEC))
			return 1;
		thunk = (thunk_fn)page;
		printf("thunk %p\n", page);
		fflush(stdout);
	}
	for (i = 0; i < n; i++)
		caller(thunk);
	return 0;
}
