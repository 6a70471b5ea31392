/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma tests: a peer in a process of its own, for the ends a test cannot
 * make inside its own process: a program that frees its bufferevent and
 * returns from main, or one that is killed (test_bev_compare.c,
 * "ends of a process").
 *
 *   evrdma-peer tcp|evrdma ADDR PORT MODE
 *
 * Connects (tcp: bufferevent_socket; evrdma: an evrdma bufferevent, RDMA
 * where it can, else its TCP fallback), writes "hello\n", then by MODE:
 *   exit         reads the reply, frees the bufferevent, returns from main
 *                without running its loop again;
 *   kill-read    reads the reply and is killed at once (SIGKILL);
 *   kill-idle    reads the reply, runs its loop 200 ms, then is killed;
 *   kill-unread  does not read: once the reply can have arrived (500 ms),
 *                it is killed with it unread;
 *   request      (a client of hello-world) prints what it reads, then
 *                "end: EOF" or "end: ERROR" when the connection ends, and
 *                exits 0.
 * Exit status 0 (exit, request), or death by SIGKILL; 2 on a failure.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <evrdma.h>

struct peer {
	struct event_base *eb;
	struct bufferevent *bev;
	const char *mode;
	int got;
};

static void
die_later(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	raise(SIGKILL);
}

static void
peer_read(struct bufferevent *bev, void *arg)
{
	struct peer *p = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct timeval tv = { 0, 200000 };

	p->got += (int)evbuffer_get_length(in);
	if (!strcmp(p->mode, "request")) {
		fwrite(evbuffer_pullup(in, -1), 1, evbuffer_get_length(in),
		    stdout);
		evbuffer_drain(in, evbuffer_get_length(in));
		return;
	}
	evbuffer_drain(in, evbuffer_get_length(in));
	if (p->got < 3)
		return;
	if (!strcmp(p->mode, "exit")) {
		bufferevent_free(bev);
		exit(0);	/* without the loop again */
	}
	if (!strcmp(p->mode, "kill-read"))
		raise(SIGKILL);
	if (!strcmp(p->mode, "kill-idle"))
		event_base_once(p->eb, -1, EV_TIMEOUT, die_later, p, &tv);
}

static void
peer_event(struct bufferevent *bev, short what, void *arg)
{
	struct peer *p = arg;
	struct timeval tv = { 0, 500000 };

	(void)bev;
	if (!strcmp(p->mode, "request") && !(what & BEV_EVENT_CONNECTED)) {
		printf("end: %s\n", what & BEV_EVENT_EOF ? "EOF" : "ERROR");
		exit(0);
	}
	if (!(what & BEV_EVENT_CONNECTED)) {
		fprintf(stderr, "evrdma-peer: the connection ended (0x%x)\n",
		    (unsigned)what);
		exit(2);
	}
	bufferevent_write(p->bev, "hello\n", 6);
	if (!strcmp(p->mode, "kill-unread"))
		event_base_once(p->eb, -1, EV_TIMEOUT, die_later, p, &tv);
	else
		bufferevent_enable(p->bev, EV_READ);
}

int
main(int argc, char **argv)
{
	struct peer p;
	struct evrdma_base *base = NULL;
	struct evrdma_config *cfg;
	struct sockaddr_in sin;

	if (argc != 5) {
		fprintf(stderr, "usage: evrdma-peer tcp|evrdma ADDR PORT "
		    "exit|kill-read|kill-idle|kill-unread|request\n");
		return 2;
	}
	/* quiet, as the test programs (tests/testutil.h) */
	setenv("EVRDMA_LOG", "off", 0);
	memset(&p, 0, sizeof(p));
	p.mode = argv[4];
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((unsigned short)atoi(argv[3]));
	if (inet_pton(AF_INET, argv[2], &sin.sin_addr) != 1)
		return 2;
	p.eb = event_base_new();
	if (!p.eb)
		return 2;
	if (!strcmp(argv[1], "tcp")) {
		p.bev = bufferevent_socket_new(p.eb, -1, BEV_OPT_CLOSE_ON_FREE);
	} else {
		cfg = evrdma_config_new();
		if (!cfg || evrdma_config_set_tcp_fallback(cfg, 1) < 0)
			return 2;
		base = evrdma_base_new(p.eb, cfg);
		evrdma_config_free(cfg);
		if (!base) {
			fprintf(stderr, "evrdma-peer: %s\n", evrdma_errmsg());
			return 2;
		}
		p.bev = evrdma_bufferevent_new(base, 0);
	}
	if (!p.bev)
		return 2;
	bufferevent_setcb(p.bev, peer_read, NULL, peer_event, &p);
	if (!strcmp(argv[1], "tcp") ?
	    bufferevent_socket_connect(p.bev, (struct sockaddr *)&sin,
	    sizeof(sin)) : evrdma_bufferevent_connect(p.bev,
	    (struct sockaddr *)&sin, sizeof(sin))) {
		fprintf(stderr, "evrdma-peer: connect failed\n");
		return 2;
	}
	event_base_dispatch(p.eb);
	return 2;	/* every mode ends before the loop does */
}
