/*
 * parts.c - object contents parked in a temp folder, one file per object named by its
 * index, so that they can be read back in any order with bounded memory (export to a
 * torch blob, merge).
 */
#include "config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "read/read.h"

static int
parts_sink(void *ud, size_t obj, const unsigned char *buf, size_t n)
{
	struct mc_parts *p = ud;
	char name[32];

	if (p->need != NULL && !p->need[obj])
		return MC_OK;
	if (p->fd < 0 || p->cur != obj) {
		if (p->fd >= 0)
			close(p->fd);
		snprintf(name, sizeof name, "%zu", obj);
		p->fd = openat(p->dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (p->fd < 0)
			return mc__errno(p->ctx, MC_ERR_IO, "cannot write (a temp file)", p->name);
		p->cur = obj;
	}
	if (mc__write_all(p->fd, buf, n) != 0)
		return mc__errno(p->ctx, MC_ERR_IO, "cannot write (a temp file)", p->name);
	return MC_OK;
}

int
mc__parts_extract(mc_bundle *b, const char *prefix, const char *name, char *need,
		  struct mc_parts *p)
{
	size_t i;
	int rc;

	memset(p, 0, sizeof *p);
	p->ctx = b->ctx;
	p->name = name;
	p->dfd = -1;
	p->fd = -1;
	p->need = need;
	p->nobjects = b->m.nobjects;
	if ((p->dirpath = malloc(strlen(prefix) + 8)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	sprintf(p->dirpath, "%sXXXXXX", prefix);
	if (mkdtemp(p->dirpath) == NULL) {
		rc = mc__errno(b->ctx, MC_ERR_IO, "cannot write (a temp folder)", name);
		free(p->dirpath);
		p->dirpath = NULL;
		return rc;
	}
	if ((p->dfd = open(p->dirpath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return mc__errno(b->ctx, MC_ERR_IO, "cannot open", p->dirpath);
	/* Empty contents stream no bytes; their parts are made here. */
	for (i = 0; i < b->m.nobjects; i++) {
		struct mc_mobject o;
		if (need != NULL && !need[i])
			continue;
		if ((rc = mc__mobjects(b->ctx, &b->m, i, 1, &o)) != MC_OK ||
		    (o.size == 0 && (rc = parts_sink(p, i, (const unsigned char *)"", 0)) != MC_OK))
			return rc;
	}
	rc = mc__bundle_stream(b, parts_sink, NULL, p);
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	return rc;
}

void
mc__parts_path(const struct mc_parts *p, size_t obj, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%zu", p->dirpath, obj);
}

int
mc__parts_open(const struct mc_parts *p, size_t obj, int *fd)
{
	char name[32];

	snprintf(name, sizeof name, "%zu", obj);
	if ((*fd = openat(p->dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return mc__errno(p->ctx, MC_ERR_IO, "cannot read a temp file in", p->dirpath);
	return MC_OK;
}

void
mc__parts_remove(struct mc_parts *p)
{
	char name[32];
	size_t i;

	if (p->fd >= 0)
		close(p->fd);
	if (p->dfd >= 0) {
		for (i = 0; i < p->nobjects; i++)
			if (p->need == NULL || p->need[i]) {
				snprintf(name, sizeof name, "%zu", i);
				unlinkat(p->dfd, name, 0);
			}
		close(p->dfd);
	}
	if (p->dirpath != NULL)
		rmdir(p->dirpath);
	free(p->dirpath);
	memset(p, 0, sizeof *p);
	p->fd = p->dfd = -1;
}
