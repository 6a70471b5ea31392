/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel's send ring: a work request per entry of the send
 * queue, made once when the QP exists; the messages of a pass chained and
 * posted with one ibv_post_send(); their completions, which come in order,
 * counted back entry by entry. What an entry carried (a slot, a spill
 * chunk, a control message) is the caller's to release (chan_tx.c).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chan_sq.h"
#include "conn.h"

int
evrdma__sq_init(struct ch_rdma *rc, struct evrdma_conn *conn)
{
	unsigned n = evrdma__conn_sq_depth(conn), i;

	rc->sq.wr = calloc(n, sizeof(*rc->sq.wr));
	rc->sq.sge = calloc(n, sizeof(*rc->sq.sge));
	rc->sq.what = calloc(n, sizeof(*rc->sq.what));
	if (!rc->sq.wr || !rc->sq.sge || !rc->sq.what)
		return evrdma__fail(ENOMEM, "out of memory");
	for (i = 0; i < n; i++) {
		rc->sq.wr[i].wr_id = evrdma__wr_ring(rc->tag, RC_WR_SEND, i);
		rc->sq.wr[i].sg_list = &rc->sq.sge[i];
		rc->sq.wr[i].opcode = IBV_WR_SEND_WITH_IMM;
	}
	rc->sq.n = n;
	rc->sq.max_inline = evrdma__conn_max_inline(conn);
	return 0;
}

void
evrdma__sq_fini(struct ch_rdma *rc)
{
	free(rc->sq.wr);
	free(rc->sq.sge);
	free(rc->sq.what);
	rc->sq.wr = NULL;
	rc->sq.sge = NULL;
	rc->sq.what = NULL;
	rc->sq.n = 0;
}

/* The entry before @p e. */
static unsigned
sq_prev(const struct ch_rdma *rc, unsigned e)
{
	return e ? e - 1 : rc->sq.n - 1;
}

/* Entry @p what leaves the ring (@p failed: not sent): counted out, then
 * @p fn releases what it carried. */
static void
sq_give(struct ch_rdma *rc, uint32_t what, int failed,
    void (*fn)(struct ch_rdma *rc, uint32_t what, int failed))
{
	rc->sq.data -= !(what & RC_SQ_CTRL);
	fn(rc, what, failed);
}

int
evrdma__sq_flush(struct ch_rdma *rc, int may_defer,
    void (*fn)(struct ch_rdma *rc, uint32_t what, int failed))
{
	struct ibv_send_wr *head = rc->sq.head, *bad = NULL, *w;
	struct evrdma_conn *conn = rc->conn;
	unsigned n = rc->sq.chained, posted, e;
	int err;

	if (!head)
		return 0;
	rc->sq.head = rc->sq.tail = NULL;
	rc->sq.chained = 0;
	/*
	 * The last is signaled, unless the channel lets its messages wait
	 * now, every send since the last signaled one is such a message,
	 * and fewer than RC_DEFER of them are out: their completions then
	 * come with a later send's, or the drain's at teardown.
	 */
	w = &rc->sq.wr[sq_prev(rc, rc->sq.pos)];
	if (!(w->send_flags & IBV_SEND_SIGNALED) && (!may_defer ||
	    rc->sq.firm || rc->sq.unsig >= RC_DEFER(rc))) {
		w->send_flags |= IBV_SEND_SIGNALED;
		rc->sq.unsig = 0;
		rc->sq.firm = 0;
	}
	err = evrdma__conn_postable(conn) && !evrdma__forked ?
	    evrdma__ep_post_send(&conn->ep, head, &bad) : EPIPE;
	if (!err) {
		evrdma__ep_ring_posted(&conn->ep, n, 0);
		return 0;
	}
	/* the provider posted those before bad; the rest never left */
	posted = 0;
	for (w = head; w && w != bad && err != EPIPE; w = w->next)
		posted++;
	evrdma__ep_ring_posted(&conn->ep, posted, 0);
	e = (unsigned)(bad && err != EPIPE ? bad - rc->sq.wr :
	    head - rc->sq.wr);
	/* those never posted are the last of the outstanding: taken back,
	 * newest first, each its own failure (the caller releases them) */
	while (rc->sq.pos != e) {
		rc->sq.pos = sq_prev(rc, rc->sq.pos);
		rc->sq.out--;
		sq_give(rc, rc->sq.what[rc->sq.pos], 1, fn);
	}
	rc->sq.unsig = 0;
	rc->sq.firm = 0;
	return evrdma__fail(err, "ibv_post_send: %s", strerror(err));
}

int
evrdma__sq_complete(struct ch_rdma *rc, unsigned e, int failed,
    void (*fn)(struct ch_rdma *rc, uint32_t what, int failed))
{
	unsigned k = rc->sq.done, n = 1 + (e >= k ? e - k : rc->sq.n - k + e);

	/* (posted entries only: the chained ones are the newest) */
	if (e >= rc->sq.n || n > rc->sq.out - rc->sq.chained)
		return -1;
	rc->sq.done = e + 1 == rc->sq.n ? 0 : e + 1;
	rc->sq.out -= n;
	for (; k != rc->sq.done; k = k + 1 == rc->sq.n ? 0 : k + 1)
		sq_give(rc, rc->sq.what[k], k == e && failed, fn);
	return (int)n;
}

void
evrdma__sq_drain(struct ch_rdma *rc)
{
	struct ibv_send_wr *bad = NULL, *w;
	unsigned e;

	if (!rc->sq.n || rc->sq.out == rc->sq.chained || !evrdma__sq_room(rc))
		return;		/* nothing posted waits, or no entry left */
	/* (chained: it goes last, after the pass's messages; flushed, it
	 * never reaches the peer) */
	e = rc->sq.pos;
	evrdma__sq_add(rc, NULL, 0, 0, 0, RC_SQ_DRAIN, 0);
	w = &rc->sq.wr[e];
	w->send_flags = IBV_SEND_SIGNALED;
	rc->sq.unsig = 0;
	rc->sq.firm = 0;
	if (rc->sq.head != w)
		return;		/* the pass posts it with its chain */
	rc->sq.head = rc->sq.tail = NULL;
	rc->sq.chained = 0;
	if (evrdma__ep_post_send(&rc->conn->ep, w, &bad) == 0) {
		evrdma__ep_ring_posted(&rc->conn->ep, 1, 0);
	} else {
		rc->sq.pos = e;
		rc->sq.out--;
	}
}

void
evrdma__sq_forget(struct ch_rdma *rc,
    void (*fn)(struct ch_rdma *rc, uint32_t what, int failed))
{
	unsigned posted = rc->sq.out - rc->sq.chained;

	if (rc->conn)
		evrdma__ep_ring_forget(&rc->conn->ep, posted, 0);
	rc->sq.head = rc->sq.tail = NULL;
	rc->sq.chained = 0;
	while (rc->sq.out) {
		unsigned k = rc->sq.done;

		rc->sq.done = k + 1 == rc->sq.n ? 0 : k + 1;
		rc->sq.out--;
		sq_give(rc, rc->sq.what[k], 1, fn);
	}
}
