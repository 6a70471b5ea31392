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
	rc->st |= RC_VIOLATED;
	if (rc->conn)
		evrdma__conn_abort(rc->conn, EVRDMA_REASON_PROTOCOL);
}

/*
 * End the connection for a failure of ours (a resource, the user's
 * misuse, an impossible state), not for the peer's violation: a RESET
 * goes first, so that the peer reports an error and not the orderly end
 * that a bare disconnect with nothing unconsumed reads as (own_ended());
 * the abort follows once it went (RC_RESET_WENT: the pass,
 * evrdma__rc_reset_went()), or at once with no control credit in hand.
 * Nothing else is sent meanwhile (rc_up()); the RESET goes with the
 * pass's chain, or with the next pass's.
 */
void
evrdma__rc_fail(struct ch_rdma *rc, int reason)
{
	struct evrdma__ch_imm m;

	if (!rc->conn || (rc->st & (RC_CONN_FREED | RC_ENDED | RC_FAILING)))
		return;
	rc->st |= RC_FAILING;
	rc->fail_reason = reason;
	if (!rc->eof_sent && rc->c_credits && evrdma__sq_room(rc)) {
		memset(&m, 0, sizeof(m));
		m.type = EVRDMA_CH_EOF;
		m.reset = 1;
		evrdma__sq_add(rc, NULL, 0, 0, evrdma__ch_imm_encode(&m),
		    RC_SQ_RESET, 0);
		rc->c_credits--;
		rc->eof_sent = 1;
		rc_schedule(rc);
		return;
	}
	evrdma__conn_abort(rc->conn, reason);
}

/* Our failure's RESET went (or could not): now the abort. */
void
evrdma__rc_reset_went(struct ch_rdma *rc)
{
	rc->st &= ~RC_RESET_WENT;
	if (rc->conn && !(rc->st & (RC_CONN_FREED | RC_ENDED)))
		evrdma__conn_abort(rc->conn, rc->fail_reason);
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
	if (rc->lg.on)
		evrdma__linger_stop(rc->ch.base, &rc->lg);
	if (rc->conn && !(rc->st & RC_CONN_FREED)) {
		rc->st |= RC_CONN_FREED;
		evrdma__ev_stop(rc->linger_ev);
		evrdma_conn_free(rc->conn);
	}
}

/* The user freed the channel and the peer has what was sent: close. */
void
evrdma__rc_linger_check(struct ch_rdma *rc)
{
	if ((rc->st & RC_CLOSING) && rc->eof_done && !rc->spq_n)
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
 * come, evrdma__ep_uncork; nothing to pull) and nothing was lost, is the
 * peer's process going with nothing of ours unread, which over TCP its
 * kernel answers with a FIN. (Judged here, not at the disconnect: its
 * last messages may still be in the CQ then. A peer on a pool lends its
 * credits: there the count cannot tell.)
 */
void
evrdma__rc_judge_end(struct ch_rdma *rc)
{
	if (rc->ch.gone_reason == EVRDMA_REASON_DISCONNECTED &&
	    (rc->st & (RC_EST | RC_VIOLATED)) == RC_EST &&
	    !(rc->ch.end & CHE_PEER_EOF) &&
	    !rc->peer_lends && !rc->data_lost &&
	    rc->s_credits == rc->peer_slots && !rc->spq_n &&
	    rc->wopen < 0)
		evrdma__chan_peer_eof(&rc->ch, rc->ch.end & CHE_PEER_RESET);
}
