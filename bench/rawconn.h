/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/* evrdma-rawpp --conn-rate (rawconn.c) */
#ifndef EVRDMA_BENCH_RAWCONN_H
#define EVRDMA_BENCH_RAWCONN_H

#include <stddef.h>
#include <stdint.h>
#include <netdb.h>

#include <rdma/rdma_cma.h>

/* (rawpp.c) CLOCK_MONOTONIC in nanoseconds. */
uint64_t evrdma_raw_now_ns(void);
/* (rawpp.c) Wait (blocking) for the next event of @p ec, which must be
 * @p want (its id into *@p id unless NULL): 0, or -1 (said on stderr). */
int evrdma_raw_cm_wait(struct rdma_event_channel *ec,
    enum rdma_cm_event_type want, struct rdma_cm_id **id);

/* Serve or make @p n connections one after another, each with one
 * @p size-byte ping and its echo: 0, or -1 (said on stderr). */
int evrdma_rawconn(int server, const struct addrinfo *ai, long n,
    size_t size);

#endif
