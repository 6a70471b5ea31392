/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the registry of rings of work requests that their owners keep
 * (evrdma-internal.h, "rings"): an entry per owner, not per request, so
 * that the poll hands a completion to its owner with one bounded lookup,
 * and drops one whose owner is gone (the entry's generation); and the
 * owners' passes that those completions made due, run at the poll's end
 * in the order they came, not through the base's general work queue.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "evrdma-internal.h"

uint64_t
evrdma__rings_add(struct evrdma_base *base,
    const struct evrdma__rings_ops *ops, void *owner)
{
	struct evrdma__rings *r = &base->rings;
	struct evrdma__rings_entry *e;
	uint32_t id;

	if (!r->nfree) {
		uint32_t n = r->n ? r->n * 2 : 64, i;
		struct evrdma__rings_entry *ne;
		uint32_t *nf;

		if (n > EVRDMA__WR_ID_MAX || !(ne = realloc(r->e,
		    n * sizeof(*ne)))) {
			evrdma__fail(ENOMEM, "no room for another ring");
			return 0;
		}
		r->e = ne;
		if (!(nf = realloc(r->free, n * sizeof(*nf)))) {
			evrdma__fail(ENOMEM, "no room for another ring");
			return 0;
		}
		r->free = nf;
		for (i = n; i > r->n; i--) {
			r->e[i - 1].owner = NULL;
			r->e[i - 1].gen = 0;
			r->e[i - 1].ready = 0;
			r->free[r->nfree++] = i - 1;
		}
		r->n = n;
	}
	id = r->free[--r->nfree];
	e = &r->e[id];
	/* a generation the entry's last owner did not have: completions
	 * of that one still to be polled are dropped */
	e->gen = (e->gen + 1) & EVRDMA__WR_GEN_MASK;
	e->owner = owner;
	e->ops = ops;
	return EVRDMA__WR_RING | (uint64_t)id << EVRDMA__WR_ID_SHIFT |
	    (uint64_t)e->gen << EVRDMA__WR_GEN_SHIFT;
}

/* Take entry @p id off the ready list (it is on it). */
static void
rings_unready(struct evrdma__rings *r, uint32_t id)
{
	uint32_t prev = EVRDMA__RINGS_NONE, k;

	for (k = r->ready_head; k != id; k = r->e[k].ready_next)
		prev = k;
	if (prev == EVRDMA__RINGS_NONE)
		r->ready_head = r->e[id].ready_next;
	else
		r->e[prev].ready_next = r->e[id].ready_next;
	if (r->ready_tail == id)
		r->ready_tail = prev;
	r->e[id].ready = 0;
}

int
evrdma__rings_del(struct evrdma_base *base, uint64_t tag)
{
	struct evrdma__rings *r = &base->rings;
	uint32_t id = (uint32_t)(tag >> EVRDMA__WR_ID_SHIFT) &
	    (EVRDMA__WR_ID_MAX - 1);
	int was_ready;

	if (!tag || id >= r->n || !r->e[id].owner)
		return 0;
	/* (the list walk: only for an owner that goes with its pass due,
	 * and the list holds those of one poll) */
	was_ready = r->e[id].ready;
	if (was_ready)
		rings_unready(r, id);
	r->e[id].owner = NULL;
	r->free[r->nfree++] = id;
	return was_ready;
}

void
evrdma__rings_init(struct evrdma__rings *r)
{
	r->ready_head = r->ready_tail = EVRDMA__RINGS_NONE;
}

/*
 * Each entry is taken off before its pass runs, so a pass may make its
 * own due again, or another's, or end its owner (rings_del() unlinks a
 * ready one): the walk always reads the list's head afresh. It ends: a
 * pass runs outside a poll (the owner's own scheduling then goes to the
 * general work queue), and only a poll inside a pass adds to the list,
 * with completions that came.
 */
void
evrdma__rings_run(struct evrdma__rings *r)
{
	uint32_t id;

	while ((id = r->ready_head) != EVRDMA__RINGS_NONE) {
		struct evrdma__rings_entry *e = &r->e[id];

		r->ready_head = e->ready_next;
		if (r->ready_head == EVRDMA__RINGS_NONE)
			r->ready_tail = EVRDMA__RINGS_NONE;
		e->ready = 0;
		e->ops->pass(e->owner);
	}
}

void
evrdma__rings_fini(struct evrdma_base *base)
{
	free(base->rings.e);
	free(base->rings.free);
	base->rings.e = NULL;
	base->rings.free = NULL;
	base->rings.n = base->rings.nfree = 0;
	evrdma__rings_init(&base->rings);
}
