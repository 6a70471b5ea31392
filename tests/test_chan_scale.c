/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests, channels at scale: 200 channels on one loop, all
 * streaming at once, each arriving whole on its own channel, served fairly
 * (no channel starved while another finishes), and nothing of ours left on
 * the device afterwards.
 */
#include "chtest.h"

#define NCH		200
#define NCH_BYTES	(256 * KiB)
#define NCH_SLOTS	4
#define NCH_SLOT	4096

struct many_ch {
	struct dt_env *env;
	struct ep cli[NCH], srv[NCH];
	int nsrv, done;
	/* bytes each channel had delivered (header included) when the
	 * first one finished, sorted */
	uint64_t at_first[NCH];
	/* diagnostics, ms after the writes: output first shrank (the
	 * channel took data), first data arrived, first channel finished */
	uint64_t t1, first_sent[NCH], first_rx[NCH], first_done;
};

static int
u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* (e->ctx is the many_ch) */
static void
many_on_rx(struct ep *e)
{
	struct many_ch *mch = e->ctx;
	int i;

	ck_assert_uint_le(e->rx, NCH_BYTES);
	if (e->have_hdr && !mch->first_rx[e - mch->srv])
		mch->first_rx[e - mch->srv] = tu_now_ms() - mch->t1 + 1;
	if (e->rx < NCH_BYTES || e->done)
		return;
	e->done = 1;
	if (mch->done++ == 0) {
		mch->first_done = tu_now_ms() - mch->t1 + 1;
		for (i = 0; i < NCH; i++)
			mch->at_first[i] = mch->srv[i].rx +
			    (mch->srv[i].have_hdr ? 8 : 0);
		qsort(mch->at_first, NCH, sizeof(mch->at_first[0]), u64_cmp);
	}
}

static void
many_accept(struct evrdma_listener *l, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct many_ch *mch = arg;
	struct ep *e;

	(void)l;
	(void)peer;
	(void)socklen;
	ck_assert_int_lt(mch->nsrv, NCH);
	e = &mch->srv[mch->nsrv++];
	e->ch = ch;
	e->name = "server";
	e->drain = 1;
	e->seed_hdr = 1;
	e->on_rx = many_on_rx;
	e->ctx = mch;
	evrdma_channel_setcb(ch, ep_readcb, ep_writecb, ep_eventcb, e);
	ck_assert_int_eq(evrdma_channel_enable(ch, EV_READ), 0);
}

/*
 * Fairness criterion. All transfers start in one loop iteration, after
 * every channel is up. A channel moves at most one window (NCH_SLOTS
 * slots) per credit round trip, so the first channel to finish needed
 * NCH_BYTES / (NCH_SLOTS * NCH_SLOT) = 16 rounds. At that moment we
 * require (1) every channel has delivered its first window: it was posted
 * at the same time as the finisher's first one, so only a channel that is
 * not served at all lacks it; (2) at least half of the channels have had a
 * credit round trip (delivered 2 windows), i.e. 1/8 of the finisher's
 * progress. Service that treats channels alike (round-robin over
 * connections and CQs) passes with a wide margin (the median is at 4+
 * windows under Soft-RoCE); service that drains one CQ before it looks at
 * the next (its channels cycle, the others wait for their first credit)
 * fails (2); a CQ never polled fails (1).
 */
START_TEST(channel_many)
{
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(NCH_SLOTS, NCH_SLOT, 16 * KiB);
	struct evrdma_listener *lst;
	struct sockaddr_storage ss;
	uint64_t t0, t1;
	int len, i, up;
	struct many_ch *mch;
	uint8_t seen[NCH];

	ck_assert_int_eq(evrdma_config_set_queue_depth(cfg, 32, 32), 0);
	mch = calloc(1, sizeof(*mch));
	ck_assert_ptr_nonnull(mch);
	memset(seen, 0, sizeof(seen));
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	mch->env = &env;
	len = dt_sockaddr(&ss, dt_addr(), 0);
	lst = evrdma_channel_listener_new(env.base, many_accept, mch,
	    EVRDMA_CHANNEL_STREAM, 256, (struct sockaddr *)&ss, len);
	ck_assert_ptr_nonnull(lst);
	len = dt_sockaddr(&ss, dt_addr(), evrdma_listener_get_port(lst));
	t0 = tu_now_ms();
	for (i = 0; i < NCH; i++) {
		mch->cli[i].tx_seed = 0x6000u + (unsigned)i;
		ep_connect(&env, &mch->cli[i], "client", &ss, len,
		    EVRDMA_CHANNEL_STREAM, 1);
	}
	for (;;) {
		for (up = 0, i = 0; i < NCH; i++) {
			ck_assert_msg(!mch->cli[i].ends, "client %d: event 0x%x "
			    "(%s)", i, mch->cli[i].what,
			    evrdma_reason_str(mch->cli[i].reason));
			up += mch->cli[i].connected;
		}
		if (up == NCH && mch->nsrv == NCH)
			break;
		ck_assert_msg(tu_now_ms() - t0 < 150000, "only %d connected, "
		    "%d accepted", up, mch->nsrv);
		ch_step(env.eb, 50);
	}
	t1 = mch->t1 = tu_now_ms();
	/* every transfer starts in this one loop iteration */
	for (i = 0; i < NCH; i++) {
		uint64_t h = htole64(mch->cli[i].tx_seed);

		ck_assert_int_eq(evrdma_channel_write(mch->cli[i].ch, &h, 8),
		    0);
		mch->cli[i].tx_total = NCH_BYTES;
		ep_pump(&mch->cli[i]);
	}
	while (mch->done < NCH) {
		for (i = 0; i < NCH; i++)
			ck_assert_msg(!mch->srv[i].ends && !mch->cli[i].ends,
			    "channel %d ended", i);
		ck_assert_msg(tu_now_ms() - t1 < 200000, "only %d of %d "
		    "finished", mch->done, NCH);
		ch_step(env.eb, 50);
		for (i = 0; i < NCH; i++)
			if (!mch->first_sent[i] && evbuffer_get_length(
			    evrdma_channel_get_output(mch->cli[i].ch)) <
			    NCH_BYTES + 8)
				mch->first_sent[i] = tu_now_ms() - t1 + 1;
	}
	{
		uint64_t ms = 0, mr = 0;
		int late = 0;

		for (i = 0; i < NCH; i++) {
			if (mch->first_sent[i] > ms)
				ms = mch->first_sent[i];
			if (mch->first_rx[i] > mr)
				mr = mch->first_rx[i];
			late += mch->first_rx[i] > mch->first_done;
		}
		fprintf(stderr, "channel many: first finished at %llu ms; every "
		    "sender had begun by %llu ms; first data of each channel "
		    "arrived by %llu ms, %d channels only after the first "
		    "finished\n", (unsigned long long)mch->first_done,
		    (unsigned long long)ms, (unsigned long long)mr, late);
	}
	fprintf(stderr, "channel many: %d up in %llu ms, %d x %u bytes in "
	    "%llu ms; delivered when the first finished: min %llu, 10%% %llu, "
	    "median %llu, max %llu\n", NCH, (unsigned long long)(t1 - t0),
	    NCH, NCH_BYTES + 8, (unsigned long long)(tu_now_ms() - t1),
	    (unsigned long long)mch->at_first[0],
	    (unsigned long long)mch->at_first[NCH / 10],
	    (unsigned long long)mch->at_first[NCH / 2],
	    (unsigned long long)mch->at_first[NCH - 1]);
	ck_assert_msg(mch->at_first[0] >= NCH_SLOTS * NCH_SLOT,
	    "a channel was starved: %llu bytes when the first finished",
	    (unsigned long long)mch->at_first[0]);
	ck_assert_msg(mch->at_first[NCH / 2] >= 2 * NCH_SLOTS * NCH_SLOT,
	    "unfair: when the first channel finished, half of them had not "
	    "had one credit round trip (median %llu bytes)",
	    (unsigned long long)mch->at_first[NCH / 2]);
	/* each stream arrived whole on its own channel */
	for (i = 0; i < NCH; i++) {
		uint64_t k = mch->srv[i].rx_seed - 0x6000u;

		ck_assert(mch->srv[i].have_hdr);
		ck_assert_uint_lt(k, NCH);
		ck_assert_int_eq(seen[k], 0);
		seen[k] = 1;
		ck_assert_uint_eq(mch->srv[i].rx, NCH_BYTES);
	}
	ch_loop_for(env.eb, 300);
	for (i = 0; i < NCH; i++) {
		ck_assert_int_eq(mch->cli[i].nevent, 1);
		ck_assert_int_eq(mch->srv[i].ends, 0);
		ep_free(&mch->cli[i]);
		ep_free(&mch->srv[i]);
	}
	evrdma_listener_free(lst);
	ch_drain(&env, 120000);
	dt_env_fini(&env);
	free(mch);
	dt_assert_no_rdma_resources();
}
END_TEST

Suite *
dt_suite_chan_scale(void)
{
	Suite *s = suite_create("device-chan-scale");
	TCase *tc;

	tc = tcase_create("many");
	tcase_set_timeout(tc, 400);
	tcase_add_test(tc, channel_many);
	suite_add_tcase(s, tc);
	return s;
}
