/*
 * derive.c - files written for where they land: the bytes a type's derive hook gives
 * for a staged file (a Triton group file naming its folder), and whether such a file
 * on disk already holds what the load would write.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "install/install.h"

/* Python's os.path.abspath(root): the current folder before a relative path, then
 * "." and empty components dropped and ".." taken back, lexically. Two leading
 * slashes stay two (POSIX leaves their meaning open), more become one. */
static char *
abs_path(const char *root)
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

int
mc__tier_abs(struct loader *L, size_t tier)
{
	struct tier_root *t = &L->tiers[tier];

	if (t->abs == NULL && (t->abs = abs_path(t->root)) == NULL)
		return errno == ENOMEM ? mc__err(L->ctx, MC_ERR_NOMEM, "out of memory")
				       : mc__errno(L->ctx, MC_ERR_IO, "cannot tell the absolute path "
						   "of the cache folder", t->root);
	return MC_OK;
}

int
mc__derive_for(struct loader *L, mc_ctx *ctx, size_t tier, const struct mc_martifact *a,
	       const char *dir, const unsigned char *rec, size_t n, unsigned char **out,
	       size_t *outn)
{
	const char *root = L->tiers[tier].abs;
	char path[2 * MC_PATH_MAX];
	int k, rc;

	*out = NULL;
	*outn = 0;
	if (root == NULL) /* not reached: mc__tier_abs() ran when the file was planned */
		return mc__err(ctx, MC_ERR_INVALID, "%s: no absolute path", L->tiers[tier].root);
	if (strcmp(dir, ".") == 0)
		k = snprintf(path, sizeof path, "%s", root);
	else
		k = snprintf(path, sizeof path, "%s%s%s", root,
			     root[strlen(root) - 1] == '/' ? "" : "/", dir);
	if (k < 0 || (size_t)k >= sizeof path)
		return mc__err(ctx, MC_ERR_INVALID, "%s/%s: path too long", root, dir);
	if ((rc = a->handler->derive(a->key, rec, n, path, out, outn)) == MC_OK)
		return MC_OK;
	if (rc == MC_ERR_INVALID) /* the path goes into the file as JSON text */
		return mc__err(ctx, rc, "%s: cannot write %s %.200s there: the folder's path is "
			       "not UTF-8", path, a->type, a->key);
	return mc__err(ctx, rc, "%s: cannot write %s %.200s there: %s", path, a->type, a->key,
		       mc_strerror(rc));
}

/* The file base of folder dfd, whole (at most MC_DERIVE_MAX bytes): *buf NULL when it
 * cannot be read or is larger. */
static int
read_small_at(mc_ctx *ctx, int dfd, const char *base, unsigned char **buf, size_t *n)
{
	struct stat st;
	int fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	*buf = NULL;
	if (fd < 0)
		return MC_OK;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size <= MC_DERIVE_MAX) {
		if ((*buf = malloc((size_t)st.st_size + 1)) == NULL) {
			close(fd);
			return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		}
		*n = (size_t)st.st_size;
		if (mc__read_full(fd, *buf, *n) != 0) {
			free(*buf);
			*buf = NULL;
		}
	}
	close(fd);
	return MC_OK;
}

/* Is the derivable file base in folder dir (dfd) of a tier what the load would write?
 * Its recorded form must be the artifact's content, and that form derived for this
 * folder must give the file's bytes. */
int
mc__derived_same(struct loader *L, size_t tier, const struct mc_martifact *a, int dfd,
		 const char *dir, const char *base, int *same)
{
	unsigned char *disk, *canon = NULL, *out = NULL, h[MC_HASH_BYTES];
	const unsigned char *c, *d;
	size_t n = 0, cn = 0, dn = 0;
	struct mc_mobject o;
	int rc;

	*same = 0;
	if ((rc = read_small_at(L->ctx, dfd, base, &disk, &n)) != MC_OK || disk == NULL)
		return rc;
	if ((rc = a->handler->record(a->key, disk, n, &canon, &cn)) != MC_OK) {
		free(disk);
		return mc__err(L->ctx, rc, "out of memory");
	}
	c = canon != NULL ? canon : disk;
	cn = canon != NULL ? cn : n;
	if ((rc = mc__derive_for(L, L->ctx, tier, a, dir, c, cn, &out, &dn)) == MC_OK) {
		d = out != NULL ? out : c;
		dn = out != NULL ? dn : cn;
		if (mc__chash(L->b->m.halg, h, c, cn) != MC_OK)
			rc = mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
		else if (dn == n && memcmp(d, disk, n) == 0 &&
		    (rc = mc__mobjects(L->ctx, &L->b->m, a->object, 1, &o)) == MC_OK)
			*same = memcmp(h, o.hash, sizeof h) == 0;
	}
	free(out);
	free(canon);
	free(disk);
	return rc;
}
