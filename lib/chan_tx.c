/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel's RDMA transport: send slots, writes into them
 * (staged, open, reserved), the messages posted with the credits we owe,
 * control messages and loans.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "chan_rdma.h"

/* The immediate of a message of @p type, carrying what we owe. (Inlined:
 * every message takes it.) */
static inline __attribute__((always_inline)) int
rc_take_returns(struct ch_rdma *rc, int type, struct evrdma__ch_imm *m)
{
	unsigned d = rc->ret_data > EVRDMA_CH_DRET_MAX ? EVRDMA_CH_DRET_MAX :
	    rc->ret_data;
	unsigned p = rc->ret_pull > EVRDMA_CH_PDONE_MAX ? EVRDMA_CH_PDONE_MAX :
	    rc->ret_pull;

	if (evrdma__rc_returns_ready(rc, rc->ret_data - d, 0) < 0)
		return -1;
	memset(m, 0, sizeof(*m));
	m->type = (uint8_t)type;
	m->dret = (uint16_t)d;
	m->cret = (uint8_t)rc->ret_ctrl;
	m->pdone = (uint8_t)p;
	rc->ret_data -= d;
	rc->ret_ctrl = 0;
	rc->ret_pull -= p;
	/* (what the peer may not have seen when it yields: counted while a
	 * RECLAIM is out, saturating) */
	if (rc->reclaim_out && rc->reclaim_ret <= UINT_MAX - d)
		rc->reclaim_ret += d;
	/* The peer, starved, waits for what we owe, pulls included. It
	 * stays starved until all of that went back: a message that leaves
	 * READs of its pulls still running must not drop the flag, or the
	 * pulls reported done later wait for a quarter of the ring that a
	 * peer holding fewer (it stopped with fewer out) never fills, and
	 * both sides wait for ever (seen on the two-guest wire) */
	/* On a pool, a starved peer also waits for a loan the pool may
	 * have had no room for: a message that lends it nothing leaves it
	 * starved, so that the pass lends once room comes back
	 * (evrdma__pool_room_freed()); forgetting it there left the peer with
	 * no credit and no way to say so (seen: 1 run in 10 of
	 * isolation_fine_reader). */
	if (!rc->ret_data && !rc->ret_pull && !rc->pull_wait &&
	    !rc->pull_out && (d || !rc->pool))
		rc->peer_starved = 0;
	return 0;
}

/* A CREDIT, EOF or RESET (an EOF with @p reset), chained for the pass's
 * post: 1, 0 no control credit in hand (or no room in the send queue),
 * -1 failed. */
static int
rc_post_ctrl(struct ch_rdma *rc, int type, int starved, int reset)
{
	struct evrdma__ch_imm m;
	int eof = type == EVRDMA_CH_EOF;

	if (!rc->c_credits || !evrdma__sq_room(rc))
		return 0;
	if (rc_take_returns(rc, type, &m) < 0)
		return -1;
	m.starved = (uint8_t)starved;
	m.reset = (uint8_t)reset;
	evrdma__sq_add(rc, NULL, 0, 0, evrdma__ch_imm_encode(&m),
	    eof ? RC_SQ_EOF : RC_SQ_CREDIT, 0);
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

	if (!rc->c_credits || !evrdma__sq_room(rc))
		return 0;
	if (evrdma__rc_returns_ready(rc, rc->ret_data, 0) < 0)
		return -1;
	memset(&m, 0, sizeof(m));
	m.type = EVRDMA_CH_LOAN;
	m.yield = (uint8_t)yield;
	m.loan = (uint16_t)n;
	m.cret = (uint8_t)rc->ret_ctrl;
	evrdma__sq_add(rc, NULL, 0, 0, evrdma__ch_imm_encode(&m),
	    RC_SQ_CREDIT, 0);
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
			rc->reclaim_ret = 0;
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
		evrdma__slot_release(rc, ref->idx);
	}
	evrdma__ring_unref(ring);
}

/* Put the first @p len bytes of send slot @p idx into @p buf by reference,
 * staged: posted from where they are when they reach output's front.
 * -1 (out of memory) leaves the slot as it was. */
static int
slot_stage(struct ch_rdma *rc, struct evbuffer *buf, unsigned idx, size_t len)
{
	uint8_t was = rc->sstate[idx];

	/* staged before the add: an evbuffer callback of the application's
	 * on output may drop the bytes, and run the cleanup, inside it */
	rc->sring->refs++;
	rc->sstate[idx] = SLOT_STAGED;
	if ((buf == rc->ch.output ?
	    evrdma__chan_output_put(&rc->ch, slot_mem(rc, idx), len,
	    rc_staged_cleanup, &rc->sring->slot[idx]) :
	    evbuffer_add_reference(buf, slot_mem(rc, idx), len,
	    rc_staged_cleanup, &rc->sring->slot[idx])) < 0) {
		rc->sstate[idx] = was;
		rc->sring->refs--;
		return -1;
	}
	return 0;
}

/*
 * What a send ring entry carried is done with (@p failed: its send failed,
 * was flushed, or never left): a DATA message's slot (once the peer also
 * did its pull) or spill chunk, our EOF (the linger's end is the pass's
 * to judge), our failure's RESET (the pass aborts the connection then).
 */
void
evrdma__rc_sq_release(struct ch_rdma *rc, uint32_t what, int failed)
{
	if (what & RC_SQ_CTRL) {
		if (what == RC_SQ_EOF && !failed) {
			rc->eof_done = 1;
			rc_schedule(rc);
		} else if (what == RC_SQ_RESET) {
			rc->st |= RC_RESET_WENT;
			rc_schedule(rc);
		}
		return;
	}
	rc->sq_data--;
	if (what & RC_SPILL_TAG) {
		if (evrdma__spill_sent(rc, what & ~RC_SPILL_TAG, failed) < 0)
			evrdma__rc_internal(rc, "a spill chunk's send "
			    "completed, not in flight");
		return;
	}
	/* a pull's slot is free once the peer has also done the pull */
	rc->sflags[what] |= SF_SENT;
	if (!(rc->sflags[what] & SF_PULL) || (rc->sflags[what] & SF_PULLED) ||
	    failed)
		evrdma__slot_release(rc, what);
}

/* A completion of the send ring: entry @p e and those before it are done.
 * A free slot (or room for one more message in flight) matters only to
 * output waiting for one, to a reservation that found none, and send
 * queue room to waiting pulls. */
void
evrdma__rc_send_done(struct ch_rdma *rc, unsigned e, const struct ibv_wc *wc)
{
	int status = wc->status ? evrdma__wc_errno(wc->status) : 0;
	int n = evrdma__sq_complete(rc, e, status != 0, evrdma__rc_sq_release);

	if (n < 0) {
		evrdma__rc_internal(rc, "a send completed that was not "
		    "outstanding");
		return;
	}
	if (!status && (rc->ch.out_len || (rc->st & RC_RESV_WANTED) ||
	    rc->pull_wait))
		rc_schedule(rc);
	evrdma__ep_ring_done(&rc->conn->ep, (unsigned)n, 0, status);
}

/*
 * How many of our messages the peer may have to pull at once: a quarter of
 * the ring, or half while output holds more than the ring. We are then
 * behind, and our CPU copies those bytes twice (into output, then into a
 * slot): the peer's should move more of them. A peer returns pulls done a
 * quarter of the ring at a time (evrdma__ch_credit_due), and with no more
 * out than that ours stopped until each return arrived. (1 MiB writes,
 * which keep output that deep: 26% of the messages pulled and 123 MB/s ->
 * 50% and 150 MB/s on Soft-RoCE, bench/ab-bw; 64 KiB writes, whose output
 * stays shallower, lost a quarter of their rate with half the ring
 * always, and keep theirs.)
 */
static inline unsigned
rc_pull_limit(const struct ch_rdma *rc)
{
	unsigned q = evrdma__ch_quarter(rc->slots);

	return rc->ch.out_len > slots_len(rc) ? 2 * q : q;
}

/*
 * Chain @p n bytes at @p off of @p mr as the next DATA message (a pull's
 * descriptor when @p pull), with the credits we owe; the caller checked
 * the peer's credits and the send queue's room. @p tag is what the send
 * ring entry carries (and spq, for a pull); @p len is what it carries.
 * (Inlined: every message comes here.)
 */
static inline __attribute__((always_inline)) int
rc_post_msg(struct ch_rdma *rc, struct evrdma_mr *mr, size_t off, size_t n,
    size_t len, unsigned tag, int pull)
{
	struct evrdma__ch_imm m;

	if (rc_take_returns(rc, EVRDMA_CH_DATA, &m) < 0)
		return -1;
	/* out of credits, or of send slots while pulls hold some (this one
	 * or earlier ones): the peer answers at once
	 * (evrdma__ch_credit_due), as the next message may wait for their
	 * slots */
	m.starved = rc->s_credits == 1 || (!rc->sfree && (pull || rc->spq_n));
	m.pull = (uint8_t)pull;
	evrdma__sq_add(rc, mr, off, n, evrdma__ch_imm_encode(&m), tag, 1);
	rc->sq_data++;
	if (pull)
		rc->spq[(rc->spq_head + rc->spq_n++) % rc->slots] = tag;
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

/* Pull while the peer keeps up with our pulls, write when it lags: the
 * bytes move either way, but on a software device the work of moving them
 * falls on the CPU of the side that posts the request, so this shares it. */
static inline int
rc_may_pull(const struct ch_rdma *rc, size_t n)
{
	return rc->pullable && n >= rc->peer_pull_min &&
	    rc->spq_n < rc_pull_limit(rc);
}

/*
 * Post send slot @p idx holding @p n bytes as the next DATA message.
 * (Inlined: every message comes here.)
 */
static inline __attribute__((always_inline)) int
rc_post_slot(struct ch_rdma *rc, unsigned idx, size_t n)
{
	size_t off = (size_t)idx * rc->slot_size, len = n;
	int pull;

	rc->sstate[idx] = SLOT_POSTED;
	pull = rc_may_pull(rc, n);
	rc->sflags[idx] = pull ? SF_PULL : 0;
	if (pull) {
		/* the peer READs the bytes where they are; we send only
		 * where: a descriptor after the slots */
		struct evrdma__ch_pull d = { idx, (uint32_t)n, 0, 0, 0 };

		off = slots_len(rc) +
		    (size_t)idx * EVRDMA_CH_PULL_DESC_LEN;
		n = evrdma__ch_pull_encode(rc->sring->mem + off, &d);
	}
	return rc_post_msg(rc, rc->smr, off, n, len, idx, pull);
}

/*
 * Post spill chunk @p k, output's front, as the next DATA message of @p n
 * bytes: as a wide pull of the chunk (its descriptor after the chunk's
 * bytes), or from where it is.
 */
static int
rc_post_spill(struct ch_rdma *rc, unsigned k, size_t n)
{
	struct ch_spill *s = &rc->spill[k];
	size_t off = 0, len = n;
	int pull = rc_may_pull(rc, n);

	s->state = SPILL_POSTED;
	s->flags = pull ? SF_PULL : 0;
	if (evrdma__chan_output_took(&rc->ch, NULL, n) < 0)
		return -1;
	if (pull) {
		struct evrdma__ch_pull d;

		memset(&d, 0, sizeof(d));
		d.wide = 1;
		d.addr = evrdma__mr_sge_addr(s->mr, 0);
		d.rkey = s->mr->mr->rkey;
		d.len = (uint32_t)n;
		off = s->ring->len - EVRDMA_CH_PULL_WIDE_LEN;
		n = evrdma__ch_pull_encode(s->ring->mem + off, &d);
	}
	return rc_post_msg(rc, s->mr, off, n, len, k | RC_SPILL_TAG, pull);
}

/* The staged send slot whose bytes begin at @p p, or -1. */
static int
rc_staged_at(const struct ch_rdma *rc, const void *p)
{
	size_t off;

	if ((const uint8_t *)p < rc->sring->mem ||
	    (const uint8_t *)p >= rc->sring->mem + slots_len(rc))
		return -1;
	off = (size_t)((const uint8_t *)p - rc->sring->mem);
	if (off % rc->slot_size || rc->sstate[off / rc->slot_size] !=
	    SLOT_STAGED)
		return -1;
	return (int)(off / rc->slot_size);
}

/*
 * Stream mode, output's front not a slot's worth of staged bytes: how much
 * of the @p n bytes due to copy into a slot. Not into a staged slot of
 * half a message or more behind it: a copy that took its first bytes would
 * leave the rest of it, and of every staged slot after it, off its slot's
 * start, so each would be copied in turn (a small write in front of a run
 * of large ones had every one of them copied twice). The bytes before it
 * go alone instead.
 */
static size_t
rc_copy_len(const struct ch_rdma *rc, size_t n)
{
	struct evbuffer_iovec v[4];
	size_t before = 0;
	int k, i;

	k = evbuffer_peek(rc->ch.output, (ev_ssize_t)n, NULL, v, 4);
	for (i = 0; i < k && i < 4 && before < n; i++) {
		if (before && v[i].iov_len >= rc_chunk(rc) / 2 &&
		    (rc_staged_at(rc, v[i].iov_base) >= 0 ||
		    (rc->spill_busy &&
		    evrdma__spill_find(rc, v[i].iov_base) >= 0)))
			return before;
		before += v[i].iov_len;
	}
	return n;
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
	while (((ch->enabled & EV_WRITE) || (rc->st & RC_CLOSING)) &&
	    evrdma__ch_can_send(rc->s_credits) && (olen = ch->out_len) &&
	    evrdma__sq_room(rc)) {
		struct evbuffer_iovec v;
		size_t n;
		int idx = -1;

		/* Every message in flight has a slot, or is spilled: with
		 * spilled ones out, as many as there are slots at most (the
		 * bound of spq, and of the send queue's room for
		 * DATA). (Not a slot's worth of room taken per spilled
		 * message instead: slots staged behind spilled output then
		 * held the room the output's front waited for, with nothing
		 * in flight.) With that many out, their sends' completions
		 * come: at most defer_max of them wait unsignaled. */
		if (rc->spill_busy && rc->sq_data >= rc->slots)
			break;	/* a completion resumes */
		n = evrdma__chan_output_next(ch, rc_chunk(rc));
		if (evrdma__chan_messages(ch)) {
			if (n > rc_chunk(rc) || n > olen || !n) {
				/* written before connect, larger than the
				 * peer's slots: it cannot go as one message */
				evrdma__fail(EMSGSIZE, "queued message of %zu "
				    "bytes exceeds the peer's %zu", n,
				    rc_chunk(rc));
				evrdma__rc_fail(rc, EVRDMA_REASON_RESOURCE);
				return -1;
			}
		}
		/* a staged slot at the front, exactly this message, or in
		 * stream mode at least half a message (sent alone: copying
		 * it to coalesce would cost more than the slot space saved):
		 * post it where it is; anything else is copied into a free
		 * slot */
		if (evbuffer_peek(ch->output, -1, NULL, &v, 1) != 1) {
			evrdma__rc_internal(rc, "output empty, its length "
			    "not");
			return -1;
		}
		if (!evrdma__chan_messages(ch) && v.iov_len < n &&
		    v.iov_len < rc_chunk(rc) / 2)
			n = rc_copy_len(rc, n);
		if (v.iov_len == n || (!evrdma__chan_messages(ch) &&
		    v.iov_len < n && v.iov_len >= rc_chunk(rc) / 2)) {
			idx = rc_staged_at(rc, v.iov_base);
			if (idx < 0 && rc->spill_busy) {
				int k = evrdma__spill_find(rc, v.iov_base);

				if (k >= 0) {
					if (rc_post_spill(rc, (unsigned)k,
					    v.iov_len) < 0)
						return -1;
					sent = 1;
					continue;
				}
			}
		}
		/* (output's callback unaware of the take: the channel
		 * ended, and nothing is sent of bytes output may still
		 * hold) */
		if (idx >= 0) {
			n = v.iov_len;
			rc->sstate[idx] = SLOT_POSTED;
			if (evrdma__chan_output_took(ch, NULL, n) < 0)
				return -1;
		} else {
			idx = evrdma__slot_alloc(rc, 0);
			if (idx < 0)
				break;	/* all in flight: a completion resumes */
			rc->sstate[idx] = SLOT_POSTED;
			if (evrdma__chan_output_took(ch,
			    slot_mem(rc, (unsigned)idx), n) < 0)
				return -1;
		}
		if (rc_post_slot(rc, (unsigned)idx, n) < 0)
			return -1;
		sent = 1;
	}
	/* the spill's chunks outlived a burst whose last bytes were plain
	 * (beyond the spill's limit): they go back once output is empty */
	if (rc->spill && !rc->spill_busy && !ch->out_len)
		evrdma__spill_idle(rc);
	/* output waits for the peer's credits: a stall begins (counted;
	 * the clock is read only here and when it ends) */
	if (!rc->s_credits && ch->out_len && !rc->stall_t0) {
		rc->stall_t0 = evrdma__now_us();
		rc->stalls++;
	}
	return sent;
}

/* The sends of a pass, under one doorbell: pulls, data, EOF, credits.
 * Returns as rc_send_data. */
int
evrdma__rc_send_all(struct ch_rdma *rc)
{
	struct evrdma_channel *ch = &rc->ch;
	int sent = 0;

	/* Taking a message out of output runs the application's callbacks
	 * on output before the message is posted: one that flushes or frees
	 * the channel there would post what follows first (bytes out of
	 * order, a credit spent twice, EOF before the message: found by
	 * review). Those sends wait for the next pass. */
	if (rc->st & RC_IN_SEND) {
		rc_schedule(rc);
		return 0;
	}
	rc->st |= RC_IN_SEND;
	if (rc->pull_wait && evrdma__rc_post_pulls(rc) < 0)
		sent = -1;
	/* (a freed channel sends what its user was told is written: the
	 * adapter's output; a channel's own was discarded at the free) */
	if (sent >= 0 && (!(rc->st & RC_CLOSING) || ch->out_taken))
		sent = rc_send_data(rc);
	if (sent >= 0 && (rc->reclaim_want || rc->yield_asked) &&
	    rc_send_loans(rc) < 0)
		sent = -1;
	/* the end after everything sent: EOF, or a RESET when freed with
	 * bytes unread (a socket closed so resets the connection, but sends
	 * what its kernel accepted first) */
	if (sent >= 0 && !rc->eof_sent &&
	    ((rc->st & RC_CLOSING) || ch->shut_wr) &&
	    !ch->out_len && rc->wopen < 0) {
		int r = rc_post_ctrl(rc, EVRDMA_CH_EOF, rc->spq_n != 0,
		    (rc->st & (RC_CLOSING | RC_RESET_DUE)) ==
		    (RC_CLOSING | RC_RESET_DUE));

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
	/*
	 * The messages' completions may wait for a later send's (fewer CQ
	 * events and dispatches) only where nothing sleeps on them: under
	 * busy polling, or while output still holds bytes, whose sends
	 * follow. Event-driven, the last message of a pass is signaled: on
	 * Soft-RoCE its completion, back within microseconds, kept the loop
	 * awake while the reply was on its way, and without it a 64 B round
	 * trip took longer (stop 23's A/B and this one's, bench/README.md).
	 * Never with no send slot free: the next message may need the slot
	 * of one of these, and without the completion no send follows
	 * (test_chan_stream's channel_copy_behind_staged_slots stood still).
	 */
	if (evrdma__sq_flush(rc, (rc->ch.base->cfg.busy_poll_us > 0 ||
	    ch->out_len > 0) && rc->sfree > 0, evrdma__rc_sq_release) < 0)
		sent = -1;
	rc->st &= ~RC_IN_SEND;
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

	/* (output's length read, not its count: inside an application's
	 * callback on output, the addition it runs for is not counted yet,
	 * and this write would go before it: review r43) */
	if (!(rc->st & RC_PRE_SEND) || ch->out_len || ch->base->cfg.slow_path ||
	    evbuffer_get_length(ch->output))
		return -1;
	if (rc->wopen >= 0) {
		if (evrdma__chan_messages(ch) ||
		    len > rc_chunk(rc) - rc->wopen_len)
			return -1;
		memcpy(slot_mem(rc, (unsigned)rc->wopen) + rc->wopen_len, data,
		    len);
		rc->wopen_len += len;
		return 0;
	}
	if (!rc_up(rc) || !(ch->enabled & EV_WRITE) ||
	    !evrdma__ch_can_send(rc->s_credits) || len > rc_chunk(rc) ||
	    (rc->spill_busy && rc->sq_data >= rc->slots))
		return -1;
	idx = evrdma__slot_copy(rc, data, len);
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
	if (slot_stage(rc, tmp, (unsigned)rc->wopen, rc->wopen_len) < 0) {
		evbuffer_free(tmp);
		return -1;
	}
	rc_ = evrdma__chan_output_unget(ch, tmp, rc->wopen_len);
	rc->wopen = -1;
	evbuffer_free(tmp);	/* if the prepend failed, frees the slot */
	return rc_;
}

/* Drop the open write and the reservation (the channel is going or the
 * connection is over). */
void
evrdma__rc_drop_pending_writes(struct ch_rdma *rc)
{
	if (rc->wopen >= 0) {
		evrdma__slot_drop(rc, (unsigned)rc->wopen, rc->wopen_len);
		rc->wopen = -1;
	}
	if (rc->resv >= 0) {
		evrdma__slot_drop(rc, (unsigned)rc->resv, rc->resv_max);
		rc->resv = -1;
	}
}

/*
 * The open write is sent by this pass, unless the connection is over (it
 * goes as unsent output does) or writing was disabled since (it goes to
 * the front of output, to wait there).
 */
void
evrdma__rc_wopen_settle(struct ch_rdma *rc)
{
	if (rc->st & RC_CLOSING)
		return;		/* (kept only when taken: out_taken) */
	if (!rc_up(rc)) {
		evrdma__slot_drop(rc, (unsigned)rc->wopen, rc->wopen_len);
		rc->wopen = -1;
		return;
	}
	if (!(rc->ch.enabled & EV_WRITE) && rc_wopen_to_output(rc) < 0) {
		if (rc->wopen >= 0) {
			evrdma__slot_drop(rc, (unsigned)rc->wopen,
			    rc->wopen_len);
			rc->wopen = -1;
		}
		evrdma__rc_fail(rc, EVRDMA_REASON_RESOURCE);
	}
}

/*
 * A write larger than a slot, in stream mode: as many whole slots of it as
 * are free (one stays for the copy path) are copied there and staged, as
 * much of the rest as the spill takes goes to chunks of it (chan_spill.c),
 * and what is left to output behind them. The bytes of a large write are
 * then copied once, not into output and again into a slot (a 1 MiB write
 * went at 60% of a 64 KiB one's speed). All or nothing, as
 * bufferevent_write(): the pieces are gathered in a buffer of their own
 * and moved to output whole (moving chains allocates nothing), so memory
 * that runs out part-way leaves output as it was and the staged slots and
 * chunks free again (when they were put in output directly, a failed write
 * had sent its first slots, and a caller that retried sent them twice:
 * test_chan_stream's channel_write_out_of_memory). -1 when neither a slot
 * nor the spill has room, or memory ran out: the caller's copy into output
 * is then the write.
 */
static int
rc_write_large(struct ch_rdma *rc, const uint8_t *p, size_t len)
{
	struct evbuffer *tmp;
	size_t chunk = rc_chunk(rc), fit;
	int spill;

	fit = rc->sfree > 1 ? (size_t)(rc->sfree - 1) * chunk : 0;
	/* The spill takes what the slots cannot, within its limit, when its
	 * chunks are there already or that is a quarter of the ring or more:
	 * a smaller rest costs less copied twice than registered (a chunk
	 * registered and given back per 1 MiB ping-pong made its round trip
	 * 7% slower, bench/README.md) */
	spill = len > fit && rc_up(rc) && chunk >= RC_SPILL_CHUNK_MIN &&
	    rc->spill_busy * chunk < RC_SPILL_MAX &&
	    (rc->spill_busy || len - fit >= RC_SPILL_MIN(rc) * chunk);
	if ((!fit && !spill) || !(tmp = evbuffer_new()))
		return -1;
	while (len && rc->sfree > 1) {
		size_t n = len < chunk ? len : chunk;
		int idx = evrdma__slot_copy(rc, p, n);

		if (idx < 0)
			break;
		if (slot_stage(rc, tmp, (unsigned)idx, n) < 0) {
			evrdma__slot_drop(rc, (unsigned)idx, n);
			goto fail;
		}
		p += n;
		len -= n;
	}
	if (spill && len) {
		size_t n = evrdma__spill_write(rc, tmp, p, len);

		p += n;
		len -= n;
	}
	if ((len && evbuffer_add(tmp, p, len) < 0) ||
	    evbuffer_add_buffer(rc->ch.output, tmp) < 0)
		goto fail;
	evbuffer_free(tmp);
	return 0;
fail:
	evbuffer_free(tmp);	/* (its staged slots and chunks free again) */
	return -1;
}

/*
 * Copy a write straight into a free send slot and put the slot in output
 * by reference, so that sending it needs no second copy. Small writes
 * behind others are left to evbuffer (and coalesced with them when sent);
 * a small write into an empty output is staged too: the common request
 * and reply, sent alone. One slot always stays for the copy path, which
 * must make progress when staged data does not fit a message.
 */
static __attribute__((noinline)) int
rc_write_slot(struct ch_rdma *rc, const void *data, size_t len)
{
	struct evrdma_channel *ch = &rc->ch;
	int idx;

	if (len > rc_chunk(rc) && !evrdma__chan_messages(ch) &&
	    !(rc->st & RC_CLOSING) && !ch->base->cfg.slow_path)
		return rc_write_large(rc, data, len);
	if ((len < STAGE_MIN && ch->out_len) ||
	    len > rc_chunk(rc) || (rc->st & RC_CLOSING))
		return -1;
	idx = evrdma__slot_copy(rc, data, len);
	if (idx < 0)
		return -1;
	if (slot_stage(rc, ch->output, (unsigned)idx, len) < 0) {
		evrdma__slot_drop(rc, (unsigned)idx, len);
		return -1;
	}
	return 0;
}

/* (the open write inline, the rest apart: this runs for every reply,
 * and the rest's registers cost its entry and exit 5 instructions more
 * per 64 B round trip, callgrind) */
int
evrdma__op_write(struct evrdma_channel *ch, const void *data, size_t len)
{
	struct ch_rdma *rc = to_rc(ch);

	if (rc_write_open(rc, data, len) == 0)
		return 0;
	return rc_write_slot(rc, data, len);
}

void *
evrdma__op_reserve(struct evrdma_channel *ch, size_t len)
{
	struct ch_rdma *rc = to_rc(ch);
	int idx;

	if (!(rc->st & RC_EST)) {
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
		idx = evrdma__slot_alloc(rc, 1);
		if (idx < 0) {
			/* the write callback tells when one is free */
			rc->st |= RC_RESV_WANTED;
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

int
evrdma__op_commit(struct evrdma_channel *ch, size_t len)
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
		evrdma__slot_drop(rc, idx, rc->resv_max);
		return 0;
	}
	if (ch->shut_wr) {
		evrdma__slot_drop(rc, idx, rc->resv_max);
		return evrdma__fail(EPIPE, "channel is shut down");
	}
	/* what was written past @p len is not sent either */
	if (rc->resv_max > len)
		memset(slot_mem(rc, idx) + len, 0, rc->resv_max - len);
	if (slot_stage(rc, ch->output, idx, len) < 0) {
		evrdma__slot_drop(rc, idx, len);
		return evrdma__fail(ENOMEM, "out of memory");
	}
	return 0;
}
