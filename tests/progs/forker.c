// SPDX-License-Identifier: GPL-2.0
/*
 * forker N fork|thread 'CMDS' [CTL]: create N short-lived tasks (processes or threads,
 * at most 32 alive at once); each writes CMDS to the client's ctl with a raw syscall and
 * exits at once. Prints "tasks N ok M" (M writes succeeded).
 */
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "ud.h"

#define BATCH 32

static int ctl_fd;
static const char *cmds;

static __attribute__((noinline)) long one_request(void)
{
	return raw_write(ctl_fd, cmds);
}

static void *thread_fn(void *arg)
{
	return (void *)(one_request() > 0 ? 1L : 0L);
}

int main(int argc, char **argv)
{
	long n, done = 0, ok = 0, i;
	pthread_attr_t attr;
	int threads;

	if (argc < 4) {
		fprintf(stderr, "usage: forker N fork|thread CMDS [CTL]\n");
		return 2;
	}
	n = atol(argv[1]);
	threads = !strcmp(argv[2], "thread");
	cmds = unescape(argv[3]);
	ctl_fd = open_ctl(argc, argv, 4);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	while (done < n) {
		long batch = n - done < BATCH ? n - done : BATCH;
		pthread_t tid[BATCH];
		void *res;
		int status;

		for (i = 0; i < batch; i++) {
			if (threads) {
				if (pthread_create(&tid[i], &attr, thread_fn, NULL)) {
					perror("pthread_create");
					return 1;
				}
				continue;
			}
			pid_t pid = fork();

			if (pid < 0) {
				perror("fork");
				return 1;
			}
			if (pid == 0)
				raw_syscall3(SYS_exit_group, one_request() > 0 ? 0 : 1, 0, 0);
		}
		for (i = 0; i < batch; i++) {
			if (threads) {
				pthread_join(tid[i], &res);
				ok += (long)res;
			} else if (wait(&status) > 0 && WIFEXITED(status) && !WEXITSTATUS(status)) {
				ok++;
			}
		}
		done += batch;
	}
	printf("tasks %ld ok %ld\n", n, ok);
	return 0;
}
