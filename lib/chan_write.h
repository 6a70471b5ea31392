/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel transport's writes straight into slots (rc->wr,
 * chan_write.c's), private: what the other parts of the transport
 * change of them, through these alone (tools/check-owners).
 */
#ifndef EVRDMA_CHAN_WRITE_H_INCLUDED_
#define EVRDMA_CHAN_WRITE_H_INCLUDED_

#include "chan_rdma.h"

/* The read callbacks' open write, taken for the pass's send: its slot
 * (and *@p len), or -1 when there is none. */
static inline int
evrdma__wr_take_open(struct ch_rdma *rc, size_t *len)
{
	int idx = rc->wr.wopen;

	*len = rc->wr.wopen_len;
	rc->wr.wopen = -1;
	return idx;
}

#endif /* EVRDMA_CHAN_WRITE_H_INCLUDED_ */
