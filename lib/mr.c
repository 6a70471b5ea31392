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
#include <linux/capability.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "evrdma-internal.h"

#define ACCESS_ALL (EVRDMA_ACCESS_LOCAL_WRITE | EVRDMA_ACCESS_REMOTE_READ | \
	EVRDMA_ACCESS_REMOTE_WRITE | EVRDMA_ACCESS_REMOTE_ATOMIC)
#define ACCESS_REMOTE (EVRDMA_ACCESS_REMOTE_READ | \
	EVRDMA_ACCESS_REMOTE_WRITE | EVRDMA_ACCESS_REMOTE_ATOMIC)

/* ---- locked memory ---- */

/* Bytes this process has registered through evrdma (whole pages), for a
 * clear error before the kernel's RLIMIT_MEMLOCK refuses deep inside. */
static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t pinned;

static size_t
page_span(const void *addr, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)addr;

	return ((a + len + pg - 1) & ~(pg - 1)) - (a & ~(pg - 1));
}

/* CAP_IPC_LOCK lifts RLIMIT_MEMLOCK for registrations (ib_umem_get). */
static int
can_lock_freely(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) != 0)
		return 0;
	return (d[CAP_IPC_LOCK / 32].effective &
	    (1u << (CAP_IPC_LOCK % 32))) != 0;
}

int
evrdma__mem_pin_check(size_t bytes)
{
	struct rlimit rl;
	size_t now;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0 ||
	    rl.rlim_cur == RLIM_INFINITY || can_lock_freely())
		return 0;
	pthread_mutex_lock(&pin_lock);
	now = pinned;
	pthread_mutex_unlock(&pin_lock);
	if (now + bytes <= rl.rlim_cur)
		return 0;
	return evrdma__fail(ENOMEM, "registering %zu KiB more would exceed "
	    "RLIMIT_MEMLOCK (%llu KiB, %zu KiB registered by evrdma): raise "
	    "the limit (ulimit -l, LimitMEMLOCK=) or use smaller channel "
	    "rings (evrdma_config_set_channel_ring())", bytes / 1024,
	    (unsigned long long)rl.rlim_cur / 1024, now / 1024);
}

static void
pin_add(ssize_t bytes)
{
	pthread_mutex_lock(&pin_lock);
	pinned += bytes;
	pthread_mutex_unlock(&pin_lock);
}

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

/* The device forgets the region: no peer reaches it any more. */
static void
mr_dereg(struct evrdma_mr *mr)
{
	if (mr->mr && !evrdma__forked) {
		int rc = EVRDMA_SYM(ibv_dereg_mr)(mr->mr);

		if (rc != 0)
			/* Nothing to retry: the device may be gone. The
			 * handle is dropped either way so that the device
			 * can be closed. */
			evrdma__log(EVRDMA_LOG_WARN, "ibv_dereg_mr: %s",
			    strerror(rc > 0 ? rc : errno));
		mr->mr = NULL;
		pin_add(-(ssize_t)page_span(mr->addr, mr->len));
	}
}

static void
mr_destroy(struct evrdma_mr *mr)
{
	mr_dereg(mr);
	if (mr->base) {
		evrdma__work_cancel(mr->base, &mr->fin);
		LIST_REMOVE(mr, link);
		mr->base->stats.mrs--;
		mr->base = NULL;
	}
	evrdma__pd_put(mr->pd);
	mr->pd = NULL;
}

/*
 * The last request using a freed region completed: the memory is the
 * application's again from its callback on (evrdma/mr.h), so the device
 * forgets the region now, before that callback (a peer's WRITE to its
 * rkey then fails: it found the memory the application took back when
 * this waited for the end of the poll pass). The rest waits for the loop
 * (mr_fin()): the protection domain's last reference may close the
 * device whose CQ is being polled.
 */
void
evrdma__mr_last_release(struct evrdma_mr *mr)
{
	mr_dereg(mr);
	evrdma__work_queue(mr->base, &mr->fin);
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

struct evrdma_mr *
evrdma__mr_reg(struct evrdma_base *base, struct evrdma__pd *pd, void *addr,
    size_t len, int access)
{
	size_t span = page_span(addr, len);
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
	if (evrdma__mem_pin_check(span) < 0)
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
	pin_add((ssize_t)span);
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
