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
 *
 * A channel listener asks for sets ahead of its next requests
 * (evrdma__warm_want()): once the loop has had no request for
 * WARM_FILL_IDLE_MS, one set is made per pass of a timer, fresh (its
 * pages are the kernel's zeroes), until WARM_READY of the base's ring
 * are ready on that device.
 *
 * A set also holds a QP made in its domain, unused (RESET), so that the
 * next connection does not pay ibv_create_qp() either: a set made ahead
 * gets one at once, a set given back gets one from the loop (a timer of 0
 * ms, one set per pass, after the events already due). A connection's
 * QP is never reused: it is destroyed with its connection, and the set's
 * is a new one, with a new number.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chan_rdma.h"
#include "chan_warm.h"
#include "mem.h"
#include "rdma-sym.h"

#define WARM_READY		2	/* sets made ahead, at most */
#define WARM_FILL_IDLE_MS	5	/* after the last request */

static void warm_fill(void *arg);
static void warm_qp_fill(void *arg);

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
	if (w->qp.qp)
		base->stats.warm_qps--;
}

/* (the sets of a dead device; then, the oldest first, every set older
 * than the idle bound) */
static void
warm_timer(void *arg)
{
	struct evrdma_base *base = arg;
	struct evrdma__warm *w, *next;
	uint64_t now = evrdma__now_us();

	for (w = TAILQ_FIRST(&base->warm); w; w = next) {
		next = TAILQ_NEXT(w, link);
		if (evrdma__warm_pd(w)->dev->dead) {
			warm_unlink(base, w);
			evrdma__warm_free(w);
		}
	}
	if (base->warm_fill_dev && base->warm_fill_dev->dead) {
		evrdma__dev_put(base->warm_fill_dev);
		base->warm_fill_dev = NULL;
	}
	while ((w = TAILQ_FIRST(&base->warm)) &&
	    w->since_us + (uint64_t)base->cfg.warm_idle_ms * 1000 <= now) {
		warm_unlink(base, w);
		evrdma__warm_free(w);
	}
	warm_arm(base);
}

/* (the device is removed or failed: its sets, which hold it open, go
 * from the loop, not inside the dispatch that tells, which still uses
 * the device: warm_timer()) */
static void
warm_dev_dead(struct evrdma_base *base, struct evrdma_dev *dev)
{
	(void)dev;
	if (base->warm_ev)
		evrdma__ev_timer_start_us(base->warm_ev, 0);
}

/* (registered memory runs short: the sets go first) */
static int
warm_pin_relief(struct evrdma_base *base)
{
	if (TAILQ_EMPTY(&base->warm))
		return 0;
	evrdma__warm_flush(base);
	return 1;
}

int
evrdma__warm_init(struct evrdma_base *base)
{
	TAILQ_INIT(&base->warm);
	base->dev_dead = warm_dev_dead;
	base->pin_relief = warm_pin_relief;
	base->warm_ev = evrdma__ev_timer_new(base, warm_timer, base);
	base->warm_fill_ev = evrdma__ev_timer_new(base, warm_fill, base);
	base->warm_qp_ev = evrdma__ev_timer_new(base, warm_qp_fill, base);
	return base->warm_ev && base->warm_fill_ev && base->warm_qp_ev ? 0 :
	    -1;
}

void
evrdma__warm_fini(struct evrdma_base *base)
{
	evrdma__warm_flush(base);
	evrdma__ev_free(base->warm_ev);
	evrdma__ev_free(base->warm_fill_ev);
	evrdma__ev_free(base->warm_qp_ev);
	base->warm_ev = base->warm_fill_ev = base->warm_qp_ev = NULL;
	if (base->warm_fill_dev)
		evrdma__dev_put(base->warm_fill_dev);
	base->warm_fill_dev = NULL;
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
	/* the QP first, then the regions: the domain's last reference goes
	 * with them (a domain with a QP in it cannot go) */
	evrdma__qp_unmake(&w->qp);
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

void
evrdma__warm_take_qp(struct evrdma__warm *w, struct evrdma__qp_made *qp)
{
	*qp = w->qp;
	memset(&w->qp, 0, sizeof(w->qp));
}

struct evrdma__warm *
evrdma__warm_take(struct evrdma_base *base, struct evrdma_dev *dev,
    size_t rx_len, size_t tx_len)
{
	struct evrdma__warm *w;

	/* the newest first: its pages are the likeliest in the caches (a
	 * dead device's sets wait for warm_timer(), and are never taken:
	 * @p dev lives) */
	TAILQ_FOREACH_REVERSE(w, &base->warm, evrdma__warm_q, link)
		if (evrdma__warm_pd(w)->dev == dev && w->rx->len == rx_len &&
		    w->tx->len == tx_len) {
			warm_unlink(base, w);
			base->stats.warm_hits++;
			return w;
		}
	base->stats.warm_misses++;
	return NULL;
}

static void
warm_insert(struct evrdma_base *base, struct evrdma__warm *w)
{
	if (base->stats.warm_sets >= base->cfg.warm_max) {
		struct evrdma__warm *old = TAILQ_FIRST(&base->warm);

		warm_unlink(base, old);
		evrdma__warm_free(old);
	}
	TAILQ_INSERT_TAIL(&base->warm, w, link);
	base->stats.warm_sets++;
	base->stats.warm_bytes += set_bytes(w);
	base->stats.mrs -= 2;
	if (w->qp.qp)
		base->stats.warm_qps++;
	if (w == TAILQ_FIRST(&base->warm))
		warm_arm(base);
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
	warm_insert(base, w);
	if (base->warm_qp_ev)
		evrdma__ev_timer_start(base->warm_qp_ev, 0);
	return 0;
}

/* the base's channel rings: their lengths, and the send ring's access */
static size_t
cfg_rx_len(const struct evrdma_config *cfg)
{
	return (size_t)evrdma__rc_nbuf(cfg) * cfg->ch_slot_size;
}

static size_t
cfg_tx_len(const struct evrdma_config *cfg)
{
	return (size_t)cfg->ch_slots * cfg->ch_slot_size +
	    RC_SRING_EXTRA(cfg->ch_slots);
}

/* A QP for set @p w, for the base's depths: 0, or -1 (the set has none). */
static int
warm_make_qp(struct evrdma_base *base, struct evrdma__warm *w)
{
	const struct evrdma_config *cfg = &base->cfg;
	struct evrdma__pd *pd = evrdma__warm_pd(w);

	return evrdma__qp_make(pd->dev, pd, NULL, cfg->sq_depth,
	    cfg->rq_depth, cfg->inline_threshold, &w->qp);
}

/* A fresh set on @p dev for the base's channel ring, or NULL. */
static struct evrdma__warm *
warm_make(struct evrdma_base *base, struct evrdma_dev *dev)
{
	const struct evrdma_config *cfg = &base->cfg;
	struct evrdma__warm *w = calloc(1, sizeof(*w));
	struct evrdma__pd *pd = NULL;

	if (!w || evrdma__mem_pin_check(cfg_rx_len(cfg) + cfg_tx_len(cfg)) < 0 ||
	    !(pd = evrdma__pd_new(dev)) ||
	    !(w->rx = evrdma__ring_new(NULL, evrdma__rc_nbuf(cfg),
	    cfg->ch_slot_size, 0)) ||
	    !(w->tx = evrdma__ring_new(NULL, cfg->ch_slots, cfg->ch_slot_size,
	    RC_SRING_EXTRA(cfg->ch_slots))) ||
	    !(w->rx_mr = evrdma__mr_reg(base, pd, w->rx->mem, w->rx->len,
	    EVRDMA_ACCESS_LOCAL_WRITE)) ||
	    !(w->tx_mr = evrdma__mr_reg(base, pd, w->tx->mem, w->tx->len,
	    cfg->ch_pull_min ? EVRDMA_ACCESS_REMOTE_READ : 0))) {
		if (w) {
			evrdma_mr_free(w->rx_mr);
			if (w->rx)
				evrdma__ring_unref(w->rx);
			if (w->tx)
				evrdma__ring_unref(w->tx);
			free(w);
		}
		evrdma__pd_put(pd);
		return NULL;
	}
	evrdma__pd_put(pd);		/* its regions hold it */
	warm_make_qp(base, w);
	w->since_us = evrdma__now_us();
	return w;
}

/* (one set's QP per pass: the newest set without one, on a live device) */
static void
warm_qp_fill(void *arg)
{
	struct evrdma_base *base = arg;
	struct evrdma__warm *w, *todo = NULL;
	unsigned left = 0;

	if (base->freeing || evrdma__forked)
		return;
	TAILQ_FOREACH_REVERSE(w, &base->warm, evrdma__warm_q, link)
		if (!w->qp.qp && !evrdma__warm_pd(w)->dev->dead) {
			if (!todo)
				todo = w;
			else
				left++;
		}
	if (!todo || warm_make_qp(base, todo) < 0)
		return;		/* (none, or the device refuses: the
				 * connection will make its own) */
	base->stats.warm_qps++;
	if (left)
		evrdma__ev_timer_start(base->warm_qp_ev, 0);
}

/* (one set per pass, while the loop has no request) */
static void
warm_fill(void *arg)
{
	struct evrdma_base *base = arg;
	struct evrdma_dev *dev = base->warm_fill_dev;
	size_t rx = cfg_rx_len(&base->cfg), tx = cfg_tx_len(&base->cfg);
	struct evrdma__warm *w;
	unsigned ready = 0;

	if (!dev)
		return;
	TAILQ_FOREACH(w, &base->warm, link)
		if (evrdma__warm_pd(w)->dev == dev && w->rx->len == rx &&
		    w->tx->len == tx)
			ready++;
	if (dev->dead || base->freeing || ready >= WARM_READY ||
	    base->stats.warm_sets >= base->cfg.warm_max ||
	    !(w = warm_make(base, dev))) {
		base->warm_fill_dev = NULL;
		evrdma__dev_put(dev);
		return;
	}
	warm_insert(base, w);
	evrdma__ev_timer_start(base->warm_fill_ev, 0);
}

void
evrdma__warm_want(struct evrdma_base *base, struct evrdma_dev *dev)
{
	if (!base->cfg.warm_max || !base->warm_fill_ev || dev->dead)
		return;
	if (base->warm_fill_dev != dev) {
		if (base->warm_fill_dev)
			evrdma__dev_put(base->warm_fill_dev);
		dev->refcnt++;		/* until it is filled */
		base->warm_fill_dev = dev;
	}
	evrdma__ev_timer_start(base->warm_fill_ev, WARM_FILL_IDLE_MS);
}
