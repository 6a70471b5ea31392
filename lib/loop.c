/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the libevent glue of the core. This is the only core file that
 * includes libevent headers (channels use evbuffers, which are their API);
 * the rest of the core sees opaque events, microsecond timers and a
 * resolver whose result always arrives from the base's own loop.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/time.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "evrdma-internal.h"

/* What an evrdma event's libevent callback argument points to: the
 * internal callbacks take no libevent types, so each event carries a small
 * trampoline, freed together with the event by evrdma__ev_free(). */
struct ev_glue {
	evrdma__fd_cb fd_cb;
	evrdma__timer_cb timer_cb;
	void *arg;
	struct event *ev;
	struct evrdma_base *base;
};

/*
 * The callbacks of a base's events that are running now (base->depth):
 * one of them may start what must wait until none is, because the
 * dispatch that called it holds what that would destroy (an rdma_cm
 * event not yet acked; a device being polled). Such a call, given to
 * evrdma__ev_after_dispatch(), runs as the last of them returns, before
 * the loop goes on: evrdma_base_free() from inside a callback (base.c).
 */
static void
base_entered(struct evrdma_base *base)
{
	if (!base->depth++)
		base->errno_in = errno;
}

/* The last of them returns: errno goes back to what the application
 * left (evrdma__errno_app()), whatever evrdma's own calls set meanwhile
 * (a non-blocking read's EAGAIN: issue 50). */
static void
base_left(struct evrdma_base *base)
{
	evrdma__timer_cb cb = base->after_cb;
	int err = base->errno_in;

	if (--base->depth)
		return;
	if (cb) {
		base->after_cb = NULL;
		cb(base->after_arg);	/* (it may free the base) */
	}
	errno = err;
}

int
evrdma__errno_app(const struct evrdma_base *base)
{
	return base && base->depth ? base->errno_in : errno;
}

void
evrdma__errno_app_set(struct evrdma_base *base, int err)
{
	if (base && base->depth)
		base->errno_in = err;
}

void
evrdma__ev_after_dispatch(struct evrdma_base *base, evrdma__timer_cb cb,
    void *arg)
{
	base->after_cb = cb;
	base->after_arg = arg;
}

/* In a forked child that runs the parent's event_base on (after
 * event_reinit(), as libevent requires), our events go quiet: each would
 * act on the parent's connections (rdma_sym.c says why), and an fd that
 * only the parent drains would stay readable here for ever. */
static void
fd_trampoline(evutil_socket_t fd, short what, void *p)
{
	struct ev_glue *g = p;
	struct evrdma_base *base = g->base;

	if (evrdma__forked) {
		event_del(g->ev);
		return;
	}
	/* (the callback may free g: base is read before) */
	base_entered(base);
	g->fd_cb((int)fd, g->arg);
	base_left(base);
}

static void
timer_trampoline(evutil_socket_t fd, short what, void *p)
{
	struct ev_glue *g = p;
	struct evrdma_base *base = g->base;

	if (evrdma__forked)
		return;
	base_entered(base);
	g->timer_cb(g->arg);
	base_left(base);
}

struct event *
evrdma__ev_fd_new(struct evrdma_base *base, int fd, evrdma__fd_cb cb,
    void *arg)
{
	struct ev_glue *g;
	struct event *ev;

	g = calloc(1, sizeof(*g));
	if (g == NULL) {
		evrdma__fail(ENOMEM, "out of memory for an fd event");
		return NULL;
	}
	g->fd_cb = cb;
	g->arg = arg;
	g->base = base;
	ev = event_new(base->eb, fd, EV_READ | EV_PERSIST, fd_trampoline, g);
	if (ev == NULL) {
		free(g);
		evrdma__fail(ENOMEM, "event_new(fd %d) failed", fd);
		return NULL;
	}
	g->ev = ev;
	if (event_add(ev, NULL) < 0) {
		event_free(ev);
		free(g);
		evrdma__fail(ENOMEM, "event_add(fd %d) failed", fd);
		return NULL;
	}
	return ev;
}

struct event *
evrdma__ev_timer_new(struct evrdma_base *base, evrdma__timer_cb cb, void *arg)
{
	struct ev_glue *g;
	struct event *ev;

	g = calloc(1, sizeof(*g));
	if (g == NULL) {
		evrdma__fail(ENOMEM, "out of memory for a timer");
		return NULL;
	}
	g->timer_cb = cb;
	g->arg = arg;
	g->base = base;
	ev = evtimer_new(base->eb, timer_trampoline, g);
	if (ev == NULL) {
		free(g);
		evrdma__fail(ENOMEM, "evtimer_new failed");
		return NULL;
	}
	return ev;
}

int
evrdma__ev_timer_start_tv(struct event *ev, const struct timeval *tv)
{
	/* A zero timeout expires at the next loop iteration, after the
	 * backend has polled the fds: that is how the poller yields. Adding
	 * a pending timer again replaces its deadline. */
	if (evtimer_add(ev, tv) < 0)
		return evrdma__fail(ENOMEM, "evtimer_add failed");
	return 0;
}

int
evrdma__ev_timer_start_us(struct event *ev, uint64_t usec)
{
	struct timeval tv;

	tv.tv_sec = (time_t)(usec / 1000000);
	tv.tv_usec = (suseconds_t)(usec % 1000000);
	return evrdma__ev_timer_start_tv(ev, &tv);
}

int
evrdma__ev_pending(struct event *ev)
{
	return ev != NULL && event_pending(ev, EV_TIMEOUT | EV_READ, NULL);
}

void
evrdma__ev_stop(struct event *ev)
{
	if (ev != NULL)
		event_del(ev);
}

void
evrdma__ev_free(struct event *ev)
{
	struct ev_glue *g;

	if (ev == NULL)
		return;
	g = event_get_callback_arg(ev);
	event_free(ev);
	free(g);
}

int
evrdma__set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return evrdma__fail(errno, "fcntl(%d, F_GETFL): %s", fd,
		    strerror(errno));
	if (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return evrdma__fail(errno, "fcntl(%d, F_SETFL): %s", fd,
		    strerror(errno));
	return 0;
}

/*
 * Name resolution.
 *
 * evdns calls back on the thread of the loop its evdns_base runs on (from
 * inside evdns_getaddrinfo() for numeric hosts and hosts-file names), which
 * is not ours when the user passes an evdns_base of another loop. Every
 * result is therefore parked in the base's resolver and handed over
 * through an eventfd that our loop watches: the callback always runs on
 * our loop, after evrdma__resolve() returned the handle. The resolver and
 * its requests are shared between those threads under one mutex.
 *
 * evdns_getaddrinfo_cancel()'s EAI_CANCEL callback is deferred to the loop
 * and reads the evdns_base, so the base must not be freed in between.
 * User cancellation therefore never cancels the query: the request is
 * detached (the caller's callback is dropped) and freed when evdns
 * finishes with it. The one query evrdma does cancel is one that no
 * nameserver will ever answer (it would otherwise sit in evdns's waiting
 * queue until its base is freed, and leak with it); its evdns_base is
 * held until the cancellation has called back (see dns_hold()).
 */
struct evrdma__resolve_req {
	struct evrdma__resolver *r;
	evrdma__resolve_cb cb;
	void *arg;
	struct evdns_base *held_dns;	/* cancelled for want of a nameserver */
	/* under r->lock: */
	int dns_pending;		/* evdns still holds this struct */
	int user_done;			/* delivered or cancelled */
	int parked;			/* on r->done, result below */
	int err;
	struct sockaddr_storage ss;
	int socklen;
	TAILQ_ENTRY(evrdma__resolve_req) link;
	char host[64];			/* for log messages */
};

struct evrdma__resolver {
	pthread_mutex_t lock;
	unsigned refs;			/* the base + requests evdns holds */
	int efd;			/* -1 once the base is gone */
	struct event *efd_ev;
	struct evdns_base *own_dns;
	TAILQ_HEAD(, evrdma__resolve_req) done;
};

/* evdns bases with a cancelled query whose callback is still to come.
 * evrdma__resolver_free() of such a base is carried out by the last of
 * those callbacks. A process-wide list: bases may live on several threads. */
struct dns_hold {
	struct evdns_base *dns;
	unsigned pending;
	int free_wanted;
	struct dns_hold *next;
};
static struct dns_hold *dns_holds;
static pthread_mutex_t dns_holds_lock = PTHREAD_MUTEX_INITIALIZER;

static struct dns_hold **
dns_hold_find(struct evdns_base *dns)
{
	struct dns_hold **hp;

	for (hp = &dns_holds; *hp != NULL; hp = &(*hp)->next)
		if ((*hp)->dns == dns)
			break;
	return hp;
}

static int
dns_hold(struct evdns_base *dns)
{
	struct dns_hold **hp, *h;
	int rc = 0;

	pthread_mutex_lock(&dns_holds_lock);
	hp = dns_hold_find(dns);
	if (*hp != NULL) {
		(*hp)->pending++;
	} else if ((h = calloc(1, sizeof(*h))) != NULL) {
		h->dns = dns;
		h->pending = 1;
		h->next = dns_holds;
		dns_holds = h;
	} else {
		rc = -1;
	}
	pthread_mutex_unlock(&dns_holds_lock);
	return rc;
}

/* Called from the held base's own callback: evdns touches nothing of the
 * base once the getaddrinfo callback has run, so freeing it here is safe. */
static void
dns_unhold(struct evdns_base *dns)
{
	struct dns_hold **hp, *h = NULL;

	pthread_mutex_lock(&dns_holds_lock);
	hp = dns_hold_find(dns);
	if (*hp != NULL && --(*hp)->pending == 0) {
		h = *hp;
		*hp = h->next;
	}
	pthread_mutex_unlock(&dns_holds_lock);
	if (h != NULL && h->free_wanted)
		evdns_base_free(dns, 1);
	free(h);
}

static void
dns_free(struct evdns_base *dns)
{
	struct dns_hold **hp;
	int held;

	if (dns == NULL)
		return;
	pthread_mutex_lock(&dns_holds_lock);
	hp = dns_hold_find(dns);
	held = *hp != NULL;
	if (held)
		(*hp)->free_wanted = 1;
	pthread_mutex_unlock(&dns_holds_lock);
	/* fail_requests = 1: detached queries get their (deferred) callback
	 * from the loop and are freed; with 0 evdns would leak them. */
	if (!held)
		evdns_base_free(dns, 1);
}

/* Drop a reference (r->lock held); frees the resolver with the last. */
static void
resolver_unref_locked(struct evrdma__resolver *r)
{
	if (--r->refs) {
		pthread_mutex_unlock(&r->lock);
		return;
	}
	pthread_mutex_unlock(&r->lock);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* Our loop: hand the parked results to their callbacks. */
static void
resolver_efd_cb(int fd, void *arg)
{
	struct evrdma__resolver *r = arg;
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		evrdma__log(EVRDMA_LOG_WARN, "resolver eventfd: %s",
		    strerror(errno));
	for (;;) {
		struct evrdma__resolve_req *req;
		struct sockaddr_storage ss;
		evrdma__resolve_cb cb;
		void *cbarg;
		int err, socklen, free_it;

		pthread_mutex_lock(&r->lock);
		req = TAILQ_FIRST(&r->done);
		if (req == NULL) {
			pthread_mutex_unlock(&r->lock);
			return;
		}
		TAILQ_REMOVE(&r->done, req, link);
		req->parked = 0;
		req->user_done = 1;
		cb = req->cb;
		cbarg = req->arg;
		err = req->err;
		socklen = req->socklen;
		memcpy(&ss, &req->ss, sizeof(ss));
		free_it = !req->dns_pending;
		pthread_mutex_unlock(&r->lock);
		if (err)
			evrdma__log(EVRDMA_LOG_DEBUG, "resolving %s: %s",
			    req->host, evutil_gai_strerror(err));
		/* the handle is dead once the callback runs, and the callback
		 * may free its owner: release it first */
		if (free_it)
			free(req);
		cb(err, err ? NULL : (const struct sockaddr *)&ss,
		    err ? 0 : socklen, cbarg);
	}
}

static struct evrdma__resolver *
resolver_get(struct evrdma_base *base)
{
	struct evrdma__resolver *r = base->resolver;

	if (r != NULL)
		return r;
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return NULL;
	pthread_mutex_init(&r->lock, NULL);
	r->refs = 1;
	TAILQ_INIT(&r->done);
	r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->efd < 0 ||
	    !(r->efd_ev = evrdma__ev_fd_new(base, r->efd, resolver_efd_cb,
	    r))) {
		if (r->efd >= 0)
			close(r->efd);
		pthread_mutex_destroy(&r->lock);
		free(r);
		return NULL;
	}
	base->resolver = r;
	return r;
}

/* Park the result (r->lock held) and wake our loop. */
static void
resolve_park_locked(struct evrdma__resolve_req *req, int err,
    const struct evutil_addrinfo *ai)
{
	struct evrdma__resolver *r = req->r;
	uint64_t one = 1;

	if (err == 0 && ai == NULL)
		err = EVUTIL_EAI_NODATA;
	if (err == 0 && (size_t)ai->ai_addrlen > sizeof(req->ss))
		err = EVUTIL_EAI_FAMILY;
	req->err = err;
	if (err == 0) {
		memcpy(&req->ss, ai->ai_addr, ai->ai_addrlen);
		req->socklen = (int)ai->ai_addrlen;
	}
	req->parked = 1;
	TAILQ_INSERT_TAIL(&r->done, req, link);
	if (r->efd >= 0 && write(r->efd, &one, sizeof(one)) < 0)
		evrdma__log(EVRDMA_LOG_WARN, "resolver eventfd: %s",
		    strerror(errno));
}

/* evdns's callback: on the thread of the evdns_base's loop. */
static void
resolve_gai_cb(int result, struct evutil_addrinfo *res, void *p)
{
	struct evrdma__resolve_req *req = p;
	struct evrdma__resolver *r = req->r;
	struct evdns_base *held = req->held_dns;

	/* Our own cancellation (no nameserver) is a resolution failure. */
	if (held != NULL && result == EVUTIL_EAI_CANCEL)
		result = EVUTIL_EAI_FAIL;
	pthread_mutex_lock(&r->lock);
	req->dns_pending = 0;
	if (req->user_done || r->efd < 0) {
		/* detached by evrdma__resolve_cancel() or the base is gone */
		free(req);
	} else {
		resolve_park_locked(req, result, res);
	}
	resolver_unref_locked(r);
	if (res != NULL)
		evutil_freeaddrinfo(res);
	if (held != NULL)
		dns_unhold(held);
}

/* The test knob EVRDMA_TEST_RESOLV_CONF names another resolv.conf, so
 * that tests choose the nameservers (none, or one of their own). */
static const char *
resolv_conf(void)
{
	const char *v = evrdma__test_resolv_conf();

	return v != NULL ? v : "/etc/resolv.conf";
}

static struct evdns_base *
own_dns(struct evrdma_base *base, struct evrdma__resolver *r)
{
	struct evdns_base *dns;
	int rc;

	if (r->own_dns != NULL)
		return r->own_dns;
	/* DISABLE_WHEN_INACTIVE: an idle nameserver socket must not keep
	 * event_base_dispatch() from returning. libevent 2.1 applies the
	 * flag only to nameservers added after evdns_base_new(), so
	 * resolv.conf is parsed here rather than by
	 * EVDNS_BASE_INITIALIZE_NAMESERVERS. */
	dns = evdns_base_new(base->eb, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (dns == NULL)
		return NULL;
	/* NO_DEFAULT: without a configured nameserver, fail names that are
	 * neither numeric nor in /etc/hosts (loaded first, whatever the
	 * outcome) instead of querying 127.0.0.1. */
	rc = evdns_base_resolv_conf_parse(dns, DNS_OPTIONS_ALL |
	    DNS_OPTION_NAMESERVERS_NO_DEFAULT, resolv_conf());
	if (rc != 0 || evdns_base_count_nameservers(dns) == 0)
		evrdma__log(EVRDMA_LOG_INFO, "no nameserver in %s: resolving "
		    "numeric hosts and /etc/hosts only", resolv_conf());
	r->own_dns = dns;
	return dns;
}

struct evdns_base *
evrdma__base_evdns(struct evrdma_base *base)
{
	struct evrdma__resolver *r = resolver_get(base);
	struct evdns_base *dns = r != NULL ? own_dns(base, r) : NULL;

	if (dns == NULL)
		evrdma__fail(ENOMEM, "cannot set up name resolution");
	return dns;
}

struct evrdma__resolve_req *
evrdma__resolve(struct evrdma_base *base, struct evdns_base *dns, int family,
    const char *host, int port, evrdma__resolve_cb cb, void *arg)
{
	struct evrdma__resolver *r;
	struct evrdma__resolve_req *req;
	struct evdns_getaddrinfo_request *greq;
	struct evutil_addrinfo hints;
	char portstr[16];

	if (host == NULL || cb == NULL || port < 1 || port > 65535 ||
	    (family != AF_INET && family != AF_INET6 && family != AF_UNSPEC)) {
		evrdma__fail(EINVAL, "resolve: bad host, port or family");
		return NULL;
	}
	if ((r = resolver_get(base)) == NULL) {
		evrdma__fail(ENOMEM, "cannot set up name resolution");
		return NULL;
	}
	if (dns == NULL && (dns = own_dns(base, r)) == NULL) {
		evrdma__fail(ENOMEM, "evdns_base_new failed");
		return NULL;
	}
	req = calloc(1, sizeof(*req));
	if (req == NULL) {
		evrdma__fail(ENOMEM, "out of memory for a resolve request");
		return NULL;
	}
	req->r = r;
	req->cb = cb;
	req->arg = arg;
	snprintf(req->host, sizeof(req->host), "%s", host);
	snprintf(portstr, sizeof(portstr), "%d", port);

	/* No AI_ADDRCONFIG: hosts whose only addresses are on RDMA or
	 * loopback interfaces would lose their families. */
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = family;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;

	pthread_mutex_lock(&r->lock);
	req->dns_pending = 1;
	r->refs++;
	pthread_mutex_unlock(&r->lock);
	greq = evdns_getaddrinfo(dns, host, portstr, &hints, resolve_gai_cb,
	    req);
	if (greq != NULL && evdns_base_count_nameservers(dns) == 0) {
		/* The query would wait forever for a nameserver. Its
		 * cancellation calls back from the evdns_base's loop with
		 * the failure, after evdns is done with the base. */
		if (dns_hold(dns) == 0) {
			req->held_dns = dns;
			evdns_getaddrinfo_cancel(greq);
		}
	}
	/* evdns returns NULL only after calling back (parked); either way
	 * the result comes through the eventfd. */
	return req;
}

void
evrdma__resolve_cancel(struct evrdma__resolve_req *req)
{
	struct evrdma__resolver *r;
	int free_it = 0;

	if (req == NULL)
		return;
	r = req->r;
	pthread_mutex_lock(&r->lock);
	req->user_done = 1;
	if (req->parked) {
		TAILQ_REMOVE(&r->done, req, link);
		req->parked = 0;
		free_it = !req->dns_pending;
	}
	pthread_mutex_unlock(&r->lock);
	if (free_it)
		free(req);
}

void
evrdma__resolver_free(struct evrdma__resolver *r)
{
	struct evrdma__resolve_req *req;

	if (r == NULL)
		return;
	evrdma__ev_free(r->efd_ev);
	pthread_mutex_lock(&r->lock);
	close(r->efd);
	r->efd = -1;
	/* results nobody will collect */
	while ((req = TAILQ_FIRST(&r->done)) != NULL) {
		TAILQ_REMOVE(&r->done, req, link);
		if (!req->dns_pending)
			free(req);
		else
			req->user_done = 1;
	}
	pthread_mutex_unlock(&r->lock);
	/* our evdns_base fails its queries from our loop... which is about
	 * to stop hearing them: evdns_base_free(dns, 1) calls them back now
	 * (they see efd < 0 and free themselves) */
	dns_free(r->own_dns);
	pthread_mutex_lock(&r->lock);
	resolver_unref_locked(r);
}
