/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: a channel's message on a prepared send, inline. Every message
 * and every reply takes this path, and a call costs as much as the work
 * it does (about 20 instructions each way under callgrind): the common
 * case is here, inlined into its caller; everything else (no cork, no
 * prepared request free, a full queue, a forked child) takes req.c's
 * general path, which also owns the requests themselves.
 */
#ifndef EVRDMA_EP_SEND_H_INCLUDED_
#define EVRDMA_EP_SEND_H_INCLUDED_

#include <arpa/inet.h>

#include "conn.h"
#include "evrdma-internal.h"
#include "rdma-sym.h"

/* Chain @p req's work request to the cork; every 16th send is signaled
 * (see evrdma__ep_cork), and the last at uncork unless it may wait. */
static inline __attribute__((always_inline)) void
evrdma__ep_cork_link(struct evrdma__ep *ep, struct evrdma_req *req)
{
	if (!req->defer)
		ep->run_firm = 1;
	if (++ep->unsig_run >= 16) {
		req->wr.send_flags |= IBV_SEND_SIGNALED;
		ep->unsig_run = 0;
		ep->run_firm = 0;
	} else {
		req->unsignaled = 1;
	}
	if (ep->cork_tail)
		ep->cork_tail->next = &req->wr;
	else
		ep->cork_head = &req->wr;
	ep->cork_tail = &req->wr;
}

/* The next prepared send, or NULL when there is none free. Sends complete
 * in the order posted and at most sq_depth are out, so the one taken
 * sq_depth sends ago is done by now; the flag makes sure of it. */
static inline __attribute__((always_inline)) struct evrdma_req *
evrdma__ep_sring_take(struct evrdma__ep *ep, evrdma_req_cb cb, void *arg)
{
	struct evrdma_req *req = ep->sring[ep->sring_next];

	if (req->posted)
		return NULL;
	if (++ep->sring_next == ep->sring_n)
		ep->sring_next = 0;
	ep->tab->live++;
	req->posted = 1;
	req->mr = NULL;		/* the caller holds this message's */
	req->unsignaled = 0;
	req->defer = 0;
	req->cb = cb;
	req->arg = arg;
	return req;
}

/* The general case of evrdma__ep_send_imm() (req.c). */
int evrdma__ep_send_imm_any(struct evrdma__ep *ep, struct evrdma_mr *mr,
    size_t off, size_t len, uint32_t imm, evrdma_req_cb cb, void *arg);

/*
 * A SEND WITH IMMEDIATE of the owner's buffer (the channel's messages), as
 * evrdma__ep_post(). Corked, with data and the next prepared request free
 * (it is, in steady state: sends complete in order and at most sq_depth
 * are out; the flag makes sure), only the address, length, immediate and
 * flags are written, and the request is chained to the cork.
 */
static inline __attribute__((always_inline)) int
evrdma__ep_send_imm(struct evrdma__ep *ep, struct evrdma_mr *mr, size_t off,
    size_t len, uint32_t imm, evrdma_req_cb cb, void *arg)
{
	struct evrdma_req *req;

	if (!ep->corked || !ep->sring || !mr || !len || evrdma__forked ||
	    ep->sq_out >= ep->sq_depth ||
	    !(req = evrdma__ep_sring_take(ep, cb, arg)))
		return evrdma__ep_send_imm_any(ep, mr, off, len, imm, cb, arg);
	req->mr = mr;
	evrdma__mr_hold(mr);
	/* (inline data is copied by the provider from the process's
	 * address; everything else goes by the region's address as the
	 * device knows it: zero-based regions differ) */
	if (len <= ep->max_inline) {
		req->sge.addr = (uintptr_t)mr->addr + off;
		req->wr.send_flags = IBV_SEND_INLINE;
	} else {
		req->sge.addr = evrdma__mr_sge_addr(mr, off);
		req->wr.send_flags = 0;
	}
	req->sge.length = (uint32_t)len;
	req->sge.lkey = mr->mr->lkey;
	req->wr.next = NULL;
	req->wr.num_sge = 1;
	req->wr.imm_data = htonl(imm);
	/* (the owner's message: only its buffer waits for the completion,
	 * evrdma__ep_sring_init) */
	req->defer = 1;
	evrdma__ep_cork_link(ep, req);
	TAILQ_INSERT_TAIL(&ep->sends, req, link);
	ep->sq_out++;
	return 0;
}

/*
 * May @p conn post a send now? What conn_post.c's checks of a send ask,
 * in one inline test (they say why not: evrdma__conn_post_refused()).
 */
static inline int
evrdma__conn_postable(const struct evrdma_conn *conn)
{
	return conn && conn->base && !conn->user_freed &&
	    !evrdma__conn_closing(conn) && !conn->qp_in_error && conn->rts;
}

/* -1 with errno: why @p conn may not post (conn_post.c). */
int evrdma__conn_post_refused(struct evrdma_conn *conn);

/*
 * Post a SEND (with immediate) of the owner's own buffer (a channel's
 * message or control message), its range unchecked. Inline into the
 * owner's send: the call cost 25 instructions per 64 B round trip, most
 * of them its entry and exit (callgrind).
 */
static inline __attribute__((always_inline)) int
evrdma__conn_post_send_imm(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, size_t len, uint32_t imm, evrdma_req_cb cb, void *arg)
{
	if (!evrdma__conn_postable(conn))
		return evrdma__conn_post_refused(conn);
	return evrdma__ep_send_imm(&conn->ep, mr, off, len, imm, cb, arg);
}

#endif /* EVRDMA_EP_SEND_H_INCLUDED_ */
