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

#include "chan_ctl.h"
#include "chan_sq.h"
#include "chan_tx.h"
#include "chan_warm.h"
#include "chan_write.h"

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
	if ((evrdma__chan_end(ch) & CHE_PEER_RESET) && rc->conn &&
	    !(rc->st & (RC_CONN_FREED | RC_ENDED | RC_CLOSING)) &&
	    !rc->rx.pull_wait && !rc->rx.pull_out) {
		evrdma__chan_end_reason(ch, EVRDMA_REASON_DISCONNECTED, 0);
		evrdma__rc_conn_free(rc);
	}
	/* The connection ended and every receive has come back (flushed):
	 * nothing more arrives, and nothing more can be sent. (closed()
	 * says the same, later: it also waits for the peer's DISCONNECTED.) */
	if ((rc->st & RC_ENDED) && !rc->rx.posted && !rc->rx.pull_out &&
	    !(evrdma__chan_end(ch) & CHE_GONE) &&
	    (!rc->pm.pool || (rc->st & RC_CONN_FREED))) {
		evrdma__rc_judge_end(rc);
		evrdma__chan_gone(ch);
		evrdma__rc_drop_pending_writes(rc);
		if (rc->pm.pool)
			evrdma__rc_pool_depart(rc);
	}
	if ((rc->st & RC_EST) && (evrdma__chan_end(ch) & (CHE_PEER_EOF | CHE_GONE)))
		evrdma__chan_check_end(ch, evrdma__rc_waiting(rc));
	/* a reservation that found no slot is told of a free one as a
	 * write is of drained output */
	if ((rc->st & RC_RESV_WANTED) && rc->tx.nfree > 1) {
		rc_clear(rc, RC_RESV_WANTED);
		sent = 1;
	}
	if (rc->st & RC_FLUSH_SENT) {
		rc_clear(rc, RC_FLUSH_SENT);
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

	if (!evrdma__chan_base(ch))
		return;
	/* this pass does what a scheduled one would */
	evrdma__work_cancel(evrdma__chan_base(ch), &rc->pump_work);
	evrdma__chan_ref(ch);
	if (rc->pm.pool)
		evrdma__rc_pool_pass(rc);
	if ((rc->st & RC_EST) && !(evrdma__chan_end(ch) & (CHE_FREED | CHE_RD_ENDED))) {
		/* what the read callback writes or frees is sent below */
		rc_set(rc, RC_PRE_SEND);
		evrdma__rc_deliver(rc);
		rc_clear(rc, RC_PRE_SEND);
	}
	if (rc->wr.wopen >= 0)
		evrdma__rc_wopen_settle(rc);
	/* (connected, or freed and still sending what is owed, or failing
	 * with its RESET to send) */
	if (rc->conn && !(rc->st & (RC_CONN_FREED | RC_ENDED)) &&
	    (rc->st & (RC_EST | RC_CLOSING | RC_FAILING))) {
		sent = evrdma__ctl_send_all(rc);
		if (sent < 0) {
			if (rc->conn)
				evrdma__rc_fail(rc, EVRDMA_REASON_RESOURCE);
		} else if (!(rc->st & RC_FAILING) &&
		    rc->rx.nfree >= (rc->spare ? rc->spare : 1) &&
		    evrdma__rc_post_free(rc) < 0 && errno != EPIPE) {
			/* the sends are out: now top up the receives, once
			 * every spare is used (in batches of 4, not 2: 60
			 * instructions less per 64 B round trip, callgrind;
			 * the credits' cover, evrdma__rc_returns_ready(),
			 * still posts first whenever a return needs it) */
			evrdma__rc_fail(rc, EVRDMA_REASON_RESOURCE);
		}
	}
	if ((rc->st & RC_PASS_RARE) ||
	    (evrdma__chan_end(ch) & (CHE_PEER_RESET | CHE_PEER_EOF | CHE_GONE)))
		sent = rc_pass_rare(rc, sent);
	if ((rc->st & RC_EST) && !(evrdma__chan_end(ch) & CHE_FREED))
		evrdma__chan_sent(ch, sent > 0);
	evrdma__ctl_pass_end(rc);
	/* (set by the write callback too) */
	if (rc->st & (RC_CLOSING | RC_AGAIN)) {
		evrdma__rc_linger_check(rc);
		if (rc->st & RC_AGAIN) {
			rc_clear(rc, RC_AGAIN);
			rc_schedule(rc);
		}
	}
	evrdma__chan_unref(ch);
}

static void
rc_pump_work(struct evrdma__work *w)
{
	rc_pass((struct ch_rdma *)((char *)w -
	    offsetof(struct ch_rdma, pump_work)));
}

/* A completion of the channel's own send ring (rings.c): chan_tx.c
 * counts it back. */
static void
rc_ring_sent(void *owner, const struct ibv_wc *wc, unsigned idx)
{
	evrdma__rc_send_done(owner, idx, wc);
}

/* ... or a message in one of its receive buffers, which
 * evrdma__ctl_arrival() dispatches once chan_rx.c checked it. */
static void
rc_ring_received(void *owner, const struct ibv_wc *wc, unsigned idx)
{
	struct ch_rdma *rc = owner;
	struct evrdma_conn *conn = rc->conn;
	struct evrdma__ch_imm m;
	struct evrdma__rx_wc w;

	switch (evrdma__rx_done(rc, idx, wc, &m, &w)) {
	case 0:
		evrdma__ctl_arrival(rc, idx, &m, w.byte_len);
		break;
	case -2:
		return;		/* (not ours to count) */
	}
	evrdma__ep_ring_done(&conn->ep, 0, 1, w.status);
}

/* A receive of a queue's pool (the request layer's), which landed in
 * buffer ref->idx of the pool's ring. */
static void
rc_pool_recv_cb(struct evrdma_conn *c, const struct evrdma_wc *wc,
    void *arg)
{
	struct ch_slotref *ref = arg;
	struct ch_rdma *rc;
	struct evrdma__ch_imm m;
	struct evrdma__rx_wc w;

	rc = evrdma__rc_pool_taker(ref->ring->pool, c, wc, ref->idx);
	if (!rc)
		return;
	w.status = wc->status;
	w.send_imm = wc->opcode == EVRDMA_OP_RECV && wc->has_imm;
	w.imm = wc->imm_data;
	w.byte_len = wc->byte_len;
	if (evrdma__rx_arrived(rc, ref->idx, &w, &m) == 0)
		evrdma__ctl_arrival(rc, ref->idx, &m, w.byte_len);
}

static void
rc_ring_pass(void *owner)
{
	rc_pass(owner);
}

static const struct evrdma__rings_ops rc_rings_ops = {
	.complete = {
		[RC_WR_RECV] = rc_ring_received,
		[RC_WR_SEND] = rc_ring_sent,
	},
	.pass = rc_ring_pass,
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
	evrdma__rc_untag(rc);
}

/* The receive ring's bytes (mapped when the QP exists). */
static size_t
rx_len(const struct ch_rdma *rc)
{
	return (size_t)rc->nbuf * rc->slot_size;
}

/* The QP's protection domain: a warm set's when one fits (chan_warm.h),
 * with the QP made in it if it has one, its rings then replacing the
 * fresh ones in rc_setup(); else a fresh domain. Not when the send ring
 * holds a write made before the connection, nor on a queue's pool (the
 * queue's domain, conn_cm.c). */
static struct evrdma__pd *
own_pd(void *owner, struct evrdma_dev *dev, struct evrdma__qp_made *qp)
{
	struct ch_rdma *rc = owner;
	struct evrdma_base *base = rc_base(rc);
	struct evrdma__pd *pd;

	if (base->cfg.warm_max && !rc->pm.pool && !rc->warm &&
	    evrdma__tx_untouched(rc))
		rc->warm = evrdma__warm_take(base, dev, rx_len(rc),
		    rc->tx.ring->len);
	if (!rc->warm)
		return evrdma__pd_new(dev);
	pd = evrdma__warm_pd(rc->warm);
	pd->refcnt++;			/* the connection's */
	evrdma__warm_take_qp(rc->warm, qp);
	return pd;
}

/* Register the rings and post the receives. */
static int
rc_setup(struct ch_rdma *rc, struct evrdma_conn *conn, int src_remote)
{
	struct evrdma_base *base = evrdma__chan_base(&rc->ch);
	struct evrdma__pd *pd = evrdma__conn_pd(conn);
	const struct ibv_device_attr *da = evrdma__conn_dev_attr(conn);
	unsigned sq = evrdma__conn_sq_depth(conn);

	rc->tag = evrdma__rings_add(base, &rc_rings_ops, rc);
	if (!rc->tag || evrdma__sq_init(rc, conn) < 0)
		return -1;
	if (rc->pm.pool) {
		/* the send ring in the queue's PD, for local access only
		 * (any peer on the queue could reach a remote-readable region
		 * in that PD by guessing its rkey, so there are no pulls);
		 * nothing of the pool is committed yet (its join) */
		rc->pull_cap = 0;
		rc->pull_min = 0;
		rc->src_remote = 0;
		if (evrdma__rc_pool_setup(rc, conn) < 0)
			return -1;
		return evrdma__tx_setup(rc, pd, 0);
	}
	/* We pull when the device can issue READs and the send queue has
	 * room for them beside our own messages (slots + ctrl at most). */
	rc->pull_cap = sq > rc->slots + rc->ctrl ? sq - rc->slots - rc->ctrl :
	    0;
	if (rc->pull_cap > rc->slots)
		rc->pull_cap = rc->slots;
	rc->pull_min = da->max_qp_init_rd_atom > 0 && rc->pull_cap ?
	    base->cfg.ch_pull_min : 0;
	rc->src_remote = src_remote && da->max_qp_rd_atom > 0;
	if (rc->warm) {
		/* registered in this QP's domain already, and zeroed */
		evrdma__rx_adopt(rc, rc->warm->rx, rc->warm->rx_mr);
		evrdma__tx_adopt(rc, rc->warm->tx, rc->warm->tx_mr);
		free(rc->warm);
		rc->warm = NULL;
	} else if (evrdma__base_pin_check(base, rx_len(rc) +
	    rc->tx.ring->len) < 0) {
		return -1;
	}
	if (evrdma__tx_setup(rc, pd, rc->src_remote) < 0)
		return -1;
	return evrdma__rx_setup(rc, pd);
}

static void
rc_hs_out(struct ch_rdma *rc, uint8_t *out, size_t *len)
{
	struct evrdma__ch_hs hs;

	memset(&hs, 0, sizeof(hs));
	hs.mode = evrdma__chan_messages(&rc->ch);
	hs.slots = (uint16_t)rc->slots;
	hs.ctrl = (uint8_t)rc->ctrl;
	hs.slot_size = rc->slot_size;
	hs.pull_min = rc->pull_min;
	hs.lend = rc->pm.pool != NULL;
	if (rc->src_remote) {
		hs.src_rkey = rc->tx.mr->mr->rkey;
		hs.src_base = rc->tx.mr->iova;
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
	    hs.mode != evrdma__chan_messages(&rc->ch)) {
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
	rc->peer_lends = hs.lend;
	evrdma__ctl_start(rc, hs.slots, hs.ctrl, hs.lend);
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
	if (evrdma__tx_setup(rc, evrdma__conn_pd(conn), 0) < 0)
		return -1;
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
	/* Whether we pull the peer's messages. One that offers its ring for
	 * our pulls must serve our READs (review r46: every pull would wait
	 * for ever): else a protocol violation. */
	if (!rc->pull_min)
		rc->peer_src.rkey = 0;	/* we never read it */
	if (rc->peer_src.rkey && !conn->rd_out) {
		evrdma__log(EVRDMA_LOG_WARN, "channel %p: protocol violation by "
		    "the peer: it offers pulls but serves no RDMA READ",
		    (void *)rc);
		return -1;
	}
	if (rc->pm.pool && evrdma__rc_pool_join(rc) < 0) {
		evrdma__log(EVRDMA_LOG_WARN, "channel %p: %s", (void *)rc,
		    evrdma_errmsg());
		evrdma__rc_fail(rc, EVRDMA_REASON_RESOURCE);
		return 0;
	}
	if (!rc->passive) {
		rc_set(rc, RC_EST);
		evrdma__chan_connected(&rc->ch);
		rc_schedule(rc);
	}
	return 0;
}

static const struct evrdma__owner_ops rc_owner_ops = {
	.pd = own_pd,
	.prepare = own_prepare,
	.reply = own_reply,
	.established = own_established,
	.ended = evrdma__rc_ended,
	.closed = evrdma__rc_closed,
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
		rc_set(rc, RC_AGAIN);
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
	switch (evrdma__ctl_send_all(rc)) {
	case -1:
		evrdma__rc_fail(rc, EVRDMA_REASON_RESOURCE);
		return -1;
	case 1:
		rc_set(rc, RC_FLUSH_SENT);
		break;
	}
	/* what is due to the user (the write callback) comes from the pass */
	rc_schedule(rc);
	return 0;
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

	st->bytes_sent = rc->tx.bytes;
	st->bytes_received = rc->rx.bytes;
	st->msgs_sent = rc->tx.msgs;
	st->msgs_received = rc->rx.msgs;
	st->pulls_sent = rc->tx.pulls;
	st->pulls_done = rc->rx.pulls;
	st->credit_stalls = rc->tx.stalls;
	st->credit_stall_us = rc->tx.stall_us + (rc->tx.stall_t0 ?
	    evrdma__now_us() - rc->tx.stall_t0 : 0);
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

static const struct evrdma__chan_ops rc_ops = {
	.kick = op_kick,
	.flush = op_flush,
	.close = evrdma__rc_close,
	.abort = op_abort,
	.connect = op_connect,
	.connect_hostname = op_connect_hostname,
	.write = evrdma__op_write,
	.reserve = evrdma__op_reserve,
	.commit = evrdma__op_commit,
	.max_message = op_max_message,
	.base_gone = evrdma__rc_base_gone,
	.exiting = evrdma__rc_exiting,
	.stats = op_stats,
	.destruct = evrdma__rc_destruct,
};

/* A channel; @p pooled: its receives will come from a queue's pool
 * (evrdma__rc_use_pool() next), so it gets no receive ring of its own. */
struct ch_rdma *
evrdma__rc_new(struct evrdma_base *base, int flags, int pooled)
{
	const struct evrdma_config *cfg = &base->cfg;
	struct ch_rdma *rc;

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
	rc->pump_work.fn = rc_pump_work;
	if (evrdma__chan_init(&rc->ch, base, &rc_ops,
	    flags & EVRDMA_CHANNEL_MESSAGE) < 0)
		goto nomem;
	evrdma__chan_ref(&rc->ch);	/* the connection's, until closed() */
	evrdma__wr_init(rc);
	if (evrdma__rx_new(rc, pooled) < 0 || evrdma__tx_new(rc) < 0 ||
	    evrdma__ctl_new(rc) < 0 ||
	    evrdma__end_new(rc, evrdma__rc_linger_tick) < 0)
		goto nomem;
	return rc;
nomem:
	if (rc && evrdma__chan_ops(&rc->ch)) {
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
	const struct evrdma_config *cfg = &rc_base(rc)->cfg;

	evrdma__conn_set_owner(conn, &rc_owner_ops, rc);
	evrdma__conn_set_rnr_ask(conn, rc->pm.pool ? 7 : 0);
	evrdma__conn_set_rnr_retry(conn, 0);
	evrdma_conn_set_keepalive(conn, cfg->ka_idle_ms, cfg->ka_interval_ms,
	    cfg->ka_count);
}

/* A channel for @p conn, which a listener accepts (its receives drawn
 * from @p srq's pool, if not NULL). NULL with errno. */
struct ch_rdma *
evrdma__rc_new_accepted(struct evrdma_conn *conn, int flags,
    struct evrdma_srq *srq)
{
	struct ch_rdma *rc = evrdma__rc_new(evrdma_conn_get_base(conn), flags,
	    srq != NULL);

	if (!rc)
		return NULL;
	rc->passive = 1;
	if (srq && evrdma__rc_use_pool(rc, srq) < 0) {
		int err = errno;

		evrdma__log(EVRDMA_LOG_WARN, "channel listener: %s",
		    evrdma_errmsg());
		evrdma__chan_discard(&rc->ch);
		errno = err;
		return NULL;
	}
	rc->conn = conn;
	evrdma__rc_own_conn(rc, conn);
	return rc;
}

/* Draw the receives from @p srq's pool instead of a ring of our own
 * (before the connection's QP exists). 0, or -1 with errno. */
int
evrdma__rc_use_pool(struct ch_rdma *rc, struct evrdma_srq *srq)
{
	struct evrdma__chpool *pool = evrdma__pool_use(rc, srq);

	if (!pool)
		return -1;
	evrdma__rx_use_pool(rc, pool->ring, pool->rb);
	/* control messages carry no bytes but take a whole buffer of the
	 * pool each: the fewest the protocol allows */
	rc->ctrl = EVRDMA_CH_CTRL_MIN;
	return 0;
}

int
evrdma_channel_set_srq(struct evrdma_channel *ch, struct evrdma_srq *srq)
{
	struct ch_rdma *rc;

	if (!ch || evrdma__chan_ops(ch) != &rc_ops || !srq)
		return evrdma__fail(EINVAL, "evrdma_channel_set_srq: not an "
		    "RDMA channel, or no queue");
	rc = to_rc(ch);
	if (!rc->conn || rc->passive || rc->pm.pool ||
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
	return evrdma__chpool_srq_new(base, device, nbuf, rc_pool_recv_cb);
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
