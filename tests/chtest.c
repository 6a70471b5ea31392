/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: the channel fixtures of chtest.h. One channel end
 * (struct ep) checks what it receives against the sender's pattern where
 * it arrives and counts every callback, so that a test asserts on counts;
 * a listener (struct chl) hands its accepted channels to such ends; a pair
 * (struct chp) is a client connected to a listener's first channel.
 */
#include "chtest.h"

#include <evrdma/srq.h>

#include <errno.h>

/* ---- one channel end ---- */

void
ep_free(struct ep *e)
{
	if (e->ch && !e->freed) {
		evrdma_channel_free(e->ch);
		e->ch = NULL;
		e->freed = 1;
	}
}

/* Check everything in input against the pattern and drain it. */
void
ep_consume(struct ep *e)
{
	struct evbuffer *in = evrdma_channel_get_input(e->ch);
	struct evbuffer_iovec v[16];
	int n, i;

	if (e->seed_hdr && !e->have_hdr) {
		uint64_t h;

		if (evbuffer_get_length(in) < 8)
			return;
		ck_assert_int_eq(evbuffer_remove(in, &h, 8), 8);
		e->rx_seed = le64toh(h);
		e->have_hdr = 1;
	}
	while (evbuffer_get_length(in) > 0) {
		size_t got = 0, bad;

		n = evbuffer_peek(in, -1, NULL, v, 16);
		ck_assert_int_gt(n, 0);
		if (n > 16)
			n = 16;
		for (i = 0; i < n; i++) {
			bad = pat_check(v[i].iov_base, e->rx + got,
			    v[i].iov_len, e->rx_seed);
			ck_assert_msg(bad == (size_t)-1, "%s: byte %llu of the "
			    "stream is wrong", e->name,
			    (unsigned long long)(e->rx + got + bad));
			got += v[i].iov_len;
		}
		ck_assert_uint_gt(got, 0);
		ck_assert_int_eq(evbuffer_drain(in, got), 0);
		e->rx += got;
	}
	if (e->on_rx)
		e->on_rx(e);
}

/*
 * Queue the pattern until tx_total is queued or output reaches pump_hi:
 * writes of up to EP_CHUNK bytes, or reservations of random sizes.
 */
void
ep_pump(struct ep *e)
{
	struct evbuffer *out = evrdma_channel_get_output(e->ch);
	uint8_t *tmp = NULL;	/* the writes' bytes, for this call */

	while (e->tx_queued < e->tx_total &&
	    (e->pump_hi == 0 || evbuffer_get_length(out) < e->pump_hi)) {
		size_t n = EP_CHUNK;

		if (e->zc_rng) {
			size_t max = evrdma_channel_max_message(e->ch);
			uint8_t *p;

			n = rng_range(&e->zc_rng, 1, max);
			if (n > e->tx_total - e->tx_queued)
				n = (size_t)(e->tx_total - e->tx_queued);
			errno = 0;
			p = evrdma_channel_reserve(e->ch, n);
			if (!p) {
				/* the write callback comes back */
				ck_assert_int_eq(errno, EAGAIN);
				e->zc_eagain++;
				break;
			}
			pat_fill(p, e->tx_queued, n, e->tx_seed);
			ck_assert_int_eq(evrdma_channel_commit(e->ch, n), 0);
			e->tx_queued += n;
			continue;
		}

		if (n > e->tx_total - e->tx_queued)
			n = (size_t)(e->tx_total - e->tx_queued);
		if (!tmp) {
			tmp = malloc(EP_CHUNK);
			ck_assert_ptr_nonnull(tmp);
		}
		pat_fill(tmp, e->tx_queued, n, e->tx_seed);
		if (evrdma_channel_write(e->ch, tmp, n) < 0)
			ck_abort_msg("%s: write of %zu bytes at %llu: %s (%s)",
			    e->name, n, (unsigned long long)e->tx_queued,
			    strerror(errno), evrdma_errmsg());
		e->tx_queued += n;
	}
	free(tmp);
}

void
ep_readcb(struct evrdma_channel *ch, void *arg)
{
	struct ep *e = arg;
	size_t len;

	ck_assert_msg(!e->freed, "%s: read callback after free", e->name);
	ck_assert_ptr_eq(ch, e->ch);
	ck_assert_msg(!e->in_readcb, "%s: read callback re-entered", e->name);
	e->in_readcb = 1;
	e->nread++;
	if (e->ends)
		e->reads_after_end++;
	len = evbuffer_get_length(evrdma_channel_get_input(ch));
	if (len > e->max_in)
		e->max_in = len;
	if (e->drain)
		ep_consume(e);
	e->in_readcb = 0;
	if (e->free_in == FREE_READ)
		ep_free(e);
}

void
ep_writecb(struct evrdma_channel *ch, void *arg)
{
	struct ep *e = arg;

	ck_assert_msg(!e->freed, "%s: write callback after free", e->name);
	ck_assert_ptr_eq(ch, e->ch);
	e->nwrite++;
	if (e->pump_in_wcb)
		ep_pump(e);
	if (e->free_in == FREE_WRITE)
		ep_free(e);
}

void
ep_eventcb(struct evrdma_channel *ch, short what, void *arg)
{
	struct ep *e = arg;

	ck_assert_msg(!e->freed, "%s: event 0x%x after free", e->name, what);
	ck_assert_ptr_eq(ch, e->ch);
	/* the reading end, then the writing end: a socket's write fails
	 * after its read saw the peer's FIN or reset */
	if (e->ends && (e->what & BEV_EVENT_READING) &&
	    what == (BEV_EVENT_ERROR | BEV_EVENT_WRITING) &&
	    !e->wr_err_after_eof) {
		e->wr_err_after_eof++;
		return;
	}
	ck_assert_msg(!e->ends, "%s: event 0x%x after EOF/ERROR 0x%x",
	    e->name, what, e->what);
	e->nevent++;
	e->what = what;
	if (what & BEV_EVENT_CONNECTED)
		e->connected++;
	if (what & BEV_EVENT_EOF)
		e->eof++;
	if (what & BEV_EVENT_ERROR) {
		e->error++;
		e->reason = evrdma_channel_get_error(ch);
	}
	if (what & BEV_EVENT_TIMEOUT)
		e->timeout++;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		e->ends++;
		e->rx_at_end = e->rx +
		    evbuffer_get_length(evrdma_channel_get_input(ch));
	}
	if ((e->free_in == FREE_CONNECTED && (what & BEV_EVENT_CONNECTED)) ||
	    (e->free_in == FREE_EOF && (what & BEV_EVENT_EOF)) ||
	    (e->free_in == FREE_ERROR && (what & BEV_EVENT_ERROR)))
		ep_free(e);
}

/* Start connecting @p e (a new channel) to @p sa. */
void
ep_connect(struct dt_env *env, struct ep *e, const char *name,
    const struct sockaddr_storage *ss, int sslen, int mode, int read)
{
	e->name = name;
	e->ch = evrdma_channel_new(env->base, mode);
	if (!e->ch)
		ck_abort_msg("evrdma_channel_new: %s (%s)", strerror(errno),
		    evrdma_errmsg());
	/* as bufferevent: EV_WRITE on, EV_READ off */
	ck_assert_int_eq(evrdma_channel_get_enabled(e->ch), EV_WRITE);
	evrdma_channel_setcb(e->ch, ep_readcb, ep_writecb, ep_eventcb, e);
	if (read) {
		ck_assert_int_eq(evrdma_channel_enable(e->ch, EV_READ), 0);
		ck_assert_int_eq(evrdma_channel_get_enabled(e->ch),
		    EV_READ | EV_WRITE);
	}
	if (e->srq && evrdma_channel_set_srq(e->ch, e->srq) < 0)
		ck_abort_msg("evrdma_channel_set_srq: %s (%s)",
		    strerror(errno), evrdma_errmsg());
	if (evrdma_channel_connect(e->ch, (const struct sockaddr *)ss,
	    sslen) < 0)
		ck_abort_msg("evrdma_channel_connect: %s (%s)",
		    strerror(errno), evrdma_errmsg());
}

/* Send @p n more bytes of from's stream and wait until @p to has them. */
void
ep_xfer(struct dt_env *env, struct ep *from, struct ep *to, size_t n, int ms)
{
	int ends = to->ends + from->ends;

	to->drain = 1;
	to->rx_seed = from->tx_seed;
	ck_assert_uint_eq(to->rx, from->tx_total);
	from->tx_total += n;
	ep_pump(from);
	CH_WAIT(env->eb, to->rx >= from->tx_total ||
	    to->ends + from->ends > ends, ms);
	ck_assert_uint_eq(to->rx, from->tx_total);
}

/* ---- a listener and its accepted channels ---- */

static void
chl_accept(struct evrdma_listener *l, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct chl *c = arg;
	struct ep *e;

	ck_assert_ptr_nonnull(ch);
	ck_assert_ptr_nonnull(peer);
	ck_assert_int_gt(socklen, 0);
	ck_assert_int_lt(c->naccepted, CHL_MAX);
	if (c->accept_free) {
		c->naccepted++;
		evrdma_channel_free(ch);
		if (c->accept_free == 2) {
			evrdma_listener_free(l);
			c->lst = NULL;
		}
		return;
	}
	e = &c->acc[c->naccepted];
	e->ch = ch;
	if (!e->name)
		e->name = "accepted";
	ck_assert_int_eq(evrdma_channel_get_enabled(ch), EV_WRITE);
	evrdma_channel_setcb(ch, ep_readcb, ep_writecb, ep_eventcb, e);
	if (c->read[c->naccepted])
		ck_assert_int_eq(evrdma_channel_enable(ch, EV_READ), 0);
	c->naccepted++;
}

void
chl_listen(struct chl *c, struct dt_env *env, int mode)
{
	struct sockaddr_storage ss;
	int len = dt_sockaddr(&ss, dt_addr(), 0);

	c->env = env;
	c->lst = evrdma_channel_listener_new(env->base, chl_accept, c, mode,
	    64, (struct sockaddr *)&ss, len);
	if (!c->lst)
		ck_abort_msg("evrdma_channel_listener_new: %s (%s)",
		    strerror(errno), evrdma_errmsg());
	c->sslen = dt_sockaddr(&c->ss, dt_addr(),
	    evrdma_listener_get_port(c->lst));
}

/* ---- a connected pair ---- */

void
chp_open(struct chp *p, struct dt_env *env, int mode, int srv_read)
{
	p->env = env;
	p->srv = &p->l.acc[0];
	p->srv->name = "server";
	p->l.read[0] = srv_read;
	chl_listen(&p->l, env, mode);
	p->cli.tx_seed = 0xc11e0000u + (unsigned)mode;
	p->srv->tx_seed = 0x5e4e0000u + (unsigned)mode;
	ep_connect(env, &p->cli, "client", &p->l.ss, p->l.sslen, mode, 1);
	CH_WAIT(env->eb, (p->cli.connected && p->l.naccepted) || p->cli.ends,
	    15000);
	ck_assert_int_eq(p->cli.connected, 1);
	ck_assert_int_eq(p->cli.nevent, 1);
	ck_assert_int_eq(p->cli.what, BEV_EVENT_CONNECTED);
	ck_assert_int_eq(evrdma_channel_get_error(p->cli.ch),
	    EVRDMA_REASON_NONE);
}

void
chl_close(struct chl *c)
{
	int i;

	for (i = 0; i < CHL_MAX; i++)
		ep_free(&c->acc[i]);
	evrdma_listener_free(c->lst);
	c->lst = NULL;
}

void
chp_close(struct chp *p)
{
	ep_free(&p->cli);
	chl_close(&p->l);
	ch_drain(p->env, 20000);
}
