/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel's RDMA transport: the spill, registered memory for
 * the part of a large write that the free send slots cannot take. Without
 * it those bytes went into output, and then again into a slot once one was
 * free: a 1 MiB write copied most of its bytes twice (bench/README.md).
 * Spilled, they are copied once, into a chunk of their own, and go from
 * where they are when they reach output's front: pulled by the peer (a
 * wide pull descriptor names the chunk's address and rkey), or sent.
 *
 * A chunk is a ring of one slot (chan_ring.c: fresh pages, left out of a
 * forked child, alive while a reference into it is) and its wide pull
 * descriptor, registered on the connection's own protection domain. Where
 * the peer pulls, it may READ the chunk (as it may the send ring): every
 * byte ever in it is a byte written to that peer. Elsewhere it is for
 * local access only. Its memory is the channel's to reuse once its send
 * completed and, when pulled, the peer reported the pull done, or once
 * output dropped it. The chunks stay while they are in use, up to
 * RC_SPILL_MAX bytes per channel and RC_SPILL_BASE_MAX per base, and go
 * back (deregistered) once nothing is in flight and output is empty, and
 * with the connection.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chan_rdma.h"

/* Output dropped a spilled chunk without sending it, or sent it (its
 * state says which): the chunk is free again, its memory the channel's. */
static void
spill_cleanup(const void *data, size_t len, void *arg)
{
	struct ch_slotref *ref = arg;
	struct ch_ring *ring = ref->ring;
	struct ch_rdma *rc = ring->owner;

	(void)data;
	(void)len;
	if (rc && rc->sp.c[ref->idx].state == SPILL_STAGED) {
		/* dropped unsent: its bytes were never the peer's, and where
		 * it pulls it may still READ the chunk (its address and key
		 * went out with an earlier pull of it), so they go, as a send
		 * slot's do (doc/SECURITY.md) */
		memset(ring->mem, 0, ring->len);
		rc->sp.c[ref->idx].state = SPILL_FREE;
		rc->sp.busy--;
	}
	evrdma__ring_unref(ring);
}

/* A free chunk, or a new one while the channel's spill is under its
 * limit: its index, or -1. */
static int
spill_take(struct ch_rdma *rc)
{
	size_t chunk = rc_chunk(rc);
	struct ch_spill *s;
	unsigned i;

	for (i = 0; i < rc->sp.n; i++) {
		unsigned k = (rc->sp.next + i) % rc->sp.n;

		if (rc->sp.c[k].state == SPILL_FREE) {
			rc->sp.next = (k + 1) % rc->sp.n;
			return (int)k;
		}
	}
	if (chunk < RC_SPILL_CHUNK_MIN)
		return -1;	/* (rc_write_large() does not ask) */
	if (!rc->sp.c) {
		rc->sp.cap = (unsigned)(RC_SPILL_MAX / chunk);
		if (!rc->sp.cap)
			return -1;
		rc->sp.c = calloc(rc->sp.cap, sizeof(*rc->sp.c));
		if (!rc->sp.c)
			return -1;
	}
	if (rc->sp.n == rc->sp.cap ||
	    rc_base(rc)->spill_bytes + chunk > RC_SPILL_BASE_MAX)
		return -1;
	s = &rc->sp.c[rc->sp.n];
	s->ring = evrdma__ring_new(rc, 1, chunk, EVRDMA_CH_PULL_WIDE_LEN);
	if (!s->ring)
		return -1;
	/* (its rkey leaves only in a pull descriptor to a peer that pulls) */
	s->mr = evrdma__mr_reg(rc_base(rc), evrdma__conn_pd(rc->conn),
	    s->ring->mem, s->ring->len,
	    rc->pullable ? EVRDMA_ACCESS_REMOTE_READ : 0);
	if (!s->mr) {
		evrdma__log(EVRDMA_LOG_DEBUG, "channel %p: no spill: %s",
		    (void *)rc, strerror(errno));
		s->ring->owner = NULL;
		evrdma__ring_unref(s->ring);
		s->ring = NULL;
		return -1;
	}
	s->ring->slot[0].idx = rc->sp.n;
	s->state = SPILL_FREE;
	rc_base(rc)->spill_bytes += chunk;
	return (int)rc->sp.n++;
}

size_t
evrdma__spill_write(struct ch_rdma *rc, struct evbuffer *out,
    const uint8_t *p, size_t len)
{
	size_t chunk = rc_chunk(rc), done = 0;

	/* only while connected: a chunk is registered on the connection's
	 * protection domain */
	if (!rc_up(rc))
		return 0;
	/* whole chunks, and a last piece big enough to be sent alone (see
	 * rc_send_data); a smaller rest is coalesced in output */
	while (len - done >= chunk / 2 && len - done >= STAGE_MIN) {
		size_t n = len - done < chunk ? len - done : chunk;
		int k = spill_take(rc);
		struct ch_spill *s;

		if (k < 0)
			break;
		s = &rc->sp.c[k];
		memcpy(s->ring->mem, p + done, n);
		/* staged before the add, as a slot (slot_stage()) */
		s->ring->refs++;
		s->state = SPILL_STAGED;
		rc->sp.busy++;
		if (evbuffer_add_reference(out, s->ring->mem, n, spill_cleanup,
		    &s->ring->slot[0]) < 0) {
			/* the chunk stays free, and a peer that pulled from it
			 * before knows where it is: it holds nothing meant for
			 * the peer (as a dropped slot, evrdma__slot_drop) */
			rc->sp.busy--;
			s->state = SPILL_FREE;
			memset(s->ring->mem, 0, n);
			s->ring->refs--;
			break;
		}
		done += n;
	}
	return done;
}

int
evrdma__spill_find(const struct ch_rdma *rc, const void *addr)
{
	unsigned k;

	for (k = 0; k < rc->sp.n; k++)
		if (rc->sp.c[k].state == SPILL_STAGED &&
		    rc->sp.c[k].ring->mem == addr)
			return (int)k;
	return -1;
}

/* Every chunk goes: deregistered, and its memory with the last reference
 * into it (output may still hold some). */
static void
spill_free_all(struct ch_rdma *rc)
{
	unsigned k;

	for (k = 0; k < rc->sp.n; k++) {
		struct ch_spill *s = &rc->sp.c[k];

		evrdma_mr_free(s->mr);
		s->ring->owner = NULL;
		evrdma__ring_unref(s->ring);
	}
	/* (a base that is gone took every region with it) */
	if (rc_base(rc))
		rc_base(rc)->spill_bytes -= (size_t)rc->sp.n * rc_chunk(rc);
	free(rc->sp.c);
	rc->sp.c = NULL;
	rc->sp.n = rc->sp.cap = rc->sp.next = 0;
	rc->sp.busy = 0;
}

/* Chunk @p k is free again: its send completed and, when pulled, the
 * pull is done. The burst is over when none is busy: the memory goes
 * back. */
static void
spill_done(struct ch_rdma *rc, unsigned k)
{
	rc->sp.c[k].state = SPILL_FREE;
	rc->sp.busy--;
	evrdma__spill_idle(rc);
}

void
evrdma__spill_idle(struct ch_rdma *rc)
{
	if (rc->sp.c && !rc->sp.busy && !evrdma__chan_out_len(&rc->ch))
		spill_free_all(rc);
}

const struct ch_spill *
evrdma__spill_posting(struct ch_rdma *rc, unsigned k, int pull)
{
	struct ch_spill *s = &rc->sp.c[k];

	s->state = SPILL_POSTED;
	s->flags = pull ? SF_PULL : 0;
	return s;
}

int
evrdma__spill_sent(struct ch_rdma *rc, unsigned k, int failed)
{
	struct ch_spill *s;

	if (k >= rc->sp.n || rc->sp.c[k].state != SPILL_POSTED ||
	    !rc->sp.busy || (rc->sp.c[k].flags & SF_SENT))
		return -1;
	s = &rc->sp.c[k];
	s->flags |= SF_SENT;
	/* (a failed send: the peer never learns of the pull, and the
	 * connection is over) */
	if (!(s->flags & SF_PULL) || (s->flags & SF_PULLED) || failed)
		spill_done(rc, k);
	return 0;
}

int
evrdma__spill_pulled(struct ch_rdma *rc, unsigned k)
{
	struct ch_spill *s;

	/* freed already, or every chunk gone with it: its send failed, and
	 * the connection is ending (a pull reported done by a message
	 * polled after that failure) */
	if (k >= rc->sp.n)
		return 0;
	s = &rc->sp.c[k];
	if (!(s->flags & SF_PULL))
		return -1;
	if (s->state != SPILL_POSTED)
		return 0;
	if (s->flags & SF_PULLED)
		return -1;
	s->flags |= SF_PULLED;
	if (s->flags & SF_SENT)
		spill_done(rc, k);
	return 0;
}

void
evrdma__spill_end(struct ch_rdma *rc)
{
	if (rc->sp.c)
		spill_free_all(rc);
}
