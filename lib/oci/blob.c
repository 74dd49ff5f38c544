/* blob.c - the layer's bytes. Read in: into a temp file, from a thread of its own, that
 * a reader reads as it fills (each read waits for the bytes it asks for), so that the
 * reading overlaps the download and workers can read parts of it at once; their length
 * and SHA-256 are checked as they come, and the reader's pass ends only once both are
 * the descriptor's (mc__ostream_end()), so that nothing is installed from a layer the
 * registry did not name. Or into a file, checked the same way. Pushed out: a monolithic
 * upload (POST, then PUT with the digest), skipped when the registry has the blob
 * already. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "oci/oci.h"

/* A layer's bytes as they arrive: counted, hashed, and written at their place in a
 * file. */
struct take {
	struct mc_oci *o;
	struct mc_layer layer;
	struct mc_sha256 sha;
	uint64_t got;
	int fd;
	struct mc_ostream *stream; /* told of each piece written, or NULL */
};

static void stream_moved(struct mc_ostream *s, uint64_t avail);

static int
take_sink(void *ud, const unsigned char *p, size_t n)
{
	struct take *t = ud;
	ssize_t w;
	size_t k;

	if (t->got + n > t->layer.size)
		return mc__err(mc__oci_ctx(t->o), MC_ERR_DIGEST_MISMATCH, "%s: the layer is longer "
			       "than the %llu bytes its descriptor says", mc__oci_ref(t->o)->text,
			       (unsigned long long)t->layer.size);
	mc__sha256_update(&t->sha, p, n);
	for (k = 0; k < n; k += (size_t)w) {
		w = pwrite(t->fd, p + k, n - k, (off_t)(t->got + k));
		if (w < 0 && errno == EINTR)
			w = 0;
		else if (w <= 0)
			return mc__errno(mc__oci_ctx(t->o), MC_ERR_IO, "cannot write a temp file for",
					 mc__oci_ref(t->o)->text);
	}
	t->got += n;
	if (t->stream != NULL)
		stream_moved(t->stream, t->got);
	return MC_OK;
}

/* After the transfer: the length and the digest. */
static int
take_check(struct take *t)
{
	unsigned char sha[MC_SHA256_BYTES];
	char digest[72];

	if (t->got != t->layer.size)
		return mc__err(mc__oci_ctx(t->o), MC_ERR_DIGEST_MISMATCH, "%s: the layer is %llu "
			       "bytes, shorter than the %llu its descriptor says",
			       mc__oci_ref(t->o)->text, (unsigned long long)t->got,
			       (unsigned long long)t->layer.size);
	mc__sha256_final(&t->sha, sha);
	mc__digest_text(sha, digest);
	if (strcmp(digest, t->layer.digest) != 0)
		return mc__err(mc__oci_ctx(t->o), MC_ERR_DIGEST_MISMATCH, "%s: the layer's bytes are "
			       "%s, not %s as the manifest says", mc__oci_ref(t->o)->text, digest,
			       t->layer.digest);
	return MC_OK;
}

/* GETs the layer through t. */
static int
take_layer(struct take *t)
{
	const struct mc_ref *ref = mc__oci_ref(t->o);
	char path[600];
	struct mc_req q = {.method = "GET", .url = path, .body_fd = -1, .sink = take_sink, .ud = t};
	struct mc_resp r = {0};
	int rc;

	snprintf(path, sizeof path, "/v2/%s/blobs/%s", ref->repo, t->layer.digest);
	if ((rc = mc__sha256_init(&t->sha)) != MC_OK)
		return mc__err(mc__oci_ctx(t->o), rc, "out of memory");
	rc = mc__oci_request(t->o, &q, &r);
	if (rc == MC_OK && r.status != 200)
		rc = mc__oci_status_err(t->o, &r, "the layer");
	if (rc == MC_OK)
		rc = take_check(t);
	mc__sha256_drop(&t->sha);
	mc__resp_free(&r);
	return rc;
}

int
mc__oci_fetch(struct mc_oci *o, const struct mc_layer *layer, int fd)
{
	struct take t = {.o = o, .layer = *layer, .fd = fd};

	return take_layer(&t);
}

/* ---- streams ---- */

struct mc_ostream {
	struct take t;
	mc_ctx tctx;          /* the thread's messages */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t moved;
	uint64_t avail;       /* bytes in the file so far */
	int done;             /* the thread has ended, as rc says */
	int rc;
	int joined;
	int rfd;              /* the reader's descriptor, whose offset says how far it read */
};

static void
stream_moved(struct mc_ostream *s, uint64_t avail)
{
	pthread_mutex_lock(&s->lock);
	s->avail = avail;
	pthread_cond_broadcast(&s->moved);
	pthread_mutex_unlock(&s->lock);
}

static void *
stream_main(void *p)
{
	struct mc_ostream *s = p;
	int rc = take_layer(&s->t);

	pthread_mutex_lock(&s->lock);
	s->rc = rc;
	s->done = 1;
	pthread_cond_broadcast(&s->moved);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int
mc__oci_stream(struct mc_oci *o, const struct mc_layer *layer, int *fd, struct mc_ostream **out)
{
	struct mc_ostream *s;
	mc_ctx *ctx = mc__oci_ctx(o);
	int tfd;

	*out = NULL;
	*fd = -1;
	if ((s = calloc(1, sizeof *s)) == NULL) {
		mc__oci_free(o);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	if ((tfd = mc__open_temp_anon(ctx)) < 0 ||
	    (s->rfd = fcntl(tfd, F_DUPFD_CLOEXEC, 0)) < 0) {
		int rc = tfd < 0 ? MC_ERR_IO : mc__errno(ctx, MC_ERR_IO, "cannot read", layer->digest);
		if (tfd >= 0)
			close(tfd);
		free(s);
		mc__oci_free(o);
		return rc;
	}
	s->tctx = *ctx;
	s->t = (struct take){.o = o, .layer = *layer, .fd = tfd, .stream = s};
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->moved, NULL);
	mc__oci_set_ctx(o, &s->tctx);
	if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
		s->joined = 1;
		close(s->rfd);
		mc__ostream_free(s);
		return mc__err(ctx, MC_ERR_NOMEM, "cannot start a thread");
	}
	*fd = s->rfd;
	*out = s;
	return MC_OK;
}

/* The thread's failure, said on ctx; MC_OK when it has none. Called under the lock. */
static int
stream_rc(struct mc_ostream *s, mc_ctx *ctx)
{
	return s->rc != MC_OK ? mc__err(ctx, s->rc, "%s", s->tctx.err) : MC_OK;
}

int
mc__ostream_wait(struct mc_ostream *s, uint64_t upto, mc_ctx *ctx)
{
	int rc = MC_OK;

	pthread_mutex_lock(&s->lock);
	while (!s->done && s->avail < upto)
		pthread_cond_wait(&s->moved, &s->lock);
	if (s->avail < upto)
		rc = stream_rc(s, ctx);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int
mc__ostream_more(void *stream, mc_ctx *ctx)
{
	struct mc_ostream *s = stream;
	off_t at = lseek(s->rfd, 0, SEEK_CUR);
	int rc;

	pthread_mutex_lock(&s->lock);
	while (!s->done && s->avail <= (uint64_t)at)
		pthread_cond_wait(&s->moved, &s->lock);
	rc = s->avail > (uint64_t)at ? 1 : stream_rc(s, ctx);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

uint64_t
mc__ostream_size(const struct mc_ostream *s)
{
	return s->t.layer.size;
}

void
mc__ostream_stop(struct mc_ostream *s)
{
	mc__oci_stop(s->t.o);
}

int
mc__ostream_status(struct mc_ostream *s)
{
	int rc;

	pthread_mutex_lock(&s->lock);
	while (!s->done)
		pthread_cond_wait(&s->moved, &s->lock);
	rc = s->rc;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int
mc__ostream_end(struct mc_ostream *s, mc_ctx *ctx)
{
	int rc;

	pthread_mutex_lock(&s->lock);
	while (!s->done)
		pthread_cond_wait(&s->moved, &s->lock);
	rc = stream_rc(s, ctx);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void
mc__ostream_free(struct mc_ostream *s)
{
	if (s == NULL)
		return;
	if (!s->joined) {
		mc__oci_stop(s->t.o);
		pthread_join(s->thread, NULL);
	}
	close(s->t.fd);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->moved);
	mc__oci_free(s->t.o);
	free(s);
}

/* ---- pushing ---- */

/* Whether the repository has the blob already. */
static int
have_blob(struct mc_oci *o, const char *digest, int *have)
{
	char path[600];
	struct mc_req q = {.method = "HEAD", .url = path, .body_fd = -1};
	struct mc_resp r = {0};
	int rc;

	snprintf(path, sizeof path, "/v2/%s/blobs/%s", mc__oci_ref(o)->repo, digest);
	rc = mc__oci_request(o, &q, &r);
	*have = rc == MC_OK && r.status == 200;
	mc__resp_free(&r);
	return rc;
}

int
mc__oci_put_blob(struct mc_oci *o, int fd, const void *mem, uint64_t size, const char *digest)
{
	char path[600], url[MC_URL_MAX + 128];
	struct mc_req q = {.method = "POST", .url = path, .body_fd = -1};
	struct mc_resp r = {0};
	int rc, have;

	if ((rc = have_blob(o, digest, &have)) != MC_OK || have)
		return rc;
	snprintf(path, sizeof path, "/v2/%s/blobs/uploads/", mc__oci_ref(o)->repo);
	if ((rc = mc__oci_request(o, &q, &r)) == MC_OK && r.status != 202)
		rc = mc__oci_status_err(o, &r, "an upload");
	if (rc == MC_OK && r.location[0] == '\0')
		rc = mc__err(mc__oci_ctx(o), MC_ERR_REMOTE, "%s: the registry started an upload "
			     "without saying where", mc__oci_ref(o)->text);
	if (rc == MC_OK) {
		snprintf(url, sizeof url, "%s%cdigest=%s", r.location, /* fits: digest < 128 */
			 strchr(r.location, '?') ? '&' : '?', digest);
		q = (struct mc_req){.method = "PUT", .url = url, .body = mem, .body_len = size,
				    .body_fd = fd, .ctype = "application/octet-stream"};
		if ((rc = mc__oci_request(o, &q, &r)) == MC_OK && r.status != 201)
			rc = mc__oci_status_err(o, &r, "the upload of a blob");
	}
	mc__resp_free(&r);
	return rc;
}

void
mc__oci_note(mc_ctx *ctx, const struct mc_layer *layer)
{
	struct mc_regset *reg = mc__regset(ctx);

	if (reg == NULL)
		return;
	snprintf(reg->digest[0], sizeof reg->digest[0], "%s", layer->manifest_digest);
	snprintf(reg->digest[1], sizeof reg->digest[1], "%s", layer->digest);
	reg->size = layer->size;
}
