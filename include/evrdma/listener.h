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
 *
 * The three kinds of listener (of connections here, of channels in
 * evrdma/channel.h, of bufferevents in evrdma/bufferevent.h) share this
 * handle and libevent's evconnlistener's ways, so that a libevent program
 * ports by its creation lines: the constructors take
 * evconnlistener_new_bind()'s arguments in its order, LEV_OPT_* flags
 * included, and evrdma_listener_enable(), _disable(), _get_base(),
 * _get_fd(), _set_error_cb() and _free() stand for evconnlistener_enable(),
 * _disable(), _get_base(), _get_fd(), _set_error_cb() and _free().
 * evrdma_evconnlistener_new() (evrdma/bufferevent.h) stands for
 * evconnlistener_new() on a socket the program made.
 */

#include <sys/socket.h>
#include <event2/listener.h>
#include <evrdma/util.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evrdma_base;
struct evrdma_conn;
struct event_base;

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
 * It may still be dropped before the accept callback (refused here, the
 * peer gone, the accept timeout, a request of its own that failed): the
 * application hears of that only through what it posted, each request
 * completing with ECANCELED or with the error that ended the connection,
 * and no accept callback follows; what else it set up here for @p conn
 * (regions registered on it) is its own to release then.
 * @param pdata the peer's private data (without evrdma's header), may be NULL
 * @return 0 to accept, nonzero to reject (the peer sees
 *   EVRDMA_REASON_REJECTED, code EVRDMA_REJECT_APP)
 */
typedef int (*evrdma_prepare_cb)(struct evrdma_listener *lst,
    struct evrdma_conn *conn, const void *pdata, size_t pdata_len,
    void *arg);

/**
 * The error callback (evrdma_listener_set_error_cb()), of the shape of
 * libevent's evconnlistener_errorcb: while it runs, errno
 * (EVUTIL_SOCKET_ERROR()) holds the cause, and evrdma_listener_get_error()
 * the evrdma_reason. It runs:
 *  - when accepting a TCP connection (the TCP fallback of a bufferevent
 *    listener) fails other than in passing (EAGAIN, EINTR, ECONNABORTED
 *    are skipped, as libevent does): errno as accept(2) set it, EMFILE,
 *    ENFILE, ENOBUFS or ENOMEM (reason EVRDMA_REASON_RESOURCE) or another
 *    (EVRDMA_REASON_CONNECT_ERROR). The listener then stops accepting
 *    over TCP and tries again after 10 ms, then 20 ms, doubling up to
 *    1 s, until an accept succeeds, so that it never spins on a full
 *    descriptor table: connections wait in the kernel's listen queue
 *    meanwhile, and the callback runs again for each try that fails.
 *    (libevent 2.1's evconnlistener calls its callback again at once for
 *    as long as the error lasts.)
 *  - once when the listener's RDMA device goes away (errno ENODEV, reason
 *    EVRDMA_REASON_DEVICE_REMOVAL): it accepts nothing more over RDMA
 *    (with the fallback it goes on over TCP); free it and listen again
 *    on a device that works.
 *
 * Over RDMA, a connect request that cannot get its resources (a QP,
 * registered memory) is rejected and logged; the callback does not run.
 * The callback may free the listener, or disable it.
 * @param lst the listener
 * @param ctx the argument given to the constructor (as in libevent, the
 *   accept callback's)
 */
typedef void (*evrdma_listener_errorcb)(struct evrdma_listener *lst,
    void *ctx);

/** @name Flags of the listener constructors
 * evrdma_listener_new(), evrdma_channel_listener_new() and
 * evrdma_bufferevent_listener_new() take libevent's LEV_OPT_* flags
 * (event2/listener.h), as evconnlistener_new_bind() does, or-ed with
 * evrdma's own flags, which take bits 16 and up so that they never
 * collide with libevent's (EVRDMA_LISTEN_RAW here, EVRDMA_CHANNEL_MESSAGE
 * in evrdma/channel.h). What each LEV_OPT_* means here:
 *  - LEV_OPT_CLOSE_ON_FREE: implied. evrdma_listener_free() always closes
 *    what the listener listens on (its rdma_cm id; with the TCP fallback
 *    its socket too): neither is the application's to close. A listener
 *    on the program's own socket (evrdma_evconnlistener_new()) closes
 *    the socket only with the flag, as evconnlistener_new().
 *  - LEV_OPT_REUSEABLE: over TCP (the fallback), SO_REUSEADDR on the
 *    listening socket, as libevent sets it: a server that restarts binds
 *    its port while connections of its former run are in TIME_WAIT;
 *    without it that bind fails with EADDRINUSE, as with libevent. Over
 *    RDMA it changes nothing: rdma_cm has no TIME_WAIT, and a port is
 *    free again once its listener is freed.
 *  - LEV_OPT_DISABLED: the listener starts disabled (see
 *    evrdma_listener_enable()).
 *  - LEV_OPT_CLOSE_ON_EXEC: FD_CLOEXEC on the fallback's listening
 *    socket; over RDMA nothing: the listener has no descriptor of its own
 *    (its requests arrive on the base's rdma_cm channel).
 *  - LEV_OPT_DEFERRED_ACCEPT: TCP_DEFER_ACCEPT on the fallback's
 *    listening socket, as libevent sets it; over RDMA nothing (a hint in
 *    libevent too): a connection is handed out once established.
 *  - LEV_OPT_LEAVE_SOCKETS_BLOCKING, LEV_OPT_THREADSAFE,
 *    LEV_OPT_REUSEABLE_PORT, LEV_OPT_BIND_IPV6ONLY, and any bit that is
 *    neither libevent's nor evrdma's: the constructor fails with EINVAL
 *    (no socket is handed out to leave blocking; a listener, as every
 *    evrdma object, is used from its loop's thread only; rdma_cm shares
 *    no port between listeners; IPv6-only binding is not offered). On
 *    the program's own socket, whose SO_REUSEPORT and IPV6_V6ONLY are
 *    what they are, LEV_OPT_REUSEABLE_PORT and LEV_OPT_BIND_IPV6ONLY
 *    are ignored, as by evconnlistener_new().
 * @{ */
/** Accept connect requests without an evrdma handshake (rping, perftest):
 * evrdma_listener_new() only. */
#define EVRDMA_LISTEN_RAW	0x20000
/** @} */

/**
 * Bind to @p sa and listen, as evconnlistener_new_bind().
 * @param base the evrdma base
 * @param cb accept callback, required
 * @param arg its argument, and the error callback's
 * @param flags LEV_OPT_* flags and EVRDMA_LISTEN_RAW (see above)
 * @param backlog how many connect requests may wait, as for listen(2), or
 *   -1 (any negative value, as in libevent) for the default, 128: a
 *   request is accepted at once while fewer than the configured number of
 *   connections are half-open (accepted, not yet established; see
 *   evrdma_config_set_half_open()) and the listener is enabled, otherwise
 *   it waits here, holding no memory and no QP, until a place frees up
 *   (at most the connect timeout); requests beyond the backlog are
 *   rejected with EVRDMA_REJECT_RESOURCES
 * @param sa IPv4 or IPv6 address; port 0 picks a free port, see
 *   evrdma_listener_get_port()
 * @param socklen its length
 * @return the listener, or NULL with errno (EINVAL: no base, callback or
 *   address, backlog 0, a flag it does not take; EADDRINUSE,
 *   EADDRNOTAVAIL, ENODEV, ENOSYS, ...)
 */
EVRDMA_EXPORT struct evrdma_listener *evrdma_listener_new(
    struct evrdma_base *base, evrdma_accept_cb cb, void *arg, int flags,
    int backlog, const struct sockaddr *sa, int socklen);

/** Set (or clear with NULL) the prepare callback. It runs for connect
 * requests over RDMA only: a bufferevent listener's TCP connections (the
 * TCP fallback) are accepted without it (doc/SECURITY.md). */
EVRDMA_EXPORT void evrdma_listener_set_prepare_cb(struct evrdma_listener *lst,
    evrdma_prepare_cb cb, void *arg);

/**
 * Set (or clear with NULL) the error callback, as
 * evconnlistener_set_error_cb(): @p cb gets the constructor's argument.
 * libevent's own evconnlistener_set_error_cb() cannot take an evrdma
 * listener: its struct evconnlistener is private to libevent (its
 * operations are not public), so an evrdma listener cannot be one; nor
 * is the fallback's TCP evconnlistener handed out, since one callback
 * must hear the errors of both transports.
 * @param lst the listener; NULL is ignored
 * @param cb the callback, or NULL (TCP accept errors are then logged,
 *   with the same backing off)
 */
EVRDMA_EXPORT void evrdma_listener_set_error_cb(struct evrdma_listener *lst,
    evrdma_listener_errorcb cb);

/**
 * Why the error callback ran last.
 * @param lst the listener
 * @return an evrdma_reason (EVRDMA_REASON_RESOURCE,
 *   EVRDMA_REASON_CONNECT_ERROR or EVRDMA_REASON_DEVICE_REMOVAL), or
 *   EVRDMA_REASON_NONE before any error (and for NULL)
 */
EVRDMA_EXPORT int evrdma_listener_get_error(struct evrdma_listener *lst);

/**
 * The event_base the listener runs on, as evconnlistener_get_base(): the
 * one its evrdma base was made on, so that a libevent error callback's
 * event_base_loopexit(evconnlistener_get_base(l), NULL) ports by its
 * name alone. (evrdma_conn_get_base() gives a connection's evrdma base;
 * a listener's is the one the program made it with.)
 * @param lst the listener
 * @return the event_base, or NULL for NULL and once the evrdma base was
 *   freed (the listener is then closed)
 */
EVRDMA_EXPORT struct event_base *evrdma_listener_get_base(
    struct evrdma_listener *lst);

/**
 * Hand out connections again, as evconnlistener_enable(). Connections
 * that waited while the listener was disabled are handed out first, from
 * the loop.
 * @param lst the listener
 * @return 0, or -1 with errno EINVAL (NULL) or EPIPE (its base was freed)
 */
EVRDMA_EXPORT int evrdma_listener_enable(struct evrdma_listener *lst);

/**
 * Stop handing out connections until evrdma_listener_enable(), as
 * evconnlistener_disable(); the accept callback does not run meanwhile.
 * Over TCP (the fallback) new connections wait in the kernel's listen
 * queue. Over RDMA connect requests wait in the listener's own queue, at
 * most @p backlog of them, holding no QP or memory, and are rejected
 * (EVRDMA_REJECT_RESOURCES) after the connect timeout
 * (EVRDMA_TIMEOUT_CONNECT); those already accepted when it was disabled
 * complete their handshake and wait, established, to be handed out (one
 * that ends meanwhile is dropped).
 * @param lst the listener
 * @return 0, or -1 with errno EINVAL (NULL) or EPIPE (its base was freed)
 */
EVRDMA_EXPORT int evrdma_listener_disable(struct evrdma_listener *lst);

/** @return the bound port in host byte order */
EVRDMA_EXPORT int evrdma_listener_get_port(struct evrdma_listener *lst);

/**
 * The socket the listener accepts TCP (or Unix) connections on, as
 * evconnlistener_get_fd(): the program's own for evrdma_evconnlistener_new(),
 * the fallback's for a bufferevent listener with the TCP fallback. Leave
 * its accepting to the listener; options and getsockname() are the
 * program's.
 * @param lst the listener
 * @return the socket, or -1 when it has none (RDMA only, a listener of
 *   connections or channels, NULL, its base freed)
 */
EVRDMA_EXPORT evutil_socket_t evrdma_listener_get_fd(
    struct evrdma_listener *lst);

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
