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
/* After a TCP accept error the TCP side pauses, for this long at first,
 * doubling up to the most (evrdma/listener.h) */
#define RETRY_MS_MIN	10
#define RETRY_MS_MAX	1000

struct bl {
	evrdma_bufferevent_accept_cb cb;
	void *arg;
	struct evrdma_base *base;	/* NULL once the base is gone */
	struct evrdma__hook hook;	/* on the base's list */
	int on_base;
	struct evrdma_listener *lst;	/* the handle the user holds */
	struct evconnlistener *tcp;
	int flags;			/* LEV_OPT_* */
	int options;			/* BEV_OPT_* of the accepted */
	struct event *retry;		/* TCP paused after an accept error */
	unsigned retry_ms;		/* its last pause, 0: none since */
};

/* With the listener's memory (evrdma_listener_free()). */
static void
bl_free(void *arg)
{
	struct bl *bl = arg;
	struct evrdma_base *held = bl->base;

	if (bl->on_base)
		LIST_REMOVE(&bl->hook, link);
	if (bl->tcp)
		evconnlistener_free(bl->tcp);
	if (bl->retry)
		event_free(bl->retry);
	free(bl);
	evrdma__base_release(held);	/* (a shared base may go) */
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
	if (bl->retry)
		event_free(bl->retry);
	bl->retry = NULL;
}

/* evrdma_listener_enable() and _disable(): the TCP side follows, unless
 * it pauses after an accept error (bl_retry() enables it then). */
static void
bl_set_enabled(void *arg, int on)
{
	struct bl *bl = arg;

	if (!bl->tcp)
		return;
	if (!on)
		evconnlistener_disable(bl->tcp);
	else if (!evtimer_pending(bl->retry, NULL))
		evconnlistener_enable(bl->tcp);
}

static const struct evrdma__listen_side bl_side = {
	.set_enabled = bl_set_enabled,
};

/* The listener the user holds: its TCP side (if any) hears enable and
 * disable, and the error callback gets the user's argument. */
static void
bl_on_base(struct bl *bl)
{
	bl->hook.base_gone = bl_base_gone;
	LIST_INSERT_HEAD(&bl->base->hooks, &bl->hook, link);
	bl->on_base = 1;
}

static void
bl_attach(struct bl *bl, struct evrdma_listener *lst)
{
	bl->lst = lst;
	lst->accept_arg = bl->arg;
	lst->side = &bl_side;
	lst->side_arg = bl;
}

static void
bl_rdma_accept(struct evrdma_listener *lst, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct bl *bl = arg;
	struct bufferevent *bev = evrdma__bev_accepted(bl->base, ch,
	    bl->options);

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
	/* the test knob: the user's options go to the adapter above */
	int adapter = bl->base && bl->base->no_rdma &&
	    evrdma__bev_tcp_adapters();

	bl->retry_ms = 0;	/* accepting again */
	bev = bufferevent_socket_new(evconnlistener_get_base(el), fd,
	    adapter ? BEV_OPT_CLOSE_ON_FREE : bl->options);
	if (!bev) {
		evrdma__log(EVRDMA_LOG_WARN, "bufferevent listener: dropping a "
		    "TCP connection: out of memory");
		evutil_closesocket(fd);
		return;
	}
	if (adapter &&
	    !(bev = evrdma__bev_accepted_tcp(bl->base, bev, bl->options))) {
		evrdma__log(EVRDMA_LOG_WARN, "bufferevent listener: dropping a "
		    "TCP connection: %s", evrdma_errmsg());
		return;
	}
	bl->cb(bl->lst, bev, peer, socklen, bl->arg);
}

/* The pause after an accept error is over: accept again, unless the
 * user disabled the listener meanwhile. */
static void
bl_retry(evutil_socket_t fd, short what, void *arg)
{
	struct bl *bl = arg;

	if (bl->tcp && bl->lst && !bl->lst->disabled)
		evconnlistener_enable(bl->tcp);
}

/*
 * accept() failed, other than in passing (libevent skips EAGAIN, EINTR
 * and ECONNABORTED). Its listening socket stays readable while the error
 * lasts (a full descriptor table leaves the connection in the queue), and
 * libevent's listener would call us again at once: pause the TCP side,
 * longer each time it fails again, then tell the user (who may free the
 * listener: nothing of it is touched after).
 */
static void
bl_tcp_error(struct evconnlistener *el, void *arg)
{
	struct bl *bl = arg;
	int err = EVUTIL_SOCKET_ERROR();
	struct timeval tv;

	bl->retry_ms = bl->retry_ms ? bl->retry_ms * 2 : RETRY_MS_MIN;
	if (bl->retry_ms > RETRY_MS_MAX)
		bl->retry_ms = RETRY_MS_MAX;
	tv.tv_sec = bl->retry_ms / 1000;
	tv.tv_usec = (bl->retry_ms % 1000) * 1000;
	evconnlistener_disable(el);
	evtimer_add(bl->retry, &tv);
	evrdma__log(EVRDMA_LOG_WARN, "bufferevent listener on port %d: TCP "
	    "accept: %s; accepting again in %u ms", bl->lst->port,
	    evutil_socket_error_to_string(err), bl->retry_ms);
	evrdma__listener_error(bl->lst, err == EMFILE || err == ENFILE ||
	    err == ENOBUFS || err == ENOMEM ? EVRDMA_REASON_RESOURCE :
	    EVRDMA_REASON_CONNECT_ERROR, err);
}

/* Listen on TCP at @p sa with its port set to @p port (0: any), with
 * the listener's flags (evrdma/listener.h). */
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
	    bl_tcp_accept, bl, (bl->flags & EVRDMA__LEV_OPTS) |
	    LEV_OPT_CLOSE_ON_FREE, backlog, (struct sockaddr *)&ss, socklen);
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
bl_new(struct evrdma_base *base, evrdma_bufferevent_accept_cb cb, void *arg,
    int flags)
{
	struct bl *bl = calloc(1, sizeof(*bl));

	if (!bl || !(bl->retry = evtimer_new(base->eb, bl_retry, bl))) {
		free(bl);
		evrdma__fail(ENOMEM, "out of memory");
		return NULL;
	}
	bl->cb = cb;
	bl->arg = arg;
	bl->base = base;
	evrdma__base_hold(base);
	bl->flags = flags;
	bl->options = BEV_OPT_CLOSE_ON_FREE;
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
		bl_free(bl);
		evrdma__fail(err, "evrdma_bufferevent_listener_new: TCP: %s",
		    strerror(err));
		return NULL;
	}
	lst = evrdma__listener_new(bl->base, sa, socklen, backlog,
	    bl->flags | EVRDMA__LISTEN_BARE, &bl_bare_ops, bl,
	    "evrdma_bufferevent_listener_new");
	if (!lst) {
		bl_free(bl);
		return NULL;
	}
	lst->port = tcp_port(bl->tcp);
	bl_attach(bl, lst);
	bl_on_base(bl);
	evrdma__log(EVRDMA_LOG_INFO, "bufferevent listener on port %d: TCP "
	    "only (no RDMA)", lst->port);
	return lst;
}

struct evrdma_listener *
evrdma_bufferevent_listener_new(struct evrdma_base *base,
    evrdma_bufferevent_accept_cb cb, void *arg, int flags, int backlog,
    const struct sockaddr *sa, int socklen)
{
	static const char fn[] = "evrdma_bufferevent_listener_new";
	struct evrdma_listener *lst;
	struct bl *bl;
	int try, err;

	if (!base || !cb || !sa ||
	    !((sa->sa_family == AF_INET &&
	    socklen >= (int)sizeof(struct sockaddr_in)) ||
	    (sa->sa_family == AF_INET6 &&
	    socklen >= (int)sizeof(struct sockaddr_in6))) ||
	    socklen > (int)sizeof(struct sockaddr_storage)) {
		evrdma__fail(EINVAL, "%s: bad argument", fn);
		return NULL;
	}
	if (evrdma__listener_flags(flags, 0, fn) < 0)
		return NULL;
	if ((backlog = evrdma__listener_backlog(backlog, fn)) < 0)
		return NULL;
	if (!(bl = bl_new(base, cb, arg, flags)))
		return NULL;
	if (base->no_rdma)
		return bl_listen_tcp_only(bl, backlog, sa, socklen);
	for (try = 0;; try++) {
		lst = evrdma__channel_listener_new(base, sa, socklen, backlog,
		    flags | EVRDMA_CHANNEL_STREAM, bl_rdma_accept, bl,
		    bl_free);
		if (!lst) {
			bl_free(bl);
			return NULL;
		}
		bl_attach(bl, lst);
		if (!base->cfg.tcp_fallback) {
			/* (its retry timer, on the event_base, goes with the
			 * base: a husk freed after event_base_free() must
			 * not free it then; found by review) */
			bl_on_base(bl);
			return lst;
		}
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
		if (!(bl = bl_new(base, cb, arg, flags)))
			return NULL;
	}
}

int
evrdma_bufferevent_listener_set_options(struct evrdma_listener *lst,
    int options)
{
	struct bl *bl = lst && lst->side == &bl_side ? lst->side_arg : NULL;

	if (!bl || (options & ~EVRDMA__BEV_OPTIONS))
		return evrdma__fail(EINVAL, "evrdma_bufferevent_listener_set_"
		    "options: %s", bl ? "unknown options" :
		    "not a bufferevent listener");
	bl->options = options | BEV_OPT_CLOSE_ON_FREE;
	return 0;
}

/* ---- the event_base calls: a shared base, and the program's socket ---- */

struct evrdma_listener *
evrdma_evconnlistener_new_bind(struct event_base *eb,
    evrdma_bufferevent_accept_cb cb, void *arg, int flags, int backlog,
    const struct sockaddr *sa, int socklen)
{
	struct evrdma_base *base = evrdma__base_for(eb);
	struct evrdma_listener *lst;
	int err;

	if (!base)
		return NULL;
	lst = evrdma_bufferevent_listener_new(base, cb, arg, flags, backlog,
	    sa, socklen);
	err = errno;
	evrdma__base_release(base);
	errno = err;
	return lst;
}

/* An option of the program's socket, 0 when it cannot be read. */
static int
sock_opt(evutil_socket_t fd, int level, int name)
{
	int v = 0;
	socklen_t len = sizeof(v);

	return getsockopt(fd, level, name, &v, &len) == 0 ? v : 0;
}

/*
 * The RDMA side of a listener on the program's socket: on the socket's
 * own address and port, IPv6-only as the socket is. NULL when it has
 * none: no RDMA on the base, a Unix socket, or the port taken over RDMA
 * (by another listener when the socket has SO_REUSEPORT, which rdma_cm
 * does not share: the socket serves TCP, the other listener RDMA; with
 * the fallback for any cause, logged); NULL with *@p failed set and
 * errno when the listener must fail (bl freed then).
 */
static struct evrdma_listener *
bl_fd_rdma(struct bl *bl, evutil_socket_t fd, const struct sockaddr *ss,
    socklen_t sslen, int backlog, int *failed)
{
	static const char fn[] = "evrdma_evconnlistener_new";
	struct evrdma_base *base = bl->base;
	struct evrdma_listener *lst;
	int err;

	*failed = 0;
	if (base->no_rdma || (ss->sa_family != AF_INET &&
	    ss->sa_family != AF_INET6))
		return NULL;
	if (ss->sa_family == AF_INET6)
		base->listen_v6only = sock_opt(fd, IPPROTO_IPV6, IPV6_V6ONLY);
	lst = evrdma__channel_listener_new(base, ss, (int)sslen,
	    backlog > 0 ? backlog : -1, (bl->flags & EVRDMA__LEV_OPTS) |
	    EVRDMA_CHANNEL_STREAM, bl_rdma_accept, bl, bl_free);
	err = errno;
	base->listen_v6only = -1;
	if (lst)
		return lst;
	if (err == EADDRINUSE && sock_opt(fd, SOL_SOCKET, SO_REUSEPORT)) {
		evrdma__log(EVRDMA_LOG_INFO, "%s: port %d is taken over RDMA "
		    "(SO_REUSEPORT: another listener has it there): this one "
		    "serves TCP", fn, sa_port(ss));
		return NULL;
	}
	if (base->cfg.tcp_fallback) {
		evrdma__log(EVRDMA_LOG_WARN, "%s: cannot listen over RDMA on "
		    "port %d (%s): TCP only", fn, sa_port(ss), strerror(err));
		return NULL;
	}
	bl_free(bl);
	*failed = 1;
	evrdma__fail(err, "%s: cannot listen over RDMA on port %d: %s", fn,
	    sa_port(ss), strerror(err));
	return NULL;
}

static struct evrdma_listener *
bl_new_fd(struct evrdma_base *base, evrdma_bufferevent_accept_cb cb,
    void *arg, int flags, int backlog, evutil_socket_t fd)
{
	static const char fn[] = "evrdma_evconnlistener_new";
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	struct evrdma_listener *lst;
	struct evconnlistener *el;
	struct bl *bl;
	socklen_t tlen = sizeof(int);
	int failed, type = 0;

	memset(&ss, 0, sizeof(ss));
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sslen) < 0) {
		evrdma__fail(errno, "%s: fd %d: %s", fn, (int)fd,
		    strerror(errno));
		return NULL;
	}
	if (type != SOCK_STREAM) {
		evrdma__fail(EINVAL, "%s: fd %d is not a stream socket", fn,
		    (int)fd);
		return NULL;
	}
	/* as evconnlistener_new(): 0 means it listens already; and
	 * non-blocking, which its accept loop needs (libevent's would hang
	 * the loop on a blocking one) */
	if (evutil_make_socket_nonblocking(fd) < 0 ||
	    (backlog != 0 && listen(fd, backlog > 0 ? backlog : 128) < 0)) {
		evrdma__fail(errno, "%s: listen: %s", fn, strerror(errno));
		return NULL;
	}
	if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) {
		/* (bound by listen() when it was not) */
		sslen = sizeof(ss);
		if (getsockname(fd, (struct sockaddr *)&ss, &sslen) < 0) {
			evrdma__fail(errno, "%s: getsockname: %s", fn,
			    strerror(errno));
			return NULL;
		}
	}
	if (!(bl = bl_new(base, cb, arg, flags)))
		return NULL;
	lst = bl_fd_rdma(bl, fd, (struct sockaddr *)&ss, sslen, backlog,
	    &failed);
	if (failed)
		return NULL;
	if (!lst && !(lst = evrdma__listener_new(base, NULL, 0, -1,
	    (flags & EVRDMA__LEV_OPTS) | EVRDMA__LISTEN_BARE, &bl_bare_ops,
	    bl, fn))) {
		bl_free(bl);
		return NULL;
	}
	bl_attach(bl, lst);
	if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)
		lst->port = sa_port((struct sockaddr *)&ss);
	/* the socket itself accepts TCP (or Unix) last: a failure before
	 * leaves it to the program, open, as evconnlistener_new() does;
	 * and it closes with the listener only when the program asks
	 * (LEV_OPT_CLOSE_ON_FREE) */
	el = evconnlistener_new(base->eb, bl_tcp_accept, bl,
	    flags & EVRDMA__LEV_OPTS, 0, fd);
	if (!el) {
		evrdma_listener_free(lst);	/* bl with it */
		evrdma__fail(ENOMEM, "%s: evconnlistener_new failed", fn);
		return NULL;
	}
	evconnlistener_set_error_cb(el, bl_tcp_error);
	bl->tcp = el;
	bl_on_base(bl);
	return lst;
}

struct evrdma_listener *
evrdma_evconnlistener_new(struct event_base *eb,
    evrdma_bufferevent_accept_cb cb, void *arg, int flags, int backlog,
    evutil_socket_t fd)
{
	struct evrdma_listener *lst;
	struct evrdma_base *base;
	int err;

	/* (the options of binding mean nothing on a bound socket, as for
	 * evconnlistener_new()) */
	if (!eb || !cb || fd < 0) {
		evrdma__fail(EINVAL, "evrdma_evconnlistener_new: %s", !eb ?
		    "no event_base" : !cb ? "no accept callback" :
		    "no socket");
		return NULL;
	}
	if (evrdma__listener_flags(flags & ~(LEV_OPT_REUSEABLE_PORT |
	    LEV_OPT_BIND_IPV6ONLY), 0, "evrdma_evconnlistener_new") < 0)
		return NULL;
	if (!(base = evrdma__base_for(eb)))
		return NULL;
	lst = bl_new_fd(base, cb, arg, flags & EVRDMA__LEV_OPTS, backlog, fd);
	err = errno;
	evrdma__base_release(base);
	errno = err;
	return lst;
}

evutil_socket_t
evrdma_listener_get_fd(struct evrdma_listener *lst)
{
	struct bl *bl = lst && lst->side == &bl_side ? lst->side_arg : NULL;

	return bl && bl->tcp ? evconnlistener_get_fd(bl->tcp) : -1;
}
