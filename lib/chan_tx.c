/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel's RDMA transport: its send slots (rc->tx, this
 * file's; chan_tx.h changes them for the others), staged in output by
 * reference or copied into, and sent as DATA messages from where they
 * are, or as pulls; their release once sent (and pulled); output's send.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "chan_ctl.h"
#include "chan_sq.h"
#include "chan_tx.h"
#include "chan_write.h"

/* Output dropped a staged slot without sending it (the user drained
 * output, or the channel is going): free again, and zeroed, since a peer
 * that pulls could read it and it is no longer meant for the peer. */
static void
rc_staged_cleanup(const void *data, size_t len, void *arg)
{
	struct ch_slotref *ref = arg;
	struct ch_ring *ring = ref->ring;
	struct ch_rdma *rc = ring->owner;

	if (rc && rc->tx.state[ref->idx] == SLOT_STAGED) {
		memset(slot_mem(rc, ref->idx), 0, len);
		evrdma__slot_release(rc, ref->idx);
	}
	evrdma__ring_unref(ring);
}

/* Put the first @p len bytes of send slot @p idx into @p buf by reference,
 * staged: posted from where they are when they reach output's front.
 * -1 (out of memory) leaves the slot as it was. */
int
evrdma__tx_stage(struct ch_rdma *rc, struct evbuffer *buf, unsigned idx,
    size_t len)
{
	uint8_t was = rc->tx.state[idx];

	/* staged before the add: an evbuffer callback of the application's
	 * on output may drop the bytes, and run the cleanup, inside it */
	rc->tx.ring->refs++;
	rc->tx.state[idx] = SLOT_STAGED;
	if ((buf == evrdma__chan_output(&rc->ch) ?
	    evrdma__chan_output_put(&rc->ch, slot_mem(rc, idx), len,
	    rc_staged_cleanup, &rc->tx.ring->slot[idx]) :
	    evbuffer_add_reference(buf, slot_mem(rc, idx), len,
	    rc_staged_cleanup, &rc->tx.ring->slot[idx])) < 0) {
		rc->tx.state[idx] = was;
		rc->tx.ring->refs--;
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
			ctl_eof_done(rc);
			rc_schedule(rc);
		} else if (what == RC_SQ_RESET) {
			rc_set(rc, RC_RESET_WENT);
			rc_schedule(rc);
		}
		return;
	}
	if (what & RC_SPILL_TAG) {
		if (evrdma__spill_sent(rc, what & ~RC_SPILL_TAG, failed) < 0)
			evrdma__rc_internal(rc, "a spill chunk's send "
			    "completed, not in flight");
		return;
	}
	/* a pull's slot is free once the peer has also done the pull */
	rc->tx.flags[what] |= SF_SENT;
	if (!(rc->tx.flags[what] & SF_PULL) || (rc->tx.flags[what] & SF_PULLED) ||
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
	if (!status && (evrdma__chan_out_len(&rc->ch) || (rc->st & RC_RESV_WANTED) ||
	    rc->rx.pull_wait))
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

	return evrdma__chan_out_len(&rc->ch) > slots_len(rc) ? 2 * q : q;
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

	if (ctl_take_returns(rc, EVRDMA_CH_DATA, &m) < 0)
		return -1;
	/* out of credits, or of send slots while pulls hold some (this one
	 * or earlier ones): the peer answers at once
	 * (evrdma__ch_credit_due), as the next message may wait for their
	 * slots */
	/* (ctl_take_returns() spent its credit: starved says this was the
	 * last; a test of cr.s == 1 here was one too late, and a pool's
	 * peer never lent again: isolation_fine_reader stood still) */
	m.starved = rc->cr.s == 0 || (!rc->tx.nfree && (pull || rc->tx.pq_n));
	m.pull = (uint8_t)pull;
	evrdma__sq_add(rc, mr, off, n, evrdma__ch_imm_encode(&m), tag, 1);
	if (pull)
		rc->tx.pq[(rc->tx.pq_head + rc->tx.pq_n++) % rc->slots] = tag;
	rc->tx.msgs++;
	rc->tx.bytes += len;
	if (pull) {
		rc->tx.pulls++;
		rc_base(rc)->stats.ch_pulled++;
	} else {
		rc_base(rc)->stats.ch_written++;
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
	    rc->tx.pq_n < rc_pull_limit(rc);
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

	rc->tx.state[idx] = SLOT_POSTED;
	pull = rc_may_pull(rc, n);
	rc->tx.flags[idx] = pull ? SF_PULL : 0;
	if (pull) {
		/* the peer READs the bytes where they are; we send only
		 * where: a descriptor after the slots */
		struct evrdma__ch_pull d = { idx, (uint32_t)n, 0, 0, 0 };

		off = slots_len(rc) +
		    (size_t)idx * EVRDMA_CH_PULL_DESC_LEN;
		n = evrdma__ch_pull_encode(rc->tx.ring->mem + off, &d);
	}
	return rc_post_msg(rc, rc->tx.mr, off, n, len, idx, pull);
}

/*
 * Post spill chunk @p k, output's front, as the next DATA message of @p n
 * bytes: as a wide pull of the chunk (its descriptor after the chunk's
 * bytes), or from where it is.
 */
static int
rc_post_spill(struct ch_rdma *rc, unsigned k, size_t n)
{
	size_t off = 0, len = n;
	int pull = rc_may_pull(rc, n);
	const struct ch_spill *s = evrdma__spill_posting(rc, k, pull);

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

	if ((const uint8_t *)p < rc->tx.ring->mem ||
	    (const uint8_t *)p >= rc->tx.ring->mem + slots_len(rc))
		return -1;
	off = (size_t)((const uint8_t *)p - rc->tx.ring->mem);
	if (off % rc->slot_size || rc->tx.state[off / rc->slot_size] !=
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

	k = evbuffer_peek(evrdma__chan_output(&rc->ch), (ev_ssize_t)n, NULL, v, 4);
	for (i = 0; i < k && i < 4 && before < n; i++) {
		if (before && v[i].iov_len >= rc_chunk(rc) / 2 &&
		    (rc_staged_at(rc, v[i].iov_base) >= 0 ||
		    (rc->sp.busy &&
		    evrdma__spill_find(rc, v[i].iov_base) >= 0)))
			return before;
		before += v[i].iov_len;
	}
	return n;
}

/* Send the open write, then as much of output as the credits and our send
 * ring allow: 1 when something went, 0 when nothing did, -1 on failure. */
int
evrdma__tx_send_data(struct ch_rdma *rc)
{
	struct evrdma_channel *ch = &rc->ch;
	size_t olen, wlen;
	int sent = 0, w;

	if ((w = evrdma__wr_take_open(rc, &wlen)) >= 0) {
		/* it was opened with a credit in hand and goes first, so
		 * the credit is still there */
		if (rc_post_slot(rc, (unsigned)w, wlen) < 0)
			return -1;
		sent = 1;
	}
	while ((evrdma__chan_writing(ch) || (rc->st & RC_CLOSING)) &&
	    evrdma__ch_can_send(rc->cr.s) && (olen = evrdma__chan_out_len(ch)) &&
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
		if (rc->sp.busy && rc->sq.data >= rc->slots)
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
		if (evbuffer_peek(evrdma__chan_output(ch), -1, NULL, &v, 1) != 1) {
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
			if (idx < 0 && rc->sp.busy) {
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
			rc->tx.state[idx] = SLOT_POSTED;
			if (evrdma__chan_output_took(ch, NULL, n) < 0)
				return -1;
		} else {
			idx = evrdma__slot_alloc(rc, 0);
			if (idx < 0)
				break;	/* all in flight: a completion resumes */
			rc->tx.state[idx] = SLOT_POSTED;
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
	if (rc->sp.c && !rc->sp.busy && !evrdma__chan_out_len(ch))
		evrdma__spill_idle(rc);
	/* output waits for the peer's credits: a stall begins (counted;
	 * the clock is read only here and when it ends) */
	if (!rc->cr.s && evrdma__chan_out_len(ch) && !rc->tx.stall_t0) {
		rc->tx.stall_t0 = evrdma__now_us();
		rc->tx.stalls++;
	}
	return sent;
}

/* The peer has done @p n more of our pulls (in order). -1 when it claims
 * more than we made; -2 when our own record is impossible (the connection
 * fails for it). */
int
evrdma__tx_pulls_done(struct ch_rdma *rc, unsigned n)
{
	if (n > rc->tx.pq_n)
		return -1;
	for (; n; n--) {
		unsigned idx = rc->tx.pq[rc->tx.pq_head];

		rc->tx.pq_head = (rc->tx.pq_head + 1) % rc->slots;
		rc->tx.pq_n--;
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
		if (rc->tx.state[idx] != SLOT_POSTED)
			continue;
		if (rc->tx.flags[idx] & SF_PULLED) {
			evrdma__rc_internal(rc, "a slot's pull done twice");
			return -2;
		}
		rc->tx.flags[idx] |= SF_PULLED;
		if (rc->tx.flags[idx] & SF_SENT)
			evrdma__slot_release(rc, idx);
	}
	evrdma__rc_linger_check(rc);
	return 0;
}

/* A free send slot, keeping @p reserve free for the copy path. */
int
evrdma__slot_alloc(struct ch_rdma *rc, unsigned reserve)
{
	unsigned i;

	if (rc->tx.nfree <= reserve)
		return -1;
	for (i = 0; i < rc->slots; i++) {
		unsigned idx = (rc->tx.next + i) % rc->slots;

		if (rc->tx.state[idx] == SLOT_FREE) {
			rc->tx.next = (idx + 1) % rc->slots;
			rc->tx.nfree--;
			return (int)idx;
		}
	}
	return -1;
}

void
evrdma__slot_release(struct ch_rdma *rc, unsigned idx)
{
	rc->tx.state[idx] = SLOT_FREE;
	rc->tx.nfree++;
}

/* A slot goes back without having been sent (a cancelled reservation, an
 * open write or a reservation dropped by a free or the connection's end):
 * its first @p len bytes, all the application may have written there,
 * are zeroed first, since a peer that pulls can read the whole ring and
 * they were never meant for it. */
void
evrdma__slot_drop(struct ch_rdma *rc, unsigned idx, size_t len)
{
	memset(slot_mem(rc, idx), 0, len);
	evrdma__slot_release(rc, idx);
}

/* The send ring's memory and its slots' bookkeeping (evrdma__rc_new()). */
int
evrdma__tx_new(struct ch_rdma *rc)
{
	rc->tx.ring = evrdma__ring_new(rc, rc->slots, rc->slot_size,
	    RC_SRING_EXTRA(rc->slots));
	rc->tx.state = calloc(rc->slots, 1);
	rc->tx.flags = calloc(rc->slots, 1);
	rc->tx.pq = calloc(rc->slots, sizeof(*rc->tx.pq));
	rc->tx.nfree = rc->slots;
	return rc->tx.ring && rc->tx.state && rc->tx.flags && rc->tx.pq ?
	    0 : -1;
}

/* Register the send ring in @p pd, readable by the peer when @p remote
 * (it pulls). 0, or -1 with errno. */
int
evrdma__tx_setup(struct ch_rdma *rc, struct evrdma__pd *pd, int remote)
{
	int access = remote ? EVRDMA_ACCESS_REMOTE_READ : 0;
	struct evrdma_mr *mr;

	/* (a warm set's registration may be the one wanted already) */
	if (rc->tx.mr && rc->tx.mr->pd == pd && rc->tx.mr->access == access)
		return 0;
	mr = evrdma__mr_reg(rc_base(rc), pd, rc->tx.ring->mem, rc->tx.ring->len,
	    access);
	if (!mr)
		return -1;
	evrdma_mr_free(rc->tx.mr);
	rc->tx.mr = mr;
	return 0;
}

int
evrdma__tx_untouched(const struct ch_rdma *rc)
{
	return rc->tx.nfree == rc->slots && rc->tx.ring->refs == 1 &&
	    !rc->tx.mr;
}

void
evrdma__tx_adopt(struct ch_rdma *rc, struct ch_ring *ring,
    struct evrdma_mr *mr)
{
	evrdma__ring_unref(rc->tx.ring);
	ring->owner = rc;
	rc->tx.ring = ring;
	rc->tx.mr = mr;
}

void
evrdma__tx_disown(struct ch_rdma *rc)
{
	rc->tx.ring = NULL;
	rc->tx.mr = NULL;
}

/* The connection is gone: its registration goes (output may still hold
 * references into the ring's memory). */
void
evrdma__tx_close(struct ch_rdma *rc)
{
	evrdma_mr_free(rc->tx.mr);
	rc->tx.mr = NULL;
}

/* The channel goes: the evbuffers' cleanups must not reach it any more
 * (before its output goes). */
void
evrdma__tx_detach(struct ch_rdma *rc)
{
	if (rc->tx.ring)
		rc->tx.ring->owner = NULL;
}

void
evrdma__tx_free(struct ch_rdma *rc)
{
	evrdma__tx_close(rc);
	if (rc->tx.ring)
		evrdma__ring_unref(rc->tx.ring);
	rc->tx.ring = NULL;
	free(rc->tx.state);
	free(rc->tx.flags);
	free(rc->tx.pq);
}
