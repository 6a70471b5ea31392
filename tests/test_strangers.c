/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: what a stranger may do that the protocol allows,
 * and a hostile server (review r47). A raw verbs peer (rawpeer.h) asks
 * for retry counts of its choosing; one host holds as many idle channels
 * of a shared pool as it can, or floods it with half-open requests; a
 * raw listener answers an evrdma client with a reply and a conversation
 * of its choosing. Each says what must hold: our QP's retries are ours,
 * a newcomer gets in, and the client ends once, with the right reason.
 * (A freed connection that lingers: test_bev_strangers.c; a channel's
 * own free discards what the transport did not take, so only the
 * bufferevent adapter's can be kept long.)
 */
#include "victim.h"

#include <arpa/inet.h>

#include <event2/buffer.h>
#include <evrdma/srq.h>

/* What a channel's QP retries (its statistics). */
static void
qp_retries(struct evrdma_channel *ch, struct evrdma_channel_stats *st)
{
	ck_assert_int_eq(evrdma_channel_get_stats(ch, st, sizeof(*st)), 0);
	fprintf(stderr, "  QP: rnr_retry %u, retry_count %u, ack_timeout %u, "
	    "min_rnr_timer %u\n", st->rnr_retry, st->retry_count,
	    st->ack_timeout, st->min_rnr_timer);
}

/* A base whose channels retry 3 times (the peers here ask for 6 or 7),
 * with no keepalive (so that only the QP's own counts can end a stall). */
static struct evrdma_config *
retry_config(void)
{
	struct evrdma_config *cfg = ring_config(8, AT_SLOT, 0);

	ck_assert_int_eq(evrdma_config_set_transport_retry(cfg, 0, 3), 0);
	ck_assert_int_eq(evrdma_config_set_keepalive(cfg, 0, 1000, 3), 0);
	return cfg;
}

/* ==== 1. the peer's retry counts ==== */

/*
 * Finding 2: the connect request asks for RNR retry 7 (for ever) and 6
 * transport retries; the accepted channel's QP used them, so an echo to a
 * peer that posts no receive hung with no event for as long as the peer
 * stayed. Now the QP retries as we decide: no RNR retry toward a peer's
 * own ring (_i 0: a channel on its own ring; 1: on a shared pool, whose
 * peer has its own ring all the same), our transport retries, an ACK
 * timeout within bounds; and the echo to a peer without receives fails
 * the channel at once.
 */
START_TEST(strangers_rnr_passive)
{
	struct dt_env env;
	struct victim v;
	struct rawpeer rp;
	struct rp_chs h = rp_hs();
	struct evrdma_channel_stats st;
	struct evrdma_srq *srq = NULL;
	uint64_t t0;

	memset(&v, 0, sizeof(v));
	memset(&rp, 0, sizeof(rp));
	if (_i) {
		srq = v_listen_pool(&v, &env, retry_config(), 64);
	} else {
		struct evrdma_config *cfg = retry_config();

		dt_env_init(&env, cfg);
		evrdma_config_free(cfg);
		v.echo = 1;
		v_listen(&v, &env);
	}
	/* (rp_prepare/rp_connect_now ask for rnr_retry 7, retry_count 6) */
	ck_assert_int_eq(rp_open(&rp, &v, &h, 32, 32), 0);
	CH_WAIT(env.eb, v.naccepted == 1, 10000);
	qp_retries(v.ch[0].ch, &st);
	ck_assert_uint_eq(st.rnr_retry, 0);
	ck_assert_uint_eq(st.retry_count, 3);
	ck_assert_uint_ge(st.ack_timeout, 12);
	ck_assert_uint_le(st.ack_timeout, 20);
	/* the peer posts no receive: the echo (on a pool, the grant of its
	 * first credit already) meets an RNR, which ends the channel */
	if (!_i) {
		memset(rp.mem + RP_SCRATCH, 'r', 64);
		rp_data(&rp, RP_SCRATCH, 64);
	}
	t0 = tu_now_ms();
	v_wait_end(&v, &v.ch[0], &rp, 5000);
	fprintf(stderr, "a peer without receives (%s): the channel ended "
	    "after %llu ms, reason %d\n", _i ? "pool" : "ring",
	    (unsigned long long)(tu_now_ms() - t0), v.ch[0].reason);
	ck_assert_int_eq(v.ch[0].ends, 1);
	ck_assert_int_eq(v.ch[0].error, 1);
	rp_close(&rp);
	if (srq)
		evrdma_srq_free(srq);
	v_close(&v);
	dt_env_fini(&env);
}
END_TEST

/* ==== 2. a hostile server ==== */

enum {
	HS_RNR7, HS_LEND, HS_BAD_CHECK, HS_VERSION, HS_SLOTS, HS_BEYOND,
	HS_PULL, HS_RESET, HS_RESET_EARLY, HS_DISCONNECT, HS_COUNT
};
static const char *const hs_names[HS_COUNT] = {
	"asks for RNR retry 7, posts no receive",
	"lends (RNR retry 7 is ours then)",
	"a reply with a wrong check value",
	"a reply of version 3",
	"a reply of 1 slot",
	"DATA beyond the client's credits",
	"a pull to a client it offered no send ring",
	"a RESET once the client is connected",
	"a RESET sent with the reply, before the client has read it",
	"a disconnect at once"
};

struct hclient {
	struct evrdma_channel *ch;
	int connected, ends, error, eof;
	int reason;
	size_t rx;
};

static void
hc_read(struct evrdma_channel *ch, void *arg)
{
	struct hclient *c = arg;
	struct evbuffer *in = evrdma_channel_get_input(ch);

	c->rx += evbuffer_get_length(in);
	evbuffer_drain(in, evbuffer_get_length(in));
}

static void
hc_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct hclient *c = arg;

	ck_assert_msg(!c->ends, "an event (0x%x) after the end", what);
	if (what & BEV_EVENT_CONNECTED)
		c->connected++;
	if (what & BEV_EVENT_EOF)
		c->eof++;
	if (what & BEV_EVENT_ERROR) {
		c->error++;
		c->reason = evrdma_channel_get_error(ch);
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		c->ends++;
}

/*
 * An evrdma channel client against a raw listener that answers with a
 * reply and a conversation of its choosing. Each must end the client
 * once, with the right reason, or (the retry counts) leave its QP with
 * ours; nothing crashes or leaks (dt_env_fini).
 */
START_TEST(strangers_hostile_server)
{
	struct dt_env env;
	struct rawpeer srv;
	struct hclient c;
	struct rp_chs ch, h = rp_hs();
	struct evrdma_channel_stats st;
	struct sockaddr_storage ss;
	struct evrdma_config *cfg = retry_config();
	uint8_t hs[32], pd[64];
	int port, slen, i, rnr = 0;
	size_t len;

	memset(&srv, 0, sizeof(srv));
	memset(&c, 0, sizeof(c));
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	slen = dt_sockaddr(&ss, dt_addr(), 0);
	port = rp_listen(&srv, env.eb, (struct sockaddr *)&ss);
	ck_assert_int_gt(port, 0);
	slen = dt_sockaddr(&ss, dt_addr(), port);
	c.ch = evrdma_channel_new(env.base, EVRDMA_CHANNEL_STREAM);
	ck_assert_ptr_nonnull(c.ch);
	evrdma_channel_setcb(c.ch, hc_read, NULL, hc_event, &c);
	evrdma_channel_enable(c.ch, EV_READ);
	ck_assert_int_eq(evrdma_channel_connect(c.ch, (struct sockaddr *)&ss,
	    slen), 0);
	ck_assert_int_eq(rp_wait_request(&srv, 10000), 0);
	/* the client's handshake: its R and C are the server's credits */
	ck_assert_int_eq(rp_chs_decode(srv.req, srv.req_len, &ch), 0);
	switch (_i) {
	case HS_RNR7:
		rnr = 7;
		break;
	case HS_LEND:
		h.mode = 0x80;
		break;
	case HS_BAD_CHECK:
		h.bad_check = 1;
		break;
	case HS_VERSION:
		h.version = 3;
		break;
	case HS_SLOTS:
		h.slots = 1;
		break;
	}
	rp_chs_encode(hs, &h);
	len = rp_pdata(pd, 1, hs, 32, 32);
	pd[4] = 2;		/* an accept reply */
	ck_assert_int_eq(rp_accept(&srv, pd, len, rnr), 0);
	if (_i != HS_RNR7)	/* the client's messages land somewhere */
		for (i = 0; i < RP_SLOTS + RP_CTRL; i++)
			ck_assert_int_eq(rp_post_recv(&srv, (size_t)i *
			    RP_SLOT, RP_SLOT), 0);
	if (_i == HS_RESET_EARLY)
		ck_assert_int_eq(rp_send_imm(&srv, RP_SCRATCH, 0,
		    rp_imm(2, 0, 0, 0, 1, 0)), 0);
	if (_i == HS_BEYOND)	/* it returns nothing: all are beyond */
		evrdma_channel_disable(c.ch, EV_READ);
	for (i = 0; i < 500 && !c.connected && !c.ends; i++)
		rp_run(&srv, 20);
	switch (_i) {
	case HS_RNR7:
	case HS_LEND:
		ck_assert_int_eq(c.connected, 1);
		qp_retries(c.ch, &st);
		ck_assert_uint_eq(st.rnr_retry, _i == HS_LEND ? 7 : 0);
		ck_assert_uint_eq(st.retry_count, 3);
		if (_i == HS_RNR7) {
			/* a write meets the missing receive: the end, at once */
			ck_assert_int_eq(evrdma_channel_write(c.ch, "x", 1),
			    0);
			for (i = 0; i < 250 && !c.ends; i++)
				rp_run(&srv, 20);
			ck_assert_int_eq(c.error, 1);
		}
		break;
	case HS_BAD_CHECK:
	case HS_VERSION:
	case HS_SLOTS:
		for (i = 0; i < 250 && !c.ends; i++)
			rp_run(&srv, 20);
		ck_assert_int_eq(c.connected, 0);
		ck_assert_int_eq(c.error, 1);
		ck_assert_int_eq(c.reason, EVRDMA_REASON_PROTOCOL);
		break;
	case HS_BEYOND:
	case HS_PULL:
		ck_assert_int_eq(c.connected, 1);
		memset(srv.mem + RP_SCRATCH, 'h', 2048);
		if (_i == HS_BEYOND) {
			/* (2 KiB: held by reference, not copied, so that no
			 * credit goes back meanwhile) */
			for (i = 0; i <= (int)ch.slots; i++)
				ck_assert_int_eq(rp_send_imm(&srv, RP_SCRATCH,
				    2048, rp_imm(0, 0, 0, 0, 0, 0)), 0);
			/* the end comes after the data before it, once
			 * the client reads again, as a socket's error */
			rp_run(&srv, 300);
			evrdma_channel_enable(c.ch, EV_READ);
		} else {
			ck_assert_int_eq(rp_send_imm(&srv, RP_SCRATCH, 8,
			    rp_imm(0, 0, 0, 0, 1, 0)), 0);
		}
		for (i = 0; i < 250 && !c.ends; i++)
			rp_run(&srv, 20);
		ck_assert_int_eq(c.error, 1);
		ck_assert_int_eq(c.reason, EVRDMA_REASON_PROTOCOL);
		break;
	case HS_RESET:
	case HS_RESET_EARLY:
	case HS_DISCONNECT:
		if (_i == HS_RESET)
			ck_assert_int_eq(rp_send_imm(&srv, RP_SCRATCH, 0,
			    rp_imm(2, 0, 0, 0, 1, 0)), 0);
		else if (_i == HS_DISCONNECT)
			ck_assert_int_eq(rdma_disconnect(srv.id), 0);
		for (i = 0; i < 250 && !c.ends; i++)
			rp_run(&srv, 20);
		ck_assert_int_eq(c.ends, 1);
		/* a reset is an error; a disconnect with nothing of the
		 * client's unconsumed reads as a socket's FIN does */
		ck_assert_int_eq(c.error, _i != HS_DISCONNECT);
		ck_assert_int_eq(c.eof, _i == HS_DISCONNECT);
		break;
	}
	fprintf(stderr, "hostile server, %s: connected %d, error %d (reason "
	    "%d), eof %d\n", hs_names[_i], c.connected, c.error, c.reason,
	    c.eof);
	rp_run(&srv, 100);
	ck_assert_int_le(c.ends, 1);
	evrdma_channel_free(c.ch);
	rp_close(&srv);
	ch_drain(&env, 20000);
	dt_env_fini(&env);
}
END_TEST

/* ==== 3. one host holds a pool's channels ==== */

#define HO_POOL		32
#define HO_PEERS	40
#define HO_PER_ADDR	8
#define HO_ECHO_MS	2000	/* a newcomer's connect and echo, at most */

/* A second address on the test's netdev, for the stranger's host: the
 * guest's dummy netdev takes one at once (rxe adds its GID). */
static const char *
second_addr(void)
{
	const char *a = getenv("EVRDMA_TEST_ADDR2");
	const char *nd = getenv("EVRDMA_TEST_NETDEV");
	char cmd[256];

	if (a && *a)
		return a;
	ck_assert_msg(getenv("EVRDMA_GUEST") && nd && *nd, "a second "
	    "address of the RDMA netdev is needed (EVRDMA_TEST_ADDR2), or "
	    "the test guest");
	snprintf(cmd, sizeof(cmd), "ip addr add 192.0.2.2/24 dev %s "
	    "2>/dev/null; true", nd);
	ck_assert_int_eq(system(cmd), 0);
	usleep(300 * 1000);	/* (rxe's GID for it) */
	return "192.0.2.2";
}

struct hoard {
	struct dt_env *env;
	struct evrdma_channel *ch[HO_PEERS + 8];
	int n, ends, evicted_reason;
	int refused, refused_addr, evicted;
	char evicted_host[64];
};

static void
ho_read(struct evrdma_channel *ch, void *arg)
{
	struct evbuffer *in = evrdma_channel_get_input(ch);

	evbuffer_add_buffer(evrdma_channel_get_output(ch), in);
}

static void
ho_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct hoard *h = arg;

	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		h->ends++;
		if (evrdma_channel_get_error(ch) == EVRDMA_REASON_EVICTED)
			h->evicted_reason++;
	}
}

static void
ho_accept(struct evrdma_listener *l, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct hoard *h = arg;

	ck_assert_int_lt(h->n, HO_PEERS + 8);
	h->ch[h->n++] = ch;
	evrdma_channel_setcb(ch, ho_read, NULL, ho_event, h);
	evrdma_channel_enable(ch, EV_READ);
}

static void
ho_admission(struct evrdma_srq *srq, int event, const struct sockaddr *peer,
    int socklen, void *arg)
{
	struct hoard *h = arg;
	const struct sockaddr_in *sin = (const struct sockaddr_in *)peer;

	switch (event) {
	case EVRDMA_ADMISSION_REFUSED:
		h->refused++;
		break;
	case EVRDMA_ADMISSION_REFUSED_ADDRESS:
		h->refused_addr++;
		break;
	case EVRDMA_ADMISSION_EVICTED:
		h->evicted++;
		if (peer->sa_family == AF_INET)
			inet_ntop(AF_INET, &sin->sin_addr, h->evicted_host,
			    sizeof(h->evicted_host));
		break;
	default:
		ck_abort_msg("admission event %d", event);
	}
}

/*
 * Finding 1: one host opens as many ordinary channels on a shared pool as
 * it can, then sends nothing (its receives stay posted, its devices
 * answer keepalives). Before, a pool of 32 admitted 10 of them (3 buffers
 * each) and refused everybody else for as long as they stayed. Now an
 * idle channel costs one buffer, so the pool holds 30 of them (32 less
 * its reserve), and a newcomer from another address connects and echoes
 * within HO_ECHO_MS: _i 0, by default, by evicting the channel idle
 * longest (the application hears which, and why); _i 1, with a limit of
 * HO_PER_ADDR channels per address, the stranger's extra requests are
 * refused and the newcomer finds room.
 */
START_TEST(strangers_pool_hoard)
{
	struct dt_env env;
	struct victim v;
	struct hoard ho;
	struct rawpeer *rp = calloc(HO_PEERS, sizeof(*rp));
	struct friend nf;
	struct sockaddr_storage src;
	struct evrdma_srq *srq;
	struct rp_chs h = rp_hs();
	uint64_t t0, took;
	int i, up = 0, want, evicted0;

	ck_assert_ptr_nonnull(rp);
	memset(&v, 0, sizeof(v));
	memset(&ho, 0, sizeof(ho));
	dt_sockaddr(&src, second_addr(), 0);
	srq = v_listen_pool(&v, &env, ring_config(8, AT_SLOT, 0), HO_POOL);
	ho.env = &env;
	evrdma_listener_free(v.lst);
	v.lst = evrdma_channel_listener_new(env.base, ho_accept, &ho,
	    EVRDMA_CHANNEL_STREAM, 64, (struct sockaddr *)&v.ss, v.sslen);
	ck_assert_ptr_nonnull(v.lst);
	v.sslen = dt_sockaddr(&v.ss, dt_addr(),
	    evrdma_listener_get_port(v.lst));
	ck_assert_int_eq(evrdma_listener_set_srq(v.lst, srq), 0);
	ck_assert_int_eq(evrdma_channel_srq_set_admission(srq, 1000,
	    _i ? HO_PER_ADDR : 0, ho_admission, &ho), 0);
	/* the stranger's host opens all it can, one after another */
	for (i = 0; i < HO_PEERS; i++) {
		int before = ho.n;

		rp[i].src = (struct sockaddr *)&src;
		if (rp_open(&rp[i], &v, &h, 32, 32) < 0)
			continue;	/* refused (the callback said so) */
		ck_assert_int_eq(rp_post_recv(&rp[i], 0, RP_SLOT), 0);
		ck_assert_int_eq(rp_post_recv(&rp[i], RP_SLOT, RP_SLOT), 0);
		ck_assert_int_eq(rp_post_recv(&rp[i], 2 * RP_SLOT, RP_SLOT),
		    0);
		CH_WAIT(env.eb, ho.n > before, 10000);
	}
	ch_loop_for(env.eb, 300);
	up = ho.n - ho.ends;
	fprintf(stderr, "pool hoard (%s): the stranger holds %d idle channels "
	    "of a pool of %d (refused %d, by address %d, evicted %d)\n",
	    _i ? "per-address limit" : "evict the idle", up, HO_POOL,
	    ho.refused, ho.refused_addr, ho.evicted);
	/* it holds what the pool can (its own oldest evicted for its later
	 * ones, once idle: opening 40 takes longer than a tick), or its
	 * address's limit, and no more */
	want = _i ? HO_PER_ADDR : HO_POOL - HO_POOL / 16;
	ck_assert_int_eq(up, want);
	ck_assert_int_eq(ho.refused + ho.refused_addr + ho.evicted,
	    HO_PEERS - want);
	if (_i)
		ck_assert_int_eq(ho.refused_addr, HO_PEERS - want);
	evicted0 = ho.evicted;
	/* idle for two of the pool's ticks */
	for (i = 0; i < 25; i++)
		rp_run(&rp[0], 100);
	t0 = tu_now_ms();
	ck_assert_int_eq(f_connect(&nf, &v), 1);
	f_echo(&nf, &v, 64);
	took = tu_now_ms() - t0;
	fprintf(stderr, "pool hoard (%s): a newcomer connected and echoed in "
	    "%llu ms; evicted %d (%s)\n", _i ? "per-address limit" :
	    "evict the idle", (unsigned long long)took, ho.evicted,
	    ho.evicted_host);
	ck_assert_uint_le(took, HO_ECHO_MS);
	if (_i) {
		ck_assert_int_eq(ho.evicted, 0);
	} else {
		ck_assert_int_eq(ho.evicted, evicted0 + 1);
		ck_assert_str_eq(ho.evicted_host, "192.0.2.2");
		CH_WAIT(env.eb, ho.evicted_reason == ho.evicted, 5000);
	}
	evrdma_channel_free(nf.ch);
	for (i = 0; i < HO_PEERS; i++)
		rp_close(&rp[i]);
	free(rp);
	for (i = 0; i < ho.n; i++)
		evrdma_channel_free(ho.ch[i]);
	v.naccepted = 0;
	evrdma_srq_free(srq);
	v_close(&v);
	dt_env_fini(&env);
}
END_TEST

/*
 * The same pool, full of idle strangers, flooded with half-open requests
 * (the reply is never answered): nothing is committed for them and nobody
 * is evicted for them (an eviction waits for the newcomer's join), so an
 * honest newcomer afterwards still evicts one idle stranger and echoes.
 */
START_TEST(strangers_pool_half_open)
{
	struct dt_env env;
	struct victim v;
	struct hoard ho;
	struct rawpeer *rp = calloc(HO_POOL + 16, sizeof(*rp));
	struct friend nf;
	struct sockaddr_storage src;
	struct evrdma_srq *srq;
	struct rp_chs h = rp_hs();
	uint8_t hs[32], pd[56];
	size_t len;
	int i, nfull = HO_POOL - HO_POOL / 16;

	ck_assert_ptr_nonnull(rp);
	memset(&v, 0, sizeof(v));
	memset(&ho, 0, sizeof(ho));
	dt_sockaddr(&src, second_addr(), 0);
	srq = v_listen_pool(&v, &env, ring_config(8, AT_SLOT, 0), HO_POOL);
	evrdma_listener_free(v.lst);
	v.lst = evrdma_channel_listener_new(env.base, ho_accept, &ho,
	    EVRDMA_CHANNEL_STREAM, 64, (struct sockaddr *)&v.ss, v.sslen);
	ck_assert_ptr_nonnull(v.lst);
	v.sslen = dt_sockaddr(&v.ss, dt_addr(),
	    evrdma_listener_get_port(v.lst));
	ck_assert_int_eq(evrdma_listener_set_srq(v.lst, srq), 0);
	ck_assert_int_eq(evrdma_channel_srq_set_admission(srq, 1000, 0,
	    ho_admission, &ho), 0);
	for (i = 0; i < nfull; i++) {
		rp[i].src = (struct sockaddr *)&src;
		ck_assert_int_eq(rp_open(&rp[i], &v, &h, 32, 32), 0);
		ck_assert_int_eq(rp_post_recv(&rp[i], 0, RP_SLOT), 0);
		CH_WAIT(env.eb, ho.n == i + 1, 10000);
	}
	/* idle a while, then the flood: 16 requests left half-open */
	for (i = 0; i < 15; i++)
		rp_run(&rp[0], 100);
	rp_chs_encode(hs, &h);
	len = rp_pdata(pd, 1, hs, 32, 32);
	for (i = nfull; i < nfull + 16; i++) {
		rp[i].src = (struct sockaddr *)&src;
		rp[i].no_qp = 1;
		ck_assert_int_eq(rp_prepare(&rp[i], env.eb,
		    (struct sockaddr *)&v.ss, v.sslen), 0);
		ck_assert_int_eq(rp_connect_now(&rp[i], pd, len, 10000), 0);
	}
	for (i = 0; i < 20; i++)
		rp_run(&rp[0], 100);
	fprintf(stderr, "pool half-open flood: %d accepted, evicted %d, "
	    "refused %d\n", ho.n, ho.evicted, ho.refused);
	ck_assert_int_eq(ho.evicted, 0);
	ck_assert_int_eq(ho.n, nfull);
	ck_assert_int_eq(f_connect(&nf, &v), 1);
	f_echo(&nf, &v, 64);
	ck_assert_int_eq(ho.evicted, 1);
	ck_assert_int_eq(ho.refused, 0);
	evrdma_channel_free(nf.ch);
	for (i = 0; i < nfull + 16; i++)
		rp_close(&rp[i]);
	free(rp);
	for (i = 0; i < ho.n; i++)
		evrdma_channel_free(ho.ch[i]);
	evrdma_srq_free(srq);
	v_close(&v);
	dt_env_fini(&env);
}
END_TEST

Suite *
dt_suite_strangers(void)
{
	Suite *s = suite_create("device-strangers");
	TCase *tc;

	tc = tcase_create("retries");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, strangers_rnr_passive, 0, 2);
	tcase_add_loop_test(tc, strangers_hostile_server, 0, HS_COUNT);
	suite_add_tcase(s, tc);

	tc = tcase_create("pool");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, strangers_pool_hoard, 0, 2);
	tcase_add_test(tc, strangers_pool_half_open);
	suite_add_tcase(s, tc);
	return s;
}
