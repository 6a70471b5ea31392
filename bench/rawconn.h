/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/* evrdma-rawpp --conn-rate (rawconn.c) */
#ifndef EVRDMA_BENCH_RAWCONN_H
#define EVRDMA_BENCH_RAWCONN_H

#include <stddef.h>
#include <netdb.h>

/* Serve or make @p n connections one after another, each with one
 * @p size-byte ping and its echo: 0, or -1 (said on stderr). */
int evrdma_rawconn(int server, const struct addrinfo *ai, long n,
    size_t size);

#endif
