/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the wire formats, as typed structs with pure encode / decode /
 * validate functions, and the channel's credit rules as named predicates.
 * No I/O and no state: everything here is unit-tested on the host and
 * fuzzed (tests/fuzz/). Never installed.
 *
 * Layouts: the evrdma connection handshake below; the channel protocol in
 * doc/channel-protocol.md. All multi-byte fields are big-endian.
 */
#ifndef EVRDMA_WIRE_H_INCLUDED_
#define EVRDMA_WIRE_H_INCLUDED_

#include <stddef.h>
#include <stdint.h>

/* ---- the evrdma connection handshake (rdma_cm private data) ---- */

/*
 * 8 bytes at the start of the private data of every non-raw connect
 * request, accept reply and reject: magic "EVR", version, type, flags (2),
 * and a code: the length of the user private data that follows (connect,
 * accept) or the reject code. rdma_cm pads private data to its maximum,
 * so that length is what tells the data from the padding.
 */
#define EVRDMA_HS_LEN		8
#define EVRDMA_HS_VERSION	1
#define EVRDMA_PDATA_CONNECT_MAX 56	/* rdma_connect(3), RDMA_PS_TCP */
#define EVRDMA_PDATA_ACCEPT_MAX	196	/* rdma_accept(3), RDMA_PS_TCP */

enum evrdma__hs_type {
	EVRDMA_HS_CONNECT = 1,
	EVRDMA_HS_ACCEPT = 2,
	EVRDMA_HS_REJECT = 3
};

struct evrdma__hs {
	uint8_t version;
	uint8_t type;		/* enum evrdma__hs_type */
	uint16_t flags;		/* feature bits, for later protocols */
	uint8_t code;		/* user data length, or reject code */
};

void evrdma__hs_encode(uint8_t out[EVRDMA_HS_LEN], const struct evrdma__hs *hs);
/* 0 when @p buf starts with an evrdma handshake (of any version: the
 * caller rejects unsupported ones by name), -1 when it does not. */
int evrdma__hs_decode(const uint8_t *buf, size_t len, struct evrdma__hs *hs);

/*
 * The user private data after a handshake of @p type in @p buf (@p len
 * bytes, padding included): 0 with *data / *data_len set, or -1 when the
 * handshake is missing, of another type, or claims more data than came.
 * *version_bad is set when only the version is wrong.
 */
int evrdma__hs_payload(const uint8_t *buf, size_t len, int type,
    const uint8_t **data, size_t *data_len, int *version_bad);

/* ---- the channel protocol, version 4 ---- */

#define EVRDMA_CH_VERSION	4
#define EVRDMA_CH_HS_LEN	32
#define EVRDMA_CH_SLOTS_MIN	2
#define EVRDMA_CH_SLOTS_MAX	4096
#define EVRDMA_CH_SLOT_MIN	64
#define EVRDMA_CH_SLOT_MAX	(4u << 20)
#define EVRDMA_CH_CTRL_MIN	2	/* see evrdma__ch_credit_due() */
#define EVRDMA_CH_CTRL_MAX	255
#define EVRDMA_CH_PULL_DESC_LEN	8
/* a pull from the sender's spill: address, rkey, length */
#define EVRDMA_CH_PULL_WIDE_LEN	16
#define EVRDMA_CH_HS_LEND	0x80	/* the mode byte's LEND bit */
/* a lending side's peer starts with no data credit: the lender grants
 * the first once the connection is established and the pool has
 * committed it (a half-made connection commits nothing) */
#define EVRDMA_CH_LEND_INITIAL	0

/* What one side tells the other about itself (connect request and accept
 * reply alike). */
struct evrdma__ch_hs {
	uint8_t mode;		/* 0 stream, 1 message */
	uint8_t lend;		/* its receives are a pool shared with other
				 * channels: the peer starts with
				 * EVRDMA_CH_LEND_INITIAL data credits, not R,
				 * and is lent more (up to R) as returns */
	uint16_t slots;		/* R: data messages it lets the peer have
				 * unreturned, and the slots of its send ring */
	uint8_t ctrl;		/* C: control messages likewise */
	uint32_t slot_size;	/* S: the largest message it receives, and
				 * the slot size of its send ring */
	uint32_t pull_min;	/* it pulls DATA of at least this size (0:
				 * never) */
	uint32_t src_rkey;	/* its send ring may be pulled from with this
				 * rkey (0: may not) */
	uint64_t src_base;	/* ... at these addresses: [base, base+R*S) */
};

enum evrdma__ch_hs_err {
	EVRDMA_CH_HS_OK = 0,
	EVRDMA_CH_HS_SHORT,	/* truncated or not a channel handshake */
	EVRDMA_CH_HS_VERSION,	/* another protocol version */
	EVRDMA_CH_HS_CHECK,	/* the check value does not match */
	EVRDMA_CH_HS_RANGE	/* a field out of its range */
};

void evrdma__ch_hs_encode(uint8_t out[EVRDMA_CH_HS_LEN],
    const struct evrdma__ch_hs *hs);
/* An enum evrdma__ch_hs_err; *hs is filled only on EVRDMA_CH_HS_OK. */
int evrdma__ch_hs_decode(const uint8_t *buf, size_t len,
    struct evrdma__ch_hs *hs);
const char *evrdma__ch_hs_strerror(int err);

/*
 * Immediate data of every channel message (a SEND WITH IMMEDIATE):
 * type (2 bits), data credits returned (14), control credits returned (8),
 * STARVED (1), PULL (1), pulls done (6). A LOAN message carries in the
 * 14 bits the credits it reclaims or yields instead of returns, and in
 * the PULL bit which of the two it is (YIELD); an EOF in the PULL bit
 * whether it is a RESET (the sender was freed with bytes it never read).
 */
enum evrdma__ch_type {
	EVRDMA_CH_DATA = 0,
	EVRDMA_CH_CREDIT = 1,
	EVRDMA_CH_EOF = 2,
	EVRDMA_CH_LOAN = 3	/* RECLAIM (lender) or YIELD (borrower) */
};
#define EVRDMA_CH_DRET_MAX	0x3fffu
#define EVRDMA_CH_CRET_MAX	0xffu
#define EVRDMA_CH_PDONE_MAX	0x3fu

struct evrdma__ch_imm {
	uint8_t type;		/* enum evrdma__ch_type */
	uint16_t dret;		/* data credits returned */
	uint8_t cret;		/* control credits returned */
	uint8_t starved;	/* the sender waits for credits or pulls */
	uint8_t pull;		/* DATA: a pull descriptor, not the bytes */
	uint8_t pdone;		/* pulls of the receiver's messages done */
	uint8_t reset;		/* EOF: a RESET, not an orderly end */
	/* LOAN only (dret is then 0): */
	uint8_t yield;		/* 1: YIELD, the borrower gives back @p loan
				 * data credits; 0: RECLAIM, the lender asks
				 * for up to @p loan of those it lent */
	uint16_t loan;
};

uint32_t evrdma__ch_imm_encode(const struct evrdma__ch_imm *m);
/* 0, or -1 for PULL on CREDIT. */
int evrdma__ch_imm_decode(uint32_t imm, struct evrdma__ch_imm *m);

/* A pull: which slot of the sender's send ring holds the message, and
 * how long it is; or (wide) where in the sender's spill it is: the
 * address and rkey of memory the sender registered for its peer. */
struct evrdma__ch_pull {
	uint32_t slot;		/* (not wide) */
	uint32_t len;
	uint64_t addr;		/* (wide) */
	uint32_t rkey;		/* (wide) */
	uint8_t wide;
};

/* Write the descriptor of @p p (its ->wide says which) at @p out: its length,
 * EVRDMA_CH_PULL_DESC_LEN or EVRDMA_CH_PULL_WIDE_LEN. */
size_t evrdma__ch_pull_encode(uint8_t *out,
    const struct evrdma__ch_pull *p);
/*
 * Decode and check a pull descriptor of @p len bytes: a slot of the
 * peer's send ring (@p peer_slots slots of @p peer_slot_size), or a wide
 * one (any address and rkey: they name the peer's own memory, and a
 * wrong one only fails the READ). Either must fit our receive buffer
 * (@p our_slot_size): 0, or -1 with *why naming the violation.
 */
int evrdma__ch_pull_decode(const uint8_t *buf, size_t len,
    unsigned peer_slots, uint32_t peer_slot_size, uint32_t our_slot_size,
    struct evrdma__ch_pull *p, const char **why);

/*
 * The credit rules. A sender holds data and control credits; a receiver
 * counts what arrived and has not been returned. All pure.
 */

/* Receiver: one more DATA may arrive while fewer than R are unreturned
 * (@p unreturned: held in buffers plus freed but not yet returned). */
static inline int
evrdma__ch_data_allowed(unsigned unreturned, unsigned slots)
{
	return unreturned < slots;
}

/* Receiver: one more CREDIT/EOF may arrive while fewer than C are
 * unreturned. */
static inline int
evrdma__ch_ctrl_allowed(unsigned unreturned, unsigned ctrl)
{
	return unreturned < ctrl;
}

/* Sender: a return of @p ret credits is honest when it brings the credits
 * in hand to at most what was granted. */
static inline int
evrdma__ch_return_valid(unsigned in_hand, unsigned ret, unsigned granted)
{
	return ret <= granted && in_hand <= granted - ret;
}

/*
 * Receiver: with @p posted receives, can the peer send everything its
 * credits allow once we have returned what we return? It may then have
 * R - (held + data still owed) data and C - (control still owed) control
 * messages on the way, each needing a receive. (Credits we have not
 * returned yet are not the peer's to use.)
 */
static inline int
evrdma__ch_recvs_cover(unsigned posted, unsigned slots, unsigned ctrl,
    unsigned held, unsigned data_owed, unsigned ctrl_owed)
{
	return (unsigned long)posted + held + data_owed + ctrl_owed >=
	    (unsigned long)slots + ctrl;
}

/*
 * Lending (a side on a shared pool, doc/channel-protocol.md). The lender
 * asks for credits back (RECLAIM) from a peer that did not use them for a
 * while, or when the pool needs them for another channel; it never asks
 * for the last one. The borrower answers every RECLAIM with one YIELD of
 * the credits it holds unused, at most what was asked.
 */
/* Borrower: how many to yield. It keeps one credit in hand whatever was
 * asked: the credit the lender leaves it may be in a buffer the lender's
 * application holds, and with none in hand it could neither send nor say
 * it is starved (seen: a reader slower than the pool's tick). */
static inline unsigned
evrdma__ch_yield_amount(unsigned asked, unsigned in_hand)
{
	unsigned spare = in_hand ? in_hand - 1 : 0;

	return asked < spare ? asked : spare;
}

/* Lender: a YIELD of @p yielded is honest when a RECLAIM of @p asked is
 * outstanding and the peer can hold that many unused: @p lent less what
 * arrived and was not returned yet (@p unreturned). */
static inline int
evrdma__ch_yield_valid(unsigned asked, unsigned yielded, unsigned lent,
    unsigned unreturned)
{
	return asked && yielded <= asked && unreturned <= lent &&
	    yielded <= lent - unreturned;
}

/*
 * Lender: and it gave back no less than evrdma__ch_yield_amount() makes
 * of the least the peer can have held when it yielded. Every message it
 * sent before the YIELD has arrived, so it held at least @p lent less
 * @p unreturned less the credits returned since the RECLAIM went
 * (@p returned_since: those it may not have seen yet; the ones before
 * came ahead of the RECLAIM). A yield short of that keeps credits the
 * peer does not use, against the pool's reclaim (found by review: a
 * peer answering every RECLAIM with a YIELD of 0 kept its share).
 */
static inline int
evrdma__ch_yield_enough(unsigned asked, unsigned yielded, unsigned lent,
    unsigned unreturned, unsigned returned_since)
{
	unsigned long used = (unsigned long)unreturned + returned_since;

	return used >= lent ||
	    yielded >= evrdma__ch_yield_amount(asked, lent - (unsigned)used);
}

/* Borrower: a RECLAIM of @p asked is honest when it leaves at least one
 * of the @p granted (the lender's R) lent. */
static inline int
evrdma__ch_reclaim_valid(unsigned asked, unsigned granted)
{
	return asked >= 1 && asked < granted;
}

/* Lender: what to reclaim from a peer that has @p lent: all but one. */
static inline unsigned
evrdma__ch_reclaim_amount(unsigned lent)
{
	return lent > 1 ? lent - 1 : 0;
}

/* Sender: a DATA message may be sent. */
static inline int
evrdma__ch_can_send(unsigned data_credits)
{
	return data_credits > 0;
}

/* A quarter of a ring of @p slots, at least one: the batch in which a
 * receiver returns credits and pulls done, and what a sender lets it pull
 * at once (twice that while the sender is behind). */
static inline unsigned
evrdma__ch_quarter(unsigned slots)
{
	return slots / 4 ? slots / 4 : 1;
}

/*
 * Receiver: a CREDIT message is due (returns that would otherwise wait for
 * our next DATA): a quarter of the ring of data credits (one when the peer
 * said STARVED), half the control credits but at least two (a lone CREDIT
 * must not be answered by a CREDIT, or two sides would trade them for
 * ever), a quarter of the ring of pulls done, or, when the peer said
 * STARVED, every pull it waits for once all are done.
 */
static inline int
evrdma__ch_credit_due(unsigned data_owed, unsigned ctrl_owed,
    unsigned pulls_owed, int pulls_pending, unsigned slots, unsigned ctrl,
    int peer_starved)
{
	unsigned q = evrdma__ch_quarter(slots);
	unsigned c = ctrl / 2 > 2 ? ctrl / 2 : 2;

	/* nothing owed, nothing due: most passes of a stream or a
	 * ping-pong, whose DATA carried the returns (the test first spares
	 * them the rest: 15 instructions per 64 B round trip, callgrind) */
	if (!(data_owed | ctrl_owed | pulls_owed))
		return 0;
	if (peer_starved && data_owed)
		return 1;
	if (peer_starved && pulls_owed && !pulls_pending)
		return 1;
	return data_owed >= q || ctrl_owed >= c ||
	    pulls_owed >= (q < EVRDMA_CH_PDONE_MAX ? q : EVRDMA_CH_PDONE_MAX);
}

/* A 32-bit FNV-1a of @p len bytes: the handshake's check value. */
uint32_t evrdma__fnv1a(const uint8_t *p, size_t len);

#endif /* EVRDMA_WIRE_H_INCLUDED_ */
