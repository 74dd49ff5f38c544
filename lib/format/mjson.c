/*
 * mjson.c - the manifest's JSON, walked a member or an array element at a time.
 *
 * The manifest is never made into one cJSON tree: a tree of a large manifest takes
 * several times its size. The top-level object is walked here, its two large arrays
 * element by element, and each value is handed to cJSON as its own small tree. This
 * walk only finds where values end (nesting was bounded beforehand, by mcheck.c);
 * cJSON still reads every byte of every value, so what is refused is what a
 * whole-tree parse refuses.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "format/format.h"

#define BAD(...) mc__err(ctx, MC_ERR_MANIFEST, __VA_ARGS__)
#define DOC MC_DOC(ctx)

#define JDOC_WINDOW (256u * 1024)

/* Makes the window hold [at, at + want), clipped to the text; -1 on a read error. */
static int
jload(struct mc_jdoc *d, uint64_t at, size_t want)
{
	if (at - d->w0 < d->wn && at + want <= d->w0 + d->wn)
		return 0;
	if (d->fd < 0 || at >= d->n)
		return -1;
	if (want < JDOC_WINDOW)
		want = JDOC_WINDOW;
	if (want > d->n - at)
		want = (size_t)(d->n - at);
	if (want > d->cap) {
		unsigned char *nb = realloc(d->buf, want);
		if (nb == NULL) {
			d->ioerr = ENOMEM;
			return -1;
		}
		d->buf = nb;
		d->cap = want;
	}
	d->s = d->buf;
	d->wn = 0;
	if (mc__pread_full(d->fd, d->buf, want, at) != 0) {
		d->ioerr = errno != 0 ? errno : EIO;
		return -1;
	}
	d->w0 = at;
	d->wn = want;
	return 0;
}

/* The byte at i, or -1 past the end of the text (or on a read error). */
static inline int
jbyte(struct mc_jdoc *d, uint64_t i)
{
	if (i - d->w0 < d->wn)
		return d->s[i - d->w0];
	if (i >= d->n || jload(d, i, JDOC_WINDOW) != 0)
		return -1;
	return d->s[i - d->w0];
}

static void
jws(struct mc_jdoc *d)
{
	int c;

	while ((c = jbyte(d, d->i)) == ' ' || c == '\t' || c == '\n' || c == '\r')
		d->i++;
}

static int
jat(struct mc_jdoc *d, char c)
{
	return jbyte(d, d->i) == (unsigned char)c;
}

/* Moves past the value at d->i; 0 when it does not end before the text does. */
static int
jskip(struct mc_jdoc *d)
{
	uint64_t i = d->i;
	int depth = 0, in_str = 0, c = jbyte(d, i);

	if (c < 0)
		return 0;
	if (c != '"' && c != '{' && c != '[') {
		while ((c = jbyte(d, i)) > 0 && memchr(",]} \t\r\n", c, 7) == NULL)
			i++;
		if (i == d->i)
			return 0;
		d->i = i;
		return 1;
	}
	for (; (c = jbyte(d, i)) >= 0; i++) {
		if (in_str && c != '\\' && c != '"') {
			/* a string's plain bytes, to the end of the window at most */
			size_t at = (size_t)(i - d->w0);
			i += mc__json_plain(d->s + at, d->wn - at, 0) - 1;
			continue;
		}
		if (in_str) {
			if (c == '\\') {
				i++;
			} else if (c == '"') {
				in_str = 0;
				if (depth == 0)
					break;
			}
		} else if (c == '"') {
			in_str = 1;
		} else if (c == '{' || c == '[') {
			depth++;
		} else if ((c == '}' || c == ']') && --depth == 0) {
			break;
		}
	}
	if (c < 0)
		return 0;
	d->i = i + 1;
	return 1;
}

/* ---- numbers ----
 *
 * cJSON reads a number with strtod: it takes forms RFC 8259 does not (07, 1., -.5) and
 * keeps only the value, so 7, 7.0 and 7e0 look alike. So the text of each value cJSON
 * took is read again, its numbers in step with the tree's (both go in document order):
 * one outside RFC 8259's grammar is a syntax error, and one that is not plain digits
 * keeps its text on its item, in valuestring (which cJSON leaves NULL for a number and
 * frees with the item), for get_uint to refuse. */

#define JNUM_SHOWN 24 /* bytes of a number's text quoted in a message */

struct jnums {
	const char *s; /* the value's text */
	size_t n, i;
	uint64_t at;   /* where it starts in the manifest */
};

/* The next number outside strings: where it starts, and its length as the run of
 * characters cJSON reads as one; 0 when there is none. */
static size_t
jnum_next(struct jnums *t, const char **start)
{
	static const char numch[] = "0123456789+-.eE";
	size_t i, k;

	for (i = t->i; i < t->n; i++) {
		char c = t->s[i];
		const char *q;
		if (c == '"') {
			/* To the quote that ends the string: one after an even run of
			 * backslashes (the run stops at the opening quote at the latest). */
			do {
				if ((q = memchr(t->s + i + 1, '"', t->n - i - 1)) == NULL) {
					t->i = t->n;
					return 0;
				}
				i = (size_t)(q - t->s);
				for (k = 0; t->s[i - 1 - k] == '\\'; k++)
					;
			} while (k % 2 == 1);
		} else if (c == '-' || (c >= '0' && c <= '9')) {
			for (k = i; k < t->n && memchr(numch, t->s[k], sizeof numch - 1) != NULL; k++)
				;
			*start = t->s + i;
			t->i = k;
			return k - i;
		}
	}
	t->i = t->n;
	return 0;
}

static size_t
digits_end(const char *s, size_t i, size_t n)
{
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++;
	return i;
}

/* How much of s is an RFC 8259 number; *intlen: how much is its sign and integer part. */
static size_t
json_number_len(const char *s, size_t n, size_t *intlen)
{
	size_t i = 0, d;

	*intlen = 0;
	if (i < n && s[i] == '-')
		i++;
	d = i;
	i = i < n && s[i] == '0' ? i + 1 : digits_end(s, i, n);
	if (i == d)
		return 0;
	*intlen = i;
	if (i < n && s[i] == '.') {
		d = ++i;
		if ((i = digits_end(s, i, n)) == d)
			return 0;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		if (++i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		d = i;
		if ((i = digits_end(s, i, n)) == d)
			return 0;
	}
	return i;
}

/* Checks the numbers of the tree at item (and of its siblings after it) against t. */
static int
jnum_forms(mc_ctx *ctx, cJSON *item, struct jnums *t)
{
	const char *s = NULL;
	size_t n, intlen, shown;
	int rc;

	for (; item != NULL; item = item->next) {
		if (item->child != NULL && (rc = jnum_forms(ctx, item->child, t)) != MC_OK)
			return rc;
		if (!cJSON_IsNumber(item))
			continue;
		if ((n = jnum_next(t, &s)) == 0)
			return BAD("%s is not valid JSON", DOC);
		shown = n < JNUM_SHOWN ? n : JNUM_SHOWN;
		if (json_number_len(s, n, &intlen) != n) {
			unsigned long long at = (unsigned long long)(t->at + (uint64_t)(s - t->s));
			if (intlen > 0 && s[intlen - 1] == '0' && intlen < n && s[intlen] >= '0' &&
			    s[intlen] <= '9')
				return BAD("%s is not valid JSON: the number '%.*s' at byte %llu "
					   "has a leading zero", DOC, (int)shown, s, at);
			return BAD("%s is not valid JSON: '%.*s' at byte %llu is not a JSON "
				   "number", DOC, (int)shown, s, at);
		}
		if (s[0] == '-' || intlen != n) {
			if ((item->valuestring = cJSON_malloc(shown + 1)) == NULL)
				return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
			memcpy(item->valuestring, s, shown);
			item->valuestring[shown] = '\0';
		}
	}
	return MC_OK;
}

/* Parses the value at d->i into its own tree and moves past it. */
static int
jvalue(mc_ctx *ctx, struct mc_jdoc *d, cJSON **out)
{
	uint64_t start = d->i;
	const char *p = NULL, *end = NULL;
	struct jnums nums;
	size_t len = 0;
	int rc;

	*out = NULL;
	if (jskip(d) && jload(d, start, (size_t)(d->i - start)) == 0) {
		len = (size_t)(d->i - start);
		p = (const char *)d->s + (start - d->w0);
		*out = cJSON_ParseWithLengthOpts(p, len, &end, 0);
		if (*out != NULL && end != p + len) {
			cJSON_Delete(*out);
			*out = NULL;
		}
	}
	if (*out == NULL)
		return BAD("%s is not valid JSON", DOC);
	nums.s = p;
	nums.n = len;
	nums.i = 0;
	nums.at = start;
	if ((rc = jnum_forms(ctx, *out, &nums)) != MC_OK) {
		cJSON_Delete(*out);
		*out = NULL;
	}
	return rc;
}

/* After an element of an array or object: 1 when a ',' follows (it is passed), 0 when
 * close does (passed too), -1 for anything else. */
static int
jnext(struct mc_jdoc *d, char close)
{
	jws(d);
	if (jat(d, ',')) {
		d->i++;
		return 1;
	}
	if (jat(d, close)) {
		d->i++;
		return 0;
	}
	return -1;
}

/* One element of an array or object, at d->i (white space passed); k: its index. */
typedef int (*jone_fn)(mc_ctx *ctx, struct mc_jdoc *d, void *ud, size_t k);

/* Walks the array or object whose opening bracket is at d->i, calling one at each
 * element; *count gets the number of elements. */
static int
jlist(mc_ctx *ctx, struct mc_jdoc *d, char close, jone_fn one, void *ud, size_t *count)
{
	size_t k = 0;
	int rc, more;

	d->i++;
	jws(d);
	if (jat(d, close)) {
		d->i++;
		*count = 0;
		return MC_OK;
	}
	do {
		jws(d);
		if ((rc = one(ctx, d, ud, k)) != MC_OK)
			return rc;
		k++;
	} while ((more = jnext(d, close)) == 1);
	if (more < 0)
		return BAD("%s is not valid JSON", DOC);
	*count = k;
	return MC_OK;
}

struct jarray {
	mc_jfast_fn fast; /* may be NULL */
	mc_jelem_fn fn;   /* NULL: elements are only skipped */
	void *ud;
};

/* The most bytes an element read by a fast reader may take. */
#define JFAST_MAX 4096u

static int
jarray_elem(mc_ctx *ctx, struct mc_jdoc *d, void *ud, size_t k)
{
	const struct jarray *a = ud;
	cJSON *e;
	int rc;

	if (a->fn == NULL)
		return jskip(d) ? MC_OK : BAD("%s is not valid JSON", DOC);
	if (a->fast != NULL) {
		size_t want = d->n - d->i < JFAST_MAX ? (size_t)(d->n - d->i) : JFAST_MAX, used;
		if (jload(d, d->i, want) == 0 &&
		    (used = a->fast(ctx, (const char *)d->s + (d->i - d->w0), want, k, a->ud,
				    &rc)) > 0) {
			d->i += used;
			return rc;
		}
	}
	if ((rc = jvalue(ctx, d, &e)) != MC_OK)
		return rc;
	rc = a->fn(ctx, e, k, a->ud);
	cJSON_Delete(e);
	return rc;
}

int
mc__jdoc_array(mc_ctx *ctx, struct mc_jdoc *d, mc_jfast_fn fast, mc_jelem_fn fn, void *ud,
	       size_t *count)
{
	struct jarray a = {fast, fn, ud};

	return jlist(ctx, d, ']', jarray_elem, &a, count);
}

/* The top-level object being walked. */
struct jtop {
	cJSON *root;
	struct mc_jtable *arts, *objs, *blks;
};

/* A table is only walked over: *v is an empty array, and t says where the table is. */
static int
jtable(mc_ctx *ctx, struct mc_jdoc *d, struct mc_jtable *t, cJSON **v)
{
	int rc;

	*v = NULL;
	t->at = d->i;
	if ((rc = mc__jdoc_array(ctx, d, NULL, NULL, NULL, &t->n)) != MC_OK)
		return rc;
	if ((*v = cJSON_CreateArray()) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	return MC_OK;
}

/* One member of the top-level object, added to its root. */
static int
jmember(mc_ctx *ctx, struct mc_jdoc *d, void *ud, size_t k)
{
	const struct jtop *t = ud;
	struct mc_jtable *at = NULL;
	cJSON *name = NULL, *v = NULL;
	int rc;

	(void)k;
	if (!jat(d, '"'))
		return BAD("%s is not valid JSON", DOC);
	if ((rc = jvalue(ctx, d, &name)) != MC_OK)
		return rc;
	jws(d);
	if (!jat(d, ':')) {
		rc = BAD("%s is not valid JSON", DOC);
		goto out;
	}
	d->i++;
	jws(d);
	if (cJSON_GetObjectItemCaseSensitive(t->root, name->valuestring) != NULL) {
		rc = BAD("%s: %s has field '%.64s' twice", DOC, DOC, name->valuestring);
		goto out;
	}
	if (strcmp(name->valuestring, "artifacts") == 0)
		at = t->arts;
	else if (strcmp(name->valuestring, "objects") == 0)
		at = t->objs;
	else if (strcmp(name->valuestring, "blocks") == 0)
		at = t->blks;
	if (at != NULL && jat(d, '['))
		rc = jtable(ctx, d, at, &v);
	else
		rc = jvalue(ctx, d, &v);
	if (rc == MC_OK && !cJSON_AddItemToObject(t->root, name->valuestring, v)) {
		cJSON_Delete(v);
		rc = mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
out:
	cJSON_Delete(name);
	return rc;
}

int
mc__jdoc_top(mc_ctx *ctx, struct mc_jdoc *d, cJSON **rootp, struct mc_jtable *arts,
	     struct mc_jtable *objs, struct mc_jtable *blks)
{
	struct jtop t = {NULL, arts, objs, blks};
	size_t n;
	int rc;

	*rootp = NULL;
	jws(d);
	if (!jat(d, '{')) {
		rc = jvalue(ctx, d, rootp);
	} else if ((*rootp = t.root = cJSON_CreateObject()) == NULL) {
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	} else {
		rc = jlist(ctx, d, '}', jmember, &t, &n);
	}
	if (rc != MC_OK)
		return rc;
	if (d->i != d->n)
		return BAD("%s has bytes after its JSON value", DOC);
	return MC_OK;
}
