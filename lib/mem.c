/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: locked memory. What this process has registered through evrdma
 * (for a clear error before RLIMIT_MEMLOCK refuses deep inside), and a
 * region's deregistration, which must happen the moment the last request
 * of a freed region completes (evrdma__mr_release(), called from the
 * request layer below the rest of mr.c).
 */
#include "config.h"

#include <errno.h>
#include <linux/capability.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "evrdma-internal.h"
#include "rdma-sym.h"

/* Bytes this process has registered through evrdma (whole pages), for a
 * clear error before the kernel's RLIMIT_MEMLOCK refuses deep inside. */
static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t pinned;

size_t
evrdma__page_span(const void *addr, size_t len)
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

void
evrdma__mem_pin_add(ssize_t bytes)
{
	pthread_mutex_lock(&pin_lock);
	pinned += bytes;
	pthread_mutex_unlock(&pin_lock);
}

/* The device forgets the region: no peer reaches it any more. */
void
evrdma__mr_dereg(struct evrdma_mr *mr)
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
		evrdma__mem_pin_add(-(ssize_t)evrdma__page_span(mr->addr,
		    mr->len));
	}
}
