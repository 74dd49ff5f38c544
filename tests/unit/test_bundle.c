/* test_bundle.c - bundles through the public API: record, save, open, verify, load;
 * every single-byte change and every truncation refused with nothing written;
 * all-or-nothing installs; destinations that are links; determinism; a loader
 * thread's open folders. */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>

#include <sodium.h>

static mc_ctx *ctx;
static char *dir;
static mc_seckey *sk;
static mc_pubkey *pk;

#define VU "vu/3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a743bb.best_config"
#define IG "ig/4284062ea9a84465a56e21b40068c15a3f8fb827c0ab27e61d71153e3e3fadcc.best_config"
#define GRAPH "fotplswjlgcwpirmz5wx3c4gqnemeggfl5ggjfy5fj5qy464qo4i"

static void
setup(void)
{
	char *p;

	ck_assert_int_eq(mc_ctx_new(&ctx), MC_OK);
	dir = scratch("bundle");
	p = src_path("format/vectors/keys/test.key");
	ck_assert_int_eq(mc_seckey_load(ctx, p, NULL, NULL, &sk), MC_OK);
	free(p);
	p = src_path("format/vectors/keys/test.pub");
	ck_assert_int_eq(mc_pubkey_load(ctx, p, &pk), MC_OK);
	free(p);
}

static void
teardown(void)
{
	mc_seckey_free(sk);
	mc_pubkey_free(pk);
	mc_ctx_free(ctx);
	free(dir);
}

/* A small bundle of real torch artifacts plus an empty one and a shared content. */
static void
make_bundle(const char *path, int level)
{
	mc_writer *w;
	size_t n1, n2;
	char *p1 = src_path("tests/data/small/vu.best_config"), *p2 = src_path("tests/data/small/code_state.pkl");
	unsigned char *c1 = slurp(p1, &n1), *c2 = slurp(p2, &n2);

	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_set_created(w, 1700000000), MC_OK);
	ck_assert_int_eq(mc_writer_set_compression(w, level), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "autotune", VU, c1, n1), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "autotune", IG, c1, n1), MC_OK); /* same content */
	ck_assert_int_eq(mc_writer_add_memory(w, "pgo", "job:0:", c2, n2), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "pgo", "empty:0:", "", 0), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "inductor", GRAPH, c2, 100), MC_OK);
	ck_assert_int_eq(mc_writer_add_signer(w, sk), MC_OK);
	ck_assert_int_eq(mc_writer_save(w, path), MC_OK);
	mc_writer_free(w);
	free(c1);
	free(c2);
	free(p1);
	free(p2);
}

static int
load_into(const char *bundle, const char *root, unsigned flags)
{
	mc_bundle *b;
	int rc;

	ck_assert_int_eq(mc_ctx_set_tier_root(ctx, "inductor", root), MC_OK);
	if ((rc = mc_bundle_open(ctx, bundle, &b)) != MC_OK)
		return rc;
	ck_assert_int_eq(mc_bundle_trust(b, pk), MC_OK);
	rc = mc_bundle_load(b, flags, NULL, NULL);
	mc_bundle_free(b);
	return rc;
}

START_TEST(save_open_load)
{
	char path[4096], root[4096], f[4096];
	mc_bundle *b;
	const char *type, *key, *hash;
	uint64_t size;
	size_t n;
	unsigned char *got;
	struct stat st;

	snprintf(path, sizeof path, "%s/b.mcache", dir);
	snprintf(root, sizeof root, "%s/root", dir);
	make_bundle(path, 3);
	ck_assert_int_eq(mc_bundle_open(ctx, path, &b), MC_OK);
	ck_assert_uint_eq(mc_bundle_artifact_count(b), 5);
	ck_assert_int_eq(mc_bundle_artifact(b, 0, &type, &key, &size, &hash), MC_OK);
	ck_assert_str_eq(type, "autotune");
	ck_assert_str_eq(key, IG);
	ck_assert_uint_eq(mc_bundle_signature_count(b), 1);
	ck_assert_str_eq(mc_bundle_signature_key_id(b, 0), mc_pubkey_id(pk));
	/* No key: refused; with the key: verified. */
	ck_assert_int_eq(mc_bundle_verify(b), MC_ERR_INVALID);
	ck_assert_int_eq(mc_bundle_trust(b, pk), MC_OK);
	ck_assert_int_eq(mc_bundle_verify(b), MC_OK);
	/* Verify twice on one handle re-reads the same bytes. */
	ck_assert_int_eq(mc_bundle_verify(b), MC_OK);
	mc_bundle_free(b);
	ck_assert_int_eq(load_into(path, root, 0), MC_OK);
	snprintf(f, sizeof f, "%s/dynamo/code_state_empty_0_.pkl", root);
	ck_assert_int_eq(stat(f, &st), 0);
	ck_assert_int_eq(st.st_size, 0);
	snprintf(f, sizeof f, "%s/" IG, root);
	got = slurp(f, &n);
	ck_assert_uint_eq(n, 259);
	free(got);
	/* 5 files + folders vu ig dynamo fxgraph fxgraph/ot fxgraph/ot/<key> */
	ck_assert_int_eq(count_tree(root), 11);
}
END_TEST

START_TEST(deterministic)
{
	char a[4096], b[4096];
	unsigned char *x, *y;
	size_t nx, ny;

	snprintf(a, sizeof a, "%s/a.mcache", dir);
	snprintf(b, sizeof b, "%s/b.mcache", dir);
	make_bundle(a, 3);
	make_bundle(b, 3);
	x = slurp(a, &nx);
	y = slurp(b, &ny);
	ck_assert_uint_eq(nx, ny);
	ck_assert_int_eq(memcmp(x, y, nx), 0);
	free(x);
	free(y);
}
END_TEST

/* A save without a writer or a path is refused, writes nothing, and leaves the
 * writer usable. */
START_TEST(save_needs_writer_and_path)
{
	char path[4096];
	mc_writer *w;

	snprintf(path, sizeof path, "%s/none.mcache", dir);
	ck_assert_int_eq(mc_writer_save(NULL, path), MC_ERR_INVALID);
	ck_assert_int_eq(count_tree(dir), 0);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "pgo", "job:0:", "x", 1), MC_OK);
	ck_assert_int_eq(mc_writer_save(w, NULL), MC_ERR_INVALID);
	ck_assert_int_eq(count_tree(dir), 0);
	ck_assert_int_eq(mc_writer_save(w, path), MC_OK);
	ck_assert_int_eq(count_tree(dir), 1);
	mc_writer_free(w);
}
END_TEST

/* Every byte of the bundle, flipped: refused as a verification failure (or, for the
 * magic number, as not a bundle), and the root never created. */
static void
flip_every_byte(int level)
{
	char path[4096], bad[4096], root[4096];
	unsigned char *orig;
	size_t n, i;

	snprintf(path, sizeof path, "%s/f.mcache", dir);
	snprintf(bad, sizeof bad, "%s/bad.mcache", dir);
	snprintf(root, sizeof root, "%s/froot", dir);
	make_bundle(path, level);
	orig = slurp(path, &n);
	for (i = 0; i < n; i++) {
		int rc;
		orig[i] ^= 0x20;
		spit(bad, orig, n);
		orig[i] ^= 0x20;
		rc = load_into(bad, root, 0);
		ck_assert_msg(mc_status_is_verification_failure(rc) || (rc == MC_ERR_NOT_BUNDLE && i < 512),
			      "byte %zu of %zu: rc %d (%s)", i, n, rc, mc_ctx_error(ctx));
		ck_assert_msg(count_tree(root) == -1, "byte %zu: something was written", i);
	}
	ck_assert_int_eq(load_into(path, root, 0), MC_OK);
	free(orig);
}

START_TEST(flip_every_byte_zstd)
{
	flip_every_byte(3);
}
END_TEST

START_TEST(flip_every_byte_plain)
{
	flip_every_byte(0);
}
END_TEST

START_TEST(truncate_everywhere)
{
	char path[4096], bad[4096], root[4096];
	unsigned char *orig;
	size_t n, i;
	int level;

	snprintf(path, sizeof path, "%s/t.mcache", dir);
	snprintf(bad, sizeof bad, "%s/trunc.mcache", dir);
	snprintf(root, sizeof root, "%s/troot", dir);
	for (level = 0; level <= 3; level += 3) {
		make_bundle(path, level);
		orig = slurp(path, &n);
		for (i = 0; i < n; i += (level ? 1 : 7)) {
			int rc;
			spit(bad, orig, i);
			rc = load_into(bad, root, 0);
			ck_assert_msg(rc == MC_ERR_MALFORMED || rc == MC_ERR_NOT_BUNDLE,
				      "cut at %zu of %zu: rc %d (%s)", i, n, rc, mc_ctx_error(ctx));
			ck_assert_int_eq(count_tree(root), -1);
		}
		free(orig);
	}
}
END_TEST

START_TEST(all_or_nothing)
{
	char path[4096], root[4096], f[4096];
	unsigned char *orig;
	size_t n;
	int before;

	snprintf(path, sizeof path, "%s/a.mcache", dir);
	snprintf(root, sizeof root, "%s/root", dir);
	make_bundle(path, 0);
	/* A root that exists with a file of its own. */
	mkdir(root, 0755);
	snprintf(f, sizeof f, "%s/mine", root);
	spit(f, "keep", 4);
	before = count_tree(root);
	/* Corrupt the last block's content: the failure comes after everything else
	 * was staged. */
	orig = slurp(path, &n);
	{
		size_t i, last = 0;
		for (i = 0; i + 7 < n; i += 512)
			if (memcmp(orig + i, "blocks/", 7) == 0)
				last = i;
		ck_assert_uint_gt(last, 0);
		orig[last + 512 + 10] ^= 1;
	}
	spit(path, orig, n);
	free(orig);
	ck_assert_int_eq(load_into(path, root, 0), MC_ERR_INTEGRITY);
	ck_assert_int_eq(count_tree(root), before);
}
END_TEST

/* A cancelled context: a load installs nothing and leaves the root as it was, a save
 * writes nothing beside its output, both MC_ERR_CANCELLED. */
START_TEST(cancelled)
{
	char path[4096], root[4096], f[4096], out[4096];
	mc_writer *w;
	int before;

	snprintf(path, sizeof path, "%s/c.mcache", dir);
	snprintf(root, sizeof root, "%s/root", dir);
	snprintf(out, sizeof out, "%s/out", dir);
	make_bundle(path, 3);
	mkdir(root, 0755);
	mkdir(out, 0755);
	snprintf(f, sizeof f, "%s/mine", root);
	spit(f, "keep", 4);
	before = count_tree(root);
	mc_ctx_cancel(ctx);
	ck_assert_int_eq(load_into(path, root, 0), MC_ERR_CANCELLED);
	ck_assert_str_eq(mc_status_code(MC_ERR_CANCELLED), "cancelled");
	ck_assert_int_eq(count_tree(root), before);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "autotune", VU, "{}", 2), MC_OK);
	snprintf(f, sizeof f, "%s/b.mcache", out);
	ck_assert_int_eq(mc_writer_save(w, f), MC_ERR_CANCELLED);
	mc_writer_free(w);
	ck_assert_int_eq(count_tree(out), 0);
}
END_TEST

START_TEST(symlinks_in_destination)
{
	char path[4096], root[4096], out[4096], f[4096];

	snprintf(path, sizeof path, "%s/s.mcache", dir);
	snprintf(root, sizeof root, "%s/root", dir);
	snprintf(out, sizeof out, "%s/outside", dir);
	make_bundle(path, 3);
	mkdir(root, 0755);
	mkdir(out, 0755);
	/* A planted link at a folder the bundle writes into. */
	snprintf(f, sizeof f, "%s/fxgraph", root);
	ck_assert_int_eq(symlink(out, f), 0);
	ck_assert_int_eq(load_into(path, root, 0), MC_ERR_UNSAFE_DEST);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "symlink"));
	ck_assert_int_eq(count_tree(out), 0);
	ck_assert_int_eq(count_tree(root), 1);
	unlink(f);
	/* A planted link at a final file name. */
	mkdir(f, 0755);
	snprintf(f, sizeof f, "%s/dynamo", root);
	mkdir(f, 0755);
	snprintf(f, sizeof f, "%s/dynamo/code_state_job_0_.pkl", root);
	ck_assert_int_eq(symlink("../../outside/victim", f), 0);
	ck_assert_int_eq(load_into(path, root, 0), MC_ERR_UNSAFE_DEST);
	ck_assert_int_eq(count_tree(out), 0);
	ck_assert_int_eq(count_tree(root), 3);
}
END_TEST

START_TEST(dry_run_and_types)
{
	char path[4096], root[4096];
	mc_bundle *b;

	snprintf(path, sizeof path, "%s/d.mcache", dir);
	snprintf(root, sizeof root, "%s/root", dir);
	make_bundle(path, 3);
	ck_assert_int_eq(load_into(path, root, MC_LOAD_DRY_RUN), MC_OK);
	ck_assert_int_eq(count_tree(root), -1);
	ck_assert_int_eq(mc_bundle_open(ctx, path, &b), MC_OK);
	ck_assert_int_eq(mc_bundle_trust(b, pk), MC_OK);
	ck_assert_int_eq(mc_bundle_select_type(b, "pgo"), MC_OK);
	ck_assert_int_eq(mc_bundle_select_type(b, "nosuch"), MC_ERR_INVALID);
	ck_assert_int_eq(mc_bundle_load(b, 0, NULL, NULL), MC_OK);
	mc_bundle_free(b);
	ck_assert_int_eq(count_tree(root), 3); /* dynamo + 2 files */
}
END_TEST

START_TEST(policy)
{
	char path[4096];
	mc_writer *w;
	mc_bundle *b;

	snprintf(path, sizeof path, "%s/p.mcache", dir);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "pgo", "a:0:", "x", 1), MC_OK);
	ck_assert_int_eq(mc_writer_set_bundle_version(w, 5), MC_OK);
	ck_assert_int_eq(mc_writer_set_expires(w, 2000), MC_OK);
	ck_assert_int_eq(mc_writer_add_signer(w, sk), MC_OK);
	ck_assert_int_eq(mc_writer_save(w, path), MC_OK);
	mc_writer_free(w);
	ck_assert_int_eq(mc_bundle_open(ctx, path, &b), MC_OK);
	ck_assert_int_eq(mc_bundle_trust(b, pk), MC_OK);
	ck_assert_int_eq(mc_bundle_set_now(b, 1999), MC_OK);
	ck_assert_int_eq(mc_bundle_check_signatures(b), MC_OK);
	ck_assert_int_eq(mc_bundle_set_now(b, 2000), MC_OK);
	ck_assert_int_eq(mc_bundle_check_signatures(b), MC_ERR_EXPIRED);
	ck_assert_int_eq(mc_bundle_set_now(b, 1), MC_OK);
	ck_assert_int_eq(mc_bundle_set_min_version(b, 6), MC_OK);
	ck_assert_int_eq(mc_bundle_check_signatures(b), MC_ERR_ROLLBACK);
	ck_assert_int_eq(mc_bundle_set_min_version(b, 5), MC_OK);
	ck_assert_int_eq(mc_bundle_check_signatures(b), MC_OK);
	mc_bundle_free(b);
}
END_TEST

static int
note_check(void *ud, const char *key, char *why, size_t wl)
{
	return strspn(key, "abcdefghijklmnopqrstuvwxyz") == strlen(key) ? MC_OK : MC_ERR_BAD_KEY;
}

static int
note_dest(void *ud, const char *key, const unsigned char *sha, char *buf, size_t len)
{
	snprintf(buf, len, "notes/%s.txt", key);
	return MC_OK;
}

START_TEST(application_type_round_trip)
{
	char path[4096], root[4096], f[4096];
	mc_writer *w;
	unsigned char *got;
	size_t n;
	mc_ctx *other;
	mc_bundle *b;

	snprintf(path, sizeof path, "%s/n.mcache", dir);
	snprintf(root, sizeof root, "%s/notes-tier", dir);
	ck_assert_int_eq(mc_ctx_register_type(ctx, "note", "notes", 0, note_check, note_dest, NULL), MC_OK);
	ck_assert_int_eq(mc_ctx_set_tier_root(ctx, "notes", root), MC_OK);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "note", "hello", "hi there", 8), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "note", "Bad", "x", 1), MC_ERR_BAD_KEY);
	ck_assert_int_eq(mc_writer_add_signer(w, sk), MC_OK);
	ck_assert_int_eq(mc_writer_save(w, path), MC_OK);
	mc_writer_free(w);
	ck_assert_int_eq(mc_bundle_open(ctx, path, &b), MC_OK);
	ck_assert_int_eq(mc_bundle_trust(b, pk), MC_OK);
	ck_assert_int_eq(mc_bundle_load(b, 0, NULL, NULL), MC_OK);
	mc_bundle_free(b);
	snprintf(f, sizeof f, "%s/notes/hello.txt", root);
	got = slurp(f, &n);
	ck_assert_uint_eq(n, 8);
	ck_assert_int_eq(memcmp(got, "hi there", 8), 0);
	free(got);
	/* A context without the type refuses the bundle. */
	ck_assert_int_eq(mc_ctx_new(&other), MC_OK);
	ck_assert_int_eq(mc_bundle_open(other, path, &b), MC_OK);
	ck_assert_int_eq(mc_bundle_trust(b, pk), MC_OK);
	ck_assert_int_eq(mc_bundle_verify(b), MC_ERR_UNKNOWN_TYPE);
	mc_bundle_free(b);
	mc_ctx_free(other);
}
END_TEST

/* A type whose destination is its key ([a-z/-] only), in tier "paths"; a second one
 * in the same tier, so that two artifacts can claim one path. */
static int
path_check(void *ud, const char *key, char *why, size_t wl)
{
	return strspn(key, "abcdefghijklmnopqrstuvwxyz/-") == strlen(key) ? MC_OK : MC_ERR_BAD_KEY;
}

static int
path_dest(void *ud, const char *key, const unsigned char *sha, char *buf, size_t len)
{
	snprintf(buf, len, "%s", key);
	return MC_OK;
}

struct pitem {
	const char *type, *key, *data;
};

/* Saves items into path, loads the bundle into root; returns the load's outcome. */
static int
load_paths(const char *path, const char *root, const struct pitem *items, size_t n)
{
	mc_writer *w;
	mc_bundle *b;
	size_t i;
	int rc;

	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(mc_writer_add_memory(w, items[i].type, items[i].key, items[i].data,
						      strlen(items[i].data)), MC_OK);
	ck_assert_int_eq(mc_writer_add_signer(w, sk), MC_OK);
	ck_assert_int_eq(mc_writer_save(w, path), MC_OK);
	mc_writer_free(w);
	ck_assert_int_eq(mc_ctx_set_tier_root(ctx, "paths", root), MC_OK);
	ck_assert_int_eq(mc_bundle_open(ctx, path, &b), MC_OK);
	ck_assert_int_eq(mc_bundle_trust(b, pk), MC_OK);
	rc = mc_bundle_load(b, 0, NULL, NULL);
	mc_bundle_free(b);
	return rc;
}

START_TEST(destination_conflicts)
{
	/* A path that is a folder above another's, also with a path that sorts between
	 * them ("a/b-x" comes after "a/b" and before "a/b/c"). */
	static const struct pitem nested[] = {
		{"pa", "a/b", "1"}, {"pa", "a/b-x", "2"}, {"pa", "a/b/c", "3"}};
	static const struct pitem deeper[] = {
		{"pa", "q/r/s/t", "1"}, {"pa", "q/r-", "2"}, {"pb", "q/r", "3"}};
	static const struct pitem same_path[] = {{"pa", "x/y", "1"}, {"pb", "x/y", "2"}};
	static const struct pitem same_content[] = {{"pa", "x/y", "same"}, {"pb", "x/y", "same"},
						     {"pb", "x/z", "other"}};
	char path[4096], root[4096], f[4096];
	unsigned char *got;
	size_t n;

	ck_assert_int_eq(mc_ctx_register_type(ctx, "pa", "paths", 0, path_check, path_dest, NULL), MC_OK);
	ck_assert_int_eq(mc_ctx_register_type(ctx, "pb", "paths", 0, path_check, path_dest, NULL), MC_OK);
	snprintf(path, sizeof path, "%s/c.mcache", dir);
	snprintf(root, sizeof root, "%s/paths-tier", dir);

	ck_assert_int_eq(load_paths(path, root, nested, 3), MC_ERR_CONFLICT);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "artifacts pa a/b and pa a/b/c both need /"));
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "/paths-tier/a/b"));
	ck_assert_int_ne(access(root, F_OK), 0); /* nothing made, not even the tier root */

	ck_assert_int_eq(load_paths(path, root, deeper, 3), MC_ERR_CONFLICT);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "artifacts pb q/r and pa q/r/s/t both need /"));
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "/paths-tier/q/r"));
	ck_assert_int_ne(access(root, F_OK), 0); /* nothing made, not even the tier root */

	ck_assert_int_eq(load_paths(path, root, same_path, 2), MC_ERR_CONFLICT);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "artifacts pa x/y and pb x/y both need /"));
	ck_assert_int_ne(access(root, F_OK), 0); /* nothing made, not even the tier root */

	/* The same content twice at one path is installed once. */
	ck_assert_int_eq(load_paths(path, root, same_content, 3), MC_OK);
	snprintf(f, sizeof f, "%s/x/y", root);
	got = slurp(f, &n);
	ck_assert_uint_eq(n, 4);
	ck_assert_int_eq(memcmp(got, "same", 4), 0);
	free(got);
}
END_TEST

START_TEST(read_only_destination)
{
	char path[4096], root[4096];

	if (geteuid() == 0)
		return; /* root writes through permissions; the case is covered by the tool tests */
	snprintf(path, sizeof path, "%s/r.mcache", dir);
	snprintf(root, sizeof root, "%s/ro", dir);
	make_bundle(path, 3);
	mkdir(root, 0555);
	ck_assert_int_eq(load_into(path, root, 0), MC_ERR_IO);
	ck_assert_int_eq(count_tree(root), 0);
	/* A dry run fails as the load does, naming the folder; a listing does not check. */
	ck_assert_int_eq(load_into(path, root, MC_LOAD_DRY_RUN), MC_ERR_IO);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), ": cannot create folder: Permission denied"));
	ck_assert_int_eq(load_into(path, root, MC_LOAD_DRY_RUN | MC_LOAD_NO_WRITE_CHECK), MC_OK);
	ck_assert_int_eq(count_tree(root), 0);
}
END_TEST

/* Entries below path (path too) not owned by uid:gid; -1 if one cannot be read. */
static int
count_not_owned(const char *path, uid_t uid, gid_t gid)
{
	struct stat st;
	struct dirent *e;
	DIR *d;
	int n, k;

	if (lstat(path, &st) != 0)
		return -1;
	n = st.st_uid != uid || st.st_gid != gid;
	if (!S_ISDIR(st.st_mode) || (d = opendir(path)) == NULL)
		return n;
	while ((e = readdir(d)) != NULL) {
		char sub[4096];
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
		if ((k = count_not_owned(sub, uid, gid)) < 0)
			n = -1;
		else if (n >= 0)
			n += k;
	}
	closedir(d);
	return n;
}

/* mc_ctx_set_owner(): ids checked; root only; what a load makes is the owner's, the
 * missing parents of the root included, and what was there is left alone. */
START_TEST(owner)
{
	char path[4096], top[4096], root[4096];
	struct stat st;

	ck_assert_int_eq(mc_ctx_set_owner(ctx, -2, 0), MC_ERR_INVALID);
	ck_assert_int_eq(mc_ctx_set_owner(ctx, 0, 4294967295L), MC_ERR_INVALID);
	ck_assert_int_eq(mc_ctx_set_owner(ctx, -1, -1), MC_OK);
	if (geteuid() != 0) {
		ck_assert_int_eq(mc_ctx_set_owner(ctx, 4242, 4243), MC_ERR_INVALID);
		ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "needs root"));
		return;
	}
	snprintf(path, sizeof path, "%s/o.mcache", dir);
	snprintf(top, sizeof top, "%s/o", dir);
	snprintf(root, sizeof root, "%s/o/a/b", dir);
	make_bundle(path, 3);
	ck_assert_int_eq(mkdir(top, 0700), 0);
	ck_assert_int_eq(mc_ctx_set_owner(ctx, 4242, 4243), MC_OK);
	ck_assert_int_eq(load_into(path, root, MC_LOAD_DRY_RUN), MC_OK);
	ck_assert_int_eq(count_tree(top), 0);
	ck_assert_int_eq(load_into(path, root, 0), MC_OK);
	ck_assert_int_eq(count_tree(top), 13); /* a, b, 6 folders, 5 files */
	snprintf(top, sizeof top, "%s/o/a", dir);
	ck_assert_int_eq(count_not_owned(top, 4242, 4243), 0);
	snprintf(top, sizeof top, "%s/o", dir);
	ck_assert_int_eq(stat(top, &st), 0);
	ck_assert_uint_eq(st.st_uid, geteuid());
	ck_assert_uint_eq(st.st_mode & 07777, 0700);
	/* Again into the owner's folders: all there already. */
	ck_assert_int_eq(load_into(path, root, 0), MC_OK);
	ck_assert_int_eq(mc_ctx_set_owner(ctx, -1, -1), MC_OK);
}
END_TEST

/* A writer's records and keys go to temp files, and are sorted in runs at save: 40,000
 * artifacts recorded out of order, 80 of them twice (40 with another content), come
 * out one per key, in key order, each with the content recorded last. */
#define MANY 40000u

static void
count_conflict(void *ud, const char *type, const char *key)
{
	size_t *n = ud;
	unsigned u;

	ck_assert_str_eq(type, "pgo");
	ck_assert_int_eq(sscanf(key, "k%u", &u), 1);
	ck_assert_uint_eq(u % 1000, 0);
	(*n)++;
}

static void
many_content(unsigned u, int changed, char *buf, size_t len)
{
	snprintf(buf, len, "%s state %u", changed ? "changed" : "recorded", u);
}

START_TEST(many_artifacts_sorted)
{
	char path[4096], root[4096], f[4096 + 64], key[32], content[64], hex[65], prev[32] = "";
	unsigned char hash[32], *got;
	size_t conflicts = 0, i, n, saved;
	int rc;
	mc_writer *w;
	mc_bundle *b;
	const char *type, *k, *h;
	uint64_t size, saved_bytes, listed_bytes = 0;

	snprintf(path, sizeof path, "%s/many.mcache", dir);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	mc_writer_set_conflict_fn(w, count_conflict, &conflicts);
	ck_assert_int_eq(mc_writer_set_compression(w, 1), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "pgo", "zz-first", "a", 1), MC_OK);
	for (i = 0; i < MANY; i++) {
		unsigned u = (unsigned)((i * 7919) % MANY); /* every key once, out of order */
		snprintf(key, sizeof key, "k%u", u);
		many_content(u, 0, content, sizeof content);
		ck_assert_int_eq(mc_writer_add_memory(w, "pgo", key, content, strlen(content)), MC_OK);
		if (i == MANY / 2)
			ck_assert_int_eq(mc_writer_add_memory(w, "autotune", VU, "b", 1), MC_OK);
	}
	for (i = 0; i < MANY; i += 500) { /* again: every other one with another content */
		snprintf(key, sizeof key, "k%zu", i);
		many_content((unsigned)i, i % 1000 == 0, content, sizeof content);
		ck_assert_int_eq(mc_writer_add_memory(w, "pgo", key, content, strlen(content)), MC_OK);
	}
	ck_assert_uint_eq(mc_writer_artifact_count(w), MANY + 2 + MANY / 500);
	ck_assert_uint_eq(mc_writer_saved_count(w), 0);
	ck_assert_int_eq(mc_writer_add_signer(w, sk), MC_OK);
	ck_assert_int_eq(mc_writer_save(w, path), MC_OK);
	/* what the save wrote: one per key, the contents recorded last */
	saved = mc_writer_saved_count(w);
	saved_bytes = mc_writer_saved_bytes(w);
	mc_writer_free(w);
	ck_assert_uint_eq(conflicts, MANY / 1000);
	ck_assert_uint_eq(saved, MANY + 2);

	ck_assert_int_eq(mc_bundle_open(ctx, path, &b), MC_OK);
	/* a manifest read through a temp file, its object table (3.5 MB) in memory */
	ck_assert_int_eq(b->m.spilled, 1);
	ck_assert_int_eq(b->m.ospilled, 0);
	ck_assert_int_eq(mc_bundle_trust(b, pk), MC_OK);
	ck_assert_int_eq(mc_bundle_verify(b), MC_OK);
	ck_assert_uint_eq(mc_bundle_artifact_count(b), MANY + 2);
	for (i = 0; i < MANY + 2; i++) {
		ck_assert_int_eq(mc_bundle_artifact(b, i, &type, &k, &size, &h), MC_OK);
		listed_bytes += size;
	}
	ck_assert_uint_eq(saved_bytes, listed_bytes);
	ck_assert_int_eq(mc_bundle_artifact(b, 0, &type, &k, &size, &h), MC_OK);
	ck_assert_str_eq(type, "autotune");
	for (i = 1; i < MANY + 2; i++) {
		unsigned u;
		ck_assert_int_eq(mc_bundle_artifact(b, i, &type, &k, &size, &h), MC_OK);
		ck_assert_str_eq(type, "pgo");
		ck_assert_msg(strcmp(prev, k) < 0, "%s after %s", k, prev);
		snprintf(prev, sizeof prev, "%s", k);
		if (strcmp(k, "zz-first") == 0) {
			ck_assert_uint_eq(size, 1);
			continue;
		}
		ck_assert_int_eq(sscanf(k, "k%u", &u), 1);
		many_content(u, u % 1000 == 0, content, sizeof content);
		ck_assert_uint_eq(size, strlen(content));
		crypto_hash_sha256(hash, (const unsigned char *)content, strlen(content));
		mc__hex(hash, sizeof hash, hex);
		ck_assert_str_eq(h, hex);
	}
	ck_assert_str_eq(prev, "zz-first");
	mc_bundle_free(b);

	/* Again with the object table in a temp file too, as past MC_OBJECTS_IN_MEMORY: the
	 * bundle verifies, and a load writes each content. */
	ctx->objects_in_memory = 0;
	ck_assert_int_eq(mc_bundle_open(ctx, path, &b), MC_OK);
	ck_assert_int_eq(b->m.ospilled, 1);
	ck_assert_int_eq(mc_bundle_trust(b, pk), MC_OK);
	rc = mc_bundle_verify(b);
	mc_bundle_free(b);
	snprintf(root, sizeof root, "%s/many-root", dir);
	if (rc == MC_OK)
		rc = load_into(path, root, 0);
	ctx->objects_in_memory = MC_OBJECTS_IN_MEMORY;
	ck_assert_msg(rc == MC_OK, "%s", mc_ctx_error(ctx));
	for (i = 0; i < MANY; i += 999) {
		snprintf(f, sizeof f, "%s/dynamo/code_state_k%zu.pkl", root, i);
		many_content((unsigned)i, i % 1000 == 0, content, sizeof content);
		got = slurp(f, &n);
		ck_assert_msg(got != NULL && n == strlen(content) && memcmp(got, content, n) == 0,
			      "%s", f);
		free(got);
	}
}
END_TEST

/* Objects put in a spool (as pull does) keep the stored form they were put in, whatever
 * level the writer has at the save: at the same level the bundle is byte for byte the
 * one made from the same contents in memory; at another it verifies and loads the same
 * bytes. */
static void
spooled_bundle(const char *path, int spool_level, int save_level, int spooled)
{
	static const char *const keys[] = {"a:0:", "b:0:", "c:0:"};
	unsigned char rnd[4096], txt[65536];
	const unsigned char *c[3] = {txt, rnd, (const unsigned char *)""};
	size_t n[3] = {sizeof txt, sizeof rnd, 0}, i;
	struct mc_wspool *sp = NULL;
	uint16_t idx = 0;
	mc_writer *w;

	for (i = 0; i < sizeof txt; i++)
		txt[i] = (unsigned char)("compressible text "[i % 18]);
	for (i = 0; i < sizeof rnd; i++)
		rnd[i] = (unsigned char)(i * 2654435761u >> 13);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_set_created(w, 1700000000), MC_OK);
	ck_assert_int_eq(mc_writer_set_compression(w, spool_level), MC_OK);
	if (spooled) {
		/* Format version 2 compresses blocks at save: a spool keeps contents as
		 * they are, whatever the level then. */
		ck_assert_int_eq(mc__wspool_new(ctx, 0, 2, NULL, &sp), MC_OK);
		ck_assert_int_eq(mc__writer_spool(w, sp, &idx), MC_OK);
	}
	for (i = 0; i < 3; i++) {
		struct mc_wobj o;
		if (!spooled) {
			ck_assert_int_eq(mc_writer_add_memory(w, "pgo", keys[i], c[i], n[i]), MC_OK);
			continue;
		}
		ck_assert_int_eq(mc__wspool_put(sp, ctx, c[i], n[i], &o), MC_OK);
		o.spool = idx;
		ck_assert_int_eq(mc__writer_add_spooled(w, "pgo", keys[i], &o, NULL), MC_OK);
	}
	if (spooled)
		mc__wspool_done(sp);
	ck_assert_int_eq(mc_writer_add_memory(w, "pgo", "d:0:", txt, 1000), MC_OK);
	ck_assert_int_eq(mc_writer_set_compression(w, save_level), MC_OK);
	ck_assert_int_eq(mc_writer_add_signer(w, sk), MC_OK);
	ck_assert_int_eq(mc_writer_save(w, path), MC_OK);
	mc_writer_free(w);
}

START_TEST(spooled_objects)
{
	static const int levels[][2] = {{3, 3}, {0, 0}, {3, 0}, {0, 3}, {19, 1}};
	char path[4096], ref[4096], root[4096], f[4096];
	size_t i, n, nr;
	unsigned char *x, *y;

	snprintf(ref, sizeof ref, "%s/ref.mcache", dir);
	for (i = 0; i < sizeof levels / sizeof levels[0]; i++) {
		snprintf(path, sizeof path, "%s/spooled%zu.mcache", dir, i);
		spooled_bundle(path, levels[i][0], levels[i][1], 1);
		if (levels[i][0] == levels[i][1]) {
			spooled_bundle(ref, levels[i][0], levels[i][1], 0);
			x = slurp(path, &n);
			y = slurp(ref, &nr);
			ck_assert_msg(n == nr && memcmp(x, y, n) == 0, "level %d: not the bundle made "
				      "from memory", levels[i][0]);
			free(x);
			free(y);
		}
		snprintf(root, sizeof root, "%s/root%zu", dir, i);
		ck_assert_int_eq(load_into(path, root, 0), MC_OK);
		snprintf(f, sizeof f, "%s/dynamo/code_state_a_0_.pkl", root);
		x = slurp(f, &n);
		ck_assert_uint_eq(n, 65536);
		ck_assert_int_eq(memcmp(x, "compressible text compressible", 30), 0);
		free(x);
		snprintf(f, sizeof f, "%s/dynamo/code_state_b_0_.pkl", root);
		x = slurp(f, &n);
		ck_assert_uint_eq(n, 4096);
		ck_assert_uint_eq(x[4095], (unsigned char)(4095u * 2654435761u >> 13));
		free(x);
		snprintf(f, sizeof f, "%s/dynamo/code_state_c_0_.pkl", root);
		x = slurp(f, &n);
		ck_assert_uint_eq(n, 0);
		free(x);
	}
	/* Format version 2 compresses at save: spooled at level 3 and saved at level 0,
	 * the 64 KiB of text are stored as they are; spooled at 0 and saved at 3, they
	 * are compressed. */
	snprintf(path, sizeof path, "%s/spooled2.mcache", dir);
	x = slurp(path, &n);
	ck_assert_uint_gt(n, 65536);
	free(x);
	snprintf(path, sizeof path, "%s/spooled3.mcache", dir);
	x = slurp(path, &n);
	ck_assert_uint_lt(n, 40000);
	free(x);
}
END_TEST

/* A format 2 bundle from a pipe reads its index when first needed; one that fails
 * (here an object no artifact names, under a valid hash) leaves the manifest's head as
 * it was: its time, version and format are still there, and the failure stays. */
START_TEST(pipe_index_fails_head_stays)
{
	char *path = src_path("format/vectors/v2-object-unused.mcache");
	unsigned char *data;
	size_t n;
	int fds[2];
	mc_bundle *b;

	data = slurp(path, &n);
	ck_assert_uint_lt(n, 65536); /* fits a pipe's buffer */
	ck_assert_int_eq(pipe(fds), 0);
	ck_assert_int_eq(write(fds[1], data, n), (ssize_t)n);
	close(fds[1]);
	free(data);
	ck_assert_int_eq(mc_bundle_open_fd(ctx, fds[0], "pipe", &b), MC_OK);
	close(fds[0]);
	ck_assert_int_eq(mc_bundle_format_version(b), 2);
	ck_assert_int_eq(mc_bundle_read_tables(b), MC_ERR_MANIFEST);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "no artifact uses it"));
	ck_assert_uint_eq(mc_bundle_artifact_count(b), 0);
	ck_assert_int_eq(mc_bundle_read_tables(b), MC_ERR_MANIFEST);
	ck_assert_int_eq(mc_bundle_format_version(b), 2);
	ck_assert_int_eq(mc_bundle_created(b), 1700000000);
	mc_bundle_free(b);
	free(path);
}
END_TEST

/* What a scan told: "S <relpath>: <reason>" or "R <relpath>: <type>", one per line. */
struct scanlog {
	char text[4096];
	size_t recorded;
};

static void
on_scan(void *ud, int what, const char *rel, const char *text)
{
	struct scanlog *l = ud;
	size_t n = strlen(l->text);

	if (what == MC_SCAN_RECORDED)
		l->recorded++;
	if (what == MC_SCAN_SKIPPED || strcmp(text, "extra") == 0)
		snprintf(l->text + n, sizeof l->text - n, "%c %s: %s\n",
			 what == MC_SCAN_SKIPPED ? 'S' : 'R', rel, text);
}

/* <dir>/<rel> holding text, the folders above it made. */
static void
put_in(const char *rel, const char *text)
{
	char p[4096], *c;

	snprintf(p, sizeof p, "%s/%s", dir, rel);
	for (c = p + strlen(dir) + 1; (c = strchr(c, '/')) != NULL; c++) {
		*c = '\0';
		ck_assert(mkdir(p, 0755) == 0 || errno == EEXIST);
		*c = '/';
	}
	spit(p, text, strlen(text));
}

#define GOOD_NAME "yqjt344dty2m77qyy2qysdewmbklexigrgvb4ylguoheakrrutq" /* "graph one" */
#define BAD_NAME "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define GRAPH2 "faaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define BAD_REL "fxgraph/aa/" GRAPH2 "/" BAD_NAME

/* A cache dir of two graph files, one named after its content's SHA-256 and one not,
 * scanned by a writer of format version, kept unknown files or not. */
static mc_writer *
misnamed_writer(int version, int keep, struct scanlog *l)
{
	char p[4096];
	mc_writer *w;

	put_in("mn/fxgraph/ot/" GRAPH "/" GOOD_NAME, "graph one");
	put_in("mn/" BAD_REL, "graph two");
	memset(l, 0, sizeof *l);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_set_format_version(w, version), MC_OK);
	ck_assert_int_eq(mc_writer_set_keep_unknown(w, keep), MC_OK);
	snprintf(p, sizeof p, "%s/mn", dir);
	ck_assert_int_eq(mc_writer_add_cache_dir(w, p, on_scan, l), MC_OK);
	return w;
}

/* A graph file whose name is not its content's hash is left out (or kept as "extra" at
 * its path). Format version 2 reads each file once, at save, and tells the scan's fn
 * then; version 1 reads it at the scan and tells at once. */
START_TEST(misnamed_graph_file)
{
	const char *type, *key, *hash;
	struct scanlog l;
	mc_writer *w;
	mc_bundle *b;
	uint64_t size;
	char path[4096];
	int keep, version;

	for (version = 1; version <= 2; version++)
		for (keep = 0; keep <= 1; keep++) {
			w = misnamed_writer(version, keep, &l);
			ck_assert_uint_eq(mc_writer_artifact_count(w),
					  version == 2 || keep ? 2 : 1);
			if (version == 2)
				ck_assert_str_eq(l.text, "");
			snprintf(path, sizeof path, "%s/mn.mcache", dir);
			ck_assert_int_eq(mc_writer_save(w, path), MC_OK);
			ck_assert_str_eq(l.text, keep ? "R " BAD_REL ": extra\n"
						      : "S " BAD_REL ": file name is not the hash "
							"of its content\n");
			ck_assert_uint_eq(mc_writer_artifact_count(w), keep ? 2 : 1);
			mc_writer_free(w);
			ck_assert_int_eq(mc_bundle_open(ctx, path, &b), MC_OK);
			ck_assert_int_eq(mc_bundle_set_insecure(b, 1), MC_OK);
			ck_assert_int_eq(mc_bundle_verify(b), MC_OK);
			ck_assert_uint_eq(mc_bundle_artifact_count(b), keep ? 2 : 1);
			ck_assert_int_eq(mc_bundle_artifact(b, 0, &type, &key, &size, &hash),
					 MC_OK);
			ck_assert_str_eq(type, keep ? "extra" : "inductor");
			ck_assert_str_eq(key, keep ? BAD_REL : GRAPH "/" GOOD_NAME);
			mc_bundle_free(b);
		}
}
END_TEST

#define R51 "yrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr"
#define Y51 "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"
#define Z51 "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"
#define MN_WHY ": file name is not the hash of its content\n"
#define K1 "fxgraph/ot/" GRAPH "/"

/* Four files of one key folder, a good one first in name order, then three misnamed:
 * each file is an entry of the key, an artifact of its own, so the save finds the three
 * misnamed ones in one pass and tells of each, in the order of their keys; the good one
 * is kept. A key folder of nothing but misnamed files leaves nothing to write. */
START_TEST(misnamed_files_of_one_key)
{
	const char *type, *key, *hash;
	struct scanlog l;
	char p[4096];
	mc_writer *w;
	mc_bundle *b;
	uint64_t size;
	size_t i;
	int keep;

	put_in("k1/" K1 GOOD_NAME, "graph one");
	put_in("k1/" K1 R51, "graph two");
	put_in("k1/" K1 Y51, "graph three");
	put_in("k1/" K1 Z51, "graph four");
	put_in("k2/" K1 Y51, "graph three");
	put_in("k2/" K1 Z51, "graph four");
	for (keep = 0; keep <= 1; keep++) {
		memset(&l, 0, sizeof l);
		ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
		ck_assert_int_eq(mc_writer_set_keep_unknown(w, keep), MC_OK);
		snprintf(p, sizeof p, "%s/k1", dir);
		ck_assert_int_eq(mc_writer_add_cache_dir(w, p, on_scan, &l), MC_OK);
		snprintf(p, sizeof p, "%s/k1.mcache", dir);
		ck_assert_int_eq(mc_writer_save(w, p), MC_OK);
		ck_assert_str_eq(l.text, keep ? "R " K1 R51 ": extra\nR " K1 Y51 ": extra\n"
						"R " K1 Z51 ": extra\n"
					      : "S " K1 R51 MN_WHY "S " K1 Y51 MN_WHY
						"S " K1 Z51 MN_WHY);
		mc_writer_free(w);
		ck_assert_int_eq(mc_bundle_open(ctx, p, &b), MC_OK);
		ck_assert_int_eq(mc_bundle_set_insecure(b, 1), MC_OK);
		ck_assert_int_eq(mc_bundle_verify(b), MC_OK);
		ck_assert_uint_eq(mc_bundle_artifact_count(b), keep ? 4 : 1);
		ck_assert_int_eq(mc_bundle_find_artifact(b, "inductor", GRAPH "/" GOOD_NAME, &i),
				 MC_OK);
		ck_assert_int_eq(mc_bundle_artifact(b, i, &type, &key, &size, &hash), MC_OK);
		ck_assert_str_eq(hash, /* SHA-256 of "graph one" */
				 "c4133df3839e34cffe18c6a1890c966054b25d0689aa1e6166a38e402a31a4e0");
		mc_bundle_free(b);
	}
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	snprintf(p, sizeof p, "%s/k2", dir);
	ck_assert_int_eq(mc_writer_add_cache_dir(w, p, NULL, NULL), MC_OK);
	snprintf(p, sizeof p, "%s/k2.mcache", dir);
	ck_assert_int_eq(mc_writer_save(w, p), MC_ERR_INVALID);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "nothing written"));
	ck_assert_int_eq(access(p, F_OK), -1);
	mc_writer_free(w);
}
END_TEST

/* An FX graph entry given by file to the writer with torch's key alone gets its entry
 * from its content, in both format versions (as a scan keys it); a key whose entry is
 * not its content's hash is refused, nothing recorded. */
START_TEST(graph_entry_from_file)
{
	const char *type, *key, *hash;
	char f[4096], p[4096];
	mc_writer *w;
	mc_bundle *b;
	uint64_t size;
	int version;

	snprintf(f, sizeof f, "%s/graph", dir);
	spit(f, "graph one", 9);
	for (version = 1; version <= 2; version++) {
		ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
		ck_assert_int_eq(mc_writer_set_format_version(w, version), MC_OK);
		ck_assert_int_eq(mc_writer_add_file(w, "inductor", GRAPH "/" BAD_NAME, f),
				 MC_ERR_BAD_KEY);
		ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "its entry is not the hash of its "
					     "content"));
		ck_assert_uint_eq(mc_writer_artifact_count(w), 0);
		ck_assert_int_eq(mc_writer_add_file(w, "inductor", GRAPH, f), MC_OK);
		snprintf(p, sizeof p, "%s/ge%d.mcache", dir, version);
		ck_assert_int_eq(mc_writer_save(w, p), MC_OK);
		mc_writer_free(w);
		ck_assert_int_eq(mc_bundle_open(ctx, p, &b), MC_OK);
		ck_assert_int_eq(mc_bundle_artifact(b, 0, &type, &key, &size, &hash), MC_OK);
		ck_assert_str_eq(key, GRAPH "/" GOOD_NAME);
		mc_bundle_free(b);
	}
}
END_TEST

/* A worker's open folders (install.h, struct dcur) through paths deeper than it keeps
 * slots for, and folders below them: each open gives the folder asked for, the cursor
 * never holds more than its slots, and no descriptor of the process is closed. */
START_TEST(folder_cursor_deep)
{
	static const char *const dirs[] = {
		"a/b/c/d/e/f/g/h", "a/b/c/d/e/f/g/h/i", "a/b/c/d/e/f/g/h/i/j", "a/b/c/d/e/f/g/h",
		"a/b/c/d/e/f/g/h/i2", "a/b/c/d/e/f/g/h/i/j/k/l/m", "a/b/c/d/e/f/g/h/i/j/k",
		"a/b/c/x", "a/b/c/d/e/f/g/h/i/j/k/l/m/n", "a/b", "."};
	struct tier_root t = {"inductor", NULL, 0, -1, NULL, NULL, 0, -1, NULL, MC_FRESH_NONE, 0};
	struct loader L;
	struct dcur d;
	char root[4096], p[8192];
	size_t i;
	int sentinel, fd;

	snprintf(root, sizeof root, "%s/cursor", dir);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	t.root = root;
	t.named = strlen(root);
	ck_assert_int_ge(t.fd = open(root, O_RDONLY | O_DIRECTORY), 0);
	memset(&L, 0, sizeof L);
	L.ctx = ctx;
	L.tiers = &t;
	L.ntiers = 1;
	pthread_mutex_init(&L.lock, NULL);
	/* Descriptors the cursor must leave alone, among the numbers it uses. */
	ck_assert_int_ge(sentinel = open("/dev/null", O_RDONLY), 0);
	mc__dcur_init(&d);
	for (i = 0; i < sizeof dirs / sizeof *dirs; i++) {
		struct stat a, b;

		ck_assert_int_eq(mc__dcur_open(&L, ctx, &d, 0, dirs[i], MC_DIR_MAKE, &fd), MC_OK);
		ck_assert_int_ge(fd, 0);
		ck_assert_uint_le(d.n, MC_DCUR_DEPTH);
		snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
		ck_assert_int_eq(fstat(fd, &a), 0);
		ck_assert_int_eq(stat(p, &b), 0);
		ck_assert_msg(a.st_ino == b.st_ino && a.st_dev == b.st_dev, "%s: another folder", dirs[i]);
		ck_assert_int_ne(fcntl(0, F_GETFD), -1);
		ck_assert_int_ne(fcntl(sentinel, F_GETFD), -1);
		ck_assert_int_ne(fcntl(t.fd, F_GETFD), -1);
	}
	mc__dcur_close(&d);
	ck_assert_uint_eq(d.n, 0);
	ck_assert_int_ne(fcntl(sentinel, F_GETFD), -1);
	close(sentinel);
	close(t.fd);
	for (i = 0; i < L.nmade; i++)
		free(L.made[i].path);
	free(L.made);
	pthread_mutex_destroy(&L.lock);
}
END_TEST

/* The consumer of a pipe: the pieces as they arrive, end to end, with their bounds; it
 * fails at piece fail_at (counting from 1), 0: never. */
struct pcons {
	char got[4096];
	size_t len, pieces, fail_at;
	size_t bounds[64];
};

static int
pipe_consume(void *ud, mc_ctx *wctx, const void *buf, size_t n)
{
	struct pcons *c = ud;

	c->pieces++;
	if (c->fail_at != 0 && c->pieces == c->fail_at)
		return mc__err(wctx, MC_ERR_IO, "piece %zu: cannot write", c->pieces);
	ck_assert_uint_le(c->len + n, sizeof c->got);
	memcpy(c->got + c->len, buf, n);
	c->len += n;
	if (c->pieces <= 64)
		c->bounds[c->pieces - 1] = n;
	return MC_OK;
}

START_TEST(pipe_pieces_in_order)
{
	struct pcons c;
	struct mc_pipe *p;
	char want[4096];
	size_t i, n, len = 0;
	int rc;

	/* 40 pieces of 1 to 40 bytes, one empty among them: all arrive, in order, whole. */
	memset(&c, 0, sizeof c);
	ck_assert_int_eq(mc__pipe_start(ctx, pipe_consume, &c, &p), MC_OK);
	for (i = 0; i < 40; i++) {
		char piece[64];
		n = i == 7 ? 0 : i + 1;
		memset(piece, 'a' + (int)(i % 26), n);
		memcpy(want + len, piece, n);
		len += n;
		ck_assert_int_eq(mc__pipe_put(p, piece, n), MC_OK);
	}
	ck_assert_int_eq(mc__pipe_end(p), MC_OK);
	ck_assert_uint_eq(c.pieces, 40);
	ck_assert_uint_eq(c.len, len);
	ck_assert_int_eq(memcmp(c.got, want, len), 0);
	for (i = 0; i < 40; i++)
		ck_assert_uint_eq(c.bounds[i], i == 7 ? 0 : i + 1);

	/* The consumer fails at the 5th: what follows is dropped, the end tells, with the
	 * consumer's message on the caller's context. */
	memset(&c, 0, sizeof c);
	c.fail_at = 5;
	ck_assert_int_eq(mc__pipe_start(ctx, pipe_consume, &c, &p), MC_OK);
	for (i = 0; i < 20; i++)
		ck_assert_int_eq(mc__pipe_put(p, "xyz", 3), MC_OK);
	rc = mc__pipe_end(p);
	ck_assert_int_eq(rc, MC_ERR_IO);
	ck_assert_str_eq(mc_ctx_error(ctx), "piece 5: cannot write");
	ck_assert_uint_eq(c.len, 12);
	ck_assert_uint_eq(c.pieces, 5); /* none handed to it after its failure */
}
END_TEST

/* label key of w as it stands, or NULL */
static const char *
wlabel(const mc_writer *w, const char *key)
{
	size_t i;

	for (i = 0; i < w->nlabels; i++)
		if (strcmp(w->labels[i].key, key) == 0)
			return w->labels[i].value;
	return NULL;
}

/* Labels a scan notes: the distinct values sorted and joined with ',', as many as fit in
 * 1,024 bytes (those that sort first); one the caller set, before or after, is kept. */
START_TEST(noted_labels)
{
	mc_writer *w;
	char v[65], want[1100];
	size_t i, at = 0;

	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc__writer_note_label(w, "vllm.k", "b2"), MC_OK);
	ck_assert_int_eq(mc__writer_note_label(w, "vllm.k", "a1"), MC_OK);
	ck_assert_int_eq(mc__writer_note_label(w, "vllm.k", "b2"), MC_OK);
	ck_assert_int_eq(mc__writer_note_label(w, "vllm.k", "c3"), MC_OK);
	ck_assert_str_eq(wlabel(w, "vllm.k"), "a1,b2,c3");
	ck_assert_int_eq(mc__writer_note_label(w, "vllm.k", "x,y"), MC_ERR_INVALID);
	ck_assert_int_eq(mc__writer_note_label(w, "vllm.k", ""), MC_ERR_INVALID);
	ck_assert_str_eq(wlabel(w, "vllm.k"), "a1,b2,c3");
	/* the caller's, set after: kept from then on */
	ck_assert_int_eq(mc_writer_set_label(w, "vllm.k", "mine"), MC_OK);
	ck_assert_int_eq(mc__writer_note_label(w, "vllm.k", "d4"), MC_OK);
	ck_assert_str_eq(wlabel(w, "vllm.k"), "mine");
	/* ... and set before */
	ck_assert_int_eq(mc_writer_set_label(w, "vllm.j", "given"), MC_OK);
	ck_assert_int_eq(mc__writer_note_label(w, "vllm.j", "found"), MC_OK);
	ck_assert_str_eq(wlabel(w, "vllm.j"), "given");
	/* 20 keys of 64 hex, given last first: the 15 that sort first fit (15 * 65 - 1) */
	for (i = 20; i-- > 0;) {
		snprintf(v, sizeof v, "%064zx", i);
		ck_assert_int_eq(mc__writer_note_label(w, "vllm.torch_key", v), MC_OK);
	}
	for (i = 0; i < 15; i++)
		at += (size_t)snprintf(want + at, sizeof want - at, "%s%064zx", i ? "," : "", i);
	ck_assert_str_eq(wlabel(w, "vllm.torch_key"), want);
	mc_writer_free(w);
}
END_TEST

/* An item of the ordered run: fails where told, counts the runs. */
struct porder {
	_Atomic int runs[64];
	int fails[64];
};

static int
order_item(void *ud, unsigned worker, mc_ctx *wctx, size_t i)
{
	struct porder *o = ud;

	(void)worker;
	atomic_fetch_add(&o->runs[i], 1);
	if (o->fails[i])
		return mc__err(wctx, MC_ERR_INTEGRITY, "item %zu failed", i);
	return MC_OK;
}

START_TEST(parallel_in_order_given)
{
	size_t order[64];
	unsigned threads;
	size_t i;

	for (i = 0; i < 64; i++) /* the last first */
		order[i] = 63 - i;
	for (threads = 1; threads <= 8; threads *= 2) {
		struct porder o;
		int rc;

		memset(&o, 0, sizeof o);
		ck_assert_int_eq(mc__parallel_in(ctx, 64, threads, order_item, &o, order), MC_OK);
		for (i = 0; i < 64; i++)
			ck_assert_int_eq(atomic_load(&o.runs[i]), 1);
		/* Items 10 and 50 fail: 50 is met first, but every item below 10 still runs,
		 * once, and the failure told is 10's, as in order. */
		memset(&o, 0, sizeof o);
		o.fails[10] = o.fails[50] = 1;
		rc = mc__parallel_in(ctx, 64, threads, order_item, &o, order);
		ck_assert_int_eq(rc, MC_ERR_INTEGRITY);
		ck_assert_str_eq(mc_ctx_error(ctx), "item 10 failed");
		for (i = 0; i <= 10; i++)
			ck_assert_int_eq(atomic_load(&o.runs[i]), 1);
		for (i = 11; i < 64; i++)
			ck_assert_int_le(atomic_load(&o.runs[i]), 1);
	}
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("bundle");
	TCase *tc = tcase_create("api");

	tcase_set_timeout(tc, 300);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, save_open_load);
	tcase_add_test(tc, cancelled);
	tcase_add_test(tc, graph_entry_from_file);
	tcase_add_test(tc, deterministic);
	tcase_add_test(tc, spooled_objects);
	tcase_add_test(tc, save_needs_writer_and_path);
	tcase_add_test(tc, flip_every_byte_zstd);
	tcase_add_test(tc, flip_every_byte_plain);
	tcase_add_test(tc, truncate_everywhere);
	tcase_add_test(tc, all_or_nothing);
	tcase_add_test(tc, symlinks_in_destination);
	tcase_add_test(tc, dry_run_and_types);
	tcase_add_test(tc, policy);
	tcase_add_test(tc, application_type_round_trip);
	tcase_add_test(tc, destination_conflicts);
	tcase_add_test(tc, read_only_destination);
	tcase_add_test(tc, owner);
	tcase_add_test(tc, many_artifacts_sorted);
	tcase_add_test(tc, pipe_index_fails_head_stays);
	tcase_add_test(tc, misnamed_graph_file);
	tcase_add_test(tc, misnamed_files_of_one_key);
	tcase_add_test(tc, folder_cursor_deep);
	tcase_add_test(tc, pipe_pieces_in_order);
	tcase_add_test(tc, parallel_in_order_given);
	tcase_add_test(tc, noted_labels);
	suite_add_tcase(s, tc);
	return s;
}

RUN_SUITE(suite())
