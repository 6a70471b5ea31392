/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: shared receive queues (SRQ) for raw connections: one pool of
 * posted receives that the connections of one device draw from.
 *
 * The queue is an endpoint (struct evrdma__ep) of its own: its receives
 * are requests in the base's table like any other, posted with
 * ibv_post_srq_recv(), and req.c routes each completion to the connection
 * whose QP took it through the queue's table of QP numbers
 * (its endpoint's route op). Its receives complete on a CQ share of the queue's
 * own, sized to the queue, so that a burst on one connection cannot
 * overflow the CQ its sends use.
 *
 * The connections share the queue's protection domain: verbs check a
 * receive's lkey against the PD of the QP that consumes it, so one pool of
 * buffers needs one PD. A region with remote access in that PD could be
 * reached by any connection's peer that guesses its rkey, so mr.c refuses
 * remote access on these connections: a peer reaches only the receive
 * buffer its SEND consumed.
 *
 * A completion finds its connection by QP number. The table forgets a
 * connection just before its QP is destroyed, so a completion polled after
 * that finds none (the callback gets conn NULL). A new QP that got the same
 * number before such a completion was polled would inherit it; rxe hands
 * out QP numbers cyclically, so a number comes back only after the whole
 * range was used.
 *
 * Lifetime: one reference count, the endpoint's. The user's handle holds
 * one until evrdma_srq_free(), each connection using the queue one until
 * the connection is destroyed, each dispatch one around it. The device
 * objects (SRQ, CQ share, PD) go from the loop once the handle is freed
 * and no connection uses the queue (ibv_destroy_srq() fails while a QP
 * still refers to it); the memory goes with the last reference.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "evrdma-internal.h"
#include <evrdma/srq.h>

#define SRQ_BUCKETS	256		/* QP-number table; a power of 2 */

/*
 * A completion kept for a raw listener's connection that the application
 * has not been handed yet (req.c decides): the peer may send as soon as it
 * is accepted, before our ESTABLISHED is read, and a disabled listener
 * holds established connections. It completes right after the accept
 * callback, with the connection, or, once the connection goes unseen, from
 * the loop with conn NULL, as for a connection the application freed.
 *
 * Each holds a receive of the queue's that the application cannot post
 * again, so they are bounded: one unseen connection holds at most
 * SRQ_HELD_CONN of them, all together at most SRQ_HELD_ALL, and a
 * connection that would go beyond is dropped (its held ones complete with
 * conn NULL), as a full listen queue drops. Unbounded, one unseen peer
 * took every receive of a fixed pool and stalled the connections the
 * application had, and an application that posts more from the limit
 * callback pinned buffers without end (found by review). The bound
 * holds however many the application posts.
 */
#define SRQ_HELD_ALL(srq)	((srq)->max_wr / 2 ? (srq)->max_wr / 2 : 1)
#define SRQ_HELD_CONN(srq)	((srq)->max_wr / 8 > 4 ? (srq)->max_wr / 8 : \
				    4 < SRQ_HELD_ALL(srq) ? 4 : \
				    SRQ_HELD_ALL(srq))

struct srq_held {
	TAILQ_ENTRY(srq_held) link;
	struct evrdma_conn *conn;	/* NULL: it went unseen */
	evrdma_req_cb cb;
	void *arg;
	struct evrdma_mr *mr;		/* its hold, until the callback */
	struct evrdma_wc wc;
};

struct evrdma_srq {
	struct evrdma__ep ep;		/* first: receives and refcount */
	struct evrdma_base *base;	/* NULL: released (base freed) */
	struct evrdma_dev *dev;
	struct evrdma__pd *pd;
	struct evrdma_cq *cq;		/* its receives complete here */
	struct ibv_srq *srq;
	unsigned max_wr;
	unsigned nconns;		/* connections using it */
	int user_freed;
	evrdma_srq_limit_cb limit_cb;	/* armed: not NULL */
	void *limit_arg;
	struct evrdma__work fin;	/* destroys it, from the loop */
	TAILQ_HEAD(, srq_held) held;	/* oldest first */
	unsigned nheld;			/* on it */
	unsigned norphans;		/* of them, with conn NULL; the others
					 * SRQ_HELD_ALL at most */
	struct evrdma__work orphans;	/* completes the held of gone ones */
	struct evrdma__chpool *chpool;	/* a queue for channels: their
					 * receive pool (chan_pool.c) */
	const struct evrdma__chpool_ops *chpool_ops;
	LIST_HEAD(, evrdma_conn) qpn[SRQ_BUCKETS];
	LIST_ENTRY(evrdma_srq) link;	/* the base's */
};

static struct evrdma_srq *
srq_of(struct evrdma__ep *ep)
{
	return (struct evrdma_srq *)ep;
}

/* ---- what the endpoint tells us ---- */

static void
srq_ep_async(struct evrdma__ep *ep, int type)
{
	struct evrdma_srq *srq = srq_of(ep);
	evrdma_srq_limit_cb cb;

	switch (type) {
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		/* the device disarmed it: one call per arming */
		cb = srq->limit_cb;
		srq->limit_cb = NULL;
		if (cb && !srq->user_freed && srq->base)
			cb(srq, srq->limit_arg);
		break;
	case IBV_EVENT_SRQ_ERR:
		/* the QPs that use it get their own errors and fail */
		evrdma__log(EVRDMA_LOG_ERROR, "shared receive queue: "
		    "IBV_EVENT_SRQ_ERR");
		break;
	default:
		break;		/* CQ_ERR, DEVICE_FATAL: the QPs fail */
	}
}

static void
srq_ep_release(struct evrdma__ep *ep)
{
	struct evrdma_srq *srq = srq_of(ep);

	if (srq->chpool)
		srq->chpool_ops->free(srq->chpool);
	free(srq);
}

/* The connection whose QP has number @p qp_num, or NULL (its QP is gone). */
static struct evrdma_conn *
srq_ep_route(struct evrdma__ep *ep, uint32_t qp_num)
{
	struct evrdma_srq *srq = srq_of(ep);
	struct evrdma_conn *conn;

	LIST_FOREACH(conn, &srq->qpn[qp_num & (SRQ_BUCKETS - 1)], srq_link)
		if (conn->ep.qp_num == qp_num)
			return conn;
	return NULL;
}

/* ---- completions held until the application has the connection ---- */

/* Complete @p h (unlinked) for @p conn (NULL: gone unseen). @p husk: base
 * free, no callback. */
static void
held_complete(struct evrdma_srq *srq, struct srq_held *h,
    struct evrdma_conn *conn, int husk)
{
	evrdma_req_cb cb = h->cb;
	void *arg = h->arg;
	struct evrdma_wc wc = h->wc;

	srq->nheld--;
	if (h->conn)
		h->conn->srq_held--;
	else
		srq->norphans--;
	/* (a region the application freed is deregistered before the
	 * callback, as for any request: evrdma/mr.h) */
	if (h->mr)
		evrdma__mr_release(h->mr);
	free(h);
	if (!husk && cb)
		cb(conn && !conn->user_freed ? conn : NULL, &wc, arg);
	evrdma__ep_unref(&srq->ep);
}

static int
srq_ep_hold(struct evrdma__ep *ep, struct evrdma_conn *conn,
    evrdma_req_cb cb, void *arg, struct evrdma_mr *mr,
    const struct evrdma_wc *wc)
{
	struct evrdma_srq *srq = srq_of(ep);
	struct srq_held *h;

	/* (for no connection: the ones before it wait in the loop's next
	 * turn, at most, and what is held is bounded by them; a channel
	 * queue's receives are its pool's ring, never held: review r43) */
	if (!conn && (!srq->norphans || srq->chpool))
		return 2;
	if (!(h = malloc(sizeof(*h)))) {
		/* no memory to wait in: now, without its connection, which
		 * is dropped */
		evrdma__log(EVRDMA_LOG_ERROR, "out of memory: a receive of a "
		    "connection not yet accepted completes without it");
		return 2;
	}
	evrdma__ep_ref(&srq->ep);	/* each held one: one reference */
	h->conn = conn;
	h->cb = cb;
	h->arg = arg;
	h->mr = mr;
	h->wc = *wc;
	TAILQ_INSERT_TAIL(&srq->held, h, link);
	srq->nheld++;
	if (!conn) {
		srq->norphans++;
		evrdma__work_queue(srq->base, &srq->orphans);	/* (queued) */
		return 0;
	}
	/* (counted before the test: the one over the share is held too, so
	 * that it completes after the ones before it) */
	/* (orphans do not count: they complete in the loop's next turn,
	 * and a connection waiting to be accepted is not to blame for them:
	 * review r43) */
	if (++conn->srq_held > SRQ_HELD_CONN(srq) ||
	    srq->nheld - srq->norphans > SRQ_HELD_ALL(srq)) {
		evrdma__log(EVRDMA_LOG_WARN, "shared receive queue: a "
		    "connection not yet accepted took %u receives (%u held in "
		    "all, of %u): dropped", conn->srq_held,
		    srq->nheld - srq->norphans, srq->max_wr);
		return 1;
	}
	return 0;
}

void
evrdma__srq_handed_out(struct evrdma_conn *conn)
{
	struct evrdma_srq *srq = conn->srq;
	struct srq_held *h;

	if (!srq)
		return;
	evrdma__ep_ref(&srq->ep);
	evrdma__ep_ref(&conn->ep);
	/* (a callback may free the connection: the rest then gets NULL) */
	for (;;) {
		TAILQ_FOREACH(h, &srq->held, link)
			if (h->conn == conn)
				break;
		if (!h)
			break;
		TAILQ_REMOVE(&srq->held, h, link);
		held_complete(srq, h, conn, 0);
	}
	evrdma__ep_unref(&conn->ep);
	evrdma__ep_unref(&srq->ep);
}

/* From the loop: the held of connections that went unseen. */
static void
srq_orphans(struct evrdma__work *w)
{
	struct evrdma_srq *srq = (struct evrdma_srq *)((char *)w -
	    offsetof(struct evrdma_srq, orphans));
	struct srq_held *h, *next;

	evrdma__ep_ref(&srq->ep);
	for (h = TAILQ_FIRST(&srq->held); h; h = next) {
		next = TAILQ_NEXT(h, link);
		if (h->conn)
			continue;
		TAILQ_REMOVE(&srq->held, h, link);
		held_complete(srq, h, NULL, 0);
		/* a callback may have completed others: start again */
		next = TAILQ_FIRST(&srq->held);
	}
	evrdma__ep_unref(&srq->ep);
}

/* @p conn goes: what it held completes with no connection, from the loop
 * (this may be inside an evrdma call, evrdma_listener_free()). */
static void
held_orphan(struct evrdma_srq *srq, struct evrdma_conn *conn)
{
	struct srq_held *h;
	int any = 0;

	TAILQ_FOREACH(h, &srq->held, link)
		if (h->conn == conn) {
			h->conn = NULL;
			srq->norphans++;
			any = 1;
		}
	conn->srq_held = 0;
	if (any && srq->base)
		evrdma__work_queue(srq->base, &srq->orphans);
}

/* Base free: no callback. */
static void
held_drop_all(struct evrdma_srq *srq)
{
	struct srq_held *h;

	if (srq->base)
		evrdma__work_cancel(srq->base, &srq->orphans);
	while ((h = TAILQ_FIRST(&srq->held))) {
		TAILQ_REMOVE(&srq->held, h, link);
		held_complete(srq, h, NULL, 1);
	}
}

/* No failed() or settled(): the queue is quiet and never watched; a
 * receive's failure is its connection's (req.c fails that one). */
static const struct evrdma__ep_ops srq_ep_ops = {
	.async = srq_ep_async,
	.release = srq_ep_release,
	.route = srq_ep_route,
	.hold = srq_ep_hold,
};

/* ---- device objects ---- */

/* Release the device objects. @p husk: base free (no callback). */
static void
srq_destroy(struct evrdma_srq *srq, int husk)
{
	if (!srq->base)
		return;
	/* nothing completes after the destroy: what is still posted
	 * completes here, once */
	if (husk)
		evrdma__ep_drop_all(&srq->ep);
	else
		evrdma__ep_cancel_all(&srq->ep);
	if (husk) {
		evrdma__work_cancel(srq->base, &srq->fin);
		held_drop_all(srq);
	}
	/* its region goes before the PD */
	if (srq->chpool)
		srq->chpool_ops->fini(srq->chpool, husk);
	evrdma__dev_detach(&srq->ep);
	if (EVRDMA_SYM(ibv_destroy_srq)(srq->srq))
		evrdma__log(EVRDMA_LOG_WARN, "ibv_destroy_srq: %s",
		    strerror(errno));
	srq->srq = srq->ep.srq = NULL;
	evrdma__cq_release(srq->cq, srq->max_wr);
	evrdma__pd_put(srq->pd);
	evrdma__dev_put(srq->dev);
	srq->cq = NULL;
	srq->pd = NULL;
	srq->dev = NULL;
	LIST_REMOVE(srq, link);
	srq->base = NULL;
}

/* From the loop: the handle is freed and no connection uses the queue. */
static void
srq_fin(struct evrdma__work *w)
{
	struct evrdma_srq *srq = (struct evrdma_srq *)((char *)w -
	    offsetof(struct evrdma_srq, fin));

	if (!srq->user_freed || srq->nconns || !srq->base)
		return;
	evrdma__ep_ref(&srq->ep);
	/* (no connection left: what was held completes now, not from a
	 * work item the base may free before it runs) */
	evrdma__work_cancel(srq->base, &srq->orphans);
	srq_orphans(&srq->orphans);
	srq_destroy(srq, 0);
	evrdma__ep_unref(&srq->ep);		/* the handle's */
	evrdma__ep_unref(&srq->ep);
}

static void
srq_maybe_fin(struct evrdma_srq *srq)
{
	if (srq->user_freed && !srq->nconns && srq->base)
		evrdma__work_queue(srq->base, &srq->fin);
}

/* ---- API ---- */

struct evrdma_srq *
evrdma_srq_new(struct evrdma_base *base, const char *device, unsigned max_wr)
{
	struct evrdma_srq *srq;
	struct ibv_srq_init_attr ia;
	int i, err;

	if (evrdma__base_rdma(base, "evrdma_srq_new") < 0)
		return NULL;
	if (evrdma__forked) {
		evrdma__fail(EPERM, "a forked child cannot use its parent's "
		    "devices");
		return NULL;
	}
	if (!max_wr || max_wr > base->cfg.cq_size) {
		evrdma__fail(EINVAL, "evrdma_srq_new: max_wr %u: 1 to the CQ "
		    "size %u", max_wr, base->cfg.cq_size);
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq) {
		evrdma__fail(ENOMEM, "out of memory");
		return NULL;
	}
	srq->dev = evrdma__dev_get_by_name(base, device, "evrdma_srq_new");
	if (!srq->dev)
		goto fail;
	if (srq->dev->attr.max_srq <= 0) {
		evrdma__fail(ENOSYS, "evrdma_srq_new: the device has no "
		    "shared receive queues");
		goto fail;
	}
	if (max_wr > (unsigned)srq->dev->attr.max_srq_wr) {
		evrdma__fail(EINVAL, "evrdma_srq_new: max_wr %u exceeds the "
		    "device's %d", max_wr, srq->dev->attr.max_srq_wr);
		goto fail;
	}
	srq->pd = evrdma__pd_new(srq->dev);
	if (!srq->pd)
		goto fail;
	srq->cq = evrdma__cq_reserve(srq->dev, max_wr);
	if (!srq->cq)
		goto fail;
	memset(&ia, 0, sizeof(ia));
	ia.srq_context = srq;
	ia.attr.max_wr = max_wr;
	ia.attr.max_sge = 1;
	srq->srq = EVRDMA_SYM(ibv_create_srq)(srq->pd->pd, &ia);
	if (!srq->srq) {
		evrdma__fail(errno ? errno : ENOMEM, "ibv_create_srq(%u): %s",
		    max_wr, strerror(errno ? errno : ENOMEM));
		goto fail;
	}
	srq->base = base;
	srq->max_wr = max_wr;
	srq->fin.fn = srq_fin;
	srq->orphans.fn = srq_orphans;
	TAILQ_INIT(&srq->held);
	for (i = 0; i < SRQ_BUCKETS; i++)
		LIST_INIT(&srq->qpn[i]);
	evrdma__ep_init(&srq->ep, &base->reqs, &srq_ep_ops, NULL);
	srq->ep.srq = srq->srq;
	srq->ep.cq = srq->cq->cq;
	srq->ep.quiet = 1;
	/* the bound promised, not what the provider rounded up to: the
	 * CQ share is that size */
	srq->ep.rq_depth = max_wr;
	evrdma__dev_attach(srq->dev, &srq->ep);
	LIST_INSERT_HEAD(&base->srqs, srq, link);
	return srq;
fail:
	err = errno;
	if (srq->cq)
		evrdma__cq_release(srq->cq, max_wr);
	evrdma__pd_put(srq->pd);
	if (srq->dev)
		evrdma__dev_put(srq->dev);
	free(srq);
	errno = err;
	return NULL;
}

void
evrdma_srq_free(struct evrdma_srq *srq)
{
	if (!srq || srq->user_freed || evrdma__forked)
		return;
	srq->user_freed = 1;
	srq->limit_cb = NULL;
	if (!srq->base) {
		evrdma__ep_unref(&srq->ep);	/* a husk: the handle's */
		return;
	}
	srq_maybe_fin(srq);
}

static int
srq_usable(const struct evrdma_srq *srq, const char *fn)
{
	if (!srq)
		return evrdma__fail(EINVAL, "%s: no queue", fn);
	if (srq->user_freed || !srq->base)
		return evrdma__fail(EPIPE, "%s: the queue was freed", fn);
	return 0;
}

/* Raw connections and their receives, or channels and their pool: a
 * queue serves one kind (evrdma_channel_srq_new() makes the other). */
static int
srq_raw(const struct evrdma_srq *srq, const char *fn)
{
	if (srq_usable(srq, fn) < 0)
		return -1;
	if (srq->chpool)
		return evrdma__fail(EINVAL, "%s: a queue of channels "
		    "(evrdma_channel_srq_new) takes no receives or "
		    "connections but channels", fn);
	return 0;
}

struct evrdma_mr *
evrdma_srq_mr_reg(struct evrdma_srq *srq, void *addr, size_t len)
{
	if (srq_raw(srq, "evrdma_srq_mr_reg") < 0)
		return NULL;
	if (!addr || !len) {
		evrdma__fail(EINVAL, "evrdma_srq_mr_reg: NULL address or zero "
		    "length");
		return NULL;
	}
	return evrdma__mr_reg(srq->base, srq->pd, addr, len,
	    EVRDMA_ACCESS_LOCAL_WRITE);
}

int
evrdma_srq_post_recv(struct evrdma_srq *srq, struct evrdma_mr *mr,
    size_t off, size_t len, evrdma_req_cb cb, void *arg)
{
	if (srq_raw(srq, "evrdma_srq_post_recv") < 0)
		return -1;
	if (!mr || mr->freed || mr->pd != srq->pd)
		return evrdma__fail(EINVAL, "evrdma_srq_post_recv: not a "
		    "region of this queue (evrdma_srq_mr_reg)");
	if (off > mr->len || len > mr->len - off || len > UINT32_MAX)
		return evrdma__fail(EINVAL, "evrdma_srq_post_recv: [%zu, +%zu) "
		    "outside the region's %zu bytes", off, len, mr->len);
	return evrdma__ep_post(&srq->ep, len ? mr : NULL, off, len, NULL,
	    EVRDMA_OP_RECV, cb, arg);
}

int
evrdma_srq_set_limit(struct evrdma_srq *srq, unsigned limit,
    evrdma_srq_limit_cb cb, void *arg)
{
	struct ibv_srq_attr a;
	int rc;

	if (srq_usable(srq, "evrdma_srq_set_limit") < 0)
		return -1;
	if (evrdma__forked)	/* (the device is the parent's; found by
				 * review: a child could disarm its limit) */
		return evrdma__fail(EPERM, "a forked child cannot use its "
		    "parent's devices");
	if (limit >= srq->max_wr || (limit && !cb))
		return evrdma__fail(EINVAL, "evrdma_srq_set_limit: limit %u "
		    "(below max_wr %u, with a callback)", limit, srq->max_wr);
	memset(&a, 0, sizeof(a));
	a.srq_limit = limit;
	/* disarm first: an event of the old arming that is already queued
	 * then finds no callback */
	srq->limit_cb = NULL;
	rc = EVRDMA_SYM(ibv_modify_srq)(srq->srq, &a, IBV_SRQ_LIMIT);
	if (rc)
		return evrdma__fail(rc == EOPNOTSUPP ? ENOSYS : rc,
		    "ibv_modify_srq(limit %u): %s", limit, strerror(rc));
	if (limit) {
		srq->limit_cb = cb;
		srq->limit_arg = arg;
	}
	return 0;
}

unsigned
evrdma_srq_get_posted(const struct evrdma_srq *srq)
{
	return srq ? srq->ep.rq_out : 0;
}

int
evrdma_conn_set_srq(struct evrdma_conn *conn, struct evrdma_srq *srq)
{
	if (!conn)
		return evrdma__fail(EINVAL, "evrdma_conn_set_srq: no "
		    "connection");
	if (conn->state != EVRDMA_CONN_IDLE || conn->owner_ops ||
	    conn->user_freed)
		return evrdma__fail(EINVAL, "evrdma_conn_set_srq: before "
		    "evrdma_conn_connect(), on a raw connection");
	if (conn->srq)
		return evrdma__fail(EINVAL, "evrdma_conn_set_srq: already set");
	if (srq_raw(srq, "evrdma_conn_set_srq") < 0)
		return -1;
	return evrdma__srq_use(conn, srq);
}

int
evrdma_listener_set_srq(struct evrdma_listener *lst, struct evrdma_srq *srq)
{
	if (!lst || !lst->base)
		return evrdma__fail(EINVAL, "evrdma_listener_set_srq: no "
		    "listener, or its base was freed");
	if (lst->user_freed)
		return evrdma__fail(EINVAL, "evrdma_listener_set_srq: the "
		    "listener was freed");
	if (srq && (srq_usable(srq, "evrdma_listener_set_srq") < 0))
		return -1;
	if (srq && !srq->chpool != !(lst->ops && lst->ops->channels))
		return evrdma__fail(EINVAL, "evrdma_listener_set_srq: "
		    "channel and bufferevent listeners take a queue of "
		    "evrdma_channel_srq_new(), raw listeners one of "
		    "evrdma_srq_new()");
	if (lst->ops && !lst->ops->channels)
		return evrdma__fail(EINVAL, "evrdma_listener_set_srq: not a "
		    "raw or channel listener");
	if (srq && srq->base != lst->base)
		return evrdma__fail(EINVAL, "evrdma_listener_set_srq: the "
		    "queue is of another base");
	/* the listener holds a reference: its connections ask the queue
	 * (srq_usable()) even after evrdma_srq_free() */
	if (srq)
		evrdma__ep_ref(&srq->ep);
	evrdma__srq_drop(lst->srq);
	lst->srq = srq;
	return 0;
}

/* ---- the connections' side ---- */

int
evrdma__srq_use(struct evrdma_conn *conn, struct evrdma_srq *srq)
{
	if (srq_usable(srq, "evrdma_conn_set_srq") < 0)
		return -1;
	if (srq->base != conn->base)
		return evrdma__fail(EINVAL, "evrdma_conn_set_srq: the queue "
		    "is of another base");
	evrdma__ep_ref(&srq->ep);
	srq->nconns++;
	conn->srq = srq;
	return 0;
}

void
evrdma__srq_drop(struct evrdma_srq *srq)
{
	if (srq)
		evrdma__ep_unref(&srq->ep);
}

void
evrdma__srq_unuse(struct evrdma_conn *conn)
{
	struct evrdma_srq *srq = conn->srq;

	if (!srq)
		return;
	evrdma__srq_detach(conn);
	conn->srq = NULL;
	srq->nconns--;
	srq_maybe_fin(srq);
	evrdma__ep_unref(&srq->ep);
}

void
evrdma__srq_attach(struct evrdma_conn *conn)
{
	struct evrdma_srq *srq = conn->srq;

	LIST_INSERT_HEAD(&srq->qpn[conn->qp->qp_num & (SRQ_BUCKETS - 1)],
	    conn, srq_link);
}

/* Listed exactly while the connection has its queue and its QP: attached
 * right after the QP is made, detached right before it is destroyed. */
void
evrdma__srq_dropped(struct evrdma_conn *conn)
{
	if (conn->srq)
		held_orphan(conn->srq, conn);
}

void
evrdma__srq_detach(struct evrdma_conn *conn)
{
	if (conn->srq && conn->qp)
		LIST_REMOVE(conn, srq_link);
	/* (its QP's receives come no more: what it held is orphaned now,
	 * before its memory can go) */
	if (conn->srq)
		held_orphan(conn->srq, conn);
}

struct evrdma__pd *
evrdma__srq_pd_get(struct evrdma_srq *srq, struct evrdma_dev *dev)
{
	if (srq->dev != dev) {
		evrdma__fail(EINVAL, "the connection is on device %s, its "
		    "shared receive queue on another",
		    EVRDMA_SYM(ibv_get_device_name)(dev->verbs->device));
		return NULL;
	}
	srq->pd->refcnt++;
	return srq->pd;
}

void
evrdma__srq_qp_attr(const struct evrdma_srq *srq,
    struct ibv_qp_init_attr *attr)
{
	attr->srq = srq->srq;
	attr->recv_cq = srq->cq->cq;
}

struct evrdma__chpool *
evrdma__srq_chpool(const struct evrdma_srq *srq)
{
	return srq->chpool;
}

void
evrdma__srq_set_chpool(struct evrdma_srq *srq, struct evrdma__chpool *pool,
    const struct evrdma__chpool_ops *ops)
{
	srq->chpool = pool;
	srq->chpool_ops = ops;
}

struct evrdma__pd *
evrdma__srq_pd(const struct evrdma_srq *srq)
{
	return srq->pd;
}

struct evrdma__ep *
evrdma__srq_ep(struct evrdma_srq *srq)
{
	return &srq->ep;
}

struct evrdma_cq *
evrdma__srq_cq(const struct evrdma_srq *srq)
{
	return srq->base ? srq->cq : NULL;
}

int
evrdma__srq_alive(const struct evrdma_srq *srq)
{
	return srq->base != NULL && srq->srq != NULL;
}

void
evrdma__srq_release_all(struct evrdma_base *base)
{
	struct evrdma_srq *srq;

	while ((srq = LIST_FIRST(&base->srqs))) {
		int freed = srq->user_freed;

		evrdma__ep_ref(&srq->ep);
		srq_destroy(srq, 1);
		if (freed)
			evrdma__ep_unref(&srq->ep);	/* the handle's */
		evrdma__ep_unref(&srq->ep);
	}
}
