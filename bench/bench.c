/*
 * evrdma-bench: latency and bandwidth of evrdma channels, reported the way
 * perftest reports them, so that the two can be put side by side.
 *
 *   evrdma-bench -s -a ADDR [-p PORT] [--once] [options]
 *   evrdma-bench -c -a ADDR [-p PORT] [--lat N] [--bw BYTES] [options]
 *
 * Latency (--lat N): ping-pong of --lat-size-byte messages (default 64):
 * the client writes one, the server echoes it, the client writes the next
 * when the echo is whole. Each round trip is timed; as perftest's
 * ib_send_lat does, the figures are half round trips (one-way latency) in
 * microseconds: min, max, typical (the median), average, standard
 * deviation, 99% and 99.9% percentiles. --warmup round trips (default
 * N/10, at most 1000) go first and are not counted.
 *
 * Bandwidth (--bw BYTES): the client streams BYTES in --size-byte writes
 * (default 65536, one evrdma_channel_write() each, output refilled from the
 * write callback); the server drains its input and, once it has all
 * BYTES, answers with a 16-byte acknowledgement. The client's time runs
 * from its first write to the acknowledgement. Bandwidth is printed in
 * MB/sec with MB = 2^20 bytes, as perftest's "BW average[MB/sec]" (perftest
 * divides by 0x100000 unless --report_gbits), and a message rate in
 * millions of writes per second.
 *
 * Both sides are event-driven on one event_base, without threads. By default
 * nothing busy-polls (each wake-up goes through the completion channel, as
 * with ib_send_lat -e); --busy-poll US enables evrdma's bounded busy
 * polling (evrdma_config_set_busy_poll), the counterpart of perftest's
 * default busy polling. Without --lat and --bw the client runs both: --lat 1000
 * --bw 67108864. The server serves clients one after another until SIGINT
 * or SIGTERM, or until the first one leaves (--once).
 *
 * Other options (the same on both sides where they matter):
 *   --message         message-mode channels (default: stream)
 *   --flush           (client) evrdma_channel_flush() after each ping,
 *                     instead of the send at the end of the loop iteration
 *   --slots N, --slot-size S   the channel ring (evrdma_config_set_channel_ring)
 *   --raw FILE        (client) write each one-way latency sample (us), in
 *                     the order measured, one per line
 *   --inline BYTES    evrdma_config_set_inline_threshold() (default 64;
 *                     perftest uses no inline data on Soft-RoCE: --inline 0
 *                     compares like with like there)
 *   --busy-poll US    evrdma_config_set_busy_poll() (default 0: none)
 *   --pull BYTES      evrdma_config_set_channel_pull() (default: the
 *                     library's, 32768); 0: every message by RDMA WRITE
 *   --recv-cb         latency pongs (client) and pings (server) are taken
 *                     with evrdma_channel_set_recv_cb(), straight from the
 *                     receive slot, instead of through input and the read
 *                     callback; the same on both sides (each side decides
 *                     for itself)
 *   --zero-copy       (client) bandwidth writes with evrdma_channel_reserve()
 *                     and evrdma_channel_commit(): each write is made in
 *                     the channel's send memory, where the bench stores
 *                     an 8-byte sequence number and leaves the rest as it
 *                     is (as ib_write_bw sends its buffer without touching
 *                     it); default: evrdma_channel_write() of a buffer
 *
 * Wire format between client and server (on the channel, big-endian):
 * a 24-byte request "EVB1", type (1 latency, 2 bandwidth), size, 0, count
 * (64 bits: round trips, or bytes), then the data; acknowledgement
 * "EVBA", 0, receive time in nanoseconds (64 bits).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include <event2/event.h>
#include <evrdma.h>
#include <evrdma/channel.h>

#define REQ_LEN		24
#define ACK_LEN		16
#define T_LAT		1
#define T_BW		2
#define DEFAULT_PORT	"7179"
#define FILL		8	/* bandwidth: writes queued in output ... */
#define FILL_LOW	2	/* ... refilled when it drains to this many */

struct opts {
	int server, client, message, flush, once, zero_copy, recv_cb;
	const char *addr, *port;
	long lat, warmup;		/* round trips; -1: default */
	size_t lat_size, bw_size;
	uint64_t bw;
	unsigned slots, slot_size;
	int inl;			/* inline threshold; -1: default */
	unsigned busy_us;		/* busy polling, 0: none */
	long pull;			/* pull size, -1: the default */
	const char *raw;		/* file for every latency sample */
};

struct bench;

struct session {			/* server: one client */
	struct session *next;
	struct bench *b;
	struct evrdma_channel *ch;
	int type;			/* 0: waiting for a request */
	size_t size;
	uint64_t left;			/* bytes (or messages) still due */
	uint64_t t_first;		/* bandwidth: first data, ns */
};

struct bench {
	struct opts o;
	struct event_base *eb;
	struct evrdma_base *base;
	int status;
	uint8_t *buf;			/* message-mode receive buffer */
	size_t buf_len;
	/* server */
	struct evrdma_listener *lst;
	struct session *sessions;
	/* client */
	struct evrdma_channel *ch;
	int phase;			/* 0 (not yet), T_LAT, T_BW */
	int done;			/* every test ran */
	uint8_t *ping, *pong, *data;
	long iter, total;		/* latency: round trips done / due */
	double *rtt;			/* round trips measured, in stamps */
	uint64_t t_send, t_start;
	uint64_t cal_stamp, cal_ns;	/* stamp() and now_ns() at lat start */
	uint64_t bw_sent;
};

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Latency time stamps. Where the CPU has a time-stamp counter it is read
 * directly, as perftest does: clock_gettime() is a system call where the
 * clock source is not in the vDSO (the Soft-RoCE guest's HPET, about 1 us),
 * which the measured round trip would include. The counter is converted
 * to time with its rate measured against CLOCK_MONOTONIC over the whole
 * latency run (seconds), so no CPU frequency has to be known.
 */
static uint64_t
stamp(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __rdtsc();
#else
	return now_ns();
#endif
}

static void
put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

static void
put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static uint64_t
get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

static void fail(struct bench *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Report a failure and leave the loop (exit status 1). */
static void
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

static const char *
channel_error(struct evrdma_channel *ch, short what)
{
	if (what & BEV_EVENT_EOF)
		return "the peer closed the channel";
	if (what & BEV_EVENT_TIMEOUT)
		return "timeout";
	return evrdma_reason_str(evrdma_channel_get_error(ch));
}

/*
 * The next whole unit of input: @p need bytes (stream) or one message. In
 * stream mode the bytes stay in input and *p is NULL (the caller removes
 * them); in message mode they are in b->buf. @return its length, or 0.
 */
static size_t
next_unit(struct bench *b, struct evrdma_channel *ch, size_t need,
    uint8_t **p)
{
	ssize_t n;

	*p = NULL;
	if (!b->o.message)
		return evbuffer_get_length(evrdma_channel_get_input(ch)) >=
		    need ? need : 0;
	n = evrdma_channel_read_message(ch, b->buf, b->buf_len);
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

/* ---------------------------------------------------------------- server */

static void
session_free(struct session *s)
{
	struct session **pp;

	for (pp = &s->b->sessions; *pp != s; pp = &(*pp)->next)
		;
	*pp = s->next;
	evrdma_channel_free(s->ch);
	free(s);
}

/* A client is done (or failed): with --once, so is the server. */
static void
session_end(struct session *s)
{
	struct bench *b = s->b;

	session_free(s);
	if (b->o.once)
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
	s->t_first = 0;
	if ((s->type != T_LAT && s->type != T_BW) || s->size == 0 ||
	    s->left == 0)
		return -1;
	if (s->type == T_LAT && !s->b->o.message)
		s->left *= s->size;	/* bytes to echo */
	return 0;
}

static void server_read(struct evrdma_channel *ch, void *arg);

/*
 * --recv-cb: the latency phase's pings, straight from the receive slot. A
 * ping is echoed with one evrdma_channel_write(); what follows the last
 * one (the next request, in stream mode) goes to input for server_read().
 */
static void
server_recv(struct evrdma_channel *ch, const void *data, size_t len,
    void *arg)
{
	struct session *s = arg;
	size_t n = s->b->o.message || len < s->left ? len : (size_t)s->left;

	if (evrdma_channel_write(ch, data, n) < 0) {
		fprintf(stderr, "evrdma-bench: echo: %s\n", strerror(errno));
		session_end(s);
		return;
	}
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

static void
server_read(struct evrdma_channel *ch, void *arg)
{
	struct session *s = arg;
	struct bench *b = s->b;
	struct evbuffer *in = evrdma_channel_get_input(ch);
	uint8_t req[REQ_LEN], ack[ACK_LEN], *p;
	size_t n;
	int rc = 0;

	for (;;) {
		if (s->type == 0) {
			n = next_unit(b, ch, REQ_LEN, &p);
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
				    evrdma_channel_get_output(ch), n) ==
				    (int)n ? 0 : -1;
			else
				evbuffer_drain(in, n);
			s->left -= n;
		} else {
			n = next_unit(b, ch, 0, &p);
			if (n == 0)
				return;
			if (s->type == T_LAT) {
				rc = evrdma_channel_write(ch, p, n);
				s->left--;
			} else
				s->left -= n < s->left ? n : s->left;
		}
		if (rc < 0) {
			fprintf(stderr, "evrdma-bench: echo: %s\n",
			    strerror(errno));
			session_end(s);
			return;
		}
		if (s->type == T_BW && s->t_first == 0)
			s->t_first = now_ns();
		/* the rest of the pings straight to server_recv() */
		if (s->left > 0 && s->type == T_LAT && b->o.recv_cb &&
		    !evbuffer_get_length(in)) {
			evrdma_channel_set_recv_cb(ch, server_recv);
			return;
		}
		if (s->left > 0)
			continue;
		if (s->type == T_BW) {
			memcpy(ack, "EVBA", 4);
			put32(ack + 4, 0);
			put64(ack + 8, now_ns() - s->t_first);
			if (evrdma_channel_write(ch, ack, ACK_LEN) < 0) {
				fprintf(stderr, "evrdma-bench: ack: %s\n",
				    strerror(errno));
				session_end(s);
				return;
			}
		}
		s->type = 0;
	}
}

static void
server_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct session *s = arg;

	if (!(what & BEV_EVENT_EOF) || s->type != 0)
		fprintf(stderr, "evrdma-bench: server: %s%s\n",
		    channel_error(ch, what), s->type ? " in a test" : "");
	session_end(s);
}

static void
server_accept(struct evrdma_listener *lst, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct bench *b = arg;
	struct session *s = calloc(1, sizeof(*s));

	if (!s || buffers(b, ch) < 0) {
		fprintf(stderr, "evrdma-bench: out of memory\n");
		free(s);
		evrdma_channel_free(ch);
		return;
	}
	s->b = b;
	s->ch = ch;
	s->next = b->sessions;
	b->sessions = s;
	if (b->o.once) {
		evrdma_listener_free(lst);
		b->lst = NULL;
	}
	evrdma_channel_setcb(ch, server_read, NULL, server_event, s);
	evrdma_channel_enable(ch, EV_READ);
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
	long n = b->total - b->o.warmup, i;
	double *d = b->rtt, sum = 0, sq = 0, avg, sd, us_per_stamp;
	uint64_t ns = now_ns() - b->cal_ns, st = stamp() - b->cal_stamp;
	FILE *f;

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
	printf("latency: %zu-byte ping-pong, %ld round trips (+%ld warm-up), "
	    "one-way = RTT/2 in usec\n", b->o.lat_size, n, b->o.warmup);
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

/* Write ping number b->iter; @p t: now, a stamp() (one per round trip) */
static void
send_ping(struct bench *b, uint64_t t)
{
	put64(b->ping, (uint64_t)b->iter);
	b->t_send = t;
	if (evrdma_channel_write(b->ch, b->ping, b->o.lat_size) < 0) {
		fail(b, "ping: %s", strerror(errno));
		return;
	}
	if (b->o.flush && evrdma_channel_flush(b->ch) < 0)
		fail(b, "flush: %s", strerror(errno));
}

/* Bandwidth: refill output to FILL writes ahead of the channel. */
static void
client_write(struct evrdma_channel *ch, void *arg)
{
	struct bench *b = arg;
	struct evbuffer *out = evrdma_channel_get_output(ch);
	size_t n;

	if (b->phase != T_BW)
		return;
	while (b->bw_sent < b->o.bw &&
	    evbuffer_get_length(out) < FILL * b->o.bw_size) {
		n = b->o.bw - b->bw_sent < b->o.bw_size ?
		    (size_t)(b->o.bw - b->bw_sent) : b->o.bw_size;
		if (b->o.zero_copy) {
			uint8_t *p = evrdma_channel_reserve(ch, n);

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
		} else if (evrdma_channel_write(ch, b->data, n) < 0) {
			fail(b, "write: %s", strerror(errno));
			return;
		}
		b->bw_sent += n;
	}
}

/* One pong, in @p p (@p n bytes) at time @p t: check and time it, then
 * the next ping or the next phase. @return 0, or -1 when that failed */
static int
client_pong(struct bench *b, const uint8_t *p, size_t n, uint64_t t)
{
	if (n != b->o.lat_size || get64(p) != (uint64_t)b->iter ||
	    memcmp(p + 8, b->ping + 8, n - 8) != 0) {
		fail(b, "the echo differs from the ping");
		return -1;
	}
	if (b->iter >= b->o.warmup)
		b->rtt[b->iter - b->o.warmup] = (double)(t - b->t_send);
	if (++b->iter < b->total) {
		send_ping(b, t);
		return 0;
	}
	if (b->o.recv_cb)
		evrdma_channel_set_recv_cb(b->ch, NULL);
	report_latency(b);
	next_phase(b);
	return 0;
}

/*
 * --recv-cb: a pong straight from the receive slot. One that is not whole
 * (a stream may cut it anywhere) is left to client_read() through input.
 */
static void client_read(struct evrdma_channel *ch, void *arg);

static void
client_recv(struct evrdma_channel *ch, const void *data, size_t len,
    void *arg)
{
	struct bench *b = arg;
	uint64_t t = stamp();

	if (len == b->o.lat_size) {
		client_pong(b, data, len, t);
		return;
	}
	evbuffer_add(evrdma_channel_get_input(ch), data, len);
	client_read(ch, b);
}

static void
client_read(struct evrdma_channel *ch, void *arg)
{
	struct bench *b = arg;
	struct evbuffer *in = evrdma_channel_get_input(ch);
	uint8_t ack[ACK_LEN], *p;
	uint64_t t;
	size_t n;

	while (b->phase == T_LAT) {
		n = next_unit(b, ch, b->o.lat_size, &p);
		if (n == 0)
			return;
		t = stamp();
		if (!p)
			evbuffer_remove(in, p = b->pong, n);
		if (client_pong(b, p, n, t) < 0 || b->phase != T_LAT)
			break;
		if (!evbuffer_get_length(in))
			return;
	}
	if (b->phase == T_BW) {
		n = next_unit(b, ch, ACK_LEN, &p);
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

static int
send_request(struct bench *b, int type, size_t size, uint64_t count)
{
	uint8_t req[REQ_LEN];

	memcpy(req, "EVB1", 4);
	put32(req + 4, (uint32_t)type);
	put32(req + 8, (uint32_t)size);
	put32(req + 12, 0);
	put64(req + 16, count);
	if (evrdma_channel_write(b->ch, req, REQ_LEN) < 0) {
		fail(b, "request: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static void
next_phase(struct bench *b)
{
	if (b->phase < T_LAT && b->o.lat > 0) {
		b->phase = T_LAT;
		b->iter = 0;
		b->total = b->o.lat + b->o.warmup;
		b->cal_ns = now_ns();
		b->cal_stamp = stamp();
		if (send_request(b, T_LAT, b->o.lat_size,
		    (uint64_t)b->total) == 0)
			send_ping(b, stamp());
		/* pongs straight to client_recv() */
		if (b->o.recv_cb)
			evrdma_channel_set_recv_cb(b->ch, client_recv);
		return;
	}
	if (b->phase < T_BW && b->o.bw > 0) {
		b->phase = T_BW;
		b->bw_sent = 0;
		if (send_request(b, T_BW, b->o.bw_size, b->o.bw) < 0)
			return;
		b->t_start = now_ns();
		client_write(b->ch, b);
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
		fail(b, "client: %s", channel_error(ch, what));
		return;
	}
	if (buffers(b, ch) < 0) {
		fail(b, "out of memory");
		return;
	}
	if (b->o.message && (b->o.lat_size > b->buf_len ||
	    b->o.bw_size > b->buf_len)) {
		fail(b, "messages are at most %zu bytes here", b->buf_len);
		return;
	}
	printf("connected: %s channel, largest message %zu bytes\n",
	    b->o.message ? "message" : "stream",
	    evrdma_channel_max_message(ch));
	fflush(stdout);
	evrdma_channel_enable(ch, EV_READ);
	next_phase(b);
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
	    "usage: evrdma-bench -s -a ADDR [-p PORT] [--once] [options]\n"
	    "       evrdma-bench -c -a ADDR [-p PORT] [--lat N] [--bw BYTES] "
	    "[options]\n"
	    "options: --size S (bandwidth write size, 65536)  --lat-size S "
	    "(64)\n"
	    "         --warmup N  --message  --flush  --slots N  "
	    "--slot-size S  --inline BYTES  --raw FILE\n"
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

int
main(int argc, char **argv)
{
	enum { O_LAT = 256, O_BW, O_SIZE, O_LATSIZE, O_WARMUP, O_MESSAGE,
	    O_FLUSH, O_SLOTS, O_SLOTSIZE, O_ONCE, O_INLINE, O_RAW, O_BUSY,
	    O_ZC, O_PULL, O_RECVCB };
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
		{ "once", no_argument, NULL, O_ONCE },
		{ "inline", required_argument, NULL, O_INLINE },
		{ "raw", required_argument, NULL, O_RAW },
		{ "busy-poll", required_argument, NULL, O_BUSY },
		{ "zero-copy", no_argument, NULL, O_ZC },
		{ "pull", required_argument, NULL, O_PULL },
		{ "recv-cb", no_argument, NULL, O_RECVCB },
		{ NULL, 0, NULL, 0 }
	};
	struct bench b = { .o = { .lat = -1, .warmup = -1, .lat_size = 64,
	    .bw_size = 65536, .port = DEFAULT_PORT, .inl = -1, .pull = -1 } };
	struct addrinfo hints = { 0 }, *ai = NULL;
	struct evrdma_config *cfg = NULL;
	struct evrdma_stats st;
	struct event *sigs[2] = { NULL, NULL };
	unsigned long long v;
	int opt, bw_set = 0, i;

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
		case O_ONCE: b.o.once = 1; break;
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
	if (b.o.lat < 0 && !bw_set) {
		b.o.lat = 1000;
		b.o.bw = 64ull << 20;
	} else if (b.o.lat < 0)
		b.o.lat = 0;
	if (b.o.warmup < 0)
		b.o.warmup = b.o.lat / 10 < 1000 ? b.o.lat / 10 : 1000;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(b.o.addr, b.o.port, &hints, &ai) != 0)
		goto bad;

	b.eb = event_base_new();
	if (!b.eb)
		return 1;
	if (b.o.slots || b.o.slot_size || b.o.inl >= 0 || b.o.busy_us ||
	    b.o.pull >= 0) {
		unsigned slots = b.o.slots ? b.o.slots : 16;
		/* queues hold a ring's worth of requests and the control
		 * messages besides (at least the default 128) */
		unsigned depth = slots + 64 > 128 ? slots + 64 : 128;

		cfg = evrdma_config_new();
		if (!cfg || (b.o.inl >= 0 && evrdma_config_set_inline_threshold(
		    cfg, (unsigned)b.o.inl) < 0) ||
		    evrdma_config_set_busy_poll(cfg, b.o.busy_us) < 0 ||
		    (b.o.pull >= 0 && evrdma_config_set_channel_pull(cfg,
		    (unsigned)b.o.pull) < 0) ||
		    evrdma_config_set_channel_ring(cfg, slots,
		    b.o.slot_size ? b.o.slot_size : 65536, 4u << 20) < 0 ||
		    evrdma_config_set_queue_depth(cfg, depth, depth) < 0 ||
		    evrdma_config_set_cq_size(cfg,
		    2 * depth > 4096 ? 2 * depth : 4096) < 0) {
			fprintf(stderr, "evrdma-bench: config: %s (%s)\n",
			    strerror(errno), evrdma_errmsg());
			return 1;
		}
	}
	b.base = evrdma_base_new(b.eb, cfg);
	evrdma_config_free(cfg);
	if (!b.base) {
		fprintf(stderr, "evrdma_base_new: %s (%s)\n", strerror(errno),
		    evrdma_errmsg());
		return 1;
	}
	sigs[0] = evsignal_new(b.eb, SIGINT, on_signal, b.eb);
	sigs[1] = evsignal_new(b.eb, SIGTERM, on_signal, b.eb);
	for (i = 0; i < 2; i++)
		if (sigs[i])
			evsignal_add(sigs[i], NULL);
	if (b.o.server) {
		b.lst = evrdma_channel_listener_new(b.base, ai->ai_addr,
		    (int)ai->ai_addrlen, 16, b.o.message ?
		    EVRDMA_CHANNEL_MESSAGE : EVRDMA_CHANNEL_STREAM,
		    server_accept, &b);
		if (!b.lst) {
			fprintf(stderr, "evrdma_channel_listener_new: %s "
			    "(%s)\n", strerror(errno), evrdma_errmsg());
			b.status = 1;
			goto out;
		}
		printf("listening on %s port %d\n", b.o.addr,
		    evrdma_listener_get_port(b.lst));
		fflush(stdout);
	} else {
		b.ping = calloc(1, b.o.lat_size);
		b.pong = malloc(b.o.lat_size);
		b.data = malloc(b.o.bw_size);
		b.rtt = calloc((size_t)b.o.lat + 1, sizeof(*b.rtt));
		if (!b.ping || !b.pong || !b.data || !b.rtt) {
			fprintf(stderr, "evrdma-bench: out of memory\n");
			b.status = 1;
			goto out;
		}
		for (v = 8; v < b.o.lat_size; v++)
			b.ping[v] = (uint8_t)v;
		memset(b.data, 0xa5, b.o.bw_size);
		b.ch = evrdma_channel_new(b.base, b.o.message ?
		    EVRDMA_CHANNEL_MESSAGE : EVRDMA_CHANNEL_STREAM);
		if (b.ch) {
			evrdma_channel_setcb(b.ch, client_read, client_write,
			    client_event, &b);
			/* the write callback runs when output drained to
			 * FILL_LOW writes */
			evrdma_channel_setwatermark(b.ch, EV_WRITE,
			    FILL_LOW * b.o.bw_size, 0);
		}
		if (!b.ch || evrdma_channel_connect(b.ch, ai->ai_addr,
		    (int)ai->ai_addrlen) < 0) {
			fprintf(stderr, "evrdma-bench: connect: %s (%s)\n",
			    strerror(errno), evrdma_errmsg());
			b.status = 1;
			goto out;
		}
	}
	event_base_dispatch(b.eb);
	if (b.o.client && !b.done && b.status == 0) {
		fprintf(stderr, "evrdma-bench: interrupted\n");
		b.status = 1;
	}
out:
	/* close what is left and let the teardown finish */
	if (b.ch)
		evrdma_channel_free(b.ch);
	while (b.sessions)
		session_free(b.sessions);
	evrdma_listener_free(b.lst);
	do
		evrdma_base_get_stats(b.base, &st);
	while (st.conns > 0 && event_base_loop(b.eb, EVLOOP_ONCE) == 0);
	evrdma_base_free(b.base);
	for (i = 0; i < 2; i++)
		if (sigs[i])
			event_free(sigs[i]);
	event_base_free(b.eb);
	freeaddrinfo(ai);
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
