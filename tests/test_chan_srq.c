/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: channels on a shared receive queue
 * (evrdma_channel_srq_new). Channels on both ends of a pool smaller than
 * their rings together move byte-exact streams both ways at once; a pool
 * with no room left rejects the next channel and serves the others; a
 * stream and its EOF that arrive just before the peer disconnects are
 * delivered whole (a pool's receives are not flushed); a bufferevent
 * listener serves bufferevents from a queue; the misuses are refused; and
 * freeing the queue before its channels, or the base with
 * everything still open, leaves nothing behind. The attacker's side (a
 * peer that ignores what it was lent) is in test_chan_attack.c.
 */
#include "config.h"
#include "chtest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <evrdma/bufferevent.h>
#include <evrdma/srq.h>

#define SLOTS	8		/* ring slots R of every channel here */
#define SLOT	4096
#define NCH	4		/* channels of the echo test */
#define POOL	32		/* buffers of each pool: under NCH * R */

static void
srq_env(struct dt_env *env, unsigned slot)
{
	struct evrdma_config *cfg = ring_config(SLOTS, slot, 256 * KiB);

	dt_env_init(env, cfg);
	evrdma_config_free(cfg);
}

/* RNR NAKs the device's responders sent (rxe's counter): none while
 * every credit is backed by a posted buffer. */
static unsigned long long
rnr_naks(void)
{
	return dt_hw_counter("send_rnr_err");
}

/* The connections are gone (the queues, alive, keep their receives). */
static void
conns_gone(struct dt_env *env)
{
	struct evrdma_stats st;
	uint64_t dl = tu_now_ms() + 20000;

	for (;;) {
		evrdma_base_get_stats(env->base, &st, sizeof(st));
		if (!st.conns && !st.qps && !st.cm_ids)
			return;
		ck_assert_msg(tu_now_ms() < dl, "connections left: %u",
		    st.conns);
		ch_step(env->eb, 10);
	}
}

/* NCH clients, each on the client pool, to a listener on the server pool:
 * 1 MiB each way on every channel at once, every byte checked. With 32
 * buffers (2 kept back, 8 for control credits) the 4 channels of a pool
 * are lent 22 data credits together, not their 4 x R of 32, and no peer
 * ever meets a missing receive. */
START_TEST(chsrq_streams)
{
	struct dt_env env;
	struct chl l;
	struct ep cli[NCH];
	struct evrdma_srq *ssrq, *csrq;
	unsigned long long rnr0;
	int i, done;

	memset(&l, 0, sizeof(l));
	memset(cli, 0, sizeof(cli));
	srq_env(&env, SLOT);
	ssrq = evrdma_channel_srq_new(env.base, NULL, POOL);
	csrq = evrdma_channel_srq_new(env.base, NULL, POOL);
	ck_assert_msg(ssrq && csrq, "evrdma_channel_srq_new: %s",
	    evrdma_errmsg());
	for (i = 0; i < NCH; i++)
		l.read[i] = 1;
	chl_listen(&l, &env, EVRDMA_CHANNEL_STREAM);
	ck_assert_int_eq(evrdma_listener_set_srq(l.lst, ssrq), 0);
	/* one at a time: acc[i] is then cli[i]'s peer */
	for (i = 0; i < NCH; i++) {
		cli[i].srq = csrq;
		cli[i].tx_seed = 0xc0ffee00u + (unsigned)i;
		ep_connect(&env, &cli[i], "client", &l.ss, l.sslen,
		    EVRDMA_CHANNEL_STREAM, 1);
		CH_WAIT(env.eb, (cli[i].connected && l.naccepted == i + 1) ||
		    cli[i].ends, 15000);
		ck_assert_int_eq(cli[i].connected, 1);
	}
	/* both directions on every channel at once */
	for (i = 0; i < NCH; i++) {
		struct ep *s = &l.acc[i], *c = &cli[i];

		s->tx_seed = 0x5e5e0000u + (unsigned)i;
		s->drain = c->drain = 1;
		s->rx_seed = c->tx_seed;
		c->rx_seed = s->tx_seed;
		s->pump_hi = c->pump_hi = 256 * KiB;
		s->pump_in_wcb = c->pump_in_wcb = 1;
		s->tx_total = c->tx_total = 1 * MiB;
	}
	rnr0 = rnr_naks();
	for (i = 0; i < NCH; i++) {
		ep_pump(&cli[i]);
		ep_pump(&l.acc[i]);
	}
	do {
		ch_step(env.eb, 50);
		done = 0;
		for (i = 0; i < NCH; i++) {
			ck_assert_int_eq(cli[i].ends, 0);
			ck_assert_int_eq(l.acc[i].ends, 0);
			done += cli[i].rx == 1 * MiB && l.acc[i].rx == 1 * MiB;
		}
	} while (done < NCH);
	/* the pools never let a peer send into no buffer */
	ck_assert_uint_eq(rnr_naks() - rnr0, 0);
	for (i = 0; i < NCH; i++) {
		ep_free(&cli[i]);
		ep_free(&l.acc[i]);
	}
	chl_close(&l);
	evrdma_srq_free(ssrq);
	evrdma_srq_free(csrq);
	ch_drain(&env, 20000);
	dt_env_fini(&env);
}
END_TEST

/* A pool of 16 buffers (1 kept back) has room for 15 channels (one data
 * credit each: control messages draw on the free buffers). */
#define FULL_N	15

/* The full pool's bed: a base, a pool of 16 buffers and a stream
 * listener whose channels read; what is tested is the pool's room, so
 * nobody idle is evicted for a newcomer (test_strangers.c). */
static struct evrdma_srq *
full_setup(struct dt_env *env, struct chl *l)
{
	struct evrdma_srq *srq;
	int i;

	memset(l, 0, sizeof(*l));
	srq_env(env, SLOT);
	srq = evrdma_channel_srq_new(env->base, NULL, 16);
	ck_assert_ptr_nonnull(srq);
	ck_assert_int_eq(evrdma_channel_srq_set_admission(srq, 0, 0, NULL,
	    NULL), 0);
	for (i = 0; i < FULL_N + 2; i++)
		l->read[i] = 1;
	chl_listen(l, env, EVRDMA_CHANNEL_STREAM);
	return srq;
}

/* The channels a full pool holds each move 64 KiB; with one credit
 * each, and none to lend: slow, but whole. */
static void
full_xfer(struct dt_env *env, struct ep *cli, struct chl *l)
{
	int i;

	for (i = 0; i < FULL_N; i++)
		ep_xfer(env, &cli[i], &l->acc[i], 64 * KiB, 20000);
}

/* The full pool's bed goes: @p n clients, the listener, the pool. */
static void
full_done(struct dt_env *env, struct chl *l, struct ep *cli, int n,
    struct evrdma_srq *srq)
{
	int i;

	for (i = 0; i < n; i++)
		ep_free(&cli[i]);
	chl_close(l);
	evrdma_srq_free(srq);
	ch_drain(env, 20000);
	dt_env_fini(env);
}

/* A pool of 16 buffers has room for FULL_N channels: the next is
 * rejected, those move data, and once one of them goes a new one is
 * accepted. */
START_TEST(chsrq_full)
{
	struct dt_env env;
	struct chl l;
	struct ep cli[FULL_N + 2];
	struct evrdma_srq *srq;
	int i;

	memset(cli, 0, sizeof(cli));
	srq = full_setup(&env, &l);
	ck_assert_int_eq(evrdma_listener_set_srq(l.lst, srq), 0);
	for (i = 0; i < FULL_N; i++) {
		cli[i].tx_seed = 0xf0110000u + (unsigned)i;
		ep_connect(&env, &cli[i], "client", &l.ss, l.sslen,
		    EVRDMA_CHANNEL_STREAM, 1);
		CH_WAIT(env.eb, (cli[i].connected && l.naccepted == i + 1) ||
		    cli[i].ends, 15000);
		ck_assert_int_eq(cli[i].connected, 1);
	}
	ep_connect(&env, &cli[FULL_N], "refused", &l.ss, l.sslen,
	    EVRDMA_CHANNEL_STREAM, 1);
	CH_WAIT(env.eb, cli[FULL_N].connected || cli[FULL_N].ends, 15000);
	ck_assert_int_eq(cli[FULL_N].connected, 0);
	ck_assert_int_eq(cli[FULL_N].error, 1);
	ck_assert_int_eq(cli[FULL_N].reason, EVRDMA_REASON_REJECTED);
	ck_assert_int_eq(l.naccepted, FULL_N);
	full_xfer(&env, cli, &l);
	/* one goes: its place is free again */
	ep_free(&cli[0]);
	CH_WAIT(env.eb, l.acc[0].ends, 10000);
	ep_free(&l.acc[0]);
	ch_loop_for(env.eb, 200);
	cli[FULL_N + 1].tx_seed = 0xf0114444u;
	ep_connect(&env, &cli[FULL_N + 1], "again", &l.ss, l.sslen,
	    EVRDMA_CHANNEL_STREAM, 1);
	CH_WAIT(env.eb, (cli[FULL_N + 1].connected &&
	    l.naccepted == FULL_N + 1) || cli[FULL_N + 1].ends, 15000);
	ck_assert_int_eq(cli[FULL_N + 1].connected, 1);
	ep_xfer(&env, &cli[FULL_N + 1], &l.acc[FULL_N], 64 * KiB, 20000);
	full_done(&env, &l, cli, FULL_N + 2, srq);
}
END_TEST

/* The active side: FULL_N clients fill their pool of 16 buffers, the
 * next cannot join it and its connect fails with RESOURCE (the server,
 * without a pool, never sees it); the others move data. */
START_TEST(chsrq_full_active)
{
	struct dt_env env;
	struct chl l;
	struct ep cli[FULL_N + 1];
	struct evrdma_srq *srq;
	int i;

	memset(cli, 0, sizeof(cli));
	srq = full_setup(&env, &l);
	for (i = 0; i < FULL_N + 1; i++) {
		cli[i].tx_seed = 0xf0120000u + (unsigned)i;
		cli[i].srq = srq;
		ep_connect(&env, &cli[i], i < FULL_N ? "client" : "no room",
		    &l.ss, l.sslen, EVRDMA_CHANNEL_STREAM, 1);
		CH_WAIT(env.eb, (cli[i].connected && l.naccepted == i + 1) ||
		    cli[i].ends, 15000);
	}
	for (i = 0; i < FULL_N; i++)
		ck_assert_int_eq(cli[i].connected, 1);
	ck_assert_int_eq(cli[FULL_N].connected, 0);
	ck_assert_int_eq(cli[FULL_N].error, 1);
	ck_assert_int_eq(cli[FULL_N].reason, EVRDMA_REASON_RESOURCE);
	ch_loop_for(env.eb, 200);
	ck_assert_int_eq(l.naccepted, FULL_N);
	full_xfer(&env, cli, &l);
	full_done(&env, &l, cli, FULL_N + 1, srq);
}
END_TEST

/* A client on a pool writes, shuts down and frees its channel as soon as
 * its output is on its way, 20 times: the server (on a pool too) gets every byte and then EOF, never
 * an error: what arrived before the disconnect is taken from the queue
 * before the connection goes. */
START_TEST(chsrq_end_in_order)
{
	struct dt_env env;
	struct chl l;
	struct evrdma_srq *ssrq, *csrq;
	int round;

	srq_env(&env, SLOT);
	ssrq = evrdma_channel_srq_new(env.base, NULL, POOL);
	csrq = evrdma_channel_srq_new(env.base, NULL, POOL);
	ck_assert_ptr_nonnull(ssrq);
	ck_assert_ptr_nonnull(csrq);
	for (round = 0; round < 20; round++) {
		struct ep cli;
		struct ep *s;

		memset(&l, 0, sizeof(l));
		memset(&cli, 0, sizeof(cli));
		l.read[0] = 1;
		chl_listen(&l, &env, EVRDMA_CHANNEL_STREAM);
		ck_assert_int_eq(evrdma_listener_set_srq(l.lst, ssrq), 0);
		s = &l.acc[0];
		cli.srq = csrq;
		cli.tx_seed = 0xe0f00000u + (unsigned)round;
		ep_connect(&env, &cli, "client", &l.ss, l.sslen,
		    EVRDMA_CHANNEL_STREAM, 1);
		CH_WAIT(env.eb, (cli.connected && l.naccepted) || cli.ends,
		    15000);
		ck_assert_int_eq(cli.connected, 1);
		s->drain = 1;
		s->rx_seed = cli.tx_seed;
		cli.tx_total = 64 * KiB + (size_t)round * 777;
		ep_pump(&cli);
		ck_assert_uint_eq(cli.tx_queued, cli.tx_total);
		/* freeing discards unsent output, as bufferevent_free():
		 * once all of it is on its way */
		CH_WAIT(env.eb, evbuffer_get_length(evrdma_channel_get_output(
		    cli.ch)) == 0 || cli.ends, 15000);
		ck_assert_int_eq(evrdma_channel_shutdown(cli.ch), 0);
		ep_free(&cli);
		CH_WAIT(env.eb, s->ends, 15000);
		ck_assert_msg(s->eof == 1 && s->error == 0,
		    "round %d: the server saw 0x%x (reason %d) after %llu of "
		    "%llu bytes", round, s->what, s->reason,
		    (unsigned long long)s->rx_at_end,
		    (unsigned long long)cli.tx_total);
		ck_assert_uint_eq(s->rx, cli.tx_total);
		chl_close(&l);
		conns_gone(&env);
	}
	evrdma_srq_free(ssrq);
	evrdma_srq_free(csrq);
	ch_drain(&env, 20000);
	dt_env_fini(&env);
}
END_TEST

static void
nop_accept(struct evrdma_listener *l, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	(void)l;
	(void)peer;
	(void)socklen;
	(void)arg;
	evrdma_channel_free(ch);
}

static void
nop_conn_accept(struct evrdma_listener *l, struct evrdma_conn *conn,
    const struct sockaddr *peer, int socklen, void *arg)
{
	(void)l;
	(void)peer;
	(void)socklen;
	(void)arg;
	evrdma_conn_free(conn);
}

/* Each kind of queue serves its own kind only, and a channel takes one
 * before it connects, of its own slot size. */
START_TEST(chsrq_misuse)
{
	struct dt_env env, env2;
	struct evrdma_srq *csrq, *rsrq, *other;
	struct evrdma_channel *ch;
	struct evrdma_conn *conn;
	struct evrdma_listener *cl, *rl;
	struct sockaddr_storage ss;
	int len;
	uint8_t buf[64];

	srq_env(&env, SLOT);
	srq_env(&env2, 2 * SLOT);
	errno = 0;
	ck_assert_ptr_null(evrdma_channel_srq_new(env.base, NULL, 15));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(evrdma_channel_srq_new(NULL, NULL, 64));
	csrq = evrdma_channel_srq_new(env.base, NULL, 64);
	rsrq = evrdma_srq_new(env.base, NULL, 64);
	other = evrdma_channel_srq_new(env2.base, NULL, 64);
	ck_assert_ptr_nonnull(csrq);
	ck_assert_ptr_nonnull(rsrq);
	ck_assert_ptr_nonnull(other);
	/* a channel queue takes no receives and no raw connections */
	ck_assert_ptr_null(evrdma_srq_mr_reg(csrq, buf, sizeof(buf)));
	ck_assert_int_eq(errno, EINVAL);
	conn = evrdma_conn_new(env.base, 0);
	ck_assert_ptr_nonnull(conn);
	ck_assert_int_eq(evrdma_conn_set_srq(conn, csrq), -1);
	ck_assert_int_eq(errno, EINVAL);
	evrdma_conn_free(conn);
	/* a channel takes no raw queue, none of another base, one once */
	ch = evrdma_channel_new(env.base, EVRDMA_CHANNEL_STREAM);
	ck_assert_ptr_nonnull(ch);
	ck_assert_int_eq(evrdma_channel_set_srq(ch, rsrq), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(evrdma_channel_set_srq(ch, NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(evrdma_channel_set_srq(ch, other), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(evrdma_channel_set_srq(ch, csrq), 0);
	ck_assert_int_eq(evrdma_channel_set_srq(ch, csrq), -1);
	ck_assert_int_eq(errno, EINVAL);
	evrdma_channel_free(ch);
	/* ... and none once it connects */
	len = dt_sockaddr(&ss, dt_addr(), 1);
	ch = evrdma_channel_new(env.base, EVRDMA_CHANNEL_STREAM);
	ck_assert_int_eq(evrdma_channel_connect(ch, (struct sockaddr *)&ss,
	    len), 0);
	ck_assert_int_eq(evrdma_channel_set_srq(ch, csrq), -1);
	ck_assert_int_eq(errno, EINVAL);
	evrdma_channel_free(ch);
	/* listeners: each takes its own kind */
	len = dt_sockaddr(&ss, dt_addr(), 0);
	cl = evrdma_channel_listener_new(env.base, nop_accept, NULL,
	    EVRDMA_CHANNEL_STREAM, 4, (struct sockaddr *)&ss, len);
	rl = evrdma_listener_new(env.base, nop_conn_accept, NULL,
	    EVRDMA_LISTEN_RAW, 4, (struct sockaddr *)&ss, len);
	ck_assert_ptr_nonnull(cl);
	ck_assert_ptr_nonnull(rl);
	ck_assert_int_eq(evrdma_listener_set_srq(cl, rsrq), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(evrdma_listener_set_srq(rl, csrq), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(evrdma_listener_set_srq(cl, csrq), 0);
	ck_assert_int_eq(evrdma_listener_set_srq(rl, rsrq), 0);
	ck_assert_int_eq(evrdma_listener_set_srq(cl, NULL), 0);
	evrdma_listener_free(cl);
	evrdma_listener_free(rl);
	evrdma_srq_free(csrq);
	evrdma_srq_free(rsrq);
	evrdma_srq_free(other);
	ch_drain(&env, 20000);
	ch_drain(&env2, 20000);
	dt_env_fini(&env2);
	dt_env_fini(&env);
}
END_TEST

/* _i 0: the queues are freed first, while their channels carry data (the
 * channels go on); 1: the base is freed with queues, channels and unread
 * input still there. */
START_TEST(chsrq_free_order)
{
	struct dt_env env;
	struct chp p;
	struct evrdma_srq *ssrq, *csrq;

	memset(&p, 0, sizeof(p));
	srq_env(&env, SLOT);
	ssrq = evrdma_channel_srq_new(env.base, NULL, POOL);
	csrq = evrdma_channel_srq_new(env.base, NULL, POOL);
	ck_assert_ptr_nonnull(ssrq);
	ck_assert_ptr_nonnull(csrq);
	p.env = &env;
	p.srv = &p.l.acc[0];
	p.srv->name = "server";
	p.l.read[0] = 1;
	chl_listen(&p.l, &env, EVRDMA_CHANNEL_STREAM);
	ck_assert_int_eq(evrdma_listener_set_srq(p.l.lst, ssrq), 0);
	p.cli.srq = csrq;
	p.cli.tx_seed = 0xf4eef4eeu;
	p.srv->tx_seed = 0x5eeef4eeu;
	ep_connect(&env, &p.cli, "client", &p.l.ss, p.l.sslen,
	    EVRDMA_CHANNEL_STREAM, 1);
	CH_WAIT(env.eb, (p.cli.connected && p.l.naccepted) || p.cli.ends,
	    15000);
	ck_assert_int_eq(p.cli.connected, 1);
	ep_xfer(&env, &p.cli, p.srv, 128 * KiB, 20000);
	if (_i == 0) {
		evrdma_srq_free(ssrq);
		evrdma_srq_free(csrq);
		ep_xfer(&env, &p.cli, p.srv, 128 * KiB, 20000);
		ep_xfer(&env, p.srv, &p.cli, 128 * KiB, 20000);
		chp_close(&p);
	} else {
		/* bytes left unread in the server's input, by reference */
		p.srv->drain = 0;
		p.cli.tx_total += 64 * KiB;
		ep_pump(&p.cli);
		ch_loop_for(env.eb, 300);
		evrdma_srq_free(csrq);
	}
	if (_i == 0) {
		dt_env_fini(&env);
		return;
	}
	evrdma_base_free(env.base);
	/* the handles left are husks: freeing them is safe */
	ep_free(&p.cli);
	ep_free(p.srv);
	evrdma_srq_free(ssrq);
	evrdma_listener_free(p.l.lst);
	event_base_free(env.eb);
	dt_assert_no_rdma_resources();
}
END_TEST

/* ---- bufferevents on a queue: the server of the drop-in ---- */

struct bsrv {
	struct bufferevent *bev[FULL_N + 2];
	int n, ends;
};

static void
bsrv_read(struct bufferevent *bev, void *arg)
{
	(void)arg;
	bufferevent_write_buffer(bev, bufferevent_get_input(bev));
}

static void
bsrv_event(struct bufferevent *bev, short what, void *arg)
{
	struct bsrv *b = arg;

	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		b->ends++;
}

static void
bsrv_accept(struct evrdma_listener *lst, struct bufferevent *bev,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct bsrv *b = arg;

	(void)lst;
	(void)peer;
	(void)socklen;
	ck_assert_int_lt(b->n, FULL_N + 2);
	b->bev[b->n++] = bev;
	bufferevent_setcb(bev, bsrv_read, NULL, bsrv_event, b);
	bufferevent_enable(bev, EV_READ);
}

struct bcli {
	size_t got;
	int connected, ends;
	uint64_t seed;
	size_t bad;		/* first wrong byte + 1 */
};

static void
bcli_read(struct bufferevent *bev, void *arg)
{
	struct bcli *c = arg;

	pat_take(bufferevent_get_input(bev), c->seed, &c->got, &c->bad);
}

static void
bcli_event(struct bufferevent *bev, short what, void *arg)
{
	struct bcli *c = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED)
		c->connected = 1;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		c->ends++;
}

/* A bufferevent listener (evrdma_bufferevent_listener_new) on a queue of
 * channels: two bufferevent clients echo 512 KiB each through it, byte
 * for byte, at once; _i 1: the clients on a queue of their own too
 * (evrdma_bufferevent_set_srq), which refuses misuse. */
START_TEST(chsrq_bufferevents)
{
	struct dt_env env;
	struct evrdma_listener *lst;
	struct evrdma_srq *srq, *csrq = NULL;
	struct sockaddr_storage ss;
	struct bsrv b;
	struct bcli c[2];
	struct bufferevent *cli[2];
	static uint8_t data[512 * KiB];
	int len, i, ends0;

	memset(&b, 0, sizeof(b));
	memset(c, 0, sizeof(c));
	srq_env(&env, SLOT);
	srq = evrdma_channel_srq_new(env.base, NULL, POOL);
	ck_assert_ptr_nonnull(srq);
	if (_i) {
		/* 16 buffers: room for FULL_N channels (see chsrq_full) */
		csrq = evrdma_channel_srq_new(env.base, NULL, 16);
		ck_assert_ptr_nonnull(csrq);
		ck_assert_int_eq(evrdma_channel_srq_set_admission(csrq, 0, 0,
		    NULL, NULL), 0);
	}
	len = dt_sockaddr(&ss, dt_addr(), 0);
	lst = evrdma_bufferevent_listener_new(env.base, bsrv_accept, &b, 0, 8,
	    (struct sockaddr *)&ss, len);
	ck_assert_ptr_nonnull(lst);
	ck_assert_int_eq(evrdma_listener_set_srq(lst, srq), 0);
	len = dt_sockaddr(&ss, dt_addr(), evrdma_listener_get_port(lst));
	for (i = 0; i < 2; i++) {
		c[i].seed = 0xbe5e0000u + (unsigned)i;
		cli[i] = evrdma_bufferevent_new(env.base, 0);
		ck_assert_ptr_nonnull(cli[i]);
		bufferevent_setcb(cli[i], bcli_read, NULL, bcli_event, &c[i]);
		bufferevent_enable(cli[i], EV_READ | EV_WRITE);
		if (csrq) {
			errno = 0;
			ck_assert_int_eq(evrdma_bufferevent_set_srq(cli[i],
			    NULL), -1);
			ck_assert_int_eq(errno, EINVAL);
			ck_assert_int_eq(evrdma_bufferevent_set_srq(cli[i],
			    csrq), 0);
		}
		ck_assert_int_eq(evrdma_bufferevent_connect(cli[i],
		    (struct sockaddr *)&ss, len), 0);
		if (csrq) {
			/* once connecting, as a channel's */
			errno = 0;
			ck_assert_int_eq(evrdma_bufferevent_set_srq(cli[i],
			    csrq), -1);
			ck_assert_int_eq(errno, EINVAL);
		}
		CH_WAIT(env.eb, c[i].connected || c[i].ends, 15000);
		ck_assert_int_eq(c[i].connected, 1);
	}
	if (csrq) {
		/* not an RDMA bufferevent, or not one of ours: refused */
		errno = 0;
		ck_assert_int_eq(evrdma_bufferevent_set_srq(NULL, csrq), -1);
		ck_assert_int_eq(errno, EINVAL);
		errno = 0;
		ck_assert_int_eq(evrdma_bufferevent_set_srq(b.bev[0], csrq),
		    -1);
		ck_assert_int_eq(errno, EINVAL);
	}
	if (csrq) {
		/* the clients really are on their queue: it holds FULL_N - 2
		 * more (before any was lent more than it joined with), and
		 * one more bufferevent on it cannot connect; they go again */
		struct bufferevent *more[FULL_N - 1];
		struct bcli mc[FULL_N - 1];

		memset(mc, 0, sizeof(mc));
		for (i = 0; i < FULL_N - 1; i++) {
			more[i] = evrdma_bufferevent_new(env.base, 0);
			ck_assert_ptr_nonnull(more[i]);
			bufferevent_setcb(more[i], NULL, NULL, bcli_event,
			    &mc[i]);
			ck_assert_int_eq(evrdma_bufferevent_set_srq(more[i],
			    csrq), 0);
			ck_assert_int_eq(evrdma_bufferevent_connect(more[i],
			    (struct sockaddr *)&ss, len), 0);
			CH_WAIT(env.eb, mc[i].connected || mc[i].ends, 15000);
		}
		for (i = 0; i < FULL_N - 2; i++)
			ck_assert_int_eq(mc[i].connected, 1);
		ck_assert_int_eq(mc[FULL_N - 2].connected, 0);
		ck_assert_int_eq(mc[FULL_N - 2].ends, 1);
		ck_assert_int_eq(evrdma_bufferevent_get_error(
		    more[FULL_N - 2]), EVRDMA_REASON_RESOURCE);
		for (i = 0; i < FULL_N - 1; i++)
			bufferevent_free(more[i]);
		CH_WAIT(env.eb, b.ends == FULL_N - 2, 10000);
		ck_assert_int_eq(b.ends, FULL_N - 2);
	}
	ends0 = b.ends;
	for (i = 0; i < 2; i++) {
		pat_fill(data, 0, sizeof(data), c[i].seed);
		ck_assert_int_eq(bufferevent_write(cli[i], data, sizeof(data)),
		    0);
	}
	CH_WAIT(env.eb, (c[0].got == sizeof(data) &&
	    c[1].got == sizeof(data)) || c[0].ends || c[1].ends ||
	    b.ends > ends0, 30000);
	for (i = 0; i < 2; i++) {
		ck_assert_msg(c[i].got == sizeof(data), "client %d: %zu of "
		    "%zu bytes back; client ends %d (%s), server ends %d; "
		    "posted: server's queue %u, clients' %u", i,
		    c[i].got, sizeof(data), c[i].ends,
		    evrdma_reason_str(evrdma_bufferevent_get_error(cli[i])),
		    b.ends, evrdma_srq_get_posted(srq),
		    csrq ? evrdma_srq_get_posted(csrq) : 0);
		ck_assert_uint_eq(c[i].bad, 0);
	}
	for (i = 0; i < 2; i++)
		bufferevent_free(cli[i]);
	CH_WAIT(env.eb, b.ends == b.n, 10000);
	for (i = 0; i < b.n; i++)
		bufferevent_free(b.bev[i]);
	evrdma_listener_free(lst);
	evrdma_srq_free(srq);
	evrdma_srq_free(csrq);
	ch_drain(&env, 20000);
	dt_env_fini(&env);
}
END_TEST

Suite *
dt_suite_chan_srq(void)
{
	Suite *s = suite_create("device-chan-srq");
	TCase *tc = tcase_create("chan-srq");

	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, chsrq_streams);
	tcase_add_test(tc, chsrq_full);
	tcase_add_test(tc, chsrq_full_active);
	tcase_add_test(tc, chsrq_end_in_order);
	tcase_add_test(tc, chsrq_misuse);
	tcase_add_loop_test(tc, chsrq_bufferevents, 0, 2);
	tcase_add_loop_test(tc, chsrq_free_order, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
