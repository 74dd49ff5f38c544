/* interrupt.c - SIGHUP, SIGINT and SIGTERM: the work in hand cancelled (mc_ctx_cancel()),
 * so that it undoes what it began as after any failure, and the process then ends by the
 * same signal, as a shell expects of a program stopped (128 + its number). A signal that
 * comes too late to stop the work leaves it done, and the command's status stands. */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "tool.h"

/* A handler sees only what is set aside for it here: the signal caught first, and the
 * context of the command under way (interrupt_watch()). */
static volatile sig_atomic_t caught;
static mc_ctx *volatile cancel_ctx;

static const int stopping[] = {SIGHUP, SIGINT, SIGTERM};

/* Only async-signal-safe work: a flag set, mc_ctx_cancel() being one atomic store. */
static void
on_signal(int sig)
{
	mc_ctx *ctx = cancel_ctx;

	if (caught == 0)
		caught = sig;
	if (ctx != NULL)
		mc_ctx_cancel(ctx);
}

void
interrupt_catch(void)
{
	struct sigaction sa;
	size_t i;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: a read waiting on a pipe or a terminal returns EINTR. */
	sa.sa_flags = 0;
	for (i = 0; i < sizeof stopping / sizeof stopping[0]; i++) {
		struct sigaction old;
		/* A signal ignored by whoever started us (nohup) stays ignored. */
		if (sigaction(stopping[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		sigaction(stopping[i], &sa, NULL);
	}
}

void
interrupt_watch(mc_ctx *ctx)
{
	cancel_ctx = ctx;
	if (ctx != NULL && caught != 0)
		mc_ctx_cancel(ctx);
}

int
interrupted(void)
{
	return caught;
}

const char *
interrupt_name(void)
{
	return caught == SIGHUP ? "SIGHUP" : caught == SIGINT ? "SIGINT" : "SIGTERM";
}

int
start_thread(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	sigset_t set, old;
	size_t i;
	int rc;

	sigemptyset(&set);
	for (i = 0; i < sizeof stopping / sizeof stopping[0]; i++)
		sigaddset(&set, stopping[i]);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	rc = pthread_create(thread, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

void
end_by_signal(int sig)
{
	sigset_t set;

	fflush(NULL);
	signal(sig, SIG_DFL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
}
