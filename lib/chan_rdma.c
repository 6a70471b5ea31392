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

#include "chan_rdma.h"

/*
 * The end of a pass beyond the steady state: the peer's reset or orderly
 * end, our connection's end, and what earlier calls left owed to the
 * write callback. @return @p sent, or 1 when a write callback is owed.
 */
static int
rc_pass_rare(struct ch_rdma *rc, int sent)
{
	struct evrdma_channel *ch = &rc->ch;

	if (rc->st & RC_RESET_WENT)
		evrdma__rc_reset_went(rc);
	/* The peer reset the connection: nothing more comes; once what we
	 * pull of its messages is in, ours ends too (what output holds
	 * cannot go: ERROR | WRITING, as a socket's write after a reset) */
	if ((ch->end & CHE_PEER_RESET) && rc->conn &&
	    !(rc->st & (RC_CONN_FREED | RC_ENDED | RC_CLOSING)) &&
	    !rc->pull_wait && !rc->pull_out) {
		evrdma__chan_end_reason(ch, EVRDMA_REASON_DISCONNECTED, 0);
		evrdma__rc_conn_free(rc);
	}
	/* The connection ended and every receive has come back (flushed):
	 * nothing more arrives, and nothing more can be sent. (closed()
	 * says the same, later: it also waits for the peer's DISCONNECTED.) */
	if ((rc->st & RC_ENDED) && !rc->posted && !rc->pull_out &&
	    !(ch->end & CHE_GONE) &&
	    (!rc->pool || (rc->st & RC_CONN_FREED))) {
		evrdma__rc_judge_end(rc);
		evrdma__chan_gone(ch);
		evrdma__rc_drop_pending_writes(rc);
		if (rc->pool)
			evrdma__rc_pool_depart(rc);
	}
	if ((rc->st & RC_EST) && (ch->end & (CHE_PEER_EOF | CHE_GONE)))
		evrdma__chan_check_end(ch, evrdma__rc_waiting(rc));
	/* a reservation that found no slot is told of a free one as a
	 * write is of drained output */
	if ((rc->st & RC_RESV_WANTED) && rc->sfree > 1) {
		rc->st &= ~RC_RESV_WANTED;
		sent = 1;
	}
	if (rc->st & RC_FLUSH_SENT) {
		rc->st &= ~RC_FLUSH_SENT;
		sent = 1;
	}
	return sent;
}

/*
 * Once per loop iteration with something due (and after every poll pass
 * that made something due): deliver, let the read callbacks reply, send
 * (coalescing all writes of the iteration) with the credits we owe, top
 * up the receives, report the end if it is due, then the write callback.
 * In the steady state (connected, nothing ending, nothing owed: one test
 * of rc->st and the channel's end flags) the end's checks are skipped.
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
		evrdma__rc_pool_pass(rc);
	if ((rc->st & RC_EST) && !(ch->end & (CHE_FREED | CHE_RD_ENDED))) {
		/* what the read callback writes or frees is sent below */
		rc->st |= RC_PRE_SEND;
		evrdma__rc_deliver(rc);
		rc->st &= ~RC_PRE_SEND;
	}
	if (rc->wopen >= 0)
		evrdma__rc_wopen_settle(rc);
	/* (connected, or freed and still sending what is owed) */
	if (rc->conn && !(rc->st & (RC_CONN_FREED | RC_ENDED | RC_FAILING)) &&
	    (rc->st & (RC_EST | RC_CLOSING))) {
		sent = evrdma__rc_send_all(rc);
		if (sent < 0) {
			if (rc->conn)
				evrdma__rc_fail(rc, EVRDMA_REASON_RESOURCE);
		} else if (rc->nfree >= (rc->spare ? rc->spare : 1) &&
		    evrdma__rc_post_free(rc) < 0 && errno != EPIPE) {
			/* the sends are out: now top up the receives, once
			 * every spare is used (in batches of 4, not 2: 60
			 * instructions less per 64 B round trip, callgrind;
			 * the credits' cover, evrdma__rc_returns_ready(),
			 * still posts first whenever a return needs it) */
			evrdma__rc_fail(rc, EVRDMA_REASON_RESOURCE);
		}
	}
	/* a RESET (evrdma__rc_fail()) chained where no sends of a pass ran */
	if (rc->sq_head && rc->conn)
		(void)evrdma__sq_flush(rc, 0, evrdma__rc_sq_release);
	if ((rc->st & RC_PASS_RARE) ||
	    (ch->end & (CHE_PEER_RESET | CHE_PEER_EOF | CHE_GONE)))
		sent = rc_pass_rare(rc, sent);
	if ((rc->st & RC_EST) && !(ch->end & CHE_FREED))
		evrdma__chan_sent(ch, sent > 0);
	/* credits owed once the traffic paused go back then (RET_IDLE_MS):
	 * not at once (a stream would send a CREDIT per pass), not never (a
	 * peer that ends would not know we consumed its last bytes) */
	if (rc->ret_data && !rc->ret_armed && rc_up(rc) && rc->ret_ev &&
	    evrdma__ev_timer_start(rc->ret_ev, RET_IDLE_MS) == 0) {
		rc->ret_armed = 1;
		rc->ret_mark = rc->rx_tail;
	}
	/* (set by the write callback too) */
	if (rc->st & (RC_CLOSING | RC_AGAIN)) {
		evrdma__rc_linger_check(rc);
		if (rc->st & RC_AGAIN) {
			rc->st &= ~RC_AGAIN;
			rc_schedule(rc);
		}
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

/* A completion of the channel's own work requests (rings.c). */
static void
rc_ring_complete(void *owner, const struct ibv_wc *wc, unsigned kind,
    unsigned idx)
{
	struct ch_rdma *rc = owner;

	if (kind == RC_WR_SEND)
		evrdma__rc_send_done(rc, idx, wc);
	else
		evrdma__rc_recv_done(rc, idx, wc);
}

static const struct evrdma__rings_ops rc_rings_ops = {
	.complete = rc_ring_complete,
};

/* The QP is in the error state: our sends' flushes are to come, and one
 * signaled send tells that those left unsignaled are done. */
static void
own_drain(void *owner, struct evrdma_conn *conn)
{
	evrdma__sq_drain(owner);
}

/* The teardown stops waiting: what the rings posted is forgotten, each
 * slot and buffer released once, and no completion of theirs comes here
 * any more. */
static void
own_cancel(void *owner, struct evrdma_conn *conn)
{
	struct ch_rdma *rc = owner;

	evrdma__sq_forget(rc, evrdma__rc_sq_release);
	evrdma__rc_rx_forget(rc);
	if (rc->tag && rc->ch.base)
		evrdma__rings_del(rc->ch.base, rc->tag);
	rc->tag = 0;
}

/* Register the rings and post the receives. */
static int
rc_setup(struct ch_rdma *rc, struct evrdma_conn *conn, int src_remote)
{
	struct evrdma_base *base = rc->ch.base;
	struct evrdma__pd *pd = evrdma__conn_pd(conn);
	const struct ibv_device_attr *da = evrdma__conn_dev_attr(conn);
	unsigned sq = evrdma__conn_sq_depth(conn);

	rc->tag = evrdma__rings_add(base, &rc_rings_ops, rc);
	if (!rc->tag || evrdma__sq_init(rc, conn) < 0)
		return -1;
	/* We pull when the device can issue READs and the send queue has
	 * room for them beside our own messages (slots + ctrl at most). */
	if (rc->pool)
		return evrdma__rc_pool_setup(rc, conn);
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
	if (!rc->rmr || !rc->smr || evrdma__rc_rx_init(rc) < 0)
		return -1;
	return evrdma__rc_post_free(rc);
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

/*
 * Our QP's RNR retries are ours to decide, whatever the peer asked
 * (conn_cm.c): none toward a peer's own ring, whose credits guarantee a
 * posted receive, so that an RNR fails the connection at once; for ever
 * toward a pool, whose RNRs an honest peer meets while a violator's
 * messages hold buffers promised to others, until the pool's next poll
 * (doc/channel-protocol.md, "Lending"). A pool that never posts holds our
 * sends as a TCP peer's closed window does; the keepalive ends that
 * (EVRDMA_REASON_PEER_DEAD).
 */
static void
rc_rnr_retry(struct ch_rdma *rc, struct evrdma_conn *conn)
{
	evrdma__conn_set_rnr_retry(conn, rc->peer_lends ? 7 : 0);
}

static int
own_prepare(void *owner, struct evrdma_conn *conn, const uint8_t *peer,
    size_t peer_len, uint8_t *out, size_t *len, int *code)
{
	struct ch_rdma *rc = owner;

	*code = EVRDMA_REJECT_RESOURCES;
	if (peer) {
		if (rc_hs_in(rc, peer, peer_len, code) < 0) {
			errno = EPROTO;
			return -1;
		}
		rc_rnr_retry(rc, conn);
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

/* Active side: the listener's reply, before our QP may send. */
static int
own_reply(void *owner, struct evrdma_conn *conn, const uint8_t *peer,
    size_t peer_len)
{
	struct ch_rdma *rc = owner;
	int code;

	if (rc_hs_in(rc, peer, peer_len, &code) < 0)
		return -1;
	rc_rnr_retry(rc, conn);
	if (!rc->peer_pull_min && rc->src_remote && rc_unexpose(rc, conn) < 0)
		return -1;
	return 0;
}

static int
own_established(void *owner, struct evrdma_conn *conn)
{
	struct ch_rdma *rc = owner;

	rc->pullable = rc->peer_pull_min && rc->src_remote;
	if (evrdma__rc_pull_setup(rc, conn) < 0)
		return -1;
	if (rc->pool && evrdma__rc_pool_join(rc) < 0) {
		evrdma__log(EVRDMA_LOG_WARN, "channel %p: %s", (void *)rc,
		    evrdma_errmsg());
		evrdma__rc_fail(rc, EVRDMA_REASON_RESOURCE);
		return 0;
	}
	if (!rc->passive) {
		rc->st |= RC_EST;
		evrdma__chan_connected(&rc->ch);
		rc_schedule(rc);
	}
	return 0;
}

static void
own_ended(void *owner, struct evrdma_conn *conn, int reason, int err)
{
	struct ch_rdma *rc = owner;

	rc->st |= RC_ENDED;
	evrdma__chan_end_reason(&rc->ch, reason, conn->dns_error);
	evrdma__rc_drop_pending_writes(rc);
	/* the receives flush now: every message that arrived is ours before
	 * closed() (a pool's are not flushed: the pass takes what arrived
	 * first, after a poll of the queue's CQ, evrdma__rc_pool_pass()) */
	if (!rc->pool) {
		evrdma__rc_conn_free(rc);
	} else {
		struct evrdma_cq *cq = evrdma__srq_cq(rc->srq);

		if (cq) {
			rc->drain_mark = cq->emptied;
			evrdma__dev_poll_soon(cq->dev);
		}
	}
	if (!(rc->st & (RC_EST | RC_CLOSING)) && !rc->passive)
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
	int never_handed = rc->passive && !(rc->st & RC_EST) &&
	    !(ch->end & CHE_FREED);

	if (rc->conn)
		rc->ka_probes = rc->conn->ka_probes;
	rc->conn = NULL;
	/* (the QP is gone: nothing more completes) */
	if (rc->tag && ch->base)
		evrdma__rings_del(ch->base, rc->tag);
	rc->tag = 0;
	if (rc->lg.on)
		evrdma__linger_stop(ch->base, &rc->lg);
	evrdma__ev_free(rc->linger_ev);
	evrdma__ev_free(rc->ret_ev);
	rc->linger_ev = rc->ret_ev = NULL;
	rc->ret_armed = 0;
	evrdma_mr_free(rc->rmr);
	evrdma_mr_free(rc->smr);
	rc->rmr = rc->smr = NULL;
	evrdma__spill_end(rc);
	evrdma__rc_drop_pending_writes(rc);
	evrdma__chan_end_reason(ch, EVRDMA_REASON_DISCONNECTED, 0);
	if (!(ch->end & CHE_GONE))
		evrdma__rc_judge_end(rc);
	evrdma__chan_gone(ch);
	if (rc->pool)
		evrdma__rc_pool_depart(rc);
	if (husk) {
		rc_orphan(rc);
	} else {
		rc_schedule(rc);
	}
	/* a request of a listener's that never reached the user: nobody
	 * else will free it */
	if (never_handed)
		evrdma__chan_unhanded(ch);
	evrdma__chan_unref(ch);		/* the connection's reference */
}

static const struct evrdma__owner_ops rc_owner_ops = {
	.prepare = own_prepare,
	.reply = own_reply,
	.established = own_established,
	.ended = own_ended,
	.closed = own_closed,
	.drain = own_drain,
	.cancel = own_cancel,
};

static void
op_kick(struct evrdma_channel *ch)
{
	struct ch_rdma *rc = to_rc(ch);

	/* inside the read callbacks, the pass itself sends next; what it
	 * cannot do any more (deliver what the callback made room for) the
	 * next pass does */
	if (rc->st & RC_PRE_SEND)
		rc->st |= RC_AGAIN;
	else
		rc_schedule(rc);
}

static int
op_flush(struct evrdma_channel *ch)
{
	struct ch_rdma *rc = to_rc(ch);

	if (!rc_up(rc))
		return evrdma__fail((rc->st & RC_EST) ? EPIPE : ENOTCONN,
		    "channel not connected");
	if (rc->st & RC_PRE_SEND)
		return 0;	/* the pass sends when the callback returns */
	switch (evrdma__rc_send_all(rc)) {
	case -1:
		evrdma__rc_fail(rc, EVRDMA_REASON_RESOURCE);
		return -1;
	case 1:
		rc->st |= RC_FLUSH_SENT;
		break;
	}
	/* what is due to the user (the write callback) comes from the pass */
	rc_schedule(rc);
	return 0;
}

static size_t
rc_linger_left(const struct ch_rdma *rc)	/* output, its open write */
{
	return rc->ch.out_len + (rc->wopen >= 0 ? rc->wopen_len : 0);
}

static void rc_linger_expire(struct evrdma__linger *lg);

static void
op_close(struct evrdma_channel *ch)
{
	struct ch_rdma *rc = to_rc(ch);

	if (evrdma__forked)
		return;	/* the parent's connection: this process lets it be */
	rc->st |= RC_CLOSING;
	if (rc->resv >= 0) {
		evrdma__slot_drop(rc, (unsigned)rc->resv, rc->resv_max);
		rc->resv = -1;
	}
	if (!ch->out_taken) {
		/* unsent output is discarded, as bufferevent_free() does,
		 * and an open write with it (evrdma/channel.h) */
		evrdma__rc_drop_pending_writes(rc);
		evrdma__chan_output_discard(ch);
	}
	if (!ch->base)
		return;		/* a husk: nothing left to close */
	if (!rc_up(rc) || (ch->end & CHE_PEER_RESET)) {
		evrdma__rc_conn_free(rc);
		return;
	}
	/* freed with bytes it never read: not an orderly end, as a socket
	 * closed with unread data resets the connection */
	if (evbuffer_get_length(ch->input) || rc->rx_head != rc->rx_tail)
		rc->st |= RC_RESET_DUE;
	/* What was sent (and, for the adapter, what output holds) arrives,
	 * then the end: EOF, or RESET; we wait until the peer has it and
	 * has pulled what it was to pull, then disconnect, at most the
	 * teardown timeout. The sends go now, not at the next pass: a
	 * program that frees and returns from main (the usual end of a
	 * short client) runs no pass again, and its peer must still get
	 * the end, with the credits we owe it, as a socket's FIN. */
	rc->linger_left = rc_linger_left(rc);
	evrdma__ev_timer_start(rc->linger_ev,
	    ch->base->cfg.timeout_ms[EVRDMA_TIMEOUT_TEARDOWN]);
	evrdma__linger_start(ch->base, &rc->lg, rc_linger_expire);
	if (!(rc->st & (RC_PRE_SEND | RC_FAILING)) &&
	    evrdma__rc_send_all(rc) < 0)
		evrdma__rc_fail(rc, EVRDMA_REASON_RESOURCE);
	rc_schedule(rc);
}

/*
 * A freed channel's linger ran out with output its peer never made room
 * for (its reader stopped): those bytes are lost, so the end must not read
 * as an orderly one (found by review: the peer got EOF after a short
 * stream). The output goes and the end becomes a RESET, which takes
 * control credits only, with one more teardown timeout to arrive: 1. 0
 * when the connection must just close (no control credit, or the end
 * was sent already).
 */
static int
rc_linger_reset(struct ch_rdma *rc)
{
	struct evrdma_channel *ch = &rc->ch;

	if (rc->eof_sent || !rc_up(rc) || (rc->st & RC_FAILING) ||
	    (!ch->out_len && rc->wopen < 0))
		return 0;
	evrdma__log(EVRDMA_LOG_INFO, "channel %p: %zu bytes the peer did not "
	    "take in time: its end is a reset", (void *)rc, ch->out_len);
	rc->st |= RC_RESET_DUE;
	evrdma__rc_drop_pending_writes(rc);
	evrdma__chan_output_discard(ch);
	return evrdma__rc_send_all(rc) >= 0 && rc->eof_sent &&
	    evrdma__ev_timer_start(rc->linger_ev,
	    ch->base->cfg.timeout_ms[EVRDMA_TIMEOUT_TEARDOWN]) == 0;
}

/* A timeout in which output shrank gives another, as over TCP (found by
 * review: a slow reader that never stopped got a RESET 2 s after the
 * free), up to the base's linger bound (rc_linger_expire()). */
static void
rc_linger_timeout(void *arg)
{
	struct ch_rdma *rc = arg;
	size_t left = rc_linger_left(rc);
	int live = !rc->eof_sent && rc_up(rc) && !(rc->st & RC_FAILING);

	if (live && left && left < rc->linger_left &&
	    evrdma__ev_timer_start(rc->linger_ev,
	    rc->ch.base->cfg.timeout_ms[EVRDMA_TIMEOUT_TEARDOWN]) == 0) {
		rc->linger_left = left;
		return;
	}
	if (rc_linger_reset(rc))
		return;
	evrdma__rc_linger_timeout(rc);
}

/* The base's linger bound, or its cap on lingering connections (linger.c):
 * the peer had long enough; reset. */
static void
rc_linger_expire(struct evrdma__linger *lg)
{
	struct ch_rdma *rc = (struct ch_rdma *)((char *)lg -
	    offsetof(struct ch_rdma, lg));

	if (rc_linger_reset(rc))
		return;
	evrdma__rc_linger_timeout(rc);
}

/* The process exits (exit(), a return from main) with the channel not
 * freed: what was sent arrives, then its end, EOF or RESET, as the kernel
 * ends a socket of an exiting process; nothing is waited for. */
static void
op_exiting(struct evrdma_channel *ch)
{
	struct ch_rdma *rc = to_rc(ch);

	if (!rc_up(rc) || (rc->st & RC_CLOSING) || rc->eof_sent ||
	    (ch->end & CHE_PEER_RESET))
		return;
	rc->st |= RC_CLOSING;
	if (evbuffer_get_length(ch->input) || rc->rx_head != rc->rx_tail)
		rc->st |= RC_RESET_DUE;
	if (!ch->out_taken) {
		rc->wopen = -1;		/* (its bytes: user space, lost) */
		evrdma__chan_output_discard(ch);
	}
	(void)evrdma__rc_send_all(rc);
}

static void
op_abort(struct evrdma_channel *ch, int reason)
{
	struct ch_rdma *rc = to_rc(ch);

	evrdma__rc_fail(rc, reason);
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
	struct evrdma_conn *c = (rc->st & RC_CONN_FREED) ? NULL : rc->conn;

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
	if (rc->lg.on)
		evrdma__linger_stop(ch->base, &rc->lg);
	evrdma__ev_free(rc->linger_ev);
	evrdma__ev_free(rc->ret_ev);
	/* the evbuffers' cleanups must not reach us any more */
	if (rc->pool)
		evrdma__rc_pool_leave(rc);
	else if (rc->rring)
		rc->rring->owner = NULL;
	if (rc->sring)
		rc->sring->owner = NULL;
	evrdma__spill_end(rc);
	evrdma__chan_fini(ch);
	evrdma_mr_free(rc->rmr);
	evrdma_mr_free(rc->smr);
	if (rc->rring)
		evrdma__ring_unref(rc->rring);
	if (rc->sring)
		evrdma__ring_unref(rc->sring);
	if (!rc->pool)
		free(rc->rb);
	free(rc->rfree);
	free(rc->rxq);
	free(rc->sstate);
	free(rc->sflags);
	evrdma__sq_fini(rc);
	free(rc->rwr);
	free(rc->rsge);
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
	.write = evrdma__op_write,
	.reserve = evrdma__op_reserve,
	.commit = evrdma__op_commit,
	.max_message = op_max_message,
	.base_gone = op_base_gone,
	.exiting = op_exiting,
	.stats = op_stats,
	.destruct = op_destruct,
};

/* A channel; @p pooled: its receives will come from a queue's pool
 * (evrdma__rc_use_pool() next), so it gets no receive ring of its own. */
struct ch_rdma *
evrdma__rc_new(struct evrdma_base *base, int flags, int pooled)
{
	const struct evrdma_config *cfg = &base->cfg;
	struct ch_rdma *rc;
	unsigned i;

	if (flags & ~EVRDMA_CHANNEL_MESSAGE) {
		evrdma__fail(EINVAL, "channel: unknown flags 0x%x", flags);
		return NULL;
	}
	if (evrdma__rc_depths_check(cfg) < 0)
		return NULL;
	rc = calloc(1, sizeof(*rc));
	if (!rc)
		goto nomem;
	rc->slots = cfg->ch_slots;
	rc->ctrl = RC_CTRL;
	rc->nbuf = evrdma__rc_nbuf(cfg);
	rc->spare = rc->nbuf - rc->slots - rc->ctrl;
	rc->slot_size = cfg->ch_slot_size;
	rc->max_input = cfg->ch_max_input;
	rc->resv = -1;
	rc->wopen = -1;
	rc->pump_work.fn = rc_pump_work;
	if (evrdma__chan_init(&rc->ch, base, &rc_ops,
	    flags & EVRDMA_CHANNEL_MESSAGE) < 0)
		goto nomem;
	evrdma__chan_ref(&rc->ch);	/* the connection's, until closed() */
	if (!pooled) {
		rc->rring = evrdma__ring_new(rc, rc->nbuf, rc->slot_size, 0);
		rc->rb = calloc(rc->nbuf, sizeof(*rc->rb));
		rc->rfree = calloc(rc->nbuf, sizeof(*rc->rfree));
		if (!rc->rring || !rc->rb || !rc->rfree)
			goto nomem;
		for (i = 0; i < rc->nbuf; i++)
			rc->rfree[rc->nfree++] = rc->nbuf - 1 - i;
	}
	rc->sring = evrdma__ring_new(rc, rc->slots, rc->slot_size,
	    RC_SRING_EXTRA(rc->slots));
	rc->rxq = calloc(rc->nbuf, sizeof(*rc->rxq));
	rc->sstate = calloc(rc->slots, 1);
	rc->sflags = calloc(rc->slots, 1);
	rc->spq = calloc(rc->slots, sizeof(*rc->spq));
	rc->linger_ev = evrdma__ev_timer_new(base, rc_linger_timeout, rc);
	rc->ret_ev = evrdma__ev_timer_new(base, rc_ret_idle, rc);
	if (!rc->sring || !rc->rxq || !rc->sstate || !rc->sflags ||
	    !rc->spq || !rc->linger_ev || !rc->ret_ev)
		goto nomem;
	rc->sfree = rc->slots;
	return rc;
nomem:
	if (rc && rc->ch.ops) {
		evrdma__chan_discard(&rc->ch);
	} else {
		free(rc);
	}
	evrdma__fail(ENOMEM, "channel: out of memory");
	return NULL;
}

/* The channel owns @p conn: it asks its peer for no RNR retry, as its
 * credits guarantee a posted receive (on a queue's pool, a violator's
 * SENDs may take another peer's buffer for a moment: it asks for 7, for
 * ever; our own QP's count follows the peer's handshake, rc_hs_in()); and
 * a channel keeps its connection alive (or learns it is dead). */
void
evrdma__rc_own_conn(struct ch_rdma *rc, struct evrdma_conn *conn)
{
	const struct evrdma_config *cfg = &rc->ch.base->cfg;

	evrdma__conn_set_owner(conn, &rc_owner_ops, rc);
	evrdma__conn_set_rnr_ask(conn, rc->pool ? 7 : 0);
	evrdma__conn_set_rnr_retry(conn, 0);
	evrdma_conn_set_keepalive(conn, cfg->ka_idle_ms, cfg->ka_interval_ms,
	    cfg->ka_count);
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
	if (evrdma__srq_use(rc->conn, srq) < 0 ||
	    evrdma__rc_use_pool(rc, srq) < 0)
		return -1;
	evrdma__conn_set_rnr_ask(rc->conn, 7);
	return 0;
}

struct evrdma_srq *
evrdma_channel_srq_new(struct evrdma_base *base, const char *device,
    unsigned nbuf)
{
	return evrdma__chpool_srq_new(base, device, nbuf, evrdma__rc_recv_cb);
}

struct evrdma_channel *
evrdma_channel_new(struct evrdma_base *base, int flags)
{
	struct ch_rdma *rc;

	if (evrdma__base_rdma(base, __func__) < 0)
		return NULL;
	rc = evrdma__rc_new(base, flags, 0);
	if (!rc)
		return NULL;
	rc->conn = evrdma_conn_new(base, 0);
	if (!rc->conn) {
		int err = errno;

		evrdma__chan_discard(&rc->ch);
		errno = err;
		return NULL;
	}
	evrdma__rc_own_conn(rc, rc->conn);
	return &rc->ch;
}
