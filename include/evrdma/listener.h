/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: passive side.
 */
#ifndef EVRDMA_LISTENER_H_INCLUDED_
#define EVRDMA_LISTENER_H_INCLUDED_

/** @file evrdma/listener.h
 * A listener accepts rdma_cm connect requests on an address. For each
 * request it creates the connection's resources (QP on the shared CQs),
 * optionally lets the application prepare it (post receives, inspect the
 * peer's private data, refuse), accepts, and reports the established
 * connection to the accept callback.
 */

#include <sys/socket.h>
#include <evrdma/util.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evrdma_base;
struct evrdma_conn;

/** An opaque listener. */
struct evrdma_listener;

/**
 * Called with each established connection. The callback owns @p conn from
 * now on (set its callbacks with evrdma_conn_setcb(), free it with
 * evrdma_conn_free()).
 * @param peer the peer's address, valid during the call
 */
typedef void (*evrdma_accept_cb)(struct evrdma_listener *lst,
    struct evrdma_conn *conn, const struct sockaddr *peer, int socklen,
    void *arg);

/**
 * Called for each connect request after its QP exists and before it is
 * accepted: post receives here so that the peer's first SEND finds one.
 * @p conn is not yet established; do not free it here (return nonzero).
 * @param pdata the peer's private data (without evrdma's header), may be NULL
 * @return 0 to accept, nonzero to reject (the peer sees
 *   EVRDMA_REASON_REJECTED, code EVRDMA_REJECT_APP)
 */
typedef int (*evrdma_prepare_cb)(struct evrdma_listener *lst,
    struct evrdma_conn *conn, const void *pdata, size_t pdata_len,
    void *arg);

/**
 * Called once when the listener can no longer accept: its RDMA device went
 * away (@p reason EVRDMA_REASON_DEVICE_REMOVAL). The listener stays valid
 * and accepts nothing more; free it (from here or later) and listen again
 * on a device that works. (As evconnlistener_set_error_cb().)
 */
typedef void (*evrdma_listener_error_cb)(struct evrdma_listener *lst,
    int reason, void *arg);

/** @name Flags for evrdma_listener_new()
 * @{ */
/** Accept connect requests without an evrdma handshake (rping, perftest). */
#define EVRDMA_LISTEN_RAW	0x01
/** @} */

/**
 * Bind to @p sa and listen.
 * @param sa IPv4 or IPv6 address; port 0 picks a free port, see
 *   evrdma_listener_get_port()
 * @param backlog how many connect requests may wait (> 0), as for
 *   listen(2): a request is accepted at once while fewer than the
 *   configured number of connections are half-open (accepted, not yet
 *   established; see evrdma_config_set_half_open()), otherwise it waits
 *   here, holding no memory and no QP, until a place frees up (at most the
 *   connect timeout); requests beyond the backlog are rejected with
 *   EVRDMA_REJECT_RESOURCES
 * @param flags EVRDMA_LISTEN_* flags
 * @param cb accept callback, required
 * @return the listener, or NULL with errno (EINVAL, EADDRINUSE,
 *   EADDRNOTAVAIL, ENODEV, ENOSYS, ...)
 */
EVRDMA_EXPORT struct evrdma_listener *evrdma_listener_new(
    struct evrdma_base *base, const struct sockaddr *sa, int socklen,
    int backlog, int flags, evrdma_accept_cb cb, void *arg);

/** Set (or clear with NULL) the prepare callback. */
EVRDMA_EXPORT void evrdma_listener_set_prepare_cb(struct evrdma_listener *lst,
    evrdma_prepare_cb cb, void *arg);

/** Set (or clear with NULL) the error callback. */
EVRDMA_EXPORT void evrdma_listener_set_error_cb(struct evrdma_listener *lst,
    evrdma_listener_error_cb cb, void *arg);

/** @return the bound port in host byte order */
EVRDMA_EXPORT int evrdma_listener_get_port(struct evrdma_listener *lst);

/**
 * Stop listening and free the listener. Connections already handed to the
 * accept callback live on; requests not yet accepted are dropped. Safe from
 * inside the listener's callbacks, and after evrdma_base_free() (which
 * leaves the listener valid but closed).
 * @param lst the listener; NULL is allowed
 */
EVRDMA_EXPORT void evrdma_listener_free(struct evrdma_listener *lst);

#ifdef __cplusplus
}
#endif
#endif /* EVRDMA_LISTENER_H_INCLUDED_ */
