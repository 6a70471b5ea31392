/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: bufferevent listeners (evrdma_bufferevent_listener_new()). Over
 * RDMA a channel listener whose accepted channels bev.c wraps; with the
 * TCP fallback also an evconnlistener on the same port number, whose
 * connections become plain bufferevent_socket bufferevents; on a base
 * without RDMA only that, under a bare evrdma listener (so that the user
 * holds the same kind of handle and frees it the same way).
 *
 * This file and bev.c hold every libevent call of the adapter.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "bev.h"

/* A port 0 that rdma_cm picked may be taken on TCP: try another. */
#define PORT_TRIES	8

struct bl {
	evrdma_bufferevent_accept_cb cb;
	void *arg;
	struct evrdma_base *base;	/* NULL once the base is gone */
	struct evrdma__hook hook;	/* on the base's list */
	int on_base;
	struct evrdma_listener *lst;	/* the handle the user holds */
	struct evconnlistener *tcp;
};

/* With the listener's memory (evrdma_listener_free()). */
static void
bl_free(void *arg)
{
	struct bl *bl = arg;

	if (bl->on_base)
		LIST_REMOVE(&bl->hook, link);
	if (bl->tcp)
		evconnlistener_free(bl->tcp);
	free(bl);
}

/* evrdma_base_free(): the listener becomes a husk that accepts nothing,
 * over TCP too. */
static void
bl_base_gone(struct evrdma__hook *c)
{
	struct bl *bl = (struct bl *)((char *)c - offsetof(struct bl, hook));

	bl->on_base = 0;
	bl->base = NULL;
	if (bl->tcp)
		evconnlistener_free(bl->tcp);
	bl->tcp = NULL;
}

static void
bl_on_base(struct bl *bl)
{
	bl->hook.base_gone = bl_base_gone;
	LIST_INSERT_HEAD(&bl->base->hooks, &bl->hook, link);
	bl->on_base = 1;
}

static void
bl_rdma_accept(struct evrdma_listener *lst, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct bl *bl = arg;
	struct bufferevent *bev = evrdma__bev_accepted(bl->base, ch);

	if (!bev) {
		evrdma__log(EVRDMA_LOG_WARN, "bufferevent listener: dropping a "
		    "connection: %s", evrdma_errmsg());
		return;
	}
	bl->cb(lst, bev, peer, socklen, bl->arg);
}

static void
bl_tcp_accept(struct evconnlistener *el, evutil_socket_t fd,
    struct sockaddr *peer, int socklen, void *arg)
{
	struct bl *bl = arg;
	struct bufferevent *bev;

	bev = bufferevent_socket_new(evconnlistener_get_base(el), fd,
	    BEV_OPT_CLOSE_ON_FREE);
	if (!bev) {
		evrdma__log(EVRDMA_LOG_WARN, "bufferevent listener: dropping a "
		    "TCP connection: out of memory");
		evutil_closesocket(fd);
		return;
	}
	if (bl->base && bl->base->no_rdma && evrdma__bev_tcp_adapters() &&
	    !(bev = evrdma__bev_accepted_tcp(bl->base, bev))) {
		evrdma__log(EVRDMA_LOG_WARN, "bufferevent listener: dropping a "
		    "TCP connection: %s", evrdma_errmsg());
		return;
	}
	bl->cb(bl->lst, bev, peer, socklen, bl->arg);
}

/* As evconnlistener without an error callback: say so, accept on. */
static void
bl_tcp_error(struct evconnlistener *el, void *arg)
{
	int err = EVUTIL_SOCKET_ERROR();

	evrdma__log(EVRDMA_LOG_WARN, "bufferevent listener: TCP accept: %s",
	    evutil_socket_error_to_string(err));
}

/* Listen on TCP at @p sa with its port set to @p port (0: any). */
static struct evconnlistener *
bl_tcp_listen(struct bl *bl, const struct sockaddr *sa, int socklen,
    int backlog, int port)
{
	struct sockaddr_storage ss;
	struct evconnlistener *el;

	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, sa, (size_t)socklen);
	if (ss.ss_family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
	else
		((struct sockaddr_in6 *)&ss)->sin6_port =
		    htons((uint16_t)port);
	el = evconnlistener_new_bind(evrdma_base_get_event_base(bl->base),
	    bl_tcp_accept, bl, LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE,
	    backlog, (struct sockaddr *)&ss, socklen);
	if (el)
		evconnlistener_set_error_cb(el, bl_tcp_error);
	return el;
}

static int
tcp_port(struct evconnlistener *el)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(evconnlistener_get_fd(el), (struct sockaddr *)&ss,
	    &len) < 0)
		return 0;
	return ss.ss_family == AF_INET ?
	    ntohs(((struct sockaddr_in *)&ss)->sin_port) :
	    ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

static int
sa_port(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET ?
	    ntohs(((const struct sockaddr_in *)sa)->sin_port) :
	    ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
}

static struct bl *
bl_new(struct evrdma_base *base, evrdma_bufferevent_accept_cb cb, void *arg)
{
	struct bl *bl = calloc(1, sizeof(*bl));

	if (!bl) {
		evrdma__fail(ENOMEM, "out of memory");
		return NULL;
	}
	bl->cb = cb;
	bl->arg = arg;
	bl->base = base;
	return bl;
}

static const struct evrdma__listen_ops bl_bare_ops = {
	.free_arg = bl_free,
};

/* A base without RDMA: TCP only, under a bare evrdma listener. */
static struct evrdma_listener *
bl_listen_tcp_only(struct bl *bl, int backlog, const struct sockaddr *sa,
    int socklen)
{
	struct evrdma_listener *lst;
	int err;

	bl->tcp = bl_tcp_listen(bl, sa, socklen, backlog, sa_port(sa));
	if (!bl->tcp) {
		err = errno ? errno : EADDRINUSE;
		free(bl);
		evrdma__fail(err, "evrdma_bufferevent_listener_new: TCP: %s",
		    strerror(err));
		return NULL;
	}
	lst = evrdma__listener_new(bl->base, sa, socklen, backlog,
	    EVRDMA__LISTEN_BARE, &bl_bare_ops, bl);
	if (!lst) {
		bl_free(bl);
		return NULL;
	}
	lst->port = tcp_port(bl->tcp);
	bl->lst = lst;
	bl_on_base(bl);
	evrdma__log(EVRDMA_LOG_INFO, "bufferevent listener on port %d: TCP "
	    "only (no RDMA)", lst->port);
	return lst;
}

struct evrdma_listener *
evrdma_bufferevent_listener_new(struct evrdma_base *base,
    evrdma_bufferevent_accept_cb cb, void *arg, int backlog,
    const struct sockaddr *sa, int socklen)
{
	struct evrdma_listener *lst;
	struct bl *bl;
	int try, err;

	if (!base || !cb || !sa || backlog <= 0 ||
	    !((sa->sa_family == AF_INET &&
	    socklen >= (int)sizeof(struct sockaddr_in)) ||
	    (sa->sa_family == AF_INET6 &&
	    socklen >= (int)sizeof(struct sockaddr_in6))) ||
	    socklen > (int)sizeof(struct sockaddr_storage)) {
		evrdma__fail(EINVAL, "evrdma_bufferevent_listener_new: bad "
		    "argument");
		return NULL;
	}
	if (!(bl = bl_new(base, cb, arg)))
		return NULL;
	if (base->no_rdma)
		return bl_listen_tcp_only(bl, backlog, sa, socklen);
	for (try = 0;; try++) {
		lst = evrdma__channel_listener_new(base, sa, socklen, backlog,
		    EVRDMA_CHANNEL_STREAM, bl_rdma_accept, bl, bl_free);
		if (!lst) {
			free(bl);
			return NULL;
		}
		bl->lst = lst;
		if (!base->cfg.tcp_fallback)
			return lst;
		bl->tcp = bl_tcp_listen(bl, sa, socklen, backlog,
		    evrdma_listener_get_port(lst));
		if (bl->tcp) {
			bl_on_base(bl);
			return lst;
		}
		/* the listener frees bl with itself */
		err = errno ? errno : EADDRINUSE;
		evrdma_listener_free(lst);
		if (err != EADDRINUSE || sa_port(sa) != 0 ||
		    try + 1 >= PORT_TRIES) {
			evrdma__fail(err, "evrdma_bufferevent_listener_new: "
			    "cannot listen on TCP too: %s", strerror(err));
			return NULL;
		}
		if (!(bl = bl_new(base, cb, arg)))
			return NULL;
	}
}
