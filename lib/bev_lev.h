/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: every field of libevent's installed structs that the bufferevent
 * adapter reads or uses, in one place. They come from
 * event2/bufferevent_struct.h and event2/event_struct.h: deprecated but
 * installed, and unchanged through libevent 2.1. Each accessor says why a
 * public call does not do. The adapter's files name no field of a struct
 * bufferevent or struct event themselves (tools/check-layering), so a
 * libevent that changed them would need this file reviewed, and no other.
 */
#ifndef EVRDMA_BEV_LEV_H_INCLUDED_
#define EVRDMA_BEV_LEV_H_INCLUDED_

#include <stddef.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_struct.h>
#include <event2/event.h>
#include <event2/event_struct.h>

/*
 * An event's EVLIST_* flags: whether it is pending or active, as
 * event_pending() says, without its lock and call, on paths that run for
 * every message (event_del() of an event not pending costs ~80
 * instructions).
 */
static inline int
evrdma__lev_flags(const struct event *ev)
{
	return ev->ev_evcallback.evcb_flags;
}

/* The bufferevent's EV_READ / EV_WRITE: bufferevent_get_enabled() takes
 * its lock, per arrival and per write. */
static inline short
evrdma__lev_enabled(const struct bufferevent *bev)
{
	return bev->enabled;
}

/* The read high watermark (0: none): bufferevent_getwatermark() takes the
 * lock, per arrival. */
static inline size_t
evrdma__lev_rd_high(const struct bufferevent *bev)
{
	return bev->wm_read.high;
}

/*
 * The bufferevent's own read and write timeout events, and their
 * timeouts. libevent 2.1 has no call that returns a timeout set with
 * bufferevent_set_timeouts(); the adapter runs the timeouts itself on the
 * bufferevent's own events (they report only where a socket would, see
 * evrdma__ad_take_timeouts()), so the events are its to assign and add.
 */
static inline struct event *
evrdma__lev_ev_read(struct bufferevent *bev)
{
	return &bev->ev_read;
}

static inline struct event *
evrdma__lev_ev_write(struct bufferevent *bev)
{
	return &bev->ev_write;
}

/* NULL when no timeout is set. */
static inline const struct timeval *
evrdma__lev_tv_read(const struct bufferevent *bev)
{
	return evutil_timerisset(&bev->timeout_read) ? &bev->timeout_read :
	    NULL;
}

static inline const struct timeval *
evrdma__lev_tv_write(const struct bufferevent *bev)
{
	return evutil_timerisset(&bev->timeout_write) ? &bev->timeout_write :
	    NULL;
}

/* Whether a read / write callback is set: bufferevent_getcb() costs a lock
 * and a call (32 instructions), six times per round trip. One pointer,
 * written on the loop's thread. */
static inline int
evrdma__lev_readcb_is(const struct bufferevent *bev, bufferevent_data_cb cb)
{
	return bev->readcb == cb;
}

static inline int
evrdma__lev_has_writecb(const struct bufferevent *bev)
{
	return bev->writecb != NULL;
}

/* No callback at all: what bufferevent_free() leaves at once (it clears
 * them before it drops the user's reference), while a reference of the
 * adapter's keeps the struct. */
static inline int
evrdma__lev_no_callbacks(const struct bufferevent *bev)
{
	return !bev->readcb && !bev->writecb && !bev->errorcb;
}

#endif
