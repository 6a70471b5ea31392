/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel transport's credits (rc->cr), private: what the
 * other parts of the transport change of them, through these alone
 * (chan_ctl.c owns them, tools/check-owners). Inline: each runs once per
 * message or per buffer.
 */
#ifndef EVRDMA_CHAN_CTL_H_INCLUDED_
#define EVRDMA_CHAN_CTL_H_INCLUDED_

#include "chan_pool.h"

/* A DATA buffer's bytes left input (the receive ring): its credit is
 * owed to the peer; or a pool lent one more of our R (a return). */
static inline void
ctl_owe_data(struct ch_rdma *rc)
{
	rc->cr.ret_data++;
}

/* A pull of the peer's is done (or dropped): owed to the peer. */
static inline void
ctl_owe_pull(struct ch_rdma *rc)
{
	rc->cr.ret_pull++;
}

/* Joined a pool: the first data credit goes at once. */
static inline void
ctl_grant(struct ch_rdma *rc)
{
	rc->cr.ret_data++;
	rc->cr.grant_due = 1;
}

/* Our EOF's send completed. */
static inline void
ctl_eof_done(struct ch_rdma *rc)
{
	rc->cr.eof_done = 1;
}

/*
 * The immediate of a message of @p type, carrying what we owe, which is
 * then no longer owed; a DATA message spends one of the peer's data
 * credits (the caller checked it has one). -1: the receives posted do
 * not cover the returns (evrdma__rc_returns_ready()).
 */
static inline __attribute__((always_inline)) int
ctl_take_returns(struct ch_rdma *rc, int type, struct evrdma__ch_imm *m)
{
	unsigned d = rc->cr.ret_data > EVRDMA_CH_DRET_MAX ?
	    EVRDMA_CH_DRET_MAX : rc->cr.ret_data;
	unsigned p = rc->cr.ret_pull > EVRDMA_CH_PDONE_MAX ?
	    EVRDMA_CH_PDONE_MAX : rc->cr.ret_pull;

	if (evrdma__rc_returns_ready(rc, rc->cr.ret_data - d, 0) < 0)
		return -1;
	memset(m, 0, sizeof(*m));
	m->type = (uint8_t)type;
	m->dret = (uint16_t)d;
	m->cret = (uint8_t)rc->cr.ret_ctrl;
	m->pdone = (uint8_t)p;
	rc->cr.ret_data -= d;
	rc->cr.ret_ctrl = 0;
	rc->cr.ret_pull -= p;
	if (type == EVRDMA_CH_DATA)
		rc->cr.s--;
	/* (what the peer may not have seen when it yields, chan_pool.c) */
	if (rc->pm.reclaim_out)
		evrdma__pm_returned(rc, d);
	/* The peer, starved, waits for what we owe, pulls included. It
	 * stays starved until all of that went back: a message that leaves
	 * READs of its pulls still running must not drop the flag, or the
	 * pulls reported done later wait for a quarter of the ring that a
	 * peer holding fewer (it stopped with fewer out) never fills, and
	 * both sides wait for ever (seen on the two-guest wire) */
	/* On a pool, a starved peer also waits for a loan the pool may
	 * have had no room for: a message that lends it nothing leaves it
	 * starved, so that the pass lends once room comes back
	 * (evrdma__pool_room_freed()); forgetting it there left the peer with
	 * no credit and no way to say so (seen: 1 run in 10 of
	 * isolation_fine_reader). */
	if (!rc->cr.ret_data && !rc->cr.ret_pull && !rc->rx.pull_wait &&
	    !rc->rx.pull_out && (d || !rc->pm.pool))
		rc->cr.peer_starved = 0;
	return 0;
}

#endif /* EVRDMA_CHAN_CTL_H_INCLUDED_ */
