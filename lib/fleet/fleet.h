/*
 * fleet.h - the fleet tier: a Redis client (hiredis, behind this header) and push, pull
 * and audit between bundles and torch's and Triton's Redis caches; not installed.
 */
#ifndef MC_FLEET_H
#define MC_FLEET_H

#include "write/write.h"

/* ---- the connection, its pipeline and replies (redis.c) ---- */

/* A reply read: a bulk string (str, len), or nil; for an error reply (MC_ERR_REMOTE)
 * its text in error, until mc__redis_reply_free(). */
struct mc_rreply {
	int nil;
	const char *error;
	const unsigned char *str;
	size_t len;
	void *raw; /* freed by mc__redis_reply_free() */
};

/* The pipeline: commands are queued until this many bytes or commands are waiting for
 * replies, then the caller reads them all (mc__redis_full()). */
#define MC_PIPE_BYTES (8u << 20)
#define MC_PIPE_COMMANDS 512u

/* Another connection to r's server (at the address r is connected to), as r was made
 * (credentials, database, Triton's key format), telling ctx; errors name the server. */
MC_HIDDEN int mc__redis_again(const mc_redis *r, mc_ctx *ctx, mc_redis **out);
/* Queues a command (argc arguments of lens bytes); errors name the server. */
MC_HIDDEN int mc__redis_append(mc_redis *r, int argc, const char **argv, const size_t *lens);
/* A command in Redis's protocol, in a new buffer (*len bytes; NULL when out of memory),
 * as a transaction, so that no other client's command comes between: MULTI, TTL argv[1],
 * the command, EXEC; its 4 replies are read by mc__redis_reply_ttl(). An argument whose
 * argv is NULL is left for the caller to write; *at: where argument mark's bytes are
 * (mark -1: none). */
MC_HIDDEN unsigned char *mc__redis_format_ttl(int argc, const char **argv, const size_t *lens,
					      int mark, unsigned char **at, size_t *len);
/* Sends a command made by mc__redis_format_ttl() (replies: 4) at once, from its buffer
 * (not copied into a queue); its replies are read as a queued command's. */
MC_HIDDEN int mc__redis_send_cmd(mc_redis *r, const unsigned char *cmd, size_t len,
				 size_t replies);
/* The number of commands queued whose replies are not read, and whether to read them. */
MC_HIDDEN size_t mc__redis_pending(const mc_redis *r);
MC_HIDDEN int mc__redis_full(const mc_redis *r);
/* Reads the next reply (sending what is queued first): a bulk string or nil, else an
 * error naming the server and what (the command) it refused; the reply is to be freed
 * then too (rep->error set when the server answered with an error). */
MC_HIDDEN int mc__redis_reply(mc_redis *r, const char *what, struct mc_rreply *rep);
/* Reads the replies of a command made by mc__redis_format_ttl(): the command's in rep as
 * mc__redis_reply() gives it (an error: the first refusal, of the transaction or of the
 * command), the TTL the key had just before it in *ttl (seconds; -1: none, -2: no key). */
MC_HIDDEN int mc__redis_reply_ttl(mc_redis *r, const char *what, struct mc_rreply *rep,
				  long long *ttl);
MC_HIDDEN void mc__redis_reply_free(struct mc_rreply *rep);
/* Reads and drops the replies still awaited (after a failure), leaving the context's
 * message the failure's. */
MC_HIDDEN void mc__redis_discard(mc_redis *r);
/* One SCAN step from *cursor (0 to start; 0 again at the end) over keys matching
 * pattern: the keys in *keys (*n of them, each and the array malloc'd; mc__strv_free()
 * frees them). */
MC_HIDDEN int mc__redis_scan(mc_redis *r, unsigned long long *cursor, const char *pattern,
			     char ***keys, size_t *n);
MC_HIDDEN mc_ctx *mc__redis_ctx(const mc_redis *r);
/* Makes ctx take the connection's messages (a worker's, while it has the connection);
 * gives back the context it had. */
MC_HIDDEN mc_ctx *mc__redis_use_ctx(mc_redis *r, mc_ctx *ctx);
MC_HIDDEN const char *mc__redis_triton_format(const mc_redis *r);

/* ---- entries read back (pull.c) ---- */

/* The artifact an entry of a key space asked for holds: as mc__remote_parse()
 * reads the key and value v (NULL: the key holds no string), and the key as its type's
 * handler checks it, the check pull and audit share: MC_OK; 1, why said, when torch or
 * Triton cannot read it (a value not in its key's form, a key they never make); 2 when
 * rkey is in none of the key spaces; MC_ERR_NOMEM. ctx: the types' (not written). */
MC_HIDDEN int mc__entry_read(const mc_ctx *ctx, const char *rkey, const unsigned char *v,
			     size_t vn, const char *triton_fmt, unsigned spaces, const char **type,
			     char *kbuf, size_t klen, unsigned char **content, size_t *cn,
			     char *why, size_t whylen);

/* Calls fn with each entry of r whose key matches match (v NULL: the key holds no
 * string, a list or a hash, that GET refuses) (a Redis glob; NULL: the key
 * spaces asked for, MC_SPACE_*), once each, in key order, its value read in pipelined
 * batches (pull.c). Progress phase: done and total entries. */
typedef int (*mc_entry_fn)(void *ud, const char *rkey, const unsigned char *v, size_t n);
MC_HIDDEN int mc__store_each(mc_redis *r, const char *match, unsigned spaces, const char *phase,
			     mc_entry_fn fn, void *ud);

#endif /* MC_FLEET_H */
