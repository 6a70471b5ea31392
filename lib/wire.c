/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: encoding, decoding and validation of what goes on the wire (see
 * wire.h). Every decoder takes bytes from the network: it reads nothing
 * beyond the length it is given and accepts nothing out of range.
 */
#include "config.h"

#include <string.h>

#include <errno.h>

#include <evrdma/mr.h>
#include "wire.h"

/* errno = err; return -1 with a message (util.c) */
int evrdma__fail(int err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define HS_MAGIC0	'E'
#define HS_MAGIC1	'V'
#define HS_MAGIC2	'R'
#define CH_MAGIC0	'C'
#define CH_MAGIC1	'H'
/* remote descriptor: magic[2] version reserved rkey[4] addr[8] len[8] */
#define REMOTE_MAGIC0	'E'
#define REMOTE_MAGIC1	'M'
#define REMOTE_VERSION	1

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void
put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static void
put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}

static uint64_t
get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

uint32_t
evrdma__fnv1a(const uint8_t *p, size_t len)
{
	uint32_t h = 2166136261u;

	while (len--) {
		h ^= *p++;
		h *= 16777619u;
	}
	return h;
}

/* ---- connection handshake ---- */

void
evrdma__hs_encode(uint8_t out[EVRDMA_HS_LEN], const struct evrdma__hs *hs)
{
	out[0] = HS_MAGIC0;
	out[1] = HS_MAGIC1;
	out[2] = HS_MAGIC2;
	out[3] = hs->version;
	out[4] = hs->type;
	put16(out + 5, hs->flags);
	out[7] = hs->code;
}

int
evrdma__hs_decode(const uint8_t *buf, size_t len, struct evrdma__hs *hs)
{
	if (buf == NULL || len < EVRDMA_HS_LEN || buf[0] != HS_MAGIC0 ||
	    buf[1] != HS_MAGIC1 || buf[2] != HS_MAGIC2)
		return -1;
	hs->version = buf[3];
	hs->type = buf[4];
	hs->flags = get16(buf + 5);
	hs->code = buf[7];
	return 0;
}

int
evrdma__hs_payload(const uint8_t *buf, size_t len, int type,
    const uint8_t **data, size_t *data_len, int *version_bad)
{
	struct evrdma__hs hs;

	*version_bad = 0;
	if (evrdma__hs_decode(buf, len, &hs) < 0 || hs.type != type)
		return -1;
	if (hs.version != EVRDMA_HS_VERSION) {
		*version_bad = 1;
		return -1;
	}
	if (hs.code > len - EVRDMA_HS_LEN)
		return -1;
	*data = buf + EVRDMA_HS_LEN;
	*data_len = hs.code;
	return 0;
}

/* ---- channel handshake ----
 *
 *  0 2 magic "CH"        12 4 pull size P
 *  2 1 version (4)       16 4 send ring rkey (0: not pullable)
 *  3 1 mode              20 8 send ring base address
 *  4 2 slots R           28 4 FNV-1a of bytes 0..27
 *  6 1 control credits C
 *  7 1 length (32)
 *  8 4 slot size S
 *
 * The length and the check value are what zero padding cannot fake: rdma_cm
 * pads private data, so a truncated handshake would otherwise read as one
 * whose last fields are zero.
 */

void
evrdma__ch_hs_encode(uint8_t out[EVRDMA_CH_HS_LEN],
    const struct evrdma__ch_hs *hs)
{
	out[0] = CH_MAGIC0;
	out[1] = CH_MAGIC1;
	out[2] = EVRDMA_CH_VERSION;
	out[3] = (uint8_t)(hs->mode | (hs->lend ? EVRDMA_CH_HS_LEND : 0));
	put16(out + 4, hs->slots);
	out[6] = hs->ctrl;
	out[7] = EVRDMA_CH_HS_LEN;
	put32(out + 8, hs->slot_size);
	put32(out + 12, hs->pull_min);
	put32(out + 16, hs->src_rkey);
	put64(out + 20, hs->src_base);
	put32(out + 28, evrdma__fnv1a(out, 28));
}

int
evrdma__ch_hs_decode(const uint8_t *buf, size_t len, struct evrdma__ch_hs *hs)
{
	struct evrdma__ch_hs h;

	if (buf == NULL || len < 3 || buf[0] != CH_MAGIC0 ||
	    buf[1] != CH_MAGIC1)
		return EVRDMA_CH_HS_SHORT;
	if (buf[2] != EVRDMA_CH_VERSION)
		return EVRDMA_CH_HS_VERSION;
	if (len < EVRDMA_CH_HS_LEN || buf[7] != EVRDMA_CH_HS_LEN)
		return EVRDMA_CH_HS_SHORT;
	if (get32(buf + 28) != evrdma__fnv1a(buf, 28))
		return EVRDMA_CH_HS_CHECK;
	h.mode = buf[3] & (uint8_t)~EVRDMA_CH_HS_LEND;
	h.lend = (buf[3] & EVRDMA_CH_HS_LEND) != 0;
	h.slots = get16(buf + 4);
	h.ctrl = buf[6];
	h.slot_size = get32(buf + 8);
	h.pull_min = get32(buf + 12);
	h.src_rkey = get32(buf + 16);
	h.src_base = get64(buf + 20);
	if (h.mode > 1 || h.slots < EVRDMA_CH_SLOTS_MIN ||
	    h.slots > EVRDMA_CH_SLOTS_MAX || h.ctrl < EVRDMA_CH_CTRL_MIN ||
	    h.slot_size < EVRDMA_CH_SLOT_MIN ||
	    h.slot_size > EVRDMA_CH_SLOT_MAX ||
	    h.slot_size % EVRDMA_CH_SLOT_MIN || h.pull_min > EVRDMA_CH_SLOT_MAX)
		return EVRDMA_CH_HS_RANGE;
	/* a send ring that would wrap the address space is no ring */
	if (h.src_rkey &&
	    h.src_base > UINT64_MAX - (uint64_t)h.slots * h.slot_size)
		return EVRDMA_CH_HS_RANGE;
	*hs = h;
	return EVRDMA_CH_HS_OK;
}

const char *
evrdma__ch_hs_strerror(int err)
{
	switch (err) {
	case EVRDMA_CH_HS_OK:
		return "no error";
	case EVRDMA_CH_HS_SHORT:
		return "not a channel handshake, or truncated";
	case EVRDMA_CH_HS_VERSION:
		return "unsupported channel protocol version";
	case EVRDMA_CH_HS_CHECK:
		return "handshake check value does not match";
	case EVRDMA_CH_HS_RANGE:
		return "handshake field out of range";
	}
	return "unknown handshake error";
}

/* ---- immediates ---- */

uint32_t
evrdma__ch_imm_encode(const struct evrdma__ch_imm *m)
{
	int loan = m->type == EVRDMA_CH_LOAN;
	int bit = loan ? m->yield : m->type == EVRDMA_CH_EOF ? m->reset :
	    m->pull;

	return (uint32_t)m->type << 30 |
	    (uint32_t)((loan ? m->loan : m->dret) & EVRDMA_CH_DRET_MAX) << 16 |
	    (uint32_t)m->cret << 8 | (m->starved ? 0x80u : 0) |
	    (bit ? 0x40u : 0) | (m->pdone & EVRDMA_CH_PDONE_MAX);
}

int
evrdma__ch_imm_decode(uint32_t imm, struct evrdma__ch_imm *m)
{
	uint16_t n = (uint16_t)((imm >> 16) & EVRDMA_CH_DRET_MAX);
	uint8_t bit = (imm & 0x40u) != 0;

	m->type = (uint8_t)(imm >> 30);
	m->cret = (uint8_t)(imm >> 8);
	m->starved = (imm & 0x80u) != 0;
	m->pdone = (uint8_t)(imm & EVRDMA_CH_PDONE_MAX);
	m->pull = m->reset = m->yield = 0;
	m->dret = m->loan = 0;
	switch (m->type) {
	case EVRDMA_CH_LOAN:
		m->loan = n;
		m->yield = bit;
		break;
	case EVRDMA_CH_EOF:
		m->dret = n;
		m->reset = bit;
		break;
	case EVRDMA_CH_CREDIT:
		m->dret = n;
		if (bit)
			return -1;
		break;
	default:
		m->dret = n;
		m->pull = bit;
		break;
	}
	return 0;
}

/* ---- pull descriptors ---- */

size_t
evrdma__ch_pull_encode(uint8_t *out,
    const struct evrdma__ch_pull *p)
{
	if (p->wide) {
		put64(out, p->addr);
		put32(out + 8, p->rkey);
		put32(out + 12, p->len);
		return EVRDMA_CH_PULL_WIDE_LEN;
	}
	put32(out, p->slot);
	put32(out + 4, p->len);
	return EVRDMA_CH_PULL_DESC_LEN;
}

int
evrdma__ch_pull_decode(const uint8_t *buf, size_t len, unsigned peer_slots,
    uint32_t peer_slot_size, uint32_t our_slot_size,
    struct evrdma__ch_pull *p, const char **why)
{
	struct evrdma__ch_pull d;

	memset(&d, 0, sizeof(d));
	if (len == EVRDMA_CH_PULL_WIDE_LEN) {
		d.wide = 1;
		d.addr = get64(buf);
		d.rkey = get32(buf + 8);
		d.len = get32(buf + 12);
		/* (the READ's range must not wrap: the device would refuse
		 * it anyway, but nothing out of range is accepted here) */
		if (d.len == 0 || d.len > our_slot_size ||
		    d.addr > UINT64_MAX - d.len) {
			*why = "pull length out of range";
			return -1;
		}
		*p = d;
		return 0;
	}
	if (len != EVRDMA_CH_PULL_DESC_LEN) {
		*why = "bad pull descriptor length";
		return -1;
	}
	d.slot = get32(buf);
	d.len = get32(buf + 4);
	if (d.slot >= peer_slots) {
		*why = "pull from a slot the peer's ring does not have";
		return -1;
	}
	if (d.len == 0 || d.len > peer_slot_size || d.len > our_slot_size) {
		*why = "pull length out of range";
		return -1;
	}
	*p = d;
	return 0;
}

/* ---- remote memory descriptors (public: evrdma/mr.h) ---- */

int
evrdma_remote_encode(const struct evrdma_remote *rem, void *buf,
    size_t buflen)
{
	uint8_t *p = buf;

	if (rem == NULL || buf == NULL)
		return evrdma__fail(EINVAL, "evrdma_remote_encode: NULL "
		    "argument");
	if (buflen < EVRDMA_REMOTE_ENCODED_LEN)
		return evrdma__fail(ENOSPC, "evrdma_remote_encode: buffer of "
		    "%zu bytes, need %d", buflen, EVRDMA_REMOTE_ENCODED_LEN);
	p[0] = REMOTE_MAGIC0;
	p[1] = REMOTE_MAGIC1;
	p[2] = REMOTE_VERSION;
	p[3] = 0;
	put32(p + 4, rem->rkey);
	put64(p + 8, rem->addr);
	put64(p + 16, rem->len);
	return EVRDMA_REMOTE_ENCODED_LEN;
}

int
evrdma_remote_decode(struct evrdma_remote *out, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	struct evrdma_remote rem;

	if (out == NULL || buf == NULL)
		return evrdma__fail(EINVAL, "evrdma_remote_decode: NULL "
		    "argument");
	if (len != EVRDMA_REMOTE_ENCODED_LEN)
		return evrdma__fail(EINVAL, "evrdma_remote_decode: %zu bytes, "
		    "expected %d", len, EVRDMA_REMOTE_ENCODED_LEN);
	if (p[0] != REMOTE_MAGIC0 || p[1] != REMOTE_MAGIC1)
		return evrdma__fail(EPROTO, "evrdma_remote_decode: bad magic");
	if (p[2] != REMOTE_VERSION)
		return evrdma__fail(EPROTO, "evrdma_remote_decode: "
		    "unsupported version %u", p[2]);
	if (p[3] != 0)
		return evrdma__fail(EPROTO, "evrdma_remote_decode: nonzero "
		    "reserved byte");
	rem.rkey = get32(p + 4);
	rem.addr = get64(p + 8);
	rem.len = get64(p + 16);
	/* The bytes may come from an untrusted peer: reject descriptors
	 * whose end does not fit in a 64-bit address. */
	if (rem.len == 0)
		return evrdma__fail(EPROTO, "evrdma_remote_decode: zero length");
	if (rem.len > UINT64_MAX - rem.addr)
		return evrdma__fail(EPROTO, "evrdma_remote_decode: address + "
		    "length overflows");
	*out = rem;
	return 0;
}
