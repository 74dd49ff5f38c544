/* oci.h - the oci part: bundles stored in OCI registries. References, HTTP through
 * libcurl (loaded when the first reference is used), the registry's authentication,
 * the artifact's manifest, and its one blob streamed in or pushed out. It knows
 * nothing of a bundle's inside: read/ and write/ hand it bytes and annotations. */
#ifndef MC_OCI_H
#define MC_OCI_H

#include "core/core.h"
#include "io/io.h"

/* ---- references (ref.c) ---- */

/* oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX], parsed. */
struct mc_ref {
	char host[262];  /* HOST[:PORT], as given */
	char repo[256];
	char tag[129];   /* "latest" when neither a tag nor a digest was given; "" with a
			    digest alone */
	char digest[72]; /* "sha256:<64 hex>" or "" */
	int loopback;    /* localhost, 127.0.0.0/8 or [::1] */
	char text[720];  /* the reference as messages name it */
};
/* Parses s into *ref: MC_OK, or MC_ERR_INVALID said on ctx, naming s and the rule. */
MC_HIDDEN int mc__ref_parse(mc_ctx *ctx, const char *s, struct mc_ref *ref);
/* out (at least 72 bytes) gets "sha256:" and the hex of sha. */
MC_HIDDEN void mc__digest_text(const unsigned char sha[MC_SHA256_BYTES], char *out);

/* ---- a session with a registry (http.c) ---- */

/* What one request sends and where its answer goes. */
struct mc_req {
	const char *method;  /* "GET", "HEAD", "PUT", "POST" */
	const char *url;     /* absolute, or a path below the registry's base */
	const char *accept;  /* Accept header, or NULL */
	const char *ctype;   /* Content-Type of the body, or NULL */
	const void *body;    /* a body in memory (body_len bytes) ... */
	size_t body_len;
	int body_fd;         /* ... or the body_len bytes of this file from its start (-1:
				none) */
	const char *authz;   /* an Authorization header line sent whatever the host (a
				token's realm), or NULL: the session's, to its registry only */
	/* the answer's body, as it comes: returns 0 to go on, nonzero to stop the
	 * transfer (the request then fails with the error the sink said on its ctx) */
	int (*sink)(void *ud, const unsigned char *p, size_t n);
	void *ud;
	size_t max_body; /* without a sink: the most bytes of body kept (0: 64 KiB) */
};
/* The answer to one request. */
/* The longest URL taken from a registry (a Location; a storage service's signed URL
 * runs to a few thousand bytes). */
#define MC_URL_MAX 8192

struct mc_resp {
	long status;
	char ctype[128];      /* Content-Type */
	char digest[80];      /* Docker-Content-Digest */
	char location[MC_URL_MAX]; /* Location, resolved to an absolute URL */
	uint64_t length;      /* Content-Length; UINT64_MAX when not given */
	unsigned char *body;  /* without a sink: the body kept (NUL-ended), to free */
	size_t body_len;
};
struct mc_oci;
/* A session with the registry of the reference text names (parsed into *ref too).
 * Its messages are said on ctx, and start with the reference. */
MC_HIDDEN int mc__oci_new(mc_ctx *ctx, const char *text, struct mc_oci **out);
MC_HIDDEN void mc__oci_free(struct mc_oci *o);
MC_HIDDEN const struct mc_ref *mc__oci_ref(const struct mc_oci *o);
MC_HIDDEN mc_ctx *mc__oci_ctx(const struct mc_oci *o);
/* Ends the transfer under way in the session (from any thread): it fails soon. */
MC_HIDDEN void mc__oci_stop(struct mc_oci *o);
/* Moves the session's messages to ctx (a worker's copy of the session's context). */
MC_HIDDEN void mc__oci_set_ctx(struct mc_oci *o, mc_ctx *ctx);
/* Sends req, with the registry's authentication and its redirects (at most 5), into
 * *resp (resp_free'd by the caller). MC_OK for any status; the transport's failures,
 * a 401 after the credentials were tried and too many redirects are errors. */
MC_HIDDEN int mc__oci_request(struct mc_oci *o, const struct mc_req *req, struct mc_resp *resp);
MC_HIDDEN void mc__resp_free(struct mc_resp *resp);
/* Reference ref (a Location) resolved against the absolute URL base as RFC 3986 section
 * 5.2 says, dot segments aside, into out (cap bytes); -1 when it does not fit. */
MC_HIDDEN int mc__url_join(const char *base, const char *ref, char *out, size_t cap);
/* Says on the session's context why a request answered status: the registry's own
 * error code and message when it gave them. what names what was asked for. */
MC_HIDDEN int mc__oci_status_err(struct mc_oci *o, const struct mc_resp *resp, const char *what);

/* ---- credentials and tokens (auth.c) ---- */

/* The user and secret for host, from the settings, the environment, the auth files and
 * the credential helpers, in that order: *user and *secret (to mc__secret_free) are
 * NULL when none has any; *identity is set when secret is an identity token. */
MC_HIDDEN int mc__creds_find(mc_ctx *ctx, const struct mc_ref *ref, char **user, char **secret,
			     int *identity);
MC_HIDDEN void mc__secret_free(char *s);
/* A challenge of WWW-Authenticate, parsed. */
struct mc_challenge {
	int bearer;          /* 1: Bearer, 0: Basic */
	char realm[1024];
	char service[256];
	char scope[512];
};
/* Parses the header's value: MC_OK, or MC_ERR_REMOTE for a scheme that is neither. */
MC_HIDDEN int mc__challenge_parse(mc_ctx *ctx, const char *ref, const char *value,
				  struct mc_challenge *c);

/* ---- the artifact's manifest (manifest.c) ---- */

#define MC_OCI_MANIFEST_TYPE "application/vnd.oci.image.manifest.v1+json"
#define MC_OCI_EMPTY_TYPE "application/vnd.oci.empty.v1+json"
#define MC_OCI_EMPTY_DIGEST "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
#define MC_OCI_BUNDLE_TYPE "application/vnd.megacache.bundle.v" /* + the format version */
#define MC_OCI_MANIFEST_MAX (4u << 20)

/* The layer a manifest names. */
struct mc_layer {
	char digest[72];
	uint64_t size;
	char manifest_digest[72];
};
/* One annotation of a pushed manifest. */
struct mc_annot {
	const char *key;
	const char *value;
};
/* Reads the reference's manifest (its digest checked when the reference names one) and
 * the one layer it holds into *layer: MC_ERR_NOT_BUNDLE for an artifact that is not a
 * megacache bundle, MC_ERR_LIMIT for a manifest over 4 MiB. */
MC_HIDDEN int mc__oci_resolve(struct mc_oci *o, struct mc_layer *layer);
/* Pushes the bytes->size bytes of fd (from its start), whose SHA-256 is bytes->digest,
 * as the layer of a bundle of format version format with the n annotations, and the
 * manifest to the reference's tag (or digest, which must then be the manifest's):
 * *layer gets the digests. */
MC_HIDDEN int mc__oci_push(struct mc_oci *o, int fd, const struct mc_layer *bytes, int format,
			   const struct mc_annot *a, size_t n, struct mc_layer *layer);

/* ---- the layer's bytes (blob.c) ---- */

/* A layer being read in the background into a temp file. */
struct mc_ostream;
/* Starts reading layer into a temp file, which *fd (the caller's, to close before
 * mc__ostream_free()) reads from its start as it fills. Takes o over, whatever it
 * returns. */
MC_HIDDEN int mc__oci_stream(struct mc_oci *o, const struct mc_layer *layer, int *fd,
			     struct mc_ostream **out);
/* Waits until the file holds upto bytes, or the reading ended: MC_OK, or why it ended
 * short (said on ctx). A pread then finds the bytes, or the file's end. */
MC_HIDDEN int mc__ostream_wait(struct mc_ostream *s, uint64_t upto, mc_ctx *ctx);
/* For a reader in order at the end of what fd gave: 1 once there is more, MC_OK at the
 * end of a whole layer, else why not (MC_ERR_DIGEST_MISMATCH, MC_ERR_REMOTE, ...). */
MC_HIDDEN int mc__ostream_more(void *stream, mc_ctx *ctx);
/* The size the layer's descriptor gives. */
MC_HIDDEN uint64_t mc__ostream_size(const struct mc_ostream *s);
/* Ends the reading soon (from any thread): it fails, MC_ERR_CANCELLED. */
MC_HIDDEN void mc__ostream_stop(struct mc_ostream *s);
/* Waits for the reading to end: how it ended, said nowhere. */
MC_HIDDEN int mc__ostream_status(struct mc_ostream *s);
/* Waits for the reading to end: MC_OK when the layer was whole and its digest right,
 * else why not, said on ctx. */
MC_HIDDEN int mc__ostream_end(struct mc_ostream *s, mc_ctx *ctx);
/* Stops the reading and frees s. */
MC_HIDDEN void mc__ostream_free(struct mc_ostream *s);
/* Writes layer into fd, from its start, checked as a stream is. */
MC_HIDDEN int mc__oci_fetch(struct mc_oci *o, const struct mc_layer *layer, int fd);
/* Pushes size bytes of fd as a blob of the reference's repository, unless it is there
 * already. */
MC_HIDDEN int mc__oci_put_blob(struct mc_oci *o, int fd, const void *mem, uint64_t size,
			       const char *digest);
/* Records layer as the last one moved through ctx (mc_ctx_registry_digest()). */
MC_HIDDEN void mc__oci_note(mc_ctx *ctx, const struct mc_layer *layer);

#endif
