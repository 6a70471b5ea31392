/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the per-event_base context.
 */
#ifndef EVRDMA_BASE_H_INCLUDED_
#define EVRDMA_BASE_H_INCLUDED_

/** @file evrdma/base.h
 * An evrdma_base binds evrdma to one libevent event_base. It owns the
 * rdma_cm event channel and, per RDMA device, one completion channel and
 * the completion queues shared by every connection on that device (each
 * connection has a protection domain of its own). All of them are libevent
 * read events on the event_base; evrdma creates no thread and never blocks
 * the loop. Several bases (one per thread, each on its own event_base) may
 * share a device: each hears the device's asynchronous events (a port
 * going down) for its own connections.
 */

#include <stddef.h>
#include <evrdma/util.h>
#include <evrdma/config.h>

#ifdef __cplusplus
extern "C" {
#endif

struct event_base;

/** An opaque evrdma context bound to one event_base. */
struct evrdma_base;

/**
 * Create an evrdma context on @p eb. Loads rdma-core on first use.
 * @param eb the libevent base; must outlive the evrdma_base. All evrdma
 *   callbacks run on the thread that runs @p eb.
 * @param cfg tunables, copied; NULL means the defaults of evrdma_config_new()
 * Opens nothing in the kernel yet: the rdma_cm channel and the devices
 * open with the first listener or connection (see "fork" below).
 * @return the context, or NULL with errno: ENOSYS (rdma-core missing),
 *   ENODEV (no RDMA device, or no /dev/infiniband/rdma_cm), EPERM (a
 *   forked child, below), EINVAL (bad configuration), ENOMEM.
 *   evrdma_errmsg() tells the cause. With evrdma_config_set_tcp_fallback()
 *   set, ENOSYS and ENODEV give a base instead, whose bufferevents are
 *   TCP ones (evrdma/bufferevent.h); a forked child still gets EPERM.
 *
 * fork(): a child forked before this process opened any RDMA object (a
 * daemon that creates its base, forks and serves in the child) uses evrdma
 * as if it had started fresh. A child forked after it cannot use RDMA
 * through evrdma at all, its parent's objects included: the kernel handles
 * it inherited are the parent's, so new bases fail with EPERM, posts and
 * registrations fail with EPERM, the parent's connections raise no
 * callback in the child (even on the parent's event_base), and the free
 * calls (evrdma_base_free() and the others) release nothing there: the
 * child's exit or exec takes the memory, and the parent carries on
 * undisturbed. Such a child should exec or exit. Channel buffers are not
 * inherited at all (MADV_DONTFORK): the peers' bytes neither cost a copy
 * at fork nor stay readable in the child. Memory you registered yourself
 * is copied for the child by the kernel (Linux 5.13 and later; on older
 * kernels evrdma calls ibv_fork_init() when it loads rdma-core), so
 * whatever the child writes there stays out of the parent's transfers.
 */
EVRDMA_EXPORT struct evrdma_base *evrdma_base_new(struct event_base *eb,
    const struct evrdma_config *cfg);

/**
 * Free the context and every RDMA resource it holds, at once, without
 * waiting for peers (they see the connections end).
 *
 * No callback of yours runs inside this call: work requests still
 * outstanding are cancelled without their callbacks (the base's end ends
 * the exactly-once rule, as freeing an event_base ends its events).
 * Objects you still hold stay valid, closed: connections, listeners,
 * channels and memory regions become husks that accept no work (posts,
 * connects and flushes fail with EPIPE; a channel's input still holds what
 * it received) and that you free with their usual free call, before or
 * after event_base_free(). Objects you already freed but that were still
 * closing are finished here.
 * Called from inside an evrdma callback, it takes effect once that
 * callback has returned to evrdma.
 * @param base the context; NULL is allowed
 */
EVRDMA_EXPORT void evrdma_base_free(struct evrdma_base *base);

/** @return the event_base given to evrdma_base_new() */
EVRDMA_EXPORT struct event_base *evrdma_base_get_event_base(
    struct evrdma_base *base);

/**
 * Counts of the live rdma-core objects owned by a base, for leak checks
 * and monitoring. Later releases add fields at its end only, never
 * removing or moving one: evrdma_base_get_stats() takes the size the
 * caller was compiled with (doc/ABI.md).
 */
struct evrdma_stats {
	unsigned conns;		/**< connections not yet fully destroyed */
	unsigned listeners;	/**< listeners */
	unsigned cm_ids;	/**< rdma_cm ids */
	unsigned qps;		/**< queue pairs */
	unsigned cqs;		/**< completion queues */
	unsigned mrs;		/**< registered memory regions */
	unsigned devices;	/**< opened devices (PD + completion channel) */
	unsigned reqs;		/**< work requests posted and not yet completed */
	/** channel data messages sent by RDMA WRITE, since the base was made */
	unsigned long long ch_written;
	/** channel data messages left for the peer to pull (RDMA READ), see
	 * evrdma_config_set_channel_pull() */
	unsigned long long ch_pulled;
	/** RDMA bufferevents (evrdma/bufferevent.h) not yet gone: held by
	 * their user, or still sending after bufferevent_free() */
	unsigned bevs;
	/** freed channels and bufferevents still ending: their peers have
	 * yet to take their output (evrdma_config_set_linger()) */
	unsigned lingering;
	/** of those, how many the linger bound or the cap reset, since the
	 * base was made */
	unsigned long long linger_resets;
	/** warm sets cached for the next channels
	 * (evrdma_config_set_warm()) */
	unsigned warm_sets;
	/** the bytes the warm sets keep registered (whole pages) */
	unsigned long long warm_bytes;
	/** channel connections that found a warm set, since the base was
	 * made */
	unsigned long long warm_hits;
	/** channel connections that looked for one and made their own */
	unsigned long long warm_misses;
	/** of the warm sets, those that hold a QP made for the next
	 * connection (not counted in qps) */
	unsigned warm_qps;
};

/**
 * Read the object counts (and channel message counters) of @p base:
 * @code
 * struct evrdma_stats st;
 *
 * if (evrdma_base_get_stats(base, &st, sizeof(st)) == 0)
 *	printf("%u connections\n", st.conns);
 * @endcode
 * @param base the context
 * @param out filled in, up to @p outlen bytes
 * @param outlen sizeof(struct evrdma_stats) as the caller was compiled.
 *   A program built against an earlier release passes a smaller size and
 *   gets the fields it knows; one built against a later release than the
 *   library it runs with gets 0 in the fields that release added.
 * @return 0; -1 with errno EINVAL when @p base or @p out is NULL or
 *   @p outlen is smaller than the struct of the first release (0.1.0)
 */
EVRDMA_EXPORT int evrdma_base_get_stats(struct evrdma_base *base,
    struct evrdma_stats *out, size_t outlen);

#ifdef __cplusplus
}
#endif
#endif /* EVRDMA_BASE_H_INCLUDED_ */
