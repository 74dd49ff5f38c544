/* tool.h - what the files of the command-line tool share: the helpers for output. */
#ifndef MC_TOOL_H
#define MC_TOOL_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "megacache.h"

/* The name every message starts with. */
#define PROG "megacache"

#define EXIT_VERIFY 1
#define EXIT_USAGE 2

/* output.c */
void say(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void try_help(void) __attribute__((noreturn));
int exit_code(int rc);
int fail(mc_ctx *ctx, int rc);
void human_bytes(uint64_t n, char *buf, size_t len);
void print_json(cJSON *j);

#endif
