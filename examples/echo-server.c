/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/* evrdma-echo-server ADDR PORT [NBUF]: send back every byte each channel
 * receives; with NBUF, the channels share one receive queue of NBUF
 * buffers instead of a ring each (evrdma_channel_srq_new()). */
#include <err.h>
#include <netdb.h>
#include <stdlib.h>
#include <event2/event.h>
#include <evrdma.h>

/* Past this much unsent, stop reading until output drains to half: a
 * peer that sends and never reads must not make us buffer without end. */
#define ECHO_MAX	(1 << 20)

static void echo_read(struct evrdma_channel *ch, void *arg)
{
	struct evbuffer *out = evrdma_channel_get_output(ch);

	evbuffer_add_buffer(out, evrdma_channel_get_input(ch));
	if (evbuffer_get_length(out) >= ECHO_MAX) {
		evrdma_channel_disable(ch, EV_READ);
		evrdma_channel_setwatermark(ch, EV_WRITE, ECHO_MAX / 2, 0);
	}
}

static void echo_write(struct evrdma_channel *ch, void *arg)
{
	evrdma_channel_setwatermark(ch, EV_WRITE, 0, 0);
	evrdma_channel_enable(ch, EV_READ);
}

static void echo_event(struct evrdma_channel *ch, short what, void *arg)
{
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		evrdma_channel_free(ch);
}

static void accept_cb(struct evrdma_listener *lst, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	evrdma_channel_setcb(ch, echo_read, echo_write, echo_event, NULL);
	evrdma_channel_enable(ch, EV_READ);
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST }, *ai;
	struct event_base *eb = event_base_new();
	struct evrdma_base *base = evrdma_base_new(eb, NULL);
	struct evrdma_listener *lst;
	struct evrdma_srq *srq;

	if (argc < 3 || argc > 4 ||
	    getaddrinfo(argv[1], argv[2], &hints, &ai) != 0)
		errx(1, "usage: evrdma-echo-server ADDR PORT [NBUF]");
	if (!base || !(lst = evrdma_channel_listener_new(base, accept_cb, NULL,
	    EVRDMA_CHANNEL_STREAM, 16, ai->ai_addr, (int)ai->ai_addrlen)))
		errx(1, "%s", evrdma_errmsg());
	if (argc == 4 && (!(srq = evrdma_channel_srq_new(base, NULL,
	    (unsigned)atoi(argv[3]))) || evrdma_listener_set_srq(lst, srq) < 0))
		errx(1, "%s", evrdma_errmsg());
	return event_base_dispatch(eb);
}
