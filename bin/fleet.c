/* fleet.c - what push, pull and audit share: the options that name torch's and Triton's
 * Redis caches, the connection to them, and what is told of their entries. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tool.h"

int
redis_opt(struct redis_opts *o, int c, char *arg)
{
	switch (c) {
	case OPT_REDIS: o->url = arg; return 1;
	case OPT_REDIS_PASSWORD_FILE: o->password_file = arg; return 1;
	case OPT_TRITON: o->triton = 1; return 1;
	case OPT_TRITON_KEY_FORMAT: o->triton_format = arg; return 1;
	default: return 0;
	}
}

/* --redis, else $TORCHINDUCTOR_REDIS_URL, as torch reads it. */
void
redis_check(struct redis_opts *o, const char *cmd)
{
	static char from_env[300];
	const char *h = getenv("TORCHINDUCTOR_REDIS_HOST"), *p = getenv("TORCHINDUCTOR_REDIS_PORT");

	if (!mc_redis_supported()) { /* said before any work */
		say(stderr, "%s: %s: this megacache was built without Redis support (configure "
		    "found no hiredis)", PROG, cmd);
		json_error("unsupported");
		json_exit(EXIT_USAGE);
	}
	if (o->url == NULL)
		o->url = getenv("TORCHINDUCTOR_REDIS_URL");
	/* Each counts when set and not empty, as the man page says. */
	if ((o->url == NULL || o->url[0] == '\0') && ((h != NULL && h[0]) || (p != NULL && p[0]))) {
		snprintf(from_env, sizeof from_env, "redis://%s:%s/0", h != NULL && h[0] ? h : "localhost",
			 p != NULL && p[0] ? p : "6379");
		o->url = from_env;
	}
	if (o->url == NULL || o->url[0] == '\0')
		usage_error("%s needs --redis URL (redis://host:port/db, unix:///path; or "
			    "TORCHINDUCTOR_REDIS_URL, TORCHINDUCTOR_REDIS_HOST and _PORT)", cmd);
	if (o->triton_format == NULL)
		o->triton_format = getenv("TRITON_REDIS_KEY_FORMAT");
}

/* Connects: the password from --redis-password-file (its first line), else
 * $MEGACACHE_REDIS_PASSWORD, else the URL's. */
int
redis_connect(struct tool *t, const struct redis_opts *o, mc_redis **r)
{
	char pw[1024];
	const char *password = getenv("MEGACACHE_REDIS_PASSWORD");
	int rc;

	if (o->password_file != NULL) {
		if (first_line(o->password_file, pw, sizeof pw) != 0) {
			say(stderr, "%s: cannot read the Redis password from %s", PROG,
			    o->password_file);
			json_error("io");
			return EXIT_USAGE;
		}
		password = pw;
	}
	rc = mc_redis_open(t->ctx, o->url, password != NULL && password[0] ? password : NULL, r);
	if (password == pw)
		memset(pw, 0, sizeof pw);
	if (rc == MC_OK && o->triton_format != NULL && o->triton_format[0] != '\0')
		rc = mc_redis_set_triton_format(*r, o->triton_format);
	return rc != MC_OK ? fail(t->ctx, rc) : 0;
}


/* What is told of an entry (MC_REMOTE_*, their values as index): its name in --json, and
 * the mark and words of its line of text (-v; audit's findings without it). */
static const struct {
	const char *name, *words;
	char mark;
} actions[] = {
	[MC_REMOTE_SENT] = {"written", "written", '+'},
	[MC_REMOTE_REPLACED] = {"replaced", "replaced", '~'},
	[MC_REMOTE_UNCHANGED] = {"unchanged", "unchanged", '='},
	[MC_REMOTE_WOULD_SEND] = {"would_write", "would write", '+'},
	[MC_REMOTE_WOULD_REPLACE] = {"would_replace", "would replace", '~'},
	[MC_REMOTE_NO_FORM] = {"no_form", "no remote form", ' '},
	[MC_REMOTE_SHADOWED] = {"shadowed", "shadowed", '-'},
	[MC_REMOTE_PULLED] = {"pulled", "pulled", '+'},
	[MC_REMOTE_ODD] = {"odd", "odd form", '!'},
	[MC_REMOTE_VOUCHED] = {"vouched", "vouched", '='},
	[MC_REMOTE_DIFFERS] = {"differs", "differs", '~'},
	[MC_REMOTE_UNVOUCHED] = {"unvouched", "unvouched", '!'},
	[MC_REMOTE_TTL_CHANGED] = {"ttl_changed", "TTL changed", '~'},
	[MC_REMOTE_WOULD_CHANGE_TTL] = {"would_change_ttl", "would set TTL", '~'},
};

/* An entry's line: its Redis key; an artifact with none (no remote form), or one another
 * of the bundle shadows under the same key, is named by its type and key too. */
static void
say_entry(int what, const char *type, const char *key, const char *rkey)
{
	char mark = actions[what].mark;
	const char *words = actions[what].words;

	if (type == NULL || key == NULL)
		say(stdout, "%c %-14s %s", mark, words, rkey != NULL ? rkey : "");
	else if (rkey == NULL)
		say(stdout, "%c %-14s %s %s", mark, words, type, key);
	else if (what == MC_REMOTE_SHADOWED)
		say(stdout, "%c %-14s %s (%s %s)", mark, words, rkey, type, key);
	else
		say(stdout, "%c %-14s %s", mark, words, rkey);
}

void
on_entry(void *ud, int what, const char *type, const char *key, const char *rkey,
	 uint64_t size)
{
	struct entry_tally *ta = ud;

	ta->n[what]++;
	if (what == MC_REMOTE_SENT || what == MC_REMOTE_REPLACED || what == MC_REMOTE_PULLED)
		ta->bytes += size;
	if ((what <= MC_REMOTE_WOULD_REPLACE || what >= MC_REMOTE_TTL_CHANGED) && type != NULL &&
	    strcmp(type, "aot_autograd") == 0)
		ta->aot++;
	if (ta->entries != NULL && what != MC_REMOTE_VOUCHED) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "action", actions[what].name);
		if (type != NULL)
			cJSON_AddStringToObject(e, "type", type);
		else
			cJSON_AddNullToObject(e, "type");
		if (key != NULL)
			cJSON_AddStringToObject(e, "key", key);
		else
			cJSON_AddNullToObject(e, "key");
		if (rkey != NULL)
			cJSON_AddStringToObject(e, "redis_key", rkey);
		else
			cJSON_AddNullToObject(e, "redis_key");
		cJSON_AddNumberToObject(e, "size", (double)size);
		cJSON_AddItemToArray(ta->entries, e);
	} else if (ta->entries == NULL && !ta->quiet &&
		   (ta->verbose || (ta->findings && what != MC_REMOTE_VOUCHED))) {
		say_entry(what, type, key, rkey);
	}
}

void
add_counts(cJSON *j, const struct entry_tally *ta, const int *which, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		cJSON_AddNumberToObject(j, actions[which[i]].name, (double)ta->n[which[i]]);
}
