/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel transport's send slots (rc->tx, chan_tx.c's), private:
 * what the other parts of the transport change of them, through these
 * alone (tools/check-owners).
 */
#ifndef EVRDMA_CHAN_TX_H_INCLUDED_
#define EVRDMA_CHAN_TX_H_INCLUDED_

#include "chan_rdma.h"

/* A free send slot, keeping @p reserve free for the copy path: its index,
 * or -1. */
int evrdma__slot_alloc(struct ch_rdma *rc, unsigned reserve);
void evrdma__slot_release(struct ch_rdma *rc, unsigned idx);
/* A slot goes back unsent: its first @p len bytes zeroed first. */
void evrdma__slot_drop(struct ch_rdma *rc, unsigned idx, size_t len);

/* Copy @p len bytes into a free send slot (one stays for the copy path).
 * @return the slot, or -1 when none is free. (Inline, and the slot after
 * the last one taken, which is free in steady state, is taken without a
 * call: every write that fits a slot comes here.) */
static inline int
evrdma__slot_copy(struct ch_rdma *rc, const void *data, size_t len)
{
	unsigned next = rc->tx.next;
	int idx;

	if (rc->tx.nfree > 1 && rc->tx.state[next] == SLOT_FREE) {
		/* (what evrdma__slot_alloc() finds first) */
		rc->tx.next = next + 1 == rc->slots ? 0 : next + 1;
		rc->tx.nfree--;
		idx = (int)next;
	} else if ((idx = evrdma__slot_alloc(rc, 1)) < 0) {
		return -1;
	}
	memcpy(slot_mem(rc, (unsigned)idx), data, len);
	return idx;
}

/* Slot @p idx holds a write to be sent as it is (open, reserved). */
static inline void
evrdma__slot_mark(struct ch_rdma *rc, unsigned idx, uint8_t state)
{
	rc->tx.state[idx] = state;
}

/* The peer's data credits came back: a stall of output ends (counted;
 * the clock is read only here and when it begins). */
static inline void
evrdma__tx_credits_came(struct ch_rdma *rc)
{
	if (rc->tx.stall_t0) {
		rc->tx.stall_us += evrdma__now_us() - rc->tx.stall_t0;
		rc->tx.stall_t0 = 0;
	}
}

#endif /* EVRDMA_CHAN_TX_H_INCLUDED_ */
