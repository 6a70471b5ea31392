/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel's RDMA transport: how a channel ends. The steps, in
 * the order they come, each recorded in the state word:
 *  - the user frees it (evrdma__rc_close(), RC_CLOSING): unsent output
 *    goes, unless the user was told it is written (the adapter's); what
 *    was sent, then the end (EOF, or RESET when it was freed with bytes
 *    unread) go at once; it lingers until the peer has them (chan_end.c:
 *    the teardown timeout, while output shrinks, up to the base's linger
 *    bound); or the process exits (evrdma__rc_exiting()): the same,
 *    without waiting;
 *  - the connection ends (evrdma__rc_ended(), RC_ENDED): by the peer, a
 *    failure, or our free; the receives flush (a pool's drain);
 *  - everything that arrived is in: the channel is told the connection is
 *    gone (evrdma__chan_gone(): once, the pass's rc_pass_rare() or the
 *    closed notification, whichever comes first);
 *  - the connection frees its resources and says so, once
 *    (evrdma__rc_closed()): the channel's registrations go, and its
 *    reference; the base gone meanwhile (evrdma__rc_base_gone()) makes
 *    it a husk;
 *  - the last reference goes (evrdma__rc_destruct()): its memory.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "chan_ctl.h"
#include "chan_pool.h"
#include "chan_warm.h"
#include "chan_write.h"

static void rc_linger_expire(struct evrdma__linger *lg);

void
evrdma__rc_ended(void *owner, struct evrdma_conn *conn, int reason, int err)
{
	struct ch_rdma *rc = owner;

	rc_set(rc, RC_ENDED);
	evrdma__chan_end_reason(&rc->ch, reason, conn->dns_error);
	evrdma__rc_drop_pending_writes(rc);
	/* the receives flush now: every message that arrived is ours before
	 * closed() (a pool's are not flushed: the pass takes what arrived
	 * first, after a poll of the queue's CQ, evrdma__rc_pool_pass()) */
	if (!rc->pm.pool)
		evrdma__rc_conn_free(rc);
	else
		evrdma__pool_ending(rc);
	if (!(rc->st & (RC_EST | RC_CLOSING)) && !rc->passive)
		evrdma__chan_connect_failed(&rc->ch, reason);
	rc_schedule(rc);
}

/* The base goes: the channel lets go of it, its pass included, and
 * becomes a husk. */
static void
rc_orphan(struct ch_rdma *rc)
{
	evrdma__work_cancel(evrdma__chan_base(&rc->ch), &rc->pump_work);
	evrdma__chan_orphan(&rc->ch);
}

void
evrdma__rc_closed(void *owner, int husk)
{
	struct ch_rdma *rc = owner;
	struct evrdma_channel *ch = &rc->ch;
	int never_handed = rc->passive && !(rc->st & RC_EST) &&
	    !(evrdma__chan_end(ch) & CHE_FREED);

	if (rc->conn)
		rc->ka_probes = rc->conn->ka_probes;
	rc->conn = NULL;
	/* (the QP is gone: nothing more completes) */
	evrdma__rc_untag(rc);
	evrdma__end_fini(rc);
	evrdma__ctl_fini(rc);
	/* The rings' registrations go now, with the connection, unless the
	 * application has let go of the channel, which goes next
	 * (rc_destruct()): they may go to a warm set then. A channel the
	 * application still holds pins nothing once its connection is gone. */
	if (!rc_base(rc)->cfg.warm_max || rc->pm.pool || husk ||
	    !(evrdma__chan_end(ch) & CHE_FREED)) {
		evrdma__rx_close(rc);
		evrdma__tx_close(rc);
	}
	evrdma__spill_end(rc);
	evrdma__rc_drop_pending_writes(rc);
	evrdma__chan_end_reason(ch, EVRDMA_REASON_DISCONNECTED, 0);
	if (!(evrdma__chan_end(ch) & CHE_GONE))
		evrdma__rc_judge_end(rc);
	evrdma__chan_gone(ch);
	if (rc->pm.pool)
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

static size_t
rc_linger_left(const struct ch_rdma *rc)	/* output, its open write */
{
	return evrdma__chan_out_len(&rc->ch) +
	    (rc->wr.wopen >= 0 ? rc->wr.wopen_len : 0);
}


void
evrdma__rc_close(struct evrdma_channel *ch)
{
	struct ch_rdma *rc = to_rc(ch);

	if (evrdma__forked)
		return;	/* the parent's connection: this process lets it be */
	rc_set(rc, RC_CLOSING);
	evrdma__wr_drop_resv(rc);
	if (!evrdma__chan_out_taken(ch)) {
		/* unsent output is discarded, as bufferevent_free() does,
		 * and an open write with it (evrdma/channel.h) */
		evrdma__rc_drop_pending_writes(rc);
		evrdma__chan_output_discard(ch);
	}
	if (!evrdma__chan_base(ch))
		return;		/* a husk: nothing left to close */
	if (!rc_up(rc) || (evrdma__chan_end(ch) & CHE_PEER_RESET)) {
		evrdma__rc_conn_free(rc);
		return;
	}
	/* freed with bytes it never read: not an orderly end, as a socket
	 * closed with unread data resets the connection */
	if (evrdma__chan_input_len(ch) || evrdma__rx_unread(rc)) {
		evrdma__log(EVRDMA_LOG_DEBUG, "channel %p: freed with bytes "
		    "unread (%zu in input, %llu arrivals not taken): its end "
		    "is a reset", (void *)rc, evrdma__chan_input_len(ch),
		    (unsigned long long)(rc->rx.tail - rc->rx.head));
		rc_set(rc, RC_RESET_DUE);
	}
	/* What was sent (and, for the adapter, what output holds) arrives,
	 * then the end: EOF, or RESET; we wait until the peer has it and
	 * has pulled what it was to pull, then disconnect, at most the
	 * teardown timeout. The sends go now, not at the next pass: a
	 * program that frees and returns from main (the usual end of a
	 * short client) runs no pass again, and its peer must still get
	 * the end, with the credits we owe it, as a socket's FIN. */
	evrdma__end_linger(rc, rc_linger_left(rc), rc_linger_expire);
	if (!(rc->st & (RC_PRE_SEND | RC_FAILING)) &&
	    evrdma__ctl_send_all(rc) < 0)
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
	size_t left = evrdma__chan_out_len(ch);

	if (rc->cr.eof_sent || !rc_up(rc) || (rc->st & RC_FAILING) ||
	    (!left && rc->wr.wopen < 0))
		return 0;
	evrdma__log(EVRDMA_LOG_INFO, "channel %p: %zu bytes the peer did not "
	    "take in time: its end is a reset", (void *)rc, left);
	rc_set(rc, RC_RESET_DUE);
	evrdma__rc_drop_pending_writes(rc);
	evrdma__chan_output_discard(ch);
	return evrdma__ctl_send_all(rc) >= 0 && rc->cr.eof_sent &&
	    evrdma__end_linger_again(rc, 0) == 0;
}

/* A timeout in which output shrank gives another, as over TCP (found by
 * review: a slow reader that never stopped got a RESET 2 s after the
 * free), up to the base's linger bound (rc_linger_expire()). */
void
evrdma__rc_linger_tick(void *arg)
{
	struct ch_rdma *rc = arg;
	size_t left = rc_linger_left(rc);
	int live = !rc->cr.eof_sent && rc_up(rc) && !(rc->st & RC_FAILING);

	if (live && left && left < rc->end.linger_left &&
	    evrdma__end_linger_again(rc, left) == 0)
		return;
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
	    offsetof(struct ch_rdma, end.lg));

	if (rc_linger_reset(rc))
		return;
	evrdma__rc_linger_timeout(rc);
}

/* The process exits (exit(), a return from main) with the channel not
 * freed: what was sent arrives, then its end, EOF or RESET, as the kernel
 * ends a socket of an exiting process; nothing is waited for. */
void
evrdma__rc_exiting(struct evrdma_channel *ch)
{
	struct ch_rdma *rc = to_rc(ch);

	if (!rc_up(rc) || (rc->st & RC_CLOSING) || rc->cr.eof_sent ||
	    (evrdma__chan_end(ch) & CHE_PEER_RESET))
		return;
	rc_set(rc, RC_CLOSING);
	if (evrdma__chan_input_len(ch) || evrdma__rx_unread(rc))
		rc_set(rc, RC_RESET_DUE);
	if (!evrdma__chan_out_taken(ch)) {
		evrdma__wr_forget_open(rc);	/* (user space, lost) */
		evrdma__chan_output_discard(ch);
	}
	(void)evrdma__ctl_send_all(rc);
}

/* The base goes while the user holds the channel: with its connection
 * still there, that connection's release makes it a husk (own_closed());
 * after it ended, nothing else would. */
void
evrdma__rc_base_gone(struct evrdma_channel *ch)
{
	struct ch_rdma *rc = to_rc(ch);

	if (!rc->conn && evrdma__chan_base(ch))
		rc_orphan(rc);
}

void
evrdma__rc_destruct(struct evrdma_channel *ch)
{
	struct ch_rdma *rc = to_rc(ch);
	struct evrdma_base *base = evrdma__chan_base(ch);

	if (base)
		evrdma__work_cancel(base, &rc->pump_work);
	evrdma__end_fini(rc);
	evrdma__ctl_fini(rc);
	/* the evbuffers' cleanups must not reach us any more */
	evrdma__pool_drop(rc);
	evrdma__rx_detach(rc);
	evrdma__tx_detach(rc);
	evrdma__spill_end(rc);
	evrdma__chan_fini(ch);
	/* (input and output are gone: whatever they held of the rings) */
	if (base && !rc->pm.pool && !rc->conn &&
	    evrdma__warm_give(base, rc->rx.ring, rc->rx.mr, rc->tx.ring,
	    rc->tx.mr) == 0) {
		evrdma__rx_disown(rc);
		evrdma__tx_disown(rc);
	}
	evrdma__warm_free(rc->warm);
	evrdma__rx_free(rc);
	evrdma__tx_free(rc);
	evrdma__sq_fini(rc);
	evrdma__pool_unref(rc);
	free(rc);
}
