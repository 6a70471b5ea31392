/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: a libevent struct bufferevent over RDMA, with a TCP fallback.
 */
#ifndef EVRDMA_BUFFEREVENT_H_INCLUDED_
#define EVRDMA_BUFFEREVENT_H_INCLUDED_

/** @file evrdma/bufferevent.h
 * A genuine libevent `struct bufferevent *` whose bytes travel over an
 * evrdma channel (evrdma/channel.h), and one program for hosts with and
 * without RDMA. A program written for bufferevent_socket changes only the
 * calls that make bufferevents and listeners (doc/MIGRATING.md); after
 * that it uses libevent's own, unmodified API on them:
 * bufferevent_setcb(), _enable()/_disable()/_get_enabled(), _write(),
 * _write_buffer(), _read(), _read_buffer(), _get_input()/_get_output()
 * and every evbuffer function on them, _setwatermark(), _set_timeouts(),
 * _flush(), _free(), _get_base(), _incref()/_decref(), _lock()/_unlock(),
 * bufferevent_set_rate_limit(), and libevent's filters stacked on top:
 * bufferevent_filter_new() and bufferevent_openssl_filter_new() (TLS over
 * RDMA).
 *
 * How the adapter is built on libevent's public API, and what it costs
 * in memory and instructions: doc/ARCHITECTURE.md.
 *
 * Semantics: those of bufferevent_socket, checked by running the same
 * scenarios on both and comparing every callback (tests/test_bev_compare.c):
 * a new bufferevent has EV_WRITE enabled and EV_READ disabled; the read
 * high watermark caps input and holds the peer back (through the
 * channel's credits); a read callback gets at most what one read of a
 * socket bufferevent takes, its max single read
 * (bufferevent_set_max_single_read(), 16384 unless set) and, with libevent
 * 2.1, 4096 bytes, and the next from the loop (a library that takes a
 * request per read callback gets as many calls); the read timeout counts while reading is enabled and
 * input is below the high watermark, the write timeout while output holds
 * bytes the connection has not taken; BEV_EVENT_CONNECTED, BEV_EVENT_EOF,
 * BEV_EVENT_ERROR and BEV_EVENT_TIMEOUT with BEV_EVENT_READING or
 * BEV_EVENT_WRITING as a socket reports them, EOF and errors after every
 * received byte; a write after BEV_FINISHED gives BEV_EVENT_ERROR with
 * BEV_EVENT_WRITING and EPIPE. evbuffer_freeze() of input's end or of
 * output's front changes nothing, as on a socket (the connection's own
 * moves pass it), and the bufferevent reads whether or not it has
 * callbacks. The channel's output plays the kernel's send buffer: it
 * takes written bytes up to twice the ring's size (slots * slot size);
 * beyond that they wait in the bufferevent's output and the write callback
 * waits.
 * Where it differs from a socket bufferevent, because libevent offers no
 * public way or because the transport knows more:
 *  - Enabling EV_WRITE with nothing to write gives no write callback (a
 *    socket's gives one; so do none of libevent's pair and filter
 *    bufferevents): call bufferevent_trigger(bev, EV_WRITE, 0) to kick a
 *    producer. Output held while EV_WRITE was disabled resumes within a
 *    few milliseconds of bufferevent_enable(bev, EV_WRITE) (libevent 2.1's
 *    filter does not pass that enable on, libevent PR 613; the adapter
 *    looks, backing off from 1 to 64 ms, only while output is so held).
 *  - Written bytes go to the channel (up to twice its ring) even when the
 *    bufferevent is freed right after the write, and are sent; a socket
 *    bufferevent frees what it had not yet written to the kernel. After
 *    the free they are sent while the peer takes them, up to the linger
 *    bound (evrdma_config_set_linger(), default 30 s after the free):
 *    when it takes nothing for the teardown timeout
 *    (evrdma_config_set_timeout()), or at the bound, the rest is dropped
 *    and the connection ends with a reset, so the peer gets
 *    BEV_EVENT_ERROR after what arrived, never EOF after a stream cut
 *    short (a kernel would go on sending).
 *  - bufferevent_getfd() returns -1. To shut down writing (the peer gets
 *    EOF after the data, reading goes on) call
 *    bufferevent_flush(bev, EV_WRITE, BEV_FINISHED), as on a pair; over
 *    TCP use shutdown(bufferevent_getfd(bev), SHUT_WR). BEV_FLUSH sends
 *    what output holds now, past the ring's size; BEV_NORMAL does nothing
 *    more than the loop does. Code that asks the socket: the peer's
 *    address is the accept callback's @p peer (keep a copy there, where
 *    an evconnlistener's callback had one too), and on the connecting
 *    side the address given to evrdma_bufferevent_connect(), in place of
 *    getpeername(); socket options mean nothing over RDMA, and
 *    TCP_NODELAY is what an RDMA bufferevent does anyway (a write goes
 *    out at once, nothing waits as for Nagle's algorithm; one that fell
 *    back to TCP has it set): set them where bufferevent_getfd() is not
 *    -1 (setsockopt() on -1 fails with EBADF and changes nothing).
 *    A listener's TCP connections are plain bufferevent_socket
 *    bufferevents, with their socket.
 *  - bufferevent_socket_get_dns_error() returns 0: it reads a field of
 *    libevent's private struct bufferevent_private, which only libevent's
 *    own socket bufferevent sets. Use evrdma_bufferevent_get_dns_error(),
 *    which gives the same EVUTIL_EAI_* code for every bufferevent.
 *  - Rate limits: a bufferevent's own (bufferevent_set_rate_limit())
 *    apply to both directions; rate-limit groups do not (libevent 2.1 has
 *    no public way to charge them). bufferevent_set_max_single_write()
 *    does not cut writes: written bytes go to the connection up to twice
 *    its ring at once.
 *  - bufferevent_get_underlying() returns the adapter's pair end: leave it
 *    alone. All calls must come from the event loop's thread, as for every
 *    evrdma object; BEV_OPT_THREADSAFE makes bufferevent_lock() work, it
 *    does not make the bufferevent usable from other threads.
 *  - The write callback is deferred, as libevent defers those of a
 *    bufferevent made with BEV_OPT_DEFER_CALLBACKS: one due while no
 *    write callback is set (cleared right after a write) stays due, and
 *    runs once a write callback is set again, at the bufferevent's next
 *    deferred callback, whatever output holds then.
 *  - A small write goes to the connection inside bufferevent_write() when
 *    EV_WRITE is enabled then (a socket's waits for the loop): disabling
 *    EV_WRITE right after it does not hold those bytes back, and their
 *    write callback may still run. Disable EV_WRITE before writing to
 *    hold output.
 *  - bufferevent_priority_set() fails (libevent refuses priorities on
 *    filter bufferevents), and there is no descriptor: evhttp and evrpc,
 *    which set one (evhttp_connection_base_bufferevent_new() asserts
 *    that bufferevent_setfd() works, and aborts), need socket
 *    bufferevents (doc/MIGRATING.md, "evhttp").
 *  - evbuffer_setcb() (libevent's deprecated event2/buffer_compat.h) on
 *    the bufferevent's input or output must not be used: it frees the
 *    callbacks libevent's filter keeps on them, and the filter frees them
 *    again with the bufferevent (a crash in libevent, as on any filter
 *    bufferevent). Use evbuffer_add_cb() and evbuffer_remove_cb().
 *  - bufferevent_socket_connect() is for socket bufferevents: on this
 *    one, as on any filter, libevent makes, connects and leaks a socket of
 *    its own and returns 0. Use evrdma_bufferevent_connect().
 *  - Stream only; message mode stays with channels.
 *
 * The end of the stream stays readable, as a socket at EOF: each
 * bufferevent_enable(bev, EV_READ) after BEV_EVENT_EOF|BEV_EVENT_READING
 * reports it again, from the loop (also when made inside the event
 * callback); after BEV_EVENT_ERROR|BEV_EVENT_READING, EOF. errno at an
 * EOF is what the application left, as a socket's read of 0 sets none:
 * evrdma's own system calls (a non-blocking read's EAGAIN) never reach
 * it, so a library that takes an EOF with EAGAIN for a spurious one
 * (enables reading again, clears errno and waits) sees the next.
 *
 * Where a connection ends, as a socket's (evrdma/channel.h gives the
 * rule): bytes that passed the write callback are in the channel, as in a
 * kernel, and bufferevent_free() sends them, then EOF, or, when received
 * bytes were never taken, a reset after them: libevent's hello-world,
 * freed in its write callback with a request unread, has its reply
 * arrive, then BEV_EVENT_ERROR, as over TCP. A program that returns from
 * main with bufferevents open ends their connections as a kernel does
 * (EOF, or a reset with bytes unread). The event callback's errno is set
 * with BEV_EVENT_ERROR (ECONNRESET, EPIPE, ETIMEDOUT...). Two ends only a
 * kernel can tell: a peer killed right after it read our last bytes (its
 * credits not yet back) reads as BEV_EVENT_ERROR, not EOF; and a killed
 * peer whose RDMA bufferevent had fallen back to TCP read its socket ahead
 * of its application, so unread bytes there give EOF, not a reset
 * (tests/test_bev_compare.c, "process-end", pins both).
 *
 * Without RDMA (evrdma_config_set_tcp_fallback()): on a base that has no
 * RDMA the same calls make plain bufferevent_socket bufferevents and TCP
 * listeners; on a base with RDMA a connect that cannot be made over RDMA
 * is made over TCP under the same bufferevent, and a listener listens on
 * the same port number over TCP too (its TCP connections arrive as plain
 * bufferevent_socket bufferevents). evrdma_bufferevent_get_transport()
 * tells which; the log callback says why a fallback happened.
 */

#include <sys/socket.h>
#include <evrdma/util.h>
#include <event2/bufferevent.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evrdma_base;
struct evrdma_listener;
struct evdns_base;
struct evrdma_channel_stats;


/**
 * Accept callback of evrdma_bufferevent_listener_new(): the callback owns
 * @p bev (free it with bufferevent_free()); it is connected, with EV_WRITE
 * enabled and EV_READ disabled, as bufferevent_socket_new() makes one,
 * with the options of evrdma_bufferevent_listener_set_options().
 * @param lst the listener
 * @param bev the new connection's bufferevent (RDMA, or TCP with the
 *   fallback)
 * @param peer the peer's address, valid during the call
 * @param socklen its length
 * @param arg the listener's argument
 */
typedef void (*evrdma_bufferevent_accept_cb)(struct evrdma_listener *lst,
    struct bufferevent *bev, const struct sockaddr *peer, int socklen,
    void *arg);

/**
 * Make an unconnected bufferevent, as bufferevent_socket_new(base, -1,
 * @p options) does; connect it with evrdma_bufferevent_connect(). On a
 * base with RDMA it is an RDMA bufferevent (see the file's description:
 * its channel's rings are allocated and registered now); on a base without
 * RDMA (evrdma_config_set_tcp_fallback()) a bufferevent_socket, to which
 * the same calls apply.
 * @param base the evrdma base; its event_base runs the bufferevent
 * @param options BEV_OPT_* flags: BEV_OPT_DEFER_CALLBACKS,
 *   BEV_OPT_THREADSAFE and BEV_OPT_UNLOCK_CALLBACKS as libevent has them;
 *   BEV_OPT_CLOSE_ON_FREE is implied (freeing always ends the connection)
 * @return the bufferevent (free with bufferevent_free()), or NULL with errno
 *   EINVAL (no base, unknown options), ENOMEM, or as evrdma_channel_new()
 */
EVRDMA_EXPORT struct bufferevent *evrdma_bufferevent_new(
    struct evrdma_base *base, int options);

/**
 * Connect, as bufferevent_socket_connect(): the outcome reaches the event
 * callback, BEV_EVENT_CONNECTED or BEV_EVENT_ERROR (the reason in
 * evrdma_bufferevent_get_error()). Bytes written before are sent once
 * connected. With the TCP fallback, a connect that fails over RDMA before
 * it is established is made again over TCP to the same address (logged);
 * the event callback then hears only the outcome over TCP.
 * @param bev a bufferevent from evrdma_bufferevent_new()
 * @param sa IPv4 or IPv6 address and port
 * @param socklen its length
 * @return 0, or -1 with errno EINVAL (not an evrdma bufferevent, bad
 *   address), EISCONN (already connecting or connected), or as
 *   evrdma_conn_connect()
 */
EVRDMA_EXPORT int evrdma_bufferevent_connect(struct bufferevent *bev,
    const struct sockaddr *sa, int socklen);

/**
 * Resolve @p host and connect, as bufferevent_socket_connect_hostname(): a
 * failed resolution reaches the event callback as BEV_EVENT_ERROR with
 * evrdma_bufferevent_get_error() EVRDMA_REASON_DNS and
 * evrdma_bufferevent_get_dns_error() the resolver's EVUTIL_EAI_* code
 * (no fallback: TCP would fail the same way).
 * @param bev a bufferevent from evrdma_bufferevent_new()
 * @param dns the resolver, or NULL for the base's own (an evdns_base on
 *   the base's loop with /etc/resolv.conf and /etc/hosts, made on first
 *   use). Name resolution never blocks the loop, on a TCP bufferevent of
 *   a base without RDMA too, where libevent's own NULL would resolve
 *   with a blocking getaddrinfo(). Without a nameserver in
 *   /etc/resolv.conf, a name that is neither numeric nor in /etc/hosts
 *   fails at once with EVUTIL_EAI_FAIL (an evdns_base would wait for a
 *   nameserver for ever). A socket bufferevent of an event_base on which
 *   the program made no base (evrdma_bufferevent_socket_new() without
 *   RDMA, or libevent's own) resolves as libevent does with NULL.
 * @param family AF_INET, AF_INET6 or AF_UNSPEC
 * @param host a host name or numeric address
 * @param port the port
 * @return 0, or -1 with errno as evrdma_bufferevent_connect()
 */
EVRDMA_EXPORT int evrdma_bufferevent_connect_hostname(struct bufferevent *bev,
    struct evdns_base *dns, int family, const char *host, int port);

/**
 * Listen and hand each connection to @p cb as a bufferevent:
 * evconnlistener_new_bind() and bufferevent_socket_new() in one. With the
 * TCP fallback it listens over RDMA and on the same TCP port number (port
 * 0: one number free in both), or, on a base without RDMA, over TCP only.
 * The listener is an evrdma listener (evrdma/listener.h): its flags and
 * backlog, evrdma_listener_get_port(), _get_base(), _enable(),
 * _disable(), _set_error_cb() (which hears of TCP accept errors, after
 * which the TCP side backs off, and of the RDMA device going away) and
 * _free() apply. Free it from anywhere, also from @p cb.
 * @param base the evrdma base
 * @param cb the accept callback, required
 * @param arg its argument, and the error callback's
 * @param flags LEV_OPT_* flags, as evrdma/listener.h says (no evrdma flag)
 * @param backlog connect requests that may wait, as for listen(2), or -1
 *   for the default
 * @param sa IPv4 or IPv6 address to bind; port 0 picks one
 * @param socklen its length
 * @return the listener, or NULL with errno (EINVAL, EADDRINUSE, ENODEV
 *   without the fallback, ...)
 */
EVRDMA_EXPORT struct evrdma_listener *evrdma_bufferevent_listener_new(
    struct evrdma_base *base, evrdma_bufferevent_accept_cb cb, void *arg,
    int flags, int backlog, const struct sockaddr *sa, int socklen);

/**
 * The BEV_OPT_* options of the bufferevents a bufferevent listener hands
 * out from now on, over RDMA and over TCP alike, as the @p options of the
 * bufferevent_socket_new() an evconnlistener's accept callback would
 * call: BEV_OPT_DEFER_CALLBACKS, BEV_OPT_THREADSAFE and
 * BEV_OPT_UNLOCK_CALLBACKS as libevent has them; BEV_OPT_CLOSE_ON_FREE is
 * implied (freeing always ends the connection), and is all they have
 * until this is called. Call it before the loop runs (or with the
 * listener made disabled, LEV_OPT_DISABLED) for it to apply to the first.
 * @param lst a listener of evrdma_bufferevent_listener_new()
 * @param options BEV_OPT_* flags
 * @return 0, or -1 with errno EINVAL (not a bufferevent listener, an
 *   option not listed)
 */
EVRDMA_EXPORT int evrdma_bufferevent_listener_set_options(
    struct evrdma_listener *lst, int options);

/** @name The calls that take an event_base
 * libevent's own shapes, for a library through which only an event_base
 * travels: its bufferevent_socket_new(), evconnlistener_new_bind() and
 * evconnlistener_new() lines become these, and nothing else changes
 * (doc/MIGRATING.md). Each works on the evrdma base of its event_base:
 *  - the newest base the program made there with evrdma_base_new() and
 *    has not freed (its configuration applies);
 *  - else one these calls share on that event_base, made on first use
 *    with the configuration of evrdma_config_set_default() (the TCP
 *    fallback on, unless set otherwise). It is evrdma's: it lasts while a
 *    bufferevent or listener made on it does (a bufferevent freed with
 *    bytes still to send, until they are sent: the teardown timeout at
 *    most), and goes once the last has gone, so that
 *    event_base_dispatch() returns once the program's objects are gone,
 *    as with sockets. What is still there when the event_base is freed
 *    is abandoned, as libevent abandons bufferevents on a freed
 *    event_base: free the objects and let event_base_dispatch() return
 *    before event_base_free().
 * @{ */

/**
 * bufferevent_socket_new(), for a program that passes its event_base:
 * with @p fd -1 an unconnected bufferevent, as evrdma_bufferevent_new()
 * makes it on the base of @p eb, to connect with
 * evrdma_bufferevent_connect() or evrdma_bufferevent_connect_hostname();
 * with a socket of the program's, a bufferevent_socket on it, as
 * bufferevent_socket_new() makes it (RDMA takes over no socket).
 * @param eb the event_base
 * @param fd -1, or a socket to wrap
 * @param options BEV_OPT_* as evrdma_bufferevent_new() takes them; with a
 *   socket, as bufferevent_socket_new() does
 * @return the bufferevent, or NULL with errno: EINVAL (no @p eb, options
 *   not taken, @p fd below -1), as evrdma_base_new() when no base can be
 *   made (ENOSYS or ENODEV without the fallback), as
 *   evrdma_bufferevent_new()
 */
EVRDMA_EXPORT struct bufferevent *evrdma_bufferevent_socket_new(
    struct event_base *eb, evutil_socket_t fd, int options);

/**
 * evconnlistener_new_bind() with bufferevent_socket_new() in its
 * callback: evrdma_bufferevent_listener_new() on the base of @p eb, with
 * the same arguments and flags.
 * @return the listener (free with evrdma_listener_free()), or NULL with
 *   errno as evrdma_bufferevent_listener_new(), or EINVAL for no @p eb
 */
EVRDMA_EXPORT struct evrdma_listener *evrdma_evconnlistener_new_bind(
    struct event_base *eb, evrdma_bufferevent_accept_cb cb, void *arg,
    int flags, int backlog, const struct sockaddr *sa, int socklen);

/**
 * evconnlistener_new() on the program's own socket, made, bound and set
 * up by the program (SO_REUSEADDR, SO_REUSEPORT, IPV6_V6ONLY,
 * TCP_DEFER_ACCEPT...), and listening or not. The socket keeps accepting
 * what it accepts, whatever the fallback setting: its connections arrive
 * as plain bufferevent_socket bufferevents. Beside it, on a base with
 * RDMA, the listener listens over RDMA on the socket's own address and
 * port, IPv6-only when the socket is (IPV6_V6ONLY), and hands out RDMA
 * bufferevents to the same callback. Where RDMA cannot listen there, the
 * socket serves alone: a Unix socket (TCP and Unix have no RDMA
 * counterpart); a port another listener has over RDMA while the socket
 * has SO_REUSEPORT (rdma_cm shares no port: that listener takes the RDMA
 * connections, logged); with the fallback, any cause (logged). Without
 * the fallback, any other cause fails the call.
 * evrdma_listener_get_fd() returns the socket, as evconnlistener_get_fd().
 * The socket is made non-blocking (evconnlistener_new() needs it so, and
 * hangs the loop on a blocking one).
 * @param eb the event_base
 * @param cb the accept callback, required
 * @param arg its argument, and the error callback's
 * @param flags LEV_OPT_* as evrdma/listener.h says, and as
 *   evconnlistener_new() takes them: the socket closes with the listener
 *   only with LEV_OPT_CLOSE_ON_FREE (else it stays the program's);
 *   LEV_OPT_REUSEABLE_PORT and LEV_OPT_BIND_IPV6ONLY mean nothing on a
 *   bound socket and are ignored, as there
 * @param backlog as evconnlistener_new(): listen(2)'s backlog, -1 (any
 *   negative) for 128, 0 when the socket listens already; over RDMA the
 *   backlog of evrdma_listener_new() (0: its default)
 * @param fd a bound stream socket (IPv4, IPv6 or Unix)
 * @return the listener (free with evrdma_listener_free()), or NULL with
 *   errno (EINVAL: no @p eb or @p cb, a flag not taken, not a stream
 *   socket; ENOTSOCK, EBADF; listen(2)'s; rdma_cm's, such as EADDRINUSE
 *   without the fallback) and the socket left open, the program's
 */
EVRDMA_EXPORT struct evrdma_listener *evrdma_evconnlistener_new(
    struct event_base *eb, evrdma_bufferevent_accept_cb cb, void *arg,
    int flags, int backlog, evutil_socket_t fd);
/** @} */

/**
 * Why the connection failed or ended, after BEV_EVENT_ERROR: an
 * evrdma_reason (evrdma_reason_str() names it), in the event callback or
 * any time after. Bufferevents stacked on it (a filter, TLS) are looked
 * through.
 *
 * A socket bufferevent (what a base without RDMA makes under the TCP
 * fallback, or libevent's own) answers from its name lookup and from what
 * the kernel still holds of its socket: EVRDMA_REASON_DNS (the lookup of
 * evrdma_bufferevent_connect_hostname() failed),
 * EVRDMA_REASON_CONNECT_ERROR (the connect was refused, found no route or
 * timed out) or EVRDMA_REASON_DISCONNECTED (a reset or a timeout ended
 * the connection, or it closed in order both ways); the errno of the
 * failure is, as libevent has it, EVUTIL_SOCKET_ERROR() in the event
 * callback.
 * @param bev a bufferevent
 * @return the reason, or EVRDMA_REASON_NONE (no error yet, the end was
 *   an EOF only, or no socket below @p bev)
 */
EVRDMA_EXPORT int evrdma_bufferevent_get_error(struct bufferevent *bev);

/**
 * The resolver's error after evrdma_bufferevent_connect_hostname() failed
 * to resolve its name, as bufferevent_socket_get_dns_error(), so that
 * evutil_gai_strerror() prints the line a TCP bufferevent's code would.
 * libevent's bufferevent_socket_get_dns_error() cannot answer for an RDMA
 * bufferevent (it reads libevent's private struct, which evrdma cannot
 * set); this answers for both: on a socket bufferevent (the fallback of a
 * base without RDMA, or any other) it calls it. Bufferevents stacked on
 * an evrdma bufferevent are looked through.
 * @param bev a bufferevent
 * @return an EVUTIL_EAI_* code, or 0 (no name lookup failed, NULL)
 */
EVRDMA_EXPORT int evrdma_bufferevent_get_dns_error(struct bufferevent *bev);

/**
 * What carries the bufferevent's bytes, looking through bufferevents
 * stacked on it.
 * @param bev a bufferevent
 * @return EVRDMA_TRANSPORT_RDMA for an RDMA bufferevent (also while it
 *   connects), EVRDMA_TRANSPORT_TCP for one that fell back to TCP and for
 *   any other bufferevent (bufferevent_socket), EVRDMA_TRANSPORT_NONE for
 *   NULL
 */
EVRDMA_EXPORT int evrdma_bufferevent_get_transport(struct bufferevent *bev);

/**
 * What one bufferevent's connection carried so far (struct
 * evrdma_channel_stats, evrdma/channel.h): an RDMA bufferevent's are its
 * channel's (evrdma_channel_get_stats()); one over TCP (the fallback, or
 * any libevent socket bufferevent) reports its transport, state and the
 * kernel's TCP_INFO: data bytes sent and received, data segments, and
 * retransmissions, counted alike on the connecting and the accepting
 * end (struct evrdma_channel_stats says how).
 * @param bev the bufferevent
 * @param out filled in, up to @p outlen bytes
 * @param outlen sizeof(struct evrdma_channel_stats) as the caller was
 *   compiled (doc/ABI.md)
 * @return 0, or -1 with errno EINVAL (no bufferevent, no @p out, @p outlen
 *   below the first release's struct, a bufferevent of another kind) or
 *   the getsockopt() error
 */
EVRDMA_EXPORT int evrdma_bufferevent_get_stats(struct bufferevent *bev,
    struct evrdma_channel_stats *out, size_t outlen);

#ifdef __cplusplus
}
#endif
#endif /* EVRDMA_BUFFEREVENT_H_INCLUDED_ */
