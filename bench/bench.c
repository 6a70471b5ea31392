/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma-bench: latency and bandwidth of evrdma channels, reported the way
 * perftest reports them, so that the two can be put side by side; and the
 * same over TCP with libevent bufferevents (--tcp), what evrdma replaces.
 *
 *   evrdma-bench -s -a ADDR [-p PORT] [--once | --clients N] [options]
 *   evrdma-bench -c -a ADDR [-p PORT] [--lat N] [--rate N] [--bw BYTES]
 *                [--conn-rate N] [--fan N] [options]
 *
 * Latency (--lat N): ping-pong of --lat-size-byte messages (default 64):
 * the client writes one, the server echoes it, the client writes the next
 * when the echo is whole. Each round trip is timed; as perftest's
 * ib_send_lat does, the figures are half round trips (one-way latency) in
 * microseconds: min, max, typical (the median), average, standard
 * deviation, 99% and 99.9% percentiles. --warmup round trips (default
 * N/10, at most 1000) go first and are not counted. --no-stats leaves out
 * the statistics (and their sort), for instruction counts.
 *
 * Message rate (--rate N): the same echo with --window messages in flight
 * (default 16): the client writes the next ping whenever an echo is
 * whole. Printed as MsgRate[Mpps] (10^6 echoed messages per second, as
 * perftest's MsgRate) and microseconds per message.
 *
 * Bandwidth (--bw BYTES): the client streams BYTES in --size-byte writes
 * (default 65536, one evrdma_channel_write() each, output refilled from the
 * write callback); the server drains its input and, once it has all
 * BYTES, answers with a 16-byte acknowledgement. The client's time runs
 * from its first write to the acknowledgement. Bandwidth is printed in
 * MB/sec with MB = 2^20 bytes, as perftest's "BW average[MB/sec]" (perftest
 * divides by 0x100000 unless --report_gbits), and a message rate in
 * millions of writes per second. The server prints how often it slept
 * meanwhile (its voluntary context switches, from the first byte to the
 * acknowledgement) per write: the receiver's wake-ups per message.
 *
 * Connections (conns.c): --conn-rate N connects, writes a ping, takes its
 * echo and closes, N times one after another; --fan N opens N connections
 * on the one loop and ping-pongs on all of them for --fan-time ms, then
 * prints the aggregate message rate and the slowest and fastest
 * connection's rate against the mean.
 *
 * Both sides are event-driven on one event_base, without threads. By default
 * nothing busy-polls (each wake-up goes through the completion channel, as
 * with ib_send_lat -e); --busy-poll US enables evrdma's bounded busy
 * polling (evrdma_config_set_busy_poll), the counterpart of perftest's
 * default busy polling. Without --lat, --rate, --bw, --conn-rate and --fan
 * the client runs --lat 1000 --bw 67108864. The server serves clients one
 * after another (or at the same time) until SIGINT or SIGTERM, until the
 * first one leaves (--once), or until N have left (--clients N).
 *
 * Other options (the same on both sides where they matter):
 *   --tcp             TCP sockets with libevent bufferevents instead of
 *                     evrdma channels (stream mode; no --message,
 *                     --recv-cb, --zero-copy, --busy-poll)
 *   --bev-adapter     the same bufferevent code on evrdma's bufferevent
 *                     adapter (evrdma/bufferevent.h) over RDMA (and, of
 *                     the options --tcp refuses, --busy-poll works)
 *   --message         message-mode channels (default: stream)
 *   --flush           (client) evrdma_channel_flush() after each ping,
 *                     instead of the send at the end of the loop iteration
 *   --slots N, --slot-size S   the channel ring (evrdma_config_set_channel_ring)
 *   --queue-depth N   send and receive queue depth (default: slots + 64,
 *                     at least 128)
 *   --raw FILE        (client) write each one-way latency sample (us), in
 *                     the order measured, one per line
 *   --inline BYTES    evrdma_config_set_inline_threshold() (default 64;
 *                     perftest uses no inline data on Soft-RoCE: --inline 0
 *                     compares like with like there)
 *   --busy-poll US    evrdma_config_set_busy_poll() (default 0: none)
 *   --pull BYTES      evrdma_config_set_channel_pull() (default: the
 *                     library's, 32768); 0: every message by RDMA WRITE
 *   --recv-cb         pongs (client) and pings and bandwidth data (server)
 *                     are taken with evrdma_channel_set_recv_cb(), straight
 *                     from the receive slot, instead of through input and
 *                     the read callback; the same on both sides (each side
 *                     decides for itself)
 *   --zero-copy       (client) bandwidth writes with evrdma_channel_reserve()
 *                     and evrdma_channel_commit(): each write is made in
 *                     the channel's send memory, where the bench stores
 *                     an 8-byte sequence number and leaves the rest as it
 *                     is (as ib_write_bw sends its buffer without touching
 *                     it), in pieces of at most a slot; default:
 *                     evrdma_channel_write() of a buffer
 *
 * Wire format between client and server (on the channel, big-endian):
 * a 24-byte request "EVB1", type (1 latency, 2 bandwidth, 3 echo until
 * EOF), size, 0, count (64 bits: round trips, or bytes), then the data;
 * acknowledgement "EVBA", 0, receive time in nanoseconds (64 bits).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/listener.h>

#include "bench.h"

#define FILL		8	/* bandwidth: writes queued in output ... */
#define FILL_LOW	2	/* ... refilled when it drains to this many */
#define FILL_MIN	65536	/* ... but at least this many bytes */

struct session {			/* server: one client */
	struct session *next;
	struct bench *b;
	struct ep e;
	int type;			/* 0: waiting for a request */
	int echo;			/* T_ECHO: until the client leaves */
	size_t size;
	uint64_t left;			/* bytes (or messages) still due */
	uint64_t t_first;		/* bandwidth: first data, ns */
	uint64_t total;			/* bandwidth: bytes asked for */
	long nvcsw0;			/* bandwidth: voluntary context
					 * switches at the first data */
};

/* How often this process has slept (each time the loop found nothing to
 * do and blocked): its voluntary context switches so far. */
static long
slept(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_nvcsw : 0;
}

/* Bandwidth: the first data is in. */
static void
server_bw_start(struct session *s)
{
	s->t_first = now_ns();
	s->nvcsw0 = slept();
}

/* Report a failure and leave the loop (exit status 1). */
void
fail(struct bench *b, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "evrdma-bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	b->status = 1;
	event_base_loopbreak(b->eb);
}

const char *
ep_error(const struct ep *e, short what)
{
	if (what & BEV_EVENT_EOF)
		return "the peer closed the connection";
	if (what & BEV_EVENT_TIMEOUT)
		return "timeout";
	if (e->bev)
		return evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR());
	return evrdma_reason_str(evrdma_channel_get_error(e->ch));
}

/*
 * The next whole unit of input: @p need bytes (stream) or one message. In
 * stream mode the bytes stay in input and *p is NULL (the caller removes
 * them); in message mode they are in b->buf. @return its length, or 0.
 */
static size_t
next_unit(struct bench *b, const struct ep *e, size_t need, uint8_t **p)
{
	ssize_t n;

	*p = NULL;
	if (!b->o.message)
		return evbuffer_get_length(ep_input(e)) >= need ? need : 0;
	n = evrdma_channel_read_message(e->ch, b->buf, b->buf_len);
	if (n < 0)
		return 0;
	*p = b->buf;
	return (size_t)n;
}

static int
buffers(struct bench *b, struct evrdma_channel *ch)
{
	if (!b->o.message || b->buf)
		return 0;
	b->buf_len = evrdma_channel_max_message(ch);
	b->buf = malloc(b->buf_len);
	return b->buf ? 0 : -1;
}

/* TCP: no Nagle (as rstream -T s), for both ends. */
void
tcp_connected(struct ep *e)
{
	int one = 1;

	/* (the adapter has no socket: -1) */
	if (bufferevent_getfd(e->bev) >= 0)
		setsockopt(bufferevent_getfd(e->bev), IPPROTO_TCP, TCP_NODELAY,
		    &one, sizeof(one));
}

/* ---------------------------------------------------------------- server */

static void
session_free(struct session *s)
{
	struct session **pp;

	for (pp = &s->b->sessions; *pp != s; pp = &(*pp)->next)
		;
	*pp = s->next;
	ep_free(&s->e);
	free(s);
}

/* A client is done (or failed): with --once / --clients, so may be the
 * server. */
static void
session_end(struct session *s)
{
	struct bench *b = s->b;

	session_free(s);
	if (b->o.clients > 0 && ++b->served >= b->o.clients)
		event_base_loopbreak(b->eb);
}

/* A request: check it and get ready for its data. @return 0 or -1 */
static int
server_request(struct session *s, const uint8_t *req, size_t len)
{
	if (len != REQ_LEN || memcmp(req, "EVB1", 4) != 0)
		return -1;
	s->type = (int)get32(req + 4);
	s->size = get32(req + 8);
	s->left = get64(req + 16);
	s->total = s->left;
	s->t_first = 0;
	s->echo = s->type == T_ECHO;
	if (s->echo) {
		s->type = T_LAT;	/* echoes until EOF */
		s->left = UINT64_MAX;
		return 0;
	}
	if ((s->type != T_LAT && s->type != T_BW) || s->size == 0 ||
	    s->left == 0)
		return -1;
	if (s->type == T_LAT && !s->b->o.message)
		s->left *= s->size;	/* bytes to echo */
	return 0;
}

/* A session's test failed: say so, unless it was an open-ended echo
 * (the client leaves it at any time). */
static void
session_error(struct session *s, const char *what, const char *why)
{
	if (!s->echo)
		fprintf(stderr, "evrdma-bench: %s: %s\n", what, why);
	session_end(s);
}

/* Bandwidth: all bytes are in: acknowledge. @return 0 or -1 (ended) */
static int
server_ack(struct session *s)
{
	uint8_t ack[ACK_LEN];

	long w = slept() - s->nvcsw0;
	uint64_t msgs = (s->total + s->size - 1) / s->size;

	memcpy(ack, "EVBA", 4);
	put32(ack + 4, 0);
	put64(ack + 8, now_ns() - s->t_first);
	/* (the bench's table form: run-bench's wake-ups per message) */
	printf("receiver: %llu writes of %zu bytes, %ld wake-ups\n",
	    (unsigned long long)msgs, s->size, w);
	printf(" #bytes     #messages  #wakeups   wakeups[per message]\n");
	printf(" %-10zu %-10llu %-10ld %.4f\n", s->size,
	    (unsigned long long)msgs, w, msgs ? (double)w / (double)msgs : 0);
	fflush(stdout);
	if (ep_write(&s->e, ack, ACK_LEN) < 0) {
		session_error(s, "ack", strerror(errno));
		return -1;
	}
	return 0;
}

static void server_read(struct evrdma_channel *ch, void *arg);

/*
 * --recv-cb: the latency phase's pings and the bandwidth phase's data,
 * straight from the receive slot. A ping is echoed with one
 * evrdma_channel_write(); what follows the last one (the next request,
 * in stream mode) goes to input for server_read().
 */
static void
server_recv(struct evrdma_channel *ch, const void *data, size_t len,
    void *arg)
{
	struct session *s = arg;
	size_t n = s->b->o.message || len < s->left ? len : (size_t)s->left;

	if (s->type == T_BW) {
		if (s->t_first == 0)
			server_bw_start(s);
		s->left -= n < s->left ? n : s->left;
		if (s->left == 0 && server_ack(s) < 0)
			return;
	} else if (evrdma_channel_write(ch, data, n) < 0) {
		session_error(s, "echo", strerror(errno));
		return;
	} else
		s->left -= s->b->o.message ? 1 : n;
	if (s->left > 0)
		return;
	s->type = 0;
	evrdma_channel_set_recv_cb(ch, NULL);
	if (n < len) {
		evbuffer_add(evrdma_channel_get_input(ch),
		    (const uint8_t *)data + n, len - n);
		server_read(ch, s);
	}
}

/* (the channel's read callback; @p ch is NULL with --tcp) */
static void
server_read(struct evrdma_channel *ch, void *arg)
{
	struct session *s = arg;
	struct bench *b = s->b;
	struct evbuffer *in = ep_input(&s->e);
	uint8_t req[REQ_LEN], *p;
	size_t n;
	int rc = 0;

	for (;;) {
		if (s->type == 0) {
			n = next_unit(b, &s->e, REQ_LEN, &p);
			if (n == 0)
				return;
			if (!p)
				evbuffer_remove(in, p = req, REQ_LEN);
			if (server_request(s, p, n) < 0) {
				fprintf(stderr, "evrdma-bench: bad request "
				    "from a client\n");
				session_end(s);
				return;
			}
			/* the rest straight to server_recv() */
			if (b->o.recv_cb && !evbuffer_get_length(in)) {
				evrdma_channel_set_recv_cb(ch, server_recv);
				return;
			}
			continue;
		}
		if (!b->o.message) {
			n = evbuffer_get_length(in);
			if (n == 0)
				return;
			if (n > s->left)
				n = (size_t)s->left;
			if (s->type == T_LAT)	/* moved, not copied */
				rc = evbuffer_remove_buffer(in,
				    ep_output(&s->e), n) == (int)n ? 0 : -1;
			else
				evbuffer_drain(in, n);
			s->left -= n;
		} else {
			n = next_unit(b, &s->e, 0, &p);
			if (n == 0)
				return;
			if (s->type == T_LAT) {
				rc = evrdma_channel_write(ch, p, n);
				s->left--;
			} else
				s->left -= n < s->left ? n : s->left;
		}
		if (rc < 0) {
			session_error(s, "echo", strerror(errno));
			return;
		}
		if (s->type == T_BW && s->t_first == 0)
			server_bw_start(s);
		/* the rest of the pings straight to server_recv() */
		if (s->left > 0 && b->o.recv_cb && !evbuffer_get_length(in)) {
			evrdma_channel_set_recv_cb(ch, server_recv);
			return;
		}
		if (s->left > 0)
			continue;
		if (s->type == T_BW && server_ack(s) < 0)
			return;
		s->type = 0;
	}
}

static void
server_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct session *s = arg;

	if (!(what & BEV_EVENT_EOF) || s->type != 0)
		session_error(s, "server", s->type ? "the connection ended "
		    "in a test" : ep_error(&s->e, what));
	else
		session_end(s);
}

static void
server_read_tcp(struct bufferevent *bev, void *arg)
{
	server_read(NULL, arg);
}

static void
server_event_tcp(struct bufferevent *bev, short what, void *arg)
{
	server_event(NULL, what, arg);
}

/* A new session on @p ch or @p bev. */
static void
server_session(struct bench *b, struct evrdma_channel *ch,
    struct bufferevent *bev)
{
	struct session *s = calloc(1, sizeof(*s));

	if (!s || (ch && buffers(b, ch) < 0)) {
		fprintf(stderr, "evrdma-bench: out of memory\n");
		free(s);
		if (ch)
			evrdma_channel_free(ch);
		if (bev)
			bufferevent_free(bev);
		return;
	}
	s->b = b;
	s->e.ch = ch;
	s->e.bev = bev;
	s->next = b->sessions;
	b->sessions = s;
	if (b->o.clients > 0 && ++b->accepted >= b->o.clients) {
		if (b->lst)
			evrdma_listener_free(b->lst);
		if (b->tcp_lst)
			evconnlistener_free(b->tcp_lst);
		b->lst = NULL;
		b->tcp_lst = NULL;
	}
	if (bev) {
		tcp_connected(&s->e);
		bufferevent_setcb(bev, server_read_tcp, NULL,
		    server_event_tcp, s);
		bufferevent_enable(bev, EV_READ | EV_WRITE);
	} else {
		evrdma_channel_setcb(ch, server_read, NULL, server_event, s);
		evrdma_channel_enable(ch, EV_READ);
	}
}

static void
server_accept(struct evrdma_listener *lst, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	server_session(arg, ch, NULL);
}

static void
server_accept_tcp(struct evconnlistener *lst, evutil_socket_t fd,
    struct sockaddr *peer, int socklen, void *arg)
{
	struct bench *b = arg;
	struct bufferevent *bev = bufferevent_socket_new(b->eb, fd,
	    BEV_OPT_CLOSE_ON_FREE);

	if (!bev) {
		fprintf(stderr, "evrdma-bench: out of memory\n");
		evutil_closesocket(fd);
		return;
	}
	server_session(b, NULL, bev);
}

/* --bev-adapter: the listener hands over a bufferevent */
static void
server_accept_adapter(struct evrdma_listener *lst, struct bufferevent *bev,
    const struct sockaddr *peer, int socklen, void *arg)
{
	server_session(arg, NULL, bev);
}

/* ---------------------------------------------------------------- client */

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void
report_latency(struct bench *b)
{
	long n = b->total - b->warm, i;
	double *d = b->rtt, sum = 0, sq = 0, avg, sd, us_per_stamp;
	uint64_t ns = now_ns() - b->cal_ns, st = stamp() - b->cal_stamp;
	FILE *f;

	printf("latency: %zu-byte ping-pong, %ld round trips (+%ld warm-up), "
	    "one-way = RTT/2 in usec\n", b->o.lat_size, n, b->warm);
	if (b->o.no_stats) {
		printf("(--no-stats: %.3f s)\n", (double)ns / 1e9);
		fflush(stdout);
		return;
	}
	us_per_stamp = st ? (double)ns / 1e3 / (double)st : 0;
	for (i = 0; i < n; i++)	/* one way: half the round trip */
		d[i] = d[i] * us_per_stamp / 2;
	if (b->o.raw) {
		f = fopen(b->o.raw, "w");
		for (i = 0; f && i < n; i++)
			fprintf(f, "%.2f\n", d[i]);
		if (!f || fclose(f) != 0)
			fprintf(stderr, "evrdma-bench: %s: %s\n", b->o.raw,
			    strerror(errno));
	}
	qsort(d, (size_t)n, sizeof(*d), cmp_double);
	for (i = 0; i < n; i++)
		sum += d[i];
	avg = sum / (double)n;
	for (i = 0; i < n; i++)
		sq += (d[i] - avg) * (d[i] - avg);
	sd = sqrt(sq / (double)n);
	printf(" #bytes  #iterations    t_min[usec]    t_max[usec]  "
	    "t_typical[usec]    t_avg[usec]    t_stdev[usec]   "
	    "99%% percentile[usec]   99.9%% percentile[usec]\n");
	printf(" %-7zu %-14ld %-14.2f %-12.2f %-18.2f %-14.2f %-15.2f "
	    "%-23.2f %.2f\n", b->o.lat_size, n, d[0], d[n - 1], d[n / 2],
	    avg, sd, d[(long)(0.99 * (double)n)],
	    d[(long)(0.999 * (double)n)]);
	fflush(stdout);
}

static void
report_rate(struct bench *b)
{
	long n = b->total - b->warm;
	double s = (double)(now_ns() - b->t_start) / 1e9;

	printf("message rate: %zu-byte messages echoed, %ld in flight, %ld "
	    "(+%ld warm-up) in %.3f s\n", b->o.lat_size, b->o.window, n,
	    b->warm, s);
	printf(" #bytes  #messages  #window    MsgRate[Mpps]   "
	    "t_msg[usec]\n");
	printf(" %-7zu %-10ld %-10ld %-15.6f %.2f\n", b->o.lat_size, n,
	    b->o.window, (double)n / s / 1e6, s * 1e6 / (double)n);
	fflush(stdout);
}

static void
report_bandwidth(struct bench *b, uint64_t server_ns)
{
	double s = (double)(now_ns() - b->t_start) / 1e9;
	uint64_t writes = (b->o.bw + b->o.bw_size - 1) / b->o.bw_size;

	printf("bandwidth: %zu-byte writes%s, %llu bytes in %.3f s "
	    "(receiver busy %.3f s); MB = 2^20 bytes, as perftest\n",
	    b->o.bw_size, b->o.zero_copy ? " (zero-copy)" : "",
	    (unsigned long long)b->o.bw, s,
	    (double)server_ns / 1e9);
	printf(" #bytes     #iterations    BW average[MB/sec]   "
	    "MsgRate[Mpps]\n");
	printf(" %-10zu %-14llu %-20.2f %.6f\n", b->o.bw_size,
	    (unsigned long long)writes, (double)b->o.bw / s / 1048576.0,
	    (double)writes / s / 1e6);
	fflush(stdout);
}

static void next_phase(struct bench *b);

/* Write ping number b->sent; @p t: now, a stamp() (one per round trip) */
static void
send_ping(struct bench *b, uint64_t t)
{
	put64(b->ping, (uint64_t)b->sent++);
	b->t_send = t;
	if (ep_write(&b->e, b->ping, b->o.lat_size) < 0) {
		fail(b, "ping: %s", strerror(errno));
		return;
	}
	if (b->o.flush && evrdma_channel_flush(b->e.ch) < 0)
		fail(b, "flush: %s", strerror(errno));
}

/* Bandwidth: refill output to FILL writes ahead of the channel. */
static void
client_write(struct evrdma_channel *ch, void *arg)
{
	struct bench *b = arg;
	struct evbuffer *out = ep_output(&b->e);
	size_t n, fill = FILL * b->o.bw_size;

	if (b->phase != P_BW)
		return;
	if (fill < FILL_MIN)
		fill = FILL_MIN;
	while (b->bw_sent < b->o.bw && evbuffer_get_length(out) < fill) {
		n = b->o.bw - b->bw_sent < b->o.bw_size ?
		    (size_t)(b->o.bw - b->bw_sent) : b->o.bw_size;
		if (b->o.zero_copy) {
			size_t max = evrdma_channel_max_message(ch);
			uint8_t *p;

			if (n > max)	/* a write of several slots */
				n = max;
			p = evrdma_channel_reserve(ch, n);
			if (!p && errno == EAGAIN)
				return;	/* the write callback comes back */
			if (!p) {
				fail(b, "reserve: %s", strerror(errno));
				return;
			}
			if (n >= 8)
				put64(p, b->bw_sent / b->o.bw_size);
			if (evrdma_channel_commit(ch, n) < 0) {
				fail(b, "commit: %s", strerror(errno));
				return;
			}
		} else if (ep_write(&b->e, b->data, n) < 0) {
			fail(b, "write: %s", strerror(errno));
			return;
		}
		b->bw_sent += n;
	}
}

/*
 * One pong, in @p p (@p n bytes) at time @p t: check and time it, then
 * the next ping or the next phase. The check: its sequence number and its
 * last (up to) 56 bytes, all of a 64-byte pong; a full compare of large
 * pongs would weigh on the figures (perftest does not compare at all).
 * @return 0, or -1 when that failed
 */
static int
client_pong(struct bench *b, const uint8_t *p, size_t n, uint64_t t)
{
	size_t k = n - 8 < 56 ? n - 8 : 56;

	if (n != b->o.lat_size || get64(p) != (uint64_t)b->rcvd ||
	    memcmp(p + n - k, b->ping + n - k, k) != 0) {
		fail(b, "the echo differs from the ping");
		return -1;
	}
	if (b->phase == P_LAT && b->rcvd >= b->warm)
		b->rtt[b->rcvd - b->warm] = (double)(t - b->t_send);
	if (++b->rcvd == b->warm && b->phase == P_RATE)
		b->t_start = now_ns();
	if (b->sent < b->total) {
		send_ping(b, t);
		return 0;
	}
	if (b->rcvd < b->total)
		return 0;
	if (b->o.recv_cb)
		evrdma_channel_set_recv_cb(b->e.ch, NULL);
	if (b->phase == P_LAT)
		report_latency(b);
	else
		report_rate(b);
	next_phase(b);
	return 0;
}

/*
 * --recv-cb: pongs straight from the receive slot. Bytes that are not a
 * whole pong (a stream may cut them anywhere, and join several) go to
 * client_read() through input.
 */
static void client_read(struct evrdma_channel *ch, void *arg);

static void
client_recv(struct evrdma_channel *ch, const void *data, size_t len,
    void *arg)
{
	struct bench *b = arg;
	const uint8_t *p = data;
	uint64_t t = stamp();

	if (len == b->o.lat_size) {
		client_pong(b, p, len, t);
		return;
	}
	while (len >= b->o.lat_size &&
	    (b->phase == P_LAT || b->phase == P_RATE)) {
		if (client_pong(b, p, b->o.lat_size, t) < 0)
			return;
		p += b->o.lat_size;
		len -= b->o.lat_size;
	}
	if (len == 0)
		return;
	evbuffer_add(evrdma_channel_get_input(ch), p, len);
	client_read(ch, b);
}

/* (the channel's read callback; @p ch is NULL with --tcp) */
static void
client_read(struct evrdma_channel *ch, void *arg)
{
	struct bench *b = arg;
	struct evbuffer *in = ep_input(&b->e);
	uint8_t ack[ACK_LEN], *p;
	uint64_t t;
	size_t n;

	while (b->phase == P_LAT || b->phase == P_RATE) {
		n = next_unit(b, &b->e, b->o.lat_size, &p);
		if (n == 0)
			return;
		t = stamp();
		if (!p)
			evbuffer_remove(in, p = b->pong, n);
		if (client_pong(b, p, n, t) < 0 ||
		    (b->phase != P_LAT && b->phase != P_RATE))
			break;
		if (!evbuffer_get_length(in))
			return;
	}
	if (b->phase == P_BW) {
		n = next_unit(b, &b->e, ACK_LEN, &p);
		if (n == 0)
			return;
		if (!p)
			evbuffer_remove(in, p = ack, n);
		if (n != ACK_LEN || memcmp(p, "EVBA", 4) != 0) {
			fail(b, "bad acknowledgement");
			return;
		}
		report_bandwidth(b, get64(p + 8));
		next_phase(b);
	}
}

int
make_request(uint8_t *req, int type, size_t size, uint64_t count)
{
	memcpy(req, "EVB1", 4);
	put32(req + 4, (uint32_t)type);
	put32(req + 8, (uint32_t)size);
	put32(req + 12, 0);
	put64(req + 16, count);
	return REQ_LEN;
}

static int
send_request(struct bench *b, int type, size_t size, uint64_t count)
{
	uint8_t req[REQ_LEN];

	if (ep_write(&b->e, req, (size_t)make_request(req, type, size,
	    count)) < 0) {
		fail(b, "request: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Ping-pong phase @p phase: @p n counted pongs after @p warm, with
 * @p window pings in flight. */
static void
start_pingpong(struct bench *b, int phase, long n, long warm, long window)
{
	long i;

	b->phase = phase;
	b->sent = b->rcvd = 0;
	b->warm = warm;
	b->total = n + warm;
	b->cal_ns = b->t_start = now_ns();
	b->cal_stamp = stamp();
	if (send_request(b, T_LAT, b->o.lat_size, (uint64_t)b->total) < 0)
		return;
	for (i = 0; i < window && b->sent < b->total && !b->status; i++)
		send_ping(b, stamp());
	/* pongs straight to client_recv() */
	if (b->o.recv_cb)
		evrdma_channel_set_recv_cb(b->e.ch, client_recv);
}

static void
next_phase(struct bench *b)
{
	if (b->phase < P_LAT && b->o.lat > 0) {
		start_pingpong(b, P_LAT, b->o.lat, b->o.warmup, 1);
		return;
	}
	if (b->phase < P_RATE && b->o.rate > 0) {
		start_pingpong(b, P_RATE, b->o.rate, b->o.rate_warmup,
		    b->o.window);
		return;
	}
	if (b->phase < P_BW && b->o.bw > 0) {
		b->phase = P_BW;
		b->bw_sent = 0;
		if (send_request(b, T_BW, b->o.bw_size, b->o.bw) < 0)
			return;
		b->t_start = now_ns();
		client_write(b->e.ch, b);
		return;
	}
	b->phase = 0;		/* done: leave; the server sees EOF */
	b->done = 1;
	event_base_loopbreak(b->eb);
}

static void
client_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct bench *b = arg;

	if (!(what & BEV_EVENT_CONNECTED)) {
		fail(b, "client: %s", ep_error(&b->e, what));
		return;
	}
	if (ch && buffers(b, ch) < 0) {
		fail(b, "out of memory");
		return;
	}
	if (b->o.message && (b->o.lat_size > b->buf_len ||
	    b->o.bw_size > b->buf_len)) {
		fail(b, "messages are at most %zu bytes here", b->buf_len);
		return;
	}
	if (b->e.bev) {
		tcp_connected(&b->e);
		printf("connected: %s\n", b->o.adapter ? "evrdma bufferevent "
		    "adapter (a libevent bufferevent over a channel)" :
		    "TCP, libevent bufferevent");
	} else
		printf("connected: %s channel, largest message %zu bytes\n",
		    b->o.message ? "message" : "stream",
		    evrdma_channel_max_message(ch));
	fflush(stdout);
	ep_enable(&b->e, EV_READ);
	next_phase(b);
}

static void
client_read_tcp(struct bufferevent *bev, void *arg)
{
	client_read(NULL, arg);
}

static void
client_write_tcp(struct bufferevent *bev, void *arg)
{
	client_write(NULL, arg);
}

static void
client_event_tcp(struct bufferevent *bev, short what, void *arg)
{
	client_event(NULL, what, arg);
}

/*
 * Make @p e (a channel, or with --tcp a bufferevent) and connect it to the
 * server with the callbacks given (@p tcp_read, @p tcp_event for the
 * bufferevent; @p read, @p event for the channel; no write callback).
 * @return 0, or -1 with the reason printed
 */
int
ep_connect(struct bench *b, struct ep *e, bufferevent_data_cb tcp_read,
    bufferevent_event_cb tcp_event, evrdma_channel_data_cb read,
    evrdma_channel_event_cb event, void *arg)
{
	const struct addrinfo *ai = b->ai;

	if (b->o.tcp) {
		e->bev = b->o.adapter ?
		    evrdma_bufferevent_new(b->base, BEV_OPT_CLOSE_ON_FREE) :
		    bufferevent_socket_new(b->eb, -1, BEV_OPT_CLOSE_ON_FREE);
		if (!e->bev) {
			fprintf(stderr, "evrdma-bench: cannot make a "
			    "bufferevent: %s\n", strerror(errno));
			return -1;
		}
		bufferevent_setcb(e->bev, tcp_read, NULL, tcp_event, arg);
		if ((b->o.adapter ? evrdma_bufferevent_connect(e->bev,
		    ai->ai_addr, (int)ai->ai_addrlen) :
		    bufferevent_socket_connect(e->bev, ai->ai_addr,
		    (int)ai->ai_addrlen)) < 0) {
			fprintf(stderr, "evrdma-bench: connect: %s\n",
			    strerror(errno));
			return -1;
		}
		return 0;
	}
	e->ch = evrdma_channel_new(b->base, b->o.message ?
	    EVRDMA_CHANNEL_MESSAGE : EVRDMA_CHANNEL_STREAM);
	if (e->ch)
		evrdma_channel_setcb(e->ch, read, NULL, event, arg);
	if (!e->ch || evrdma_channel_connect(e->ch, ai->ai_addr,
	    (int)ai->ai_addrlen) < 0) {
		fprintf(stderr, "evrdma-bench: connect: %s (%s)\n",
		    strerror(errno), evrdma_errmsg());
		return -1;
	}
	return 0;
}

/* The client of --lat, --rate and --bw. @return 0 or -1 */
static int
client_start(struct bench *b)
{
	size_t v;

	b->ping = calloc(1, b->o.lat_size);
	b->pong = malloc(b->o.lat_size);
	b->data = malloc(b->o.bw_size);
	b->rtt = calloc((size_t)b->o.lat + 1, sizeof(*b->rtt));
	if (!b->ping || !b->pong || !b->data || !b->rtt) {
		fprintf(stderr, "evrdma-bench: out of memory\n");
		return -1;
	}
	for (v = 8; v < b->o.lat_size; v++)
		b->ping[v] = (uint8_t)v;
	memset(b->data, 0xa5, b->o.bw_size);
	if (ep_connect(b, &b->e, client_read_tcp, client_event_tcp,
	    client_read, client_event, b) < 0)
		return -1;
	/* the write callback runs when output drained to FILL_LOW writes */
	v = FILL_LOW * b->o.bw_size;
	if (b->e.bev) {
		bufferevent_setcb(b->e.bev, client_read_tcp, client_write_tcp,
		    client_event_tcp, b);
		bufferevent_setwatermark(b->e.bev, EV_WRITE, v, 0);
	} else {
		evrdma_channel_setcb(b->e.ch, client_read, client_write,
		    client_event, b);
		evrdma_channel_setwatermark(b->e.ch, EV_WRITE, v, 0);
	}
	return 0;
}

/* ---------------------------------------------------------------- main */

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	event_base_loopbreak(arg);
}

static void
usage(void)
{
	fprintf(stderr,
	    "usage: evrdma-bench -s -a ADDR [-p PORT] [--once | --clients N] "
	    "[options]\n"
	    "       evrdma-bench -c -a ADDR [-p PORT] [--lat N] [--rate N] "
	    "[--bw BYTES]\n"
	    "                    [--conn-rate N] [--fan N] [options]\n"
	    "options: --size S (bandwidth write size, 65536)  --lat-size S "
	    "(64)\n"
	    "         --warmup N  --no-stats  --window N (16)  --fan-time MS "
	    "(3000)\n"
	    "         --fan-connects N (32)  --tcp  --bev-adapter  --message  "
	    "--flush  "
	    "--slots N\n"
	    "         --slot-size S  --queue-depth N  --inline BYTES  "
	    "--raw FILE\n"
	    "         --busy-poll US  --zero-copy  --pull BYTES  --recv-cb\n");
}

static int
parse_num(const char *s, unsigned long long min, unsigned long long max,
    unsigned long long *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || v < min || v > max || *s == '-')
		return -1;
	*out = v;
	return 0;
}

/* The base's configuration, or NULL for the default one (*err set on
 * failure). */
static struct evrdma_config *
make_config(const struct opts *o, int *err)
{
	unsigned slots = o->slots ? o->slots : 16;
	/* queues hold a ring's worth of requests and the control messages
	 * besides (at least the default 128) */
	unsigned depth = o->depth ? o->depth :
	    slots + 64 > 128 ? slots + 64 : 128;
	struct evrdma_config *cfg;

	*err = 0;
	if (!o->slots && !o->slot_size && !o->depth && o->inl < 0 &&
	    !o->busy_us && o->pull < 0)
		return NULL;
	cfg = evrdma_config_new();
	if (!cfg || (o->inl >= 0 && evrdma_config_set_inline_threshold(cfg,
	    (unsigned)o->inl) < 0) ||
	    evrdma_config_set_busy_poll(cfg, o->busy_us) < 0 ||
	    (o->pull >= 0 && evrdma_config_set_channel_pull(cfg,
	    (unsigned)o->pull) < 0) ||
	    evrdma_config_set_channel_ring(cfg, slots,
	    o->slot_size ? o->slot_size : 65536, 4u << 20) < 0 ||
	    evrdma_config_set_queue_depth(cfg, depth, depth) < 0 ||
	    evrdma_config_set_cq_size(cfg,
	    2 * depth > 4096 ? 2 * depth : 4096) < 0) {
		fprintf(stderr, "evrdma-bench: config: %s (%s)\n",
		    strerror(errno), evrdma_errmsg());
		evrdma_config_free(cfg);
		*err = 1;
		return NULL;
	}
	return cfg;
}

/* Many connections need many descriptors (--tcp): as many as allowed. */
static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int
main(int argc, char **argv)
{
	enum { O_LAT = 256, O_BW, O_SIZE, O_LATSIZE, O_WARMUP, O_MESSAGE,
	    O_FLUSH, O_SLOTS, O_SLOTSIZE, O_ONCE, O_INLINE, O_RAW, O_BUSY,
	    O_ZC, O_PULL, O_RECVCB, O_TCP, O_ADAPTER, O_RATE, O_WINDOW, O_CONNRATE,
	    O_FAN, O_FANTIME, O_FANCONC, O_CLIENTS, O_NOSTATS, O_DEPTH };
	static const struct option longopts[] = {
		{ "lat", required_argument, NULL, O_LAT },
		{ "bw", required_argument, NULL, O_BW },
		{ "size", required_argument, NULL, O_SIZE },
		{ "lat-size", required_argument, NULL, O_LATSIZE },
		{ "warmup", required_argument, NULL, O_WARMUP },
		{ "message", no_argument, NULL, O_MESSAGE },
		{ "flush", no_argument, NULL, O_FLUSH },
		{ "slots", required_argument, NULL, O_SLOTS },
		{ "slot-size", required_argument, NULL, O_SLOTSIZE },
		{ "queue-depth", required_argument, NULL, O_DEPTH },
		{ "once", no_argument, NULL, O_ONCE },
		{ "clients", required_argument, NULL, O_CLIENTS },
		{ "inline", required_argument, NULL, O_INLINE },
		{ "raw", required_argument, NULL, O_RAW },
		{ "busy-poll", required_argument, NULL, O_BUSY },
		{ "zero-copy", no_argument, NULL, O_ZC },
		{ "pull", required_argument, NULL, O_PULL },
		{ "recv-cb", no_argument, NULL, O_RECVCB },
		{ "tcp", no_argument, NULL, O_TCP },
		{ "bev-adapter", no_argument, NULL, O_ADAPTER },
		{ "rate", required_argument, NULL, O_RATE },
		{ "window", required_argument, NULL, O_WINDOW },
		{ "conn-rate", required_argument, NULL, O_CONNRATE },
		{ "fan", required_argument, NULL, O_FAN },
		{ "fan-time", required_argument, NULL, O_FANTIME },
		{ "fan-connects", required_argument, NULL, O_FANCONC },
		{ "no-stats", no_argument, NULL, O_NOSTATS },
		{ NULL, 0, NULL, 0 }
	};
	struct bench b = { .o = { .lat = -1, .warmup = -1, .lat_size = 64,
	    .bw_size = 65536, .port = DEFAULT_PORT, .inl = -1, .pull = -1,
	    .window = 16, .fan_ms = 3000, .fan_conc = 32 } };
	struct addrinfo hints = { 0 };
	struct evrdma_config *cfg;
	struct evrdma_stats st;
	struct event *sigs[2] = { NULL, NULL };
	unsigned long long v;
	int opt, bw_set = 0, i, err;

	while ((opt = getopt_long(argc, argv, "sca:p:", longopts,
	    NULL)) != -1) {
		switch (opt) {
		case 's': b.o.server = 1; break;
		case 'c': b.o.client = 1; break;
		case 'a': b.o.addr = optarg; break;
		case 'p': b.o.port = optarg; break;
		case O_MESSAGE: b.o.message = 1; break;
		case O_FLUSH: b.o.flush = 1; break;
		case O_ZC: b.o.zero_copy = 1; break;
		case O_RECVCB: b.o.recv_cb = 1; break;
		case O_TCP: b.o.tcp = 1; break;
		case O_ADAPTER: b.o.tcp = b.o.adapter = 1; break;
		case O_NOSTATS: b.o.no_stats = 1; break;
		case O_ONCE: b.o.clients = 1; break;
		case O_RAW: b.o.raw = optarg; break;
		case O_LAT:
			if (parse_num(optarg, 0, 100000000, &v) < 0)
				goto bad;
			b.o.lat = (long)v;
			break;
		case O_WARMUP:
			if (parse_num(optarg, 0, 100000000, &v) < 0)
				goto bad;
			b.o.warmup = (long)v;
			break;
		case O_RATE:
			if (parse_num(optarg, 0, 1000000000, &v) < 0)
				goto bad;
			b.o.rate = (long)v;
			break;
		case O_WINDOW:
			if (parse_num(optarg, 1, 4096, &v) < 0)
				goto bad;
			b.o.window = (long)v;
			break;
		case O_CONNRATE:
			if (parse_num(optarg, 1, 10000000, &v) < 0)
				goto bad;
			b.o.conn_rate = (long)v;
			break;
		case O_FAN:
			if (parse_num(optarg, 1, 100000, &v) < 0)
				goto bad;
			b.o.fan = (long)v;
			break;
		case O_FANTIME:
			if (parse_num(optarg, 1, 3600000, &v) < 0)
				goto bad;
			b.o.fan_ms = (long)v;
			break;
		case O_FANCONC:
			if (parse_num(optarg, 1, 100000, &v) < 0)
				goto bad;
			b.o.fan_conc = (long)v;
			break;
		case O_CLIENTS:
			if (parse_num(optarg, 1, 100000000, &v) < 0)
				goto bad;
			b.o.clients = (long)v;
			break;
		case O_BW:
			if (parse_num(optarg, 0, 1ull << 50, &v) < 0)
				goto bad;
			b.o.bw = v;
			bw_set = 1;
			break;
		case O_SIZE:
			if (parse_num(optarg, 1, 1u << 30, &v) < 0)
				goto bad;
			b.o.bw_size = (size_t)v;
			break;
		case O_LATSIZE:
			if (parse_num(optarg, 8, 1u << 30, &v) < 0)
				goto bad;
			b.o.lat_size = (size_t)v;
			break;
		case O_SLOTS:
			if (parse_num(optarg, 2, 4096, &v) < 0)
				goto bad;
			b.o.slots = (unsigned)v;
			break;
		case O_DEPTH:
			if (parse_num(optarg, 1, 65536, &v) < 0)
				goto bad;
			b.o.depth = (unsigned)v;
			break;
		case O_INLINE:
			if (parse_num(optarg, 0, 1024, &v) < 0)
				goto bad;
			b.o.inl = (int)v;
			break;
		case O_BUSY:
			if (parse_num(optarg, 0, 100000, &v) < 0)
				goto bad;
			b.o.busy_us = (unsigned)v;
			break;
		case O_PULL:
			if (parse_num(optarg, 0, 4u << 20, &v) < 0)
				goto bad;
			b.o.pull = (long)v;
			break;
		case O_SLOTSIZE:
			if (parse_num(optarg, 64, 4u << 20, &v) < 0)
				goto bad;
			b.o.slot_size = (unsigned)v;
			break;
		default:
			goto bad;
		}
	}
	if (optind != argc || !b.o.addr || b.o.server == b.o.client)
		goto bad;
	if (b.o.tcp && (b.o.message || b.o.recv_cb || b.o.zero_copy ||
	    (b.o.busy_us && !b.o.adapter) || b.o.flush)) {
		fprintf(stderr, "evrdma-bench: --tcp is a stream of "
		    "bufferevents: no --message, --recv-cb, --zero-copy, "
		    "--busy-poll or --flush\n");
		return 2;
	}
	if (b.o.lat < 0 && !bw_set && !b.o.rate && !b.o.conn_rate &&
	    !b.o.fan) {
		b.o.lat = 1000;
		b.o.bw = 64ull << 20;
	} else if (b.o.lat < 0)
		b.o.lat = 0;
	if (b.o.warmup < 0)
		b.o.warmup = b.o.lat / 10 < 1000 ? b.o.lat / 10 : 1000;
	b.o.rate_warmup = b.o.rate / 10 < 1000 ? b.o.rate / 10 : 1000;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(b.o.addr, b.o.port, &hints, &b.ai) != 0)
		goto bad;
	raise_nofile();

	b.eb = event_base_new();
	if (!b.eb)
		return 1;
	if (!b.o.tcp || b.o.adapter) {
		cfg = make_config(&b.o, &err);
		if (err)
			return 1;
		b.base = evrdma_base_new(b.eb, cfg);
		evrdma_config_free(cfg);
		if (!b.base) {
			fprintf(stderr, "evrdma_base_new: %s (%s)\n",
			    strerror(errno), evrdma_errmsg());
			return 1;
		}
	}
	sigs[0] = evsignal_new(b.eb, SIGINT, on_signal, b.eb);
	sigs[1] = evsignal_new(b.eb, SIGTERM, on_signal, b.eb);
	for (i = 0; i < 2; i++)
		if (sigs[i])
			evsignal_add(sigs[i], NULL);
	if (b.o.server) {
		int port = -1;

		if (b.o.adapter) {
			b.lst = evrdma_bufferevent_listener_new(b.base,
			    server_accept_adapter, &b, 0, 1024, b.ai->ai_addr,
			    (int)b.ai->ai_addrlen);
			if (b.lst)
				port = evrdma_listener_get_port(b.lst);
		} else if (b.o.tcp) {
			b.tcp_lst = evconnlistener_new_bind(b.eb,
			    server_accept_tcp, &b, LEV_OPT_CLOSE_ON_FREE |
			    LEV_OPT_REUSEABLE, 1024, b.ai->ai_addr,
			    (int)b.ai->ai_addrlen);
			if (b.tcp_lst)
				port = atoi(b.o.port);
		} else {
			b.lst = evrdma_channel_listener_new(b.base,
			    server_accept, &b, b.o.message ?
			    EVRDMA_CHANNEL_MESSAGE : EVRDMA_CHANNEL_STREAM,
			    1024, b.ai->ai_addr, (int)b.ai->ai_addrlen);
			if (b.lst)
				port = evrdma_listener_get_port(b.lst);
		}
		if (port < 0) {
			fprintf(stderr, "evrdma-bench: listen: %s (%s)\n",
			    strerror(errno), b.o.tcp && !b.o.adapter ? "TCP" :
			    evrdma_errmsg());
			b.status = 1;
			goto out;
		}
		printf("listening on %s port %d%s\n", b.o.addr, port,
		    b.o.adapter ? " (bufferevent adapter)" : b.o.tcp ? " (TCP)" :
		    "");
		fflush(stdout);
	} else if (b.o.conn_rate || b.o.fan) {
		if (b.o.lat || bw_set || b.o.rate) {
			fprintf(stderr, "evrdma-bench: --conn-rate and --fan "
			    "run on their own\n");
			b.status = 2;
			goto out;
		}
		if (conns_start(&b) < 0) {
			b.status = 1;
			goto out;
		}
	} else if (client_start(&b) < 0) {
		b.status = 1;
		goto out;
	}
	event_base_dispatch(b.eb);
	if (b.o.client && !b.done && b.status == 0) {
		fprintf(stderr, "evrdma-bench: interrupted\n");
		b.status = 1;
	}
out:
	/* close what is left and let the teardown finish */
	ep_free(&b.e);
	conns_free(&b);
	while (b.sessions)
		session_free(b.sessions);
	if (b.lst)
		evrdma_listener_free(b.lst);
	if (b.tcp_lst)
		evconnlistener_free(b.tcp_lst);
	if (b.base) {
		/* how the channel's data messages went: the peer pulled
		 * them, or they were sent (on a software device the side
		 * that posts the request does the copying) */
		evrdma_base_get_stats(b.base, &st, sizeof(st));
		if (st.ch_pulled + st.ch_written)
			printf("# data messages: %llu pulled, %llu sent\n",
			    st.ch_pulled, st.ch_written);
		do
			evrdma_base_get_stats(b.base, &st, sizeof(st));
		while (st.conns > 0 &&
		    event_base_loop(b.eb, EVLOOP_ONCE) == 0);
		evrdma_base_free(b.base);
	}
	for (i = 0; i < 2; i++)
		if (sigs[i])
			event_free(sigs[i]);
	event_base_free(b.eb);
	freeaddrinfo(b.ai);
	free(b.ping);
	free(b.pong);
	free(b.data);
	free(b.rtt);
	free(b.buf);
	return b.status;
bad:
	usage();
	return 2;
}
