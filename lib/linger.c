/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the base's freed connections that are still ending (lingering):
 * a channel or a bufferevent over TCP that the application freed with
 * output its peer has yet to take. Each waits for its peer as long as the
 * peer makes progress (its own teardown timeout, per step), but never
 * longer than the linger bound from the moment of the free, and the base
 * keeps at most so many of them: past the cap, the oldest is reset. As
 * Linux bounds orphaned sockets (tcp_orphan_retries, tcp_max_orphans), so
 * that a peer that takes one credit now and then cannot keep a freed
 * connection, its memory and its QP for as long as it likes, nor many of
 * them (review r47: 49.5 s after the free, unbounded in number).
 *
 * The list is in deadline order (every entry gets the same bound, so the
 * order of the frees); one timer runs for its head.
 */
#include "config.h"

#include "evrdma-internal.h"

static void
linger_arm(struct evrdma_base *base)
{
	struct evrdma__linger *head = TAILQ_FIRST(&base->lingering);
	uint64_t now = evrdma__now_us();

	if (head && base->linger_ev)
		evrdma__ev_timer_start_us(base->linger_ev,
		    head->deadline > now ? head->deadline - now : 0);
}

/* Take @p lg off the list and tell its owner to end now. */
static void
linger_expire(struct evrdma_base *base, struct evrdma__linger *lg)
{
	evrdma__linger_stop(base, lg);
	base->stats.linger_resets++;
	lg->expire(lg);
}

static void
linger_timer(void *arg)
{
	struct evrdma_base *base = arg;
	struct evrdma__linger *lg;
	uint64_t now = evrdma__now_us();

	while ((lg = TAILQ_FIRST(&base->lingering)) && lg->deadline <= now) {
		evrdma__log(EVRDMA_LOG_INFO, "a freed connection still ending "
		    "after %u ms (the linger bound): reset",
		    base->cfg.linger_ms);
		linger_expire(base, lg);
	}
	linger_arm(base);
}

int
evrdma__linger_init(struct evrdma_base *base)
{
	TAILQ_INIT(&base->lingering);
	base->linger_ev = evrdma__ev_timer_new(base, linger_timer, base);
	return base->linger_ev ? 0 : -1;
}

void
evrdma__linger_fini(struct evrdma_base *base)
{
	struct evrdma__linger *lg;

	/* (base free: each owner goes its own way, without a callback) */
	while ((lg = TAILQ_FIRST(&base->lingering)))
		evrdma__linger_stop(base, lg);
	evrdma__ev_free(base->linger_ev);
	base->linger_ev = NULL;
}

void
evrdma__linger_start(struct evrdma_base *base, struct evrdma__linger *lg,
    void (*expire)(struct evrdma__linger *lg))
{
	struct evrdma__linger *old;

	if (lg->on)
		return;
	/* past the cap, the oldest goes first (the new one is young) */
	while (base->stats.lingering >= base->cfg.linger_max &&
	    (old = TAILQ_FIRST(&base->lingering))) {
		evrdma__log(EVRDMA_LOG_INFO, "%u freed connections still "
		    "ending (the cap): the oldest is reset",
		    base->stats.lingering);
		linger_expire(base, old);
	}
	lg->expire = expire;
	lg->deadline = evrdma__now_us() + (uint64_t)base->cfg.linger_ms * 1000;
	lg->on = 1;
	TAILQ_INSERT_TAIL(&base->lingering, lg, link);
	base->stats.lingering++;
	if (TAILQ_FIRST(&base->lingering) == lg)
		linger_arm(base);
}

void
evrdma__linger_stop(struct evrdma_base *base, struct evrdma__linger *lg)
{
	if (!lg->on)
		return;
	lg->on = 0;
	TAILQ_REMOVE(&base->lingering, lg, link);
	base->stats.lingering--;
	/* (the timer may run for a head that went: it arms for the next) */
}
