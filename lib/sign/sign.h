/*
 * sign.h - minisign keys and signatures, the signature member of a manifest, and the
 * trust policy; not installed.
 */
#ifndef MC_SIGN_H
#define MC_SIGN_H

#include <sodium.h>

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
/* The same made in pieces: this, crypto_generichash_update() for each piece, then
 * crypto_generichash_final(st, out, MC_SIG_PREHASH). */
MC_HIDDEN void mc__sig_prehash_init(crypto_generichash_state *st);
/* The same as mc__sig_verify, given the message's prehash. */
MC_HIDDEN int mc__sig_verify_prehashed(const struct mc_sig *sig, const mc_pubkey *pk,
				       const unsigned char prehash[MC_SIG_PREHASH]);

/* ---- the trust policy (policy.c) ---- */

/* What a bundle must show to be accepted: the open bundle's setters fill it. */
struct mc_policy {
	const mc_pubkey **trusted; /* the caller's keys, not owned; no key id twice */
	size_t ntrusted;
	unsigned threshold;        /* distinct trusted keys that must have signed */
	uint64_t min_version;
	int have_now;
	int64_t now;               /* judged instead of the clock when have_now */
	int insecure;              /* signatures go unchecked; the rest of the policy holds */
	char **req_keys;           /* required labels: req_keys[i]=req_values[i] (owned) */
	char **req_values;
	size_t nrequired;
};

/* What the policy judges of a bundle. */
struct mc_policy_facts {
	const char *path;                 /* names the bundle in messages */
	const unsigned char *prehash;     /* MC_SIG_PREHASH bytes: what the signatures sign */
	const struct mc_sig *const *sigs; /* the bundle's signatures, by key id */
	size_t nsigs;
	uint64_t version;
	int64_t expires;                  /* 0: never */
	const char *const *label_keys;    /* the bundle's labels: label_keys[i]=label_values[i] */
	const char *const *label_values;
	size_t nlabels;
};

/* An empty policy: no key, a threshold of 1, no minimum, no label, the clock's time. */
MC_HIDDEN void mc__policy_init(struct mc_policy *p);
MC_HIDDEN void mc__policy_clear(struct mc_policy *p);
/* Adds pk (not copied) to the trusted keys; the same key given twice counts once. */
MC_HIDDEN int mc__policy_trust(mc_ctx *ctx, struct mc_policy *p, const mc_pubkey *pk);
/* Requires label key to have value (both copied). */
MC_HIDDEN int mc__policy_require_label(mc_ctx *ctx, struct mc_policy *p, const char *key,
				       const char *value);
/* The state of sig under p (enum mc_sig_state): broken or verified when its key id is
 * a trusted key's (that key's index into p->trusted in *which, unless NULL), else, or
 * when p is insecure, not checked. */
MC_HIDDEN int mc__policy_sig_state(const struct mc_policy *p, const struct mc_sig *sig,
				   const unsigned char *prehash, size_t *which);
/* MC_OK when the facts meet the policy: enough distinct trusted keys signed (unless
 * insecure), not expired, version not below the minimum, every required label. Else
 * the first that fails, its message naming f->path. */
MC_HIDDEN int mc__policy_check(mc_ctx *ctx, const struct mc_policy *p,
			       const struct mc_policy_facts *f);

/* ---- a bundle's signature members (sigmember.c) ---- */

/* Trusted comment of a megacache manifest signature, minisign style. */
#define MC_SIG_TRUSTED_FMT "timestamp:%lld\tfile:manifest.json\thashed"
/* The signature member by sk of the manifest with this prehash, made at created (the
 * bundle's time, in MC_SIG_TRUSTED_FMT): its text (malloc'd), length and key id. */
MC_HIDDEN int mc__sig_member(mc_ctx *ctx, const mc_seckey *sk,
			     const unsigned char prehash[MC_SIG_PREHASH], int64_t created,
			     char **text, size_t *len, char id[17]);

#endif /* MC_SIGN_H */
