/*
 * minisign.c - Ed25519 keys and signatures in minisign's file formats, so stock
 * minisign verifies what megacache signs and minisign keys work with megacache.
 * Fields are read and written through explicit little-endian helpers.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "sign/sign.h"

#define UNTRUSTED_PREFIX "untrusted comment: "
#define TRUSTED_PREFIX "trusted comment: "
#define SIG_COMMENT "signature from megacache secret key"
/* Stock minisign reads the trusted comment line with fgets() into an 8,192-byte buffer and
 * refuses a line that does not fit whole: the prefix, the comment, the line end and the NUL
 * must fit, which leaves 8,173 bytes for the comment. Its signer refuses longer ones too. */
#define MINISIGN_LINE_BUF 8192
#define TRUSTED_MAX (MINISIGN_LINE_BUF - (sizeof TRUSTED_PREFIX - 1) - 2)
_Static_assert(TRUSTED_MAX == 8173, "the comment limit named in messages and SPEC.md");
#define PK_BYTES 42        /* "Ed" keynum pk */
#define SK_BYTES 158       /* "Ed" kdf chk salt ops mem keynum sk chk */
#define SIG_BYTES 74       /* "ED" keynum sig */
#define KEYNUM_SK_BYTES 104
#define KEYFILE_MAX 4096

void
mc__keyid_str(const unsigned char keynum[8], char out[17])
{
	snprintf(out, 17, "%016llX", (unsigned long long)mc__le64(keynum));
}

const char *
mc_pubkey_id(const mc_pubkey *pk)
{
	return pk == NULL ? "" : pk->id;
}

int
mc_pubkey_equal(const mc_pubkey *a, const mc_pubkey *b)
{
	return a != NULL && b != NULL && sodium_memcmp(a->pk, b->pk, sizeof a->pk) == 0;
}

const char *
mc_seckey_id(const mc_seckey *sk)
{
	return sk == NULL ? "" : sk->id;
}

void
mc_pubkey_free(mc_pubkey *pk)
{
	free(pk);
}

void
mc_seckey_free(mc_seckey *sk)
{
	if (sk == NULL)
		return;
	sodium_free(sk->sk);
	sodium_memzero(sk, sizeof *sk);
	free(sk);
}

static mc_seckey *
seckey_alloc(void)
{
	mc_seckey *sk = calloc(1, sizeof *sk);

	if (sk == NULL)
		return NULL;
	if ((sk->sk = sodium_malloc(64)) == NULL) {
		free(sk);
		return NULL;
	}
	return sk;
}

int
mc_keygen(mc_ctx *ctx, mc_seckey **skp, mc_pubkey **pkp)
{
	mc_seckey *sk;
	mc_pubkey *pk;

	if (ctx == NULL || skp == NULL || pkp == NULL)
		return MC_ERR_INVALID;
	*skp = NULL;
	*pkp = NULL;
	sk = seckey_alloc();
	pk = calloc(1, sizeof *pk);
	if (sk == NULL || pk == NULL) {
		mc_seckey_free(sk);
		free(pk);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	crypto_sign_keypair(pk->pk, sk->sk);
	randombytes_buf(sk->keynum, sizeof sk->keynum);
	memcpy(pk->keynum, sk->keynum, sizeof pk->keynum);
	mc__keyid_str(pk->keynum, pk->id);
	memcpy(sk->id, pk->id, sizeof sk->id);
	*skp = sk;
	*pkp = pk;
	return MC_OK;
}

/* BLAKE2b-256 over sig_alg || keynum || sk: minisign's secret key checksum. */
static void
sk_checksum(const unsigned char keynum[8], const unsigned char *sk, unsigned char out[32])
{
	crypto_generichash_state st;

	crypto_generichash_init(&st, NULL, 0, 32);
	crypto_generichash_update(&st, (const unsigned char *)"Ed", 2);
	crypto_generichash_update(&st, keynum, 8);
	crypto_generichash_update(&st, sk, 64);
	crypto_generichash_final(&st, out, 32);
}

/* Encrypts or decrypts (the same XOR) the keynum and secret key of a secret key file's
 * bytes skbin with the scrypt stream of password, salted with skbin's salt; stream is
 * KEYNUM_SK_BYTES of scratch. -1 when scrypt fails (out of memory). */
static int
scrypt_xor(unsigned char *skbin, unsigned char *stream, const char *password, uint64_t ops,
	   uint64_t mem)
{
	size_t i;

	if (crypto_pwhash_scryptsalsa208sha256(stream, KEYNUM_SK_BYTES, password, strlen(password),
					       skbin + 6, ops, (size_t)mem) != 0)
		return -1;
	for (i = 0; i < KEYNUM_SK_BYTES; i++)
		skbin[54 + i] ^= stream[i];
	return 0;
}

/* Writes a key file's text into a temp file beside path, on disk (fsync), named in *tmp
 * (the caller removes it). */
static int
stage_key_file(mc_ctx *ctx, const char *path, const char *comment, const unsigned char *bin,
	       size_t n, int mode, int overwrite, char **tmp)
{
	char *b64 = mc__b64_encode(bin, n);
	int fd, rc = MC_OK;

	*tmp = NULL;
	if (b64 == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	if (!overwrite && access(path, F_OK) == 0) {
		free(b64);
		return mc__err(ctx, MC_ERR_EXISTS, "%s: file exists (not replaced)", path);
	}
	if ((fd = mc__open_temp_here(ctx, path, tmp, mode)) < 0) {
		free(b64);
		return MC_ERR_IO;
	}
	if (mc__write_all(fd, UNTRUSTED_PREFIX, strlen(UNTRUSTED_PREFIX)) != 0 ||
	    mc__write_all(fd, comment, strlen(comment)) != 0 || mc__write_all(fd, "\n", 1) != 0 ||
	    mc__write_all(fd, b64, strlen(b64)) != 0 || mc__write_all(fd, "\n", 1) != 0 ||
	    fsync(fd) != 0)
		rc = mc__errno(ctx, MC_ERR_IO, "cannot write", path);
	if (close(fd) != 0 && rc == MC_OK)
		rc = mc__errno(ctx, MC_ERR_IO, "cannot write", path);
	sodium_memzero(b64, strlen(b64));
	free(b64);
	return rc;
}

/* Puts the staged key file tmp at path: renamed over what is there (overwrite), else
 * linked, which refuses to replace, so a racing writer cannot be overwritten. */
static int
place_key_file(mc_ctx *ctx, const char *tmp, const char *path, int overwrite)
{
	if (overwrite ? rename(tmp, path) == 0 : link(tmp, path) == 0)
		return MC_OK;
	return errno == EEXIST ? mc__err(ctx, MC_ERR_EXISTS, "%s: file exists (not replaced)", path)
			       : mc__errno(ctx, MC_ERR_IO, "cannot create", path);
}

/* The secret key put in place, then the public key. A new secret key whose public key
 * could not be put in place is removed, unless it replaced one (-f), which would then
 * be lost too: it is kept, and said. */
static int
place_key_files(mc_ctx *ctx, const char *stmp, const char *sec_path, const char *ptmp,
		const char *pub_path, int overwrite)
{
	char msg[MC_ERRBUF];
	int rc;

	if ((rc = place_key_file(ctx, stmp, sec_path, overwrite)) != MC_OK)
		return rc;
	if ((rc = place_key_file(ctx, ptmp, pub_path, overwrite)) == MC_OK)
		return MC_OK;
	if (!overwrite) {
		unlink(sec_path);
		return rc;
	}
	snprintf(msg, sizeof msg, "%s", mc_ctx_error(ctx));
	return mc__err(ctx, rc, "%s (the new secret key is in %s)", msg, sec_path);
}

/* Both key files staged and on disk before either is put in place, a cancel heeded only
 * then: once the secret key is in place the public key follows (place_key_files()). */
static int
save_key_files(mc_ctx *ctx, const char *sec_path, const unsigned char *skbin,
	       const char *pub_path, const char *comment, const unsigned char *pkbin, int overwrite)
{
	char *stmp = NULL, *ptmp = NULL;
	int rc;

	rc = stage_key_file(ctx, sec_path, "minisign encrypted secret key", skbin, SK_BYTES, 0600,
			    overwrite, &stmp);
	if (rc == MC_OK)
		rc = stage_key_file(ctx, pub_path, comment, pkbin, PK_BYTES, 0644, overwrite, &ptmp);
	if (rc == MC_OK && mc__cancelled(ctx))
		rc = mc__cancel_err(ctx);
	if (rc == MC_OK)
		rc = place_key_files(ctx, stmp, sec_path, ptmp, pub_path, overwrite);
	if (stmp != NULL && (rc != MC_OK || !overwrite))
		unlink(stmp);
	if (ptmp != NULL && (rc != MC_OK || !overwrite))
		unlink(ptmp);
	free(stmp);
	free(ptmp);
	return rc;
}

int
mc_keypair_save(mc_ctx *ctx, const mc_seckey *sk, const mc_pubkey *pk, const char *pub_path,
		const char *sec_path, const char *password, int overwrite)
{
	unsigned char pkbin[PK_BYTES];
	unsigned char *skbin;
	char comment[64];
	int rc;

	if (ctx == NULL || sk == NULL || pk == NULL || pub_path == NULL || sec_path == NULL)
		return MC_ERR_INVALID;
	if ((skbin = sodium_malloc(SK_BYTES)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	memset(skbin, 0, SK_BYTES);
	memcpy(skbin, "Ed", 2);
	memcpy(skbin + 4, "B2", 2);
	memcpy(skbin + 54, sk->keynum, 8);
	memcpy(skbin + 62, sk->sk, 64);
	sk_checksum(sk->keynum, sk->sk, skbin + 126);
	if (password != NULL) {
		unsigned char *stream = sodium_malloc(KEYNUM_SK_BYTES);
		uint64_t ops = crypto_pwhash_scryptsalsa208sha256_OPSLIMIT_SENSITIVE;
		uint64_t mem = crypto_pwhash_scryptsalsa208sha256_MEMLIMIT_SENSITIVE;

		memcpy(skbin + 2, "Sc", 2);
		randombytes_buf(skbin + 6, 32);
		mc__put_le64(skbin + 38, ops);
		mc__put_le64(skbin + 46, mem);
		if (stream == NULL || scrypt_xor(skbin, stream, password, ops, mem) != 0) {
			sodium_free(stream);
			sodium_free(skbin);
			return mc__err(ctx, MC_ERR_NOMEM, "cannot derive a key from the password "
				       "(not enough memory for scrypt)");
		}
		sodium_free(stream);
	}
	memcpy(pkbin, "Ed", 2);
	memcpy(pkbin + 2, pk->keynum, 8);
	memcpy(pkbin + 10, pk->pk, 32);
	snprintf(comment, sizeof comment, "minisign public key %s", pk->id);
	rc = save_key_files(ctx, sec_path, skbin, pub_path, comment, pkbin, overwrite);
	sodium_free(skbin);
	return rc;
}

/* Finds the base64 line of a key file: the line after the untrusted comment. */
static int
key_payload(mc_ctx *ctx, const char *what, const char *text, const char **b64, size_t *b64len)
{
	const char *p = text, *nl, *end;

	if (strncmp(p, UNTRUSTED_PREFIX, strlen(UNTRUSTED_PREFIX)) != 0)
		return mc__err(ctx, MC_ERR_KEYFILE, "%s: first line is not an untrusted comment", what);
	if ((nl = strchr(p, '\n')) == NULL)
		return mc__err(ctx, MC_ERR_KEYFILE, "%s: no key line", what);
	p = nl + 1;
	end = strchr(p, '\n');
	if (end == NULL)
		end = p + strlen(p);
	if (end > p && end[-1] == '\r')
		end--;
	*b64 = p;
	*b64len = (size_t)(end - p);
	return MC_OK;
}

/* A bare base64 key (minisign's -P form): 56 characters starting "RW", and in a text
 * perhaps a line end. */
static int
bare_pubkey(const char *s, int line_end)
{
	size_t n = strlen(s);

	if (line_end && n > 0 && s[n - 1] == '\n')
		n -= n > 1 && s[n - 2] == '\r' ? 2 : 1;
	return n == 56 && strncmp(s, "RW", 2) == 0;
}

/* A public key from text: a key file's contents, or a bare base64 key (bare set); name
 * names it in messages. */
static int
pubkey_text(mc_ctx *ctx, const char *name, const char *text, int bare, mc_pubkey **out)
{
	unsigned char bin[PK_BYTES + 8];
	const char *b64 = text;
	size_t b64len = 56, n;
	mc_pubkey *pk;
	int rc;

	if (!bare && (rc = key_payload(ctx, name, text, &b64, &b64len)) != MC_OK)
		return rc;
	if (mc__b64_decode(b64, b64len, bin, sizeof bin, &n) != 0 || n != PK_BYTES ||
	    memcmp(bin, "Ed", 2) != 0)
		return mc__err(ctx, MC_ERR_KEYFILE, "%s: not a minisign Ed25519 public key", name);
	if ((pk = calloc(1, sizeof *pk)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	memcpy(pk->keynum, bin + 2, 8);
	memcpy(pk->pk, bin + 10, 32);
	mc__keyid_str(pk->keynum, pk->id);
	*out = pk;
	return MC_OK;
}

int
mc_pubkey_load(mc_ctx *ctx, const char *arg, mc_pubkey **out)
{
	char *text = NULL;
	size_t n;
	int rc;

	if (ctx == NULL || arg == NULL || out == NULL)
		return MC_ERR_INVALID;
	*out = NULL;
	if ((rc = mc__crypto_init(ctx)) != MC_OK)
		return rc;
	if (bare_pubkey(arg, 0) && access(arg, F_OK) != 0)
		return pubkey_text(ctx, arg, arg, 1, out);
	/* A key file's whole text, as a CI variable holds it (-p "$(cat ci.pub)"): no path
	 * has a line end after its first word. */
	if (strncmp(arg, "untrusted comment:", 18) == 0 && strchr(arg, '\n') != NULL &&
	    access(arg, F_OK) != 0)
		return pubkey_text(ctx, "public key text", arg, 0, out);
	/* Neither a key nor a file: both said, as the argument may have meant either. */
	if (access(arg, F_OK) != 0 && (errno == ENOENT || errno == ENOTDIR))
		return mc__err(ctx, MC_ERR_IO, "%s: neither a readable file (%s) nor a public key "
			       "(its base64 line: 56 characters, RW...; or a key file's text)", arg,
			       strerror(errno));
	if ((rc = mc__read_small_file(ctx, arg, KEYFILE_MAX, &text, &n)) != MC_OK)
		return rc;
	rc = pubkey_text(ctx, arg, text, 0, out);
	free(text);
	return rc;
}

int
mc_pubkey_from_text(mc_ctx *ctx, const char *text, mc_pubkey **out)
{
	int rc;

	if (ctx == NULL || text == NULL || out == NULL)
		return MC_ERR_INVALID;
	*out = NULL;
	if ((rc = mc__crypto_init(ctx)) != MC_OK)
		return rc;
	return pubkey_text(ctx, "public key text", text, bare_pubkey(text, 1), out);
}

/* Decrypts the scrypt-encrypted secret key file bytes bin in place, with the password
 * pw gives, and checks it by its checksum. */
static int
decrypt_seckey(mc_ctx *ctx, const char *path, unsigned char *bin, mc_password_fn pw, void *pw_ud)
{
	unsigned char *stream = NULL, chk[32];
	uint64_t ops = mc__le64(bin + 38), mem = mc__le64(bin + 46);
	char prompt[256], *pass = NULL;
	int rc = MC_OK;

	if (pw == NULL)
		return mc__err(ctx, MC_ERR_PASSWORD, "%s: the key is encrypted and no password "
			       "was given", path);
	if (ops > (1ull << 40) || mem > (8ull << 30))
		return mc__err(ctx, MC_ERR_KEYFILE, "%s: scrypt parameters out of range", path);
	if ((pass = sodium_malloc(1024)) == NULL || (stream = sodium_malloc(KEYNUM_SK_BYTES)) == NULL) {
		sodium_free(pass);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	snprintf(prompt, sizeof prompt, "Password for %s: ", path);
	pass[0] = '\0';
	if (pw(pw_ud, prompt, pass, 1024) != MC_OK) {
		/* Whatever the callback left in pass may be a password: never shown. */
		rc = mc__err(ctx, MC_ERR_PASSWORD, "%s: no password given", path);
	} else {
		pass[1023] = '\0';
		if (scrypt_xor(bin, stream, pass, ops, mem) != 0)
			rc = mc__err(ctx, MC_ERR_NOMEM, "%s: not enough memory for scrypt", path);
	}
	sodium_free(stream);
	sodium_free(pass);
	if (rc != MC_OK)
		return rc;
	sk_checksum(bin + 54, bin + 62, chk);
	if (sodium_memcmp(chk, bin + 126, 32) != 0)
		return mc__err(ctx, MC_ERR_PASSWORD, "%s: wrong password", path);
	return MC_OK;
}

/* The secret key file bytes bin, decrypted when encrypted, checked by their checksum. */
static int
unlock_seckey(mc_ctx *ctx, const char *path, unsigned char *bin, mc_password_fn pw, void *pw_ud)
{
	static const unsigned char zero[32];
	unsigned char chk[32];

	if (memcmp(bin + 2, "Sc", 2) == 0)
		return decrypt_seckey(ctx, path, bin, pw, pw_ud);
	if (bin[2] != 0 || bin[3] != 0)
		return mc__err(ctx, MC_ERR_KEYFILE, "%s: unknown key derivation algorithm", path);
	/* Unencrypted (minisign -W writes a zero checksum). */
	sk_checksum(bin + 54, bin + 62, chk);
	if (sodium_memcmp(chk, bin + 126, 32) != 0 && sodium_memcmp(zero, bin + 126, 32) != 0)
		return mc__err(ctx, MC_ERR_KEYFILE, "%s: secret key checksum mismatch", path);
	return MC_OK;
}

/* A secret key from a key file's contents, text; name names it in messages. The
 * decoded bytes are wiped. */
static int
seckey_text(mc_ctx *ctx, const char *name, const char *text, mc_password_fn pw, void *pw_ud,
	    mc_seckey **out)
{
	unsigned char *bin;
	const char *b64;
	size_t b64len, n;
	mc_seckey *sk;
	int rc;

	if ((rc = key_payload(ctx, name, text, &b64, &b64len)) != MC_OK)
		return rc;
	if ((bin = sodium_malloc(SK_BYTES + 8)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	if (mc__b64_decode(b64, b64len, bin, SK_BYTES + 8, &n) != 0 || n != SK_BYTES ||
	    memcmp(bin, "Ed", 2) != 0 || memcmp(bin + 4, "B2", 2) != 0)
		rc = mc__err(ctx, MC_ERR_KEYFILE, "%s: not a minisign Ed25519 secret key", name);
	else
		rc = unlock_seckey(ctx, name, bin, pw, pw_ud);
	if (rc == MC_OK && (sk = seckey_alloc()) == NULL)
		rc = mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	if (rc == MC_OK) {
		memcpy(sk->keynum, bin + 54, 8);
		memcpy(sk->sk, bin + 62, 64);
		mc__keyid_str(sk->keynum, sk->id);
		*out = sk;
	}
	sodium_free(bin);
	return rc;
}

int
mc_seckey_load(mc_ctx *ctx, const char *path, mc_password_fn pw, void *pw_ud, mc_seckey **out)
{
	char *text = NULL;
	size_t n;
	int rc;

	if (ctx == NULL || path == NULL || out == NULL)
		return MC_ERR_INVALID;
	*out = NULL;
	if ((rc = mc__crypto_init(ctx)) != MC_OK)
		return rc;
	if ((rc = mc__read_small_file(ctx, path, KEYFILE_MAX, &text, &n)) != MC_OK)
		return rc;
	rc = seckey_text(ctx, path, text, pw, pw_ud, out);
	sodium_memzero(text, n);
	free(text);
	return rc;
}

int
mc_seckey_from_text(mc_ctx *ctx, const char *text, mc_password_fn pw, void *pw_ud,
		    mc_seckey **out)
{
	int rc;

	if (ctx == NULL || text == NULL || out == NULL)
		return MC_ERR_INVALID;
	*out = NULL;
	if ((rc = mc__crypto_init(ctx)) != MC_OK)
		return rc;
	return seckey_text(ctx, "secret key text", text, pw, pw_ud, out);
}

/* Why the comment c of n bytes cannot be signed or read, or NULL when it can. */
static const char *
comment_fault(const char *c, size_t n)
{
	uint32_t cp;

	if (n > TRUSTED_MAX)
		return "is longer than 8173 bytes, the most stock minisign verifies";
	/* A tool shows the comment as one line of text: no code point that breaks a line
	 * or steers a terminal, but TAB, which the writer's own comment uses. */
	switch (mc__text_check(c, n, 1, &cp)) {
	case -1: return "is not valid UTF-8";
	case 1: return "contains a line break or control character";
	default: return NULL;
	}
}

int
mc__sig_make(mc_ctx *ctx, const mc_seckey *sk, const unsigned char *msg, size_t n,
	     const char *trusted_comment, struct mc_sig *sig)
{
	unsigned char prehash[MC_SIG_PREHASH];

	mc__sig_prehash(msg, n, prehash);
	return mc__sig_make_prehashed(ctx, sk, prehash, trusted_comment, sig);
}

int
mc__sig_make_prehashed(mc_ctx *ctx, const mc_seckey *sk,
		       const unsigned char prehash[MC_SIG_PREHASH], const char *trusted_comment,
		       struct mc_sig *sig)
{
	unsigned char *buf;
	size_t tclen = strlen(trusted_comment);
	const char *fault = comment_fault(trusted_comment, tclen);

	memset(sig, 0, sizeof *sig);
	if (fault != NULL)
		return mc__err(ctx, MC_ERR_INVALID, "trusted comment %s", fault);
	crypto_sign_detached(sig->sig, NULL, prehash, MC_SIG_PREHASH, sk->sk);
	memcpy(sig->keynum, sk->keynum, 8);
	mc__keyid_str(sig->keynum, sig->id);
	if ((sig->trusted_comment = mc__strdup(trusted_comment)) == NULL ||
	    (buf = malloc(64 + tclen)) == NULL) {
		mc__sig_clear(sig);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	memcpy(buf, sig->sig, 64);
	memcpy(buf + 64, trusted_comment, tclen);
	crypto_sign_detached(sig->global_sig, NULL, buf, 64 + tclen, sk->sk);
	free(buf);
	return MC_OK;
}

void
mc__sig_clear(struct mc_sig *sig)
{
	free(sig->trusted_comment);
	memset(sig, 0, sizeof *sig);
}

char *
mc__sig_render(const struct mc_sig *sig, size_t *len)
{
	unsigned char bin[SIG_BYTES];
	char *b1, *b2, *out = NULL;
	size_t n;

	memcpy(bin, "ED", 2);
	memcpy(bin + 2, sig->keynum, 8);
	memcpy(bin + 10, sig->sig, 64);
	b1 = mc__b64_encode(bin, sizeof bin);
	b2 = mc__b64_encode(sig->global_sig, 64);
	if (b1 != NULL && b2 != NULL) {
		n = strlen(UNTRUSTED_PREFIX) + strlen(SIG_COMMENT) + strlen(b1) +
		    strlen(TRUSTED_PREFIX) + strlen(sig->trusted_comment) + strlen(b2) + 5;
		if ((out = malloc(n)) != NULL)
			*len = (size_t)snprintf(out, n, "%s%s\n%s\n%s%s\n%s\n", UNTRUSTED_PREFIX,
						SIG_COMMENT, b1, TRUSTED_PREFIX,
						sig->trusted_comment, b2);
	}
	free(b1);
	free(b2);
	return out;
}

/* Splits the next line off [*p, end); fails on a missing newline. */
static int
next_line(const char **p, const char *end, const char **line, size_t *n)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));

	if (nl == NULL)
		return -1;
	*line = *p;
	*n = (size_t)(nl - *p);
	*p = nl + 1;
	return 0;
}

int
mc__sig_parse(mc_ctx *ctx, const char *text, size_t len, int strict, struct mc_sig *sig)
{
	const char *p = text, *end = text + len, *l;
	unsigned char bin[SIG_BYTES + 8];
	const char *fault;
	size_t n, got;

	memset(sig, 0, sizeof *sig);
	if (memchr(text, '\0', len) != NULL)
		return mc__err(ctx, MC_ERR_KEYFILE, "signature contains a NUL byte");
	if (next_line(&p, end, &l, &n) != 0 || n < strlen(UNTRUSTED_PREFIX) ||
	    memcmp(l, UNTRUSTED_PREFIX, strlen(UNTRUSTED_PREFIX)) != 0)
		return mc__err(ctx, MC_ERR_KEYFILE, "signature: first line is not an untrusted comment");
	if (next_line(&p, end, &l, &n) != 0 || mc__b64_decode(l, n, bin, sizeof bin, &got) != 0 ||
	    got != SIG_BYTES)
		return mc__err(ctx, MC_ERR_KEYFILE, "signature: bad signature line");
	if (memcmp(bin, "ED", 2) != 0)
		return mc__err(ctx, MC_ERR_KEYFILE, "signature: algorithm is not prehashed Ed25519 (ED)");
	memcpy(sig->keynum, bin + 2, 8);
	memcpy(sig->sig, bin + 10, 64);
	mc__keyid_str(sig->keynum, sig->id);
	if (next_line(&p, end, &l, &n) != 0 || n < strlen(TRUSTED_PREFIX) ||
	    memcmp(l, TRUSTED_PREFIX, strlen(TRUSTED_PREFIX)) != 0)
		return mc__err(ctx, MC_ERR_KEYFILE, "signature: bad trusted comment line");
	l += strlen(TRUSTED_PREFIX);
	n -= strlen(TRUSTED_PREFIX);
	if ((fault = comment_fault(l, n)) != NULL)
		return mc__err(ctx, MC_ERR_KEYFILE, "signature: trusted comment %s", fault);
	if ((sig->trusted_comment = malloc(n + 1)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	memcpy(sig->trusted_comment, l, n);
	sig->trusted_comment[n] = '\0';
	if (next_line(&p, end, &l, &n) != 0 || mc__b64_decode(l, n, bin, sizeof bin, &got) != 0 ||
	    got != 64) {
		mc__sig_clear(sig);
		return mc__err(ctx, MC_ERR_KEYFILE, "signature: bad comment signature line");
	}
	memcpy(sig->global_sig, bin, 64);
	if (strict) {
		char *canon = mc__sig_render(sig, &n);
		int same = canon != NULL && n == len && memcmp(canon, text, len) == 0;
		free(canon);
		if (!same) {
			mc__sig_clear(sig);
			return mc__err(ctx, MC_ERR_KEYFILE, "signature member is not in canonical form");
		}
	} else if (p != end) {
		/* Only trailing blank space may follow in a file made by another tool. */
		for (; p < end; p++)
			if (*p != '\n' && *p != '\r' && *p != ' ' && *p != '\t') {
				mc__sig_clear(sig);
				return mc__err(ctx, MC_ERR_KEYFILE, "signature: trailing data");
			}
	}
	return MC_OK;
}

void
mc__sig_prehash(const unsigned char *msg, size_t n, unsigned char out[MC_SIG_PREHASH])
{
	crypto_generichash(out, MC_SIG_PREHASH, msg, n, NULL, 0);
}

void
mc__sig_prehash_init(crypto_generichash_state *st)
{
	crypto_generichash_init(st, NULL, 0, MC_SIG_PREHASH);
}

int
mc__sig_verify(const struct mc_sig *sig, const mc_pubkey *pk, const unsigned char *msg, size_t n)
{
	unsigned char prehash[MC_SIG_PREHASH];

	mc__sig_prehash(msg, n, prehash);
	return mc__sig_verify_prehashed(sig, pk, prehash);
}

int
mc__sig_verify_prehashed(const struct mc_sig *sig, const mc_pubkey *pk,
			 const unsigned char prehash[MC_SIG_PREHASH])
{
	unsigned char *buf;
	size_t tclen = strlen(sig->trusted_comment);
	int ok;

	if (memcmp(sig->keynum, pk->keynum, 8) != 0)
		return -1;
	if (crypto_sign_verify_detached(sig->sig, prehash, MC_SIG_PREHASH, pk->pk) != 0)
		return -1;
	if ((buf = malloc(64 + tclen)) == NULL)
		return -1;
	memcpy(buf, sig->sig, 64);
	memcpy(buf + 64, sig->trusted_comment, tclen);
	ok = crypto_sign_verify_detached(sig->global_sig, buf, 64 + tclen, pk->pk) == 0;
	free(buf);
	return ok ? 0 : -1;
}
