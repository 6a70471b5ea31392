/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * rdma-echo-client ADDR PORT MESSAGE: send MESSAGE to an echo server, print
 * what comes back, exit 0 when it is MESSAGE.
 * `diff tcp-echo-client.c rdma-echo-client.c`: moving a libevent program
 * from TCP to RDMA changes its includes and the lines that make its
 * bufferevents, nothing else.
 */
#include <err.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <evrdma.h>

static const char *message;
static int status = 1;

static void reply_read(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = strlen(message);

	if (evbuffer_get_length(in) < len)
		return;
	status = memcmp(evbuffer_pullup(in, -1), message, len) != 0;
	printf("%.*s\n", (int)len, (char *)evbuffer_pullup(in, -1));
	bufferevent_free(bev);
	event_base_loopexit(arg, NULL);
}

static void reply_event(struct bufferevent *bev, short what, void *arg)
{
	if (what & BEV_EVENT_CONNECTED) {
		bufferevent_write(bev, message, strlen(message));
		return;
	}
	warnx("connection %s before the echo came back",
	    what & BEV_EVENT_EOF ? "closed" : "failed");
	bufferevent_free(bev);
	event_base_loopexit(arg, NULL);
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST }, *ai;
	struct event_base *eb = event_base_new();
	struct evrdma_config *cfg = evrdma_config_new();
	struct evrdma_base *base;
	struct bufferevent *bev;

	if (argc != 4 || !*argv[3] ||
	    getaddrinfo(argv[1], argv[2], &hints, &ai) != 0)
		errx(1, "usage: %s ADDR PORT MESSAGE", argv[0]);
	message = argv[3];
	/* over RDMA when a device routes to the server and it speaks
	 * RDMA, over TCP otherwise */
	evrdma_config_set_tcp_fallback(cfg, 1);
	base = evrdma_base_new(eb, cfg);
	evrdma_config_free(cfg);
	if (!base || !(bev = evrdma_bufferevent_new(base, 0)))
		errx(1, "bufferevent: %s", evrdma_errmsg());
	bufferevent_setcb(bev, reply_read, NULL, reply_event, eb);
	bufferevent_enable(bev, EV_READ);
	if (evrdma_bufferevent_connect(bev, ai->ai_addr,
	    (int)ai->ai_addrlen) < 0)
		errx(1, "connect: %s", evrdma_errmsg());
	event_base_dispatch(eb);
	freeaddrinfo(ai);
	evrdma_base_free(base);
	event_base_free(eb);
	return status;
}
