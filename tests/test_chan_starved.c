/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests, channels: the STARVED flag a sender sets for its
 * peer. A peer returns the pulls it has done at once only when the sender
 * said STARVED (evrdma__ch_credit_due; doc/channel-protocol.md); fewer than
 * a quarter of the ring otherwise wait for the peer's own next message,
 * which a peer that only reads never sends. So a message that leaves the
 * sender with no free send slot while the peer's pulls hold some must say
 * STARVED, whether it is itself a pull or not. A raw verbs peer
 * (rawpeer.h) reads the immediates off the wire.
 */
#include "victim.h"

#define SV_CREDITS	16		/* data credits the peer lends */
#define SV_PULL_MIN	2048		/* the peer pulls from this size on */
#define SV_SMALL	100		/* below STAGE_MIN: copied, not staged */

/* The immediate's flags (rp_imm()'s layout). */
#define SV_STARVED	0x80u
#define SV_PULL		0x40u

/*
 * The victim (8 send slots of 4 KiB, so at most 2 pulls at once) writes 7
 * full slots, staged in output, then a small write that the pass copies
 * into the last free slot. The pass sends two pulls, five SENDs (pulls
 * are at their limit) and then the small one: it leaves no slot free
 * while the two pulls hold theirs, with 9 data credits still in hand. It
 * alone says STARVED.
 */
START_TEST(starved_when_pulls_hold_the_last_slots)
{
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct victim v;
	struct rawpeer rp;
	struct rp_chs h = rp_hs(), vh;
	uint8_t chunk[AT_SLOT];
	unsigned i, nrecv = 0;

	memset(&v, 0, sizeof(v));
	memset(&rp, 0, sizeof(rp));
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	v_listen(&v, &env);
	h.slots = SV_CREDITS;
	h.pull_min = SV_PULL_MIN;
	ck_assert_int_eq(rp_open(&rp, &v, &h, 32, 32), 0);
	ck_assert_int_eq(rp_chs_decode(rp.reply, rp.reply_len, &vh), 0);
	ck_assert_uint_ne(vh.src_rkey, 0);	/* we may pull */
	ck_assert_uint_eq(vh.slots, AT_SLOTS);
	for (i = 0; i < SV_CREDITS + RP_CTRL; i++)
		ck_assert_int_eq(rp_post_recv(&rp, (size_t)i * RP_SLOT,
		    RP_SLOT), 0);
	CH_WAIT(env.eb, v.naccepted == 1, 10000);

	for (i = 0; i < AT_SLOTS - 1; i++) {
		pat_fill(chunk, (uint64_t)i * AT_SLOT, AT_SLOT, 0x57a5);
		ck_assert_int_eq(evrdma_channel_write(v.ch[0].ch, chunk,
		    AT_SLOT), 0);
	}
	ck_assert_int_eq(evrdma_channel_write(v.ch[0].ch, chunk, SV_SMALL),
	    0);
	ck_assert_int_eq(rp_wait_wc(&rp, AT_SLOTS, 10000), 0);
	/* nothing more comes: the victim waits for us now */
	rp_run(&rp, 200);
	ck_assert_uint_eq(rp.nwc, AT_SLOTS);

	for (i = 0; i < rp.nwc; i++) {
		const struct rp_wc *w = &rp.wc[i];
		int last = i == AT_SLOTS - 1;

		ck_assert(w->is_recv);
		ck_assert_int_eq(w->status, IBV_WC_SUCCESS);
		ck_assert(w->has_imm);
		ck_assert_uint_eq(w->imm >> 30, 0);	/* DATA */
		/* two pulls (descriptors), then the bytes */
		ck_assert_uint_eq(!!(w->imm & SV_PULL), i < 2);
		ck_assert_uint_eq(w->byte_len, i < 2 ? 8 :
		    last ? SV_SMALL : AT_SLOT);
		ck_assert_msg(!!(w->imm & SV_STARVED) == last, "message %u "
		    "(imm 0x%08x): STARVED %s", i, w->imm, last ?
		    "missing on the one that took the last slot" :
		    "while slots were free");
		nrecv++;
	}
	ck_assert_uint_eq(nrecv, AT_SLOTS);
	ck_assert_int_eq(v.ch[0].ends, 0);
	rp_close(&rp);
	v_close(&v);
	dt_env_fini(&env);
}
END_TEST

Suite *
dt_suite_chan_starved(void)
{
	Suite *s = suite_create("device-chan-starved");
	TCase *tc = tcase_create("flags");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, starved_when_pulls_hold_the_last_slots);
	suite_add_tcase(s, tc);
	return s;
}
