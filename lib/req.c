/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: work requests. The table that maps a wr_id to its request, the
 * request queues of each QP (struct evrdma__ep), posting, and completion:
 * turning an ibv_wc (or a cancellation) into exactly one callback.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "evrdma-internal.h"

/* ---- the table ---- */

static int
tab_grow(struct evrdma__reqtab *tab)
{
	uint32_t n = tab->nslots ? tab->nslots * 2 : 256;
	struct evrdma_req **slots;
	uint32_t *fr, i;

	slots = realloc(tab->slots, n * sizeof(*slots));
	if (!slots)
		return -1;
	tab->slots = slots;
	fr = realloc(tab->free_slots, n * sizeof(*fr));
	if (!fr)
		return -1;
	tab->free_slots = fr;
	for (i = tab->nslots; i < n; i++) {
		slots[i] = NULL;
		/* push in reverse so low slots are used first */
		fr[tab->nfree++] = n - 1 - (i - tab->nslots);
	}
	tab->nslots = n;
	return 0;
}

static struct evrdma_req *
req_new(struct evrdma__ep *ep, int opcode, evrdma_req_cb cb, void *arg)
{
	struct evrdma__reqtab *tab = ep->tab;
	struct evrdma_req *req;

	if (!tab->nfree && tab_grow(tab) < 0)
		return NULL;
	if ((req = tab->cache))
		tab->cache = (struct evrdma_req *)req->ep;
	else if (!(req = malloc(sizeof(*req))))
		return NULL;
	/* every field but the SGE is set here (no memset); only a kept
	 * ring's request has its SGE, made once */
	req->mr = NULL;
	req->kept = 0;
	req->slot = tab->free_slots[--tab->nfree];
	/* (31 bits: a wr_id with bit 63 set is a transport-owned ring's,
	 * evrdma__wr_ring) */
	req->gen = tab->next_gen++;
	if (tab->next_gen & 0x80000000u)
		tab->next_gen = 1;
	tab->slots[req->slot] = req;
	tab->live++;
	req->ep = ep;
	req->cb = cb;
	req->arg = arg;
	req->opcode = (uint8_t)opcode;
	req->is_recv = opcode == EVRDMA_OP_RECV;
	return req;
}

static void
req_free(struct evrdma__reqtab *tab, struct evrdma_req *req)
{
	tab->slots[req->slot] = NULL;
	tab->free_slots[tab->nfree++] = req->slot;
	/* the cache is a singly linked list threaded through ->ep */
	req->ep = (struct evrdma__ep *)tab->cache;
	tab->cache = req;
	tab->live--;
}

static uint64_t
req_wr_id(const struct evrdma_req *req)
{
	return (uint64_t)req->gen << 32 | req->slot;
}

void
evrdma__reqtab_fini(struct evrdma__reqtab *tab)
{
	struct evrdma_req *req;

	while ((req = tab->cache)) {
		tab->cache = (struct evrdma_req *)req->ep;
		free(req);
	}
	free(tab->slots);
	free(tab->free_slots);
	memset(tab, 0, sizeof(*tab));
}

void
evrdma__ep_init(struct evrdma__ep *ep, struct evrdma__reqtab *tab,
    const struct evrdma__ep_ops *ops, struct evrdma_conn *conn)
{
	ep->ops = ops;
	ep->tab = tab;
	ep->conn = conn;
	ep->refcnt = 1;
	TAILQ_INIT(&ep->sends);
	TAILQ_INIT(&ep->recvs);
}

/* ---- posting ---- */

static void
ep_account(struct evrdma__ep *ep, struct evrdma_req *req,
    struct evrdma_mr *mr)
{
	if (mr) {
		req->mr = mr;
		evrdma__mr_hold(mr);
	}
	if (req->is_recv) {
		TAILQ_INSERT_TAIL(&ep->recvs, req, link);
		ep->rq_out++;
	} else {
		TAILQ_INSERT_TAIL(&ep->sends, req, link);
		ep->sq_out++;
	}
}

/*
 * ibv_post_send(), but for the test knob EVRDMA_TEST_FAIL_POST_SEND
 * (evrdma__config_fail_post_send): the base's k-th post of sends (and
 * with "k+" every later one too) is refused as a provider with a full
 * queue refuses it, ENOMEM with the first work request bad, so that tests
 * reach what follows a refusal; with "k!" it goes, then the QP is moved
 * to the error state: what is outstanding flushes, mid-burst.
 */
#define ep_post_send evrdma__ep_post_send

int
evrdma__ep_post_send(struct evrdma__ep *ep, struct ibv_send_wr *wr,
    struct ibv_send_wr **bad)
{
	struct evrdma_base *base = (struct evrdma_base *)((char *)ep->tab -
	    offsetof(struct evrdma_base, reqs));

	if (base->fail_post_send && --base->fail_post_send == 0) {
		if (base->fail_post_send_on == 2) {
			struct ibv_qp_attr a;
			int err = ibv_post_send(ep->qp, wr, bad);

			memset(&a, 0, sizeof(a));
			a.qp_state = IBV_QPS_ERR;
			(void)EVRDMA_SYM(ibv_modify_qp)(ep->qp, &a,
			    IBV_QP_STATE);
			return err;
		}
		if (base->fail_post_send_on)
			base->fail_post_send = 1;
		*bad = wr;
		return ENOMEM;
	}
	return ibv_post_send(ep->qp, wr, bad);
}

/* The queue pair is the parent's (rdma_sym.c). */
static int
req_forked(void)
{
	return evrdma__fail(EPERM, "a forked child cannot post on its "
	    "parent's connections");
}

int
evrdma__ep_post(struct evrdma__ep *ep, struct evrdma_mr *mr, size_t off,
    size_t len, struct ibv_send_wr *wr, int opcode, evrdma_req_cb cb,
    void *arg)
{
	struct evrdma_req *req;
	struct ibv_sge sge;
	int rc, inl, recv = wr == NULL;

	if (evrdma__forked)
		return req_forked();
	if (recv ? ep->rq_out >= ep->rq_depth : ep->sq_out >= ep->sq_depth)
		return evrdma__fail(EAGAIN, "%s queue full",
		    recv ? "receive" : "send");
	req = req_new(ep, opcode, cb, arg);
	if (!req)
		return evrdma__fail(ENOMEM, "out of memory");
	inl = !recv && len && len <= ep->max_inline &&
	    (wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_SEND_WITH_IMM ||
	    wr->opcode == IBV_WR_RDMA_WRITE ||
	    wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM);
	if (mr && len) {
		/* inline data is copied by the provider from the process's
		 * address; everything else goes by the region's address as
		 * the device knows it (zero-based regions differ) */
		sge.addr = inl ? (uintptr_t)mr->addr + off :
		    evrdma__mr_sge_addr(mr, off);
		sge.length = (uint32_t)len;
		sge.lkey = mr->mr->lkey;
	}
	if (recv) {
		struct ibv_recv_wr rwr, *bad;

		memset(&rwr, 0, sizeof(rwr));
		rwr.wr_id = req_wr_id(req);
		rwr.sg_list = &sge;
		rwr.num_sge = (mr && len) ? 1 : 0;
		rc = ep->srq ? ibv_post_srq_recv(ep->srq, &rwr, &bad) :
		    ibv_post_recv(ep->qp, &rwr, &bad);
	} else {
		struct ibv_send_wr *bad;

		wr->wr_id = req_wr_id(req);
		wr->sg_list = &sge;
		wr->num_sge = (mr && len) ? 1 : 0;
		if (inl)
			wr->send_flags |= IBV_SEND_INLINE;
		wr->send_flags |= IBV_SEND_SIGNALED;
		rc = ep_post_send(ep, wr, &bad);
	}
	if (rc) {
		req_free(ep->tab, req);
		/* libibverbs returns the errno value instead of setting it */
		return evrdma__fail(rc, "ibv_post_%s: %s",
		    recv ? "recv" : "send", strerror(rc));
	}
	ep_account(ep, req, mr);
	return 0;
}

#define RECV_BATCH 32

/* The rings' requests go (nothing of them is outstanding any more). */
static void
ep_ring_free(struct evrdma__ep *ep)
{
	unsigned i;

	for (i = 0; i < ep->ring_n; i++) {
		ep->tab->live++;	/* req_free counts it out */
		req_free(ep->tab, ep->ring[i]);
	}
	free(ep->ring);
	ep->ring = NULL;
	ep->ring_n = 0;
	if (ep->ring_mr)
		evrdma__mr_release(ep->ring_mr);
	ep->ring_mr = NULL;
}

int
evrdma__ep_ring_init(struct evrdma__ep *ep, struct evrdma_mr *mr,
    size_t len, unsigned n, evrdma_req_cb cb, void *const *args)
{
	unsigned i;

	if (ep->ring)
		return evrdma__fail(EINVAL, "the endpoint has a ring");
	ep->ring = calloc(n, sizeof(*ep->ring));
	if (!ep->ring)
		return evrdma__fail(ENOMEM, "out of memory");
	/* the ring holds its region while it exists, not each receive
	 * while it is out: a receive of the ring is on no list and holds
	 * nothing, its posted flag and the count are all there is of it
	 * (a list and a hold cost some 20 instructions per message) */
	ep->ring_mr = mr;
	evrdma__mr_hold(mr);
	for (i = 0; i < n; i++) {
		struct evrdma_req *req = req_new(ep, EVRDMA_OP_RECV, cb,
		    args[i]);

		if (!req) {
			ep_ring_free(ep);
			return evrdma__fail(ENOMEM, "out of memory");
		}
		ep->tab->live--;	/* not posted yet */
		req->kept = 1;
		req->posted = 0;
		req->sge.addr = evrdma__mr_sge_addr(mr, (size_t)i * len);
		req->sge.length = (uint32_t)len;
		req->sge.lkey = mr->mr->lkey;
		ep->ring[ep->ring_n++] = req;
	}
	return 0;
}

int
evrdma__ep_ring_post(struct evrdma__ep *ep, const unsigned *idx, unsigned n)
{
	struct ibv_recv_wr wrs[RECV_BATCH], *bad = NULL;
	unsigned i, k, done = 0;
	int rc;

	if (evrdma__forked)
		return req_forked();
	if (!ep->ring)
		return evrdma__fail(EPIPE, "the receive ring is gone");
	while (done < n) {
		k = n - done < RECV_BATCH ? n - done : RECV_BATCH;
		if (k > ep->rq_depth - ep->rq_out)
			k = ep->rq_depth - ep->rq_out;
		if (!k)
			break;
		for (i = 0; i < k; i++) {
			struct evrdma_req *req = ep->ring[idx[done + i]];

			wrs[i].wr_id = req_wr_id(req);
			wrs[i].next = &wrs[i + 1];
			wrs[i].sg_list = &req->sge;
			wrs[i].num_sge = 1;
		}
		wrs[k - 1].next = NULL;
		rc = ep->srq ? ibv_post_srq_recv(ep->srq, wrs, &bad) :
		    ibv_post_recv(ep->qp, wrs, &bad);
		/* the provider posted the requests before bad */
		for (i = 0; i < k; i++) {
			if (rc && (!bad || &wrs[i] >= bad))
				break;
			ep->tab->live++;
			ep->ring[idx[done + i]]->posted = 1;
			ep->rq_out++;
		}
		done += i;
		if (rc) {
			if (!done)
				return evrdma__fail(rc, "ibv_post_recv: %s",
				    strerror(rc));
			break;
		}
	}
	if (!done)
		return evrdma__fail(EAGAIN, "receive queue full");
	return (int)done;
}

/* ---- completion ---- */

/* Complete @p req of @p ep: its callback gets @p conn (the endpoint's
 * connection, or for a shared receive queue the one whose QP took it). */
static inline __attribute__((always_inline)) void
ep_deliver_to(struct evrdma__ep *ep, struct evrdma_req *req,
    const struct evrdma_wc *wc, struct evrdma_conn *conn)
{
	evrdma_req_cb cb = req->cb;
	void *arg = req->arg;

	if (req->is_recv) {
		/* (a ring's receive is on no list: evrdma__ep_ring_init) */
		if (!req->kept)
			TAILQ_REMOVE(&ep->recvs, req, link);
		ep->rq_out--;
	} else {
		TAILQ_REMOVE(&ep->sends, req, link);
		ep->sq_out--;
	}
	if (req->mr)
		evrdma__mr_release(req->mr);
	if (req->kept) {
		ep->tab->live--;	/* stays, to be posted again */
		req->posted = 0;
	}
	else
		req_free(ep->tab, req);
	if (cb)
		cb(conn, wc, arg);
}

/* (both inlined: a call per completion was 30 instructions per 64 B round
 * trip, callgrind) */
static inline __attribute__((always_inline)) void
ep_deliver(struct evrdma__ep *ep, struct evrdma_req *req,
    const struct evrdma_wc *wc)
{
	ep_deliver_to(ep, req, wc, ep->conn);
}

/* The completion of a request that never reached the device or whose
 * completion will never come: status @p status, no WC behind it. */
static void
ep_deliver_status(struct evrdma__ep *ep, struct evrdma_req *req, int status)
{
	struct evrdma_wc w;

	memset(&w, 0, sizeof(w));
	w.status = status;
	w.wc_status = -1;
	w.opcode = req->opcode;
	ep_deliver(ep, req, &w);
}

#define wc_errno evrdma__wc_errno

int
evrdma__wc_errno(enum ibv_wc_status s)
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
 * A receive of a shared receive queue: the connection whose QP took it
 * gets the callback, counts it as activity (keepalive), and fails if it
 * failed (the queue goes on). The callback gets NULL when that QP is
 * already gone, or the application freed the connection: its object for
 * the connection may be gone with it.
 */
static void
ep_complete_srq(struct evrdma__ep *ep, struct evrdma_req *req,
    const struct evrdma_wc *w, uint32_t qp_num)
{
	struct evrdma_conn *conn = ep->ops->route(ep, qp_num);
	struct evrdma__ep *cep = conn ? &conn->ep : NULL;
	int unseen, held = 2;

	evrdma__ep_ref(ep);
	if (cep) {
		evrdma__ep_ref(cep);
		cep->activity++;
	}
	/* a raw listener's connection, not yet handed out (the peer may
	 * send once accepted, and a disabled listener holds established
	 * ones): the application has never seen it, so the completion waits
	 * for the accept callback (found by review: it came with a handle
	 * the application was never given, and that was later freed unseen);
	 * one for no connection waits behind those of any that went unseen
	 * (review: it overtook them) */
	unseen = cep && !conn->user_freed && conn->parent_ops &&
	    !conn->owner_ops;
	if (ep->ops->hold && (unseen || !cep || conn->user_freed))
		held = ep->ops->hold(ep, unseen ? conn : NULL, req->cb,
		    req->arg, req->mr, w);
	if (held == 2) {
		ep_deliver_to(ep, req, w, unseen || !cep || conn->user_freed ?
		    NULL : conn);
	} else {
		req->cb = NULL;
		req->mr = NULL;		/* its hold goes with the callback */
		ep_deliver_to(ep, req, w, NULL);
	}
	/* (one that is over its share of the queue, or has no memory to
	 * wait in, is dropped, as a listen queue drops: its peer must not
	 * take the receives of the connections the application has) */
	if (unseen && held && !cep->quiet)
		cep->ops->failed(cep, ENOBUFS);
	if (cep) {
		if (w->status && !cep->quiet)
			cep->ops->failed(cep, w->status);
		if (cep->watch)
			cep->ops->settled(cep);
		evrdma__ep_unref(cep);
	}
	evrdma__ep_unref(ep);
}

void
evrdma__ep_complete(struct evrdma_req *req, const struct ibv_wc *wc)
{
	struct evrdma__ep *ep = req->ep;
	struct evrdma_wc w;

	/* every field set, no memset: this runs twice per message */
	w.status = wc->status == IBV_WC_SUCCESS ? 0 : wc_errno(wc->status);
	w.wc_status = wc->status;
	w.opcode = req->opcode;
	w.byte_len = 0;
	w.imm_data = 0;
	w.has_imm = 0;
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
	if (ep->srq) {
		ep_complete_srq(ep, req, &w, wc->qp_num);
		return;
	}
	evrdma__ep_ref(ep);
	ep->activity++;
	ep_deliver(ep, req, &w);
	/* A failed request leaves the QP in the error state, and so does a
	 * flush nobody asked for: the connection is broken. */
	if (w.status && !ep->quiet)
		ep->ops->failed(ep, w.status);
	if (ep->watch)
		ep->ops->settled(ep);
	evrdma__ep_unref(ep);
}

/* The receives of the ring still out (on no list), in ring order, until
 * none is: a callback may post again, or end the ring (ring_n reread). */
static void
ep_ring_cancel(struct evrdma__ep *ep, int drop)
{
	unsigned i;
	int again;

	do {
		again = 0;
		for (i = 0; i < ep->ring_n; i++) {
			struct evrdma_req *req = ep->ring[i];

			if (!req->posted)
				continue;
			if (drop)
				req->cb = NULL;
			ep_deliver_status(ep, req, ECANCELED);
			again = 1;
		}
	} while (again);
}

void
evrdma__ep_cancel_all(struct evrdma__ep *ep)
{
	struct evrdma_req *req;

	evrdma__ep_ref(ep);
	ep_ring_cancel(ep, 0);
	while ((req = TAILQ_FIRST(&ep->recvs)) ||
	    (req = TAILQ_FIRST(&ep->sends)))
		ep_deliver_status(ep, req, ECANCELED);
	/* (a callback of the lists' may have posted to the ring) */
	ep_ring_cancel(ep, 0);
	ep_ring_free(ep);
	evrdma__ep_unref(ep);
}

void
evrdma__ep_drop_all(struct evrdma__ep *ep)
{
	struct evrdma_req *req;

	ep_ring_cancel(ep, 1);
	while ((req = TAILQ_FIRST(&ep->recvs)) ||
	    (req = TAILQ_FIRST(&ep->sends))) {
		req->cb = NULL;
		ep_deliver_status(ep, req, ECANCELED);
	}
	ep_ring_free(ep);
}

void
evrdma__ep_ring_note(struct evrdma__ep *ep, int status)
{
	evrdma__ep_ref(ep);
	/* a failed work request, or a flush nobody expected, leaves the
	 * QP in the error state: the connection is broken (as
	 * evrdma__ep_complete() says of a request's) */
	if (status && !ep->quiet)
		ep->ops->failed(ep, status);
	if (ep->watch)
		ep->ops->settled(ep);
	evrdma__ep_unref(ep);
}
