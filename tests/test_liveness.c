/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: liveness. Keepalive probes of idle connections and
 * the transport's retry budget, in one kernel: a peer whose QP vanishes
 * while its rdma_cm id stays (no disconnect ever comes) stands for a host
 * that died; tests/twohost kills a real one.
 */
#include "devtest.h"
#include "chtest.h"
#include "rawpeer.h"

#include <event2/buffer.h>
#include <evrdma/channel.h>

struct lv_srv {
	struct evrdma_channel *ch;
	int ends, error, reason;
	short what;
	size_t rx;
	uint64_t t_end;
};

static void
lv_read(struct evrdma_channel *ch, void *arg)
{
	struct lv_srv *s = arg;
	struct evbuffer *in = evrdma_channel_get_input(ch);

	s->rx += evbuffer_get_length(in);
	evbuffer_drain(in, evbuffer_get_length(in));
}

static void
lv_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct lv_srv *s = arg;

	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
		return;
	s->ends++;
	s->what = what;
	s->t_end = tu_now_ms();
	if (what & BEV_EVENT_ERROR) {
		s->error++;
		s->reason = evrdma_channel_get_error(ch);
	}
}

static void
lv_accept(struct evrdma_listener *l, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct lv_srv *s = arg;

	s->ch = ch;
	evrdma_channel_setcb(ch, lv_read, NULL, lv_event, s);
	evrdma_channel_enable(ch, EV_READ);
}

/* A raw peer connected as a channel client to a channel listener of @p
 * env; returns the listener. */
static struct evrdma_listener *
lv_open(struct dt_env *env, struct lv_srv *s, struct rawpeer *rp)
{
	struct sockaddr_storage ss;
	struct evrdma_listener *lst;
	uint8_t hs[32], pd[56];
	struct rp_chs h;
	size_t len;
	int sl, i;

	sl = dt_sockaddr(&ss, dt_addr(), 0);
	lst = evrdma_channel_listener_new(env->base, lv_accept, s,
	    EVRDMA_CHANNEL_STREAM, 4, (struct sockaddr *)&ss, sl);
	ck_assert_ptr_nonnull(lst);
	sl = dt_sockaddr(&ss, dt_addr(), evrdma_listener_get_port(lst));
	memset(&h, 0, sizeof(h));
	h.version = 2;
	h.slots = 4;
	h.ctrl = 4;
	h.slot_size = 4096;
	h.length = -1;
	rp_chs_encode(hs, &h);
	len = rp_pdata(pd, 1, hs, 32, 32);
	ck_assert_int_eq(rp_connect(rp, env->eb, (struct sockaddr *)&ss, sl,
	    pd, len, 15000), 0);
	ck_assert_int_eq(rp->established, 1);
	for (i = 0; i < 8; i++)
		ck_assert_int_eq(rp_post_recv(rp, (size_t)i * 4096, 4096), 0);
	CH_WAIT(env->eb, s->ch != NULL, 10000);
	return lst;
}

static struct evrdma_config *
lv_config(void)
{
	struct evrdma_config *cfg = evrdma_config_new();

	ck_assert_ptr_nonnull(cfg);
	/* probe after 300 ms idle, every 200 ms, 3 misses; the transport
	 * gives a request about 70 ms, twice */
	ck_assert_int_eq(evrdma_config_set_keepalive(cfg, 300, 200, 3), 0);
	ck_assert_int_eq(evrdma_config_set_transport_retry(cfg, 50, 1), 0);
	return cfg;
}

/*
 * An idle channel stays up while probes go out and are answered: no
 * event, no byte, nothing the application sees, and it carries data
 * afterwards.
 */
START_TEST(liveness_idle_alive)
{
	struct dt_env env;
	struct evrdma_config *cfg = lv_config();
	struct evrdma_listener *lst;
	struct lv_srv s;
	struct rawpeer rp;
	unsigned probes_seen;

	memset(&s, 0, sizeof(s));
	memset(&rp, 0, sizeof(rp));
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	lst = lv_open(&env, &s, &rp);
	rp_run(&rp, 2500);	/* several idle periods */
	probes_seen = rp.nwc;	/* (probes complete at the victim only) */
	ck_assert_int_eq(s.ends, 0);
	ck_assert_uint_eq(probes_seen, 0);	/* nothing reached the peer's
						 * receives */
	memset(rp.mem + 65536, 'k', 100);
	ck_assert_int_eq(rp_send_imm(&rp, 65536, 100, rp_imm(0, 0, 0, 0, 0,
	    0)), 0);
	CH_WAIT(env.eb, s.rx == 100, 10000);
	ck_assert_int_eq(s.ends, 0);
	rp_close(&rp);
	CH_WAIT(env.eb, s.ends == 1, 10000);
	evrdma_channel_free(s.ch);
	evrdma_listener_free(lst);
	ch_drain(&env, 20000);
	dt_env_fini(&env);
}
END_TEST

/*
 * The peer's QP vanishes and its id stays: no DISCONNECTED ever comes.
 * Variant 0, an idle channel: the keepalive finds it. Variants 1 and 2, a
 * busy one (2 without keepalive): its own sends run out of retries. Either way the channel ends
 * once, with ERROR and EVRDMA_REASON_PEER_DEAD, within the configured
 * time (plus the guest's slack), and gives its resources back.
 */
START_TEST(liveness_peer_vanishes)
{
	struct dt_env env;
	struct evrdma_config *cfg = lv_config();
	struct evrdma_listener *lst;
	struct evrdma_stats st;
	struct lv_srv s;
	struct rawpeer rp;
	uint64_t t0;

	memset(&s, 0, sizeof(s));
	memset(&rp, 0, sizeof(rp));
	if (_i == 2)	/* no keepalive: the retries alone must tell */
		ck_assert_int_eq(evrdma_config_set_keepalive(cfg, 0, 0, 0), 0);
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	lst = lv_open(&env, &s, &rp);
	/* the host "dies": its QP is gone, its id never says so */
	rdma_destroy_qp(rp.id);
	rp.qp = NULL;
	t0 = tu_now_ms();
	if (_i >= 1) {
		static const uint8_t buf[8192];

		ck_assert_int_eq(evrdma_channel_write(s.ch, buf, sizeof(buf)),
		    0);
	}
	CH_WAIT(env.eb, s.ends, 20000);
	fprintf(stderr, "peer vanished (%s): 0x%x %s after %llu ms\n",
	    _i == 0 ? "idle" : _i == 1 ? "busy" : "busy, no keepalive",
	    s.what, evrdma_reason_str(s.reason),
	    (unsigned long long)(s.t_end - t0));
	ch_loop_for(env.eb, 300);
	ck_assert_int_eq(s.ends, 1);
	ck_assert_int_eq(s.error, 1);
	ck_assert_int_eq(s.reason, EVRDMA_REASON_PEER_DEAD);
	/* idle 300 + 3 x 200 ms, or 2 x ~70 ms of retries, plus slack */
	ck_assert_uint_lt(s.t_end - t0, 8000);
	evrdma_channel_free(s.ch);
	CH_WAIT(env.eb, (evrdma_base_get_stats(env.base, &st), st.qps == 0),
	    15000);
	evrdma_listener_free(lst);
	rp_close(&rp);
	ch_drain(&env, 20000);
	dt_env_fini(&env);
}
END_TEST

/* The same for a raw connection that asked for keepalive. */
struct lv_raw {
	struct evrdma_conn *conn;
	int events, reason;
	short what;
	uint64_t t_end;
};

static void
lv_raw_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct lv_raw *r = arg;

	r->events++;
	r->what = what;
	r->reason = reason;
	r->t_end = tu_now_ms();
}

static void
lv_raw_accept(struct evrdma_listener *l, struct evrdma_conn *c,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct lv_raw *r = arg;

	r->conn = c;
	evrdma_conn_setcb(c, lv_raw_event, r);
	ck_assert_int_eq(evrdma_conn_set_keepalive(c, 200, 100, 3), 0);
}

START_TEST(liveness_raw_keepalive)
{
	struct dt_env env;
	struct evrdma_config *cfg = lv_config();
	struct evrdma_listener *lst;
	struct sockaddr_storage ss;
	struct rawpeer rp;
	struct lv_raw r;
	uint8_t pd[8];
	uint64_t t0;
	int sl;

	memset(&rp, 0, sizeof(rp));
	memset(&r, 0, sizeof(r));
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	sl = dt_sockaddr(&ss, dt_addr(), 0);
	lst = evrdma_listener_new(env.base, lv_raw_accept, &r, 0, 4,
	    (struct sockaddr *)&ss, sl);
	ck_assert_ptr_nonnull(lst);
	sl = dt_sockaddr(&ss, dt_addr(), evrdma_listener_get_port(lst));
	rp_pdata(pd, 1, NULL, 0, 0);
	ck_assert_int_eq(rp_connect(&rp, env.eb, (struct sockaddr *)&ss, sl,
	    pd, 8, 15000), 0);
	CH_WAIT(env.eb, r.conn != NULL, 10000);
	errno = 0;
	ck_assert_int_eq(evrdma_conn_set_keepalive(r.conn, 100, 0, 3), -1);
	ck_assert_int_eq(errno, EINVAL);
	/* alive: the probes are answered, nothing happens */
	rp_run(&rp, 1500);
	ck_assert_int_eq(r.events, 0);
	/* gone without a word */
	rdma_destroy_qp(rp.id);
	rp.qp = NULL;
	t0 = tu_now_ms();
	CH_WAIT(env.eb, r.events, 20000);
	fprintf(stderr, "raw connection, peer vanished: 0x%x %s after %llu "
	    "ms\n", r.what, evrdma_reason_str(r.reason),
	    (unsigned long long)(r.t_end - t0));
	ck_assert_int_eq(r.what, EVRDMA_EV_ERROR);
	ck_assert_int_eq(r.reason, EVRDMA_REASON_PEER_DEAD);
	ck_assert_uint_lt(r.t_end - t0, 8000);
	evrdma_conn_free(r.conn);
	evrdma_listener_free(lst);
	rp_close(&rp);
	dt_drain(&env, 20000);
	dt_env_fini(&env);
}
END_TEST

Suite *
dt_suite_liveness(void)
{
	Suite *s = suite_create("device-liveness");
	TCase *tc = tcase_create("keepalive");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, liveness_idle_alive);
	tcase_add_loop_test(tc, liveness_peer_vanishes, 0, 3);
	tcase_add_test(tc, liveness_raw_keepalive);
	suite_add_tcase(s, tc);
	return s;
}
