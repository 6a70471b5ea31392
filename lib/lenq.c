/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: a queue of message lengths (lenq.h): a ring of size_t that
 * doubles when full.
 */
#include "config.h"

#include <stdlib.h>

#include "lenq.h"

int
evrdma__lenq_reserve(struct evrdma__lenq *q)
{
	if (q->count == q->cap) {
		unsigned ncap = q->cap ? q->cap * 2 : 16, i;
		size_t *nv = malloc(ncap * sizeof(*nv));

		if (!nv)
			return -1;
		for (i = 0; i < q->count; i++)
			nv[i] = q->v[(q->head + i) % q->cap];
		free(q->v);
		q->v = nv;
		q->head = 0;
		q->cap = ncap;
	}
	return 0;
}

int
evrdma__lenq_push(struct evrdma__lenq *q, size_t len)
{
	if (evrdma__lenq_reserve(q) < 0)
		return -1;
	q->v[(q->head + q->count++) % q->cap] = len;
	q->bytes += len;
	return 0;
}

int
evrdma__lenq_push_front(struct evrdma__lenq *q, size_t len)
{
	if (evrdma__lenq_push(q, len) < 0)	/* makes room */
		return -1;
	q->count--;
	q->head = (q->head + q->cap - 1) % q->cap;
	q->v[q->head] = len;
	q->count++;
	return 0;
}

size_t
evrdma__lenq_pop(struct evrdma__lenq *q)
{
	size_t len;

	if (!q->count)
		return 0;
	len = q->v[q->head];
	q->head = (q->head + 1) % q->cap;
	q->count--;
	q->bytes -= len;
	return len;
}

size_t
evrdma__lenq_pop_back(struct evrdma__lenq *q)
{
	size_t len;

	if (!q->count)
		return 0;
	len = q->v[(q->head + --q->count) % q->cap];
	q->bytes -= len;
	return len;
}
