/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: fixtures shared by the channel tests (test_chan_*.c).
 * Byte patterns, a seeded PRNG, loop steps with deadlines, teardown waits
 * and ring configurations (static inline, here); one channel end with its
 * callbacks and counters (struct ep), a listener of such ends (struct chl)
 * and a connected pair (struct chp), in chtest.c. No mutable state outside
 * a test's own structs: each test keeps its context in them and hands it
 * to the callbacks through their argument, as libevent's tests do.
 */
#ifndef EVRDMA_CHTEST_H_INCLUDED_
#define EVRDMA_CHTEST_H_INCLUDED_

#include <endian.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <evrdma/channel.h>

#include "devtest.h"

#define KiB (1024u)
#define MiB (1024u * 1024u)

/* ---- the byte pattern ---- */

static inline uint64_t
pat_word(uint64_t idx, uint64_t seed)
{
	uint64_t x = idx * 0x9e3779b97f4a7c15ull + seed;

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Bytes [off, off + n) of the stream named by @p seed. */
static inline void
pat_fill(void *dst, uint64_t off, size_t n, uint64_t seed)
{
	uint8_t *p = dst;

	while (n > 0) {
		uint64_t w = htole64(pat_word(off >> 3, seed));
		size_t sh = (size_t)(off & 7), k = 8 - sh;

		if (k > n)
			k = n;
		memcpy(p, (uint8_t *)&w + sh, k);
		p += k;
		off += k;
		n -= k;
	}
}

/* @return the index of the first byte that is not the pattern, or -1 */
static inline size_t
pat_check(const void *data, uint64_t off, size_t n, uint64_t seed)
{
	const uint8_t *d = data;
	uint8_t pat_tmp[4096];
	size_t done = 0, i, k;

	while (done < n) {
		k = n - done < sizeof(pat_tmp) ? n - done : sizeof(pat_tmp);
		pat_fill(pat_tmp, off + done, k, seed);
		if (memcmp(d + done, pat_tmp, k) != 0) {
			for (i = 0; d[done + i] == pat_tmp[i]; i++)
				;
			return done + i;
		}
		done += k;
	}
	return (size_t)-1;
}

/* Take all of @p in, the pattern of @p seed from stream offset *got:
 * *got grows by what was taken, and *bad (the first wrong byte + 1) is
 * set once. */
static inline void
pat_take(struct evbuffer *in, uint64_t seed, size_t *got, size_t *bad)
{
	size_t n = evbuffer_get_length(in), at;

	if (!n)
		return;
	at = pat_check(evbuffer_pullup(in, (ev_ssize_t)n), *got, n, seed);
	if (at != (size_t)-1 && !*bad)
		*bad = *got + at + 1;
	*got += n;
	evbuffer_drain(in, n);
}

/* xorshift64*: a seeded, repeatable PRNG */
static inline uint64_t
rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

static inline size_t
rng_range(uint64_t *s, size_t lo, size_t hi)
{
	return lo + (size_t)(rng_next(s) % (hi - lo + 1));
}

/* ---- loop helpers ---- */

static inline void
ch_break_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	event_base_loopbreak(arg);
}

/*
 * One loop iteration that waits at most @p ms for something to happen.
 * The timer breaks the loop: EVLOOP_ONCE alone does not return while some
 * event is activated again and again (libevent/libevent#891 does that to a
 * socket bufferevent held at its read high watermark).
 */
static inline void
ch_step(struct event_base *eb, int ms)
{
	struct event *t = evtimer_new(eb, ch_break_cb, eb);
	struct timeval tv;

	ck_assert_ptr_nonnull(t);
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(t, &tv);
	event_base_loop(eb, EVLOOP_ONCE);
	event_free(t);
}

/* Run the loop for @p ms (lets late events show up). */
static inline void
ch_loop_for(struct event_base *eb, int ms)
{
	uint64_t end = tu_now_ms() + (uint64_t)ms, now;

	while ((now = tu_now_ms()) < end)
		ch_step(eb, end - now < 50 ? (int)(end - now) : 50);
}

/* Run the loop until @p cond holds; fail after @p ms. */
#define CH_WAIT(eb, cond, ms)						\
	do {								\
		uint64_t ch_dl_ = tu_now_ms() + (uint64_t)(ms);		\
		while (!(cond)) {					\
			ck_assert_msg(tu_now_ms() < ch_dl_,		\
			    "timed out after %d ms waiting for %s",	\
			    (int)(ms), #cond);				\
			ch_step((eb), 50);				\
		}							\
	} while (0)

/*
 * Run the loop until every connection, request and memory region of the
 * base is gone (dt_drain() without the MRs: a channel deregisters its rings
 * as part of its teardown, and dt_env_fini() asserts there are none left).
 */
static inline void
ch_drain(struct dt_env *env, int ms)
{
	uint64_t dl = tu_now_ms() + (uint64_t)ms;
	struct evrdma_stats st;

	for (;;) {
		evrdma_base_get_stats(env->base, &st, sizeof(st));
		if (!st.conns && !st.cm_ids && !st.qps && !st.reqs && !st.mrs)
			return;
		ck_assert_msg(tu_now_ms() < dl, "channel teardown did not "
		    "finish: conns %u cm_ids %u qps %u reqs %u mrs %u",
		    st.conns, st.cm_ids, st.qps, st.reqs, st.mrs);
		ch_step(env->eb, 10);
	}
}

static inline struct evrdma_config *
ring_config(unsigned slots, unsigned slot_size, size_t max_input)
{
	struct evrdma_config *cfg = evrdma_config_new();

	ck_assert_ptr_nonnull(cfg);
	ck_assert_int_eq(evrdma_config_set_channel_ring(cfg, slots, slot_size,
	    max_input), 0);
	return cfg;
}

/* ---- one channel end, its callbacks and counters (chtest.c) ---- */

/* ep.free_in: free the channel from inside that callback */
enum {
	FREE_NONE = 0,
	FREE_READ,
	FREE_WRITE,
	FREE_CONNECTED,
	FREE_EOF,
	FREE_ERROR
};

/* ep_pump() writes at most this much at a time */
#define EP_CHUNK	(256 * KiB)

struct ep {
	const char *name;
	struct evrdma_channel *ch;
	/* sending: bytes [0, tx_total) of the stream tx_seed */
	uint64_t tx_seed, tx_total, tx_queued;
	size_t pump_hi;		/* ep_pump() keeps output below (0: no limit) */
	int pump_in_wcb;	/* top up from the write callback */
	uint64_t zc_rng;	/* ep_pump() reserves and commits, of random
				 * sizes from this PRNG (0: writes) */
	int zc_eagain;		/* reservations refused: no free slot */
	/* receiving: the read callback checks and drains when drain is set */
	uint64_t rx_seed, rx;
	int drain;
	int seed_hdr;		/* the stream starts with its seed (8 bytes LE) */
	int have_hdr;
	size_t max_in;		/* largest input length a read callback saw */
	int in_readcb;
	/* what the callbacks saw */
	int nread, nwrite, nevent;
	int connected, eof, error, timeout, ends;
	short what;		/* flags of the last event */
	int reason;		/* evrdma_channel_get_error() at BEV_EVENT_ERROR */
	int reads_after_end;	/* read callbacks after EOF or ERROR */
	int wr_err_after_eof;	/* ERROR|WRITING after EOF or ERROR|READING: the
				 * peer is gone with output still to send,
				 * as a socket's EPIPE after the peer's FIN */
	uint64_t rx_at_end;	/* rx + input length at EOF or ERROR */
	int free_in;		/* FREE_*: free the channel from that callback */
	int freed;
	void (*on_rx)(struct ep *);
	int done;
	void *ctx;		/* the test's own context, for callbacks that
				 * take an ep as their argument */
	struct evrdma_srq *srq;	/* ep_connect(): draw receives from it */
};

void ep_free(struct ep *e);
/* Check everything in input against the pattern and drain it. */
void ep_consume(struct ep *e);
/* Queue the pattern until tx_total is queued or output reaches pump_hi. */
void ep_pump(struct ep *e);
void ep_readcb(struct evrdma_channel *ch, void *arg);
void ep_writecb(struct evrdma_channel *ch, void *arg);
void ep_eventcb(struct evrdma_channel *ch, short what, void *arg);
/* Start connecting @p e (a new channel) to @p ss. */
void ep_connect(struct dt_env *env, struct ep *e, const char *name,
    const struct sockaddr_storage *ss, int sslen, int mode, int read);
/* Send @p n more bytes of from's stream and wait until @p to has them. */
void ep_xfer(struct dt_env *env, struct ep *from, struct ep *to, size_t n,
    int ms);

/* ---- a listener and its accepted channels (chtest.c) ---- */

struct chl {
	struct dt_env *env;
	struct evrdma_listener *lst;
	struct sockaddr_storage ss;	/* where to connect */
	int sslen;
#define CHL_MAX	20
	struct ep acc[CHL_MAX];		/* accepted channels, in order */
	int read[CHL_MAX];		/* enable EV_READ on acc[i] */
	int naccepted;
	int accept_free;	/* 1: free each new channel, 2: and the listener */
};

void chl_listen(struct chl *c, struct dt_env *env, int mode);
void chl_close(struct chl *c);

/* A connected pair: p->cli connected to p->l.acc[0] (both read). */
struct chp {
	struct dt_env *env;
	struct chl l;
	struct ep cli;
	struct ep *srv;
};

void chp_open(struct chp *p, struct dt_env *env, int mode, int srv_read);
void chp_close(struct chp *p);

#endif /* EVRDMA_CHTEST_H_INCLUDED_ */
