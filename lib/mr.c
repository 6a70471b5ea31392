/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: registered memory regions and their remote descriptors.
 *
 * A region lives in the protection domain of the connection it was
 * registered for, so only that connection's peer can reach it. Regions a
 * peer may access are registered zero-based where rdma-core allows
 * (ibv_reg_mr_iova2): the device knows them by their offset within the
 * page, and no process address goes on the wire.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "evrdma-internal.h"

#define ACCESS_ALL (EVRDMA_ACCESS_LOCAL_WRITE | EVRDMA_ACCESS_REMOTE_READ | \
	EVRDMA_ACCESS_REMOTE_WRITE | EVRDMA_ACCESS_REMOTE_ATOMIC)
#define ACCESS_REMOTE (EVRDMA_ACCESS_REMOTE_READ | \
	EVRDMA_ACCESS_REMOTE_WRITE | EVRDMA_ACCESS_REMOTE_ATOMIC)

/* ---- regions ---- */

int
evrdma__access_to_ibv(int access)
{
	int ibv = 0;

	if (access & EVRDMA_ACCESS_LOCAL_WRITE)
		ibv |= IBV_ACCESS_LOCAL_WRITE;
	if (access & EVRDMA_ACCESS_REMOTE_READ)
		ibv |= IBV_ACCESS_REMOTE_READ;
	if (access & EVRDMA_ACCESS_REMOTE_WRITE)
		ibv |= IBV_ACCESS_REMOTE_WRITE;
	if (access & EVRDMA_ACCESS_REMOTE_ATOMIC)
		ibv |= IBV_ACCESS_REMOTE_ATOMIC;
	/* ibv_reg_mr fails with EINVAL for remote write or atomic access
	 * without local write. */
	if (ibv & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC))
		ibv |= IBV_ACCESS_LOCAL_WRITE;
	return ibv;
}

static void
mr_destroy(struct evrdma_mr *mr)
{
	evrdma__mr_dereg(mr);
	if (mr->base) {
		evrdma__work_cancel(mr->base, &mr->fin);
		LIST_REMOVE(mr, link);
		mr->base->stats.mrs--;
		mr->base = NULL;
	}
	evrdma__pd_put(mr->pd);
	mr->pd = NULL;
}

static void
mr_fin(struct evrdma__work *w)
{
	struct evrdma_mr *mr = (struct evrdma_mr *)((char *)w -
	    offsetof(struct evrdma_mr, fin));

	if (mr->freed && !mr->inflight) {
		mr_destroy(mr);
		free(mr);
	}
}

int
evrdma__base_pin_check(struct evrdma_base *base, size_t bytes)
{
	if (evrdma__mem_pin_check(bytes) == 0)
		return 0;
	if (!base || !base->pin_relief || !base->pin_relief(base))
		return -1;
	return evrdma__mem_pin_check(bytes);
}

struct evrdma_mr *
evrdma__mr_reg(struct evrdma_base *base, struct evrdma__pd *pd, void *addr,
    size_t len, int access)
{
	size_t span = evrdma__page_span(addr, len);
	struct evrdma_mr *mr;
	struct ibv_mr *ibmr;
	uint64_t iova = (uintptr_t)addr;
	int err;

	if (evrdma__forked) {
		evrdma__fail(EPERM, "a forked child cannot register memory "
		    "with its parent's devices");
		return NULL;
	}
	/* Record what verbs will really grant, so that the checks at post
	 * time agree with the hardware. */
	if (access & (EVRDMA_ACCESS_REMOTE_WRITE | EVRDMA_ACCESS_REMOTE_ATOMIC))
		access |= EVRDMA_ACCESS_LOCAL_WRITE;
	if (evrdma__base_pin_check(base, span) < 0)
		return NULL;
	mr = calloc(1, sizeof(*mr));
	if (mr == NULL) {
		evrdma__fail(ENOMEM, "evrdma_mr_reg: out of memory");
		return NULL;
	}
	errno = 0;
	if ((access & ACCESS_REMOTE) && EVRDMA_SYM(ibv_reg_mr_iova2)) {
		/* zero-based, keeping the offset within the page (the
		 * kernel maps whole pages) */
		iova = (uintptr_t)addr & ((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
		ibmr = EVRDMA_SYM(ibv_reg_mr_iova2)(pd->pd, addr, len, iova,
		    (unsigned)evrdma__access_to_ibv(access));
	} else {
		ibmr = EVRDMA_SYM(ibv_reg_mr)(pd->pd, addr, len,
		    evrdma__access_to_ibv(access));
	}
	if (ibmr == NULL) {
		err = errno ? errno : ENOMEM;
		free(mr);
		if (err == ENOMEM)
			evrdma__fail(err, "ibv_reg_mr(%zu bytes): %s; registered "
			    "memory counts against RLIMIT_MEMLOCK (ulimit -l)",
			    len, strerror(err));
		else
			evrdma__fail(err, "ibv_reg_mr(%zu bytes): %s", len,
			    strerror(err));
		return NULL;
	}
	evrdma__mem_pin_add((ssize_t)span);
	mr->base = base;
	mr->pd = pd;
	pd->refcnt++;		/* the PD must outlive its regions */
	mr->mr = ibmr;
	mr->addr = addr;
	mr->len = len;
	mr->iova = iova;
	mr->access = access;
	mr->fin.fn = mr_fin;
	LIST_INSERT_HEAD(&base->mrs, mr, link);
	base->stats.mrs++;
	return mr;
}

struct evrdma_mr *
evrdma_mr_reg(struct evrdma_conn *conn, void *addr, size_t len, int access)
{
	if (conn == NULL || addr == NULL || len == 0) {
		evrdma__fail(EINVAL, "evrdma_mr_reg: NULL connection or "
		    "address, or zero length");
		return NULL;
	}
	if (access & ~ACCESS_ALL) {
		evrdma__fail(EINVAL, "evrdma_mr_reg: unknown access flags 0x%x",
		    (unsigned)(access & ~ACCESS_ALL));
		return NULL;
	}
	if (conn->base == NULL) {
		evrdma__fail(EPIPE, "evrdma_mr_reg: the connection's base was "
		    "freed");
		return NULL;
	}
	if (conn->pd == NULL) {
		evrdma__fail(ENOTCONN, "evrdma_mr_reg: the connection has no "
		    "device yet (register from the prepare callback or "
		    "EVRDMA_EV_CONNECTED on)");
		return NULL;
	}
	if (conn->srq && (access & ACCESS_REMOTE)) {
		/* its protection domain is the queue's, shared with every
		 * connection of the queue: another one's peer could reach
		 * the region by guessing its rkey */
		evrdma__fail(EPERM, "evrdma_mr_reg: no remote access on a "
		    "connection that uses a shared receive queue (its "
		    "protection domain is shared)");
		return NULL;
	}
	return evrdma__mr_reg(conn->base, conn->pd, addr, len, access);
}

void
evrdma_mr_free(struct evrdma_mr *mr)
{
	if (mr == NULL || mr->freed || evrdma__forked)
		return;
	mr->freed = 1;
	if (mr->inflight > 0 && mr->base)
		/* The HCA may still touch the memory: deregister when the
		 * last request using it completes (evrdma__mr_release). */
		return;
	mr_destroy(mr);
	free(mr);
}

void
evrdma__mr_release_all(struct evrdma_base *base)
{
	struct evrdma_mr *mr;

	/* Called by base free after every connection is gone, so nothing
	 * still uses these regions. The user's handles stay valid (husks)
	 * until evrdma_mr_free(). */
	while ((mr = LIST_FIRST(&base->mrs)) != NULL) {
		mr_destroy(mr);
		if (mr->freed)
			free(mr);
	}
}

void *
evrdma_mr_addr(const struct evrdma_mr *mr)
{
	return mr ? mr->addr : NULL;
}

size_t
evrdma_mr_len(const struct evrdma_mr *mr)
{
	return mr ? mr->len : 0;
}

int
evrdma_mr_export(const struct evrdma_mr *mr, size_t off, size_t len,
    struct evrdma_remote *out)
{
	if (mr == NULL || out == NULL)
		return evrdma__fail(EINVAL, "evrdma_mr_export: NULL argument");
	if (mr->mr == NULL)
		return evrdma__fail(EPIPE, "evrdma_mr_export: the region was "
		    "released with its base");
	/* Written so that off + len cannot wrap around. */
	if (len == 0 || off > mr->len || len > mr->len - off)
		return evrdma__fail(EINVAL, "evrdma_mr_export: range "
		    "[%zu, +%zu) outside the %zu-byte region", off, len,
		    mr->len);
	if (!(mr->access & ACCESS_REMOTE))
		return evrdma__fail(EACCES, "evrdma_mr_export: the region "
		    "has no remote access flag");
	out->addr = mr->iova + off;
	out->len = len;
	out->rkey = mr->mr->rkey;
	return 0;
}
