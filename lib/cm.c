/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: a base's rdma_cm event channel, opened on first use (by the
 * first listener or connection) so that a program may create its base and
 * fork (a daemon) before it serves; and the check, opening nothing, that
 * this process can do RDMA at all; reading its events, each handed to the
 * owner of its id through the owner's ops (struct evrdma__cm_owner). Below
 * the listener and the connection, which open the channel and own ids.
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

/*
 * Drain every pending CM event. Each is handed to the listener, queued
 * request or connection that owns its id and then acked at once:
 * rdma_destroy_id() blocks until all events it has seen are acked, and ids
 * are only ever destroyed outside this loop or right after the ack.
 */
void
evrdma__cm_drain(struct evrdma_base *base)
{
	struct rdma_cm_event *ev;

	if (!base->cm_ch)
		return;
	/* (a base being freed hears no more: evrdma_base_free()) */
	while (!base->freeing &&
	    EVRDMA_SYM(rdma_get_cm_event)(base->cm_ch, &ev) == 0) {
		struct rdma_cm_id *id = ev->id;
		const struct evrdma__cm_ops *ops = NULL;
		struct evrdma__cm_owner *o;
		int destroy = 0;

		o = ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ?
		    ev->listen_id->context : id->context;
		evrdma__log(EVRDMA_LOG_DEBUG, "cm event %s status %d",
		    EVRDMA_SYM(rdma_event_str)(ev->event), ev->status);
		/* no owner: an id whose owner is gone (destroyed while
		 * events were queued), nothing to tell */
		if (o) {
			ops = o->ops;	/* event() may free a queued one */
			destroy = ops->event(o, ev);
		}
		EVRDMA_SYM(rdma_ack_cm_event)(ev);	/* ev is gone */
		if (destroy) {
			EVRDMA_SYM(rdma_destroy_id)(id);
			base->stats.cm_ids--;
		}
		if (ops && ops->acked)
			ops->acked(o);
	}
	if (!base->freeing && errno != EAGAIN && errno != EWOULDBLOCK)
		evrdma__log(EVRDMA_LOG_ERROR, "rdma_get_cm_event: %s",
		    strerror(errno));
}

static void
cm_fd_cb(int fd, void *arg)
{
	(void)fd;
	evrdma__cm_drain(arg);
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
