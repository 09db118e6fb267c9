// SPDX-License-Identifier: GPL-2.0
/*
 * requester SECONDS 'CMDS' [CTL]: for SECONDS, open the client's ctl (it comes and goes
 * while modules are reloaded), write CMDS with a raw syscall, close; retry on failure.
 * Prints "writes N failed M".
 */
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include "ud.h"

int main(int argc, char **argv)
{
	const char *ctl = argc > 3 ? argv[3] : CTL;
	unsigned long writes = 0, failed = 0;
	const char *cmds;
	time_t end;

	if (argc < 3) {
		fprintf(stderr, "usage: requester SECONDS CMDS [CTL]\n");
		return 2;
	}
	end = time(NULL) + atoi(argv[1]);
	cmds = unescape(argv[2]);
	while (time(NULL) < end) {
		int fd = open(ctl, O_WRONLY);

		if (fd < 0) {
			failed++;
			usleep(1000);
			continue;
		}
		if (raw_write(fd, cmds) > 0)
			writes++;
		else
			failed++;
		close(fd);
	}
	printf("writes %lu failed %lu\n", writes, failed);
	return 0;
}
