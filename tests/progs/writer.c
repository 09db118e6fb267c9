// SPDX-License-Identifier: GPL-2.0
/*
 * writer FILE N [LINE]: write LINE (default "request 1") N times to FILE through the C
 * library, one write each, then print "writes N failed M". Built twice: as a 64-bit
 * program and with -m32 (writer32), a compat task whose requests must fail with -EINVAL.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const char *line = argc > 3 ? argv[3] : "request 1";
	int i, n, fd, failed = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: writer FILE N [LINE]\n");
		return 2;
	}
	n = atoi(argv[2]);
	fd = open(argv[1], O_WRONLY);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	for (i = 0; i < n; i++)
		if (write(fd, line, strlen(line)) != (ssize_t)strlen(line))
			failed++;
	printf("writes %d failed %d\n", n, failed);
	return 0;
}
