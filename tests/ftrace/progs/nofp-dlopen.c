// SPDX-License-Identifier: GPL-2.0
/*
 * nofp-dlopen N LIB_A LIB_B: N times, dlopen() LIB_A or LIB_B in turn (both built from
 * nofp-lib.c, so each has a ud_lib_write), call it, dlclose() it. The two libraries land at
 * the same address in turn: a cache of the task's mappings that outlived a dlclose() would
 * give the other library's unwind information. Built -O2 -fomit-frame-pointer.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

static NOINLINE void call_lib(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	void (*fn)(int);

	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		exit(1);
	}
	fn = (void (*)(int))dlsym(h, "ud_lib_write");
	fn(3);
	dlclose(h);
}

int main(int argc, char **argv)
{
	int i, n = argc > 3 ? atoi(argv[1]) : 0;

	for (i = 0; i < n; i++)
		call_lib(argv[2 + (i & 1)]);
	return 0;
}
