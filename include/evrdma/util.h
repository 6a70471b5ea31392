/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: RDMA (rdma_cm + verbs) driven by a libevent event_base.
 * Common definitions: export macro, error reasons, logging, versions.
 */
#ifndef EVRDMA_UTIL_H_INCLUDED_
#define EVRDMA_UTIL_H_INCLUDED_

/** @file evrdma/util.h
 * Definitions shared by every evrdma object: the symbol export macro,
 * connection error reasons, the log callback and version queries.
 */

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(EVRDMA_BUILDING_LIBRARY)
#define EVRDMA_EXPORT __attribute__((visibility("default")))
#else
#define EVRDMA_EXPORT
#endif

/**
 * Why a connection failed or ended. Delivered as the @c reason argument of
 * the connection event callback (see evrdma_conn_event_cb) together with
 * EVRDMA_EV_ERROR or EVRDMA_EV_EOF. Each failure is reported exactly once.
 */
enum evrdma_reason {
	EVRDMA_REASON_NONE = 0,		/**< no error (EVRDMA_EV_CONNECTED) */
	EVRDMA_REASON_ADDR_ERROR,	/**< rdma_cm could not resolve the address (running out of time is EVRDMA_REASON_TIMEOUT) */
	EVRDMA_REASON_ROUTE_ERROR,	/**< rdma_cm could not resolve a route (running out of time is EVRDMA_REASON_TIMEOUT) */
	EVRDMA_REASON_CONNECT_ERROR,	/**< the connection handshake failed */
	EVRDMA_REASON_UNREACHABLE,	/**< peer unreachable (also after ESTABLISHED) */
	EVRDMA_REASON_REJECTED,		/**< the peer rejected us; see evrdma_conn_get_reject() */
	EVRDMA_REASON_TIMEOUT,		/**< a connection step exceeded its configured timeout */
	EVRDMA_REASON_DISCONNECTED,	/**< the peer disconnected (with EVRDMA_EV_EOF) */
	EVRDMA_REASON_DEVICE_REMOVAL,	/**< the RDMA device went away */
	EVRDMA_REASON_QP_FATAL,		/**< asynchronous QP error (IBV_EVENT_QP_FATAL and kin) */
	EVRDMA_REASON_PORT_ERROR,	/**< the device port went down (IBV_EVENT_PORT_ERR) */
	EVRDMA_REASON_DEVICE_FATAL,	/**< the device reported a fatal error */
	EVRDMA_REASON_RESOURCE,		/**< a local resource could not be created; errno says which */
	EVRDMA_REASON_DNS,		/**< host name resolution failed */
	EVRDMA_REASON_PROTOCOL,		/**< the peer broke the evrdma protocol (handshake or channel messages) */
	EVRDMA_REASON_MISUSE,		/**< the application broke a documented rule of the API (e.g. drained a message channel's output directly) */
	EVRDMA_REASON_PEER_DEAD,	/**< the peer stopped answering: keepalive probes, or a request's transport retries, went unanswered (its host died, hangs, or the path is cut) */
	EVRDMA_REASON_INTERNAL,		/**< evrdma found its own state of the connection inconsistent (a bug in evrdma: please report it); the connection ends, nothing is freed twice */
	EVRDMA_REASON_EVICTED		/**< a channel on a shared receive queue that was idle longest was cut off to make room for a newcomer (evrdma_channel_srq_set_admission()) */
};

/** What carries a connection's bytes (evrdma_bufferevent_get_transport(),
 * struct evrdma_channel_stats). */
enum evrdma_transport {
	EVRDMA_TRANSPORT_NONE = 0,	/**< nothing (no bufferevent) */
	EVRDMA_TRANSPORT_RDMA,		/**< an evrdma channel */
	EVRDMA_TRANSPORT_TCP		/**< a TCP socket */
};

/**
 * Describe a reason code.
 * @param reason an evrdma_reason value
 * @return a static, human-readable string; never NULL
 */
EVRDMA_EXPORT const char *evrdma_reason_str(int reason);

/**
 * Log severities passed to an evrdma_log_cb. What each says:
 * - EVRDMA_LOG_ERROR: evrdma found its own state wrong, or the device
 *   failed;
 * - EVRDMA_LOG_WARN: something the operator should hear of, among them
 *   that a base has no RDMA and its bufferevents use TCP (once per
 *   evrdma_base_new() with the fallback), a peer that broke the protocol,
 *   a listener that drops connections;
 * - EVRDMA_LOG_INFO: a connection's events, among them each bufferevent
 *   whose RDMA connect failed and that connects over TCP instead;
 * - EVRDMA_LOG_DEBUG: every failed call, with evrdma_errmsg()'s text.
 */
enum evrdma_log_level {
	EVRDMA_LOG_DEBUG = 0,
	EVRDMA_LOG_INFO,
	EVRDMA_LOG_WARN,
	EVRDMA_LOG_ERROR
};

/**
 * A log sink.
 * @param level an evrdma_log_level
 * @param msg NUL-terminated message, valid only during the call
 * @param arg the pointer given to evrdma_set_log_callback()
 */
typedef void (*evrdma_log_cb)(int level, const char *msg, void *arg);

/**
 * Install the process-wide log callback, in place of the default.
 *
 * The default, until a program calls this: each message from
 * EVRDMA_LOG_WARN up goes to standard error as one line,
 * "evrdma: warning: ..." ("error", "info", "debug" for the other levels),
 * as libevent logs its own warnings. The environment variable EVRDMA_LOG
 * changes that level: debug, info, warn, error, or off (nothing). It is
 * read once, at the first message; a set-user-ID or set-capability
 * program ignores it (secure_getenv()). Once a program installs a
 * callback, or NULL, EVRDMA_LOG has no effect: what it asked for is what
 * it gets.
 *
 * Call it before the loops run: the sink is one for the process, and is
 * read without a lock.
 * @param cb the callback, or NULL to discard every message
 * @param min_level the lowest evrdma_log_level passed to @p cb; messages
 *   below it are not formatted at all
 * @param arg passed to every call of @p cb
 */
EVRDMA_EXPORT void evrdma_set_log_callback(evrdma_log_cb cb, int min_level,
    void *arg);

/**
 * Detail of the most recent failure of an evrdma call on this thread, such
 * as which rdma-core library could not be loaded or which verb failed.
 * errno holds the error code; this string names the cause.
 * @return a thread-local string, overwritten by the next failure; "" if none
 */
EVRDMA_EXPORT const char *evrdma_errmsg(void);

/**
 * Load rdma-core (libibverbs.so.1 and librdmacm.so.1) if not yet loaded.
 * Every evrdma call that needs rdma-core does this itself; a program may
 * call it up front to report a missing installation early. The
 * environment variables EVRDMA_LIBIBVERBS and EVRDMA_LIBRDMACM name other
 * files to load instead (an rdma-core of one's own); a set-user-ID or
 * set-capability program ignores them (secure_getenv()). Besides these
 * and EVRDMA_LOG, evrdma reads no environment variable (rdma-core reads
 * its own, RDMAV_FORK_SAFE among them).
 * @return 0 if loaded; -1 with errno ENOSYS (library or symbol missing) and
 *   evrdma_errmsg() naming the library and the Debian package to install
 */
EVRDMA_EXPORT int evrdma_rdma_load(void);

/**
 * An rdma-core function from the very libraries evrdma loaded (see
 * evrdma_rdma_load(), which this calls first), for a program that calls
 * rdma-core beside evrdma without linking it: such a program, too, starts
 * on a host without rdma-core. dladdr() on the result names the file it
 * was loaded from. evrdma-info(1) reads the devices through it.
 * @param name a function of libibverbs.so.1 or librdmacm.so.1, e.g.
 *   "ibv_open_device" (libibverbs is searched first)
 * @return the function's address, to be cast to its type in rdma-core's
 *   headers; NULL with errno ENOSYS (rdma-core cannot be loaded),
 *   ENOENT (neither library has @p name: rdma-core is older than the
 *   function) or EINVAL (@p name is NULL), and evrdma_errmsg() saying which
 */
EVRDMA_EXPORT void *evrdma_rdma_sym(const char *name);

/** @return the library version as a string, e.g. "0.1.0" */
EVRDMA_EXPORT const char *evrdma_version(void);

/**
 * The version of the library the program runs with, as one number that
 * orders versions, as libevent's event_get_version_number(): 0xMMmmpp,
 * one byte each for the major, minor and patch version (0.1.0 is
 * 0x000100). EVRDMA_VERSION_NUMBER (evrdma/version.h) is the same number
 * for the headers a program was compiled with; the library it runs with
 * may be a later one of the same soname (doc/ABI.md), never an earlier
 * one. A program that can do with less where the library is older than
 * some release tests it at run time:
 * @code
 * if (evrdma_get_version_number() >= 0x000200)
 *	... use what 0.2.0 added ...
 * @endcode
 * @return the version of the library, 0xMMmmpp
 */
EVRDMA_EXPORT uint32_t evrdma_get_version_number(void);

#ifdef __cplusplus
}
#endif
#endif /* EVRDMA_UTIL_H_INCLUDED_ */
