/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: listeners (the passive side of rdma_cm).
 *
 * What a stranger can make a listener pin is bounded. A connect request
 * gets a QP and its owner's memory (a channel's rings) only while fewer
 * than the configured number of connections are half-open (accepted, not
 * yet established); further requests wait, holding nothing but their id,
 * in a queue as long as the backlog, and are served in order as places
 * free up, or rejected (EVRDMA_REJECT_RESOURCES) when they waited longer
 * than the connect timeout; beyond the backlog they are rejected at once.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "evrdma-internal.h"

/* A connect request waiting for a half-open place. Its id's context. */
struct evrdma__queued {
	struct evrdma__cm_owner cm;	/* its id's context */
	struct evrdma_listener *lst;
	struct rdma_cm_id *id;
	struct rdma_conn_param param;
	/* (as much as a request served at once keeps: conn->peer_pdata) */
	uint8_t pdata[EVRDMA_PDATA_ACCEPT_MAX];
	struct sockaddr_storage peer;
	uint64_t deadline_ms;
	TAILQ_ENTRY(evrdma__queued) link;
};

static void lst_serve_queue(struct evrdma_listener *lst);
static const struct evrdma__cm_ops queued_cm_ops;

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
reject(struct rdma_cm_id *id, int code)
{
	uint8_t buf[EVRDMA_HS_LEN];
	struct evrdma__hs hs = { EVRDMA_HS_VERSION, EVRDMA_HS_REJECT, 0,
	    (uint8_t)code };

	evrdma__log(EVRDMA_LOG_INFO, "rejecting a connect request (code %d)",
	    code);
	/* A raw listener's too (review r46: listener.h promises the code):
	 * an evrdma peer reads it, any other ignores a reject's private
	 * data (rping, perftest). */
	evrdma__hs_encode(buf, &hs);
	EVRDMA_SYM(rdma_reject)(id, buf, sizeof(buf));
}

/* ---- the half-open connections ---- */

static void
lst_half_open_done(struct evrdma_listener *lst, struct evrdma_conn *conn)
{
	LIST_REMOVE(conn, parent_link);
	lst->n_half_open--;
	/* a place is free: serve the queue from the loop (we may be deep in
	 * the connection's failure path here) */
	if (lst->n_queued && lst->queue_ev)
		evrdma__ev_timer_start(lst->queue_ev, 0);
}

static void destroy_if_done(struct evrdma_listener *lst);

/* An established connection goes to the user. */
static void
lst_hand_out(struct evrdma_listener *lst, struct evrdma_conn *conn)
{
	const struct sockaddr *peer = (const struct sockaddr *)&conn->peer_addr;
	int len = peer->sa_family == AF_INET6 ?
	    (int)sizeof(struct sockaddr_in6) : (int)sizeof(struct sockaddr_in);

	lst->refcnt++;
	if (lst->ops) {
		lst->ops->accepted(lst->ops_arg, lst, conn, peer, len);
	} else {
		/* (the callback may free it) */
		evrdma__ep_ref(&conn->ep);
		lst->accept_cb(lst, conn, peer, len, lst->accept_arg);
		/* what it received before it was ours to see */
		evrdma__srq_handed_out(conn);
		evrdma__ep_unref(&conn->ep);
	}
	lst->refcnt--;
}

static void parent_established(void *arg, struct evrdma_conn *conn);

/* A held connection ended before it was handed out: it is dropped (the
 * connection drops itself quietly, as a half-open one). */
static void
held_dropped(void *arg, struct evrdma_conn *conn)
{
	LIST_REMOVE(conn, parent_link);
}

static const struct evrdma__parent_ops lst_held_ops = {
	.established = parent_established,	/* (never: it is) */
	.dropped = held_dropped,
};

/* A half-open connection is established: the user gets it, or, while the
 * listener is disabled, it waits (as in a TCP listen queue) until
 * evrdma_listener_enable(). */
static void
parent_established(void *arg, struct evrdma_conn *conn)
{
	struct evrdma_listener *lst = arg;

	lst_half_open_done(lst, conn);
	if (lst->disabled) {
		evrdma__conn_set_parent(conn, &lst_held_ops, lst);
		LIST_INSERT_HEAD(&lst->held, conn, parent_link);
		return;
	}
	lst_hand_out(lst, conn);
	destroy_if_done(lst);
}

static void
parent_dropped(void *arg, struct evrdma_conn *conn)
{
	lst_half_open_done(arg, conn);
}

static const struct evrdma__parent_ops lst_parent_ops = {
	.established = parent_established,
	.dropped = parent_dropped,
};

/* Hand out the held connections, the oldest first (the list's last),
 * while the listener is enabled and not freed. */
static void
lst_hand_out_held(struct evrdma_listener *lst)
{
	struct evrdma_conn *conn, *next;

	while (!lst->disabled && !lst->user_freed &&
	    (conn = LIST_FIRST(&lst->held))) {
		while ((next = LIST_NEXT(conn, parent_link)))
			conn = next;
		LIST_REMOVE(conn, parent_link);
		evrdma__conn_set_parent(conn, NULL, NULL);
		lst_hand_out(lst, conn);
	}
}

/*
 * Build the connection of a request (QP on the shared CQ, its owner, the
 * application's prepare callback) and accept. 0, or -1 with the reject
 * code in *code; the connection is then gone and the caller rejects.
 */
static int
serve_request(struct evrdma_listener *lst, struct rdma_cm_id *id,
    const struct rdma_conn_param *param, const struct sockaddr *peer,
    int *code)
{
	struct evrdma_conn *conn;

	*code = EVRDMA_REJECT_RESOURCES;
	conn = evrdma__conn_alloc(lst->base,
	    (lst->flags & EVRDMA_LISTEN_RAW) ? EVRDMA_CONN_RAW : 0);
	if (!conn) {
		id->context = NULL;
		return -1;
	}
	if (lst->ops && lst->ops->attach(lst->ops_arg, lst, conn, code) < 0)
		goto refuse;
	if (lst->srq && evrdma__srq_use(conn, lst->srq) < 0)
		goto refuse;
	if (evrdma__conn_setup_passive(conn, id, param, peer, code) < 0)
		goto refuse;
	if (lst->prepare_cb) {
		size_t len;
		const void *pd = evrdma_conn_get_peer_private_data(conn, &len);
		int rc;

		lst->refcnt++;
		rc = lst->prepare_cb(lst, conn, pd, len, lst->prepare_arg);
		lst->refcnt--;
		/* (a connection freed here, which listener.h forbids, is
		 * refused: before, only librdmacm's refusal to accept on a QP
		 * in error did that, found by review) */
		if (rc || lst->user_freed || conn->user_freed) {
			*code = EVRDMA_REJECT_APP;
			goto refuse;
		}
	}
	if (evrdma__conn_accept(conn) < 0) {
		*code = EVRDMA_REJECT_RESOURCES;
		goto refuse;
	}
	evrdma__conn_set_parent(conn, &lst_parent_ops, lst);
	LIST_INSERT_HEAD(&lst->half_open, conn, parent_link);
	lst->n_half_open++;
	return 0;
refuse:
	evrdma__conn_abort_passive(conn);
	return -1;
}

/* ---- the queue ---- */

static void
queued_free(struct evrdma_listener *lst, struct evrdma__queued *q)
{
	TAILQ_REMOVE(&lst->queued, q, link);
	lst->n_queued--;
	free(q);
}

/* Reject and destroy a queued request (outside its id's event dispatch). */
static void
queued_reject(struct evrdma_listener *lst, struct evrdma__queued *q)
{
	struct rdma_cm_id *id = q->id;

	id->context = NULL;
	reject(id, EVRDMA_REJECT_RESOURCES);
	EVRDMA_SYM(rdma_destroy_id)(id);
	lst->base->stats.cm_ids--;
	queued_free(lst, q);
}

static int
queue_request(struct evrdma_listener *lst, struct rdma_cm_event *ev)
{
	struct evrdma__queued *q = calloc(1, sizeof(*q));
	const struct sockaddr *peer = rdma_get_peer_addr(ev->id);

	if (!q)
		return -1;
	q->cm.ops = &queued_cm_ops;
	q->lst = lst;
	q->id = ev->id;
	q->param = ev->param.conn;
	q->param.private_data_len = ev->param.conn.private_data_len >
	    sizeof(q->pdata) ? sizeof(q->pdata) :
	    ev->param.conn.private_data_len;
	if (ev->param.conn.private_data)
		memcpy(q->pdata, ev->param.conn.private_data,
		    q->param.private_data_len);
	q->param.private_data = q->pdata;
	memcpy(&q->peer, peer, peer->sa_family == AF_INET6 ?
	    sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
	q->deadline_ms = now_ms() +
	    lst->base->cfg.timeout_ms[EVRDMA_TIMEOUT_CONNECT];
	ev->id->context = &q->cm;
	TAILQ_INSERT_TAIL(&lst->queued, q, link);
	lst->n_queued++;
	if (!evrdma__ev_pending(lst->queue_ev))
		evrdma__ev_timer_start(lst->queue_ev,
		    lst->base->cfg.timeout_ms[EVRDMA_TIMEOUT_CONNECT]);
	return 0;
}

/* Serve waiting requests while there is room; reject the expired. */
static void
lst_serve_queue(struct evrdma_listener *lst)
{
	struct evrdma__queued *q;
	uint64_t now = now_ms();

	lst->refcnt++;
	lst_hand_out_held(lst);
	while ((q = TAILQ_FIRST(&lst->queued)) && !lst->user_freed) {
		int code;

		if (q->deadline_ms <= now) {
			evrdma__log(EVRDMA_LOG_INFO, "connect request waited "
			    "longer than the connect timeout for a half-open "
			    "place");
			queued_reject(lst, q);
			continue;
		}
		if (lst->n_half_open >= lst->base->cfg.half_open ||
		    lst->disabled)
			break;
		TAILQ_REMOVE(&lst->queued, q, link);
		lst->n_queued--;
		if (serve_request(lst, q->id, &q->param,
		    (struct sockaddr *)&q->peer, &code) < 0) {
			q->id->context = NULL;
			reject(q->id, code);
			EVRDMA_SYM(rdma_destroy_id)(q->id);
			lst->base->stats.cm_ids--;
		}
		free(q);
	}
	if ((q = TAILQ_FIRST(&lst->queued)))
		evrdma__ev_timer_start(lst->queue_ev,
		    (unsigned)(q->deadline_ms > now ? q->deadline_ms - now :
		    0));
	lst->refcnt--;
	destroy_if_done(lst);
}

static void
queue_timer_cb(void *arg)
{
	lst_serve_queue(arg);
}

/* The CM event of a queued request's id (cm.c's drain). */
static int
queued_cm_event(struct evrdma__cm_owner *o, struct rdma_cm_event *ev)
{
	struct evrdma__queued *q = (struct evrdma__queued *)((char *)o -
	    offsetof(struct evrdma__queued, cm));

	(void)ev;
	/* the requester gave up (or its device went away) while waiting */
	q->id->context = NULL;
	queued_free(q->lst, q);
	return 1;
}

static const struct evrdma__cm_ops queued_cm_ops = {
	.event = queued_cm_event,
};

/* ---- requests ---- */

static int
on_connect_request(struct evrdma_listener *lst, struct rdma_cm_event *ev)
{
	int code = EVRDMA_REJECT_RESOURCES;

	lst->base->stats.cm_ids++;	/* the new id */
	if (lst->user_freed || !lst->id) {
		ev->id->context = NULL;
		reject(ev->id, code);
		return 1;
	}
	/* (behind those already waiting: served in order; a place freed
	 * in this drain goes to the queue's front, from the loop) */
	if (lst->n_half_open >= lst->base->cfg.half_open || lst->disabled ||
	    lst->n_queued) {
		if (lst->n_queued < lst->backlog &&
		    queue_request(lst, ev) == 0)
			return 0;
		evrdma__log(EVRDMA_LOG_WARN, "listener %p: %u connections "
		    "half-open and %u waiting (the backlog)%s: rejecting",
		    (void *)lst, lst->n_half_open, lst->n_queued,
		    lst->disabled ? ", disabled" : "");
		ev->id->context = NULL;
		reject(ev->id, code);
		return 1;
	}
	if (serve_request(lst, ev->id, &ev->param.conn,
	    rdma_get_peer_addr(ev->id), &code) < 0) {
		ev->id->context = NULL;
		reject(ev->id, code);
		return 1;
	}
	return 0;
}

/* Its device went away: the id must go (the removal waits for it); the
 * user hears of it once. */
static void
on_device_removal(struct evrdma_listener *lst)
{
	struct evrdma__queued *q;

	evrdma__log(EVRDMA_LOG_ERROR, "listener %p: its device was removed",
	    (void *)lst);
	lst->id->context = NULL;
	lst->id = NULL;		/* the dispatcher destroys it */
	while ((q = TAILQ_FIRST(&lst->queued)))
		queued_reject(lst, q);
	evrdma__listener_error(lst, EVRDMA_REASON_DEVICE_REMOVAL, ENODEV);
}

void
evrdma__listener_error(struct evrdma_listener *lst, int reason, int err)
{
	lst->error = reason;
	if (!lst->error_cb || lst->user_freed)
		return;
	lst->refcnt++;
	errno = err;
	lst->error_cb(lst, lst->accept_arg);
	lst->refcnt--;
	destroy_if_done(lst);
}

static struct evrdma_listener *
lst_of(struct evrdma__cm_owner *o)
{
	return (struct evrdma_listener *)((char *)o -
	    offsetof(struct evrdma_listener, cm));
}

/* The CM event of the listener's id, or a connect request to it (cm.c's
 * drain). A reference is held until listener_cm_acked(): a callback may
 * free the listener, whose id can go only after the ack. */
static int
listener_cm_event(struct evrdma__cm_owner *o, struct rdma_cm_event *ev)
{
	struct evrdma_listener *lst = lst_of(o);
	int destroy = 0;

	lst->refcnt++;
	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		destroy = on_connect_request(lst, ev);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (ev->id == lst->id) {
			on_device_removal(lst);
			destroy = 1;
		}
		break;
	default:
		break;
	}
	return destroy;
}

/* The event is acked: a free from a callback is finished now. */
static void
listener_cm_acked(struct evrdma__cm_owner *o)
{
	struct evrdma_listener *lst = lst_of(o);

	lst->refcnt--;
	destroy_if_done(lst);
}

static const struct evrdma__cm_ops listener_cm_ops = {
	.event = listener_cm_event,
	.acked = listener_cm_acked,
};

/* ---- life ---- */

int
evrdma__listener_flags(int flags, int own, const char *fn)
{
	int bad = flags & ~(EVRDMA__LEV_OPTS | own);

	if (!bad)
		return 0;
	return evrdma__fail(EINVAL, "%s: flags 0x%x not taken%s", fn,
	    (unsigned)bad, bad & (LEV_OPT_LEAVE_SOCKETS_BLOCKING |
	    LEV_OPT_THREADSAFE | LEV_OPT_REUSEABLE_PORT |
	    LEV_OPT_BIND_IPV6ONLY) ? " (LEV_OPT_LEAVE_SOCKETS_BLOCKING, "
	    "_THREADSAFE, _REUSEABLE_PORT and _BIND_IPV6ONLY are not "
	    "offered: evrdma/listener.h)" : "");
}

int
evrdma__listener_backlog(int backlog, const char *fn)
{
	if (backlog == 0)
		return evrdma__fail(EINVAL, "%s: backlog 0 (-1 for the "
		    "default)", fn);
	return backlog < 0 ? EVRDMA__BACKLOG_DEFAULT : backlog;
}

struct evrdma_listener *
evrdma__listener_new(struct evrdma_base *base, const struct sockaddr *sa,
    int socklen, int backlog, int flags, const struct evrdma__listen_ops *ops,
    void *ops_arg, const char *fn)
{
	struct evrdma_listener *lst;
	struct sockaddr_storage ss;

	if (evrdma__listener_flags(flags, EVRDMA_LISTEN_RAW |
	    EVRDMA__LISTEN_BARE, fn) < 0)
		return NULL;
	if (!base || (!sa && !(flags & EVRDMA__LISTEN_BARE))) {
		evrdma__fail(EINVAL, "%s: no %s", fn, base ? "address" :
		    "base");
		return NULL;
	}
	if ((backlog = evrdma__listener_backlog(backlog, fn)) < 0)
		return NULL;
	if (!(flags & EVRDMA__LISTEN_BARE) && evrdma__base_rdma(base, fn) < 0)
		return NULL;
	/* (a bare listener's owner listens on whatever it has: a TCP or
	 * Unix socket) */
	if (!(flags & EVRDMA__LISTEN_BARE) && !((sa->sa_family == AF_INET &&
	    socklen >= (int)sizeof(struct sockaddr_in)) ||
	    (sa->sa_family == AF_INET6 &&
	    socklen >= (int)sizeof(struct sockaddr_in6)))) {
		evrdma__fail(sa->sa_family == AF_INET ||
		    sa->sa_family == AF_INET6 ? EINVAL : EAFNOSUPPORT,
		    "%s: not an IPv4/IPv6 address", fn);
		return NULL;
	}
	lst = calloc(1, sizeof(*lst));
	if (!lst) {
		evrdma__fail(ENOMEM, "out of memory");
		return NULL;
	}
	lst->cm.ops = &listener_cm_ops;
	lst->base = base;
	lst->flags = flags;
	lst->disabled = !!(flags & LEV_OPT_DISABLED);
	lst->backlog = (unsigned)backlog;
	lst->ops = ops;
	lst->ops_arg = ops_arg;
	LIST_INIT(&lst->half_open);
	LIST_INIT(&lst->held);
	TAILQ_INIT(&lst->queued);
	if (flags & EVRDMA__LISTEN_BARE) {
		/* no rdma_cm id: its owner listens by other means (TCP) */
		base->stats.listeners++;
		LIST_INSERT_HEAD(&base->listeners, lst, link);
		return lst;
	}
	lst->queue_ev = evrdma__ev_timer_new(base, queue_timer_cb, lst);
	if (!lst->queue_ev) {
		free(lst);
		return NULL;
	}
	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, sa, sa->sa_family == AF_INET ?
	    sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	if (!evrdma__base_cm(base) ||
	    EVRDMA_SYM(rdma_create_id)(base->cm_ch, &lst->id, &lst->cm,
	    RDMA_PS_TCP)) {
		if (base->cm_ch)
			evrdma__fail(errno, "rdma_create_id: %s",
			    strerror(errno));
		evrdma__ev_free(lst->queue_ev);
		free(lst);
		return NULL;
	}
	if ((ss.ss_family == AF_INET6 && base->listen_v6only >= 0 &&
	    EVRDMA_SYM(rdma_set_option)(lst->id, RDMA_OPTION_ID,
	    RDMA_OPTION_ID_AFONLY, &base->listen_v6only,
	    sizeof(base->listen_v6only))) ||
	    EVRDMA_SYM(rdma_bind_addr)(lst->id, (struct sockaddr *)&ss) ||
	    EVRDMA_SYM(rdma_listen)(lst->id, backlog)) {
		int err = errno;
		EVRDMA_SYM(rdma_destroy_id)(lst->id);
		evrdma__ev_free(lst->queue_ev);
		free(lst);
		evrdma__fail(err, "cannot listen: %s", strerror(err));
		return NULL;
	}
	lst->port = ntohs(EVRDMA_SYM(rdma_get_src_port)(lst->id));
	base->stats.cm_ids++;
	base->stats.listeners++;
	LIST_INSERT_HEAD(&base->listeners, lst, link);
	return lst;
}

struct evrdma_listener *
evrdma_listener_new(struct evrdma_base *base, evrdma_accept_cb cb, void *arg,
    int flags, int backlog, const struct sockaddr *sa, int socklen)
{
	struct evrdma_listener *lst;

	if (evrdma__listener_flags(flags, EVRDMA_LISTEN_RAW,
	    "evrdma_listener_new") < 0)
		return NULL;
	if (!cb) {
		evrdma__fail(EINVAL, "evrdma_listener_new: no accept callback");
		return NULL;
	}
	lst = evrdma__listener_new(base, sa, socklen, backlog, flags, NULL,
	    NULL, "evrdma_listener_new");
	if (lst) {
		lst->accept_cb = cb;
		lst->accept_arg = arg;
	}
	return lst;
}

void
evrdma_listener_set_prepare_cb(struct evrdma_listener *lst,
    evrdma_prepare_cb cb, void *arg)
{
	if (!lst)
		return;
	lst->prepare_cb = cb;
	lst->prepare_arg = arg;
}

void
evrdma_listener_set_error_cb(struct evrdma_listener *lst,
    evrdma_listener_errorcb cb)
{
	if (lst)
		lst->error_cb = cb;
}

int
evrdma_listener_get_error(struct evrdma_listener *lst)
{
	return lst ? lst->error : EVRDMA_REASON_NONE;
}

struct event_base *
evrdma_listener_get_base(struct evrdma_listener *lst)
{
	return lst && lst->base ? lst->base->eb : NULL;
}

static int
lst_set_enabled(struct evrdma_listener *lst, int on, const char *fn)
{
	if (!lst)
		return evrdma__fail(EINVAL, "%s: no listener", fn);
	if (!lst->base)
		return evrdma__fail(EPIPE, "%s: its base was freed", fn);
	if (lst->disabled == !on)
		return 0;
	lst->disabled = !on;
	if (lst->side)
		lst->side->set_enabled(lst->side_arg, on);
	/* what waited is served from the loop, not inside this call */
	if (on && lst->queue_ev && (LIST_FIRST(&lst->held) || lst->n_queued))
		evrdma__ev_timer_start(lst->queue_ev, 0);
	return 0;
}

int
evrdma_listener_enable(struct evrdma_listener *lst)
{
	return lst_set_enabled(lst, 1, "evrdma_listener_enable");
}

int
evrdma_listener_disable(struct evrdma_listener *lst)
{
	return lst_set_enabled(lst, 0, "evrdma_listener_disable");
}

int
evrdma_listener_get_port(struct evrdma_listener *lst)
{
	return lst ? lst->port : 0;
}

/* Drop every request and connection not yet handed out, and the id. */
static void
lst_release(struct evrdma_listener *lst)
{
	struct evrdma__queued *q;
	struct evrdma_conn *conn;

	while ((q = TAILQ_FIRST(&lst->queued)))
		queued_reject(lst, q);
	while ((conn = LIST_FIRST(&lst->half_open)))
		evrdma_conn_free(conn);		/* drops it from the list */
	while ((conn = LIST_FIRST(&lst->held)))
		evrdma_conn_free(conn);		/* the same */
	evrdma__ev_free(lst->queue_ev);
	lst->queue_ev = NULL;
	if (lst->id) {
		EVRDMA_SYM(rdma_destroy_id)(lst->id);
		lst->id = NULL;
		lst->base->stats.cm_ids--;
	}
	lst->base->stats.listeners--;
	LIST_REMOVE(lst, link);
	evrdma__srq_drop(lst->srq);
	lst->srq = NULL;
}

static void
lst_free_mem(struct evrdma_listener *lst)
{
	if (lst->ops && lst->ops->free_arg)
		lst->ops->free_arg(lst->ops_arg);
	free(lst);
}

/* Freed by the user and no callback or dispatch running: go. */
static void
destroy_if_done(struct evrdma_listener *lst)
{
	if (!lst->user_freed || lst->refcnt)
		return;
	lst_release(lst);
	lst_free_mem(lst);
}

void
evrdma_listener_free(struct evrdma_listener *lst)
{
	if (!lst || lst->user_freed || evrdma__forked)
		return;
	lst->user_freed = 1;
	if (!lst->base) {	/* a husk: its base was freed */
		lst_free_mem(lst);
		return;
	}
	/* Inside a callback or the dispatch the listener's event is not yet
	 * acked, so its id cannot be destroyed now; listener_cm_acked()
	 * finishes the job. */
	destroy_if_done(lst);
}

void
evrdma__listener_release_now(struct evrdma_listener *lst)
{
	lst_release(lst);
	lst->base = NULL;
	if (lst->user_freed)
		lst_free_mem(lst);
}
