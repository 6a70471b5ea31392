/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma tests: helpers shared by the host and device test programs.
 * Header-only (static inline) so that each test program stays one link.
 */
#ifndef EVRDMA_TESTUTIL_H_INCLUDED_
#define EVRDMA_TESTUTIL_H_INCLUDED_

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

/**
 * fork() a test's helper process, tied to the test: the child dies with
 * it (PR_SET_PDEATHSIG), and exits with @p code at once when it is
 * already gone (@p parent: the test's pid, read before the fork).
 * @return as fork()
 */
static inline pid_t
tu_fork_tied(pid_t parent, int code)
{
	pid_t pid = fork();

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(code);
	}
	return pid;
}

/** The rdma_cm character device: its absence means no RDMA on this host. */
#define TU_RDMA_CM_DEV "/dev/infiniband/rdma_cm"

/** @return nonzero when the kernel offers rdma_cm on this host */
static inline int
tu_have_rdma_cm(void)
{
	return access(TU_RDMA_CM_DEV, F_OK) == 0;
}

/** @return nonzero when the tests run without fork (CK_FORK=no), where
 * per-process state such as the rdma-core load cannot be reset. */
static inline int
tu_nofork(void)
{
	const char *v = getenv("CK_FORK");

	return v != NULL && strcmp(v, "no") == 0;
}

/*
 * The library prints its warnings on standard error unless the program
 * installs a log callback (evrdma/util.h). A test program keeps its output
 * to its checks, as before that default: EVRDMA_LOG=off, unless the
 * environment names a level already (EVRDMA_LOG=warn make check shows
 * them). Call it first in main(): the library reads the variable once.
 */
static inline void
tu_log_quiet(void)
{
	setenv("EVRDMA_LOG", "off", 0);
}

/*
 * The sanitizer build repeats less where a test's length is repetition (a
 * storm's rounds, a stream's volume): the sanitizers look for a memory
 * error on each path, which a shorter run takes too, and under them and
 * the guest's emulation a round costs several times what it does in the
 * normal build, which runs the full counts.
 */
#if defined(__SANITIZE_ADDRESS__)
#define TU_SANITIZED 1
#else
#define TU_SANITIZED 0
#endif

/** @return @p normal, or @p sanitized in the sanitizer build */
#define TU_REPEAT(normal, sanitized) (TU_SANITIZED ? (sanitized) : (normal))

/** @return a monotonic time in milliseconds */
static inline uint64_t
tu_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline void
tu_set_flag_cb_(evutil_socket_t fd, short what, void *arg)
{
	*(int *)arg = 1;
}

/**
 * Run @p eb until *@p flag becomes nonzero or @p timeout_ms pass.
 * A private timer bounds every wait, so an idle base cannot block forever
 * and an empty one does not spin.
 * @return 0 when the flag was set, -1 on timeout or loop failure
 */
static inline int
tu_loop_until(struct event_base *eb, int *flag, int timeout_ms)
{
	struct timeval tv;
	struct event *t;
	int expired = 0;

	if (*flag)
		return 0;
	t = evtimer_new(eb, tu_set_flag_cb_, &expired);
	if (t == NULL)
		return -1;
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	evtimer_add(t, &tv);
	while (!*flag && !expired)
		if (event_base_loop(eb, EVLOOP_ONCE) < 0)
			break;
	event_free(t);
	return *flag ? 0 : -1;
}

/** Run @p eb for @p ms milliseconds (lets late events show up). */
static inline void
tu_loop_for(struct event_base *eb, int ms)
{
	int never = 0;

	(void)tu_loop_until(eb, &never, ms);
}

#endif /* EVRDMA_TESTUTIL_H_INCLUDED_ */
