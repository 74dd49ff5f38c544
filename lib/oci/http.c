/* http.c - a session with one registry: libcurl loaded at run time (as libarchive is
 * for writing: a load from a file never maps it), HTTPS or, only where allowed, plain
 * HTTP, the registry's authentication (Basic, or a Bearer token got from the realm it
 * names, kept for the session), and redirects followed by hand, so that their number
 * is bounded and no credential goes to another host. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "oci/oci.h"

#ifdef MC_WITH_CURL
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>

/* The calls go through pointers: curl.h's checking macros would rename them. */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

#define MC_REDIRECTS 5
#define MC_TOKENS 4
#define MC_ERRBODY (64u << 10)

/* The calls of libcurl used, looked up when it is loaded. */
#define CU_CALLS(X)                                                                        \
	X(CURLcode, curl_global_init, (long))                                              \
	X(CURL *, curl_easy_init, (void))                                                  \
	X(CURLcode, curl_easy_setopt, (CURL *, CURLoption, ...))                           \
	X(CURLcode, curl_easy_perform, (CURL *))                                           \
	X(CURLcode, curl_easy_getinfo, (CURL *, CURLINFO, ...))                            \
	X(void, curl_easy_reset, (CURL *))                                                 \
	X(void, curl_easy_cleanup, (CURL *))                                               \
	X(const char *, curl_easy_strerror, (CURLcode))                                    \
	X(struct curl_slist *, curl_slist_append, (struct curl_slist *, const char *))     \
	X(void, curl_slist_free_all, (struct curl_slist *))
#define CU_FIELD(ret, name, args) ret(*name) args;
static struct {
	CU_CALLS(CU_FIELD)
} cu;
#undef CU_FIELD
static char cu_error[512]; /* why it could not be loaded; empty when it was */
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void
cu_load(void)
{
	void *h = dlopen(MC_LIBCURL_SONAME, RTLD_NOW | RTLD_LOCAL);
	const char *e;

	if (h == NULL) {
		e = dlerror();
		snprintf(cu_error, sizeof cu_error, "%s", e != NULL ? e : MC_LIBCURL_SONAME);
		return;
	}
#define CU_SYM(ret, f, args)                                                               \
	if (cu_error[0] == '\0' && (*(void **)&cu.f = dlsym(h, #f)) == NULL)               \
		snprintf(cu_error, sizeof cu_error, "%s: no %s", MC_LIBCURL_SONAME, #f);
	CU_CALLS(CU_SYM)
#undef CU_SYM
	if (cu_error[0] == '\0' && cu.curl_global_init(CURL_GLOBAL_ALL) != CURLE_OK)
		snprintf(cu_error, sizeof cu_error, "%s did not start", MC_LIBCURL_SONAME);
	/* Kept loaded to the process's end, as libcurl asks of curl_global_init(). */
}

struct token {
	char *scope;
	char *header; /* "Authorization: Bearer ..." */
};

struct mc_oci {
	mc_ctx *ctx;
	struct mc_ref ref;
	CURL *curl;
	char base[300];       /* "https://HOST" or "http://HOST" */
	int scheme_known;     /* base has answered once */
	int creds_looked;
	char *user, *secret;  /* mc__secret_free */
	int identity;
	char *basic;          /* "Authorization: Basic ...", once a Basic challenge came */
	struct token tokens[MC_TOKENS];
	size_t ntokens;
	const char *auth;     /* the header sent to the registry's host now, or NULL */
	char errbuf[CURL_ERROR_SIZE];
	char challenge[1024]; /* the last WWW-Authenticate */
	char location[MC_URL_MAX]; /* the last Location, as given */
	int location_cut;     /* it was longer */
	const struct mc_req *req; /* of the transfer under way */
	struct mc_resp *resp;
	uint64_t sent;        /* of its body */
	int sink_rc;          /* what its sink failed with */
	CURLcode code;        /* how it ended */
	_Atomic int stop;     /* mc__oci_stop(): the transfer under way ends */
};

/* ---- one transfer ---- */

/* Copies the value of header line h (of n bytes) if its name is name; 1 when it was
 * cut to fit. */
static int
header_value(const char *h, size_t n, const char *name, char *out, size_t cap)
{
	size_t k = strlen(name), len;

	if (n <= k || strncasecmp(h, name, k) != 0 || h[k] != ':')
		return 0;
	h += k + 1;
	n -= k + 1;
	while (n > 0 && (*h == ' ' || *h == '\t'))
		h++, n--;
	while (n > 0 && (h[n - 1] == '\r' || h[n - 1] == '\n' || h[n - 1] == ' '))
		n--;
	len = n < cap - 1 ? n : cap - 1;
	memcpy(out, h, len);
	out[len] = '\0';
	return len < n;
}

static size_t
on_header(char *h, size_t size, size_t nitems, void *ud)
{
	struct mc_oci *o = ud;
	struct mc_resp *r = o->resp;
	size_t n = size * nitems;
	char num[32] = "";

	if (n > 5 && strncmp(h, "HTTP/", 5) == 0) { /* a new answer: an interim one ends */
		const char *sp = memchr(h, ' ', n);
		r->status = sp != NULL ? strtol(sp + 1, NULL, 10) : 0;
		r->ctype[0] = r->digest[0] = o->challenge[0] = o->location[0] = '\0';
		o->location_cut = 0;
		r->length = UINT64_MAX;
		return n;
	}
	header_value(h, n, "Content-Type", r->ctype, sizeof r->ctype);
	header_value(h, n, "Docker-Content-Digest", r->digest, sizeof r->digest);
	header_value(h, n, "WWW-Authenticate", o->challenge, sizeof o->challenge);
	if (header_value(h, n, "Location", o->location, sizeof o->location))
		o->location_cut = 1;
	header_value(h, n, "Content-Length", num, sizeof num);
	if (num[0] >= '0' && num[0] <= '9')
		r->length = strtoull(num, NULL, 10);
	return n;
}

/* The body: to the sink when the answer is a success and there is one, else kept (up to
 * the most the request keeps). */
static size_t
on_body(char *p, size_t size, size_t nmemb, void *ud)
{
	struct mc_oci *o = ud;
	struct mc_resp *r = o->resp;
	size_t n = size * nmemb, max;
	unsigned char *grown;

	if (o->req->sink != NULL && r->status >= 200 && r->status < 300) {
		if ((o->sink_rc = o->req->sink(o->req->ud, (unsigned char *)p, n)) != 0)
			return 0;
		return n;
	}
	max = o->req->sink == NULL && o->req->max_body ? o->req->max_body : MC_ERRBODY;
	if (r->body_len + n > max) {
		o->sink_rc = mc__err(o->ctx, MC_ERR_LIMIT, "%s: the registry's answer is over %zu "
				     "bytes", o->ref.text, max);
		return 0;
	}
	if ((grown = realloc(r->body, r->body_len + n + 1)) == NULL) {
		o->sink_rc = mc__err(o->ctx, MC_ERR_NOMEM, "out of memory");
		return 0;
	}
	memcpy(grown + r->body_len, p, n);
	r->body = grown;
	r->body_len += n;
	r->body[r->body_len] = '\0';
	return n;
}

/* The request's body, from memory or its file. */
static size_t
on_send(char *p, size_t size, size_t nitems, void *ud)
{
	struct mc_oci *o = ud;
	const struct mc_req *q = o->req;
	size_t n = size * nitems;
	ssize_t got;

	if (n > q->body_len - o->sent)
		n = (size_t)(q->body_len - o->sent);
	if (n == 0)
		return 0;
	if (q->body_fd < 0) {
		memcpy(p, (const char *)q->body + o->sent, n);
		got = (ssize_t)n;
	} else {
		do
			got = pread(q->body_fd, p, n, (off_t)o->sent);
		while (got < 0 && errno == EINTR);
		if (got <= 0)
			return CURL_READFUNC_ABORT;
	}
	o->sent += (uint64_t)got;
	return (size_t)got;
}

/* Ends a transfer that the session was stopped in, or whose context was cancelled. */
static int
on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	struct mc_oci *o = ud;

	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	if (atomic_load(&o->stop) || mc__cancelled(o->ctx)) {
		o->sink_rc = mc__cancelled(o->ctx) ? mc__cancel_err(o->ctx) : MC_ERR_CANCELLED;
		return 1;
	}
	return 0;
}

void
mc__oci_stop(struct mc_oci *o)
{
	atomic_store(&o->stop, 1);
}

void
mc__resp_free(struct mc_resp *resp)
{
	free(resp->body);
	memset(resp, 0, sizeof *resp);
}

/* Whether url's host is the registry's (its credentials go there only). */
static int
same_host(const struct mc_oci *o, const char *url)
{
	const char *h = strstr(url, "://");
	size_t n = strlen(o->ref.host);

	return h != NULL && strncasecmp(h + 3, o->ref.host, n) == 0 &&
	       (h[3 + n] == '/' || h[3 + n] == '\0');
}

/* The options of one transfer of q to url. */
static int
set_up(struct mc_oci *o, const struct mc_req *q, const char *url, struct curl_slist **hdrs)
{
	struct mc_regset *reg = o->ctx->reg;
	long t = reg != NULL && reg->timeout ? (long)reg->timeout : 30;
	char line[512];
	CURL *c = o->curl;

	cu.curl_easy_reset(c);
	cu.curl_easy_setopt(c, CURLOPT_URL, url);
	cu.curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	/* only HTTP(S), whatever a Location names; libcurl before 7.85 takes the bit mask */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	if (cu.curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK &&
	    cu.curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS)) !=
		    CURLE_OK)
#pragma GCC diagnostic pop
		return mc__err(o->ctx, MC_ERR_UNSUPPORTED, "%s: libcurl cannot be kept to HTTP(S)",
			       o->ref.text);
	cu.curl_easy_setopt(c, CURLOPT_ERRORBUFFER, o->errbuf);
	cu.curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, t);
	cu.curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	cu.curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, t);
	cu.curl_easy_setopt(c, CURLOPT_USERAGENT, "megacache/" MC_VERSION_STRING);
	if (reg != NULL && reg->ca != NULL)
		cu.curl_easy_setopt(c, CURLOPT_CAINFO, reg->ca);
	cu.curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	cu.curl_easy_setopt(c, CURLOPT_HEADERDATA, o);
	cu.curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	cu.curl_easy_setopt(c, CURLOPT_WRITEDATA, o);
	cu.curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	cu.curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	cu.curl_easy_setopt(c, CURLOPT_XFERINFODATA, o);
	if (strcmp(q->method, "HEAD") == 0)
		cu.curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else if (strcmp(q->method, "PUT") == 0) {
		cu.curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		cu.curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 1L << 20); /* fewer, larger writes */
		cu.curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)q->body_len);
		cu.curl_easy_setopt(c, CURLOPT_READFUNCTION, on_send);
		cu.curl_easy_setopt(c, CURLOPT_READDATA, o);
	} else if (strcmp(q->method, "POST") == 0) {
		cu.curl_easy_setopt(c, CURLOPT_POST, 1L);
		cu.curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->body_len);
		cu.curl_easy_setopt(c, CURLOPT_READFUNCTION, on_send);
		cu.curl_easy_setopt(c, CURLOPT_READDATA, o);
	}
	*hdrs = cu.curl_slist_append(NULL, "Expect:");
	if (q->accept != NULL && snprintf(line, sizeof line, "Accept: %s", q->accept) > 0)
		*hdrs = cu.curl_slist_append(*hdrs, line);
	if (q->ctype != NULL && snprintf(line, sizeof line, "Content-Type: %s", q->ctype) > 0)
		*hdrs = cu.curl_slist_append(*hdrs, line);
	if (q->authz != NULL)
		*hdrs = cu.curl_slist_append(*hdrs, q->authz);
	else if (o->auth != NULL && same_host(o, url))
		*hdrs = cu.curl_slist_append(*hdrs, o->auth);
	if (*hdrs == NULL)
		return mc__err(o->ctx, MC_ERR_NOMEM, "out of memory");
	return cu.curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs) == CURLE_OK ? MC_OK :
	       mc__err(o->ctx, MC_ERR_UNSUPPORTED, "%s: libcurl refused an option", o->ref.text);
}

/* Says why a transfer failed, in the user's terms. */
static int
transfer_err(struct mc_oci *o, CURLcode e, const char *url)
{
	struct mc_regset *reg = o->ctx->reg;
	unsigned t = reg != NULL && reg->timeout ? reg->timeout : 30;
	const char *detail = o->errbuf[0] ? o->errbuf : cu.curl_easy_strerror(e);

	if (o->sink_rc != 0)
		return o->sink_rc; /* said by the sink */
	switch (e) {
	case CURLE_OPERATION_TIMEDOUT:
		return mc__err(o->ctx, MC_ERR_REMOTE, "%s: the registry sent no data for %u s "
			       "(--timeout)", o->ref.text, t);
	case CURLE_PARTIAL_FILE:
		return mc__err(o->ctx, MC_ERR_REMOTE, "%s: the registry ended the transfer early "
			       "(%s)", o->ref.text, detail);
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
		return mc__err(o->ctx, MC_ERR_REMOTE, "%s: the registry's TLS certificate cannot be "
			       "trusted: %s (a private CA: --registry-ca FILE)", o->ref.text, detail);
	default:
		return mc__err(o->ctx, MC_ERR_REMOTE, "%s: cannot reach the registry at %.*s: %s",
			       o->ref.text, (int)strcspn(url, "?"), url, detail);
	}
}

/* The length of the scheme of URL reference s with its ':', or 0 when it has none. */
static size_t
scheme_len(const char *s)
{
	size_t n;

	if (!isalpha((unsigned char)s[0]))
		return 0;
	n = 1 + strspn(s + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-");
	return s[n] == ':' ? n + 1 : 0;
}

int
mc__url_join(const char *base, const char *ref, char *out, size_t cap)
{
	size_t sl = scheme_len(base), keep;
	const char *path = base + sl, *end, *seg, *sep = "";
	int authority = strncmp(path, "//", 2) == 0;

	if (authority)
		path += 2 + strcspn(path + 2, "/?#");
	end = path + strcspn(path, "?#");
	if (scheme_len(ref) > 0 || sl == 0) { /* absolute, or nothing to join with */
		keep = 0;
	} else if (strncmp(ref, "//", 2) == 0) { /* network-path: the base's scheme */
		keep = sl;
	} else if (ref[0] == '/') { /* absolute-path: the base's authority */
		keep = (size_t)(path - base);
	} else if (ref[0] == '?' || ref[0] == '\0') { /* the base's path */
		keep = (size_t)(end - base);
	} else if (ref[0] == '#') { /* the base's path and query */
		keep = (size_t)(path + strcspn(path, "#") - base);
	} else { /* relative-path: in place of the base path's last segment */
		for (seg = end; seg > path && seg[-1] != '/'; seg--)
			;
		keep = (size_t)(seg - base);
		if (seg == path && authority) /* an authority and an empty path */
			sep = "/";
	}
	return (size_t)snprintf(out, cap, "%.*s%s%s", (int)keep, base, sep, ref) >= cap ? -1 : 0;
}

/* One transfer, no redirect followed, no authentication retried. */
static int
perform(struct mc_oci *o, const struct mc_req *q, const char *url, struct mc_resp *r)
{
	struct curl_slist *hdrs = NULL;
	char *loc = NULL;
	CURLcode e;
	int rc;

	mc__resp_free(r);
	r->length = UINT64_MAX;
	o->req = q;
	o->resp = r;
	o->sent = 0;
	o->sink_rc = 0;
	o->errbuf[0] = '\0';
	if ((rc = set_up(o, q, url, &hdrs)) == MC_OK) {
		o->code = e = cu.curl_easy_perform(o->curl);
		if (e != CURLE_OK)
			rc = transfer_err(o, e, url);
		else if (o->location_cut)
			rc = mc__err(o->ctx, MC_ERR_REMOTE, "%s: the registry's Location is longer than "
				     "%d bytes", o->ref.text, MC_URL_MAX - 1);
		else if ((cu.curl_easy_getinfo(o->curl, CURLINFO_REDIRECT_URL, &loc) != CURLE_OK ||
			  loc == NULL ? mc__url_join(url, o->location, r->location, sizeof r->location)
				      : snprintf(r->location, sizeof r->location, "%s", loc) >=
						(int)sizeof r->location ? -1 : 0) != 0)
			rc = mc__err(o->ctx, MC_ERR_REMOTE, "%s: the registry's Location is longer than "
				     "%d bytes once made absolute", o->ref.text, MC_URL_MAX - 1);
	}
	cu.curl_slist_free_all(hdrs);
	return rc;
}

/* ---- authentication ---- */

/* Appends s to out (at most cap), percent-encoding all but RFC 3986's unreserved. */
static void
url_escape(char *out, size_t cap, const char *s)
{
	size_t n = strlen(out);

	for (; *s != '\0' && n + 4 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~')
			out[n++] = (char)c;
		else
			n += (size_t)snprintf(out + n, cap - n, "%%%02X", c);
	}
	out[n] = '\0';
}

/* The user's credentials, looked up once per session. */
static int
creds(struct mc_oci *o)
{
	if (o->creds_looked)
		return MC_OK;
	o->creds_looked = 1;
	return mc__creds_find(o->ctx, &o->ref, &o->user, &o->secret, &o->identity);
}

/* "Authorization: Basic <base64 of user:secret>" into a new string. */
static char *
basic_header(const char *user, const char *secret)
{
	size_t n = strlen(user) + 1 + strlen(secret);
	char *plain = malloc(n + 1), *b64, *line = NULL;

	if (plain == NULL)
		return NULL;
	snprintf(plain, n + 1, "%s:%s", user, secret);
	b64 = mc__b64_encode((unsigned char *)plain, n);
	mc__secret_free(plain);
	if (b64 != NULL && (line = malloc(strlen(b64) + 32)) != NULL)
		sprintf(line, "Authorization: Basic %s", b64);
	mc__secret_free(b64);
	return line;
}

/* Whether url may be sent to: HTTPS, or plain HTTP to a loopback host or when allowed. */
static int
scheme_allowed(const struct mc_oci *o, const char *url)
{
	struct mc_ref host;
	const char *h = url + 7;
	char probe[300];

	if (strncmp(url, "https://", 8) == 0)
		return 1;
	if (strncmp(url, "http://", 7) != 0)
		return 0;
	if (o->ctx->reg != NULL && o->ctx->reg->plain_http)
		return 1;
	snprintf(probe, sizeof probe, "oci://%.*s/x", (int)strcspn(h, "/?#"), h);
	return mc__ref_parse(NULL, probe, &host) == MC_OK && host.loopback;
}

/* Whether a bearer token can go in a header line: printable ASCII, no space. */
static int
token_ok(const char *t)
{
	if (*t == '\0')
		return 0;
	for (; *t != '\0'; t++)
		if ((unsigned char)*t <= 0x20 || (unsigned char)*t >= 0x7f)
			return 0;
	return 1;
}

/* Asks the realm of c for a token of its scope, with the user's credentials when there
 * are some: *out gets the "Authorization: Bearer ..." line. */
static int
fetch_token(struct mc_oci *o, const struct mc_challenge *c, char **out)
{
	char url[2048], form[4096] = "", *basic = NULL;
	struct mc_req q = {.method = "GET", .url = url, .body_fd = -1, .max_body = 1u << 20};
	struct mc_resp r = {0};
	const cJSON *tok = NULL;
	cJSON *doc = NULL;
	int rc;

	if (!scheme_allowed(o, c->realm))
		return mc__err(o->ctx, MC_ERR_REMOTE, "%s: the registry's token service is not "
			       "HTTPS (%.200s); --plain-http allows it", o->ref.text, c->realm);
	snprintf(url, sizeof url, "%s%sservice=", c->realm, strchr(c->realm, '?') ? "&" : "?");
	url_escape(url, sizeof url, c->service);
	strcat(url, "&scope=");
	url_escape(url, sizeof url, c->scope);
	if (o->identity) { /* docker's OAuth2 refresh: a POST of the identity token */
		snprintf(form, sizeof form, "grant_type=refresh_token&client_id=megacache&service=");
		url_escape(form, sizeof form, c->service);
		strcat(form, "&scope=");
		url_escape(form, sizeof form, c->scope);
		strcat(form, "&refresh_token=");
		url_escape(form, sizeof form, o->secret);
		q.method = "POST";
		q.ctype = "application/x-www-form-urlencoded";
		q.body = form;
		q.body_len = strlen(form);
		snprintf(url, sizeof url, "%s", c->realm);
	} else if (o->user != NULL && (basic = basic_header(o->user, o->secret)) == NULL)
		return mc__err(o->ctx, MC_ERR_NOMEM, "out of memory");
	q.authz = basic;
	rc = perform(o, &q, url, &r);
	sodium_memzero(form, sizeof form);
	mc__secret_free(basic);
	if (rc == MC_OK && r.status != 200)
		rc = mc__err(o->ctx, MC_ERR_REMOTE, "%s: authentication failed: the token service "
			     "answered %ld", o->ref.text, r.status);
	if (rc == MC_OK && ((doc = cJSON_ParseWithLength((char *)r.body, r.body_len)) == NULL ||
			    (!cJSON_IsString(tok = cJSON_GetObjectItemCaseSensitive(doc, "token")) &&
			     !cJSON_IsString(tok = cJSON_GetObjectItemCaseSensitive(doc, "access_token")))))
		rc = mc__err(o->ctx, MC_ERR_REMOTE, "%s: the token service's answer holds no token",
			     o->ref.text);
	/* a token goes in a header line: a space or a control character in it is refused */
	if (rc == MC_OK && !token_ok(tok->valuestring))
		rc = mc__err(o->ctx, MC_ERR_REMOTE, "%s: the token service's token is empty or "
			     "holds a character a header cannot carry", o->ref.text);
	if (rc == MC_OK && (*out = malloc(strlen(tok->valuestring) + 32)) == NULL)
		rc = mc__err(o->ctx, MC_ERR_NOMEM, "out of memory");
	if (rc == MC_OK)
		sprintf(*out, "Authorization: Bearer %s", tok->valuestring);
	if (r.body != NULL)
		sodium_memzero(r.body, r.body_len);
	if (tok != NULL && cJSON_IsString(tok))
		sodium_memzero(tok->valuestring, strlen(tok->valuestring));
	mc__resp_free(&r);
	cJSON_Delete(doc);
	return rc;
}

/* Forgets token i of the cache, and the header sent, when it was that one. */
static void
drop_token(struct mc_oci *o, size_t i)
{
	if (o->auth == o->tokens[i].header)
		o->auth = NULL;
	free(o->tokens[i].scope);
	mc__secret_free(o->tokens[i].header);
	memmove(o->tokens + i, o->tokens + i + 1, sizeof o->tokens[0] * (o->ntokens - i - 1));
	o->ntokens--;
}

/* Answers the challenge of the last 401: sets o->auth to what the next try sends. */
static int
authenticate(struct mc_oci *o)
{
	struct mc_challenge c;
	struct token *t;
	size_t i;
	int rc;

	if ((rc = mc__challenge_parse(o->ctx, o->ref.text, o->challenge, &c)) != MC_OK ||
	    (rc = creds(o)) != MC_OK)
		return rc;
	if (!c.bearer) {
		if (o->user == NULL || o->identity)
			return mc__err(o->ctx, MC_ERR_REMOTE, "%s: the registry asks for a user and "
				       "password, and none was found for %s (--registry-user and "
				       "--registry-password-file, or an auth file: doc/registries.md)",
				       o->ref.text, o->ref.host);
		if (o->basic == NULL && (o->basic = basic_header(o->user, o->secret)) == NULL)
			return mc__err(o->ctx, MC_ERR_NOMEM, "out of memory");
		o->auth = o->basic;
		return MC_OK;
	}
	for (i = 0; i < o->ntokens; i++)
		if (strcmp(o->tokens[i].scope, c.scope) == 0) {
			if (o->auth != o->tokens[i].header) {
				o->auth = o->tokens[i].header;
				return MC_OK;
			}
			drop_token(o, i); /* it was just refused (expired): a new one is asked for */
			break;
		}
	if (o->ntokens == MC_TOKENS) /* the oldest goes */
		drop_token(o, 0);
	t = &o->tokens[o->ntokens];
	if ((t->scope = mc__strdup(c.scope)) == NULL)
		return mc__err(o->ctx, MC_ERR_NOMEM, "out of memory");
	if ((rc = fetch_token(o, &c, &t->header)) != MC_OK) {
		free(t->scope);
		return rc;
	}
	o->ntokens++;
	o->auth = t->header;
	return MC_OK;
}

/* ---- requests ---- */

/* A loopback registry is asked in plain HTTP first, as docker may speak to localhost:
 * its answer to GET /v2/ tells whether it speaks TLS (Go's and nginx's plain answers on
 * a TLS port name HTTPS; others close), and HTTPS is used then. No credential goes
 * before a registry's 401 asks for one, so none is sent in plain HTTP to a TLS port. */
static void
probe_scheme(struct mc_oci *o)
{
	struct mc_req q = {.method = "GET", .url = "/v2/", .body_fd = -1};
	struct mc_resp r = {0};
	char url[320];
	int rc;

	o->scheme_known = 1;
	if (!o->ref.loopback || strncmp(o->base, "http://", 7) != 0)
		return;
	snprintf(url, sizeof url, "%s/v2/", o->base);
	rc = perform(o, &q, url, &r);
	if (rc == MC_OK ? r.status == 400 && r.body != NULL && strstr((char *)r.body, "HTTPS") != NULL
			: o->code == CURLE_RECV_ERROR || o->code == CURLE_GOT_NOTHING ||
			  o->code == CURLE_WEIRD_SERVER_REPLY)
		snprintf(o->base, sizeof o->base, "https://%s", o->ref.host);
	mc__resp_free(&r);
}

/* The next URL after an answer r to url; MC_OK to go on (*done 0), or the end. */
static int
next_step(struct mc_oci *o, const struct mc_req *q, struct mc_resp *r, int *tried, int *hops,
	  char *url, size_t cap, int *done)
{
	int rc;

	*done = 0;
	if (r->status == 401 && same_host(o, url) && !*tried && q->authz == NULL) {
		*tried = 1;
		return authenticate(o);
	}
	if (r->status == 401)
		return mc__err(o->ctx, MC_ERR_REMOTE, "%s: authentication failed (401 Unauthorized)%s",
			       o->ref.text, o->user == NULL ? ": no credentials were found for the "
			       "registry (doc/registries.md)" : "");
	if (r->status >= 300 && r->status < 400 && r->location[0] != '\0') {
		if (++*hops > MC_REDIRECTS)
			return mc__err(o->ctx, MC_ERR_REMOTE, "%s: too many redirects (more than %d)",
				       o->ref.text, MC_REDIRECTS);
		if (!scheme_allowed(o, r->location))
			return mc__err(o->ctx, MC_ERR_REMOTE, "%s: redirected to plain HTTP or another "
				       "scheme (%.*s); --plain-http allows HTTP", o->ref.text,
				       (int)strcspn(r->location, "?"), r->location);
		rc = snprintf(url, cap, "%s", r->location) < (int)cap ? MC_OK :
		     mc__err(o->ctx, MC_ERR_REMOTE, "%s: a redirect's address is too long", o->ref.text);
		return rc;
	}
	*done = 1;
	return MC_OK;
}

int
mc__oci_request(struct mc_oci *o, const struct mc_req *q, struct mc_resp *r)
{
	char url[MC_URL_MAX + 128]; /* a Location with a query added */
	int rc, tried = 0, hops = 0, done = 0;

	if (!o->scheme_known)
		probe_scheme(o);
	if (snprintf(url, sizeof url, "%s%s", strstr(q->url, "://") != NULL ? "" : o->base,
		     q->url) >= (int)sizeof url)
		return mc__err(o->ctx, MC_ERR_REMOTE, "%s: an address of the registry's is too long",
			       o->ref.text);
	/* a URL the registry gave (an upload's Location) is held to the scheme rule too */
	if (!scheme_allowed(o, url))
		return mc__err(o->ctx, MC_ERR_REMOTE, "%s: the registry sent to plain HTTP or another "
			       "scheme (%.*s); --plain-http allows HTTP", o->ref.text,
			       (int)strcspn(url, "?"), url);
	for (;;) { /* the same url again after a 401, a redirect's next */
		rc = perform(o, q, url, r);
		if (rc != MC_OK || (rc = next_step(o, q, r, &tried, &hops, url, sizeof url, &done)) !=
				       MC_OK || done)
			return rc;
		if (q->body_fd < 0 && q->body_len > 0 && hops > 0)
			return mc__err(o->ctx, MC_ERR_REMOTE, "%s: the registry redirected an upload",
				       o->ref.text);
	}
}

/* The registry's own words for a failure: its first error's code and message. */
static void
registry_words(const struct mc_resp *r, char *out, size_t cap)
{
	const cJSON *errs, *e, *code, *msg;
	cJSON *doc;

	out[0] = '\0';
	if (r->body == NULL || (doc = cJSON_ParseWithLength((char *)r->body, r->body_len)) == NULL)
		return;
	errs = cJSON_GetObjectItemCaseSensitive(doc, "errors");
	e = cJSON_IsArray(errs) ? cJSON_GetArrayItem(errs, 0) : NULL;
	code = cJSON_GetObjectItemCaseSensitive(e, "code");
	msg = cJSON_GetObjectItemCaseSensitive(e, "message");
	if (cJSON_IsString(code) || cJSON_IsString(msg))
		snprintf(out, cap, " (%.60s%s%.200s)", cJSON_IsString(code) ? code->valuestring : "",
			 cJSON_IsString(code) && cJSON_IsString(msg) ? ": " : "",
			 cJSON_IsString(msg) ? msg->valuestring : "");
	cJSON_Delete(doc);
}

int
mc__oci_status_err(struct mc_oci *o, const struct mc_resp *r, const char *what)
{
	char words[300];

	registry_words(r, words, sizeof words);
	if (r->status == 404)
		return mc__err(o->ctx, MC_ERR_REMOTE, "%s: %s not found%s", o->ref.text, what, words);
	return mc__err(o->ctx, MC_ERR_REMOTE, "%s: the registry answered %ld to the request for "
		       "%s%s", o->ref.text, r->status, what, words);
}

/* ---- sessions ---- */

int
mc_registry_supported(void)
{
	pthread_once(&cu_once, cu_load);
	return cu_error[0] == '\0';
}

int
mc__oci_new(mc_ctx *ctx, const char *text, struct mc_oci **out)
{
	struct mc_oci *o;
	int rc;

	*out = NULL;
	pthread_once(&cu_once, cu_load);
	if (cu_error[0] != '\0')
		return mc__err(ctx, MC_ERR_UNSUPPORTED, "%s: registry references need libcurl, which "
			       "cannot be loaded: %s", text, cu_error);
	if ((o = calloc(1, sizeof *o)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	o->ctx = ctx;
	if ((rc = mc__ref_parse(ctx, text, &o->ref)) != MC_OK) {
		free(o);
		return rc;
	}
	snprintf(o->base, sizeof o->base, "%s://%s", o->ref.loopback || (ctx->reg != NULL &&
		 ctx->reg->plain_http) ? "http" : "https", o->ref.host);
	if ((o->curl = cu.curl_easy_init()) == NULL) {
		free(o);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	*out = o;
	return MC_OK;
}

void
mc__oci_free(struct mc_oci *o)
{
	size_t i;

	if (o == NULL)
		return;
	cu.curl_easy_cleanup(o->curl);
	mc__secret_free(o->user);
	mc__secret_free(o->secret);
	mc__secret_free(o->basic);
	for (i = 0; i < o->ntokens; i++) {
		free(o->tokens[i].scope);
		mc__secret_free(o->tokens[i].header);
	}
	free(o);
}

const struct mc_ref *
mc__oci_ref(const struct mc_oci *o)
{
	return &o->ref;
}

mc_ctx *
mc__oci_ctx(const struct mc_oci *o)
{
	return o->ctx;
}

void
mc__oci_set_ctx(struct mc_oci *o, mc_ctx *ctx)
{
	o->ctx = ctx;
}

#else /* without libcurl: references are refused */

int
mc_registry_supported(void)
{
	return 0;
}

int
mc__oci_new(mc_ctx *ctx, const char *text, struct mc_oci **out)
{
	*out = NULL;
	return mc__err(ctx, MC_ERR_UNSUPPORTED, "%s: this megacache was built without registry "
		       "support (libcurl)", text);
}

void
mc__oci_free(struct mc_oci *o)
{
	(void)o;
}

int
mc__oci_request(struct mc_oci *o, const struct mc_req *q, struct mc_resp *r)
{
	(void)o, (void)q, (void)r;
	return MC_ERR_UNSUPPORTED;
}

void
mc__resp_free(struct mc_resp *resp)
{
	free(resp->body);
	memset(resp, 0, sizeof *resp);
}

int
mc__oci_status_err(struct mc_oci *o, const struct mc_resp *r, const char *what)
{
	(void)o, (void)r, (void)what;
	return MC_ERR_UNSUPPORTED;
}

const struct mc_ref *
mc__oci_ref(const struct mc_oci *o)
{
	(void)o;
	return NULL;
}

mc_ctx *
mc__oci_ctx(const struct mc_oci *o)
{
	(void)o;
	return NULL;
}

void
mc__oci_set_ctx(struct mc_oci *o, mc_ctx *ctx)
{
	(void)o, (void)ctx;
}

void
mc__oci_stop(struct mc_oci *o)
{
	(void)o;
}

#endif /* MC_WITH_CURL */
