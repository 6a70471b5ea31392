/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * libFuzzer harness: the channel handshake a peer sends (lib/wire.c).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t signed_[64];

	check(data, size);
	/* The check value is what a mutation almost never gets right: the
	 * same bytes signed, so that every range check is reached too. */
	if (size >= EVRDMA_CH_HS_LEN && size <= sizeof(signed_)) {
		uint32_t h;

		memcpy(signed_, data, size);
		h = evrdma__fnv1a(signed_, 28);
		signed_[28] = (uint8_t)(h >> 24);
		signed_[29] = (uint8_t)(h >> 16);
		signed_[30] = (uint8_t)(h >> 8);
		signed_[31] = (uint8_t)h;
		check(signed_, size);
	}
	return 0;
}

static void
check(const uint8_t *data, size_t size)
{
	struct evrdma__ch_hs hs;
	uint8_t again[EVRDMA_CH_HS_LEN];

	if (evrdma__ch_hs_decode(data, size, &hs) != EVRDMA_CH_HS_OK)
		return;
	/* what was accepted is in range and says exactly what came */
	if (hs.slots < EVRDMA_CH_SLOTS_MIN || hs.slots > EVRDMA_CH_SLOTS_MAX ||
	    hs.ctrl < EVRDMA_CH_CTRL_MIN || hs.slot_size % 64 ||
	    hs.slot_size > EVRDMA_CH_SLOT_MAX || hs.mode > 1 || hs.lend > 1)
		abort();
	if (hs.src_rkey &&
	    hs.src_base + (uint64_t)hs.slots * hs.slot_size < hs.src_base)
		abort();
	evrdma__ch_hs_encode(again, &hs);
	if (memcmp(again, data, EVRDMA_CH_HS_LEN) != 0)
		abort();
}
