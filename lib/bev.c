/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the bufferevent adapter (evrdma/bufferevent.h says what it is,
 * doc/ARCHITECTURE.md how it is built and why). An adapter ("ad") is:
 *  - the user's bufferevent, a libevent filter bufferevent whose filter
 *    functions are evrdma__ad_in() and evrdma__ad_out() (bev_io.c), and
 *    whose free-context hook (ad_user_freed()) tells us the user is done;
 *  - under it, one end of a bufferevent_pair (u) with its partner (d):
 *    they carry no data, only the token of evrdma__ad_probe();
 *  - the transport (bev_tp.c): an evrdma channel, or a TCP
 *    bufferevent_socket once a connect fell back to TCP.
 * This file makes one, closes it and holds the public calls; bev_ad.h has
 * the map of the adapter's files. They and bev_listener.c hold every
 * libevent call of the adapter.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/dns.h>
#include <evrdma/srq.h>

#include "bev_ad.h"

static void ad_destroy(struct ad *ad);

/* ---- closing ---- */

static void
ad_linger_done(struct ad *ad)
{
	if (ad->lg.on)
		evrdma__linger_stop(ad->base, &ad->lg);
	evrdma__ad_tp_free(ad);
	ad_destroy(ad);
}

static void
ad_linger_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct ad *ad = arg;
	size_t left = evbuffer_get_length(tp_out(ad));
	struct timeval tv;

	if (left && left < ad->linger_left) {
		/* it moves: wait on, another teardown timeout */
		ad->linger_left = left;
		tv.tv_sec = ad->teardown_ms / 1000;
		tv.tv_usec = (suseconds_t)(ad->teardown_ms % 1000) * 1000;
		evtimer_add(ad->linger, &tv);
		return;
	}
	if (left) {
		/* they are lost: a reset, never a FIN after a short stream
		 * (found by review: the peer read EOF) */
		evrdma__log(EVRDMA_LOG_INFO, "bufferevent closed with %zu "
		    "bytes the peer did not take: a reset", left);
		ad->reset_due = 1;
	}
	ad_linger_done(ad);
}

/* The base's linger bound, or its cap (linger.c): the output the peer did
 * not take in time is lost, and the end is a reset. */
static void
ad_linger_expire(struct evrdma__linger *lg)
{
	struct ad *ad = (struct ad *)((char *)lg - offsetof(struct ad, lg));

	evrdma__log(EVRDMA_LOG_INFO, "bufferevent closed with %zu bytes the "
	    "peer did not take within the linger bound: a reset",
	    evbuffer_get_length(tp_out(ad)));
	ad->reset_due = 1;
	ad_linger_done(ad);
}

/* Closing over TCP: received bytes mean the peer still sends to a closed
 * end (a socket answers with a reset), output drained means done, any end
 * is. (A channel closes by itself: evrdma_channel_free() of a channel
 * whose output is taken sends it first.) */
static void
linger_sock_read(struct bufferevent *sock, void *arg)
{
	struct ad *ad = arg;

	ad->reset_due = 1;
	ad_linger_done(ad);
}

static void
linger_sock_write(struct bufferevent *sock, void *arg)
{
	struct ad *ad = arg;

	if (!evbuffer_get_length(bufferevent_get_output(sock))) {
		if (ad->shut_due && !ad->reset_due)
			shutdown(bufferevent_getfd(sock), SHUT_WR);
		ad_linger_done(ad);
	}
}

/* The peer's EOF ends its sending, not ours: a socket closed with output
 * pending still sends it after the peer's FIN (a client that half-closes
 * after its request, then reads the reply). Reading stops; an error, or
 * the end of writing, ends the linger. */
static void
linger_sock_event(struct bufferevent *sock, short what, void *arg)
{
	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR)) {
		bufferevent_disable(sock, EV_READ);
		return;
	}
	ad_linger_done(arg);
}

/*
 * The user freed the bufferevent: end the connection as closing a socket
 * does. What the transport took (it passed the write callback) is sent
 * first, as a kernel sends what the socket accepted; then the end: a
 * reset when received bytes were never taken (the peer sees an error),
 * else EOF. A channel does all that itself; over TCP the adapter waits
 * while the socket's output drains, as long as it drains, up to the
 * teardown timeout without progress.
 */
static void
ad_close(struct ad *ad)
{
	struct timeval tv;

	if (!ad->tp || !ad->tp->lingers) {
		ad_linger_done(ad);
		return;
	}
	ad->reset_due = evbuffer_get_length(tp_in(ad)) > 0;
	ad->linger_left = evbuffer_get_length(tp_out(ad));
	if (ad->state != AD_UP || ad->gone || !ad->linger_left || !ad->base) {
		ad_linger_done(ad);
		return;
	}
	bufferevent_setcb(ad->sock, linger_sock_read, linger_sock_write,
	    linger_sock_event, ad);
	bufferevent_setwatermark(ad->sock, EV_WRITE, 0, 0);
	bufferevent_enable(ad->sock, EV_READ | EV_WRITE);
	tv.tv_sec = ad->teardown_ms / 1000;
	tv.tv_usec = (suseconds_t)(ad->teardown_ms % 1000) * 1000;
	evtimer_add(ad->linger, &tv);
	evrdma__linger_start(ad->base, &ad->lg, ad_linger_expire);
}

/* bufferevent_free() by the user, once libevent is done with it (its
 * free-context hook): u goes with it, d with us. */
static void
ad_user_freed(void *arg)
{
	struct ad *ad = arg;

	/* a burst still gathered goes as it would have gone write by
	 * write: up to the transport's cap */
	if (ad->move_due && ad->state == AD_UP && !ad->gone && !ad->shut) {
		struct evbuffer *src = bufferevent_get_output(ad->bev);
		size_t room = evrdma__ad_room(ad,
		    evbuffer_get_length(tp_out(ad)));
		size_t n = evbuffer_get_length(src);

		if (n > room)
			n = room;
		if (n)
			ad_move(src, tp_out(ad), n, 1);
	}
	event_del(ad->move);
	ad->move_due = 0;
	ad->bev = NULL;
	ad->u = NULL;
	if (ad->d)
		bufferevent_free(ad->d);
	ad->d = NULL;
	event_del(ad->resume);
	event_del(ad->work);
	if (ad->resolving) {
		evrdma__resolve_cancel(ad->resolving);
		ad->resolving = NULL;
	}
	ad_close(ad);
}

static void
ad_destroy(struct ad *ad)
{
	struct evrdma_base *held = ad->on_base ? ad->base : NULL;

	if (ad->on_base) {
		LIST_REMOVE(&ad->hook, link);
		ad->base->stats.bevs--;
	}
	ad->magic = 0;
	if (ad->resolving)
		evrdma__resolve_cancel(ad->resolving);
	if (ad->work)
		event_free(ad->work);
	if (ad->move)
		event_free(ad->move);
	if (ad->resume)
		event_free(ad->resume);
	if (ad->linger)
		event_free(ad->linger);
	if (ad->tok)
		evbuffer_free(ad->tok);
	free(ad->host);
	free(ad);
	evrdma__base_release(held);	/* (a shared base may go) */
}

/*
 * evrdma_base_free(): a closing adapter is finished now, without waiting;
 * a live one loses its base (its channel becomes a husk, which reports
 * nothing more; no fallback and no resolution are possible).
 */
static void
ad_base_gone(struct evrdma__hook *c)
{
	struct ad *ad = (struct ad *)((char *)c - offsetof(struct ad, hook));

	ad->on_base = 0;
	ad->base->stats.bevs--;
	ad->base = NULL;
	if (ad->resolving) {
		evrdma__resolve_cancel(ad->resolving);
		ad->resolving = NULL;
	}
	if (!ad->bev)
		ad_linger_done(ad);
}

/* ---- making one ---- */

/* The adapter without its transport; NULL with errno. */
static struct ad *
ad_new(struct evrdma_base *base, int options)
{
	struct timeval never = { AD_U_TIMEOUT_S, 0 };
	struct bufferevent *pair[2] = { NULL, NULL };
	struct ad *ad = calloc(1, sizeof(*ad));

	if (!ad) {
		evrdma__fail(ENOMEM, "bufferevent: out of memory");
		return NULL;
	}
	ad->magic = AD_MAGIC;
	ad->base = base;
	ad->eb = base->eb;
	ad->teardown_ms = base->cfg.timeout_ms[EVRDMA_TIMEOUT_TEARDOWN];
	ad->read_max = event_get_version_number() < 0x02020000 ?
	    AD_READ_MAX_21 : SIZE_MAX;
	ad->tok = evbuffer_new();
	ad->work = event_new(ad->eb, -1, 0, evrdma__ad_work_cb, ad);
	ad->move = event_new(ad->eb, -1, 0, evrdma__ad_move_cb, ad);
	ad->resume = evtimer_new(ad->eb, evrdma__ad_resume_cb, ad);
	ad->linger = evtimer_new(ad->eb, ad_linger_timeout, ad);
	if (!ad->tok || !ad->work || !ad->move || !ad->resume || !ad->linger ||
	    evbuffer_add(ad->tok, "", 1) < 0 ||
	    bufferevent_pair_new(ad->eb, options & BEV_OPT_THREADSAFE,
	    pair) < 0)
		goto fail;
	ad->u = pair[0];
	ad->d = pair[1];
	ad->bev = bufferevent_filter_new(ad->u, evrdma__ad_in, evrdma__ad_out,
	    options | BEV_OPT_CLOSE_ON_FREE, ad_user_freed, ad);
	if (!ad->bev)
		goto fail;
	/* from here on bufferevent_free(ad->bev) frees it all, u too */
	bufferevent_setcb(ad->u, evrdma__ad_doorbell, NULL, NULL, ad);
	bufferevent_setwatermark(ad->u, EV_READ, 2, 0);
	bufferevent_set_timeouts(ad->u, &never, NULL);
	evrdma__ad_take_timeouts(ad);
	if (!evbuffer_add_cb(bufferevent_get_output(ad->bev),
	    evrdma__ad_output_cb, ad)) {
		bufferevent_free(ad->bev);
		evrdma__fail(ENOMEM, "bufferevent: out of memory");
		return NULL;
	}
	(void)evrdma__ad_probe(ad);	/* EV_READ is off: arms the doorbell */
	ad->hook.base_gone = ad_base_gone;
	LIST_INSERT_HEAD(&base->hooks, &ad->hook, link);
	ad->on_base = 1;
	evrdma__base_hold(base);
	base->stats.bevs++;
	return ad;
fail:
	if (pair[0])
		bufferevent_free(pair[0]);
	if (pair[1])
		bufferevent_free(pair[1]);
	ad->u = ad->d = NULL;
	ad_destroy(ad);
	evrdma__fail(ENOMEM, "bufferevent: out of memory");
	return NULL;
}

/* An accepted transport (one of @p ch, @p sock) under a new adapter; the
 * transport is freed when that fails. */
static struct bufferevent *
ad_accepted(struct evrdma_base *base, struct evrdma_channel *ch,
    struct bufferevent *sock, int options)
{
	struct ad *ad = ad_new(base, options);

	if (!ad) {
		int err = errno;

		if (ch)
			evrdma_channel_free(ch);
		else
			bufferevent_free(sock);
		errno = err;
		return NULL;
	}
	if (ch)
		evrdma__ad_attach_channel(ad, ch);
	else
		evrdma__ad_attach_sock(ad, sock);
	ad->state = AD_UP;
	return ad->bev;
}

struct bufferevent *
evrdma__bev_accepted(struct evrdma_base *base, struct evrdma_channel *ch,
    int options)
{
	return ad_accepted(base, ch, NULL, options);
}

struct bufferevent *
evrdma__bev_accepted_tcp(struct evrdma_base *base, struct bufferevent *sock,
    int options)
{
	return ad_accepted(base, NULL, sock, options);
}

struct bufferevent *
evrdma_bufferevent_new(struct evrdma_base *base, int options)
{
	struct evrdma_channel *ch = NULL;
	struct bufferevent *bev;
	struct ad *ad;

	if (!base || (options & ~AD_OPTIONS)) {
		evrdma__fail(EINVAL, "evrdma_bufferevent_new: %s",
		    base ? "unknown options" : "no base");
		return NULL;
	}
	if (base->no_rdma && !evrdma__bev_tcp_adapters()) {
		bev = bufferevent_socket_new(base->eb, -1,
		    options | BEV_OPT_CLOSE_ON_FREE);
		if (!bev)
			evrdma__fail(ENOMEM, "bufferevent_socket_new failed");
		return bev;
	}
	if (!base->no_rdma) {
		ch = evrdma_channel_new(base, EVRDMA_CHANNEL_STREAM);
		if (!ch)
			return NULL;
	}
	ad = ad_new(base, options);
	if (!ad) {
		int err = errno;

		evrdma_channel_free(ch);
		errno = err;
		return NULL;
	}
	if (ch) {
		evrdma__ad_attach_channel(ad, ch);
		ad->fallback = base->cfg.tcp_fallback;
	} else {
		ad->transport = EVRDMA_TRANSPORT_TCP;
		ad->fallback = 1;
	}
	return ad->bev;
}

struct bufferevent *
evrdma_bufferevent_socket_new(struct event_base *eb, evutil_socket_t fd,
    int options)
{
	struct evrdma_base *base;
	struct bufferevent *bev;
	int err;

	if (!eb || (fd < 0 && fd != -1) || (fd == -1 && (options &
	    ~AD_OPTIONS))) {
		evrdma__fail(EINVAL, "evrdma_bufferevent_socket_new: %s",
		    !eb ? "no event_base" : fd < -1 ? "bad socket" :
		    "unknown options");
		return NULL;
	}
	if (fd >= 0) {
		/* a socket of the program's: TCP (RDMA takes over none) */
		if (!(bev = bufferevent_socket_new(eb, fd, options)))
			evrdma__fail(ENOMEM, "bufferevent_socket_new failed");
		return bev;
	}
	if (!(base = evrdma__base_for(eb)))
		return NULL;
	bev = evrdma_bufferevent_new(base, options);
	err = errno;
	evrdma__base_release(base);
	errno = err;
	return bev;
}

/* The adapter under @p bev, looking through stacked bufferevents. */
static struct ad *
ad_below(struct bufferevent *bev)
{
	int depth;

	for (depth = 0; bev && depth < 16; depth++) {
		struct ad *ad = evrdma__ad_of(bev);

		if (ad)
			return ad;
		bev = bufferevent_get_underlying(bev);
	}
	return NULL;
}

static int
ad_connect_check(struct ad *ad)
{
	if (ad->state != AD_IDLE)
		return evrdma__fail(EISCONN, "evrdma_bufferevent_connect: "
		    "already connecting or connected");
	return 0;
}

/* The connect is under way: its write timeout runs, as a socket's
 * connect's does. 0. */
static int
ad_connect_started(struct ad *ad)
{
	evrdma__ad_connecting(ad, 1);
	return 0;
}

int
evrdma_bufferevent_connect(struct bufferevent *bev, const struct sockaddr *sa,
    int socklen)
{
	struct ad *ad = evrdma__ad_of(bev);

	if (!bev || !sa || socklen <= 0 ||
	    (size_t)socklen > sizeof(struct sockaddr_storage))
		return evrdma__fail(EINVAL, "evrdma_bufferevent_connect: bad "
		    "argument");
	if (!ad)	/* a TCP bufferevent of a base without RDMA */
		return bufferevent_socket_connect(bev, sa, socklen);
	if (ad_connect_check(ad) < 0)
		return -1;
	memcpy(&ad->sa, sa, (size_t)socklen);
	ad->salen = socklen;
	free(ad->host);		/* (of an attempt by name that failed) */
	ad->host = NULL;
	ad->state = AD_CONNECTING;
	if (!ad->tp) {		/* no RDMA here: TCP from the start */
		if (evrdma__ad_tcp_start(ad) == 0)
			return ad_connect_started(ad);
		ad->state = AD_FAILED;
		return -1;
	}
	if (ad->tp->connect(ad) == 0)
		return ad_connect_started(ad);
	if (ad->fallback && errno != EINVAL && errno != EAFNOSUPPORT) {
		evrdma__log(EVRDMA_LOG_INFO, "bufferevent %p: cannot connect "
		    "over RDMA (%s): connecting over TCP", (void *)bev,
		    evrdma_errmsg());
		if (evrdma__ad_tcp_start(ad) == 0)
			return ad_connect_started(ad);
		ad->state = AD_FAILED;
		return -1;
	}
	ad->state = AD_IDLE;
	return -1;
}

/*
 * A socket bufferevent of a base without RDMA: libevent resolves, so that
 * bufferevent_socket_get_dns_error() answers, but never with a NULL
 * evdns_base (a blocking getaddrinfo()): with the base's own, where the
 * program made one; else as libevent does with NULL (a shared base may go
 * before the query ends, and fail it). That one
 * waits for ever on a name it must ask a nameserver for when it has
 * none; then an evdns_base of its own, which resolves numeric names and
 * /etc/hosts' at once (as the base's would), is freed with the query
 * still in it, failing it (EVUTIL_EAI_FAIL) from the loop, as evrdma's
 * resolver fails such a query (loop.c).
 */
static int
sock_connect_hostname(struct bufferevent *bev, struct evdns_base *dns,
    int family, const char *host, int port)
{
	struct evrdma_base *base;
	int rc;

	if (dns)
		return bufferevent_socket_connect_hostname(bev, dns, family,
		    host, port);
	if (!(base = evrdma__base_without_rdma_of(bufferevent_get_base(bev))))
		return bufferevent_socket_connect_hostname(bev, NULL, family,
		    host, port);
	if (!(dns = evrdma__base_evdns(base)))
		return -1;
	if (evdns_base_count_nameservers(dns) > 0)
		return bufferevent_socket_connect_hostname(bev, dns, family,
		    host, port);
	if (!(dns = evdns_base_new(base->eb, 0)))
		return evrdma__fail(ENOMEM, "evdns_base_new failed");
	evdns_base_load_hosts(dns, NULL);
	rc = bufferevent_socket_connect_hostname(bev, dns, family, host,
	    port);
	evdns_base_free(dns, 1);
	return rc;
}

int
evrdma_bufferevent_connect_hostname(struct bufferevent *bev,
    struct evdns_base *dns, int family, const char *host, int port)
{
	struct ad *ad = evrdma__ad_of(bev);

	if (!bev || !host || port < 1 || port > 65535)
		return evrdma__fail(EINVAL, "evrdma_bufferevent_connect_"
		    "hostname: bad argument");
	if (!ad)
		return sock_connect_hostname(bev, dns, family, host, port);
	if (ad_connect_check(ad) < 0)
		return -1;
	free(ad->host);
	if (!(ad->host = strdup(host)))
		return evrdma__fail(ENOMEM, "out of memory");
	ad->dns = dns;
	ad->family = family;
	ad->port = port;
	ad->state = AD_CONNECTING;
	if (!ad->tp) {		/* no RDMA here: TCP from the start */
		if (evrdma__ad_tcp_start(ad) == 0)
			return ad_connect_started(ad);
		ad->state = AD_FAILED;
		return -1;
	}
	if (ad->tp->connect(ad) == 0)
		return ad_connect_started(ad);
	ad->state = AD_IDLE;
	return -1;
}

int
evrdma_bufferevent_set_srq(struct bufferevent *bev, struct evrdma_srq *srq)
{
	struct ad *ad = evrdma__ad_of(bev);

	if (!ad || !ad->ch)
		return evrdma__fail(EINVAL, "evrdma_bufferevent_set_srq: not "
		    "an RDMA bufferevent");
	if (ad->state != AD_IDLE)
		return evrdma__fail(EINVAL, "evrdma_bufferevent_set_srq: "
		    "already connecting or connected");
	return evrdma_channel_set_srq(ad->ch, srq);
}

int
evrdma_bufferevent_get_error(struct bufferevent *bev)
{
	struct ad *ad = ad_below(bev);
	struct bufferevent *u;

	if (ad)
		return ad->error;
	/* a socket's (a base without RDMA makes them), under what is
	 * stacked on it: its name lookup, or the kernel's end of it */
	while (bev && (u = bufferevent_get_underlying(bev)))
		bev = u;
	if (!bev)
		return EVRDMA_REASON_NONE;
	if (bufferevent_socket_get_dns_error(bev))
		return EVRDMA_REASON_DNS;
	return evrdma__tcp_reason(bufferevent_getfd(bev));
}

int
evrdma_bufferevent_get_dns_error(struct bufferevent *bev)
{
	struct ad *ad = ad_below(bev);
	struct bufferevent *u;

	if (ad)
		return ad->dns_error;
	/* a socket's, under what is stacked on it */
	while (bev && (u = bufferevent_get_underlying(bev)))
		bev = u;
	return bev ? bufferevent_socket_get_dns_error(bev) : 0;
}

int
evrdma_bufferevent_get_stats(struct bufferevent *bev,
    struct evrdma_channel_stats *out, size_t outlen)
{
	struct evrdma_channel_stats st;
	struct ad *ad;
	evutil_socket_t fd;

	if (!bev)
		return evrdma__fail(EINVAL, "evrdma_bufferevent_get_stats: no "
		    "bufferevent");
	ad = ad_below(bev);
	if (ad && ad->tp && ad->tp->stats)
		return ad->tp->stats(ad, out, outlen);
	memset(&st, 0, sizeof(st));
	fd = ad ? (ad->sock ? bufferevent_getfd(ad->sock) : -1) :
	    bufferevent_getfd(bev);
	if (ad && fd < 0) {
		/* not yet connected, or its transport gone */
		st.transport = ad->transport;
		st.state = ad->state == AD_UP || ad->state == AD_FAILED ?
		    EVRDMA_CHANNEL_ENDED : EVRDMA_CHANNEL_CONNECTING;
	} else if (fd < 0) {
		return evrdma__fail(EINVAL, "evrdma_bufferevent_get_stats: "
		    "neither an evrdma nor a socket bufferevent");
	} else if (evrdma__tcp_stats(fd, &st) < 0) {
		return -1;
	}
	return evrdma__stats_out(out, outlen, &st, sizeof(st), sizeof(st));
}

int
evrdma_bufferevent_get_transport(struct bufferevent *bev)
{
	struct ad *ad;

	if (!bev)
		return EVRDMA_TRANSPORT_NONE;
	ad = ad_below(bev);
	return ad ? ad->transport : EVRDMA_TRANSPORT_TCP;
}
