/*
 * merge.c - records the artifacts and labels of an existing bundle into a writer, so
 * that several bundles (one per rank, say) become one.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "write/write.h"

static void
parts_cleanup(void *arg)
{
	struct mc_parts *p = arg;

	mc__parts_remove(p);
	free(p);
}

int
mc_writer_add_bundle(mc_writer *w, mc_bundle *b, const char *spool_dir)
{
	mc_ctx *ctx;
	struct mc_parts *p;
	char prefix[MC_PATH_MAX], path[MC_PATH_MAX];
	struct mc_acur cur;
	size_t i;
	int rc;

	if (w == NULL || b == NULL || spool_dir == NULL)
		return MC_ERR_INVALID;
	ctx = mc__writer_ctx(w);
	if (strlen(spool_dir) > MC_PATH_MAX - 64)
		return mc__err(ctx, MC_ERR_INVALID, "spool folder path too long");
	if ((p = calloc(1, sizeof *p)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	p->fd = p->dfd = -1;
	snprintf(prefix, sizeof prefix, "%s/.megacache-merge-", spool_dir);
	if ((rc = mc__bundle_policy(b)) == MC_OK)
		rc = mc__parts_extract(b, prefix, spool_dir, NULL, p);
	/* The writer removes the parked contents when it is freed, whatever happens now. */
	if (mc__writer_adopt(w, parts_cleanup, p) != MC_OK) {
		parts_cleanup(p);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	if (rc != MC_OK) {
		if (b->ctx != ctx) {
			char msg[MC_ERRBUF];
			snprintf(msg, sizeof msg, "%s", b->ctx->err);
			mc__err(ctx, rc, "%s", msg);
		}
		return rc;
	}
	mc__acur_init(&cur, b->ctx, &b->m, mc__find_type);
	for (i = 0; i < b->m.nartifacts; i++) {
		const struct mc_martifact *a;
		char key[MC_KEY_MAX + 1];

		if ((rc = mc__acur_get(&cur, i, &a)) != MC_OK) {
			mc__acur_free(&cur);
			return ctx == b->ctx ? rc : mc__err(ctx, rc, "%s", b->ctx->err);
		}
		mc__parts_path(p, a->object, path, sizeof path);
		/* an entry an older bundle keys by torch's key alone gets its entry */
		mc__entry_key(a->handler, a->key, a->sha256, key, sizeof key);
		if ((rc = mc__writer_add_range(w, a->type, key, path, 0, a->size,
					       a->executable ? MC_WADD_EXEC : 0, NULL)) != MC_OK) {
			mc__acur_free(&cur);
			return rc;
		}
	}
	mc__acur_free(&cur);
	for (i = 0; i < b->m.nlabels; i++)
		if ((rc = mc_writer_set_label(w, b->m.labels[i].key, b->m.labels[i].value)) != MC_OK)
			return rc;
	mc__writer_note_source(w, b->m.nartifacts);
	return MC_OK;
}
