/*
 * pylit.c - a strict reader of the Python literals vLLM keeps its compile cache's
 * handles in (pprint's text, read back by ast.literal_eval): dicts, tuples, lists,
 * strings, decimal ints, None, True and False, and nothing that is evaluated. It can
 * rewrite the strings it meets, keeping every other byte as it was.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiers/tiers.h"

#define PL_DEPTH_MAX 64
#define PL_DIGITS_MAX 4300 /* the longest int Python reads from text */

enum { PL_ATOM, PL_STR, PL_TUPLE, PL_UNHASHABLE };

struct pl_buf {
	unsigned char *b;
	size_t n, cap;
};

struct pl {
	mc_ctx *ctx;
	const char *name;
	const unsigned char *in;
	size_t n, i;
	unsigned depth;
	mc_pylit_fn fn;
	void *ud;
	struct pl_buf s;   /* the string just read, decoded */
	struct pl_buf out; /* the text rewritten so far */
	size_t copied;     /* how much of in out holds */
};

/* The length of the UTF-8 sequence at s (n bytes left) and its code point; 0 if none. */
static size_t
utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t len, k;
	uint32_t c = s[0], min;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, c &= 0x1f, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, c &= 0x0f, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, c &= 0x07, min = 0x10000;
	else
		return 0;
	if (len > n)
		return 0;
	for (k = 1; k < len; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[k] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

static int
pl_vfail(struct pl *p, size_t at, int code, const char *fmt, va_list ap)
{
	size_t k, line = 1, col = 1;
	char what[256];

	for (k = 0; k < at && k < p->n; k++) {
		if (p->in[k] == '\n')
			line++, col = 1;
		else if ((p->in[k] & 0xc0) != 0x80)
			col++;
	}
	vsnprintf(what, sizeof what, fmt, ap);
	return mc__err(p->ctx, code, "%s: line %zu, column %zu: %s", p->name, line, col, what);
}

/* Fails at offset at with code and the message fmt makes. */
static int __attribute__((format(printf, 4, 5)))
pl_fail(struct pl *p, size_t at, int code, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = pl_vfail(p, at, code, fmt, ap);
	va_end(ap);
	return rc;
}

static int
is_name(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (c >= '0' && c <= '9');
}

/* What stands at offset i, for a message. */
static const char *
found(const struct pl *p, char *buf, size_t len)
{
	size_t k = p->i;
	int c;

	if (k >= p->n)
		return "the end of the text";
	c = p->in[k];
	if (c == '\'' || c == '"')
		return "a string";
	if (is_name(c) && !(c >= '0' && c <= '9')) {
		while (k < p->n && is_name(p->in[k]) && k - p->i < 40)
			k++;
		snprintf(buf, len, "the name '%.*s' (names and calls are not read)",
			 (int)(k - p->i), (const char *)p->in + p->i);
	} else if (c > 0x20 && c < 0x7f) {
		snprintf(buf, len, "'%c'", c);
	} else {
		snprintf(buf, len, "the byte 0x%02x", (unsigned)c);
	}
	return buf;
}

/* Fails at the current offset: found <what is there> where <want>. */
static int
pl_want(struct pl *p, const char *want)
{
	char buf[96];

	return pl_fail(p, p->i, MC_ERR_MALFORMED, "found %s where %s",
		       found(p, buf, sizeof buf), want);
}

static int
buf_add(mc_ctx *ctx, struct pl_buf *b, const void *d, size_t n)
{
	if (mc__grow(&b->b, &b->cap, b->n + n + 1, 1) != MC_OK)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	memcpy(b->b + b->n, d, n);
	b->n += n;
	b->b[b->n] = '\0';
	return MC_OK;
}

static int
buf_cp(mc_ctx *ctx, struct pl_buf *b, uint32_t cp)
{
	unsigned char u[4];
	size_t n;

	if (cp < 0x80)
		u[0] = (unsigned char)cp, n = 1;
	else if (cp < 0x800)
		u[0] = (unsigned char)(0xc0 | cp >> 6), n = 2;
	else if (cp < 0x10000)
		u[0] = (unsigned char)(0xe0 | cp >> 12), n = 3;
	else
		u[0] = (unsigned char)(0xf0 | cp >> 18), n = 4;
	for (size_t k = 1; k < n; k++)
		u[k] = (unsigned char)(0x80 | ((cp >> (6 * (n - 1 - k))) & 0x3f));
	return buf_add(ctx, b, u, n);
}

/* Skips blanks, and inside brackets newlines and comments too. */
static void
skip(struct pl *p)
{
	while (p->i < p->n) {
		int c = p->in[p->i];

		if (c == ' ' || c == '\t' || c == '\f')
			p->i++;
		else if (p->depth > 0 && (c == '\n' || c == '\r'))
			p->i++;
		else if (p->depth > 0 && c == '#')
			while (p->i < p->n && p->in[p->i] != '\n' && p->in[p->i] != '\r')
				p->i++;
		else
			break;
	}
}

/* The value of the k (at most 8) hex digits at in[i], or -1. */
static int64_t
hex_at(const struct pl *p, size_t i, size_t k)
{
	int64_t v = 0;

	if (i + k > p->n)
		return -1;
	for (size_t j = i; j < i + k; j++) {
		int c = p->in[j], d;

		d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
			c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	return v;
}

/* The code point of the numeric escape at in[i] (after the backslash), its length in
 * *len; -1 when it is not one. */
static long
num_escape(const struct pl *p, size_t i, size_t *len)
{
	int c = p->in[i];
	long v = 0;
	int64_t h;
	size_t k;

	if (c >= '0' && c <= '7') {
		for (k = i; k < p->n && k < i + 3 && p->in[k] >= '0' && p->in[k] <= '7'; k++)
			v = v * 8 + (p->in[k] - '0');
		*len = k - i;
		return v;
	}
	k = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
	if (k == 0)
		return -1;
	*len = k + 1;
	if ((h = hex_at(p, i + 1, k)) < 0 || h > 0x10ffff || (h >= 0xd800 && h <= 0xdfff))
		return -2;
	return (long)h;
}

/* One escape: p->i is at the backslash. */
static int
escape(struct pl *p)
{
	static const char from[] = "\\'\"abfnrtv", to[] = "\\'\"\a\b\f\n\r\t\v";
	size_t at = p->i++, len;
	const char *m;
	long v;
	int c;

	if (p->i >= p->n)
		return pl_fail(p, at, MC_ERR_MALFORMED, "an unterminated string");
	c = p->in[p->i];
	if (c == '\n' || c == '\r') { /* a line continued */
		p->i += c == '\r' && p->i + 1 < p->n && p->in[p->i + 1] == '\n' ? 2 : 1;
		return MC_OK;
	}
	if (c != '\0' && (m = strchr(from, c)) != NULL) {
		p->i++;
		return buf_add(p->ctx, &p->s, to + (m - from), 1);
	}
	if ((v = num_escape(p, p->i, &len)) == -1)
		return pl_fail(p, at, MC_ERR_MALFORMED, "a bad escape '\\%c' in a string",
			       c > 0x20 && c < 0x7f ? c : '?');
	if (v < 0)
		return pl_fail(p, at, MC_ERR_MALFORMED, "a bad escape '\\%c' in a string "
			       "(not its digits, or no character)", c);
	p->i += len;
	return buf_cp(p->ctx, &p->s, (uint32_t)v);
}

/* One quoted literal, appended to p->s decoded: p->i is at its opening quote. */
static int
literal(struct pl *p)
{
	size_t at = p->i;
	int q = p->in[p->i++], rc;

	if (p->i + 1 < p->n && p->in[p->i] == q && p->in[p->i + 1] == q)
		return pl_fail(p, at, MC_ERR_MALFORMED, "a triple-quoted string (not read)");
	for (;;) {
		size_t k = p->i;

		while (k < p->n && p->in[k] != q && p->in[k] != '\\' && p->in[k] != '\n' &&
		       p->in[k] != '\r')
			k++;
		if ((rc = buf_add(p->ctx, &p->s, p->in + p->i, k - p->i)) != MC_OK)
			return rc;
		p->i = k;
		if (k >= p->n || p->in[k] == '\n' || p->in[k] == '\r')
			return pl_fail(p, at, MC_ERR_MALFORMED, "an unterminated string");
		if (p->in[k] == q) {
			p->i++;
			return MC_OK;
		}
		if ((rc = escape(p)) != MC_OK)
			return rc;
	}
}

/* Writes s (n bytes of UTF-8) to b as one literal in the form format/SPEC.md section 4.2
 * gives, which Python reads back as s (its repr() escapes more of the characters past
 * U+00A0). */
static int
repr(mc_ctx *ctx, struct pl_buf *b, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	char q = memchr(s, '\'', n) && !memchr(s, '"', n) ? '"' : '\'', e[8];
	size_t i, len;
	uint32_t cp;
	int rc = buf_add(ctx, b, &q, 1);

	for (i = 0; rc == MC_OK && i < n; i += len) {
		len = utf8_seq(u + i, n - i, &cp);
		if (cp == '\\' || cp == (uint32_t)q)
			snprintf(e, sizeof e, "\\%c", (char)cp);
		else if (cp == '\n' || cp == '\r' || cp == '\t')
			snprintf(e, sizeof e, "\\%c", cp == '\n' ? 'n' : cp == '\r' ? 'r' : 't');
		else if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad)
			snprintf(e, sizeof e, "\\x%02x", (unsigned)cp);
		else
			e[0] = '\0';
		rc = e[0] ? buf_add(ctx, b, e, strlen(e)) : buf_add(ctx, b, u + i, len);
	}
	return rc == MC_OK ? buf_add(ctx, b, &q, 1) : rc;
}

/* Shows the string just read (from in[from] to p->i) to the caller's function, and
 * writes its replacement if it gives one. */
static int
offer(struct pl *p, const struct mc_pylit_at *at, size_t from)
{
	char why[256] = "", *r = NULL;
	size_t rn = 0;
	int rc;

	rc = p->fn(p->ud, at, (const char *)p->s.b, p->s.n, &r, &rn, why, sizeof why);
	if (rc != MC_OK)
		return pl_fail(p, from, rc, "%s", why[0] ? why : "a string refused");
	if (r == NULL)
		return MC_OK;
	if (!mc__utf8_valid((const unsigned char *)r, rn)) {
		free(r);
		return pl_fail(p, from, MC_ERR_INVALID, "a replacement that is not UTF-8");
	}
	rc = buf_add(p->ctx, &p->out, p->in + p->copied, from - p->copied);
	if (rc == MC_OK)
		rc = repr(p->ctx, &p->out, r, rn);
	free(r);
	p->copied = p->i;
	return rc;
}

/* A run of adjacent string literals, read as one string. */
static int
string(struct pl *p, const struct mc_pylit_at *at)
{
	size_t from = p->i, end;
	int rc;

	p->s.n = 0;
	if ((rc = buf_add(p->ctx, &p->s, "", 0)) != MC_OK)
		return rc;
	do {
		if ((rc = literal(p)) != MC_OK)
			return rc;
		end = p->i;
		skip(p);
	} while (p->i < p->n && (p->in[p->i] == '\'' || p->in[p->i] == '"'));
	p->i = end;
	return p->fn ? offer(p, at, from) : MC_OK;
}

/* A decimal int, maybe negative: p->i is at its sign or first digit. */
static int
number(struct pl *p)
{
	size_t at = p->i, d;

	if (p->in[p->i] == '-') {
		p->i++;
		skip(p);
		if (p->i >= p->n || p->in[p->i] < '0' || p->in[p->i] > '9')
			return pl_fail(p, at, MC_ERR_MALFORMED, "'-' not before a number "
				       "(operators are not read)");
	}
	for (d = p->i; p->i < p->n && p->in[p->i] >= '0' && p->in[p->i] <= '9'; p->i++)
		;
	if (p->i < p->n && (p->in[p->i] == '.' || p->in[p->i] == 'e' || p->in[p->i] == 'E'))
		return pl_fail(p, at, MC_ERR_MALFORMED, "a float (not read)");
	if (p->i < p->n && is_name(p->in[p->i]))
		return pl_fail(p, at, MC_ERR_MALFORMED, "a number in a form not read");
	if (p->in[d] == '0' && p->i - d > 1)
		return pl_fail(p, at, MC_ERR_MALFORMED, "a number with a leading zero");
	if (p->i - d > PL_DIGITS_MAX)
		return pl_fail(p, at, MC_ERR_LIMIT, "a number of over %d digits", PL_DIGITS_MAX);
	return MC_OK;
}

/* None, True or False. */
static int
word(struct pl *p)
{
	static const char *const ok[] = {"None", "True", "False"};
	size_t k = p->i, w;

	while (k < p->n && is_name(p->in[k]))
		k++;
	w = k - p->i;
	for (size_t j = 0; j < 3; j++)
		if (w == strlen(ok[j]) && memcmp(p->in + p->i, ok[j], w) == 0) {
			p->i = k;
			return MC_OK;
		}
	if (w <= 2 && k < p->n && (p->in[k] == '\'' || p->in[k] == '"'))
		return pl_fail(p, p->i, MC_ERR_MALFORMED, "%s (only plain strings are read)",
			       memchr(p->in + p->i, 'b', w) || memchr(p->in + p->i, 'B', w) ?
			       "a bytes literal" : "a string prefix");
	return pl_want(p, "a value should be");
}

static int value(struct pl *p, const struct mc_pylit_at *at, int *kind);

/* Whether the next byte is c (after blanks): then it is passed. */
static int
next_is(struct pl *p, int c)
{
	skip(p);
	if (p->i < p->n && p->in[p->i] == c) {
		p->i++;
		return 1;
	}
	return 0;
}

/* The items of a list or tuple up to close, the first read already (first_kind); a
 * tuple's kind in *kind. */
static int
items(struct pl *p, const struct mc_pylit_at *at, int close, int first_kind, int *kind)
{
	struct mc_pylit_at in = *at;
	int rc, k;

	*kind = first_kind == PL_UNHASHABLE ? PL_UNHASHABLE : PL_TUPLE;
	for (in.index = 1;; in.index++) {
		if (next_is(p, close))
			return MC_OK;
		if (!next_is(p, ','))
			return pl_want(p, close == ')' ? "',' or ')' should be" : "',' or ']' should be");
		if (next_is(p, close))
			return MC_OK;
		if ((rc = value(p, &in, &k)) != MC_OK)
			return rc;
		if (k == PL_UNHASHABLE)
			*kind = PL_UNHASHABLE;
	}
}

/* A tuple, or a value in parentheses, or a list: p->i is past the opening bracket. */
static int
sequence(struct pl *p, const struct mc_pylit_at *at, int close, int *kind)
{
	struct mc_pylit_at in = *at;
	int rc, k;

	in.depth++;
	in.index = 0;
	if (next_is(p, close)) {
		*kind = close == ')' ? PL_TUPLE : PL_UNHASHABLE;
		return MC_OK;
	}
	if ((rc = value(p, &in, &k)) != MC_OK)
		return rc;
	if (close == ')' && next_is(p, ')')) { /* parentheses around one value */
		*kind = k;
		return MC_OK;
	}
	rc = items(p, &in, close, k, kind);
	if (close == ']')
		*kind = PL_UNHASHABLE;
	return rc;
}

/* A dict: p->i is past the '{'. */
static int
dict(struct pl *p, const struct mc_pylit_at *at)
{
	struct mc_pylit_at in = *at;
	size_t kat;
	int rc, k;

	in.depth++;
	in.index = -1;
	for (;;) {
		if (next_is(p, '}'))
			return MC_OK;
		in.role = MC_PYLIT_KEY;
		in.dkey = NULL, in.dkeyn = 0;
		skip(p);
		kat = p->i;
		if ((rc = value(p, &in, &k)) != MC_OK)
			return rc;
		if (k == PL_UNHASHABLE)
			return pl_fail(p, kat, MC_ERR_MALFORMED, "a dict key that is a list or dict");
		if (!next_is(p, ':'))
			return pl_want(p, "':' should be (sets are not read)");
		in.role = MC_PYLIT_VALUE;
		if (k == PL_STR && (in.dkey = malloc(p->s.n + 1)) == NULL)
			return mc__err(p->ctx, MC_ERR_NOMEM, "out of memory");
		if (k == PL_STR)
			memcpy((char *)in.dkey, p->s.b, (in.dkeyn = p->s.n) + 1);
		rc = value(p, &in, &k);
		free((char *)in.dkey);
		if (rc != MC_OK)
			return rc;
		if (!next_is(p, ',') && !(p->i < p->n && p->in[p->i] == '}'))
			return pl_want(p, "',' or '}' should be");
	}
}

/* A container: p->i is at its opening bracket. */
static int
container(struct pl *p, const struct mc_pylit_at *at, int *kind)
{
	int c = p->in[p->i], rc;

	if (p->depth >= PL_DEPTH_MAX)
		return pl_fail(p, p->i, MC_ERR_LIMIT, "brackets nested over %d deep",
			       PL_DEPTH_MAX);
	p->i++;
	p->depth++;
	if (c == '{') {
		*kind = PL_UNHASHABLE;
		rc = dict(p, at);
	} else {
		rc = sequence(p, at, c == '(' ? ')' : ']', kind);
	}
	p->depth--;
	return rc;
}

/* One value, of *kind. */
static int
value(struct pl *p, const struct mc_pylit_at *at, int *kind)
{
	int c;

	skip(p);
	if (p->i >= p->n)
		return pl_want(p, "a value should be");
	c = p->in[p->i];
	*kind = PL_ATOM;
	if (c == '{' || c == '(' || c == '[')
		return container(p, at, kind);
	if (c == '\'' || c == '"') {
		*kind = PL_STR;
		return string(p, at);
	}
	if (c == '-' || (c >= '0' && c <= '9'))
		return number(p);
	if (c == '.' && p->i + 1 < p->n && p->in[p->i + 1] >= '0' && p->in[p->i + 1] <= '9')
		return pl_fail(p, p->i, MC_ERR_MALFORMED, "a float (not read)");
	if (is_name(c))
		return word(p);
	return pl_want(p, "a value should be");
}

/* Refuses a NUL byte or text that is not UTF-8. */
static int
text_ok(struct pl *p)
{
	size_t i, len;
	uint32_t cp;

	for (i = 0; i < p->n; i += len) {
		if (p->in[i] == '\0')
			return pl_fail(p, i, MC_ERR_MALFORMED, "a NUL byte");
		if ((len = utf8_seq(p->in + i, p->n - i, &cp)) == 0)
			return pl_fail(p, i, MC_ERR_MALFORMED, "bytes that are not UTF-8");
	}
	return MC_OK;
}

/* The whole text: one value, then only blanks and comments. */
static int
top(struct pl *p)
{
	struct mc_pylit_at at = {0, MC_PYLIT_TOP, -1, NULL, 0};
	int rc, kind;

	if ((rc = text_ok(p)) != MC_OK || (rc = value(p, &at, &kind)) != MC_OK)
		return rc;
	p->depth = 1; /* what follows may hold newlines and comments */
	skip(p);
	p->depth = 0;
	return p->i < p->n ? pl_want(p, "the text should end") : MC_OK;
}

int
mc__pylit_rewrite(mc_ctx *ctx, const char *name, const unsigned char *in, size_t n,
		  size_t max, mc_pylit_fn fn, void *ud, unsigned char **out, size_t *outn)
{
	struct pl p = {ctx, name, in, n, 0, 0, fn, ud, {NULL, 0, 0}, {NULL, 0, 0}, 0};
	int rc;

	if (out)
		*out = NULL, *outn = 0;
	if (n > max)
		return mc__err(ctx, MC_ERR_LIMIT, "%s: %zu bytes, over the %zu read", name, n, max);
	rc = top(&p);
	if (rc == MC_OK && fn != NULL)
		rc = buf_add(ctx, &p.out, in + p.copied, n - p.copied);
	free(p.s.b);
	if (rc != MC_OK || fn == NULL || out == NULL) {
		free(p.out.b);
		return rc;
	}
	*out = p.out.b;
	*outn = p.out.n;
	return MC_OK;
}
