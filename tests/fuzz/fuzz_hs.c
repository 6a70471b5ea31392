/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * libFuzzer harness: the evrdma connection handshake at the start of a
 * peer's rdma_cm private data (lib/wire.c).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct evrdma__hs hs;
	const uint8_t *p;
	size_t plen;
	int type, vbad;

	if (evrdma__hs_decode(data, size, &hs) == 0) {
		uint8_t again[EVRDMA_HS_LEN];

		evrdma__hs_encode(again, &hs);
		if (memcmp(again, data, EVRDMA_HS_LEN) != 0)
			abort();
	}
	for (type = EVRDMA_HS_CONNECT; type <= EVRDMA_HS_REJECT; type++) {
		if (evrdma__hs_payload(data, size, type, &p, &plen, &vbad))
			continue;
		/* the payload lies within what came */
		if (p < data || p + plen > data + size)
			abort();
	}
	return 0;
}
