/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel transport's credits and control messages
 * (doc/channel-protocol.md, "Credits"): the one dispatch, by type, of
 * what arrives (its returns and pulls done first), and the one send path
 * of a pass, in order under one doorbell: our pulls' READs, DATA, loans,
 * the end (EOF, or RESET), credits. The credits (rc->cr) are this file's
 * (chan_ctl.h changes them for the others).
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "chan_ctl.h"
#include "chan_sq.h"
#include "chan_tx.h"

/* Credits owed after an idle moment go back then (RET_IDLE_MS): not at
 * once (a stream would send a CREDIT per pass), not never (a peer that
 * ends would not know we consumed its last bytes). */
static void
ctl_ret_idle(void *arg)
{
	struct ch_rdma *rc = arg;

	rc->cr.ret_armed = 0;
	if (!rc->cr.ret_data || !rc_up(rc))
		return;
	if (rc->rx.tail != rc->cr.ret_mark) {
		/* traffic since: the returns ride on it, or on the next
		 * quarter of the ring; look again later */
		if (evrdma__ev_timer_start(rc->cr.ret_ev, RET_IDLE_MS) == 0) {
			rc->cr.ret_armed = 1;
			rc->cr.ret_mark = rc->rx.tail;
		}
		return;
	}
	rc->cr.ret_idle = 1;
	rc_schedule(rc);
}

int
evrdma__ctl_new(struct ch_rdma *rc)
{
	rc->cr.ret_ev = evrdma__ev_timer_new(rc_base(rc), ctl_ret_idle, rc);
	return rc->cr.ret_ev ? 0 : -1;
}

void
evrdma__ctl_fini(struct ch_rdma *rc)
{
	evrdma__ev_free(rc->cr.ret_ev);
	rc->cr.ret_ev = NULL;
	rc->cr.ret_armed = 0;
}

void
evrdma__ctl_start(struct ch_rdma *rc, unsigned slots, unsigned ctrl,
    int lend)
{
	/* a peer on a pool lends its credits as it has buffers */
	rc->cr.s = lend ? EVRDMA_CH_LEND_INITIAL : slots;
	rc->cr.c = ctrl;
}

void
evrdma__ctl_pass_end(struct ch_rdma *rc)
{
	if (rc->cr.ret_data && !rc->cr.ret_armed && rc_up(rc) &&
	    rc->cr.ret_ev &&
	    evrdma__ev_timer_start(rc->cr.ret_ev, RET_IDLE_MS) == 0) {
		rc->cr.ret_armed = 1;
		rc->cr.ret_mark = rc->rx.tail;
	}
}

/* A CREDIT, EOF or RESET (an EOF with @p reset), chained for the pass's
 * post: 1, 0 no control credit in hand (or no room in the send queue),
 * -1 failed. */
static int
ctl_post(struct ch_rdma *rc, int type, int starved, int reset)
{
	struct evrdma__ch_imm m;
	int eof = type == EVRDMA_CH_EOF;

	if (!rc->cr.c || !evrdma__sq_room(rc))
		return 0;
	if (ctl_take_returns(rc, type, &m) < 0)
		return -1;
	m.starved = (uint8_t)starved;
	m.reset = (uint8_t)reset;
	evrdma__sq_add(rc, NULL, 0, 0, evrdma__ch_imm_encode(&m),
	    eof ? RC_SQ_EOF : RC_SQ_CREDIT, 0);
	rc->cr.c--;
	if (eof)
		rc->cr.eof_sent = 1;
	return 1;
}

/* Our failure's RESET: a bare EOF with its reset bit, carrying no
 * returns (the connection is over: nothing it could fail on, and nothing
 * owed changes). 1 posted, 0 no control credit or no room. */
static int
ctl_post_reset(struct ch_rdma *rc)
{
	struct evrdma__ch_imm m;

	if (!rc->cr.c || !evrdma__sq_room(rc))
		return 0;
	memset(&m, 0, sizeof(m));
	m.type = EVRDMA_CH_EOF;
	m.reset = 1;
	evrdma__sq_add(rc, NULL, 0, 0, evrdma__ch_imm_encode(&m),
	    RC_SQ_RESET, 0);
	rc->cr.c--;
	rc->cr.eof_sent = 1;
	return 1;
}

/* A LOAN message: a RECLAIM of @p n (we lend), or a YIELD of @p n (the
 * peer lends). It returns control credits, never data credits (their
 * field carries @p n). 1 posted, 0 no control credit in hand, -1 failed. */
static int
ctl_post_loan(struct ch_rdma *rc, int yield, unsigned n)
{
	struct evrdma__ch_imm m;

	if (!rc->cr.c || !evrdma__sq_room(rc))
		return 0;
	if (evrdma__rc_returns_ready(rc, rc->cr.ret_data, 0) < 0)
		return -1;
	memset(&m, 0, sizeof(m));
	m.type = EVRDMA_CH_LOAN;
	m.yield = (uint8_t)yield;
	m.loan = (uint16_t)n;
	m.cret = (uint8_t)rc->cr.ret_ctrl;
	evrdma__sq_add(rc, NULL, 0, 0, evrdma__ch_imm_encode(&m),
	    RC_SQ_CREDIT, 0);
	rc->cr.ret_ctrl = 0;
	rc->cr.c--;
	return 1;
}

/* The sends of a pass about loans: our RECLAIM (the pool's), our YIELD. */
static int
ctl_send_loans(struct ch_rdma *rc)
{
	int r = 0;

	if (rc->pm.reclaim_want) {
		r = ctl_post_loan(rc, 0, rc->pm.reclaim_want);
		if (r > 0)
			evrdma__pool_reclaim_sent(rc);
	}
	if (r >= 0 && rc->cr.yield_asked) {
		unsigned k = evrdma__ch_yield_amount(rc->cr.yield_asked,
		    rc->cr.s);

		r = ctl_post_loan(rc, 1, k);
		if (r > 0) {
			rc->cr.s -= k;
			rc->cr.yield_asked = 0;
		}
	}
	return r < 0 ? -1 : 0;
}

/* The control messages of a pass, after its data. 0, or -1. */
static int
ctl_send(struct ch_rdma *rc)
{
	struct evrdma_channel *ch = &rc->ch;
	int r;

	if ((rc->pm.reclaim_want || rc->cr.yield_asked) &&
	    ctl_send_loans(rc) < 0)
		return -1;
	/* the end after everything sent: EOF, or a RESET when freed with
	 * bytes unread (a socket closed so resets the connection, but sends
	 * what its kernel accepted first) */
	if (!rc->cr.eof_sent &&
	    ((rc->st & RC_CLOSING) || evrdma__chan_shut_wr(ch)) &&
	    !evrdma__chan_out_len(ch) && rc->wr.wopen < 0 &&
	    ctl_post(rc, EVRDMA_CH_EOF, rc->tx.pq_n != 0,
	    (rc->st & (RC_CLOSING | RC_RESET_DUE)) ==
	    (RC_CLOSING | RC_RESET_DUE)) < 0)
		return -1;
	if (evrdma__ch_credit_due(rc->cr.ret_data, rc->cr.ret_ctrl,
	    rc->cr.ret_pull, rc->rx.pull_wait || rc->rx.pull_out, rc->slots,
	    rc->ctrl, rc->cr.peer_starved) || ((rc->cr.grant_due ||
	    rc->cr.ret_idle) && rc->cr.ret_data)) {
		if ((r = ctl_post(rc, EVRDMA_CH_CREDIT, 0, 0)) < 0)
			return -1;
		if (r > 0)
			rc->cr.grant_due = rc->cr.ret_idle = 0;
	}
	return 0;
}

/*
 * The sends of a pass, under one doorbell: pulls, data, loans, the end,
 * credits; for a channel failing (evrdma__rc_fail()), its RESET alone. 1
 * when data went, 0 when none did, -1 on failure (the caller fails the
 * channel).
 */
int
evrdma__ctl_send_all(struct ch_rdma *rc)
{
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
	rc_set(rc, RC_IN_SEND);
	if (!(rc->st & RC_FAILING)) {
		if (rc->rx.pull_wait && evrdma__rc_post_pulls(rc) < 0)
			sent = -1;
		/* (a freed channel sends what its user was told is written:
		 * the adapter's output; a channel's own was discarded at the
		 * free) */
		if (sent >= 0 && (!(rc->st & RC_CLOSING) ||
		    evrdma__chan_out_taken(&rc->ch)))
			sent = evrdma__tx_send_data(rc);
		/* (the application's callback on output, run while data
		 * was taken, may have failed the channel: then its RESET,
		 * below, and nothing else; an EOF here lost the failure) */
		if (sent >= 0 && !(rc->st & RC_FAILING) && ctl_send(rc) < 0)
			sent = -1;
	}
	/* Our failure ends with a RESET, after everything sent, so that the
	 * peer reports an error and not the orderly end that a bare
	 * disconnect with nothing unconsumed reads as; its completion
	 * brings the abort (RC_RESET_WENT). Without a control credit the
	 * abort comes at once (evrdma__rc_fail()). */
	if ((rc->st & RC_FAILING) && !rc->cr.eof_sent && ctl_post_reset(rc) <= 0)
		rc_set(rc, RC_RESET_WENT);
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
	if (evrdma__sq_flush(rc, (rc_base(rc)->cfg.busy_poll_us > 0 ||
	    evrdma__chan_out_len(&rc->ch) > 0) && rc->tx.nfree > 0,
	    evrdma__rc_sq_release) < 0)
		sent = -1;
	rc_clear(rc, RC_IN_SEND);
	return sent;
}

/* A RECLAIM from a lending peer: "give back up to N of the data credits I
 * lent you" (our YIELD answers it in the next pass). 0, or -1 when it
 * broke the rules (the connection is then cut off). */
static int
ctl_reclaimed(struct ch_rdma *rc, const struct evrdma__ch_imm *m)
{
	if (!rc->peer_lends || rc->cr.yield_asked ||
	    !evrdma__ch_reclaim_valid(m->loan, rc->peer_slots)) {
		evrdma__rc_violation(rc, "a reclaim of credits not lent");
		return -1;
	}
	rc->cr.yield_asked = m->loan;
	return 0;
}

/*
 * A message arrived in receive buffer @p idx, its immediate decoded in
 * @p m (evrdma__rx_arrived() checked the completion): what it returns and
 * the pulls it reports done first, whatever its type, then its type's
 * own. Every rule broken is a violation, and the buffer goes back.
 */
void
evrdma__ctl_arrival(struct ch_rdma *rc, unsigned idx,
    const struct evrdma__ch_imm *m, uint32_t byte_len)
{
	int r;

	if (!evrdma__ch_return_valid(rc->cr.s, m->dret, rc->peer_slots) ||
	    !evrdma__ch_return_valid(rc->cr.c, m->cret, rc->peer_ctrl)) {
		evrdma__rx_drop(rc, idx);
		evrdma__rc_violation(rc, "credits returned that were not lent");
		return;
	}
	if ((r = evrdma__tx_pulls_done(rc, m->pdone)) < 0) {
		evrdma__rx_drop(rc, idx);
		if (r == -1)
			evrdma__rc_violation(rc, "pulls acknowledged that "
			    "were not made");
		return;
	}
	rc->cr.s += m->dret;
	rc->cr.c += m->cret;
	if (m->dret)
		evrdma__tx_credits_came(rc);
	if (m->starved)
		rc->cr.peer_starved = 1;
	switch (m->type) {
	case EVRDMA_CH_DATA:
		evrdma__rx_data(rc, idx, m, byte_len);
		break;
	case EVRDMA_CH_CREDIT:
	case EVRDMA_CH_EOF:
	case EVRDMA_CH_LOAN:
		evrdma__rx_drop(rc, idx);
		if (byte_len) {
			/* (its bytes are dropped; doc/channel-protocol.md:
			 * no payload) */
			evrdma__rc_violation(rc, "a control message with a "
			    "payload");
			return;
		}
		if (!evrdma__ch_ctrl_allowed(rc->cr.ret_ctrl, rc->ctrl)) {
			evrdma__rc_violation(rc, "control beyond its credits");
			return;
		}
		rc->cr.ret_ctrl++;
		break;
	}
	switch (m->type) {
	case EVRDMA_CH_LOAN:
		if (m->yield ? evrdma__pool_yielded(rc, m) < 0 :
		    ctl_reclaimed(rc, m) < 0)
			return;
		break;
	case EVRDMA_CH_EOF:
		if (evrdma__chan_peer_eof_seen(&rc->ch)) {
			evrdma__rc_violation(rc, "a second EOF");
			return;
		}
		evrdma__chan_peer_eof(&rc->ch, m->reset);
		break;
	}
	/* After the poll pass, not from inside it: sending there lets
	 * channels with traffic in flight refill ahead of the others
	 * (measured: unfair with 200 channels), and one pass per poll
	 * batches what all of its completions made due. */
	rc_schedule(rc);
}
