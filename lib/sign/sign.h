/*
 * sign.h - minisign keys and signatures; not installed.
 */
#ifndef MC_SIGN_H
#define MC_SIGN_H

#include "core/core.h"
#include "io/io.h"

/* ---- minisign formats (minisign.c) ---- */

struct mc_pubkey {
	unsigned char keynum[MC_KEYID_BYTES];
	unsigned char pk[32];
	char id[17];
};

struct mc_seckey {
	unsigned char keynum[MC_KEYID_BYTES];
	unsigned char *sk; /* 64 bytes, sodium_malloc'd */
	char id[17];
};

/* A parsed minisign signature. */
struct mc_sig {
	unsigned char keynum[MC_KEYID_BYTES];
	unsigned char sig[64];
	char *trusted_comment; /* without prefix and newline */
	unsigned char global_sig[64];
	char id[17];
};

MC_HIDDEN void mc__keyid_str(const unsigned char keynum[8], char out[17]);
/* What an "ED" signature signs: the BLAKE2b-512 of the message. */
#define MC_SIG_PREHASH 64
/* Signs msg (prehashed, "ED") with a trusted comment; fills sig. */
MC_HIDDEN int mc__sig_make(mc_ctx *ctx, const mc_seckey *sk, const unsigned char *msg, size_t n,
			   const char *trusted_comment, struct mc_sig *sig);
/* The same, given the message's prehash (MC_SIG_PREHASH bytes, mc__sig_prehash). */
MC_HIDDEN int mc__sig_make_prehashed(mc_ctx *ctx, const mc_seckey *sk,
				     const unsigned char prehash[MC_SIG_PREHASH],
				     const char *trusted_comment,
				     struct mc_sig *sig);
/* Renders the canonical signature file text (malloc'd). */
MC_HIDDEN char *mc__sig_render(const struct mc_sig *sig, size_t *len);
/* Parses signature file text. strict: the bytes must be the canonical rendering. */
MC_HIDDEN int mc__sig_parse(mc_ctx *ctx, const char *text, size_t len, int strict,
			    struct mc_sig *sig);
MC_HIDDEN void mc__sig_clear(struct mc_sig *sig);
/* 0 if sig verifies msg under pk (both signature and trusted-comment signature). */
MC_HIDDEN int mc__sig_verify(const struct mc_sig *sig, const mc_pubkey *pk,
			     const unsigned char *msg, size_t n);
MC_HIDDEN void mc__sig_prehash(const unsigned char *msg, size_t n,
			       unsigned char out[MC_SIG_PREHASH]);
/* The same as mc__sig_verify, given the message's prehash. */
MC_HIDDEN int mc__sig_verify_prehashed(const struct mc_sig *sig, const mc_pubkey *pk,
				       const unsigned char prehash[MC_SIG_PREHASH]);

/* ---- a bundle's signature members (sigmember.c) ---- */

/* Trusted comment of a megacache manifest signature, minisign style. */
#define MC_SIG_TRUSTED_FMT "timestamp:%lld\tfile:manifest.json\thashed"
/* The signature member by sk of the manifest with this prehash, made at created (the
 * bundle's time, in MC_SIG_TRUSTED_FMT): its text (malloc'd), length and key id. */
MC_HIDDEN int mc__sig_member(mc_ctx *ctx, const mc_seckey *sk,
			     const unsigned char prehash[MC_SIG_PREHASH], int64_t created,
			     char **text, size_t *len, char id[17]);

#endif /* MC_SIGN_H */
