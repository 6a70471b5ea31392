/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the bufferevent adapter's transport (bev_ad.h has the map): an
 * evrdma channel, or a TCP bufferevent_socket once a connect fell back to
 * TCP (or, on a base without RDMA, when the test knob EVRDMA_BEV_ADAPTER=1
 * asks for adapters there); connecting, and the transport's callbacks.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>

#include "bev_ad.h"

#include <event2/dns.h>

/* ---- connecting ---- */

static void
ad_connected(struct ad *ad)
{
	struct bufferevent *bev = evrdma__ad_live(ad);

	ad->state = AD_UP;
	if (!bev)
		return;
	evrdma__log(EVRDMA_LOG_DEBUG, "bufferevent %p: connected over %s",
	    (void *)bev, ad->transport == EVRDMA_TRANSPORT_RDMA ? "RDMA" :
	    "TCP");
	evrdma__ad_connecting(ad, 0);
	bufferevent_incref(bev);
	bufferevent_trigger_event(bev, BEV_EVENT_CONNECTED, 0);
	evrdma__ad_pull(ad);
	if (ad->finish_due) {
		ad->finish_due = 0;
		bufferevent_flush(bev, EV_WRITE, BEV_FINISHED);
	}
	evrdma__ad_deliver(ad);
	bufferevent_decref(bev);
}

/* The connect failed: over TCP now, or the user hears it. */
static void
ad_connect_failed(struct ad *ad, int reason, int err)
{
	struct bufferevent *bev = evrdma__ad_live(ad);

	if (ad->ch && ad->fallback && reason != EVRDMA_REASON_DNS) {
		evrdma__log(EVRDMA_LOG_INFO, "bufferevent %p: the RDMA connect "
		    "failed (%s): connecting over TCP", (void *)bev,
		    evrdma_reason_str(reason));
		if (evrdma__ad_tcp_start(ad) == 0)
			return;
		reason = EVRDMA_REASON_CONNECT_ERROR;
		err = errno;
	}
	ad->state = AD_FAILED;
	ad->error = reason;
	evrdma__ad_connecting(ad, 0);
	evrdma__log(EVRDMA_LOG_INFO, "bufferevent %p: connect failed: %s",
	    (void *)bev, evrdma_reason_str(reason));
	if (bev) {
		errno = err;
		bufferevent_trigger_event(bev, BEV_EVENT_ERROR, 0);
	}
}

/* What the transport reports (the BEV_EVENT_* flags of either kind). */
static void
ad_tp_event(struct ad *ad, short what, int reason, int err)
{
	if (what & BEV_EVENT_CONNECTED) {
		ad_connected(ad);
		return;
	}
	if (ad->state == AD_CONNECTING) {
		ad_connect_failed(ad, reason, err);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT)
		return;		/* the transport has no timeouts set */
	if ((what & BEV_EVENT_READING) && !ad->rd_end)
		ad->rd_end = (what & BEV_EVENT_EOF) ?
		    BEV_EVENT_EOF | BEV_EVENT_READING :
		    BEV_EVENT_ERROR | BEV_EVENT_READING;
	if ((what & BEV_EVENT_ERROR) ||
	    (what & (BEV_EVENT_EOF | BEV_EVENT_WRITING)) ==
	    (BEV_EVENT_EOF | BEV_EVENT_WRITING)) {
		ad->gone = 1;
		if (!ad->error)
			ad->error = reason ? reason :
			    EVRDMA_REASON_DISCONNECTED;
		if (!ad->err)
			ad->err = err ? err : evrdma__reason_errno(ad->error);
	}
	evrdma__ad_deliver(ad);
	evrdma__ad_write_end(ad);
}

static void
tp_ch_read(struct evrdma_channel *ch, void *arg)
{
	evrdma__ad_deliver(arg);
}

/*
 * The channel's sink (evrdma__chan_set_sink()): a small arrival, while
 * the channel's input is empty, is copied straight into the bufferevent's
 * input when the bufferevent reads, has room below its read high
 * watermark and no rate limit. That spares the channel's input, the move
 * out of it (evrdma__ad_take()) and the channel's read callback: about 500
 * instructions per message, a fifth of the adapter's cost. Anything else
 * is declined and goes the usual way (tp_ch_read()).
 */
static int
tp_ch_take(void *arg, const void *p, size_t len)
{
	struct ad *ad = arg;
	struct bufferevent *bev = evrdma__ad_live(ad);
	struct evbuffer *in;

	if (!bev || ad->delivering || ad->rd_end ||
	    !(evrdma__lev_enabled(bev) & EV_READ) || !evrdma__ad_probe(ad) ||
	    evrdma__ad_rate_max(ad, 0) != SIZE_MAX)
		return 0;
	in = bufferevent_get_input(bev);
	if (evrdma__ad_read_room(bev, in) < len ||
	    evrdma__ad_read_max(ad, bev) < len)
		return 0;
	return ad_add(in, p, len) == 0;
}

/* What tp_ch_take() took: the read timeout restarts and the read
 * callback runs, as after evrdma__ad_take(). */
static void
tp_ch_taken(void *arg)
{
	struct ad *ad = arg;
	struct bufferevent *bev = evrdma__ad_live(ad);

	if (!bev)
		return;
	evrdma__ad_read_restart(bev);
	/* no reference of ours: bufferevent_trigger() holds one around the
	 * callback, and nothing here touches bev after it (a free by the
	 * user reaches ad only later, from the loop: ad_user_freed()) */
	ad->delivering = 1;
	bufferevent_trigger(bev, EV_READ, 0);
	ad->delivering = 0;
}

static const struct evrdma__chan_sink tp_ch_sink = {
	.take = tp_ch_take,
	.taken = tp_ch_taken,
};

static void
tp_ch_write(struct evrdma_channel *ch, void *arg)
{
	evrdma__ad_pull(arg);
}

static void
tp_ch_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct ad *ad = arg;

	ad->dns_error = ch->dns_error;
	ad_tp_event(ad, what, evrdma_channel_get_error(ch),
	    (what & BEV_EVENT_ERROR) ? errno : 0);
}

static void
tp_sock_read(struct bufferevent *sock, void *arg)
{
	evrdma__ad_deliver(arg);
}

static void
tp_sock_write(struct bufferevent *sock, void *arg)
{
	struct ad *ad = arg;

	if (ad->shut_due && !evbuffer_get_length(bufferevent_get_output(sock))) {
		ad->shut_due = 0;
		shutdown(bufferevent_getfd(sock), SHUT_WR);
		bufferevent_setwatermark(sock, EV_WRITE, ad->cap / 2, 0);
	}
	evrdma__ad_pull(ad);
}

static void
tp_sock_event(struct bufferevent *sock, short what, void *arg)
{
	struct ad *ad = arg;
	int err = EVUTIL_SOCKET_ERROR(), one = 1;

	if (what & BEV_EVENT_CONNECTED)
		(void)setsockopt(bufferevent_getfd(sock), IPPROTO_TCP,
		    TCP_NODELAY, &one, sizeof(one));
	ad_tp_event(ad, what, ad->state == AD_CONNECTING ?
	    EVRDMA_REASON_CONNECT_ERROR : EVRDMA_REASON_DISCONNECTED, err);
}

/* The fallback resolved the host again (evrdma's resolver). */
static void
ad_resolved(int err, const struct sockaddr *sa, int socklen, void *arg)
{
	struct ad *ad = arg;

	ad->resolving = NULL;
	ad->dns_error = err;
	if (!err && bufferevent_socket_connect(ad->sock, sa, socklen) == 0)
		return;
	ad_connect_failed(ad, err ? EVRDMA_REASON_DNS :
	    EVRDMA_REASON_CONNECT_ERROR, err ? 0 : EVUTIL_SOCKET_ERROR());
}

/* ---- the two transports' tables ---- */

static int
ch_connect(struct ad *ad)
{
	if (ad->host)
		return evrdma_channel_connect_hostname(ad->ch, ad->dns,
		    ad->family, ad->host, ad->port);
	return evrdma_channel_connect(ad->ch, (struct sockaddr *)&ad->sa,
	    ad->salen);
}

static void
ch_shutdown(struct ad *ad)
{
	if (evrdma_channel_shutdown(ad->ch) < 0)
		evrdma__log(EVRDMA_LOG_DEBUG, "bufferevent %p: shutdown: %s",
		    (void *)ad->bev, evrdma_errmsg());
}

static void
ch_flush(struct ad *ad)
{
	evrdma_channel_flush(ad->ch);
}

static int
ch_write(struct ad *ad, const void *p, size_t n)
{
	return evrdma_channel_write(ad->ch, p, n);
}

static int
ch_stats(struct ad *ad, struct evrdma_channel_stats *out, size_t outlen)
{
	return evrdma_channel_get_stats(ad->ch, out, outlen);
}

/* (a channel whose output is taken sends it, then its end: EOF, or a
 * reset when the user left bytes unread) */
static void
ch_free(struct ad *ad)
{
	evrdma_channel_free(ad->ch);
	ad->ch = NULL;
}

static const struct ad_tp tp_channel = {
	.connect = ch_connect,
	.shutdown = ch_shutdown,
	.flush = ch_flush,
	.write = ch_write,
	.stats = ch_stats,
	.free = ch_free,
};

static void
sock_shutdown(struct ad *ad)
{
	if (evbuffer_get_length(tp_out(ad)) == 0) {
		shutdown(bufferevent_getfd(ad->sock), SHUT_WR);
	} else {
		/* after what the socket bufferevent still holds */
		ad->shut_due = 1;
		bufferevent_setwatermark(ad->sock, EV_WRITE, 0, 0);
	}
}

static void
sock_free(struct ad *ad)
{
	if (ad->reset_due) {
		struct linger lg = { 1, 0 };	/* a reset */

		(void)setsockopt(bufferevent_getfd(ad->sock), SOL_SOCKET,
		    SO_LINGER, &lg, sizeof(lg));
	}
	bufferevent_free(ad->sock);
	ad->sock = NULL;
}

static const struct ad_tp tp_sock = {
	.shutdown = sock_shutdown,
	.free = sock_free,
	.lingers = 1,
};

void
evrdma__ad_tp_free(struct ad *ad)
{
	if (ad->tp)
		ad->tp->free(ad);
	ad->tp = NULL;
	ad->in = ad->out = NULL;
}

void
evrdma__ad_attach_sock(struct ad *ad, struct bufferevent *sock)
{
	ad->tp = &tp_sock;
	ad->sock = sock;
	ad->in = bufferevent_get_input(sock);
	ad->out = bufferevent_get_output(sock);
	ad->transport = EVRDMA_TRANSPORT_TCP;
	ad->cap = SOCK_CAP;
	bufferevent_setcb(sock, tp_sock_read, tp_sock_write, tp_sock_event,
	    ad);
	bufferevent_setwatermark(sock, EV_WRITE, ad->cap / 2, 0);
	bufferevent_setwatermark(sock, EV_READ, 0, ad->cap);
	bufferevent_enable(sock, EV_READ);
}

/*
 * Go over TCP: a socket bufferevent replaces the channel (freed: it never
 * connected) and connects to the same address, or resolves the host again.
 * 0, or -1 with errno.
 */
int
evrdma__ad_tcp_start(struct ad *ad)
{
	struct bufferevent *sock;

	sock = bufferevent_socket_new(ad->eb, -1, BEV_OPT_CLOSE_ON_FREE);
	if (!sock)
		return evrdma__fail(ENOMEM, "bufferevent: out of memory");
	evrdma__ad_tp_free(ad);		/* the channel: it never connected */
	evrdma__ad_attach_sock(ad, sock);
	if (ad->host) {
		if (!ad->base)
			return evrdma__fail(EPIPE, "bufferevent: base freed");
		ad->resolving = evrdma__resolve(ad->base, ad->dns, ad->family,
		    ad->host, ad->port, ad_resolved, ad);
		return ad->resolving ? 0 : -1;
	}
	if (bufferevent_socket_connect(sock, (struct sockaddr *)&ad->sa,
	    ad->salen) < 0)
		return evrdma__fail(errno ? errno : ECONNREFUSED, "bufferevent: "
		    "TCP connect: %s", strerror(errno ? errno : ECONNREFUSED));
	return 0;
}

void
evrdma__ad_attach_channel(struct ad *ad, struct evrdma_channel *ch)
{
	const struct evrdma_config *cfg = &ad->base->cfg;
	size_t ring = (size_t)cfg->ch_slots * cfg->ch_slot_size;

	ad->tp = &tp_channel;
	ad->ch = ch;
	ad->in = evrdma_channel_get_input(ch);
	ad->out = evrdma_channel_get_output(ch);
	ad->transport = EVRDMA_TRANSPORT_RDMA;
	/* twice the ring: a backlog then shows in the channel's output as
	 * deeper than its ring, as it does for a channel's own large writes,
	 * and the channel has the peer pull more of it (chan_tx.c,
	 * rc_pull_limit()); the bytes move as chains, not copied. (1 MiB
	 * writes through the adapter: 100 -> 123 MB/s, 64 KiB ones as
	 * before; bench/ab-bw with EXTRA=--bev-adapter) */
	ad->cap = 2 * ring;
	evrdma_channel_setcb(ch, tp_ch_read, tp_ch_write, tp_ch_event, ad);
	(void)evrdma__chan_set_sink(ch, &tp_ch_sink, ad);	/* a stream */
	/* what moved into the channel passed the write callback: a free
	 * sends it, as a kernel sends what a socket accepted */
	evrdma__chan_output_taken(ch);
	evrdma_channel_setwatermark(ch, EV_WRITE, ad->cap / 2, 0);
	/* the receive buffer: what the bufferevent does not take waits in
	 * input up to this mark, then in the ring, holding the peer back */
	evrdma_channel_setwatermark(ch, EV_READ, 0, ring);
	evrdma_channel_enable(ch, EV_READ);
}
