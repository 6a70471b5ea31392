/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: connections and work requests on a real device.
 * Echo over SEND/RECV (evrdma handshake and raw), private data, RDMA
 * WRITE / WRITE with immediate / READ / atomics with byte-exact checks,
 * IPv6, host names, and 200 concurrent connections on one loop.
 */
#include "devtest.h"

#include <event2/dns.h>
#include <unistd.h>

#define MSG_MAX 4096

/* Server side of an echo: every receive is sent back and re-posted. */
struct echo_srv {
	struct evrdma_mr *mr;
	char buf[MSG_MAX * 2];
	int received;
	int pdata_ok;
	const char *expect_pdata;
};

static void echo_srv_recv(struct evrdma_conn *c, const struct evrdma_wc *wc,
    void *arg);

static void
echo_srv_sent(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	(void)c;
	(void)arg;
	ck_assert_int_eq(wc->status, 0);
	ck_assert_int_eq(wc->opcode, EVRDMA_OP_SEND);
}

static void
echo_srv_recv(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct echo_srv *s = arg;

	if (wc->status == ECANCELED)
		return;
	ck_assert_int_eq(wc->status, 0);
	ck_assert_int_eq(wc->opcode, EVRDMA_OP_RECV);
	s->received++;
	/* echo from the second half so the re-posted receive can't race it */
	memcpy(s->buf + MSG_MAX, s->buf, wc->byte_len);
	ck_assert_int_eq(evrdma_conn_post_recv(c, s->mr, 0, MSG_MAX,
	    echo_srv_recv, s), 0);
	ck_assert_int_eq(evrdma_conn_post_send(c, s->mr, MSG_MAX, wc->byte_len,
	    echo_srv_sent, s), 0);
}

static int
echo_prepare(struct evrdma_listener *l, struct evrdma_conn *c,
    const void *pd, size_t len, void *arg)
{
	struct echo_srv *s = arg;
	(void)l;

	if (s->expect_pdata)
		s->pdata_ok = len == strlen(s->expect_pdata) &&
		    !memcmp(pd, s->expect_pdata, len);
	s->mr = evrdma_mr_reg(c, s->buf, sizeof(s->buf),
	    EVRDMA_ACCESS_LOCAL_WRITE);
	ck_assert_ptr_nonnull(s->mr);
	ck_assert_int_eq(evrdma_conn_post_recv(c, s->mr, 0, MSG_MAX,
	    echo_srv_recv, s), 0);
	return 0;
}

/* Client: send msg, receive the echo, compare. */
static void
echo_roundtrip(struct evrdma_conn *cli, struct dt_env *env, const char *msg,
    size_t len)
{
	char buf[MSG_MAX * 2];
	struct evrdma_mr *mr;
	struct dt_wc rw = { 0 }, sw = { 0 };

	mr = evrdma_mr_reg(cli, buf, sizeof(buf), EVRDMA_ACCESS_LOCAL_WRITE);
	ck_assert_ptr_nonnull(mr);
	memset(buf, 0, sizeof(buf));
	memcpy(buf + MSG_MAX, msg, len);
	ck_assert_int_eq(evrdma_conn_post_recv(cli, mr, 0, MSG_MAX, dt_wc_cb,
	    &rw), 0);
	ck_assert_int_eq(evrdma_conn_post_send(cli, mr, MSG_MAX, len, dt_wc_cb,
	    &sw), 0);
	DT_WAIT(env, rw.done, 5000);
	DT_WAIT(env, sw.done, 5000);
	ck_assert_int_eq(sw.wc.status, 0);
	ck_assert_int_eq(sw.wc.opcode, EVRDMA_OP_SEND);
	ck_assert_int_eq(rw.wc.status, 0);
	ck_assert_int_eq(rw.wc.opcode, EVRDMA_OP_RECV);
	ck_assert_uint_eq(rw.wc.byte_len, len);
	ck_assert_int_eq(memcmp(buf, msg, len), 0);
	ck_assert_int_eq(rw.done, 1);
	ck_assert_int_eq(sw.done, 1);
	evrdma_mr_free(mr);
}

static void
echo_test(const char *host, int raw)
{
	struct dt_env env;
	struct dt_pair p;
	struct echo_srv srv;
	const char *pd = raw ? "raw-private-data" : "hello-evrdma";

	memset(&p, 0, sizeof(p));
	memset(&srv, 0, sizeof(srv));
	srv.expect_pdata = raw ? NULL : pd;
	dt_env_init(&env, NULL);
	p.prepare = echo_prepare;
	p.prepare_arg = &srv;
	/* private data must be set before connecting: use a raw hook */
	{
		struct sockaddr_storage ss;
		int len = dt_sockaddr(&ss, host, 0);
		p.env = &env;
		p.lst = evrdma_listener_new(env.base, dt_pair_accept, &p,
		    raw ? EVRDMA_LISTEN_RAW : 0, 16, (struct sockaddr *)&ss,
		    len);
		ck_assert_ptr_nonnull(p.lst);
		evrdma_listener_set_prepare_cb(p.lst, dt_pair_prepare, &p);
		len = dt_sockaddr(&ss, host, evrdma_listener_get_port(p.lst));
		p.cli = evrdma_conn_new(env.base, raw ? EVRDMA_CONN_RAW : 0);
		evrdma_conn_setcb(p.cli, dt_pair_cli_event, &p);
		ck_assert_int_eq(evrdma_conn_set_private_data(p.cli, pd,
		    strlen(pd)), 0);
		ck_assert_int_eq(evrdma_conn_connect(p.cli,
		    (struct sockaddr *)&ss, len), 0);
		DT_WAIT(&env, p.cli_connected, 10000);
		DT_WAIT(&env, p.srv_accepted, 5000);
	}
	if (!raw)
		ck_assert_msg(srv.pdata_ok, "private data not seen by server");
	ck_assert_str_eq(evrdma_conn_get_device_name(p.cli), dt_ibdev());
	/* connections outlive their listener */
	evrdma_listener_free(p.lst);
	p.lst = NULL;
	echo_roundtrip(p.cli, &env, "ping", 4);
	echo_roundtrip(p.cli, &env, "", 0);
	{
		char big[MSG_MAX];
		size_t i;
		for (i = 0; i < sizeof(big); i++)
			big[i] = (char)(i * 7 + 3);
		echo_roundtrip(p.cli, &env, big, sizeof(big));
	}
	ck_assert_int_eq(srv.received, 3);
	ck_assert_int_eq(p.cli_events, 1);
	ck_assert_int_eq(p.srv_events, 0);
	dt_pair_close(&p);
	evrdma_mr_free(srv.mr);
	dt_env_fini(&env);
}

START_TEST(conn_echo_handshake)
{
	echo_test(dt_addr(), 0);
}
END_TEST

START_TEST(conn_echo_raw)
{
	echo_test(dt_addr(), 1);
}
END_TEST

START_TEST(conn_echo_ipv6)
{
	echo_test(dt_addr6(), 0);
}
END_TEST

/* ---- one-sided operations ---- */

struct rdma_srv {
	struct evrdma_mr *mr;
	struct evrdma_mr *rmr;		/* receive buffer for WRITE_IMM */
	uint64_t region[64];		/* 512 bytes, word 0 is the counter */
	char rbuf[16];
	struct dt_wc imm;
};

static int
rdma_prepare(struct evrdma_listener *l, struct evrdma_conn *c,
    const void *pd, size_t len, void *arg)
{
	struct rdma_srv *s = arg;
	(void)l;
	(void)pd;
	(void)len;

	s->mr = evrdma_mr_reg(c, s->region, sizeof(s->region),
	    EVRDMA_ACCESS_REMOTE_READ | EVRDMA_ACCESS_REMOTE_WRITE |
	    EVRDMA_ACCESS_REMOTE_ATOMIC);
	ck_assert_ptr_nonnull(s->mr);
	s->rmr = evrdma_mr_reg(c, s->rbuf, sizeof(s->rbuf),
	    EVRDMA_ACCESS_LOCAL_WRITE);
	ck_assert_ptr_nonnull(s->rmr);
	ck_assert_int_eq(evrdma_conn_post_recv(c, s->rmr, 0, sizeof(s->rbuf),
	    dt_wc_cb, &s->imm), 0);
	return 0;
}

START_TEST(conn_rdma_ops)
{
	struct dt_env env;
	struct dt_pair p;
	struct rdma_srv srv;
	uint8_t local[512];
	uint8_t enc[EVRDMA_REMOTE_ENCODED_LEN];
	struct evrdma_remote rem, exp;
	struct evrdma_mr *lmr;
	struct dt_wc w;
	uint64_t old;
	size_t i;

	memset(&p, 0, sizeof(p));
	memset(&srv, 0, sizeof(srv));
	memset(local, 0, sizeof(local));
	srv.region[0] = 5;
	dt_env_init(&env, NULL);
	p.prepare = rdma_prepare;
	p.prepare_arg = &srv;
	dt_pair_connect(&p, &env, dt_addr(), 0);

	/* the descriptor travels as bytes, as it would between hosts */
	ck_assert_int_eq(evrdma_mr_export(srv.mr, 0, sizeof(srv.region), &exp),
	    0);
	ck_assert_int_eq(evrdma_remote_encode(&exp, enc, sizeof(enc)),
	    EVRDMA_REMOTE_ENCODED_LEN);
	ck_assert_int_eq(evrdma_remote_decode(&rem, enc, sizeof(enc)), 0);
	ck_assert(rem.addr == exp.addr && rem.len == exp.len &&
	    rem.rkey == exp.rkey);

	lmr = evrdma_mr_reg(p.cli, local, sizeof(local),
	    EVRDMA_ACCESS_LOCAL_WRITE);
	ck_assert_ptr_nonnull(lmr);

	/* WRITE 256 bytes at offset 64 */
	for (i = 0; i < 256; i++)
		local[i] = (uint8_t)(i ^ 0x5a);
	memset(&w, 0, sizeof(w));
	ck_assert_int_eq(evrdma_conn_post_write(p.cli, lmr, 0, 256, &rem, 64,
	    dt_wc_cb, &w), 0);
	DT_WAIT(&env, w.done, 5000);
	ck_assert_int_eq(w.wc.status, 0);
	ck_assert_int_eq(w.wc.opcode, EVRDMA_OP_WRITE);
	ck_assert_int_eq(memcmp((uint8_t *)srv.region + 64, local, 256), 0);

	/* WRITE with immediate: lands and consumes the server's receive */
	memset(&w, 0, sizeof(w));
	memcpy(local + 300, "imm-payload", 11);
	ck_assert_int_eq(evrdma_conn_post_write_imm(p.cli, lmr, 300, 11, &rem,
	    400, 0xdeadbeef, dt_wc_cb, &w), 0);
	DT_WAIT(&env, w.done, 5000);
	DT_WAIT(&env, srv.imm.done, 5000);
	ck_assert_int_eq(w.wc.status, 0);
	ck_assert_int_eq(srv.imm.wc.status, 0);
	ck_assert_int_eq(srv.imm.wc.opcode, EVRDMA_OP_RECV_WRITE_IMM);
	ck_assert(srv.imm.wc.has_imm);
	ck_assert_uint_eq(srv.imm.wc.imm_data, 0xdeadbeef);
	ck_assert_int_eq(memcmp((uint8_t *)srv.region + 400, "imm-payload",
	    11), 0);

	/* READ it all back */
	memset(local, 0, sizeof(local));
	memset(&w, 0, sizeof(w));
	ck_assert_int_eq(evrdma_conn_post_read(p.cli, lmr, 0, 512, &rem, 0,
	    dt_wc_cb, &w), 0);
	DT_WAIT(&env, w.done, 5000);
	ck_assert_int_eq(w.wc.status, 0);
	ck_assert_int_eq(w.wc.opcode, EVRDMA_OP_READ);
	ck_assert_int_eq(memcmp(local, srv.region, 512), 0);

	/* FETCH-AND-ADD: returns 5, leaves 15 */
	memset(&w, 0, sizeof(w));
	ck_assert_int_eq(evrdma_conn_post_fadd(p.cli, lmr, 0, &rem, 0, 10,
	    dt_wc_cb, &w), 0);
	DT_WAIT(&env, w.done, 5000);
	ck_assert_int_eq(w.wc.status, 0);
	ck_assert_int_eq(w.wc.opcode, EVRDMA_OP_FADD);
	memcpy(&old, local, 8);
	ck_assert_uint_eq(old, 5);
	ck_assert_uint_eq(srv.region[0], 15);

	/* COMPARE-AND-SWAP that matches, then one that does not */
	memset(&w, 0, sizeof(w));
	ck_assert_int_eq(evrdma_conn_post_cas(p.cli, lmr, 8, &rem, 0, 15, 42,
	    dt_wc_cb, &w), 0);
	DT_WAIT(&env, w.done, 5000);
	ck_assert_int_eq(w.wc.status, 0);
	ck_assert_int_eq(w.wc.opcode, EVRDMA_OP_CAS);
	memcpy(&old, local + 8, 8);
	ck_assert_uint_eq(old, 15);
	ck_assert_uint_eq(srv.region[0], 42);
	memset(&w, 0, sizeof(w));
	ck_assert_int_eq(evrdma_conn_post_cas(p.cli, lmr, 8, &rem, 0, 1, 2,
	    dt_wc_cb, &w), 0);
	DT_WAIT(&env, w.done, 5000);
	memcpy(&old, local + 8, 8);
	ck_assert_uint_eq(old, 42);
	ck_assert_uint_eq(srv.region[0], 42);

	/* checks before posting: nothing reaches the wire */
	errno = 0;
	ck_assert_int_eq(evrdma_conn_post_write(p.cli, lmr, 0, 64, &rem, 480,
	    dt_wc_cb, &w), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(evrdma_conn_post_read(p.cli, lmr, 500, 64, &rem, 0,
	    dt_wc_cb, &w), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(evrdma_conn_post_fadd(p.cli, lmr, 0, &rem, 4, 1,
	    dt_wc_cb, &w), -1);
	ck_assert_int_eq(errno, EINVAL);
	{
		struct evrdma_mr *ro = evrdma_mr_reg(p.cli, local, 64, 0);
		ck_assert_ptr_nonnull(ro);
		ck_assert_int_eq(evrdma_conn_post_read(p.cli, ro, 0, 8, &rem,
		    0, dt_wc_cb, &w), -1);
		ck_assert_int_eq(errno, EACCES);
		ck_assert_int_eq(evrdma_conn_post_recv(p.cli, ro, 0, 8,
		    dt_wc_cb, &w), -1);
		ck_assert_int_eq(errno, EACCES);
		ck_assert_int_eq(evrdma_mr_export(ro, 0, 8, &exp), -1);
		ck_assert_int_eq(errno, EACCES);
		evrdma_mr_free(ro);
	}

	dt_pair_close(&p);
	evrdma_mr_free(lmr);
	evrdma_mr_free(srv.mr);
	evrdma_mr_free(srv.rmr);
	dt_env_fini(&env);
}
END_TEST

/*
 * A region freed while a request that uses it is outstanding is
 * deregistered when that request completes: before its callback, which
 * may reuse the memory (evrdma/mr.h: the memory is the caller's again once
 * the region is freed and no request using it is outstanding). The
 * server's region (remote write) is freed with its receive posted; the
 * client's SEND completes that receive, whose callback reuses the memory
 * and has the client WRITE into the region's old rkey, then waits while
 * the device runs it: the WRITE must fail (remote access) and the reused
 * memory stay as the callback left it. (The deregistration waited for the
 * end of the poll pass: a peer's WRITE landed in memory the application
 * had taken back; found by review.)
 */
#define MF_LEN		4096

struct mf {
	struct dt_pair *p;
	struct evrdma_mr *mr, *lmr;
	struct evrdma_remote rem;
	uint8_t region[MF_LEN];
	uint8_t local[64];
	struct dt_wc recv, send, write;
};

static void
mf_recv(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct mf *m = arg;

	(void)c;
	m->recv.done++;
	m->recv.wc = *wc;
	ck_assert_int_eq(wc->status, 0);
	/* the memory is the application's again: reused */
	memset(m->region, 0xaa, sizeof(m->region));
	ck_assert_int_eq(evrdma_conn_post_write(m->p->cli, m->lmr, 0,
	    sizeof(m->local), &m->rem, 128, dt_wc_cb, &m->write), 0);
	/* (what the device runs meanwhile runs against the region as it
	 * is now) */
	usleep(200 * 1000);
}

static int
mf_prepare(struct evrdma_listener *l, struct evrdma_conn *c,
    const void *pd, size_t len, void *arg)
{
	struct mf *m = arg;

	(void)l;
	(void)pd;
	(void)len;
	m->mr = evrdma_mr_reg(c, m->region, sizeof(m->region),
	    EVRDMA_ACCESS_LOCAL_WRITE | EVRDMA_ACCESS_REMOTE_WRITE);
	ck_assert_ptr_nonnull(m->mr);
	ck_assert_int_eq(evrdma_conn_post_recv(c, m->mr, 0, 64, mf_recv, m),
	    0);
	return 0;
}

START_TEST(conn_mr_freed_in_flight)
{
	struct dt_env env;
	struct dt_pair p;
	struct mf *m = calloc(1, sizeof(*m));
	size_t i;

	ck_assert_ptr_nonnull(m);
	memset(&p, 0, sizeof(p));
	m->p = &p;
	dt_env_init(&env, NULL);
	p.prepare = mf_prepare;
	p.prepare_arg = m;
	dt_pair_connect(&p, &env, dt_addr(), 0);
	ck_assert_int_eq(evrdma_mr_export(m->mr, 0, MF_LEN, &m->rem), 0);
	m->lmr = evrdma_mr_reg(p.cli, m->local, sizeof(m->local),
	    EVRDMA_ACCESS_LOCAL_WRITE);
	ck_assert_ptr_nonnull(m->lmr);
	memset(m->local, 0x55, sizeof(m->local));
	/* freed with its receive outstanding */
	evrdma_mr_free(m->mr);
	ck_assert_int_eq(evrdma_conn_post_send(p.cli, m->lmr, 0, 16,
	    dt_wc_cb, &m->send), 0);
	DT_WAIT(&env, m->write.done, 10000);
	ck_assert_int_eq(m->recv.done, 1);
	ck_assert_int_eq(m->write.done, 1);
	fprintf(stderr, "a WRITE to a region freed once its last request "
	    "completed: status %d (%s)\n", m->write.wc.status,
	    strerror(m->write.wc.status));
	ck_assert_int_eq(m->write.wc.status, EREMOTEIO);
	for (i = 0; i < MF_LEN; i++)
		ck_assert_msg(m->region[i] == 0xaa, "byte %zu of memory the "
		    "application took back was written by the peer", i);
	dt_pair_close(&p);
	evrdma_mr_free(m->lmr);
	dt_env_fini(&env);
	free(m);
}
END_TEST

/* ---- host names through evdns ---- */

START_TEST(conn_hostname)
{
	struct dt_env env;
	struct dt_pair p;
	struct evdns_base *dns;
	struct sockaddr_storage ss;
	char path[256];
	const char *tmp = getenv("TMPDIR");
	FILE *f;
	int len;

	memset(&p, 0, sizeof(p));
	dt_env_init(&env, NULL);
	snprintf(path, sizeof(path), "%s/evrdma-hosts.%d", tmp ? tmp : "/tmp",
	    (int)getpid());
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "%s evrdma-test-host\n", dt_addr());
	fclose(f);
	dns = evdns_base_new(env.eb, 0);
	ck_assert_ptr_nonnull(dns);
	ck_assert_int_eq(evdns_base_load_hosts(dns, path), 0);
	unlink(path);

	len = dt_sockaddr(&ss, dt_addr(), 0);
	p.env = &env;
	p.lst = evrdma_listener_new(env.base, dt_pair_accept, &p, 0, 16,
	    (struct sockaddr *)&ss, len);
	ck_assert_ptr_nonnull(p.lst);
	p.cli = evrdma_conn_new(env.base, 0);
	evrdma_conn_setcb(p.cli, dt_pair_cli_event, &p);
	ck_assert_int_eq(evrdma_conn_connect_hostname(p.cli, dns, AF_INET,
	    "evrdma-test-host", evrdma_listener_get_port(p.lst)), 0);
	DT_WAIT(&env, p.cli_connected, 10000);
	DT_WAIT(&env, p.srv_accepted, 5000);
	ck_assert_int_eq(p.cli_reason, EVRDMA_REASON_NONE);

	/* a name that does not resolve fails with REASON_DNS, once */
	{
		struct dt_pair q;
		memset(&q, 0, sizeof(q));
		q.cli = evrdma_conn_new(env.base, 0);
		evrdma_conn_setcb(q.cli, dt_pair_cli_event, &q);
		ck_assert_int_eq(evrdma_conn_connect_hostname(q.cli, dns,
		    AF_INET, "no-such-host.invalid", 1), 0);
		DT_WAIT(&env, q.cli_events, 10000);
		ck_assert_int_eq(q.cli_what, EVRDMA_EV_ERROR);
		ck_assert_int_eq(q.cli_reason, EVRDMA_REASON_DNS);
		evrdma_conn_free(q.cli);
	}
	/* numeric host without any evdns_base */
	{
		struct dt_pair q;
		memset(&q, 0, sizeof(q));
		q.cli = evrdma_conn_new(env.base, 0);
		evrdma_conn_setcb(q.cli, dt_pair_cli_event, &q);
		ck_assert_int_eq(evrdma_conn_connect_hostname(q.cli, NULL,
		    AF_UNSPEC, dt_addr(), evrdma_listener_get_port(p.lst)), 0);
		DT_WAIT(&env, q.cli_connected, 10000);
		ck_assert_int_eq(q.cli_events, 1);
		evrdma_conn_free(q.cli);
	}
	p.srv_accepted = 0;
	dt_pair_close(&p);
	evdns_base_free(dns, 0);
	dt_env_fini(&env);
}
END_TEST

/* ---- many connections on one loop ---- */

#define NCONN 200

struct many;

/* One client's callback argument: the test and the client's index. */
struct many_cli {
	struct many *m;
	int i;
};

struct many {
	struct dt_env *env;
	struct evrdma_conn *srv[NCONN];
	int nsrv;
	struct echo_srv es[NCONN];
	int connected;
	int echoed;
	int errors;
	char cbuf[NCONN][64];
	struct evrdma_mr *cmr[NCONN];
	struct evrdma_conn *cli[NCONN];
	struct many_cli mc[NCONN];
};

static int
many_prepare(struct evrdma_listener *l, struct evrdma_conn *c,
    const void *pd, size_t len, void *arg)
{
	struct many *m = arg;
	(void)pd;
	(void)len;
	ck_assert_int_lt(m->nsrv, NCONN);
	return echo_prepare(l, c, NULL, 0, &m->es[m->nsrv++]);
}

static void
many_accept(struct evrdma_listener *l, struct evrdma_conn *c,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct many *m = arg;
	int i;
	(void)l;
	(void)peer;
	(void)socklen;
	for (i = 0; i < NCONN; i++)
		if (!m->srv[i]) {
			m->srv[i] = c;
			break;
		}
}

static void
many_recv(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct many_cli *mc = arg;
	struct many *m = mc->m;
	(void)c;
	if (wc->status) {
		m->errors++;
		return;
	}
	if (wc->byte_len == 8 && !memcmp(m->cbuf[mc->i], "conn", 4))
		m->echoed++;
	else
		m->errors++;
}

static void
many_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct many_cli *mc = arg;
	struct many *m = mc->m;
	int i = mc->i;

	if (!(what & EVRDMA_EV_CONNECTED)) {
		m->errors++;
		return;
	}
	m->connected++;
	m->cmr[i] = evrdma_mr_reg(c, m->cbuf[i], sizeof(m->cbuf[i]),
	    EVRDMA_ACCESS_LOCAL_WRITE);
	ck_assert_ptr_nonnull(m->cmr[i]);
	snprintf(m->cbuf[i] + 32, 32, "conn%04d", i);
	ck_assert_int_eq(evrdma_conn_post_recv(c, m->cmr[i], 0, 32, many_recv,
	    arg), 0);
	ck_assert_int_eq(evrdma_conn_post_send(c, m->cmr[i], 32, 8, NULL,
	    NULL), 0);
}

START_TEST(conn_many)
{
	struct dt_env env;
	struct evrdma_config *cfg = evrdma_config_new();
	struct evrdma_listener *lst;
	struct sockaddr_storage ss;
	struct evrdma_stats st;
	struct many *m;
	int len, port, i, all = 0;
	uint64_t deadline;

	m = calloc(1, sizeof(*m));
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(evrdma_config_set_queue_depth(cfg, 8, 8), 0);
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	m->env = &env;
	len = dt_sockaddr(&ss, dt_addr(), 0);
	lst = evrdma_listener_new(env.base, many_accept, m, 0, 256,
	    (struct sockaddr *)&ss, len);
	ck_assert_ptr_nonnull(lst);
	evrdma_listener_set_prepare_cb(lst, many_prepare, m);
	port = evrdma_listener_get_port(lst);
	len = dt_sockaddr(&ss, dt_addr(), port);
	for (i = 0; i < NCONN; i++) {
		m->mc[i].m = m;
		m->mc[i].i = i;
		m->cli[i] = evrdma_conn_new(env.base, 0);
		evrdma_conn_setcb(m->cli[i], many_event, &m->mc[i]);
		ck_assert_int_eq(evrdma_conn_connect(m->cli[i],
		    (struct sockaddr *)&ss, len), 0);
	}
	deadline = tu_now_ms() + 120000;
	while (m->echoed + m->errors < NCONN &&
	    tu_now_ms() < deadline)
		tu_loop_until(env.eb, &all, 100);
	ck_assert_int_eq(m->errors, 0);
	ck_assert_int_eq(m->connected, NCONN);
	ck_assert_int_eq(m->echoed, NCONN);
	ck_assert_int_eq(m->nsrv, NCONN);

	/* one device, one completion channel, few shared CQs */
	evrdma_base_get_stats(env.base, &st, sizeof(st));
	ck_assert_uint_eq(st.devices, 1);
	ck_assert_uint_eq(st.qps, 2 * NCONN);
	ck_assert_uint_le(st.cqs, (2 * NCONN * 16) / 4096 + 1);

	for (i = 0; i < NCONN; i++) {
		evrdma_conn_free(m->cli[i]);
		evrdma_conn_free(m->srv[i]);
	}
	evrdma_listener_free(lst);
	dt_drain(&env, 60000);
	for (i = 0; i < NCONN; i++) {
		evrdma_mr_free(m->cmr[i]);
		evrdma_mr_free(m->es[i].mr);
	}
	dt_env_fini(&env);
	free(m);
	dt_assert_no_rdma_resources();
}
END_TEST

/*
 * A polling budget of 1 completion per wake-up: everything still
 * completes (polling resumes on the next loop iteration), and a full send
 * queue refuses with EAGAIN instead of blocking or overflowing.
 */
START_TEST(conn_budget_and_full_queue)
{
	struct dt_env env;
	struct dt_pair p;
	struct evrdma_config *cfg = evrdma_config_new();
	char sbuf[64], rbuf[8][64];
	struct evrdma_mr *smr, *rmr;
	int sent = 0, recvd = 0, i, rc;
	struct dt_wc rw[8];

	ck_assert_int_eq(evrdma_config_set_poll_budget(cfg, 1), 0);
	ck_assert_int_eq(evrdma_config_set_queue_depth(cfg, 4, 8), 0);
	memset(&p, 0, sizeof(p));
	memset(rw, 0, sizeof(rw));
	memset(sbuf, 0, sizeof(sbuf));
	memset(rbuf, 0, sizeof(rbuf));
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	dt_pair_connect(&p, &env, dt_addr(), 0);
	rmr = evrdma_mr_reg(p.srv, rbuf, sizeof(rbuf),
	    EVRDMA_ACCESS_LOCAL_WRITE);
	smr = evrdma_mr_reg(p.cli, sbuf, sizeof(sbuf), 0);
	for (i = 0; i < 8; i++)
		ck_assert_int_eq(evrdma_conn_post_recv(p.srv, rmr,
		    (size_t)i * 64, 64, dt_wc_cb, &rw[i]), 0);
	/* a send queue of 4: the 5th post is refused, nothing is lost */
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(evrdma_conn_post_send(p.cli, smr, 0, 8, NULL,
		    NULL), 0);
	rc = evrdma_conn_post_send(p.cli, smr, 0, 8, NULL, NULL);
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(errno, EAGAIN);
	sent = 4;
	while (sent < 8) {
		int f = 0;
		if (evrdma_conn_post_send(p.cli, smr, 0, 8, NULL, NULL) == 0)
			sent++;
		else
			ck_assert_int_eq(errno, EAGAIN);
		tu_loop_until(env.eb, &f, 5);
	}
	for (i = 0; i < 8; i++) {
		DT_WAIT(&env, rw[i].done, 5000);
		ck_assert_int_eq(rw[i].wc.status, 0);
		recvd++;
	}
	ck_assert_int_eq(recvd, 8);
	dt_pair_close(&p);
	evrdma_mr_free(smr);
	evrdma_mr_free(rmr);
	dt_env_fini(&env);
}
END_TEST

Suite *
dt_suite_conn(void)
{
	Suite *s = suite_create("device-conn");
	TCase *tc = tcase_create("conn");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, conn_echo_handshake);
	tcase_add_test(tc, conn_echo_raw);
	tcase_add_test(tc, conn_echo_ipv6);
	tcase_add_test(tc, conn_rdma_ops);
	tcase_add_test(tc, conn_mr_freed_in_flight);
	tcase_add_test(tc, conn_hostname);
	tcase_add_test(tc, conn_budget_and_full_queue);
	suite_add_tcase(s, tc);
	tc = tcase_create("many");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, conn_many);
	suite_add_tcase(s, tc);
	return s;
}
