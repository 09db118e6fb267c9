// SPDX-License-Identifier: GPL-2.0
/*
 * requester SECONDS 'CMDS' [PAUSE_US] [CTL]: for SECONDS, open the client's ctl (it comes
 * and goes while modules are reloaded), write CMDS with a raw syscall, close, pause
 * PAUSE_US microseconds (default 0: the ctl file is nearly always open, which keeps the
 * client from unloading); retry on failure.
 * Prints "writes N failed M" at the end or on SIGTERM.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include "ud.h"

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	stop = 1;
}

int main(int argc, char **argv)
{
	const char *ctl = argc > 4 ? argv[4] : CTL;
	int pause_us = argc > 3 ? atoi(argv[3]) : 0;
	unsigned long writes = 0, failed = 0;
	const char *cmds;
	time_t end;

	if (argc < 3) {
		fprintf(stderr, "usage: requester SECONDS CMDS [CTL]\n");
		return 2;
	}
	end = time(NULL) + atoi(argv[1]);
	cmds = unescape(argv[2]);
	signal(SIGTERM, on_term);
	while (!stop && time(NULL) < end) {
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
		if (pause_us)
			usleep(pause_us);
	}
	printf("writes %lu failed %lu\n", writes, failed);
	return 0;
}
