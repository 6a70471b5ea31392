/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel transport's place in a queue's pool (rc->pm,
 * chan_pool.c's), private: what the other parts of the transport change
 * of it, through these alone (tools/check-owners).
 */
#ifndef EVRDMA_CHAN_POOL_H_INCLUDED_
#define EVRDMA_CHAN_POOL_H_INCLUDED_

#include <limits.h>

#include "chan_rdma.h"

/* Data credits we returned while our RECLAIM is out: what the peer may
 * not have seen when it yields (evrdma__ch_yield_enough()), saturating. */
static inline void
evrdma__pm_returned(struct ch_rdma *rc, unsigned d)
{
	if (rc->pm.reclaim_ret <= UINT_MAX - d)
		rc->pm.reclaim_ret += d;
}

/* The connection ended: it goes once a poll of the queue's CQ, asked for
 * here, found the CQ empty (what the peer sent before is in; the pass
 * then frees it). */
static inline void
evrdma__pool_ending(struct ch_rdma *rc)
{
	struct evrdma_cq *cq = evrdma__srq_cq(rc->pm.srq);

	if (cq) {
		rc->pm.drain_mark = cq->emptied;
		evrdma__dev_poll_soon(cq->dev);
	}
}

#endif /* EVRDMA_CHAN_POOL_H_INCLUDED_ */
