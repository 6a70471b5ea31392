/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma-bench: what bench.c (ping-pong, message rate, bandwidth, the
 * server) and conns.c (connection setup rate, many connections on one
 * loop) share.
 */
#ifndef EVRDMA_BENCH_H_INCLUDED_
#define EVRDMA_BENCH_H_INCLUDED_

#include <stdint.h>
#include <stddef.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <evrdma.h>
#include <evrdma/channel.h>

#define REQ_LEN		24
#define ACK_LEN		16
/* request types on the wire */
#define T_LAT		1	/* echo a count of pings (bytes or messages) */
#define T_BW		2	/* take a count of bytes, then acknowledge */
#define T_ECHO		3	/* echo until the client leaves */
/* client phases, in the order they run */
#define P_LAT		1	/* ping-pong, one in flight, timed each */
#define P_RATE		2	/* ping-pong, --window in flight */
#define P_BW		3	/* stream */
#define DEFAULT_PORT	"7179"

/*
 * One end of a connection: an evrdma channel, or (--tcp) a libevent
 * bufferevent over a TCP socket. The helpers below pick one with a test,
 * inlined: the channel path keeps its direct calls into the library.
 *
 * With --bev-adapter, e->bev is evrdma's bufferevent adapter (a struct
 * bufferevent over a channel, evrdma/bufferevent.h) instead of a
 * bufferevent_socket: only the lines that make bufferevents and the
 * listener differ, and every bufferevent path of the bench (client,
 * server, connection tests) runs unchanged on it, as a user's program
 * would; see adapter_rows() in bench/run-bench.
 */
struct ep {
	struct evrdma_channel *ch;
	struct bufferevent *bev;
};

static inline struct evbuffer *
ep_input(const struct ep *e)
{
	return e->bev ? bufferevent_get_input(e->bev) :
	    evrdma_channel_get_input(e->ch);
}

static inline struct evbuffer *
ep_output(const struct ep *e)
{
	return e->bev ? bufferevent_get_output(e->bev) :
	    evrdma_channel_get_output(e->ch);
}

static inline int
ep_write(const struct ep *e, const void *data, size_t len)
{
	return e->bev ? bufferevent_write(e->bev, data, len) :
	    evrdma_channel_write(e->ch, data, len);
}

static inline void
ep_enable(const struct ep *e, short what)
{
	if (e->bev)
		bufferevent_enable(e->bev, what);
	else
		evrdma_channel_enable(e->ch, what);
}

static inline void
ep_free(struct ep *e)
{
	if (e->bev)
		bufferevent_free(e->bev);
	if (e->ch)
		evrdma_channel_free(e->ch);
	e->bev = NULL;
	e->ch = NULL;
}

struct opts {
	int server, client, message, flush, zero_copy, recv_cb, tcp;
	int adapter;			/* --bev-adapter (tcp is set too) */
	int no_stats;			/* no per-round-trip statistics */
	const char *addr, *port;
	long lat, warmup;		/* round trips; -1: default */
	long rate, rate_warmup;		/* messages echoed with --window */
	long window;			/* in flight in the rate phase */
	long conn_rate;			/* connections one after another */
	long fan;			/* connections on one loop */
	long fan_ms;			/* their ping-pong time */
	long fan_conc;			/* connects in progress at most */
	long clients;			/* server: leave after that many */
	size_t lat_size, bw_size;
	uint64_t bw;
	unsigned slots, slot_size, depth;
	int inl;			/* inline threshold; -1: default */
	unsigned busy_us;		/* busy polling, 0: none */
	long pull;			/* pull size, -1: the default */
	const char *raw;		/* file for every latency sample */
};

struct session;
struct conns;

struct bench {
	struct opts o;
	struct event_base *eb;
	struct evrdma_base *base;
	struct addrinfo *ai;		/* the server's address */
	int status;
	uint8_t *buf;			/* message-mode receive buffer */
	size_t buf_len;
	/* server */
	struct evrdma_listener *lst;
	struct evconnlistener *tcp_lst;
	struct session *sessions;
	long accepted, served;
	/* client */
	struct ep e;
	int phase;			/* 0 (not yet), P_LAT, P_RATE, P_BW */
	int done;			/* every test ran */
	uint8_t *ping, *pong, *data;
	long sent, rcvd;		/* pings sent, pongs taken */
	long warm, total;		/* of this phase: warm-up, all */
	double *rtt;			/* round trips measured, in stamps */
	uint64_t t_send, t_start;
	uint64_t cal_stamp, cal_ns;	/* stamp() and now_ns() at lat start */
	uint64_t bw_sent;
	struct conns *cs;		/* conns.c */
};

static inline uint64_t
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
static inline uint64_t
stamp(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __rdtsc();
#else
	return now_ns();
#endif
}

static inline void
put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

static inline void
put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static inline uint64_t
get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

/* bench.c */
void fail(struct bench *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const char *ep_error(const struct ep *e, short what);
int make_request(uint8_t *req, int type, size_t size, uint64_t count);
int ep_connect(struct bench *b, struct ep *e, bufferevent_data_cb tcp_read,
    bufferevent_event_cb tcp_event, evrdma_channel_data_cb read,
    evrdma_channel_event_cb event, void *arg);
void tcp_connected(struct ep *e);

/* conns.c: --conn-rate and --fan; @return 0, or -1 (b->status set) */
int conns_start(struct bench *b);
void conns_free(struct bench *b);

#endif /* EVRDMA_BENCH_H_INCLUDED_ */
