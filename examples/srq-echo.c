/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma-srq-echo: a raw echo server whose connections share one receive
 * queue, and a client that opens several connections to it.
 *
 *   evrdma-srq-echo -s -a ADDR [-p PORT] [-n CONNS]
 *       the server: one shared receive queue of BUFS buffers for all its
 *       connections; echoes every message on the connection it came on;
 *       exits 0 once CONNS connections (default 4) have come and gone
 *   evrdma-srq-echo -c -a ADDR [-p PORT] [-k CONNS] [-m MSGS]
 *       the client: CONNS connections (default 4), MSGS messages each
 *       (default 100), one at a time per connection; checks every echo
 *
 * The server posts its buffers once, to the queue (evrdma_srq_post_recv()),
 * and hands the queue to its listener (evrdma_listener_set_srq()): every
 * connection it accepts draws from it. A receive's callback gets the
 * connection the message came on; the server echoes from the same buffer
 * and gives the buffer back to the queue when the echo's send completes.
 * The limit callback (evrdma_srq_set_limit()) says when the pool ran low.
 * ADDR is numeric; PORT defaults to 7177. Exit status 0 when every check
 * passed.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <evrdma.h>

#define BUFS	64		/* the server's queue */
#define LOW	8		/* ... and when it says it ran low */
#define LEN	256		/* bytes per buffer and at most per message */
#define KMAX	64		/* the client's connections, at most */

static struct event_base *eb;
static struct evrdma_base *base;
static int status;

/* ---- the server ---- */

struct buf {
	int idx;
};

static struct {
	struct evrdma_srq *srq;
	struct evrdma_mr *mr;
	char mem[BUFS * LEN];
	struct buf b[BUFS];
	int clients, left, low, echoed;
} S;

static void on_recv(struct evrdma_conn *c, const struct evrdma_wc *wc,
    void *arg);

static void
post(struct buf *b)
{
	if (evrdma_srq_post_recv(S.srq, S.mr, (size_t)b->idx * LEN, LEN,
	    on_recv, b) < 0) {
		fprintf(stderr, "server: post: %s\n", evrdma_errmsg());
		status = 1;
	}
}

static void
on_echoed(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	(void)c;
	(void)wc;
	post(arg);		/* the buffer goes back to the queue */
}

static void
on_recv(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct buf *b = arg;

	/* no connection: it was freed, or the queue is going (ECANCELED) */
	if (wc->status || !c) {
		if (wc->status != ECANCELED)
			post(b);
		return;
	}
	if (evrdma_conn_post_send(c, S.mr, (size_t)b->idx * LEN, wc->byte_len,
	    on_echoed, b) < 0)
		post(b);	/* the connection is going */
	else
		S.echoed++;
}

static void
on_low(struct evrdma_srq *srq, void *arg)
{
	(void)arg;
	S.low++;
	evrdma_srq_set_limit(srq, LOW, on_low, NULL);	/* armed once */
}

static void
srv_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	(void)arg;
	if (what & EVRDMA_EV_ERROR) {
		fprintf(stderr, "server: connection failed: %s\n",
		    evrdma_reason_str(reason));
		status = 1;
	}
	evrdma_conn_free(c);
	if (--S.left == 0) {
		printf("server: %d connections, %d messages echoed, the queue "
		    "ran low %d times\n", S.clients, S.echoed, S.low);
		event_base_loopexit(eb, NULL);
	}
}

static void
srv_accept(struct evrdma_listener *l, struct evrdma_conn *c,
    const struct sockaddr *peer, int socklen, void *arg)
{
	(void)l; (void)peer; (void)socklen; (void)arg;
	evrdma_conn_setcb(c, srv_event, NULL);
}

static int
server(const struct sockaddr *sa, int salen, int clients)
{
	struct evrdma_listener *l;
	int i;

	S.srq = evrdma_srq_new(base, NULL, BUFS);
	S.mr = S.srq ? evrdma_srq_mr_reg(S.srq, S.mem, sizeof(S.mem)) : NULL;
	if (!S.mr) {
		fprintf(stderr, "server: %s\n", evrdma_errmsg());
		return 1;
	}
	for (i = 0; i < BUFS; i++) {
		S.b[i].idx = i;
		post(&S.b[i]);
	}
	evrdma_srq_set_limit(S.srq, LOW, on_low, NULL);
	l = evrdma_listener_new(base, srv_accept, NULL, 0, 64, sa, salen);
	if (!l || evrdma_listener_set_srq(l, S.srq) < 0) {
		fprintf(stderr, "server: %s\n", evrdma_errmsg());
		return 1;
	}
	S.clients = S.left = clients;
	printf("server: listening on port %d\n", evrdma_listener_get_port(l));
	fflush(stdout);
	event_base_dispatch(eb);
	evrdma_listener_free(l);
	evrdma_srq_free(S.srq);		/* its receives: cancelled */
	evrdma_mr_free(S.mr);
	return status;
}

/* ---- the client ---- */

struct cc {
	struct evrdma_conn *c;
	struct evrdma_mr *mr;
	char mem[2 * LEN];		/* receive, then send */
	int id, sent, back;
};

static struct cc C[KMAX];
static int nconns, nmsgs, running;

static void cli_next(struct cc *k);

static void
cli_done(struct cc *k)
{
	evrdma_conn_free(k->c);
	k->c = NULL;
	if (--running == 0)
		event_base_loopexit(eb, NULL);
}

static void
cli_recv(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct cc *k = arg;
	char want[LEN];
	int n;

	(void)c;
	if (wc->status)
		return;		/* cancelled: the connection went */
	n = snprintf(want, sizeof(want), "connection %d, message %d", k->id,
	    k->back);
	if (wc->byte_len != (uint32_t)n || memcmp(k->mem, want, (size_t)n)) {
		fprintf(stderr, "client: connection %d: wrong echo\n", k->id);
		status = 1;
		cli_done(k);
		return;
	}
	if (++k->back == nmsgs)
		cli_done(k);
	else
		cli_next(k);
}

/* Post the receive for the echo, then send the next message. */
static void
cli_next(struct cc *k)
{
	int n = snprintf(k->mem + LEN, LEN, "connection %d, message %d", k->id,
	    k->sent);

	if (evrdma_conn_post_recv(k->c, k->mr, 0, LEN, cli_recv, k) < 0 ||
	    evrdma_conn_post_send(k->c, k->mr, LEN, (size_t)n, NULL,
	    NULL) < 0) {
		fprintf(stderr, "client: post: %s\n", evrdma_errmsg());
		status = 1;
		cli_done(k);
		return;
	}
	k->sent++;
}

static void
cli_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct cc *k = arg;

	if (what & EVRDMA_EV_CONNECTED) {
		k->mr = evrdma_mr_reg(c, k->mem, sizeof(k->mem),
		    EVRDMA_ACCESS_LOCAL_WRITE);
		if (k->mr) {
			cli_next(k);
			return;
		}
	}
	fprintf(stderr, "client: connection %d: %s\n", k->id,
	    (what & EVRDMA_EV_CONNECTED) ? evrdma_errmsg() :
	    evrdma_reason_str(reason));
	status = 1;
	cli_done(k);
}

static int
client(const struct sockaddr *sa, int salen)
{
	int i;

	for (i = 0; i < nconns; i++) {
		C[i].id = i;
		C[i].c = evrdma_conn_new(base, 0);
		if (!C[i].c)
			return 1;
		evrdma_conn_setcb(C[i].c, cli_event, &C[i]);
		if (evrdma_conn_connect(C[i].c, sa, salen) < 0) {
			fprintf(stderr, "client: connect: %s\n",
			    evrdma_errmsg());
			return 1;
		}
		running++;
	}
	event_base_dispatch(eb);
	for (i = 0; i < nconns; i++) {
		evrdma_mr_free(C[i].mr);
		if (C[i].back != nmsgs)
			status = 1;
	}
	if (!status)
		printf("client: %d connections x %d messages echoed: ok\n",
		    nconns, nmsgs);
	return status;
}

int
main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	struct addrinfo hints, *ai;
	const char *addr = NULL, *port = "7177";
	int opt, role = 0, clients = 4, rc;

	nconns = 4;
	nmsgs = 100;
	while ((opt = getopt(argc, argv, "sca:p:n:k:m:")) != -1) {
		switch (opt) {
		case 's': case 'c': role = opt; break;
		case 'a': addr = optarg; break;
		case 'p': port = optarg; break;
		case 'n': clients = atoi(optarg); break;
		case 'k': nconns = atoi(optarg); break;
		case 'm': nmsgs = atoi(optarg); break;
		default: role = 0; addr = NULL; break;
		}
	}
	if (!role || !addr || clients < 1 || nconns < 1 || nconns > KMAX ||
	    nmsgs < 1) {
		fprintf(stderr, "usage: evrdma-srq-echo -s -a ADDR [-p PORT] "
		    "[-n CONNS]\n       evrdma-srq-echo -c -a ADDR [-p PORT] "
		    "[-k CONNS (1-%d)] [-m MSGS]\n", KMAX);
		return 2;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	if (getaddrinfo(addr, port, &hints, &ai) != 0) {
		fprintf(stderr, "bad address %s port %s\n", addr, port);
		return 2;
	}
	memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
	eb = event_base_new();
	base = evrdma_base_new(eb, NULL);
	if (!base) {
		fprintf(stderr, "evrdma_base_new: %s\n", evrdma_errmsg());
		return 1;
	}
	rc = role == 's' ? server((struct sockaddr *)&ss, (int)ai->ai_addrlen,
	    clients) : client((struct sockaddr *)&ss, (int)ai->ai_addrlen);
	freeaddrinfo(ai);
	evrdma_base_free(base);
	event_base_free(eb);
	return rc;
}
