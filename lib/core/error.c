/*
 * error.c - the library's version, status codes to text and to stable names, and the
 * error text kept on a context.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"

const char *
mc_version(void)
{
	return MC_VERSION_STRING;
}

const char *
mc_strerror(int status)
{
	switch (status) {
	case MC_OK: return "success";
	case MC_ERR_NOMEM: return "out of memory";
	case MC_ERR_INVALID: return "invalid argument";
	case MC_ERR_IO: return "input/output error";
	case MC_ERR_NOT_BUNDLE: return "not a megacache bundle";
	case MC_ERR_MALFORMED: return "malformed bundle";
	case MC_ERR_MANIFEST: return "invalid manifest";
	case MC_ERR_INTEGRITY: return "content does not match the manifest";
	case MC_ERR_NO_SIGNATURE: return "no signature by a trusted key";
	case MC_ERR_BAD_SIGNATURE: return "invalid signature";
	case MC_ERR_THRESHOLD: return "not enough trusted signatures";
	case MC_ERR_EXPIRED: return "bundle expired";
	case MC_ERR_ROLLBACK: return "bundle version below the minimum";
	case MC_ERR_LIMIT: return "limit exceeded";
	case MC_ERR_UNKNOWN_TYPE: return "unknown artifact type";
	case MC_ERR_BAD_KEY: return "invalid artifact key";
	case MC_ERR_CONFLICT: return "conflicting artifacts";
	case MC_ERR_UNSAFE_DEST: return "unsafe destination";
	case MC_ERR_KEYFILE: return "malformed key or signature file";
	case MC_ERR_PASSWORD: return "wrong password";
	case MC_ERR_TORCH_FORMAT: return "malformed torch cache blob";
	case MC_ERR_CRYPTO: return "crypto library failed to start";
	case MC_ERR_EXISTS: return "file exists";
	case MC_ERR_LABEL: return "required label missing or different";
	case MC_ERR_REMOTE: return "remote store failed";
	case MC_ERR_UNSUPPORTED: return "not supported by this build";
	case MC_ERR_UNSUPPORTED_VERSION: return "bundle format newer than this megacache reads";
	case MC_ERR_GPU_MISMATCH: return "bundle holds kernels for another GPU";
	case MC_ERR_CANCELLED: return "cancelled";
	case MC_ERR_DIGEST_MISMATCH: return "registry digest mismatch";
	case MC_ERR_NOT_SEEN: return "reads not seen";
	default: return "unknown error";
	}
}

const char *
mc_status_code(int status)
{
	switch (status) {
	case MC_OK: return "ok";
	case MC_ERR_NOMEM: return "nomem";
	case MC_ERR_INVALID: return "invalid";
	case MC_ERR_IO: return "io";
	case MC_ERR_NOT_BUNDLE: return "not_bundle";
	case MC_ERR_MALFORMED: return "malformed";
	case MC_ERR_MANIFEST: return "manifest";
	case MC_ERR_INTEGRITY: return "integrity";
	case MC_ERR_NO_SIGNATURE: return "untrusted_signature";
	case MC_ERR_BAD_SIGNATURE: return "bad_signature";
	case MC_ERR_THRESHOLD: return "threshold";
	case MC_ERR_EXPIRED: return "expired";
	case MC_ERR_ROLLBACK: return "rollback";
	case MC_ERR_LIMIT: return "limit";
	case MC_ERR_UNKNOWN_TYPE: return "unknown_type";
	case MC_ERR_BAD_KEY: return "bad_key";
	case MC_ERR_CONFLICT: return "conflict";
	case MC_ERR_UNSAFE_DEST: return "unsafe_destination";
	case MC_ERR_KEYFILE: return "keyfile";
	case MC_ERR_PASSWORD: return "password";
	case MC_ERR_TORCH_FORMAT: return "torch_format";
	case MC_ERR_CRYPTO: return "crypto";
	case MC_ERR_EXISTS: return "exists";
	case MC_ERR_LABEL: return "label";
	case MC_ERR_REMOTE: return "remote";
	case MC_ERR_UNSUPPORTED: return "unsupported";
	case MC_ERR_UNSUPPORTED_VERSION: return "unsupported_version";
	case MC_ERR_GPU_MISMATCH: return "gpu_mismatch";
	case MC_ERR_CANCELLED: return "cancelled";
	case MC_ERR_DIGEST_MISMATCH: return "digest_mismatch";
	case MC_ERR_NOT_SEEN: return "not_seen";
	default: return "unknown";
	}
}

int
mc_status_is_verification_failure(int status)
{
	switch (status) {
	case MC_ERR_MALFORMED:
	case MC_ERR_MANIFEST:
	case MC_ERR_INTEGRITY:
	case MC_ERR_NO_SIGNATURE:
	case MC_ERR_BAD_SIGNATURE:
	case MC_ERR_THRESHOLD:
	case MC_ERR_EXPIRED:
	case MC_ERR_ROLLBACK:
	case MC_ERR_LIMIT:
	case MC_ERR_UNKNOWN_TYPE:
	case MC_ERR_BAD_KEY:
	case MC_ERR_CONFLICT:
	case MC_ERR_LABEL:
	case MC_ERR_UNSUPPORTED_VERSION:
	case MC_ERR_GPU_MISMATCH:
	case MC_ERR_DIGEST_MISMATCH:
		return 1;
	default:
		return 0;
	}
}

int
mc__err(mc_ctx *ctx, int code, const char *fmt, ...)
{
	char raw[MC_ERRBUF];
	va_list ap;

	if (ctx == NULL)
		return code;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof raw, fmt, ap);
	va_end(ap);
	/* Messages name keys, types, labels and paths from bundles: one escape here
	 * makes every error text safe to print, whoever prints it. */
	mc_escape(ctx->err, sizeof ctx->err, raw, 0);
	return code;
}

int
mc__err_prefix(mc_ctx *ctx, int code, const char *fmt, ...)
{
	char prefix[MC_ERRBUF], msg[MC_ERRBUF];
	va_list ap;

	if (ctx == NULL)
		return code;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof prefix, fmt, ap);
	va_end(ap);
	snprintf(msg, sizeof msg, "%s", ctx->err);
	return mc__err(ctx, code, "%s: %s", prefix, msg);
}

int
mc__errno(mc_ctx *ctx, int code, const char *what, const char *path)
{
	int e = errno;

	if (e == 0)
		return mc__err(ctx, code, "%s: %s: unexpected end of file", path, what);
	return mc__err(ctx, code, "%s: %s: %s", path, what, strerror(e));
}

const char *
mc_ctx_error(const mc_ctx *ctx)
{
	return ctx == NULL ? "" : ctx->err;
}
