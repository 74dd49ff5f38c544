/*
 * fileio.c - small POSIX file helpers: full reads and writes, temp files beside a target
 * (written through a symbolic link to it, keeping its mode) and nameless ones in the temp
 * folder.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "io/io.h"

/* Writes n bytes at off (or, with at_off unset, at the file position). A write a signal
 * interrupts is tried again; with ctx, none is begun once ctx is cancelled (the signal
 * that cancels it interrupts the write under way): then -1, errno ECANCELED. */
static int
write_all(mc_ctx *ctx, int fd, const void *buf, size_t n, int at_off, uint64_t off)
{
	const unsigned char *p = buf;

	while (n > 0) {
		ssize_t w;

		if (ctx != NULL && mc__cancelled(ctx)) {
			errno = ECANCELED;
			return -1;
		}
		if ((w = at_off ? pwrite(fd, p, n, (off_t)off) : write(fd, p, n)) < 0) {
			if (errno != EINTR)
				return -1;
			continue;
		}
		p += w;
		off += (uint64_t)w;
		n -= (size_t)w;
	}
	return 0;
}

int
mc__write_all(int fd, const void *buf, size_t n)
{
	return write_all(NULL, fd, buf, n, 0, 0);
}

int
mc__write_out(mc_ctx *ctx, int fd, const void *buf, size_t n)
{
	return write_all(ctx, fd, buf, n, 0, 0);
}

int
mc__pwrite_full(int fd, const void *buf, size_t n, uint64_t off)
{
	return write_all(NULL, fd, buf, n, 1, off);
}

/* Reads n bytes at off (or, with at_off unset, at the file position). */
static int
read_all(int fd, void *buf, size_t n, int at_off, uint64_t off)
{
	unsigned char *p = buf;

	while (n > 0) {
		ssize_t r = at_off ? pread(fd, p, n, (off_t)off) : read(fd, p, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0) {
			errno = 0;
			return -1;
		}
		p += r;
		off += (uint64_t)r;
		n -= (size_t)r;
	}
	return 0;
}

int
mc__pread_full(int fd, void *buf, size_t n, uint64_t off)
{
	return read_all(fd, buf, n, 1, off);
}

int
mc__read_full(int fd, void *buf, size_t n)
{
	return read_all(fd, buf, n, 0, 0);
}

/* Whether a write may go through the link st at path: not when it sits in a shared
 * folder (sticky and writable by all, as /tmp) and is owned neither by us nor by the
 * folder's owner, the rule the kernel's fs.protected_symlinks holds to: someone else's
 * link there must not aim our output at a file of theirs choosing. */
static int
link_followable(const char *path, const struct stat *st)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash == NULL ? mc__strdup(".") : mc__strdup(path);
	struct stat ds;
	int ok;

	if (dir == NULL)
		return 0;
	if (slash != NULL)
		dir[slash == path ? 1 : slash - path] = '\0';
	ok = stat(dir, &ds) == 0 &&
	     (!(ds.st_mode & S_ISVTX) || !(ds.st_mode & S_IWOTH) || st->st_uid == geteuid() ||
	      st->st_uid == ds.st_uid);
	free(dir);
	return ok;
}

/* The file a write to path lands on, into *out: path, or, when path is a symbolic
 * link, what it points to, followed link by link (at most 40), dangling or not. */
static int
final_path(mc_ctx *ctx, const char *path, char **out)
{
	char *p = mc__strdup(path), *next, link[4096];
	struct stat st;
	ssize_t n;
	int hops;

	for (hops = 0; p != NULL && hops < 40 && lstat(p, &st) == 0 && S_ISLNK(st.st_mode); hops++) {
		const char *slash = strrchr(p, '/');
		size_t dlen;

		if (!link_followable(p, &st)) {
			int rc = mc__err(ctx, MC_ERR_UNSAFE_DEST, "%s: a symbolic link another user owns "
					 "in a shared folder; refusing to write through it", p);
			free(p);
			return rc;
		}
		n = readlink(p, link, sizeof link);
		if (n <= 0 || (size_t)n == sizeof link)
			break;
		dlen = link[0] == '/' || slash == NULL ? 0 : (size_t)(slash - p) + 1;
		if ((next = malloc(dlen + (size_t)n + 1)) != NULL) {
			memcpy(next, p, dlen);
			memcpy(next + dlen, link, (size_t)n);
			next[dlen + (size_t)n] = '\0';
		}
		free(p);
		p = next;
	}
	if ((*out = p) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	return MC_OK;
}

#define TEMP_SUFFIX_LEN 13 /* ".%08x.tmp" */

static int
open_temp(mc_ctx *ctx, const char *path, char **tmp_out, int mode)
{
	size_t n = strlen(path) + 32;
	char *tmp = malloc(n);
	int fd, tries;

	*tmp_out = NULL;
	if (tmp == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	for (tries = 0; tries < 16; tries++) {
		snprintf(tmp, n, "%s.%08x.tmp", path, randombytes_random());
		fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd >= 0) {
			*tmp_out = tmp;
			return fd;
		}
		if (errno != EEXIST)
			break;
	}
	mc__errno(ctx, MC_ERR_IO, "cannot create a temporary file", path);
	free(tmp);
	return -1;
}

/* The new file takes the mode of the file it replaces at target (its permission bits),
 * and, run as root, its owner and group, from the moment it is made; a new target keeps
 * the mode it was made with. */
static int
keep_mode(mc_ctx *ctx, int fd, const char *target, const char *path)
{
	struct stat st;

	if (stat(target, &st) != 0 || !S_ISREG(st.st_mode))
		return MC_OK;
	if (geteuid() == 0 && fchown(fd, st.st_uid, st.st_gid) != 0)
		return mc__errno(ctx, MC_ERR_IO, "cannot give the new file the old one's owner", path);
	if (fchmod(fd, st.st_mode & 0777) != 0)
		return mc__errno(ctx, MC_ERR_IO, "cannot give the new file the old one's mode", path);
	return MC_OK;
}

int
mc__open_temp_beside(mc_ctx *ctx, const char *path, char **tmp_out, int mode)
{
	char *target;
	int fd;

	*tmp_out = NULL;
	if (final_path(ctx, path, &target) != MC_OK)
		return -1;
	if ((fd = open_temp(ctx, target, tmp_out, mode)) >= 0 &&
	    keep_mode(ctx, fd, target, path) != MC_OK) {
		close(fd);
		unlink(*tmp_out);
		free(*tmp_out);
		*tmp_out = NULL;
		fd = -1;
	}
	free(target);
	return fd;
}

int
mc__open_temp_here(mc_ctx *ctx, const char *path, char **tmp_out, int mode)
{
	return open_temp(ctx, path, tmp_out, mode);
}

/* Opens the folder holding path, for its fsync. */
static int
open_parent(mc_ctx *ctx, const char *path, int *dfd)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	int rc = MC_OK;

	if (slash == NULL)
		dir = mc__strdup(".");
	else if ((dir = mc__strdup(path)) != NULL)
		dir[slash == path ? 1 : slash - path] = '\0';
	if (dir == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	if ((*dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		rc = mc__errno(ctx, MC_ERR_IO, "cannot open the folder", dir);
	free(dir);
	return rc;
}

int
mc__commit_temp(mc_ctx *ctx, int fd, const char *tmp, const char *path)
{
	/* The file tmp stands for, beside it: the target mc__open_temp_beside() found. */
	size_t n = strlen(tmp) > TEMP_SUFFIX_LEN ? strlen(tmp) - TEMP_SUFFIX_LEN : 0;
	char *target;
	int dfd = -1, rc;

	if (mc__cancelled(ctx)) { /* the last moment to take it back */
		close(fd);
		unlink(tmp);
		return mc__cancel_err(ctx);
	}
	if ((target = malloc(n + 1)) != NULL) {
		memcpy(target, tmp, n);
		target[n] = '\0';
	}
	/* The folder is opened first: after the rename only its fsync can fail. */
	rc = target == NULL ? mc__err(ctx, MC_ERR_NOMEM, "out of memory")
			    : open_parent(ctx, target, &dfd);
	if (rc == MC_OK && fsync(fd) != 0)
		rc = mc__errno(ctx, MC_ERR_IO, "cannot flush to disk", path);
	if (close(fd) != 0 && rc == MC_OK)
		rc = mc__errno(ctx, MC_ERR_IO, "cannot write", path);
	if (rc == MC_OK && rename(tmp, target) != 0)
		rc = mc__errno(ctx, MC_ERR_IO, "cannot rename into place", path);
	if (rc != MC_OK) {
		unlink(tmp);
	} else if (fsync(dfd) != 0) {
		/* Too late to take back: the new file is in place, but a power cut may yet
		 * undo the rename. */
		rc = mc__errno(ctx, MC_ERR_IO, "in place, but its folder cannot be flushed to disk",
			       path);
	}
	if (dfd >= 0)
		close(dfd);
	free(target);
	return rc;
}

const char *
mc__tmpdir(void)
{
	const char *dir = getenv("TMPDIR");

	return dir != NULL && *dir != '\0' ? dir : "/tmp";
}

int
mc__open_temp_anon(mc_ctx *ctx)
{
	const char *dir = mc__tmpdir();
	char *tmp;
	int fd;

#ifdef O_TMPFILE
	fd = open(dir, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) {
		if (fd < 0)
			mc__errno(ctx, MC_ERR_IO, "cannot create a temporary file", dir);
		return fd;
	}
#endif
	{
		size_t n = strlen(dir) + sizeof "/megacache";
		char *base = malloc(n);
		if (base == NULL) {
			mc__err(ctx, MC_ERR_NOMEM, "out of memory");
			return -1;
		}
		snprintf(base, n, "%s/megacache", dir);
		fd = open_temp(ctx, base, &tmp, 0600); /* $TMPDIR/megacache: no link followed */
		free(base);
	}
	if (fd >= 0) {
		unlink(tmp);
		free(tmp);
	}
	return fd;
}

/* Opens a file to read that must be a regular file. O_NONBLOCK keeps a FIFO without
 * a writer (or a device) from blocking the open; it is cleared once the file is known
 * to be regular. */
int
mc__open_regular(mc_ctx *ctx, const char *path, int *fd, struct stat *st)
{
	int flags;

	if ((*fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)) < 0)
		return mc__errno(ctx, MC_ERR_IO, "cannot open", path);
	if (fstat(*fd, st) != 0 || !S_ISREG(st->st_mode)) {
		close(*fd);
		*fd = -1;
		return mc__err(ctx, MC_ERR_IO, "%s: not a regular file", path);
	}
	if ((flags = fcntl(*fd, F_GETFL)) < 0 || fcntl(*fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
		int rc = mc__errno(ctx, MC_ERR_IO, "cannot open", path);
		close(*fd);
		*fd = -1;
		return rc;
	}
	return MC_OK;
}

int
mc__check_input(mc_ctx *ctx, int fd, const char *path, struct stat *st)
{
	if (fstat(fd, st) != 0)
		return mc__errno(ctx, MC_ERR_IO, "cannot read", path);
	if (S_ISDIR(st->st_mode))
		return mc__err(ctx, MC_ERR_IO, "%s: is a folder, not a bundle", path);
	if (isatty(fd))
		return mc__err(ctx, MC_ERR_INVALID, "%s: is a terminal; pipe a bundle in or name a file",
			       path);
	return MC_OK;
}

int
mc__open_input(mc_ctx *ctx, const char *path, int *fd, struct stat *st)
{
	struct stat first;
	int rc, flags, fifo = stat(path, &first) == 0 && S_ISFIFO(first.st_mode);

	/* A FIFO is opened waiting for its writer, as any reader of one does; anything else
	 * without waiting (a device), the flag cleared once it is open. */
	if ((*fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | (fifo ? 0 : O_NONBLOCK))) < 0)
		return mc__errno(ctx, MC_ERR_IO, "cannot open", path);
	rc = mc__check_input(ctx, *fd, path, st);
	if (rc == MC_OK && !fifo && ((flags = fcntl(*fd, F_GETFL)) < 0 ||
				     fcntl(*fd, F_SETFL, flags & ~O_NONBLOCK) < 0))
		rc = mc__errno(ctx, MC_ERR_IO, "cannot open", path);
	if (rc != MC_OK) {
		close(*fd);
		*fd = -1;
	}
	return rc;
}

int
mc__read_small_file(mc_ctx *ctx, const char *path, size_t max, char **buf, size_t *len)
{
	struct stat st;
	char *b;
	int fd, rc;

	*buf = NULL;
	*len = 0;
	if ((rc = mc__open_regular(ctx, path, &fd, &st)) != MC_OK)
		return rc;
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return mc__err(ctx, MC_ERR_KEYFILE, "%s: file too large (%lld bytes, at most %zu)", path,
			       (long long)st.st_size, max);
	}
	b = malloc((size_t)st.st_size + 1);
	if (b == NULL) {
		close(fd);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	if (mc__read_full(fd, b, (size_t)st.st_size) != 0) {
		rc = mc__errno(ctx, MC_ERR_IO, "cannot read", path);
		close(fd);
		free(b);
		return rc;
	}
	close(fd);
	b[st.st_size] = '\0';
	*buf = b;
	*len = (size_t)st.st_size;
	return MC_OK;
}

/* Python's os.path.abspath(root): the current folder before a relative path, then
 * "." and empty components dropped and ".." taken back, lexically. Two leading
 * slashes stay two (POSIX leaves their meaning open), more become one. */
char *
mc__abs_path(const char *root)
{
	char cwd[MC_PATH_MAX], *in, *out;
	size_t n, o, i, j, lead;

	if (root[0] != '/' && getcwd(cwd, sizeof cwd) == NULL)
		return NULL;
	n = strlen(root) + (root[0] != '/' ? strlen(cwd) + 1 : 0) + 1;
	if ((in = malloc(n)) == NULL || (out = malloc(n + 2)) == NULL) {
		free(in);
		return NULL;
	}
	if (root[0] == '/')
		snprintf(in, n, "%s", root);
	else
		snprintf(in, n, "%s/%s", cwd, root);
	lead = in[1] == '/' && in[2] != '/' ? 2 : 1;
	memset(out, '/', lead);
	for (o = lead, i = 0; in[i] != '\0'; i = j) {
		i += strspn(in + i, "/");
		if ((j = i + strcspn(in + i, "/")) == i || (j - i == 1 && in[i] == '.'))
			continue;
		if (j - i == 2 && in[i] == '.' && in[i + 1] == '.') {
			while (o > lead && out[o - 1] != '/')
				o--;
			if (o > lead)
				o--;
			continue;
		}
		if (o > lead)
			out[o++] = '/';
		memcpy(out + o, in + i, j - i);
		o += j - i;
	}
	out[o] = '\0';
	free(in);
	return out;
}
