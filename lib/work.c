/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: work due after a poll pass (see struct evrdma__workq).
 */
#include "config.h"

#include "evrdma-internal.h"

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

/* What is due runs now: the timer has nothing to do. */
static void
work_disarm(struct evrdma__workq *q)
{
	/* (the flag spares an event_del() of a timer that is not armed:
	 * three calls deep into libevent on every message's path; calls
	 * are what costs most under emulation, see bench/README.md) */
	if (q->armed) {
		evrdma__ev_stop(q->ev);
		q->armed = 0;
	}
}

/* Run the running list, in order (an item may cancel those after it). */
static void
work_run_running(struct evrdma__workq *q)
{
	struct evrdma__work *w;

	while ((w = TAILQ_FIRST(&q->running))) {
		TAILQ_REMOVE(&q->running, w, link);
		w->queued = 0;
		w->fn(w);
	}
}

/* Stop the timer, then take what is due onto the running list. */
static void
work_take_due(struct evrdma__workq *q)
{
	struct evrdma__work *w;

	work_disarm(q);
	TAILQ_CONCAT(&q->running, &q->due, link);
	TAILQ_FOREACH(w, &q->running, link)
		w->queued = WORK_RUNNING;
}

/*
 * The timer: run what was queued outside a poll, in queue order (first
 * due, first served: that is what keeps many channels fair). Work queued
 * by the items themselves waits for the next poll's end or iteration, so
 * this always ends.
 */
static void
work_timer_cb(void *arg)
{
	struct evrdma_base *base = arg;
	struct evrdma__workq *q = &base->work;
	struct evrdma__work *w;

	q->armed = 0;
	/* (a poll's end may have run it all: a stale timer finds nothing) */
	if (TAILQ_EMPTY(&q->due))
		return;
	w = TAILQ_FIRST(&q->due);
	if (!TAILQ_NEXT(w, link)) {
		/* One item, the common case (one channel's pass): taken off
		 * the queue without the running list, which only lets an
		 * item cancel the items after it. (22 instructions less per
		 * 64 B round trip, callgrind.) */
		TAILQ_INIT(&q->due);
		w->queued = 0;
		w->fn(w);
	} else {
		work_take_due(q);
		work_run_running(q);
	}
	if (!TAILQ_EMPTY(&q->due))
		work_arm(base);
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
 * The end of a poll (the outermost), in two halves around the rings'
 * passes (dev_poll()): the work due when the poll ended is taken aside
 * first, and only that runs after the passes. What either queues waits
 * for the next iteration, as at the timer: run at once, a pass that
 * queued itself again (its write callback wrote) ran a second time
 * before the loop polled for the completions that free its send slots
 * (64 KiB writes at 0.66x, bench/README.md, "stop 56"). 1 when work was
 * taken.
 */
int
evrdma__work_take(struct evrdma_base *base)
{
	if (TAILQ_EMPTY(&base->work.due))
		return 0;
	work_take_due(&base->work);
	return 1;
}

void
evrdma__work_run_taken(struct evrdma_base *base)
{
	struct evrdma__workq *q = &base->work;

	work_run_running(q);
	if (!TAILQ_EMPTY(&q->due))
		work_arm(base);
}

