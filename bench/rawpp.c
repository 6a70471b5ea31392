/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma-rawpp: a minimal event-driven ping-pong on raw verbs, the
 * baseline for evrdma's event-driven paths: rdma_cm to connect, one RC
 * queue pair, SEND/RECV, one completion queue on a completion channel,
 * and epoll to sleep on it. Uses rdma-core only (no evrdma), and libevent
 * only with --loop event.
 *
 *   evrdma-rawpp -s -a ADDR [-p PORT] [--size S] [--once]
 *                [--loop epoll|event] [--evbuf N]
 *   evrdma-rawpp -c -a ADDR [-p PORT] [--size S] [--lat N] [--warmup N]
 *                [--no-stats] [--loop epoll|event] [--evbuf N]
 *   evrdma-rawpp -s|-c -a ADDR [-p PORT] [--size S] --conn-rate N
 *
 * The client sends a --size-byte ping (default 64), sleeps in epoll_wait()
 * until the completion channel fires, takes the echo from the CQ and sends
 * the next: N timed round trips after --warmup untimed ones (default
 * N/10, at most 1000). The server sleeps the same way and echoes each
 * ping from where it landed; it serves one client and leaves (--once is
 * accepted, for evrdma-bench's command line). Figures as perftest's and
 * evrdma-bench's: one-way latency (half the round trip) in microseconds;
 * --no-stats leaves them (and their sort) out, for instruction counts.
 *
 * What it does per round trip is what an event-driven verbs program must
 * do and no more: post the send (inline up to --inline bytes, 64; signaled
 * only every SIGNAL_EVERY-th, so that the send queue drains), epoll_wait,
 * ibv_get_cq_event, ibv_req_notify_cq, ibv_poll_cq, ibv_post_recv for the
 * receive it took; CQ events are acknowledged in batches.
 *
 * --loop event (give it to both ends) sleeps in a libevent event_base
 * instead: the completion channel is a persistent read event, and its
 * callback does the same (get and acknowledge the CQ event, re-arm, poll
 * the CQ until it is empty, take each receive and post the next ping or
 * the echo). --evbuf N (0, 1, 2; only with --loop event) also moves each
 * message through N evbuffers, as a channel would: 1, each receive is
 * added to an input evbuffer and removed from it (into the send buffer,
 * from which the echo or the next ping goes); 2, removed into a buffer of
 * the program's instead, and the reply goes through an output evbuffer
 * into the send buffer. Both ends do the same work. These are the
 * baselines of evrdma's receive callback (0), read callback (1) and
 * bufferevent adapter (2): what libevent's loop and evbuffers cost on
 * their own, without evrdma.
 *
 * --conn-rate N (give it to both ends) makes N connections one after
 * another instead, each with one ping: the floor of evrdma-bench
 * --conn-rate (rawconn.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include <event2/buffer.h>
#include <event2/event.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "rawconn.h"

#define RECVS		16	/* receives posted, each a buffer */
#define SEND_DEPTH	64
#define SIGNAL_EVERY	32	/* sends signaled */
#define ACK_EVERY	64	/* CQ events acknowledged at once */

struct pp {
	int server;
	size_t size;
	unsigned inl;
	long lat, warmup;
	int no_stats;
	struct rdma_event_channel *ec;
	struct rdma_cm_id *lid, *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *mem;			/* RECVS receive buffers, one send */
	int ep;				/* epoll */
	unsigned unacked;		/* CQ events not yet acknowledged */
	unsigned long sends;
	int peer_gone;
	/* --loop event (base set) and --evbuf */
	int evbuf;			/* evbuffer round trips, 0-2 */
	struct event_base *base;
	struct event *cq_ev, *cm_ev;
	struct evbuffer *in, *out;
	uint8_t *tmp;			/* where input's bytes go */
	uint8_t *app;			/* the program's buffer (--evbuf 2) */
	long i, total;			/* client: round trip, of total */
	uint64_t t;			/* client: the ping's stamp() */
	double *d;			/* client: round trip times */
	int failed;
	int ping_due;			/* client: post after the poll */
};

uint64_t
evrdma_raw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* time-stamp counter where there is one (see bench.h) */
static uint64_t
stamp(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __rdtsc();
#else
	return evrdma_raw_now_ns();
#endif
}

static int
die(const char *what)
{
	fprintf(stderr, "evrdma-rawpp: %s: %s\n", what, strerror(errno));
	return -1;
}

int
evrdma_raw_cm_wait(struct rdma_event_channel *ec,
    enum rdma_cm_event_type want, struct rdma_cm_id **id)
{
	struct rdma_cm_event *ev;
	enum rdma_cm_event_type got;

	if (rdma_get_cm_event(ec, &ev))
		return die("rdma_get_cm_event");
	got = ev->event;
	if (id)
		*id = ev->id;
	rdma_ack_cm_event(ev);
	if (got != want) {
		fprintf(stderr, "evrdma-rawpp: %s instead of %s\n",
		    rdma_event_str(got), rdma_event_str(want));
		return -1;
	}
	return 0;
}

static uint8_t *
recv_buf(struct pp *p, unsigned i)
{
	return p->mem + (size_t)i * p->size;
}

static int
post_recv(struct pp *p, unsigned i)
{
	struct ibv_sge sge = { (uintptr_t)recv_buf(p, i), (uint32_t)p->size,
	    p->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 },
	    *bad;

	return ibv_post_recv(p->id->qp, &wr, &bad);
}

static int
post_send(struct pp *p, const uint8_t *buf)
{
	struct ibv_sge sge = { (uintptr_t)buf, (uint32_t)p->size,
	    p->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = RECVS, .sg_list = &sge,
	    .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;

	if (++p->sends % SIGNAL_EVERY == 0)
		wr.send_flags |= IBV_SEND_SIGNALED;
	if (p->size <= p->inl)
		wr.send_flags |= IBV_SEND_INLINE;
	return ibv_post_send(p->id->qp, &wr, &bad);
}

/*
 * The server's event channel is readable: @return 1 to go on (no event
 * after all, or ESTABLISHED), 0 when the client left (p->peer_gone) or
 * something else came.
 */
static int
cm_next(struct pp *p)
{
	struct rdma_cm_event *cev;
	enum rdma_cm_event_type t;

	if (rdma_get_cm_event(p->ec, &cev))
		return 1;	/* none after all */
	t = cev->event;
	rdma_ack_cm_event(cev);
	if (t == RDMA_CM_EVENT_ESTABLISHED)
		return 1;
	p->peer_gone = t == RDMA_CM_EVENT_DISCONNECTED;
	if (!p->peer_gone)
		fprintf(stderr, "evrdma-rawpp: %s\n", rdma_event_str(t));
	return 0;
}

/*
 * --loop event: post ping number p->i from the send buffer. With
 * --evbuf 2 the program writes it in its own buffer, and output carries
 * it to the send buffer, as a write into a channel's output would.
 */
static int
ev_ping(struct pp *p)
{
	uint8_t *send = recv_buf(p, RECVS);

	p->t = stamp();
	if (p->evbuf == 2) {
		memcpy(p->app, &p->i, sizeof(p->i));
		evbuffer_add(p->out, p->app, p->size);
		evbuffer_remove(p->out, send, p->size);
	} else {
		memcpy(send, &p->i, sizeof(p->i));
	}
	if (post_send(p, send))
		return die("ibv_post_send");
	return 0;
}

/*
 * --loop event: the message that landed in receive buffer @p r. With
 * --evbuf 1 or 2 it goes through input first (into p->tmp), as bytes a
 * channel received go to its read callback; the server echoes it from
 * where it is then (with --evbuf 2 through output, into the send buffer).
 * @return 0, or -1 (an error: the loop ends)
 */
static int
ev_recv(struct pp *p, unsigned r)
{
	uint8_t *msg = recv_buf(p, r);
	uint64_t t = stamp();

	if (p->evbuf > 0) {
		evbuffer_add(p->in, msg, p->size);
		evbuffer_remove(p->in, msg = p->tmp, p->size);
	}
	if (p->server) {
		if (p->evbuf == 2) {
			evbuffer_add(p->out, msg, p->size);
			evbuffer_remove(p->out, msg = recv_buf(p, RECVS),
			    p->size);
		}
		/* as the epoll loop: the buffer is written again only
		 * after the client has this echo */
		if (post_send(p, msg) || post_recv(p, r))
			return die("post");
		return 0;
	}
	if (p->i >= p->warmup)
		p->d[p->i - p->warmup] = (double)(t - p->t);
	if (memcmp(msg, &p->i, sizeof(p->i)) != 0) {
		fprintf(stderr, "evrdma-rawpp: the echo differs\n");
		return -1;
	}
	if (post_recv(p, r))
		return die("ibv_post_recv");
	if (++p->i == p->total) {
		event_base_loopbreak(p->base);
		return 0;
	}
	/* posted once the CQ is empty, as evrdma posts what its
	 * callbacks wrote after the poll pass: posted from inside the
	 * poll loop, the ping's echo could be found by the same loop,
	 * and the slower the client (callgrind), the likelier, so that
	 * it would not sleep once per round trip as evrdma does */
	p->ping_due = 1;
	return 0;
}

/*
 * --loop event: the completion channel's read event. What the epoll loop
 * does after epoll_wait(), then the CQ is polled until empty: what
 * completes after the re-arm raises another event.
 */
static void
ev_cq(evutil_socket_t fd, short what, void *arg)
{
	struct pp *p = arg;
	struct ibv_wc wc[8];
	struct ibv_cq *cq;
	void *ctx;
	int n, i;

	if (ibv_get_cq_event(p->cc, &cq, &ctx))
		return;		/* none after all (EAGAIN) */
	if (++p->unacked == ACK_EVERY) {
		ibv_ack_cq_events(p->cq, p->unacked);
		p->unacked = 0;
	}
	if (ibv_req_notify_cq(p->cq, 0)) {
		die("ibv_req_notify_cq");
		goto fail;
	}
	do {
		n = ibv_poll_cq(p->cq, 8, wc);
		if (n < 0) {
			die("ibv_poll_cq");
			goto fail;
		}
		for (i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "evrdma-rawpp: completion: "
				    "%s\n", ibv_wc_status_str(wc[i].status));
				goto fail;
			}
			if (wc[i].opcode == IBV_WC_RECV &&
			    ev_recv(p, (unsigned)wc[i].wr_id))
				goto fail;
		}
	} while (n > 0);
	if (p->ping_due) {
		p->ping_due = 0;
		if (ev_ping(p))
			goto fail;
	}
	return;
fail:
	p->failed = 1;
	event_base_loopbreak(p->base);
}

/* --loop event: the server's event channel (the client leaving) */
static void
ev_cm(evutil_socket_t fd, short what, void *arg)
{
	struct pp *p = arg;

	if (!cm_next(p))
		event_base_loopbreak(p->base);
}

/* --loop event: evbuffers and events on p->base, for resources() */
static int
ev_resources(struct pp *p)
{
	p->in = evbuffer_new();
	p->out = evbuffer_new();
	p->app = malloc(p->size);
	p->cq_ev = event_new(p->base, p->cc->fd, EV_READ | EV_PERSIST,
	    ev_cq, p);
	if (!p->in || !p->out || !p->app || !p->cq_ev ||
	    event_add(p->cq_ev, NULL))
		return die("libevent");
	/* --evbuf 1: input's bytes go straight to the send buffer */
	p->tmp = p->evbuf == 2 ? p->app : recv_buf(p, RECVS);
	if (!p->server)
		return 0;
	/* the server also hears the client leave */
	if (fcntl(p->ec->fd, F_SETFL, fcntl(p->ec->fd, F_GETFL) |
	    O_NONBLOCK) < 0)
		return die("fcntl");
	p->cm_ev = event_new(p->base, p->ec->fd, EV_READ | EV_PERSIST,
	    ev_cm, p);
	if (!p->cm_ev || event_add(p->cm_ev, NULL))
		return die("libevent");
	return 0;
}

/* PD, completion channel, CQ, QP, memory and receives on p->id. */
static int
resources(struct pp *p)
{
	struct ibv_qp_init_attr qa = { 0 };
	struct epoll_event ev = { .events = EPOLLIN };
	unsigned i;

	p->pd = ibv_alloc_pd(p->id->verbs);
	p->cc = p->pd ? ibv_create_comp_channel(p->id->verbs) : NULL;
	p->cq = p->cc ? ibv_create_cq(p->id->verbs, RECVS + SEND_DEPTH, NULL,
	    p->cc, 0) : NULL;
	if (!p->cq || ibv_req_notify_cq(p->cq, 0))
		return die("PD, completion channel or CQ");
	qa.send_cq = qa.recv_cq = p->cq;
	qa.cap.max_send_wr = SEND_DEPTH;
	qa.cap.max_recv_wr = RECVS;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = p->inl;
	qa.qp_type = IBV_QPT_RC;
	if (rdma_create_qp(p->id, p->pd, &qa))
		return die("rdma_create_qp");
	p->mem = calloc(RECVS + 1, p->size);
	p->mr = p->mem ? ibv_reg_mr(p->pd, p->mem, (RECVS + 1) * p->size,
	    IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!p->mr)
		return die("memory");
	for (i = 0; i < RECVS; i++)
		if (post_recv(p, i))
			return die("ibv_post_recv");
	if (fcntl(p->cc->fd, F_SETFL, fcntl(p->cc->fd, F_GETFL) |
	    O_NONBLOCK) < 0)
		return die("fcntl");
	if (p->base)
		return ev_resources(p);
	p->ep = epoll_create1(0);
	if (p->ep < 0 || epoll_ctl(p->ep, EPOLL_CTL_ADD, p->cc->fd, &ev))
		return die("epoll");
	/* the server also hears the client leave */
	ev.data.u32 = 1;
	if (p->server && (fcntl(p->ec->fd, F_SETFL, fcntl(p->ec->fd,
	    F_GETFL) | O_NONBLOCK) < 0 ||
	    epoll_ctl(p->ep, EPOLL_CTL_ADD, p->ec->fd, &ev)))
		return die("epoll");
	return 0;
}

/*
 * Sleep until a receive completes; @return its buffer index, or -1 (an
 * error, or the server's peer left: p->peer_gone).
 */
static int
wait_recv(struct pp *p)
{
	struct epoll_event ev;
	struct ibv_wc wc[8];
	struct ibv_cq *cq;
	void *ctx;
	int n, i, got = -1;

	for (;;) {
		n = ibv_poll_cq(p->cq, 8, wc);
		for (i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "evrdma-rawpp: completion: "
				    "%s\n", ibv_wc_status_str(wc[i].status));
				return -1;
			}
			if (wc[i].opcode == IBV_WC_RECV)
				got = (int)wc[i].wr_id;
		}
		if (n < 0)
			return die("ibv_poll_cq");
		if (got >= 0)
			return got;
		if (n > 0)
			continue;
		if (epoll_wait(p->ep, &ev, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			return die("epoll_wait");
		}
		if (ev.data.u32 == 1) {		/* rdma_cm: the server's */
			if (cm_next(p))
				continue;
			return -1;
		}
		if (ibv_get_cq_event(p->cc, &cq, &ctx))
			continue;	/* none after all (EAGAIN) */
		if (++p->unacked == ACK_EVERY) {
			ibv_ack_cq_events(p->cq, p->unacked);
			p->unacked = 0;
		}
		if (ibv_req_notify_cq(p->cq, 0))
			return die("ibv_req_notify_cq");
	}
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The epoll loop: @p total round trips, @p ping the send buffer. */
static int
epoll_client(struct pp *p, uint8_t *ping, long total)
{
	double *d = p->d;
	uint64_t t;
	long i;
	int r;

	for (i = 0; i < total; i++) {
		memcpy(ping, &i, sizeof(i));
		t = stamp();
		if (post_send(p, ping))
			return die("ibv_post_send");
		r = wait_recv(p);
		if (r < 0)
			return -1;
		if (i >= p->warmup)
			d[i - p->warmup] = (double)(stamp() - t);
		if (memcmp(recv_buf(p, (unsigned)r), &i, sizeof(i)) != 0) {
			fprintf(stderr, "evrdma-rawpp: the echo differs\n");
			return -1;
		}
		if (post_recv(p, (unsigned)r))
			return die("ibv_post_recv");
	}
	return 0;
}

static int
client(struct pp *p, const struct addrinfo *ai)
{
	long total = p->lat + p->warmup, i, n = p->lat;
	uint8_t *ping;
	double *d = calloc((size_t)p->lat + 1, sizeof(*d)), sum = 0, sq = 0;
	double us, avg;
	uint64_t t0, c0, ns;

	if (!d)
		return die("calloc");
	if (rdma_create_id(p->ec, &p->id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(p->id, NULL, ai->ai_addr, 2000) ||
	    evrdma_raw_cm_wait(p->ec, RDMA_CM_EVENT_ADDR_RESOLVED, NULL) ||
	    rdma_resolve_route(p->id, 2000) ||
	    evrdma_raw_cm_wait(p->ec, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL))
		return die("resolve");
	if (resources(p))
		return -1;
	if (rdma_connect(p->id, &(struct rdma_conn_param){ .retry_count = 7,
	    .rnr_retry_count = 7 }) ||
	    evrdma_raw_cm_wait(p->ec, RDMA_CM_EVENT_ESTABLISHED, NULL))
		return die("connect");
	ping = recv_buf(p, RECVS);
	for (i = 8; i < (long)p->size; i++)
		ping[i] = (uint8_t)i;
	if (p->app)
		memcpy(p->app, ping, p->size);
	p->d = d;
	p->total = total;
	t0 = evrdma_raw_now_ns();
	c0 = stamp();
	if (p->base) {
		/* the callbacks post each ping after the last pong */
		if (total > 0 && (ev_ping(p) ||
		    event_base_dispatch(p->base) < 0 || p->failed))
			return -1;
	} else if (epoll_client(p, ping, total)) {
		return -1;
	}
	ns = evrdma_raw_now_ns() - t0;
	if (p->base)
		printf("latency: %zu-byte ping-pong on raw verbs (event-driven:"
		    " completion channel on a libevent event_base, %d evbuffer"
		    " round trips per message), %ld round trips (+%ld warm-up),"
		    " one-way = RTT/2 in usec\n", p->size, p->evbuf, n,
		    p->warmup);
	else
		printf("latency: %zu-byte ping-pong on raw verbs (event-driven:"
		    " completion channel + epoll), %ld round trips (+%ld "
		    "warm-up), one-way = RTT/2 in usec\n", p->size, n,
		    p->warmup);
	if (p->no_stats) {
		printf("(--no-stats: %.3f s)\n", (double)ns / 1e9);
	} else if (n > 0) {
		us = (double)ns / 1e3 / (double)(stamp() - c0);
		for (i = 0; i < n; i++)
			sum += d[i] = d[i] * us / 2;
		qsort(d, (size_t)n, sizeof(*d), cmp_double);
		avg = sum / (double)n;
		for (i = 0; i < n; i++)
			sq += (d[i] - avg) * (d[i] - avg);
		printf(" #bytes  #iterations    t_min[usec]    t_max[usec]  "
		    "t_typical[usec]    t_avg[usec]    t_stdev[usec]   "
		    "99%% percentile[usec]   99.9%% percentile[usec]\n");
		printf(" %-7zu %-14ld %-14.2f %-12.2f %-18.2f %-14.2f "
		    "%-15.2f %-23.2f %.2f\n", p->size, n, d[0], d[n - 1],
		    d[n / 2], avg, sqrt(sq / (double)n),
		    d[(long)(0.99 * (double)n)], d[(long)(0.999 * (double)n)]);
	}
	fflush(stdout);
	free(d);
	rdma_disconnect(p->id);
	return 0;
}

/* The epoll loop: echo until the client leaves. */
static int
epoll_server(struct pp *p)
{
	int r;

	for (;;) {
		r = wait_recv(p);
		if (r < 0)
			break;
		/* the echo goes from where the ping landed; the buffer is
		 * only written again by the next ping, which the client
		 * sends after this echo has arrived */
		if (post_send(p, recv_buf(p, (unsigned)r)) ||
		    post_recv(p, (unsigned)r))
			return die("post");
	}
	return 0;
}

static int
server(struct pp *p, const struct addrinfo *ai)
{

	if (rdma_create_id(p->ec, &p->lid, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(p->lid, ai->ai_addr) || rdma_listen(p->lid, 1))
		return die("listen");
	printf("listening on port %d\n", ntohs(rdma_get_src_port(p->lid)));
	fflush(stdout);
	if (evrdma_raw_cm_wait(p->ec, RDMA_CM_EVENT_CONNECT_REQUEST, &p->id) ||
	    resources(p) ||
	    rdma_accept(p->id, &(struct rdma_conn_param){ .retry_count = 7,
	    .rnr_retry_count = 7 }))
		return die("accept");
	/* ESTABLISHED arrives on the (now non-blocking) event channel */
	if (p->base) {
		if (event_base_dispatch(p->base) < 0 || p->failed)
			return -1;
	} else if (epoll_server(p)) {
		return -1;
	}
	if (!p->peer_gone)
		return -1;
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "size", required_argument, NULL, 'S' },
		{ "lat", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "inline", required_argument, NULL, 'i' },
		{ "no-stats", no_argument, NULL, 'N' },
		{ "once", no_argument, NULL, 'o' },	/* always */
		{ "loop", required_argument, NULL, 'l' },
		{ "evbuf", required_argument, NULL, 'e' },
		{ "conn-rate", required_argument, NULL, 'C' },
		{ NULL, 0, NULL, 0 }
	};
	struct pp p = { .size = 64, .inl = 64, .lat = 1000, .warmup = -1,
	    .ep = -1 };
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
	    .ai_socktype = SOCK_STREAM }, *ai;
	const char *addr = NULL, *port = "7180";
	int opt, client_mode = 0, event_loop = 0, rc;
	long conn_rate = 0;

	while ((opt = getopt_long(argc, argv, "sca:p:", lo, NULL)) != -1) {
		switch (opt) {
		case 's': p.server = 1; break;
		case 'c': client_mode = 1; break;
		case 'a': addr = optarg; break;
		case 'p': port = optarg; break;
		case 'S': p.size = strtoul(optarg, NULL, 0); break;
		case 'n': p.lat = strtol(optarg, NULL, 0); break;
		case 'w': p.warmup = strtol(optarg, NULL, 0); break;
		case 'i': p.inl = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'N': p.no_stats = 1; break;
		case 'o': break;
		case 'l':
			event_loop = strcmp(optarg, "event") == 0;
			if (!event_loop && strcmp(optarg, "epoll") != 0)
				goto usage;
			break;
		case 'e': p.evbuf = (int)strtol(optarg, NULL, 0); break;
		case 'C': conn_rate = strtol(optarg, NULL, 0); break;
		default: goto usage;
		}
	}
	if (optind != argc || !addr || p.server == client_mode ||
	    p.size < 8 || p.lat < 0 || p.evbuf < 0 || p.evbuf > 2 ||
	    (p.evbuf && !event_loop) ||
	    conn_rate < 0 || (conn_rate && event_loop) ||
	    getaddrinfo(addr, port, &hints, &ai) != 0)
		goto usage;
	if (conn_rate) {
		rc = evrdma_rawconn(p.server, ai, conn_rate, p.size);
		freeaddrinfo(ai);
		return rc ? 1 : 0;
	}
	if (p.warmup < 0)
		p.warmup = p.lat / 10 < 1000 ? p.lat / 10 : 1000;
	if (event_loop && !(p.base = event_base_new())) {
		fprintf(stderr, "evrdma-rawpp: event_base_new failed\n");
		return 1;
	}
	p.ec = rdma_create_event_channel();
	if (!p.ec)
		return die("rdma_create_event_channel"), 1;
	rc = p.server ? server(&p, ai) : client(&p, ai);
	/* tear down (the process ends anyway; this keeps valgrind quiet);
	 * the events first, while their descriptors are open */
	if (p.cq_ev)
		event_free(p.cq_ev);
	if (p.cm_ev)
		event_free(p.cm_ev);
	if (p.in)
		evbuffer_free(p.in);
	if (p.out)
		evbuffer_free(p.out);
	if (p.base)
		event_base_free(p.base);
	free(p.app);
	if (p.id && p.id->qp)
		rdma_destroy_qp(p.id);
	if (p.mr)
		ibv_dereg_mr(p.mr);
	if (p.cq) {
		ibv_ack_cq_events(p.cq, p.unacked);
		ibv_destroy_cq(p.cq);
	}
	if (p.cc)
		ibv_destroy_comp_channel(p.cc);
	if (p.pd)
		ibv_dealloc_pd(p.pd);
	if (p.id)
		rdma_destroy_id(p.id);
	if (p.lid)
		rdma_destroy_id(p.lid);
	rdma_destroy_event_channel(p.ec);
	if (p.ep >= 0)
		close(p.ep);
	free(p.mem);
	freeaddrinfo(ai);
	return rc ? 1 : 0;
usage:
	fprintf(stderr, "usage: evrdma-rawpp -s -a ADDR [-p PORT] [--size S]"
	    " [--inline N]\n"
	    "                    [--loop epoll|event] [--evbuf N]\n"
	    "       evrdma-rawpp -c -a ADDR [-p PORT] [--size S] [--inline N]"
	    " [--lat N] [--warmup N] [--no-stats]\n"
	    "                    [--loop epoll|event] [--evbuf N]\n"
	    "       evrdma-rawpp -s|-c -a ADDR [-p PORT] [--size S] "
	    "--conn-rate N\n"
	    "  --loop event: sleep in a libevent event_base (default: "
	    "epoll)\n"
	    "  --evbuf N: with --loop event, each message through N "
	    "evbuffers (0, 1, 2)\n"
	    "  (give --loop and --evbuf to both ends)\n");
	return 2;
}
