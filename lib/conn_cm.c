/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: how a connection is established: its QP, the evrdma handshake
 * in the private data, and the rdma_cm state machine.
 *
 * Active side:
 *   IDLE -> [RESOLVING_NAME] -> RESOLVING_ADDR -> RESOLVING_ROUTE
 *        -> (QP created) CONNECTING -> ESTABLISHED
 * passive side: (listener) ACCEPTING -> ESTABLISHED.
 * Failures and the end go to conn.c (evrdma__conn_fail).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>

#include "evrdma-internal.h"
#include "conn.h"

static const struct evrdma__cm_ops conn_cm_ops;
static void conn_established(struct evrdma_conn *conn);

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

/*
 * A QP whose receives come from a shared queue can meet a missing receive
 * through no fault of its peer's (another peer's messages took the
 * queue's buffers for a moment): the RNR NAK it then sends tells the peer
 * to wait the QP's min_rnr_timer, which rdma_cm leaves at 0, the IB code
 * for 655 ms. 0.64 ms instead (code 12; Soft-RoCE rounds it up to a
 * jiffy): an honest peer retries about when the buffers are posted again
 * (measured: test_chan_attack's attack_pool_burst).
 */
#define EVRDMA__SRQ_MIN_RNR_TIMER	12

/*
 * The ACK timeout (4.096 us * 2^n) when the configuration leaves it to
 * rdma_cm: what rdma_cm derived (from the path, and from the peer's
 * request or reply), kept within these bounds. 0 means "never time out",
 * and a peer asking for 31 would make a dead peer take hours to find; 12
 * is 17 ms, 20 is 4.3 s (rdma_cm gives 0.5 to 2 s on RoCE and IB paths).
 */
#define EVRDMA__ACK_TIMEOUT_MIN		12
#define EVRDMA__ACK_TIMEOUT_MAX		20

static uint8_t
conn_ack_timeout(const struct evrdma_conn *conn, uint8_t cm)
{
	if (conn->base->cfg.ack_timeout)
		return (uint8_t)conn->base->cfg.ack_timeout;
	if (cm < EVRDMA__ACK_TIMEOUT_MIN)
		return EVRDMA__ACK_TIMEOUT_MIN;
	return cm > EVRDMA__ACK_TIMEOUT_MAX ? EVRDMA__ACK_TIMEOUT_MAX : cm;
}

/*
 * The QP is ours, not rdma_cm's (ibv_create_qp(), not rdma_create_qp()):
 * rdma_cm would move it to RTR and RTS itself, inside rdma_accept() and
 * inside its reading of the reply, with the retry counts and the ACK
 * timeout that the peer's request or reply asked for (the IB CM hands
 * each side the other's choice). A peer could so pick our RNR retries (7:
 * for ever) or an ACK timeout of 0 (never time out). Each move takes
 * rdma_cm's attributes for the state (rdma_init_qp_attr(): the path, the
 * PSNs, the peer's QP number) and sets ours on top (doc/SECURITY.md
 * lists what a peer can influence): our RNR retries (conn->rnr_retry, as
 * the owner decided), our transport retries, an ACK timeout within
 * bounds, the READ and atomic depths agreed at the handshake, and our
 * own min_rnr_timer. 0, or -1 with errno.
 */
static int
conn_qp_to(struct evrdma_conn *conn, enum ibv_qp_state state)
{
	struct ibv_qp_attr a;
	int mask = 0, err;

	memset(&a, 0, sizeof(a));
	a.qp_state = state;
	if (EVRDMA_SYM(rdma_init_qp_attr)(conn->id, &a, &mask))
		return evrdma__fail(errno ? errno : EINVAL, "rdma_init_qp_attr"
		    ": %s", strerror(errno));
	switch (state) {
	case IBV_QPS_RTR:
		/* (bits 21-23: rdma_cm's own, once leaked by old kernels;
		 * librdmacm masks them too) */
		mask &= ~0xe00000;
		a.max_dest_rd_atomic = conn->rd_in;
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC;
		if (conn->srq) {
			a.min_rnr_timer = EVRDMA__SRQ_MIN_RNR_TIMER;
			mask |= IBV_QP_MIN_RNR_TIMER;
		}
		break;
	case IBV_QPS_RTS:
		a.rnr_retry = conn->rnr_retry;
		a.retry_cnt = (uint8_t)conn->base->cfg.retry_count;
		a.timeout = conn_ack_timeout(conn, a.timeout);
		a.max_rd_atomic = conn->rd_out;
		mask |= IBV_QP_RNR_RETRY | IBV_QP_RETRY_CNT | IBV_QP_TIMEOUT |
		    IBV_QP_MAX_QP_RD_ATOMIC;
		break;
	default:
		break;
	}
	err = EVRDMA_SYM(ibv_modify_qp)(conn->qp, &a, mask);
	if (err)
		return evrdma__fail(err, "ibv_modify_qp(%s): %s",
		    state == IBV_QPS_INIT ? "INIT" : state == IBV_QPS_RTR ?
		    "RTR" : "RTS", strerror(err));
	return 0;
}

/* RTR, then RTS: the peer's request (passive) or reply (active) is in.
 * INIT again first, as librdmacm does: the access flags now follow what
 * the handshake agreed (remote READs and atomics where we serve them). */
static int
conn_qp_ready(struct evrdma_conn *conn)
{
	if (conn_qp_to(conn, IBV_QPS_INIT) < 0 ||
	    conn_qp_to(conn, IBV_QPS_RTR) < 0 ||
	    conn_qp_to(conn, IBV_QPS_RTS) < 0)
		return -1;
	conn->rts = 1;
	return 0;
}

int
evrdma__qp_make(struct evrdma_dev *dev, struct evrdma__pd *pd,
    struct evrdma_srq *srq, unsigned sq, unsigned rq, unsigned inl,
    struct evrdma__qp_made *m)
{
	struct ibv_qp_init_attr attr;

	memset(m, 0, sizeof(*m));
	m->depth = sq + rq;
	m->cq = evrdma__cq_reserve(dev, m->depth);
	if (!m->cq)
		return -1;
	for (;;) {
		memset(&attr, 0, sizeof(attr));
		attr.send_cq = m->cq->cq;
		attr.recv_cq = m->cq->cq;
		if (srq)
			evrdma__srq_qp_attr(srq, &attr);
		attr.qp_type = IBV_QPT_RC;
		attr.cap.max_send_wr = sq;
		attr.cap.max_recv_wr = rq;
		attr.cap.max_send_sge = 1;
		attr.cap.max_recv_sge = 1;
		attr.cap.max_inline_data = inl;
		m->qp = EVRDMA_SYM(ibv_create_qp)(pd->pd, &attr);
		if (m->qp)
			break;
		if (!inl) {
			int err = errno ? errno : ENOMEM;

			evrdma__cq_release(m->cq, m->depth);
			m->cq = NULL;
			return evrdma__fail(err, "ibv_create_qp failed: %s",
			    strerror(err));
		}
		/* the device may not do inline at all: try without */
		inl = 0;
	}
	m->max_inline = attr.cap.max_inline_data < inl ?
	    attr.cap.max_inline_data : inl;
	return 0;
}

void
evrdma__qp_unmake(struct evrdma__qp_made *m)
{
	if (!m->qp)
		return;
	if (EVRDMA_SYM(ibv_destroy_qp)(m->qp))
		evrdma__log(EVRDMA_LOG_WARN, "ibv_destroy_qp failed");
	evrdma__cq_release(m->cq, m->depth);
	m->qp = NULL;
	m->cq = NULL;
}

/* The device, a protection domain of our own, room in a CQ, the QP (in
 * INIT: receives may be posted); the domain and the QP may come made
 * (the owner's warm set, chan_warm.c). */
static int
conn_create_qp(struct evrdma_conn *conn)
{
	struct evrdma__qp_made m = { 0 };

	conn->dev = evrdma__dev_get(conn->base, conn->id->verbs);
	if (!conn->dev)
		return -1;
	if (conn->srq) {
		/* receives come from the queue (srq.c) */
		conn->rq_depth = 0;
		conn->pd = evrdma__srq_pd_get(conn->srq, conn->dev);
	} else if (conn->owner_ops && conn->owner_ops->pd) {
		conn->pd = conn->owner_ops->pd(conn->owner, conn->dev, &m);
	} else {
		conn->pd = evrdma__pd_new(conn->dev);
	}
	if (!conn->pd) {
		evrdma__qp_unmake(&m);
		return -1;
	}
	if (m.qp && m.depth != conn->sq_depth + conn->rq_depth)
		evrdma__qp_unmake(&m);	/* (not for these depths) */
	if (!m.qp && evrdma__qp_make(conn->dev, conn->pd, conn->srq,
	    conn->sq_depth, conn->rq_depth, conn->base->cfg.inline_threshold,
	    &m) < 0)
		return -1;
	conn->cq = m.cq;
	conn->qp = m.qp;
	conn->qp->qp_context = conn;
	conn->base->stats.qps++;
	conn->ep.qp = conn->qp;
	conn->ep.cq = conn->cq->cq;
	conn->ep.qp_num = conn->qp->qp_num;
	if (conn->srq)
		evrdma__srq_attach(conn);
	conn->ep.port = conn->id->port_num;
	conn->ep.sq_depth = conn->sq_depth;
	conn->ep.rq_depth = conn->rq_depth;
	conn->ep.max_inline = m.max_inline;
	evrdma__dev_attach(conn->dev, &conn->ep);
	return conn_qp_to(conn, IBV_QPS_INIT);
}

static void
conn_param_init(struct evrdma_conn *conn, struct rdma_conn_param *p,
    const void *pdata, size_t len)
{
	unsigned rd = rd_atom(conn->dev);

	memset(p, 0, sizeof(*p));
	p->responder_resources = (uint8_t)rd;
	p->initiator_depth = (uint8_t)rd;
	/* what we ask of the peer's QP: an evrdma peer decides its own,
	 * as we do (conn_qp_to()) */
	p->retry_count = (uint8_t)conn->base->cfg.retry_count;
	p->rnr_retry_count = conn->rnr_ask;
	p->private_data = pdata;
	p->private_data_len = (uint8_t)len;
	p->qp_num = conn->qp->qp_num;
	p->srq = conn->srq != NULL;
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
	conn->cm.ops = &conn_cm_ops;
	if (EVRDMA_SYM(rdma_create_id)(base->cm_ch, &conn->id, &conn->cm,
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
		evrdma__conn_fail(conn, EVRDMA_REASON_DNS, EHOSTUNREACH);
	} else {
		conn->state = EVRDMA_CONN_IDLE;
		if (conn_start_connect(conn, sa, socklen) < 0)
			evrdma__conn_fail(conn, EVRDMA_REASON_ADDR_ERROR,
			    errno);
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
		evrdma__conn_fail(conn, EVRDMA_REASON_ROUTE_ERROR, errno);
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
		evrdma__conn_fail(conn, EVRDMA_REASON_RESOURCE, errno);
		return;
	}
	if (conn->owner_ops) {
		size_t olen = EVRDMA_PDATA_CONNECT_MAX - EVRDMA_HS_LEN;
		int code;

		if (conn->owner_ops->prepare(conn->owner, conn, NULL, 0,
		    conn->pdata, &olen, &code) < 0) {
			evrdma__conn_fail(conn, EVRDMA_REASON_RESOURCE, errno);
			return;
		}
		conn->pdata_len = (uint8_t)olen;
	}
	len = conn_pdata_out(conn, EVRDMA_HS_CONNECT, buf, conn->pdata_len);
	conn_param_init(conn, &p, len ? buf : NULL, len);
	if (EVRDMA_SYM(rdma_connect)(conn->id, &p)) {
		evrdma__conn_fail(conn, EVRDMA_REASON_CONNECT_ERROR, errno);
		return;
	}
	conn->state = EVRDMA_CONN_CONNECTING;
	evrdma__ev_timer_start(conn->timer,
	    conn->base->cfg.timeout_ms[EVRDMA_TIMEOUT_CONNECT]);
}

/*
 * Active side: the listener's reply. Our QP goes to RTS with what we
 * decide (the owner checks the reply first, and decides our RNR retries
 * from it), then rdma_establish() tells the listener (RTU): rdma_cm
 * moves no QP of ours (conn_create_qp()), so this comes instead of an
 * ESTABLISHED event.
 */
static void
conn_on_response(struct evrdma_conn *conn, struct rdma_cm_event *ev)
{
	int code = 0;

	if (conn->state != EVRDMA_CONN_CONNECTING)
		return;
	if (conn_take_pdata(conn, ev->param.conn.private_data,
	    ev->param.conn.private_data_len, EVRDMA_HS_ACCEPT, &code) < 0 ||
	    (conn->owner_ops && conn->owner_ops->reply(conn->owner, conn,
	    conn->peer_pdata, conn->peer_pdata_len) < 0)) {
		evrdma__conn_fail(conn, EVRDMA_REASON_PROTOCOL, EPROTO);
		return;
	}
	/* the reply says how many of our READs and atomics the listener
	 * serves (its responder resources, given from our side as
	 * initiator_depth, as in a request) */
	conn->rd_in = (uint8_t)rd_atom(conn->dev);	/* as we offered */
	conn->rd_out = conn->rd_in;
	if (ev->param.conn.initiator_depth < conn->rd_out)
		conn->rd_out = ev->param.conn.initiator_depth;
	if (conn_qp_ready(conn) < 0 || EVRDMA_SYM(rdma_establish)(conn->id)) {
		evrdma__conn_fail(conn, EVRDMA_REASON_CONNECT_ERROR, errno);
		return;
	}
	conn_established(conn);
}

static void
conn_on_established(struct evrdma_conn *conn)
{
	if (conn->passive && conn->state == EVRDMA_CONN_ACCEPTING)
		conn_established(conn);
}

/* Both sides: the connection is up. */
static void
conn_established(struct evrdma_conn *conn)
{
	evrdma__ev_stop(conn->timer);
	conn->state = EVRDMA_CONN_ESTABLISHED;
	if (conn->ka_idle_ms) {
		conn->ka_seen = conn->ep.activity;
		evrdma__ev_timer_start(conn->ka_ev, conn->ka_idle_ms);
	}
	if (conn->owner_ops &&
	    conn->owner_ops->established(conn->owner, conn) < 0) {
		evrdma__conn_fail(conn, EVRDMA_REASON_PROTOCOL, EPROTO);
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
	evrdma__conn_event(conn, EVRDMA_EV_CONNECTED, EVRDMA_REASON_NONE, 0);
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
	evrdma__conn_fail(conn, EVRDMA_REASON_REJECTED, ECONNREFUSED);
}

/* The CM event of the connection's id (cm.c's drain). */
static int
conn_cm_event(struct evrdma__cm_owner *o, struct rdma_cm_event *ev)
{
	struct evrdma_conn *conn = (struct evrdma_conn *)((char *)o -
	    offsetof(struct evrdma_conn, cm));
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
		evrdma__conn_fail(conn, err == ETIMEDOUT ?
		    EVRDMA_REASON_TIMEOUT : EVRDMA_REASON_ADDR_ERROR, err);
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		evrdma__conn_fail(conn, err == ETIMEDOUT ?
		    EVRDMA_REASON_TIMEOUT : EVRDMA_REASON_ROUTE_ERROR, err);
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		evrdma__conn_fail(conn, EVRDMA_REASON_CONNECT_ERROR, err);
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		evrdma__conn_fail(conn, EVRDMA_REASON_UNREACHABLE,
		    EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_REJECTED:
		conn_on_rejected(conn, ev);
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		conn_on_response(conn, ev);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		conn_on_established(conn);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		conn->disconnect_seen = 1;
		conn->await_disconnect = 0;
		if (conn->state == EVRDMA_CONN_CLOSING) {
			evrdma__conn_check_done(conn);
		} else if (ev->event == RDMA_CM_EVENT_DISCONNECTED) {
			evrdma__conn_disconnect(conn, 0);
			evrdma__conn_fail(conn, EVRDMA_REASON_DISCONNECTED,
			    ECONNRESET);
		}
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		evrdma__conn_fail(conn, EVRDMA_REASON_DEVICE_REMOVAL, ENODEV);
		break;
	default:
		break;
	}
	evrdma__ep_unref(&conn->ep);
	return 0;	/* the connection destroys its own id */
}

static const struct evrdma__cm_ops conn_cm_ops = {
	.event = conn_cm_event,
};

/* ---- passive side ---- */

int
evrdma__conn_setup_passive(struct evrdma_conn *conn, struct rdma_cm_id *id,
    const struct rdma_conn_param *param, const struct sockaddr *peer,
    int *code)
{
	conn->passive = 1;
	conn->id = id;		/* counted in stats by the listener */
	conn->cm.ops = &conn_cm_ops;
	id->context = &conn->cm;
	memcpy(&conn->peer_addr, peer, peer->sa_family == AF_INET6 ?
	    sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
	if (conn_take_pdata(conn, param->private_data,
	    param->private_data_len, EVRDMA_HS_CONNECT, code) < 0)
		return -1;
	if (conn_create_qp(conn) < 0) {
		*code = EVRDMA_REJECT_RESOURCES;
		return -1;
	}
	/* What the requester can take bounds what we offer. rdma_cm gives
	 * them from our side (the IB CM swaps the REQ's two): its
	 * initiator_depth is what the requester serves of ours (its
	 * responder resources), its responder_resources what the requester
	 * may ask of us (its initiator depth). */
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
	/* (review r46: these two were crossed, harmless while both sides
	 * offer the same; a requester that served none of our READs was
	 * answered with our full initiator depth) */
	if (p.responder_resources > conn->peer_init)
		p.responder_resources = conn->peer_init;
	if (p.initiator_depth > conn->peer_rd)
		p.initiator_depth = conn->peer_rd;
	conn->rd_out = p.initiator_depth;
	conn->rd_in = p.responder_resources;
	/* RTS before the reply goes: the requester may send as soon as it
	 * has the reply, before our ESTABLISHED is read, and a reply to
	 * that may go at once */
	if (conn_qp_ready(conn) < 0)
		return -1;
	if (EVRDMA_SYM(rdma_accept)(conn->id, &p))
		return evrdma__fail(errno, "rdma_accept: %s", strerror(errno));
	evrdma__ev_timer_start(conn->timer,
	    conn->base->cfg.timeout_ms[EVRDMA_TIMEOUT_ACCEPT]);
	return 0;
}
