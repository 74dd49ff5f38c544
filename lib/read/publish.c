/* publish.c - bundles to and from registries as whole files: a bundle written to a
 * temp file pushed, its manifest's facts as the artifact's annotations, and
 * mc_copy() between files and references. Streaming reads are the reader's
 * (reader.c); this file only reads a finished bundle's head. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "read/read.h"

#define MC_ANNOTS_MAX 256 /* the most labels made annotations (a bundle has few) */

/* The annotations of a bundle: created, format, version, artifacts, GPU targets, one
 * per label. Their strings live in the arena. */
struct annots {
	struct mc_annot a[MC_ANNOTS_MAX + 5];
	size_t n;
	char *arena[MC_ANNOTS_MAX + 5];
	size_t narena;
};

static void
annots_free(struct annots *t)
{
	while (t->narena > 0)
		free(t->arena[--t->narena]);
}

/* Adds key = value (both copied). */
static int
annot(struct annots *t, const char *prefix, const char *key, const char *value)
{
	size_t kn = strlen(prefix) + strlen(key) + 1, vn = strlen(value) + 1;
	char *k = malloc(kn + vn);

	if (k == NULL)
		return MC_ERR_NOMEM;
	snprintf(k, kn, "%s%s", prefix, key);
	memcpy(k + kn, value, vn);
	t->arena[t->narena++] = k;
	t->a[t->n].key = k;
	t->a[t->n++].value = k + kn;
	return MC_OK;
}

/* The GPU targets, comma-joined, into out (cap bytes); "" for none. */
static void
gpu_list(const mc_bundle *b, char *out, size_t cap)
{
	size_t i, len = 0;
	const char *t;

	out[0] = '\0';
	for (i = 0; (t = mc_bundle_gpu_target(b, i)) != NULL && len + strlen(t) + 2 < cap; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "," : "", t);
}

static int
annotate(mc_bundle *b, struct annots *t)
{
	char num[32], when[32], gpus[1024];
	time_t created = (time_t)mc_bundle_created(b);
	const char *k, *v;
	struct tm tm;
	size_t i;
	int rc = MC_OK;

	if (gmtime_r(&created, &tm) == NULL || strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ",
							&tm) == 0)
		snprintf(when, sizeof when, "1970-01-01T00:00:00Z");
	rc |= annot(t, "", "org.opencontainers.image.created", when);
	snprintf(num, sizeof num, "%d", mc_bundle_format_version(b));
	rc |= annot(t, "vnd.megacache.", "format", num);
	snprintf(num, sizeof num, "%llu", (unsigned long long)mc_bundle_version(b));
	rc |= annot(t, "vnd.megacache.", "bundle-version", num);
	snprintf(num, sizeof num, "%zu", mc_bundle_artifact_count(b));
	rc |= annot(t, "vnd.megacache.", "artifacts", num);
	gpu_list(b, gpus, sizeof gpus);
	if (gpus[0] != '\0')
		rc |= annot(t, "vnd.megacache.", "gpu-targets", gpus);
	for (i = 0; rc == MC_OK && i < mc_bundle_label_count(b) && i < MC_ANNOTS_MAX; i++)
		if (mc_bundle_label(b, i, &k, &v) == MC_OK)
			rc = annot(t, "vnd.megacache.label.", k, v);
	return rc == MC_OK ? MC_OK : mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
}

/* The SHA-256 of a file, made on a thread of its own while the bundle's head is read. */
struct filehash {
	int fd;
	uint64_t size;
	struct mc_layer layer; /* digest and size */
	int err;               /* errno of a failed read, or ENOMEM */
	pthread_t thread;
};

static void *
filehash_run(void *p)
{
	struct filehash *h = p;
	unsigned char sha[MC_SHA256_BYTES], *buf = malloc(1u << 20);
	struct mc_sha256 s = {0};
	uint64_t off = 0;
	ssize_t r;

	if (buf == NULL || mc__sha256_init(&s) != MC_OK) {
		free(buf);
		h->err = ENOMEM;
		return NULL;
	}
	while (off < h->size && (r = pread(h->fd, buf, 1u << 20, (off_t)off)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			h->err = errno;
			break;
		}
		mc__sha256_update(&s, buf, (size_t)r);
		off += (uint64_t)r;
	}
	if (h->err == 0 && off != h->size)
		h->err = EIO; /* the file shrank */
	mc__sha256_final(&s, sha);
	mc__sha256_drop(&s);
	mc__digest_text(sha, h->layer.digest);
	h->layer.size = off;
	free(buf);
	return NULL;
}

/* The annotations of the bundle in fd, into t: its format version into *format. */
static int
bundle_annotations(mc_ctx *ctx, int fd, const char *ref, struct annots *t, int *format)
{
	mc_bundle *b = NULL;
	int rc;

	if ((rc = mc_bundle_open_fd(ctx, fd, ref, &b)) == MC_OK) {
		*format = mc_bundle_format_version(b);
		rc = annotate(b, t);
	}
	mc_bundle_free(b);
	return rc;
}

/* The registry reached, and the empty config sent, on a thread of its own with a copy of
 * the context for its messages, while the bundle is hashed and its head read: libcurl's
 * loading and the first requests take as long as those. */
struct reach {
	mc_ctx ctx;
	const char *ref;
	struct mc_oci *o;
	int rc;
	pthread_t thread;
};

static void *
reach_run(void *p)
{
	struct reach *r = p;

	if ((r->rc = mc__oci_new(&r->ctx, r->ref, &r->o)) == MC_OK)
		r->rc = mc__oci_put_blob(r->o, -1, "{}", 2, MC_OCI_EMPTY_DIGEST);
	return NULL;
}

/* Runs fn(p) on a thread of its own, or here when none starts: whether it started. */
static int
start(pthread_t *t, void *(*fn)(void *), void *p)
{
	if (pthread_create(t, NULL, fn, p) == 0)
		return 1;
	fn(p);
	return 0;
}

/* Pushes the bundle in fd (a file, whole) to ref, its manifest's facts annotating it. */
int
mc__push_bundle(mc_ctx *ctx, int fd, const char *ref)
{
	struct annots t = {.n = 0};
	struct filehash h = {.fd = fd};
	struct reach n = {.ref = ref};
	struct mc_layer layer;
	struct stat st;
	int rc, format = 2, hashing, reaching;

	if (fstat(fd, &st) != 0 || lseek(fd, 0, SEEK_SET) != 0)
		return mc__errno(ctx, MC_ERR_IO, "cannot read back", "the bundle written");
	h.size = (uint64_t)st.st_size;
	n.ctx = *ctx;
	hashing = start(&h.thread, filehash_run, &h);
	reaching = start(&n.thread, reach_run, &n);
	rc = bundle_annotations(ctx, fd, ref, &t, &format);
	if (hashing)
		pthread_join(h.thread, NULL);
	if (reaching)
		pthread_join(n.thread, NULL);
	if (n.o != NULL)
		mc__oci_set_ctx(n.o, ctx);
	if (rc == MC_OK && n.rc != MC_OK)
		rc = mc__err(ctx, n.rc, "%s", n.ctx.err);
	if (rc == MC_OK && h.err != 0)
		rc = h.err == ENOMEM ? mc__err(ctx, MC_ERR_NOMEM, "out of memory")
				     : (errno = h.err, mc__errno(ctx, MC_ERR_IO, "cannot read", ref));
	if (rc == MC_OK)
		rc = mc__oci_push(n.o, fd, &h.layer, format, t.a, t.n, &layer);
	if (rc == MC_OK)
		mc__oci_note(ctx, &layer);
	annots_free(&t);
	mc__oci_free(n.o);
	return rc;
}

/* ---- copy ---- */

/* Whether fd starts as a bundle does: a ustar header. */
static int
looks_like_bundle(mc_ctx *ctx, int fd, const char *path)
{
	unsigned char block[512];

	if (mc__pread_full(fd, block, sizeof block, 0) != 0 ||
	    memcmp(block + 257, "ustar\0" "00", 8) != 0)
		return mc__err(ctx, MC_ERR_NOT_BUNDLE, "%s: not a megacache bundle", path);
	return MC_OK;
}

/* Copies fd (from its start) into out, hashing: *sha and *size get its digest. */
static int
copy_hashing(mc_ctx *ctx, int fd, int out, const char *src, const char *dst, struct mc_layer *l)
{
	unsigned char buf[1 << 16], sha[MC_SHA256_BYTES];
	struct mc_sha256 h = {0};
	uint64_t off = 0;
	ssize_t r;
	int rc = mc__sha256_init(&h);

	while (rc == MC_OK && (r = pread(fd, buf, sizeof buf, (off_t)off)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			rc = mc__errno(ctx, MC_ERR_IO, "cannot read", src);
		else if (mc__write_all(out, buf, (size_t)r) != 0)
			rc = mc__errno(ctx, MC_ERR_IO, "cannot write", dst);
		else {
			mc__sha256_update(&h, buf, (size_t)r);
			off += (uint64_t)r;
		}
	}
	if (rc == MC_OK) {
		mc__sha256_final(&h, sha);
		mc__digest_text(sha, l->digest);
		l->manifest_digest[0] = '\0';
		l->size = off;
	}
	mc__sha256_drop(&h);
	return rc;
}

/* The bytes of the source file src, opened into *fd. */
static int
open_file(mc_ctx *ctx, const char *src, int *fd)
{
	struct stat st;
	int rc;

	if ((rc = mc__open_input(ctx, src, fd, &st)) != MC_OK)
		return rc;
	if (!S_ISREG(st.st_mode)) {
		close(*fd);
		return mc__err(ctx, MC_ERR_INVALID, "%s: not a regular file", src);
	}
	return MC_OK;
}

/* The layer of the reference src, fetched into out (checked as it comes). */
static int
fetch(mc_ctx *ctx, const char *src, int out, struct mc_layer *layer)
{
	struct mc_oci *o;
	int rc;

	if ((rc = mc__oci_new(ctx, src, &o)) != MC_OK)
		return rc;
	if ((rc = mc__oci_resolve(o, layer)) == MC_OK)
		rc = mc__oci_fetch(o, layer, out);
	mc__oci_free(o);
	return rc;
}

/* How a copy into a file fills its temp file: from a reference, or from a file. */
struct fill {
	const char *src;
	int fd; /* a file's */
};

static int
fill(mc_ctx *ctx, const struct fill *f, int out, const char *dst, struct mc_layer *layer)
{
	int rc;

	if (f->fd >= 0)
		return copy_hashing(ctx, f->fd, out, f->src, dst, layer);
	if ((rc = fetch(ctx, f->src, out, layer)) == MC_OK)
		rc = looks_like_bundle(ctx, out, f->src);
	return rc;
}

/* Into the file dst: filled in a temp file beside it, renamed once whole. */
static int
to_file(mc_ctx *ctx, const struct fill *f, const char *dst)
{
	struct mc_layer layer;
	char *tmp = NULL;
	int out = mc__open_temp_beside(ctx, dst, &tmp, 0644), rc;

	if (out < 0)
		return MC_ERR_IO;
	if ((rc = fill(ctx, f, out, dst, &layer)) != MC_OK) {
		close(out);
		unlink(tmp);
	} else if ((rc = mc__commit_temp(ctx, out, tmp, dst)) == MC_OK)
		mc__oci_note(ctx, &layer);
	free(tmp);
	return rc;
}

int
mc_copy(mc_ctx *ctx, const char *src, const char *dst)
{
	struct mc_layer layer;
	int fd, rc;

	if (ctx == NULL || src == NULL || dst == NULL)
		return MC_ERR_INVALID;
	if (mc_is_reference(src) && !mc_is_reference(dst))
		return to_file(ctx, &(struct fill){.src = src, .fd = -1}, dst);
	if (!mc_is_reference(src))
		rc = open_file(ctx, src, &fd);
	else if ((fd = mc__open_temp_anon(ctx)) < 0)
		rc = MC_ERR_IO;
	else if ((rc = fetch(ctx, src, fd, &layer)) != MC_OK)
		close(fd);
	if (rc != MC_OK)
		return rc;
	if ((rc = looks_like_bundle(ctx, fd, src)) == MC_OK)
		rc = mc_is_reference(dst) ? mc__push_bundle(ctx, fd, dst)
					  : to_file(ctx, &(struct fill){.src = src, .fd = fd}, dst);
	close(fd);
	return rc;
}
