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
 * And a raw peer that pulls, an honest receiver written from the protocol
 * document, reads the sender's spill (large writes beyond the send ring)
 * by wide pull descriptors: the stream arrives whole, and a chunk the
 * peer once pulled never shows it bytes that were not sent to it.
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
		/* a pull descriptor of a send slot is 8 bytes (16: a
		 * spill's, which these tests' writes never reach) */
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

/* The wide descriptor's fields (doc/channel-protocol.md, by hand). */
static uint64_t
pl_get(const uint8_t *p, int n)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

#define PL_SPILL_LEN	(4 * AT_SLOTS * AT_SLOT)	/* four rings */
#define PL_SPILL_SEED	0x5b177ull
#define PL_MAX_WR	4096
#define PL_MAX_WIDE	64

/* An honest receiver, written from the protocol document: it READs each
 * pull (a slot of the victim's send ring by an 8-byte descriptor, or any
 * memory of the victim's by a 16-byte wide one: address, rkey, length),
 * checks every byte against the stream, and returns credits and pulls
 * done every 4 messages. */
struct pl_rx {
	struct rp_chs vh;
	const uint8_t *want;		/* the stream */
	size_t len, got;
	size_t off_of[PL_MAX_WR];	/* receive request -> its buffer */
	unsigned seen, dret, pdone, ctrl, ring, wide, sent;
	struct {			/* the wide pulls seen */
		uint64_t addr;
		uint32_t rkey, len;
		size_t at;		/* where in the stream */
	} w[PL_MAX_WIDE];
};

static void
pl_rx_init(struct pl_rx *x, struct rawpeer *rp, const uint8_t *want,
    size_t len)
{
	unsigned i;

	memset(x, 0, sizeof(*x));
	ck_assert_int_eq(rp_chs_decode(rp->reply, rp->reply_len, &x->vh), 0);
	x->ctrl = x->vh.ctrl;
	x->want = want;
	x->len = len;
	/* pl_open posted receive i at i * RP_SLOT, as its i-th request */
	for (i = 0; i < PL_CREDITS + RP_CTRL; i++)
		x->off_of[i] = (size_t)i * RP_SLOT;
}

/* Take the next completion, within @p ms: 0, or -1 when none came. With
 * @p hold, credits and pulls done are not returned. */
static int
pl_rx_step(struct pl_rx *x, struct rawpeer *rp, int ms, int hold)
{
	const struct rp_wc *w;
	const uint8_t *d;
	size_t off, len;
	uint32_t imm;

	if (rp_wait_wc(rp, x->seen + 1, ms) < 0)
		return -1;
	w = &rp->wc[x->seen++];
	if (!w->is_recv)
		return 0;	/* our READs and CREDITs */
	ck_assert_int_eq(w->status, IBV_WC_SUCCESS);
	ck_assert(w->has_imm);
	imm = w->imm;
	ck_assert_uint_lt(w->wr_id & ~RP_RECV_BIT, PL_MAX_WR);
	off = x->off_of[w->wr_id & ~RP_RECV_BIT];
	x->ctrl += (imm >> 8) & 0xff;
	if (imm >> 30 == 0) {
		d = rp->mem + off;
		len = w->byte_len;
		if (imm & PL_PULL) {
			uint64_t raddr;
			uint32_t rkey;

			if (w->byte_len == 8) {
				raddr = x->vh.src_base + pl_get(d, 4) *
				    x->vh.slot_size;
				rkey = x->vh.src_rkey;
				len = (size_t)pl_get(d + 4, 4);
				x->ring++;
			} else {
				ck_assert_uint_eq(w->byte_len, 16);
				raddr = pl_get(d, 8);
				rkey = (uint32_t)pl_get(d + 8, 4);
				len = (size_t)pl_get(d + 12, 4);
				ck_assert_uint_lt(x->wide, PL_MAX_WIDE);
				x->w[x->wide].addr = raddr;
				x->w[x->wide].rkey = rkey;
				x->w[x->wide].len = (uint32_t)len;
				x->w[x->wide].at = x->got;
				x->wide++;
			}
			ck_assert_uint_le(len, RP_SLOT);
			ck_assert_int_eq(RP_DO(rp, rp_read(rp, RP_SCRATCH, len,
			    raddr, rkey)), IBV_WC_SUCCESS);
			d = rp->mem + RP_SCRATCH;
			x->pdone++;
		} else {
			x->sent++;
		}
		ck_assert_uint_le(x->got + len, x->len);
		ck_assert_msg(memcmp(d, x->want + x->got, len) == 0,
		    "bytes %zu..%zu wrong (%s)", x->got, x->got + len,
		    imm & PL_PULL ? "pulled" : "sent");
		x->got += len;
		x->dret++;
	}
	/* the receive goes back, as the i-th request */
	ck_assert_uint_lt(rp->next_wr, PL_MAX_WR);
	x->off_of[rp->next_wr] = off;
	ck_assert_int_eq(rp_post_recv(rp, off, RP_SLOT), 0);
	if (!hold && (x->dret >= 4 ||
	    (x->got == x->len && (x->dret || x->pdone)))) {
		ck_assert_uint_gt(x->ctrl, 0);
		x->ctrl--;
		ck_assert_int_eq(RP_DO(rp, rp_send_imm(rp, RP_SCRATCH, 0,
		    rp_imm(1, x->dret, 0, 0, 0, x->pdone))), IBV_WC_SUCCESS);
		x->dret = x->pdone = 0;
	}
	return 0;
}

/*
 * The sender's spill, pulled. One write of four rings' worth: seven free
 * send slots take seven slots' worth of it, the spill the rest (copied
 * once, into registered chunks). The spill's chunks must go as wide pulls
 * once the ring's pulls are done (on Soft-RoCE the side that posts a
 * request does its work), and the stream must arrive whole and in order.
 */
START_TEST(spill_pulled_wide)
{
	struct dt_env env;
	struct victim v;
	struct rawpeer rp;
	uint8_t *buf = malloc(PL_SPILL_LEN);
	struct pl_rx *x = malloc(sizeof(*x));

	ck_assert_ptr_nonnull(buf);
	ck_assert_ptr_nonnull(x);
	pl_open(&env, &v, &rp);
	pl_rx_init(x, &rp, buf, PL_SPILL_LEN);
	pat_fill(buf, 0, PL_SPILL_LEN, PL_SPILL_SEED);
	ck_assert_int_eq(evrdma_channel_write(v.ch[0].ch, buf,
	    PL_SPILL_LEN), 0);
	while (x->got < PL_SPILL_LEN)
		ck_assert_msg(pl_rx_step(x, &rp, 10000, 0) == 0,
		    "stalled at %zu of %u bytes", x->got, PL_SPILL_LEN);
	fprintf(stderr, "spill pulled: %u ring pulls, %u wide pulls, %u "
	    "sent, of %u bytes\n", x->ring, x->wide, x->sent, PL_SPILL_LEN);
	ck_assert_uint_gt(x->ring, 0);
	ck_assert_uint_gt(x->wide, 0);
	ck_assert_int_eq(v.ch[0].ends, 0);
	pl_close(&env, &v, &rp);
	free(x);
	free(buf);
}
END_TEST

/*
 * A peer keeps the address and key of every spill chunk it pulled, and
 * the chunk is used again. Bytes that were never sent to it must not be
 * readable there: the peer pulls the first chunks of a large write and
 * stops returning credits; the application writes again (the chunks the
 * peer pulled, free again, take the new bytes) and drains its output, so
 * those bytes are never sent. A READ of every chunk the peer knows must
 * then find zeros, or the bytes it was sent from there; never the
 * drained ones.
 */
START_TEST(spill_reused_no_stale_bytes)
{
	struct dt_env env;
	struct victim v;
	struct rawpeer rp;
	uint8_t *buf = malloc(3 * PL_SPILL_LEN), *zero = calloc(1, RP_SLOT);
	struct pl_rx *x = malloc(sizeof(*x));
	struct evbuffer *out;
	unsigned i, zeros = 0;

	ck_assert_ptr_nonnull(buf);
	ck_assert_ptr_nonnull(zero);
	ck_assert_ptr_nonnull(x);
	pl_open(&env, &v, &rp);
	pl_rx_init(x, &rp, buf, 2 * PL_SPILL_LEN);
	pat_fill(buf, 0, 3 * PL_SPILL_LEN, PL_SPILL_SEED);
	ck_assert_int_eq(evrdma_channel_write(v.ch[0].ch, buf,
	    2 * PL_SPILL_LEN), 0);
	/* until two wide pulls are reported done, then nothing returned */
	while (x->wide < 2 || x->dret || x->pdone)
		ck_assert_msg(pl_rx_step(x, &rp, 10000, 0) == 0,
		    "stalled at %zu of %u bytes", x->got, 2 * PL_SPILL_LEN);
	while (pl_rx_step(x, &rp, 300, 1) == 0)
		;
	ck_assert_uint_lt(x->got, 2 * PL_SPILL_LEN);	/* still spilled */
	/* the second write: the free chunks take it, nothing goes */
	ck_assert_int_eq(evrdma_channel_write(v.ch[0].ch,
	    buf + 2 * PL_SPILL_LEN, PL_SPILL_LEN), 0);
	ck_assert_int_eq(pl_rx_step(x, &rp, 300, 1), -1);
	out = evrdma_channel_get_output(v.ch[0].ch);
	ck_assert_int_eq(evbuffer_drain(out, evbuffer_get_length(out)), 0);
	rp_run(&rp, 100);
	for (i = 0; i < x->wide; i++) {
		const uint8_t *d = rp.mem + RP_SCRATCH;
		size_t n = x->w[i].len;

		ck_assert_int_eq(RP_DO(&rp, rp_read(&rp, RP_SCRATCH, n,
		    x->w[i].addr, x->w[i].rkey)), IBV_WC_SUCCESS);
		if (memcmp(d, zero, n) == 0) {
			zeros++;
			continue;
		}
		/* not zeros: only what this chunk sent us */
		ck_assert_msg(memcmp(d, buf + x->w[i].at, n) == 0,
		    "chunk %u (pulled bytes %zu..%zu) holds bytes never "
		    "sent", i, x->w[i].at, x->w[i].at + n);
	}
	fprintf(stderr, "spill reused: %u chunks pulled, %u of them zeroed "
	    "after the drain\n", x->wide, zeros);
	/* the chunks were used again, and the drain zeroed them */
	ck_assert_uint_gt(zeros, 0);
	pl_close(&env, &v, &rp);
	free(x);
	free(zero);
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
	tcase_add_test(tc, spill_pulled_wide);
	tcase_add_test(tc, spill_reused_no_stale_bytes);
	suite_add_tcase(s, tc);
	return s;
}
