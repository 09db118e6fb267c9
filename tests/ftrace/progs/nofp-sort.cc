// SPDX-License-Identifier: GPL-2.0
/*
 * nofp-sort N: std::sort of N pseudo-random integers with a comparator that writes a line
 * to stderr every 64th call: libstdc++'s inlined sort templates in the program, the
 * comparator, and libc's write. Built -O2 -fomit-frame-pointer.
 */
#include <algorithm>
#include <cstdlib>
#include <unistd.h>
#include <vector>

static unsigned long compares;

struct Compare {
	bool operator()(int a, int b) const
	{
		if (++compares % 64 == 0)
			write(2, "x\n", 2);
		return a < b;
	}
};

__attribute__((noinline)) static void sort_all(std::vector<int> &v)
{
	std::sort(v.begin(), v.end(), Compare());
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], nullptr, 0) : 20000;
	std::vector<int> v(n);
	unsigned int x = 12345;

	for (auto &e : v) {
		x = x * 1103515245 + 12345;
		e = static_cast<int>(x >> 8);
	}
	sort_all(v);
	return 0;
}
