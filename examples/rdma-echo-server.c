/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * rdma-echo-server ADDR PORT: send back every byte each connection sends.
 * `diff tcp-echo-server.c rdma-echo-server.c`: moving a libevent program
 * from TCP to RDMA changes its includes and the lines that make its
 * bufferevents and listeners, nothing else.
 */
#include <err.h>
#include <netdb.h>
#include <stdio.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <evrdma.h>

/* Past this much unsent, stop reading until output drains to half: a
 * peer that sends and never reads must not make us buffer without end. */
#define ECHO_MAX	(1 << 20)

static void echo_read(struct bufferevent *bev, void *arg)
{
	struct evbuffer *out = bufferevent_get_output(bev);

	evbuffer_add_buffer(out, bufferevent_get_input(bev));
	if (evbuffer_get_length(out) >= ECHO_MAX) {
		bufferevent_disable(bev, EV_READ);
		bufferevent_setwatermark(bev, EV_WRITE, ECHO_MAX / 2, 0);
	}
}

static void echo_write(struct bufferevent *bev, void *arg)
{
	bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
	bufferevent_enable(bev, EV_READ);
}

static void echo_event(struct bufferevent *bev, short what, void *arg)
{
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		bufferevent_free(bev);
}

static void accept_cb(struct evrdma_listener *lst, struct bufferevent *bev,
    const struct sockaddr *peer, int socklen, void *arg)
{
	bufferevent_setcb(bev, echo_read, echo_write, echo_event, NULL);
	bufferevent_enable(bev, EV_READ);
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST }, *ai;
	struct event_base *eb = event_base_new();
	struct evrdma_config *cfg = evrdma_config_new();
	struct evrdma_base *base;

	if (argc != 3 || getaddrinfo(argv[1], argv[2], &hints, &ai) != 0)
		errx(1, "usage: %s ADDR PORT", argv[0]);
	/* the same binary serves over TCP on a host without RDMA, and
	 * over RDMA and TCP (same port) on a host with it */
	evrdma_config_set_tcp_fallback(cfg, 1);
	if (!(base = evrdma_base_new(eb, cfg)) ||
	    !evrdma_bufferevent_listener_new(base, accept_cb, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 16, ai->ai_addr,
	    (int)ai->ai_addrlen))
		errx(1, "listen: %s", evrdma_errmsg());
	printf("listening on %s port %s\n", argv[1], argv[2]);
	fflush(stdout);
	return event_base_dispatch(eb);
}
