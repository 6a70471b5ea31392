/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel's RDMA transport: rings, posts, receives and their
 * refill, completions, pulls, and the graceful close. The semantics are in
 * chan.c; the wire format and credit rules in wire.c
 * (doc/channel-protocol.md).
 *
 * Every message is a SEND WITH IMMEDIATE into the next receive the peer
 * posted. The receive buffers are registered for local writes only: a peer
 * can reach nothing of ours but what it sends into a receive we posted
 * (and, if we let it pull, our send ring, read-only), and a buffer handed
 * to the application is never posted again until the application has let
 * go of it, so delivered bytes cannot change.
 *
 * Received bytes enter input by reference (zero-copy), except small
 * messages, which are copied (cheaper than a reference, and the buffer
 * returns at once); a buffer returns to the receive pool, and a credit to
 * the peer, when the application drains its bytes. If the application
 * holds more than half the slots, new data is copied instead (up to
 * max_input bytes of input) so the sender is not stalled by a slow
 * consumer of references; past that, data waits in its buffer and flow
 * control holds the peer.
 *
 * Replies skip the evbuffers: a write from the read callback into an empty
 * output is copied into a send slot left open for the callback's next
 * writes and posted by the same pass (rc_write_open), and a receive
 * callback (evrdma_channel_set_recv_cb) gets the bytes where they landed.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* receive buffers */
enum { RB_FREE, RB_POSTED, RB_READY, RB_PULL, RB_PULLING, RB_LOST };

/* send slots */
enum { SLOT_FREE, SLOT_STAGED, SLOT_POSTED, SLOT_RESERVED, SLOT_OPEN };
#define SF_PULL		0x01	/* posted as a pull */
#define SF_SENT		0x02	/* its send completed */
#define SF_PULLED	0x04	/* the peer reported the pull done */

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
 *    stack holds each buffer at most once (pool_free() refuses a free
 *    one), so at most nbuf.
 * A release that finds refs already 0, or a buffer already free, is an
 * impossible state: it ends that connection (EVRDMA_REASON_INTERNAL) and
 * frees nothing twice.
 */
struct ch_rbuf {
	uint32_t len;			/* the message's bytes */
	uint32_t off;			/* of which already in input */
	uint32_t pslot;			/* a pull: the peer's send slot */
	uint32_t refs;			/* input references into it */
	uint8_t state;			/* RB_* */
	uint8_t queued;			/* in rxq: not all in input yet */
};

struct ch_rdma {
	struct evrdma_channel ch;	/* first */
	struct evrdma_conn *conn;	/* until closed() */
	int conn_freed;			/* evrdma_conn_free() done */
	int passive;
	int established;		/* the user has it, connected */
	int ended;			/* the connection ended */
	int closing;			/* the user freed the channel */
	int reset_due;			/* ... with bytes it never read: the
					 * end is a RESET, not an EOF */
	int fail_reason;		/* rc_fail(): its RESET is on its way */
	int violated;			/* the peer broke the protocol */
	int pre_send;			/* inside the pass's read callbacks */
	int again;			/* ... which asked for another pass */
	int flush_sent;			/* a flush sent bytes: the next pass
					 * owes the write callback */
	struct evrdma__work pump_work;
	struct event *linger_ev;
	/* credits owed after an idle moment: returned then, so that a peer
	 * that ends knows we consumed its bytes (own_ended()) */
	struct event *ret_ev;
	uint64_t ret_mark;		/* rx_tail when it was armed */
	uint8_t ret_armed, ret_idle;

	/* ours */
	unsigned slots, ctrl, spare, nbuf;
	uint32_t slot_size;
	size_t max_input;
	uint32_t pull_min;		/* we pull DATA of this size on */
	unsigned pull_cap;		/* READs the send queue has room for */

	/* the peer's */
	unsigned peer_slots, peer_ctrl;
	uint32_t peer_slot_size, peer_pull_min;
	struct evrdma_remote peer_src;	/* its send ring, if we pull */

	/* receive pool: nbuf buffers of slot_size, local write only */
	struct ch_ring *rring;
	struct evrdma_mr *rmr;
	struct ch_rbuf *rb;
	unsigned *rfree, nfree;		/* stack of free buffers */
	unsigned *rxq;			/* arrived DATA in order (ring) */
	uint64_t rx_head, rx_tail, rx_pull;	/* rx_pull: next READ */
	unsigned posted;		/* receives posted */
	unsigned held;			/* DATA arrived, buffer not free */
	unsigned ret_data, ret_ctrl, ret_pull;	/* owed to the peer */
	unsigned refs_held;		/* buffers input references */
	unsigned pull_wait, pull_out;
	int peer_starved;
	int data_lost;			/* a pull could not be done */

	/* send ring: slots of slot_size, then a pull descriptor for each */
	struct ch_ring *sring;
	struct evrdma_mr *smr;
	int src_remote;			/* smr is readable by the peer */
	int pullable;			/* the peer pulls, and may */
	uint8_t *sstate, *sflags;
	unsigned *sfifo, sfifo_head, sfifo_n;	/* posted DATA, in order */
	unsigned *spq, spq_head, spq_n;		/* pulls not reported done */
	unsigned snext, sfree;
	int resv;			/* reserved slot, or -1 */
	size_t resv_len;
	size_t resv_max;		/* the most it was reserved for */
	int resv_wanted;		/* a reserve failed: EAGAIN */
	int wopen;			/* slot of the open write, or -1 */
	size_t wopen_len;
	unsigned s_credits, c_credits;	/* the peer's, in hand */
	int eof_sent, eof_done;

	/* what it carried (evrdma_channel_get_stats()) */
	unsigned long long tx_bytes, rx_bytes, tx_msgs, rx_msgs;
	unsigned long long tx_pulls, rx_pulls, stalls, stall_us;
	unsigned long long ka_probes;	/* its connection's, once gone */
	uint64_t stall_t0;		/* output waits for credits since */

	/* receives from a queue's pool instead (rb and rring are the
	 * pool's; nfree and posted stay 0) */
	struct evrdma__chpool *pool;
	struct evrdma_srq *srq;		/* its queue, a reference */
	int pool_joined;		/* committed: on pool->chans */
	LIST_ENTRY(ch_rdma) pool_link;
	unsigned long drain_mark;	/* the CQ's emptied count at the end */
	unsigned withheld;		/* of our R, credits not lent */
	uint8_t rx_recent;		/* DATA arrived since the pool's tick */
	unsigned reclaim_want;		/* a RECLAIM to send, of this many */
	unsigned reclaim_out;		/* sent: its YIELD is due */
	unsigned reclaim_ticks;		/* ticks since it was wanted */
	uint8_t grant_due;		/* joined: the first credit goes now */
	/* the peer lends (LEND in its handshake): its RECLAIM to answer */
	uint8_t peer_lends;
	unsigned yield_asked;
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
 *    nothing); then the channel joins (rc_pool_join()): its control
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
 *  - committed counts every credit lent and every control credit of the
 *    joined channels; it never exceeds the buffers less a reserve, so the
 *    pool backs every promise (the buffers of a gone channel that the
 *    application still references, orphans, count against it too).
 *  - A peer that sends beyond its credits is a violation, as on a ring;
 *    what its extra SENDs took from the pool meanwhile makes honest peers
 *    meet an RNR, which they retry (a pool channel asks its peer for
 *    rnr_retry 7, and its QP says wait 0.64 ms, not rdma_cm's 655: see
 *    conn.c) until the poll that catches the violator posts them again.
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
	unsigned committed, orphans, nchan, ctrl_sum;
	struct evrdma_base *base;
	struct evrdma__work post_work;	/* post the free buffers */
	LIST_HEAD(, ch_rdma) chans;	/* the joined channels */
	struct event *tick_ev;		/* pool_tick(), while anything is lent
					 * beyond one credit or reclaimed */
	uint8_t tick_armed;
	uint8_t want_room;		/* a starved channel found none */
};

static void rc_schedule(struct ch_rdma *rc);
static void rc_linger_check(struct ch_rdma *rc);
static int rc_up(const struct ch_rdma *rc);
static void rc_violation(struct ch_rdma *rc, const char *why);
static void pool_room_freed(struct evrdma__chpool *pool);
static void rc_pool_depart(struct ch_rdma *rc);
static void rc_judge_end(struct ch_rdma *rc);
static void slot_release(struct ch_rdma *rc, unsigned idx);

static struct ch_rdma *
to_rc(struct evrdma_channel *ch)
{
	return (struct ch_rdma *)ch;
}

/* ---- rings ---- */

/* @p len bytes in whole pages: what a ring maps, and what its
 * registration pins */
static size_t
page_len(size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (len + pg - 1) & ~(pg - 1);
}

static size_t
ring_map_len(const struct ch_ring *r)
{
	return page_len(r->len);
}

/* @p n slots of @p size bytes and @p extra bytes after them, in pages of
 * their own: fresh zero pages (registered memory never shows what it held
 * before), and left out of a forked child, which neither copies the peers'
 * bytes at fork nor can read or write them afterwards. */
static struct ch_ring *
ring_new(struct ch_rdma *rc, unsigned n, size_t size, size_t extra)
{
	struct ch_ring *r = calloc(1, sizeof(*r));
	void *mem;
	unsigned i;

	if (!r)
		return NULL;
	r->owner = rc;
	r->refs = 1;
	r->len = (size_t)n * size + extra;
	mem = mmap(NULL, ring_map_len(r), PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	r->slot = calloc(n, sizeof(*r->slot));
	if (mem == MAP_FAILED || !r->slot) {
		if (mem != MAP_FAILED)
			munmap(mem, ring_map_len(r));
		free(r->slot);
		free(r);
		return NULL;
	}
	r->mem = mem;
	if (madvise(mem, ring_map_len(r), MADV_DONTFORK) < 0)
		evrdma__log(EVRDMA_LOG_WARN, "madvise(MADV_DONTFORK): %s",
		    strerror(errno));
	for (i = 0; i < n; i++) {
		r->slot[i].ring = r;
		r->slot[i].idx = i;
	}
	return r;
}

static void
ring_unref(struct ch_ring *ring)
{
	if (--ring->refs)
		return;
	munmap(ring->mem, ring_map_len(ring));
	free(ring->slot);
	free(ring);
}

/* ---- a queue's receive pool ---- */

static void
pool_free(struct evrdma__chpool *pool, unsigned idx)
{
	if (pool->rb[idx].state == RB_FREE) {
		/* impossible (see struct ch_rbuf): pushing it again would
		 * write past the free stack */
		evrdma__log(EVRDMA_LOG_ERROR, "channel queue: internal error: "
		    "buffer %u freed twice", idx);
		return;
	}
	pool->own[idx] = NULL;
	pool->rb[idx].state = RB_FREE;
	pool->free[pool->nfree++] = idx;
	/* posted again before any channel returns a credit, and at the
	 * latest after this poll pass: an honest peer's SEND that met an
	 * RNR (a violator took its buffer) waits for no traffic */
	if (pool->base)
		evrdma__work_queue(pool->base, &pool->post_work);
}

/* Post every free buffer: 0, or -1 with errno. */
static int
pool_post(struct evrdma__chpool *pool)
{
	unsigned idx[64], n, i;
	int k;

	if (!pool->nfree)
		return 0;
	if (!pool->mr || !evrdma__srq_alive(pool->srq))
		return evrdma__fail(EPIPE, "the channel queue is gone");
	while (pool->nfree) {
		n = pool->nfree < 64 ? pool->nfree : 64;
		for (i = 0; i < n; i++)
			idx[i] = pool->free[pool->nfree - 1 - i];
		k = evrdma__ep_ring_post(evrdma__srq_ep(pool->srq), idx, n);
		if (k < 0)
			return -1;
		for (i = 0; i < (unsigned)k; i++)
			pool->rb[pool->free[--pool->nfree]].state = RB_POSTED;
		if ((unsigned)k < n)
			return evrdma__fail(ENOMEM, "cannot post receives");
	}
	return 0;
}

static void
pool_post_work(struct evrdma__work *w)
{
	struct evrdma__chpool *pool = (struct evrdma__chpool *)((char *)w -
	    offsetof(struct evrdma__chpool, post_work));

	if (pool_post(pool) < 0 && errno != EPIPE)
		evrdma__log(EVRDMA_LOG_ERROR, "channel queue: %s",
		    evrdma_errmsg());
}

/* Buffers no channel was promised. */
static unsigned
pool_room(const struct evrdma__chpool *pool)
{
	unsigned long used = (unsigned long)pool->committed + pool->orphans +
	    pool->reserve;

	return used < pool->nbuf ? (unsigned)(pool->nbuf - used) : 0;
}

/* The data credits each channel may have lent, all sharing evenly. */
static unsigned
pool_share(const struct evrdma__chpool *pool)
{
	unsigned long fixed = (unsigned long)pool->reserve + pool->ctrl_sum +
	    pool->orphans;
	unsigned avail = fixed < pool->nbuf ? (unsigned)(pool->nbuf - fixed) :
	    0;
	unsigned share = pool->nchan ? avail / pool->nchan : avail;

	return share ? share : 1;
}

/* ---- credits and control messages ---- */

static size_t
rc_chunk(const struct ch_rdma *rc)
{
	return rc->peer_slot_size < rc->slot_size ?
	    rc->peer_slot_size : rc->slot_size;
}

/* Post every free receive buffer; the receives return their buffer. */
static void rc_recv_cb(struct evrdma_conn *c, const struct evrdma_wc *wc,
    void *arg);

static int
rc_post_free(struct ch_rdma *rc)
{
	unsigned idx[64], n, i;
	int k;

	while (rc->nfree) {
		n = rc->nfree < 64 ? rc->nfree : 64;
		for (i = 0; i < n; i++)
			idx[i] = rc->rfree[rc->nfree - 1 - i];
		k = evrdma__conn_ring_post(rc->conn, idx, n);
		if (k < 0)
			return -1;
		for (i = 0; i < (unsigned)k; i++)
			rc->rb[rc->rfree[--rc->nfree]].state = RB_POSTED;
		rc->posted += (unsigned)k;
		if ((unsigned)k < n)
			return evrdma__fail(ENOMEM, "cannot post receives");
	}
	return 0;
}

/* Before credits go back: receives for everything the peer may then
 * send (evrdma__ch_recvs_cover; on a pool, what it promised is covered
 * once its free buffers are posted). */
static int
rc_returns_ready(struct ch_rdma *rc, unsigned data_after, unsigned ctrl_after)
{
	if (evrdma__ch_recvs_cover(rc->posted, rc->slots, rc->ctrl, rc->held,
	    data_after, ctrl_after))
		return 0;
	if (rc->pool)
		return pool_post(rc->pool);
	if (rc_post_free(rc) < 0)
		return -1;
	if (!evrdma__ch_recvs_cover(rc->posted, rc->slots, rc->ctrl, rc->held,
	    data_after, ctrl_after))
		return evrdma__fail(ENOMEM, "receives do not cover the credits");
	return 0;
}

/* The immediate of a message of @p type, carrying what we owe. */
static int
rc_take_returns(struct ch_rdma *rc, int type, struct evrdma__ch_imm *m)
{
	unsigned d = rc->ret_data > EVRDMA_CH_DRET_MAX ? EVRDMA_CH_DRET_MAX :
	    rc->ret_data;
	unsigned p = rc->ret_pull > EVRDMA_CH_PDONE_MAX ? EVRDMA_CH_PDONE_MAX :
	    rc->ret_pull;

	if (rc_returns_ready(rc, rc->ret_data - d, 0) < 0)
		return -1;
	memset(m, 0, sizeof(*m));
	m->type = (uint8_t)type;
	m->dret = (uint16_t)d;
	m->cret = (uint8_t)rc->ret_ctrl;
	m->pdone = (uint8_t)p;
	rc->ret_data -= d;
	rc->ret_ctrl = 0;
	rc->ret_pull -= p;
	/* The peer, starved, waits for what we owe, pulls included. It
	 * stays starved until all of that went back: a message that leaves
	 * READs of its pulls still running must not drop the flag, or the
	 * pulls reported done later wait for a quarter of the ring that a
	 * peer holding fewer (it pulls at most that many at once) never
	 * fills, and both sides wait for ever (seen on the two-guest wire) */
	/* On a pool, a starved peer also waits for a loan the pool may
	 * have had no room for: a message that lends it nothing leaves it
	 * starved, so that the pass lends once room comes back
	 * (pool_room_freed()); forgetting it there left the peer with no
	 * credit and no way to say so (seen: 1 run in 10 of
	 * isolation_fine_reader). */
	if (!rc->ret_data && !rc->ret_pull && !rc->pull_wait &&
	    !rc->pull_out && (d || !rc->pool))
		rc->peer_starved = 0;
	return 0;
}

static void
rc_ctrl_cb(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
}

static void
rc_eof_cb(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct ch_rdma *rc = arg;

	if (!wc->status) {
		rc->eof_done = 1;
		rc_linger_check(rc);
	}
}

/* A CREDIT, EOF or RESET (an EOF with @p reset): 1 posted, 0 no control
 * credit in hand, -1 failed. */
static int
rc_post_ctrl(struct ch_rdma *rc, int type, int starved, int reset)
{
	struct evrdma__ch_imm m;
	int eof = type == EVRDMA_CH_EOF;

	if (!rc->c_credits)
		return 0;
	if (rc_take_returns(rc, type, &m) < 0)
		return -1;
	m.starved = (uint8_t)starved;
	m.reset = (uint8_t)reset;
	if (evrdma__conn_post_send_imm(rc->conn, NULL, 0, 0,
	    evrdma__ch_imm_encode(&m), eof ? rc_eof_cb : rc_ctrl_cb, rc) < 0)
		return -1;
	rc->c_credits--;
	return 1;
}

/* A LOAN message: a RECLAIM of @p n (we lend), or a YIELD of @p n (the
 * peer lends). It returns control credits, never data credits (their
 * field carries @p n). 1 posted, 0 no control credit in hand, -1 failed. */
static int
rc_post_loan(struct ch_rdma *rc, int yield, unsigned n)
{
	struct evrdma__ch_imm m;

	if (!rc->c_credits)
		return 0;
	if (rc_returns_ready(rc, rc->ret_data, 0) < 0)
		return -1;
	memset(&m, 0, sizeof(m));
	m.type = EVRDMA_CH_LOAN;
	m.yield = (uint8_t)yield;
	m.loan = (uint16_t)n;
	m.cret = (uint8_t)rc->ret_ctrl;
	if (evrdma__conn_post_send_imm(rc->conn, NULL, 0, 0,
	    evrdma__ch_imm_encode(&m), rc_ctrl_cb, rc) < 0)
		return -1;
	rc->ret_ctrl = 0;
	rc->c_credits--;
	return 1;
}

/* The sends of a pass about loans: our RECLAIM, our YIELD. */
static int
rc_send_loans(struct ch_rdma *rc)
{
	int r = 0;

	if (rc->reclaim_want) {
		r = rc_post_loan(rc, 0, rc->reclaim_want);
		if (r > 0) {
			rc->reclaim_out = rc->reclaim_want;
			rc->reclaim_want = 0;
		}
	}
	if (r >= 0 && rc->yield_asked) {
		unsigned k = evrdma__ch_yield_amount(rc->yield_asked,
		    rc->s_credits);

		r = rc_post_loan(rc, 1, k);
		if (r > 0) {
			rc->s_credits -= k;
			rc->yield_asked = 0;
		}
	}
	return r < 0 ? -1 : 0;
}

/* A LOAN from the peer (its control credit is counted): 0, or -1 when it
 * broke the rules (the connection is then cut off). */
static int
rc_take_loan(struct ch_rdma *rc, const struct evrdma__ch_imm *m)
{
	if (m->yield) {
		unsigned lent = rc->slots - rc->withheld;

		if (!rc->pool || !evrdma__ch_yield_valid(rc->reclaim_out,
		    m->loan, lent, rc->held + rc->ret_data)) {
			rc_violation(rc, "a yield of credits not reclaimed");
			return -1;
		}
		rc->withheld += m->loan;
		rc->pool->committed -= m->loan;
		rc->reclaim_out = 0;
		if (m->loan)
			pool_room_freed(rc->pool);
		return 0;
	}
	if (!rc->peer_lends || rc->yield_asked ||
	    !evrdma__ch_reclaim_valid(m->loan, rc->peer_slots)) {
		rc_violation(rc, "a reclaim of credits not lent");
		return -1;
	}
	rc->yield_asked = m->loan;
	return 0;
}

/* ---- the end ---- */

/* A rule of the protocol broken: the peer loses its access at once. */
static void
rc_violation(struct ch_rdma *rc, const char *why)
{
	evrdma__log(EVRDMA_LOG_WARN, "channel %p: protocol violation by the "
	    "peer: %s", (void *)rc, why);
	/* whatever it said before or says after (what it sent in the same
	 * poll is still to come: rc_recv_cb() drops it), this is no orderly
	 * end */
	rc->ch.peer_eof = 0;
	rc->violated = 1;
	if (rc->conn)
		evrdma__conn_abort(rc->conn, EVRDMA_REASON_PROTOCOL);
}

static void
rc_reset_cb(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct ch_rdma *rc = arg;

	if (rc->conn && !rc->conn_freed && !rc->ended)
		evrdma__conn_abort(rc->conn, rc->fail_reason);
}

/*
 * End the connection for a failure of ours (a resource, the user's
 * misuse, an impossible state), not for the peer's violation: a RESET
 * goes first, so that the peer reports an error and not the orderly end
 * that a bare disconnect with nothing unconsumed reads as (own_ended());
 * the abort follows once it went, or at once with no control credit in
 * hand. Nothing else is sent meanwhile (rc_up()).
 */
static void
rc_fail(struct ch_rdma *rc, int reason)
{
	struct evrdma__ch_imm m;

	if (!rc->conn || rc->conn_freed || rc->ended || rc->fail_reason)
		return;
	rc->fail_reason = reason;
	if (!rc->eof_sent && rc->c_credits) {
		memset(&m, 0, sizeof(m));
		m.type = EVRDMA_CH_EOF;
		m.reset = 1;
		if (evrdma__conn_post_send_imm(rc->conn, NULL, 0, 0,
		    evrdma__ch_imm_encode(&m), rc_reset_cb, rc) == 0) {
			rc->c_credits--;
			rc->eof_sent = 1;
			return;
		}
	}
	evrdma__conn_abort(rc->conn, reason);
}

/* An impossible state of our own: the connection ends, nothing more is
 * freed or returned for it. */
static void
rc_internal(struct ch_rdma *rc, const char *what)
{
	evrdma__log(EVRDMA_LOG_ERROR, "channel %p: internal error: %s",
	    (void *)rc, what);
	rc->ch.peer_eof = 0;
	rc_fail(rc, EVRDMA_REASON_INTERNAL);
}

static void
rc_conn_free(struct ch_rdma *rc)
{
	if (rc->conn && !rc->conn_freed) {
		rc->conn_freed = 1;
		evrdma__ev_stop(rc->linger_ev);
		evrdma_conn_free(rc->conn);
	}
}

/* The user freed the channel and the peer has what was sent: close. */
static void
rc_linger_check(struct ch_rdma *rc)
{
	if (rc->closing && rc->eof_done && !rc->spq_n)
		rc_conn_free(rc);
}

static void
rc_linger_timeout(void *arg)
{
	struct ch_rdma *rc = arg;

	evrdma__log(EVRDMA_LOG_INFO, "channel %p: the peer did not confirm "
	    "the end in time; closing", (void *)rc);
	rc_conn_free(rc);
}

/* ---- receive side ---- */

static void
rb_free(struct ch_rdma *rc, unsigned idx)
{
	if (rc->pool) {
		pool_free(rc->pool, idx);
		return;
	}
	if (rc->rb[idx].state == RB_FREE) {
		rc_internal(rc, "a receive buffer freed twice");
		return;
	}
	rc->rb[idx].state = RB_FREE;
	rc->rfree[rc->nfree++] = idx;
}

/* Lent credits beyond the pool's even share (keeping one, so that the
 * peer can always send, and say it is starved). */
static int
rc_over_share(const struct ch_rdma *rc)
{
	unsigned lent = rc->slots - rc->withheld;

	return lent > 1 && lent > pool_share(rc->pool);
}

/* A DATA buffer is done with: the buffer goes back to the pool and its
 * credit to the peer (on a queue's pool, back to the pool when this
 * channel has more than its share lent). */
static void
rb_release(struct ch_rdma *rc, unsigned idx)
{
	if (!rc->held || rc->rb[idx].state == RB_FREE) {
		rc_internal(rc, "a receive buffer released twice");
		return;
	}
	rb_free(rc, idx);
	rc->held--;
	if (rc->pool && (!rc->pool_joined || rc_over_share(rc))) {
		/* (a channel whose connection is over returns every one) */
		rc->withheld++;
		rc->pool->committed--;
		pool_room_freed(rc->pool);
	} else {
		rc->ret_data++;
	}
	if (!rc->pre_send)
		rc_schedule(rc);
}

static void
pool_tick_arm(struct evrdma__chpool *pool)
{
	if (!pool->tick_armed && pool->tick_ev &&
	    evrdma__ev_timer_start(pool->tick_ev, POOL_TICK_MS) == 0)
		pool->tick_armed = 1;
}

/* Ask @p rc's peer for @p n of the credits lent to it (the pass sends the
 * RECLAIM). */
static void
rc_reclaim(struct ch_rdma *rc, unsigned n)
{
	if (!n || rc->reclaim_want || rc->reclaim_out)
		return;
	rc->reclaim_want = n;
	rc->reclaim_ticks = 0;
	pool_tick_arm(rc->pool);
	rc_schedule(rc);
}

/* The pool has no room: ask the channels over their share for the rest. */
static void
pool_reclaim_over_share(struct evrdma__chpool *pool)
{
	unsigned share = pool_share(pool);
	struct ch_rdma *rc;

	LIST_FOREACH(rc, &pool->chans, pool_link) {
		unsigned lent = rc->slots - rc->withheld;

		if (lent > share && lent > 1)
			rc_reclaim(rc, lent - (share ? share : 1));
	}
}

/* Buffers were given back (a yield, a withheld return, a channel gone):
 * the channels whose peers wait for a loan the pool had no room for get
 * their pass, which lends (rc_pool_pass()). */
static void
pool_room_freed(struct evrdma__chpool *pool)
{
	struct ch_rdma *rc;

	if (!pool->want_room)
		return;
	pool->want_room = 0;
	LIST_FOREACH(rc, &pool->chans, pool_link)
		if (rc->peer_starved && rc->withheld)
			rc_schedule(rc);
}

/* Lend the peer more of our R while the pool has buffers nobody was
 * promised, up to the even share. */
static void
rc_lend(struct ch_rdma *rc)
{
	struct evrdma__chpool *pool = rc->pool;
	unsigned share = pool_share(pool);

	while (rc->withheld && rc->slots - rc->withheld < share &&
	    pool_room(pool)) {
		rc->withheld--;
		pool->committed++;
		rc->ret_data++;
	}
	if (rc->withheld && rc->slots - rc->withheld < share &&
	    !pool_room(pool)) {
		/* it is owed its share: ask those over theirs, and come
		 * back when something was given back */
		pool->want_room = 1;
		pool_reclaim_over_share(pool);
	}
	if (rc->slots - rc->withheld > 1)
		pool_tick_arm(pool);
}

/* Every tick: a peer holding more than one credit that sent no DATA for a
 * whole tick is asked for the rest; one that did not answer a RECLAIM
 * within POOL_RECLAIM_TICKS is cut off. */
static void
pool_tick(void *arg)
{
	struct evrdma__chpool *pool = arg;
	struct ch_rdma *rc, *next;
	int busy = 0;

	pool->tick_armed = 0;
	for (rc = LIST_FIRST(&pool->chans); rc; rc = next) {
		unsigned lent = rc->slots - rc->withheld;

		next = LIST_NEXT(rc, pool_link);
		if (rc->reclaim_want || rc->reclaim_out) {
			if (++rc->reclaim_ticks >= POOL_RECLAIM_TICKS) {
				rc->reclaim_want = rc->reclaim_out = 0;
				rc_violation(rc, "lent credits not given back "
				    "when reclaimed");
			} else {
				busy = 1;
			}
		} else if (lent > 1 && !rc->rx_recent && rc_up(rc)) {
			rc_reclaim(rc, evrdma__ch_reclaim_amount(lent));
			busy = 1;
		} else if (lent > 1) {
			busy = 1;
		}
		rc->rx_recent = 0;
	}
	if (busy)
		pool_tick_arm(pool);
}

static void
rc_ref_cleanup(const void *data, size_t len, void *arg)
{
	struct ch_slotref *ref = arg;
	struct ch_ring *ring = ref->ring;
	struct evrdma__chpool *pool = ring->pool;
	struct ch_rdma *rc = pool ? pool->own[ref->idx] : ring->owner;

	if (!rc && pool) {
		/* the channel is gone: the buffer returns to the pool */
		struct ch_rbuf *b = &pool->rb[ref->idx];

		if (!b->refs || !pool->orphans)
			evrdma__log(EVRDMA_LOG_ERROR, "channel queue: internal "
			    "error: buffer %u released more often than it "
			    "was referenced", ref->idx);
		else if (--b->refs == 0) {
			pool->orphans--;
			pool_free(pool, ref->idx);
			pool_room_freed(pool);
		}
	} else if (rc) {
		struct ch_rbuf *b = &rc->rb[ref->idx];

		if (!b->refs || !rc->refs_held)
			rc_internal(rc, "a receive buffer released more often "
			    "than it was referenced");
		else if (--b->refs == 0) {
			rc->refs_held--;
			if (!b->queued)
				rb_release(rc, ref->idx);
		}
	}
	ring_unref(ring);
}

static void
rxq_pop(struct ch_rdma *rc)
{
	rc->rx_head++;
	if (rc->rx_pull < rc->rx_head)
		rc->rx_pull = rc->rx_head;
}

/* The buffer at the head of rxq, if it can be delivered now. */
static int
rxq_ready(struct ch_rdma *rc)
{
	return rc->rx_head < rc->rx_tail &&
	    rc->rb[rc->rxq[rc->rx_head % rc->nbuf]].state == RB_READY;
}

/*
 * Move arrived data into input while reading is enabled and input has
 * room (or hand it to the receive callback while input is empty); then
 * the read callback.
 */
static void
rc_deliver(struct ch_rdma *rc)
{
	struct evrdma_channel *ch = &rc->ch;
	/* input's length, kept here: only we add to it in this loop */
	size_t have = evbuffer_get_length(ch->input);
	int moved = 0, held = 0;

	while (evrdma__chan_reading(ch) && rxq_ready(rc)) {
		unsigned idx = rc->rxq[rc->rx_head % rc->nbuf];
		struct ch_rbuf *b = &rc->rb[idx];
		uint8_t *p = rc->rring->mem + (size_t)idx * rc->slot_size +
		    b->off;
		size_t len = b->len - b->off, room, take;
		int copy_ok, ref_ok;

		if (ch->recvcb && !have) {
			/* zero-copy to the user; the buffer goes back to
			 * the peer as soon as the callback returns */
			rxq_pop(rc);
			b->queued = 0;
			evrdma__chan_recv(ch, p, len);
			rb_release(rc, idx);
			if (ch->freed)
				return;
			/* it may have put bytes in input: what comes next
			 * goes there, behind them */
			have = evbuffer_get_length(ch->input);
			continue;
		}
		if (ch->sink && !have && len < STAGE_MIN &&
		    ch->sink->take(ch->sink_arg, p, len)) {
			/* copied by the adapter: the slot goes back at once,
			 * before its read callback (which may write the
			 * reply: the credit then goes with it) */
			rxq_pop(rc);
			b->queued = 0;
			rb_release(rc, idx);
			evrdma__chan_sunk(ch);
			if (ch->freed)
				return;
			have = evbuffer_get_length(ch->input);
			continue;
		}
		room = evrdma__chan_room(ch, have);
		if (ch->mode == EVRDMA_CHANNEL_MESSAGE)
			/* whole messages, and one even past the mark when
			 * input is empty (it could never enter otherwise) */
			take = (len <= room || !have) && room ? len : 0;
		else
			take = len < room ? len : room;
		if (!take) {
			held = 1;
			break;
		}
		/* (once the connection is over there is no peer to hold
		 * back: what arrived goes in, as far as the watermark lets.
		 * Within STAGE_MIN of the read high watermark a piece is
		 * copied even past max_input: input never passes the mark,
		 * so that costs at most STAGE_MIN more, and a reader that
		 * frees a few bytes at a time gets them, as from a socket,
		 * without a reference per piece into one buffer) */
		copy_ok = ch->gone || have + take <= rc->max_input ||
		    room < STAGE_MIN;
		ref_ok = ch->gone || rc->refs_held < rc->slots / 2;
		if ((take < STAGE_MIN || !ref_ok) && copy_ok) {
			if (evbuffer_add(ch->input, p, take) < 0) {
				held = 1;
				break;
			}
		} else if (ref_ok) {
			rc->rring->refs++;
			if (evbuffer_add_reference(ch->input, p, take,
			    rc_ref_cleanup, &rc->rring->slot[idx]) < 0) {
				rc->rring->refs--;
				held = 1;
				break;
			}
			if (b->refs++ == 0)
				rc->refs_held++;
		} else {
			held = 1;
			break;	/* held in its buffer: the peer waits */
		}
		have += take;
		b->off += (uint32_t)take;
		if (ch->mode == EVRDMA_CHANNEL_MESSAGE &&
		    evrdma__lenq_push(&ch->in_msgs, take) < 0) {
			if (rc->conn)
				rc_fail(rc, EVRDMA_REASON_RESOURCE);
			return;
		}
		moved = 1;
		if (b->off < b->len)
			continue;	/* cut at the high watermark */
		rxq_pop(rc);
		b->queued = 0;
		if (!b->refs)
			rb_release(rc, idx);
	}
	/* before the read callback: what it reads may let more in */
	if (evrdma__chan_watch_input(ch, held, have) < 0 && rc->conn)
		rc_fail(rc, EVRDMA_REASON_RESOURCE);
	if (moved)
		evrdma__chan_input_added(ch, have);
}

/* The peer has done @p n more of our pulls (in order). -1 when it claims
 * more than we made. */
static int
rc_pulls_done(struct ch_rdma *rc, unsigned n)
{
	if (n > rc->spq_n)
		return -1;
	for (; n; n--) {
		unsigned idx = rc->spq[rc->spq_head];

		rc->spq_head = (rc->spq_head + 1) % rc->slots;
		rc->spq_n--;
		rc->sflags[idx] |= SF_PULLED;
		if (rc->sflags[idx] & SF_SENT)
			slot_release(rc, idx);
	}
	rc_linger_check(rc);
	return 0;
}

/* A DATA message arrived in buffer @p idx. */
static void
rc_take_data(struct ch_rdma *rc, unsigned idx, const struct evrdma__ch_imm *m,
    uint32_t byte_len)
{
	struct ch_rbuf *b = &rc->rb[idx];

	if (rc->ch.peer_eof) {
		rb_free(rc, idx);
		rc_violation(rc, "data after EOF");
		return;
	}
	if (!evrdma__ch_data_allowed(rc->held + rc->ret_data + rc->withheld,
	    rc->slots)) {
		rb_free(rc, idx);
		rc_violation(rc, "data beyond its credits");
		return;
	}
	if (m->pull) {
		struct evrdma__ch_pull d;
		const char *why;

		if (!rc->pull_min || !rc->peer_src.rkey) {
			rb_free(rc, idx);
			rc_violation(rc, "pull not offered");
			return;
		}
		if (evrdma__ch_pull_decode(rc->rring->mem +
		    (size_t)idx * rc->slot_size, byte_len, rc->peer_slots,
		    rc->peer_slot_size, rc->slot_size, &d, &why) < 0) {
			rb_free(rc, idx);
			rc_violation(rc, why);
			return;
		}
		b->len = d.len;
		b->pslot = d.slot;
		b->state = RB_PULL;
		rc->pull_wait++;
	} else {
		if (byte_len == 0) {
			rb_free(rc, idx);
			rc_violation(rc, "empty data message");
			return;
		}
		b->len = byte_len;
		b->state = RB_READY;
	}
	b->off = 0;
	b->queued = 1;
	rc->rxq[rc->rx_tail++ % rc->nbuf] = idx;
	rc->held++;
	rc->rx_recent = 1;
	rc->rx_msgs++;
	rc->rx_bytes += b->len;
	if (rc->closing) {
		/* freed: nobody reads; the peer gets its credits (and its
		 * pulls reported done) so that it is not held up, and, unless
		 * our EOF went already, a RESET instead, as data arriving at
		 * a closed socket does */
		if (!rc->eof_sent)
			rc->reset_due = 1;
		if (b->state == RB_PULL) {
			b->state = RB_READY;
			rc->pull_wait--;
			rc->ret_pull++;
		}
		rc->rx_head = rc->rx_pull = rc->rx_tail;
		b->queued = 0;
		rb_release(rc, idx);
	}
}

/* A receive of a queue's pool: the channel whose QP took it, if it is
 * still there, gets the buffer (else NULL: the buffer is free again). */
static struct ch_rdma *
rc_pool_taker(struct evrdma__chpool *pool, struct evrdma_conn *c,
    const struct evrdma_wc *wc, unsigned idx)
{
	struct ch_rdma *rc = c ? evrdma__conn_owner(c) : NULL;

	if (!rc || rc->pool != pool || wc->status) {
		/* flushed, cancelled, or its channel went before it was
		 * polled */
		pool_free(pool, idx);
		return NULL;
	}
	pool->own[idx] = rc;
	return rc;
}

/* A message (or a failed receive) in buffer ref->idx: of the channel's
 * own ring (owner set), or of a queue's pool (owner NULL). */
static void
rc_recv_cb(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct ch_slotref *ref = arg;
	struct ch_rdma *rc = ref->ring->owner;
	unsigned idx = ref->idx;
	struct evrdma__ch_imm m;

	if (rc) {
		rc->posted--;
	} else {
		rc = rc_pool_taker(ref->ring->pool, c, wc, idx);
		if (!rc)
			return;
	}
	if (wc->status) {
		/* flushed (the connection is ending) or failed (it ends); the
		 * last of them tells that everything that arrived is in */
		rb_free(rc, idx);
		if (rc->ended && !rc->posted)
			rc_schedule(rc);
		return;
	}
	if (rc->violated) {
		rb_free(rc, idx);
		return;
	}
	if (wc->opcode != EVRDMA_OP_RECV || !wc->has_imm) {
		rb_free(rc, idx);
		rc_violation(rc, "not a SEND with immediate");
		return;
	}
	if (evrdma__ch_imm_decode(wc->imm_data, &m) < 0) {
		rb_free(rc, idx);
		rc_violation(rc, "bad immediate");
		return;
	}
	if (!evrdma__ch_return_valid(rc->s_credits, m.dret, rc->peer_slots) ||
	    !evrdma__ch_return_valid(rc->c_credits, m.cret, rc->peer_ctrl)) {
		rb_free(rc, idx);
		rc_violation(rc, "credits returned that were not lent");
		return;
	}
	if (rc_pulls_done(rc, m.pdone) < 0) {
		rb_free(rc, idx);
		rc_violation(rc, "pulls acknowledged that were not made");
		return;
	}
	rc->s_credits += m.dret;
	rc->c_credits += m.cret;
	if (rc->stall_t0 && m.dret) {
		rc->stall_us += evrdma__now_us() - rc->stall_t0;
		rc->stall_t0 = 0;
	}
	if (m.starved)
		rc->peer_starved = 1;
	if (m.type == EVRDMA_CH_DATA) {
		rc_take_data(rc, idx, &m, wc->byte_len);
	} else {
		rb_free(rc, idx);
		if (!evrdma__ch_ctrl_allowed(rc->ret_ctrl, rc->ctrl)) {
			rc_violation(rc, "control beyond its credits");
			return;
		}
		rc->ret_ctrl++;
		if (m.type == EVRDMA_CH_LOAN && rc_take_loan(rc, &m) < 0)
			return;
		if (m.type == EVRDMA_CH_EOF) {
			if (rc->ch.peer_eof) {
				rc_violation(rc, "a second EOF");
				return;
			}
			rc->ch.peer_eof = 1;
			rc->ch.peer_reset = m.reset;
		}
	}
	/* After the poll pass, not from inside it: sending there lets
	 * channels with traffic in flight refill ahead of the others
	 * (measured: unfair with 200 channels), and one pass per poll
	 * batches what all of its completions made due. */
	rc_schedule(rc);
}

static void
rc_pull_cb(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct ch_slotref *ref = arg;
	struct ch_rdma *rc = ref->ring->owner;
	struct ch_rbuf *b = &rc->rb[ref->idx];

	rc->pull_out--;
	if (wc->status) {
		/* its bytes are lost: the connection fails for it, and the
		 * stream cannot end in order */
		b->state = RB_LOST;
		rc->data_lost = 1;
		rc_schedule(rc);
		return;
	}
	b->state = RB_READY;
	rc->ret_pull++;
	rc->rx_pulls++;
	rc_schedule(rc);
}

/* Post the READs of pulls, in arrival order, as far as the send queue has
 * room for them beside our own messages. */
static int
rc_post_pulls(struct ch_rdma *rc)
{
	while (rc->rx_pull < rc->rx_tail) {
		unsigned idx = rc->rxq[rc->rx_pull % rc->nbuf];
		struct ch_rbuf *b = &rc->rb[idx];

		if (b->state == RB_PULL) {
			if (rc->pull_out >= rc->pull_cap)
				break;	/* rc_pull_cb resumes */
			if (evrdma_conn_post_read(rc->conn, rc->rmr,
			    (size_t)idx * rc->slot_size, b->len, &rc->peer_src,
			    (uint64_t)b->pslot * rc->peer_slot_size,
			    rc_pull_cb, &rc->rring->slot[idx]) < 0) {
				if (errno == EAGAIN)
					break;	/* a completion resumes */
				return -1;
			}
			b->state = RB_PULLING;
			rc->pull_wait--;
			rc->pull_out++;
		}
		rc->rx_pull++;
	}
	return 0;
}

/* ---- send side ---- */

/* A free send slot, keeping @p reserve free for the copy path. */
static int
slot_alloc(struct ch_rdma *rc, unsigned reserve)
{
	unsigned i;

	if (rc->sfree <= reserve)
		return -1;
	for (i = 0; i < rc->slots; i++) {
		unsigned idx = (rc->snext + i) % rc->slots;

		if (rc->sstate[idx] == SLOT_FREE) {
			rc->snext = (idx + 1) % rc->slots;
			rc->sfree--;
			return (int)idx;
		}
	}
	return -1;
}

static void
slot_release(struct ch_rdma *rc, unsigned idx)
{
	rc->sstate[idx] = SLOT_FREE;
	rc->sfree++;
}

static uint8_t *
slot_mem(struct ch_rdma *rc, unsigned idx)
{
	return rc->sring->mem + (size_t)idx * rc->slot_size;
}

/* A slot goes back without having been sent (a cancelled reservation, an
 * open write or a reservation dropped by a free or the connection's end):
 * its first @p len bytes, all the application may have written there,
 * are zeroed first, since a peer that pulls can read the whole ring and
 * they were never meant for it. */
static void
slot_drop(struct ch_rdma *rc, unsigned idx, size_t len)
{
	memset(slot_mem(rc, idx), 0, len);
	slot_release(rc, idx);
}

/* Output dropped a staged slot without sending it (the user drained
 * output, or the channel is going): free again, and zeroed, since a peer
 * that pulls could read it and it is no longer meant for the peer. */
static void
rc_staged_cleanup(const void *data, size_t len, void *arg)
{
	struct ch_slotref *ref = arg;
	struct ch_ring *ring = ref->ring;
	struct ch_rdma *rc = ring->owner;

	if (rc && rc->sstate[ref->idx] == SLOT_STAGED) {
		memset(slot_mem(rc, ref->idx), 0, len);
		slot_release(rc, ref->idx);
	}
	ring_unref(ring);
}

/* Copy @p len bytes into a free send slot (one stays for the copy path).
 * @return the slot, or -1 when none is free */
static int
slot_copy(struct ch_rdma *rc, const void *data, size_t len)
{
	int idx = slot_alloc(rc, 1);

	if (idx >= 0)
		memcpy(slot_mem(rc, (unsigned)idx), data, len);
	return idx;
}

/* Put the first @p len bytes of send slot @p idx into @p buf by reference,
 * staged: posted from where they are when they reach output's front.
 * -1 (out of memory) leaves the slot as it was. */
static int
slot_stage(struct ch_rdma *rc, struct evbuffer *buf, unsigned idx, size_t len)
{
	rc->sring->refs++;
	if (evbuffer_add_reference(buf, slot_mem(rc, idx), len,
	    rc_staged_cleanup, &rc->sring->slot[idx]) < 0) {
		rc->sring->refs--;
		return -1;
	}
	rc->sstate[idx] = SLOT_STAGED;
	return 0;
}

static void
rc_send_cb(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct ch_rdma *rc = arg;
	unsigned idx = rc->sfifo[rc->sfifo_head];

	rc->sfifo_head = (rc->sfifo_head + 1) % rc->slots;
	rc->sfifo_n--;
	/* a pull's slot is free once the peer has also done the pull */
	rc->sflags[idx] |= SF_SENT;
	if (!(rc->sflags[idx] & SF_PULL) || (rc->sflags[idx] & SF_PULLED) ||
	    wc->status)
		slot_release(rc, idx);
	/* a free slot matters only to output waiting for one, or to a
	 * reservation that found none; send queue room to waiting pulls */
	if (!wc->status && (rc->ch.out_len ||
	    rc->resv_wanted || rc->pull_wait))
		rc_schedule(rc);
}

/*
 * Post send slot @p idx holding @p n bytes as the next DATA message, with
 * the credits we owe; the caller checked the peer's credits.
 */
static int
rc_post_slot(struct ch_rdma *rc, unsigned idx, size_t n)
{
	size_t off = (size_t)idx * rc->slot_size, len = n;
	struct evrdma__ch_imm m;
	int pull;

	rc->sstate[idx] = SLOT_POSTED;
	/* pull while the peer keeps up with our pulls, write when it lags:
	 * the bytes move either way, but on a software device the work of
	 * moving them falls on the CPU of the side that posts the request,
	 * so this shares it */
	pull = rc->pullable && n >= rc->peer_pull_min &&
	    rc->spq_n < (rc->slots / 4 ? rc->slots / 4 : 1);
	rc->sflags[idx] = pull ? SF_PULL : 0;
	if (pull) {
		/* the peer READs the bytes where they are; we send only
		 * where: a descriptor after the slots */
		struct evrdma__ch_pull d = { idx, (uint32_t)n };

		off = (size_t)rc->slots * rc->slot_size +
		    (size_t)idx * EVRDMA_CH_PULL_DESC_LEN;
		evrdma__ch_pull_encode(rc->sring->mem + off, &d);
		n = EVRDMA_CH_PULL_DESC_LEN;
	}
	if (rc_take_returns(rc, EVRDMA_CH_DATA, &m) < 0)
		return -1;
	/* out of credits, or of send slots that pulls hold: the peer
	 * answers at once (evrdma__ch_credit_due) */
	m.starved = rc->s_credits == 1 || (pull && !rc->sfree);
	m.pull = (uint8_t)pull;
	if (evrdma__conn_post_send_imm(rc->conn, rc->smr, off, n,
	    evrdma__ch_imm_encode(&m), rc_send_cb, rc) < 0)
		return -1;
	rc->sfifo[(rc->sfifo_head + rc->sfifo_n++) % rc->slots] = idx;
	if (pull)
		rc->spq[(rc->spq_head + rc->spq_n++) % rc->slots] = idx;
	rc->s_credits--;
	rc->tx_msgs++;
	rc->tx_bytes += len;
	if (pull) {
		rc->tx_pulls++;
		rc->ch.base->stats.ch_pulled++;
	} else {
		rc->ch.base->stats.ch_written++;
	}
	return 0;
}

/* Send the open write, then as much of output as the credits and our send
 * ring allow: 1 when something went, 0 when nothing did, -1 on failure. */
static int
rc_send_data(struct ch_rdma *rc)
{
	struct evrdma_channel *ch = &rc->ch;
	size_t olen;
	int sent = 0;

	if (rc->wopen >= 0) {
		/* it was opened with a credit in hand and goes first, so
		 * the credit is still there */
		unsigned idx = (unsigned)rc->wopen;

		rc->wopen = -1;
		if (rc_post_slot(rc, idx, rc->wopen_len) < 0)
			return -1;
		sent = 1;
	}
	while (((ch->enabled & EV_WRITE) || rc->closing) &&
	    evrdma__ch_can_send(rc->s_credits) && (olen = ch->out_len)) {
		struct evbuffer_iovec v;
		size_t n, off;
		int idx = -1;

		if (ch->mode == EVRDMA_CHANNEL_MESSAGE) {
			n = evrdma__lenq_front(&ch->out_msgs);
			if (n > rc_chunk(rc) || n > olen || !n) {
				/* written before connect, larger than the
				 * peer's slots: it cannot go as one message */
				evrdma__fail(EMSGSIZE, "queued message of %zu "
				    "bytes exceeds the peer's %zu", n,
				    rc_chunk(rc));
				rc_fail(rc, EVRDMA_REASON_RESOURCE);
				return -1;
			}
		} else {
			n = olen < rc_chunk(rc) ? olen : rc_chunk(rc);
		}
		/* a staged slot at the front, exactly this message, or in
		 * stream mode at least half a message (sent alone: copying
		 * it to coalesce would cost more than the slot space saved):
		 * post it where it is; anything else is copied into a free
		 * slot */
		if (evbuffer_peek(ch->output, -1, NULL, &v, 1) == 1 &&
		    (v.iov_len == n || (ch->mode != EVRDMA_CHANNEL_MESSAGE &&
		    v.iov_len < n && v.iov_len >= rc_chunk(rc) / 2)) &&
		    (uint8_t *)v.iov_base >= rc->sring->mem &&
		    (uint8_t *)v.iov_base < rc->sring->mem +
		    (size_t)rc->slots * rc->slot_size) {
			off = (size_t)((uint8_t *)v.iov_base - rc->sring->mem);
			if (off % rc->slot_size == 0 &&
			    rc->sstate[off / rc->slot_size] == SLOT_STAGED)
				idx = (int)(off / rc->slot_size);
		}
		ch->out_own = 1;
		if (idx >= 0) {
			n = v.iov_len;
			rc->sstate[idx] = SLOT_POSTED;
			evbuffer_drain(ch->output, n);
		} else {
			idx = slot_alloc(rc, 0);
			if (idx < 0) {
				ch->out_own = 0;
				break;	/* all in flight: a completion resumes */
			}
			rc->sstate[idx] = SLOT_POSTED;
			evbuffer_remove(ch->output, slot_mem(rc, (unsigned)idx),
			    n);
		}
		ch->out_own = 0;
		if (ch->mode == EVRDMA_CHANNEL_MESSAGE)
			evrdma__lenq_pop(&ch->out_msgs);
		if (rc_post_slot(rc, (unsigned)idx, n) < 0)
			return -1;
		sent = 1;
	}
	/* output waits for the peer's credits: a stall begins (counted;
	 * the clock is read only here and when it ends) */
	if (!rc->s_credits && ch->out_len && !rc->stall_t0) {
		rc->stall_t0 = evrdma__now_us();
		rc->stalls++;
	}
	return sent;
}

/* Can the pass send data? (Control messages go on while closing.) */
static int
rc_up(const struct ch_rdma *rc)
{
	return rc->conn && !rc->conn_freed && !rc->ended && rc->established &&
	    !rc->fail_reason;
}

/* The sends of a pass, under one doorbell: pulls, data, EOF, credits.
 * Returns as rc_send_data. */
static int
rc_send_all(struct ch_rdma *rc)
{
	struct evrdma_channel *ch = &rc->ch;
	int sent = 0;

	evrdma__conn_cork(rc->conn);
	if (rc->pull_wait && rc_post_pulls(rc) < 0)
		sent = -1;
	/* (a freed channel sends what its user was told is written: the
	 * adapter's output; a channel's own was discarded at the free) */
	if (sent >= 0 && (!rc->closing || ch->out_taken))
		sent = rc_send_data(rc);
	if (sent >= 0 && (rc->reclaim_want || rc->yield_asked) &&
	    rc_send_loans(rc) < 0)
		sent = -1;
	/* the end after everything sent: EOF, or a RESET when freed with
	 * bytes unread (a socket closed so resets the connection, but sends
	 * what its kernel accepted first) */
	if (sent >= 0 && !rc->eof_sent && (rc->closing || ch->shut_wr) &&
	    !ch->out_len && rc->wopen < 0) {
		int r = rc_post_ctrl(rc, EVRDMA_CH_EOF, rc->spq_n != 0,
		    rc->closing && rc->reset_due);

		if (r < 0)
			sent = -1;
		else
			rc->eof_sent = r;
	}
	if (sent >= 0 && (evrdma__ch_credit_due(rc->ret_data, rc->ret_ctrl,
	    rc->ret_pull, rc->pull_wait || rc->pull_out, rc->slots, rc->ctrl,
	    rc->peer_starved) || ((rc->grant_due || rc->ret_idle) &&
	    rc->ret_data))) {
		int r = rc_post_ctrl(rc, EVRDMA_CH_CREDIT, 0, 0);

		if (r < 0)
			sent = -1;
		else if (r > 0)
			rc->grant_due = rc->ret_idle = 0;
	}
	evrdma__conn_uncork(rc->conn);
	return sent;
}

/*
 * The read callbacks' fast path: a write made while the pass that runs
 * them is under way (it sends before the loop goes on), into an empty
 * output, with a credit in hand, is copied into a free send slot that
 * stays open for the writes that follow it into an empty output while
 * they fit (stream mode), and that the pass posts as it is. A reply then
 * costs no evbuffer chain, callbacks or drain, and it goes out as soon as
 * it would have from output. Output's length does not count it: it is
 * already on its way, as bytes a socket accepted.
 */
static int
rc_write_open(struct ch_rdma *rc, const void *data, size_t len)
{
	struct evrdma_channel *ch = &rc->ch;
	int idx;

	if (!rc->pre_send || ch->out_len)
		return -1;
	if (rc->wopen >= 0) {
		if (ch->mode == EVRDMA_CHANNEL_MESSAGE ||
		    rc->wopen_len + len > rc_chunk(rc))
			return -1;
		memcpy(slot_mem(rc, (unsigned)rc->wopen) + rc->wopen_len, data,
		    len);
		rc->wopen_len += len;
		return 0;
	}
	if (!rc_up(rc) || !(ch->enabled & EV_WRITE) ||
	    !evrdma__ch_can_send(rc->s_credits) || len > rc_chunk(rc))
		return -1;
	idx = slot_copy(rc, data, len);
	if (idx < 0)
		return -1;
	rc->sstate[idx] = SLOT_OPEN;
	rc->wopen = idx;
	rc->wopen_len = len;
	return 0;
}

/* Writing was disabled with a write open: put it in front of output. */
static int
rc_wopen_to_output(struct ch_rdma *rc)
{
	struct evrdma_channel *ch = &rc->ch;
	struct evbuffer *tmp = evbuffer_new();
	int rc_;

	if (!tmp)
		return -1;
	if ((ch->mode == EVRDMA_CHANNEL_MESSAGE &&
	    evrdma__lenq_push_front(&ch->out_msgs, rc->wopen_len) < 0) ||
	    slot_stage(rc, tmp, (unsigned)rc->wopen, rc->wopen_len) < 0) {
		evbuffer_free(tmp);
		return -1;
	}
	rc->wopen = -1;
	/* libevent has no prepend of a reference: by way of a buffer */
	ch->out_own = 1;
	rc_ = evbuffer_prepend_buffer(ch->output, tmp);
	ch->out_own = 0;
	evbuffer_free(tmp);	/* if the prepend failed, frees the slot */
	return rc_;
}

/* Drop the open write and the reservation (the channel is going or the
 * connection is over). */
static void
rc_drop_pending_writes(struct ch_rdma *rc)
{
	if (rc->wopen >= 0) {
		slot_drop(rc, (unsigned)rc->wopen, rc->wopen_len);
		rc->wopen = -1;
	}
	if (rc->resv >= 0) {
		slot_drop(rc, (unsigned)rc->resv, rc->resv_max);
		rc->resv = -1;
	}
}

/*
 * The open write is sent by this pass, unless the connection is over (it
 * goes as unsent output does) or writing was disabled since (it goes to
 * the front of output, to wait there).
 */
static void
rc_wopen_settle(struct ch_rdma *rc)
{
	if (rc->closing)
		return;		/* (kept only when taken: out_taken) */
	if (!rc_up(rc)) {
		slot_drop(rc, (unsigned)rc->wopen, rc->wopen_len);
		rc->wopen = -1;
		return;
	}
	if (!(rc->ch.enabled & EV_WRITE) && rc_wopen_to_output(rc) < 0) {
		if (rc->wopen >= 0) {
			slot_drop(rc, (unsigned)rc->wopen, rc->wopen_len);
			rc->wopen = -1;
		}
		rc_fail(rc, EVRDMA_REASON_RESOURCE);
	}
}

/* ---- the pass ---- */

/* Received bytes that can still reach input (data that is lost, or that
 * waits for a READ that will never be posted, cannot). */
static int
rc_waiting(struct ch_rdma *rc)
{
	if (rc->rx_head == rc->rx_tail)
		return 0;
	if (!rc->ch.gone)
		return 1;	/* more may still come in order */
	if (rxq_ready(rc))
		return 1;
	/* the connection is over with a message that never arrived whole:
	 * what follows it can never be delivered, and the end is no
	 * orderly one */
	if (!rc->data_lost)
		evrdma__log(EVRDMA_LOG_INFO, "channel %p: messages lost with "
		    "the connection", (void *)rc);
	rc->data_lost = 1;
	rc->ch.peer_eof = 0;
	while (rc->rx_head < rc->rx_tail) {
		unsigned idx = rc->rxq[rc->rx_head % rc->nbuf];

		rc->rb[idx].queued = 0;
		rxq_pop(rc);
		if (!rc->rb[idx].refs)
			rb_release(rc, idx);
	}
	return 0;
}

/*
 * The connection is over and everything that arrived is in: a disconnect
 * with no EOF, once every message we sent was consumed (all our credits
 * back, nothing in flight, nothing to pull) and nothing was lost, is the
 * peer's process going with nothing of ours unread, which over TCP its
 * kernel answers with a FIN. (Judged here, not at the disconnect: its
 * last messages may still be in the CQ then. A peer on a pool lends its
 * credits: there the count cannot tell.)
 */
static void
rc_judge_end(struct ch_rdma *rc)
{
	if (rc->ch.gone_reason == EVRDMA_REASON_DISCONNECTED &&
	    rc->established && !rc->ch.peer_eof && !rc->violated &&
	    !rc->peer_lends && !rc->data_lost &&
	    rc->s_credits == rc->peer_slots && !rc->sfifo_n && !rc->spq_n &&
	    rc->wopen < 0)
		rc->ch.peer_eof = 1;
}

/* What a pass does first on a queue's pool. */
static void
rc_pool_pass(struct ch_rdma *rc)
{
	if (rc->ended && rc->conn && !rc->conn_freed) {
		/* A pool's receives are not flushed when the connection
		 * ends: what the peer sent before it went is in the queue's
		 * CQ, maybe not polled yet (the end came on the CM's fd).
		 * The end asked for a poll (own_ended()); once a poll has
		 * found the CQ empty, everything is in, and the connection
		 * goes. The poll runs from the loop, not from here: a pass
		 * must not run other connections' completions (and their
		 * owners' callbacks) inside itself. */
		struct evrdma_cq *cq = evrdma__srq_cq(rc->srq);

		if (cq && !cq->dev->dead && cq->emptied == rc->drain_mark) {
			rc->again = 1;
			return;
		}
		rc_conn_free(rc);
	} else if (rc->withheld && rc->peer_starved && rc_up(rc)) {
		/* lent on demand (the peer said it is starved, and the
		 * credits due go back at once): a channel that never ran
		 * short keeps the one credit it joined with */
		rc_lend(rc);
	}
}

/*
 * Once per loop iteration with something due (and after every poll pass
 * that made something due): deliver, let the read callbacks reply, send
 * (coalescing all writes of the iteration) with the credits we owe, top
 * up the receives, report the end if it is due, then the write callback.
 */
static void
rc_pass(struct ch_rdma *rc)
{
	struct evrdma_channel *ch = &rc->ch;
	int sent = 0;

	if (!ch->base)
		return;
	/* this pass does what a scheduled one would */
	evrdma__work_cancel(ch->base, &rc->pump_work);
	evrdma__chan_ref(ch);
	if (rc->pool)
		rc_pool_pass(rc);
	if (rc->established && !ch->freed && !ch->rd_ended) {
		/* what the read callback writes or frees is sent below */
		rc->pre_send = 1;
		rc_deliver(rc);
		rc->pre_send = 0;
	}
	if (rc->wopen >= 0)
		rc_wopen_settle(rc);
	if (rc->conn && !rc->conn_freed && !rc->ended && !rc->fail_reason &&
	    (rc->established || rc->closing)) {
		sent = rc_send_all(rc);
		if (sent < 0) {
			if (rc->conn)
				rc_fail(rc, EVRDMA_REASON_RESOURCE);
		} else if (rc->nfree >= (rc->spare ? rc->spare : 1) &&
		    rc_post_free(rc) < 0 && errno != EPIPE) {
			/* the sends are out: now top up the receives, once
			 * every spare is used (in batches of 4, not 2: 60
			 * instructions less per 64 B round trip, callgrind;
			 * the credits' cover, rc_returns_ready(), still posts
			 * first whenever a return needs it) */
			rc_fail(rc, EVRDMA_REASON_RESOURCE);
		}
	}
	/* The peer reset the connection: nothing more comes; once what we
	 * pull of its messages is in, ours ends too (what output holds
	 * cannot go: ERROR | WRITING, as a socket's write after a reset) */
	if (ch->peer_reset && rc->conn && !rc->conn_freed && !rc->ended &&
	    !rc->pull_wait && !rc->pull_out && !rc->closing) {
		if (!ch->gone_reason)
			ch->gone_reason = EVRDMA_REASON_DISCONNECTED;
		rc_conn_free(rc);
	}
	/* The connection ended and every receive has come back (flushed):
	 * nothing more arrives, and nothing more can be sent. (closed()
	 * says the same, later: it also waits for the peer's DISCONNECTED.) */
	if (rc->ended && !rc->posted && !rc->pull_out && !ch->gone &&
	    (!rc->pool || rc->conn_freed)) {
		rc_judge_end(rc);
		ch->gone = 1;
		rc_drop_pending_writes(rc);
		if (rc->pool)
			rc_pool_depart(rc);
	}
	if (rc->established && (ch->peer_eof || ch->gone))
		evrdma__chan_check_end(ch, rc_waiting(rc));
	/* a reservation that found no slot is told of a free one as a
	 * write is of drained output */
	if (rc->resv_wanted && rc->sfree > 1) {
		rc->resv_wanted = 0;
		sent = 1;
	}
	if (rc->flush_sent) {
		rc->flush_sent = 0;
		sent = 1;
	}
	if (rc->established && !ch->freed)
		evrdma__chan_sent(ch, sent > 0);
	/* credits owed once the traffic paused go back then (RET_IDLE_MS):
	 * not at once (a stream would send a CREDIT per pass), not never (a
	 * peer that ends would not know we consumed its last bytes) */
	if (rc->ret_data && !rc->ret_armed && rc_up(rc) && rc->ret_ev &&
	    evrdma__ev_timer_start(rc->ret_ev, RET_IDLE_MS) == 0) {
		rc->ret_armed = 1;
		rc->ret_mark = rc->rx_tail;
	}
	rc_linger_check(rc);
	if (rc->again) {
		rc->again = 0;
		rc_schedule(rc);
	}
	evrdma__chan_unref(ch);
}

static void
rc_ret_idle(void *arg)
{
	struct ch_rdma *rc = arg;

	rc->ret_armed = 0;
	if (!rc->ret_data || !rc_up(rc))
		return;
	if (rc->rx_tail != rc->ret_mark) {
		/* traffic since: the returns ride on it, or on the next
		 * quarter of the ring; look again later */
		if (evrdma__ev_timer_start(rc->ret_ev, RET_IDLE_MS) == 0) {
			rc->ret_armed = 1;
			rc->ret_mark = rc->rx_tail;
		}
		return;
	}
	rc->ret_idle = 1;
	rc_schedule(rc);
}

static void
rc_pump_work(struct evrdma__work *w)
{
	rc_pass((struct ch_rdma *)((char *)w -
	    offsetof(struct ch_rdma, pump_work)));
}

/* rc_pass() at the end of this poll pass, or at the next iteration. */
static void
rc_schedule(struct ch_rdma *rc)
{
	if (rc->ch.base)
		evrdma__work_queue(rc->ch.base, &rc->pump_work);
}

/* ---- the connection's owner ---- */

/* The receive buffers are posted again and again, each with a request of
 * its own made once (req.c's receive ring). */
static int
rc_recv_ring(struct ch_rdma *rc, struct evrdma_conn *conn)
{
	void **args = malloc(rc->nbuf * sizeof(*args));
	unsigned i;
	int r;

	if (!args)
		return evrdma__fail(ENOMEM, "out of memory");
	for (i = 0; i < rc->nbuf; i++)
		args[i] = &rc->rring->slot[i];
	r = evrdma__conn_ring_init(conn, rc->rmr, rc->slot_size, rc->nbuf,
	    rc_recv_cb, args);
	free(args);
	return r;
}

/* Whether the pool has room for one more channel: its control credits
 * and one data credit. If not, those over their share are asked for what
 * they hold beyond it, so that a later request may find room. */
static int
pool_admits(struct evrdma__chpool *pool, unsigned ctrl)
{
	if (pool_room(pool) >= ctrl + 1)
		return 0;
	pool_reclaim_over_share(pool);
	return evrdma__fail(ENOBUFS, "the channel queue has no room for "
	    "another channel (%u of %u buffers promised)",
	    pool->committed + pool->orphans + pool->reserve, pool->nbuf);
}

/*
 * On a queue's pool: the send ring in the queue's PD, for local access
 * only (any peer on the queue could reach a remote-readable region in
 * that PD by guessing its rkey, so there are no pulls). Nothing of the
 * pool is committed yet (rc_pool_join()): all R credits are withheld.
 */
static int
rc_pool_setup(struct ch_rdma *rc, struct evrdma_conn *conn)
{
	rc->pull_cap = 0;
	rc->pull_min = 0;
	rc->src_remote = 0;
	if (pool_admits(rc->pool, rc->ctrl) < 0)
		return -1;
	if (evrdma__mem_pin_check(rc->sring->len) < 0)
		return -1;
	rc->smr = evrdma__mr_reg(rc->ch.base, evrdma__conn_pd(conn),
	    rc->sring->mem, rc->sring->len, 0);
	if (!rc->smr)
		return -1;
	return pool_post(rc->pool);
}

/* Established: the channel takes its place in the pool (its control
 * credits and one data credit), and grants that credit to the peer.
 * 0, or -1 (ENOBUFS) when the pool has no room any more. */
static int
rc_pool_join(struct ch_rdma *rc)
{
	struct evrdma__chpool *pool = rc->pool;

	if (pool_admits(pool, rc->ctrl) < 0)
		return -1;
	pool->committed += rc->ctrl + 1;
	pool->ctrl_sum += rc->ctrl;
	pool->nchan++;
	LIST_INSERT_HEAD(&pool->chans, rc, pool_link);
	rc->pool_joined = 1;
	rc->withheld = rc->slots - 1;
	rc->ret_data++;
	rc->grant_due = 1;	/* it has nothing: the grant goes at once */
	rc_schedule(rc);
	return 0;
}

/* The connection is over: the channel gives up its place (its control
 * credits, its share, the pool's tick) and keeps only the buffers it
 * still holds for the application, each going back as it lets go
 * (rb_release()), whether or not the application frees the channel. */
static void
rc_pool_depart(struct ch_rdma *rc)
{
	struct evrdma__chpool *pool = rc->pool;
	unsigned lent = rc->slots - rc->withheld;

	if (!rc->pool_joined)
		return;
	if (lent > rc->held) {
		pool->committed -= lent - rc->held;
		rc->withheld = rc->slots - rc->held;
	}
	pool->committed -= rc->ctrl;
	pool->ctrl_sum -= rc->ctrl;
	pool->nchan--;
	LIST_REMOVE(rc, pool_link);
	rc->pool_joined = 0;
	rc->reclaim_want = rc->reclaim_out = 0;
	pool_room_freed(pool);
}

/* Leave the pool: the buffers this channel holds go back to it, or, while
 * the application still references their bytes, when it lets go. */
static void
rc_pool_leave(struct ch_rdma *rc)
{
	struct evrdma__chpool *pool = rc->pool;
	unsigned i;

	for (i = 0; i < pool->nbuf; i++) {
		if (pool->own[i] != rc)
			continue;
		pool->rb[i].queued = 0;
		if (pool->rb[i].refs) {
			pool->own[i] = NULL;
			pool->orphans++;
		} else {
			pool_free(pool, i);
		}
	}
	rc_pool_depart(rc);
	/* the buffers it held are free or orphans now */
	pool->committed -= rc->slots - rc->withheld;
	rc->withheld = rc->slots;
	pool_room_freed(pool);
}

/* Register the rings and post the receives. */
static int
rc_setup(struct ch_rdma *rc, struct evrdma_conn *conn, int src_remote)
{
	struct evrdma_base *base = rc->ch.base;
	struct evrdma__pd *pd = evrdma__conn_pd(conn);
	const struct ibv_device_attr *da = evrdma__conn_dev_attr(conn);
	unsigned sq = evrdma__conn_sq_depth(conn);

	/* We pull when the device can issue READs and the send queue has
	 * room for them beside our own messages (slots + ctrl at most). */
	if (rc->pool)
		return rc_pool_setup(rc, conn);
	rc->pull_cap = sq > rc->slots + rc->ctrl ? sq - rc->slots - rc->ctrl :
	    0;
	if (rc->pull_cap > rc->slots)
		rc->pull_cap = rc->slots;
	rc->pull_min = da->max_qp_init_rd_atom > 0 && rc->pull_cap ?
	    base->cfg.ch_pull_min : 0;
	rc->src_remote = src_remote && da->max_qp_rd_atom > 0;
	if (evrdma__mem_pin_check(rc->rring->len + rc->sring->len) < 0)
		return -1;
	rc->rmr = evrdma__mr_reg(base, pd, rc->rring->mem, rc->rring->len,
	    EVRDMA_ACCESS_LOCAL_WRITE);
	rc->smr = evrdma__mr_reg(base, pd, rc->sring->mem, rc->sring->len,
	    rc->src_remote ? EVRDMA_ACCESS_REMOTE_READ : 0);
	if (!rc->rmr || !rc->smr || rc_recv_ring(rc, conn) < 0)
		return -1;
	return rc_post_free(rc);
}

static void
rc_hs_out(struct ch_rdma *rc, uint8_t *out, size_t *len)
{
	struct evrdma__ch_hs hs;

	memset(&hs, 0, sizeof(hs));
	hs.mode = rc->ch.mode == EVRDMA_CHANNEL_MESSAGE;
	hs.slots = (uint16_t)rc->slots;
	hs.ctrl = (uint8_t)rc->ctrl;
	hs.slot_size = rc->slot_size;
	hs.pull_min = rc->pull_min;
	hs.lend = rc->pool != NULL;
	if (rc->src_remote) {
		hs.src_rkey = rc->smr->mr->rkey;
		hs.src_base = rc->smr->iova;
	}
	evrdma__ch_hs_encode(out, &hs);
	*len = EVRDMA_CH_HS_LEN;
}

/* The peer's handshake: 0, or -1 with a reject code. */
static int
rc_hs_in(struct ch_rdma *rc, const uint8_t *p, size_t len, int *code)
{
	struct evrdma__ch_hs hs;
	int err = evrdma__ch_hs_decode(p, len, &hs);

	if (err != EVRDMA_CH_HS_OK ||
	    hs.mode != (rc->ch.mode == EVRDMA_CHANNEL_MESSAGE)) {
		evrdma__log(EVRDMA_LOG_WARN, "channel %p: bad handshake: %s",
		    (void *)rc, err ? evrdma__ch_hs_strerror(err) :
		    "the other mode");
		*code = err == EVRDMA_CH_HS_VERSION ? EVRDMA_REJECT_VERSION :
		    EVRDMA_REJECT_PROTOCOL;
		return -1;
	}
	rc->peer_slots = hs.slots;
	rc->peer_ctrl = hs.ctrl;
	rc->peer_slot_size = hs.slot_size;
	rc->peer_pull_min = hs.pull_min;
	/* a peer on a pool lends its credits as it has buffers */
	rc->s_credits = hs.lend ? EVRDMA_CH_LEND_INITIAL : hs.slots;
	rc->peer_lends = hs.lend;
	rc->c_credits = hs.ctrl;
	if (hs.src_rkey) {
		rc->peer_src.rkey = hs.src_rkey;
		rc->peer_src.addr = hs.src_base;
		rc->peer_src.len = (uint64_t)hs.slots * hs.slot_size;
	}
	return 0;
}

static int
own_prepare(void *owner, struct evrdma_conn *conn, const uint8_t *peer,
    size_t peer_len, uint8_t *out, size_t *len, int *code)
{
	struct ch_rdma *rc = owner;

	*code = EVRDMA_REJECT_RESOURCES;
	if (peer && rc_hs_in(rc, peer, peer_len, code) < 0) {
		errno = EPROTO;
		return -1;
	}
	/* the requester offers its send ring only if it may be read; the
	 * listener knows already whether its peer will pull */
	if (rc_setup(rc, conn, peer ? rc->peer_pull_min > 0 : 1) < 0) {
		evrdma__log(EVRDMA_LOG_WARN, "channel %p: %s", (void *)rc,
		    evrdma_errmsg());
		return -1;
	}
	rc_hs_out(rc, out, len);
	return 0;
}

/* A peer that will not pull reads nothing of ours: the requester's send
 * ring, offered before it knew, is registered again, local only. */
static int
rc_unexpose(struct ch_rdma *rc, struct evrdma_conn *conn)
{
	struct evrdma_mr *mr;

	mr = evrdma__mr_reg(rc->ch.base, evrdma__conn_pd(conn),
	    rc->sring->mem, rc->sring->len, 0);
	if (!mr)
		return -1;
	evrdma_mr_free(rc->smr);
	rc->smr = mr;
	rc->src_remote = 0;
	return 0;
}

static int
own_established(void *owner, struct evrdma_conn *conn, const uint8_t *peer,
    size_t peer_len)
{
	struct ch_rdma *rc = owner;
	int code;

	if (!rc->passive) {
		if (rc_hs_in(rc, peer, peer_len, &code) < 0)
			return -1;
		if (!rc->peer_pull_min && rc->src_remote &&
		    rc_unexpose(rc, conn) < 0)
			return -1;
	}
	rc->pullable = rc->peer_pull_min && rc->src_remote;
	if (!rc->pull_min)
		rc->peer_src.rkey = 0;	/* we never read it */
	if (rc->pool && rc_pool_join(rc) < 0) {
		evrdma__log(EVRDMA_LOG_WARN, "channel %p: %s", (void *)rc,
		    evrdma_errmsg());
		rc_fail(rc, EVRDMA_REASON_RESOURCE);
		return 0;
	}
	if (!rc->passive) {
		rc->established = 1;
		evrdma__chan_connected(&rc->ch);
		rc_schedule(rc);
	}
	return 0;
}

static void
own_ended(void *owner, struct evrdma_conn *conn, int reason, int err)
{
	struct ch_rdma *rc = owner;

	rc->ended = 1;
	if (!rc->ch.gone_reason)
		rc->ch.gone_reason = reason;
	if (reason == EVRDMA_REASON_DNS)
		rc->ch.dns_error = conn->dns_error;
	rc_drop_pending_writes(rc);
	/* the receives flush now: every message that arrived is ours before
	 * closed() (a pool's are not flushed: the pass takes what arrived
	 * first, after a poll of the queue's CQ, rc_pool_pass()) */
	if (!rc->pool) {
		rc_conn_free(rc);
	} else {
		struct evrdma_cq *cq = evrdma__srq_cq(rc->srq);

		if (cq) {
			rc->drain_mark = cq->emptied;
			evrdma__dev_poll_soon(cq->dev);
		}
	}
	if (!rc->established && !rc->passive && !rc->closing)
		evrdma__chan_connect_failed(&rc->ch, reason);
	rc_schedule(rc);
}

/* The base goes: the channel lets go of it, its pass included, and
 * becomes a husk. */
static void
rc_orphan(struct ch_rdma *rc)
{
	evrdma__work_cancel(rc->ch.base, &rc->pump_work);
	evrdma__chan_orphan(&rc->ch);
}

static void
own_closed(void *owner, int husk)
{
	struct ch_rdma *rc = owner;
	struct evrdma_channel *ch = &rc->ch;
	int never_handed = rc->passive && !rc->established && !ch->freed;

	if (rc->conn)
		rc->ka_probes = rc->conn->ka_probes;
	rc->conn = NULL;
	evrdma__ev_free(rc->linger_ev);
	evrdma__ev_free(rc->ret_ev);
	rc->linger_ev = rc->ret_ev = NULL;
	rc->ret_armed = 0;
	evrdma_mr_free(rc->rmr);
	evrdma_mr_free(rc->smr);
	rc->rmr = rc->smr = NULL;
	rc_drop_pending_writes(rc);
	if (!ch->gone_reason)
		ch->gone_reason = EVRDMA_REASON_DISCONNECTED;
	if (!ch->gone)
		rc_judge_end(rc);
	ch->gone = 1;
	if (rc->pool)
		rc_pool_depart(rc);
	if (husk) {
		rc_orphan(rc);
	} else {
		rc_schedule(rc);
	}
	/* a request of a listener's that never reached the user: nobody
	 * else will free it */
	if (never_handed) {
		ch->freed = 1;
		evrdma__chan_unref(ch);
	}
	evrdma__chan_unref(ch);		/* the connection's reference */
}

static const struct evrdma__owner_ops rc_owner_ops = {
	.prepare = own_prepare,
	.established = own_established,
	.ended = own_ended,
	.closed = own_closed,
};

/* ---- the transport's ops ---- */

static void
op_kick(struct evrdma_channel *ch)
{
	struct ch_rdma *rc = to_rc(ch);

	/* inside the read callbacks, the pass itself sends next; what it
	 * cannot do any more (deliver what the callback made room for) the
	 * next pass does */
	if (rc->pre_send)
		rc->again = 1;
	else
		rc_schedule(rc);
}

static int
op_flush(struct evrdma_channel *ch)
{
	struct ch_rdma *rc = to_rc(ch);

	if (!rc_up(rc))
		return evrdma__fail(rc->established ? EPIPE : ENOTCONN,
		    "channel not connected");
	if (rc->pre_send)
		return 0;	/* the pass sends when the callback returns */
	switch (rc_send_all(rc)) {
	case -1:
		rc_fail(rc, EVRDMA_REASON_RESOURCE);
		return -1;
	case 1:
		rc->flush_sent = 1;
		break;
	}
	/* what is due to the user (the write callback) comes from the pass */
	rc_schedule(rc);
	return 0;
}

static void
op_close(struct evrdma_channel *ch)
{
	struct ch_rdma *rc = to_rc(ch);

	if (evrdma__forked)
		return;	/* the parent's connection: this process lets it be */
	rc->closing = 1;
	if (rc->resv >= 0) {
		slot_drop(rc, (unsigned)rc->resv, rc->resv_max);
		rc->resv = -1;
	}
	if (!ch->out_taken) {
		/* unsent output is discarded, as bufferevent_free() does,
		 * and an open write with it (evrdma/channel.h) */
		rc_drop_pending_writes(rc);
		ch->out_own = 1;
		evbuffer_drain(ch->output, evbuffer_get_length(ch->output));
		ch->out_own = 0;
	}
	if (!ch->base)
		return;		/* a husk: nothing left to close */
	if (!rc_up(rc) || ch->peer_reset) {
		rc_conn_free(rc);
		return;
	}
	/* freed with bytes it never read: not an orderly end, as a socket
	 * closed with unread data resets the connection */
	if (evbuffer_get_length(ch->input) || rc->rx_head != rc->rx_tail)
		rc->reset_due = 1;
	/* What was sent (and, for the adapter, what output holds) arrives,
	 * then the end: EOF, or RESET; we wait until the peer has it and
	 * has pulled what it was to pull, then disconnect, at most the
	 * teardown timeout. The sends go now, not at the next pass: a
	 * program that frees and returns from main (the usual end of a
	 * short client) runs no pass again, and its peer must still get
	 * the end, with the credits we owe it, as a socket's FIN. */
	evrdma__ev_timer_start(rc->linger_ev,
	    ch->base->cfg.timeout_ms[EVRDMA_TIMEOUT_TEARDOWN]);
	if (!rc->pre_send && !rc->fail_reason && rc_send_all(rc) < 0)
		rc_fail(rc, EVRDMA_REASON_RESOURCE);
	rc_schedule(rc);
}

/* The process exits (exit(), a return from main) with the channel not
 * freed: what was sent arrives, then its end, EOF or RESET, as the kernel
 * ends a socket of an exiting process; nothing is waited for. */
static void
op_exiting(struct evrdma_channel *ch)
{
	struct ch_rdma *rc = to_rc(ch);

	if (!rc_up(rc) || rc->closing || rc->eof_sent || ch->peer_reset)
		return;
	rc->closing = 1;
	if (evbuffer_get_length(ch->input) || rc->rx_head != rc->rx_tail)
		rc->reset_due = 1;
	if (!ch->out_taken) {
		rc->wopen = -1;		/* (its bytes: user space, lost) */
		ch->out_own = 1;
		evbuffer_drain(ch->output, evbuffer_get_length(ch->output));
		ch->out_own = 0;
	}
	(void)rc_send_all(rc);
}

static void
op_abort(struct evrdma_channel *ch, int reason)
{
	struct ch_rdma *rc = to_rc(ch);

	rc_fail(rc, reason);
}

static int
op_connect(struct evrdma_channel *ch, const struct sockaddr *sa, int socklen)
{
	struct ch_rdma *rc = to_rc(ch);

	if (!rc->conn || rc->passive)
		return evrdma__fail(EISCONN, "channel already connected");
	return evrdma_conn_connect(rc->conn, sa, socklen);
}

static int
op_connect_hostname(struct evrdma_channel *ch, struct evdns_base *dns,
    int family, const char *host, int port)
{
	struct ch_rdma *rc = to_rc(ch);

	if (!rc->conn || rc->passive)
		return evrdma__fail(EISCONN, "channel already connected");
	return evrdma_conn_connect_hostname(rc->conn, dns, family, host, port);
}

/*
 * Copy a write straight into a free send slot and put the slot in output
 * by reference, so that sending it needs no second copy. Small writes
 * behind others are left to evbuffer (and coalesced with them when sent);
 * a small write into an empty output is staged too: the common request
 * and reply, sent alone. One slot always stays for the copy path, which
 * must make progress when staged data does not fit a message.
 */
static int
op_write(struct evrdma_channel *ch, const void *data, size_t len)
{
	struct ch_rdma *rc = to_rc(ch);
	int idx;

	if (rc_write_open(rc, data, len) == 0)
		return 0;
	if ((len < STAGE_MIN && ch->out_len) ||
	    len > rc_chunk(rc) || rc->closing)
		return -1;
	idx = slot_copy(rc, data, len);
	if (idx < 0)
		return -1;
	if (slot_stage(rc, ch->output, (unsigned)idx, len) < 0) {
		slot_drop(rc, (unsigned)idx, len);
		return -1;
	}
	return 0;
}

static void *
op_reserve(struct evrdma_channel *ch, size_t len)
{
	struct ch_rdma *rc = to_rc(ch);
	int idx;

	if (!rc->established) {
		evrdma__fail(ENOTCONN, "channel not connected");
		return NULL;
	}
	if (len == 0 || len > rc_chunk(rc)) {
		evrdma__fail(len ? EMSGSIZE : EINVAL, "reservation of %zu "
		    "bytes (1..%zu)", len, rc_chunk(rc));
		return NULL;
	}
	/* a new reservation replaces an uncommitted one */
	if (rc->resv >= 0) {
		idx = rc->resv;
	} else {
		/* one slot stays for the copy path, as for staged writes */
		idx = slot_alloc(rc, 1);
		if (idx < 0) {
			/* the write callback tells when one is free */
			rc->resv_wanted = 1;
			evrdma__fail(EAGAIN, "no free send slot (all in "
			    "flight or holding output)");
			return NULL;
		}
		rc->sstate[idx] = SLOT_RESERVED;
		rc->resv = idx;
		rc->resv_max = 0;
	}
	rc->resv_len = len;
	if (len > rc->resv_max)
		rc->resv_max = len;
	return slot_mem(rc, (unsigned)idx);
}

static int
op_commit(struct evrdma_channel *ch, size_t len)
{
	struct ch_rdma *rc = to_rc(ch);
	unsigned idx;

	if (rc->resv < 0)
		return evrdma__fail(EINVAL, "nothing reserved");
	if (len > rc->resv_len)
		return evrdma__fail(EINVAL, "commit of %zu bytes exceeds the "
		    "reserved %zu", len, rc->resv_len);
	idx = (unsigned)rc->resv;
	rc->resv = -1;
	if (len == 0) {
		slot_drop(rc, idx, rc->resv_max);
		return 0;
	}
	if (ch->shut_wr) {
		slot_drop(rc, idx, rc->resv_max);
		return evrdma__fail(EPIPE, "channel is shut down");
	}
	/* what was written past @p len is not sent either */
	if (rc->resv_max > len)
		memset(slot_mem(rc, idx) + len, 0, rc->resv_max - len);
	/* (output's callback counts it as one message in message mode) */
	if (slot_stage(rc, ch->output, idx, len) < 0) {
		slot_drop(rc, idx, len);
		return evrdma__fail(ENOMEM, "out of memory");
	}
	return 0;
}

static size_t
op_max_message(struct evrdma_channel *ch)
{
	struct ch_rdma *rc = to_rc(ch);

	return rc->peer_slot_size ? rc_chunk(rc) : rc->slot_size;
}

static void
op_stats(struct evrdma_channel *ch, struct evrdma_channel_stats *st)
{
	struct ch_rdma *rc = to_rc(ch);
	struct evrdma_conn *c = rc->conn_freed ? NULL : rc->conn;

	st->bytes_sent = rc->tx_bytes;
	st->bytes_received = rc->rx_bytes;
	st->msgs_sent = rc->tx_msgs;
	st->msgs_received = rc->rx_msgs;
	st->pulls_sent = rc->tx_pulls;
	st->pulls_done = rc->rx_pulls;
	st->credit_stalls = rc->stalls;
	st->credit_stall_us = rc->stall_us + (rc->stall_t0 ?
	    evrdma__now_us() - rc->stall_t0 : 0);
	st->keepalive_probes = rc->conn ? rc->conn->ka_probes : rc->ka_probes;
	if (c && c->qp) {
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;

		if (EVRDMA_SYM(ibv_query_qp)(c->qp, &a, IBV_QP_TIMEOUT |
		    IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MIN_RNR_TIMER,
		    &ia) == 0) {
			st->retry_count = a.retry_cnt;
			st->rnr_retry = a.rnr_retry;
			st->ack_timeout = a.timeout;
			st->min_rnr_timer = a.min_rnr_timer;
		}
	}
}

/* The base goes while the user holds the channel: with its connection
 * still there, that connection's release makes it a husk (own_closed());
 * after it ended, nothing else would. */
static void
op_base_gone(struct evrdma_channel *ch)
{
	struct ch_rdma *rc = to_rc(ch);

	if (!rc->conn && ch->base)
		rc_orphan(rc);
}

static void
op_destruct(struct evrdma_channel *ch)
{
	struct ch_rdma *rc = to_rc(ch);

	if (ch->base)
		evrdma__work_cancel(ch->base, &rc->pump_work);
	evrdma__ev_free(rc->linger_ev);
	evrdma__ev_free(rc->ret_ev);
	/* the evbuffers' cleanups must not reach us any more */
	if (rc->pool)
		rc_pool_leave(rc);
	else if (rc->rring)
		rc->rring->owner = NULL;
	if (rc->sring)
		rc->sring->owner = NULL;
	evrdma__chan_fini(ch);
	evrdma_mr_free(rc->rmr);
	evrdma_mr_free(rc->smr);
	if (rc->rring)
		ring_unref(rc->rring);
	if (rc->sring)
		ring_unref(rc->sring);
	if (!rc->pool)
		free(rc->rb);
	free(rc->rfree);
	free(rc->rxq);
	free(rc->sstate);
	free(rc->sflags);
	free(rc->sfifo);
	free(rc->spq);
	if (rc->srq)
		evrdma__srq_drop(rc->srq);
	free(rc);
}

static const struct evrdma__chan_ops rc_ops = {
	.kick = op_kick,
	.flush = op_flush,
	.close = op_close,
	.abort = op_abort,
	.connect = op_connect,
	.connect_hostname = op_connect_hostname,
	.write = op_write,
	.reserve = op_reserve,
	.commit = op_commit,
	.max_message = op_max_message,
	.base_gone = op_base_gone,
	.exiting = op_exiting,
	.stats = op_stats,
	.destruct = op_destruct,
};

/* ---- set-up ---- */

/* control receives of a channel (R + C) */
#define RC_CTRL		4
/* after the send slots: a pull descriptor for each */
#define RC_SRING_EXTRA(slots)	((size_t)(slots) * EVRDMA_CH_PULL_DESC_LEN)

static int
rc_depths_check(const struct evrdma_config *cfg)
{
	if (cfg->rq_depth < cfg->ch_slots + EVRDMA_CH_CTRL_MIN * 2 ||
	    cfg->sq_depth < cfg->ch_slots + EVRDMA_CH_CTRL_MIN * 2)
		return evrdma__fail(EINVAL, "channel: queue depths %u/%u are "
		    "below ring slots + 4", cfg->sq_depth, cfg->rq_depth);
	return 0;
}

/* Receive buffers of a channel with a ring of its own: R + C receives
 * are the least; the spare ones where the queue has room. */
static unsigned
rc_nbuf(const struct evrdma_config *cfg)
{
	unsigned spare = cfg->rq_depth - cfg->ch_slots - RC_CTRL;

	return cfg->ch_slots + RC_CTRL +
	    (spare < SPARE_RECVS ? spare : SPARE_RECVS);
}

size_t
evrdma_config_get_channel_pinned(const struct evrdma_config *cfg)
{
	struct evrdma_config dflt;

	if (!cfg) {
		memset(&dflt, 0, sizeof(dflt));
		evrdma__config_defaults(&dflt);
		cfg = &dflt;
	}
	if (rc_depths_check(cfg) < 0)
		return 0;
	return page_len((size_t)rc_nbuf(cfg) * cfg->ch_slot_size) +
	    page_len((size_t)cfg->ch_slots * cfg->ch_slot_size +
	    RC_SRING_EXTRA(cfg->ch_slots));
}

/* A channel; @p pooled: its receives will come from a queue's pool
 * (rc_use_pool() next), so it gets no receive ring of its own. */
static struct ch_rdma *
rc_new(struct evrdma_base *base, int flags, int pooled)
{
	const struct evrdma_config *cfg = &base->cfg;
	struct ch_rdma *rc;
	unsigned i;

	if (flags & ~EVRDMA_CHANNEL_MESSAGE) {
		evrdma__fail(EINVAL, "channel: unknown flags 0x%x", flags);
		return NULL;
	}
	if (rc_depths_check(cfg) < 0)
		return NULL;
	rc = calloc(1, sizeof(*rc));
	if (!rc)
		goto nomem;
	rc->slots = cfg->ch_slots;
	rc->ctrl = RC_CTRL;
	rc->nbuf = rc_nbuf(cfg);
	rc->spare = rc->nbuf - rc->slots - rc->ctrl;
	rc->slot_size = cfg->ch_slot_size;
	rc->max_input = cfg->ch_max_input;
	rc->resv = -1;
	rc->wopen = -1;
	rc->pump_work.fn = rc_pump_work;
	if (evrdma__chan_init(&rc->ch, base, &rc_ops,
	    flags & EVRDMA_CHANNEL_MESSAGE) < 0)
		goto nomem;
	rc->ch.refcnt++;	/* the connection's, until closed() */
	if (!pooled) {
		rc->rring = ring_new(rc, rc->nbuf, rc->slot_size, 0);
		rc->rb = calloc(rc->nbuf, sizeof(*rc->rb));
		rc->rfree = calloc(rc->nbuf, sizeof(*rc->rfree));
		if (!rc->rring || !rc->rb || !rc->rfree)
			goto nomem;
		for (i = 0; i < rc->nbuf; i++)
			rc->rfree[rc->nfree++] = rc->nbuf - 1 - i;
	}
	rc->sring = ring_new(rc, rc->slots, rc->slot_size,
	    RC_SRING_EXTRA(rc->slots));
	rc->rxq = calloc(rc->nbuf, sizeof(*rc->rxq));
	rc->sstate = calloc(rc->slots, 1);
	rc->sflags = calloc(rc->slots, 1);
	rc->sfifo = calloc(rc->slots, sizeof(*rc->sfifo));
	rc->spq = calloc(rc->slots, sizeof(*rc->spq));
	rc->linger_ev = evrdma__ev_timer_new(base, rc_linger_timeout, rc);
	rc->ret_ev = evrdma__ev_timer_new(base, rc_ret_idle, rc);
	if (!rc->sring || !rc->rxq || !rc->sstate || !rc->sflags ||
	    !rc->sfifo || !rc->spq || !rc->linger_ev || !rc->ret_ev)
		goto nomem;
	rc->sfree = rc->slots;
	return rc;
nomem:
	if (rc && rc->ch.ops) {
		rc->ch.refcnt = 1;
		evrdma__chan_unref(&rc->ch);
	} else {
		free(rc);
	}
	evrdma__fail(ENOMEM, "channel: out of memory");
	return NULL;
}

/* The channel owns @p conn: its credits guarantee a posted receive, so
 * an RNR is a protocol bug that must fail at once, not stall for retries
 * (on a queue's pool, a violator's SENDs may take another peer's buffer
 * for a moment: that peer retries for ever, RNR retry 7); and a channel
 * keeps its connection alive (or learns it is dead). */
static void
rc_own_conn(struct ch_rdma *rc, struct evrdma_conn *conn)
{
	const struct evrdma_config *cfg = &rc->ch.base->cfg;

	evrdma__conn_set_owner(conn, &rc_owner_ops, rc);
	evrdma__conn_set_rnr_retry(conn, rc->pool ? 7 : 0);
	evrdma_conn_set_keepalive(conn, cfg->ka_idle_ms, cfg->ka_interval_ms,
	    cfg->ka_count);
}

/* Draw the receives from @p srq's pool instead of a ring of our own
 * (before the connection's QP exists). */
static int
rc_use_pool(struct ch_rdma *rc, struct evrdma_srq *srq)
{
	struct evrdma__chpool *pool = evrdma__srq_chpool(srq);

	if (!pool)
		return evrdma__fail(EINVAL, "not a queue of channels "
		    "(evrdma_channel_srq_new)");
	if (pool->slot_size != rc->slot_size)
		return evrdma__fail(EINVAL, "the queue's buffers are of %u "
		    "bytes, the channel's slots of %u", pool->slot_size,
		    rc->slot_size);
	if (!evrdma__srq_alive(srq))
		return evrdma__fail(EPIPE, "the queue was freed");
	rc->pool = pool;
	rc->srq = srq;
	rc->withheld = rc->slots;	/* nothing lent before rc_pool_join() */
	evrdma__ep_ref(evrdma__srq_ep(srq));
	/* control messages carry no bytes but take a whole buffer of the
	 * pool each: the fewest the protocol allows */
	rc->ctrl = EVRDMA_CH_CTRL_MIN;
	/* a ring of our own, if rc_new() made one, is not needed */
	if (rc->rring)
		ring_unref(rc->rring);
	free(rc->rb);
	free(rc->rfree);
	rc->rfree = NULL;
	rc->nfree = 0;
	rc->rring = pool->ring;
	rc->rring->refs++;
	rc->rb = pool->rb;
	return 0;
}

int
evrdma_channel_set_srq(struct evrdma_channel *ch, struct evrdma_srq *srq)
{
	struct ch_rdma *rc;

	if (!ch || ch->ops != &rc_ops || !srq)
		return evrdma__fail(EINVAL, "evrdma_channel_set_srq: not an "
		    "RDMA channel, or no queue");
	rc = to_rc(ch);
	if (!rc->conn || rc->passive || rc->pool ||
	    rc->conn->state != EVRDMA_CONN_IDLE)
		return evrdma__fail(EINVAL, "evrdma_channel_set_srq: once, "
		    "before evrdma_channel_connect()");
	if (!evrdma__srq_chpool(srq))
		return evrdma__fail(EINVAL, "evrdma_channel_set_srq: not a "
		    "queue of channels (evrdma_channel_srq_new)");
	if (evrdma__srq_chpool(srq)->slot_size != rc->slot_size)
		return evrdma__fail(EINVAL, "evrdma_channel_set_srq: the "
		    "queue's buffers are of %u bytes, the channel's slots of "
		    "%u", evrdma__srq_chpool(srq)->slot_size, rc->slot_size);
	if (evrdma__srq_use(rc->conn, srq) < 0 || rc_use_pool(rc, srq) < 0)
		return -1;
	evrdma__conn_set_rnr_retry(rc->conn, 7);
	return 0;
}

static void chpool_fini(struct evrdma__chpool *pool, int husk);
static void chpool_free(struct evrdma__chpool *pool);

static const struct evrdma__chpool_ops chpool_ops = {
	.fini = chpool_fini,
	.free = chpool_free,
};

struct evrdma_srq *
evrdma_channel_srq_new(struct evrdma_base *base, const char *device,
    unsigned nbuf)
{
	struct evrdma_srq *srq;
	struct evrdma__chpool *pool;
	void **args = NULL;
	unsigned i;
	int err;

	if (evrdma__base_rdma(base, __func__) < 0)
		return NULL;
	if (nbuf < 16) {
		evrdma__fail(EINVAL, "evrdma_channel_srq_new: %u buffers (16 "
		    "at least)", nbuf);
		return NULL;
	}
	srq = evrdma_srq_new(base, device, nbuf);
	if (!srq)
		return NULL;
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		goto nomem;
	pool->srq = srq;
	pool->base = base;
	pool->nbuf = nbuf;
	/* against a violator's burst: what it takes out of turn before its
	 * connection is torn down (its send queue's worth: a few dozen) */
	pool->reserve = nbuf / 16 < 64 ? nbuf / 16 : 64;
	pool->slot_size = base->cfg.ch_slot_size;
	pool->post_work.fn = pool_post_work;
	LIST_INIT(&pool->chans);
	pool->tick_ev = evrdma__ev_timer_new(base, pool_tick, pool);
	pool->ring = ring_new(NULL, nbuf, pool->slot_size, 0);
	pool->rb = calloc(nbuf, sizeof(*pool->rb));
	pool->own = calloc(nbuf, sizeof(*pool->own));
	pool->free = calloc(nbuf, sizeof(*pool->free));
	args = malloc(nbuf * sizeof(*args));
	if (!pool->ring || !pool->rb || !pool->own || !pool->free || !args ||
	    !pool->tick_ev)
		goto nomem;
	pool->ring->pool = pool;
	evrdma__srq_set_chpool(srq, pool, &chpool_ops);
	if (evrdma__mem_pin_check(pool->ring->len) < 0)
		goto fail;
	pool->mr = evrdma__mr_reg(base, evrdma__srq_pd(srq), pool->ring->mem,
	    pool->ring->len, EVRDMA_ACCESS_LOCAL_WRITE);
	if (!pool->mr)
		goto fail;
	for (i = 0; i < nbuf; i++)
		args[i] = &pool->ring->slot[i];
	if (evrdma__ep_ring_init(evrdma__srq_ep(srq), pool->mr,
	    pool->slot_size, nbuf, rc_recv_cb, args) < 0)
		goto fail;
	free(args);
	for (i = 0; i < nbuf; i++)
		pool->free[pool->nfree++] = nbuf - 1 - i;
	if (pool_post(pool) < 0) {
		args = NULL;
		goto fail;
	}
	return srq;
nomem:
	evrdma__fail(ENOMEM, "out of memory");
fail:
	err = errno;
	free(args);
	if (pool && !evrdma__srq_chpool(srq))
		chpool_free(pool);	/* else with the queue */
	evrdma_srq_free(srq);
	errno = err;
	return NULL;
}

static void
chpool_fini(struct evrdma__chpool *pool, int husk)
{
	evrdma__ev_free(pool->tick_ev);
	pool->tick_ev = NULL;
	pool->tick_armed = 0;
	if (pool->base)
		evrdma__work_cancel(pool->base, &pool->post_work);
	pool->base = NULL;
	evrdma_mr_free(pool->mr);
	pool->mr = NULL;
}

static void
chpool_free(struct evrdma__chpool *pool)
{
	evrdma__ev_free(pool->tick_ev);
	if (pool->ring) {
		pool->ring->pool = NULL;
		ring_unref(pool->ring);
	}
	free(pool->rb);
	free(pool->own);
	free(pool->free);
	free(pool);
}

struct evrdma_channel *
evrdma_channel_new(struct evrdma_base *base, int flags)
{
	struct ch_rdma *rc;

	if (evrdma__base_rdma(base, __func__) < 0)
		return NULL;
	rc = rc_new(base, flags, 0);
	if (!rc)
		return NULL;
	rc->conn = evrdma_conn_new(base, 0);
	if (!rc->conn) {
		int err = errno;

		rc->ch.refcnt = 1;
		evrdma__chan_unref(&rc->ch);
		errno = err;
		return NULL;
	}
	rc_own_conn(rc, rc->conn);
	return &rc->ch;
}

/* ---- the listener's side ---- */

struct ch_listen {
	evrdma_channel_accept_cb cb;
	void *arg;
	void (*free_arg)(void *arg);	/* with the listener */
	int flags;
};

static void
lst_free_arg(void *arg)
{
	struct ch_listen *cl = arg;

	if (cl->free_arg)
		cl->free_arg(cl->arg);
	free(cl);
}

static int
lst_attach(void *arg, struct evrdma_listener *lst, struct evrdma_conn *conn,
    int *code)
{
	struct ch_listen *cl = arg;
	struct ch_rdma *rc = rc_new(evrdma_conn_get_base(conn), cl->flags,
	    lst->srq != NULL);

	*code = EVRDMA_REJECT_RESOURCES;
	if (!rc)
		return -1;
	rc->passive = 1;
	if (lst->srq && rc_use_pool(rc, lst->srq) < 0) {
		evrdma__log(EVRDMA_LOG_WARN, "channel listener: %s",
		    evrdma_errmsg());
		rc->ch.refcnt = 1;
		evrdma__chan_unref(&rc->ch);
		return -1;
	}
	rc->conn = conn;
	rc_own_conn(rc, conn);
	return 0;
}

static void
lst_accepted(void *arg, struct evrdma_listener *lst, struct evrdma_conn *conn,
    const struct sockaddr *peer, int socklen)
{
	struct ch_listen *cl = arg;
	struct ch_rdma *rc = evrdma__conn_owner(conn);

	rc->established = 1;
	rc->ch.connected = 1;
	evrdma__chan_ref(&rc->ch);
	cl->cb(lst, &rc->ch, peer, socklen, cl->arg);
	rc_schedule(rc);
	evrdma__chan_unref(&rc->ch);
}

static const struct evrdma__listen_ops ch_listen_ops = {
	.attach = lst_attach,
	.accepted = lst_accepted,
	.free_arg = lst_free_arg,
	.channels = 1,
};

struct evrdma_listener *
evrdma_channel_listener_new(struct evrdma_base *base,
    evrdma_channel_accept_cb cb, void *arg, int flags, int backlog,
    const struct sockaddr *sa, int socklen)
{
	struct evrdma_listener *lst;

	lst = evrdma__channel_listener_new(base, sa, socklen, backlog, flags,
	    cb, arg, NULL);
	if (lst)
		lst->accept_arg = arg;	/* the error callback's */
	return lst;
}

struct evrdma_listener *
evrdma__channel_listener_new(struct evrdma_base *base,
    const struct sockaddr *sa, int socklen, int backlog, int flags,
    evrdma_channel_accept_cb cb, void *arg, void (*free_arg)(void *))
{
	struct evrdma_listener *lst;
	struct ch_listen *cl;

	if (evrdma__listener_flags(flags, EVRDMA_CHANNEL_MESSAGE,
	    "evrdma_channel_listener_new") < 0)
		return NULL;
	if (!cb) {
		evrdma__fail(EINVAL, "evrdma_channel_listener_new: no accept "
		    "callback");
		return NULL;
	}
	cl = calloc(1, sizeof(*cl));
	if (!cl) {
		evrdma__fail(ENOMEM, "out of memory");
		return NULL;
	}
	cl->cb = cb;
	cl->arg = arg;
	cl->free_arg = free_arg;
	cl->flags = flags & EVRDMA_CHANNEL_MESSAGE;
	lst = evrdma__listener_new(base, sa, socklen, backlog,
	    flags & ~EVRDMA_CHANNEL_MESSAGE, &ch_listen_ops, cl,
	    "evrdma_channel_listener_new");
	if (!lst)
		free(cl);
	return lst;
}
