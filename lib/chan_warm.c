/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: warm sets, a bounded cache of the protection domains and
 * registered rings of channels that ended (chan_warm.h).
 *
 * Isolation holds across reuse without new keys. A set goes into the
 * cache only when its connection's QP is destroyed and its protection
 * domain holds nothing but its two rings, and it goes in zeroed. A remote
 * peer reaches registered memory only through a QP of the same protection
 * domain connected to it; the next connection's QP is the set's only one,
 * connected to the next peer. So a former peer's keys reach nothing of a
 * set once its connection is gone, wherever the set went: its accesses
 * fail with a remote access error on its own QP (tests/test_warm.c
 * attacks this). The rings' keys are the new peer's to learn anyway.
 *
 * The cache holds at most cfg.warm_max sets; one cached longer than
 * cfg.warm_idle_ms goes (a timer of the base), and every set goes when
 * registered memory runs short (evrdma__warm_flush()).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chan_rdma.h"
#include "chan_warm.h"
#include "mem.h"
#include "rdma-sym.h"

/* what the set pins: its rings' pages */
static size_t
set_bytes(const struct evrdma__warm *w)
{
	return evrdma__page_span(w->rx->mem, w->rx->len) +
	    evrdma__page_span(w->tx->mem, w->tx->len);
}

static void
warm_arm(struct evrdma_base *base)
{
	struct evrdma__warm *w = TAILQ_FIRST(&base->warm);
	uint64_t now = evrdma__now_us(), due;

	if (!w || !base->warm_ev)
		return;
	due = w->since_us + (uint64_t)base->cfg.warm_idle_ms * 1000;
	evrdma__ev_timer_start_us(base->warm_ev, due > now ? due - now : 0);
}

/* (a cached set's two regions count as its, not as the base's regions:
 * a teardown that left nothing leaves no region, whatever it cached) */
static void
warm_unlink(struct evrdma_base *base, struct evrdma__warm *w)
{
	TAILQ_REMOVE(&base->warm, w, link);
	base->stats.warm_sets--;
	base->stats.warm_bytes -= set_bytes(w);
	base->stats.mrs += 2;
}

/* (the oldest first: every set older than the idle bound goes) */
static void
warm_timer(void *arg)
{
	struct evrdma_base *base = arg;
	struct evrdma__warm *w;
	uint64_t now = evrdma__now_us();

	while ((w = TAILQ_FIRST(&base->warm)) &&
	    w->since_us + (uint64_t)base->cfg.warm_idle_ms * 1000 <= now) {
		warm_unlink(base, w);
		evrdma__warm_free(w);
	}
	warm_arm(base);
}

/* (the device is removed: its sets hold it open) */
static void
warm_dev_dead(struct evrdma_base *base, struct evrdma_dev *dev)
{
	struct evrdma__warm *w, *next;

	for (w = TAILQ_FIRST(&base->warm); w; w = next) {
		next = TAILQ_NEXT(w, link);
		if (evrdma__warm_pd(w)->dev == dev) {
			warm_unlink(base, w);
			evrdma__warm_free(w);
		}
	}
}

int
evrdma__warm_init(struct evrdma_base *base)
{
	TAILQ_INIT(&base->warm);
	base->dev_dead = warm_dev_dead;
	base->warm_ev = evrdma__ev_timer_new(base, warm_timer, base);
	return base->warm_ev ? 0 : -1;
}

void
evrdma__warm_fini(struct evrdma_base *base)
{
	evrdma__warm_flush(base);
	evrdma__ev_free(base->warm_ev);
	base->warm_ev = NULL;
}

void
evrdma__warm_flush(struct evrdma_base *base)
{
	struct evrdma__warm *w;

	while ((w = TAILQ_FIRST(&base->warm))) {
		warm_unlink(base, w);
		evrdma__warm_free(w);
	}
}

void
evrdma__warm_free(struct evrdma__warm *w)
{
	if (!w)
		return;
	/* the regions first: the domain's last reference goes with them */
	evrdma_mr_free(w->rx_mr);
	evrdma_mr_free(w->tx_mr);
	evrdma__ring_unref(w->rx);
	evrdma__ring_unref(w->tx);
	free(w);
}

struct evrdma__pd *
evrdma__warm_pd(const struct evrdma__warm *w)
{
	return w->rx_mr->pd;
}

struct evrdma__warm *
evrdma__warm_take(struct evrdma_base *base, struct evrdma_dev *dev,
    size_t rx_len, size_t tx_len)
{
	struct evrdma__warm *w, *next;

	/* the newest first: its pages are the likeliest in the caches */
	for (w = TAILQ_LAST(&base->warm, evrdma__warm_q); w; w = next) {
		next = TAILQ_PREV(w, evrdma__warm_q, link);
		if (evrdma__warm_pd(w)->dev->dead) {
			warm_unlink(base, w);
			evrdma__warm_free(w);
			continue;
		}
		if (evrdma__warm_pd(w)->dev != dev || w->rx->len != rx_len ||
		    w->tx->len != tx_len)
			continue;
		warm_unlink(base, w);
		base->stats.warm_hits++;
		return w;
	}
	base->stats.warm_misses++;
	return NULL;
}

int
evrdma__warm_give(struct evrdma_base *base, struct ch_ring *rx,
    struct evrdma_mr *rx_mr, struct ch_ring *tx, struct evrdma_mr *tx_mr)
{
	struct evrdma__warm *w;

	/* Only what nobody else can reach: rings that no evbuffer refers
	 * to any more, regions with nothing outstanding, in a domain that
	 * holds them alone (no spill, no QP), on a device that lives. */
	if (!base->cfg.warm_max || base->freeing || evrdma__forked ||
	    !rx || !tx || !rx_mr || !tx_mr || rx->refs != 1 ||
	    tx->refs != 1 || rx_mr->freed || tx_mr->freed || rx_mr->inflight ||
	    tx_mr->inflight || !rx_mr->base || !tx_mr->base ||
	    rx_mr->pd != tx_mr->pd || rx_mr->pd->refcnt != 2 ||
	    rx_mr->pd->dev->dead || !(w = calloc(1, sizeof(*w))))
		return -1;
	/* the bytes of this connection are no next one's */
	memset(rx->mem, 0, rx->len);
	memset(tx->mem, 0, tx->len);
	rx->owner = tx->owner = NULL;
	w->rx = rx;
	w->tx = tx;
	w->rx_mr = rx_mr;
	w->tx_mr = tx_mr;
	w->since_us = evrdma__now_us();
	if (base->stats.warm_sets >= base->cfg.warm_max) {
		struct evrdma__warm *old = TAILQ_FIRST(&base->warm);

		warm_unlink(base, old);
		evrdma__warm_free(old);
	}
	TAILQ_INSERT_TAIL(&base->warm, w, link);
	base->stats.warm_sets++;
	base->stats.warm_bytes += set_bytes(w);
	base->stats.mrs -= 2;
	if (w == TAILQ_FIRST(&base->warm))
		warm_arm(base);
	return 0;
}
