/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma-onesided: one-sided RDMA (WRITE, READ, atomics) in a few callbacks.
 *
 *   evrdma-onesided -s -a ADDR [-p PORT]   the server: exposes a region
 *   evrdma-onesided -c -a ADDR [-p PORT]   the client: works on it
 *   evrdma-onesided -a ADDR [-p PORT]      both ends in this process
 *
 * The server registers a region with remote read, write and atomic access
 * and SENDs its descriptor (evrdma_remote_encode()) to the client. The client
 * WRITEs a message into the region, READs it back, then does a FETCH-AND-ADD
 * and a COMPARE-AND-SWAP on the counter in it; the server's CPU takes no part.
 * When the client disconnects, the server checks the region. ADDR is
 * numeric; PORT defaults to 7175 (to any free port when both ends run here).
 * Exit status 0 when every check passed.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <evrdma.h>

#define MSG	"one-sided hello from evrdma!"
#define MSG_LEN	32

struct region {			/* the server's memory the client works on */
	char msg[MSG_LEN];
	uint64_t counter;	/* 8-byte aligned, as atomics need */
};

struct local {			/* the client's own registered memory */
	uint8_t desc[EVRDMA_REMOTE_ENCODED_LEN];	/* RECV target */
	char out[MSG_LEN];	/* WRITE source */
	char in[MSG_LEN];	/* READ target */
	uint64_t old;		/* atomic result: the value before */
};

struct demo {
	struct event_base *eb;
	struct evrdma_base *base;
	int ends, status;	/* ends still running; exit status */
	struct evrdma_listener *lst;			/* server end */
	struct evrdma_conn *srv;
	struct region region;
	uint8_t desc[EVRDMA_REMOTE_ENCODED_LEN];
	struct evrdma_mr *region_mr, *desc_mr;
	struct evrdma_conn *cli;			/* client end */
	struct local loc;
	struct evrdma_mr *loc_mr;
	struct evrdma_remote rem;
	int step;
};

/* One end is done (or something failed): leave the loop when all are. */
static void
end(struct demo *d, int failed)
{
	if (failed)
		d->status = 1;
	if (--d->ends <= 0 || failed)
		event_base_loopbreak(d->eb);
}

/* An evrdma call failed: errno and evrdma_errmsg() tell why. */
static void
fail_call(struct demo *d, const char *call)
{
	fprintf(stderr, "%s: %s (%s)\n", call, strerror(errno),
	    evrdma_errmsg());
	end(d, 1);
}

#define L(field) offsetof(struct local, field)
#define R(field) offsetof(struct region, field)

/*
 * The client's work. Every posted request gets exactly one call of its
 * completion callback; here all of them go to client_step, which checks
 * the result and posts the next request.
 */
static void
client_step(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	static const char *const names[] = { "receive", "write", "read",
	    "fetch-and-add", "compare-and-swap" };
	struct demo *d = arg;
	int rc = 0;

	if (wc->status != 0) {
		fprintf(stderr, "%s: %s\n", names[d->step],
		    strerror(wc->status));
		end(d, 1);
		return;
	}
	switch (d->step++) {
	case 0:	/* the server's descriptor; decoding validates it */
		if (evrdma_remote_decode(&d->rem, d->loc.desc,
		    wc->byte_len) < 0) {
			fail_call(d, "evrdma_remote_decode");
			return;
		}
		printf("descriptor: %llu bytes, rkey 0x%x\n",
		    (unsigned long long)d->rem.len, (unsigned)d->rem.rkey);
		snprintf(d->loc.out, MSG_LEN, "%s", MSG);
		rc = evrdma_conn_post_write(c, d->loc_mr, L(out), MSG_LEN,
		    &d->rem, R(msg), client_step, d);
		break;
	case 1:
		printf("write: %d bytes ok\n", MSG_LEN);
		rc = evrdma_conn_post_read(c, d->loc_mr, L(in), MSG_LEN,
		    &d->rem, R(msg), client_step, d);
		break;
	case 2:
		if (memcmp(d->loc.in, d->loc.out, MSG_LEN) != 0)
			goto wrong;
		printf("read: %d bytes ok \"%s\"\n", MSG_LEN, d->loc.in);
		rc = evrdma_conn_post_fadd(c, d->loc_mr, L(old), &d->rem,
		    R(counter), 5, client_step, d);
		break;
	case 3:
		if (d->loc.old != 100)
			goto wrong;
		printf("fetch-and-add: +5, old value 100 ok\n");
		rc = evrdma_conn_post_cas(c, d->loc_mr, L(old), &d->rem,
		    R(counter), 105, 42, client_step, d);
		break;
	case 4:
		if (d->loc.old != 105)
			goto wrong;
		printf("compare-and-swap: 105 -> 42, old value 105 ok\n");
		evrdma_conn_free(c);	/* allowed inside its callbacks */
		d->cli = NULL;
		end(d, 0);
		return;
	}
	if (rc < 0)
		fail_call(d, "posting a request");
	return;
wrong:
	fprintf(stderr, "%s: wrong result\n", names[d->step - 1]);
	end(d, 1);
}

static void
client_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct demo *d = arg;

	if (!(what & EVRDMA_EV_CONNECTED)) {
		fprintf(stderr, "client: %s\n", evrdma_reason_str(reason));
		end(d, 1);
		return;
	}
	/* Should the descriptor come before this receive is posted, the
	 * sender retries (evrdma's default RNR retry count 7: forever). */
	d->loc_mr = evrdma_mr_reg(c, &d->loc, sizeof(d->loc),
	    EVRDMA_ACCESS_LOCAL_WRITE);
	if (!d->loc_mr || evrdma_conn_post_recv(c, d->loc_mr, L(desc),
	    sizeof(d->loc.desc), client_step, d) < 0)
		fail_call(d, "client setup");
}

static void
server_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct demo *d = arg;
	int good = strcmp(d->region.msg, MSG) == 0 && d->region.counter == 42;

	if (!(what & EVRDMA_EV_EOF)) {
		fprintf(stderr, "server: %s\n", evrdma_reason_str(reason));
		end(d, 1);
		return;
	}
	printf("server: region holds \"%.*s\", counter %llu: %s\n", MSG_LEN,
	    d->region.msg, (unsigned long long)d->region.counter,
	    good ? "ok" : "WRONG");
	evrdma_conn_free(c);
	d->srv = NULL;
	end(d, !good);
}

static void
server_sent(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	if (wc->status != 0) {
		fprintf(stderr, "server: send: %s\n", strerror(wc->status));
		end(arg, 1);
	}
}

static void
server_accept(struct evrdma_listener *lst, struct evrdma_conn *c,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct demo *d = arg;
	struct evrdma_remote rem;

	evrdma_listener_free(lst);	/* one client is enough */
	d->lst = NULL;
	d->srv = c;
	evrdma_conn_setcb(c, server_event, d);
	d->region.counter = 100;
	d->region_mr = evrdma_mr_reg(c, &d->region, sizeof(d->region),
	    EVRDMA_ACCESS_REMOTE_READ | EVRDMA_ACCESS_REMOTE_WRITE |
	    EVRDMA_ACCESS_REMOTE_ATOMIC);
	d->desc_mr = evrdma_mr_reg(c, d->desc, sizeof(d->desc), 0);
	if (!d->region_mr || !d->desc_mr ||
	    evrdma_mr_export(d->region_mr, 0, sizeof(d->region), &rem) < 0 ||
	    evrdma_remote_encode(&rem, d->desc, sizeof(d->desc)) < 0 ||
	    evrdma_conn_post_send(c, d->desc_mr, 0, sizeof(d->desc),
	    server_sent, d) < 0)
		fail_call(d, "server setup");
}

int
main(int argc, char **argv)
{
	struct demo d = { 0 };
	struct addrinfo hints = { 0 }, *ai = NULL;
	struct evrdma_stats st;
	const char *addr = NULL, *port = NULL;
	int opt, server = 1, client = 1, bad = 0;

	while ((opt = getopt(argc, argv, "sca:p:")) != -1) {
		switch (opt) {
		case 's': client = 0; break;
		case 'c': server = 0; break;
		case 'a': addr = optarg; break;
		case 'p': port = optarg; break;
		default: bad = 1;
		}
	}
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	hints.ai_socktype = SOCK_STREAM;
	if (bad || optind != argc || !addr || !(server || client) ||
	    getaddrinfo(addr, port ? port : server && client ? "0" : "7175",
	    &hints, &ai) != 0) {
		fprintf(stderr, "usage: evrdma-onesided [-s|-c] -a ADDR "
		    "[-p PORT]\n");
		return 1;
	}
	d.ends = server + client;
	d.eb = event_base_new();
	d.base = evrdma_base_new(d.eb, NULL);
	if (!d.base) {
		fprintf(stderr, "evrdma_base_new: %s (%s)\n", strerror(errno),
		    evrdma_errmsg());
		return 1;
	}
	if (server) {
		d.lst = evrdma_listener_new(d.base, server_accept, &d, 0, 1,
		    ai->ai_addr, (int)ai->ai_addrlen);
		if (!d.lst) {
			fail_call(&d, "evrdma_listener_new");
			goto out;
		}
		printf("listening on %s port %d\n", addr,
		    evrdma_listener_get_port(d.lst));
		fflush(stdout);
		/* the client end connects to the port actually bound;
		 * sin_port and sin6_port share their place */
		((struct sockaddr_in *)ai->ai_addr)->sin_port =
		    htons((uint16_t)evrdma_listener_get_port(d.lst));
	}
	if (client) {
		d.cli = evrdma_conn_new(d.base, 0);
		if (!d.cli) {
			fail_call(&d, "evrdma_conn_new");
			goto out;
		}
		evrdma_conn_setcb(d.cli, client_event, &d);
		if (evrdma_conn_connect(d.cli, ai->ai_addr,
		    (int)ai->ai_addrlen) < 0) {
			fail_call(&d, "evrdma_conn_connect");
			goto out;
		}
	}
	event_base_dispatch(d.eb);
out:
	/* Close what is left and let the teardown finish, so that the peer
	 * sees an orderly disconnect. */
	evrdma_conn_free(d.cli);
	evrdma_conn_free(d.srv);
	evrdma_listener_free(d.lst);
	do
		evrdma_base_get_stats(d.base, &st);
	while (st.conns > 0 && event_base_loop(d.eb, EVLOOP_ONCE) == 0);
	evrdma_mr_free(d.loc_mr);
	evrdma_mr_free(d.region_mr);
	evrdma_mr_free(d.desc_mr);
	evrdma_base_free(d.base);
	event_base_free(d.eb);
	freeaddrinfo(ai);
	return d.status;
}
