/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the bufferevent adapter, private (evrdma/bufferevent.h is the
 * public side). bev.c, bev_io.c and bev_tp.c make and run the adapter, a
 * libevent bufferevent over a channel or, after a fallback, over a TCP
 * bufferevent_socket (bev_ad.h, their object); bev_listener.c listens on
 * RDMA and TCP and hands accepted connections to bev.c. These files hold
 * every libevent call of the adapter.
 */
#ifndef EVRDMA_BEV_H_INCLUDED_
#define EVRDMA_BEV_H_INCLUDED_

#include <event2/bufferevent.h>

#include <evrdma/bufferevent.h>
#include "chan.h"

/* The BEV_OPT_* options an evrdma bufferevent takes (evrdma/bufferevent.h) */
#define EVRDMA__BEV_OPTIONS	(BEV_OPT_CLOSE_ON_FREE | BEV_OPT_THREADSAFE | \
				 BEV_OPT_DEFER_CALLBACKS | \
				 BEV_OPT_UNLOCK_CALLBACKS)

/*
 * A connected bufferevent over @p ch, a channel a listener accepted, with
 * @p options (EVRDMA__BEV_OPTIONS): the adapter owns @p ch from now on,
 * also when this fails (NULL, errno set; the channel is then freed).
 */
struct bufferevent *evrdma__bev_accepted(struct evrdma_base *base,
    struct evrdma_channel *ch, int options);

/* The same for a TCP connection (@p sock, connected), as the test knob
 * EVRDMA_BEV_ADAPTER=1 asks on a base without RDMA. */
struct bufferevent *evrdma__bev_accepted_tcp(struct evrdma_base *base,
    struct bufferevent *sock, int options);

#endif /* EVRDMA_BEV_H_INCLUDED_ */
