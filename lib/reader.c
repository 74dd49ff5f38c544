/*
 * reader.c - opens a bundle and reads it strictly: the manifest, the signatures, then
 * each object in the order the manifest implies, checking every header, size, hash,
 * padding byte and the end of the archive. Also the trust policy.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "bundle_private.h"

#define SIG_MEMBER_MAX 16384
#define SIG_COUNT_MAX 64

static int
read_padding(mc_bundle *b, uint64_t size, const char *member)
{
	unsigned char pad[MC_TAR_BLOCK];
	size_t n = (size_t)((MC_TAR_BLOCK - size % MC_TAR_BLOCK) % MC_TAR_BLOCK), i;
	int rc;

	if (n == 0)
		return MC_OK;
	if ((rc = mc__zin_read(b->z, pad, n)) != MC_OK)
		return rc;
	for (i = 0; i < n; i++)
		if (pad[i] != 0)
			return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: nonzero padding after member %.100s",
				       b->path, member);
	return MC_OK;
}

/* Reads the next header: MC_OK with name and size, 1 at the end-of-archive block. */
static int
next_header(mc_bundle *b, char *name, uint64_t *size)
{
	unsigned char h[MC_TAR_BLOCK];
	int rc;

	if ((rc = mc__zin_read(b->z, h, sizeof h)) != MC_OK)
		return rc;
	rc = mc__tar_header_parse(b->ctx, h, name, size);
	if (rc < 0) {
		char msg[MC_ERRBUF];
		snprintf(msg, sizeof msg, "%s", b->ctx->err);
		return mc__err(b->ctx, rc, "%s: %s", b->path, msg);
	}
	return rc;
}

static int
sig_name_ok(const char *name, char id[17])
{
	size_t pl = strlen(MC_MEMBER_SIG_PREFIX), i;

	if (strlen(name) != pl + 16 + strlen(MC_MEMBER_SIG_SUFFIX) ||
	    strncmp(name, MC_MEMBER_SIG_PREFIX, pl) != 0 ||
	    strcmp(name + pl + 16, MC_MEMBER_SIG_SUFFIX) != 0)
		return 0;
	for (i = 0; i < 16; i++) {
		char c = name[pl + i];
		if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'F')))
			return 0;
		id[i] = c;
	}
	id[16] = '\0';
	return 1;
}

static int
read_member(mc_bundle *b, const char *name, uint64_t size, unsigned char **out)
{
	unsigned char *buf = malloc(size + 1);
	int rc;

	*out = NULL;
	if (buf == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	if ((rc = mc__zin_read(b->z, buf, (size_t)size)) != MC_OK ||
	    (rc = read_padding(b, size, name)) != MC_OK) {
		free(buf);
		return rc;
	}
	buf[size] = '\0';
	*out = buf;
	return MC_OK;
}

/* (Re)starts the stream and reads the manifest and signatures. The first time they
 * are kept; later passes must see the same bytes. */
static int
open_stream(mc_bundle *b)
{
	int first = b->mbytes == NULL;
	char name[101], prev[101] = "";
	unsigned char *buf;
	uint64_t size;
	size_t nsig = 0;
	int rc;

	mc__zin_free(b->z);
	b->z = NULL;
	b->fresh = 0;
	if (lseek(b->fd, 0, SEEK_SET) != 0)
		return mc__errno(b->ctx, MC_ERR_IO, "cannot seek", b->path);
	if ((rc = mc__zin_new(b->ctx, b->fd, b->path, &b->z)) != MC_OK)
		return rc;
	if ((rc = next_header(b, name, &size)) != MC_OK) {
		if (rc == 1)
			rc = mc__err(b->ctx, MC_ERR_MALFORMED, "%s: empty archive", b->path);
		return rc;
	}
	if (strcmp(name, MC_MEMBER_MANIFEST) != 0)
		return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: first member is '%.100s', not %s", b->path,
			       name, MC_MEMBER_MANIFEST);
	if (size > b->ctx->max_manifest)
		return mc__err(b->ctx, MC_ERR_LIMIT, "%s: manifest of %llu bytes is over the cap of %llu",
			       b->path, (unsigned long long)size,
			       (unsigned long long)b->ctx->max_manifest);
	if ((rc = read_member(b, name, size, &buf)) != MC_OK)
		return rc;
	if (first) {
		b->mbytes = buf;
		b->mlen = (size_t)size;
		if ((rc = mc__manifest_parse(b->ctx, buf, b->mlen, &b->m)) != MC_OK) {
			char msg[MC_ERRBUF];
			snprintf(msg, sizeof msg, "%s", b->ctx->err);
			return mc__err(b->ctx, rc, "%s: %s", b->path, msg);
		}
	} else {
		int same = size == b->mlen && memcmp(buf, b->mbytes, b->mlen) == 0;
		free(buf);
		if (!same)
			return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: changed while being read", b->path);
	}
	for (;;) {
		char id[17];

		if ((rc = next_header(b, name, &size)) < 0)
			return rc;
		if (rc == 1) {
			b->pending_end = 1;
			break;
		}
		if (strncmp(name, MC_MEMBER_SIG_PREFIX, strlen(MC_MEMBER_SIG_PREFIX)) != 0) {
			memcpy(b->pending, name, sizeof b->pending);
			b->pending_size = size;
			b->pending_end = 0;
			break;
		}
		if (!sig_name_ok(name, id))
			return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: bad signature member name '%.100s'",
				       b->path, name);
		if (strcmp(name, prev) <= 0)
			return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: signature members out of order or "
				       "repeated at '%s'", b->path, name);
		memcpy(prev, name, sizeof prev);
		if (size > SIG_MEMBER_MAX || nsig >= SIG_COUNT_MAX)
			return mc__err(b->ctx, MC_ERR_LIMIT, "%s: signature member too large or too many "
				       "signatures", b->path);
		if ((rc = read_member(b, name, size, &buf)) != MC_OK)
			return rc;
		if (first) {
			struct mc_bsig *s = realloc(b->sigs, (b->nsigs + 1) * sizeof *s);
			if (s == NULL) {
				free(buf);
				return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
			}
			b->sigs = s;
			s = &b->sigs[b->nsigs];
			memset(s, 0, sizeof *s);
			if ((rc = mc__sig_parse(b->ctx, (const char *)buf, (size_t)size, 1, &s->sig)) != MC_OK) {
				char msg[MC_ERRBUF];
				snprintf(msg, sizeof msg, "%s", b->ctx->err);
				free(buf);
				return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: member %s: %s", b->path, name, msg);
			}
			s->text = (char *)buf;
			s->len = (size_t)size;
			b->nsigs++;
			if (strcmp(s->sig.id, id) != 0)
				return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: member %s holds a signature by "
					       "key %s", b->path, name, s->sig.id);
		} else {
			int same = nsig < b->nsigs && size == b->sigs[nsig].len &&
				   memcmp(buf, b->sigs[nsig].text, (size_t)size) == 0;
			free(buf);
			if (!same)
				return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: changed while being read", b->path);
		}
		nsig++;
	}
	if (!first && nsig != b->nsigs)
		return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: changed while being read", b->path);
	b->fresh = 1;
	return MC_OK;
}

int
mc_bundle_open(mc_ctx *ctx, const char *path, mc_bundle **out)
{
	mc_bundle *b;
	struct stat st;
	int rc;

	if (ctx == NULL || path == NULL || out == NULL)
		return MC_ERR_INVALID;
	*out = NULL;
	if ((b = calloc(1, sizeof *b)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	b->ctx = ctx;
	b->threshold = 1;
	b->fd = -1;
	if ((b->path = mc__strdup(path)) == NULL) {
		mc_bundle_free(b);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	if ((b->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		rc = mc__errno(ctx, MC_ERR_IO, "cannot open", path);
		mc_bundle_free(b);
		return rc;
	}
	if (fstat(b->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		mc_bundle_free(b);
		return mc__err(ctx, MC_ERR_IO, "%s: not a regular file", path);
	}
	if ((rc = open_stream(b)) != MC_OK) {
		mc_bundle_free(b);
		return rc;
	}
	*out = b;
	return MC_OK;
}

void
mc_bundle_free(mc_bundle *b)
{
	size_t i;

	if (b == NULL)
		return;
	mc__zin_free(b->z);
	mc__zdec_free(b->dec);
	if (b->fd >= 0)
		close(b->fd);
	free(b->path);
	free(b->mbytes);
	mc__manifest_free(&b->m);
	for (i = 0; i < b->nsigs; i++) {
		mc__sig_clear(&b->sigs[i].sig);
		free(b->sigs[i].text);
	}
	free(b->sigs);
	free(b->trusted);
	for (i = 0; i < b->nrequired; i++) {
		free(b->required[i].key);
		free(b->required[i].value);
	}
	free(b->required);
	for (i = 0; i < b->ntypes; i++)
		free(b->types[i]);
	free(b->types);
	free(b);
}

struct objstate {
	mc_bundle *b;
	size_t obj;
	mc_obj_sink sink;
	void *ud;
	uint64_t produced;
	crypto_generichash_state gs;
};

/* Decompressed bytes: counted against the declared size, hashed, passed on. */
static int
content_out(void *p, const unsigned char *buf, size_t n)
{
	struct objstate *st = p;
	const struct mc_mobject *o = &st->b->m.objects[st->obj];

	if (n > o->size - st->produced)
		return mc__err(st->b->ctx, MC_ERR_INTEGRITY, "%s: object %s expands past its declared "
			       "%llu bytes", st->b->path, o->hash_hex, (unsigned long long)o->size);
	st->produced += n;
	crypto_generichash_update(&st->gs, buf, n);
	return st->sink != NULL ? st->sink(st->ud, st->obj, buf, n) : MC_OK;
}

static int
read_object(mc_bundle *b, size_t i, mc_obj_sink sink, mc_obj_sink raw, void *ud, unsigned char *buf,
	    uint64_t *done, uint64_t total)
{
	const struct mc_mobject *o = &b->m.objects[i];
	unsigned char hash[MC_HASH_BYTES];
	crypto_generichash_state sgs;
	struct objstate st;
	uint64_t left;
	int rc = MC_OK, ended = 0;

	memset(&st, 0, sizeof st);
	st.b = b;
	st.obj = i;
	st.sink = sink;
	st.ud = ud;
	crypto_generichash_init(&st.gs, NULL, 0, MC_HASH_BYTES);
	crypto_generichash_init(&sgs, NULL, 0, MC_HASH_BYTES);
	if (o->encoding == MC_ENC_ZSTD) {
		if (b->dec == NULL && (rc = mc__zdec_new(b->ctx, &b->dec)) != MC_OK)
			return rc;
		mc__zdec_reset(b->dec);
	}
	for (left = o->stored_size; left > 0 && rc == MC_OK;) {
		size_t n = left < MC_IO_CHUNK ? (size_t)left : MC_IO_CHUNK;
		if ((rc = mc__zin_read(b->z, buf, n)) != MC_OK)
			break;
		crypto_generichash_update(&sgs, buf, n);
		if (raw != NULL && (rc = raw(ud, i, buf, n)) != MC_OK)
			break;
		if (o->encoding == MC_ENC_ZSTD)
			rc = mc__zdec_run(b->dec, buf, n, content_out, &st, &ended);
		else
			rc = content_out(&st, buf, n);
		left -= n;
		*done += n;
		mc__progress(b->ctx, "verify", *done, total);
	}
	if (rc == MC_OK && o->encoding == MC_ENC_ZSTD && !ended)
		rc = mc__zdec_run(b->dec, NULL, 0, content_out, &st, &ended);
	if (rc != MC_OK) {
		if (rc == MC_ERR_MALFORMED && strncmp(b->ctx->err, b->path, strlen(b->path)) != 0) {
			char msg[MC_ERRBUF];
			snprintf(msg, sizeof msg, "%s", b->ctx->err);
			rc = mc__err(b->ctx, rc, "%s: object %s: %s", b->path, o->hash_hex, msg);
		}
		return rc;
	}
	crypto_generichash_final(&sgs, hash, sizeof hash);
	if (sodium_memcmp(hash, o->stored_hash, sizeof hash) != 0)
		return mc__err(b->ctx, MC_ERR_INTEGRITY, "%s: object %s: stored bytes do not match "
			       "their hash", b->path, o->hash_hex);
	if (o->encoding == MC_ENC_ZSTD && !ended)
		return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: object %s: compressed data ends early",
			       b->path, o->hash_hex);
	if (st.produced != o->size)
		return mc__err(b->ctx, MC_ERR_INTEGRITY, "%s: object %s is %llu bytes, the manifest "
			       "says %llu", b->path, o->hash_hex, (unsigned long long)st.produced,
			       (unsigned long long)o->size);
	crypto_generichash_final(&st.gs, hash, sizeof hash);
	if (sodium_memcmp(hash, o->hash, sizeof hash) != 0)
		return mc__err(b->ctx, MC_ERR_INTEGRITY, "%s: object %s: content does not match its "
			       "hash", b->path, o->hash_hex);
	return MC_OK;
}

int
mc__bundle_stream(mc_bundle *b, mc_obj_sink sink, mc_obj_sink raw, void *ud)
{
	unsigned char *buf, zero[MC_TAR_BLOCK];
	uint64_t done = 0, total = 0;
	size_t i;
	int rc = MC_OK;

	if (!b->fresh && (rc = open_stream(b)) != MC_OK)
		return rc;
	b->fresh = 0;
	for (i = 0; i < b->m.nobjects; i++)
		total += b->m.objects[i].stored_size;
	if ((buf = malloc(MC_IO_CHUNK)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < b->m.nobjects && rc == MC_OK; i++) {
		const struct mc_mobject *o = &b->m.objects[i];
		size_t pl = strlen(MC_MEMBER_OBJ_PREFIX);

		if (b->pending_end) {
			rc = mc__err(b->ctx, MC_ERR_INTEGRITY, "%s: object %s listed in the manifest is "
				     "missing", b->path, o->hash_hex);
			break;
		}
		if (strncmp(b->pending, MC_MEMBER_OBJ_PREFIX, pl) != 0 ||
		    strlen(b->pending) != pl + 64 || !mc__is_lower_hex(b->pending + pl, 64)) {
			rc = mc__err(b->ctx, MC_ERR_MALFORMED, "%s: unexpected member '%.100s'", b->path,
				     b->pending);
			break;
		}
		if (strcmp(b->pending + pl, o->hash_hex) != 0) {
			rc = strcmp(b->pending + pl, o->hash_hex) < 0
				     ? mc__err(b->ctx, MC_ERR_INTEGRITY, "%s: object %s is not listed in "
					       "the manifest (or out of order)", b->path, b->pending + pl)
				     : mc__err(b->ctx, MC_ERR_INTEGRITY, "%s: object %s listed in the "
					       "manifest is missing", b->path, o->hash_hex);
			break;
		}
		if (b->pending_size != o->stored_size) {
			rc = mc__err(b->ctx, MC_ERR_INTEGRITY, "%s: object %s is stored in %llu bytes, the "
				     "manifest says %llu", b->path, o->hash_hex,
				     (unsigned long long)b->pending_size,
				     (unsigned long long)o->stored_size);
			break;
		}
		if ((rc = read_object(b, i, sink, raw, ud, buf, &done, total)) != MC_OK ||
		    (rc = read_padding(b, o->stored_size, b->pending)) != MC_OK)
			break;
		rc = next_header(b, b->pending, &b->pending_size);
		if (rc == 1) {
			b->pending_end = 1;
			rc = MC_OK;
		}
	}
	free(buf);
	if (rc != MC_OK)
		return rc;
	if (!b->pending_end)
		return mc__err(b->ctx, MC_ERR_INTEGRITY, "%s: member '%.100s' is not listed in the "
			       "manifest", b->path, b->pending);
	if ((rc = mc__zin_read(b->z, zero, sizeof zero)) != MC_OK)
		return rc;
	for (i = 0; i < sizeof zero; i++)
		if (zero[i] != 0)
			return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: bad end-of-archive marker", b->path);
	return mc__zin_expect_end(b->z);
}

/* ---- trust policy ---- */

int
mc_bundle_trust(mc_bundle *b, const mc_pubkey *pk)
{
	const mc_pubkey **t;
	size_t i;

	if (b == NULL || pk == NULL)
		return MC_ERR_INVALID;
	for (i = 0; i < b->ntrusted; i++)
		if (memcmp(b->trusted[i]->keynum, pk->keynum, 8) == 0) {
			if (memcmp(b->trusted[i]->pk, pk->pk, 32) != 0)
				return mc__err(b->ctx, MC_ERR_INVALID, "two different trusted keys share "
					       "the key id %s", pk->id);
			return MC_OK; /* the same key given twice counts once */
		}
	if ((t = realloc(b->trusted, (b->ntrusted + 1) * sizeof *t)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	t[b->ntrusted++] = pk;
	b->trusted = t;
	return MC_OK;
}

int
mc_bundle_set_threshold(mc_bundle *b, unsigned k)
{
	if (b == NULL || k == 0)
		return MC_ERR_INVALID;
	b->threshold = k;
	return MC_OK;
}

int
mc_bundle_set_min_version(mc_bundle *b, uint64_t v)
{
	if (b == NULL)
		return MC_ERR_INVALID;
	b->min_version = v;
	return MC_OK;
}

int
mc_bundle_set_now(mc_bundle *b, int64_t t)
{
	if (b == NULL)
		return MC_ERR_INVALID;
	b->have_now = 1;
	b->now = t;
	return MC_OK;
}

int
mc_bundle_require_label(mc_bundle *b, const char *key, const char *value)
{
	struct mc_label *l;

	if (b == NULL || key == NULL || value == NULL)
		return MC_ERR_INVALID;
	if ((l = realloc(b->required, (b->nrequired + 1) * sizeof *l)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	b->required = l;
	l[b->nrequired].key = mc__strdup(key);
	l[b->nrequired].value = mc__strdup(value);
	b->nrequired++;
	if (l[b->nrequired - 1].key == NULL || l[b->nrequired - 1].value == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	return MC_OK;
}

int
mc_bundle_set_insecure(mc_bundle *b, int insecure)
{
	if (b == NULL)
		return MC_ERR_INVALID;
	b->insecure = insecure != 0;
	return MC_OK;
}

int
mc__bundle_policy(mc_bundle *b)
{
	size_t i, j, good = 0;
	int64_t now;

	if (!b->insecure) {
		if (b->ntrusted == 0)
			return mc__err(b->ctx, MC_ERR_INVALID, "%s: no trusted public key given", b->path);
		if (b->threshold > b->ntrusted)
			return mc__err(b->ctx, MC_ERR_THRESHOLD, "%s: threshold %u cannot be met: only "
				       "%zu distinct trusted key%s given", b->path, b->threshold, b->ntrusted,
				       b->ntrusted == 1 ? "" : "s");
		for (i = 0; i < b->nsigs; i++)
			for (j = 0; j < b->ntrusted; j++) {
				if (memcmp(b->sigs[i].sig.keynum, b->trusted[j]->keynum, 8) != 0)
					continue;
				if (mc__sig_verify(&b->sigs[i].sig, b->trusted[j], b->mbytes, b->mlen) != 0)
					return mc__err(b->ctx, MC_ERR_BAD_SIGNATURE, "%s: the signature by "
						       "trusted key %s does not verify", b->path,
						       b->sigs[i].sig.id);
				good++;
			}
		if (good == 0)
			return b->nsigs == 0
				       ? mc__err(b->ctx, MC_ERR_NO_SIGNATURE, "%s: the bundle is not signed",
						 b->path)
				       : mc__err(b->ctx, MC_ERR_NO_SIGNATURE, "%s: no signature by a "
						 "trusted key (signed by %zu untrusted key%s, first %s)",
						 b->path, b->nsigs, b->nsigs == 1 ? "" : "s",
						 b->sigs[0].sig.id);
		if (good < b->threshold)
			return mc__err(b->ctx, MC_ERR_THRESHOLD, "%s: %zu valid trusted signature%s, %u "
				       "required", b->path, good, good == 1 ? "" : "s", b->threshold);
	}
	now = b->have_now ? b->now : (int64_t)time(NULL);
	if (b->m.expires != 0 && now >= b->m.expires)
		return mc__err(b->ctx, MC_ERR_EXPIRED, "%s: expired at %lld (now %lld)", b->path,
			       (long long)b->m.expires, (long long)now);
	if (b->m.bundle_version < b->min_version)
		return mc__err(b->ctx, MC_ERR_ROLLBACK, "%s: bundle version %llu is below the minimum "
			       "%llu", b->path, (unsigned long long)b->m.bundle_version,
			       (unsigned long long)b->min_version);
	for (i = 0; i < b->nrequired; i++) {
		const char *have = NULL;
		for (j = 0; j < b->m.nlabels; j++)
			if (strcmp(b->m.labels[j].key, b->required[i].key) == 0)
				have = b->m.labels[j].value;
		if (have == NULL)
			return mc__err(b->ctx, MC_ERR_LABEL, "%s: label %s=%s is required; the bundle has "
				       "no label %s", b->path, b->required[i].key, b->required[i].value,
				       b->required[i].key);
		if (strcmp(have, b->required[i].value) != 0)
			return mc__err(b->ctx, MC_ERR_LABEL, "%s: label %s is '%s' in the bundle, '%s' "
				       "required", b->path, b->required[i].key, have, b->required[i].value);
	}
	return MC_OK;
}

int
mc_bundle_check_signatures(mc_bundle *b)
{
	if (b == NULL)
		return MC_ERR_INVALID;
	return mc__bundle_policy(b);
}

int
mc_bundle_verify(mc_bundle *b)
{
	int rc;

	if (b == NULL)
		return MC_ERR_INVALID;
	if ((rc = mc__bundle_policy(b)) != MC_OK || (rc = mc__bundle_plan(b)) != MC_OK)
		return rc;
	return mc__bundle_stream(b, NULL, NULL, NULL);
}

/* ---- accessors ---- */

int64_t
mc_bundle_created(const mc_bundle *b)
{
	return b == NULL ? 0 : b->m.created;
}

uint64_t
mc_bundle_version(const mc_bundle *b)
{
	return b == NULL ? 0 : b->m.bundle_version;
}

int64_t
mc_bundle_expires(const mc_bundle *b)
{
	return b == NULL ? 0 : b->m.expires;
}

size_t
mc_bundle_label_count(const mc_bundle *b)
{
	return b == NULL ? 0 : b->m.nlabels;
}

int
mc_bundle_label(const mc_bundle *b, size_t i, const char **key, const char **value)
{
	if (b == NULL || i >= b->m.nlabels || key == NULL || value == NULL)
		return MC_ERR_INVALID;
	*key = b->m.labels[i].key;
	*value = b->m.labels[i].value;
	return MC_OK;
}

size_t
mc_bundle_signature_count(const mc_bundle *b)
{
	return b == NULL ? 0 : b->nsigs;
}

const char *
mc_bundle_signature_key_id(const mc_bundle *b, size_t i)
{
	return b == NULL || i >= b->nsigs ? NULL : b->sigs[i].sig.id;
}

size_t
mc_bundle_artifact_count(const mc_bundle *b)
{
	return b == NULL ? 0 : b->m.nartifacts;
}

int
mc_bundle_artifact(const mc_bundle *b, size_t i, const char **type, const char **key,
		   uint64_t *size, const char **hash)
{
	const struct mc_martifact *a;

	if (b == NULL || i >= b->m.nartifacts)
		return MC_ERR_INVALID;
	a = &b->m.artifacts[i];
	if (type != NULL)
		*type = a->type;
	if (key != NULL)
		*key = a->key;
	if (size != NULL)
		*size = a->size;
	if (hash != NULL)
		*hash = a->hash_hex;
	return MC_OK;
}

int
mc_bundle_select_type(mc_bundle *b, const char *type)
{
	char **t;

	if (b == NULL || type == NULL)
		return MC_ERR_INVALID;
	if (mc__find_type(b->ctx, type) == NULL)
		return mc__err(b->ctx, MC_ERR_INVALID, "unknown artifact type '%.40s'", type);
	if ((t = realloc(b->types, (b->ntypes + 1) * sizeof *t)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	b->types = t;
	if ((t[b->ntypes] = mc__strdup(type)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	b->ntypes++;
	b->planned = 0;
	return MC_OK;
}

int
mc__type_selected(const mc_bundle *b, const char *type)
{
	size_t i;

	if (b->ntypes == 0)
		return 1;
	for (i = 0; i < b->ntypes; i++)
		if (strcmp(b->types[i], type) == 0)
			return 1;
	return 0;
}
