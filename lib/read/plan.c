/*
 * plan.c - the plan of an install: each selected artifact's handler and destination,
 * every tier root at its absolute path, and the check that no two destinations
 * conflict, within a tier or across nested tiers.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "read/read.h"

/* An artifact's destination, relative to its tier's root: computed again from the
 * signed type, key and SHA-256 wherever it is needed, never stored. */
static int
artifact_dest(mc_ctx *ctx, const mc_bundle *b, const struct mc_martifact *a, char *buf,
	      size_t len)
{
	int rc = mc__dest_for(ctx, a->handler, a->key, a->sha256, buf, len);

	return rc != MC_OK ? mc__err_prefix(ctx, rc, "%s", b->path) : MC_OK;
}

int
mc__artifact_dest(mc_bundle *b, const struct mc_martifact *a, char *buf, size_t len)
{
	return artifact_dest(b->ctx, b, a, buf, len);
}

/* The plan's conflict check works on keyed 64-bit hashes of paths, so that no path is
 * held: one entry per destination, one per folder installed as a unit, and one per
 * folder above a destination (a folder shared by neighbours in the artifact order is
 * entered once). Entries with equal hashes are compared again as strings, so a
 * collision cannot hide or make a conflict. Paths are taken in the namespace of the
 * outermost tier root that holds them (tiers nest: <inductor root>/triton), so an
 * artifact of one tier cannot land on, or inside, another tier's file or unit. */
enum { REF_FILE, REF_UNIT, REF_DIR }; /* sorted in this order */

struct pref {
	uint64_t h;        /* of the namespace's index and the path */
	uint32_t art;      /* the plan refuses more than 2^32 - 1 artifacts */
	uint32_t len : 30; /* of the path in its namespace */
	uint32_t kind : 2;
};

static int
pref_cmp(const void *x, const void *y)
{
	const struct pref *a = x, *b = y;

	if (a->h != b->h)
		return a->h < b->h ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	return a->art < b->art ? -1 : a->art > b->art;
}

/* A tier of the plan: where its root lies, as a path without links or dots. */
struct ptier {
	const char *name;
	char *canon;        /* NULL when the tier has no root (only checked against itself) */
	size_t base;        /* the tier whose root is the outermost one holding this root */
	const char *prefix; /* this root within base's: a tail of canon, "" when the same */
};

struct plan {
	mc_bundle *b;
	mc_ctx *ctx; /* b's, or a copy of it (mc__bundle_plan_in) */
	struct mc_acur cx, cy; /* for the two sides of a comparison */
	struct pref *refs;
	size_t n, cap;
	struct ptier *tiers; /* by first use */
	size_t ntiers;
	unsigned char *dropped; /* per artifact: the same content on the same path twice */
	unsigned char key[crypto_shorthash_KEYBYTES];
};

static int
plan_add(struct plan *P, size_t ns, const char *path, size_t len, size_t art, int kind)
{
	unsigned char in[2 * MC_PATH_MAX + sizeof ns], out[crypto_shorthash_BYTES];

	if (mc__grow(&P->refs, &P->cap, P->n + 1, sizeof *P->refs) != MC_OK)
		return mc__err(P->ctx, MC_ERR_NOMEM, "out of memory");
	memcpy(in, &ns, sizeof ns);
	memcpy(in + sizeof ns, path, len);
	crypto_shorthash(out, in, sizeof ns + len, P->key);
	memcpy(&P->refs[P->n].h, out, sizeof P->refs[P->n].h);
	P->refs[P->n].art = (uint32_t)art;
	P->refs[P->n].len = (uint32_t)len & 0x3fffffffu;
	P->refs[P->n].kind = (uint32_t)kind & 3u;
	P->n++;
	return MC_OK;
}

/* Appends path's components to out (an absolute path without a trailing slash),
 * dropping empty and "." ones and taking ".." back one folder. */
static int
canon_append(char *out, size_t len, const char *path)
{
	size_t n = strlen(out);

	while (*path != '\0') {
		size_t c = strcspn(path, "/");
		if (c == 2 && path[0] == '.' && path[1] == '.') {
			while (n > 0 && out[n - 1] != '/')
				n--;
			n = n > 1 ? n - 1 : 1;
			out[n] = '\0';
		} else if (c > 0 && !(c == 1 && path[0] == '.')) {
			if (n + 1 + c >= len)
				return -1;
			if (n > 1)
				out[n++] = '/';
			memcpy(out + n, path, c);
			out[n += c] = '\0';
		}
		path += c + (path[c] == '/');
	}
	return 0;
}

/* Where a tier root lies, as an absolute path without links or dots: the part its
 * setter named with every link resolved, a dangling one too (the folder it names may
 * be made by this very load), then the rest as written, since the loader never
 * follows a link there. */
static char *
canon_root(const char *root, size_t named)
{
	char *out = malloc(2 * MC_PATH_MAX), *todo = malloc(2 * MC_PATH_MAX);
	char link[MC_PATH_MAX], next[2 * MC_PATH_MAX];
	unsigned hops = 0;
	struct stat st;

	if (out == NULL || todo == NULL || named >= MC_PATH_MAX)
		goto fail;
	snprintf(todo, 2 * MC_PATH_MAX, "%.*s", (int)named, root);
	if (todo[0] == '/')
		snprintf(out, 2 * MC_PATH_MAX, "/");
	else if (getcwd(out, 2 * MC_PATH_MAX) == NULL)
		goto fail;
	while (todo[0] != '\0') {
		size_t c, n = strlen(out);
		char *t = todo + strspn(todo, "/");

		c = strcspn(t, "/");
		if (c == 0)
			break;
		snprintf(next, sizeof next, "%.*s", (int)c, t);
		memmove(todo, t + c, strlen(t + c) + 1);
		if (canon_append(out, 2 * MC_PATH_MAX, next) != 0)
			goto fail;
		if (strcmp(next, "..") == 0 || lstat(out, &st) != 0 || !S_ISLNK(st.st_mode))
			continue;
		/* A link: its target, then what was left, resolved from its folder. */
		ssize_t l = readlink(out, link, sizeof link - 1);
		if (l < 0 || ++hops > 40)
			goto fail;
		link[l] = '\0';
		if (snprintf(next, sizeof next, "%s/%s", link, todo) >= (int)sizeof next)
			goto fail;
		snprintf(todo, 2 * MC_PATH_MAX, "%s", next);
		if (link[0] == '/')
			snprintf(out, 2 * MC_PATH_MAX, "/");
		else
			out[n] = '\0'; /* back to the link's folder */
	}
	if (canon_append(out, 2 * MC_PATH_MAX, root + named) != 0)
		goto fail;
	free(todo);
	return out;
fail:
	free(out);
	free(todo);
	return NULL;
}

/* Is path a, or a path beneath it, inside folder b? */
static int
path_within(const char *a, const char *b)
{
	size_t n = strlen(b);

	if (strcmp(b, "/") == 0)
		return 1;
	return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/');
}

static size_t
plan_tier(const struct plan *P, const char *name)
{
	size_t i;

	for (i = 0; i < P->ntiers; i++)
		if (strcmp(P->tiers[i].name, name) == 0)
			return i;
	return MC_NO_INDEX;
}

/* The tiers of every registered type, where their roots lie, and which root holds
 * which. A tier whose root cannot be told (an application's tier with none set) is
 * checked on its own. */
static int
plan_tiers(struct plan *P)
{
	mc_ctx *ctx = P->ctx;
	size_t i, j;

	for (i = 0; i < ctx->ntypes; i++) {
		const char *root;
		size_t named;
		struct ptier *t;

		if (plan_tier(P, ctx->types[i].tier) != MC_NO_INDEX)
			continue;
		if ((t = realloc(P->tiers, (P->ntiers + 1) * sizeof *t)) == NULL)
			return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		P->tiers = t;
		t = &t[P->ntiers++];
		memset(t, 0, sizeof *t);
		t->name = ctx->types[i].tier;
		if (mc__tier_root(ctx, t->name, &root, &named) == MC_OK &&
		    (t->canon = canon_root(root, named)) == NULL)
			return mc__err(ctx, MC_ERR_IO, "%s: cannot tell where it lies", root);
	}
	for (i = 0; i < P->ntiers; i++) {
		struct ptier *t = &P->tiers[i];
		size_t base = i, bl;

		for (j = 0; t->canon != NULL && j < P->ntiers; j++)
			if (P->tiers[j].canon != NULL && path_within(t->canon, P->tiers[j].canon) &&
			    (strlen(P->tiers[j].canon) < strlen(P->tiers[base].canon) ||
			     (strlen(P->tiers[j].canon) == strlen(P->tiers[base].canon) && j < base)))
				base = j; /* equal roots: the first tier's namespace */
		t->base = base;
		if (t->canon == NULL) {
			t->prefix = "";
			continue;
		}
		bl = strlen(P->tiers[base].canon);
		t->prefix = bl == 1 ? t->canon + 1 : t->canon + bl + (t->canon[bl] == '/');
	}
	return MC_OK;
}

/* Artifact a's path in the namespace of the outermost root that holds its tier's:
 * *ns gets that namespace, *dest_at (may be NULL) where the tier's own path starts. */
static int
plan_path(struct plan *P, const struct mc_martifact *a, char *buf, size_t len, size_t *ns,
	  size_t *dest_at)
{
	char dest[MC_PATH_MAX];
	size_t t = plan_tier(P, a->handler->tier), np, nd;
	const char *prefix = P->tiers[t].prefix;
	int rc;

	if ((rc = artifact_dest(P->ctx, P->b, a, dest, sizeof dest)) != MC_OK)
		return rc;
	*ns = P->tiers[t].base;
	np = strlen(prefix);
	np += np > 0; /* and a slash */
	if (dest_at != NULL)
		*dest_at = np;
	if (np + (nd = strlen(dest)) >= len)
		return mc__err(P->ctx, MC_ERR_UNSAFE_DEST, "%s: %s artifact %.200s: destination "
			       "too long", P->b->path, a->type, a->key);
	memcpy(buf, prefix, np);
	if (np > 0)
		buf[np - 1] = '/';
	memcpy(buf + np, dest, nd + 1);
	return MC_OK;
}

/* Checks two entries of one hash, x before y in the sorted order. *drop is set when y
 * is the same content as x at the same path (installed once). */
static int
plan_pair(struct plan *P, const struct pref *x, const struct pref *y, int *drop)
{
	mc_bundle *b = P->b;
	const struct mc_martifact *ax, *ay;
	char px[2 * MC_PATH_MAX], py[2 * MC_PATH_MAX];
	const char *root, *sep;
	size_t nx, ny;
	int rc;

	*drop = 0;
	if ((x->kind == REF_DIR && y->kind == REF_DIR) || x->len != y->len)
		return MC_OK; /* two folders, or a collision */
	if ((rc = mc__acur_get(&P->cx, x->art, &ax)) != MC_OK ||
	    (rc = mc__acur_get(&P->cy, y->art, &ay)) != MC_OK ||
	    (rc = plan_path(P, ax, px, sizeof px, &nx, NULL)) != MC_OK ||
	    (rc = plan_path(P, ay, py, sizeof py, &ny, NULL)) != MC_OK)
		return rc;
	if (nx != ny || memcmp(px, py, x->len) != 0)
		return MC_OK; /* a collision */
	/* One folder installed whole by one tier: entered once per run of its files. */
	if (x->kind == REF_UNIT && y->kind == REF_UNIT &&
	    strcmp(ax->handler->tier, ay->handler->tier) == 0)
		return MC_OK;
	px[x->len] = '\0';
	if (y->kind == REF_FILE && ax->object == ay->object) { /* objects are unique by content */
		*drop = 1;
		return MC_OK;
	}
	root = P->tiers[nx].canon != NULL ? P->tiers[nx].canon : "";
	sep = root[0] != '\0' && strcmp(root, "/") != 0 ? "/" : "";
	if (x->kind == REF_FILE || y->kind == REF_UNIT)
		return mc__err(P->ctx, MC_ERR_CONFLICT, "%s: artifacts %s %.200s and %s %.200s both "
			       "need %s%s%s", b->path, ax->type, ax->key, ay->type, ay->key, root, sep, px);
	return mc__err(P->ctx, MC_ERR_CONFLICT, "%s: artifact %s %.200s lies in %s%s%s, a folder "
		       "that %s %.200s installs as a whole", b->path, ay->type, ay->key, root, sep, px,
		       ax->type, ax->key);
}

/* The previous artifact's path: the folders it shares with the next, entered as the
 * same kind, are not entered again. */
struct pprev {
	char path[2 * MC_PATH_MAX];
	size_t ns, unit;
};

/* Enters artifact i's destination, its unit folder and the folders above them. */
static int
plan_enter(struct plan *P, size_t i, const struct mc_martifact *a, struct pprev *prev)
{
	char path[2 * MC_PATH_MAX];
	size_t ns, l, d, at, unit = 0, same = 0;
	int rc;

	if ((rc = plan_path(P, a, path, sizeof path, &ns, &at)) != MC_OK)
		return rc;
	l = strlen(path);
	while (ns == prev->ns && same < l && prev->path[same] == path[same])
		same++; /* the bytes both paths begin with */
	if (mc__unit_folder(a->handler, a->key)) {
		/* As the loader has it: the destination's folder, when it has one. */
		const char *own = strrchr(path + at, '/');
		if (own != NULL)
			unit = (size_t)(own - path);
	}
	if ((rc = plan_add(P, ns, path, l, i, REF_FILE)) != MC_OK)
		return rc;
	for (d = 0; d < l && rc == MC_OK; d++)
		if (path[d] == '/' && d > 0 && !(d < same && (d == unit) == (d == prev->unit)))
			rc = plan_add(P, ns, path, d, i, d == unit ? REF_UNIT : REF_DIR);
	memcpy(prev->path, path, l + 1);
	prev->ns = ns;
	prev->unit = unit;
	return rc;
}

/* Checks one artifact as every reader must, selected for installing or not. */
static int
plan_check(mc_ctx *ctx, const mc_bundle *b, const struct mc_martifact *a)
{
	if (a->handler == NULL)
		return mc__err(ctx, MC_ERR_UNKNOWN_TYPE, "%s: artifact type '%s' has no handler "
			       "(key %.200s)", b->path, a->type, a->key);
	/* (In format version 2 every artifact gives its content hash, the SHA-256.) */
	if (b->m.version != 2 &&
	    (a->sha256 != NULL) != ((a->handler->flags & MC_TYPE_WANTS_SHA256) != 0))
		return mc__err(ctx, MC_ERR_MANIFEST, "%s: %s artifact %.200s %s a sha256 field",
			       b->path, a->type, a->key, a->sha256 != NULL ? "has" : "lacks");
	if (!mc__key_entry_ok(a->handler, a->key, a->sha256))
		return mc__err(ctx, MC_ERR_MANIFEST, "%s: %s artifact %.200s: its entry is not "
			       "named after its content's hash", b->path, a->type, a->key);
	return MC_OK;
}

/* The keys of the recorded torch blob layout (section 3.4) are installed by no one
 * here, but export writes them into a blob from which torch makes file names: each
 * passes its type's handler as an artifact's key does. */
static int
plan_blob_keys(mc_ctx *ctx, const mc_bundle *b)
{
	size_t i, j;
	int rc = MC_OK;

	for (i = 0; rc == MC_OK && i < b->m.ngroups; i++) {
		const struct mc_type *t = mc__find_type(ctx, b->m.groups[i].type);
		if (t == NULL)
			return mc__err(ctx, MC_ERR_UNKNOWN_TYPE, "%s: torch_blob group type '%s' "
				       "has no handler", b->path, b->m.groups[i].type);
		for (j = 0; rc == MC_OK && j < b->m.groups[i].nentries; j++) {
			const char *k = b->m.groups[i].entries[j].key;
			if ((rc = mc__key_check(ctx, t, k)) != MC_OK)
				rc = mc__err(ctx, rc, "%s: torch_blob: %s", b->path, ctx->err);
			else if (mc__torch_key_len(t, k) != strlen(k))
				rc = mc__err(ctx, MC_ERR_BAD_KEY, "%s: torch_blob: %s key '%.200s' "
					     "names an entry (torch's keys do not)", b->path,
					     t->name, k);
		}
	}
	return rc;
}

/* Sorts the entries as pref_cmp orders them: by their hash's top bits into buckets
 * (the hashes are keyed, so they spread evenly), then each bucket on its own. */
static int
plan_sort(struct plan *P)
{
	size_t n = P->n, nb, b, i, lo, *end;
	unsigned bits = 8;
	struct pref *out;

	while (bits < 16 && ((size_t)1 << bits) < n)
		bits++;
	nb = (size_t)1 << bits;
	if ((end = calloc(nb + 1, sizeof *end)) == NULL ||
	    (out = malloc((n + 1) * sizeof *out)) == NULL) {
		free(end);
		return mc__err(P->ctx, MC_ERR_NOMEM, "out of memory");
	}
	for (i = 0; i < n; i++)
		end[(P->refs[i].h >> (64 - bits)) + 1]++;
	for (b = 0; b < nb; b++)
		end[b + 1] += end[b];
	for (i = 0; i < n; i++) /* end[b] moves from bucket b's start to its end */
		out[end[P->refs[i].h >> (64 - bits)]++] = P->refs[i];
	for (b = 0, lo = 0; b < nb; lo = end[b++]) {
		size_t k, j;
		if (end[b] - lo > 8) {
			qsort(out + lo, end[b] - lo, sizeof *out, pref_cmp);
			continue;
		}
		for (k = lo + 1; k < end[b]; k++) {
			struct pref x = out[k];
			for (j = k; j > lo && pref_cmp(&out[j - 1], &x) > 0; j--)
				out[j] = out[j - 1];
			out[j] = x;
		}
	}
	free(end);
	free(P->refs);
	P->refs = out;
	return MC_OK;
}

/* Two artifacts on one path, a path inside another's file or inside a folder installed
 * as a unit, cannot all land; the same content twice at one path (a kernel of two
 * devices in a root without device level) is installed once. */
static int
plan_conflicts(struct plan *P)
{
	size_t i, j, k, x;
	int rc = MC_OK, drop;

	if (P->n > 1 && (rc = plan_sort(P)) != MC_OK)
		return rc;
	for (i = 0; rc == MC_OK && i < P->n; i = j) {
		for (j = i + 1; j < P->n && P->refs[j].h == P->refs[i].h; j++)
			;
		for (k = i + 1; rc == MC_OK && k < j; k++) {
			for (x = i; rc == MC_OK && x < k; x++) {
				if (P->refs[x].kind == REF_DIR)
					break; /* folders sort last: no folder conflicts with one */
				/* A dropped twin's file is the other's; its folders and unit
				 * still stand for the artifacts after it (plan_enter). */
				if (P->refs[x].kind == REF_FILE && P->dropped[P->refs[x].art])
					continue;
				if ((rc = plan_pair(P, &P->refs[x], &P->refs[k], &drop)) == MC_OK && drop) {
					P->dropped[P->refs[k].art] = 1;
					break;
				}
			}
		}
	}
	return rc;
}

int
mc__bundle_plan_in(mc_bundle *b, mc_ctx *ctx)
{
	struct plan P;
	struct pprev *prev;
	size_t i;
	int rc;

	if (b->planned && b->planned_gen == ctx->roots_gen)
		return MC_OK;
	if ((rc = mc__bundle_index(b)) != MC_OK)
		return rc;
	if (b->m.nartifacts > UINT32_MAX)
		return mc__err(ctx, MC_ERR_LIMIT, "%s: more than %lu artifacts", b->path,
			       (unsigned long)UINT32_MAX);
	free(b->sel);
	memset(&P, 0, sizeof P);
	P.b = b;
	P.ctx = ctx;
	b->ndropped = 0;
	if ((b->sel = calloc(b->m.nartifacts + 1, 1)) == NULL ||
	    (P.dropped = calloc(b->m.nartifacts + 1, 1)) == NULL ||
	    (prev = calloc(1, sizeof *prev)) == NULL) {
		free(P.dropped);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	prev->ns = MC_NO_INDEX;
	mc__acur_init(&P.cx, ctx, &b->m, mc__find_type);
	mc__acur_init(&P.cy, ctx, &b->m, mc__find_type);
	crypto_shorthash_keygen(P.key);
	/* Every artifact is checked, whatever types are selected: a bundle one reader
	 * refuses, every reader refuses. */
	rc = plan_tiers(&P);
	for (i = 0; i < b->m.nartifacts && rc == MC_OK; i++) {
		const struct mc_martifact *a;

		if ((rc = mc__acur_get(&P.cx, i, &a)) != MC_OK)
			break;
		if ((rc = plan_check(ctx, b, a)) != MC_OK)
			break;
		rc = plan_enter(&P, i, a, prev);
	}
	if (rc == MC_OK)
		rc = plan_blob_keys(ctx, b);
	if (rc == MC_OK)
		rc = plan_conflicts(&P);
	for (i = 0; rc == MC_OK && i < b->m.nartifacts; i++) {
		const struct mc_martifact *a;
		if ((rc = mc__acur_get(&P.cx, i, &a)) == MC_OK && mc__type_selected(b, a->type)) {
			b->sel[i] = !P.dropped[i];
			b->ndropped += P.dropped[i];
		}
	}
	for (i = 0; i < P.ntiers; i++)
		free(P.tiers[i].canon);
	free(P.tiers);
	free(P.refs);
	free(P.dropped);
	free(prev);
	mc__acur_free(&P.cx);
	mc__acur_free(&P.cy);
	if (rc == MC_OK) {
		b->planned = 1;
		b->planned_gen = ctx->roots_gen;
	}
	return rc;
}


int
mc__bundle_plan(mc_bundle *b)
{
	return mc__bundle_plan_in(b, b->ctx);
}
