/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: warm sets (chan_warm.c). A channel that ends gives its
 * protection domain and its two registered rings, zeroed, to a bounded
 * cache of its base; the next channel on that device with rings of the
 * same sizes takes them, and its connection pays neither the allocation,
 * the page faults nor the registrations.
 */
#ifndef EVRDMA_CHAN_WARM_H_INCLUDED_
#define EVRDMA_CHAN_WARM_H_INCLUDED_

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "evrdma-internal.h"

struct evrdma_base;
struct evrdma_dev;
struct evrdma_mr;
struct evrdma__pd;
struct ch_ring;

/* One set: both rings, each registered in the set's own protection
 * domain, which holds nothing else but, once the loop made it, a QP that
 * no connection has used (in the RESET state, for the base's depths: a
 * new QP number, so no former peer's packet is for it). */
struct evrdma__warm {
	struct ch_ring *rx, *tx;
	struct evrdma_mr *rx_mr, *tx_mr;
	struct evrdma__qp_made qp;	/* (qp.qp NULL: none yet) */
	uint64_t since_us;		/* when it was cached */
	TAILQ_ENTRY(evrdma__warm) link;
};

/* A cached set of @p dev whose rings have these lengths, out of the cache
 * (the caller owns it), or NULL (counted as a miss). */
struct evrdma__warm *evrdma__warm_take(struct evrdma_base *base,
    struct evrdma_dev *dev, size_t rx_len, size_t tx_len);
/* The set's protection domain. */
struct evrdma__pd *evrdma__warm_pd(const struct evrdma__warm *w);
/* Its QP, if it has one, into @p qp (the caller's from here on). */
void evrdma__warm_take_qp(struct evrdma__warm *w, struct evrdma__qp_made *qp);
/* Cache the rings of a channel whose connection is gone, each registered
 * in their own protection domain, which holds nothing else, and referenced
 * by nothing but the channel: they are zeroed, and the cache owns them.
 * -1 when the cache is off or they do not qualify: the caller keeps
 * them. */
int evrdma__warm_give(struct evrdma_base *base, struct ch_ring *rx,
    struct evrdma_mr *rx_mr, struct ch_ring *tx, struct evrdma_mr *tx_mr);
/* A listener accepted a channel on @p dev: sets for the base's channel
 * ring are made ahead of the next requests, once the loop has none. */
void evrdma__warm_want(struct evrdma_base *base, struct evrdma_dev *dev);
/* Deregister and free a set that is no longer cached (NULL: nothing). */
void evrdma__warm_free(struct evrdma__warm *w);
/* Free every cached set (base free, or registered memory ran short). */
void evrdma__warm_flush(struct evrdma_base *base);
int evrdma__warm_init(struct evrdma_base *base);
void evrdma__warm_fini(struct evrdma_base *base);

#endif /* EVRDMA_CHAN_WARM_H_INCLUDED_ */
