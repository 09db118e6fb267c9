// SPDX-License-Identifier: GPL-2.0
/*
 * optwriters FILE THREADS ROUNDS: THREADS threads each open FILE (an instance's
 * trace_options) once; in each round they all wait on a barrier, write
 * "userstacktrace_delay", wait again and write "nouserstacktrace_delay". Prints
 * "writes N failed M" (and the first error); exits 1 if any write failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_barrier_t barrier;
static const char *file;
static int rounds;
static int failed, writes, first_errno;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void put(int fd, const char *s)
{
	ssize_t ret = write(fd, s, strlen(s));

	pthread_mutex_lock(&lock);
	writes++;
	if (ret != (ssize_t)strlen(s)) {
		failed++;
		if (!first_errno)
			first_errno = ret < 0 ? errno : -1;
	}
	pthread_mutex_unlock(&lock);
}

static void *writer(void *arg)
{
	int fd = open(file, O_WRONLY), i;

	if (fd < 0) {
		perror(file);
		exit(2);
	}
	for (i = 0; i < rounds; i++) {
		pthread_barrier_wait(&barrier);
		put(fd, "userstacktrace_delay");
		pthread_barrier_wait(&barrier);
		put(fd, "nouserstacktrace_delay");
	}
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t *threads;
	int i, n;

	if (argc < 4) {
		fprintf(stderr, "usage: optwriters FILE THREADS ROUNDS\n");
		return 2;
	}
	file = argv[1];
	n = atoi(argv[2]);
	rounds = atoi(argv[3]);
	threads = calloc(n, sizeof(*threads));
	pthread_barrier_init(&barrier, NULL, n);
	for (i = 0; i < n; i++)
		pthread_create(&threads[i], NULL, writer, NULL);
	for (i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
	printf("writes %d failed %d", writes, failed);
	if (failed)
		printf(" (first: %s)", first_errno > 0 ? strerror(first_errno) : "short write");
	printf("\n");
	return failed != 0;
}
