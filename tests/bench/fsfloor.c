/*
 * fsfloor.c - the file system's part of a load, alone: makes the tree of SRC again under
 * DST (which must not exist) from memory, with THREADS threads: every folder made, then
 * every file created, written in one call and closed, the threads taking folders in
 * turn. No decompression, no hashing, no renames: what a loader cannot go below on this
 * machine. Prints the seconds of each step.
 *   fsfloor SRC DST THREADS
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct file {
	char *path; /* relative to the top */
	size_t size;
	size_t dir; /* index of its folder */
};

static char **dirs;
static size_t ndirs, dircap;
static struct file *files;
static size_t nfiles, filecap;
static size_t maxsize;
static int dstfd;
static const unsigned char *content;
static size_t *first; /* per folder: its first file in files, sorted by folder */
static _Atomic size_t next;

static void
die(const char *what, const char *path)
{
	fprintf(stderr, "fsfloor: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

static void
scan(const char *top, const char *rel)
{
	char path[16384];
	struct dirent *e;
	DIR *d;
	size_t self = ndirs;

	snprintf(path, sizeof path, "%s/%s", top, rel);
	if ((d = opendir(path)) == NULL)
		die("cannot read", path);
	if (ndirs == dircap && (dirs = realloc(dirs, (dircap = dircap ? 2 * dircap : 256) * sizeof *dirs)) == NULL)
		die("out of memory", "");
	dirs[ndirs++] = strdup(rel);
	while ((e = readdir(d)) != NULL) {
		struct stat st;
		char sub[8192];

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name);
		snprintf(path, sizeof path, "%s/%s", top, sub);
		if (lstat(path, &st) != 0)
			die("cannot stat", path);
		if (S_ISDIR(st.st_mode)) {
			scan(top, sub);
		} else if (S_ISREG(st.st_mode)) {
			if (nfiles == filecap &&
			    (files = realloc(files, (filecap = filecap ? 2 * filecap : 1024) * sizeof *files)) == NULL)
				die("out of memory", "");
			files[nfiles].path = strdup(sub);
			files[nfiles].size = (size_t)st.st_size;
			files[nfiles++].dir = self;
			if ((size_t)st.st_size > maxsize)
				maxsize = (size_t)st.st_size;
		}
	}
	closedir(d);
}

static int
by_dir(const void *a, const void *b)
{
	const struct file *x = a, *y = b;

	return x->dir < y->dir ? -1 : x->dir > y->dir;
}

static void *
make_files(void *arg)
{
	size_t k;

	(void)arg;
	while ((k = atomic_fetch_add(&next, 1)) < ndirs) {
		size_t i;
		int dfd = k == 0 ? dup(dstfd) : openat(dstfd, dirs[k], O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (dfd < 0)
			die("cannot open", dirs[k]);
		for (i = first[k]; i < first[k + 1]; i++) {
			const char *name = strrchr(files[i].path, '/');
			int fd = openat(dfd, name ? name + 1 : files[i].path,
					O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
			if (fd < 0)
				die("cannot create", files[i].path);
			if (files[i].size > 0 && write(fd, content, files[i].size) != (ssize_t)files[i].size)
				die("cannot write", files[i].path);
			if (close(fd) != 0)
				die("cannot close", files[i].path);
		}
		close(dfd);
	}
	return NULL;
}

static double
now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int
main(int argc, char **argv)
{
	pthread_t *th;
	unsigned char *buf;
	double t0, t1, t2;
	size_t i, d;
	int n;

	if (argc != 4 || (n = atoi(argv[3])) < 1) {
		fprintf(stderr, "usage: fsfloor SRC DST THREADS\n");
		return 2;
	}
	scan(argv[1], "");
	qsort(files, nfiles, sizeof *files, by_dir);
	if ((first = calloc(ndirs + 1, sizeof *first)) == NULL || (th = calloc((size_t)n, sizeof *th)) == NULL ||
	    (buf = malloc(maxsize + 1)) == NULL)
		die("out of memory", "");
	for (i = 0; i <= maxsize; i++)
		buf[i] = (unsigned char)(i * 131 + 7);
	content = buf;
	for (i = 0, d = 0; d <= ndirs; d++) {
		while (i < nfiles && files[i].dir < d)
			i++;
		first[d] = i;
	}
	if (mkdir(argv[2], 0777) != 0 || (dstfd = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		die("cannot make", argv[2]);
	t0 = now();
	for (d = 1; d < ndirs; d++) /* parents come before their folders */
		if (mkdirat(dstfd, dirs[d], 0777) != 0)
			die("cannot make", dirs[d]);
	t1 = now();
	for (i = 0; i < (size_t)n; i++)
		pthread_create(&th[i], NULL, make_files, NULL);
	for (i = 0; i < (size_t)n; i++)
		pthread_join(th[i], NULL);
	t2 = now();
	printf("%zu files in %zu folders, %d threads: folders %.3f s, files %.3f s, total %.3f s\n",
	       nfiles, ndirs, n, t1 - t0, t2 - t1, t2 - t0);
	return 0;
}
