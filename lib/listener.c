/*
 * evrdma: listeners (the passive side of rdma_cm).
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "evrdma-internal.h"

struct evrdma_listener *
evrdma_listener_new(struct evrdma_base *base, const struct sockaddr *sa,
    int socklen, int backlog, int flags, evrdma_accept_cb cb, void *arg)
{
	struct evrdma_listener *lst;
	struct sockaddr_storage ss;

	if (!base || !sa || !cb || backlog <= 0 ||
	    (flags & ~EVRDMA_LISTEN_RAW)) {
		evrdma__fail(EINVAL, "evrdma_listener_new: bad argument");
		return NULL;
	}
	if (!((sa->sa_family == AF_INET &&
	    socklen >= (int)sizeof(struct sockaddr_in)) ||
	    (sa->sa_family == AF_INET6 &&
	    socklen >= (int)sizeof(struct sockaddr_in6)))) {
		evrdma__fail(sa->sa_family == AF_INET ||
		    sa->sa_family == AF_INET6 ? EINVAL : EAFNOSUPPORT,
		    "evrdma_listener_new: not an IPv4/IPv6 address");
		return NULL;
	}
	lst = calloc(1, sizeof(*lst));
	if (!lst) {
		evrdma__fail(ENOMEM, "out of memory");
		return NULL;
	}
	lst->kind = EVRDMA_CM_LISTENER;
	lst->base = base;
	lst->flags = flags;
	lst->accept_cb = cb;
	lst->accept_arg = arg;
	LIST_INIT(&lst->pending);
	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, sa, sa->sa_family == AF_INET ?
	    sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	if (EVRDMA_SYM(rdma_create_id)(base->cm_ch, &lst->id, lst,
	    RDMA_PS_TCP)) {
		evrdma__fail(errno, "rdma_create_id: %s", strerror(errno));
		free(lst);
		return NULL;
	}
	if (EVRDMA_SYM(rdma_bind_addr)(lst->id, (struct sockaddr *)&ss) ||
	    EVRDMA_SYM(rdma_listen)(lst->id, backlog)) {
		int err = errno;
		EVRDMA_SYM(rdma_destroy_id)(lst->id);
		free(lst);
		evrdma__fail(err, "cannot listen: %s", strerror(err));
		return NULL;
	}
	base->stats.cm_ids++;
	base->stats.listeners++;
	LIST_INSERT_HEAD(&base->listeners, lst, link);
	return lst;
}

void
evrdma_listener_set_prepare_cb(struct evrdma_listener *lst,
    evrdma_prepare_cb cb, void *arg)
{
	lst->prepare_cb = cb;
	lst->prepare_arg = arg;
}

int
evrdma_listener_get_port(struct evrdma_listener *lst)
{
	return ntohs(EVRDMA_SYM(rdma_get_src_port)(lst->id));
}

static void
reject(struct evrdma_listener *lst, struct rdma_cm_id *id, int code)
{
	uint8_t buf[EVRDMA_HS_LEN];
	struct evrdma_hs hs = { EVRDMA_HS_VERSION, EVRDMA_HS_TYPE_REJECT, 0,
	    (uint8_t)code };

	evrdma__log(EVRDMA_LOG_INFO, "rejecting a connect request (code %d)",
	    code);
	if (lst->flags & EVRDMA_LISTEN_RAW) {
		EVRDMA_SYM(rdma_reject)(id, NULL, 0);
		return;
	}
	evrdma__hs_encode(buf, &hs);
	EVRDMA_SYM(rdma_reject)(id, buf, sizeof(buf));
}

/*
 * A connect request: build the connection (QP on the shared CQ), let the
 * application prepare it, accept. On any failure the peer gets a reject
 * with a reason and the new id is destroyed by the dispatcher after the ack.
 */
static int
on_connect_request(struct evrdma_listener *lst, struct rdma_cm_event *ev)
{
	struct evrdma_conn *conn;
	int code = EVRDMA_REJECT_RESOURCES;

	lst->base->stats.cm_ids++;	/* the new id */
	if (lst->user_freed) {
		reject(lst, ev->id, code);
		return 1;
	}
	conn = evrdma__conn_alloc(lst->base,
	    (lst->flags & EVRDMA_LISTEN_RAW) ? EVRDMA_CONN_RAW : 0);
	if (!conn) {
		ev->id->context = NULL;
		reject(lst, ev->id, code);
		return 1;
	}
	if (evrdma__conn_setup_passive(conn, ev->id, ev, &code) < 0)
		goto refuse;
	if (lst->ch_accept && evrdma__channel_passive(lst, conn, &code) < 0)
		goto refuse;
	if (lst->prepare_cb) {
		size_t len;
		const void *pd = evrdma_conn_get_peer_private_data(conn, &len);
		int rc;

		lst->refcnt++;
		rc = lst->prepare_cb(lst, conn, pd, len, lst->prepare_arg);
		lst->refcnt--;
		if (rc || lst->user_freed) {
			code = EVRDMA_REJECT_APP;
			goto refuse;
		}
	}
	if (evrdma__conn_accept(conn) < 0) {
		code = EVRDMA_REJECT_RESOURCES;
		goto refuse;
	}
	conn->listener = lst;
	LIST_INSERT_HEAD(&lst->pending, conn, lst_link);
	return 0;
refuse:
	reject(lst, ev->id, code);
	evrdma__conn_abort_passive(conn);
	return 1;
}

int
evrdma__listener_cm_event(struct evrdma_listener *lst,
    struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return on_connect_request(lst, ev);
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		evrdma__log(EVRDMA_LOG_ERROR, "listener %p: its device was "
		    "removed; free it and listen again", (void *)lst);
		return 0;
	default:
		return 0;
	}
}

void
evrdma__listener_forget(struct evrdma_listener *lst, struct evrdma_conn *conn)
{
	LIST_REMOVE(conn, lst_link);
	conn->listener = NULL;
}

void
evrdma__listener_established(struct evrdma_listener *lst,
    struct evrdma_conn *conn)
{
	const struct sockaddr *peer = (const struct sockaddr *)&conn->peer_addr;

	int len = peer->sa_family == AF_INET6 ?
	    (int)sizeof(struct sockaddr_in6) : (int)sizeof(struct sockaddr_in);

	evrdma__listener_forget(lst, conn);
	lst->refcnt++;
	if (lst->ch_accept)
		evrdma__channel_accepted(lst, conn, peer, len);
	else
		lst->accept_cb(lst, conn, peer, len, lst->accept_arg);
	if (--lst->refcnt == 0 && lst->user_freed)
		evrdma__listener_destroy_now(lst);
}

void
evrdma__listener_destroy_now(struct evrdma_listener *lst)
{
	struct evrdma_conn *conn;

	while ((conn = LIST_FIRST(&lst->pending))) {
		evrdma__conn_drop_owner(conn);
		evrdma_conn_free(conn);	/* unlinks it */
	}
	EVRDMA_SYM(rdma_destroy_id)(lst->id);
	lst->base->stats.cm_ids--;
	lst->base->stats.listeners--;
	LIST_REMOVE(lst, link);
	free(lst);
}

void
evrdma_listener_free(struct evrdma_listener *lst)
{
	if (!lst || lst->user_freed)
		return;
	lst->user_freed = 1;
	/* Inside a prepare callback the listener's CONNECT_REQUEST is not
	 * yet acked, so its id cannot be destroyed now; the dispatcher's
	 * caller finishes the job. */
	if (lst->refcnt == 0)
		evrdma__listener_destroy_now(lst);
}
