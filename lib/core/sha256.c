/*
 * sha256.c - SHA-256 of contents (torch names some cache files after it): through
 * OpenSSL's libcrypto when the library is built with it, which uses the CPU's SHA
 * extensions where there are some; else libsodium's portable code. Same digests.
 * And the content hash of a format version, one or the other of BLAKE2b-256 and SHA-256.
 */
#include "config.h"

#include <pthread.h>
#include <string.h>

#include "core/core.h"

#ifdef MC_WITH_OPENSSL

#include <openssl/evp.h>

/* The digest, fetched once: an EVP_sha256() handle would be fetched again at every
 * init. */
static EVP_MD *sha_md;
static pthread_once_t sha_once = PTHREAD_ONCE_INIT;

static void
fetch_md(void)
{
	sha_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *
md(void)
{
	pthread_once(&sha_once, fetch_md);
	return sha_md;
}

int
mc__sha256_init(struct mc_sha256 *s)
{
	const EVP_MD *m = md();

	if (s->md == NULL && (s->md = EVP_MD_CTX_new()) == NULL)
		return MC_ERR_NOMEM;
	if (m == NULL || EVP_DigestInit_ex(s->md, m, NULL) != 1) {
		mc__sha256_drop(s);
		return MC_ERR_NOMEM;
	}
	return MC_OK;
}

void
mc__sha256_update(struct mc_sha256 *s, const void *p, size_t n)
{
	if (n > 0)
		(void)EVP_DigestUpdate(s->md, p, n);
}

void
mc__sha256_final(struct mc_sha256 *s, unsigned char out[MC_SHA256_BYTES])
{
	(void)EVP_DigestFinal_ex(s->md, out, NULL);
}

void
mc__sha256_drop(struct mc_sha256 *s)
{
	EVP_MD_CTX_free(s->md);
	s->md = NULL;
}

int
mc__sha256(unsigned char out[MC_SHA256_BYTES], const void *p, size_t n)
{
	const EVP_MD *m = md();

	return m != NULL && EVP_Digest(p, n, out, NULL, m, NULL) == 1 ? MC_OK : MC_ERR_NOMEM;
}

const char *
mc__sha256_impl(void)
{
	return "libcrypto";
}

#else /* !MC_WITH_OPENSSL */

int
mc__sha256_init(struct mc_sha256 *s)
{
	crypto_hash_sha256_init(&s->st);
	return MC_OK;
}

void
mc__sha256_update(struct mc_sha256 *s, const void *p, size_t n)
{
	crypto_hash_sha256_update(&s->st, p, n);
}

void
mc__sha256_final(struct mc_sha256 *s, unsigned char out[MC_SHA256_BYTES])
{
	crypto_hash_sha256_final(&s->st, out);
}

void
mc__sha256_drop(struct mc_sha256 *s)
{
	sodium_memzero(&s->st, sizeof s->st);
}

int
mc__sha256(unsigned char out[MC_SHA256_BYTES], const void *p, size_t n)
{
	crypto_hash_sha256(out, p, n);
	return MC_OK;
}

const char *
mc__sha256_impl(void)
{
	return "libsodium";
}

#endif /* MC_WITH_OPENSSL */

int
mc__chash_init(struct mc_chash *h, int alg)
{
	h->alg = alg;
	if (alg == MC_HALG_SHA256)
		return mc__sha256_init(&h->sha);
	crypto_generichash_init(&h->b2, NULL, 0, MC_HASH_BYTES);
	return MC_OK;
}

void
mc__chash_update(struct mc_chash *h, const void *p, size_t n)
{
	if (h->alg == MC_HALG_SHA256)
		mc__sha256_update(&h->sha, p, n);
	else
		crypto_generichash_update(&h->b2, p, n);
}

void
mc__chash_final(struct mc_chash *h, unsigned char out[MC_HASH_BYTES])
{
	if (h->alg == MC_HALG_SHA256)
		mc__sha256_final(&h->sha, out);
	else
		crypto_generichash_final(&h->b2, out, MC_HASH_BYTES);
}

void
mc__chash_drop(struct mc_chash *h)
{
	mc__sha256_drop(&h->sha);
}

int
mc__chash(int alg, unsigned char out[MC_HASH_BYTES], const void *p, size_t n)
{
	if (alg == MC_HALG_SHA256)
		return mc__sha256(out, p, n);
	crypto_generichash(out, MC_HASH_BYTES, p, n, NULL, 0);
	return MC_OK;
}
