/*
 * evrdma device tests: helpers shared by the channel tests (byte patterns,
 * a seeded PRNG, loop steps with deadlines, teardown waits, ring
 * configurations). Header-only and without mutable state: each test keeps
 * its context in its own structs, handed through callback arguments.
 */
#ifndef EVRDMA_CHTEST_H_INCLUDED_
#define EVRDMA_CHTEST_H_INCLUDED_

#include <endian.h>

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
		evrdma_base_get_stats(env->base, &st);
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

#endif /* EVRDMA_CHTEST_H_INCLUDED_ */
