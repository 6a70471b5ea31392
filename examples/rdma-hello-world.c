/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * rdma-hello-world ADDR PORT: the shape of libevent's sample/hello-world.c
 * (written anew here): every connection gets "Hello, World!\n", and its
 * bufferevent is freed in the write callback once that left, never
 * reading what the client sent. `diff tcp-hello-world.c
 * rdma-hello-world.c`: the port changes the includes and the lines that
 * make the listener and the bufferevents; the reply arrives over RDMA as
 * over TCP, also to a client that sent something first (the free then
 * resets the connection, after the reply).
 */
#include <err.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <evrdma.h>

static const char MESSAGE[] = "Hello, World!\n";

static void conn_writecb(struct bufferevent *bev, void *arg)
{
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		bufferevent_free(bev);
}

static void conn_eventcb(struct bufferevent *bev, short what, void *arg)
{
	bufferevent_free(bev);
}

static void listener_cb(struct evrdma_listener *lst,
    struct bufferevent *bev, const struct sockaddr *peer, int socklen,
    void *arg)
{
	bufferevent_setcb(bev, NULL, conn_writecb, conn_eventcb, NULL);
	bufferevent_enable(bev, EV_WRITE);
	bufferevent_disable(bev, EV_READ);
	bufferevent_write(bev, MESSAGE, strlen(MESSAGE));
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
	event_base_loopexit(arg, NULL);
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST }, *ai;
	struct event_base *eb = event_base_new();
	struct evrdma_config *cfg = evrdma_config_new();
	struct evrdma_base *base;
	struct evrdma_listener *lst;
	struct event *sig;

	if (argc != 3 || getaddrinfo(argv[1], argv[2], &hints, &ai) != 0)
		errx(1, "usage: %s ADDR PORT", argv[0]);
	evrdma_config_set_tcp_fallback(cfg, 1);
	if (!(base = evrdma_base_new(eb, cfg)))
		errx(1, "evrdma_base_new: %s", evrdma_errmsg());
	lst = evrdma_bufferevent_listener_new(base, listener_cb, eb,
	    LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE, -1, ai->ai_addr,
	    (int)ai->ai_addrlen);
	if (!lst)
		err(1, "listen");
	sig = evsignal_new(eb, SIGINT, signal_cb, eb);
	if (!sig || event_add(sig, NULL) < 0)
		errx(1, "signal event");
	printf("listening on %s port %s\n", argv[1], argv[2]);
	fflush(stdout);
	event_base_dispatch(eb);
	evrdma_listener_free(lst);
	event_free(sig);
	evrdma_base_free(base);
	evrdma_config_free(cfg);
	event_base_free(eb);
	freeaddrinfo(ai);
	return 0;
}
