/* redis.c - the Redis client push, pull and audit use: URLs, connecting (password, user,
 * database, a PING to know it is Redis), a pipeline of commands and their replies, SCAN.
 * Built on hiredis; without it every call says the build has no Redis support. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#ifdef MC_WITH_HIREDIS
#include <hiredis/hiredis.h>
#include <hiredis/sds.h>
#endif

#include "fleet/fleet.h"

#define DEFAULT_TRITON_FORMAT "triton:{key}:{filename}"

/* A URL taken apart, the password the one used. */
struct rurl {
	char *user, *password, *host, *path; /* malloc'd or NULL */
	int port;
	long db;
};

struct mc_redis {
	mc_ctx *ctx;
	char *where;   /* the URL without its password */
	char *tformat; /* Triton's key format */
	struct rurl u; /* where, and who: for another connection (mc__redis_again) */
	size_t pending, pending_bytes;
	int broken;    /* a send failed, maybe part way through a command: none may follow
			* (replies of what went before may still be read) */
#ifdef MC_WITH_HIREDIS
	redisContext *c;
#endif
};

mc_ctx *
mc__redis_ctx(const mc_redis *r)
{
	return r->ctx;
}

mc_ctx *
mc__redis_use_ctx(mc_redis *r, mc_ctx *ctx)
{
	mc_ctx *old = r->ctx;

	r->ctx = ctx;
	return old;
}

const char *
mc_redis_where(const mc_redis *r)
{
	return r != NULL ? r->where : "";
}

const char *
mc__redis_triton_format(const mc_redis *r)
{
	return r->tformat;
}

int
mc_redis_set_triton_format(mc_redis *r, const char *format)
{
	char *f;

	if (r == NULL || format == NULL)
		return MC_ERR_INVALID;
	if (!mc__triton_format_ok(format))
		return mc__err(r->ctx, MC_ERR_INVALID, "Triton key format '%s': expected {key} "
			       "and then {filename}, once each, with text between them", format);
	if ((f = mc__strdup(format)) == NULL)
		return mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
	free(r->tformat);
	r->tformat = f;
	return MC_OK;
}

size_t
mc__redis_pending(const mc_redis *r)
{
	return r->pending;
}

int
mc__redis_full(const mc_redis *r)
{
	return r->pending >= MC_PIPE_COMMANDS || r->pending_bytes >= MC_PIPE_BYTES;
}

int
mc_redis_supported(void)
{
#ifdef MC_WITH_HIREDIS
	return 1;
#else
	return 0;
#endif
}

/* "<c><n>\r\n" at o: its length. */
static size_t
resp_head(unsigned char *o, char c, size_t n)
{
	size_t len = mc__utoa((char *)o + 1, n);

	o[0] = (unsigned char)c;
	o[1 + len] = '\r', o[2 + len] = '\n';
	return len + 3;
}

/* The bytes a command takes in Redis's protocol (at most), or 0 when too many. */
static size_t
cmd_size(int argc, const size_t *lens)
{
	size_t need = 24;
	int i;

	for (i = 0; i < argc; i++) {
		if (lens[i] > SIZE_MAX - need - 32)
			return 0;
		need += lens[i] + 24 + 2;
	}
	return need;
}

/* Writes a command at o (argument mark's place in *at): where it ends. */
static unsigned char *
put_cmd(unsigned char *o, int argc, const char **argv, const size_t *lens, int mark,
	unsigned char **at)
{
	int i;

	o += resp_head(o, '*', (size_t)argc);
	for (i = 0; i < argc; i++) {
		o += resp_head(o, '$', lens[i]);
		if (i == mark)
			*at = o;
		if (argv[i] != NULL && lens[i] > 0)
			memcpy(o, argv[i], lens[i]);
		o += lens[i];
		*o++ = '\r', *o++ = '\n';
	}
	return o;
}

static const char multi[] = "*1\r\n$5\r\nMULTI\r\n", exec[] = "*1\r\n$4\r\nEXEC\r\n";

unsigned char *
mc__redis_format_ttl(int argc, const char **argv, const size_t *lens, int mark,
		     unsigned char **at, size_t *len)
{
	const char *ttl[2] = {"TTL", argv[1]};
	size_t tlens[2] = {3, lens[1]}, need = cmd_size(argc, lens), tneed = cmd_size(2, tlens);
	unsigned char *buf, *o, *unused;

	if (need == 0 || tneed == 0 || need > SIZE_MAX - tneed - sizeof multi - sizeof exec ||
	    (buf = malloc(need + tneed + sizeof multi + sizeof exec)) == NULL)
		return NULL;
	memcpy(buf, multi, sizeof multi - 1);
	o = put_cmd(buf + sizeof multi - 1, 2, ttl, tlens, -1, &unused);
	o = put_cmd(o, argc, argv, lens, mark, at);
	memcpy(o, exec, sizeof exec - 1);
	*len = (size_t)(o + sizeof exec - 1 - buf);
	return buf;
}

#ifndef MC_WITH_HIREDIS

static int
unsupported(mc_ctx *ctx)
{
	return mc__err(ctx, MC_ERR_UNSUPPORTED, "this megacache was built without Redis "
		       "support (configure found no hiredis)");
}

int
mc_redis_open(mc_ctx *ctx, const char *url, const char *password, mc_redis **out)
{
	if (out != NULL)
		*out = NULL;
	return unsupported(ctx);
}

void
mc_redis_free(mc_redis *r)
{
	if (r != NULL) {
		free(r->where);
		free(r->tformat);
		free(r);
	}
}

int
mc__redis_again(const mc_redis *r, mc_ctx *ctx, mc_redis **out)
{
	*out = NULL;
	return unsupported(ctx);
}

int
mc__redis_append(mc_redis *r, int argc, const char **argv, const size_t *lens)
{
	return unsupported(r->ctx);
}

int
mc__redis_send_cmd(mc_redis *r, const unsigned char *cmd, size_t len, size_t replies)
{
	return unsupported(r->ctx);
}

int
mc__redis_reply(mc_redis *r, const char *what, struct mc_rreply *rep)
{
	return unsupported(r->ctx);
}

int
mc__redis_reply_ttl(mc_redis *r, const char *what, struct mc_rreply *rep, long long *ttl)
{
	return unsupported(r->ctx);
}

void
mc__redis_reply_free(struct mc_rreply *rep)
{
}

void
mc__redis_discard(mc_redis *r)
{
}

int
mc__redis_scan(mc_redis *r, unsigned long long *cursor, const char *pattern, char ***keys,
	       size_t *n)
{
	return unsupported(r->ctx);
}

#else /* MC_WITH_HIREDIS */

/* s[0..n) with %XX decoded (malloc'd), or NULL. */
static char *
pct_decode(const char *s, size_t n)
{
	char *o = malloc(n + 1), *p = o;
	size_t i;

	if (o == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		unsigned v;
		if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
		    isxdigit((unsigned char)s[i + 2]) && sscanf(s + i + 1, "%2x", &v) == 1) {
			*p++ = (char)v;
			i += 2;
		} else {
			*p++ = s[i];
		}
	}
	*p = '\0';
	return o;
}

/* url as an error shows it: what is before an '@' of its authority hidden, a password
 * being there. */
static void
url_masked(const char *url, char *buf, size_t len)
{
	const char *s = strstr(url, "://"), *at;

	/* The last '@' anywhere: a password may hold '/', '?' or '#' unescaped. */
	s = s != NULL ? s + 3 : url;
	at = strrchr(s, '@');
	if (at == NULL)
		snprintf(buf, len, "%s", url);
	else
		snprintf(buf, len, "%.*s***%s", (int)(s - url), url, at);
}

static int
bad_url(mc_ctx *ctx, const char *url, const char *why)
{
	char shown[512];

	url_masked(url, shown, sizeof shown);
	return mc__err(ctx, MC_ERR_INVALID, "Redis URL '%s': %s (expected "
		       "redis://[[user]:password@]host[:port][/db] or unix:///path[?db=N])",
		       shown, why);
}

static int
parse_db(const char *s, long *db)
{
	char *end;

	errno = 0;
	*db = strtol(s, &end, 10);
	return s[0] >= '0' && s[0] <= '9' && *end == '\0' && errno == 0 && *db <= 1000000 ? 0 : -1;
}

/* Whether s[0..n) holds %00, which no AUTH can carry. */
static int
nul_escape(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i + 2 < n; i++)
		if (s[i] == '%' && s[i + 1] == '0' && s[i + 2] == '0')
			return 1;
	return 0;
}

/* redis://[[user]:password@]host[:port][/db] */
static int
parse_tcp(mc_ctx *ctx, const char *url, struct rurl *u)
{
	const char *s = url + 8, *at, *hend, *slash = strchr(url + 8, '/');
	const char *end = slash != NULL ? slash : s + strlen(s);

	at = memchr(s, '@', (size_t)(end - s));
	if (at != NULL) {
		const char *colon = memchr(s, ':', (size_t)(at - s));
		if (nul_escape(s, (size_t)(at - s)))
			return bad_url(ctx, url, "a NUL byte (%00) in the user or password");
		if (colon == NULL) { /* a user alone: the password from elsewhere */
			u->user = pct_decode(s, (size_t)(at - s));
		} else {
			u->user = colon > s ? pct_decode(s, (size_t)(colon - s)) : NULL;
			u->password = pct_decode(colon + 1, (size_t)(at - colon - 1));
		}
		s = at + 1;
	}
	if (*s == '[') { /* [IPv6] */
		if ((hend = memchr(s, ']', (size_t)(end - s))) == NULL)
			return bad_url(ctx, url, "unclosed '['");
		u->host = pct_decode(s + 1, (size_t)(hend - s - 1));
		hend++;
	} else {
		hend = memchr(s, ':', (size_t)(end - s));
		hend = hend != NULL ? hend : end;
		u->host = pct_decode(s, (size_t)(hend - s));
	}
	u->port = 6379;
	if (hend < end) {
		char *pe;
		long p;
		if (*hend != ':' || (p = strtol(hend + 1, &pe, 10)) < 1 || p > 65535 || pe != end)
			return bad_url(ctx, url, "bad port");
		u->port = (int)p;
	}
	if (u->host == NULL || u->host[0] == '\0')
		return bad_url(ctx, url, "no host");
	if (slash != NULL && slash[1] != '\0' && parse_db(slash + 1, &u->db) != 0)
		return bad_url(ctx, url, "bad database number");
	return MC_OK;
}

static int
parse_url(mc_ctx *ctx, const char *url, struct rurl *u)
{
	memset(u, 0, sizeof *u);
	if (strncmp(url, "redis://", 8) == 0)
		return parse_tcp(ctx, url, u);
	if (strncmp(url, "unix://", 7) == 0) {
		const char *q = strchr(url + 7, '?');
		size_t n = q != NULL ? (size_t)(q - url - 7) : strlen(url + 7);
		if (n == 0 || url[7] != '/')
			return bad_url(ctx, url, "no socket path");
		u->path = pct_decode(url + 7, n);
		if (q != NULL && (strncmp(q, "?db=", 4) != 0 || parse_db(q + 4, &u->db) != 0))
			return bad_url(ctx, url, "bad database number");
		return MC_OK;
	}
	if (strncmp(url, "rediss://", 9) == 0) {
		char shown[512];
		url_masked(url, shown, sizeof shown);
		return mc__err(ctx, MC_ERR_UNSUPPORTED, "Redis URL '%s': TLS (rediss://) is not "
			       "supported; reach the server through a TLS tunnel", shown);
	}
	return bad_url(ctx, url, "unknown scheme");
}

/* A password wiped and freed. */
static void
secret_free(char *s)
{
	if (s != NULL) {
		sodium_memzero(s, strlen(s));
		free(s);
	}
}

static void
url_free(struct rurl *u)
{
	secret_free(u->password);
	free(u->user);
	free(u->host);
	free(u->path);
	memset(u, 0, sizeof *u);
}

/* A copy of u: MC_OK, or MC_ERR_NOMEM (to then be freed). */
static int
url_copy(struct rurl *to, const struct rurl *u)
{
	*to = *u;
	to->user = u->user != NULL ? mc__strdup(u->user) : NULL;
	to->password = u->password != NULL ? mc__strdup(u->password) : NULL;
	to->host = u->host != NULL ? mc__strdup(u->host) : NULL;
	to->path = u->path != NULL ? mc__strdup(u->path) : NULL;
	if ((u->user != NULL && to->user == NULL) || (u->password != NULL && to->password == NULL) ||
	    (u->host != NULL && to->host == NULL) || (u->path != NULL && to->path == NULL))
		return MC_ERR_NOMEM;
	return MC_OK;
}

/* The URL as messages show it: no password. */
static char *
url_shown(const struct rurl *u)
{
	char buf[1200];

	if (u->path != NULL && u->db != 0)
		snprintf(buf, sizeof buf, "unix://%s?db=%ld", u->path, u->db);
	else if (u->path != NULL)
		snprintf(buf, sizeof buf, "unix://%s", u->path);
	else
		snprintf(buf, sizeof buf, "redis://%s%s%s:%d/%ld",
			 strchr(u->host, ':') != NULL ? "[" : "", u->host,
			 strchr(u->host, ':') != NULL ? "]" : "", u->port, u->db);
	return mc__strdup(buf);
}

/* The connection's failure (c->err), naming the server. */
static int
conn_error(mc_redis *r, const char *what)
{
	redisContext *c = r->c;

	if (c->err == REDIS_ERR_PROTOCOL)
		return mc__err(r->ctx, MC_ERR_REMOTE, "%s: %s: not a Redis server (%s)", r->where,
			       what, c->errstr);
	if (c->err == REDIS_ERR_EOF)
		return mc__err(r->ctx, MC_ERR_REMOTE, "%s: %s: the server closed the connection",
			       r->where, what);
	return mc__err(r->ctx, MC_ERR_REMOTE, "%s: %s: %s", r->where, what,
		       c->errstr[0] ? c->errstr : strerror(errno));
}

/* A send that failed part way leaves a command cut short on the connection: nothing
 * more is sent on it. */
static int
broken(mc_redis *r)
{
	return mc__err(r->ctx, MC_ERR_REMOTE, "%s: sending: the connection failed earlier",
		       r->where);
}

static int get_reply(mc_redis *r, redisReply **rep);

void
mc__redis_discard(mc_redis *r)
{
	char saved[MC_ERRBUF];
	redisReply *rep;

	snprintf(saved, sizeof saved, "%s", r->ctx->err);
	while (r->pending > 0) {
		rep = NULL;
		r->pending--;
		if (get_reply(r, &rep) != REDIS_OK) {
			r->pending = 0;
			break;
		}
		freeReplyObject(rep);
	}
	r->pending_bytes = 0;
	snprintf(r->ctx->err, sizeof r->ctx->err, "%s", saved);
}

/* SIGPIPE held back around a write to the server: a server that went away is an error,
 * not the end of the process. A SIGPIPE raised meanwhile is taken; one pending before
 * is left. */
struct pipe_hold {
	sigset_t set, old;
	int had;
};

static void
pipe_hold(struct pipe_hold *h)
{
	sigset_t pend;

	sigemptyset(&h->set);
	sigaddset(&h->set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &h->set, &h->old);
	sigpending(&pend);
	h->had = sigismember(&pend, SIGPIPE);
}

static void
pipe_release(struct pipe_hold *h)
{
	struct timespec zero = {0, 0};

	if (!h->had)
		while (sigtimedwait(&h->set, NULL, &zero) == SIGPIPE)
			;
	pthread_sigmask(SIG_SETMASK, &h->old, NULL);
}

/* Reads one reply (sending what hiredis holds first). */
static int
get_reply(mc_redis *r, redisReply **rep)
{
	struct pipe_hold h;
	int rc;

	pipe_hold(&h);
	rc = redisGetReply(r->c, (void **)rep);
	pipe_release(&h);
	return rc;
}

/* Sends a command and reads its reply (a status, or an error refused with why). */
static int
call(mc_redis *r, const char *what, int argc, const char **argv, redisReply **out)
{
	redisReply *rep = NULL;

	if (r->broken)
		return broken(r);
	if (redisAppendCommandArgv(r->c, argc, argv, NULL) != REDIS_OK)
		return conn_error(r, what);
	if (get_reply(r, &rep) != REDIS_OK)
		return conn_error(r, what);
	if (rep->type == REDIS_REPLY_ERROR) {
		int rc;
		if (strncmp(rep->str, "NOAUTH", 6) == 0)
			rc = mc__err(r->ctx, MC_ERR_REMOTE, "%s: the server needs a password (%s)",
				     r->where, rep->str);
		else
			rc = mc__err(r->ctx, MC_ERR_REMOTE, "%s: %s refused: %s", r->where, what,
				     rep->str);
		freeReplyObject(rep);
		return rc;
	}
	if (out != NULL)
		*out = rep;
	else
		freeReplyObject(rep);
	return MC_OK;
}

static int
greet(mc_redis *r, const struct rurl *u)
{
	char db[24];
	const char *argv[3];
	int rc;

	if (u->password != NULL) {
		argv[0] = "AUTH";
		argv[1] = u->user != NULL ? u->user : u->password;
		argv[2] = u->password;
		if ((rc = call(r, "authentication", u->user != NULL ? 3 : 2, argv, NULL)) != MC_OK)
			return rc;
	}
	argv[0] = "PING";
	if ((rc = call(r, "PING", 1, argv, NULL)) != MC_OK)
		return rc;
	if (u->db != 0) {
		snprintf(db, sizeof db, "%ld", u->db);
		argv[0] = "SELECT", argv[1] = db;
		return call(r, "SELECT", 2, argv, NULL);
	}
	return MC_OK;
}

static int
connect_to(mc_redis *r, const struct rurl *u)
{
	struct timeval tv = {10, 0}, io = {60, 0};

	r->c = u->path != NULL ? redisConnectUnixWithTimeout(u->path, tv)
			       : redisConnectWithTimeout(u->host, u->port, tv);
	if (r->c == NULL)
		return mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
	if (r->c->err)
		return mc__err(r->ctx, MC_ERR_REMOTE, "%s: cannot connect: %s", r->where,
			       r->c->errstr);
	if (redisSetTimeout(r->c, io) != REDIS_OK)
		return conn_error(r, "setting a timeout");
	return MC_OK;
}

/* r connected and greeted into *out, else freed. */
static int
dial(mc_redis *r, mc_redis **out)
{
	int rc;

	if ((rc = connect_to(r, &r->u)) == MC_OK)
		rc = greet(r, &r->u);
	if (rc != MC_OK) {
		mc_redis_free(r);
		return rc;
	}
	*out = r;
	return MC_OK;
}

int
mc_redis_open(mc_ctx *ctx, const char *url, const char *password, mc_redis **out)
{
	mc_redis *r;
	int rc;

	if (out == NULL || url == NULL)
		return mc__err(ctx, MC_ERR_INVALID, "mc_redis_open: no URL");
	*out = NULL;
	if ((r = calloc(1, sizeof *r)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	r->ctx = ctx;
	if ((rc = parse_url(ctx, url, &r->u)) != MC_OK) {
		mc_redis_free(r);
		return rc;
	}
	if (password != NULL) { /* it, not the URL's */
		secret_free(r->u.password);
		r->u.password = mc__strdup(password);
	}
	if ((password != NULL && r->u.password == NULL) || (r->where = url_shown(&r->u)) == NULL ||
	    (r->tformat = mc__strdup(DEFAULT_TRITON_FORMAT)) == NULL) {
		mc_redis_free(r);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	return dial(r, out);
}

/* The numeric address of r's server (TCP), or NULL: another connection goes to the
 * same server whatever its name resolves to by then (a name of several servers). */
static char *
peer_host(const mc_redis *r)
{
	struct sockaddr_storage sa;
	socklen_t len = sizeof sa;
	char host[1025];

	if (r->u.path != NULL || getpeername(r->c->fd, (struct sockaddr *)&sa, &len) != 0 ||
	    getnameinfo((struct sockaddr *)&sa, len, host, sizeof host, NULL, 0,
			NI_NUMERICHOST) != 0)
		return NULL;
	return mc__strdup(host);
}

int
mc__redis_again(const mc_redis *r, mc_ctx *ctx, mc_redis **out)
{
	mc_redis *a;
	char *peer;

	*out = NULL;
	if ((a = calloc(1, sizeof *a)) == NULL || url_copy(&a->u, &r->u) != MC_OK ||
	    (a->where = mc__strdup(r->where)) == NULL ||
	    (a->tformat = mc__strdup(r->tformat)) == NULL) {
		mc_redis_free(a);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	a->ctx = ctx;
	if ((peer = peer_host(r)) != NULL) {
		free(a->u.host);
		a->u.host = peer;
	}
	return dial(a, out);
}

void
mc_redis_free(mc_redis *r)
{
	if (r == NULL)
		return;
	if (r->c != NULL)
		redisFree(r->c);
	url_free(&r->u);
	free(r->where);
	free(r->tformat);
	free(r);
}

int
mc__redis_append(mc_redis *r, int argc, const char **argv, const size_t *lens)
{
	size_t i;

	if (r->broken)
		return broken(r);
	if (redisAppendCommandArgv(r->c, argc, argv, lens) != REDIS_OK)
		return conn_error(r, "sending");
	r->pending++;
	for (i = 0; i < (size_t)argc; i++)
		r->pending_bytes += lens[i];
	return MC_OK;
}

int
mc__redis_send_cmd(mc_redis *r, const unsigned char *cmd, size_t len, size_t replies)
{
	struct pipe_hold h;
	size_t left = len;
	int err = 0;

	/* What hiredis holds goes first (nothing, unless a command was queued through it):
	 * then the command, straight from the caller's buffer. */
	if (r->c->err != 0)
		return conn_error(r, "sending");
	if (sdslen(r->c->obuf) > 0 && !r->broken) {
		if (redisAppendFormattedCommand(r->c, (const char *)cmd, len) != REDIS_OK)
			return conn_error(r, "sending");
		r->pending += replies;
		r->pending_bytes += len;
		return MC_OK;
	}
	if (r->broken)
		return broken(r);
	pipe_hold(&h);
	while (left > 0) {
		ssize_t k = write(r->c->fd, cmd, left);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			err = k < 0 ? errno : EIO;
			break;
		}
		cmd += k;
		left -= (size_t)k;
	}
	pipe_release(&h);
	if (err != 0)
		r->broken = 1;
	if (err == EAGAIN || err == EWOULDBLOCK)
		return mc__err(r->ctx, MC_ERR_REMOTE, "%s: sending: timed out", r->where);
	if (err == EPIPE || err == ECONNRESET)
		return mc__err(r->ctx, MC_ERR_REMOTE, "%s: sending: the server closed the connection",
			       r->where);
	if (err != 0)
		return mc__err(r->ctx, MC_ERR_REMOTE, "%s: sending: %s", r->where, strerror(err));
	r->pending += replies;
	r->pending_bytes += len;
	return MC_OK;
}

/* The server refused what (error: its reply). */
static int
refused(mc_redis *r, const char *what, const char *error)
{
	return mc__err(r->ctx, MC_ERR_REMOTE, "%s: %s refused: %s%s", r->where, what, error,
		       strncmp(error, "ERR syntax error", 16) == 0
			       ? " (push needs Redis 6.2 or later, for SET ... GET)" : "");
}

int
mc__redis_reply(mc_redis *r, const char *what, struct mc_rreply *out)
{
	redisReply *rep = NULL;
	int rc;

	memset(out, 0, sizeof *out);
	if (r->pending == 0)
		return mc__err(r->ctx, MC_ERR_INVALID, "%s: no reply awaited", r->where);
	rc = get_reply(r, &rep);
	r->pending--;
	if (r->pending == 0)
		r->pending_bytes = 0;
	if (rc != REDIS_OK)
		return conn_error(r, what);
	out->raw = rep;
	if (rep->type == REDIS_REPLY_ERROR) {
		out->error = rep->str;
		return refused(r, what, rep->str);
	}
	out->nil = rep->type == REDIS_REPLY_NIL;
	if (rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_STATUS) {
		out->str = (const unsigned char *)rep->str;
		out->len = rep->len;
	}
	return MC_OK;
}

/* Reads n replies into rep[] (each awaited): MC_OK, or the connection's failure. */
static int
get_replies(mc_redis *r, const char *what, redisReply **rep, int n)
{
	int k, rc = MC_OK;

	for (k = 0; k < n && rc == MC_OK; k++) {
		if (r->pending == 0)
			return mc__err(r->ctx, MC_ERR_INVALID, "%s: no reply awaited", r->where);
		rc = get_reply(r, &rep[k]) == REDIS_OK ? MC_OK : conn_error(r, what);
		r->pending--;
		if (r->pending == 0)
			r->pending_bytes = 0;
	}
	return rc;
}

int
mc__redis_reply_ttl(mc_redis *r, const char *what, struct mc_rreply *out, long long *ttl)
{
	redisReply *rep[4] = {NULL, NULL, NULL, NULL}, *keep, *v = NULL;
	const char *err = NULL;
	int k, rc;

	memset(out, 0, sizeof *out);
	*ttl = -2;
	rc = get_replies(r, what, rep, 4);
	for (k = 0; k < 4 && rc != MC_OK; k++)
		if (rep[k] != NULL)
			freeReplyObject(rep[k]);
	if (rc != MC_OK)
		return rc;
	/* A command refused as it was queued aborts the transaction: its refusal tells. */
	for (keep = rep[3], k = 0; k < 3 && err == NULL; k++)
		if (rep[k]->type == REDIS_REPLY_ERROR)
			keep = rep[k], err = rep[k]->str;
	if (err == NULL && rep[3]->type == REDIS_REPLY_ARRAY && rep[3]->elements == 2) {
		if (rep[3]->element[0]->type == REDIS_REPLY_INTEGER)
			*ttl = rep[3]->element[0]->integer;
		v = rep[3]->element[1];
		err = v->type == REDIS_REPLY_ERROR ? v->str : NULL;
	} else if (err == NULL) {
		err = rep[3]->type == REDIS_REPLY_ERROR ? rep[3]->str : "EXEC gave no results";
	}
	for (k = 0; k < 4; k++)
		if (rep[k] != keep)
			freeReplyObject(rep[k]);
	out->raw = keep;
	if (err != NULL) {
		out->error = err;
		return refused(r, what, err);
	}
	out->nil = v->type == REDIS_REPLY_NIL;
	if (v->type == REDIS_REPLY_STRING || v->type == REDIS_REPLY_STATUS) {
		out->str = (const unsigned char *)v->str;
		out->len = v->len;
	}
	return MC_OK;
}

void
mc__redis_reply_free(struct mc_rreply *rep)
{
	if (rep->raw != NULL)
		freeReplyObject(rep->raw);
	memset(rep, 0, sizeof *rep);
}

/* The keys of a SCAN reply's second element, copied. */
static int
scan_keys(mc_redis *r, const redisReply *arr, char ***keys, size_t *n)
{
	size_t i;

	if ((*keys = calloc(arr->elements + 1, sizeof **keys)) == NULL)
		return mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < arr->elements; i++) {
		const redisReply *k = arr->element[i];
		if (k->type != REDIS_REPLY_STRING || memchr(k->str, '\0', k->len) != NULL)
			continue; /* a key with a NUL is no torch or Triton key */
		if (((*keys)[*n] = malloc(k->len + 1)) == NULL)
			return mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
		memcpy((*keys)[*n], k->str, k->len);
		(*keys)[(*n)++][k->len] = '\0';
	}
	return MC_OK;
}

int
mc__redis_scan(mc_redis *r, unsigned long long *cursor, const char *pattern, char ***keys,
	       size_t *n)
{
	char cur[24];
	const char *argv[6] = {"SCAN", cur, "MATCH", pattern, "COUNT", "1000"};
	redisReply *rep = NULL;
	int rc;

	*keys = NULL;
	*n = 0;
	snprintf(cur, sizeof cur, "%llu", *cursor);
	if ((rc = call(r, "SCAN", 6, argv, &rep)) != MC_OK)
		return rc;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
	    rep->element[0]->type != REDIS_REPLY_STRING ||
	    rep->element[1]->type != REDIS_REPLY_ARRAY) {
		freeReplyObject(rep);
		return mc__err(r->ctx, MC_ERR_REMOTE, "%s: SCAN: an unexpected reply", r->where);
	}
	*cursor = strtoull(rep->element[0]->str, NULL, 10);
	rc = scan_keys(r, rep->element[1], keys, n);
	freeReplyObject(rep);
	if (rc != MC_OK) {
		mc__strv_free(*keys, *n);
		*keys = NULL;
		*n = 0;
	}
	return rc;
}

#endif /* MC_WITH_HIREDIS */
