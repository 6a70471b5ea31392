/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel's RDMA transport, the listener's side: each
 * accepted request becomes a channel, handed to the user once established.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "chan_rdma.h"
#include "chan_warm.h"

struct ch_listen {
	evrdma_channel_accept_cb cb;
	void *arg;
	void (*free_arg)(void *arg);	/* with the listener */
	int flags;
};

static void
lst_free_arg(void *arg)
{
	struct ch_listen *cl = arg;

	if (cl->free_arg)
		cl->free_arg(cl->arg);
	free(cl);
}

static int
lst_attach(void *arg, struct evrdma_listener *lst, struct evrdma_conn *conn,
    int *code)
{
	struct ch_listen *cl = arg;

	*code = EVRDMA_REJECT_RESOURCES;
	return evrdma__rc_new_accepted(conn, cl->flags, lst->srq) ? 0 : -1;
}

static void
lst_accepted(void *arg, struct evrdma_listener *lst, struct evrdma_conn *conn,
    const struct sockaddr *peer, int socklen)
{
	struct ch_listen *cl = arg;
	struct ch_rdma *rc = evrdma__conn_owner(conn);

	if (!lst->srq && conn->dev)
		evrdma__warm_want(lst->base, conn->dev);
	rc_set(rc, RC_EST);
	evrdma__chan_accepted(&rc->ch);
	evrdma__chan_ref(&rc->ch);
	cl->cb(lst, &rc->ch, peer, socklen, cl->arg);
	rc_schedule(rc);
	evrdma__chan_unref(&rc->ch);
}

static const struct evrdma__listen_ops ch_listen_ops = {
	.attach = lst_attach,
	.accepted = lst_accepted,
	.free_arg = lst_free_arg,
	.channels = 1,
};

struct evrdma_listener *
evrdma_channel_listener_new(struct evrdma_base *base,
    evrdma_channel_accept_cb cb, void *arg, int flags, int backlog,
    const struct sockaddr *sa, int socklen)
{
	struct evrdma_listener *lst;

	lst = evrdma__channel_listener_new(base, sa, socklen, backlog, flags,
	    cb, arg, NULL);
	if (lst)
		lst->accept_arg = arg;	/* the error callback's */
	return lst;
}

struct evrdma_listener *
evrdma__channel_listener_new(struct evrdma_base *base,
    const struct sockaddr *sa, int socklen, int backlog, int flags,
    evrdma_channel_accept_cb cb, void *arg, void (*free_arg)(void *))
{
	struct evrdma_listener *lst;
	struct ch_listen *cl;

	if (evrdma__listener_flags(flags, EVRDMA_CHANNEL_MESSAGE,
	    "evrdma_channel_listener_new") < 0)
		return NULL;
	if (!cb) {
		evrdma__fail(EINVAL, "evrdma_channel_listener_new: no accept "
		    "callback");
		return NULL;
	}
	cl = calloc(1, sizeof(*cl));
	if (!cl) {
		evrdma__fail(ENOMEM, "out of memory");
		return NULL;
	}
	cl->cb = cb;
	cl->arg = arg;
	cl->free_arg = free_arg;
	cl->flags = flags & EVRDMA_CHANNEL_MESSAGE;
	lst = evrdma__listener_new(base, sa, socklen, backlog,
	    flags & ~EVRDMA_CHANNEL_MESSAGE, &ch_listen_ops, cl,
	    "evrdma_channel_listener_new");
	if (!lst)
		free(cl);
	return lst;
}
