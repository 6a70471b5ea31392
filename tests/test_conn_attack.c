/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: the raw connection API (evrdma/conn.h, mr.h, the
 * raw parts of listener.h) against a hostile peer (rawpeer.h) and a
 * careless user. Each test checks one promise the headers make; each
 * failed on the code it was written against (review r46), before its fix.
 */
#include "devtest.h"
#include "rawpeer.h"
#include "victim.h"

/* Run the loop (and the raw peer's own events) until *flag or @p ms. */
static int
ca_wait(struct rawpeer *rp, const int *flag, int ms)
{
	uint64_t end = tu_now_ms() + (uint64_t)ms;

	while (!*flag) {
		if (tu_now_ms() >= end)
			return -1;
		rp_run(rp, 5);
	}
	return 0;
}

/* The raw peer's connect to the pair's listener, with the read/atomic
 * depths it offers in its own hands (rp_connect_now() offers 16/16). */
static int
ca_rp_connect(struct rawpeer *rp, struct dt_env *env, struct dt_pair *p,
    unsigned resp_res, unsigned init_depth, int ms)
{
	struct sockaddr_storage ss;
	struct rdma_conn_param cp;
	int len = dt_sockaddr(&ss, dt_addr(), evrdma_listener_get_port(p->lst));
	uint64_t end;

	if (rp_prepare(rp, env->eb, (struct sockaddr *)&ss, len) < 0)
		return -1;
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = (uint8_t)resp_res;
	cp.initiator_depth = (uint8_t)init_depth;
	cp.retry_count = 6;	/* (7 is "for ever" on Soft-RoCE) */
	cp.rnr_retry_count = 7;
	if (rdma_connect(rp->id, &cp))
		return -1;
	end = tu_now_ms() + (uint64_t)ms;
	while (!rp->established && !rp->rejected && !rp->failed) {
		if (tu_now_ms() >= end)
			return -1;
		rp_run(rp, 5);
	}
	return rp->established ? 0 : -1;
}

/* ==== 1. a peer that grants no read/atomic credit ==== */

/*
 * A requester offers responder_resources 0 in its connect request (it
 * will serve no RDMA READ or atomic of ours). evrdma_conn's accept clamps
 * its own initiator depth to that (conn_cm.c, evrdma__conn_accept), so
 * the QP is moved to RTS with max_rd_atomic 0. A READ or atomic posted
 * on such a connection is accepted (returns 0) but can never be sent:
 * the request hangs until the connection is freed. conn.h promises that
 * a post either fails at once with an errno, or completes; a stranger
 * must not be able to make our requests hang. Expected: each post either
 * returns -1 (EOPNOTSUPP, say) or completes (with an error) within 3 s.
 */
START_TEST(attack_no_read_credit)
{
	struct dt_env env;
	struct dt_pair p;
	struct rawpeer rp;
	struct evrdma_remote rem;
	struct evrdma_mr *mr;
	uint8_t buf[64];
	struct dt_wc rd, fa;
	int rrc, frc, rerr = 0, ferr = 0;
	uint64_t end;

	memset(&p, 0, sizeof(p));
	memset(&rp, 0, sizeof(rp));
	memset(&rd, 0, sizeof(rd));
	memset(&fa, 0, sizeof(fa));
	memset(buf, 0, sizeof(buf));
	dt_env_init(&env, NULL);
	dt_pair_listen(&p, &env, dt_addr(), 1);
	ck_assert_int_eq(ca_rp_connect(&rp, &env, &p, 0, 0, 5000), 0);
	ck_assert_int_eq(ca_wait(&rp, &p.srv_accepted, 5000), 0);
	mr = evrdma_mr_reg(p.srv, buf, sizeof(buf), EVRDMA_ACCESS_LOCAL_WRITE);
	ck_assert_ptr_nonnull(mr);
	memset(rp.mem, 0x5a, 4096);
	rem.addr = (uintptr_t)rp.mem;
	rem.len = RP_MEM;
	rem.rkey = rp.mr->rkey;
	rrc = evrdma_conn_post_read(p.srv, mr, 0, 32, &rem, 0, dt_wc_cb, &rd);
	if (rrc < 0)
		rerr = errno;
	frc = evrdma_conn_post_fadd(p.srv, mr, 32, &rem, 64, 1, dt_wc_cb,
	    &fa);
	if (frc < 0)
		ferr = errno;
	end = tu_now_ms() + 3000;
	while ((rrc == 0 && !rd.done) || (frc == 0 && !fa.done)) {
		if (tu_now_ms() >= end)
			break;
		rp_run(&rp, 5);
	}
	fprintf(stderr, "no read credit: READ post %d (%s) done %d status %d; "
	    "FADD post %d (%s) done %d status %d\n", rrc, strerror(rerr),
	    rd.done, rd.wc.status, frc, strerror(ferr), fa.done,
	    fa.wc.status);
	ck_assert_msg(rrc < 0 || rd.done, "an RDMA READ on a connection "
	    "whose peer granted no read credit was accepted and has not "
	    "completed in 3 s (it never can)");
	ck_assert_msg(frc < 0 || fa.done, "an atomic on a connection whose "
	    "peer granted no atomic credit was accepted and has not "
	    "completed in 3 s (it never can)");
	/* refused at once, and said why (conn.h) */
	ck_assert_int_eq(rrc, -1);
	ck_assert_int_eq(rerr, EOPNOTSUPP);
	ck_assert_int_eq(frc, -1);
	ck_assert_int_eq(ferr, EOPNOTSUPP);
	rp_close(&rp);
	dt_pair_close(&p);
	/* exactly once, also for the hung ones (ECANCELED at the free) */
	ck_assert_int_eq(rd.done, rrc == 0 ? 1 : 0);
	ck_assert_int_eq(fa.done, frc == 0 ? 1 : 0);
	evrdma_mr_free(mr);
	dt_env_fini(&env);
}
END_TEST

/*
 * The same peer to a channel listener, offering its send ring for pulls:
 * every pull (an RDMA READ of its ring) would wait for ever, and the
 * stream with it. The channel is refused as a protocol error once
 * established: dropped before the application sees it, and logged.
 */
START_TEST(attack_pulls_without_read_credit)
{
	struct dt_env env;
	struct victim v;
	struct rawpeer rp;
	struct rp_chs h = rp_hs();
	/* (a ring small beside the send queue: the victim pulls) */
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);

	memset(&v, 0, sizeof(v));
	memset(&rp, 0, sizeof(rp));
	ck_assert_int_eq(evrdma_config_set_channel_pull(cfg, 64), 0);
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	v_listen(&v, &env);
	rp.no_rd = 1;
	h.pull_min = 64;
	h.src_rkey = 1;		/* (rp_open() offers its ring) */
	ck_assert_int_eq(rp_open(&rp, &v, &h, 32, 32), 0);
	ck_assert_int_eq(rp_wait_disconnect(&rp, 5000), 0);
	rp_run(&rp, 100);
	fprintf(stderr, "pulls offered without a READ credit: accepted %d, "
	    "logged: %s\n", v.naccepted, v.log[0] ? v.log : "(nothing)");
	ck_assert_int_eq(v.naccepted, 0);
	ck_assert_ptr_nonnull(strstr(v.log, "serves no RDMA READ"));
	rp_close(&rp);
	v_close(&v);
	dt_env_fini(&env);
}
END_TEST

/* ==== 2. a raw listener's refusal ==== */

static int
ca_refuse(struct evrdma_listener *l, struct evrdma_conn *c, const void *pd,
    size_t len, void *arg)
{
	(void)l;
	(void)c;
	(void)pd;
	(void)len;
	(void)arg;
	return 1;
}

/*
 * listener.h, evrdma_prepare_cb: "nonzero to reject (the peer sees
 * EVRDMA_REASON_REJECTED, code EVRDMA_REJECT_APP)", with no exception
 * for EVRDMA_LISTEN_RAW; and conn.h's evrdma_conn_get_reject() gives the
 * code "when the peer is an evrdma listener". A raw listener's reject()
 * sends no private data at all (listener.c, reject()), so an evrdma peer
 * reads code 0. Either the code or the two headers must change.
 */
START_TEST(attack_raw_reject_code)
{
	struct dt_env env;
	struct dt_pair p;
	struct sockaddr_storage ss;
	int len, status = -1, code = -1;

	memset(&p, 0, sizeof(p));
	dt_env_init(&env, NULL);
	dt_pair_listen(&p, &env, dt_addr(), 1);
	p.prepare = ca_refuse;
	len = dt_sockaddr(&ss, dt_addr(), evrdma_listener_get_port(p.lst));
	p.cli = evrdma_conn_new(env.base, EVRDMA_CONN_RAW);
	ck_assert_ptr_nonnull(p.cli);
	evrdma_conn_setcb(p.cli, dt_pair_cli_event, &p);
	ck_assert_int_eq(evrdma_conn_connect(p.cli, (struct sockaddr *)&ss,
	    len), 0);
	DT_WAIT(&env, p.cli_events, 10000);
	ck_assert_int_eq(p.cli_what, EVRDMA_EV_ERROR);
	ck_assert_int_eq(p.cli_reason, EVRDMA_REASON_REJECTED);
	ck_assert_int_eq(evrdma_conn_get_reject(p.cli, &status, &code), 0);
	fprintf(stderr, "raw listener's refusal: status %d code %d\n", status,
	    code);
	ck_assert_msg(code == EVRDMA_REJECT_APP, "a raw evrdma listener's "
	    "prepare refusal reached the evrdma peer as code %d, not "
	    "EVRDMA_REJECT_APP (%d) as listener.h says", code,
	    EVRDMA_REJECT_APP);
	dt_pair_close(&p);
	dt_env_fini(&env);
}
END_TEST

/* ==== 4. the base freed inside a connection's event callback ==== */

struct bf {
	struct dt_env *env;
	int connected;
	int freed;
};

static void
bf_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct bf *b = arg;

	(void)c;
	(void)reason;
	if (!(what & EVRDMA_EV_CONNECTED))
		return;
	b->connected = 1;
	evrdma_base_free(b->env->base);
	b->freed = 1;
}

/* The base freed from a callback took effect once the dispatch returned:
 * the pair's objects are husks, each freed by its own call. */
static void
bf_husks(struct dt_env *env, struct dt_pair *p)
{
	tu_loop_for(env->eb, 200);
	ck_assert_ptr_null(evrdma_conn_get_base(p->cli));
	evrdma_conn_free(p->cli);
	evrdma_conn_free(p->srv);
	evrdma_listener_free(p->lst);
	event_base_free(env->eb);
}

/* A completion's callback frees the base. */
static void
bf_wc(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct bf *b = arg;

	(void)c;
	(void)wc;
	b->connected++;
	evrdma_base_free(b->env->base);
	b->freed = 1;
}

/*
 * A careless user frees the evrdma base from inside EVRDMA_EV_CONNECTED.
 * That callback runs inside the rdma_cm dispatch (cm.c, evrdma__cm_drain)
 * before the ESTABLISHED event is acked; evrdma_base_free() releases the
 * connection at once (conn.c, evrdma__conn_release_now -> conn_destroy ->
 * rdma_destroy_id()), and librdmacm's rdma_destroy_id() waits until every
 * event of the id it reported has been acked: the process hung for ever
 * (this test's tcase times out). Now the free waits for the dispatch to
 * return (base.h), and the objects are husks that their own free calls
 * release.
 */
START_TEST(attack_base_free_in_event_cb)
{
	struct dt_env env;
	struct dt_pair p;
	struct bf b;
	struct sockaddr_storage ss;
	int len;

	memset(&p, 0, sizeof(p));
	memset(&b, 0, sizeof(b));
	b.env = &env;
	dt_env_init(&env, NULL);
	dt_pair_listen(&p, &env, dt_addr(), 0);
	len = dt_sockaddr(&ss, dt_addr(), evrdma_listener_get_port(p.lst));
	p.cli = evrdma_conn_new(env.base, 0);
	ck_assert_ptr_nonnull(p.cli);
	evrdma_conn_setcb(p.cli, bf_event, &b);
	ck_assert_int_eq(evrdma_conn_connect(p.cli, (struct sockaddr *)&ss,
	    len), 0);
	DT_WAIT(&env, b.freed, 5000);
	bf_husks(&env, &p);
}
END_TEST

/*
 * The same from a completion's callback: the device's poll went on with
 * the base, its CQ and its device after the callback (a use after free
 * that the sanitizer build sees). Two sends, so that the poll has a
 * second completion to deliver after the free: none is (base.h: the
 * base's end ends the exactly-once rule).
 */
START_TEST(attack_base_free_in_completion_cb)
{
	struct dt_env env;
	struct dt_pair p;
	struct evrdma_mr *mr, *smr;
	static uint8_t buf[64], sbuf[64];
	struct bf b;
	int i;

	memset(&p, 0, sizeof(p));
	memset(&b, 0, sizeof(b));
	b.env = &env;
	dt_env_init(&env, NULL);
	dt_pair_connect(&p, &env, dt_addr(), 1);
	smr = evrdma_mr_reg(p.srv, sbuf, sizeof(sbuf),
	    EVRDMA_ACCESS_LOCAL_WRITE);
	ck_assert_ptr_nonnull(smr);
	for (i = 0; i < 2; i++)
		ck_assert_int_eq(evrdma_conn_post_recv(p.srv, smr, 32 * i, 32,
		    NULL, NULL), 0);
	mr = evrdma_mr_reg(p.cli, buf, sizeof(buf), 0);
	ck_assert_ptr_nonnull(mr);
	for (i = 0; i < 2; i++)
		ck_assert_int_eq(evrdma_conn_post_send(p.cli, mr, 0, 16,
		    bf_wc, &b), 0);
	DT_WAIT(&env, b.freed, 5000);
	evrdma_mr_free(mr);
	evrdma_mr_free(smr);
	bf_husks(&env, &p);
	ck_assert_int_eq(b.connected, 1);
}
END_TEST

Suite *
dt_suite_conn_attack(void)
{
	Suite *s = suite_create("device-conn-attack");
	TCase *tc = tcase_create("conn-attack");
	TCase *hang = tcase_create("conn-attack-hang");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, attack_no_read_credit);
	tcase_add_test(tc, attack_pulls_without_read_credit);
	tcase_add_test(tc, attack_raw_reject_code);
	suite_add_tcase(s, tc);
	/* (a hang is what it finds: a short timeout) */
	tcase_set_timeout(hang, 10);
	tcase_add_test(hang, attack_base_free_in_event_cb);
	tcase_add_test(hang, attack_base_free_in_completion_cb);
	suite_add_tcase(s, hang);
	return s;
}
