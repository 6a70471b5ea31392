/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * libFuzzer harness: a pull descriptor a peer sends, checked against its
 * send ring (or, wide, only its range) and our receive buffer (lib/wire.c).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct evrdma__ch_pull p;
	const char *why = NULL;
	unsigned slots;
	uint32_t peer_size, our_size;

	if (size < 6)
		return 0;
	/* the ring parameters as a handshake could have given them */
	slots = 2 + (data[0] | data[1] << 8) % 4095;
	peer_size = 64u * (1 + (data[2] | data[3] << 8) % 65536);
	our_size = 64u * (1 + (data[4] | data[5] << 8) % 65536);
	if (evrdma__ch_pull_decode(data + 6, size - 6, slots, peer_size,
	    our_size, &p, &why) == 0) {
		/* a READ of what was accepted stays in the peer's slot and
		 * in our buffer */
		if (!p.len || p.len > our_size)
			abort();
		if (p.wide ? p.addr > UINT64_MAX - p.len :
		    p.slot >= slots || p.len > peer_size)
			abort();
	} else if (!why) {
		abort();
	}
	return 0;
}
