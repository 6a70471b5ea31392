/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: work due after a poll pass (see struct evrdma__workq).
 */
#include "config.h"

#include "evrdma-internal.h"

static void
work_timer_cb(void *arg)
{
	struct evrdma_base *base = arg;

	base->work.armed = 0;
	evrdma__work_run(base);
}

/* The timer runs work queued outside a poll pass at the next iteration. */
static void
work_arm(struct evrdma_base *base)
{
	if (base->work.armed)
		return;
	if (evrdma__ev_timer_start(base->work.ev, 0) < 0)
		evrdma__log(EVRDMA_LOG_ERROR, "cannot schedule work");
	else
		base->work.armed = 1;
}

int
evrdma__work_init(struct evrdma_base *base)
{
	TAILQ_INIT(&base->work.due);
	TAILQ_INIT(&base->work.running);
	base->work.ev = evrdma__ev_timer_new(base, work_timer_cb, base);
	return base->work.ev ? 0 : -1;
}

void
evrdma__work_fini(struct evrdma_base *base)
{
	evrdma__ev_free(base->work.ev);
	base->work.ev = NULL;
}

void
evrdma__work_queue(struct evrdma_base *base, struct evrdma__work *w)
{
	if (w->queued)
		return;
	w->queued = WORK_NEXT;
	TAILQ_INSERT_TAIL(&base->work.due, w, link);
	/* inside a poll pass, its end runs the list */
	if (!base->work.in_poll)
		work_arm(base);
}

/*
 * Run what is queued now, in queue order (first due, first served: that
 * is what keeps many channels fair). Work queued by the items themselves
 * waits for the next pass or iteration, so this always ends.
 */
void
evrdma__work_run(struct evrdma_base *base)
{
	struct evrdma__workq *q = &base->work;
	struct evrdma__work *w;

	/* (called after every poll, also each busy-poll round: the common
	 * case, nothing due, costs nothing; a stale timer finds nothing) */
	if (TAILQ_EMPTY(&q->due))
		return;
	/* (the flag spares an event_del() of a timer that is not armed:
	 * three calls deep into libevent on every message's path; calls
	 * are what costs most under emulation, see bench/README.md) */
	if (q->armed) {
		evrdma__ev_stop(q->ev);
		q->armed = 0;
	}
	w = TAILQ_FIRST(&q->due);
	if (!TAILQ_NEXT(w, link)) {
		/* One item, the common case (one channel's pass per poll):
		 * taken off the queue without the running list, which only
		 * lets an item cancel the items after it. What it queues
		 * (itself too) waits, as below. (22 instructions less per
		 * 64 B round trip, callgrind.) */
		TAILQ_INIT(&q->due);
		w->queued = 0;
		w->fn(w);
	} else {
		TAILQ_CONCAT(&q->running, &q->due, link);
		TAILQ_FOREACH(w, &q->running, link)
			w->queued = WORK_RUNNING;
		while ((w = TAILQ_FIRST(&q->running))) {
			TAILQ_REMOVE(&q->running, w, link);
			w->queued = 0;
			w->fn(w);
		}
	}
	if (!TAILQ_EMPTY(&q->due))
		work_arm(base);
}
