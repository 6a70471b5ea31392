/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel's RDMA transport: ring memory, and the send slots in
 * it. A ring is mapped fresh (zeroed pages, left out of a forked child),
 * in pages of its own, and lives while evbuffer references into it do.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "chan_rdma.h"

/* @p len bytes in whole pages: what a ring maps, and what its
 * registration pins */
static size_t
page_len(size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (len + pg - 1) & ~(pg - 1);
}

static size_t
ring_map_len(const struct ch_ring *r)
{
	return page_len(r->len);
}

/* @p n slots of @p size bytes and @p extra bytes after them, in pages of
 * their own: fresh zero pages (registered memory never shows what it held
 * before), and left out of a forked child, which neither copies the peers'
 * bytes at fork nor can read or write them afterwards. */
struct ch_ring *
evrdma__ring_new(struct ch_rdma *rc, unsigned n, size_t size, size_t extra)
{
	struct ch_ring *r = calloc(1, sizeof(*r));
	void *mem;
	unsigned i;

	if (!r)
		return NULL;
	r->owner = rc;
	r->refs = 1;
	r->len = (size_t)n * size + extra;
	mem = mmap(NULL, ring_map_len(r), PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	r->slot = calloc(n, sizeof(*r->slot));
	if (mem == MAP_FAILED || !r->slot) {
		if (mem != MAP_FAILED)
			munmap(mem, ring_map_len(r));
		free(r->slot);
		free(r);
		return NULL;
	}
	r->mem = mem;
	if (madvise(mem, ring_map_len(r), MADV_DONTFORK) < 0)
		evrdma__log(EVRDMA_LOG_WARN, "madvise(MADV_DONTFORK): %s",
		    strerror(errno));
	for (i = 0; i < n; i++) {
		r->slot[i].ring = r;
		r->slot[i].idx = i;
	}
	return r;
}

void
evrdma__ring_unref(struct ch_ring *ring)
{
	if (--ring->refs)
		return;
	munmap(ring->mem, ring_map_len(ring));
	free(ring->slot);
	free(ring);
}

int
evrdma__rc_depths_check(const struct evrdma_config *cfg)
{
	if (cfg->rq_depth < cfg->ch_slots + EVRDMA_CH_CTRL_MIN * 2 ||
	    cfg->sq_depth < cfg->ch_slots + EVRDMA_CH_CTRL_MIN * 2)
		return evrdma__fail(EINVAL, "channel: queue depths %u/%u are "
		    "below ring slots + 4", cfg->sq_depth, cfg->rq_depth);
	return 0;
}

/* Receive buffers of a channel with a ring of its own: R + C receives
 * are the least; the spare ones where the queue has room. */
unsigned
evrdma__rc_nbuf(const struct evrdma_config *cfg)
{
	unsigned spare = cfg->rq_depth - cfg->ch_slots - RC_CTRL;

	return cfg->ch_slots + RC_CTRL +
	    (spare < SPARE_RECVS ? spare : SPARE_RECVS);
}

size_t
evrdma_config_get_channel_pinned(const struct evrdma_config *cfg)
{
	struct evrdma_config dflt;

	if (!cfg) {
		memset(&dflt, 0, sizeof(dflt));
		evrdma__config_defaults(&dflt);
		cfg = &dflt;
	}
	if (evrdma__rc_depths_check(cfg) < 0)
		return 0;
	return page_len((size_t)evrdma__rc_nbuf(cfg) * cfg->ch_slot_size) +
	    page_len((size_t)cfg->ch_slots * cfg->ch_slot_size +
	    RC_SRING_EXTRA(cfg->ch_slots));
}
