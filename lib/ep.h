/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the request table, each QP's endpoint and request queues, and the rings of work requests their owners keep, private. Part of evrdma-internal.h, which includes it
 * where it stands among the layers; include that, not this.
 */
#ifndef EVRDMA_EP_H_INCLUDED_
#define EVRDMA_EP_H_INCLUDED_

/* ---- the request table and request queues (req.c) ---- */

struct evrdma__ep;

struct evrdma_req {
	struct evrdma__ep *ep;
	evrdma_req_cb cb;
	void *arg;
	struct evrdma_mr *mr;
	uint32_t slot;
	uint32_t gen;
	uint8_t opcode;		/* enum evrdma_opcode posted */
	uint8_t is_recv;
	uint8_t kept;		/* of one of the endpoint's rings: posted
				 * again, freed with the ring */
	uint8_t posted;		/* (a kept one) its completion is due */
	TAILQ_ENTRY(evrdma_req) link;
	struct ibv_sge sge;	/* (a kept one's, made once) */
};

/* wr_id -> request: slot index in the low 32 bits, generation in the high
 * 32, so that a late completion for a recycled slot is recognised. */
struct evrdma__reqtab {
	struct evrdma_req **slots;
	uint32_t nslots;
	uint32_t *free_slots;
	uint32_t nfree;
	uint32_t next_gen;
	struct evrdma_req *cache;	/* recycled requests, through ->ep */
	unsigned live;			/* posted, callback still due */
};
void evrdma__reqtab_fini(struct evrdma__reqtab *tab);

/*
 * What an endpoint's owner (a connection) learns from below, on rare paths
 * only: the per-message path makes no call through this table.
 */
struct evrdma__ep_ops {
	/* a request failed, or was flushed while nobody expected it (the
	 * QP is in error): the connection is broken */
	void (*failed)(struct evrdma__ep *ep, int status);
	/* (while ep->watch is set) a callback was delivered */
	void (*settled)(struct evrdma__ep *ep);
	/* an asynchronous event (IBV_EVENT_*) concerns this QP */
	void (*async)(struct evrdma__ep *ep, int event_type);
	/* the last reference went: free the owner */
	void (*release)(struct evrdma__ep *ep);
	/* (a shared receive queue's endpoint, ep->srq set) the connection
	 * whose QP has number @p qp_num, or NULL: it gets the completion */
	struct evrdma_conn *(*route)(struct evrdma__ep *ep, uint32_t qp_num);
	/* (the same) a completion for @p conn, which the application has not
	 * been handed yet: kept until it is, or until the connection goes;
	 * with @p conn NULL, one for no connection, kept only behind those
	 * of connections that went unseen, so as not to overtake them.
	 * 0: kept; 1: kept, but @p conn is over its share of the queue: drop
	 * it; 2: not kept, it completes now, without a connection */
	int (*hold)(struct evrdma__ep *ep, struct evrdma_conn *conn,
	    evrdma_req_cb cb, void *arg, struct evrdma_mr *mr,
	    const struct evrdma_wc *wc);
};

/*
 * The request queues of one QP, and the reference count of the object that
 * owns them (a connection embeds one): a reference is held around every
 * callback, so the owner may be freed from inside any of them.
 */
struct evrdma__ep {
	const struct evrdma__ep_ops *ops;
	struct evrdma__reqtab *tab;
	struct evrdma_conn *conn;	/* handed to request callbacks */
	struct ibv_qp *qp;
	struct ibv_srq *srq;	/* an SRQ's endpoint: receives go here, and
				 * each completes on the connection whose
				 * QP took it (srq.c) */
	struct ibv_cq *cq;
	uint32_t qp_num;
	uint8_t port;
	uint8_t quiet;		/* failures are expected: not reported */
	uint8_t watch;		/* ops->settled() after each delivery */
	unsigned refcnt;
	unsigned activity;	/* completions so far: the peer is alive */
	unsigned sq_depth, rq_depth, max_inline;
	unsigned sq_out, rq_out;
	/* outstanding requests in post order, sends and receives apart;
	 * the ring's receives are on neither (each has its posted flag,
	 * rq_out counts them) */
	TAILQ_HEAD(evrdma__reqq, evrdma_req) sends;
	struct evrdma__reqq recvs;
	/* receives its owner posts again and again (evrdma__ep_ring_init:
	 * a shared receive queue's pool) */
	struct evrdma_req **ring;
	struct evrdma_mr *ring_mr;
	unsigned ring_n;
	LIST_ENTRY(evrdma__ep) dev_link;	/* on its device */
	int on_dev;
};

void evrdma__ep_init(struct evrdma__ep *ep, struct evrdma__reqtab *tab,
    const struct evrdma__ep_ops *ops, struct evrdma_conn *conn);

static inline void
evrdma__ep_ref(struct evrdma__ep *ep)
{
	ep->refcnt++;
}

static inline void
evrdma__ep_unref(struct evrdma__ep *ep)
{
	if (--ep->refcnt == 0)
		ep->ops->release(ep);
}

/*
 * Post one request: a send when @p wr is given (its opcode and remote part
 * filled in), else a receive. (mr, off, len) is the local buffer, already
 * checked. 0, or -1 with errno (EAGAIN: queue full; ENOMEM; the provider's
 * error). A request that was posted gets cb(arg) exactly once.
 */
int evrdma__ep_post(struct evrdma__ep *ep, struct evrdma_mr *mr, size_t off,
    size_t len, struct ibv_send_wr *wr, int opcode, evrdma_req_cb cb,
    void *arg);
/*
 * A receive ring: @p n receives into consecutive buffers of @p len bytes of
 * @p mr, buffer i completing with cb(args[i]), that the owner posts again
 * and again by index (evrdma__ep_ring_post) without a request made and
 * freed each time. Each still completes once per post. The requests go
 * when everything outstanding was cancelled or dropped. 0, or -1 with
 * errno ENOMEM.
 */
int evrdma__ep_ring_init(struct evrdma__ep *ep, struct evrdma_mr *mr,
    size_t len, unsigned n, evrdma_req_cb cb, void *const *args);
/* Post the ring's buffers @p idx[0..n), in as few ibv_post_recv() calls as
 * the queue allows: how many were posted (fewer when the queue is full or
 * the provider refused some), or -1 with errno when none was. */
int evrdma__ep_ring_post(struct evrdma__ep *ep, const unsigned *idx,
    unsigned n);
/* The errno of a work completion's status (0 for success). */
int evrdma__wc_errno(enum ibv_wc_status s);

/*
 * The owner of a ring of work requests (rings above) posts on its
 * endpoint's QP itself: it counts what it posted and what came back here,
 * so that the queue's room (sq_out, rq_out), the keepalive's sign of life
 * (activity) and the teardown's wait for the QP to be empty hold for both
 * kinds of work request. (Inline: once per message.)
 */
static inline void
evrdma__ep_ring_posted(struct evrdma__ep *ep, unsigned sends,
    unsigned recvs)
{
	ep->sq_out += sends;
	ep->rq_out += recvs;
}
/* (a failure, or a teardown that watches: evrdma__ep_ring_done()) */
void evrdma__ep_ring_note(struct evrdma__ep *ep, int status);
/* @p sends and @p recvs of them came back, the last with @p status (an
 * errno, 0: success): a failure breaks the connection. */
static inline void
evrdma__ep_ring_done(struct evrdma__ep *ep, unsigned sends, unsigned recvs,
    int status)
{
	ep->sq_out -= sends;
	ep->rq_out -= recvs;
	ep->activity++;
	if (status || ep->watch)
		evrdma__ep_ring_note(ep, status);
}
/* ... or were given up without a completion (teardown cancelled them). */
static inline void
evrdma__ep_ring_forget(struct evrdma__ep *ep, unsigned sends,
    unsigned recvs)
{
	ep->sq_out -= sends;
	ep->rq_out -= recvs;
}

/* Deliver a work completion (the CQ poller). */
void evrdma__ep_complete(struct evrdma_req *req, const struct ibv_wc *wc);
/* Complete every outstanding request with ECANCELED (no WC behind it). */
void evrdma__ep_cancel_all(struct evrdma__ep *ep);
/* Forget every outstanding request without its callback (base free). */
void evrdma__ep_drop_all(struct evrdma__ep *ep);

/* Look up a request by wr_id; NULL for a stale one. (Inline: it runs for
 * every completion, and in the Soft-RoCE guest a call and its return cost
 * more than the few instructions inside.) */
static inline struct evrdma_req *
evrdma__req_lookup(struct evrdma__reqtab *tab, uint64_t wr_id)
{
	uint32_t slot = (uint32_t)wr_id, gen = (uint32_t)(wr_id >> 32);
	struct evrdma_req *req;

	if (slot >= tab->nslots)
		return NULL;
	req = tab->slots[slot];
	return (req && req->gen == gen) ? req : NULL;
}

/* ---- rings of work requests their owner keeps (rings.c) ----
 *
 * A channel posts its messages and receives from arrays of work requests
 * it prepared once, not as requests of the table above: a completion of
 * one goes from the poll straight to its owner, with no lookup of a
 * request, no reference taken and no evrdma_wc made. Its wr_id says so
 * (bit 63), and names the owner's entry in the base's registry (20 bits)
 * with that entry's generation (24 bits: a late completion of an owner
 * gone, or whose entry was taken again, finds another and is dropped),
 * then the owner's own kind (3 bits) and index (16 bits).
 */
#define EVRDMA__WR_RING		(1ull << 63)
#define EVRDMA__WR_ID_SHIFT	43
#define EVRDMA__WR_GEN_SHIFT	19
#define EVRDMA__WR_KIND_SHIFT	16
#define EVRDMA__WR_GEN_MASK	0xffffffu
#define EVRDMA__WR_ID_MAX	(1u << 20)

#define EVRDMA__WR_KINDS	8
struct evrdma__rings_ops {
	/* A completion of one of @p owner's work requests, to the handler
	 * of the kind the owner tagged it with (each kind's its own: a
	 * send's completion does not pay for a receive's), @p idx as
	 * tagged. With an error status only status and wr_id are valid
	 * (ibv_poll_cq(3)). Runs inside the poll: no user callback. A kind
	 * the owner never tags with may be NULL. */
	void (*complete[EVRDMA__WR_KINDS])(void *owner, const struct ibv_wc *wc,
	    unsigned idx);
	/* The owner's pass, due since a completion of this poll
	 * (evrdma__rings_ready()): at the poll's end, user callbacks
	 * allowed. */
	void (*pass)(void *owner);
};
#define EVRDMA__RINGS_NONE	UINT32_MAX
struct evrdma__rings_entry {
	void *owner;			/* NULL: free */
	const struct evrdma__rings_ops *ops;
	uint32_t gen;
	uint32_t ready_next;		/* on the ready list: the next entry */
	uint8_t ready;			/* its pass is due at the poll's end */
};
struct evrdma__rings {
	struct evrdma__rings_entry *e;
	uint32_t n, *free, nfree, next_gen;
	/* owners whose pass is due at the end of this poll, in the order
	 * their completions came (a list through the entries) */
	uint32_t ready_head, ready_tail;
};
/* Register @p owner: its tag (the bits of its wr_ids above the kind and
 * index), or 0 with errno ENOMEM. */
uint64_t evrdma__rings_add(struct evrdma_base *base,
    const struct evrdma__rings_ops *ops, void *owner);
/* Forget the owner of @p tag: its completions still to be polled are
 * dropped from now on. @return 1 when its pass was due (it no longer is:
 * the owner schedules it otherwise), else 0. */
int evrdma__rings_del(struct evrdma_base *base, uint64_t tag);
void evrdma__rings_init(struct evrdma__rings *r);
void evrdma__rings_fini(struct evrdma_base *base);
/* The end of a poll: the passes made due in it, in the order they were
 * (one each; those made due meanwhile, by a poll inside a pass, too). */
void evrdma__rings_run(struct evrdma__rings *r);

/* The owner of @p tag (a tag of evrdma__rings_add()) has its pass due:
 * run at the end of the poll in progress (the caller is inside one), once
 * however often it is asked, after those asked before it. */
static inline void
evrdma__rings_ready(struct evrdma__rings *r, uint64_t tag)
{
	uint32_t id = (uint32_t)(tag >> EVRDMA__WR_ID_SHIFT) &
	    (EVRDMA__WR_ID_MAX - 1);
	struct evrdma__rings_entry *e = &r->e[id];

	if (e->ready)
		return;
	e->ready = 1;
	e->ready_next = EVRDMA__RINGS_NONE;
	if (r->ready_tail == EVRDMA__RINGS_NONE)
		r->ready_head = id;
	else
		r->e[r->ready_tail].ready_next = id;
	r->ready_tail = id;
}

static inline uint64_t
evrdma__wr_ring(uint64_t tag, unsigned kind, unsigned idx)
{
	return tag | (uint64_t)kind << EVRDMA__WR_KIND_SHIFT | idx;
}

/* A polled completion of a ring (its wr_id has EVRDMA__WR_RING): to its
 * owner, if it is still there. */
static inline void
evrdma__rings_complete(struct evrdma__rings *r, const struct ibv_wc *wc)
{
	uint32_t id = (uint32_t)(wc->wr_id >> EVRDMA__WR_ID_SHIFT) &
	    (EVRDMA__WR_ID_MAX - 1);
	uint32_t gen = (uint32_t)(wc->wr_id >> EVRDMA__WR_GEN_SHIFT) &
	    EVRDMA__WR_GEN_MASK;
	struct evrdma__rings_entry *e;

	if (id >= r->n)
		return;
	e = &r->e[id];
	if (e->owner && e->gen == gen)
		e->ops->complete[(wc->wr_id >> EVRDMA__WR_KIND_SHIFT) &
		    (EVRDMA__WR_KINDS - 1)](e->owner, wc,
		    (unsigned)wc->wr_id & 0xffff);
}

#endif /* EVRDMA_EP_H_INCLUDED_ */
