/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: connections (one reliable-connected QP each) and work requests.
 */
#ifndef EVRDMA_CONN_H_INCLUDED_
#define EVRDMA_CONN_H_INCLUDED_

/** @file evrdma/conn.h
 * A connection is one RC queue pair set up by rdma_cm. The active side
 * steps ADDR_RESOLVED -> ROUTE_RESOLVED -> (QP created) -> ESTABLISHED, each
 * step with its own timeout (evrdma_config_set_timeout()); the passive side
 * gets connections from an evrdma_listener.
 *
 * Work requests (SEND, RECV, RDMA WRITE, READ, atomics) each take their own
 * completion callback. Rules, in the spirit of libuv:
 *  - a post function that returns -1 never calls its callback;
 *  - a post function that returns 0 calls its callback exactly once, also
 *    when the connection fails or is freed: requests still outstanding then
 *    complete with status ECANCELED.
 * Callbacks run on the event_base's thread. A connection may be freed from
 * inside any of its callbacks.
 */

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <evrdma/util.h>
#include <evrdma/mr.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evrdma_base;
struct evdns_base;

/** An opaque connection. */
struct evrdma_conn;

/** @name Event flags passed to an evrdma_conn_event_cb
 * @{ */
#define EVRDMA_EV_CONNECTED	0x01	/**< ESTABLISHED; reason is EVRDMA_REASON_NONE */
#define EVRDMA_EV_EOF		0x02	/**< the peer disconnected in order */
#define EVRDMA_EV_ERROR		0x04	/**< failure; reason says which, errno may add detail */
/** @} */

/**
 * Connection event callback. Called once with EVRDMA_EV_CONNECTED when the
 * connection is established, and at most once with EVRDMA_EV_EOF or
 * EVRDMA_EV_ERROR when it ends (after which no further event arrives; the
 * user should then free it). rdma_cm reports the peer's disconnect apart
 * from the completions: EVRDMA_EV_EOF may come before those of receives
 * that the peer's last messages filled. They complete with their data
 * while the connection is not freed (a free completes them ECANCELED):
 * a raw connection's user that needs every byte frees it once its posted
 * receives have completed. (Channels keep that order themselves.)
 * @param conn the connection
 * @param what one EVRDMA_EV_* flag
 * @param reason an evrdma_reason (see evrdma_reason_str())
 * @param arg the pointer given to evrdma_conn_setcb()
 */
typedef void (*evrdma_conn_event_cb)(struct evrdma_conn *conn, short what,
    int reason, void *arg);

/** Kinds of work request, reported in evrdma_wc::opcode. */
enum evrdma_opcode {
	EVRDMA_OP_SEND = 0,		/**< evrdma_conn_post_send() */
	EVRDMA_OP_RECV,			/**< a receive matched by a SEND */
	EVRDMA_OP_RECV_WRITE_IMM,	/**< a receive consumed by an RDMA WRITE with immediate */
	EVRDMA_OP_WRITE,		/**< evrdma_conn_post_write() */
	EVRDMA_OP_READ,			/**< evrdma_conn_post_read() */
	EVRDMA_OP_CAS,			/**< evrdma_conn_post_cas() */
	EVRDMA_OP_FADD			/**< evrdma_conn_post_fadd() */
};

/** The completion of one work request. */
struct evrdma_wc {
	/** 0 on success; ECANCELED when the request was flushed or cancelled
	 * by teardown; EREMOTEIO for remote access or operation errors;
	 * ETIMEDOUT when the transport retries were exhausted; EIO otherwise. */
	int status;
	/** the raw enum ibv_wc_status, or -1 when cancelled without a WC */
	int wc_status;
	/** the kind of request (always valid: it is what was posted, or
	 * for receives, what arrived; a failed receive reports EVRDMA_OP_RECV) */
	int opcode;
	/** bytes received (receives only; 0 when status != 0). For
	 * EVRDMA_OP_RECV_WRITE_IMM it is the length of the peer's WRITE,
	 * whose bytes went to the region it named, not to this receive's
	 * buffer, which holds nothing: it may exceed that buffer. */
	uint32_t byte_len;
	/** immediate data, host byte order; valid when has_imm is set */
	uint32_t imm_data;
	/** nonzero when imm_data is valid */
	int has_imm;
};

/**
 * Completion callback of a work request.
 * @param conn the connection the request was posted on. During teardown
 *   the handle is still valid but accepts no new posts.
 * @param wc the completion, valid only during the call
 * @param arg the pointer given with the request
 */
typedef void (*evrdma_req_cb)(struct evrdma_conn *conn,
    const struct evrdma_wc *wc, void *arg);

/** @name Flags for evrdma_conn_new()
 * @{ */
/** No evrdma handshake in the private data: interoperates with any
 * rdma_cm peer (rping, perftest with -R, ...). */
#define EVRDMA_CONN_RAW		0x01
/** @} */

/**
 * Create an unconnected, active-side connection.
 * @param base the evrdma context
 * @param flags EVRDMA_CONN_* flags
 * @return the connection (free with evrdma_conn_free()), or NULL with errno
 *   EINVAL or ENOMEM
 */
EVRDMA_EXPORT struct evrdma_conn *evrdma_conn_new(struct evrdma_base *base,
    int flags);

/**
 * Set the event callback and its argument. May be called at any time.
 */
EVRDMA_EXPORT void evrdma_conn_setcb(struct evrdma_conn *conn,
    evrdma_conn_event_cb cb, void *arg);

/**
 * The argument last given to evrdma_conn_setcb() (NULL if none), as
 * bufferevent_getcb() gives a bufferevent's: a request callback that gets
 * only the connection, such as a shared receive queue's, finds the
 * application's object of that connection with it.
 */
EVRDMA_EXPORT void *evrdma_conn_get_cb_arg(const struct evrdma_conn *conn);

/**
 * Keepalive for this connection (channels get it from the base's
 * configuration, evrdma_config_set_keepalive(), which says how it works):
 * after @p idle_ms without any completion, a zero-length RDMA WRITE probes
 * the peer; @p count intervals of @p interval_ms more without a completion
 * end the connection with EVRDMA_EV_ERROR and EVRDMA_REASON_PEER_DEAD. The
 * probe consumes no receive at the peer and calls no callback of yours;
 * while it is out it takes one entry of the send queue (a post that finds
 * the queue full fails with EAGAIN, as it would for a request of yours).
 * May be called at any time; off by default for raw connections.
 * @param idle_ms 0 turns it off
 * @return 0, or -1 with errno EINVAL (interval or count 0 with idle set)
 */
EVRDMA_EXPORT int evrdma_conn_set_keepalive(struct evrdma_conn *conn,
    unsigned idle_ms, unsigned interval_ms, unsigned count);

/**
 * Set the private data sent with the connect request.
 * @param data copied; @p len at most 48 bytes (evrdma handshake) or 56
 *   bytes (EVRDMA_CONN_RAW)
 * @return 0, or -1 with errno EINVAL (too long) or EISCONN (already
 *   connecting)
 */
EVRDMA_EXPORT int evrdma_conn_set_private_data(struct evrdma_conn *conn,
    const void *data, size_t len);

/**
 * Start connecting to @p sa (IPv4 or IPv6; an IPv6 link-local address needs
 * its scope id). Returns at once; the outcome arrives at the event callback.
 * @return 0, or -1 with errno (EINVAL, EAFNOSUPPORT, EISCONN, or the
 *   rdma_cm error) and then no event callback for this attempt
 */
EVRDMA_EXPORT int evrdma_conn_connect(struct evrdma_conn *conn,
    const struct sockaddr *sa, int socklen);

/**
 * Resolve @p host without blocking (evdns) and connect to the first
 * address. A numeric host needs no DNS. A resolution failure arrives as
 * EVRDMA_EV_ERROR with EVRDMA_REASON_DNS.
 * @param dns the evdns base to use, or NULL for one owned by the
 *   evrdma_base (created on first use from /etc/resolv.conf and /etc/hosts)
 * @param family AF_INET, AF_INET6 or AF_UNSPEC
 * @param host host name or numeric address
 * @param port 1..65535
 * @return 0, or -1 with errno as evrdma_conn_connect()
 */
EVRDMA_EXPORT int evrdma_conn_connect_hostname(struct evrdma_conn *conn,
    struct evdns_base *dns, int family, const char *host, int port);

/**
 * Free a connection, at any time, also from inside any of its callbacks
 * and with requests in flight. The connection is disconnected, every
 * outstanding request completes exactly once (ECANCELED unless it had
 * already finished), and the QP and ids are destroyed once the flush and
 * DISCONNECTED have arrived or the teardown timeout expired. No event
 * callback runs after this call.
 * @param conn the connection; NULL is allowed
 */
EVRDMA_EXPORT void evrdma_conn_free(struct evrdma_conn *conn);

/**
 * The peer's rejection, after EVRDMA_REASON_REJECTED.
 * @param status receives the transport's reject status (IB CM reason)
 * @param evrdma_code receives the evrdma reject code (EVRDMA_REJECT_*) when
 *   the peer is an evrdma listener, else 0
 * @return 0, or -1 with errno ENOENT when the connection was not rejected
 */
EVRDMA_EXPORT int evrdma_conn_get_reject(struct evrdma_conn *conn,
    int *status, int *evrdma_code);

/** @name Reject codes sent by an evrdma listener
 * @{ */
#define EVRDMA_REJECT_VERSION	1	/**< unsupported handshake version */
#define EVRDMA_REJECT_PROTOCOL	2	/**< no or malformed evrdma handshake */
#define EVRDMA_REJECT_RESOURCES	3	/**< the listener ran out of resources */
#define EVRDMA_REJECT_APP	4	/**< the application refused (prepare callback) */
/** @} */

/**
 * The private data the peer sent (connect request on the passive side, the
 * accept reply on the active side), without evrdma's handshake header.
 * @param len receives its length
 * @return a pointer valid for the connection's life, or NULL if none
 */
EVRDMA_EXPORT const void *evrdma_conn_get_peer_private_data(
    struct evrdma_conn *conn, size_t *len);

/** @return the peer's address, or NULL before address resolution */
EVRDMA_EXPORT const struct sockaddr *evrdma_conn_get_peer_addr(
    struct evrdma_conn *conn);
/** @return the local address, or NULL before address resolution */
EVRDMA_EXPORT const struct sockaddr *evrdma_conn_get_local_addr(
    struct evrdma_conn *conn);
/** @return the RDMA device's name (e.g. "rxe0"), or NULL before address
 * resolution */
EVRDMA_EXPORT const char *evrdma_conn_get_device_name(
    struct evrdma_conn *conn);
/** @return the base the connection belongs to */
EVRDMA_EXPORT struct evrdma_base *evrdma_conn_get_base(
    struct evrdma_conn *conn);

/**
 * @name Posting work requests
 * Local buffers are given as (mr, off, len) and checked against the region
 * and its access flags; remote targets as (rem, roff) and checked against
 * the descriptor. Nothing is posted when a check fails.
 *
 * Errors (-1, callback never called): EINVAL (range or argument), EACCES
 * (region lacks the needed access), ENOTCONN (not established; RECV is
 * allowed from the prepare callback / QP creation on), EPIPE (connection
 * failing or freed), EAGAIN (the send or receive queue is full: retry from
 * a completion callback), EXDEV (region of another device or base),
 * EOPNOTSUPP (an RDMA READ or atomic that the device, or the peer, serves
 * none of: a peer may offer 0 responder resources when it connects or
 * accepts), or the error returned by ibv_post_send()/ibv_post_recv().
 * @{ */

/** Post a receive into [off, off+len) of @p mr (needs LOCAL_WRITE). */
EVRDMA_EXPORT int evrdma_conn_post_recv(struct evrdma_conn *conn,
    struct evrdma_mr *mr, size_t off, size_t len, evrdma_req_cb cb,
    void *arg);

/** SEND [off, off+len) of @p mr; len may be 0. */
EVRDMA_EXPORT int evrdma_conn_post_send(struct evrdma_conn *conn,
    struct evrdma_mr *mr, size_t off, size_t len, evrdma_req_cb cb,
    void *arg);

/** SEND with immediate data @p imm (host byte order). */
EVRDMA_EXPORT int evrdma_conn_post_send_imm(struct evrdma_conn *conn,
    struct evrdma_mr *mr, size_t off, size_t len, uint32_t imm,
    evrdma_req_cb cb, void *arg);

/** RDMA WRITE [off, off+len) of @p mr to @p roff in @p rem. */
EVRDMA_EXPORT int evrdma_conn_post_write(struct evrdma_conn *conn,
    struct evrdma_mr *mr, size_t off, size_t len,
    const struct evrdma_remote *rem, uint64_t roff, evrdma_req_cb cb,
    void *arg);

/** RDMA WRITE with immediate: also consumes one receive at the peer, which
 * completes as EVRDMA_OP_RECV_WRITE_IMM carrying @p imm. */
EVRDMA_EXPORT int evrdma_conn_post_write_imm(struct evrdma_conn *conn,
    struct evrdma_mr *mr, size_t off, size_t len,
    const struct evrdma_remote *rem, uint64_t roff, uint32_t imm,
    evrdma_req_cb cb, void *arg);

/** RDMA READ @p len bytes at @p roff of @p rem into [off, off+len) of
 * @p mr (needs LOCAL_WRITE). */
EVRDMA_EXPORT int evrdma_conn_post_read(struct evrdma_conn *conn,
    struct evrdma_mr *mr, size_t off, size_t len,
    const struct evrdma_remote *rem, uint64_t roff, evrdma_req_cb cb,
    void *arg);

/** Atomic compare-and-swap of the 8-byte word at @p roff (8-byte aligned):
 * if it equals @p compare it becomes @p swap. The original value is written
 * to 8 bytes at @p off of @p mr (needs LOCAL_WRITE), in host byte order. */
EVRDMA_EXPORT int evrdma_conn_post_cas(struct evrdma_conn *conn,
    struct evrdma_mr *mr, size_t off, const struct evrdma_remote *rem,
    uint64_t roff, uint64_t compare, uint64_t swap, evrdma_req_cb cb,
    void *arg);

/** Atomic fetch-and-add of @p add to the 8-byte word at @p roff (8-byte
 * aligned); the original value is written to 8 bytes at @p off of @p mr. */
EVRDMA_EXPORT int evrdma_conn_post_fadd(struct evrdma_conn *conn,
    struct evrdma_mr *mr, size_t off, const struct evrdma_remote *rem,
    uint64_t roff, uint64_t add, evrdma_req_cb cb, void *arg);
/** @} */

#ifdef __cplusplus
}
#endif
#endif /* EVRDMA_CONN_H_INCLUDED_ */
