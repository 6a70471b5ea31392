/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: connections: one RC QP on a shared CQ, the rdma_cm state machine
 * and the evrdma handshake.
 *
 * State machine, active side:
 *   IDLE -> [RESOLVING_NAME] -> RESOLVING_ADDR -> RESOLVING_ROUTE
 *        -> (QP created) CONNECTING -> ESTABLISHED
 * passive side: (listener) ACCEPTING -> ESTABLISHED.
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

static void conn_timer_cb(void *arg);
static void conn_fin_cb(void *arg);
static void conn_start_close(struct evrdma_conn *conn);
static void conn_check_done(struct evrdma_conn *conn);
static void conn_fail(struct evrdma_conn *conn, int reason, int err);
static void conn_ka_cb(void *arg);

/* ---- what the endpoint tells us ---- */

static void
conn_ep_failed(struct evrdma__ep *ep, int status)
{
	struct evrdma_conn *conn = evrdma__ep_conn(ep);

	/* retries run out: nobody answered at the other end */
	if (status == ETIMEDOUT)
		conn_fail(conn, EVRDMA_REASON_PEER_DEAD, ETIMEDOUT);
	else
		conn_fail(conn, EVRDMA_REASON_QP_FATAL,
		    status == ECANCELED ? EIO : status);
}

static void
conn_ep_settled(struct evrdma__ep *ep)
{
	conn_check_done(evrdma__ep_conn(ep));
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
		conn_fail(conn, EVRDMA_REASON_PORT_ERROR, EIO);
		return;
	case IBV_EVENT_DEVICE_FATAL:
		conn_fail(conn, EVRDMA_REASON_DEVICE_FATAL, EIO);
		return;
	default:	/* QP errors, CQ overrun */
		conn_fail(conn, EVRDMA_REASON_QP_FATAL, EIO);
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
	conn->cm_kind = EVRDMA_CM_CONN;
	conn->base = base;
	conn->flags = flags;
	conn->sq_depth = base->cfg.sq_depth;
	conn->rq_depth = base->cfg.rq_depth;
	conn->rnr_retry = (uint8_t)base->cfg.rnr_retry;
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
static void
conn_event(struct evrdma_conn *conn, short what, int reason, int err)
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
	if (EVRDMA_SYM(ibv_modify_qp)(conn->qp, &attr, IBV_QP_STATE) == 0)
		conn->qp_in_error = 1;
	else
		evrdma__log(EVRDMA_LOG_WARN, "ibv_modify_qp(ERR) failed");
	if (conn->dev)
		evrdma__dev_poll_soon(conn->dev);
}

/*
 * Disconnect the id. Only an established connection is owed a
 * DISCONNECTED event afterwards; an attempt that never got there (rejected,
 * timed out) gets none, so teardown must not wait for it.
 */
static void
conn_disconnect(struct evrdma_conn *conn, int was_established)
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
}

static int
conn_closing(const struct evrdma_conn *conn)
{
	return conn->state == EVRDMA_CONN_CLOSING ||
	    conn->state == EVRDMA_CONN_FAILED ||
	    conn->state == EVRDMA_CONN_CLOSED;
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
		conn_fail(conn, EVRDMA_REASON_PEER_DEAD, ETIMEDOUT);
		evrdma__ep_unref(&conn->ep);
		return;
	}
	conn->ka_probing = 1;
	if (!conn->ka_probe && !conn->ep.corked && conn_ka_probe(conn) == 0)
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

static void
conn_fail(struct evrdma_conn *conn, int reason, int err)
{
	enum evrdma_conn_state old = conn->state;
	int est = old == EVRDMA_CONN_ESTABLISHED;

	/* a forked child never ends its parent's connection (rdma_sym.c) */
	if (evrdma__forked)
		return;
	if (reason == EVRDMA_REASON_DEVICE_REMOVAL && conn->dev)
		conn->dev->dead = 1;
	if (conn_closing(conn)) {
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
		conn_disconnect(conn, est);
	conn_qp_error(conn);
	evrdma__log(EVRDMA_LOG_INFO, "connection %p: %s", (void *)conn,
	    evrdma_reason_str(reason));
	if (conn->owner_ops) {
		evrdma__ep_ref(&conn->ep);
		conn->owner_ops->ended(conn->owner, conn, reason, err);
		evrdma__ep_unref(&conn->ep);
		return;
	}
	conn_event(conn, (reason == EVRDMA_REASON_DISCONNECTED && est) ?
	    EVRDMA_EV_EOF : EVRDMA_EV_ERROR, reason, err);
}

void
evrdma__conn_abort(struct evrdma_conn *conn, int reason)
{
	conn_fail(conn, reason, EPROTO);
}

/* ---- QP ---- */

static unsigned
rd_atom(const struct evrdma_dev *dev)
{
	int n = dev->attr.max_qp_rd_atom;

	if (dev->attr.max_qp_init_rd_atom < n)
		n = dev->attr.max_qp_init_rd_atom;
	if (n > 16)
		n = 16;
	return n > 0 ? (unsigned)n : 0;
}

/* The device, a protection domain of our own, room in a CQ, the QP. */
static int
conn_create_qp(struct evrdma_conn *conn)
{
	struct ibv_qp_init_attr attr;
	unsigned inl = conn->base->cfg.inline_threshold;
	unsigned n = conn->sq_depth + conn->rq_depth;

	conn->dev = evrdma__dev_get(conn->base, conn->id->verbs);
	if (!conn->dev)
		return -1;
	if (conn->srq) {
		/* receives come from the queue (srq.c) */
		conn->rq_depth = 0;
		n = conn->sq_depth;
		conn->pd = evrdma__srq_pd_get(conn->srq, conn->dev);
	} else {
		conn->pd = evrdma__pd_new(conn->dev);
	}
	if (!conn->pd)
		return -1;
	conn->cq = evrdma__cq_reserve(conn->dev, n);
	if (!conn->cq)
		return -1;
	for (;;) {
		memset(&attr, 0, sizeof(attr));
		attr.qp_context = conn;
		attr.send_cq = conn->cq->cq;
		attr.recv_cq = conn->cq->cq;
		if (conn->srq)
			evrdma__srq_qp_attr(conn->srq, &attr);
		attr.qp_type = IBV_QPT_RC;
		attr.cap.max_send_wr = conn->sq_depth;
		attr.cap.max_recv_wr = conn->rq_depth;
		attr.cap.max_send_sge = 1;
		attr.cap.max_recv_sge = 1;
		attr.cap.max_inline_data = inl;
		if (EVRDMA_SYM(rdma_create_qp)(conn->id, conn->pd->pd,
		    &attr) == 0)
			break;
		if (!inl)
			return evrdma__fail(errno ? errno : ENOMEM,
			    "rdma_create_qp failed: %s", strerror(errno));
		/* the device may not do inline at all: try without */
		inl = 0;
	}
	conn->qp = conn->id->qp;
	if (conn->base->cfg.ack_timeout) {
		uint8_t t = (uint8_t)conn->base->cfg.ack_timeout;

		/* before the QP reaches RTS, which takes it from the id */
		if (EVRDMA_SYM(rdma_set_option)(conn->id, RDMA_OPTION_ID,
		    RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof(t)))
			evrdma__log(EVRDMA_LOG_WARN, "rdma_set_option(ACK_"
			    "TIMEOUT): %s", strerror(errno));
	}
	conn->ep.qp = conn->qp;
	conn->ep.cq = conn->cq->cq;
	conn->ep.qp_num = conn->qp->qp_num;
	if (conn->srq)
		evrdma__srq_attach(conn);
	conn->ep.port = conn->id->port_num;
	conn->ep.sq_depth = conn->sq_depth;
	conn->ep.rq_depth = conn->rq_depth;
	conn->ep.max_inline = attr.cap.max_inline_data < inl ?
	    attr.cap.max_inline_data : inl;
	evrdma__dev_attach(conn->dev, &conn->ep);
	conn->base->stats.qps++;
	return 0;
}

/*
 * A QP whose receives come from a shared queue can meet a missing receive
 * through no fault of its peer's (another peer's messages took the
 * queue's buffers for a moment): the RNR NAK it then sends tells the peer
 * to wait the QP's min_rnr_timer, which rdma_cm leaves at 0, the IB code
 * for 655 ms. 0.64 ms instead (code 12; Soft-RoCE rounds it up to a
 * jiffy): an honest peer retries about when the buffers are posted again
 * (measured: test_chan_attack's attack_pool_burst). It can be set only in
 * RTS (RTR and RTS come from rdma_cm), so it takes effect an instant after
 * the peer may first send.
 */
#define EVRDMA__SRQ_MIN_RNR_TIMER	12

static void
conn_set_min_rnr(struct evrdma_conn *conn)
{
	struct ibv_qp_attr attr;

	if (!conn->srq || !conn->qp)
		return;
	memset(&attr, 0, sizeof(attr));
	attr.min_rnr_timer = EVRDMA__SRQ_MIN_RNR_TIMER;
	if (EVRDMA_SYM(ibv_modify_qp)(conn->qp, &attr, IBV_QP_MIN_RNR_TIMER))
		evrdma__log(EVRDMA_LOG_WARN, "connection %p: ibv_modify_qp("
		    "min_rnr_timer): %s", (void *)conn, strerror(errno));
}

static void
conn_param_init(struct evrdma_conn *conn, struct rdma_conn_param *p,
    const void *pdata, size_t len)
{
	unsigned rd = rd_atom(conn->dev);

	memset(p, 0, sizeof(*p));
	p->responder_resources = (uint8_t)rd;
	p->initiator_depth = (uint8_t)rd;
	p->retry_count = (uint8_t)conn->base->cfg.retry_count;
	p->rnr_retry_count = conn->rnr_retry;
	p->private_data = pdata;
	p->private_data_len = (uint8_t)len;
}

/*
 * Keep the peer's private data, without our handshake header. Returns -1
 * (reject code in *code) when a handshake was required and is missing or
 * bad.
 */
static int
conn_take_pdata(struct evrdma_conn *conn, const void *pdata, size_t len,
    int type, int *code)
{
	const uint8_t *data;
	size_t dlen;
	int vbad;

	if (len > sizeof(conn->peer_pdata))
		len = sizeof(conn->peer_pdata);
	if (conn->flags & EVRDMA_CONN_RAW) {
		if (pdata && len)
			memcpy(conn->peer_pdata, pdata, len);
		conn->peer_pdata_len = pdata ? (uint8_t)len : 0;
		return 0;
	}
	if (evrdma__hs_payload(pdata, pdata ? len : 0, type, &data, &dlen,
	    &vbad) < 0) {
		*code = vbad ? EVRDMA_REJECT_VERSION : EVRDMA_REJECT_PROTOCOL;
		return -1;
	}
	memcpy(conn->peer_pdata, data, dlen);
	conn->peer_pdata_len = (uint8_t)dlen;
	return 0;
}

/* Our private data: the handshake of @p type, then @p len bytes of
 * conn->pdata. Returns the length written to @p buf. */
static size_t
conn_pdata_out(struct evrdma_conn *conn, int type, uint8_t *buf, size_t len)
{
	struct evrdma__hs hs = { EVRDMA_HS_VERSION, (uint8_t)type, 0,
	    (uint8_t)len };

	if (conn->flags & EVRDMA_CONN_RAW) {
		memcpy(buf, conn->pdata, len);
		return len;
	}
	evrdma__hs_encode(buf, &hs);
	memcpy(buf + EVRDMA_HS_LEN, conn->pdata, len);
	return EVRDMA_HS_LEN + len;
}

/* ---- active side ---- */

static int
check_sockaddr(const struct sockaddr *sa, int socklen)
{
	if (!sa)
		return evrdma__fail(EINVAL, "no address");
	if (sa->sa_family == AF_INET &&
	    socklen >= (int)sizeof(struct sockaddr_in))
		return 0;
	if (sa->sa_family == AF_INET6 &&
	    socklen >= (int)sizeof(struct sockaddr_in6))
		return 0;
	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
		return evrdma__fail(EAFNOSUPPORT, "address family %d is not "
		    "IPv4 or IPv6", sa->sa_family);
	return evrdma__fail(EINVAL, "socklen %d too small", socklen);
}

/*
 * Address and route resolution run under rdma_cm's own timeout (we pass
 * it the configured one), and rdma_cm decides at that deadline: a request
 * whose neighbour answered just before it was queued is only looked at
 * again then, and succeeds then. A timer of ours at the same instant would
 * fail such a connection (2 of 12 first connects to a fresh host on
 * the two-guest wire), so ours is only the backstop for an rdma_cm that
 * never answers, this much later.
 */
#define CM_STEP_GRACE_MS	1000

static int
conn_start_connect(struct evrdma_conn *conn, const struct sockaddr *sa,
    int socklen)
{
	struct evrdma_base *base = conn->base;
	unsigned ms = base->cfg.timeout_ms[EVRDMA_TIMEOUT_ADDR];

	if (check_sockaddr(sa, socklen) < 0)
		return -1;
	memcpy(&conn->peer_addr, sa, sa->sa_family == AF_INET ?
	    sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	if (!evrdma__base_cm(base))
		return -1;
	if (EVRDMA_SYM(rdma_create_id)(base->cm_ch, &conn->id, conn,
	    RDMA_PS_TCP))
		return evrdma__fail(errno, "rdma_create_id: %s",
		    strerror(errno));
	base->stats.cm_ids++;
	if (EVRDMA_SYM(rdma_resolve_addr)(conn->id, NULL,
	    (struct sockaddr *)&conn->peer_addr, (int)ms)) {
		int err = errno;
		EVRDMA_SYM(rdma_destroy_id)(conn->id);
		base->stats.cm_ids--;
		conn->id = NULL;
		return evrdma__fail(err, "rdma_resolve_addr: %s",
		    strerror(err));
	}
	conn->state = EVRDMA_CONN_RESOLVING_ADDR;
	evrdma__ev_timer_start(conn->timer, ms + CM_STEP_GRACE_MS);
	return 0;
}

static int
conn_check_start(struct evrdma_conn *conn)
{
	if (!conn)
		return evrdma__fail(EINVAL, "no connection");
	if (!conn->base)
		return evrdma__fail(EPIPE, "the connection's base was freed");
	if (conn->state != EVRDMA_CONN_IDLE || conn->passive ||
	    conn->user_freed)
		return evrdma__fail(EISCONN, "connection already started");
	return 0;
}

int
evrdma_conn_connect(struct evrdma_conn *conn, const struct sockaddr *sa,
    int socklen)
{
	if (conn_check_start(conn) < 0)
		return -1;
	return conn_start_connect(conn, sa, socklen);
}

static void
conn_resolved(int err, const struct sockaddr *sa, int socklen, void *arg)
{
	struct evrdma_conn *conn = arg;

	conn->dns_req = NULL;
	evrdma__ep_ref(&conn->ep);
	if (err) {
		conn->dns_error = err;
		evrdma__fail(EHOSTUNREACH, "host name resolution failed "
		    "(%d)", err);
		conn_fail(conn, EVRDMA_REASON_DNS, EHOSTUNREACH);
	} else {
		conn->state = EVRDMA_CONN_IDLE;
		if (conn_start_connect(conn, sa, socklen) < 0)
			conn_fail(conn, EVRDMA_REASON_ADDR_ERROR, errno);
	}
	evrdma__ep_unref(&conn->ep);
}

int
evrdma_conn_connect_hostname(struct evrdma_conn *conn, struct evdns_base *dns,
    int family, const char *host, int port)
{
	if (conn_check_start(conn) < 0)
		return -1;
	if (!host || port < 1 || port > 65535 ||
	    (family != AF_INET && family != AF_INET6 && family != AF_UNSPEC))
		return evrdma__fail(EINVAL, "connect_hostname: bad argument");
	conn->dns_req = evrdma__resolve(conn->base, dns, family, host, port,
	    conn_resolved, conn);
	if (!conn->dns_req)
		return -1;
	conn->state = EVRDMA_CONN_RESOLVING_NAME;
	return 0;
}

static void
conn_on_addr_resolved(struct evrdma_conn *conn)
{
	unsigned ms = conn->base->cfg.timeout_ms[EVRDMA_TIMEOUT_ROUTE];

	if (EVRDMA_SYM(rdma_resolve_route)(conn->id, (int)ms)) {
		conn_fail(conn, EVRDMA_REASON_ROUTE_ERROR, errno);
		return;
	}
	conn->state = EVRDMA_CONN_RESOLVING_ROUTE;
	evrdma__ev_timer_start(conn->timer, ms + CM_STEP_GRACE_MS);
}

static void
conn_on_route_resolved(struct evrdma_conn *conn)
{
	struct rdma_conn_param p;
	uint8_t buf[EVRDMA_PDATA_CONNECT_MAX];
	size_t len;

	if (conn_create_qp(conn) < 0) {
		conn_fail(conn, EVRDMA_REASON_RESOURCE, errno);
		return;
	}
	if (conn->owner_ops) {
		size_t olen = EVRDMA_PDATA_CONNECT_MAX - EVRDMA_HS_LEN;
		int code;

		if (conn->owner_ops->prepare(conn->owner, conn, NULL, 0,
		    conn->pdata, &olen, &code) < 0) {
			conn_fail(conn, EVRDMA_REASON_RESOURCE, errno);
			return;
		}
		conn->pdata_len = (uint8_t)olen;
	}
	len = conn_pdata_out(conn, EVRDMA_HS_CONNECT, buf, conn->pdata_len);
	conn_param_init(conn, &p, len ? buf : NULL, len);
	if (EVRDMA_SYM(rdma_connect)(conn->id, &p)) {
		conn_fail(conn, EVRDMA_REASON_CONNECT_ERROR, errno);
		return;
	}
	conn->state = EVRDMA_CONN_CONNECTING;
	evrdma__ev_timer_start(conn->timer,
	    conn->base->cfg.timeout_ms[EVRDMA_TIMEOUT_CONNECT]);
}

static void
conn_on_established(struct evrdma_conn *conn, struct rdma_cm_event *ev)
{
	int code = 0;

	if (conn->state != EVRDMA_CONN_CONNECTING &&
	    conn->state != EVRDMA_CONN_ACCEPTING)
		return;
	if (!conn->passive && conn_take_pdata(conn,
	    ev->param.conn.private_data, ev->param.conn.private_data_len,
	    EVRDMA_HS_ACCEPT, &code) < 0) {
		conn_fail(conn, EVRDMA_REASON_PROTOCOL, EPROTO);
		return;
	}
	evrdma__ev_stop(conn->timer);
	conn->state = EVRDMA_CONN_ESTABLISHED;
	if (!conn->passive)
		conn_set_min_rnr(conn);	/* (passive: at the accept) */
	conn->rts = 1;
	if (conn->ka_idle_ms) {
		conn->ka_seen = conn->ep.activity;
		evrdma__ev_timer_start(conn->ka_ev, conn->ka_idle_ms);
	}
	if (conn->owner_ops && conn->owner_ops->established(conn->owner, conn,
	    conn->passive ? NULL : conn->peer_pdata,
	    conn->passive ? 0 : conn->peer_pdata_len) < 0) {
		conn_fail(conn, EVRDMA_REASON_PROTOCOL, EPROTO);
		return;
	}
	if (conn->state != EVRDMA_CONN_ESTABLISHED)
		return;		/* the owner failed it meanwhile */
	if (conn->passive) {
		const struct evrdma__parent_ops *ops = conn->parent_ops;
		void *parent = conn->parent;

		conn->parent_ops = NULL;
		conn->parent = NULL;
		if (ops)
			ops->established(parent, conn);
		else	/* its listener was freed meanwhile */
			evrdma_conn_free(conn);
		return;
	}
	conn_event(conn, EVRDMA_EV_CONNECTED, EVRDMA_REASON_NONE, 0);
}

static void
conn_on_rejected(struct evrdma_conn *conn, struct rdma_cm_event *ev)
{
	struct evrdma__hs hs;

	conn->rejected = 1;
	conn->reject_status = ev->status;
	if (ev->param.conn.private_data &&
	    evrdma__hs_decode(ev->param.conn.private_data,
	    ev->param.conn.private_data_len, &hs) == 0 &&
	    hs.type == EVRDMA_HS_REJECT)
		conn->reject_code = hs.code;
	conn_fail(conn, EVRDMA_REASON_REJECTED, ECONNREFUSED);
}

void
evrdma__conn_cm_event(struct evrdma_conn *conn, struct rdma_cm_event *ev)
{
	int err = ev->status < 0 ? -ev->status : EIO;

	evrdma__ep_ref(&conn->ep);
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (conn->state == EVRDMA_CONN_RESOLVING_ADDR)
			conn_on_addr_resolved(conn);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (conn->state == EVRDMA_CONN_RESOLVING_ROUTE)
			conn_on_route_resolved(conn);
		break;
	/* rdma_cm runs the step's timeout (we pass it the configured one;
	 * our timer is its backstop): its ETIMEDOUT is a timeout as our
	 * timer's is, and which of the two ends the step must not change
	 * the reason. */
	case RDMA_CM_EVENT_ADDR_ERROR:
		conn_fail(conn, err == ETIMEDOUT ? EVRDMA_REASON_TIMEOUT :
		    EVRDMA_REASON_ADDR_ERROR, err);
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		conn_fail(conn, err == ETIMEDOUT ? EVRDMA_REASON_TIMEOUT :
		    EVRDMA_REASON_ROUTE_ERROR, err);
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		conn_fail(conn, EVRDMA_REASON_CONNECT_ERROR, err);
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		conn_fail(conn, EVRDMA_REASON_UNREACHABLE, EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_REJECTED:
		conn_on_rejected(conn, ev);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		conn_on_established(conn, ev);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		conn->disconnect_seen = 1;
		conn->await_disconnect = 0;
		if (conn->state == EVRDMA_CONN_CLOSING) {
			conn_check_done(conn);
		} else if (ev->event == RDMA_CM_EVENT_DISCONNECTED) {
			conn_disconnect(conn, 0);
			conn_fail(conn, EVRDMA_REASON_DISCONNECTED, ECONNRESET);
		}
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		conn_fail(conn, EVRDMA_REASON_DEVICE_REMOVAL, ENODEV);
		break;
	default:
		break;
	}
	evrdma__ep_unref(&conn->ep);
}

/* ---- passive side ---- */

int
evrdma__conn_setup_passive(struct evrdma_conn *conn, struct rdma_cm_id *id,
    const struct rdma_conn_param *param, const struct sockaddr *peer,
    int *code)
{
	conn->passive = 1;
	conn->id = id;		/* counted in stats by the listener */
	id->context = conn;
	memcpy(&conn->peer_addr, peer, peer->sa_family == AF_INET6 ?
	    sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
	if (conn_take_pdata(conn, param->private_data,
	    param->private_data_len, EVRDMA_HS_CONNECT, code) < 0)
		return -1;
	if (conn_create_qp(conn) < 0) {
		*code = EVRDMA_REJECT_RESOURCES;
		return -1;
	}
	/* what the requester can take bounds what we offer */
	conn->peer_rd = param->initiator_depth;
	conn->peer_init = param->responder_resources;
	if (conn->owner_ops) {
		size_t olen = EVRDMA_PDATA_CONNECT_MAX - EVRDMA_HS_LEN;

		*code = EVRDMA_REJECT_RESOURCES;
		if (conn->owner_ops->prepare(conn->owner, conn,
		    conn->peer_pdata, conn->peer_pdata_len, conn->pdata, &olen,
		    code) < 0)
			return -1;
		conn->pdata_len = (uint8_t)olen;
	}
	conn->state = EVRDMA_CONN_ACCEPTING;
	return 0;
}

int
evrdma__conn_accept(struct evrdma_conn *conn)
{
	struct rdma_conn_param p;
	uint8_t buf[EVRDMA_PDATA_CONNECT_MAX];
	size_t len = 0;

	if (!(conn->flags & EVRDMA_CONN_RAW))
		len = conn_pdata_out(conn, EVRDMA_HS_ACCEPT, buf,
		    conn->pdata_len);
	conn_param_init(conn, &p, len ? buf : NULL, len);
	if (p.responder_resources > conn->peer_rd)
		p.responder_resources = conn->peer_rd;
	if (p.initiator_depth > conn->peer_init)
		p.initiator_depth = conn->peer_init;
	if (EVRDMA_SYM(rdma_accept)(conn->id, &p))
		return evrdma__fail(errno, "rdma_accept: %s", strerror(errno));
	/* rdma_accept() moved the QP to RTS: the requester may send as
	 * soon as it has the reply, before our ESTABLISHED is read, and a
	 * reply to that may go at once */
	conn->rts = 1;
	conn_set_min_rnr(conn);
	evrdma__ev_timer_start(conn->timer,
	    conn->base->cfg.timeout_ms[EVRDMA_TIMEOUT_ACCEPT]);
	return 0;
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

void
evrdma__conn_abort_passive(struct evrdma_conn *conn)
{
	conn->ep.quiet = 1;
	evrdma__ep_cancel_all(&conn->ep);
	if (conn->id) {
		conn->id->context = NULL;
		if (conn->qp) {
			EVRDMA_SYM(rdma_destroy_qp)(conn->id);
			conn->qp = conn->ep.qp = NULL;
			conn->base->stats.qps--;
		}
		conn->id = NULL;	/* the dispatcher destroys it */
	}
	conn->parent_ops = NULL;
	conn->parent = NULL;
	conn->user_freed = 1;
	conn->state = EVRDMA_CONN_CLOSING;
	conn_schedule_fin(conn);
}

/* ---- posting ---- */

static int
conn_check_post(struct evrdma_conn *conn, int recv)
{
	if (!conn)
		return evrdma__fail(EINVAL, "no connection");
	if (!conn->base || conn->user_freed || conn_closing(conn) ||
	    conn->qp_in_error)
		return evrdma__fail(EPIPE, "connection is closed or failed");
	if (recv && conn->srq)
		return evrdma__fail(EINVAL, "the connection's receives come "
		    "from its shared receive queue (evrdma_srq_post_recv)");
	if (conn->rts || (recv && conn->qp))
		return 0;
	return evrdma__fail(ENOTCONN, "connection not established");
}

static int
check_local(struct evrdma_conn *conn, struct evrdma_mr *mr, size_t off,
    size_t len, int need_write)
{
	if (!mr) {
		if (len == 0)
			return 0;
		return evrdma__fail(EINVAL, "no memory region");
	}
	if (!mr->mr)
		return evrdma__fail(EINVAL, "memory region released with its "
		    "base");
	if (mr->pd != conn->pd)
		return evrdma__fail(EXDEV, "memory region of another "
		    "connection (each has its own protection domain)");
	if (mr->freed)
		return evrdma__fail(EINVAL, "memory region is being freed");
	if (off > mr->len || len > mr->len - off || len > UINT32_MAX)
		return evrdma__fail(EINVAL, "range [%zu, +%zu) outside the "
		    "region of %zu bytes", off, len, mr->len);
	if (need_write && !(mr->access & EVRDMA_ACCESS_LOCAL_WRITE))
		return evrdma__fail(EACCES, "region lacks LOCAL_WRITE");
	return 0;
}

static int
check_remote(const struct evrdma_remote *rem, uint64_t roff, uint64_t len,
    int atomic)
{
	if (!rem)
		return evrdma__fail(EINVAL, "no remote descriptor");
	if (roff > rem->len || len > rem->len - roff ||
	    rem->addr + roff < rem->addr)
		return evrdma__fail(EINVAL, "remote range outside the "
		    "descriptor");
	if (atomic && ((rem->addr + roff) & 7))
		return evrdma__fail(EINVAL, "atomic target not 8-byte "
		    "aligned");
	return 0;
}

int
evrdma_conn_post_recv(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, size_t len, evrdma_req_cb cb, void *arg)
{
	if (conn_check_post(conn, 1) < 0 ||
	    check_local(conn, mr, off, len, 1) < 0)
		return -1;
	return evrdma__ep_post(&conn->ep, mr, off, len, NULL, EVRDMA_OP_RECV,
	    cb, arg);
}

int
evrdma__conn_ring_init(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t len, unsigned n, evrdma_req_cb cb, void *const *args)
{
	if (conn_check_post(conn, 1) < 0)
		return -1;
	return evrdma__ep_ring_init(&conn->ep, mr, len, n, cb, args);
}

int
evrdma__conn_ring_post(struct evrdma_conn *conn, const unsigned *idx,
    unsigned n)
{
	if (conn_check_post(conn, 1) < 0)
		return -1;
	return evrdma__ep_ring_post(&conn->ep, idx, n);
}

static int
post_send_common(struct evrdma_conn *conn, struct evrdma_mr *mr, size_t off,
    size_t len, int with_imm, uint32_t imm, evrdma_req_cb cb, void *arg)
{
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
	wr.imm_data = htonl(imm);
	return evrdma__ep_post(&conn->ep, mr, off, len, &wr, EVRDMA_OP_SEND,
	    cb, arg);
}

int
evrdma__conn_post_send_imm(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, size_t len, uint32_t imm, evrdma_req_cb cb, void *arg)
{
	if (conn_check_post(conn, 0) < 0)
		return -1;
	return evrdma__ep_send_imm(&conn->ep, mr, off, len, imm, cb, arg);
}

int
evrdma_conn_post_send(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, size_t len, evrdma_req_cb cb, void *arg)
{
	if (conn_check_post(conn, 0) < 0 ||
	    check_local(conn, mr, off, len, 0) < 0)
		return -1;
	return post_send_common(conn, mr, off, len, 0, 0, cb, arg);
}

int
evrdma_conn_post_send_imm(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, size_t len, uint32_t imm, evrdma_req_cb cb, void *arg)
{
	if (conn_check_post(conn, 0) < 0 ||
	    check_local(conn, mr, off, len, 0) < 0)
		return -1;
	return post_send_common(conn, mr, off, len, 1, imm, cb, arg);
}

static int
post_rdma(struct evrdma_conn *conn, struct evrdma_mr *mr, size_t off,
    size_t len, const struct evrdma_remote *rem, uint64_t roff,
    enum ibv_wr_opcode op, uint32_t imm, evrdma_req_cb cb, void *arg)
{
	struct ibv_send_wr wr;
	int is_read = op == IBV_WR_RDMA_READ;

	if (conn_check_post(conn, 0) < 0 ||
	    check_local(conn, mr, off, len, is_read) < 0 ||
	    check_remote(rem, roff, len, 0) < 0)
		return -1;
	memset(&wr, 0, sizeof(wr));
	wr.opcode = op;
	wr.imm_data = htonl(imm);
	wr.wr.rdma.remote_addr = rem->addr + roff;
	wr.wr.rdma.rkey = rem->rkey;
	return evrdma__ep_post(&conn->ep, mr, off, len, &wr,
	    is_read ? EVRDMA_OP_READ : EVRDMA_OP_WRITE, cb, arg);
}

int
evrdma_conn_post_write(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, size_t len, const struct evrdma_remote *rem, uint64_t roff,
    evrdma_req_cb cb, void *arg)
{
	return post_rdma(conn, mr, off, len, rem, roff, IBV_WR_RDMA_WRITE, 0,
	    cb, arg);
}

int
evrdma_conn_post_write_imm(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, size_t len, const struct evrdma_remote *rem, uint64_t roff,
    uint32_t imm, evrdma_req_cb cb, void *arg)
{
	return post_rdma(conn, mr, off, len, rem, roff,
	    IBV_WR_RDMA_WRITE_WITH_IMM, imm, cb, arg);
}

int
evrdma_conn_post_read(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, size_t len, const struct evrdma_remote *rem, uint64_t roff,
    evrdma_req_cb cb, void *arg)
{
	return post_rdma(conn, mr, off, len, rem, roff, IBV_WR_RDMA_READ, 0,
	    cb, arg);
}

static int
post_atomic(struct evrdma_conn *conn, struct evrdma_mr *mr, size_t off,
    const struct evrdma_remote *rem, uint64_t roff, enum ibv_wr_opcode op,
    uint64_t a, uint64_t b, evrdma_req_cb cb, void *arg)
{
	struct ibv_send_wr wr;

	if (conn_check_post(conn, 0) < 0 ||
	    check_local(conn, mr, off, 8, 1) < 0 ||
	    check_remote(rem, roff, 8, 1) < 0)
		return -1;
	if (!mr)
		return evrdma__fail(EINVAL, "no memory region");
	if (conn->dev->attr.atomic_cap == IBV_ATOMIC_NONE)
		return evrdma__fail(EOPNOTSUPP, "device has no atomics");
	memset(&wr, 0, sizeof(wr));
	wr.opcode = op;
	wr.wr.atomic.remote_addr = rem->addr + roff;
	wr.wr.atomic.rkey = rem->rkey;
	wr.wr.atomic.compare_add = a;
	wr.wr.atomic.swap = b;
	return evrdma__ep_post(&conn->ep, mr, off, 8, &wr,
	    op == IBV_WR_ATOMIC_CMP_AND_SWP ? EVRDMA_OP_CAS : EVRDMA_OP_FADD,
	    cb, arg);
}

int
evrdma_conn_post_cas(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, const struct evrdma_remote *rem, uint64_t roff,
    uint64_t compare, uint64_t swap, evrdma_req_cb cb, void *arg)
{
	return post_atomic(conn, mr, off, rem, roff, IBV_WR_ATOMIC_CMP_AND_SWP,
	    compare, swap, cb, arg);
}

int
evrdma_conn_post_fadd(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, const struct evrdma_remote *rem, uint64_t roff, uint64_t add,
    evrdma_req_cb cb, void *arg)
{
	return post_atomic(conn, mr, off, rem, roff, IBV_WR_ATOMIC_FETCH_AND_ADD,
	    add, 0, cb, arg);
}

/* ---- teardown ---- */

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
		evrdma__ep_cancel_all(&conn->ep);
		conn_schedule_fin(conn);
		return;
	}
	/* A busy loop may not have read the event that ends this step yet:
	 * read what is queued before calling the step late. */
	evrdma__ep_ref(&conn->ep);
	conn->base->cm_drain(conn->base);
	if (conn->state == old && !evrdma__ev_pending(conn->timer)) {
		evrdma__fail(ETIMEDOUT, "connection step timed out");
		conn_fail(conn, EVRDMA_REASON_TIMEOUT, ETIMEDOUT);
	}
	evrdma__ep_unref(&conn->ep);
}

static void
conn_check_done(struct evrdma_conn *conn)
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
	if (old == EVRDMA_CONN_ESTABLISHED || old == EVRDMA_CONN_CONNECTING ||
	    old == EVRDMA_CONN_ACCEPTING || old == EVRDMA_CONN_FAILED)
		conn_disconnect(conn, old == EVRDMA_CONN_ESTABLISHED);
	evrdma__ev_timer_start(conn->timer,
	    conn->base->cfg.timeout_ms[EVRDMA_TIMEOUT_TEARDOWN]);
	conn_qp_error(conn);
	conn_check_done(conn);
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
	if (husk)
		evrdma__ep_drop_all(&conn->ep);
	else
		evrdma__ep_cancel_all(&conn->ep);
	if (conn->dns_req) {
		evrdma__resolve_cancel(conn->dns_req);
		conn->dns_req = NULL;
	}
	conn_drop_parent(conn);
	/* its queue's completions no longer find it (they complete with
	 * no connection) */
	evrdma__srq_detach(conn);
	if (conn->qp) {
		EVRDMA_SYM(rdma_destroy_qp)(conn->id);
		conn->qp = conn->ep.qp = NULL;
		base->stats.qps--;
	}
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
