/*
 * torch.c - the built-in artifact types of torch's and Triton's compile caches: their
 * key checks, destinations and default roots, and the one table that describes them
 * (format/SPEC.md section 4 lists the types).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <sodium.h>

#include "tiers/tiers.h"

/* The character classes of keys. Keys are checked for every artifact of every bundle
 * read, so each class is a test of ranges, not a search of a set. */
static int
c_lower(int c)
{
	return c >= 'a' && c <= 'z';
}

static int
c_digit(int c)
{
	return c >= '0' && c <= '9';
}

static int
c_b32(int c) /* [a-z2-7] */
{
	return c_lower(c) || (c >= '2' && c <= '7');
}

static int
c_hex(int c) /* [0-9a-f] */
{
	return c_digit(c) || (c >= 'a' && c <= 'f');
}

static int
c_lower_alnum(int c) /* [a-z0-9] */
{
	return c_lower(c) || c_digit(c);
}

static int
c_kernel_hash(int c) /* [A-Za-z0-9_-] */
{
	return c_lower_alnum(c) || (c >= 'A' && c <= 'Z') || c == '_' || c == '-';
}

static int
c_file_name(int c) /* [A-Za-z0-9_.+-] */
{
	return c_kernel_hash(c) || c == '.' || c == '+';
}

/* Whether each of the n bytes of s is of the class (NUL is of none). */
static inline int
all_in(const char *s, size_t n, int (*is)(int))
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!is((unsigned char)s[i]))
			return 0;
	return 1;
}

static int
why(char *buf, size_t len, const char *text)
{
	snprintf(buf, len, "%s", text);
	return MC_ERR_BAD_KEY;
}

/* torch's FX-graph and AOTAutograd keys: a prefix letter and 51 base32 characters, then
 * the entry: "/" and its file name, 51 base32 characters (torch keeps one entry per set
 * of guards under one key, each named after its content's hash). A key without the
 * entry is the form bundles made before took, one entry per key; it stays readable. */
#define GRAPH_KEY_LEN 52
#define GRAPH_ENTRY_LEN 51

static int
check_graph_key(const char *key, char prefix, char *w, size_t wl)
{
	size_t n = strlen(key);

	if (n < GRAPH_KEY_LEN || key[0] != prefix || !all_in(key + 1, GRAPH_KEY_LEN - 1, c_b32) ||
	    (n != GRAPH_KEY_LEN &&
	     (n != GRAPH_KEY_LEN + 1 + GRAPH_ENTRY_LEN || key[GRAPH_KEY_LEN] != '/' ||
	      !all_in(key + GRAPH_KEY_LEN + 1, GRAPH_ENTRY_LEN, c_b32)))) {
		char msg[112];
		snprintf(msg, sizeof msg, "expected '%c' and 51 characters of [a-z2-7], then '/' "
			 "and the entry's 51 characters of [a-z2-7]", prefix);
		return why(w, wl, msg);
	}
	return MC_OK;
}

static int
inductor_check(void *ud, const char *key, char *w, size_t wl)
{
	return check_graph_key(key, 'f', w, wl);
}

static int
aot_check(void *ud, const char *key, char *w, size_t wl)
{
	return check_graph_key(key, 'a', w, wl);
}

/* The entry's file name is always its content's hash, whichever form the key has: the
 * reader checks that a key's entry names its content (mc__key_entry_ok). */
static int
inductor_dest(void *ud, const char *key, const unsigned char *sha256, char *buf, size_t len)
{
	char h[52];
	int n;

	mc__torch_b32_51(sha256, h);
	n = snprintf(buf, len, "fxgraph/%.2s/%.52s/%s", key + 1, key, h);
	return n > 0 && (size_t)n < len ? MC_OK : MC_ERR_INVALID;
}

static int
aot_dest(void *ud, const char *key, const unsigned char *sha256, char *buf, size_t len)
{
	char h[52];
	int n;

	mc__torch_b32_51(sha256, h);
	n = snprintf(buf, len, "aotautograd/%.52s/%s", key, h);
	return n > 0 && (size_t)n < len ? MC_OK : MC_ERR_INVALID;
}

/* Whether t is one of torch's guarded caches, whose keys carry an entry. */
static int
is_graph_type(const struct mc_type *t)
{
	return t != NULL && (t->key_check == inductor_check || t->key_check == aot_check);
}

size_t
mc__torch_key_len(const struct mc_type *t, const char *key)
{
	size_t n = strlen(key);

	return is_graph_type(t) && n > GRAPH_KEY_LEN && key[GRAPH_KEY_LEN] == '/'
		? GRAPH_KEY_LEN : n;
}

int
mc__key_entry_ok(const struct mc_type *t, const char *key, const unsigned char *sha256)
{
	char h[52];

	if (mc__torch_key_len(t, key) == strlen(key) || sha256 == NULL)
		return 1;
	mc__torch_b32_51(sha256, h);
	return strcmp(key + GRAPH_KEY_LEN + 1, h) == 0;
}

int
mc__entry_key(const struct mc_type *t, const char *key, const unsigned char *sha256,
	      char *buf, size_t len)
{
	if (is_graph_type(t) && sha256 != NULL && strlen(key) == GRAPH_KEY_LEN &&
	    len > GRAPH_KEY_LEN + 1 + GRAPH_ENTRY_LEN) {
		memcpy(buf, key, GRAPH_KEY_LEN);
		buf[GRAPH_KEY_LEN] = '/';
		mc__torch_b32_51(sha256, buf + GRAPH_KEY_LEN + 1);
		return 1;
	}
	snprintf(buf, len, "%s", key);
	return 0;
}

/* "<2 chars>/<64 hex>.best_config": the folder of the generated kernel, then the hash. */
static int
autotune_check(void *ud, const char *key, char *w, size_t wl)
{
	if (strlen(key) != 2 + 1 + 64 + 12 || !all_in(key, 2, c_lower_alnum) ||
	    key[2] != '/' || !all_in(key + 3, 64, c_hex) || strcmp(key + 67, ".best_config") != 0)
		return why(w, wl, "expected <2 of [a-z0-9]>/<64 hex>.best_config");
	return MC_OK;
}

/* Keys that are the file's path beneath the root: autotune configs, kernel code,
 * other files of a cache dir. */
/* "<job_id>:<rank>:<tag>". torch makes a file name of it by replacing each of
 * < > : " / \ | ? * with '_'; printable ASCII keeps that name safe. */
#define PGO_KEY_MAX 200

static int
pgo_check(void *ud, const char *key, char *w, size_t wl)
{
	size_t n = strlen(key), i;

	if (n == 0 || n > PGO_KEY_MAX)
		return why(w, wl, "expected 1-200 characters");
	for (i = 0; i < n; i++)
		if ((unsigned char)key[i] < 0x20 || (unsigned char)key[i] > 0x7e)
			return why(w, wl, "expected printable ASCII only");
	return MC_OK;
}

static int
pgo_dest(void *ud, const char *key, const unsigned char *sha256, char *buf, size_t len)
{
	char name[PGO_KEY_MAX + 1];
	size_t i, n = strlen(key);
	int r;

	if (n > PGO_KEY_MAX)
		return MC_ERR_INVALID;
	for (i = 0; i < n; i++)
		name[i] = strchr("<>:\"/\\|?*", key[i]) != NULL ? '_' : key[i];
	name[n] = '\0';
	r = snprintf(buf, len, "dynamo/code_state_%s.pkl", name);
	return r > 0 && (size_t)r < len ? MC_OK : MC_ERR_INVALID;
}

/* Precompile entries and GEMM timings (cache/<64 hex>) are named by 64 hex digits. */
static int
hex64_check(void *ud, const char *key, char *w, size_t wl)
{
	if (!mc__is_lower_hex(key, 64))
		return why(w, wl, "expected 64 lower-case hex digits");
	return MC_OK;
}

static int
precompile_dest(void *ud, const char *key, const unsigned char *sha256, char *buf, size_t len)
{
	int n = snprintf(buf, len, "dynamo/%s/entry", key);
	return n > 0 && (size_t)n < len ? MC_OK : MC_ERR_INVALID;
}

/* A file name inside a cache folder: 1-255 of [A-Za-z0-9_.+-], not starting with '.'
 * (hidden names are temp files). */
static int
file_name_ok(const char *s, size_t n)
{
	return n > 0 && n <= 255 && s[0] != '.' &&
	       all_in(s, n, c_file_name);
}

/* Generated kernel code: "<2 chars>/<file>" (c<hash>.py, .cpp, .so, .h, .main.*). */
static int
code_check(void *ud, const char *key, char *w, size_t wl)
{
	size_t n = strlen(key);

	if (n < 4 || !all_in(key, 2, c_lower_alnum) || key[2] != '/' ||
	    !file_name_ok(key + 3, n - 3))
		return why(w, wl, "expected <2 of [a-z0-9]>/<file name>");
	return MC_OK;
}

/* buf gets a then b: a destination made for every artifact of a plan, so without
 * printf. MC_ERR_INVALID when it is empty or does not fit. */
static int
join_dest(char *buf, size_t len, const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);

	if (na + nb == 0 || na + nb >= len)
		return MC_ERR_INVALID;
	memcpy(buf, a, na);
	memcpy(buf + na, b, nb + 1);
	return MC_OK;
}

static int
same_path_dest(void *ud, const char *key, const unsigned char *sha256, char *buf, size_t len)
{
	return join_dest(buf, len, "", key);
}

/* The max-autotune GEMM timing cache. */
static int
gemm_dest(void *ud, const char *key, const unsigned char *sha256, char *buf, size_t len)
{
	return join_dest(buf, len, "cache/", key);
}

/* "<kernel hash>/<file name>": a Triton kernel folder's file, the key of triton_home
 * and the rest of a triton key after its device index. */
static int
kernel_file_ok(const char *s)
{
	const char *a = strchr(s, '/');
	size_t hl = a != NULL ? (size_t)(a - s) : 0;

	return hl > 0 && hl <= 128 &&
	       all_in(s, hl, c_kernel_hash) &&
	       file_name_ok(a + 1, strlen(a + 1));
}

/* Triton kernels: "<device index>/<kernel hash>/<file>". Installed in the triton tier:
 * <inductor root>/triton keeps the device level; a root set by TRITON_CACHE_DIR or by
 * the caller has none. */
static int
triton_check(void *ud, const char *key, char *w, size_t wl)
{
	const char *a = strchr(key, '/');
	size_t dl = a != NULL ? (size_t)(a - key) : 0;

	if (dl == 0 || dl > 3 || !all_in(key, dl, c_digit) || !kernel_file_ok(a + 1))
		return why(w, wl, "expected <device index>/<kernel hash>/<file name>");
	return MC_OK;
}

static int
triton_dest(void *ud, const char *key, const unsigned char *sha256, char *buf, size_t len)
{
	mc_ctx *ctx = ud;
	const char *root;
	int rc;

	if ((rc = mc_ctx_tier_root(ctx, "triton", &root)) != MC_OK)
		return rc; /* told on the context: a root the environment names wrongly */
	return join_dest(buf, len, "", ctx->triton_flat ? strchr(key, '/') + 1 : key);
}

/* Triton's own cache (user kernels, launcher helpers): "<kernel hash>/<file>". */
static int
triton_home_check(void *ud, const char *key, char *w, size_t wl)
{
	if (!kernel_file_ok(key))
		return why(w, wl, "expected <kernel hash>/<file name>");
	return MC_OK;
}

/* ---- Triton's group files ----
 * __grp__<kernel>.json lists the kernel's files by absolute path ({"child_paths":
 * {name: path}}; Triton's remote mode writes a sorted list of names instead), and
 * Triton only takes children whose path exists: such a file is recorded with each
 * path being the bare name (relative to its own folder), and written back naming
 * where the kernel lands (format/SPEC.md section 4.1). */

static int
group_key(const char *key)
{
	const char *base = strrchr(key, '/') != NULL ? strrchr(key, '/') + 1 : key;
	size_t n = strlen(base);

	return n >= sizeof "__grp__.json" - 1 && strncmp(base, "__grp__", 7) == 0 &&
	       strcmp(base + n - 5, ".json") == 0;
}

int
mc__derives(const struct mc_type *t, const char *key)
{
	return t != NULL && t->derive != NULL &&
	       ((t->flags & MC_TYPE_DERIVE_ALL) != 0 || group_key(key));
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The child names of a group file in one of the forms read, sorted bytewise (they
 * point into *doc): 0, 1 when it is none of them, or MC_ERR_NOMEM. */
static int
group_parse(const unsigned char *in, size_t n, cJSON **doc, const char ***names, size_t *count)
{
	const char *end = NULL, *p = (const char *)in;
	const cJSON *cp, *e;
	size_t k = 0, i;

	*doc = NULL;
	*names = NULL;
	/* cJSON would cut a string at an escaped NUL: such a file is kept as it is. */
	if (n == 0 || n > MC_DERIVE_MAX || memmem(in, n, "\\u0000", 6) != NULL ||
	    (*doc = cJSON_ParseWithLengthOpts(p, n, &end, 0)) == NULL)
		return 1;
	while (end != NULL && end < p + n && strchr(" \t\r\n", *end) != NULL)
		end++;
	if (end != p + n || !cJSON_IsObject(*doc) || (cp = (*doc)->child) == NULL ||
	    cp->next != NULL || cp->string == NULL || strcmp(cp->string, "child_paths") != 0 ||
	    (!cJSON_IsObject(cp) && !cJSON_IsArray(cp)))
		return 1;
	*count = (size_t)cJSON_GetArraySize(cp);
	if ((*names = calloc(*count + 1, sizeof **names)) == NULL)
		return MC_ERR_NOMEM;
	cJSON_ArrayForEach(e, cp) {
		const char *name = cJSON_IsArray(cp) ? e->valuestring : e->string, *last;
		if (!cJSON_IsString(e) || name == NULL || !file_name_ok(name, strlen(name)))
			return 1;
		/* The dict form: a path whose last component is the name. */
		last = strrchr(e->valuestring, '/') != NULL ? strrchr(e->valuestring, '/') + 1
							    : e->valuestring;
		if (!cJSON_IsArray(cp) && strcmp(last, name) != 0)
			return 1;
		(*names)[k++] = name;
	}
	qsort(*names, k, sizeof **names, name_cmp);
	for (i = 1; i < k; i++)
		if (strcmp((*names)[i - 1], (*names)[i]) == 0)
			return 1;
	return 0;
}

/* A growing output. */
struct obuf {
	unsigned char *p;
	size_t n, cap;
	int nomem;
};

static void
put(struct obuf *o, const char *s, size_t n)
{
	if (o->nomem)
		return;
	if (o->n + n > o->cap) {
		size_t cap = o->cap ? o->cap : 256;
		unsigned char *p;
		while (cap < o->n + n)
			cap *= 2;
		if ((p = realloc(o->p, cap)) == NULL) {
			o->nomem = 1;
			return;
		}
		o->p = p;
		o->cap = cap;
	}
	memcpy(o->p + o->n, s, n);
	o->n += n;
}

static void
put_str(struct obuf *o, const char *s)
{
	put(o, s, strlen(s));
}

/* dir as a JSON string body the way Python's json.dumps (ensure_ascii) writes it;
 * -1 when dir is not UTF-8. */
static int
put_json_path(struct obuf *o, const char *dir)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)dir;
	size_t n = strlen(dir), i, len;
	uint32_t cp;

	for (i = 0; i < n; i += len) {
		char e[6];
		if ((len = mc__utf8_decode(s + i, n - i, &cp)) == 0)
			return -1;
		if (cp == '"' || cp == '\\') {
			e[0] = '\\', e[1] = (char)cp;
			put(o, e, 2);
		} else if (cp >= 0x20 && cp < 0x7f) {
			put(o, (const char *)s + i, 1);
		} else if (cp >= '\b' && cp <= '\r' && cp != '\v') {
			e[0] = '\\', e[1] = "btnvfr"[cp - '\b'];
			put(o, e, 2);
		} else {
			uint32_t u[2] = {cp, 0};
			int k, j;
			if (cp > 0xffff) /* a surrogate pair */
				u[0] = 0xd800 + ((cp - 0x10000) >> 10), u[1] = 0xdc00 + (cp & 0x3ff);
			for (k = 0; k < 2 && u[k] != 0; k++) {
				e[0] = '\\', e[1] = 'u';
				for (j = 0; j < 4; j++)
					e[2 + j] = hex[(u[k] >> (12 - 4 * j)) & 15];
				put(o, e, 6);
			}
		}
	}
	return 0;
}

/* {"child_paths": {"<name>": "<dir>/<name>", ...}}, json.dumps's spacing; dir NULL:
 * the bare names. */
static int
group_emit(const char *const *names, size_t k, const char *dir, unsigned char **out,
	   size_t *outn)
{
	struct obuf o = {NULL, 0, 0, 0};
	size_t i, dl = dir != NULL ? strlen(dir) : 0;

	put_str(&o, "{\"child_paths\": {");
	for (i = 0; i < k; i++) {
		put_str(&o, i > 0 ? ", \"" : "\"");
		put_str(&o, names[i]);
		put_str(&o, "\": \"");
		if (dir != NULL) {
			if (put_json_path(&o, dir) != 0) {
				free(o.p);
				return MC_ERR_INVALID;
			}
			if (dl == 0 || dir[dl - 1] != '/')
				put_str(&o, "/");
		}
		put_str(&o, names[i]);
		put_str(&o, "\"");
	}
	put_str(&o, "}}");
	if (o.nomem) {
		free(o.p);
		return MC_ERR_NOMEM;
	}
	*out = o.p;
	*outn = o.n;
	return MC_OK;
}

/* A group file in a form read becomes the recorded form (dir NULL) or the form
 * written at dir; anything else is kept as it is (*out NULL). */
static int
group_form(const char *key, const unsigned char *in, size_t n, const char *dir,
	   unsigned char **out, size_t *outn)
{
	const char **names = NULL;
	cJSON *doc = NULL;
	size_t k = 0;
	int rc = MC_OK;

	*out = NULL;
	*outn = 0;
	if (group_key(key) && (rc = group_parse(in, n, &doc, &names, &k)) == 0)
		rc = group_emit(names, k, dir, out, outn);
	free(names);
	cJSON_Delete(doc);
	return rc > 0 ? MC_OK : rc;
}

int
mc__group_record(const char *key, const unsigned char *in, size_t n, struct mc_hook_env *env,
		 unsigned char **out, size_t *outn)
{
	(void)env;
	return group_form(key, in, n, NULL, out, outn);
}

int
mc__group_derive(const char *key, const unsigned char *rec, size_t n, struct mc_hook_env *env,
		 unsigned char **out, size_t *outn)
{
	const char *dir = env->dir;

	*out = NULL;
	*outn = 0;
	if (dir == NULL || !mc__utf8_valid((const unsigned char *)dir, strlen(dir)))
		return MC_ERR_INVALID;
	return group_form(key, rec, n, dir, out, outn);
}

/* A group file's form in Triton's remote cache, {"child_paths": ["<name>", ...]} (names
 * sorted, json.dumps's spacing), from a form read; *out NULL when it is none. */
int
mc__group_remote(const char *key, const unsigned char *in, size_t n, unsigned char **out,
		 size_t *outn)
{
	struct obuf o = {NULL, 0, 0, 0};
	const char **names = NULL;
	cJSON *doc = NULL;
	size_t k = 0, i;
	int rc = 1;

	*out = NULL;
	*outn = 0;
	if (!group_key(key) || (rc = group_parse(in, n, &doc, &names, &k)) != 0) {
		free(names);
		cJSON_Delete(doc);
		return group_key(key) && rc < 0 ? rc : MC_OK;
	}
	put_str(&o, "{\"child_paths\": [");
	for (i = 0; i < k; i++) {
		put_str(&o, i > 0 ? ", \"" : "\"");
		put_str(&o, names[i]);
		put_str(&o, "\"");
	}
	put_str(&o, "]}");
	free(names);
	cJSON_Delete(doc);
	if (o.nomem) {
		free(o.p);
		return MC_ERR_NOMEM;
	}
	*out = o.p;
	*outn = o.n;
	return MC_OK;
}


static int extra_check(void *ud, const char *key, char *w, size_t wl);

/* The shapes of torch's and Triton's keys, for tables of other tiers whose folders hold
 * torch's and Triton's caches. */
int
mc__torch_shape_ok(enum mc_torch_shape shape, const char *key)
{
	char w[128];

	switch (shape) {
	case MC_SHAPE_FXGRAPH:
		return check_graph_key(key, 'f', w, sizeof w) == MC_OK;
	case MC_SHAPE_AOTAUTOGRAD:
		return check_graph_key(key, 'a', w, sizeof w) == MC_OK;
	case MC_SHAPE_AUTOTUNE:
		return autotune_check(NULL, key, w, sizeof w) == MC_OK;
	case MC_SHAPE_CODE:
		return code_check(NULL, key, w, sizeof w) == MC_OK;
	case MC_SHAPE_TRITON:
		return triton_check(NULL, key, w, sizeof w) == MC_OK;
	case MC_SHAPE_KERNEL:
		return triton_home_check(NULL, key, w, sizeof w) == MC_OK;
	case MC_SHAPE_FILE_NAME:
		return file_name_ok(key, strlen(key));
	case MC_SHAPE_PATH:
		return extra_check(NULL, key, w, sizeof w) == MC_OK;
	}
	return 0;
}

/* Any other file of a cache dir, kept when the caller asks: its relative path. */
static int
extra_check(void *ud, const char *key, char *w, size_t wl)
{
	const char *seg = key, *c;

	for (c = key;; c++)
		if (*c == '/' || *c == '\0') {
			if (!file_name_ok(seg, (size_t)(c - seg)))
				return why(w, wl, "expected a relative path of plain file names");
			if (*c == '\0')
				return MC_OK;
			seg = c + 1;
		}
}

/* ---- where torch 2.11 and Triton 3.6 keep their caches, told as they tell it ---- */

static int
no_mem(mc_ctx *ctx)
{
	return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
}

/* os.path.join(a, b) for a b that is not absolute: a "/" between them unless a is
 * empty or ends with one. NULL when out of memory. */
static char *
py_join(const char *a, const char *b)
{
	size_t la = strlen(a), n = la + strlen(b) + 2;
	char *p = malloc(n);

	if (p != NULL)
		snprintf(p, n, "%s%s%s", a, la == 0 || a[la - 1] == '/' ? "" : "/", b);
	return p;
}

/* posixpath.normpath: "." and empty components dropped, ".." taking off the component
 * before it (dropped at the root, kept in a relative path with none to take off or
 * after another ".."), exactly two leading slashes kept as two and more as one. out
 * holds strlen(in) + 2 bytes. */
static void
py_normpath(const char *in, char *out)
{
	size_t lead = 0, o, n, k = 0, last; /* k: components in out */
	const char *c;

	if (in[0] == '/')
		lead = in[1] == '/' && in[2] != '/' ? 2 : 1;
	memset(out, '/', lead);
	o = lead;
	for (c = in; *c != '\0'; c += n) {
		c += strspn(c, "/");
		if ((n = strcspn(c, "/")) == 0 || (n == 1 && c[0] == '.'))
			continue;
		for (last = o; last > lead && out[last - 1] != '/'; last--)
			;
		if (n == 2 && memcmp(c, "..", 2) == 0 && (lead > 0 || k > 0) &&
		    !(k > 0 && o - last == 2 && memcmp(out + last, "..", 2) == 0)) {
			if (k > 0) {
				o = last > lead ? last - 1 : lead;
				k--;
			}
			continue;
		}
		if (k++ > 0)
			out[o++] = '/';
		memcpy(out + o, c, n);
		o += n;
	}
	if (o == 0)
		out[o++] = '.';
	out[o] = '\0';
}

/* os.path.abspath: a relative path joined to the working folder, then normalised. */
static int
py_abspath(mc_ctx *ctx, const char *var, const char *path, char **out)
{
	char cwd[MC_PATH_MAX], *joined;

	*out = NULL;
	if (path[0] == '/')
		joined = mc__strdup(path);
	else if (getcwd(cwd, sizeof cwd) == NULL)
		return mc__err(ctx, MC_ERR_IO, "$%s is a relative path and the working folder cannot "
			       "be told: %s", var, strerror(errno));
	else
		joined = py_join(cwd, path);
	if (joined == NULL || (*out = malloc(strlen(joined) + 2)) == NULL) {
		free(joined);
		return no_mem(ctx);
	}
	py_normpath(joined, *out);
	free(joined);
	return MC_OK;
}

/* tempfile's test of a candidate folder: a file of a random name made there (never
 * through a link), written and removed; a name taken already is tried again with
 * another, 100 times at most. 1: usable, 0: not, -1: out of memory. */
static int
tmp_usable(const char *dir)
{
	static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789_";
	char name[9], *path;
	int seq, i, fd, ok;

	for (seq = 0; seq < 100; seq++) {
		for (i = 0; i < 8; i++)
			name[i] = chars[randombytes_uniform(sizeof chars - 1)];
		name[8] = '\0';
		if ((path = py_join(dir, name)) == NULL)
			return -1;
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) {
			int e = errno;
			free(path);
			if (e == EEXIST)
				continue;
			return 0;
		}
		ok = write(fd, "blat", 4) >= 0;
		ok = close(fd) == 0 && ok;
		ok = unlink(path) == 0 && ok;
		free(path);
		return ok;
	}
	return 0;
}

/* tempfile.gettempdir(): the first of $TMPDIR, $TEMP, $TMP (where set and not empty),
 * /tmp, /var/tmp, /usr/tmp and the working folder ("." when that cannot be told) that
 * takes a file, made absolute and normalised. A missing folder is passed over, never
 * made. */
static int
py_gettempdir(mc_ctx *ctx, char **out)
{
	static const char *const cand[] = {"TMPDIR", "TEMP", "TMP", "/tmp", "/var/tmp", "/usr/tmp"};
	char cwd[MC_PATH_MAX], *dir;
	const char *v;
	size_t i;
	int rc, r;

	for (i = 0; i <= sizeof cand / sizeof cand[0]; i++) {
		if (i < 3 && ((v = getenv(cand[i])) == NULL || v[0] == '\0'))
			continue;
		if (i >= 3)
			v = i < 6 ? cand[i] : getcwd(cwd, sizeof cwd) != NULL ? cwd : NULL;
		if (v != NULL && (rc = py_abspath(ctx, cand[i < 3 ? i : 0], v, &dir)) != MC_OK)
			return rc;
		if (v == NULL && (dir = mc__strdup(".")) == NULL)
			return no_mem(ctx);
		if ((r = tmp_usable(dir)) > 0) {
			*out = dir;
			return MC_OK;
		}
		free(dir);
		if (r < 0)
			return no_mem(ctx);
	}
	return mc__err(ctx, MC_ERR_IO, "no folder for temporary files takes a new file ($TMPDIR, "
		       "$TEMP, $TMP, /tmp, /var/tmp, /usr/tmp, the working folder), so torch's "
		       "default cache dir cannot be told; set TORCHINDUCTOR_CACHE_DIR");
}

/* getpass.getuser(): the first non-empty of these variables, else the password entry. */
static const char *
torch_user(void)
{
	static const char *const vars[] = {"LOGNAME", "USER", "LNAME", "USERNAME"};
	struct passwd *pw;
	size_t i;

	for (i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		const char *v = getenv(vars[i]);
		if (v != NULL && v[0] != '\0')
			return v;
	}
	pw = getpwuid(getuid());
	return pw != NULL ? pw->pw_name : NULL;
}

/* A folder that Triton reads from the environment as it is (triton 3.6's getenv keeps
 * white space and empty values): empty, Triton fails on it; starting with white space,
 * it would be a folder of that name in the working folder, surely not what was meant. */
static int
triton_env_dir(mc_ctx *ctx, const char *var, const char *v)
{
	if (v[0] == '\0')
		return mc__err(ctx, MC_ERR_INVALID, "%s is set but empty: Triton fails on it; set "
			       "it to a folder or unset it", var);
	if (isspace((unsigned char)v[0]))
		return mc__err(ctx, MC_ERR_INVALID, "%s starts with white space: Triton would take "
			       "it as a folder in the working folder; set it to a folder or unset it",
			       var);
	return MC_OK;
}

/* $TRITON_CACHE_DIR as torch and Triton take it, named in full. */
static int
triton_env_root(mc_ctx *ctx, const char *env, char **out, size_t *named)
{
	int rc;

	if ((rc = triton_env_dir(ctx, "TRITON_CACHE_DIR", env)) != MC_OK)
		return rc;
	if ((*out = mc__strdup(env)) == NULL)
		return no_mem(ctx);
	*named = strlen(env);
	return MC_OK;
}

/* torch's triton_cache_dir(): $TRITON_CACHE_DIR when set (no device level), else
 * <inductor root>/triton (with one). */
static int
triton_default_root(mc_ctx *ctx, char **out, size_t *named)
{
	const char *env = getenv("TRITON_CACHE_DIR"), *ind;
	int rc;

	*out = NULL;
	if (env != NULL) {
		ctx->triton_flat = 1;
		return triton_env_root(ctx, env, out, named);
	}
	/* Beneath the inductor root, named as far as the inductor root is: its own default
	 * folder (torchinductor_<user>) is no more to be followed for Triton. */
	if ((rc = mc__tier_root(ctx, "inductor", &ind, named)) != MC_OK)
		return rc;
	ctx->triton_flat = 0;
	if ((*out = py_join(ind, MC_TRITON_SUBDIR)) == NULL)
		return no_mem(ctx);
	return MC_OK;
}

/* os.path.expanduser("~/"): $HOME (when set, even empty) or else the password entry's
 * home, trailing slashes dropped, then "/". One that is not absolute would put Triton's
 * cache in the working folder: refused. */
static int
py_home(mc_ctx *ctx, char **out)
{
	const char *home = getenv("HOME");
	struct passwd *pw;
	size_t n;

	if (home == NULL && (pw = getpwuid(getuid())) != NULL)
		home = pw->pw_dir;
	if (home == NULL)
		return mc__err(ctx, MC_ERR_INVALID, "HOME is not set and the password database has "
			       "no entry for this user, so Triton's cache cannot be told; set "
			       "TRITON_CACHE_DIR or TRITON_HOME");
	for (n = strlen(home); n > 0 && home[n - 1] == '/'; n--)
		;
	if (n > 0 && home[0] != '/')
		return mc__err(ctx, MC_ERR_INVALID, "the home folder (%s) is not an absolute path: "
			       "Triton would keep its cache in the working folder; set "
			       "TRITON_CACHE_DIR or TRITON_HOME", getenv("HOME") ? "HOME" :
			       "the password entry");
	if ((*out = malloc(n + 2)) == NULL)
		return no_mem(ctx);
	memcpy(*out, home, n);
	memcpy(*out + n, "/", 2);
	return MC_OK;
}

/* Triton's own cache (knobs.cache.dir): $TRITON_CACHE_DIR, else
 * $TRITON_HOME/.triton/cache, TRITON_HOME being os.path.expanduser("~/") when unset;
 * named as far as the variable (or the home folder) goes. */
static int
triton_home_root(mc_ctx *ctx, char **out, size_t *named)
{
	const char *env = getenv("TRITON_CACHE_DIR"), *home = getenv("TRITON_HOME");
	char *h;
	size_t n;
	int rc;

	*out = NULL;
	if (env != NULL)
		return triton_env_root(ctx, env, out, named);
	if (home != NULL && (rc = triton_env_dir(ctx, "TRITON_HOME", home)) != MC_OK)
		return rc;
	if (home == NULL && (rc = py_home(ctx, &h)) != MC_OK)
		return rc;
	if (home != NULL && (h = mc__strdup(home)) == NULL)
		return no_mem(ctx);
	*out = py_join(h, ".triton/cache");
	for (n = strlen(h); n > 1 && h[n - 1] == '/'; n--)
		;
	free(h);
	if (*out == NULL)
		return no_mem(ctx);
	*named = n;
	return MC_OK;
}

/* torch's cache_dir(): $TORCHINDUCTOR_CACHE_DIR as it is, else
 * <tempfile.gettempdir()>/torchinductor_<getpass.getuser()>, each of \ / : * ? " < > |
 * in the user name made _. */
static int
torch_default_root(mc_ctx *ctx, char **out, size_t *named)
{
	const char *env = getenv("TORCHINDUCTOR_CACHE_DIR"), *user;
	char *tmp, *base;
	size_t i, n;
	int rc;

	*out = NULL;
	if (env != NULL) {
		if (env[0] == '\0')
			return mc__err(ctx, MC_ERR_INVALID, "TORCHINDUCTOR_CACHE_DIR is set but empty: "
				       "torch fails on it; set it to a folder or unset it");
		if ((*out = mc__strdup(env)) == NULL)
			return no_mem(ctx);
		*named = strlen(env);
		return MC_OK;
	}
	if ((user = torch_user()) == NULL)
		return mc__err(ctx, MC_ERR_INVALID, "cannot tell the user name for the default "
			       "inductor cache dir; set TORCHINDUCTOR_CACHE_DIR");
	if ((rc = py_gettempdir(ctx, &tmp)) != MC_OK)
		return rc;
	n = sizeof "torchinductor_" + strlen(user);
	if ((base = malloc(n)) != NULL) {
		snprintf(base, n, "torchinductor_%s", user);
		for (i = sizeof "torchinductor_" - 1; base[i] != '\0'; i++)
			if (strchr("\\/:*?\"<>|", base[i]) != NULL)
				base[i] = '_';
		*out = py_join(tmp, base);
	}
	*named = strlen(tmp); /* torchinductor_<user> in a shared /tmp is anyone's to plant */
	free(tmp);
	free(base);
	return *out != NULL ? MC_OK : no_mem(ctx);
}

/* The built-in types. The torch 2.7 id is the type's number in that blob format; the
 * export rank orders the groups of a torch blob written for a bundle without a blob
 * layout (inductor, autotune, aot_autograd, pgo, precompile). Builtin handlers get the
 * context as their ud. */
static const struct mc_typedesc builtin[] = {
	{.name = "inductor", .tier = "inductor", .flags = MC_TYPE_WANTS_SHA256,
	 .key_check = inductor_check, .dest_path = inductor_dest,
	 .default_root = torch_default_root, .torch27_id = 0, .export_rank = 0,
	 .used_role = MC_ROLE_NAMES_CODE},
	{.name = "aot_autograd", .tier = "inductor", .flags = MC_TYPE_WANTS_SHA256,
	 .key_check = aot_check, .dest_path = aot_dest,
	 .default_root = torch_default_root, .torch27_id = 2, .export_rank = 2},
	{.name = "autotune", .tier = "inductor",
	 .key_check = autotune_check, .dest_path = same_path_dest,
	 .default_root = torch_default_root, .torch27_id = 1, .export_rank = 1},
	{.name = "pgo", .tier = "inductor",
	 .key_check = pgo_check, .dest_path = pgo_dest,
	 .default_root = torch_default_root, .torch27_id = 3, .export_rank = 3},
	{.name = "precompile", .tier = "inductor",
	 .key_check = hex64_check, .dest_path = precompile_dest,
	 .default_root = torch_default_root, .torch27_id = -1, .export_rank = 4},
	{.name = "kernel_code", .tier = "inductor",
	 .key_check = code_check, .dest_path = same_path_dest,
	 .default_root = torch_default_root, .torch27_id = -1, .export_rank = -1,
	 .used_role = MC_ROLE_CODE},
	{.name = "gemm_timing", .tier = "inductor",
	 .key_check = hex64_check, .dest_path = gemm_dest,
	 .default_root = torch_default_root, .torch27_id = -1, .export_rank = -1},
	{.name = "triton", .tier = "triton", .flags = MC_TYPE_FOLDER_UNIT,
	 .key_check = triton_check, .dest_path = triton_dest,
	 .default_root = triton_default_root, .torch27_id = -1, .export_rank = -1,
	 .record = mc__group_record, .derive = mc__group_derive},
	{.name = "extra", .tier = "inductor",
	 .key_check = extra_check, .dest_path = same_path_dest,
	 .default_root = torch_default_root, .torch27_id = -1, .export_rank = -1},
	{.name = "triton_home", .tier = "triton_home", .flags = MC_TYPE_FOLDER_UNIT,
	 .key_check = triton_home_check, .dest_path = same_path_dest,
	 .default_root = triton_home_root, .torch27_id = -1, .export_rank = -1,
	 .record = mc__group_record, .derive = mc__group_derive},
};

int
mc__register_torch(mc_ctx *ctx)
{
	return mc__register_types(ctx, builtin, sizeof builtin / sizeof builtin[0]);
}

const struct mc_typedesc *
mc__builtin_torch27(uint64_t id)
{
	size_t i;

	for (i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
		if (builtin[i].torch27_id >= 0 && (uint64_t)builtin[i].torch27_id == id)
			return &builtin[i];
	return NULL;
}
