/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma host tests: the wire formats and the channel's credit rules
 * (lib/wire.c), compiled into this program: every decoder of peer input,
 * as a peer that sends the wrong thing on purpose would call it.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "wire.h"

static void
be_put(uint8_t *p, uint64_t v, int width)
{
	int i;

	for (i = width - 1; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

/* ---- the connection handshake ---- */

START_TEST(wire_hs_roundtrip)
{
	struct evrdma__hs in = { EVRDMA_HS_VERSION, EVRDMA_HS_ACCEPT, 0xbeef,
	    17 }, out;
	uint8_t buf[EVRDMA_PDATA_CONNECT_MAX];
	const uint8_t *data;
	size_t dlen;
	int vbad;

	memset(buf, 0, sizeof(buf));
	evrdma__hs_encode(buf, &in);
	ck_assert_int_eq(evrdma__hs_decode(buf, EVRDMA_HS_LEN, &out), 0);
	ck_assert_uint_eq(out.version, in.version);
	ck_assert_uint_eq(out.type, in.type);
	ck_assert_uint_eq(out.flags, in.flags);
	ck_assert_uint_eq(out.code, in.code);
	/* 17 bytes of data after the header, padding behind them */
	ck_assert_int_eq(evrdma__hs_payload(buf, sizeof(buf), EVRDMA_HS_ACCEPT,
	    &data, &dlen, &vbad), 0);
	ck_assert_ptr_eq(data, buf + EVRDMA_HS_LEN);
	ck_assert_uint_eq(dlen, 17);
}
END_TEST

START_TEST(wire_hs_refused)
{
	struct evrdma__hs hs = { EVRDMA_HS_VERSION, EVRDMA_HS_CONNECT, 0, 0 };
	uint8_t buf[EVRDMA_PDATA_CONNECT_MAX];
	const uint8_t *data;
	size_t dlen;
	int vbad;

	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(evrdma__hs_decode(NULL, 8, &hs), -1);
	ck_assert_int_eq(evrdma__hs_decode(buf, 8, &hs), -1);	/* no magic */
	evrdma__hs_encode(buf, &hs);
	ck_assert_int_eq(evrdma__hs_decode(buf, 7, &hs), -1);	/* short */
	/* another type than asked for */
	ck_assert_int_eq(evrdma__hs_payload(buf, sizeof(buf), EVRDMA_HS_ACCEPT,
	    &data, &dlen, &vbad), -1);
	ck_assert_int_eq(vbad, 0);
	/* more data claimed than came */
	hs.code = EVRDMA_PDATA_CONNECT_MAX - EVRDMA_HS_LEN + 1;
	evrdma__hs_encode(buf, &hs);
	ck_assert_int_eq(evrdma__hs_payload(buf, sizeof(buf),
	    EVRDMA_HS_CONNECT, &data, &dlen, &vbad), -1);
	/* another version: refused by name */
	hs.code = 0;
	hs.version = EVRDMA_HS_VERSION + 1;
	evrdma__hs_encode(buf, &hs);
	ck_assert_int_eq(evrdma__hs_payload(buf, sizeof(buf),
	    EVRDMA_HS_CONNECT, &data, &dlen, &vbad), -1);
	ck_assert_int_eq(vbad, 1);
}
END_TEST

/* ---- the channel handshake ---- */

static const struct evrdma__ch_hs good_hs = {
	.mode = 1, .slots = 16, .ctrl = 4, .slot_size = 65536,
	.pull_min = 32768, .src_rkey = 0x1234, .src_base = 0x40,
};

START_TEST(wire_ch_hs_roundtrip)
{
	uint8_t buf[EVRDMA_PDATA_CONNECT_MAX];
	struct evrdma__ch_hs out;

	memset(buf, 0, sizeof(buf));
	evrdma__ch_hs_encode(buf, &good_hs);
	ck_assert_int_eq(evrdma__ch_hs_decode(buf, sizeof(buf), &out),
	    EVRDMA_CH_HS_OK);
	ck_assert(out.mode == good_hs.mode && out.slots == good_hs.slots &&
	    out.ctrl == good_hs.ctrl && out.slot_size == good_hs.slot_size &&
	    out.pull_min == good_hs.pull_min &&
	    out.src_rkey == good_hs.src_rkey &&
	    out.src_base == good_hs.src_base);
}
END_TEST

/* LEND (a channel on a queue's pool) is the mode byte's top bit: it
 * travels with either mode, and a mode out of range stays refused. */
START_TEST(wire_ch_hs_lend)
{
	uint8_t buf[EVRDMA_CH_HS_LEN];
	struct evrdma__ch_hs in = good_hs, out;
	uint32_t h;

	in.lend = 1;
	evrdma__ch_hs_encode(buf, &in);
	ck_assert_uint_eq(buf[3], 0x81);
	ck_assert_int_eq(evrdma__ch_hs_decode(buf, sizeof(buf), &out),
	    EVRDMA_CH_HS_OK);
	ck_assert_uint_eq(out.mode, 1);
	ck_assert_uint_eq(out.lend, 1);
	in.lend = 0;
	evrdma__ch_hs_encode(buf, &in);
	ck_assert_int_eq(evrdma__ch_hs_decode(buf, sizeof(buf), &out),
	    EVRDMA_CH_HS_OK);
	ck_assert_uint_eq(out.lend, 0);
	/* mode 2 with LEND, signed correctly: out of range */
	buf[3] = 0x82;
	h = evrdma__fnv1a(buf, 28);
	buf[28] = (uint8_t)(h >> 24);
	buf[29] = (uint8_t)(h >> 16);
	buf[30] = (uint8_t)(h >> 8);
	buf[31] = (uint8_t)h;
	ck_assert_int_eq(evrdma__ch_hs_decode(buf, sizeof(buf), &out),
	    EVRDMA_CH_HS_RANGE);
}
END_TEST

/* Finding 17: rdma_cm pads private data with zeros; a handshake cut
 * short must not read as one whose last fields are zero. */
START_TEST(wire_ch_hs_truncated)
{
	uint8_t full[EVRDMA_CH_HS_LEN], buf[48];
	struct evrdma__ch_hs out;
	size_t cut;

	evrdma__ch_hs_encode(full, &good_hs);
	for (cut = 0; cut < EVRDMA_CH_HS_LEN; cut++) {
		memset(buf, 0, sizeof(buf));
		memcpy(buf, full, cut);
		ck_assert_int_ne(evrdma__ch_hs_decode(buf, sizeof(buf), &out),
		    EVRDMA_CH_HS_OK);
		ck_assert_int_ne(evrdma__ch_hs_decode(full, cut, &out),
		    EVRDMA_CH_HS_OK);
	}
}
END_TEST

START_TEST(wire_ch_hs_fields)
{
	static const struct {
		int off, width;
		uint64_t v;
		int want;
	} cases[] = {
		{ 2, 1, 2, EVRDMA_CH_HS_VERSION },	/* version 2 (no LOAN) */
		{ 2, 1, 3, EVRDMA_CH_HS_VERSION },	/* 3 (no wide pull) */
		{ 2, 1, 5, EVRDMA_CH_HS_VERSION },
		{ 3, 1, 2, EVRDMA_CH_HS_RANGE },	/* mode */
		{ 4, 2, 1, EVRDMA_CH_HS_RANGE },	/* slots */
		{ 4, 2, 4097, EVRDMA_CH_HS_RANGE },
		{ 6, 1, 1, EVRDMA_CH_HS_RANGE },	/* control credits */
		{ 6, 1, 0, EVRDMA_CH_HS_RANGE },
		{ 7, 1, 24, EVRDMA_CH_HS_SHORT },	/* length */
		{ 8, 4, 32, EVRDMA_CH_HS_RANGE },	/* slot size */
		{ 8, 4, 65, EVRDMA_CH_HS_RANGE },
		{ 8, 4, (4u << 20) + 64, EVRDMA_CH_HS_RANGE },
		{ 12, 4, (4u << 20) + 1, EVRDMA_CH_HS_RANGE },	/* pull */
		/* a send ring that would wrap the address space */
		{ 20, 8, UINT64_MAX - 4096, EVRDMA_CH_HS_RANGE },
	};
	uint8_t buf[EVRDMA_CH_HS_LEN];
	struct evrdma__ch_hs out;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		evrdma__ch_hs_encode(buf, &good_hs);
		be_put(buf + cases[i].off, cases[i].v, cases[i].width);
		/* re-sign it, so that only the field is wrong */
		be_put(buf + 28, evrdma__fnv1a(buf, 28), 4);
		ck_assert_msg(evrdma__ch_hs_decode(buf, sizeof(buf), &out) ==
		    cases[i].want, "case %zu: %s", i, evrdma__ch_hs_strerror(
		    evrdma__ch_hs_decode(buf, sizeof(buf), &out)));
	}
	/* any bit changed without the check value: refused */
	for (i = 0; i < 28 * 8; i++) {
		evrdma__ch_hs_encode(buf, &good_hs);
		buf[i / 8] ^= (uint8_t)(1u << (i % 8));
		ck_assert_int_ne(evrdma__ch_hs_decode(buf, sizeof(buf), &out),
		    EVRDMA_CH_HS_OK);
	}
	ck_assert_int_eq(evrdma__ch_hs_decode(NULL, 32, &out),
	    EVRDMA_CH_HS_SHORT);
	ck_assert_str_ne(evrdma__ch_hs_strerror(99), "");
}
END_TEST

/* ---- immediates and pull descriptors ---- */

START_TEST(wire_imm)
{
	struct evrdma__ch_imm in = { EVRDMA_CH_DATA, 0x3fff, 0xff, 1, 1, 0x3f, 0, 0, 0 },
	    out;
	uint32_t v;

	ck_assert_int_eq(evrdma__ch_imm_decode(evrdma__ch_imm_encode(&in),
	    &out), 0);
	ck_assert(out.type == in.type && out.dret == in.dret &&
	    out.cret == in.cret && out.starved == in.starved &&
	    out.pull == in.pull && out.pdone == in.pdone);
	in.type = EVRDMA_CH_EOF;
	in.pull = 0;
	ck_assert_int_eq(evrdma__ch_imm_decode(evrdma__ch_imm_encode(&in),
	    &out), 0);
	ck_assert_uint_eq(out.type, EVRDMA_CH_EOF);
	/* LOAN: the count in place of the returns, YIELD in the PULL bit */
	memset(&in, 0, sizeof(in));
	in.type = EVRDMA_CH_LOAN;
	in.loan = 0x2345;
	in.yield = 1;
	in.cret = 3;
	ck_assert_uint_eq(evrdma__ch_imm_encode(&in),
	    3u << 30 | 0x2345u << 16 | 3u << 8 | 0x40);
	ck_assert_int_eq(evrdma__ch_imm_decode(evrdma__ch_imm_encode(&in),
	    &out), 0);
	ck_assert(out.type == EVRDMA_CH_LOAN && out.loan == 0x2345 &&
	    out.yield == 1 && out.dret == 0 && out.pull == 0 &&
	    out.cret == 3);
	ck_assert_int_eq(evrdma__ch_imm_decode(3u << 30 | 7u << 16, &out), 0);
	ck_assert(out.loan == 7 && !out.yield && !out.dret);
	/* PULL on a CREDIT */
	ck_assert_int_eq(evrdma__ch_imm_decode(1u << 30 | 0x40, &out), -1);
	/* an EOF with it is a RESET */
	ck_assert_int_eq(evrdma__ch_imm_decode(2u << 30 | 0x40 | 5u << 16,
	    &out), 0);
	ck_assert(out.type == EVRDMA_CH_EOF && out.reset && !out.pull &&
	    out.dret == 5);
	ck_assert_uint_eq(evrdma__ch_imm_encode(&out),
	    2u << 30 | 0x40 | 5u << 16);
	/* every other pattern decodes to what it encodes back to */
	for (v = 0; v < 1u << 16; v++) {
		uint32_t imm = (v & 0xc000u) << 16 | (v & 0x3fffu) << 8 | v;

		if (evrdma__ch_imm_decode(imm, &out) == 0)
			ck_assert_uint_eq(evrdma__ch_imm_encode(&out), imm);
	}
}
END_TEST

/* The lending rules: a yield is never more than was asked nor more than
 * the peer holds unused; reclaims leave one credit lent. */
START_TEST(wire_loan)
{
	/* one stays in hand */
	ck_assert_uint_eq(evrdma__ch_yield_amount(5, 3), 2);
	ck_assert_uint_eq(evrdma__ch_yield_amount(2, 3), 2);
	ck_assert_uint_eq(evrdma__ch_yield_amount(0, 3), 0);
	ck_assert_uint_eq(evrdma__ch_yield_amount(3, 1), 0);
	ck_assert_uint_eq(evrdma__ch_yield_amount(3, 0), 0);
	/* nothing asked: any yield is a violation */
	ck_assert(!evrdma__ch_yield_valid(0, 0, 16, 0));
	ck_assert(evrdma__ch_yield_valid(15, 15, 16, 0));
	ck_assert(evrdma__ch_yield_valid(15, 0, 16, 16));
	ck_assert(!evrdma__ch_yield_valid(15, 16, 16, 0));	/* > asked */
	ck_assert(!evrdma__ch_yield_valid(15, 14, 16, 3));	/* > unused */
	ck_assert(!evrdma__ch_yield_valid(15, 1, 2, 3));	/* bad ledger */
	/* and no short one: 16 lent, none held or returned since: the
	 * peer held them all, and gives back all it was asked */
	ck_assert(evrdma__ch_yield_enough(15, 15, 16, 0, 0));
	ck_assert(!evrdma__ch_yield_enough(15, 0, 16, 0, 0));
	ck_assert(!evrdma__ch_yield_enough(15, 14, 16, 0, 0));
	/* 5 unreturned, 3 returned since: it held at least 8, keeps one */
	ck_assert(evrdma__ch_yield_enough(15, 7, 16, 5, 3));
	ck_assert(!evrdma__ch_yield_enough(15, 6, 16, 5, 3));
	/* asked for fewer than it holds: those */
	ck_assert(evrdma__ch_yield_enough(4, 4, 16, 5, 3));
	ck_assert(!evrdma__ch_yield_enough(4, 3, 16, 5, 3));
	/* everything may be in use: nothing is owed */
	ck_assert(evrdma__ch_yield_enough(15, 0, 16, 10, 6));
	ck_assert(evrdma__ch_yield_enough(15, 0, 16, 16, 9));
	ck_assert(evrdma__ch_yield_enough(15, 0, 16, 15, 0));
	ck_assert(evrdma__ch_reclaim_valid(15, 16));
	ck_assert(!evrdma__ch_reclaim_valid(16, 16));	/* the last one */
	ck_assert(!evrdma__ch_reclaim_valid(0, 16));
	ck_assert_uint_eq(evrdma__ch_reclaim_amount(16), 15);
	ck_assert_uint_eq(evrdma__ch_reclaim_amount(1), 0);
	ck_assert_uint_eq(evrdma__ch_reclaim_amount(0), 0);
}
END_TEST

/*
 * An honest borrower is never cut off for a short yield: whatever it held
 * when it answered (from the least the lender can prove, lent less what
 * arrived unreturned less what went back since the RECLAIM, up to lent
 * less what arrived unreturned), the yield evrdma__ch_yield_amount()
 * makes of it is valid and enough. Every ledger up to 24 lent.
 */
START_TEST(wire_loan_honest)
{
	unsigned lent, unret, since, asked, held;

	for (lent = 1; lent <= 24; lent++)
	for (unret = 0; unret <= lent; unret++)
	for (since = 0; since <= lent - unret; since++)
	for (asked = 1; asked < lent || asked == 1; asked++)
	for (held = lent - unret - since; held <= lent - unret; held++) {
		unsigned y = evrdma__ch_yield_amount(asked, held);

		ck_assert_msg(evrdma__ch_yield_valid(asked, y, lent, unret) &&
		    evrdma__ch_yield_enough(asked, y, lent, unret, since),
		    "lent %u, unreturned %u, returned since %u, asked %u, "
		    "held %u: the honest yield %u refused", lent, unret,
		    since, asked, held, y);
	}
}
END_TEST

START_TEST(wire_pull)
{
	struct evrdma__ch_pull in = { 15, 65536, 0, 0, 0 }, out;
	uint8_t buf[EVRDMA_CH_PULL_DESC_LEN];
	const char *why = NULL;

	ck_assert_uint_eq(evrdma__ch_pull_encode(buf, &in),
	    EVRDMA_CH_PULL_DESC_LEN);
	ck_assert_int_eq(evrdma__ch_pull_decode(buf, sizeof(buf), 16, 65536,
	    65536, &out, &why), 0);
	ck_assert_uint_eq(out.slot, 15);
	ck_assert_uint_eq(out.len, 65536);
	ck_assert_uint_eq(out.wide, 0);
	/* wrong length of the descriptor itself (16 is a wide one) */
	ck_assert_int_eq(evrdma__ch_pull_decode(buf, 7, 16, 65536, 65536,
	    &out, &why), -1);
	ck_assert_int_eq(evrdma__ch_pull_decode(buf, 9, 16, 65536, 65536,
	    &out, &why), -1);
	ck_assert_int_eq(evrdma__ch_pull_decode(buf, 15, 16, 65536, 65536,
	    &out, &why), -1);
	ck_assert_int_eq(evrdma__ch_pull_decode(buf, 17, 16, 65536, 65536,
	    &out, &why), -1);
	/* a slot the peer's ring does not have */
	ck_assert_int_eq(evrdma__ch_pull_decode(buf, sizeof(buf), 15, 65536,
	    65536, &out, &why), -1);
	ck_assert_ptr_nonnull(why);
	/* longer than its slot, or than ours */
	ck_assert_int_eq(evrdma__ch_pull_decode(buf, sizeof(buf), 16, 65472,
	    65536, &out, &why), -1);
	ck_assert_int_eq(evrdma__ch_pull_decode(buf, sizeof(buf), 16, 65536,
	    65472, &out, &why), -1);
	in.len = 0;
	evrdma__ch_pull_encode(buf, &in);
	ck_assert_int_eq(evrdma__ch_pull_decode(buf, sizeof(buf), 16, 65536,
	    65536, &out, &why), -1);
	/* a slot index beyond 16 bits cannot wrap into range */
	in.slot = 0x10000u | 3;
	in.len = 1;
	evrdma__ch_pull_encode(buf, &in);
	ck_assert_int_eq(evrdma__ch_pull_decode(buf, sizeof(buf), 16, 65536,
	    65536, &out, &why), -1);
}
END_TEST

/* A wide pull (the sender's spill): any address and rkey, the length
 * within our buffer, and a range that does not wrap. */
START_TEST(wire_pull_wide)
{
	struct evrdma__ch_pull in, out;
	uint8_t buf[EVRDMA_CH_PULL_WIDE_LEN];
	const char *why = NULL;

	memset(&in, 0, sizeof(in));
	in.wide = 1;
	in.addr = 0x0123456789abcdefull;
	in.rkey = 0xfedcba98u;
	in.len = 65536;
	ck_assert_uint_eq(evrdma__ch_pull_encode(buf, &in),
	    EVRDMA_CH_PULL_WIDE_LEN);
	/* (the ring's limits do not apply: 2 slots of 64 bytes) */
	ck_assert_int_eq(evrdma__ch_pull_decode(buf, sizeof(buf), 2, 64,
	    65536, &out, &why), 0);
	ck_assert_uint_eq(out.wide, 1);
	ck_assert_uint_eq(out.addr, in.addr);
	ck_assert_uint_eq(out.rkey, in.rkey);
	ck_assert_uint_eq(out.len, 65536);
	/* longer than our buffer */
	ck_assert_int_eq(evrdma__ch_pull_decode(buf, sizeof(buf), 2, 64,
	    65472, &out, &why), -1);
	ck_assert_ptr_nonnull(why);
	/* empty */
	in.len = 0;
	evrdma__ch_pull_encode(buf, &in);
	ck_assert_int_eq(evrdma__ch_pull_decode(buf, sizeof(buf), 2, 64,
	    65536, &out, &why), -1);
	/* a range that wraps the address space */
	in.len = 4096;
	in.addr = UINT64_MAX - 4095;
	evrdma__ch_pull_encode(buf, &in);
	ck_assert_int_eq(evrdma__ch_pull_decode(buf, sizeof(buf), 2, 64,
	    65536, &out, &why), -1);
	in.addr = UINT64_MAX - 4096;
	evrdma__ch_pull_encode(buf, &in);
	ck_assert_int_eq(evrdma__ch_pull_decode(buf, sizeof(buf), 2, 64,
	    65536, &out, &why), 0);
}
END_TEST

/* ---- credit rules ---- */

START_TEST(wire_credits)
{
	/* the receiver: R data and C control messages unreturned at most */
	ck_assert(evrdma__ch_data_allowed(15, 16));
	ck_assert(!evrdma__ch_data_allowed(16, 16));
	ck_assert(evrdma__ch_ctrl_allowed(3, 4));
	ck_assert(!evrdma__ch_ctrl_allowed(4, 4));
	/* the sender: returns never beyond what was granted, no overflow */
	ck_assert(evrdma__ch_return_valid(0, 16, 16));
	ck_assert(evrdma__ch_return_valid(10, 6, 16));
	ck_assert(!evrdma__ch_return_valid(10, 7, 16));
	ck_assert(!evrdma__ch_return_valid(16, 1, 16));
	ck_assert(!evrdma__ch_return_valid(0, 0x3fff, 16));
	ck_assert(!evrdma__ch_return_valid(1, 0xffffffffu, 16));
	/* receives cover everything the peer may send after a return */
	ck_assert(evrdma__ch_recvs_cover(20, 16, 4, 0, 0, 0));
	ck_assert(!evrdma__ch_recvs_cover(19, 16, 4, 0, 0, 0));
	ck_assert(evrdma__ch_recvs_cover(15, 16, 4, 3, 1, 1));
	ck_assert(!evrdma__ch_recvs_cover(14, 16, 4, 3, 1, 1));
	ck_assert(evrdma__ch_can_send(1));
	ck_assert(!evrdma__ch_can_send(0));
}
END_TEST

START_TEST(wire_credit_due)
{
	/* a quarter of the ring of data credits; one when starved */
	ck_assert(!evrdma__ch_credit_due(3, 0, 0, 0, 16, 4, 0));
	ck_assert(evrdma__ch_credit_due(4, 0, 0, 0, 16, 4, 0));
	ck_assert(evrdma__ch_credit_due(1, 0, 0, 0, 16, 4, 1));
	/* a lone CREDIT is never answered by one (they would be traded for
	 * ever), whatever C */
	ck_assert(!evrdma__ch_credit_due(0, 1, 0, 0, 16, 2, 0));
	ck_assert(!evrdma__ch_credit_due(0, 1, 0, 0, 16, 4, 0));
	ck_assert(evrdma__ch_credit_due(0, 2, 0, 0, 16, 4, 0));
	ck_assert(!evrdma__ch_credit_due(0, 2, 0, 0, 16, 255, 0));
	ck_assert(evrdma__ch_credit_due(0, 127, 0, 0, 16, 255, 0));
	/* pulls done: a quarter of the ring, at most 63; when starved, once
	 * all are done */
	ck_assert(evrdma__ch_credit_due(0, 0, 4, 1, 16, 4, 0));
	ck_assert(!evrdma__ch_credit_due(0, 0, 3, 0, 16, 4, 0));
	ck_assert(evrdma__ch_credit_due(0, 0, 63, 1, 4096, 4, 0));
	ck_assert(!evrdma__ch_credit_due(0, 0, 1, 1, 16, 4, 1));
	ck_assert(evrdma__ch_credit_due(0, 0, 1, 0, 16, 4, 1));
	/* nothing owed: nothing due, starved or not */
	ck_assert(!evrdma__ch_credit_due(0, 0, 0, 0, 16, 4, 1));
	ck_assert(!evrdma__ch_credit_due(0, 0, 0, 1, 2, 2, 1));
}
END_TEST

/* ---- the FNV check value (fixed: it is part of the wire format) ---- */

START_TEST(wire_fnv)
{
	ck_assert_uint_eq(evrdma__fnv1a((const uint8_t *)"", 0), 2166136261u);
	ck_assert_uint_eq(evrdma__fnv1a((const uint8_t *)"a", 1), 0xe40c292cu);
	ck_assert_uint_eq(evrdma__fnv1a((const uint8_t *)"foobar", 6),
	    0xbf9cf968u);
}
END_TEST

static Suite *
wire_suite(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = tcase_create("codec");

	tcase_add_test(tc, wire_hs_roundtrip);
	tcase_add_test(tc, wire_hs_refused);
	tcase_add_test(tc, wire_ch_hs_roundtrip);
	tcase_add_test(tc, wire_ch_hs_lend);
	tcase_add_test(tc, wire_ch_hs_truncated);
	tcase_add_test(tc, wire_ch_hs_fields);
	tcase_add_test(tc, wire_imm);
	tcase_add_test(tc, wire_loan);
	tcase_add_test(tc, wire_loan_honest);
	tcase_add_test(tc, wire_pull);
	tcase_add_test(tc, wire_pull_wide);
	tcase_add_test(tc, wire_credits);
	tcase_add_test(tc, wire_credit_due);
	tcase_add_test(tc, wire_fnv);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(wire_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
