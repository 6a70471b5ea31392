/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma-rping: rdma-core's rping, event-driven on one libevent loop.
 *
 *   evrdma-rping -s [-a ADDR] [-p PORT] [-C COUNT] [-S SIZE] [-v] [-d]
 *   evrdma-rping -c -a ADDR [-p PORT] [-C COUNT] [-S SIZE] [-v] [-V] [-d]
 *
 * It speaks rping's wire protocol (librdmacm/examples/rping.c), so either
 * end may be the real rping (package rdmacm-utils):
 *
 *   client                               server
 *   SEND {start_buf, rkey, size}  ---->
 *                                 <----  RDMA READ of start_buf
 *                                 <----  SEND "go ahead"
 *   SEND {rdma_buf, rkey, size}   ---->
 *                                 <----  RDMA WRITE into rdma_buf
 *                                 <----  SEND "go ahead"
 *   ... COUNT times (forever with -C 0), then the client disconnects.
 *
 * An advertisement is rping's struct rping_rdma_info: big-endian 64-bit
 * address, 32-bit rkey, 32-bit size, 16 bytes. A "go ahead" is any 16-byte
 * SEND. The ping data is "rdma-ping-N: " followed by a rolling run of the
 * characters 'A'..'z' and a final NUL, exactly as rping makes it; -V
 * (validate) compares what came back byte for byte. The connection
 * carries no evrdma handshake (EVRDMA_CONN_RAW / EVRDMA_LISTEN_RAW).
 *
 * Differences from rping: the server serves one client, then exits; it
 * exits 0 when the client disconnects in order after COUNT pings (after any
 * number of pings with -C 0). Once listening, the server prints
 * "listening on ADDR port PORT" on stdout. -d logs evrdma's messages to
 * stderr. Exit status: 0 on success, 1 on any error (message on stderr).
 */
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <evrdma.h>

#define RPING_INFO_LEN	16		/* struct rping_rdma_info on the wire */
#define RPING_MSG_FMT	"rdma-ping-%d: "
#define RPING_MIN_SIZE	26		/* as rping: room for the longest prefix */
#define RPING_MAX_SIZE	65535
#define RPING_PORT	7174

/* Where a round trip stands (client: what it last sent; server: what it
 * waits for or does). */
enum rping_state {
	ST_IDLE,		/* not connected yet */
	ST_READ_ADV,		/* the start_buf advertisement */
	ST_READING,		/* server: RDMA READ in flight */
	ST_WRITE_ADV,		/* the rdma_buf advertisement */
	ST_WRITING,		/* server: RDMA WRITE in flight */
	ST_DONE			/* server: COUNT pings served, awaiting EOF */
};

/* Message slots in msg_mr: one receive, two sends. */
enum { SLOT_RECV, SLOT_SEND0, SLOT_SEND1, NSLOTS };

struct rping {
	struct event_base *eb;
	struct evrdma_base *base;
	struct evrdma_listener *lst;
	struct evrdma_conn *conn;

	int server, verbose, validate;
	int count;		/* pings to do; 0 = until the client stops */
	int size;		/* ping data size */
	const char *addr;
	int port;

	enum rping_state state;
	int pings;		/* completed round trips */
	unsigned char pattern;	/* first letter of the next ping's pattern */
	int accepted;		/* server: the accept callback has run */
	int adv_pending;	/* server: an advertisement came before it */
	struct evrdma_remote peer;	/* the peer's latest advertisement */
	size_t read_len;	/* server: bytes of the last RDMA READ */

	/*
	 * msg: 16-byte messages (LOCAL_WRITE only). data: the client's
	 * start_buf then rdma_buf, remotely readable and writable as in
	 * rping; the server's single rdma_buf (local access only).
	 */
	uint8_t msg[NSLOTS][RPING_INFO_LEN];
	char *data;
	struct evrdma_mr *msg_mr, *data_mr;

	int finished, status;
};

static void conn_event(struct evrdma_conn *c, short what, int reason,
    void *arg);

/* ---- ending ---- */

/* Stop: close the connection and the listener, leave the loop. */
static void
finish(struct rping *r, int status)
{
	if (r->finished)
		return;
	r->finished = 1;
	r->status = status;
	/* a connection not yet accepted goes with the listener */
	if (!r->server || r->accepted)
		evrdma_conn_free(r->conn);
	r->conn = NULL;
	evrdma_listener_free(r->lst);
	r->lst = NULL;
	event_base_loopbreak(r->eb);
}

/* A failed evrdma call: errno and evrdma_errmsg() say why. */
static void
fail_call(struct rping *r, const char *call)
{
	int err = errno;

	fprintf(stderr, "evrdma-rping: %s: %s (%s)\n", call, strerror(err),
	    evrdma_errmsg());
	finish(r, 1);
}

/* The peer broke the protocol, or the data did not match. */
static void
fail_msg(struct rping *r, const char *fmt, ...)
{
	va_list ap;

	fputs("evrdma-rping: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	finish(r, 1);
}

/* A work request failed (ECANCELED only follows a failure reported
 * elsewhere or our own close, so it says nothing new). */
static int
wc_failed(struct rping *r, const char *what, const struct evrdma_wc *wc)
{
	if (r->finished)
		return 1;
	if (wc->status == 0)
		return 0;
	if (wc->status != ECANCELED)
		fail_msg(r, "%s failed: %s (wc status %d)", what,
		    strerror(wc->status), wc->wc_status);
	return 1;
}

/* ---- the wire format ---- */

static void
put_info(uint8_t *p, const struct evrdma_remote *rem)
{
	uint64_t addr = htobe64(rem->addr);
	uint32_t rkey = htobe32(rem->rkey);
	uint32_t size = htobe32((uint32_t)rem->len);

	memcpy(p, &addr, 8);
	memcpy(p + 8, &rkey, 4);
	memcpy(p + 12, &size, 4);
}

static void
get_info(struct evrdma_remote *rem, const uint8_t *p)
{
	uint64_t addr;
	uint32_t rkey, size;

	memcpy(&addr, p, 8);
	memcpy(&rkey, p + 8, 4);
	memcpy(&size, p + 12, 4);
	rem->addr = be64toh(addr);
	rem->rkey = be32toh(rkey);
	rem->len = be32toh(size);
}

/* rping's ping data: the prefix, then 'A'..'z' rolling, NUL at the end. */
static void
fill_ping(struct rping *r, char *buf)
{
	unsigned char c = r->pattern;
	int i = snprintf(buf, (size_t)r->size, RPING_MSG_FMT, r->pings);

	for (; i < r->size; i++) {
		buf[i] = (char)c;
		if (++c > 'z')
			c = 'A';
	}
	if (++r->pattern > 'z')
		r->pattern = 'A';
	buf[r->size - 1] = '\0';
}

/* ---- common steps ---- */

static void recv_done(struct evrdma_conn *c, const struct evrdma_wc *wc,
    void *arg);

static void
send_done(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	(void)c;
	wc_failed(arg, "SEND", wc);
}

/* Register the buffers for the connection being prepared (each has its
 * protection domain; recv_done() frees them if it is dropped before the
 * accept, so that the next client registers anew). */
static int
setup_buffers(struct rping *r, struct evrdma_conn *c)
{
	int access = EVRDMA_ACCESS_LOCAL_WRITE;
	size_t len = (size_t)r->size;

	if (r->msg_mr)
		return 0;
	if (!r->server) {
		access |= EVRDMA_ACCESS_REMOTE_READ | EVRDMA_ACCESS_REMOTE_WRITE;
		len *= 2;
	}
	r->msg_mr = evrdma_mr_reg(c, r->msg, sizeof(r->msg),
	    EVRDMA_ACCESS_LOCAL_WRITE);
	if (!r->msg_mr)
		return -1;
	r->data_mr = evrdma_mr_reg(c, r->data, len, access);
	return r->data_mr ? 0 : -1;
}

static int
post_recv(struct rping *r, struct evrdma_conn *c)
{
	return evrdma_conn_post_recv(c, r->msg_mr,
	    SLOT_RECV * RPING_INFO_LEN, RPING_INFO_LEN, recv_done, r);
}

static int
post_send(struct rping *r, int slot)
{
	return evrdma_conn_post_send(r->conn, r->msg_mr,
	    (size_t)slot * RPING_INFO_LEN, RPING_INFO_LEN, send_done, r);
}

/* ---- client ---- */

static void
cli_ping(struct rping *r)
{
	fill_ping(r, r->data);
	if (post_send(r, SLOT_SEND0) < 0) {
		fail_call(r, "evrdma_conn_post_send");
		return;
	}
	r->state = ST_READ_ADV;
}

/* Connected: register, post the receive, advertise start_buf. */
static void
cli_start(struct rping *r)
{
	struct evrdma_remote start, sink;

	if (setup_buffers(r, r->conn) < 0) {
		fail_call(r, "evrdma_mr_reg");
		return;
	}
	if (post_recv(r, r->conn) < 0) {
		fail_call(r, "evrdma_conn_post_recv");
		return;
	}
	/* Both advertisements never change: encode them once, so a send
	 * buffer is never rewritten while a SEND may still read it. */
	if (evrdma_mr_export(r->data_mr, 0, (size_t)r->size, &start) < 0 ||
	    evrdma_mr_export(r->data_mr, (size_t)r->size, (size_t)r->size,
	    &sink) < 0) {
		fail_call(r, "evrdma_mr_export");
		return;
	}
	put_info(r->msg[SLOT_SEND0], &start);
	put_info(r->msg[SLOT_SEND1], &sink);
	cli_ping(r);
}

/* A "go ahead" from the server. */
static void
cli_go_ahead(struct rping *r)
{
	char *start = r->data, *sink = r->data + r->size;

	switch (r->state) {
	case ST_READ_ADV:	/* the server has read start_buf */
		memset(sink, 0, (size_t)r->size);
		if (post_send(r, SLOT_SEND1) < 0) {
			fail_call(r, "evrdma_conn_post_send");
			return;
		}
		r->state = ST_WRITE_ADV;
		break;
	case ST_WRITE_ADV:	/* the server has written rdma_buf */
		if (r->validate && memcmp(start, sink, (size_t)r->size)) {
			fail_msg(r, "data mismatch in ping %d", r->pings);
			return;
		}
		if (r->verbose)
			printf("ping data: %.*s\n",
			    (int)strnlen(sink, (size_t)r->size), sink);
		if (++r->pings == r->count) {
			finish(r, 0);
			return;
		}
		cli_ping(r);
		break;
	default:
		fail_msg(r, "unexpected message from the server");
	}
}

static int
cli_connect(struct rping *r)
{
	struct addrinfo hints, *ai;
	char port[16];
	int rc;

	r->conn = evrdma_conn_new(r->base, EVRDMA_CONN_RAW);
	if (!r->conn)
		return -1;
	evrdma_conn_setcb(r->conn, conn_event, r);
	/* A numeric address (with an IPv6 scope) goes straight to rdma_cm;
	 * a host name is resolved by evrdma without blocking. */
	snprintf(port, sizeof(port), "%d", r->port);
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(r->addr, port, &hints, &ai) != 0)
		return evrdma_conn_connect_hostname(r->conn, NULL, AF_UNSPEC,
		    r->addr, r->port);
	rc = evrdma_conn_connect(r->conn, ai->ai_addr, (int)ai->ai_addrlen);
	freeaddrinfo(ai);
	return rc;
}

/* ---- server ---- */

/* An advertisement from the client: RDMA READ it, or WRITE back. */
static void read_done(struct evrdma_conn *c, const struct evrdma_wc *wc,
    void *arg);
static void write_done(struct evrdma_conn *c, const struct evrdma_wc *wc,
    void *arg);

static void
srv_advert(struct rping *r)
{
	size_t len;

	switch (r->state) {
	case ST_READ_ADV:
		if (r->peer.len == 0 || r->peer.len > (uint64_t)r->size) {
			fail_msg(r, "client's ping size %llu is outside "
			    "1..%d (see -S)", (unsigned long long)r->peer.len,
			    r->size);
			return;
		}
		r->read_len = (size_t)r->peer.len;
		if (evrdma_conn_post_read(r->conn, r->data_mr, 0, r->read_len,
		    &r->peer, 0, read_done, r) < 0) {
			fail_call(r, "evrdma_conn_post_read");
			return;
		}
		r->state = ST_READING;
		break;
	case ST_WRITE_ADV:
		/* as rping: echo the string and its NUL */
		len = strnlen(r->data, r->read_len) + 1;
		if (len > r->read_len)
			len = r->read_len;
		if (len > r->peer.len) {
			fail_msg(r, "client's sink of %llu bytes is too small",
			    (unsigned long long)r->peer.len);
			return;
		}
		if (evrdma_conn_post_write(r->conn, r->data_mr, 0, len,
		    &r->peer, 0, write_done, r) < 0) {
			fail_call(r, "evrdma_conn_post_write");
			return;
		}
		r->state = ST_WRITING;
		break;
	case ST_DONE:
		fail_msg(r, "the client pings more than -C %d times",
		    r->count);
		break;
	default:
		fail_msg(r, "unexpected message from the client");
	}
}

static void
read_done(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct rping *r = arg;

	(void)c;
	if (wc_failed(r, "RDMA READ", wc))
		return;
	if (r->verbose)
		printf("server ping data: %.*s\n",
		    (int)strnlen(r->data, r->read_len), r->data);
	r->state = ST_WRITE_ADV;
	if (post_send(r, SLOT_SEND0) < 0)	/* go ahead */
		fail_call(r, "evrdma_conn_post_send");
}

static void
write_done(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct rping *r = arg;

	(void)c;
	if (wc_failed(r, "RDMA WRITE", wc))
		return;
	r->state = ++r->pings == r->count ? ST_DONE : ST_READ_ADV;
	if (post_send(r, SLOT_SEND0) < 0)	/* go ahead */
		fail_call(r, "evrdma_conn_post_send");
}

/*
 * Before the accept: rping's client SENDs as soon as it is connected, so
 * the receive must be posted now.
 */
static int
srv_prepare(struct evrdma_listener *l, struct evrdma_conn *c,
    const void *pdata, size_t len, void *arg)
{
	struct rping *r = arg;

	(void)l;
	(void)pdata;
	(void)len;
	if (r->conn || r->finished)
		return 1;	/* one client at a time */
	if (setup_buffers(r, c) < 0) {
		fail_call(r, "evrdma_mr_reg");
		return 1;
	}
	if (post_recv(r, c) < 0) {
		fail_call(r, "evrdma_conn_post_recv");
		return 1;
	}
	r->conn = c;
	r->state = ST_READ_ADV;
	return 0;
}

static void
srv_accept(struct evrdma_listener *l, struct evrdma_conn *c,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct rping *r = arg;

	(void)l;
	(void)peer;
	(void)socklen;
	r->conn = c;
	r->accepted = 1;
	evrdma_conn_setcb(c, conn_event, r);
	evrdma_listener_free(r->lst);	/* one client, as rping -s */
	r->lst = NULL;
	/* The client's first SEND may have completed before this callback
	 * (completion and CM events race); nothing but receives may be
	 * posted before the connection is established. */
	if (r->adv_pending) {
		r->adv_pending = 0;
		srv_advert(r);
	}
}

static void
srv_listen(struct rping *r)
{
	struct addrinfo hints, *ai;
	char port[16];
	int rc;

	snprintf(port, sizeof(port), "%d", r->port);
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
	hints.ai_family = r->addr ? AF_UNSPEC : AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(r->addr, port, &hints, &ai);
	if (rc != 0) {
		fail_msg(r, "-a %s: %s (the server needs a numeric address)",
		    r->addr, gai_strerror(rc));
		return;
	}
	r->lst = evrdma_listener_new(r->base, srv_accept, r, EVRDMA_LISTEN_RAW,
	    3, ai->ai_addr, (int)ai->ai_addrlen);
	freeaddrinfo(ai);
	if (!r->lst) {
		fail_call(r, "evrdma_listener_new");
		return;
	}
	evrdma_listener_set_prepare_cb(r->lst, srv_prepare, r);
	printf("listening on %s port %d\n", r->addr ? r->addr : "0.0.0.0",
	    evrdma_listener_get_port(r->lst));
	fflush(stdout);
}

/* ---- both ---- */

static void
recv_done(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct rping *r = arg;

	if (r->server && !r->accepted && wc->status == ECANCELED) {
		/* The library dropped the connection before accepting it:
		 * its regions go with it (they belong to its protection
		 * domain), and the next client's prepare registers anew. */
		r->conn = NULL;
		evrdma_mr_free(r->msg_mr);
		evrdma_mr_free(r->data_mr);
		r->msg_mr = r->data_mr = NULL;
		return;
	}
	if (wc_failed(r, "RECV", wc))
		return;
	if (wc->byte_len != RPING_INFO_LEN) {
		fail_msg(r, "received %u bytes, expected %d", wc->byte_len,
		    RPING_INFO_LEN);
		return;
	}
	/* Take the message out before the slot is reused. */
	get_info(&r->peer, r->msg[SLOT_RECV]);
	if (post_recv(r, c) < 0) {
		fail_call(r, "evrdma_conn_post_recv");
		return;
	}
	if (!r->server)
		cli_go_ahead(r);
	else if (!r->accepted)
		r->adv_pending = 1;
	else
		srv_advert(r);
}

static void
conn_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct rping *r = arg;
	int err = errno;

	(void)c;
	if (what & EVRDMA_EV_CONNECTED) {
		cli_start(r);
		return;
	}
	if ((what & EVRDMA_EV_EOF) && r->server &&
	    (r->count == 0 || r->state == ST_DONE)) {
		finish(r, 0);
		return;
	}
	if (what & EVRDMA_EV_EOF)
		fail_msg(r, "the peer disconnected after %d of %d pings",
		    r->pings, r->count);
	else
		fail_msg(r, "connection failed: %s%s%s",
		    evrdma_reason_str(reason), err ? ": " : "",
		    err ? strerror(err) : "");
}

/* Let connections finish their teardown (the peer's DISCONNECTED, or the
 * teardown timeout), so that the peer sees an orderly disconnect. */
static void
drain(struct rping *r)
{
	struct evrdma_stats st;

	for (;;) {
		evrdma_base_get_stats(r->base, &st, sizeof(st));
		if (st.conns == 0 && st.listeners == 0)
			return;
		if (event_base_loop(r->eb, EVLOOP_ONCE) != 0)
			return;
	}
}

static void
log_cb(int level, const char *msg, void *arg)
{
	(void)arg;
	fprintf(stderr, "evrdma[%d]: %s\n", level, msg);
}

static void
usage(void)
{
	fprintf(stderr,
	    "usage: evrdma-rping -s [-a ADDR] [-p PORT] [-C COUNT] [-S SIZE] "
	    "[-v] [-d]\n"
	    "       evrdma-rping -c -a ADDR [-p PORT] [-C COUNT] [-S SIZE] "
	    "[-v] [-V] [-d]\n"
	    "  -s/-c server/client; -p port (default %d); -C pings "
	    "(default 0: endless)\n"
	    "  -S ping size %d..%d (default 64); -v print ping data; "
	    "-V validate; -d debug log\n",
	    RPING_PORT, RPING_MIN_SIZE, RPING_MAX_SIZE);
	exit(1);
}

static int
parse_int(const char *s, int min, int max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		usage();
	return (int)v;
}

int
main(int argc, char **argv)
{
	struct rping r;
	int opt;

	memset(&r, 0, sizeof(r));
	r.server = -1;
	r.port = RPING_PORT;
	r.size = 64;
	r.pattern = 'A';
	while ((opt = getopt(argc, argv, "sca:p:C:S:vVdh")) != -1) {
		switch (opt) {
		case 's': r.server = 1; break;
		case 'c': r.server = 0; break;
		case 'a': r.addr = optarg; break;
		case 'p': r.port = parse_int(optarg, 1, 65535); break;
		case 'C': r.count = parse_int(optarg, 0, 1 << 30); break;
		case 'S':
			r.size = parse_int(optarg, RPING_MIN_SIZE,
			    RPING_MAX_SIZE);
			break;
		case 'v': r.verbose = 1; break;
		case 'V': r.validate = 1; break;
		case 'd':
			evrdma_set_log_callback(log_cb, EVRDMA_LOG_DEBUG, NULL);
			break;
		default: usage();
		}
	}
	if (optind != argc || r.server < 0 || (!r.server && !r.addr))
		usage();

	r.eb = event_base_new();
	if (!r.eb) {
		fprintf(stderr, "evrdma-rping: event_base_new failed\n");
		return 1;
	}
	r.base = evrdma_base_new(r.eb, NULL);
	r.data = calloc(2, (size_t)r.size);
	if (!r.base || !r.data) {
		fprintf(stderr, "evrdma-rping: evrdma_base_new: %s (%s)\n",
		    strerror(errno), evrdma_errmsg());
		event_base_free(r.eb);
		free(r.data);
		return 1;
	}
	if (r.server)
		srv_listen(&r);		/* reports its own errors */
	else if (cli_connect(&r) < 0)
		fail_call(&r, "evrdma_conn_connect");
	if (!r.finished)
		event_base_dispatch(r.eb);
	drain(&r);
	evrdma_mr_free(r.msg_mr);
	evrdma_mr_free(r.data_mr);
	evrdma_base_free(r.base);
	event_base_free(r.eb);
	free(r.data);
	return r.status;
}
