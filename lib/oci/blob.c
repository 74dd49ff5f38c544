/* blob.c - the layer's bytes. Read in: into a socket, from a thread of its own, so that
 * a reader takes them as from a pipe; their length and SHA-256 are checked as they
 * come, and the last byte is held back until both are the descriptor's, so that no
 * reader can finish on a layer the registry did not name. Or into a file, checked the
 * same way. Pushed out: a monolithic upload (POST, then PUT with the digest), skipped
 * when the registry has the blob already. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "oci/oci.h"

/* A layer's bytes as they arrive: counted, hashed, and handed on. */
struct take {
	struct mc_oci *o;
	struct mc_layer layer;
	struct mc_sha256 sha;
	uint64_t got;
	int fd;            /* where they go */
	int hold;          /* hold the last byte back (a stream) */
	unsigned char last;
};

/* Writes n bytes to t's socket or file. */
static int
hand_on(struct take *t, const unsigned char *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		w = t->hold ? send(t->fd, p, n, MSG_NOSIGNAL) : write(t->fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return mc__errno(mc__oci_ctx(t->o), t->hold ? MC_ERR_CANCELLED : MC_ERR_IO,
					 t->hold ? "the reader went away from" : "cannot write",
					 mc__oci_ref(t->o)->text);
		p += w;
		n -= (size_t)w;
	}
	return MC_OK;
}

static int
take_sink(void *ud, const unsigned char *p, size_t n)
{
	struct take *t = ud;
	uint64_t size = t->layer.size;
	size_t now = n;

	if (t->got + n > size)
		return mc__err(mc__oci_ctx(t->o), MC_ERR_DIGEST_MISMATCH, "%s: the layer is longer "
			       "than the %llu bytes its descriptor says", mc__oci_ref(t->o)->text,
			       (unsigned long long)size);
	mc__sha256_update(&t->sha, p, n);
	if (t->hold && t->got + n == size) { /* the last byte waits for the checks */
		t->last = p[n - 1];
		now = n - 1;
	}
	t->got += n;
	return hand_on(t, p, now);
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
	if (rc == MC_OK && t->hold && t->layer.size > 0)
		rc = hand_on(t, &t->last, 1);
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
	mc_ctx tctx;   /* the thread's messages */
	pthread_t thread;
	int joined;
	int rc;
};

static void *
stream_main(void *p)
{
	struct mc_ostream *s = p;

	s->rc = take_layer(&s->t);
	shutdown(s->t.fd, SHUT_WR);
	close(s->t.fd);
	s->t.fd = -1;
	return NULL;
}

int
mc__oci_stream(struct mc_oci *o, const struct mc_layer *layer, int *fd, struct mc_ostream **out)
{
	struct mc_ostream *s;
	mc_ctx *ctx = mc__oci_ctx(o);
	int sv[2];

	*out = NULL;
	*fd = -1;
	if ((s = calloc(1, sizeof *s)) == NULL) {
		mc__oci_free(o);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		free(s);
		mc__oci_free(o);
		return mc__errno(ctx, MC_ERR_IO, "cannot make a socket for", layer->digest);
	}
	s->tctx = *ctx;
	s->t.o = o;
	s->t.layer = *layer;
	s->t.fd = sv[1];
	s->t.hold = 1;
	mc__oci_set_ctx(o, &s->tctx);
	if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
		close(sv[0]);
		close(sv[1]);
		mc__oci_free(o);
		free(s);
		return mc__err(ctx, MC_ERR_NOMEM, "cannot start a thread");
	}
	*fd = sv[0];
	*out = s;
	return MC_OK;
}

int
mc__ostream_end(void *stream, mc_ctx *ctx)
{
	struct mc_ostream *s = stream;

	if (!s->joined) {
		pthread_join(s->thread, NULL);
		s->joined = 1;
	}
	if (s->rc != MC_OK)
		return mc__err(ctx, s->rc, "%s", s->tctx.err);
	return MC_OK;
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
	char path[600], url[2300];
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
		snprintf(url, sizeof url, "%s%cdigest=%s", r.location,
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
