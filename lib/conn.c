/*
 * evrdma: connections (one RC QP on a shared CQ) and their work requests.
 *
 * State machine, active side:
 *   IDLE -> [RESOLVING_NAME] -> RESOLVING_ADDR -> RESOLVING_ROUTE
 *        -> (QP created) CONNECTING -> ESTABLISHED
 * passive side: (listener) ACCEPTING -> ESTABLISHED.
 * Any failure -> FAILED (reported once), evrdma_conn_free() -> CLOSING ->
 * finalised (destroyed) once every request has completed and DISCONNECTED
 * has arrived, or when the teardown timeout expires.
 *
 * Destruction always happens from a deferred loop callback (fin_ev), never
 * inside the CM event dispatch (rdma_destroy_id would wait for the ack of
 * the event being handled) nor inside a user callback.
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

void
evrdma__conn_unref_last(struct evrdma_conn *conn)
{
	if (conn->finalizing)
		evrdma__ev_timer_start(conn->fin_ev, 0);
}

struct evrdma_conn *
evrdma__conn_alloc(struct evrdma_base *base, int flags)
{
	struct evrdma_conn *conn = calloc(1, sizeof(*conn));

	if (!conn) {
		evrdma__fail(ENOMEM, "out of memory");
		return NULL;
	}
	conn->kind = EVRDMA_CM_CONN;
	conn->base = base;
	conn->flags = flags;
	conn->sq_depth = base->cfg.sq_depth;
	conn->rq_depth = base->cfg.rq_depth;
	conn->rnr_retry = (uint8_t)base->cfg.rnr_retry;
	TAILQ_INIT(&conn->reqs);
	TAILQ_INIT(&conn->rreqs);
	conn->timer = evrdma__ev_timer_new(base, conn_timer_cb, conn);
	conn->fin_ev = evrdma__ev_timer_new(base, conn_fin_cb, conn);
	if (!conn->timer || !conn->fin_ev) {
		evrdma__ev_free(conn->timer);
		evrdma__ev_free(conn->fin_ev);
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
	if (!base || (flags & ~EVRDMA_CONN_RAW)) {
		evrdma__fail(EINVAL, "evrdma_conn_new: bad argument");
		return NULL;
	}
	return evrdma__conn_alloc(base, flags);
}

void
evrdma_conn_setcb(struct evrdma_conn *conn, evrdma_conn_event_cb cb,
    void *arg)
{
	conn->cb = cb;
	conn->cb_arg = arg;
}

int
evrdma_conn_set_private_data(struct evrdma_conn *conn, const void *data,
    size_t len)
{
	size_t max = (conn->flags & EVRDMA_CONN_RAW) ?
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

/* Call the user's event callback, once per outcome, never after free. */
static void
conn_event(struct evrdma_conn *conn, short what, int reason, int err)
{
	if (!conn->cb || conn->user_freed)
		return;
	evrdma__conn_ref(conn);
	errno = err;
	conn->cb(conn, what, reason, conn->cb_arg);
	evrdma__conn_unref(conn);
}

/* Move the QP to the error state: everything posted is flushed. */
static void
conn_qp_error(struct evrdma_conn *conn)
{
	struct ibv_qp_attr attr;

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

void
evrdma__conn_fail(struct evrdma_conn *conn, int reason, int err)
{
	enum evrdma_conn_state old = conn->state;
	int est = old == EVRDMA_CONN_ESTABLISHED;

	if (reason == EVRDMA_REASON_DEVICE_REMOVAL && conn->dev)
		conn->dev->dead = 1;
	if (conn->state == EVRDMA_CONN_CLOSING ||
	    conn->state == EVRDMA_CONN_FAILED) {
		conn_qp_error(conn);
		return;
	}
	evrdma__ev_stop(conn->timer);
	if (conn->dns_req) {
		evrdma__resolve_cancel(conn->dns_req);
		conn->dns_req = NULL;
	}
	if (conn->passive && conn->listener) {
		/* Never handed to the user: drop it quietly. */
		evrdma__listener_forget(conn->listener, conn);
		evrdma__conn_drop_owner(conn);
		conn->user_freed = 1;
		conn_start_close(conn);
		return;
	}
	conn->state = EVRDMA_CONN_FAILED;
	if (est || old == EVRDMA_CONN_CONNECTING)
		conn_disconnect(conn, est);
	conn_qp_error(conn);
	evrdma__log(EVRDMA_LOG_INFO, "connection %p: %s", (void *)conn,
	    evrdma_reason_str(reason));
	conn_event(conn, (reason == EVRDMA_REASON_DISCONNECTED && est) ?
	    EVRDMA_EV_EOF : EVRDMA_EV_ERROR, reason, err);
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

static int
conn_create_qp(struct evrdma_conn *conn)
{
	struct ibv_qp_init_attr attr;
	unsigned inl = conn->base->cfg.inline_threshold;
	unsigned n = conn->sq_depth + conn->rq_depth;

	conn->dev = evrdma__dev_get(conn->base, conn->id->verbs);
	if (!conn->dev)
		return -1;
	conn->cq = evrdma__cq_reserve(conn->dev, n);
	if (!conn->cq)
		return -1;
	for (;;) {
		memset(&attr, 0, sizeof(attr));
		attr.qp_context = conn;
		attr.send_cq = conn->cq->cq;
		attr.recv_cq = conn->cq->cq;
		attr.qp_type = IBV_QPT_RC;
		attr.cap.max_send_wr = conn->sq_depth;
		attr.cap.max_recv_wr = conn->rq_depth;
		attr.cap.max_send_sge = 1;
		attr.cap.max_recv_sge = 1;
		attr.cap.max_inline_data = inl;
		if (EVRDMA_SYM(rdma_create_qp)(conn->id, conn->dev->pd,
		    &attr) == 0)
			break;
		if (!inl)
			return evrdma__fail(errno ? errno : ENOMEM,
			    "rdma_create_qp failed: %s", strerror(errno));
		/* the device may not do inline at all: try without */
		inl = 0;
	}
	conn->qp = conn->id->qp;
	conn->max_inline = attr.cap.max_inline_data < inl ?
	    attr.cap.max_inline_data : inl;
	conn->base->stats.qps++;
	return 0;
}

static void
conn_param_init(struct evrdma_conn *conn, struct rdma_conn_param *p,
    const void *pdata, size_t len)
{
	unsigned rd = rd_atom(conn->dev);

	memset(p, 0, sizeof(*p));
	p->responder_resources = (uint8_t)rd;
	p->initiator_depth = (uint8_t)rd;
	p->retry_count = 7;
	p->rnr_retry_count = conn->rnr_retry;
	p->private_data = pdata;
	p->private_data_len = (uint8_t)len;
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
	evrdma__ev_timer_start(conn->timer, ms);
	return 0;
}

int
evrdma_conn_connect(struct evrdma_conn *conn, const struct sockaddr *sa,
    int socklen)
{
	if (!conn)
		return evrdma__fail(EINVAL, "no connection");
	if (conn->state != EVRDMA_CONN_IDLE || conn->passive ||
	    conn->user_freed)
		return evrdma__fail(EISCONN, "connection already started");
	return conn_start_connect(conn, sa, socklen);
}

static void
conn_resolved(int err, const struct sockaddr *sa, int socklen, void *arg)
{
	struct evrdma_conn *conn = arg;

	conn->dns_req = NULL;
	if (err) {
		evrdma__fail(EHOSTUNREACH, "host name resolution failed "
		    "(%d)", err);
		evrdma__conn_fail(conn, EVRDMA_REASON_DNS, EHOSTUNREACH);
		return;
	}
	conn->state = EVRDMA_CONN_IDLE;
	if (conn_start_connect(conn, sa, socklen) < 0)
		evrdma__conn_fail(conn, EVRDMA_REASON_ADDR_ERROR, errno);
}

int
evrdma_conn_connect_hostname(struct evrdma_conn *conn, struct evdns_base *dns,
    int family, const char *host, int port)
{
	if (!conn || !host || port < 1 || port > 65535 ||
	    (family != AF_INET && family != AF_INET6 && family != AF_UNSPEC))
		return evrdma__fail(EINVAL, "connect_hostname: bad argument");
	if (conn->state != EVRDMA_CONN_IDLE || conn->passive ||
	    conn->user_freed)
		return evrdma__fail(EISCONN, "connection already started");
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
	evrdma__ev_timer_start(conn->timer, ms);
}

static void
conn_on_route_resolved(struct evrdma_conn *conn)
{
	struct rdma_conn_param p;
	uint8_t buf[EVRDMA_PDATA_CONNECT_MAX];
	size_t len = 0;

	if (conn_create_qp(conn) < 0) {
		evrdma__conn_fail(conn, EVRDMA_REASON_RESOURCE, errno);
		return;
	}
	if (conn->pre_connect && conn->pre_connect(conn, conn->owner) < 0) {
		evrdma__conn_fail(conn, EVRDMA_REASON_RESOURCE, errno);
		return;
	}
	if (!(conn->flags & EVRDMA_CONN_RAW)) {
		struct evrdma_hs hs = { EVRDMA_HS_VERSION,
		    EVRDMA_HS_TYPE_CONNECT, 0, conn->pdata_len };
		evrdma__hs_encode(buf, &hs);
		len = EVRDMA_HS_LEN;
	}
	memcpy(buf + len, conn->pdata, conn->pdata_len);
	len += conn->pdata_len;
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
 * Keep the peer's private data, without our handshake header. rdma_cm
 * pads private data to its maximum, so our header carries the real length.
 * Returns -1 when a handshake was required and is missing or bad.
 */
static int
conn_take_pdata(struct evrdma_conn *conn, const void *pdata, size_t len,
    int type, int *code)
{
	struct evrdma_hs hs;

	if (len > sizeof(conn->peer_pdata))
		len = sizeof(conn->peer_pdata);
	if (conn->flags & EVRDMA_CONN_RAW) {
		if (pdata && len)
			memcpy(conn->peer_pdata, pdata, len);
		conn->peer_pdata_len = pdata ? (uint8_t)len : 0;
		return 0;
	}
	if (!pdata || evrdma__hs_decode(pdata, len, &hs) < 0 ||
	    hs.type != type) {
		*code = EVRDMA_REJECT_PROTOCOL;
		return -1;
	}
	if (hs.version != EVRDMA_HS_VERSION) {
		*code = EVRDMA_REJECT_VERSION;
		return -1;
	}
	if (hs.code > len - EVRDMA_HS_LEN) {
		*code = EVRDMA_REJECT_PROTOCOL;
		return -1;
	}
	memcpy(conn->peer_pdata, (const uint8_t *)pdata + EVRDMA_HS_LEN,
	    hs.code);
	conn->peer_pdata_len = hs.code;
	return 0;
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
	    EVRDMA_HS_TYPE_ACCEPT, &code) < 0) {
		evrdma__conn_fail(conn, EVRDMA_REASON_PROTOCOL, EPROTO);
		return;
	}
	evrdma__ev_stop(conn->timer);
	conn->state = EVRDMA_CONN_ESTABLISHED;
	if (conn->passive) {
		struct evrdma_listener *lst = conn->listener;
		if (lst)
			evrdma__listener_established(lst, conn);
		else	/* its listener was freed meanwhile */
			evrdma_conn_free(conn);
		return;
	}
	conn_event(conn, EVRDMA_EV_CONNECTED, EVRDMA_REASON_NONE, 0);
}

static void
conn_on_rejected(struct evrdma_conn *conn, struct rdma_cm_event *ev)
{
	struct evrdma_hs hs;

	conn->rejected = 1;
	conn->reject_status = ev->status;
	if (ev->param.conn.private_data &&
	    evrdma__hs_decode(ev->param.conn.private_data,
	    ev->param.conn.private_data_len, &hs) == 0 &&
	    hs.type == EVRDMA_HS_TYPE_REJECT)
		conn->reject_code = hs.code;
	evrdma__conn_fail(conn, EVRDMA_REASON_REJECTED, ECONNREFUSED);
}

void
evrdma__conn_cm_event(struct evrdma_conn *conn, struct rdma_cm_event *ev)
{
	int err = ev->status < 0 ? -ev->status : EIO;

	evrdma__conn_ref(conn);
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (conn->state == EVRDMA_CONN_RESOLVING_ADDR)
			conn_on_addr_resolved(conn);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (conn->state == EVRDMA_CONN_RESOLVING_ROUTE)
			conn_on_route_resolved(conn);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
		evrdma__conn_fail(conn, EVRDMA_REASON_ADDR_ERROR, err);
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		evrdma__conn_fail(conn, EVRDMA_REASON_ROUTE_ERROR, err);
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
	evrdma__conn_unref(conn);
}

/* ---- passive side ---- */

int
evrdma__conn_setup_passive(struct evrdma_conn *conn, struct rdma_cm_id *id,
    struct rdma_cm_event *ev, int *code)
{
	const struct sockaddr *peer = rdma_get_peer_addr(id);

	conn->passive = 1;
	conn->id = id;		/* counted in stats by the listener */
	id->context = conn;
	memcpy(&conn->peer_addr, peer, peer->sa_family == AF_INET6 ?
	    sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
	if (conn_take_pdata(conn, ev->param.conn.private_data,
	    ev->param.conn.private_data_len, EVRDMA_HS_TYPE_CONNECT,
	    code) < 0)
		return -1;
	if (conn_create_qp(conn) < 0) {
		*code = EVRDMA_REJECT_RESOURCES;
		return -1;
	}
	/* what the requester can take bounds what we offer */
	conn->peer_rd = ev->param.conn.initiator_depth;
	conn->peer_init = ev->param.conn.responder_resources;
	conn->state = EVRDMA_CONN_ACCEPTING;
	return 0;
}

int
evrdma__conn_accept(struct evrdma_conn *conn)
{
	struct rdma_conn_param p;
	uint8_t buf[EVRDMA_PDATA_ACCEPT_MAX];
	size_t len = 0;

	if (!(conn->flags & EVRDMA_CONN_RAW)) {
		struct evrdma_hs hs = { EVRDMA_HS_VERSION,
		    EVRDMA_HS_TYPE_ACCEPT, 0, conn->accept_pdata_len };
		evrdma__hs_encode(buf, &hs);
		len = EVRDMA_HS_LEN;
		memcpy(buf + len, conn->accept_pdata, conn->accept_pdata_len);
		len += conn->accept_pdata_len;
	}
	conn_param_init(conn, &p, len ? buf : NULL, len);
	if (p.responder_resources > conn->peer_rd)
		p.responder_resources = conn->peer_rd;
	if (p.initiator_depth > conn->peer_init)
		p.initiator_depth = conn->peer_init;
	if (EVRDMA_SYM(rdma_accept)(conn->id, &p))
		return evrdma__fail(errno, "rdma_accept: %s", strerror(errno));
	evrdma__ev_timer_start(conn->timer,
	    conn->base->cfg.timeout_ms[EVRDMA_TIMEOUT_CONNECT]);
	return 0;
}

/*
 * Undo evrdma__conn_setup_passive() for a request being rejected, inside
 * the CM dispatch: everything but the id, which the dispatcher destroys
 * after the ack.
 */
void
evrdma__conn_drop_owner(struct evrdma_conn *conn)
{
	void (*drop)(void *) = conn->drop;

	conn->drop = NULL;
	conn->pre_connect = NULL;
	if (drop)
		drop(conn->owner);
}

void
evrdma__conn_abort_passive(struct evrdma_conn *conn)
{
	evrdma__conn_drop_owner(conn);
	if (conn->id) {
		conn->id->context = NULL;
		if (conn->qp) {
			EVRDMA_SYM(rdma_destroy_qp)(conn->id);
			conn->qp = NULL;
			conn->base->stats.qps--;
		}
		conn->id = NULL;	/* the dispatcher destroys it */
	}
	conn->user_freed = 1;
	conn->state = EVRDMA_CONN_CLOSING;
	conn->finalizing = 1;
	evrdma__ev_timer_start(conn->fin_ev, 0);
}

/* ---- requests ---- */

static void
conn_deliver(struct evrdma_conn *conn, struct evrdma_req *req,
    const struct evrdma_wc *wc)
{
	evrdma_req_cb cb = req->cb;
	void *arg = req->arg;

	if (req->is_recv) {
		TAILQ_REMOVE(&conn->rreqs, req, link);
		conn->rq_out--;
	} else {
		TAILQ_REMOVE(&conn->reqs, req, link);
		conn->sq_out--;
	}
	if (req->mr)
		evrdma__mr_release(req->mr);
	evrdma__req_free(conn->base, req);
	evrdma__conn_ref(conn);
	if (cb)
		cb(conn, wc, arg);
	evrdma__conn_unref(conn);
}

static int
wc_errno(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_WR_FLUSH_ERR:
		return ECANCELED;
	case IBV_WC_REM_ACCESS_ERR:
	case IBV_WC_REM_INV_REQ_ERR:
	case IBV_WC_REM_OP_ERR:
	case IBV_WC_REM_ABORT_ERR:
	case IBV_WC_REM_INV_RD_REQ_ERR:
		return EREMOTEIO;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return ETIMEDOUT;
	default:
		return EIO;
	}
}

/*
 * Sends complete in order: the sends posted unsignaled before @p upto
 * finished successfully (a failure would have produced its own completion).
 */
static void
conn_complete_unsignaled(struct evrdma_conn *conn, struct evrdma_req *upto)
{
	struct evrdma_req *r, *next;
	struct evrdma_wc w;

	for (r = TAILQ_FIRST(&conn->reqs); r && r != upto; r = next) {
		next = TAILQ_NEXT(r, link);
		if (!r->unsignaled)
			continue;
		memset(&w, 0, sizeof(w));
		w.wc_status = IBV_WC_SUCCESS;
		w.opcode = r->opcode;
		conn_deliver(conn, r, &w);
	}
}

/*
 * Post the chain with one call; the last request is signaled so that every
 * request of the chain gets its completion. A request the provider refused
 * completes at once with the error, exactly once like any other.
 */
void
evrdma__conn_uncork(struct evrdma_conn *conn)
{
	struct ibv_send_wr *head = conn->cork_head, *bad = NULL, *w;
	int rc;

	if (--conn->corked || !head)
		return;
	conn->cork_head = conn->cork_tail = NULL;
	conn->cork_n = 0;
	w = head;
	while (w->next)
		w = w->next;
	w->send_flags |= IBV_SEND_SIGNALED;
	evrdma__req_lookup(conn->base, w->wr_id)->unsignaled = 0;
	rc = ibv_post_send(conn->qp, head, &bad);
	if (!rc)
		return;
	evrdma__log(EVRDMA_LOG_ERROR, "ibv_post_send (batch): %s",
	    strerror(rc));
	evrdma__conn_ref(conn);
	for (w = bad; w; ) {
		struct evrdma_req *r = evrdma__req_lookup(conn->base, w->wr_id);
		struct evrdma_wc wc;

		w = w->next;
		memset(&wc, 0, sizeof(wc));
		wc.status = EIO;
		wc.wc_status = -1;
		wc.opcode = r->opcode;
		conn_deliver(conn, r, &wc);
	}
	if (conn->state == EVRDMA_CONN_ESTABLISHED)
		evrdma__conn_fail(conn, EVRDMA_REASON_QP_FATAL, rc);
	evrdma__conn_unref(conn);
}

void
evrdma__conn_complete(struct evrdma_req *req, const struct ibv_wc *wc)
{
	struct evrdma_conn *conn = req->conn;
	struct evrdma_wc w;

	memset(&w, 0, sizeof(w));
	w.status = wc_errno(wc->status);
	w.wc_status = wc->status;
	w.opcode = req->opcode;
	/* With an error status only wr_id, status, qp_num and vendor_err
	 * are valid: opcode and byte_len must not be read. */
	if (wc->status == IBV_WC_SUCCESS) {
		if (req->is_recv) {
			w.opcode = wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM ?
			    EVRDMA_OP_RECV_WRITE_IMM : EVRDMA_OP_RECV;
			w.byte_len = wc->byte_len;
		}
		if (wc->wc_flags & IBV_WC_WITH_IMM) {
			w.has_imm = 1;
			w.imm_data = ntohl(wc->imm_data);
		}
	} else if (wc->status != IBV_WC_WR_FLUSH_ERR) {
		evrdma__log(EVRDMA_LOG_WARN, "work request failed: %s "
		    "(vendor error 0x%x)",
		    EVRDMA_SYM(ibv_wc_status_str)(wc->status), wc->vendor_err);
	}
	evrdma__conn_ref(conn);
	if (!req->is_recv)
		conn_complete_unsignaled(conn, req);
	conn_deliver(conn, req, &w);
	/* A failed request leaves the QP in the error state: the
	 * connection is broken, report it once. */
	if (w.status && w.status != ECANCELED &&
	    conn->state == EVRDMA_CONN_ESTABLISHED)
		evrdma__conn_fail(conn, EVRDMA_REASON_QP_FATAL, w.status);
	if (conn->state == EVRDMA_CONN_CLOSING)
		conn_check_done(conn);
	evrdma__conn_unref(conn);
}

/* Complete every outstanding request with ECANCELED (no WC behind it). */
static void
conn_cancel_all(struct evrdma_conn *conn)
{
	struct evrdma_req *req;
	struct evrdma_wc w;

	while ((req = TAILQ_FIRST(&conn->rreqs)) ||
	    (req = TAILQ_FIRST(&conn->reqs))) {
		memset(&w, 0, sizeof(w));
		w.status = ECANCELED;
		w.wc_status = -1;
		w.opcode = req->opcode;
		conn_deliver(conn, req, &w);
	}
}

static int
conn_check_post(struct evrdma_conn *conn, int recv)
{
	if (!conn)
		return evrdma__fail(EINVAL, "no connection");
	if (conn->user_freed || conn->state == EVRDMA_CONN_CLOSING ||
	    conn->state == EVRDMA_CONN_FAILED || conn->qp_in_error)
		return evrdma__fail(EPIPE, "connection is closed or failed");
	if (conn->state == EVRDMA_CONN_ESTABLISHED)
		return 0;
	if (recv && conn->qp)
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
	if (mr->base != conn->base || mr->dev != conn->dev)
		return evrdma__fail(EXDEV, "memory region of another device");
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

/* A request of @p conn for a post of @p opcode; NULL when out of memory. */
static struct evrdma_req *
conn_req_new(struct evrdma_conn *conn, int opcode, evrdma_req_cb cb,
    void *arg)
{
	struct evrdma_req *req = evrdma__req_new(conn->base);

	if (!req)
		return NULL;
	req->conn = conn;
	req->cb = cb;
	req->arg = arg;
	req->opcode = (uint8_t)opcode;
	req->is_recv = opcode == EVRDMA_OP_RECV;
	return req;
}

/* Take a request, post it, account for it; -1 with errno on failure. */
static int
conn_post(struct evrdma_conn *conn, struct evrdma_mr *mr, size_t off,
    size_t len, struct ibv_send_wr *wr, int opcode, evrdma_req_cb cb,
    void *arg)
{
	struct evrdma_req *req;
	struct ibv_sge sge;
	int rc, recv = opcode == EVRDMA_OP_RECV;

	if (recv ? conn->rq_out >= conn->rq_depth :
	    conn->sq_out >= conn->sq_depth)
		return evrdma__fail(EAGAIN, "%s queue full",
		    recv ? "receive" : "send");
	req = conn_req_new(conn, opcode, cb, arg);
	if (!req)
		return evrdma__fail(ENOMEM, "out of memory");
	if (mr && len) {
		sge.addr = (uintptr_t)mr->addr + off;
		sge.length = (uint32_t)len;
		sge.lkey = mr->mr->lkey;
	}
	if (recv) {
		struct ibv_recv_wr rwr, *bad;

		memset(&rwr, 0, sizeof(rwr));
		rwr.wr_id = evrdma__req_wr_id(req);
		rwr.sg_list = &sge;
		rwr.num_sge = (mr && len) ? 1 : 0;
		rc = ibv_post_recv(conn->qp, &rwr, &bad);
	} else {
		struct ibv_send_wr *bad;

		wr->wr_id = evrdma__req_wr_id(req);
		wr->sg_list = &sge;
		wr->num_sge = (mr && len) ? 1 : 0;
		if ((wr->opcode == IBV_WR_SEND ||
		    wr->opcode == IBV_WR_SEND_WITH_IMM ||
		    wr->opcode == IBV_WR_RDMA_WRITE ||
		    wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) &&
		    len && len <= conn->max_inline)
			wr->send_flags |= IBV_SEND_INLINE;
		if (conn->corked) {
			/* the request keeps its own copy until uncork */
			req->sge = sge;
			req->wr = *wr;
			req->wr.sg_list = &req->sge;
			req->wr.next = NULL;
			if (++conn->cork_n % 16 == 0)
				req->wr.send_flags |= IBV_SEND_SIGNALED;
			else
				req->unsignaled = 1;
			if (conn->cork_tail)
				conn->cork_tail->next = &req->wr;
			else
				conn->cork_head = &req->wr;
			conn->cork_tail = &req->wr;
			rc = 0;
		} else {
			wr->send_flags |= IBV_SEND_SIGNALED;
			rc = ibv_post_send(conn->qp, wr, &bad);
		}
	}
	if (rc) {
		evrdma__req_free(conn->base, req);
		/* libibverbs returns the errno value instead of setting it */
		return evrdma__fail(rc, "ibv_post_%s: %s",
		    recv ? "recv" : "send", strerror(rc));
	}
	if (mr) {
		req->mr = mr;
		evrdma__mr_hold(mr);
	}
	if (recv) {
		TAILQ_INSERT_TAIL(&conn->rreqs, req, link);
		conn->rq_out++;
	} else {
		TAILQ_INSERT_TAIL(&conn->reqs, req, link);
		conn->sq_out++;
	}
	return 0;
}

int
evrdma_conn_post_recv(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, size_t len, evrdma_req_cb cb, void *arg)
{
	if (conn_check_post(conn, 1) < 0 ||
	    check_local(conn, mr, off, len, 1) < 0)
		return -1;
	return conn_post(conn, mr, off, len, NULL, EVRDMA_OP_RECV, cb, arg);
}

int
evrdma__conn_post_recvs(struct evrdma_conn *conn, unsigned n,
    evrdma_req_cb cb, void *arg)
{
	struct ibv_recv_wr wrs[32], *bad = NULL;
	struct evrdma_req *reqs[32];
	unsigned i, k, done = 0;
	int rc;

	if (conn_check_post(conn, 1) < 0)
		return -1;
	while (done < n) {
		k = n - done < 32 ? n - done : 32;
		if (k > conn->rq_depth - conn->rq_out)
			k = conn->rq_depth - conn->rq_out;
		for (i = 0; i < k; i++) {
			struct evrdma_req *req = conn_req_new(conn,
			    EVRDMA_OP_RECV, cb, arg);

			if (!req)
				break;
			reqs[i] = req;
			memset(&wrs[i], 0, sizeof(wrs[i]));
			wrs[i].wr_id = evrdma__req_wr_id(req);
			wrs[i].next = &wrs[i + 1];
		}
		if (i == 0)
			break;
		k = i;
		wrs[k - 1].next = NULL;
		rc = ibv_post_recv(conn->qp, wrs, &bad);
		/* the provider posted the requests before bad */
		for (i = 0; i < k; i++) {
			if (rc && (!bad || &wrs[i] >= bad)) {
				evrdma__req_free(conn->base, reqs[i]);
				continue;
			}
			TAILQ_INSERT_TAIL(&conn->rreqs, reqs[i], link);
			conn->rq_out++;
			done++;
		}
		if (rc) {
			if (!done)
				return evrdma__fail(rc, "ibv_post_recv: %s",
				    strerror(rc));
			break;
		}
		if (k < 32 && done < n)
			break;	/* queue full or out of memory */
	}
	if (!done)
		return evrdma__fail(conn->rq_out >= conn->rq_depth ? EAGAIN :
		    ENOMEM, "cannot post receives");
	return (int)done;
}

static int
post_send_common(struct evrdma_conn *conn, struct evrdma_mr *mr, size_t off,
    size_t len, int with_imm, uint32_t imm, evrdma_req_cb cb, void *arg)
{
	struct ibv_send_wr wr;

	if (conn_check_post(conn, 0) < 0 ||
	    check_local(conn, mr, off, len, 0) < 0)
		return -1;
	memset(&wr, 0, sizeof(wr));
	wr.opcode = with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
	wr.imm_data = htonl(imm);
	return conn_post(conn, mr, off, len, &wr, EVRDMA_OP_SEND, cb, arg);
}

int
evrdma_conn_post_send(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, size_t len, evrdma_req_cb cb, void *arg)
{
	return post_send_common(conn, mr, off, len, 0, 0, cb, arg);
}

int
evrdma_conn_post_send_imm(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, size_t len, uint32_t imm, evrdma_req_cb cb, void *arg)
{
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
	return conn_post(conn, mr, off, len, &wr,
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
	return conn_post(conn, mr, off, 8, &wr,
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

static void
conn_timer_cb(void *arg)
{
	struct evrdma_conn *conn = arg;

	if (conn->state == EVRDMA_CONN_CLOSING) {
		/* DISCONNECTED or the flush never came: give up waiting. */
		evrdma__log(EVRDMA_LOG_INFO, "connection %p: teardown "
		    "timeout, %u requests cancelled", (void *)conn,
		    conn->sq_out + conn->rq_out);
		evrdma__conn_ref(conn);
		conn_cancel_all(conn);
		conn->finalizing = 1;
		evrdma__conn_unref(conn);
		evrdma__ev_timer_start(conn->fin_ev, 0);
		return;
	}
	evrdma__fail(ETIMEDOUT, "connection step timed out");
	evrdma__conn_fail(conn, EVRDMA_REASON_TIMEOUT, ETIMEDOUT);
}

static void
conn_check_done(struct evrdma_conn *conn)
{
	if (conn->finalizing || conn->state != EVRDMA_CONN_CLOSING)
		return;
	if (!TAILQ_EMPTY(&conn->reqs) || !TAILQ_EMPTY(&conn->rreqs) ||
	    conn->await_disconnect)
		return;
	conn->finalizing = 1;
	evrdma__ev_timer_start(conn->fin_ev, 0);
}

static void
conn_start_close(struct evrdma_conn *conn)
{
	enum evrdma_conn_state old = conn->state;

	if (old == EVRDMA_CONN_CLOSING)
		return;
	conn->state = EVRDMA_CONN_CLOSING;
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

void
evrdma_conn_free(struct evrdma_conn *conn)
{
	if (!conn || conn->user_freed)
		return;
	conn->user_freed = 1;
	conn->cb = NULL;
	if (conn->listener)
		evrdma__listener_forget(conn->listener, conn);
	conn_start_close(conn);
}

/* Destroy everything now. Requests left complete with ECANCELED. */
static void
conn_destroy(struct evrdma_conn *conn)
{
	struct evrdma_base *base = conn->base;

	conn_cancel_all(conn);
	if (conn->dns_req)
		evrdma__resolve_cancel(conn->dns_req);
	if (conn->listener)
		evrdma__listener_forget(conn->listener, conn);
	if (conn->qp) {
		EVRDMA_SYM(rdma_destroy_qp)(conn->id);
		base->stats.qps--;
	}
	if (conn->cq)
		evrdma__cq_release(conn->cq, conn->sq_depth + conn->rq_depth);
	if (conn->id) {
		conn->id->context = NULL;
		EVRDMA_SYM(rdma_destroy_id)(conn->id);
		base->stats.cm_ids--;
	}
	if (conn->dev)
		evrdma__dev_put(conn->dev);
	evrdma__ev_free(conn->timer);
	evrdma__ev_free(conn->fin_ev);
	TAILQ_REMOVE(&base->conns, conn, link);
	base->stats.conns--;
	free(conn);
}

static void
conn_fin_cb(void *arg)
{
	struct evrdma_conn *conn = arg;

	if (conn->refcnt)
		return;	/* evrdma__conn_unref() re-arms us */
	conn_destroy(conn);
}

void
evrdma__conn_destroy_now(struct evrdma_conn *conn)
{
	conn->user_freed = 1;
	conn->cb = NULL;
	conn->state = EVRDMA_CONN_CLOSING;
	conn_destroy(conn);
}

/* ---- accessors ---- */

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
		*len = conn->peer_pdata_len;
	return conn->peer_pdata_len ? conn->peer_pdata : NULL;
}

const struct sockaddr *
evrdma_conn_get_peer_addr(struct evrdma_conn *conn)
{
	return conn->id ? rdma_get_peer_addr(conn->id) : NULL;
}

const struct sockaddr *
evrdma_conn_get_local_addr(struct evrdma_conn *conn)
{
	return conn->id && conn->dev ? rdma_get_local_addr(conn->id) : NULL;
}

const char *
evrdma_conn_get_device_name(struct evrdma_conn *conn)
{
	if (!conn->id || !conn->id->verbs)
		return NULL;
	return EVRDMA_SYM(ibv_get_device_name)(conn->id->verbs->device);
}

struct evrdma_base *
evrdma_conn_get_base(struct evrdma_conn *conn)
{
	return conn->base;
}
