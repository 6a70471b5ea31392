/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * libFuzzer harness: evrdma_remote_decode(), for descriptors received from
 * an untrusted peer (lib/wire.c).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <evrdma/mr.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct evrdma_remote rem;
	uint8_t again[EVRDMA_REMOTE_ENCODED_LEN];

	if (evrdma_remote_decode(&rem, data, size) != 0)
		return 0;
	if (!rem.len || rem.addr + rem.len < rem.addr)
		abort();
	if (evrdma_remote_encode(&rem, again, sizeof(again)) !=
	    EVRDMA_REMOTE_ENCODED_LEN ||
	    memcmp(again, data, sizeof(again)) != 0)
		abort();
	return 0;
}
