/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * libFuzzer harness: the immediate data of channel messages, and the
 * credit rules a peer's returns are checked against (lib/wire.c).
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
	struct evrdma__ch_imm m;
	uint32_t imm, in_hand, granted;

	if (size < 12)
		return 0;
	imm = (uint32_t)data[0] << 24 | (uint32_t)data[1] << 16 |
	    (uint32_t)data[2] << 8 | data[3];
	memcpy(&in_hand, data + 4, 4);
	memcpy(&granted, data + 8, 4);
	granted %= 4097;
	if (evrdma__ch_imm_decode(imm, &m) == 0) {
		if (evrdma__ch_imm_encode(&m) != imm ||
		    (m.pull && m.type != EVRDMA_CH_DATA))
			abort();
		/* a LOAN returns no data credit; nothing else lends */
		if (m.type == EVRDMA_CH_LOAN ? m.dret != 0 :
		    m.loan != 0 || m.yield != 0)
			abort();
		/* an honest yield never takes more than the peer holds
		 * unused, nor more than was asked */
		if (evrdma__ch_yield_valid(in_hand % 4097, m.loan, granted,
		    m.cret) && (m.loan > in_hand % 4097 ||
		    (uint64_t)m.loan + m.cret > granted))
			abort();
		/* an accepted return never lifts the credits past the grant */
		if (evrdma__ch_return_valid(in_hand, m.dret, granted) &&
		    (uint64_t)in_hand + m.dret > granted)
			abort();
	}
	return 0;
}
