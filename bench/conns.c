/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma-bench: connection tests (the client side; the server is
 * bench.c's, which echoes).
 *
 * --conn-rate N: N connections one after another, each: connect, write a
 * request and one --lat-size ping, take the echo, close. The time runs
 * from the first connect until the last connection is closed and, for
 * channels, torn down (evrdma_stats.conns back to 0). Prints the rate and
 * the mean time from connect to connected and from there to the echo.
 *
 * --fan N: N connections on this one loop (at most --fan-connects
 * connecting at a time). Once all are up, each ping-pongs --lat-size
 * messages, one in flight, for --fan-time milliseconds; then each takes
 * its last echo and the client prints the aggregate message rate (echoes
 * within the time, over all connections) and how fair the loop was: the
 * slowest and the fastest connection's count against the mean.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

struct fconn {
	struct bench *b;
	struct ep e;
	int up;				/* connected */
	uint64_t seq;			/* pongs taken */
	uint64_t count;			/* of them while the clock ran */
	uint64_t t0, t1;		/* --conn-rate: connect, connected */
};

struct conns {
	struct fconn *c;		/* --fan: n of them, else one */
	long n;				/* connections in the test */
	long started, connected, finished;
	int running;			/* --fan: the clock runs */
	uint64_t t0, t_up, t_go, t_stop;
	uint64_t sum_connect, sum_first;	/* --conn-rate, ns */
	struct event *timer;
};

static void fan_go(struct bench *b);
static int fan_connect_next(struct bench *b);
static int rate_connect_next(struct bench *b);

/* A whole pong of @p c in b->pong? @return 1, 0 (not yet) or -1 */
static int
take_pong(struct fconn *c)
{
	struct bench *b = c->b;
	ssize_t n;

	if (!b->o.message) {
		if (evbuffer_get_length(ep_input(&c->e)) < b->o.lat_size)
			return 0;
		evbuffer_remove(ep_input(&c->e), b->pong, b->o.lat_size);
	} else {
		n = evrdma_channel_read_message(c->e.ch, b->pong,
		    b->o.lat_size);
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		if ((size_t)n != b->o.lat_size)
			return -1;
	}
	if (get64(b->pong) != c->seq ||
	    memcmp(b->pong + 8, b->ping + 8, b->o.lat_size - 8) != 0)
		return -1;
	c->seq++;
	return 1;
}

static int
write_ping(struct fconn *c)
{
	put64(c->b->ping, c->seq);
	return ep_write(&c->e, c->b->ping, c->b->o.lat_size);
}

/* The request (@p type, one ping or until EOF) and the first ping. */
static int
write_request(struct fconn *c, int type)
{
	uint8_t req[REQ_LEN];

	make_request(req, type, c->b->o.lat_size, 1);
	return ep_write(&c->e, req, REQ_LEN) < 0 ? -1 : 0;
}

/* ------------------------------------------------------ --conn-rate */

/* The last connection is closed: wait for the channels' teardown. */
static void
rate_teardown(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;
	struct conns *cs = b->cs;
	struct evrdma_stats st = { 0 };
	struct timeval tv = { 0, 1000 };
	double s;

	if (b->base) {
		evrdma_base_get_stats(b->base, &st, sizeof(st));
		if (st.conns > 0) {
			evtimer_add(cs->timer, &tv);
			return;
		}
	}
	s = (double)(now_ns() - cs->t0) / 1e9;
	printf("connection setup: %ld connections one after another "
	    "(connect, a %zu-byte ping and its echo, close), %.3f s\n",
	    cs->n, b->o.lat_size, s);
	printf(" #conns     seconds[s]   ConnRate[conn/s]   "
	    "t_connect[usec]   t_first[usec]\n");
	printf(" %-10ld %-12.3f %-18.2f %-17.2f %.2f\n", cs->n, s,
	    (double)cs->n / s, (double)cs->sum_connect / 1e3 / (double)cs->n,
	    (double)cs->sum_first / 1e3 / (double)cs->n);
	fflush(stdout);
	b->done = 1;
	event_base_loopbreak(b->eb);
}

static void
rate_read(struct evrdma_channel *ch, void *arg)
{
	struct fconn *c = arg;
	struct bench *b = c->b;
	struct conns *cs = b->cs;
	int rc = take_pong(c);

	if (rc == 0)
		return;
	if (rc < 0) {
		fail(b, "connection %ld: the echo differs from the ping",
		    cs->finished);
		return;
	}
	cs->sum_first += now_ns() - c->t1;
	ep_free(&c->e);
	c->seq = 0;
	if (++cs->finished < cs->n) {
		if (rate_connect_next(b) < 0)
			fail(b, "connect failed");
		return;
	}
	rate_teardown(-1, 0, b);
}

static void
rate_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct fconn *c = arg;
	struct bench *b = c->b;

	if (!(what & BEV_EVENT_CONNECTED)) {
		fail(b, "connection %ld: %s", b->cs->finished,
		    ep_error(&c->e, what));
		return;
	}
	c->t1 = now_ns();
	b->cs->sum_connect += c->t1 - c->t0;
	if (c->e.bev)
		tcp_connected(&c->e);
	ep_enable(&c->e, EV_READ);
	if (write_request(c, T_LAT) < 0 || write_ping(c) < 0)
		fail(b, "write: %s", strerror(errno));
}

static void
rate_read_tcp(struct bufferevent *bev, void *arg)
{
	rate_read(NULL, arg);
}

static void
rate_event_tcp(struct bufferevent *bev, short what, void *arg)
{
	rate_event(NULL, what, arg);
}

static int
rate_connect_next(struct bench *b)
{
	struct fconn *c = &b->cs->c[0];

	c->t0 = now_ns();
	return ep_connect(b, &c->e, rate_read_tcp, rate_event_tcp, rate_read,
	    rate_event, c);
}

/* ------------------------------------------------------------ --fan */

static void
fan_finish(struct bench *b)
{
	struct conns *cs = b->cs;
	double s = (double)(cs->t_stop - cs->t_go) / 1e9, mean;
	uint64_t sum = 0, lo = UINT64_MAX, hi = 0;
	long i;

	for (i = 0; i < cs->n; i++) {
		sum += cs->c[i].count;
		if (cs->c[i].count < lo)
			lo = cs->c[i].count;
		if (cs->c[i].count > hi)
			hi = cs->c[i].count;
	}
	mean = (double)sum / (double)cs->n;
	printf("fan: %ld connections on one loop, each a %zu-byte ping-pong, "
	    "one in flight, for %.3f s; all up in %.3f s\n", cs->n,
	    b->o.lat_size, s, (double)(cs->t_up - cs->t0) / 1e9);
	printf("fan: echoes per connection: slowest %llu, mean %.1f, "
	    "fastest %llu\n", (unsigned long long)lo, mean,
	    (unsigned long long)hi);
	printf(" #conns     #messages      MsgRate[Mpps]   "
	    "fairness_min[min/mean]   fairness_max[max/mean]   "
	    "setup[conn/s]\n");
	printf(" %-10ld %-14llu %-15.6f %-24.3f %-24.3f %.2f\n", cs->n,
	    (unsigned long long)sum, (double)sum / s / 1e6,
	    mean > 0 ? (double)lo / mean : 0, mean > 0 ? (double)hi / mean : 0,
	    (double)cs->n / ((double)(cs->t_up - cs->t0) / 1e9));
	fflush(stdout);
	b->done = 1;
	event_base_loopbreak(b->eb);
}

static void
fan_stop(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;

	b->cs->t_stop = now_ns();
	b->cs->running = 0;	/* each takes its last echo */
}

static void
fan_read(struct evrdma_channel *ch, void *arg)
{
	struct fconn *c = arg;
	struct bench *b = c->b;
	struct conns *cs = b->cs;
	int rc;

	while ((rc = take_pong(c)) > 0) {
		if (!cs->running) {
			if (++cs->finished == cs->n)
				fan_finish(b);
			return;
		}
		c->count++;
		if (write_ping(c) < 0) {
			fail(b, "ping: %s", strerror(errno));
			return;
		}
	}
	if (rc < 0)
		fail(b, "fan: the echo differs from the ping");
}

static void
fan_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct fconn *c = arg;
	struct bench *b = c->b;
	struct conns *cs = b->cs;

	if (!(what & BEV_EVENT_CONNECTED)) {
		fail(b, "fan: connection %ld of %ld: %s", (long)(c - cs->c),
		    cs->n, ep_error(&c->e, what));
		return;
	}
	c->up = 1;
	if (c->e.bev)
		tcp_connected(&c->e);
	ep_enable(&c->e, EV_READ);
	if (write_request(c, T_ECHO) < 0) {
		fail(b, "fan: request: %s", strerror(errno));
		return;
	}
	if (++cs->connected % 100 == 0 && cs->connected < cs->n) {
		printf("fan: %ld of %ld connected\n", cs->connected, cs->n);
		fflush(stdout);
	}
	if (cs->connected == cs->n) {
		fan_go(b);
		return;
	}
	if (cs->started < cs->n && fan_connect_next(b) < 0)
		fail(b, "fan: connect failed");
}

static void
fan_read_tcp(struct bufferevent *bev, void *arg)
{
	fan_read(NULL, arg);
}

static void
fan_event_tcp(struct bufferevent *bev, short what, void *arg)
{
	fan_event(NULL, what, arg);
}

static int
fan_connect_next(struct bench *b)
{
	struct fconn *c = &b->cs->c[b->cs->started++];

	return ep_connect(b, &c->e, fan_read_tcp, fan_event_tcp, fan_read,
	    fan_event, c);
}

/* All are up: the first ping on each, and the clock. */
static void
fan_go(struct bench *b)
{
	struct conns *cs = b->cs;
	struct timeval tv = { b->o.fan_ms / 1000, b->o.fan_ms % 1000 * 1000 };
	long i;

	cs->t_up = now_ns();
	evtimer_assign(cs->timer, b->eb, fan_stop, b);
	cs->running = 1;
	cs->t_go = now_ns();
	for (i = 0; i < cs->n; i++)
		if (write_ping(&cs->c[i]) < 0) {
			fail(b, "fan: ping: %s", strerror(errno));
			return;
		}
	evtimer_add(cs->timer, &tv);
}

/* ---------------------------------------------------------------- */

int
conns_start(struct bench *b)
{
	struct conns *cs;
	long i;
	size_t v;

	b->ping = calloc(1, b->o.lat_size);
	b->pong = malloc(b->o.lat_size);
	cs = b->cs = calloc(1, sizeof(*cs));
	if (!b->ping || !b->pong || !cs) {
		fprintf(stderr, "evrdma-bench: out of memory\n");
		return -1;
	}
	for (v = 8; v < b->o.lat_size; v++)
		b->ping[v] = (uint8_t)v;
	cs->n = b->o.fan ? b->o.fan : b->o.conn_rate;
	cs->c = calloc(b->o.fan ? (size_t)cs->n : 1, sizeof(*cs->c));
	cs->timer = evtimer_new(b->eb, rate_teardown, b);
	if (!cs->c || !cs->timer) {
		fprintf(stderr, "evrdma-bench: out of memory\n");
		return -1;
	}
	for (i = 0; i < (b->o.fan ? cs->n : 1); i++)
		cs->c[i].b = b;
	cs->t0 = now_ns();
	if (!b->o.fan)
		return rate_connect_next(b);
	for (i = 0; i < b->o.fan_conc && cs->started < cs->n; i++)
		if (fan_connect_next(b) < 0)
			return -1;
	return 0;
}

void
conns_free(struct bench *b)
{
	struct conns *cs = b->cs;
	long i;

	if (!cs)
		return;
	for (i = 0; cs->c && i < (b->o.fan ? cs->n : 1); i++)
		ep_free(&cs->c[i].e);
	if (cs->timer)
		event_free(cs->timer);
	free(cs->c);
	free(cs);
	b->cs = NULL;
}
