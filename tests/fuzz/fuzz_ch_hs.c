/*
 * libFuzzer harness: the channel handshake a peer sends (lib/wire.c).
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
	struct evrdma__ch_hs hs;
	uint8_t again[EVRDMA_CH_HS_LEN];

	if (evrdma__ch_hs_decode(data, size, &hs) != EVRDMA_CH_HS_OK)
		return 0;
	/* what was accepted is in range and says exactly what came */
	if (hs.slots < EVRDMA_CH_SLOTS_MIN || hs.slots > EVRDMA_CH_SLOTS_MAX ||
	    hs.ctrl < EVRDMA_CH_CTRL_MIN || hs.slot_size % 64 ||
	    hs.slot_size > EVRDMA_CH_SLOT_MAX || hs.mode > 1)
		abort();
	if (hs.src_rkey &&
	    hs.src_base + (uint64_t)hs.slots * hs.slot_size < hs.src_base)
		abort();
	evrdma__ch_hs_encode(again, &hs);
	if (memcmp(again, data, EVRDMA_CH_HS_LEN) != 0)
		abort();
	return 0;
}
