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

static unsigned
get16(const uint8_t *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

/*
 * The lender's checks of a LOAN's fields (a peer's numbers): a RECLAIM it
 * accepts leaves a credit lent; a YIELD it accepts is at most what was
 * asked and held; and an honest borrower's YIELD (evrdma__ch_yield_amount()
 * of whatever it really held: at least what the lender can prove, at most
 * what it lent and was not used) is never taken for a short one.
 */
static void
loan_rules(const uint8_t *d)
{
	unsigned asked = get16(d) % 16384, lent = get16(d + 2) % 16384;
	unsigned unret = get16(d + 4) % 16384, since = get16(d + 6) % 16384;
	unsigned held, least, yielded = get16(d + 8) % 16384;
	unsigned granted = get16(d + 10) % 16385;

	if (evrdma__ch_reclaim_valid(asked, granted) &&
	    (asked == 0 || asked >= granted))
		abort();
	if (evrdma__ch_yield_valid(asked, yielded, lent, unret) &&
	    (yielded > asked || unret > lent || yielded > lent - unret))
		abort();
	if (unret > lent)
		return;
	least = (unsigned long)unret + since >= lent ? 0 :
	    lent - unret - since;
	held = least + get16(d + 12) % (lent - unret - least + 1);
	if (!evrdma__ch_yield_enough(asked, evrdma__ch_yield_amount(asked,
	    held), lent, unret, since))
		abort();
}

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
		    (m.pull && m.type != EVRDMA_CH_DATA) ||
		    (m.reset && m.type != EVRDMA_CH_EOF))
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
	if (size >= 32)
		loan_rules(data + 12);
	return 0;
}
