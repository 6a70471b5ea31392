/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: devices (CQs, protection domains) and memory regions, private. Part of evrdma-internal.h, which includes it
 * where it stands among the layers; include that, not this.
 */
#ifndef EVRDMA_DEV_H_INCLUDED_
#define EVRDMA_DEV_H_INCLUDED_

/* ---- devices (device.c) ---- */

struct evrdma_cq {
	struct ibv_cq *cq;
	struct evrdma_dev *dev;
	unsigned cap;		/* entries */
	unsigned reserved;	/* sum of sq+rq of its QPs */
	unsigned unacked;	/* CQ events got but not yet acked */
	int armed_pending;	/* needs polling */
	/* polls that found it empty so far: a poll that saw this move
	 * took everything that had arrived before it started */
	unsigned long emptied;
	int armed;		/* notification requested, no event since */
	LIST_ENTRY(evrdma_cq) link;
};

struct evrdma__async_sub;

struct evrdma_dev {
	struct evrdma_base *base;
	struct ibv_context *verbs;	/* owned by librdmacm */
	struct ibv_comp_channel *cc;
	struct event *cc_ev;		/* completion channel readable */
	struct event *async_ev;		/* the shared async event fd */
	struct event *notify_ev;	/* events another base read for us */
	struct event *poll_ev;		/* resumes polling after the budget */
	/* poll_ev started and not run yet: known here, because asking
	 * libevent (event_pending, with its lock) cost 39 instructions per
	 * wake-up on the path to sleep */
	int poll_due;
	struct event *spin_ev;		/* busy polling, between loop events */
	struct evrdma__async_sub *sub;	/* our place in the fan-out */
	int spinning;			/* inside dev_spin() */
	struct ibv_device_attr attr;
	LIST_HEAD(, evrdma_cq) cqs;
	/* where the next poll starts: the CQ after the last one that gave
	 * completions, so that a budget spent on the first CQs of the list
	 * does not leave the same last ones waiting every time */
	struct evrdma_cq *poll_next;
	LIST_HEAD(, evrdma__ep) eps;	/* QPs, for async events */
	unsigned refcnt;		/* conns, pds */
	unsigned dev_cq_cap;		/* entries per CQ, clamped to max_cqe */
	int dead;			/* removed or fatal: not reused */
	LIST_ENTRY(evrdma_dev) link;
};

/* A protection domain: one per connection, so that a peer reaches only
 * memory registered for its own connection. */
struct evrdma__pd {
	struct ibv_pd *pd;
	struct evrdma_dev *dev;
	unsigned refcnt;		/* the connection + its regions */
};

struct evrdma_dev *evrdma__dev_get(struct evrdma_base *base,
    struct ibv_context *verbs);
/* The device named @p name (NULL: the host's only one), as
 * evrdma__dev_get(); NULL with errno ENODEV or EINVAL (several devices
 * and no name). */
struct evrdma_dev *evrdma__dev_get_by_name(struct evrdma_base *base,
    const char *name, const char *fn);
void evrdma__dev_put(struct evrdma_dev *dev);
/* Removed or fatal: never reused, and what the layers above keep of it
 * for later (base->dev_dead) goes. */
void evrdma__dev_dead(struct evrdma_dev *dev);
struct evrdma_cq *evrdma__cq_reserve(struct evrdma_dev *dev, unsigned n);
void evrdma__cq_release(struct evrdma_cq *cq, unsigned n);
/* Poll every CQ of the device soon, from the loop. */
void evrdma__dev_poll_soon(struct evrdma_dev *dev);
/* An endpoint's QP exists: it hears the device's async events. */
void evrdma__dev_attach(struct evrdma_dev *dev, struct evrdma__ep *ep);
void evrdma__dev_detach(struct evrdma__ep *ep);
void evrdma__dev_free_all(struct evrdma_base *base);
struct evrdma__pd *evrdma__pd_new(struct evrdma_dev *dev);
void evrdma__pd_put(struct evrdma__pd *pd);

/* ---- memory regions (mr.c) ---- */
struct evrdma_mr {
	struct evrdma_base *base;	/* NULL: released by base free */
	struct evrdma__pd *pd;
	struct ibv_mr *mr;
	void *addr;
	size_t len;
	uint64_t iova;			/* what the device calls addr */
	int access;
	unsigned inflight;	/* outstanding requests that use it */
	int freed;		/* evrdma_mr_free() called, waiting for inflight */
	struct evrdma__work fin;	/* deregisters once freed and idle */
	LIST_ENTRY(evrdma_mr) link;
};

static inline void
evrdma__mr_hold(struct evrdma_mr *mr)
{
	mr->inflight++;
}

/* The last request of a freed region completed: the device forgets it
 * before that request's callback, which may reuse the memory (mem.h); the
 * rest waits for the loop (mr.c's fin: the protection domain's last
 * reference may close the device whose CQ is being polled). */
static inline void
evrdma__mr_release(struct evrdma_mr *mr)
{
	if (--mr->inflight == 0 && mr->freed && mr->base) {
		evrdma__mr_dereg(mr);
		evrdma__work_queue(mr->base, &mr->fin);
	}
}

/* The device address of byte @p off of @p mr (for an SGE). */
static inline uint64_t
evrdma__mr_sge_addr(const struct evrdma_mr *mr, size_t off)
{
	return mr->iova + off;
}

/* Register in @p pd; remote-accessible regions are zero-based where the
 * provider allows (no process address on the wire). */
struct evrdma_mr *evrdma__mr_reg(struct evrdma_base *base,
    struct evrdma__pd *pd, void *addr, size_t len, int access);
/* Whether @p bytes more may be registered for @p base: within
 * RLIMIT_MEMLOCK, once the base's warm sets gave theirs back if need be
 * (memory the application asks for comes before a cache of ours). 0, or
 * -1 with errno ENOMEM and a message naming the limit. */
int evrdma__base_pin_check(struct evrdma_base *base, size_t bytes);
int evrdma__access_to_ibv(int access);
/* Base free: deregister every region; handles still held become husks. */
void evrdma__mr_release_all(struct evrdma_base *base);

/*
 * The owner of an rdma_cm id (a connection, a listener, a connect request
 * queued by its listener) embeds one, and the id's context points at it.
 * cm.c's drain hands each event down to the owner through its ops; the
 * event is acked right after.
 */
struct evrdma__cm_owner;
struct evrdma__cm_ops {
	/* An event of an id it owns. Returns nonzero when the id must be
	 * destroyed once the event is acked (rdma_destroy_id() waits for
	 * the ack). */
	int (*event)(struct evrdma__cm_owner *o, struct rdma_cm_event *ev);
	/* (optional) The event was acked: what had to wait for the ack (a
	 * listener freed by a callback inside event()). An owner with this
	 * op keeps itself alive from event() to here. */
	void (*acked)(struct evrdma__cm_owner *o);
};
struct evrdma__cm_owner {
	const struct evrdma__cm_ops *ops;
};

#endif /* EVRDMA_DEV_H_INCLUDED_ */
