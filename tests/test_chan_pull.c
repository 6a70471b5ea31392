/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests, channels: how a sender uses a peer that pulls. A
 * raw verbs peer (rawpeer.h) that pulls nothing reads the immediates off
 * the wire:
 * - which messages are offered to be pulled: while fewer than a quarter of
 *   the sender's ring are (half while its output holds more than its
 *   ring), the rest sent as bytes;
 * - the STARVED flag. A peer returns the pulls it has done at once only
 *   when the sender said STARVED (evrdma__ch_credit_due;
 *   doc/channel-protocol.md); fewer than a quarter of the ring otherwise
 *   wait for the peer's own next message, which a peer that only reads
 *   never sends. So a message that leaves the sender with no free send
 *   slot while the peer's pulls hold some must say STARVED, whether it is
 *   itself a pull or not.
 */
#include "victim.h"

#define PL_CREDITS	16		/* data credits the peer lends */
#define PL_PULL_MIN	2048		/* the peer pulls from this size on */
#define PL_SMALL	100		/* below STAGE_MIN: copied, not staged */

/* The immediate's flags (rp_imm()'s layout). */
#define PL_STARVED	0x80u
#define PL_PULL		0x40u

/* A victim with AT_SLOTS send slots of AT_SLOT bytes, and the raw peer
 * connected to it with PL_CREDITS receives posted. */
static void
pl_open(struct dt_env *env, struct victim *v, struct rawpeer *rp)
{
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct rp_chs h = rp_hs(), vh;
	unsigned i;

	memset(v, 0, sizeof(*v));
	memset(rp, 0, sizeof(*rp));
	dt_env_init(env, cfg);
	evrdma_config_free(cfg);
	v_listen(v, env);
	h.slots = PL_CREDITS;
	h.pull_min = PL_PULL_MIN;
	ck_assert_int_eq(rp_open(rp, v, &h, 32, 32), 0);
	ck_assert_int_eq(rp_chs_decode(rp->reply, rp->reply_len, &vh), 0);
	ck_assert_uint_ne(vh.src_rkey, 0);	/* we may pull */
	ck_assert_uint_eq(vh.slots, AT_SLOTS);
	for (i = 0; i < PL_CREDITS + RP_CTRL; i++)
		ck_assert_int_eq(rp_post_recv(rp, (size_t)i * RP_SLOT,
		    RP_SLOT), 0);
	CH_WAIT(env->eb, v->naccepted == 1, 10000);
}

/* Take the @p n messages the victim sends before it waits for us (we pull
 * nothing and return nothing): each a DATA, its flags checked by the
 * caller. */
static void
pl_take(struct victim *v, struct rawpeer *rp, unsigned n)
{
	unsigned i;

	ck_assert_int_eq(rp_wait_wc(rp, n, 10000), 0);
	rp_run(rp, 200);
	ck_assert_uint_eq(rp->nwc, n);
	for (i = 0; i < rp->nwc; i++) {
		const struct rp_wc *w = &rp->wc[i];

		ck_assert(w->is_recv);
		ck_assert_int_eq(w->status, IBV_WC_SUCCESS);
		ck_assert(w->has_imm);
		ck_assert_uint_eq(w->imm >> 30, 0);	/* DATA */
		/* a pull descriptor is 8 bytes */
		if (w->imm & PL_PULL)
			ck_assert_uint_eq(w->byte_len, 8);
	}
	ck_assert_int_eq(v->ch[0].ends, 0);
}

static void
pl_close(struct dt_env *env, struct victim *v, struct rawpeer *rp)
{
	rp_close(rp);
	v_close(v);
	dt_env_fini(env);
}

/*
 * The victim (8 send slots of 4 KiB, so at most 2 pulls at once with
 * output no deeper than its ring) writes 7 full slots, staged in output,
 * then a small write that the pass copies into the last free slot. The
 * pass sends two pulls, five SENDs (pulls are at their limit) and then
 * the small one: it leaves no slot free while the two pulls hold theirs,
 * with 9 data credits still in hand. It alone says STARVED.
 */
START_TEST(starved_when_pulls_hold_the_last_slots)
{
	struct dt_env env;
	struct victim v;
	struct rawpeer rp;
	uint8_t chunk[AT_SLOT];
	unsigned i;

	pl_open(&env, &v, &rp);
	for (i = 0; i < AT_SLOTS - 1; i++) {
		pat_fill(chunk, (uint64_t)i * AT_SLOT, AT_SLOT, 0x57a5);
		ck_assert_int_eq(evrdma_channel_write(v.ch[0].ch, chunk,
		    AT_SLOT), 0);
	}
	ck_assert_int_eq(evrdma_channel_write(v.ch[0].ch, chunk, PL_SMALL),
	    0);
	pl_take(&v, &rp, AT_SLOTS);
	for (i = 0; i < AT_SLOTS; i++) {
		const struct rp_wc *w = &rp.wc[i];
		int last = i == AT_SLOTS - 1;

		/* two pulls, then the bytes */
		ck_assert_uint_eq(!!(w->imm & PL_PULL), i < 2);
		if (i >= 2)
			ck_assert_uint_eq(w->byte_len, last ? PL_SMALL :
			    AT_SLOT);
		ck_assert_msg(!!(w->imm & PL_STARVED) == last, "message %u "
		    "(imm 0x%08x): STARVED %s", i, w->imm, last ?
		    "missing on the one that took the last slot" :
		    "while slots were free");
	}
	pl_close(&env, &v, &rp);
}
END_TEST

/*
 * One write of three rings' worth: output holds more than the ring, so
 * half of it (4 messages) is offered to be pulled; then, those pulls not
 * done, the victim sends the bytes of the rest until our credits run out
 * (their slots come back as their sends complete). (With output no deeper
 * than the ring, the test above sees two.)
 */
START_TEST(more_pulls_while_output_is_deep)
{
	struct dt_env env;
	struct victim v;
	struct rawpeer rp;
	size_t len = 3 * AT_SLOTS * AT_SLOT;
	uint8_t *buf = malloc(len);
	unsigned i;

	ck_assert_ptr_nonnull(buf);
	pl_open(&env, &v, &rp);
	pat_fill(buf, 0, len, 0xdee9);
	ck_assert_int_eq(evrdma_channel_write(v.ch[0].ch, buf, len), 0);
	pl_take(&v, &rp, PL_CREDITS);
	for (i = 0; i < PL_CREDITS; i++) {
		const struct rp_wc *w = &rp.wc[i];

		ck_assert_msg(!!(w->imm & PL_PULL) == (i < AT_SLOTS / 2),
		    "message %u (imm 0x%08x, %u bytes): %s", i, w->imm,
		    w->byte_len, i < AT_SLOTS / 2 ? "not a pull" :
		    "a pull beyond half the ring");
		if (i >= AT_SLOTS / 2)
			ck_assert_uint_eq(w->byte_len, AT_SLOT);
	}
	pl_close(&env, &v, &rp);
	free(buf);
}
END_TEST

Suite *
dt_suite_chan_pull(void)
{
	Suite *s = suite_create("device-chan-pull");
	TCase *tc = tcase_create("sender");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, starved_when_pulls_hold_the_last_slots);
	tcase_add_test(tc, more_pulls_while_output_is_deep);
	suite_add_tcase(s, tc);
	return s;
}
