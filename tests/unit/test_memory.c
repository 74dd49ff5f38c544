/* test_memory.c - the entry points that take and give bytes instead of files: the
 * library's version, torch blobs recorded from memory and exported into memory, and
 * keys from text; each against what its file twin does. */
#include "util.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

static mc_ctx *ctx;
static char *dir;

static void
setup(void)
{
	ck_assert_int_eq(mc_ctx_new(&ctx), MC_OK);
	dir = scratch("memory");
	/* The memory export parks contents in $TMPDIR: here, to see them gone. */
	ck_assert_int_eq(setenv("TMPDIR", dir, 1), 0);
}

static void
teardown(void)
{
	mc_ctx_free(ctx);
	free(dir);
}

static void
put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static char *
in_dir(const char *name)
{
	char *p = malloc(4096);

	snprintf(p, 4096, "%s/%s", dir, name);
	return p;
}

static unsigned char *
fixture(const char *name, size_t *len, char **path)
{
	char rel[256];
	unsigned char *buf;

	snprintf(rel, sizeof rel, "tests/data/torch-2.11/%s", name);
	*path = src_path(rel);
	buf = slurp(*path, len);
	return buf;
}

/* Saves what w recorded to dir/name (reproducibly), frees w, and opens it insecure. */
static mc_bundle *
save_open(mc_writer *w, const char *name)
{
	char *p = in_dir(name);
	mc_bundle *b;

	ck_assert_int_eq(mc_writer_set_created(w, 1700000000), MC_OK);
	ck_assert_int_eq(mc_writer_save(w, p), MC_OK);
	mc_writer_free(w);
	ck_assert_int_eq(mc_bundle_open(ctx, p, &b), MC_OK);
	ck_assert_int_eq(mc_bundle_set_insecure(b, 1), MC_OK);
	free(p);
	return b;
}

/* Every artifact as "type key size hash" lines. */
static char *
artifact_list(const mc_bundle *b)
{
	size_t i, n = mc_bundle_artifact_count(b), cap = 4096 + n * 1200, len = 0;
	char *out = malloc(cap);

	out[0] = '\0';
	for (i = 0; i < n; i++) {
		const char *type, *key, *hash;
		uint64_t size;
		ck_assert_int_eq(mc_bundle_artifact(b, i, &type, &key, &size, &hash), MC_OK);
		len += (size_t)snprintf(out + len, cap - len, "%s %s %llu %s\n", type, key,
					(unsigned long long)size, hash);
	}
	return out;
}

START_TEST(version)
{
	ck_assert_str_eq(mc_version(), MC_VERSION_STRING);
	ck_assert_str_eq(mc_version(), PACKAGE_VERSION);
	ck_assert_ptr_eq(mc_version(), mc_version());
}
END_TEST

/* A blob given in memory (and freed at once) makes the bundle its file makes, and the
 * memory export gives it back byte for byte, as the file export does. */
START_TEST(blob_memory_as_file)
{
	static const char *const names[] = {"mlp-cuda.megacache", "mlp-cpu-pgo.megacache"};
	size_t k;

	for (k = 0; k < 2; k++) {
		char *path, *la, *lb, *fa = in_dir("a.mc"), *fb = in_dir("b.mc");
		char *out = in_dir("out.bin");
		unsigned char *blob, *copy, *ba, *bb, *fo;
		size_t len, na, nb, no, got_len;
		const void *got;
		mc_writer *w;
		mc_bundle *a, *b;

		blob = fixture(names[k], &len, &path);
		ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
		ck_assert_int_eq(mc_writer_add_torch_blob(w, path), MC_OK);
		a = save_open(w, "a.mc");
		copy = malloc(len);
		memcpy(copy, blob, len);
		ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
		ck_assert_int_eq(mc_writer_add_torch_blob_memory(w, copy, len), MC_OK);
		memset(copy, 0xa5, len); /* the writer holds its own copy */
		free(copy);
		b = save_open(w, "b.mc");

		la = artifact_list(a);
		lb = artifact_list(b);
		ck_assert_uint_gt(mc_bundle_artifact_count(a), 5);
		ck_assert_str_eq(la, lb);
		ba = slurp(fa, &na);
		bb = slurp(fb, &nb);
		ck_assert_uint_eq(na, nb);
		ck_assert_int_eq(memcmp(ba, bb, na), 0);

		ck_assert_int_eq(mc_bundle_export_torch_memory(b, MC_TORCH_FORMAT_CURRENT, &got,
							       &got_len, NULL, NULL), MC_OK);
		ck_assert_uint_eq(got_len, len);
		ck_assert_int_eq(memcmp(got, blob, len), 0);
		ck_assert_int_eq(mc_bundle_export_torch_as(a, out, MC_TORCH_FORMAT_CURRENT, NULL,
							   NULL), MC_OK);
		fo = slurp(out, &no);
		ck_assert_uint_eq(no, len);
		ck_assert_int_eq(memcmp(fo, blob, len), 0);
		ck_assert_int_eq(count_tree(dir), 3); /* a.mc, b.mc, out.bin: nothing parked */
		mc_bundle_free(a);
		mc_bundle_free(b);
		free(la);
		free(lb);
		free(ba);
		free(bb);
		free(fo);
		free(blob);
		free(path);
		free(fa);
		free(fb);
		free(out);
	}
}
END_TEST

static void
note_left_out(void *ud, int what, const char *type, const char *key, const char *dest,
	      uint64_t size)
{
	(void)what;
	(void)key;
	(void)dest;
	(void)size;
	strcat(ud, type);
	strcat(ud, " ");
}

/* Each export into memory equals the file export of that format, and replaces the
 * buffer of the one before. */
START_TEST(export_memory_as_file)
{
	static const int formats[] = {MC_TORCH_FORMAT_2_7, MC_TORCH_FORMAT_CURRENT,
				      MC_TORCH_FORMAT_2_7};
	char *path, *out = in_dir("out.bin"), left_mem[4096], left_file[4096];
	unsigned char *blob, *fo;
	size_t len, no, i, got_len;
	const void *got;
	mc_writer *w;
	mc_bundle *b;

	blob = fixture("mlp-cuda.megacache", &len, &path);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_torch_blob(w, path), MC_OK);
	/* A second source: no recorded layout, the groups are made by type. */
	ck_assert_int_eq(mc_writer_add_memory(w, "pgo", "job:0:", "state", 5), MC_OK);
	b = save_open(w, "a.mc");
	for (i = 0; i < 3; i++) {
		left_mem[0] = left_file[0] = '\0';
		ck_assert_int_eq(mc_bundle_export_torch_memory(b, formats[i], &got, &got_len,
							       note_left_out, left_mem), MC_OK);
		ck_assert_int_eq(mc_bundle_export_torch_as(b, out, formats[i], note_left_out,
							   left_file), MC_OK);
		fo = slurp(out, &no);
		ck_assert_uint_eq(got_len, no);
		ck_assert_int_eq(memcmp(got, fo, no), 0);
		ck_assert_str_eq(left_mem, left_file);
		ck_assert_uint_eq(got_len == len, 0); /* not the blob: a pgo entry more */
		free(fo);
	}
	ck_assert_str_eq(left_mem, "");
	ck_assert_int_eq(count_tree(dir), 2);
	mc_bundle_free(b);
	free(blob);
	free(path);
	free(out);
}
END_TEST

static mc_writer *
blob_writer(void)
{
	char *path;
	size_t len;
	unsigned char *blob = fixture("mlp-cuda.megacache", &len, &path);
	mc_writer *w;

	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_torch_blob(w, path), MC_OK);
	ck_assert_int_eq(mc_writer_set_created(w, 1700000000), MC_OK);
	free(blob);
	free(path);
	return w;
}

/* A bundle written to a descriptor is the bundle written to a file; one written into
 * a pipe is read from it, once, and the caller's descriptor stays open. */
START_TEST(bundle_through_pipe)
{
	char *file = in_dir("a.mc"), *viafd = in_dir("fd.mc"), *list, *again;
	unsigned char *a, *f;
	size_t na, nf;
	mc_writer *w = blob_writer();
	mc_bundle *b;
	int p[2], fd, status;
	pid_t pid;

	ck_assert_int_eq(mc_writer_save(w, file), MC_OK);
	mc_writer_free(w);
	w = blob_writer();
	ck_assert_int_ge(fd = open(viafd, O_WRONLY | O_CREAT | O_EXCL, 0644), 0);
	ck_assert_int_eq(mc_writer_save_fd(w, fd, "descriptor"), MC_OK);
	ck_assert_int_eq(close(fd), 0);
	a = slurp(file, &na);
	f = slurp(viafd, &nf);
	ck_assert_uint_eq(na, nf);
	ck_assert_int_eq(memcmp(a, f, na), 0);
	ck_assert_int_eq(pipe(p), 0);
	if ((pid = fork()) == 0) {
		close(p[0]);
		_exit(mc_writer_save_fd(w, p[1], "pipe") == MC_OK ? 0 : 1);
	}
	mc_writer_free(w);
	close(p[1]);
	ck_assert_int_eq(mc_bundle_open_fd(ctx, p[0], "the pipe", &b), MC_OK);
	ck_assert_int_eq(mc_bundle_set_insecure(b, 1), MC_OK);
	list = artifact_list(b);
	ck_assert_int_eq(mc_bundle_verify(b), MC_OK);
	ck_assert_int_eq(mc_bundle_verify(b), MC_ERR_INVALID);
	ck_assert_str_eq(mc_ctx_error(ctx), "the pipe: read from a pipe, which can be read only "
			 "once; this needs a file");
	mc_bundle_free(b);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_ne(fcntl(p[0], F_GETFD), -1);
	close(p[0]);
	ck_assert_int_eq(mc_bundle_open(ctx, file, &b), MC_OK);
	again = artifact_list(b);
	ck_assert_str_eq(again, list);
	mc_bundle_free(b);
	free(again);
	free(list);
	free(a);
	free(f);
	free(file);
	free(viafd);
}
END_TEST

/* The file export's checks, with nothing given and nothing left behind. */
START_TEST(export_memory_refused)
{
	char *key = src_path("format/vectors/keys/test.key"), *msg, *out = in_dir("out.bin");
	char *other = src_path("format/vectors/keys/other.pub");
	const void *got = "x";
	size_t got_len = 1;
	mc_seckey *sk;
	mc_pubkey *pk;
	mc_writer *w;
	mc_bundle *b;

	ck_assert_int_eq(mc_seckey_load(ctx, key, NULL, NULL, &sk), MC_OK);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "extra", "notes.txt", "hi", 2), MC_OK);
	ck_assert_int_eq(mc_writer_add_signer(w, sk), MC_OK);
	b = save_open(w, "a.mc");
	ck_assert_int_eq(mc_bundle_set_insecure(b, 0), MC_OK);
	ck_assert_int_eq(mc_pubkey_load(ctx, other, &pk), MC_OK);
	ck_assert_int_eq(mc_bundle_trust(b, pk), MC_OK);
	ck_assert_int_eq(mc_bundle_export_torch_memory(b, MC_TORCH_FORMAT_CURRENT, &got, &got_len,
						       NULL, NULL), MC_ERR_NO_SIGNATURE);
	ck_assert_int_eq(mc_bundle_export_torch_as(b, out, MC_TORCH_FORMAT_CURRENT, NULL, NULL),
			 MC_ERR_NO_SIGNATURE);
	ck_assert_ptr_null(got);
	ck_assert_uint_eq(got_len, 0);
	ck_assert_int_eq(mc_bundle_set_insecure(b, 1), MC_OK);
	ck_assert_int_eq(mc_bundle_export_torch_memory(b, MC_TORCH_FORMAT_CURRENT, &got, &got_len,
						       NULL, NULL), MC_ERR_INVALID);
	msg = in_dir("a.mc: no torch artifacts to export");
	ck_assert_str_eq(mc_ctx_error(ctx), msg);
	ck_assert_int_eq(mc_bundle_export_torch_memory(b, MC_TORCH_FORMAT_VLLM, &got, &got_len,
						       NULL, NULL), MC_ERR_INVALID);
	ck_assert_int_eq(mc_bundle_export_torch_memory(b, MC_TORCH_FORMAT_CURRENT, NULL, &got_len,
						       NULL, NULL), MC_ERR_INVALID);
	ck_assert_int_eq(count_tree(dir), 1);
	mc_bundle_free(b);
	mc_seckey_free(sk);
	mc_pubkey_free(pk);
	free(key);
	free(other);
	free(out);
	free(msg);
}
END_TEST

/* The error of the blob in memory is the file's, naming it "torch blob in memory". */
static void
same_error(const unsigned char *bytes, size_t n, int want)
{
	char *p = in_dir("blob"), file_err[1024], want_err[1024];
	mc_writer *w;

	spit(p, bytes, n);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_torch_blob(w, p), want);
	ck_assert_int_eq(strncmp(mc_ctx_error(ctx), p, strlen(p)), 0);
	snprintf(file_err, sizeof file_err, "%s", mc_ctx_error(ctx) + strlen(p));
	ck_assert_int_eq(mc_writer_add_torch_blob_memory(w, bytes, n), want);
	snprintf(want_err, sizeof want_err, "torch blob in memory%s", file_err);
	ck_assert_str_eq(mc_ctx_error(ctx), want_err);
	ck_assert_uint_eq(mc_writer_artifact_count(w), 0);
	mc_writer_free(w);
	free(p);
}

START_TEST(blob_memory_refused)
{
	static const char garbage[] = "this is not a torch cache blob at all";
	unsigned char empty[12], *blob;
	uint64_t off;
	size_t len;
	char *path;
	mc_writer *w;

	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_torch_blob_memory(w, garbage, sizeof garbage - 1),
			 MC_ERR_TORCH_FORMAT);
	ck_assert_str_eq(mc_ctx_error(ctx), "torch blob in memory: not a valid torch cache blob: "
			 "not a torch cache blob of any known format at byte 0");
	ck_assert_int_eq(mc_writer_add_torch_blob_memory(w, NULL, 0), MC_ERR_TORCH_FORMAT);
	ck_assert_str_eq(mc_ctx_error(ctx), "torch blob in memory: not a valid torch cache blob: "
			 "crc32 header at byte 0");
	ck_assert_int_eq(mc_writer_add_torch_blob_memory(w, NULL, 5), MC_ERR_INVALID);
	ck_assert_int_eq(mc_writer_add_torch_blob_memory(NULL, garbage, 5), MC_ERR_INVALID);
	mc__put_be64(empty + 4, 1);
	put_be32(empty, mc__crc32(0, empty + 4, 8));
	ck_assert_int_eq(mc_writer_add_torch_blob_memory(w, empty, 12), MC_ERR_TORCH_FORMAT);
	ck_assert_str_eq(mc_ctx_error(ctx), "torch blob in memory: the torch cache blob holds no "
			 "artifacts");
	ck_assert_uint_eq(mc_writer_artifact_count(w), 0);
	mc_writer_free(w);

	blob = fixture("mlp-cpu-pgo.megacache", &len, &path);
	same_error(blob, 3, MC_ERR_TORCH_FORMAT);
	same_error(blob, 5000, MC_ERR_TORCH_FORMAT);       /* cut: crc32 mismatch */
	blob[len - 1] ^= 1;
	same_error(blob, len, MC_ERR_TORCH_FORMAT);
	blob[len - 1] ^= 1;
	/* The first entry's content length past the end, with a CRC-32 that matches:
	 * after the group's type (str) and count, the entry's key (str). */
	off = 12;
	off += 8 + mc__be64(blob + off) + 8;
	off += 8 + mc__be64(blob + off);
	mc__put_be64(blob + off, UINT64_C(1) << 40);
	put_be32(blob, mc__crc32(0, blob + 4, len - 4));
	same_error(blob, len, MC_ERR_TORCH_FORMAT);
	free(blob);
	free(path);
}
END_TEST

static int
pw_give(void *ud, const char *prompt, char *buf, size_t len)
{
	(void)prompt;
	snprintf(buf, len, "%s", (const char *)ud);
	return MC_OK;
}

/* plain (an unencrypted secret key file's text) encrypted with password, with scrypt
 * parameters small enough for a test under valgrind. */
static char *
encrypt_key_text(const char *plain, const char *password)
{
	const char *line = strchr(plain, '\n') + 1;
	unsigned char bin[166], stream[104];
	uint64_t ops = 32768, mem = 16u << 20;
	size_t n, i;
	char *b64, *out = malloc(4096);

	ck_assert_int_eq(mc__b64_decode(line, strcspn(line, "\r\n"), bin, sizeof bin, &n), 0);
	ck_assert_uint_eq(n, 158);
	memcpy(bin + 2, "Sc", 2);
	randombytes_buf(bin + 6, 32);
	mc__put_le64(bin + 38, ops);
	mc__put_le64(bin + 46, mem);
	ck_assert_int_eq(crypto_pwhash_scryptsalsa208sha256(stream, sizeof stream, password,
							     strlen(password), bin + 6, ops,
							     (size_t)mem), 0);
	for (i = 0; i < sizeof stream; i++)
		bin[54 + i] ^= stream[i];
	b64 = mc__b64_encode(bin, 158);
	snprintf(out, 4096, "untrusted comment: minisign encrypted secret key\n%s\n", b64);
	free(b64);
	return out;
}

/* Keys from text sign and verify as the same keys from files. */
START_TEST(keys_from_text)
{
	char *pub = in_dir("k.pub"), *sec = in_dir("k.key"), *pt, *st, bare[64];
	unsigned char msg[] = "manifest";
	mc_seckey *sk, *skf, *skt;
	mc_pubkey *pk, *pkf, *pkt, *pkb;
	struct mc_sig sig;
	size_t n;

	ck_assert_int_eq(mc_keygen(ctx, &sk, &pk), MC_OK);
	ck_assert_int_eq(mc_keypair_save(ctx, sk, pk, pub, sec, NULL, 0), MC_OK);
	pt = (char *)slurp(pub, &n);
	pt[n] = '\0';
	st = (char *)slurp(sec, &n);
	st[n] = '\0';
	ck_assert_int_eq(mc_pubkey_load(ctx, pub, &pkf), MC_OK);
	ck_assert_int_eq(mc_seckey_load(ctx, sec, NULL, NULL, &skf), MC_OK);
	ck_assert_int_eq(mc_pubkey_from_text(ctx, pt, &pkt), MC_OK);
	ck_assert_int_eq(mc_seckey_from_text(ctx, st, NULL, NULL, &skt), MC_OK);
	ck_assert_str_eq(mc_pubkey_id(pkt), mc_pubkey_id(pk));
	ck_assert_str_eq(mc_seckey_id(skt), mc_pubkey_id(pk));
	ck_assert_int_eq(memcmp(skt->sk, skf->sk, 64), 0);
	ck_assert_int_eq(memcmp(pkt->pk, pkf->pk, 32), 0);
	ck_assert_int_eq(mc__sig_make(ctx, skt, msg, sizeof msg, "c", &sig), MC_OK);
	ck_assert_int_eq(mc__sig_verify(&sig, pkf, msg, sizeof msg), 0);
	ck_assert_int_eq(mc__sig_verify(&sig, pkt, msg, sizeof msg), 0);
	mc__sig_clear(&sig);
	ck_assert_int_eq(mc__sig_make(ctx, skf, msg, sizeof msg, "c", &sig), MC_OK);
	ck_assert_int_eq(mc__sig_verify(&sig, pkt, msg, sizeof msg), 0);
	ck_assert_int_ne(mc__sig_verify(&sig, pkt, msg, sizeof msg - 1), 0);
	mc__sig_clear(&sig);

	/* The bare base64 key, alone or with its line end. */
	snprintf(bare, sizeof bare, "%.56s", strchr(pt, '\n') + 1);
	ck_assert_int_eq(mc_pubkey_from_text(ctx, bare, &pkb), MC_OK);
	ck_assert_int_eq(memcmp(pkb->pk, pkf->pk, 32), 0);
	mc_pubkey_free(pkb);
	strcat(bare, "\r\n");
	ck_assert_int_eq(mc_pubkey_from_text(ctx, bare, &pkb), MC_OK);
	ck_assert_str_eq(mc_pubkey_id(pkb), mc_pubkey_id(pk));
	mc_pubkey_free(pkb);

	mc_seckey_free(sk);
	mc_seckey_free(skf);
	mc_seckey_free(skt);
	mc_pubkey_free(pk);
	mc_pubkey_free(pkf);
	mc_pubkey_free(pkt);
	free(pt);
	free(st);
	free(pub);
	free(sec);
}
END_TEST

/* Saves a bundle signed by sk at path; what its verify with pk trusted says. */
static int
signed_bundle_verifies(const mc_seckey *sk, const mc_pubkey *pk, const char *path)
{
	mc_writer *w;
	mc_bundle *b;
	int rc;

	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "pgo", "job:0:", "state", 5), MC_OK);
	ck_assert_int_eq(mc_writer_add_signer(w, sk), MC_OK);
	ck_assert_int_eq(mc_writer_save(w, path), MC_OK);
	mc_writer_free(w);
	ck_assert_int_eq(mc_bundle_open(ctx, path, &b), MC_OK);
	ck_assert_int_eq(mc_bundle_trust(b, pk), MC_OK);
	rc = mc_bundle_verify(b);
	mc_bundle_free(b);
	return rc;
}

/* A bundle signed with a key from text verifies with the public key file, and the
 * reverse. */
START_TEST(keys_from_text_sign_bundles)
{
	char *skp = src_path("format/vectors/keys/test.key"), *pkp = src_path("format/vectors/keys/test.pub");
	char *st, *pt, *path = in_dir("s.mc");
	char *opk = src_path("format/vectors/keys/other.pub");
	mc_seckey *skt, *skf;
	mc_pubkey *pkt, *pkf, *pko;
	size_t n;

	st = (char *)slurp(skp, &n);
	st[n] = '\0';
	pt = (char *)slurp(pkp, &n);
	pt[n] = '\0';
	ck_assert_int_eq(mc_seckey_from_text(ctx, st, NULL, NULL, &skt), MC_OK);
	ck_assert_int_eq(mc_pubkey_from_text(ctx, pt, &pkt), MC_OK);
	ck_assert_int_eq(mc_seckey_load(ctx, skp, NULL, NULL, &skf), MC_OK);
	ck_assert_int_eq(mc_pubkey_load(ctx, pkp, &pkf), MC_OK);
	ck_assert_str_eq(mc_pubkey_id(pkt), "FA362A8E2758DAEC");

	ck_assert_int_eq(signed_bundle_verifies(skt, pkf, path), MC_OK);
	ck_assert_int_eq(signed_bundle_verifies(skf, pkt, path), MC_OK);
	ck_assert_int_eq(mc_pubkey_load(ctx, opk, &pko), MC_OK);
	ck_assert_int_eq(signed_bundle_verifies(skt, pko, path), MC_ERR_NO_SIGNATURE);

	mc_seckey_free(skt);
	mc_seckey_free(skf);
	mc_pubkey_free(pkt);
	mc_pubkey_free(pkf);
	mc_pubkey_free(pko);
	free(st);
	free(pt);
	free(skp);
	free(pkp);
	free(opk);
	free(path);
}
END_TEST

START_TEST(encrypted_key_text)
{
	char *pub = in_dir("e.pub"), *sec = in_dir("e.key"), *plain, *enc;
	mc_seckey *sk, *sk2;
	mc_pubkey *pk;
	size_t n;

	ck_assert_int_eq(mc_keygen(ctx, &sk, &pk), MC_OK);
	ck_assert_int_eq(mc_keypair_save(ctx, sk, pk, pub, sec, NULL, 0), MC_OK);
	plain = (char *)slurp(sec, &n);
	plain[n] = '\0';
	enc = encrypt_key_text(plain, "s3cret");
	ck_assert_int_eq(mc_seckey_from_text(ctx, enc, pw_give, "wrong", &sk2), MC_ERR_PASSWORD);
	ck_assert_str_eq(mc_ctx_error(ctx), "secret key text: wrong password");
	ck_assert_ptr_null(sk2);
	ck_assert_int_eq(mc_seckey_from_text(ctx, enc, NULL, NULL, &sk2), MC_ERR_PASSWORD);
	ck_assert_str_eq(mc_ctx_error(ctx), "secret key text: the key is encrypted and no "
			 "password was given");
	ck_assert_int_eq(mc_seckey_from_text(ctx, enc, pw_give, "s3cret", &sk2), MC_OK);
	ck_assert_int_eq(memcmp(sk2->sk, sk->sk, 64), 0);
	ck_assert_str_eq(mc_seckey_id(sk2), mc_pubkey_id(pk));
	mc_seckey_free(sk);
	mc_seckey_free(sk2);
	mc_pubkey_free(pk);
	free(plain);
	free(enc);
	free(pub);
	free(sec);
}
END_TEST

START_TEST(key_text_refused)
{
	char bare[64], *p = in_dir("bad.pub"), want[4200];
	mc_pubkey *pk;
	mc_seckey *sk;

	ck_assert_int_eq(mc_pubkey_from_text(ctx, "garbage", &pk), MC_ERR_KEYFILE);
	ck_assert_str_eq(mc_ctx_error(ctx), "public key text: first line is not an untrusted "
			 "comment");
	ck_assert_ptr_null(pk);
	ck_assert_int_eq(mc_pubkey_from_text(ctx, "untrusted comment: x\nRWQAAAAA\n", &pk),
			 MC_ERR_KEYFILE);
	ck_assert_str_eq(mc_ctx_error(ctx), "public key text: not a minisign Ed25519 public key");
	memset(bare, 'A', 56);
	memcpy(bare, "RW", 2);
	bare[56] = '\0';
	ck_assert_int_eq(mc_pubkey_from_text(ctx, bare, &pk), MC_ERR_KEYFILE);
	ck_assert_str_eq(mc_ctx_error(ctx), "public key text: not a minisign Ed25519 public key");
	ck_assert_int_eq(mc_pubkey_from_text(ctx, "", &pk), MC_ERR_KEYFILE);
	ck_assert_int_eq(mc_pubkey_from_text(ctx, NULL, &pk), MC_ERR_INVALID);
	ck_assert_int_eq(mc_seckey_from_text(ctx, "garbage", NULL, NULL, &sk), MC_ERR_KEYFILE);
	ck_assert_str_eq(mc_ctx_error(ctx), "secret key text: first line is not an untrusted "
			 "comment");
	ck_assert_ptr_null(sk);
	ck_assert_int_eq(mc_seckey_from_text(ctx, "untrusted comment: x\nRWQAAAAA\n", NULL, NULL,
					     &sk), MC_ERR_KEYFILE);
	ck_assert_str_eq(mc_ctx_error(ctx), "secret key text: not a minisign Ed25519 secret key");
	ck_assert_int_eq(mc_seckey_from_text(ctx, NULL, NULL, NULL, &sk), MC_ERR_INVALID);
	/* The file versions still name the file. */
	spit(p, "garbage", 7);
	ck_assert_int_eq(mc_pubkey_load(ctx, p, &pk), MC_ERR_KEYFILE);
	snprintf(want, sizeof want, "%s: first line is not an untrusted comment", p);
	ck_assert_str_eq(mc_ctx_error(ctx), want);
	ck_assert_int_eq(mc_seckey_load(ctx, p, NULL, NULL, &sk), MC_ERR_KEYFILE);
	ck_assert_str_eq(mc_ctx_error(ctx), want);
	free(p);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("memory");
	TCase *tc = tcase_create("memory");

	tcase_set_timeout(tc, 300);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, version);
	tcase_add_test(tc, blob_memory_as_file);
	tcase_add_test(tc, export_memory_as_file);
	tcase_add_test(tc, export_memory_refused);
	tcase_add_test(tc, bundle_through_pipe);
	tcase_add_test(tc, blob_memory_refused);
	tcase_add_test(tc, keys_from_text);
	tcase_add_test(tc, keys_from_text_sign_bundles);
	tcase_add_test(tc, encrypted_key_text);
	tcase_add_test(tc, key_text_refused);
	suite_add_tcase(s, tc);
	return s;
}

RUN_SUITE(suite())
