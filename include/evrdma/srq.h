/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: shared receive queues for raw connections and for channels.
 */
#ifndef EVRDMA_SRQ_H_INCLUDED_
#define EVRDMA_SRQ_H_INCLUDED_

/** @file evrdma/srq.h
 * A shared receive queue (SRQ) is one pool of posted receives that many
 * raw connections of one device draw from, so that a server with a
 * thousand mostly idle connections keeps a few hundred receive buffers
 * posted instead of a few on every connection.
 *
 * The contract:
 * - Receives are posted to the queue (evrdma_srq_post_recv()), never to a
 *   connection that uses it (evrdma_conn_post_recv() fails with EINVAL).
 *   Each receive completes exactly once: with the connection whose peer's
 *   SEND filled it; with @c conn NULL when the application had already
 *   freed that connection (evrdma_conn_free()) by the time the completion
 *   is polled; or, when the queue is freed with receives still posted,
 *   with @c conn NULL and status ECANCELED. A listener's connection is
 *   never named before its accept callback: what its peer sent earlier
 *   (it may send once accepted, and a disabled listener holds established
 *   connections) completes right after that callback returns, in order,
 *   or with @c conn NULL, in order too, as soon as the connection went
 *   before it was handed out.
 *   Such a connection holds at most max_wr / 8 receives (4 at least), all
 *   of them together at most max_wr / 2: one that takes more is dropped,
 *   as a full listen queue drops, and what it took completes with
 *   @c conn NULL.
 * - The connections of a queue share its protection domain, so a region
 *   one of them registers could be reached by every other one's peer.
 *   evrdma therefore refuses remote access on them: evrdma_mr_reg() with
 *   EVRDMA_ACCESS_REMOTE_* on such a connection fails with EPERM. They
 *   SEND, RECV, and READ, WRITE and do atomics on their peer's memory;
 *   a peer reaches only the receive buffer its SEND consumed.
 * - A SEND larger than the receive it consumed fails that connection only
 *   (its event callback gets EVRDMA_EV_ERROR, EVRDMA_REASON_QP_FATAL; the
 *   receive completes with conn set and status EIO); the queue and the
 *   other connections go on.
 * - The limit callback (evrdma_srq_set_limit()) says when fewer than a
 *   given number of receives remain posted: post more from it.
 *
 * Lifetime: the queue lives until evrdma_srq_free() and the last
 * connection using it are gone, whichever comes last.
 *
 * Channels, and bufferevents over them, use queues of their own kind
 * (evrdma_channel_srq_new()), whose buffers evrdma posts itself.
 */

#include <stddef.h>
#include <evrdma/util.h>
#include <evrdma/conn.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evrdma_base;
struct evrdma_listener;
struct evrdma_mr;
struct sockaddr;

/** An opaque shared receive queue. */
struct evrdma_srq;
struct evrdma_channel;
struct bufferevent;

/**
 * Called (from the loop) once after fewer than the armed limit of receives
 * remain posted; the limit is then disarmed: arm it again with
 * evrdma_srq_set_limit().
 */
typedef void (*evrdma_srq_limit_cb)(struct evrdma_srq *srq, void *arg);

/**
 * Create a shared receive queue on a device.
 * @param base the evrdma context
 * @param device the RDMA device's name (as evrdma_conn_get_device_name()
 *   gives it), or NULL for the only device of the host
 * @param max_wr the most receives posted at once, 1 to the device's limit
 *   and the configured CQ size (evrdma_config_set_cq_size())
 * @return the queue, or NULL with errno EINVAL (bad argument, several
 *   devices and @p device NULL), ENODEV (no such device), ENOSYS (the
 *   device has no SRQ), ENOMEM, or the provider's error
 */
EVRDMA_EXPORT struct evrdma_srq *evrdma_srq_new(struct evrdma_base *base,
    const char *device, unsigned max_wr);

/**
 * Free the queue. The receives still posted complete with ECANCELED (conn
 * NULL) once no connection uses the queue any more; until then they serve
 * those connections. A queue whose base was freed (evrdma_base_free()) is
 * already released; this frees its handle. NULL is allowed.
 */
EVRDMA_EXPORT void evrdma_srq_free(struct evrdma_srq *srq);

/**
 * Register memory for the queue's receive buffers: local write access
 * only (see the file's contract). Free it with evrdma_mr_free(); it may be
 * used by the connections of the queue for sends as well.
 * @return the region, or NULL with errno EINVAL (no queue, no memory),
 *   EPIPE (the queue was freed), or as evrdma_mr_reg()
 */
EVRDMA_EXPORT struct evrdma_mr *evrdma_srq_mr_reg(struct evrdma_srq *srq,
    void *addr, size_t len);

/**
 * Post a receive into [off, off+len) of @p mr (a region of this queue's).
 * @p cb gets the connection whose peer's SEND filled it (see the file's
 * contract).
 * @return 0, or -1 with errno EINVAL (range, a region of another queue or
 *   connection), EAGAIN (max_wr receives posted), EPIPE (the queue was
 *   freed), or ibv_post_srq_recv()'s error
 */
EVRDMA_EXPORT int evrdma_srq_post_recv(struct evrdma_srq *srq,
    struct evrdma_mr *mr, size_t off, size_t len, evrdma_req_cb cb,
    void *arg);

/**
 * Arm the limit: @p cb is called once when fewer than @p limit receives
 * remain posted. @p limit 0 disarms.
 * @return 0, or -1 with errno EINVAL (@p limit not below max_wr, or no
 *   callback), EPIPE (the queue was freed), EPERM (in a forked child),
 *   ENOSYS (the device cannot), or the provider's error
 */
EVRDMA_EXPORT int evrdma_srq_set_limit(struct evrdma_srq *srq,
    unsigned limit, evrdma_srq_limit_cb cb, void *arg);

/** @return how many receives are posted and not yet completed */
EVRDMA_EXPORT unsigned evrdma_srq_get_posted(const struct evrdma_srq *srq);

/**
 * Make @p conn draw its receives from @p srq: before
 * evrdma_conn_connect(). The connection's device must be the queue's
 * (else the connect fails: EVRDMA_EV_ERROR, EVRDMA_REASON_RESOURCE, errno
 * EINVAL).
 * @return 0, or -1 with errno EINVAL (connect already called, a queue
 *   set already, a queue of another base), EPIPE (the queue was freed)
 */
EVRDMA_EXPORT int evrdma_conn_set_srq(struct evrdma_conn *conn,
    struct evrdma_srq *srq);

/**
 * Make every connection the listener @p lst accepts from now on draw its
 * receives from @p srq (NULL: their own again): a raw listener takes a
 * queue of evrdma_srq_new(), a channel or bufferevent listener one of
 * evrdma_channel_srq_new(). A connect request arriving on another device
 * than the queue's is rejected, and so is a channel's when the queue has
 * no room for another.
 * @return 0, or -1 with errno EINVAL (a queue of the other kind, a queue
 *   of another base, a listener that is neither), EPIPE (the queue was
 *   freed)
 */
EVRDMA_EXPORT int evrdma_listener_set_srq(struct evrdma_listener *lst,
    struct evrdma_srq *srq);

/**
 * A shared receive queue for channels (and bufferevents over them) on
 * @p device (NULL: the only one): @p nbuf receive buffers of the base's
 * channel slot size (evrdma_config_set_channel_ring()), which evrdma
 * keeps posted itself. Channels use it through evrdma_channel_set_srq()
 * or evrdma_listener_set_srq(), bufferevents through
 * evrdma_bufferevent_set_srq() or the listener's; raw connections,
 * evrdma_srq_post_recv() and evrdma_srq_mr_reg() refuse it. Free it with
 * evrdma_srq_free().
 *
 * A channel on the queue lends its peer credits from the pool instead of
 * holding a receive ring of its own (doc/channel-protocol.md, "Lending").
 * What the pool promises, whatever its peers do:
 *  - A connection commits nothing of the pool until it is established:
 *    then its channel takes one data credit, one buffer (its control
 *    messages, rare and held only until the next poll, draw on the
 *    buffers nobody was promised). So a queue of @p nbuf buffers holds
 *    about @p nbuf - @p nbuf / 16 channels, idle or not.
 *  - When there is no room for another, the channel idle longest (no
 *    message either way for a second, by default) is cut off to make
 *    room (EVRDMA_REASON_EVICTED), once the newcomer is established: a
 *    newcomer gets in whatever idle connections strangers hold. With
 *    nobody idle so long, a connect fails (EVRDMA_REASON_RESOURCE; a
 *    listener rejects it, EVRDMA_REASON_REJECTED at the requester), and
 *    those holding more than their share are asked for it back, so that
 *    a later one may find room. evrdma_channel_srq_set_admission() sets
 *    the idle time, a limit per address, and a callback that hears of
 *    each refusal and eviction.
 *  - A peer is lent more (up to its ring's R) when it runs short, while
 *    the pool has buffers nobody was promised, toward an even share; a
 *    sixteenth of the buffers, at most 64, is kept back.
 *  - A peer holds more than its share no longer than it uses it: a peer
 *    that sent nothing for a second, and every peer over its share when
 *    the pool runs out, is asked to give back what it does not use; one
 *    that does not within 3 seconds is cut off (EVRDMA_REASON_PROTOCOL).
 *    A channel whose connection ended keeps only the buffers its
 *    application still holds.
 *  - A peer that breaks the credit rules is cut off when its messages are
 *    polled; until then its extra messages (or many control messages
 *    at once) may take buffers promised to others, whose peers then
 *    retry (an evrdma peer of a queue retries an RNR for ever, after
 *    0.64 ms each time, not rdma_cm's 655; its keepalive ends a queue
 *    that never posts): an honest channel waits about one poll of the
 *    queue, not more
 *    (measured in the Soft-RoCE guest: 9-53 ms for a 64-byte echo while
 *    a 200-message burst was caught, 2-20 ms without; test_chan_isolation.c).
 * Channels on a queue do not pull large messages (their regions share the
 * queue's protection domain, where nothing may be remotely readable).
 *
 * @return the queue, or NULL with errno EINVAL (@p nbuf below 16 or above
 *   the CQ size or the device's limit), ENODEV, ENOSYS (the device has no
 *   SRQ), ENOMEM, or the provider's error
 */
EVRDMA_EXPORT struct evrdma_srq *evrdma_channel_srq_new(
    struct evrdma_base *base, const char *device, unsigned nbuf);

/** What a channel queue's admission did (evrdma_admission_cb). */
enum evrdma_admission_event {
	/** a connect refused: no room, and nobody idle long enough */
	EVRDMA_ADMISSION_REFUSED = 1,
	/** a connect refused: its address holds the per-address limit */
	EVRDMA_ADMISSION_REFUSED_ADDRESS,
	/** a channel idle longest cut off to make room for a newcomer (its
	 * event callback gets BEV_EVENT_ERROR, EVRDMA_REASON_EVICTED) */
	EVRDMA_ADMISSION_EVICTED
};

/**
 * Called (from the loop) when a channel queue refuses a connect or
 * evicts a channel: @p event is an evrdma_admission_event, @p peer the
 * address of the refused or evicted channel's peer. The queue may be
 * freed from inside.
 */
typedef void (*evrdma_admission_cb)(struct evrdma_srq *srq, int event,
    const struct sockaddr *peer, int socklen, void *arg);

/**
 * Choose who goes when the channel queue @p srq (evrdma_channel_srq_new())
 * is full, and hear of it.
 * @param evict_idle_ms a newcomer that finds no room evicts the channel
 *   whose connection carried no message, either way, for longest, once
 *   that is at least this long (rounded up to whole seconds); 0: never
 *   evict (the newcomer is refused). Default 1000.
 * @param per_address the most channels on the queue whose peers share one
 *   IP address (connects beyond are refused); 0: no limit (the default)
 * @param cb called for each refusal and eviction, or NULL
 * @return 0, or -1 with errno EINVAL (not a queue of channels,
 *   @p evict_idle_ms over 3600000), EPIPE (the queue was freed)
 */
EVRDMA_EXPORT int evrdma_channel_srq_set_admission(struct evrdma_srq *srq,
    unsigned evict_idle_ms, unsigned per_address, evrdma_admission_cb cb,
    void *arg);

/**
 * Make the channel @p ch draw its receives from @p srq (a queue of
 * evrdma_channel_srq_new()): before evrdma_channel_connect().
 * @return 0, or -1 with errno EINVAL (not a queue of channels, buffers of
 *   another size than the channel's slots, connect already called, a
 *   queue set already, a queue of another base), EPIPE (the queue was
 *   freed)
 */
EVRDMA_EXPORT int evrdma_channel_set_srq(struct evrdma_channel *ch,
    struct evrdma_srq *srq);

/**
 * Make the RDMA bufferevent @p bev (of evrdma_bufferevent_new()) draw its
 * receives from @p srq (a queue of evrdma_channel_srq_new()), as
 * evrdma_channel_set_srq() does for a channel: before
 * evrdma_bufferevent_connect(). A connect that falls back to TCP
 * (evrdma_config_set_tcp_fallback()) leaves the queue unused. Bufferevents
 * that a listener accepts use the listener's queue
 * (evrdma_listener_set_srq()).
 * @return 0, or -1 with errno EINVAL (not an RDMA bufferevent of
 *   evrdma_bufferevent_new(), already connecting or connected, or as
 *   evrdma_channel_set_srq()), EPIPE (the queue was freed)
 */
EVRDMA_EXPORT int evrdma_bufferevent_set_srq(struct bufferevent *bev,
    struct evrdma_srq *srq);

#ifdef __cplusplus
}
#endif

#endif /* EVRDMA_SRQ_H_INCLUDED_ */
