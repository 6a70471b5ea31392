/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel's RDMA transport: receives, their refill, what
 * arrives (checked against the protocol), its delivery into input or to
 * the receive callback, and the pulls (RDMA READs of the peer's messages).
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "chan_ctl.h"

/*
 * Post every free buffer of the ring, in one ibv_post_recv(): their work
 * requests were made once (evrdma__rc_rx_init()) and are only linked.
 */
int
evrdma__rc_post_free(struct ch_rdma *rc)
{
	struct ibv_recv_wr *head = NULL, **link = &head, *bad = NULL, *w;
	struct ibv_qp *qp = rc->conn ? evrdma__conn_qp(rc->conn) : NULL;
	unsigned n = rc->rx.nfree, i, k;
	int err;

	if (!n)
		return 0;
	if (!qp || evrdma__forked || !rc->rx.wr)
		return evrdma__fail(EPIPE, "the connection is gone");
	for (i = 0; i < n; i++) {
		w = &rc->rx.wr[rc->rx.free[n - 1 - i]];
		*link = w;
		link = &w->next;
	}
	*link = NULL;
	err = ibv_post_recv(qp, head, &bad);
	k = n;
	if (err)	/* the provider posted those before bad */
		for (k = 0, w = head; w && w != bad; w = w->next)
			k++;
	for (i = 0; i < k; i++)
		rc->rx.rb[rc->rx.free[--rc->rx.nfree]].state = RB_POSTED;
	rc->rx.posted += k;
	evrdma__ep_ring_posted(&rc->conn->ep, 0, k);
	if (err)
		return evrdma__fail(err, "ibv_post_recv: %s", strerror(err));
	return 0;
}

/* evrdma__rc_returns_ready() when the receives posted do not cover the
 * returns yet. */
int
evrdma__rc_returns_post(struct ch_rdma *rc, unsigned data_after,
    unsigned ctrl_after)
{
	if (rc->pm.pool)
		return evrdma__pool_post(rc->pm.pool);
	if (evrdma__rc_post_free(rc) < 0)
		return -1;
	if (!evrdma__ch_recvs_cover(rc->rx.posted, rc->slots, rc->ctrl, rc->rx.held,
	    data_after, ctrl_after))
		return evrdma__fail(ENOMEM, "receives do not cover the credits");
	return 0;
}

/* (inlined: rb_release() runs once per message) */
static inline __attribute__((always_inline)) void
rb_free(struct ch_rdma *rc, unsigned idx)
{
	if (rc->pm.pool) {
		/* (impossible; evrdma__pool_free() only logs it, not knowing
		 * whose connection to fail) */
		if (rc->rx.rb[idx].state == RB_FREE) {
			evrdma__rc_internal(rc, "a pool's buffer freed twice");
			return;
		}
		evrdma__pool_free(rc->pm.pool, idx);
		return;
	}
	if (rc->rx.rb[idx].state == RB_FREE) {
		evrdma__rc_internal(rc, "a receive buffer freed twice");
		return;
	}
	rc->rx.rb[idx].state = RB_FREE;
	rc->rx.free[rc->rx.nfree++] = idx;
}

/* A DATA buffer is done with: the buffer goes back to the pool and its
 * credit to the peer (on a queue's pool, back to the pool when this
 * channel has more than its share lent). */
static inline __attribute__((always_inline)) void
rb_release(struct ch_rdma *rc, unsigned idx)
{
	const struct ch_rbuf *b = &rc->rx.rb[idx];

	/* (delivered, so neither free nor posted; and no evbuffer refers
	 * to it any more: rc_ref_cleanup() releases it when the last
	 * reference goes) */
	if (!rc->rx.held || b->state == RB_FREE || b->state == RB_POSTED ||
	    b->refs) {
		evrdma__rc_internal(rc, "a receive buffer released twice, "
		    "while posted, or while referenced");
		return;
	}
	rb_free(rc, idx);
	rc->rx.held--;
	/* (a pool may keep its credit: evrdma__pool_withhold()) */
	if (!rc->pm.pool || !evrdma__pool_withhold(rc))
		ctl_owe_data(rc);
	if (!(rc->st & RC_PRE_SEND))
		rc_schedule(rc);
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
			evrdma__pool_free(pool, ref->idx);
			evrdma__pool_room_freed(pool);
		}
	} else if (rc) {
		struct ch_rbuf *b = &rc->rx.rb[ref->idx];

		if (!b->refs || !rc->rx.refs_held)
			evrdma__rc_internal(rc, "a receive buffer released "
			    "more often than it was referenced");
		else if (--b->refs == 0) {
			rc->rx.refs_held--;
			if (!b->queued)
				rb_release(rc, ref->idx);
		}
	}
	evrdma__ring_unref(ring);
}

static void
rxq_pop(struct ch_rdma *rc)
{
	rc->rx.head++;
	if (rc->rx.pull < rc->rx.head)
		rc->rx.pull = rc->rx.head;
}

/* The buffer at the head of rxq, if it can be delivered now. */
static int
rxq_ready(struct ch_rdma *rc)
{
	return rc->rx.head < rc->rx.tail &&
	    rc->rx.rb[rc->rx.q[rc->rx.head % rc->nbuf]].state == RB_READY;
}

/* Arrived bytes the application has not taken: in rxq, beyond what the
 * batch being delivered took (a free inside its callbacks: what the
 * callback was handed is the application's, as a socket's read bytes). */
int
evrdma__rx_unread(const struct ch_rdma *rc)
{
	uint64_t taken = rc->rx.batch ? rc->rx.batch->done : 0;

	return rc->rx.tail - rc->rx.head > taken;
}

/* A reference into a buffer, for input (the receive seam's ref_take):
 * counted before the addition; 1 when the buffer had none. */
static int
rc_ref_take(void *tp, void *arg)
{
	struct ch_rdma *rc = tp;
	struct ch_rbuf *b = &rc->rx.rb[((struct ch_slotref *)arg)->idx];

	rc->rx.ring->refs++;
	if (b->refs++)
		return 0;
	rc->rx.refs_held++;
	return 1;
}

/* ... which input refused. */
static void
rc_ref_undo(void *tp, void *arg)
{
	struct ch_rdma *rc = tp;
	struct ch_rbuf *b = &rc->rx.rb[((struct ch_slotref *)arg)->idx];

	if (--b->refs == 0)
		rc->rx.refs_held--;
	rc->rx.ring->refs--;
}

/*
 * Hand what arrived, in order, to the channel (chan.h's receive seam):
 * every buffer at the head of rxq that is ready, as one batch; then let
 * go of those it took whole. A buffer input still refers to goes back
 * when the last reference does (rc_ref_cleanup()): the start of a message
 * cut at the read high watermark went into input by reference, and the
 * application (or the bufferevent adapter) may have moved that chain out,
 * so input is empty while an evbuffer elsewhere refers to the buffer
 * (found by review: released on delivery, it went back to the peer, or a
 * shared pool, while the application still held its bytes).
 */
void
evrdma__rc_deliver(struct ch_rdma *rc)
{
	struct evrdma__chan_batch bt;
	struct evrdma__chan_piece *v = rc->rx.pieces;
	uint64_t h;
	unsigned n = 0, k, half = rc->slots / 2;

	if (evrdma__chan_reading(&rc->ch)) {
		for (h = rc->rx.head; h < rc->rx.tail; h++) {
			unsigned idx = rc->rx.q[h % rc->nbuf];
			const struct ch_rbuf *b = &rc->rx.rb[idx];

			if (b->state != RB_READY)
				break;	/* a pull not done: order */
			v[n].p = rc->rx.ring->mem +
			    (size_t)idx * rc->slot_size + b->off;
			v[n].len = b->len - b->off;
			v[n].ref_arg = &rc->rx.ring->slot[idx];
			v[n].took = 0;
			n++;
		}
	}
	bt.v = v;
	bt.n = n;
	bt.small_max = STAGE_MIN;
	bt.copy_max = rc->max_input;
	bt.ref_room = rc->rx.refs_held < half ? half - rc->rx.refs_held : 0;
	bt.tp = rc;
	bt.ref_take = rc_ref_take;
	bt.ref_undo = rc_ref_undo;
	bt.ref_cleanup = rc_ref_cleanup;
	rc->rx.batch = &bt;
	evrdma__chan_deliver(&rc->ch, &bt);
	rc->rx.batch = NULL;
	for (k = 0; k < bt.done; k++) {
		unsigned idx = rc->rx.q[rc->rx.head % rc->nbuf];
		struct ch_rbuf *b = &rc->rx.rb[idx];

		rxq_pop(rc);
		b->off = b->len;
		b->queued = 0;
		if (!b->refs)
			rb_release(rc, idx);
	}
	if (bt.done < n)	/* (cut at the read high watermark) */
		rc->rx.rb[rc->rx.q[rc->rx.head % rc->nbuf]].off +=
		    (uint32_t)v[bt.done].took;
	if (bt.fail && rc->conn &&
	    !(evrdma__chan_end(&rc->ch) & CHE_FREED))
		evrdma__rc_fail(rc, bt.fail);
}

/* A DATA message arrived in buffer @p idx (its returns were taken). */
void
evrdma__rx_data(struct ch_rdma *rc, unsigned idx,
    const struct evrdma__ch_imm *m, uint32_t byte_len)
{
	struct ch_rbuf *b = &rc->rx.rb[idx];

	if (b->refs) {
		/* impossible: a buffer goes back (rb_release) only once no
		 * evbuffer refers to it */
		evrdma__rc_internal(rc, "data arrived in a receive buffer "
		    "still referenced");
		return;
	}
	if (evrdma__chan_end(&rc->ch) & CHE_PEER_EOF) {
		rb_free(rc, idx);
		evrdma__rc_violation(rc, "data after EOF");
		return;
	}
	if (!evrdma__ch_data_allowed(rc->rx.held + rc->cr.ret_data + rc->pm.withheld,
	    rc->slots)) {
		rb_free(rc, idx);
		evrdma__rc_violation(rc, "data beyond its credits");
		return;
	}
	if (m->pull) {
		struct evrdma__ch_pull d;
		const char *why;

		if (!rc->pull_min || !rc->peer_src.rkey) {
			rb_free(rc, idx);
			evrdma__rc_violation(rc, "pull not offered");
			return;
		}
		if (evrdma__ch_pull_decode(rc->rx.ring->mem +
		    (size_t)idx * rc->slot_size, byte_len, rc->peer_slots,
		    rc->peer_slot_size, rc->slot_size, &d, &why) < 0) {
			rb_free(rc, idx);
			evrdma__rc_violation(rc, why);
			return;
		}
		b->len = d.len;
		b->pslot = d.wide ? RB_WIDE : d.slot;
		b->paddr = d.addr;
		b->prkey = d.rkey;
		b->state = RB_PULL;
		rc->rx.pull_wait++;
	} else {
		if (byte_len == 0) {
			rb_free(rc, idx);
			evrdma__rc_violation(rc, "empty data message");
			return;
		}
		b->len = byte_len;
		b->state = RB_READY;
	}
	b->off = 0;
	b->queued = 1;
	rc->rx.q[rc->rx.tail++ % rc->nbuf] = idx;
	rc->rx.held++;
	rc->rx.msgs++;
	rc->rx.bytes += b->len;
	if (rc->st & RC_CLOSING) {
		/* freed: nobody reads; the peer gets its credits (and its
		 * pulls reported done) so that it is not held up, and, unless
		 * our EOF went already, a RESET instead, as data arriving at
		 * a closed socket does */
		if (!rc->cr.eof_sent)
			rc_set(rc, RC_RESET_DUE);
		if (b->state == RB_PULL) {
			b->state = RB_READY;
			rc->rx.pull_wait--;
			ctl_owe_pull(rc);
		}
		rc->rx.head = rc->rx.pull = rc->rx.tail;
		b->queued = 0;
		rb_release(rc, idx);
	}
}

/*
 * A receive completed in buffer @p idx (@p w: what it says): a message to
 * dispatch (0, its immediate decoded into *@p m), or nothing more to do
 * (-1: a flush, a failure, a violation; the buffer went back).
 */
int
evrdma__rx_arrived(struct ch_rdma *rc, unsigned idx,
    const struct evrdma__rx_wc *w, struct evrdma__ch_imm *m)
{
	if (w->status) {
		/* flushed (the connection is ending) or failed (it ends); the
		 * last of them tells that everything that arrived is in */
		rb_free(rc, idx);
		if ((rc->st & RC_ENDED) && !rc->rx.posted)
			rc_schedule(rc);
		return -1;
	}
	if (rc->st & RC_VIOLATED) {
		rb_free(rc, idx);
		return -1;
	}
	if (!w->send_imm) {
		rb_free(rc, idx);
		evrdma__rc_violation(rc, "not a SEND with immediate");
		return -1;
	}
	if (evrdma__ch_imm_decode(w->imm, m) < 0) {
		rb_free(rc, idx);
		evrdma__rc_violation(rc, "bad immediate");
		return -1;
	}
	return 0;
}

/* A completion of the channel's own receive ring (its poll): as
 * evrdma__rx_arrived(); *@p status is its errno (0: arrived). -2: not a
 * receive we posted (an impossible state: the connection fails, and the
 * ring's count is left alone). */
int
evrdma__rx_done(struct ch_rdma *rc, unsigned idx, const struct ibv_wc *wc,
    struct evrdma__ch_imm *m, struct evrdma__rx_wc *w)
{
	if (idx >= rc->nbuf || rc->rx.rb[idx].state != RB_POSTED) {
		w->status = 0;
		evrdma__rc_internal(rc, "a receive completed that was not "
		    "posted");
		return -2;
	}
	rc->rx.posted--;
	/* (with an error status, only the status is valid) */
	w->status = wc->status ? evrdma__wc_errno(wc->status) : 0;
	if (!w->status) {
		w->send_imm = wc->opcode == IBV_WC_RECV &&
		    (wc->wc_flags & IBV_WC_WITH_IMM);
		w->imm = ntohl(wc->imm_data);
		w->byte_len = wc->byte_len;
	}
	return evrdma__rx_arrived(rc, idx, w, m);
}

/* Buffer @p idx goes back (a control message's, or a message refused). */
void
evrdma__rx_drop(struct ch_rdma *rc, unsigned idx)
{
	rb_free(rc, idx);
}

static void
rc_pull_cb(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct ch_slotref *ref = arg;
	struct ch_rdma *rc = ref->ring->owner;
	struct ch_rbuf *b = &rc->rx.rb[ref->idx];

	rc->rx.pull_out--;
	if (wc->status) {
		/* its bytes are lost: the connection fails for it, and the
		 * stream cannot end in order */
		b->state = RB_LOST;
		rc->rx.lost = 1;
		rc_schedule(rc);
		return;
	}
	b->state = RB_READY;
	ctl_owe_pull(rc);
	rc->rx.pulls++;
	rc_schedule(rc);
}

/* Post the READs of pulls, in arrival order, as far as the send queue has
 * room for them beside our own messages. */
int
evrdma__rc_post_pulls(struct ch_rdma *rc)
{
	while (rc->rx.pull < rc->rx.tail) {
		unsigned idx = rc->rx.q[rc->rx.pull % rc->nbuf];
		struct ch_rbuf *b = &rc->rx.rb[idx];

		if (b->state == RB_PULL) {
			/* from its send ring, or (wide) from its spill: what
			 * the peer named is its own memory, and a wrong name
			 * fails the READ, and the connection with it */
			struct evrdma_remote wide = { b->paddr, b->len,
			    b->prkey };
			int w = b->pslot == RB_WIDE;

			if (rc->rx.pull_out >= rc->pull_cap)
				break;	/* rc_pull_cb resumes */
			if (evrdma_conn_post_read(rc->conn, rc->rx.mr,
			    (size_t)idx * rc->slot_size, b->len,
			    w ? &wide : rc_peer_src(rc),
			    w ? 0 : (uint64_t)b->pslot * rc->peer_slot_size,
			    rc_pull_cb, &rc->rx.ring->slot[idx]) < 0) {
				if (errno == EAGAIN)
					break;	/* a completion resumes */
				return -1;
			}
			b->state = RB_PULLING;
			rc->rx.pull_wait--;
			rc->rx.pull_out++;
		}
		rc->rx.pull++;
	}
	return 0;
}

/* Received bytes that can still reach input (data that is lost, or that
 * waits for a READ that will never be posted, cannot). */
int
evrdma__rc_waiting(struct ch_rdma *rc)
{
	if (rc->rx.head == rc->rx.tail)
		return 0;
	if (!(evrdma__chan_end(&rc->ch) & CHE_GONE))
		return 1;	/* more may still come in order */
	if (rxq_ready(rc))
		return 1;
	/* the connection is over with a message that never arrived whole:
	 * what follows it can never be delivered, and the end is no
	 * orderly one */
	if (!rc->rx.lost)
		evrdma__log(EVRDMA_LOG_INFO, "channel %p: messages lost with "
		    "the connection", (void *)rc);
	rc->rx.lost = 1;
	evrdma__chan_peer_eof_void(&rc->ch);
	while (rc->rx.head < rc->rx.tail) {
		unsigned idx = rc->rx.q[rc->rx.head % rc->nbuf];

		rc->rx.rb[idx].queued = 0;
		rxq_pop(rc);
		if (!rc->rx.rb[idx].refs)
			rb_release(rc, idx);
	}
	return 0;
}

/* The receive ring's work requests, made once (the QP exists, the ring
 * is registered): buffer i's SGE, and a wr_id that names it; a post only
 * links them (evrdma__rc_post_free()). */
int
evrdma__rc_rx_init(struct ch_rdma *rc)
{
	unsigned i;

	rc->rx.wr = calloc(rc->nbuf, sizeof(*rc->rx.wr));
	rc->rx.sge = calloc(rc->nbuf, sizeof(*rc->rx.sge));
	if (!rc->rx.wr || !rc->rx.sge)
		return evrdma__fail(ENOMEM, "out of memory");
	for (i = 0; i < rc->nbuf; i++) {
		rc->rx.sge[i].addr = evrdma__mr_sge_addr(rc->rx.mr,
		    (size_t)i * rc->slot_size);
		rc->rx.sge[i].length = rc->slot_size;
		rc->rx.sge[i].lkey = rc->rx.mr->mr->lkey;
		rc->rx.wr[i].wr_id = evrdma__wr_ring(rc->tag, RC_WR_RECV, i);
		rc->rx.wr[i].sg_list = &rc->rx.sge[i];
		rc->rx.wr[i].num_sge = 1;
	}
	return 0;
}

/* The teardown gave up on the ring's receives: each buffer posted is free
 * again, without a completion. */
void
evrdma__rc_rx_forget(struct ch_rdma *rc)
{
	unsigned i;

	if (rc->pm.pool || !rc->rx.wr)
		return;
	if (rc->conn)
		evrdma__ep_ring_forget(&rc->conn->ep, 0, rc->rx.posted);
	for (i = 0; i < rc->nbuf; i++)
		if (rc->rx.rb[i].state == RB_POSTED)
			rb_free(rc, i);
	rc->rx.posted = 0;
}


/* The receive ring's memory and bookkeeping (evrdma__rc_new()); on a
 * queue's pool (@p pooled), only the queue of arrivals. */
int
evrdma__rx_new(struct ch_rdma *rc, int pooled)
{
	unsigned i;

	rc->rx.q = calloc(rc->nbuf, sizeof(*rc->rx.q));
	rc->rx.pieces = calloc(rc->nbuf, sizeof(*rc->rx.pieces));
	if (!rc->rx.q || !rc->rx.pieces)
		return -1;
	if (pooled)
		return 0;
	/* (the ring itself when the QP exists: a warm set's, or a fresh
	 * one, evrdma__rx_setup()) */
	rc->rx.rb = calloc(rc->nbuf, sizeof(*rc->rx.rb));
	rc->rx.free = calloc(rc->nbuf, sizeof(*rc->rx.free));
	if (!rc->rx.rb || !rc->rx.free)
		return -1;
	for (i = 0; i < rc->nbuf; i++)
		rc->rx.free[rc->rx.nfree++] = rc->nbuf - 1 - i;
	return 0;
}

/* Receive from a queue's pool (its ring and buffers) instead of a ring of
 * our own. */
void
evrdma__rx_use_pool(struct ch_rdma *rc, struct ch_ring *ring,
    struct ch_rbuf *rb)
{
	if (rc->rx.ring)
		evrdma__ring_unref(rc->rx.ring);
	free(rc->rx.rb);
	free(rc->rx.free);
	rc->rx.free = NULL;
	rc->rx.nfree = 0;
	rc->rx.ring = ring;
	ring->refs++;
	rc->rx.rb = rb;
}

/* The QP exists: the ring registered in @p pd (local writes only), its
 * work requests made, its buffers posted. 0, or -1 with errno. */
int
evrdma__rx_setup(struct ch_rdma *rc, struct evrdma__pd *pd)
{
	if (!rc->rx.ring &&
	    !(rc->rx.ring = evrdma__ring_new(rc, rc->nbuf, rc->slot_size, 0)))
		return evrdma__fail(ENOMEM, "channel: out of memory");
	if (!rc->rx.mr)
		rc->rx.mr = evrdma__mr_reg(rc_base(rc), pd, rc->rx.ring->mem,
		    rc->rx.ring->len, EVRDMA_ACCESS_LOCAL_WRITE);
	if (!rc->rx.mr || evrdma__rc_rx_init(rc) < 0)
		return -1;
	return evrdma__rc_post_free(rc);
}

void
evrdma__rx_adopt(struct ch_rdma *rc, struct ch_ring *ring,
    struct evrdma_mr *mr)
{
	ring->owner = rc;
	rc->rx.ring = ring;
	rc->rx.mr = mr;
}

void
evrdma__rx_disown(struct ch_rdma *rc)
{
	rc->rx.ring = NULL;
	rc->rx.mr = NULL;
}

/* The connection is gone: the registration goes (input may still hold
 * references into the ring's memory). */
void
evrdma__rx_close(struct ch_rdma *rc)
{
	evrdma_mr_free(rc->rx.mr);
	rc->rx.mr = NULL;
}

/* The channel goes: the evbuffers' cleanups must not reach it any more
 * (before its input goes). */
void
evrdma__rx_detach(struct ch_rdma *rc)
{
	if (!rc->pm.pool && rc->rx.ring)
		rc->rx.ring->owner = NULL;
}

void
evrdma__rx_free(struct ch_rdma *rc)
{
	evrdma__rx_close(rc);
	if (rc->rx.ring)
		evrdma__ring_unref(rc->rx.ring);
	rc->rx.ring = NULL;
	if (!rc->pm.pool)
		free(rc->rx.rb);
	free(rc->rx.free);
	free(rc->rx.q);
	free(rc->rx.pieces);
	free(rc->rx.wr);
	free(rc->rx.sge);
}
