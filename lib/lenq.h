/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: a queue of message lengths, private. A message channel's input
 * and output are evbuffers of bytes; the boundaries between the messages
 * in them are kept beside, here, in order, with their sum.
 */
#ifndef EVRDMA_LENQ_H_INCLUDED_
#define EVRDMA_LENQ_H_INCLUDED_

#include <stddef.h>

struct evrdma__lenq {
	size_t *v;
	unsigned head, count, cap;
	size_t bytes;			/* their sum */
};

/* Room for one more length: then a push cannot fail. */
int evrdma__lenq_reserve(struct evrdma__lenq *q);
int evrdma__lenq_push(struct evrdma__lenq *q, size_t len);
int evrdma__lenq_push_front(struct evrdma__lenq *q, size_t len);
size_t evrdma__lenq_pop(struct evrdma__lenq *q);
/* The last length pushed leaves (a push undone). */
size_t evrdma__lenq_pop_back(struct evrdma__lenq *q);

static inline size_t
evrdma__lenq_front(const struct evrdma__lenq *q)
{
	return q->count ? q->v[q->head] : 0;
}

#endif
