/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel transport's send ring (rc->sq, chan_sq.c's), private:
 * what the other parts of the transport change of it, through these
 * alone (tools/check-owners).
 */
#ifndef EVRDMA_CHAN_SQ_H_INCLUDED_
#define EVRDMA_CHAN_SQ_H_INCLUDED_

#include "chan_rdma.h"

/* Chain a message of the channel's for the pass's post: @p len bytes at
 * @p va of @p mr (device address @p iova: an SGE's), with immediate
 * @p imm, carrying @p what. The caller checked evrdma__sq_room(). (Inline:
 * once per message.) */
static inline void
evrdma__sq_add(struct ch_rdma *rc, const struct evrdma_mr *mr, size_t off,
    size_t len, uint32_t imm, uint32_t what, int deferrable)
{
	unsigned e = rc->sq.pos;
	struct ibv_send_wr *w = &rc->sq.wr[e];
	struct ibv_sge *g = &rc->sq.sge[e];

	rc->sq.pos = e + 1 == rc->sq.n ? 0 : e + 1;
	rc->sq.out++;
	rc->sq.chained++;
	rc->sq.what[e] = what;
	rc->sq.data += !(what & RC_SQ_CTRL);
	w->next = NULL;
	w->imm_data = htonl(imm);
	if (len) {
		/* (inline data is copied by the provider from the process's
		 * address; otherwise the device's: zero-based regions
		 * differ) */
		if (len <= rc->sq.max_inline) {
			g->addr = (uintptr_t)mr->addr + off;
			w->send_flags = IBV_SEND_INLINE;
		} else {
			g->addr = evrdma__mr_sge_addr(mr, off);
			w->send_flags = 0;
		}
		g->length = (uint32_t)len;
		g->lkey = mr->mr->lkey;
		w->num_sge = 1;
	} else {
		w->send_flags = 0;
		w->num_sge = 0;
	}
	if (!deferrable)
		rc->sq.firm = 1;
	if (++rc->sq.unsig >= 16) {
		w->send_flags |= IBV_SEND_SIGNALED;
		rc->sq.unsig = 0;
		rc->sq.firm = 0;
	}
	if (rc->sq.tail)
		rc->sq.tail->next = w;
	else
		rc->sq.head = w;
	rc->sq.tail = w;
}

#endif /* EVRDMA_CHAN_SQ_H_INCLUDED_ */
