/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: connections: one RC QP on a shared CQ. This file: the object,
 * its events, keepalive, failure and teardown. How it is established is
 * conn_cm.c, what it posts conn_post.c (both call only this file; the
 * private interface is conn.h).
 *
 * Any failure -> FAILED (reported once); evrdma_conn_free() -> CLOSING ->
 * CLOSED once every request has completed and DISCONNECTED has arrived,
 * or when the teardown timeout expires.
 *
 * Lifetime: one reference count (in the endpoint, struct evrdma__ep). The
 * connection holds one on itself while it is open; every callback and
 * every dispatch holds one around it. Resources (QP, id, PD) are destroyed
 * by a deferred finaliser, never inside the CM dispatch (rdma_destroy_id()
 * waits for the ack of the event being handled) nor inside a callback;
 * the owner then gets its one closed() notification, the open reference
 * goes, and the memory goes with the last reference.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "evrdma-internal.h"
#include "conn.h"

static void conn_timer_cb(void *arg);
static void conn_fin_cb(void *arg);
static void conn_start_close(struct evrdma_conn *conn);
static void conn_ka_cb(void *arg);

/* ---- what the endpoint tells us ---- */

static void
conn_ep_failed(struct evrdma__ep *ep, int status)
{
	struct evrdma_conn *conn = evrdma__ep_conn(ep);

	/* retries run out: nobody answered at the other end */
	if (status == ETIMEDOUT)
		evrdma__conn_fail(conn, EVRDMA_REASON_PEER_DEAD, ETIMEDOUT);
	else if (status == ENOBUFS)	/* over its share of a queue (srq.c) */
		evrdma__conn_fail(conn, EVRDMA_REASON_RESOURCE, ENOBUFS);
	else
		evrdma__conn_fail(conn, EVRDMA_REASON_QP_FATAL,
		    status == ECANCELED ? EIO : status);
}

static void
conn_ep_settled(struct evrdma__ep *ep)
{
	evrdma__conn_check_done(evrdma__ep_conn(ep));
}

static void
conn_ep_async(struct evrdma__ep *ep, int type)
{
	struct evrdma_conn *conn = evrdma__ep_conn(ep);

	switch (type) {
	case IBV_EVENT_COMM_EST:
		/* the peer's first message came before the CM's RTU: tell
		 * the CM, which then reports ESTABLISHED */
		if (conn->id && (conn->state == EVRDMA_CONN_ACCEPTING ||
		    conn->state == EVRDMA_CONN_CONNECTING))
			EVRDMA_SYM(rdma_notify)(conn->id, IBV_EVENT_COMM_EST);
		return;
	case IBV_EVENT_PORT_ERR:
		evrdma__conn_fail(conn, EVRDMA_REASON_PORT_ERROR, EIO);
		return;
	case IBV_EVENT_DEVICE_FATAL:
		evrdma__conn_fail(conn, EVRDMA_REASON_DEVICE_FATAL, EIO);
		return;
	default:	/* QP errors, CQ overrun */
		evrdma__conn_fail(conn, EVRDMA_REASON_QP_FATAL, EIO);
		return;
	}
}

static void
conn_ep_release(struct evrdma__ep *ep)
{
	free(evrdma__ep_conn(ep));
}

static const struct evrdma__ep_ops conn_ep_ops = {
	.failed = conn_ep_failed,
	.settled = conn_ep_settled,
	.async = conn_ep_async,
	.release = conn_ep_release,
};

/* ---- life ---- */

struct evrdma_conn *
evrdma__conn_alloc(struct evrdma_base *base, int flags)
{
	struct evrdma_conn *conn = calloc(1, sizeof(*conn));

	if (!conn) {
		evrdma__fail(ENOMEM, "out of memory");
		return NULL;
	}
	evrdma__ep_init(&conn->ep, &base->reqs, &conn_ep_ops, conn);
	conn->base = base;
	conn->flags = flags;
	conn->sq_depth = base->cfg.sq_depth;
	conn->rq_depth = base->cfg.rq_depth;
	conn->rnr_retry = conn->rnr_ask = (uint8_t)base->cfg.rnr_retry;
	conn->timer = evrdma__ev_timer_new(base, conn_timer_cb, conn);
	conn->fin_ev = evrdma__ev_timer_new(base, conn_fin_cb, conn);
	conn->ka_ev = evrdma__ev_timer_new(base, conn_ka_cb, conn);
	if (!conn->timer || !conn->fin_ev || !conn->ka_ev) {
		evrdma__ev_free(conn->timer);
		evrdma__ev_free(conn->fin_ev);
		evrdma__ev_free(conn->ka_ev);
		free(conn);
		evrdma__fail(ENOMEM, "out of memory");
		return NULL;
	}
	TAILQ_INSERT_TAIL(&base->conns, conn, link);
	base->stats.conns++;
	return conn;
}

struct evrdma_conn *
evrdma_conn_new(struct evrdma_base *base, int flags)
{
	if (evrdma__base_rdma(base, __func__) < 0)
		return NULL;
	if (flags & ~EVRDMA_CONN_RAW) {
		evrdma__fail(EINVAL, "evrdma_conn_new: bad argument");
		return NULL;
	}
	return evrdma__conn_alloc(base, flags);
}

void
evrdma__conn_set_owner(struct evrdma_conn *conn,
    const struct evrdma__owner_ops *ops, void *owner)
{
	conn->owner_ops = ops;
	conn->owner = owner;
}

void
evrdma__conn_set_parent(struct evrdma_conn *conn,
    const struct evrdma__parent_ops *ops, void *parent)
{
	conn->parent_ops = ops;
	conn->parent = parent;
}

void
evrdma_conn_setcb(struct evrdma_conn *conn, evrdma_conn_event_cb cb,
    void *arg)
{
	if (!conn)
		return;
	conn->cb = cb;
	conn->cb_arg = arg;
}

void *
evrdma_conn_get_cb_arg(const struct evrdma_conn *conn)
{
	return conn ? conn->cb_arg : NULL;
}

int
evrdma_conn_set_private_data(struct evrdma_conn *conn, const void *data,
    size_t len)
{
	size_t max;

	if (!conn)
		return evrdma__fail(EINVAL, "no connection");
	max = (conn->flags & EVRDMA_CONN_RAW) ?
	    EVRDMA_PDATA_CONNECT_MAX : EVRDMA_PDATA_CONNECT_MAX - EVRDMA_HS_LEN;
	if (conn->state != EVRDMA_CONN_IDLE || conn->passive)
		return evrdma__fail(EISCONN, "private data after connect");
	if (len > max || (len && !data))
		return evrdma__fail(EINVAL, "private data of %zu bytes "
		    "(at most %zu)", len, max);
	if (len)
		memcpy(conn->pdata, data, len);
	conn->pdata_len = (uint8_t)len;
	return 0;
}

/* Call the user's event callback, once per outcome, never after free nor
 * inside evrdma_base_free(). */
void
evrdma__conn_event(struct evrdma_conn *conn, short what, int reason, int err)
{
	if (!conn->cb || conn->user_freed ||
	    !evrdma__base_user_ok(conn->base))
		return;
	evrdma__ep_ref(&conn->ep);
	errno = err;
	conn->cb(conn, what, reason, conn->cb_arg);
	evrdma__ep_unref(&conn->ep);
}

/* Move the QP to the error state: everything posted is flushed, and the
 * flushes are expected from now on. */
static void
conn_qp_error(struct evrdma_conn *conn)
{
	struct ibv_qp_attr attr;

	conn->ep.quiet = 1;
	if (!conn->qp || conn->qp_in_error)
		return;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_ERR;
	if (EVRDMA_SYM(ibv_modify_qp)(conn->qp, &attr, IBV_QP_STATE) == 0) {
		conn->qp_in_error = 1;
		if (conn->owner_ops && conn->owner_ops->drain)
			conn->owner_ops->drain(conn->owner, conn);
	} else {
		evrdma__log(EVRDMA_LOG_WARN, "ibv_modify_qp(ERR) failed");
	}
	if (conn->dev)
		evrdma__dev_poll_soon(conn->dev);
}

/*
 * Disconnect the id. Only an established connection is owed a
 * DISCONNECTED event afterwards; an attempt that never got there (rejected,
 * timed out) gets none, so teardown must not wait for it.
 */
void
evrdma__conn_disconnect(struct evrdma_conn *conn, int was_established)
{
	if (!conn->id || conn->disconnect_sent)
		return;
	conn->disconnect_sent = 1;
	if (EVRDMA_SYM(rdma_disconnect)(conn->id) == 0 && was_established &&
	    !conn->disconnect_seen)
		conn->await_disconnect = 1;
}

/* A passive connection leaves its listener (before it was handed out). */
static void
conn_drop_parent(struct evrdma_conn *conn)
{
	const struct evrdma__parent_ops *ops = conn->parent_ops;

	if (!ops)
		return;
	conn->parent_ops = NULL;
	ops->dropped(conn->parent, conn);
	conn->parent = NULL;
	evrdma__srq_dropped(conn);
}

/* ---- keepalive ---- */

static void
conn_ka_probe_cb(struct evrdma_conn *c, const struct evrdma_wc *wc,
    void *arg)
{
	struct evrdma_conn *conn = arg;

	/* (its completion counts as activity, which the next look sees; a
	 * failure ends the connection through the endpoint) */
	conn->ka_probe = 0;
}

/* A zero-length RDMA WRITE: it touches no memory and consumes no receive
 * at the peer, but its device must acknowledge it. */
static int
conn_ka_probe(struct evrdma_conn *conn)
{
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_RDMA_WRITE;
	if (evrdma__ep_post(&conn->ep, NULL, 0, 0, &wr, EVRDMA_OP_WRITE,
	    conn_ka_probe_cb, conn) < 0)
		return -1;
	conn->ka_probes++;
	return 0;
}

static void
conn_ka_cb(void *arg)
{
	struct evrdma_conn *conn = arg;

	if (conn->state != EVRDMA_CONN_ESTABLISHED || !conn->ka_idle_ms)
		return;
	if (conn->ep.activity != conn->ka_seen) {
		/* a completion since the last look (the probe's or any
		 * other): the peer's device answers */
		conn->ka_seen = conn->ep.activity;
		conn->ka_probing = 0;
		conn->ka_misses = 0;
		evrdma__ev_timer_start(conn->ka_ev, conn->ka_idle_ms);
		return;
	}
	/* nothing came back for an idle time, then for each interval since:
	 * a miss whether the probe went out or waits behind requests that
	 * do not complete either (a full send queue to a dead peer) */
	if (conn->ka_probing && ++conn->ka_misses >= conn->ka_count) {
		evrdma__log(EVRDMA_LOG_INFO, "connection %p: %u keepalive "
		    "intervals unanswered", (void *)conn, conn->ka_misses);
		evrdma__ep_ref(&conn->ep);
		evrdma__conn_fail(conn, EVRDMA_REASON_PEER_DEAD, ETIMEDOUT);
		evrdma__ep_unref(&conn->ep);
		return;
	}
	conn->ka_probing = 1;
	if (!conn->ka_probe && conn_ka_probe(conn) == 0)
		conn->ka_probe = 1;
	evrdma__ev_timer_start(conn->ka_ev, conn->ka_interval_ms);
}

int
evrdma_conn_set_keepalive(struct evrdma_conn *conn, unsigned idle_ms,
    unsigned interval_ms, unsigned count)
{
	if (!conn || (idle_ms && (!interval_ms || !count)))
		return evrdma__fail(EINVAL, "evrdma_conn_set_keepalive: bad "
		    "argument");
	conn->ka_idle_ms = idle_ms;
	conn->ka_interval_ms = interval_ms;
	conn->ka_count = count;
	if (conn->state == EVRDMA_CONN_ESTABLISHED && conn->ka_ev) {
		conn->ka_seen = conn->ep.activity;
		conn->ka_probing = 0;
		conn->ka_misses = 0;
		if (idle_ms)
			evrdma__ev_timer_start(conn->ka_ev, idle_ms);
		else
			evrdma__ev_stop(conn->ka_ev);
	}
	return 0;
}

void
evrdma__conn_fail(struct evrdma_conn *conn, int reason, int err)
{
	enum evrdma_conn_state old = conn->state;
	int est = old == EVRDMA_CONN_ESTABLISHED;

	/* a forked child never ends its parent's connection (rdma_sym.c) */
	if (evrdma__forked)
		return;
	if (reason == EVRDMA_REASON_DEVICE_REMOVAL && conn->dev)
		evrdma__dev_dead(conn->dev);
	if (evrdma__conn_closing(conn)) {
		if (old != EVRDMA_CONN_CLOSED)
			conn_qp_error(conn);
		return;
	}
	evrdma__ev_stop(conn->timer);
	evrdma__ev_stop(conn->ka_ev);
	if (conn->dns_req) {
		evrdma__resolve_cancel(conn->dns_req);
		conn->dns_req = NULL;
	}
	if (conn->passive && conn->parent_ops) {
		/* never handed to the user: drop it quietly */
		evrdma__log(EVRDMA_LOG_INFO, "connection %p dropped before it "
		    "was accepted: %s", (void *)conn,
		    evrdma_reason_str(reason));
		conn->user_freed = 1;
		conn_drop_parent(conn);
		conn_start_close(conn);
		return;
	}
	conn->state = EVRDMA_CONN_FAILED;
	if (est || old == EVRDMA_CONN_CONNECTING)
		evrdma__conn_disconnect(conn, est);
	conn_qp_error(conn);
	evrdma__log(EVRDMA_LOG_INFO, "connection %p: %s", (void *)conn,
	    evrdma_reason_str(reason));
	if (conn->owner_ops) {
		evrdma__ep_ref(&conn->ep);
		conn->owner_ops->ended(conn->owner, conn, reason, err);
		evrdma__ep_unref(&conn->ep);
		return;
	}
	evrdma__conn_event(conn, (reason == EVRDMA_REASON_DISCONNECTED && est) ?
	    EVRDMA_EV_EOF : EVRDMA_EV_ERROR, reason, err);
}

void
evrdma__conn_abort(struct evrdma_conn *conn, int reason)
{
	evrdma__conn_fail(conn, reason, EPROTO);
}

/* ---- teardown ---- */

/* Stop waiting for what is outstanding on the QP: the requests complete
 * with ECANCELED (or, @p husk, unheard), and the owner forgets what its
 * own rings posted. */
static void
conn_cancel_all(struct evrdma_conn *conn, int husk)
{
	if (husk)
		evrdma__ep_drop_all(&conn->ep);
	else
		evrdma__ep_cancel_all(&conn->ep);
	if (conn->owner_ops && conn->owner_ops->cancel)
		conn->owner_ops->cancel(conn->owner, conn);
}

/* Requests posted on a QP about to be destroyed, and the finaliser. */
static void
conn_schedule_fin(struct evrdma_conn *conn)
{
	if (conn->fin_due)
		return;
	conn->fin_due = 1;
	evrdma__ev_timer_start(conn->fin_ev, 0);
}

/*
 * The QP goes, and with it the connection's place in its shared receive
 * queue's table of QP numbers: detached first, so that the queue's
 * completions no longer find it (they complete with no connection), on
 * every path that destroys a QP. (A passive connection refused after its
 * QP was made once left its entry behind: freed, it was still walked and
 * relinked by the queue's later completions and connections.)
 */
static void
conn_destroy_qp(struct evrdma_conn *conn)
{
	evrdma__srq_detach(conn);
	if (conn->qp) {
		if (EVRDMA_SYM(ibv_destroy_qp)(conn->qp))
			evrdma__log(EVRDMA_LOG_WARN, "ibv_destroy_qp failed");
		conn->qp = conn->ep.qp = NULL;
		conn->base->stats.qps--;
	}
}

void
evrdma__conn_abort_passive(struct evrdma_conn *conn)
{
	/* Gone for the application first: what it posted from its prepare
	 * callback completes (ECANCELED) on a connection that takes no new
	 * post and is not closed again (a callback that posted anew, as it
	 * may, had each post accepted and cancelled in turn, for ever:
	 * found by review). */
	conn->parent_ops = NULL;
	conn->parent = NULL;
	conn->user_freed = 1;
	conn->state = EVRDMA_CONN_CLOSING;
	conn->ep.quiet = 1;
	conn_cancel_all(conn, 0);
	if (conn->id) {
		conn->id->context = NULL;
		conn_destroy_qp(conn);
		conn->id = NULL;	/* the dispatcher destroys it */
	}
	conn_schedule_fin(conn);
}

/* After the teardown timeout: how long a poll of the CQs may take to
 * bring in what was already there, before the rest is cancelled. */
#define TEARDOWN_GRACE_MS	200

static void
conn_timer_cb(void *arg)
{
	struct evrdma_conn *conn = arg;
	enum evrdma_conn_state old = conn->state;

	if (old == EVRDMA_CONN_CLOSING) {
		/* The completions it waits for may already sit in a CQ that
		 * a busy loop has not polled yet (1,000 channels closing at
		 * once on Soft-RoCE: a peer's EOF, then flushes). Poll the
		 * device's CQs first, and give up only if that leaves
		 * requests outstanding after TEARDOWN_GRACE_MS more. */
		if (!conn->td_polled && conn->dev &&
		    (conn->ep.sq_out || conn->ep.rq_out)) {
			evrdma__log(EVRDMA_LOG_DEBUG, "connection %p: "
			    "teardown timeout with %u requests outstanding: "
			    "polling once more", (void *)conn,
			    conn->ep.sq_out + conn->ep.rq_out);
			conn->td_polled = 1;
			evrdma__dev_poll_soon(conn->dev);
			evrdma__ev_timer_start(conn->timer,
			    TEARDOWN_GRACE_MS);
			return;
		}
		/* DISCONNECTED or the flush never came: give up waiting. */
		evrdma__log(EVRDMA_LOG_INFO, "connection %p: teardown "
		    "timeout, %u requests cancelled", (void *)conn,
		    conn->ep.sq_out + conn->ep.rq_out);
		conn->await_disconnect = 0;
		conn_cancel_all(conn, 0);
		conn_schedule_fin(conn);
		return;
	}
	/* A busy loop may not have read the event that ends this step yet:
	 * read what is queued before calling the step late. */
	evrdma__ep_ref(&conn->ep);
	evrdma__cm_drain(conn->base);
	if (conn->state == old && !evrdma__ev_pending(conn->timer)) {
		evrdma__fail(ETIMEDOUT, "connection step timed out");
		evrdma__conn_fail(conn, EVRDMA_REASON_TIMEOUT, ETIMEDOUT);
	}
	evrdma__ep_unref(&conn->ep);
}

void
evrdma__conn_check_done(struct evrdma_conn *conn)
{
	if (conn->fin_due || conn->state != EVRDMA_CONN_CLOSING)
		return;
	if (conn->ep.sq_out || conn->ep.rq_out || conn->await_disconnect)
		return;
	conn_schedule_fin(conn);
}

static void
conn_start_close(struct evrdma_conn *conn)
{
	enum evrdma_conn_state old = conn->state;

	if (old == EVRDMA_CONN_CLOSING || old == EVRDMA_CONN_CLOSED ||
	    evrdma__forked)
		return;
	conn->state = EVRDMA_CONN_CLOSING;
	conn->ep.watch = 1;
	evrdma__ev_stop(conn->ka_ev);
	if (conn->dns_req) {
		evrdma__resolve_cancel(conn->dns_req);
		conn->dns_req = NULL;
	}
	/*
	 * Accepted, and its QP has completed something: the peer has our
	 * reply and is connected, but the kernel's CM may not have its RTU
	 * yet (the first message can overtake it). Then the CM is still in
	 * REP_SENT, takes no DREQ (rdma_disconnect() returns 0 all the same)
	 * and, when the id is destroyed, sends a REJ that a connected peer
	 * ignores: the peer stayed connected to nothing (a violation in the
	 * peer's first message left it so 1 run in 3,
	 * attack_violation_first). Tell the CM that the connection is
	 * established, as the QP's COMM_EST would, so that the DREQ goes.
	 */
	if (old == EVRDMA_CONN_ACCEPTING && conn->ep.activity && conn->id)
		(void)EVRDMA_SYM(rdma_notify)(conn->id, IBV_EVENT_COMM_EST);
	if (old == EVRDMA_CONN_ESTABLISHED || old == EVRDMA_CONN_CONNECTING ||
	    old == EVRDMA_CONN_ACCEPTING || old == EVRDMA_CONN_FAILED)
		evrdma__conn_disconnect(conn, old == EVRDMA_CONN_ESTABLISHED);
	evrdma__ev_timer_start(conn->timer,
	    conn->base->cfg.timeout_ms[EVRDMA_TIMEOUT_TEARDOWN]);
	conn_qp_error(conn);
	evrdma__conn_check_done(conn);
}

/* Give up the user's handle (a husk: just the memory). */
static void
conn_husk_free(struct evrdma_conn *conn)
{
	conn->user_freed = 1;
	evrdma__ep_unref(&conn->ep);
}

void
evrdma_conn_free(struct evrdma_conn *conn)
{
	if (!conn || conn->user_freed)
		return;
	if (evrdma__forked)
		return;	/* the parent's (rdma_sym.c): released by exit */
	if (!conn->base) {
		conn_husk_free(conn);
		return;
	}
	conn->user_freed = 1;
	conn->cb = NULL;
	conn_drop_parent(conn);
	conn_start_close(conn);
}

/* Destroy the resources; the owner hears closed(). Requests still
 * outstanding complete with ECANCELED first. */
static void
conn_destroy(struct evrdma_conn *conn, int husk)
{
	struct evrdma_base *base = conn->base;

	conn->ep.quiet = 1;
	conn_cancel_all(conn, husk);
	if (conn->dns_req) {
		evrdma__resolve_cancel(conn->dns_req);
		conn->dns_req = NULL;
	}
	conn_drop_parent(conn);
	conn_destroy_qp(conn);
	evrdma__dev_detach(&conn->ep);
	if (conn->cq) {
		evrdma__cq_release(conn->cq, conn->sq_depth + conn->rq_depth);
		conn->cq = NULL;
	}
	if (conn->id) {
		conn->id->context = NULL;
		EVRDMA_SYM(rdma_destroy_id)(conn->id);
		conn->id = NULL;
		base->stats.cm_ids--;
	}
	evrdma__pd_put(conn->pd);
	conn->pd = NULL;
	evrdma__srq_unuse(conn);
	if (conn->dev) {
		evrdma__dev_put(conn->dev);
		conn->dev = NULL;
	}
	evrdma__ev_free(conn->timer);
	evrdma__ev_free(conn->fin_ev);
	evrdma__ev_free(conn->ka_ev);
	conn->timer = conn->fin_ev = conn->ka_ev = NULL;
	TAILQ_REMOVE(&base->conns, conn, link);
	base->stats.conns--;
	conn->state = EVRDMA_CONN_CLOSED;
	if (conn->owner_ops) {
		const struct evrdma__owner_ops *ops = conn->owner_ops;

		conn->owner_ops = NULL;
		ops->closed(conn->owner, husk);
	}
}

static void
conn_fin_cb(void *arg)
{
	struct evrdma_conn *conn = arg;

	conn_destroy(conn, 0);
	/* the open reference */
	evrdma__ep_unref(&conn->ep);
}

void
evrdma__conn_release_now(struct evrdma_conn *conn)
{
	int owned = conn->owner_ops != NULL;

	conn->cb = NULL;
	conn_destroy(conn, 1);
	conn->base = NULL;
	/* the user's handle stays valid until evrdma_conn_free(); an owner
	 * has been told and forgets it */
	if (conn->user_freed || owned)
		evrdma__ep_unref(&conn->ep);
}

/* ---- accessors ---- */

const struct ibv_device_attr *
evrdma__conn_dev_attr(struct evrdma_conn *conn)
{
	return &conn->dev->attr;
}

struct evrdma__pd *
evrdma__conn_pd(struct evrdma_conn *conn)
{
	return conn->pd;
}

unsigned
evrdma__conn_sq_depth(const struct evrdma_conn *conn)
{
	return conn->sq_depth;
}

void
evrdma__conn_set_rnr_retry(struct evrdma_conn *conn, unsigned count)
{
	conn->rnr_retry = (uint8_t)count;
}

void
evrdma__conn_set_rnr_ask(struct evrdma_conn *conn, unsigned count)
{
	conn->rnr_ask = (uint8_t)count;
}

void *
evrdma__conn_owner(const struct evrdma_conn *conn)
{
	return conn->owner;
}

int
evrdma_conn_get_reject(struct evrdma_conn *conn, int *status, int *code)
{
	if (!conn || !conn->rejected)
		return evrdma__fail(ENOENT, "connection was not rejected");
	if (status)
		*status = conn->reject_status;
	if (code)
		*code = conn->reject_code;
	return 0;
}

const void *
evrdma_conn_get_peer_private_data(struct evrdma_conn *conn, size_t *len)
{
	if (len)
		*len = conn ? conn->peer_pdata_len : 0;
	return conn && conn->peer_pdata_len ? conn->peer_pdata : NULL;
}

const struct sockaddr *
evrdma_conn_get_peer_addr(struct evrdma_conn *conn)
{
	return conn && conn->id ? rdma_get_peer_addr(conn->id) : NULL;
}

const struct sockaddr *
evrdma_conn_get_local_addr(struct evrdma_conn *conn)
{
	return conn && conn->id && conn->dev ?
	    rdma_get_local_addr(conn->id) : NULL;
}

const char *
evrdma_conn_get_device_name(struct evrdma_conn *conn)
{
	if (!conn || !conn->id || !conn->id->verbs)
		return NULL;
	return EVRDMA_SYM(ibv_get_device_name)(conn->id->verbs->device);
}

struct evrdma_base *
evrdma_conn_get_base(struct evrdma_conn *conn)
{
	return conn ? conn->base : NULL;
}
