/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel's RDMA transport: how a connection ends early. A
 * violation by the peer cuts it off at once; a failure of our own says so
 * with a RESET first; a freed channel lingers until the peer has its end.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "chan_rdma.h"

/* A rule of the protocol broken: the peer loses its access at once. */
void
evrdma__rc_violation(struct ch_rdma *rc, const char *why)
{
	evrdma__log(EVRDMA_LOG_WARN, "channel %p: protocol violation by the "
	    "peer: %s", (void *)rc, why);
	/* whatever it said before or says after (what it sent in the same
	 * poll is still to come: evrdma__rc_recv_cb() drops it), this is no
	 * orderly end */
	evrdma__chan_peer_eof_void(&rc->ch);
	rc_set(rc, RC_VIOLATED);
	if (rc->conn)
		evrdma__conn_abort(rc->conn, EVRDMA_REASON_PROTOCOL);
}

/*
 * End the connection for a failure of ours (a resource, the user's
 * misuse, an impossible state), not for the peer's violation: a RESET
 * goes first, so that the peer reports an error and not the orderly end
 * that a bare disconnect with nothing unconsumed reads as (own_ended()).
 * The pass's sends post it (chan_ctl.c: the one send path), after what
 * the channel had sent; nothing else is sent meanwhile (rc_up()). The
 * abort follows once it went (RC_RESET_WENT, evrdma__rc_reset_went()),
 * or at once with no control credit in hand.
 */
void
evrdma__rc_fail(struct ch_rdma *rc, int reason)
{
	if (!rc->conn || (rc->st & (RC_CONN_FREED | RC_ENDED | RC_FAILING)))
		return;
	rc_set(rc, RC_FAILING);
	rc->end.fail_reason = reason;
	if (!rc->cr.eof_sent && rc->cr.c && evrdma__sq_room(rc)) {
		rc_schedule(rc);
		return;
	}
	evrdma__conn_abort(rc->conn, reason);
}

/* Our failure's RESET went (or could not): now the abort. */
void
evrdma__rc_reset_went(struct ch_rdma *rc)
{
	rc_clear(rc, RC_RESET_WENT);
	if (rc->conn && !(rc->st & (RC_CONN_FREED | RC_ENDED)))
		evrdma__conn_abort(rc->conn, rc->end.fail_reason);
}

/* An impossible state of our own: the connection ends, nothing more is
 * freed or returned for it. */
void
evrdma__rc_internal(struct ch_rdma *rc, const char *what)
{
	evrdma__log(EVRDMA_LOG_ERROR, "channel %p: internal error: %s",
	    (void *)rc, what);
	evrdma__chan_peer_eof_void(&rc->ch);
	evrdma__rc_fail(rc, EVRDMA_REASON_INTERNAL);
}

void
evrdma__rc_conn_free(struct ch_rdma *rc)
{
	if (rc->end.lg.on)
		evrdma__linger_stop(rc_base(rc), &rc->end.lg);
	if (rc->conn && !(rc->st & RC_CONN_FREED)) {
		rc_set(rc, RC_CONN_FREED);
		evrdma__ev_stop(rc->end.linger_ev);
		evrdma_conn_free(rc->conn);
	}
}

/* The user freed the channel and the peer has what was sent: close. */
void
evrdma__rc_linger_check(struct ch_rdma *rc)
{
	if ((rc->st & RC_CLOSING) && rc->cr.eof_done && !rc->tx.pq_n)
		evrdma__rc_conn_free(rc);
}

void
evrdma__rc_linger_timeout(void *arg)
{
	struct ch_rdma *rc = arg;

	evrdma__log(EVRDMA_LOG_INFO, "channel %p: the peer did not confirm "
	    "the end in time; closing", (void *)rc);
	evrdma__rc_conn_free(rc);
}

/*
 * The connection is over and everything that arrived is in: a disconnect
 * with no EOF, once every message we sent was consumed (all our credits
 * back: so each of our sends ran, even one whose completion is still to
 * come, evrdma__sq_complete(); nothing to pull) and nothing was lost, is the
 * peer's process going with nothing of ours unread, which over TCP its
 * kernel answers with a FIN. (Judged here, not at the disconnect: its
 * last messages may still be in the CQ then. A peer on a pool lends its
 * credits: there the count cannot tell.)
 */
void
evrdma__rc_judge_end(struct ch_rdma *rc)
{
	if (evrdma__chan_gone_reason(&rc->ch) == EVRDMA_REASON_DISCONNECTED &&
	    (rc->st & (RC_EST | RC_VIOLATED)) == RC_EST &&
	    !(evrdma__chan_end(&rc->ch) & CHE_PEER_EOF) &&
	    !rc->peer_lends && !rc->rx.lost &&
	    rc->cr.s == rc->peer_slots && !rc->tx.pq_n &&
	    rc->wr.wopen < 0)
		evrdma__chan_peer_eof(&rc->ch, evrdma__chan_end(&rc->ch) & CHE_PEER_RESET);
}

/* The linger's timer (@p timeout, the teardown timeout's), made with the
 * channel. 0, or -1. */
int
evrdma__end_new(struct ch_rdma *rc, void (*timeout)(void *arg))
{
	rc->end.linger_ev = evrdma__ev_timer_new(rc_base(rc), timeout, rc);
	return rc->end.linger_ev ? 0 : -1;
}

/* The user freed the channel with @p left bytes still to go: it lingers,
 * a teardown timeout at a time while the peer takes them, and at most
 * the base's linger bound (linger.c: @p expire then). */
void
evrdma__end_linger(struct ch_rdma *rc, size_t left,
    void (*expire)(struct evrdma__linger *lg))
{
	rc->end.linger_left = left;
	evrdma__ev_timer_start(rc->end.linger_ev,
	    rc_base(rc)->cfg.timeout_ms[EVRDMA_TIMEOUT_TEARDOWN]);
	evrdma__linger_start(rc_base(rc), &rc->end.lg, expire);
}

/* Another teardown timeout (@p left: output then). 0, or -1. */
int
evrdma__end_linger_again(struct ch_rdma *rc, size_t left)
{
	if (evrdma__ev_timer_start(rc->end.linger_ev,
	    rc_base(rc)->cfg.timeout_ms[EVRDMA_TIMEOUT_TEARDOWN]) < 0)
		return -1;
	rc->end.linger_left = left;
	return 0;
}

/* The connection is gone (@p base: the channel's, NULL for a husk): the
 * linger's timer and its place in the base's bound. */
void
evrdma__end_fini(struct ch_rdma *rc)
{
	if (rc->end.lg.on)
		evrdma__linger_stop(rc_base(rc), &rc->end.lg);
	evrdma__ev_free(rc->end.linger_ev);
	rc->end.linger_ev = NULL;
}
