/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel's RDMA transport, private: its objects and what its
 * files call of each other. A channel (chan.h) whose bytes move as SENDs
 * with immediate between two rings, by the protocol of
 * doc/channel-protocol.md, whose pure rules are lib/wire.h. rc_ is "RDMA
 * channel": struct ch_rdma, the transport's object. The files, each
 * calling only those listed before it (tools/check-layering):
 *   chan_ring.c    ring memory and its send slots
 *   chan_warm.c    warm sets: ended channels' domains and rings, cached
 *   chan_end.c     the end: violations, our own failures, the linger
 *   chan_pool.c    a queue's receive pool, and lending
 *   chan_spill.c   registered memory for large writes beyond the slots
 *   chan_rx.c      receives, delivery and pulls
 *   chan_tx.c      send slots, writes, credit returns and loans
 *   chan_rdma.c    the channel object, its pass, the owner ops, close
 *   chan_listen.c  the listener's side
 * The semantics (watermarks, callbacks, the end of the stream) are chan.c.
 */
#ifndef EVRDMA_CHAN_RDMA_H_INCLUDED_
#define EVRDMA_CHAN_RDMA_H_INCLUDED_

#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "chan.h"
#include <evrdma/srq.h>

/* spare receives beyond R + C: credits can go back before the pass has
 * reposted what it consumed (the refill waits until after the sends) */
#define SPARE_RECVS	4
/* messages under this size are copied into input; writes from this size
 * on (and any write into an empty output) are copied straight into a send
 * slot */
#define STAGE_MIN	1024
/* credits still owed after this long without an arrival go back (rc_pass) */
#define RET_IDLE_MS	20

/* control receives of a channel on a ring of its own (R + C) */
#define RC_CTRL		4
/* How many DATA messages may wait for a later send's completion
 * (unsignaled, evrdma__sq_flush()): a slot is reused only when its send
 * completed, so half the slots at most, and the other half keeps output
 * moving. */
#define RC_DEFER(rc)	((rc)->slots / 2)

/* The kinds of the channel's own work requests (their wr_id, rings.c). */
enum { RC_WR_RECV = 0, RC_WR_SEND = 1 };
/* What a send ring entry carried (rc->sq.what): a send slot's index, a
 * spill chunk's (RC_SPILL_TAG), or a control message */
#define RC_SQ_CTRL	0x40000000u
#define RC_SQ_CREDIT	(RC_SQ_CTRL | 0)	/* CREDIT or LOAN */
#define RC_SQ_EOF	(RC_SQ_CTRL | 1)
#define RC_SQ_RESET	(RC_SQ_CTRL | 2)	/* our failure's RESET */
#define RC_SQ_DRAIN	(RC_SQ_CTRL | 3)	/* teardown's last, signaled */
/* after the send slots: a pull descriptor for each */
#define RC_SRING_EXTRA(slots)	((size_t)(slots) * EVRDMA_CH_PULL_DESC_LEN)

/* receive buffers */
enum { RB_FREE, RB_POSTED, RB_READY, RB_PULL, RB_PULLING, RB_LOST };

/* send slots */
enum { SLOT_FREE, SLOT_STAGED, SLOT_POSTED, SLOT_RESERVED, SLOT_OPEN };
#define SF_PULL		0x01	/* posted as a pull */
#define SF_SENT		0x02	/* its send completed */
#define SF_PULLED	0x04	/* the peer reported the pull done */

/* spill chunks (chan_spill.c): at most this many bytes of them per
 * channel, as much as a socket's largest default send buffer twice over,
 * and of all channels of a base (peers that stop reading must not make a
 * server pin 8 MiB for each of them) */
#define RC_SPILL_MAX	(8u << 20)
#define RC_SPILL_BASE_MAX	((size_t)64 << 20)
/* ... in chunks of the peer's slot size, of at least a page: each chunk is
 * a region of its own, whole pages with its descriptor, so a chunk pins at
 * most twice what the limits count (8 MiB of 4 KiB chunks, 2,048 regions);
 * smaller ones would pin up to 64 times as much, a region per 64 bytes at
 * the least slot size a peer may offer (found by review), and such
 * messages cost less copied twice than registered. The system's page, not
 * 4 KiB: with 64 KiB pages 4 KiB chunks pinned 16 times what was counted
 * (found by review) */
#define RC_SPILL_CHUNK_MIN	((size_t)sysconf(_SC_PAGESIZE))
/* ... used for a write's rest of this many chunks or more */
#define RC_SPILL_MIN(rc)	((rc)->slots / 4 > 2 ? (rc)->slots / 4 : 2)
enum { SPILL_FREE, SPILL_STAGED, SPILL_POSTED };
/* a posted message's entry in sfifo: a spill chunk's index, tagged */
#define RC_SPILL_TAG	0x80000000u
struct ch_spill {
	struct ch_ring *ring;		/* one slot, and its wide pull
					 * descriptor after it */
	struct evrdma_mr *mr;		/* the peer may read it where it
					 * pulls, else local access only */
	uint8_t state;
	uint8_t flags;			/* SF_*, as a send slot's */
};

struct ch_rdma;

/* Memory of a ring, kept while evbuffer references into it live (the
 * user may move them anywhere). */
struct ch_ring {
	struct ch_rdma *owner;		/* NULL once the channel is gone, and
					 * for a pool's ring (below) */
	struct evrdma__chpool *pool;	/* a pool's ring, until the pool goes */
	uint8_t *mem;
	size_t len;
	unsigned refs;			/* references + 1 for the channel */
	struct ch_slotref {
		struct ch_ring *ring;
		unsigned idx;
	} *slot;
};

/*
 * A receive buffer. Its counters are bounded by construction, whatever
 * the peer sends and however finely the application reads:
 *  - refs: every reference put into input covers at least one byte of
 *    [off, len) that no other reference covers (off moves past it), so
 *    refs <= len <= slot_size <= EVRDMA_CH_SLOT_MAX (4 MiB): it fits its
 *    32 bits. (It was 16 bits, and a reader taking one byte at a time
 *    under a read high watermark above max_input wrapped it at 65,536:
 *    the buffer went back to the peer, or to another channel of a pool,
 *    while input still pointed into it.)
 *  - the channel's refs_held counts buffers whose refs went 0 -> 1 and
 *    not yet back, so it is at most nbuf; a pool's orphans count its
 *    buffers with refs left and no channel, at most its nbuf; its free
 *    stack holds each buffer at most once (evrdma__pool_free() refuses a free
 *    one), so at most nbuf.
 * A release that finds refs already 0, or a buffer already free, is an
 * impossible state: it ends that connection (EVRDMA_REASON_INTERNAL) and
 * frees nothing twice.
 */
struct ch_rbuf {
	uint32_t len;			/* the message's bytes */
	uint32_t off;			/* of which already in input */
	uint32_t pslot;			/* a pull: the peer's send slot, or
					 * RB_WIDE: at paddr (prkey) */
	uint32_t refs;			/* input references into it */
	uint8_t state;			/* RB_* */
	uint8_t queued;			/* in rxq: not all in input yet */
	uint32_t prkey;			/* a wide pull: the peer's spill */
	uint64_t paddr;
};
#define RB_WIDE		UINT32_MAX

/*
 * A channel's state, one word (ch_rdma.st), so that the pass and the
 * message's path ask "is anything but connected?" in one test (RC_UP,
 * rc_up()). The first bits are where the channel stands; the last ones
 * what the next pass owes, cleared by it.
 */
#define RC_EST		0x001	/* the user has it, connected */
#define RC_ENDED	0x002	/* the connection ended */
#define RC_CLOSING	0x004	/* the user freed the channel */
#define RC_CONN_FREED	0x008	/* evrdma_conn_free() done */
#define RC_FAILING	0x010	/* evrdma__rc_fail(): its RESET is on its
				 * way (fail_reason says why) */
#define RC_VIOLATED	0x020	/* the peer broke the protocol */
#define RC_RESET_DUE	0x040	/* freed with bytes it never read: the
				 * end is a RESET, not an EOF */
#define RC_PRE_SEND	0x080	/* inside the pass's read callbacks */
#define RC_AGAIN	0x100	/* ... which asked for another pass */
#define RC_FLUSH_SENT	0x200	/* a flush sent bytes: the next pass
				 * owes the write callback */
#define RC_RESV_WANTED	0x400	/* a reserve failed (EAGAIN): a free
				 * slot is owed the write callback */
#define RC_IN_SEND	0x800	/* inside evrdma__rc_send_all(): see there */
#define RC_RESET_WENT	0x1000	/* our failure's RESET was sent: abort */
/* of these, only RC_EST: data may be sent (rc_up()) */
#define RC_UP_MASK	(RC_EST | RC_ENDED | RC_CONN_FREED | RC_FAILING)
/* what the pass's end looks at beyond the steady state (rc_pass_rare(),
 * besides the channel's end flags) */
#define RC_PASS_RARE	(RC_ENDED | RC_FLUSH_SENT | RC_RESV_WANTED | \
			 RC_RESET_WENT)

/*
 * The transport's state is in parts, each written by one file alone
 * (tools/check-owners): the receive ring (rx, chan_rx.c), credits and
 * control messages (cr, chan_ctl.c), the send slots and writes (tx,
 * chan_tx.c), the send ring of work requests (sq, chan_sq.c), the spill
 * (sp, chan_spill.c), its place in a queue's pool (pm, chan_pool.c) and
 * its end (end, chan_end.c). Another file changes a part through its
 * owner's functions (those of the owner's header included). The rest is
 * chan_rdma.c's: the state word, the connection, and what the handshake
 * set.
 */

/* the receive ring: buffers of slot_size, local write only (rx) */
struct rc_rx {
	struct ch_ring *ring;		/* a pool's, on a queue */
	struct evrdma_mr *mr;
	struct ch_rbuf *rb;
	unsigned *free, nfree;		/* stack of free buffers */
	unsigned *q;			/* arrived DATA in order (ring) */
	struct evrdma__chan_piece *pieces;	/* a pass's batch of them */
	const struct evrdma__chan_batch *batch;	/* while it is delivered */
	uint64_t head, tail, pull;	/* pull: next READ */
	unsigned posted;		/* receives posted */
	unsigned held;			/* DATA arrived, buffer not free */
	unsigned refs_held;		/* buffers input references */
	unsigned pull_wait, pull_out;
	int lost;			/* a pull could not be done */
	/* its work requests, one per buffer, made once */
	struct ibv_recv_wr *wr;
	struct ibv_sge *sge;
	unsigned long long bytes, msgs, pulls;	/* what it carried */
};

/* the peer's credits in hand, ours owed, and the control messages (cr) */
struct rc_cr {
	unsigned s, c;			/* the peer's data and control
					 * credits, in hand */
	unsigned ret_data, ret_ctrl, ret_pull;	/* owed to the peer */
	int peer_starved;
	uint8_t eof_sent, eof_done;
	uint8_t grant_due;		/* joined a pool: the first credit
					 * goes now */
	/* credits owed after an idle moment: returned then, so that a peer
	 * that ends knows we consumed its bytes (own_ended()) */
	struct event *ret_ev;
	uint64_t ret_mark;		/* rx.tail when it was armed */
	uint8_t ret_armed, ret_idle;
	unsigned yield_asked;		/* the peer's RECLAIM to answer */
};

/* the send slots, then a pull descriptor for each; writes into them (tx) */
struct rc_tx {
	struct ch_ring *ring;
	struct evrdma_mr *mr;
	uint8_t *state, *flags;		/* SLOT_*, SF_* */
	unsigned *pq, pq_head, pq_n;	/* pulls not reported done */
	unsigned next, nfree;
	/* what it carried (evrdma_channel_get_stats()) */
	unsigned long long bytes, msgs, pulls, stalls, stall_us;
	uint64_t stall_t0;		/* output waits for credits since */
};

/* the application's writes straight into slots: the read callbacks' open
 * write, a reservation (wr) */
struct rc_wr {
	int resv;			/* reserved slot, or -1 */
	size_t resv_len;
	size_t resv_max;		/* the most it was reserved for */
	int wopen;			/* slot of the open write, or -1 */
	size_t wopen_len;
};

/*
 * The send ring (sq): a work request per send queue entry, made once; a
 * message sets its buffer, length, immediate and flags, joins the pass's
 * chain, and one ibv_post_send() a pass posts the chain. Sends complete
 * in order, so a completion (every 16th is signaled, and the last of a
 * pass unless it may wait) is that of every entry before it: the entries
 * from done on are outstanding, out of them, and chained of those not
 * posted yet. DATA messages among them: data (at most slots).
 */
struct rc_sq {
	struct ibv_send_wr *wr;
	struct ibv_sge *sge;
	uint32_t *what;			/* RC_SQ_* or a slot */
	unsigned n, pos, done, out, chained, data;
	unsigned unsig;			/* since the last signaled */
	uint8_t firm;			/* one of them must not wait */
	struct ibv_send_wr *head, *tail;
	unsigned max_inline;
};

/* the spill: chunks of large writes beyond the free slots (sp) */
struct rc_sp {
	struct ch_spill *c;
	unsigned n, cap, next;
	unsigned busy;			/* chunks staged or in flight */
};

/* receives from a queue's pool instead (rx.rb and rx.ring are the pool's;
 * rx.nfree and rx.posted stay 0) (pm) */
struct rc_pm {
	struct evrdma__chpool *pool;
	struct evrdma_srq *srq;		/* its queue, a reference */
	int joined;			/* committed: on pool->chans */
	LIST_ENTRY(ch_rdma) link;
	unsigned long drain_mark;	/* the CQ's emptied count at the end */
	unsigned withheld;		/* of our R, credits not lent */
	unsigned long long rx_mark;	/* rx.msgs at the pool's last tick */
	unsigned idle_ticks;		/* pool ticks without a message, */
	unsigned long long act_mark;	/* ... messages at the last tick */
	unsigned reclaim_want;		/* a RECLAIM to send, of this many */
	unsigned reclaim_out;		/* sent: its YIELD is due */
	unsigned reclaim_ret;		/* data credits returned since */
	unsigned reclaim_ticks;		/* ticks since it was wanted */
};

/* the end: our failure, the linger (end) */
struct rc_end {
	int fail_reason;		/* with RC_FAILING: why */
	struct event *linger_ev;
	size_t linger_left;	/* output at the linger's start or last tick */
	struct evrdma__linger lg;	/* the base's bound on the linger */
};

struct ch_rdma {
	struct evrdma_channel ch;	/* first */
	struct evrdma_conn *conn;	/* until closed() */
	unsigned st;			/* RC_*: where it stands, and what
					 * the next pass owes */
	int passive;
	struct evrdma__work pump_work;
	/* the rings' tag (rings.c): their completions come to
	 * rc_ring_received() and rc_ring_sent() */
	uint64_t tag;
	/* a warm set taken for the QP, until rc_setup() adopts its rings
	 * (chan_warm.h) */
	struct evrdma__warm *warm;

	/* ours */
	unsigned slots, ctrl, spare, nbuf;
	uint32_t slot_size;
	size_t max_input;
	uint32_t pull_min;		/* we pull DATA of this size on */
	unsigned pull_cap;		/* READs the send queue has room for */
	int src_remote;			/* tx.mr is readable by the peer */

	/* the peer's */
	unsigned peer_slots, peer_ctrl;
	uint32_t peer_slot_size, peer_pull_min;
	struct evrdma_remote peer_src;	/* its send ring, if we pull */
	int pullable;			/* the peer pulls, and may */
	/* the peer lends (LEND in its handshake): its RECLAIM to answer */
	uint8_t peer_lends;
	unsigned long long ka_probes;	/* its connection's, once gone */

	struct rc_rx rx;
	struct rc_cr cr;
	struct rc_tx tx;
	struct rc_wr wr;
	struct rc_sq sq;
	struct rc_sp sp;
	struct rc_pm pm;
	struct rc_end end;
};

/*
 * A channel queue's receive pool (evrdma_channel_srq_new): buffers of one
 * slot size posted to the SRQ; a SEND of any channel on the queue lands in
 * the next one, and the buffer is then that channel's until the bytes are
 * consumed, as with a ring of its own.
 *
 * Credits are what keeps one channel's peer from taking another's
 * buffers (doc/channel-protocol.md, "Lending"):
 *  - A channel on the pool announces LEND; its peer starts with no data
 *    credit. Nothing is committed for a connection before it is
 *    established (a stranger that never completes its handshake takes
 *    nothing); then the channel joins (evrdma__rc_pool_join()): its control
 *    credits and one data credit are committed, and that credit is
 *    granted to the peer.
 *  - When the peer says it is starved the channel lends more (up to its
 *    R) while the pool has buffers no other channel was promised, toward
 *    an even share; a channel over its share keeps the credits its peer's
 *    data frees (one at least stays lent).
 *  - Lent credits come back from a peer that does not use them: the
 *    pool's tick (POOL_TICK_MS) asks every peer that sent no DATA for a
 *    whole tick for all but one (RECLAIM), as it asks those over their
 *    share when the pool runs out for another channel; the peer answers
 *    with a YIELD of what it holds unused, and one that does not answer
 *    within POOL_RECLAIM_TICKS is cut off (a protocol violation).
 *  - committed counts every data credit lent; it never exceeds the
 *    buffers less a reserve, so the pool backs every data credit (the
 *    buffers of a gone channel that the application still references,
 *    orphans, count against it too). Control credits have no buffers of
 *    their own: a control message holds its buffer only until the poll
 *    that takes it, so they draw on the buffers nobody was promised and
 *    the reserve, and a moment when many arrive together makes others'
 *    messages meet an RNR, which they retry (below). Committed, they
 *    made an idle channel cost three buffers, and a pool of N admit N/3
 *    channels (review r47).
 *  - When the pool has no room for a newcomer's first credit, the
 *    channel idle longest (no message either way for at least
 *    evict_ticks ticks) is cut off to make room (EVRDMA_REASON_EVICTED),
 *    at the newcomer's join, never at its request (a half-open flood
 *    must not evict anyone); with none idle so long, the newcomer is
 *    refused. A queue may also limit the channels of one address
 *    (per_addr: requests beyond are refused). The application hears of
 *    each (adm_cb).
 *  - A peer that sends beyond its credits is a violation, as on a ring;
 *    what its extra SENDs took from the pool meanwhile makes honest peers
 *    meet an RNR, which they retry (a pool channel's peer sets rnr_retry
 *    7 on seeing LEND, and our QP says wait 0.64 ms, not rdma_cm's 655:
 *    see conn_cm.c) until the poll that catches the violator posts them
 *    again.
 */
#define POOL_TICK_MS		1000
#define POOL_RECLAIM_TICKS	3
struct evrdma__chpool {
	struct evrdma_srq *srq;		/* the queue that holds the pool */
	struct ch_ring *ring;
	struct evrdma_mr *mr;
	struct ch_rbuf *rb;
	struct ch_rdma **own;		/* the channel a buffer is with */
	unsigned *free, nfree;
	unsigned nbuf, reserve;
	uint32_t slot_size;
	unsigned committed, orphans, nchan;
	/* admission (evrdma_channel_srq_set_admission()) */
	unsigned evict_ticks;		/* 0: never evict */
	unsigned per_addr;		/* 0: no limit */
	evrdma_admission_cb adm_cb;
	void *adm_arg;
	struct evrdma_base *base;
	struct evrdma__work post_work;	/* post the free buffers */
	LIST_HEAD(, ch_rdma) chans;	/* the joined channels */
	struct event *tick_ev;		/* evrdma__pool_tick(), while
					 * anything is lent beyond one
					 * credit or reclaimed, or idle
					 * channels are counted */
	uint8_t tick_armed;
	uint8_t want_room;		/* a starved channel found none */
	uint8_t join_due;		/* ticks a refused join still counts
					 * in the share (pool_admits()) */
};

static inline struct ch_rdma *
to_rc(struct evrdma_channel *ch)
{
	return (struct ch_rdma *)ch;
}

/* The base (NULL once the base was freed: a husk). */
static inline struct evrdma_base *
rc_base(const struct ch_rdma *rc)
{
	return evrdma__chan_base(&rc->ch);
}

/* The rings' entry goes: nothing of theirs completes here any more. */
static inline void
evrdma__rc_untag(struct ch_rdma *rc)
{
	struct evrdma_base *base = rc_base(rc);

	/* (a pass that was due at the poll's end comes next iteration) */
	if (rc->tag && base && evrdma__rings_del(base, rc->tag))
		evrdma__work_queue(base, &rc->pump_work);
	rc->tag = 0;
}

/* Where the peer's send slots are (its handshake's; a pull's source). */
static inline const struct evrdma_remote *
rc_peer_src(const struct ch_rdma *rc)
{
	return &rc->peer_src;
}

/* Can the pass send data? (Control messages go on while closing.) */
static inline int
rc_up(const struct ch_rdma *rc)
{
	return rc->conn && (rc->st & RC_UP_MASK) == RC_EST;
}

/* The state word changes here alone (the one writer of rc->st, which the
 * other files call): @p bits set, or cleared. */
static inline void
rc_set(struct ch_rdma *rc, unsigned bits)
{
	rc->st |= bits;
}

static inline void
rc_clear(struct ch_rdma *rc, unsigned bits)
{
	rc->st &= ~bits;
}

/*
 * rc_pass() at the end of this poll (inside one, with the rings
 * registered: in completion order, rings.c), or at the next iteration.
 * (One queued before the poll runs from the ready list too: rc_pass()
 * takes it off the work queue.)
 */
static inline void
rc_schedule(struct ch_rdma *rc)
{
	struct evrdma_base *base = rc_base(rc);

	if (!base)
		return;
	if (base->work.in_poll && rc->tag)
		evrdma__rings_ready(&base->rings, rc->tag);
	else
		evrdma__work_queue(base, &rc->pump_work);
}

static inline size_t
rc_chunk(const struct ch_rdma *rc)
{
	return rc->peer_slot_size < rc->slot_size ?
	    rc->peer_slot_size : rc->slot_size;
}

/* the send slots' bytes (the pull descriptors follow them) */
static inline size_t
slots_len(const struct ch_rdma *rc)
{
	return (size_t)rc->slots * rc->slot_size;
}

static inline uint8_t *
slot_mem(struct ch_rdma *rc, unsigned idx)
{
	return rc->tx.ring->mem + (size_t)idx * rc->slot_size;
}

/* ---- ring memory and its send slots (chan_ring.c) ---- */
struct ch_ring *evrdma__ring_new(struct ch_rdma *rc, unsigned n, size_t size,
    size_t extra);
void evrdma__ring_unref(struct ch_ring *ring);

int evrdma__rc_depths_check(const struct evrdma_config *cfg);
unsigned evrdma__rc_nbuf(const struct evrdma_config *cfg);

/* ---- the spill: large writes' memory beyond the slots (chan_spill.c) ---- */
/* Copy what of @p p (@p len bytes) fits into spill chunks, each put into
 * @p out by reference as a whole message: how many bytes were taken (from
 * the front; 0 when the channel is not up, or no chunk could be had). */
size_t evrdma__spill_write(struct ch_rdma *rc, struct evbuffer *out,
    const uint8_t *p, size_t len);
/* The staged chunk that starts at @p addr, or -1. */
int evrdma__spill_find(const struct ch_rdma *rc, const void *addr);
/* Chunk @p k's send completed (@p failed: with an error), or the peer
 * reported its pull done: free again once both are (all of them go back
 * when nothing else is staged or in flight). -1: it was not in flight,
 * an impossible state. */
/* Chunk @p k goes out as the next DATA message (@p pull: as a pull). */
const struct ch_spill *evrdma__spill_posting(struct ch_rdma *rc, unsigned k,
    int pull);
int evrdma__spill_sent(struct ch_rdma *rc, unsigned k, int failed);
int evrdma__spill_pulled(struct ch_rdma *rc, unsigned k);
/* The burst is over (nothing staged or in flight, output empty): every
 * chunk goes back. Checked when a chunk is done and when a pass empties
 * output (its last bytes may have been plain ones, behind the chunks). */
void evrdma__spill_idle(struct ch_rdma *rc);
/* The connection is gone: every chunk goes (output may keep references). */
void evrdma__spill_end(struct ch_rdma *rc);

/* ---- the end: violations, our own failures, the linger (chan_end.c) ---- */
void evrdma__rc_violation(struct ch_rdma *rc, const char *why);
void evrdma__rc_fail(struct ch_rdma *rc, int reason);
void evrdma__rc_reset_went(struct ch_rdma *rc);
void evrdma__rc_internal(struct ch_rdma *rc, const char *what);
void evrdma__rc_conn_free(struct ch_rdma *rc);
void evrdma__rc_linger_check(struct ch_rdma *rc);
void evrdma__rc_linger_timeout(void *arg);
void evrdma__rc_judge_end(struct ch_rdma *rc);
int evrdma__end_new(struct ch_rdma *rc, void (*timeout)(void *arg));
void evrdma__end_linger(struct ch_rdma *rc, size_t left,
    void (*expire)(struct evrdma__linger *lg));
int evrdma__end_linger_again(struct ch_rdma *rc, size_t left);
void evrdma__end_fini(struct ch_rdma *rc);

/* ---- a queue's receive pool, and lending (chan_pool.c) ---- */
void evrdma__pool_free(struct evrdma__chpool *pool, unsigned idx);
int evrdma__pool_post(struct evrdma__chpool *pool);
void evrdma__pool_post_work(struct evrdma__work *w);
int evrdma__rc_over_share(const struct ch_rdma *rc);
void evrdma__pool_room_freed(struct evrdma__chpool *pool);
void evrdma__pool_tick(void *arg);
struct ch_rdma *evrdma__rc_pool_taker(struct evrdma__chpool *pool,
    struct evrdma_conn *c, const struct evrdma_wc *wc, unsigned idx);
int evrdma__rc_pool_setup(struct ch_rdma *rc, struct evrdma_conn *conn);
int evrdma__rc_pool_join(struct ch_rdma *rc);
void evrdma__rc_pool_depart(struct ch_rdma *rc);
void evrdma__rc_pool_leave(struct ch_rdma *rc);
void evrdma__rc_pool_pass(struct ch_rdma *rc);
int evrdma__pool_yielded(struct ch_rdma *rc, const struct evrdma__ch_imm *m);
void evrdma__pool_reclaim_sent(struct ch_rdma *rc);
int evrdma__pool_withhold(struct ch_rdma *rc);
struct evrdma__chpool *evrdma__pool_use(struct ch_rdma *rc,
    struct evrdma_srq *srq);
void evrdma__pool_drop(struct ch_rdma *rc);
void evrdma__pool_unref(struct ch_rdma *rc);
void evrdma__chpool_free(struct evrdma__chpool *pool);
struct evrdma_srq *evrdma__chpool_srq_new(struct evrdma_base *base,
    const char *device, unsigned nbuf, evrdma_req_cb recv_cb);
extern const struct evrdma__chpool_ops evrdma__rc_chpool_ops;

/* ---- receives, delivery and pulls (chan_rx.c) ---- */
/* What a receive's completion says: the ring's poll's (an ibv_wc) or a
 * queue's pool's (the request layer's evrdma_wc). */
struct evrdma__rx_wc {
	int status;		/* an errno: 0 arrived */
	int send_imm;		/* a SEND with immediate */
	uint32_t imm;		/* host order */
	uint32_t byte_len;
};
int evrdma__rx_new(struct ch_rdma *rc, int pooled);
void evrdma__rx_use_pool(struct ch_rdma *rc, struct ch_ring *ring,
    struct ch_rbuf *rb);
int evrdma__rx_setup(struct ch_rdma *rc, struct evrdma__pd *pd);
void evrdma__rx_close(struct ch_rdma *rc);
/* A warm set's receive ring, registered already (before
 * evrdma__rx_setup(), which maps a fresh one otherwise). */
void evrdma__rx_adopt(struct ch_rdma *rc, struct ch_ring *ring,
    struct evrdma_mr *mr);
/* The ring and its registration went to a warm set: no longer ours. */
void evrdma__rx_disown(struct ch_rdma *rc);
void evrdma__rx_detach(struct ch_rdma *rc);
void evrdma__rx_free(struct ch_rdma *rc);
int evrdma__rc_post_free(struct ch_rdma *rc);
int evrdma__rc_returns_post(struct ch_rdma *rc, unsigned data_after,
    unsigned ctrl_after);
/* Before credits go back: receives for everything the peer may then
 * send (evrdma__ch_recvs_cover; on a pool, what it promised is covered
 * once its free buffers are posted). 0, or -1 with errno. (Inline: the
 * receives cover the returns in steady state, and every message asks.) */
static inline int
evrdma__rc_returns_ready(struct ch_rdma *rc, unsigned data_after,
    unsigned ctrl_after)
{
	if (evrdma__ch_recvs_cover(rc->rx.posted, rc->slots, rc->ctrl,
	    rc->rx.held, data_after, ctrl_after))
		return 0;
	return evrdma__rc_returns_post(rc, data_after, ctrl_after);
}
void evrdma__rc_deliver(struct ch_rdma *rc);
int evrdma__rx_unread(const struct ch_rdma *rc);
int evrdma__rx_arrived(struct ch_rdma *rc, unsigned idx,
    const struct evrdma__rx_wc *w, struct evrdma__ch_imm *m);
int evrdma__rx_done(struct ch_rdma *rc, unsigned idx, const struct ibv_wc *wc,
    struct evrdma__ch_imm *m, struct evrdma__rx_wc *w);
void evrdma__rx_drop(struct ch_rdma *rc, unsigned idx);
void evrdma__rx_data(struct ch_rdma *rc, unsigned idx,
    const struct evrdma__ch_imm *m, uint32_t byte_len);
int evrdma__rc_rx_init(struct ch_rdma *rc);
void evrdma__rc_rx_forget(struct ch_rdma *rc);
int evrdma__rc_post_pulls(struct ch_rdma *rc);
int evrdma__rc_waiting(struct ch_rdma *rc);

/* ---- send slots (chan_tx.c; chan_tx.h has the inline ones) ---- */
int evrdma__tx_new(struct ch_rdma *rc);
int evrdma__tx_setup(struct ch_rdma *rc, struct evrdma__pd *pd, int remote);
void evrdma__tx_close(struct ch_rdma *rc);
/* Nothing is in the send ring yet (a write before the connection may be):
 * a warm set's may replace it. */
int evrdma__tx_untouched(const struct ch_rdma *rc);
/* A warm set's send ring, registered already, instead of the fresh one
 * (evrdma__tx_untouched()); evrdma__tx_setup() next. */
void evrdma__tx_adopt(struct ch_rdma *rc, struct ch_ring *ring,
    struct evrdma_mr *mr);
/* The ring and its registration went to a warm set: no longer ours. */
void evrdma__tx_disown(struct ch_rdma *rc);
void evrdma__tx_detach(struct ch_rdma *rc);
void evrdma__tx_free(struct ch_rdma *rc);
/* Put the first @p len bytes of send slot @p idx into @p buf by
 * reference, staged: posted from where they are when they reach output's
 * front. -1 (out of memory) leaves the slot as it was. */
int evrdma__tx_stage(struct ch_rdma *rc, struct evbuffer *buf, unsigned idx,
    size_t len);
int evrdma__tx_send_data(struct ch_rdma *rc);
/* The peer did @p n more of our pulls (in order): -1 when it claims more
 * than we made, -2 when our own record is impossible. */
int evrdma__tx_pulls_done(struct ch_rdma *rc, unsigned n);
void evrdma__rc_sq_release(struct ch_rdma *rc, uint32_t what, int failed);
void evrdma__rc_send_done(struct ch_rdma *rc, unsigned e,
    const struct ibv_wc *wc);

/* ---- the application's writes into slots (chan_write.c) ---- */
void evrdma__wr_init(struct ch_rdma *rc);
void evrdma__wr_drop_resv(struct ch_rdma *rc);
void evrdma__wr_forget_open(struct ch_rdma *rc);
void evrdma__rc_drop_pending_writes(struct ch_rdma *rc);
void evrdma__rc_wopen_settle(struct ch_rdma *rc);
int evrdma__op_write(struct evrdma_channel *ch, const void *data, size_t len);
void *evrdma__op_reserve(struct evrdma_channel *ch, size_t len);
int evrdma__op_commit(struct evrdma_channel *ch, size_t len);

/* ---- credits, control messages, the sends of a pass (chan_ctl.c) ---- */
int evrdma__ctl_new(struct ch_rdma *rc);
void evrdma__ctl_fini(struct ch_rdma *rc);
void evrdma__ctl_start(struct ch_rdma *rc, unsigned slots, unsigned ctrl,
    int lend);
void evrdma__ctl_pass_end(struct ch_rdma *rc);
int evrdma__ctl_send_all(struct ch_rdma *rc);
void evrdma__ctl_arrival(struct ch_rdma *rc, unsigned idx,
    const struct evrdma__ch_imm *m, uint32_t byte_len);

/* ---- the send ring (chan_sq.c; chan_sq.h has the inline ones) ---- */
int evrdma__sq_init(struct ch_rdma *rc, struct evrdma_conn *conn);
void evrdma__sq_fini(struct ch_rdma *rc);
/* May the ring take one more message now (room in its send queue)? */
static inline int
evrdma__sq_room(const struct ch_rdma *rc)
{
	return rc->sq.out < rc->sq.n;
}
/* Post the chain (@p may_defer: its last may stay unsignaled, within
 * RC_DEFER). 0, or -1 with errno: what the provider refused went back
 * (to @p fn, failed) and the caller fails the connection. */
int evrdma__sq_flush(struct ch_rdma *rc, int may_defer,
    void (*fn)(struct ch_rdma *rc, uint32_t what, int failed));
/* The entries up to and including @p e completed: how many, each of them
 * to @p fn (the last with @p failed). -1: @p e is not outstanding (an
 * impossible state). */
int evrdma__sq_complete(struct ch_rdma *rc, unsigned e, int failed,
    void (*fn)(struct ch_rdma *rc, uint32_t what, int failed));
/* The QP is in the error state: a signaled send whose flush says that
 * everything before it is done. */
void evrdma__sq_drain(struct ch_rdma *rc);
/* The teardown gave up: what is outstanding goes to @p fn, failed,
 * without a completion. */
void evrdma__sq_forget(struct ch_rdma *rc,
    void (*fn)(struct ch_rdma *rc, uint32_t what, int failed));

/* ---- how a channel ends (chan_close.c) ---- */
void evrdma__rc_close(struct evrdma_channel *ch);
void evrdma__rc_exiting(struct evrdma_channel *ch);
void evrdma__rc_base_gone(struct evrdma_channel *ch);
void evrdma__rc_destruct(struct evrdma_channel *ch);
void evrdma__rc_ended(void *owner, struct evrdma_conn *conn, int reason,
    int err);
void evrdma__rc_closed(void *owner, int husk);
void evrdma__rc_linger_tick(void *arg);

/* ---- the channel object, its pass, owner ops (chan_rdma.c) ---- */
struct ch_rdma *evrdma__rc_new(struct evrdma_base *base, int flags,
    int pooled);
void evrdma__rc_own_conn(struct ch_rdma *rc, struct evrdma_conn *conn);
struct ch_rdma *evrdma__rc_new_accepted(struct evrdma_conn *conn, int flags,
    struct evrdma_srq *srq);
int evrdma__rc_use_pool(struct ch_rdma *rc, struct evrdma_srq *srq);

#endif /* EVRDMA_CHAN_RDMA_H_INCLUDED_ */
