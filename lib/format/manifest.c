/*
 * manifest.c - the bundle manifest as the library holds it: freeing it, reading its
 * object and artifact tables (in memory, or spilled to temp files), and the rules
 * for labels. Its text is made in mrender.c and read in mparse.c.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/format.h"

#define LABEL_KEY_MAX 64
#define LABEL_VALUE_MAX 1024

int
mc__label_key_ok(const char *k)
{
	size_t n = strlen(k), i;

	if (n == 0 || n > LABEL_KEY_MAX)
		return 0;
	for (i = 0; i < n; i++) {
		char c = k[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return 0;
	}
	return 1;
}

int
mc__label_value_ok(const char *v, char *why, size_t whylen)
{
	size_t n = strlen(v);
	uint32_t cp;

	if (n > LABEL_VALUE_MAX) {
		snprintf(why, whylen, "is longer than %d bytes", LABEL_VALUE_MAX);
		return 0;
	}
	switch (mc__text_check(v, n, 0, &cp)) {
	case -1:
		snprintf(why, whylen, "is not valid UTF-8");
		return 0;
	case 1:
		snprintf(why, whylen, "contains control character U+%04X", (unsigned)cp);
		return 0;
	default:
		return 1;
	}
}

static int
temp_read_error(mc_ctx *ctx, const char *what)
{
	return mc__err(ctx, MC_ERR_IO, "cannot read the %s's temporary file: %s", what,
		       errno != 0 ? strerror(errno) : "unexpected end of file");
}

void
mc__manifest_free(struct mc_manifest *m)
{
	size_t i, j;

	for (i = 0; i < m->nlabels; i++) {
		free(m->labels[i].key);
		free(m->labels[i].value);
	}
	free(m->labels);
	mc__strv_free(m->gpu_targets, m->ngpu_targets);
	mc__arena_free(&m->strings);
	free(m->artifacts);
	for (i = 0; i < m->ngroups; i++) {
		for (j = 0; j < m->groups[i].nentries; j++)
			free(m->groups[i].entries[j].key);
		free(m->groups[i].entries);
		free(m->groups[i].type);
	}
	free(m->groups);
	free(m->objects);
	if (m->ospilled)
		close(m->objfd);
	if (m->spilled) {
		close(m->artfd);
		close(m->keyfd);
	}
	free(m->oprefix);
	free(m->oorder);
	free(m->dup);
	free(m->blocks);
	free(m->types);
	memset(m, 0, sizeof *m);
}

int
mc__mobjects(mc_ctx *ctx, const struct mc_manifest *m, size_t first, size_t n,
	     struct mc_mobject *out)
{
	if (!m->ospilled) {
		memcpy(out, m->objects + first, n * sizeof *out);
		return MC_OK;
	}
	if (mc__pread_full(m->objfd, out, n * sizeof *out, (uint64_t)first * sizeof *out) != 0)
		return temp_read_error(ctx, "object table");
	return MC_OK;
}

void
mc__acur_init(struct mc_acur *c, mc_ctx *ctx, const struct mc_manifest *m,
	      mc_type_lookup lookup)
{
	memset(c, 0, sizeof *c);
	c->ctx = ctx;
	c->m = m;
	c->lookup = lookup;
}

void
mc__acur_free(struct mc_acur *c)
{
	free(c->rec);
	free(c->keys);
	memset(c, 0, sizeof *c);
}

/* Reads the records from i on, and their keys in one piece: a batch when the reads go
 * forwards, else the one record. */
static int
acur_fill(struct mc_acur *c, size_t i)
{
	const struct mc_manifest *m = c->m;
	size_t n = m->nartifacts - i < MC_ACUR_BATCH ? m->nartifacts - i : MC_ACUR_BATCH, k;
	uint64_t from, to;

	if (c->n > 0 && i != c->first + c->n)
		n = 1;
	c->n = 0;
	if (c->rec == NULL && (c->rec = malloc(MC_ACUR_BATCH * sizeof *c->rec)) == NULL)
		return mc__err(c->ctx, MC_ERR_NOMEM, "out of memory");
	if (mc__pread_full(m->artfd, c->rec, n * sizeof *c->rec, (uint64_t)i * sizeof *c->rec) != 0)
		return temp_read_error(c->ctx, "artifact table");
	/* The parse wrote them, so they are in order and in range; checked anyway, as the
	 * keys' buffer is sized from them. */
	from = c->rec[0].key_off;
	to = c->rec[n - 1].key_off + c->rec[n - 1].key_len + 1;
	for (k = 0; k < n; k++)
		if (c->rec[k].key_off < from || c->rec[k].key_off + c->rec[k].key_len + 1 > to ||
		    c->rec[k].key_len > MC_KEY_MAX || c->rec[k].type >= m->ntypes)
			return mc__err(c->ctx, MC_ERR_IO, "the artifact table's temporary file is "
				       "damaged");
	if (to - from > c->keycap) {
		char *p = realloc(c->keys, (size_t)(to - from));
		if (p == NULL)
			return mc__err(c->ctx, MC_ERR_NOMEM, "out of memory");
		c->keys = p;
		c->keycap = (size_t)(to - from);
	}
	if (mc__pread_full(m->keyfd, c->keys, (size_t)(to - from), from) != 0)
		return temp_read_error(c->ctx, "artifact table");
	for (k = 0; k < n; k++)
		if (c->keys[c->rec[k].key_off - from + c->rec[k].key_len] != '\0')
			return mc__err(c->ctx, MC_ERR_IO, "the artifact table's temporary file is "
				       "damaged");
	c->first = i;
	c->n = n;
	return MC_OK;
}

int
mc__acur_get(struct mc_acur *c, size_t i, const struct mc_martifact **out)
{
	const struct mc_manifest *m = c->m;
	struct mc_martifact *a = &c->a;
	int rc;

	*out = NULL;
	if (!m->spilled) {
		*a = m->artifacts[i];
	} else {
		const struct mc_arec *r;
		if ((i < c->first || i >= c->first + c->n) && (rc = acur_fill(c, i)) != MC_OK)
			return rc;
		r = &c->rec[i - c->first];
		a->type = m->types[r->type];
		a->key = c->keys + (r->key_off - c->rec[0].key_off);
		a->size = r->size;
		a->sha256 = r->has_sha ? r->sha256 : NULL;
		a->object = (size_t)r->object;
		a->executable = r->executable != 0;
	}
	if (a->type != c->htype) { /* a run of one type shares its string */
		c->htype = a->type;
		c->handler = c->lookup != NULL ? c->lookup(c->ctx, a->type) : NULL;
	}
	a->handler = c->handler;
	*out = a;
	return MC_OK;
}
