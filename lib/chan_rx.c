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

#include "chan_rdma.h"

/*
 * Post every free buffer of the ring, in one ibv_post_recv(): their work
 * requests were made once (evrdma__rc_rx_init()) and are only linked.
 */
int
evrdma__rc_post_free(struct ch_rdma *rc)
{
	struct ibv_recv_wr *head = NULL, **link = &head, *bad = NULL, *w;
	struct ibv_qp *qp = rc->conn ? evrdma__conn_qp(rc->conn) : NULL;
	unsigned n = rc->nfree, i, k;
	int err;

	if (!n)
		return 0;
	if (!qp || evrdma__forked || !rc->rwr)
		return evrdma__fail(EPIPE, "the connection is gone");
	for (i = 0; i < n; i++) {
		w = &rc->rwr[rc->rfree[n - 1 - i]];
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
		rc->rb[rc->rfree[--rc->nfree]].state = RB_POSTED;
	rc->posted += k;
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
	if (rc->pool)
		return evrdma__pool_post(rc->pool);
	if (evrdma__rc_post_free(rc) < 0)
		return -1;
	if (!evrdma__ch_recvs_cover(rc->posted, rc->slots, rc->ctrl, rc->held,
	    data_after, ctrl_after))
		return evrdma__fail(ENOMEM, "receives do not cover the credits");
	return 0;
}

/* (inlined: rb_release() runs once per message) */
static inline __attribute__((always_inline)) void
rb_free(struct ch_rdma *rc, unsigned idx)
{
	if (rc->pool) {
		/* (impossible; evrdma__pool_free() only logs it, not knowing
		 * whose connection to fail) */
		if (rc->rb[idx].state == RB_FREE) {
			evrdma__rc_internal(rc, "a pool's buffer freed twice");
			return;
		}
		evrdma__pool_free(rc->pool, idx);
		return;
	}
	if (rc->rb[idx].state == RB_FREE) {
		evrdma__rc_internal(rc, "a receive buffer freed twice");
		return;
	}
	rc->rb[idx].state = RB_FREE;
	rc->rfree[rc->nfree++] = idx;
}

/* A DATA buffer is done with: the buffer goes back to the pool and its
 * credit to the peer (on a queue's pool, back to the pool when this
 * channel has more than its share lent). */
static inline __attribute__((always_inline)) void
rb_release(struct ch_rdma *rc, unsigned idx)
{
	const struct ch_rbuf *b = &rc->rb[idx];

	/* (delivered, so neither free nor posted; and no evbuffer refers
	 * to it any more: rc_ref_cleanup() releases it when the last
	 * reference goes) */
	if (!rc->held || b->state == RB_FREE || b->state == RB_POSTED ||
	    b->refs) {
		evrdma__rc_internal(rc, "a receive buffer released twice, "
		    "while posted, or while referenced");
		return;
	}
	rb_free(rc, idx);
	rc->held--;
	if (rc->pool && (!rc->pool_joined || evrdma__rc_over_share(rc))) {
		/* (a channel whose connection is over returns every one) */
		rc->withheld++;
		rc->pool->committed--;
		evrdma__pool_room_freed(rc->pool);
	} else {
		rc->ret_data++;
	}
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
		struct ch_rbuf *b = &rc->rb[ref->idx];

		if (!b->refs || !rc->refs_held)
			evrdma__rc_internal(rc, "a receive buffer released "
			    "more often than it was referenced");
		else if (--b->refs == 0) {
			rc->refs_held--;
			if (!b->queued)
				rb_release(rc, ref->idx);
		}
	}
	evrdma__ring_unref(ring);
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
void
evrdma__rc_deliver(struct ch_rdma *rc)
{
	struct evrdma_channel *ch = &rc->ch;
	/* input's length, kept here: only we add to it in this loop */
	size_t have = evbuffer_get_length(ch->input);
	int moved = 0, held = 0, refused = 0;

	while (evrdma__chan_reading(ch) && rxq_ready(rc)) {
		unsigned idx = rc->rxq[rc->rx_head % rc->nbuf];
		struct ch_rbuf *b = &rc->rb[idx];
		uint8_t *p = rc->rring->mem + (size_t)idx * rc->slot_size +
		    b->off;
		size_t len = b->len - b->off, room, take;
		int copy_ok, ref_ok;
		/* Input may be empty while an evbuffer elsewhere still refers
		 * to this buffer: the start of a message cut at the read high
		 * watermark went into input by reference, and the application
		 * (or the bufferevent adapter) moved that chain out. Then the
		 * last reference's cleanup releases the buffer, not the
		 * delivery of its rest (found by review: released here, it
		 * went back to the peer, or a shared pool, while the
		 * application still held its bytes). */
		int referenced = b->refs != 0;

		if (ch->recvcb && !have) {
			/* zero-copy to the user; the buffer goes back to
			 * the peer as soon as the callback returns */
			rxq_pop(rc);
			b->queued = 0;
			evrdma__chan_recv(ch, p, len);
			if (!referenced)
				rb_release(rc, idx);
			if (ch->end & CHE_FREED)
				return;
			/* it may have put bytes in input: what comes next
			 * goes there, behind them. (Asked only when something
			 * comes next or the watermark needs it: nothing was
			 * moved before a callback, which needs input empty,
			 * so input_added() below does not run.) */
			if (rxq_ready(rc) || ch->rd_hi)
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
			if (!referenced)
				rb_release(rc, idx);
			evrdma__chan_sunk(ch);
			if (ch->end & CHE_FREED)
				return;
			have = evbuffer_get_length(ch->input);
			continue;
		}
		room = evrdma__chan_room(ch, have);
		take = evrdma__chan_admit(ch, have, room, len);
		if (!take) {
			/* (an application's callback on input, run inside
			 * an add, may have taken bytes: have is then stale,
			 * and holding would wait for a drain already done:
			 * found by review) */
			size_t now = evbuffer_get_length(ch->input);

			if (now < have) {
				have = now;
				continue;
			}
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
		copy_ok = (ch->end & CHE_GONE) ||
		    have + take <= rc->max_input ||
		    room < STAGE_MIN;
		ref_ok = (ch->end & CHE_GONE) || rc->refs_held < rc->slots / 2;
		if ((take < STAGE_MIN || !ref_ok) && copy_ok) {
			if (evrdma__chan_input_add(ch, p, take, NULL,
			    NULL) < 0) {
				held = refused = 1;
				break;
			}
		} else if (ref_ok) {
			/* counted before the add: the application's own
			 * evbuffer callback, run inside it, may take the
			 * chain out, and its cleanup run, before it returns
			 * (found by review) */
			rc->rring->refs++;
			if (b->refs++ == 0)
				rc->refs_held++;
			if (evrdma__chan_input_add(ch, p, take,
			    rc_ref_cleanup, &rc->rring->slot[idx]) < 0) {
				if (--b->refs == 0)
					rc->refs_held--;
				rc->rring->refs--;
				held = refused = 1;
				break;
			}
		} else {
			held = 1;
			break;	/* held in its buffer: the peer waits */
		}
		have += take;
		b->off += (uint32_t)take;
		moved = 1;
		if (b->off < b->len)
			continue;	/* cut at the high watermark */
		rxq_pop(rc);
		b->queued = 0;
		if (!b->refs)
			rb_release(rc, idx);
	}
	/* (the same: the watermark's test needs input's real length) */
	if (moved && ch->rd_hi)
		have = evbuffer_get_length(ch->input);
	/* before the read callback: what it reads may let more in */
	if (evrdma__chan_watch_input(ch, held, have) < 0 && rc->conn)
		evrdma__rc_fail(rc, EVRDMA_REASON_RESOURCE);
	if (moved)
		evrdma__chan_input_added(ch, have);
	/* Input refused bytes it had room for: out of memory, or the
	 * application froze its end. A socket bufferevent's read fails
	 * there (BEV_EVENT_ERROR | READING); holding them waited for a
	 * drain that may never come, with the read timeout suspended
	 * (review r44). */
	if (refused && rc->conn)
		evrdma__rc_fail(rc, evrdma__chan_input_refused(ch));
}

/* The peer has done @p n more of our pulls (in order). -1 when it claims
 * more than we made; -2 when our own record is impossible (the connection
 * fails for it). */
static int
rc_pulls_done(struct ch_rdma *rc, unsigned n)
{
	if (n > rc->spq_n)
		return -1;
	for (; n; n--) {
		unsigned idx = rc->spq[rc->spq_head];

		rc->spq_head = (rc->spq_head + 1) % rc->slots;
		rc->spq_n--;
		if (idx & RC_SPILL_TAG) {
			if (evrdma__spill_pulled(rc, idx & ~RC_SPILL_TAG) < 0) {
				evrdma__rc_internal(rc, "a spill chunk's pull "
				    "done, not in flight");
				return -2;
			}
			continue;
		}
		/* (a slot whose send failed went back then, and may be
		 * reserved since: the connection is ending, nothing more to
		 * free; found by review) */
		if (rc->sstate[idx] != SLOT_POSTED)
			continue;
		if (rc->sflags[idx] & SF_PULLED) {
			evrdma__rc_internal(rc, "a slot's pull done twice");
			return -2;
		}
		rc->sflags[idx] |= SF_PULLED;
		if (rc->sflags[idx] & SF_SENT)
			evrdma__slot_release(rc, idx);
	}
	evrdma__rc_linger_check(rc);
	return 0;
}

/* A DATA message arrived in buffer @p idx. */
static void
rc_take_data(struct ch_rdma *rc, unsigned idx, const struct evrdma__ch_imm *m,
    uint32_t byte_len)
{
	struct ch_rbuf *b = &rc->rb[idx];

	if (b->refs) {
		/* impossible: a buffer goes back (rb_release) only once no
		 * evbuffer refers to it */
		evrdma__rc_internal(rc, "data arrived in a receive buffer "
		    "still referenced");
		return;
	}
	if (rc->ch.end & CHE_PEER_EOF) {
		rb_free(rc, idx);
		evrdma__rc_violation(rc, "data after EOF");
		return;
	}
	if (!evrdma__ch_data_allowed(rc->held + rc->ret_data + rc->withheld,
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
		if (evrdma__ch_pull_decode(rc->rring->mem +
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
		rc->pull_wait++;
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
	rc->rxq[rc->rx_tail++ % rc->nbuf] = idx;
	rc->held++;
	rc->rx_recent = 1;
	rc->rx_msgs++;
	rc->rx_bytes += b->len;
	if (rc->st & RC_CLOSING) {
		/* freed: nobody reads; the peer gets its credits (and its
		 * pulls reported done) so that it is not held up, and, unless
		 * our EOF went already, a RESET instead, as data arriving at
		 * a closed socket does */
		if (!rc->eof_sent)
			rc->st |= RC_RESET_DUE;
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

/* What a receive's completion says, from the ring's poll (an ibv_wc) or
 * a queue's pool (the request layer's evrdma_wc). */
struct rc_wc {
	int status;		/* an errno: 0 arrived */
	int send_imm;		/* a SEND with immediate */
	uint32_t imm;		/* host order */
	uint32_t byte_len;
};

/* A message (or a failed receive) in buffer @p idx. */
static void
rc_arrived(struct ch_rdma *rc, unsigned idx, const struct rc_wc *wc)
{
	struct evrdma__ch_imm m;
	int r;

	if (wc->status) {
		/* flushed (the connection is ending) or failed (it ends); the
		 * last of them tells that everything that arrived is in */
		rb_free(rc, idx);
		if ((rc->st & RC_ENDED) && !rc->posted)
			rc_schedule(rc);
		return;
	}
	if (rc->st & RC_VIOLATED) {
		rb_free(rc, idx);
		return;
	}
	if (!wc->send_imm) {
		rb_free(rc, idx);
		evrdma__rc_violation(rc, "not a SEND with immediate");
		return;
	}
	if (evrdma__ch_imm_decode(wc->imm, &m) < 0) {
		rb_free(rc, idx);
		evrdma__rc_violation(rc, "bad immediate");
		return;
	}
	if (!evrdma__ch_return_valid(rc->s_credits, m.dret, rc->peer_slots) ||
	    !evrdma__ch_return_valid(rc->c_credits, m.cret, rc->peer_ctrl)) {
		rb_free(rc, idx);
		evrdma__rc_violation(rc, "credits returned that were not lent");
		return;
	}
	if ((r = rc_pulls_done(rc, m.pdone)) < 0) {
		rb_free(rc, idx);
		if (r == -1)
			evrdma__rc_violation(rc, "pulls acknowledged that "
			    "were not made");
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
		if (wc->byte_len) {
			/* (its bytes are dropped; doc/channel-protocol.md:
			 * no payload) */
			evrdma__rc_violation(rc, "a control message with a "
			    "payload");
			return;
		}
		if (!evrdma__ch_ctrl_allowed(rc->ret_ctrl, rc->ctrl)) {
			evrdma__rc_violation(rc, "control beyond its credits");
			return;
		}
		rc->ret_ctrl++;
		if (m.type == EVRDMA_CH_LOAN &&
		    evrdma__rc_take_loan(rc, &m) < 0)
			return;
		if (m.type == EVRDMA_CH_EOF) {
			if (rc->ch.end & CHE_PEER_EOF) {
				evrdma__rc_violation(rc, "a second EOF");
				return;
			}
			evrdma__chan_peer_eof(&rc->ch, m.reset);
		}
	}
	/* After the poll pass, not from inside it: sending there lets
	 * channels with traffic in flight refill ahead of the others
	 * (measured: unfair with 200 channels), and one pass per poll
	 * batches what all of its completions made due. */
	rc_schedule(rc);
}

/* A completion of the channel's own receive ring (its poll). */
void
evrdma__rc_recv_done(struct ch_rdma *rc, unsigned idx, const struct ibv_wc *wc)
{
	struct rc_wc w;

	if (idx >= rc->nbuf || rc->rb[idx].state != RB_POSTED) {
		evrdma__rc_internal(rc, "a receive completed that was not "
		    "posted");
		return;
	}
	rc->posted--;
	/* (with an error status, only the status is valid) */
	w.status = wc->status ? evrdma__wc_errno(wc->status) : 0;
	if (!w.status) {
		w.send_imm = wc->opcode == IBV_WC_RECV &&
		    (wc->wc_flags & IBV_WC_WITH_IMM);
		w.imm = ntohl(wc->imm_data);
		w.byte_len = wc->byte_len;
	}
	rc_arrived(rc, idx, &w);
	evrdma__ep_ring_done(&rc->conn->ep, 0, 1, w.status);
}

/* A receive of a queue's pool (the request layer's), which landed in
 * buffer ref->idx of the pool's ring. */
void
evrdma__rc_recv_cb(struct evrdma_conn *c, const struct evrdma_wc *wc,
    void *arg)
{
	struct ch_slotref *ref = arg;
	struct ch_rdma *rc;
	struct rc_wc w;

	rc = evrdma__rc_pool_taker(ref->ring->pool, c, wc, ref->idx);
	if (!rc)
		return;
	w.status = wc->status;
	w.send_imm = wc->opcode == EVRDMA_OP_RECV && wc->has_imm;
	w.imm = wc->imm_data;
	w.byte_len = wc->byte_len;
	rc_arrived(rc, ref->idx, &w);
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
int
evrdma__rc_post_pulls(struct ch_rdma *rc)
{
	while (rc->rx_pull < rc->rx_tail) {
		unsigned idx = rc->rxq[rc->rx_pull % rc->nbuf];
		struct ch_rbuf *b = &rc->rb[idx];

		if (b->state == RB_PULL) {
			/* from its send ring, or (wide) from its spill: what
			 * the peer named is its own memory, and a wrong name
			 * fails the READ, and the connection with it */
			struct evrdma_remote wide = { b->paddr, b->len,
			    b->prkey };
			int w = b->pslot == RB_WIDE;

			if (rc->pull_out >= rc->pull_cap)
				break;	/* rc_pull_cb resumes */
			if (evrdma_conn_post_read(rc->conn, rc->rmr,
			    (size_t)idx * rc->slot_size, b->len,
			    w ? &wide : &rc->peer_src,
			    w ? 0 : (uint64_t)b->pslot * rc->peer_slot_size,
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

/* Received bytes that can still reach input (data that is lost, or that
 * waits for a READ that will never be posted, cannot). */
int
evrdma__rc_waiting(struct ch_rdma *rc)
{
	if (rc->rx_head == rc->rx_tail)
		return 0;
	if (!(rc->ch.end & CHE_GONE))
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
	evrdma__chan_peer_eof_void(&rc->ch);
	while (rc->rx_head < rc->rx_tail) {
		unsigned idx = rc->rxq[rc->rx_head % rc->nbuf];

		rc->rb[idx].queued = 0;
		rxq_pop(rc);
		if (!rc->rb[idx].refs)
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

	rc->rwr = calloc(rc->nbuf, sizeof(*rc->rwr));
	rc->rsge = calloc(rc->nbuf, sizeof(*rc->rsge));
	if (!rc->rwr || !rc->rsge)
		return evrdma__fail(ENOMEM, "out of memory");
	for (i = 0; i < rc->nbuf; i++) {
		rc->rsge[i].addr = evrdma__mr_sge_addr(rc->rmr,
		    (size_t)i * rc->slot_size);
		rc->rsge[i].length = rc->slot_size;
		rc->rsge[i].lkey = rc->rmr->mr->lkey;
		rc->rwr[i].wr_id = evrdma__wr_ring(rc->tag, RC_WR_RECV, i);
		rc->rwr[i].sg_list = &rc->rsge[i];
		rc->rwr[i].num_sge = 1;
	}
	return 0;
}

/* The teardown gave up on the ring's receives: each buffer posted is free
 * again, without a completion. */
void
evrdma__rc_rx_forget(struct ch_rdma *rc)
{
	unsigned i;

	if (rc->pool || !rc->rwr)
		return;
	if (rc->conn)
		evrdma__ep_ring_forget(&rc->conn->ep, 0, rc->posted);
	for (i = 0; i < rc->nbuf; i++)
		if (rc->rb[i].state == RB_POSTED)
			rb_free(rc, i);
	rc->posted = 0;
}

/* Established: whether we pull the peer's messages. One that offers its
 * ring for our pulls must serve our READs (review r46: every pull would
 * wait for ever): 0, or -1 (a protocol violation). */
int
evrdma__rc_pull_setup(struct ch_rdma *rc, const struct evrdma_conn *conn)
{
	if (!rc->pull_min)
		rc->peer_src.rkey = 0;	/* we never read it */
	if (!rc->peer_src.rkey || conn->rd_out)
		return 0;
	evrdma__log(EVRDMA_LOG_WARN, "channel %p: protocol violation by the "
	    "peer: it offers pulls but serves no RDMA READ", (void *)rc);
	return -1;
}
