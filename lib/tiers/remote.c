/* remote.c - the forms artifacts take in torch's and Triton's Redis caches: their keys
 * and values, made from a bundle's artifacts and read back into them. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tiers/tiers.h"

/* torch 2.11's remote caches: RedisRemoteCache keys "pt2:<cache id>::<key>:c1", values
 * RemoteCacheJsonSerde's ASCII JSON; FX graphs and AOTAutograd entries carry
 * "time_taken_ms" beside "data" (the file's bytes, base64). */
static const struct torch_space {
	const char *type, *cache_id;
	int timed;   /* its value carries "time_taken_ms" */
	int guarded; /* one of torch's guarded caches: an artifact's key may name an entry
		      * ("<key>/<entry>"), which the remote cache has no place for: one value
		      * per torch key */
} torch_spaces[] = {
	{.type = "inductor", .cache_id = "fx-graph-v1", .timed = 1, .guarded = 1},
	{.type = "aot_autograd", .cache_id = "autograd-experimental", .timed = 1, .guarded = 1},
	{.type = "pgo", .cache_id = "dynamo-pgo", .timed = 0, .guarded = 0},
};
#define NTORCH (sizeof torch_spaces / sizeof torch_spaces[0])
#define TORCH_PREFIX "pt2:"
#define TORCH_SUFFIX ":c1"

static const struct torch_space *
torch_by_type(const char *type)
{
	size_t i;

	for (i = 0; i < NTORCH; i++)
		if (strcmp(type, torch_spaces[i].type) == 0)
			return &torch_spaces[i];
	return NULL;
}

/* Triton's kernel hash and file name of an artifact of type triton
 * ("<device>/<hash>/<file>") or triton_home ("<hash>/<file>"): 0, or -1. */
static int
triton_split(const char *type, const char *key, const char **hash, size_t *hl,
	     const char **file)
{
	const char *s = key, *a;

	if (strcmp(type, "triton") == 0) {
		if ((s = strchr(key, '/')) == NULL)
			return -1;
		s++;
	} else if (strcmp(type, "triton_home") != 0) {
		return -1;
	}
	if ((a = strchr(s, '/')) == NULL || a == s || strchr(a + 1, '/') != NULL || a[1] == '\0')
		return -1;
	*hash = s, *hl = (size_t)(a - s), *file = a + 1;
	return 0;
}

int
mc__triton_format_ok(const char *fmt)
{
	const char *k = strstr(fmt, "{key}"), *f = strstr(fmt, "{filename}");

	return k != NULL && f != NULL && k + 5 <= f && strstr(k + 5, "{key}") == NULL &&
	       strstr(f + 10, "{filename}") == NULL && strlen(fmt) < 256 && f != k + 5;
}

int
mc__remote_key(const char *type, const char *key, const char *triton_fmt, unsigned spaces,
	       char *buf, size_t len)
{
	const struct torch_space *t = torch_by_type(type);
	const char *hash, *file, *k, *f;
	size_t hl;
	int n;

	if (t != NULL && (spaces & MC_SPACE_TORCH))
		n = snprintf(buf, len, TORCH_PREFIX "%s::%.*s" TORCH_SUFFIX, t->cache_id,
			     (int)(t->guarded ? strcspn(key, "/") : strlen(key)), key);
	else if ((spaces & MC_SPACE_TRITON) && triton_split(type, key, &hash, &hl, &file) == 0) {
		k = strstr(triton_fmt, "{key}"), f = strstr(triton_fmt, "{filename}");
		n = snprintf(buf, len, "%.*s%.*s%.*s%s%s", (int)(k - triton_fmt), triton_fmt,
			     (int)hl, hash, (int)(f - k - 5), k + 5, file, f + 10);
	} else
		return 1;
	return n > 0 && (size_t)n < len ? MC_OK : 1;
}

static const char value_head[] = "{\"data\": \"", value_timed[] = "\", \"time_taken_ms\": 0}",
		  value_end[] = "\"}";
#define LIT(s) (sizeof(s) - 1)

int
mc__remote_prepare(const char *type, const char *key, const unsigned char *c, size_t n,
		   unsigned char **made, size_t *vn)
{
	const struct torch_space *t = torch_by_type(type);
	int rc;

	*made = NULL;
	if (t != NULL) {
		*vn = LIT(value_head) + MC_B64_LEN(n) + (t->timed ? LIT(value_timed) : LIT(value_end));
		return MC_OK;
	}
	/* Triton's: the bytes, a group file in its remote form */
	if ((rc = mc__group_remote(key, c, n, made, vn)) != MC_OK || *made != NULL)
		return rc;
	*vn = n;
	return MC_OK;
}

void
mc__remote_fill(const char *type, const unsigned char *c, size_t n, unsigned char *out)
{
	const struct torch_space *t = torch_by_type(type);

	if (t == NULL) {
		if (n > 0)
			memcpy(out, c, n);
		return;
	}
	memcpy(out, value_head, LIT(value_head));
	out += LIT(value_head);
	out += mc__b64_encode_to(c, n, (char *)out);
	if (t->timed)
		memcpy(out, value_timed, LIT(value_timed));
	else
		memcpy(out, value_end, LIT(value_end));
}

int
mc__remote_value(const char *type, const char *key, const unsigned char *c, size_t n,
		 unsigned char **out, size_t *outn)
{
	int rc;

	if ((rc = mc__remote_prepare(type, key, c, n, out, outn)) != MC_OK || *out != NULL)
		return rc;
	if ((*out = malloc(*outn > 0 ? *outn : 1)) == NULL)
		return MC_ERR_NOMEM;
	mc__remote_fill(type, c, n, *out);
	return MC_OK;
}

static int
odd(char *why, size_t whylen, const char *what)
{
	snprintf(why, whylen, "%s", what);
	return 1;
}

/* The base64 of a value in the form torch writes, {"data": "<b64>"} with or without
 * ", \"time_taken_ms\": <digits>" (valid JSON as it is: base64 needs no escapes), found
 * without a JSON parse; NULL for any other form. */
static const char *
torch_form(const unsigned char *v, size_t vn, size_t *len)
{
	static const char head[] = "{\"data\": \"", timed[] = "\", \"time_taken_ms\": ";
	const char *s = (const char *)v, *q, *end = s + vn;

	if (vn < sizeof head + 1 || memcmp(s, head, sizeof head - 1) != 0 ||
	    (q = memchr(s + sizeof head - 1, '"', vn - (sizeof head - 1))) == NULL)
		return NULL;
	*len = (size_t)(q - s) - (sizeof head - 1);
	if (end - q == 2 && q[1] == '}')
		return s + sizeof head - 1;
	if ((size_t)(end - q) < sizeof timed + 1 || memcmp(q, timed, sizeof timed - 1) != 0 ||
	    end[-1] != '}')
		return NULL;
	for (q += sizeof timed - 1; q < end - 1; q++)
		if (*q < '0' || *q > '9')
			return NULL;
	return q == s + vn - 1 && q[-1] != ' ' ? s + sizeof head - 1 : NULL;
}

/* The content of a torch value: the base64 of its "data". */
static int
torch_content(const unsigned char *v, size_t vn, unsigned char **content, size_t *cn,
	      char *why, size_t whylen)
{
	size_t fl;
	const char *fast = torch_form(v, vn, &fl);

	if (fast != NULL) {
		if ((*content = malloc(fl / 4 * 3 + 3)) == NULL)
			return MC_ERR_NOMEM;
		if (mc__b64_decode_data(fast, fl, *content, fl / 4 * 3 + 3, cn) == 0)
			return MC_OK;
		free(*content); /* escapes in the string, say: read as JSON below */
		*content = NULL;
	}
	const cJSON *data;
	cJSON *doc;
	size_t len;
	int rc;

	if (vn == 0 || (doc = cJSON_ParseWithLength((const char *)v, vn)) == NULL)
		return odd(why, whylen, "value is not JSON");
	data = cJSON_GetObjectItemCaseSensitive(doc, "data");
	if (!cJSON_IsObject(doc) || !cJSON_IsString(data) || data->valuestring == NULL) {
		cJSON_Delete(doc);
		return odd(why, whylen, "value has no \"data\" string");
	}
	len = strlen(data->valuestring);
	if ((*content = malloc(len / 4 * 3 + 3)) == NULL) {
		cJSON_Delete(doc);
		return MC_ERR_NOMEM;
	}
	rc = mc__b64_decode_data(data->valuestring, len, *content, len / 4 * 3 + 3, cn);
	cJSON_Delete(doc);
	if (rc != MC_OK) {
		free(*content);
		*content = NULL;
		return odd(why, whylen, "\"data\" is not base64");
	}
	return MC_OK;
}

/* A torch key: its type and key in kbuf; 2 when rkey is not one. */
static int
torch_rkey(const char *rkey, const char **type, char *kbuf, size_t klen)
{
	size_t n = strlen(rkey), pl = sizeof TORCH_PREFIX - 1, sl = sizeof TORCH_SUFFIX - 1, i;
	const char *sep;

	if (n <= pl + sl || strncmp(rkey, TORCH_PREFIX, pl) != 0 ||
	    strcmp(rkey + n - sl, TORCH_SUFFIX) != 0 || (sep = strstr(rkey + pl, "::")) == NULL)
		return 2;
	for (i = 0; i < NTORCH; i++) {
		size_t cl = strlen(torch_spaces[i].cache_id);
		size_t kl = n - sl - (size_t)(sep + 2 - rkey);
		if ((size_t)(sep - rkey) - pl != cl || strncmp(rkey + pl, torch_spaces[i].cache_id, cl) != 0)
			continue;
		if (sep + 2 > rkey + n - sl || kl == 0 || kl >= klen)
			return 2;
		memcpy(kbuf, sep + 2, kl);
		kbuf[kl] = '\0';
		*type = torch_spaces[i].type;
		return MC_OK;
	}
	return 2;
}

/* A Triton key: "<hash>/<file>" in kbuf (type triton_home); 2 when rkey is not one.
 * The hash ends where the text between {key} and {filename} first appears (a kernel
 * hash is base32: it holds none of a format's separators). */
static int
triton_rkey(const char *rkey, const char *fmt, char *kbuf, size_t klen)
{
	const char *k = strstr(fmt, "{key}"), *f = strstr(fmt, "{filename}");
	size_t l0 = (size_t)(k - fmt), l1 = (size_t)(f - k - 5), l2 = strlen(f + 10);
	size_t n = strlen(rkey);
	const char *h, *mid, *end;

	if (n < l0 + l1 + l2 + 2 || strncmp(rkey, fmt, l0) != 0 ||
	    strncmp(rkey + n - l2, f + 10, l2) != 0)
		return 2;
	h = rkey + l0;
	end = rkey + n - l2;
	for (mid = h + 1; mid + l1 < end; mid++)
		if (strncmp(mid, k + 5, l1) == 0)
			break;
	if (mid + l1 >= end || (size_t)(end - h) + 2 > klen)
		return 2;
	snprintf(kbuf, klen, "%.*s/%.*s", (int)(mid - h), h, (int)(end - mid - l1), mid + l1);
	return strchr(kbuf, '/') == strrchr(kbuf, '/') ? MC_OK : 2;
}

int
mc__remote_parse(const char *rkey, const unsigned char *v, size_t vn, const char *triton_fmt,
		 unsigned spaces, const char **type, char *kbuf, size_t klen,
		 unsigned char **content, size_t *cn, char *why, size_t whylen)
{
	struct mc_hook_env env = {NULL, NULL, NULL, NULL, NULL, 0};
	int rc;

	*content = NULL;
	*cn = 0;
	if ((spaces & MC_SPACE_TORCH) && torch_rkey(rkey, type, kbuf, klen) == MC_OK) {
		/* torch's keys name no entry: a reader gives the entry from the content */
		if (torch_by_type(*type)->guarded && strchr(kbuf, '/') != NULL)
			return odd(why, whylen, "the key names an entry, which torch's keys do not");
		return torch_content(v, vn, content, cn, why, whylen);
	}
	if (!(spaces & MC_SPACE_TRITON) || triton_rkey(rkey, triton_fmt, kbuf, klen) != MC_OK)
		return 2;
	*type = "triton_home";
	if ((rc = mc__group_record(kbuf, v, vn, &env, content, cn)) != MC_OK || *content != NULL)
		return rc;
	if ((*content = malloc(vn + 1)) == NULL)
		return MC_ERR_NOMEM;
	if (vn > 0)
		memcpy(*content, v, vn);
	*cn = vn;
	return MC_OK;
}

/* s with Redis glob's special characters escaped, then "*" (malloc'd). */
static char *
glob_prefix(const char *s, size_t n)
{
	char *p = malloc(2 * n + 2), *o = p;
	size_t i;

	if (p == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		if (strchr("*?[]\\", s[i]) != NULL)
			*o++ = '\\';
		*o++ = s[i];
	}
	*o++ = '*';
	*o = '\0';
	return p;
}

int
mc__remote_patterns(const char *triton_fmt, unsigned spaces, char **pat, size_t *n)
{
	*n = 0;
	if ((spaces & MC_SPACE_TORCH) &&
	    (pat[(*n)++] = glob_prefix(TORCH_PREFIX, sizeof TORCH_PREFIX - 1)) == NULL)
		return MC_ERR_NOMEM;
	if ((spaces & MC_SPACE_TRITON) &&
	    (pat[(*n)++] = glob_prefix(triton_fmt,
				       (size_t)(strstr(triton_fmt, "{key}") - triton_fmt))) == NULL)
		return MC_ERR_NOMEM;
	return MC_OK;
}
