/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel's RDMA transport: a queue's receive pool
 * (evrdma_channel_srq_new()), the channels' places in it, and lending:
 * credits lent, withheld, reclaimed (doc/channel-protocol.md, "Lending").
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "chan_ctl.h"

void
evrdma__pool_free(struct evrdma__chpool *pool, unsigned idx)
{
	if (pool->rb[idx].state == RB_FREE) {
		/* impossible (see struct ch_rbuf): pushing it again would
		 * write past the free stack */
		evrdma__log(EVRDMA_LOG_ERROR, "channel queue: internal error: "
		    "buffer %u freed twice", idx);
		return;
	}
	pool->own[idx] = NULL;
	pool->rb[idx].state = RB_FREE;
	pool->free[pool->nfree++] = idx;
	/* posted again before any channel returns a credit, and at the
	 * latest after this poll pass: an honest peer's SEND that met an
	 * RNR (a violator took its buffer) waits for no traffic */
	if (pool->base)
		evrdma__work_queue(pool->base, &pool->post_work);
}

/* Post every free buffer: 0, or -1 with errno. */
int
evrdma__pool_post(struct evrdma__chpool *pool)
{
	unsigned idx[64], n, i;
	int k;

	if (!pool->nfree)
		return 0;
	if (!pool->mr || !evrdma__srq_alive(pool->srq))
		return evrdma__fail(EPIPE, "the channel queue is gone");
	while (pool->nfree) {
		n = pool->nfree < 64 ? pool->nfree : 64;
		for (i = 0; i < n; i++)
			idx[i] = pool->free[pool->nfree - 1 - i];
		k = evrdma__ep_ring_post(evrdma__srq_ep(pool->srq), idx, n);
		if (k < 0)
			return -1;
		for (i = 0; i < (unsigned)k; i++)
			pool->rb[pool->free[--pool->nfree]].state = RB_POSTED;
		if ((unsigned)k < n)
			return evrdma__fail(ENOMEM, "cannot post receives");
	}
	return 0;
}

void
evrdma__pool_post_work(struct evrdma__work *w)
{
	struct evrdma__chpool *pool = (struct evrdma__chpool *)((char *)w -
	    offsetof(struct evrdma__chpool, post_work));

	if (evrdma__pool_post(pool) < 0 && errno != EPIPE)
		evrdma__log(EVRDMA_LOG_ERROR, "channel queue: %s",
		    evrdma_errmsg());
}

/* Buffers no channel was promised. */
static unsigned
pool_room(const struct evrdma__chpool *pool)
{
	unsigned long used = (unsigned long)pool->committed + pool->orphans +
	    pool->reserve;

	return used < pool->nbuf ? (unsigned)(pool->nbuf - used) : 0;
}

/* The data credits each channel may have lent, all sharing evenly. */
static unsigned
pool_share(const struct evrdma__chpool *pool)
{
	unsigned long fixed = (unsigned long)pool->reserve + pool->orphans;
	unsigned avail = fixed < pool->nbuf ? (unsigned)(pool->nbuf - fixed) :
	    0;
	unsigned n = pool->nchan + (pool->join_due ? 1 : 0);
	unsigned share = n ? avail / n : avail;

	return share ? share : 1;
}

/* Lent credits beyond the pool's even share (keeping one, so that the
 * peer can always send, and say it is starved). */
int
evrdma__rc_over_share(const struct ch_rdma *rc)
{
	unsigned lent = rc->slots - rc->pm.withheld;

	return lent > 1 && lent > pool_share(rc->pm.pool);
}

static void
pool_tick_arm(struct evrdma__chpool *pool)
{
	if (!pool->tick_armed && pool->tick_ev &&
	    evrdma__ev_timer_start(pool->tick_ev, POOL_TICK_MS) == 0)
		pool->tick_armed = 1;
}

/* Ask @p rc's peer for @p n of the credits lent to it (the pass sends the
 * RECLAIM). */
static void
rc_reclaim(struct ch_rdma *rc, unsigned n)
{
	if (!n || rc->pm.reclaim_want || rc->pm.reclaim_out)
		return;
	rc->pm.reclaim_want = n;
	rc->pm.reclaim_ticks = 0;
	pool_tick_arm(rc->pm.pool);
	rc_schedule(rc);
}

/* The pool has no room: ask the channels over their share for the rest. */
static void
pool_reclaim_over_share(struct evrdma__chpool *pool)
{
	unsigned share = pool_share(pool);
	struct ch_rdma *rc;

	LIST_FOREACH(rc, &pool->chans, pm.link) {
		unsigned lent = rc->slots - rc->pm.withheld;

		if (lent > share && lent > 1)
			rc_reclaim(rc, lent - (share ? share : 1));
	}
}

/* Buffers were given back (a yield, a withheld return, a channel gone):
 * the channels whose peers wait for a loan the pool had no room for get
 * their pass, which lends (evrdma__rc_pool_pass()). */
void
evrdma__pool_room_freed(struct evrdma__chpool *pool)
{
	struct ch_rdma *rc;

	if (!pool->want_room)
		return;
	pool->want_room = 0;
	LIST_FOREACH(rc, &pool->chans, pm.link)
		if (rc->cr.peer_starved && rc->pm.withheld)
			rc_schedule(rc);
}

/* Lend the peer more of our R while the pool has buffers nobody was
 * promised, up to the even share. */
static void
rc_lend(struct ch_rdma *rc)
{
	struct evrdma__chpool *pool = rc->pm.pool;
	unsigned share = pool_share(pool);

	while (rc->pm.withheld && rc->slots - rc->pm.withheld < share &&
	    pool_room(pool)) {
		rc->pm.withheld--;
		pool->committed++;
		ctl_owe_data(rc);	/* lent with the next return */
	}
	if (rc->pm.withheld && rc->slots - rc->pm.withheld < share &&
	    !pool_room(pool)) {
		/* it is owed its share: ask those over theirs, and come
		 * back when something was given back */
		pool->want_room = 1;
		pool_reclaim_over_share(pool);
	}
	if (rc->slots - rc->pm.withheld > 1)
		pool_tick_arm(pool);
}

/* Every tick: a peer holding more than one credit that sent no DATA for a
 * whole tick is asked for the rest; one that did not answer a RECLAIM
 * within POOL_RECLAIM_TICKS is cut off. */
void
evrdma__pool_tick(void *arg)
{
	struct evrdma__chpool *pool = arg;
	struct ch_rdma *rc, *next;
	int busy = 0;

	pool->tick_armed = 0;
	if (pool->join_due) {
		pool->join_due--;
		busy = 1;
	}
	for (rc = LIST_FIRST(&pool->chans); rc; rc = next) {
		unsigned lent = rc->slots - rc->pm.withheld;
		unsigned long long act = rc->rx.msgs + rc->tx.msgs;

		next = LIST_NEXT(rc, pm.link);
		/* idle: no message either way since the last tick (counted
		 * here, not on the message's path) */
		if (act == rc->pm.act_mark) {
			rc->pm.idle_ticks++;
		} else {
			rc->pm.idle_ticks = 0;
			rc->pm.act_mark = act;
		}
		if (rc->pm.reclaim_want || rc->pm.reclaim_out) {
			if (++rc->pm.reclaim_ticks >= POOL_RECLAIM_TICKS) {
				rc->pm.reclaim_want = rc->pm.reclaim_out = 0;
				evrdma__rc_violation(rc, "lent credits not "
				    "given back when reclaimed");
			} else {
				busy = 1;
			}
		} else if (lent > 1 && rc->rx.msgs == rc->pm.rx_mark &&
		    rc_up(rc)) {
			rc_reclaim(rc, evrdma__ch_reclaim_amount(lent));
			busy = 1;
		} else if (lent > 1) {
			busy = 1;
		}
		rc->pm.rx_mark = rc->rx.msgs;
	}
	if (busy || (pool->evict_ticks && pool->nchan))
		pool_tick_arm(pool);
}

/* A receive of a queue's pool: the channel whose QP took it, if it is
 * still there, gets the buffer (else NULL: the buffer is free again). */
struct ch_rdma *
evrdma__rc_pool_taker(struct evrdma__chpool *pool, struct evrdma_conn *c,
    const struct evrdma_wc *wc, unsigned idx)
{
	struct ch_rdma *rc = c ? evrdma__conn_owner(c) : NULL;

	if (!rc || rc->pm.pool != pool || wc->status) {
		/* flushed, cancelled, or its channel went before it was
		 * polled */
		evrdma__pool_free(pool, idx);
		return NULL;
	}
	pool->own[idx] = rc;
	return rc;
}

/* Tell the application what admission did (it may free the queue: the
 * caller holds a reference on it). */
static void
pool_tell(struct evrdma__chpool *pool, int what, struct evrdma_conn *conn)
{
	const struct sockaddr *sa = (const struct sockaddr *)&conn->peer_addr;

	if (pool->adm_cb && evrdma__base_user_ok(pool->base))
		pool->adm_cb(pool->srq, what, sa, sa->sa_family == AF_INET6 ?
		    (int)sizeof(struct sockaddr_in6) :
		    (int)sizeof(struct sockaddr_in), pool->adm_arg);
}

/* Whether @p a and @p b are the same host (port aside). */
static int
same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	const struct sockaddr_in *a4 = (const void *)a, *b4 = (const void *)b;
	const struct sockaddr_in6 *a6 = (const void *)a, *b6 = (const void *)b;

	if (a->ss_family != b->ss_family)
		return 0;
	if (a->ss_family == AF_INET)
		return a4->sin_addr.s_addr == b4->sin_addr.s_addr;
	return a->ss_family == AF_INET6 && !memcmp(&a6->sin6_addr,
	    &b6->sin6_addr, sizeof(a6->sin6_addr));
}

/* The joined channel idle longest, for evict_ticks at least, or NULL. */
static struct ch_rdma *
pool_idlest(const struct evrdma__chpool *pool)
{
	struct ch_rdma *rc, *best = NULL;

	if (!pool->evict_ticks)
		return NULL;
	LIST_FOREACH(rc, &pool->chans, pm.link)
		if (rc->pm.idle_ticks >= pool->evict_ticks && rc_up(rc) &&
		    (!best || rc->pm.idle_ticks > best->pm.idle_ticks))
			best = rc;
	return best;
}

/* Refuse @p conn: no room (those over their share are asked for what
 * they hold beyond it, so that a later request may find room). */
static int
pool_refuse(struct evrdma__chpool *pool, struct evrdma_conn *conn)
{
	/* The refused one counts in the share for a while, so that those
	 * at the share of the joined are over it (found by review: peers
	 * that were never idle for a tick kept a full pool's shares, and
	 * newcomers were refused for good), and what they give back is not
	 * lent out again meanwhile. */
	pool->join_due = POOL_RECLAIM_TICKS + 1;
	pool_tick_arm(pool);
	pool_reclaim_over_share(pool);
	pool_tell(pool, EVRDMA_ADMISSION_REFUSED, conn);
	return evrdma__fail(ENOBUFS, "the channel queue has no room for "
	    "another channel (%u of %u buffers promised, none idle to "
	    "evict)", pool->committed + pool->orphans + pool->reserve,
	    pool->nbuf);
}

/*
 * A connect request on the pool (nothing is committed for it yet): refused
 * when its address holds the queue's limit, or when the pool has no room
 * and nobody idle enough to make room for it at its join.
 */
static int
pool_admits(struct evrdma__chpool *pool, struct evrdma_conn *conn)
{
	struct ch_rdma *rc;
	unsigned n = 0;

	if (pool->per_addr) {
		LIST_FOREACH(rc, &pool->chans, pm.link)
			if (rc->conn && same_host(&rc->conn->peer_addr,
			    &conn->peer_addr))
				n++;
		if (n >= pool->per_addr) {
			pool_tell(pool, EVRDMA_ADMISSION_REFUSED_ADDRESS,
			    conn);
			return evrdma__fail(ENOBUFS, "the channel queue "
			    "holds %u channels of that address, its limit",
			    n);
		}
	}
	if (pool_room(pool) || pool_idlest(pool))
		return 0;
	return pool_refuse(pool, conn);
}

/* Make room for a newcomer that is established: the channel idle longest
 * is cut off, and its credits are the pool's at once (its QP is in the
 * error state: its peer sends nothing more). 0, or -1 with none to evict. */
static int
pool_evict(struct evrdma__chpool *pool)
{
	struct ch_rdma *rc = pool_idlest(pool);

	if (!rc)
		return -1;
	evrdma__log(EVRDMA_LOG_INFO, "channel %p: idle for %u s, evicted "
	    "from its queue to make room for a newcomer", (void *)rc,
	    rc->pm.idle_ticks * POOL_TICK_MS / 1000);
	pool_tell(pool, EVRDMA_ADMISSION_EVICTED, rc->conn);
	evrdma__rc_pool_depart(rc);
	evrdma__conn_abort(rc->conn, EVRDMA_REASON_EVICTED);
	return 0;
}

/*
 * On a queue's pool: the send ring in the queue's PD, for local access
 * only (any peer on the queue could reach a remote-readable region in
 * that PD by guessing its rkey, so there are no pulls). Nothing of the
 * pool is committed yet (evrdma__rc_pool_join()): all R credits are withheld.
 */
int
evrdma__rc_pool_setup(struct ch_rdma *rc, struct evrdma_conn *conn)
{
	if (pool_admits(rc->pm.pool, conn) < 0)
		return -1;
	return evrdma__pool_post(rc->pm.pool);
}

/* Established: the channel takes its place in the pool (one data
 * credit: its control credits have no buffers of their own), and grants
 * that credit to the peer. 0, or -1 (ENOBUFS) when the pool has no room
 * any more, and nobody idle enough to evict. */
int
evrdma__rc_pool_join(struct ch_rdma *rc)
{
	struct evrdma__chpool *pool = rc->pm.pool;

	while (!pool_room(pool))
		if (pool_evict(pool) < 0)
			return pool_refuse(pool, rc->conn);
	pool->committed++;
	pool->nchan++;
	pool->join_due = 0;	/* (it is counted now) */
	LIST_INSERT_HEAD(&pool->chans, rc, pm.link);
	rc->pm.joined = 1;
	rc->pm.withheld = rc->slots - 1;
	ctl_grant(rc);		/* it has nothing: the grant goes at once */
	rc->pm.idle_ticks = 0;
	rc->pm.act_mark = rc->rx.msgs + rc->tx.msgs;
	if (pool->evict_ticks)
		pool_tick_arm(pool);
	rc_schedule(rc);
	return 0;
}

/* The connection is over: the channel gives up its place (its control
 * credits, its share, the pool's tick) and keeps only the buffers it
 * still holds for the application, each going back as it lets go
 * (rb_release()), whether or not the application frees the channel. */
void
evrdma__rc_pool_depart(struct ch_rdma *rc)
{
	struct evrdma__chpool *pool = rc->pm.pool;
	unsigned lent = rc->slots - rc->pm.withheld;

	if (!rc->pm.joined)
		return;
	if (lent > rc->rx.held) {
		pool->committed -= lent - rc->rx.held;
		rc->pm.withheld = rc->slots - rc->rx.held;
	}
	pool->nchan--;
	LIST_REMOVE(rc, pm.link);
	rc->pm.joined = 0;
	rc->pm.reclaim_want = rc->pm.reclaim_out = 0;
	evrdma__pool_room_freed(pool);
}

/* Leave the pool: the buffers this channel holds go back to it, or, while
 * the application still references their bytes, when it lets go. */
void
evrdma__rc_pool_leave(struct ch_rdma *rc)
{
	struct evrdma__chpool *pool = rc->pm.pool;
	unsigned i;

	for (i = 0; i < pool->nbuf; i++) {
		if (pool->own[i] != rc)
			continue;
		pool->rb[i].queued = 0;
		if (pool->rb[i].refs) {
			pool->own[i] = NULL;
			pool->orphans++;
		} else {
			evrdma__pool_free(pool, i);
		}
	}
	evrdma__rc_pool_depart(rc);
	/* the buffers it held are free or orphans now */
	pool->committed -= rc->slots - rc->pm.withheld;
	rc->pm.withheld = rc->slots;
	evrdma__pool_room_freed(pool);
}

/* What a pass does first on a queue's pool. */
void
evrdma__rc_pool_pass(struct ch_rdma *rc)
{
	if ((rc->st & (RC_ENDED | RC_CONN_FREED)) == RC_ENDED && rc->conn) {
		/* A pool's receives are not flushed when the connection
		 * ends: what the peer sent before it went is in the queue's
		 * CQ, maybe not polled yet (the end came on the CM's fd).
		 * The end asked for a poll (own_ended()); once a poll has
		 * found the CQ empty, everything is in, and the connection
		 * goes. The poll runs from the loop, not from here: a pass
		 * must not run other connections' completions (and their
		 * owners' callbacks) inside itself. */
		struct evrdma_cq *cq = evrdma__srq_cq(rc->pm.srq);

		if (cq && !cq->dev->dead && cq->emptied == rc->pm.drain_mark) {
			rc_set(rc, RC_AGAIN);
			return;
		}
		evrdma__rc_conn_free(rc);
	} else if (rc->pm.withheld && rc->cr.peer_starved && rc_up(rc)) {
		/* lent on demand (the peer said it is starved, and the
		 * credits due go back at once): a channel that never ran
		 * short keeps the one credit it joined with */
		rc_lend(rc);
	}
}

/* A YIELD of the peer's, answering our RECLAIM (its control credit is
 * counted): 0, or -1 when it broke the rules (the connection is then cut
 * off). */
int
evrdma__pool_yielded(struct ch_rdma *rc, const struct evrdma__ch_imm *m)
{
	unsigned lent = rc->slots - rc->pm.withheld;

	if (!rc->pm.pool || !evrdma__ch_yield_valid(rc->pm.reclaim_out,
	    m->loan, lent, rc->rx.held + rc->cr.ret_data)) {
		evrdma__rc_violation(rc, "a yield of credits not reclaimed");
		return -1;
	}
	if (!evrdma__ch_yield_enough(rc->pm.reclaim_out, m->loan, lent,
	    rc->rx.held + rc->cr.ret_data, rc->pm.reclaim_ret)) {
		evrdma__rc_violation(rc, "a yield short of the credits it held "
		    "unused");
		return -1;
	}
	rc->pm.withheld += m->loan;
	rc->pm.pool->committed -= m->loan;
	rc->pm.reclaim_out = 0;
	if (m->loan)
		evrdma__pool_room_freed(rc->pm.pool);
	return 0;
}

/* Our RECLAIM went (chan_ctl.c): its YIELD is due. */
void
evrdma__pool_reclaim_sent(struct ch_rdma *rc)
{
	rc->pm.reclaim_out = rc->pm.reclaim_want;
	rc->pm.reclaim_want = 0;
	rc->pm.reclaim_ret = 0;
}

/* A buffer of the pool that held one of this channel's messages went
 * back: 1 when its credit is withheld (the connection is over, or the
 * channel holds more than its share), 0 when it is owed to the peer. */
int
evrdma__pool_withhold(struct ch_rdma *rc)
{
	if (rc->pm.joined && !evrdma__rc_over_share(rc))
		return 0;
	rc->pm.withheld++;
	rc->pm.pool->committed--;
	evrdma__pool_room_freed(rc->pm.pool);
	return 1;
}

static void
chpool_fini(struct evrdma__chpool *pool, int husk)
{
	evrdma__ev_free(pool->tick_ev);
	pool->tick_ev = NULL;
	pool->tick_armed = 0;
	if (pool->base)
		evrdma__work_cancel(pool->base, &pool->post_work);
	pool->base = NULL;
	evrdma_mr_free(pool->mr);
	pool->mr = NULL;
}

void
evrdma__chpool_free(struct evrdma__chpool *pool)
{
	evrdma__ev_free(pool->tick_ev);
	if (pool->ring) {
		pool->ring->pool = NULL;
		evrdma__ring_unref(pool->ring);
	}
	free(pool->rb);
	free(pool->own);
	free(pool->free);
	free(pool);
}

/* Draw the receives from @p srq's pool (before the connection's QP
 * exists): the pool, or NULL with errno. */
struct evrdma__chpool *
evrdma__pool_use(struct ch_rdma *rc, struct evrdma_srq *srq)
{
	struct evrdma__chpool *pool = evrdma__srq_chpool(srq);

	if (!pool) {
		evrdma__fail(EINVAL, "not a queue of channels "
		    "(evrdma_channel_srq_new)");
		return NULL;
	}
	if (pool->slot_size != rc->slot_size) {
		evrdma__fail(EINVAL, "the queue's buffers are of %u bytes, the "
		    "channel's slots of %u", pool->slot_size, rc->slot_size);
		return NULL;
	}
	if (!evrdma__srq_alive(srq)) {
		evrdma__fail(EPIPE, "the queue was freed");
		return NULL;
	}
	rc->pm.pool = pool;
	rc->pm.srq = srq;
	rc->pm.withheld = rc->slots;	/* nothing lent before the join */
	evrdma__ep_ref(evrdma__srq_ep(srq));
	return pool;
}

/* The channel goes: its buffers go back to the pool (what input still
 * refers to goes back as an orphan, when its evbuffer lets go). */
void
evrdma__pool_drop(struct ch_rdma *rc)
{
	if (rc->pm.pool)
		evrdma__rc_pool_leave(rc);
}

/* Last: the channel's reference on the queue (its pool lives while the
 * channel's input, freed before, returned its orphans). */
void
evrdma__pool_unref(struct ch_rdma *rc)
{
	if (rc->pm.srq)
		evrdma__srq_drop(rc->pm.srq);
	rc->pm.srq = NULL;
}

const struct evrdma__chpool_ops evrdma__rc_chpool_ops = {
	.fini = chpool_fini,
	.free = evrdma__chpool_free,
};

int
evrdma_channel_srq_set_admission(struct evrdma_srq *srq,
    unsigned evict_idle_ms, unsigned per_address, evrdma_admission_cb cb,
    void *arg)
{
	struct evrdma__chpool *pool = srq ? evrdma__srq_chpool(srq) : NULL;

	if (!pool || evict_idle_ms > 3600000)
		return evrdma__fail(EINVAL, "%s: not a queue of channels "
		    "(evrdma_channel_srq_new), or an idle time over an hour",
		    __func__);
	if (!evrdma__srq_alive(srq))
		return evrdma__fail(EPIPE, "%s: the queue was freed",
		    __func__);
	pool->evict_ticks = (evict_idle_ms + POOL_TICK_MS - 1) / POOL_TICK_MS;
	pool->per_addr = per_address;
	pool->adm_cb = cb;
	pool->adm_arg = arg;
	if (pool->evict_ticks && pool->nchan)
		pool_tick_arm(pool);
	return 0;
}

/* evrdma_channel_srq_new(), whose buffers' receives complete with
 * @p recv_cb (chan_rx.c's, which calls this file: chan_rdma.c passes
 * it). */
struct evrdma_srq *
evrdma__chpool_srq_new(struct evrdma_base *base, const char *device,
    unsigned nbuf, evrdma_req_cb recv_cb)
{
	struct evrdma_srq *srq;
	struct evrdma__chpool *pool;
	void **args = NULL;
	unsigned i;
	int err;

	if (evrdma__base_rdma(base, __func__) < 0)
		return NULL;
	if (nbuf < 16) {
		evrdma__fail(EINVAL, "evrdma_channel_srq_new: %u buffers (16 "
		    "at least)", nbuf);
		return NULL;
	}
	srq = evrdma_srq_new(base, device, nbuf);
	if (!srq)
		return NULL;
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		goto nomem;
	pool->srq = srq;
	pool->base = base;
	pool->nbuf = nbuf;
	/* against a violator's burst: what it takes out of turn before its
	 * connection is torn down (its send queue's worth: a few dozen) */
	pool->reserve = nbuf / 16 < 64 ? nbuf / 16 : 64;
	pool->evict_ticks = 1;		/* a second idle: evictable */
	pool->slot_size = base->cfg.ch_slot_size;
	pool->post_work.fn = evrdma__pool_post_work;
	LIST_INIT(&pool->chans);
	pool->tick_ev = evrdma__ev_timer_new(base, evrdma__pool_tick, pool);
	pool->ring = evrdma__ring_new(NULL, nbuf, pool->slot_size, 0);
	pool->rb = calloc(nbuf, sizeof(*pool->rb));
	pool->own = calloc(nbuf, sizeof(*pool->own));
	pool->free = calloc(nbuf, sizeof(*pool->free));
	args = malloc(nbuf * sizeof(*args));
	if (!pool->ring || !pool->rb || !pool->own || !pool->free || !args ||
	    !pool->tick_ev)
		goto nomem;
	pool->ring->pool = pool;
	evrdma__srq_set_chpool(srq, pool, &evrdma__rc_chpool_ops);
	/* (RLIMIT_MEMLOCK: evrdma__mr_reg() checks, the warm sets giving
	 * way first) */
	pool->mr = evrdma__mr_reg(base, evrdma__srq_pd(srq), pool->ring->mem,
	    pool->ring->len, EVRDMA_ACCESS_LOCAL_WRITE);
	if (!pool->mr)
		goto fail;
	for (i = 0; i < nbuf; i++)
		args[i] = &pool->ring->slot[i];
	if (evrdma__ep_ring_init(evrdma__srq_ep(srq), pool->mr,
	    pool->slot_size, nbuf, recv_cb, args) < 0)
		goto fail;
	free(args);
	for (i = 0; i < nbuf; i++)
		pool->free[pool->nfree++] = nbuf - 1 - i;
	if (evrdma__pool_post(pool) < 0) {
		args = NULL;
		goto fail;
	}
	return srq;
nomem:
	evrdma__fail(ENOMEM, "out of memory");
fail:
	err = errno;
	free(args);
	if (pool && !evrdma__srq_chpool(srq))
		evrdma__chpool_free(pool);	/* else with the queue */
	evrdma_srq_free(srq);
	errno = err;
	return NULL;
}
