/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: configuration object.
 */
#ifndef EVRDMA_CONFIG_H_INCLUDED_
#define EVRDMA_CONFIG_H_INCLUDED_

/** @file evrdma/config.h
 * Tunables of an evrdma_base. Every setter validates its input and returns
 * -1 with errno EINVAL for values outside the documented range, so that a
 * nonsense value never turns into a later failure or crash.
 */

#include <stddef.h>
#include <evrdma/util.h>

#ifdef __cplusplus
extern "C" {
#endif

/** An opaque set of tunables, copied by evrdma_base_new(). */
struct evrdma_config;

/** Which timeout evrdma_config_set_timeout() sets. */
enum evrdma_timeout {
	/** address resolution; default 2000 ms. rdma_cm enforces it and
	 * may still succeed at the deadline; the step fails with
	 * EVRDMA_REASON_TIMEOUT when rdma_cm says so, or at the latest
	 * 1 s after the deadline if rdma_cm never answers */
	EVRDMA_TIMEOUT_ADDR = 0,
	/** route resolution; default 2000 ms, enforced as the address's */
	EVRDMA_TIMEOUT_ROUTE,
	/** connect request to ESTABLISHED, the time the request waits in
	 * a busy listener's backlog included (a listener serves a queued
	 * request only this long after it came, since its requester waits
	 * no longer); default 30000 ms: a burst of a thousand connects
	 * takes seconds to serve (10.6 s on Soft-RoCE under emulation) */
	EVRDMA_TIMEOUT_CONNECT,
	/** wait for flush and DISCONNECTED at free; default 2000 ms.
	 * When it expires with requests outstanding, the completions
	 * already queued are polled first (up to 200 ms more); only what
	 * is still outstanding then completes as cancelled */
	EVRDMA_TIMEOUT_TEARDOWN,
	/** listener side: from accepting a request (the reply sent) to
	 * ESTABLISHED; default 5000 ms. A live requester's kernel answers
	 * at once; this bounds how long a silent one pins a half-open
	 * place with its QP and rings (evrdma_config_set_half_open()) */
	EVRDMA_TIMEOUT_ACCEPT
};

/**
 * Allocate a configuration holding the defaults:
 * send and receive queue depth 128, CQ size 4096 entries, inline threshold
 * 64 bytes, timeouts as listed in evrdma_timeout, polling budget 64
 * completions per wake-up, rnr_retry 7.
 * @return a new configuration (free with evrdma_config_free()), or NULL
 *   with errno ENOMEM
 */
EVRDMA_EXPORT struct evrdma_config *evrdma_config_new(void);

/** Free a configuration. NULL is allowed. */
EVRDMA_EXPORT void evrdma_config_free(struct evrdma_config *cfg);

/**
 * Set the work-queue depths of every QP created by the base.
 * @param send send queue entries, 1..16384
 * @param recv receive queue entries, 1..16384
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_queue_depth(struct evrdma_config *cfg,
    unsigned send, unsigned recv);

/**
 * Set the number of entries of each shared completion queue. Connections
 * reserve send+recv entries in a CQ; when one is full another CQ is made on
 * the same completion channel. Must be at least send+recv queue depth
 * (checked by evrdma_base_new()).
 * @param entries 64..1048576 (clamped to the device's max_cqe at use)
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_cq_size(struct evrdma_config *cfg,
    unsigned entries);

/**
 * Set the largest SEND / RDMA WRITE payload sent inline (copied into the
 * work request, so the buffer is reusable at once). 0 disables inline.
 * Lowered to what the device accepts when a QP is created.
 * @param bytes 0..1024
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_inline_threshold(struct evrdma_config *cfg,
    unsigned bytes);

/**
 * Set one of the timeouts.
 * @param which an evrdma_timeout
 * @param ms 1..600000 milliseconds
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_timeout(struct evrdma_config *cfg,
    int which, unsigned ms);

/**
 * Set how many completions are handled per wake-up before yielding to the
 * rest of the event loop (polling resumes on the next loop iteration).
 * @param completions 1..65536
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_poll_budget(struct evrdma_config *cfg,
    unsigned completions);

/**
 * Busy polling, the RDMA counterpart of the kernel's SO_BUSY_POLL: after a
 * wake-up that found completions, keep polling the device's completion
 * queues for up to @p usec microseconds before going back to sleep on the
 * completion channel. A reply that arrives within that time is handled
 * without the wake-up (an interrupt, a context switch and two system calls
 * per message), which is most of an event-driven round trip. A spin goes
 * on through up to 16 polls that find completions (their callbacks run
 * inside it) and then yields, so the loop serves its other events between
 * spins; the spin ends, and the loop sleeps, once no completion has come
 * for about @p usec. It takes CPU time up to @p usec after each burst of
 * traffic. 0 (the default) never spins.
 * @param usec 0..100000 microseconds
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_busy_poll(struct evrdma_config *cfg,
    unsigned usec);

/**
 * Bound what connect requests can pin on a listener before they are
 * established: at most @p max connections per listener are half-open
 * (accepted, with their QP and, for channels, their registered rings,
 * but not yet established); further requests wait in the listener's
 * backlog holding nothing, and are served as places free up. Default 32.
 * @param max 1..65536
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_half_open(struct evrdma_config *cfg,
    unsigned max);

/**
 * Keepalive of channels: a connection that has seen no completion (no
 * message, no acknowledgement) for @p idle_ms is probed with a zero-length
 * RDMA WRITE, which consumes nothing at the peer and is answered by its
 * device; when @p count intervals of @p interval_ms pass without any
 * completion (the probe's or another's; the transport's own retries may
 * end it first), the connection ends with EVRDMA_REASON_PEER_DEAD. A peer
 * whose host died, hangs or is cut off is therefore found after between
 * idle + interval * count and 2 * idle + interval * count (the idle time
 * is checked once per period, not per completion), busy or idle: requests
 * that never complete count as silence too. So does a raw connection
 * whose sends wait that long on the peer's receives (RNR retries): turn
 * keepalive off for a peer that may post its receives that late. No
 * thread, no timer per message:
 * one timer per connection, re-armed at the idle interval. Default: on,
 * 5000 ms, 1000 ms, 3. Raw connections use evrdma_conn_set_keepalive().
 * @param idle_ms 0 (off) or 1..600000
 * @param interval_ms 1..600000
 * @param count 1..100
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_keepalive(struct evrdma_config *cfg,
    unsigned idle_ms, unsigned interval_ms, unsigned count);

/**
 * The RC transport's retry budget: how long a request waits for the
 * peer's acknowledgement before it is resent (rounded up to what the
 * transport can express, 4.096 us * 2^n; 0 leaves it to rdma_cm, which
 * derives it from the path, about 0.5 s on Soft-RoCE, kept between 17 ms
 * and 4.3 s whatever the peer's request or reply says), and how many
 * times (0..7, default 6). A request whose retries run out fails with
 * ETIMEDOUT and ends its connection with EVRDMA_REASON_PEER_DEAD: a busy
 * connection to a dead peer learns it within about ack_timeout *
 * (retries + 1). Both sides of a connection use their own budget, never
 * what the peer asked for. Soft-RoCE (rxe) takes 7 to mean "retry for
 * ever", so that only the keepalive finds a dead peer then.
 * @param ack_timeout_ms 0..60000
 * @param retries 0..7
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_transport_retry(
    struct evrdma_config *cfg, unsigned ack_timeout_ms, unsigned retries);

/**
 * Set the RNR retry count of raw connections (0..7, 7 means retry for
 * ever, the default): how often a SEND that finds no receive posted at
 * the peer is retried before it fails. The raw core leaves flow control
 * to the user. A connection's QP uses its own count, never what the
 * peer's request or reply asks for (this count is also what a connection
 * asks of its peer). Channels decide their own: none toward a peer's own
 * ring, whose credits guarantee a receive, so that an RNR fails the
 * connection at once; for ever toward a peer on a shared receive queue
 * (evrdma/srq.h), which its keepalive bounds.
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_rnr_retry(struct evrdma_config *cfg,
    unsigned count);

/**
 * Bound the channels and bufferevents that the application freed while
 * their peers had yet to take their output (lingering, as a closed
 * socket's kernel still sends what it accepted). Each waits while its peer
 * makes progress, a teardown timeout (EVRDMA_TIMEOUT_TEARDOWN) at a time,
 * but never longer than @p max_ms after the free: then its output is
 * dropped and it is reset (the peer sees an error, never a clean end of a
 * cut stream), gone a teardown timeout later at the most. And at most
 * @p max_count of a base linger: past that, the oldest is reset. The
 * base's statistics count both (evrdma_base_get_stats()). A peer that
 * takes a byte now and then therefore cannot keep a freed connection, its
 * QP and its memory, for longer, nor more of them.
 * @param max_ms 1..600000 (default 30000)
 * @param max_count 1..1048576 (default 1024)
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_linger(struct evrdma_config *cfg,
    unsigned max_ms, unsigned max_count);

/**
 * Keep the protection domains and registered rings of ended channels ready
 * for the next ones (warm sets), so that a connection pays neither their
 * allocation nor their registration. A channel on a ring of its own
 * leaves its set when its connection is gone, if nothing else was
 * registered in its protection domain and no evbuffer still refers to its
 * rings; the set is zeroed first, and the next channel on that device
 * with the same ring sizes takes it. A former peer reaches nothing of a
 * set once its connection is gone (its QP is destroyed; see
 * doc/SECURITY.md). A cached set also holds a new QP, never connected,
 * made from the loop, which the next connection takes in place of making
 * one. At most @p max_sets are cached, oldest out first;
 * each goes after @p idle_ms unused, and all go when registering more
 * would exceed RLIMIT_MEMLOCK. evrdma_base_get_stats() counts them, their
 * bytes, and the connections that found one.
 * @param max_sets 0..1024 (0: none cached; default 4)
 * @param idle_ms 1..600000 (default 10000)
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_warm(struct evrdma_config *cfg,
    unsigned max_sets, unsigned idle_ms);

/**
 * What evrdma_config_set_warm() set.
 * @param cfg a configuration, or NULL for the defaults
 * @param max_sets filled in, unless NULL
 * @param idle_ms filled in, unless NULL
 * @return 0
 */
EVRDMA_EXPORT int evrdma_config_get_warm(const struct evrdma_config *cfg,
    unsigned *max_sets, unsigned *idle_ms);

/**
 * Set the channel ring of a configuration (used by every channel of a base
 * made with it): @p slots receive slots of @p slot_size bytes each, the same
 * again for sending, and @p max_input bytes that may be copied into input
 * (messages under 1 KiB, and any when the user holds more than half of the
 * slots by reference). Queue depths (evrdma_config_set_queue_depth()) must
 * be at least slots + 4; a receive queue of 2 * slots + 4 or more lets
 * receives be reposted in batches after the sends of a pass.
 * Defaults: 16 slots of 65536 bytes, max_input 4 MiB.
 * @param slots 2..4096
 * @param slot_size 64..4194304, a multiple of 64; also the largest message
 * @param max_input 0..1 GiB
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_channel_ring(struct evrdma_config *cfg,
    unsigned slots, unsigned slot_size, size_t max_input);

/**
 * The locked memory that one channel of a base made with @p cfg keeps
 * registered while it is open: its receive ring (a buffer per slot, 4 for
 * control messages and up to 4 spare ones where the receive queue has
 * room), its send ring and the pull descriptors after it, in whole pages.
 * That is what counts against RLIMIT_MEMLOCK (unless the process has
 * CAP_IPC_LOCK) for each channel, on either side of a connection; a
 * channel on an evrdma_srq has no receive ring of its own. Not counted:
 * while stream writes larger than a slot wait beyond the send ring, up to
 * 8 MiB more per channel, and 64 MiB for all channels of the base, holds
 * them (copied once, in chunks of a slot, each pinning a page more at
 * most; readable by the peer, as the send ring is, only where the peer
 * pulls; given back once sent; where the peer's slots are under 4 KiB,
 * or RLIMIT_MEMLOCK leaves no room, they wait in output instead); and the
 * queue buffers that hardware devices may pin.
 * @param cfg a configuration, or NULL for the defaults (2564 KiB with
 *   4 KiB pages)
 * @return bytes; 0 with errno EINVAL when @p cfg cannot make channels
 *   (queue depths below the ring's slots + 4)
 */
EVRDMA_EXPORT size_t evrdma_config_get_channel_pinned(
    const struct evrdma_config *cfg);

/**
 * Set from which size on messages this side receives may be pulled: the
 * sender leaves such a message in its send ring and writes only where it
 * is (8 bytes); the receiver fetches it with an RDMA READ into its receive
 * slot. The bytes move as they would by the sender's RDMA WRITE, but the
 * work of moving them is the receiver's: a software RDMA device
 * (Soft-RoCE) does that work on the CPU of the side that posts the
 * request. A sender pulls only while fewer than a quarter of its slots
 * wait for the receiver's READs, and writes the rest itself, so a busy
 * receiver hands the work back and both sides share it. On hardware a
 * pull costs a round trip, hidden while the ring keeps several messages
 * in flight. Pulls are used only where both devices support READs and the
 * send queue has room for them (depth above slots + 4). A sender freed
 * before the receiver has done its pulls keeps the connection for them,
 * up to the teardown timeout (EVRDMA_TIMEOUT_TEARDOWN); if the sender goes
 * away before, the receiver gets BEV_EVENT_ERROR. Counters:
 * evrdma_stats.ch_written and ch_pulled. Default 32768; 0: no pulls.
 * @param min_bytes 0..4194304
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_channel_pull(struct evrdma_config *cfg,
    unsigned min_bytes);

/**
 * One binary with or without RDMA. With @p enable set, evrdma_base_new()
 * does not fail for lack of RDMA: on a host without rdma-core (ENOSYS) or
 * without an RDMA device (ENODEV) it returns a base that makes TCP
 * bufferevents (evrdma/bufferevent.h: evrdma_bufferevent_new() returns a
 * plain bufferevent_socket, a listener listens on TCP) and on which every
 * other evrdma call fails with that errno; a warning through the log
 * callback says why. On a host with RDMA the base is as usual, and its
 * bufferevents fall back to TCP per connection: a connect that fails
 * over RDMA before it is established (no device routes to the peer, the
 * peer refuses RDMA or does not answer) is made again over TCP, and a
 * bufferevent listener listens on the same port number over TCP too.
 * evrdma_bufferevent_get_transport() says which a bufferevent uses.
 * Not a fallback: a child forked after its parent opened RDMA objects
 * still gets EPERM from evrdma_base_new() (evrdma/base.h, fork), since
 * what it lacks is the right to its parent's RDMA, not RDMA.
 * Default 0: RDMA only.
 * @param enable 0 or 1
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_tcp_fallback(struct evrdma_config *cfg,
    int enable);

/**
 * The configuration of the evrdma bases that the calls taking an
 * event_base (evrdma_bufferevent_socket_new(),
 * evrdma_evconnlistener_new_bind(), evrdma_evconnlistener_new():
 * evrdma/bufferevent.h) make for an event_base on which the program made
 * no base of its own: a program sets it once, in main(), and a library
 * that passes its event_base around needs no new argument. It applies to
 * such bases made from now on. Until it is set (and after NULL) they take
 * evrdma_config_new()'s defaults with the TCP fallback on, as a
 * replacement for bufferevent_socket_new() must not fail for want of
 * RDMA. For another configuration on one event_base, make a base there
 * with evrdma_base_new(): the event_base calls use it. Any thread may
 * call this.
 * @param cfg the configuration, copied; NULL: the built-in default
 * @return 0, or -1 with errno EINVAL (a CQ size below the queue depths,
 *   which evrdma_base_new() would refuse)
 */
EVRDMA_EXPORT int evrdma_config_set_default(const struct evrdma_config *cfg);

#ifdef __cplusplus
}
#endif
#endif /* EVRDMA_CONFIG_H_INCLUDED_ */
