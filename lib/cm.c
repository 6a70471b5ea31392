/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: a base's rdma_cm event channel, opened on first use (by the
 * first listener or connection) so that a program may create its base and
 * fork (a daemon) before it serves; and the check, opening nothing, that
 * this process can do RDMA at all. Below the listener and the connection,
 * which open the channel; the base above drains it (base->cm_drain).
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "evrdma-internal.h"

int
evrdma__rdma_check(void)
{
	struct ibv_device **list;
	int n = 0;

	if (evrdma__forked)
		return evrdma__fail(EPERM, "this process was forked from one "
		    "that had opened RDMA objects: rdma-core's state here is "
		    "the parent's; exec, or create evrdma bases before any "
		    "RDMA is opened");
	if (access("/dev/infiniband/rdma_cm", R_OK | W_OK) < 0)
		return evrdma__fail(ENODEV, "/dev/infiniband/rdma_cm: %s (no "
		    "RDMA in the kernel, or the rdma_ucm module is not "
		    "loaded)", strerror(errno));
	list = EVRDMA_SYM(ibv_get_device_list)(&n);
	if (list)
		EVRDMA_SYM(ibv_free_device_list)(list);
	if (n <= 0)
		return evrdma__fail(ENODEV, "no RDMA device (rdma link add "
		    "creates a Soft-RoCE one)");
	return 0;
}

static void
cm_fd_cb(int fd, void *arg)
{
	struct evrdma_base *base = arg;

	(void)fd;
	base->cm_drain(base);
}

struct rdma_event_channel *
evrdma__base_cm(struct evrdma_base *base)
{
	struct rdma_event_channel *ch;
	int err;

	if (base->cm_ch) {
		if (evrdma__forked) {
			evrdma__fail(EPERM, "this base belongs to the parent "
			    "process (forked)");
			return NULL;
		}
		return base->cm_ch;
	}
	if (evrdma__rdma_check() < 0)
		return NULL;
	ch = EVRDMA_SYM(rdma_create_event_channel)();
	if (!ch) {
		err = errno ? errno : ENODEV;
		evrdma__fail(err, "rdma_create_event_channel: %s (no RDMA "
		    "device or the rdma_ucm module is not loaded)",
		    strerror(err));
		return NULL;
	}
	evrdma__rdma_opened();
	if (evrdma__set_nonblock(ch->fd) < 0 ||
	    !(base->cm_ev = evrdma__ev_fd_new(base, ch->fd, cm_fd_cb, base))) {
		err = errno;
		EVRDMA_SYM(rdma_destroy_event_channel)(ch);
		evrdma__fail(err, "cannot watch the rdma_cm channel");
		return NULL;
	}
	base->cm_ch = ch;
	return ch;
}
