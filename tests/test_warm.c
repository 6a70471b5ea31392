/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: warm sets (issue 49). An ended channel's protection
 * domain and registered rings go, zeroed, to a cache of its base, and the
 * next channel takes them. The attacker's tests first: a peer that pulls
 * reads the whole send ring of a reused set and finds only zeros, and a
 * former peer, back on a new connection, uses the keys it was given for
 * the set that another peer holds now and reaches nothing. Then the
 * cache's bounds: its counts, its cap, its idle trim, and off.
 */
#include "victim.h"

#include <stdio.h>
#include <sys/resource.h>

#include <event2/buffer.h>
#include <evrdma/channel.h>

static struct evrdma_stats
w_stats(struct dt_env *env)
{
	struct evrdma_stats s;

	ck_assert_int_eq(evrdma_base_get_stats(env->base, &s, sizeof(s)),
	    0);
	return s;
}

/* (the caller declares struct evrdma_stats ws: what it saw last) */
#define W_WAIT(env, cond, ms)						\
	do {								\
		uint64_t dl_ = tu_now_ms() + (ms);			\
									\
		for (;;) {						\
			ws = w_stats(env);				\
			if (cond)					\
				break;					\
			ck_assert_msg(tu_now_ms() < dl_, "waited for %s: "\
			    "warm_sets %u hits %llu misses %llu conns %u",\
			    #cond, ws.warm_sets, ws.warm_hits,		\
			    ws.warm_misses, ws.conns);			\
			ch_loop_for((env)->eb, 10);			\
		}							\
	} while (0)

/* @p v, echoing and freeing its channels at their end, listening on
 * @p env made with @p cfg (freed). */
static void
w_victim(struct dt_env *env, struct victim *v, struct evrdma_config *cfg)
{
	memset(v, 0, sizeof(*v));
	dt_env_init(env, cfg);
	evrdma_config_free(cfg);
	v->echo = 1;
	v->free_on_end = 1;
	v_listen(v, env);
}

/* A message below the pull size, @p fill in every byte: the victim copies
 * it into a send slot and SENDs it from there, and once sent, it stays in
 * the slot until the slot's next use. */
#define W_SECRET	512

static void
w_secret(struct evrdma_channel *ch, uint8_t fill)
{
	uint8_t m[W_SECRET];

	memset(m, fill, sizeof(m));
	ck_assert_int_eq(evrdma_channel_write(ch, m, sizeof(m)), 0);
}

/* The raw peer received the victim's message (sent: it lies in the
 * victim's ring). */
static void
w_wait_msg(struct rawpeer *rp, struct dt_env *env)
{
	uint64_t dl = tu_now_ms() + 10000;
	unsigned n;

	for (;;) {
		for (n = 0; n < rp->nwc; n++)
			if (rp->wc[n].is_recv &&
			    rp->wc[n].status == IBV_WC_SUCCESS &&
			    rp->wc[n].byte_len == W_SECRET)
				return;
		ck_assert_msg(tu_now_ms() < dl, "the message did not come");
		rp_run(rp, 10);
	}
	(void)env;
}

/* A friend sends @p n bursts, each of a message of @p len bytes of @p
 * fill in every send slot but one, and waits for their echo: the slots of
 * both ends are used, sent and freed again, and their bytes stay until
 * they are used again. */
static void
w_traffic(struct friend *f, struct victim *v, int n, size_t len,
    uint8_t fill)
{
	int k, j;

	for (k = 0; k < n; k++) {
		size_t want = f->rx + (AT_SLOTS - 1) * len;

		for (j = 0; j < AT_SLOTS - 1; j++) {
			uint8_t *p = evrdma_channel_reserve(f->ch, len);

			ck_assert_ptr_nonnull(p);
			memset(p, fill, len);
			ck_assert_int_eq(evrdma_channel_commit(f->ch, len), 0);
		}
		CH_WAIT(v->env->eb, f->rx >= want || f->ends, 10000);
		ck_assert_uint_eq(f->rx, want);
	}
}

/* The raw peer reads @p len bytes of the victim at @p base with @p rkey:
 * the completion's status (-1: none came). */
static int
w_read(struct rawpeer *rp, size_t len, uint64_t base, uint32_t rkey)
{
	memset(rp->mem + RP_SCRATCH, 0xee, len);
	return RP_TRY(rp, rp_read(rp, RP_SCRATCH, len, base, rkey), 10000);
}

/* Whether @p fill is anywhere in the raw peer's last read. */
static int
w_seen(const struct rawpeer *rp, size_t len, uint8_t fill)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (rp->mem[RP_SCRATCH + i] == fill)
			return 1;
	return 0;
}

/*
 * The attack. Peer 1 pulls: it is given the victim's send ring (key and
 * base), and reads there the message the victim sent it. It leaves, and
 * the victim's set goes to the cache. An honest channel takes it, and
 * echoes messages whose bytes stay in its slots; it ends, and both its
 * ends' sets are cached. Peer 2 takes one: the whole send ring reads as
 * zero. The victim sends peer 2 a message. Then peer 1 comes back on a
 * new connection and reads with its old key, and with peer 2's: each
 * fails on its own QP (unless the set it got is the one it had: then it
 * reads its own zeros), and nothing of peer 2's message reaches it; peer
 * 2 goes on, its message in its ring.
 */
START_TEST(warm_former_peer)
{
	struct evrdma_stats ws;
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct victim v;
	struct friend f;
	struct rawpeer rp1, rp2, rp3;
	struct rp_chs vh1, vh2, vh3;
	size_t ring = (size_t)AT_SLOTS * AT_SLOT, i;
	unsigned long long hits;

	ck_assert_int_eq(evrdma_config_set_channel_pull(cfg, 1024), 0);
	memset(&rp1, 0, sizeof(rp1));
	memset(&rp2, 0, sizeof(rp2));
	memset(&rp3, 0, sizeof(rp3));
	w_victim(&env, &v, cfg);

	/* peer 1, and the key it keeps */
	rp_channel(&rp1, &v, 1024, 0, &vh1);
	ck_assert_uint_ne(vh1.src_rkey, 0);
	w_secret(v.ch[0].ch, 0xa1);
	w_wait_msg(&rp1, &env);
	ck_assert_int_eq(w_read(&rp1, ring, vh1.src_base, vh1.src_rkey),
	    IBV_WC_SUCCESS);
	ck_assert_msg(w_seen(&rp1, ring, 0xa1), "the message is not in the "
	    "ring: the test proves nothing");
	evrdma_channel_free(v.ch[0].ch);
	v.ch[0].freed = 1;
	v.ch[0].ch = NULL;
	rp_close(&rp1);
	W_WAIT(&env, ws.warm_sets >= 1 && ws.conns == 0, 10000);
	ck_assert_uint_eq(ws.warm_hits, 0);
	ck_assert_uint_eq(ws.mrs, 0);		/* the sets' are their own */

	/* an honest channel's traffic, left in both ends' slots; they are
	 * the newest sets when it ends, the next taken */
	f_open(&f, &v);
	w_traffic(&f, &v, 3, 700, 0xc3);
	evrdma_channel_free(f.ch);
	W_WAIT(&env, ws.conns == 0, 10000);
	hits = ws.warm_hits;

	/* peer 2 takes a used set: nothing of it shows */
	rp_channel(&rp2, &v, 1024, 0, &vh2);
	W_WAIT(&env, ws.warm_hits == hits + 1, 5000);
	ck_assert_int_eq(w_read(&rp2, ring, vh2.src_base, vh2.src_rkey),
	    IBV_WC_SUCCESS);
	for (i = 0; i < ring; i++)
		ck_assert_msg(rp2.mem[RP_SCRATCH + i] == 0, "reused send ring "
		    "byte %zu reads 0x%02x", i, rp2.mem[RP_SCRATCH + i]);
	w_secret(v.ch[2].ch, 0xb2);
	w_wait_msg(&rp2, &env);

	/* peer 1 again, with what it kept, and with peer 2's key */
	rp_channel(&rp3, &v, 1024, 0, &vh3);
	if (vh3.src_rkey == vh1.src_rkey) {
		/* it took back the very set it had: its own, and zeroed */
		ck_assert_int_eq(w_read(&rp3, ring, vh1.src_base,
		    vh1.src_rkey), IBV_WC_SUCCESS);
		for (i = 0; i < ring; i++)
			ck_assert_uint_eq(rp3.mem[RP_SCRATCH + i], 0);
	} else {
		ck_assert_msg(w_read(&rp3, ring, vh1.src_base, vh1.src_rkey) !=
		    IBV_WC_SUCCESS, "a former peer's key read a set another "
		    "connection holds");
	}
	ck_assert(!w_seen(&rp3, ring, 0xb2));
	rp_close(&rp3);
	memset(&rp3, 0, sizeof(rp3));
	rp_channel(&rp3, &v, 1024, 0, &vh3);
	ck_assert_msg(w_read(&rp3, ring, vh2.src_base, vh2.src_rkey) !=
	    IBV_WC_SUCCESS, "another peer's key read its ring");
	ck_assert(!w_seen(&rp3, ring, 0xb2));
	/* peer 2 is untouched, and its message whole */
	rp_run(&rp2, 200);
	ck_assert_int_eq(v.ch[2].ends, 0);
	ck_assert_int_eq(w_read(&rp2, ring, vh2.src_base, vh2.src_rkey),
	    IBV_WC_SUCCESS);
	ck_assert_msg(w_seen(&rp2, ring, 0xb2), "peer 2's message is not in "
	    "its ring: the test proves nothing");

	rp_close(&rp3);
	rp_close(&rp2);
	v_close(&v);
	dt_env_fini(&env);
	dt_assert_no_rdma_resources();
}
END_TEST

/* Channels connect, echo and close @p rounds times in turn; each round's
 * two channels (both ends on this base) leave their sets. */
static void
w_rounds(struct dt_env *env, struct victim *v, int rounds)
{
	struct evrdma_stats ws;
	struct friend f;
	int r;

	for (r = 0; r < rounds; r++) {
		f_open(&f, v);
		f_echo(&f, v, 64);
		f_echo(&f, v, 3 * AT_SLOT + 5);
		evrdma_channel_free(f.ch);
		W_WAIT(env, ws.conns == 0, 10000);
	}
}

/* The counts: the first round misses on both ends, every later one hits
 * on both, with its bytes intact; the cached sets hold no region of the
 * base's, their bytes are the rings'; a set idle past the bound goes, and
 * its device with it. */
START_TEST(warm_counts_and_trim)
{
	struct evrdma_stats ws;
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct victim v;

	ck_assert_int_eq(evrdma_config_set_warm(cfg, 4, 3000), 0);
	w_victim(&env, &v, cfg);
	w_rounds(&env, &v, 1);
	/* (the two ends' sets, and up to two the listener made ahead) */
	W_WAIT(&env, ws.warm_sets >= 2, 5000);
	ck_assert_uint_le(ws.warm_sets, 4);
	ck_assert_uint_eq(ws.warm_misses, 2);
	ck_assert_uint_eq(ws.warm_hits, 0);
	ck_assert_uint_eq(ws.mrs, 0);
	ck_assert_uint_eq(ws.qps, 0);
	ck_assert_uint_ge(ws.warm_bytes, ws.warm_sets * 2 *
	    (uint64_t)AT_SLOTS * AT_SLOT);
	/* each set gets a QP made for it from the loop */
	W_WAIT(&env, ws.warm_qps == ws.warm_sets, 5000);
	ck_assert_uint_eq(ws.qps, 0);
	w_rounds(&env, &v, 3);
	W_WAIT(&env, ws.warm_sets >= 2 && ws.warm_qps == ws.warm_sets, 5000);
	ck_assert_uint_eq(ws.warm_misses, 2);
	ck_assert_uint_eq(ws.warm_hits, 6);
	ck_assert_uint_eq(ws.qps, 0);
	/* idle: they go, and the device they held open */
	W_WAIT(&env, ws.warm_sets == 0 && ws.devices == 0, 10000);
	ck_assert_uint_eq(ws.warm_bytes, 0);
	ck_assert_uint_eq(ws.warm_qps, 0);
	ck_assert_uint_eq(ws.mrs, 0);
	v_close(&v);
	dt_env_fini(&env);
	dt_assert_no_rdma_resources();
}
END_TEST

/* The cap: with room for one set, four channels that end together leave
 * one; off, none, and nothing is looked for. */
START_TEST(warm_cap_and_off)
{
	struct evrdma_stats ws;
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct victim v;
	struct friend f[2];
	int i, off = _i;

	ck_assert_int_eq(evrdma_config_set_warm(cfg, off ? 0 : 1, 60000), 0);
	w_victim(&env, &v, cfg);
	for (i = 0; i < 2; i++)
		f_open(&f[i], &v);
	for (i = 0; i < 2; i++) {
		f_echo(&f[i], &v, 100);
		evrdma_channel_free(f[i].ch);
	}
	W_WAIT(&env, ws.conns == 0, 10000);
	ch_loop_for(env.eb, 50);
	W_WAIT(&env, ws.warm_sets == (off ? 0u : 1u), 1000);
	/* every end looked for a set (the second channel's may find the
	 * one the listener made ahead after the first accept) */
	ck_assert_uint_eq(ws.warm_misses + ws.warm_hits, off ? 0 : 4);
	ck_assert_uint_ge(ws.warm_misses, off ? 0 : 3);
	ck_assert_uint_eq(ws.mrs, 0);
	/* a set cached when the base goes goes with it */
	v_close(&v);
	dt_env_fini(&env);
	dt_assert_no_rdma_resources();
}
END_TEST

/* Sets made ahead: once a listener accepted, the loop makes two while it
 * has no request; the next channel's two ends take them, and carry
 * bytes; the listener makes more. */
START_TEST(warm_made_ahead)
{
	struct evrdma_stats ws;
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct victim v;
	struct friend f1, f2;

	w_victim(&env, &v, cfg);
	f_open(&f1, &v);
	W_WAIT(&env, ws.warm_sets == 2, 5000);
	ck_assert_uint_eq(ws.warm_misses, 2);
	ck_assert_uint_eq(ws.mrs, 4);		/* f1's two ends' */
	/* each with its QP, not yet any connection's */
	ck_assert_uint_eq(ws.warm_qps, 2);
	ck_assert_uint_eq(ws.qps, 2);
	f_open(&f2, &v);
	W_WAIT(&env, ws.warm_hits == 2, 1000);
	ck_assert_uint_eq(ws.qps, 4);
	f_echo(&f2, &v, 64);
	f_echo(&f2, &v, 3 * AT_SLOT + 5);
	f_echo(&f1, &v, 3 * AT_SLOT + 5);
	W_WAIT(&env, ws.warm_sets == 2, 5000);
	ck_assert_uint_eq(ws.warm_misses, 2);
	evrdma_channel_free(f1.ch);
	evrdma_channel_free(f2.ch);
	v_close(&v);
	dt_env_fini(&env);
	dt_assert_no_rdma_resources();
}
END_TEST

/* The pinned bytes of this process (the kernel's count: VmPin). */
static unsigned long long
w_vmpin(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long kb = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

/*
 * The cache gives way: RLIMIT_MEMLOCK leaves room for what the base has
 * registered, the warm sets included, and half a set more. The
 * application registers a set's worth of memory (a region of a shared
 * receive queue's, as evrdma_mr_reg()) and gets it: the sets went to make
 * room, rather than a cache of memory nobody uses refusing the
 * application. Then the channel's own path, a queue's pool of receive
 * buffers, the same.
 */
/* Four sets cached: the two a listener makes ahead, and both ends' of a
 * channel that echoed once and ended. @return the base's statistics. */
static struct evrdma_stats
w_fill(struct dt_env *env, struct victim *v)
{
	struct evrdma_stats ws;
	struct friend f;

	f_open(&f, v);
	W_WAIT(env, ws.warm_sets == 2, 5000);	/* made ahead */
	f_echo(&f, v, 64);
	evrdma_channel_free(f.ch);
	/* and both ends' */
	W_WAIT(env, ws.conns == 0 && ws.warm_sets == 4, 10000);
	ck_assert_uint_eq(ws.mrs, 0);
	return ws;
}

/* RLIMIT_MEMLOCK: what this process pins now (the kernel's count, the
 * cached sets included), and @p room more. */
static void
w_limit(struct rlimit *rl, unsigned long long room)
{
	rl->rlim_cur = rl->rlim_max = w_vmpin() + room;
	ck_assert_int_eq(setrlimit(RLIMIT_MEMLOCK, rl), 0);
}

/* The sets made room: some went, and the limit held. */
static void
w_gave_way(struct dt_env *env, const struct rlimit *rl)
{
	struct evrdma_stats ws = w_stats(env);

	ck_assert_uint_lt(ws.warm_sets, 4);
	ck_assert_uint_le(w_vmpin(), rl->rlim_cur);
}

START_TEST(warm_gives_way)
{
	struct evrdma_stats ws;
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct victim v;
	struct evrdma_srq *srq, *pool;
	struct evrdma_mr *mr;
	struct rlimit rl;
	unsigned long long set;
	void *buf;

	/* (before any RDMA file is opened: rdma_cm refuses a file opened
	 * under other credentials, ib_safe_file_access()) */
	v_drop_ipc_lock();
	ck_assert_int_eq(evrdma_config_set_warm(cfg, 4, 60000), 0);
	w_victim(&env, &v, cfg);
	ws = w_fill(&env, &v);
	srq = evrdma_srq_new(env.base, NULL, 16);
	ck_assert_ptr_nonnull(srq);
	set = ws.warm_bytes / 4;
	ck_assert_uint_ge(w_vmpin(), ws.warm_bytes);
	w_limit(&rl, set / 2);
	ck_assert_int_eq(posix_memalign(&buf, 4096, set), 0);
	mr = evrdma_srq_mr_reg(srq, buf, set);
	ck_assert_msg(mr != NULL, "a region under a limit the cached sets "
	    "filled: %s", strerror(errno));
	w_gave_way(&env, &rl);
	evrdma_mr_free(mr);
	free(buf);

	/* the sets again, then a pool */
	w_fill(&env, &v);
	rl.rlim_cur = w_vmpin() + set / 2;	/* (the hard limit stays) */
	ck_assert_int_eq(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
	pool = evrdma_channel_srq_new(env.base, NULL,
	    (unsigned)(set / AT_SLOT));
	ck_assert_msg(pool != NULL, "a pool under a limit the cached sets "
	    "filled: %s", strerror(errno));
	w_gave_way(&env, &rl);
	evrdma_srq_free(pool);
	evrdma_srq_free(srq);
	v_close(&v);
	dt_env_fini(&env);
	dt_assert_no_rdma_resources();
}
END_TEST

/*
 * No room for a channel's rings when it connects (RLIMIT_MEMLOCK, and no
 * warm set to take): the channel ends with an error and holds nothing,
 * its peer never hears of it, and once there is room a channel connects.
 */
START_TEST(warm_connect_no_room)
{
	struct evrdma_stats ws;
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct victim v;
	struct friend f;
	struct rlimit rl, was;

	v_drop_ipc_lock();
	w_victim(&env, &v, cfg);
	ck_assert_int_eq(getrlimit(RLIMIT_MEMLOCK, &was), 0);
	rl = was;
	rl.rlim_cur = w_vmpin() + AT_SLOT;
	ck_assert_int_eq(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
	ck_assert_int_eq(f_connect(&f, &v), 0);
	ck_assert_int_eq(f.ends, 1);
	ck_assert_int_eq(evrdma_channel_get_error(f.ch), ENOMEM);
	evrdma_channel_free(f.ch);
	W_WAIT(&env, ws.conns == 0 && ws.qps == 0 && ws.mrs == 0, 5000);
	ck_assert_uint_eq(ws.warm_misses, 1);
	ck_assert_int_eq(v.naccepted, 0);

	ck_assert_int_eq(setrlimit(RLIMIT_MEMLOCK, &was), 0);
	f_open(&f, &v);
	f_echo(&f, &v, 3 * AT_SLOT + 5);
	evrdma_channel_free(f.ch);
	v_close(&v);
	dt_env_fini(&env);
	dt_assert_no_rdma_resources();
}
END_TEST

Suite *
dt_suite_warm(void)
{
	Suite *s = suite_create("device-warm");
	TCase *tc = tcase_create("warm");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, warm_former_peer);
	tcase_add_test(tc, warm_counts_and_trim);
	tcase_add_loop_test(tc, warm_cap_and_off, 0, 2);
	tcase_add_test(tc, warm_made_ahead);
	tcase_add_test(tc, warm_gives_way);
	tcase_add_test(tc, warm_connect_no_room);
	suite_add_tcase(s, tc);
	return s;
}
