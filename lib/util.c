/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: error messages, logging, reason strings and the version.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <evrdma/version.h>
#include "evrdma-internal.h"

/* One buffer per thread, so that evrdma_errmsg() of one thread is never
 * overwritten by a failure on another event loop thread. */
static __thread char errmsg_buf[512];

/* The log sink. Installed before the loops start in every sane program;
 * plain variables are enough for that pattern. Until the program installs
 * one (log_set), messages go to standard error from the level EVRDMA_LOG
 * names (stderr_min, read once, at the first message), as libevent logs
 * its warnings by default: a program that fell back to TCP says so. */
static evrdma_log_cb log_cb;
static int log_min_level;
static void *log_arg;
static int log_set;
static int stderr_min = EVRDMA_LOG_WARN;
static pthread_once_t stderr_once = PTHREAD_ONCE_INIT;

static const char *const level_names[] = {
	"debug", "info", "warning", "error"
};

static void
set_errmsg_v(const char *fmt, va_list ap)
{
	vsnprintf(errmsg_buf, sizeof(errmsg_buf), fmt, ap);
}

void
evrdma__set_errmsg(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	set_errmsg_v(fmt, ap);
	va_end(ap);
	/* Callers format strerror(errno) and then return the same errno. */
	errno = saved;
}

const char *
evrdma_errmsg(void)
{
	return errmsg_buf;
}

void
evrdma_set_log_callback(evrdma_log_cb cb, int min_level, void *arg)
{
	log_cb = cb;
	log_min_level = min_level;
	log_arg = arg;
	log_set = 1;
}

/* EVRDMA_LOG: the lowest level the default sink prints. secure_getenv():
 * a set-user-ID program's invoker does not choose what it prints. */
static void
stderr_init(void)
{
	static const struct {
		const char *name;
		int level;
	} names[] = {
		{ "debug", EVRDMA_LOG_DEBUG }, { "info", EVRDMA_LOG_INFO },
		{ "warn", EVRDMA_LOG_WARN }, { "warning", EVRDMA_LOG_WARN },
		{ "error", EVRDMA_LOG_ERROR }, { "off", EVRDMA_LOG_ERROR + 1 },
		{ "none", EVRDMA_LOG_ERROR + 1 },
	};
	const char *v = secure_getenv("EVRDMA_LOG");
	size_t i;

	if (v == NULL || *v == '\0')
		return;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcasecmp(v, names[i].name) == 0) {
			stderr_min = names[i].level;
			return;
		}
	fprintf(stderr, "evrdma: warning: EVRDMA_LOG=%s is none of debug, "
	    "info, warn, error, off: logging warnings and errors\n", v);
}

static void
stderr_log(int level, const char *msg)
{
	fprintf(stderr, "evrdma: %s: %s\n", level >= EVRDMA_LOG_DEBUG &&
	    level <= EVRDMA_LOG_ERROR ? level_names[level] : "log", msg);
}

static void
log_v(int level, const char *fmt, va_list ap)
{
	evrdma_log_cb cb = log_cb;
	char msg[512];

	if (!log_set) {
		pthread_once(&stderr_once, stderr_init);
		if (level < stderr_min)
			return;
		vsnprintf(msg, sizeof(msg), fmt, ap);
		stderr_log(level, msg);
		return;
	}
	/* Discarded messages cost no formatting. */
	if (cb == NULL || level < log_min_level)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	cb(level, msg, log_arg);
}

void
evrdma__log(int level, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	log_v(level, fmt, ap);
	va_end(ap);
	/* The user's callback may do I/O; keep the caller's errno. */
	errno = saved;
}

int
evrdma__fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_errmsg_v(fmt, ap);
	va_end(ap);
	evrdma__log(EVRDMA_LOG_DEBUG, "%s", errmsg_buf);
	errno = err;
	return -1;
}

/* A caller compiled against a later release: what this one does not know
 * reads 0. One compiled against an earlier release: the fields it knows. */
int
evrdma__stats_out(void *out, size_t outlen, const void *st, size_t len,
    size_t min)
{
	if (!out || outlen < min)
		return evrdma__fail(EINVAL, "statistics: no buffer, or one of "
		    "%zu bytes (%zu at least)", outlen, min);
	memcpy(out, st, outlen < len ? outlen : len);
	if (outlen > len)
		memset((char *)out + len, 0, outlen - len);
	return 0;
}

uint64_t
evrdma__now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000;
}

int
evrdma__reason_errno(int reason)
{
	switch (reason) {
	case EVRDMA_REASON_ADDR_ERROR:
		return EADDRNOTAVAIL;
	case EVRDMA_REASON_ROUTE_ERROR:
		return ENETUNREACH;
	case EVRDMA_REASON_CONNECT_ERROR:
	case EVRDMA_REASON_REJECTED:
		return ECONNREFUSED;
	case EVRDMA_REASON_UNREACHABLE:
		return EHOSTUNREACH;
	case EVRDMA_REASON_TIMEOUT:
	case EVRDMA_REASON_PEER_DEAD:
		return ETIMEDOUT;
	case EVRDMA_REASON_DISCONNECTED:
		return ECONNRESET;
	case EVRDMA_REASON_DEVICE_REMOVAL:
		return ENODEV;
	case EVRDMA_REASON_PORT_ERROR:
		return ENETDOWN;
	case EVRDMA_REASON_RESOURCE:
		return ENOMEM;
	case EVRDMA_REASON_DNS:
		return EHOSTUNREACH;
	case EVRDMA_REASON_PROTOCOL:
		return EPROTO;
	case EVRDMA_REASON_MISUSE:
		return EINVAL;
	case EVRDMA_REASON_EVICTED:
		return ECONNABORTED;
	case EVRDMA_REASON_QP_FATAL:
	case EVRDMA_REASON_DEVICE_FATAL:
	case EVRDMA_REASON_INTERNAL:
		return EIO;
	}
	return EIO;
}

const char *
evrdma_reason_str(int reason)
{
	switch (reason) {
	case EVRDMA_REASON_NONE:
		return "no error";
	case EVRDMA_REASON_ADDR_ERROR:
		return "address resolution failed";
	case EVRDMA_REASON_ROUTE_ERROR:
		return "route resolution failed";
	case EVRDMA_REASON_CONNECT_ERROR:
		return "connection handshake failed";
	case EVRDMA_REASON_UNREACHABLE:
		return "peer unreachable";
	case EVRDMA_REASON_REJECTED:
		return "rejected by the peer";
	case EVRDMA_REASON_TIMEOUT:
		return "timed out";
	case EVRDMA_REASON_DISCONNECTED:
		return "disconnected by the peer";
	case EVRDMA_REASON_DEVICE_REMOVAL:
		return "RDMA device removed";
	case EVRDMA_REASON_QP_FATAL:
		return "queue pair error";
	case EVRDMA_REASON_PORT_ERROR:
		return "device port down";
	case EVRDMA_REASON_DEVICE_FATAL:
		return "fatal device error";
	case EVRDMA_REASON_RESOURCE:
		return "local resource creation failed";
	case EVRDMA_REASON_DNS:
		return "host name resolution failed";
	case EVRDMA_REASON_PROTOCOL:
		return "the peer broke the evrdma protocol";
	case EVRDMA_REASON_MISUSE:
		return "the application broke a rule of the API";
	case EVRDMA_REASON_PEER_DEAD:
		return "the peer stopped answering";
	case EVRDMA_REASON_INTERNAL:
		return "internal error in evrdma";
	case EVRDMA_REASON_EVICTED:
		return "evicted, idle, to make room for a newcomer";
	}
	return "unknown reason";
}

const char *
evrdma_version(void)
{
	return PACKAGE_VERSION;
}

uint32_t
evrdma_get_version_number(void)
{
	return EVRDMA_VERSION_NUMBER;
}
