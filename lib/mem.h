/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: locked memory (mem.c): what is registered, against
 * RLIMIT_MEMLOCK, and a region's deregistration.
 */
#ifndef EVRDMA_MEM_H_INCLUDED_
#define EVRDMA_MEM_H_INCLUDED_

#include <stddef.h>
#include <sys/types.h>

struct evrdma_mr;

/* Whether @p bytes more could be registered within RLIMIT_MEMLOCK: 0, or
 * -1 with errno ENOMEM and a message naming the limit. */
int evrdma__mem_pin_check(size_t bytes);
/* Registered bytes (whole pages) counted up or down. */
void evrdma__mem_pin_add(ssize_t bytes);
/* The whole pages [addr, addr + len) spans, in bytes. */
size_t evrdma__page_span(const void *addr, size_t len);
/* The device forgets @p mr: no peer reaches it any more. At once, also
 * from a completion's dispatch: a freed region's memory is the
 * application's again from its last request's callback on (evrdma/mr.h;
 * a peer's WRITE to its rkey found that memory when this waited for the
 * end of the poll pass). */
void evrdma__mr_dereg(struct evrdma_mr *mr);

#endif /* EVRDMA_MEM_H_INCLUDED_ */
