/*
 * evrdma: the libevent glue. This is the only library file that includes
 * libevent headers; the rest of evrdma sees opaque events and a resolver
 * with a simple contract (the result always arrives from the loop).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

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
};

static void
fd_trampoline(evutil_socket_t fd, short what, void *p)
{
	struct ev_glue *g = p;

	g->fd_cb((int)fd, g->arg);
}

static void
timer_trampoline(evutil_socket_t fd, short what, void *p)
{
	struct ev_glue *g = p;

	g->timer_cb(g->arg);
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
	ev = event_new(base->eb, fd, EV_READ | EV_PERSIST, fd_trampoline, g);
	if (ev == NULL) {
		free(g);
		evrdma__fail(ENOMEM, "event_new(fd %d) failed", fd);
		return NULL;
	}
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
	ev = evtimer_new(base->eb, timer_trampoline, g);
	if (ev == NULL) {
		free(g);
		evrdma__fail(ENOMEM, "evtimer_new failed");
		return NULL;
	}
	return ev;
}

int
evrdma__ev_timer_start(struct event *ev, unsigned ms)
{
	struct timeval tv;

	/* A zero timeout expires at the next loop iteration, after the
	 * backend has polled the fds: that is how the poller yields. Adding
	 * a pending timer again replaces its deadline. */
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	if (evtimer_add(ev, &tv) < 0)
		return evrdma__fail(ENOMEM, "evtimer_add failed");
	return 0;
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
 * evdns_getaddrinfo() answers numeric hosts and hosts-file names from
 * inside the call. Such a result is parked here and delivered from a 0-ms
 * timer, so the caller always sees its callback from the loop, after
 * evrdma__resolve() returned the handle.
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
	evrdma__resolve_cb cb;
	void *arg;
	struct event *timer;		/* delivers a parked result */
	struct evdns_base *held_dns;	/* cancelled for want of a nameserver */
	int in_call;			/* inside evdns_getaddrinfo() */
	int dns_pending;		/* evdns still holds this struct */
	int user_done;			/* delivered or cancelled */
	int err;			/* parked result */
	struct sockaddr_storage ss;
	int socklen;
	char host[64];			/* for log messages */
};

/* evdns bases with a cancelled query whose callback is still to come.
 * evrdma__dns_free() of such a base is carried out by the last of those
 * callbacks. A process-wide list: bases may live on several threads. */
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

static const struct timeval zero_tv = { 0, 0 };

static void
resolve_req_maybe_free(struct evrdma__resolve_req *req)
{
	if (!req->user_done)
		return;
	/* The timer goes with the caller's interest: a detached query may
	 * outlive the evrdma_base (a user evdns_base on another loop). */
	if (req->timer != NULL) {
		event_free(req->timer);
		req->timer = NULL;
	}
	if (!req->dns_pending)
		free(req);
}

static void
resolve_deliver(struct evrdma__resolve_req *req)
{
	evrdma__resolve_cb cb = req->cb;
	void *arg = req->arg;
	struct sockaddr_storage ss;
	int socklen = req->socklen;
	int err = req->err;

	if (err)
		evrdma__log(EVRDMA_LOG_DEBUG, "resolving %s: %s", req->host,
		    evutil_gai_strerror(err));
	memcpy(&ss, &req->ss, sizeof(ss));
	/* The handle is dead once the callback runs, and the callback may
	 * free its owner: release everything first. */
	req->user_done = 1;
	resolve_req_maybe_free(req);
	cb(err, err ? NULL : (const struct sockaddr *)&ss, err ? 0 : socklen,
	    arg);
}

static void
resolve_timer_cb(evutil_socket_t fd, short what, void *p)
{
	resolve_deliver(p);
}

static void
resolve_park(struct evrdma__resolve_req *req, int err,
    const struct evutil_addrinfo *ai)
{
	if (err == 0 && ai == NULL)
		err = EVUTIL_EAI_NODATA;
	if (err == 0 && (size_t)ai->ai_addrlen > sizeof(req->ss))
		err = EVUTIL_EAI_FAMILY;
	req->err = err;
	if (err == 0) {
		memcpy(&req->ss, ai->ai_addr, ai->ai_addrlen);
		req->socklen = (int)ai->ai_addrlen;
	}
}

static void
resolve_gai_cb(int result, struct evutil_addrinfo *res, void *p)
{
	struct evrdma__resolve_req *req = p;
	struct evdns_base *held = req->held_dns;

	req->dns_pending = 0;
	/* Our own cancellation (no nameserver) is a resolution failure. */
	if (held != NULL && result == EVUTIL_EAI_CANCEL)
		result = EVUTIL_EAI_FAIL;
	if (req->user_done) {
		/* Detached by evrdma__resolve_cancel(). */
		resolve_req_maybe_free(req);
	} else {
		resolve_park(req, result, res);
		if (!req->in_call)
			resolve_deliver(req);
		/* else evrdma__resolve() arms the timer */
	}
	if (res != NULL)
		evutil_freeaddrinfo(res);
	if (held != NULL)
		dns_unhold(held);
}

static struct evdns_base *
own_dns(struct evrdma_base *base)
{
	struct evdns_base *dns;
	int r;

	if (base->own_dns != NULL)
		return base->own_dns;
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
	r = evdns_base_resolv_conf_parse(dns, DNS_OPTIONS_ALL |
	    DNS_OPTION_NAMESERVERS_NO_DEFAULT, "/etc/resolv.conf");
	if (r != 0 || evdns_base_count_nameservers(dns) == 0)
		evrdma__log(EVRDMA_LOG_INFO, "no nameserver in "
		    "/etc/resolv.conf: resolving numeric hosts and /etc/hosts "
		    "only");
	base->own_dns = dns;
	return dns;
}

struct evrdma__resolve_req *
evrdma__resolve(struct evrdma_base *base, struct evdns_base *dns, int family,
    const char *host, int port, evrdma__resolve_cb cb, void *arg)
{
	struct evrdma__resolve_req *req;
	struct evdns_getaddrinfo_request *greq;
	struct evutil_addrinfo hints;
	char portstr[16];

	if (host == NULL || cb == NULL || port < 1 || port > 65535 ||
	    (family != AF_INET && family != AF_INET6 && family != AF_UNSPEC)) {
		evrdma__fail(EINVAL, "resolve: bad host, port or family");
		return NULL;
	}
	if (dns == NULL && (dns = own_dns(base)) == NULL) {
		evrdma__fail(ENOMEM, "evdns_base_new failed");
		return NULL;
	}
	req = calloc(1, sizeof(*req));
	if (req == NULL) {
		evrdma__fail(ENOMEM, "out of memory for a resolve request");
		return NULL;
	}
	/* Made up front: once evdns has answered there is no way left to
	 * report a failure to allocate it. */
	req->timer = evtimer_new(base->eb, resolve_timer_cb, req);
	if (req->timer == NULL) {
		free(req);
		evrdma__fail(ENOMEM, "evtimer_new failed");
		return NULL;
	}
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

	req->in_call = 1;
	req->dns_pending = 1;
	greq = evdns_getaddrinfo(dns, host, portstr, &hints, resolve_gai_cb,
	    req);
	req->in_call = 0;
	if (greq == NULL && req->dns_pending) {
		/* evdns returns NULL only after calling back; be safe. */
		req->dns_pending = 0;
		req->err = EVUTIL_EAI_FAIL;
	} else if (greq != NULL && evdns_base_count_nameservers(dns) == 0) {
		/* The query would wait forever for a nameserver. Its
		 * cancellation calls back from the loop with the failure,
		 * after evdns is done with the base. */
		if (dns_hold(dns) == 0) {
			req->held_dns = dns;
			evdns_getaddrinfo_cancel(greq);
			return req;
		}
		/* No memory to hold the base: fail from the timer and
		 * leave the query to evdns (freed with its base). */
		req->err = EVUTIL_EAI_FAIL;
	} else if (greq != NULL) {
		return req;
	}
	/* Adding a timer to a live base only fails for want of memory,
	 * which the timer itself already took. */
	evtimer_add(req->timer, &zero_tv);
	return req;
}

void
evrdma__resolve_cancel(struct evrdma__resolve_req *req)
{
	if (req == NULL)
		return;
	req->user_done = 1;
	resolve_req_maybe_free(req);
}

void
evrdma__dns_free(struct evdns_base *dns)
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
