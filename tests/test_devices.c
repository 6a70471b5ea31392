/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: two RDMA devices in one guest. A second Soft-RoCE
 * device (rxe1 on netdev rdma1, 198.51.100.1) beside the test device:
 * binding by address picks the device of that address, connections on both
 * devices share one loop, and when one device is removed its connections
 * and listener end with EVRDMA_REASON_DEVICE_REMOVAL while the other
 * device's carry on and its listener still accepts.
 */
#include "devtest.h"
#include "chtest.h"

#include <stddef.h>

#include <event2/buffer.h>
#include <evrdma/channel.h>
#include <evrdma/srq.h>

#define DEV2_ADDR	"198.51.100.1"
#define DEV2_NETDEV	"rdma1"
#define DEV2_IBDEV	"rxe1"

/* Unchecked fixtures: they run in Check's parent process, which opens no
 * device (rdma link delete waits for every process that has it open). */
static void
dev2_add(void)
{
	if (system("ip link add " DEV2_NETDEV " type dummy && "
	    "ip link set " DEV2_NETDEV " mtu 9000 && "
	    "ip addr add " DEV2_ADDR "/24 dev " DEV2_NETDEV " && "
	    "ip link set " DEV2_NETDEV " up && "
	    "rdma link add " DEV2_IBDEV " type rxe netdev " DEV2_NETDEV " && "
	    "i=0; until ibv_devinfo -d " DEV2_IBDEV " 2>/dev/null | "
	    "grep -q PORT_ACTIVE; do i=$((i+1)); [ $i -lt 100 ] || exit 1; "
	    "sleep 0.05; done") != 0)
		fprintf(stderr, "cannot add " DEV2_IBDEV "\n");
}

static void
dev2_remove(void)
{
	if (system("timeout 30 rdma link delete " DEV2_IBDEV " 2>/dev/null; "
	    "ip link del " DEV2_NETDEV " 2>/dev/null; true") != 0)
		fprintf(stderr, "cannot remove " DEV2_IBDEV "\n");
}

/* A raw pair on @p host, and a channel pair on it (chtest binds to
 * dt_addr(), which the environment names). */
struct dev_side {
	const char *host, *ibdev;
	struct dt_pair p;
	struct chp c;
	struct evrdma_mr *mr;
	uint8_t buf[4096];
	int removals;
	int lst_errors, lst_reason, lst_errno;	/* its listener's */
};

static void
dev_conn_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct dev_side *d = arg;

	if (reason == EVRDMA_REASON_DEVICE_REMOVAL)
		d->removals++;
	if (c == d->p.cli)
		dt_pair_cli_event(c, what, reason, &d->p);
	else
		dt_pair_srv_event(c, what, reason, &d->p);
}

static void
dev_side_open(struct dt_env *env, struct dev_side *d)
{
	memset(&d->p, 0, sizeof(d->p));
	memset(&d->c, 0, sizeof(d->c));
	dt_pair_connect(&d->p, env, d->host, 0);
	ck_assert_str_eq(evrdma_conn_get_device_name(d->p.cli), d->ibdev);
	ck_assert_str_eq(evrdma_conn_get_device_name(d->p.srv), d->ibdev);
	d->mr = evrdma_mr_reg(d->p.cli, d->buf, sizeof(d->buf),
	    EVRDMA_ACCESS_LOCAL_WRITE);
	ck_assert_ptr_nonnull(d->mr);
	setenv("EVRDMA_TEST_ADDR", d->host, 1);
	chp_open(&d->c, env, EVRDMA_CHANNEL_STREAM, 1);
	evrdma_conn_setcb(d->p.cli, dev_conn_event, d);
	evrdma_conn_setcb(d->p.srv, dev_conn_event, d);
}

/* Traffic on both pairs of @p d: a channel stream each way and an RDMA
 * WRITE of the raw pair into a region of its own server. */
static void
dev_side_traffic(struct dt_env *env, struct dev_side *d, size_t n)
{
	struct evrdma_mr *rmr;
	struct evrdma_remote rem;
	struct dt_wc w;
	uint8_t region[256];

	ep_xfer(env, &d->c.cli, d->c.srv, n, 30000);
	ep_xfer(env, d->c.srv, &d->c.cli, n, 30000);
	rmr = evrdma_mr_reg(d->p.srv, region, sizeof(region),
	    EVRDMA_ACCESS_REMOTE_WRITE);
	ck_assert_ptr_nonnull(rmr);
	ck_assert_int_eq(evrdma_mr_export(rmr, 0, sizeof(region), &rem), 0);
	memset(region, 0, sizeof(region));
	memset(d->buf, 0x3c, sizeof(region));
	memset(&w, 0, sizeof(w));
	ck_assert_int_eq(evrdma_conn_post_write(d->p.cli, d->mr, 0,
	    sizeof(region), &rem, 0, dt_wc_cb, &w), 0);
	DT_WAIT(env, w.done, 5000);
	ck_assert_int_eq(w.wc.status, 0);
	ck_assert_int_eq(region[0], 0x3c);
	ck_assert_int_eq(region[sizeof(region) - 1], 0x3c);
	evrdma_mr_free(rmr);
}

static void
dev_side_close(struct dev_side *d)
{
	evrdma_mr_free(d->mr);
	evrdma_conn_free(d->p.cli);
	evrdma_conn_free(d->p.srv);
	evrdma_listener_free(d->p.lst);
	ep_free(&d->c.cli);
	chl_close(&d->c.l);
}

/* @p env on a configuration whose warm sets, which hold a device open,
 * go after 50 ms idle: the tests see every device close. */
static void
env_short_warm(struct dt_env *env)
{
	struct evrdma_config *cfg = evrdma_config_new();

	ck_assert_ptr_nonnull(cfg);
	ck_assert_int_eq(evrdma_config_set_warm(cfg, 4, 50), 0);
	dt_env_init(env, cfg);
	evrdma_config_free(cfg);
}

/*
 * Each address's connections go on its own device, both devices on one
 * loop at once; and traffic on both, interleaved.
 */
START_TEST(devices_bind_by_address)
{
	struct dt_env env;
	struct dev_side d[2];
	struct evrdma_stats st;
	int i;

	memset(d, 0, sizeof(d));
	d[0].host = dt_addr();
	d[0].ibdev = dt_ibdev();
	d[1].host = DEV2_ADDR;
	d[1].ibdev = DEV2_IBDEV;
	env_short_warm(&env);
	for (i = 0; i < 2; i++)
		dev_side_open(&env, &d[i]);
	evrdma_base_get_stats(env.base, &st, sizeof(st));
	ck_assert_uint_eq(st.devices, 2);
	/* both pumps at once, then each side on its own */
	d[0].c.srv->drain = d[1].c.srv->drain = 1;
	for (i = 0; i < 2; i++) {
		d[i].c.srv->rx_seed = d[i].c.cli.tx_seed;
		d[i].c.cli.tx_total = 8 * MiB;
		d[i].c.cli.pump_hi = 1 * MiB;
		d[i].c.cli.pump_in_wcb = 1;
		ep_pump(&d[i].c.cli);
	}
	CH_WAIT(env.eb, (d[0].c.srv->rx == 8 * MiB &&
	    d[1].c.srv->rx == 8 * MiB) || d[0].c.srv->ends ||
	    d[1].c.srv->ends, 60000);
	ck_assert_uint_eq(d[0].c.srv->rx, 8 * MiB);
	ck_assert_uint_eq(d[1].c.srv->rx, 8 * MiB);
	for (i = 0; i < 2; i++)
		dev_side_traffic(&env, &d[i], 1 * MiB);
	for (i = 0; i < 2; i++)
		dev_side_close(&d[i]);
	ch_drain(&env, 20000);
	/* (the warm sets that held them open go after 50 ms idle) */
	CH_WAIT(env.eb, (evrdma_base_get_stats(env.base, &st, sizeof(st)),
	    st.devices == 0), 5000);
	ck_assert_uint_eq(st.devices, 0);
	dt_env_fini(&env);
	dt_assert_no_rdma_resources();
}
END_TEST

struct srq_side {
	int accepted, events, reason, recvd;
	struct evrdma_conn *got;	/* the connection a receive named */
};

static void
srq_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct srq_side *x = arg;

	(void)c;
	if (what & EVRDMA_EV_CONNECTED)
		return;
	x->events++;
	x->reason = reason;
}

static void
srq_accept(struct evrdma_listener *l, struct evrdma_conn *c,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct srq_side *x = arg;

	(void)l; (void)peer; (void)socklen;
	x->accepted++;
	evrdma_conn_setcb(c, srq_event, x);
}

static void
srq_recv(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct srq_side *x = arg;

	if (wc->status)
		return;
	x->recvd++;
	x->got = c;
}

/* A raw connection to @p host:port with @p srq (NULL: none); its events
 * go to @p x. */
static struct evrdma_conn *
srq_connect(struct dt_env *env, const char *host, int port,
    struct evrdma_srq *srq, struct srq_side *x)
{
	struct sockaddr_storage ss;
	int len = dt_sockaddr(&ss, host, port);
	struct evrdma_conn *c = evrdma_conn_new(env->base, 0);

	ck_assert_ptr_nonnull(c);
	evrdma_conn_setcb(c, srq_event, x);
	if (srq)
		ck_assert_int_eq(evrdma_conn_set_srq(c, srq), 0);
	ck_assert_int_eq(evrdma_conn_connect(c, (struct sockaddr *)&ss, len),
	    0);
	return c;
}

/*
 * A shared receive queue belongs to one device: with two, evrdma_srq_new()
 * wants a name; a connection on the other device fails (active side:
 * RESOURCE; a listener's: the request is rejected); on its own device it
 * works.
 */
START_TEST(devices_srq)
{
	struct dt_env env;
	struct evrdma_srq *q0, *q1;
	struct evrdma_listener *l;
	struct evrdma_mr *mr, *cmr;
	struct srq_side srv, cli, bad;
	struct sockaddr_storage ss;
	struct evrdma_conn *c;
	static uint8_t buf[1024], cbuf[64];
	int len;

	memset(&srv, 0, sizeof(srv));
	memset(&cli, 0, sizeof(cli));
	memset(&bad, 0, sizeof(bad));
	dt_env_init(&env, NULL);
	ck_assert_ptr_null(evrdma_srq_new(env.base, NULL, 8));
	ck_assert_int_eq(errno, EINVAL);
	q0 = evrdma_srq_new(env.base, dt_ibdev(), 8);
	q1 = evrdma_srq_new(env.base, DEV2_IBDEV, 8);
	ck_assert(q0 && q1);
	mr = evrdma_srq_mr_reg(q1, buf, sizeof(buf));
	ck_assert_ptr_nonnull(mr);
	ck_assert_int_eq(evrdma_srq_post_recv(q1, mr, 0, sizeof(buf),
	    srq_recv, &srv), 0);
	/* a listener on rxe1 with rxe0's queue: the request is rejected */
	len = dt_sockaddr(&ss, DEV2_ADDR, 0);
	l = evrdma_listener_new(env.base, srq_accept, &srv, 0, 4,
	    (struct sockaddr *)&ss, len);
	ck_assert_ptr_nonnull(l);
	ck_assert_int_eq(evrdma_listener_set_srq(l, q0), 0);
	c = srq_connect(&env, DEV2_ADDR, evrdma_listener_get_port(l), NULL,
	    &bad);
	DT_WAIT(&env, bad.events, 10000);
	ck_assert_int_eq(bad.reason, EVRDMA_REASON_REJECTED);
	ck_assert_int_eq(srv.accepted, 0);
	evrdma_conn_free(c);
	/* an active connection to rxe1 with rxe0's queue */
	memset(&bad, 0, sizeof(bad));
	c = srq_connect(&env, DEV2_ADDR, evrdma_listener_get_port(l), q0,
	    &bad);
	DT_WAIT(&env, bad.events, 10000);
	ck_assert_int_eq(bad.reason, EVRDMA_REASON_RESOURCE);
	evrdma_conn_free(c);
	/* the right one: rxe1's queue on rxe1 */
	ck_assert_int_eq(evrdma_listener_set_srq(l, q1), 0);
	c = srq_connect(&env, DEV2_ADDR, evrdma_listener_get_port(l), NULL,
	    &cli);
	DT_WAIT(&env, srv.accepted, 10000);
	cmr = evrdma_mr_reg(c, cbuf, sizeof(cbuf), 0);
	ck_assert_ptr_nonnull(cmr);
	ck_assert_int_eq(evrdma_conn_post_send(c, cmr, 0, sizeof(cbuf), NULL,
	    NULL), 0);
	DT_WAIT(&env, srv.recvd, 10000);
	ck_assert_ptr_nonnull(srv.got);
	ck_assert_int_eq(srv.events + cli.events, 0);
	evrdma_conn_free(srv.got);
	evrdma_conn_free(c);
	evrdma_mr_free(cmr);
	evrdma_listener_free(l);
	evrdma_srq_free(q0);
	evrdma_srq_free(q1);
	evrdma_mr_free(mr);
	ch_drain(&env, 20000);
	dt_env_fini(&env);
	dt_assert_no_rdma_resources();
}
END_TEST

/* The listener's error callback: its argument is the side's pair. */
static void
dev_lst_error(struct evrdma_listener *lst, void *ctx)
{
	struct dev_side *d = (struct dev_side *)((char *)ctx -
	    offsetof(struct dev_side, p));

	d->lst_errno = errno;
	d->lst_errors++;
	d->lst_reason = evrdma_listener_get_error(lst);
}

/*
 * rxe1 is removed under live connections and a listener: everything on it
 * ends once with DEVICE_REMOVAL; rxe0's connections carry on, its
 * listener accepts a new connection, and nothing is left of rxe1.
 */
START_TEST(devices_one_removed)
{
	struct dt_env env;
	struct dev_side d[2];
	struct evrdma_stats st;
	struct chp late;
	int i;

	dt_require_fork();
	memset(d, 0, sizeof(d));
	d[0].host = dt_addr();
	d[0].ibdev = dt_ibdev();
	d[1].host = DEV2_ADDR;
	d[1].ibdev = DEV2_IBDEV;
	env_short_warm(&env);
	for (i = 0; i < 2; i++) {
		dev_side_open(&env, &d[i]);
		evrdma_listener_set_error_cb(d[i].p.lst, dev_lst_error);
	}
	/* rxe1 goes while its channel is mid-transfer */
	d[1].c.srv->drain = 1;
	d[1].c.srv->rx_seed = d[1].c.cli.tx_seed;
	d[1].c.cli.tx_total = 64 * MiB;
	d[1].c.cli.pump_hi = 1 * MiB;
	d[1].c.cli.pump_in_wcb = 1;
	ep_pump(&d[1].c.cli);
	CH_WAIT(env.eb, d[1].c.srv->rx >= 1 * MiB, 20000);
	/* (rdma link delete waits until every user let go: background) */
	dt_run_cmd("rdma link delete " DEV2_IBDEV " &");
	CH_WAIT(env.eb, (d[1].p.cli_events >= 2 && d[1].p.srv_events >= 1 &&
	    d[1].c.cli.ends && d[1].c.srv->ends && d[1].lst_errors) ||
	    d[0].p.cli_events > 1 || d[0].c.cli.ends, 20000);
	/* each end once: CONNECTED, then the end. Both ends are on rxe1, so
	 * the end that hears of the removal first disconnects, and the other
	 * may hear that first ("disconnected by the peer") */
	ck_assert_int_eq(d[1].p.cli_events, 2);
	ck_assert_int_eq(d[1].p.srv_events, 1);
	ck_assert_int_ge(d[1].removals, 1);
	ck_assert(d[1].p.cli_reason == EVRDMA_REASON_DEVICE_REMOVAL ||
	    d[1].p.cli_reason == EVRDMA_REASON_DISCONNECTED);
	ck_assert(d[1].p.srv_reason == EVRDMA_REASON_DEVICE_REMOVAL ||
	    d[1].p.srv_reason == EVRDMA_REASON_DISCONNECTED);
	ck_assert_int_eq(d[1].c.cli.ends, 1);
	ck_assert_int_eq(d[1].c.srv->ends, 1);
	ck_assert(evrdma_channel_get_error(d[1].c.cli.ch) ==
	    EVRDMA_REASON_DEVICE_REMOVAL || evrdma_channel_get_error(
	    d[1].c.srv->ch) == EVRDMA_REASON_DEVICE_REMOVAL);
	ck_assert_int_eq(d[1].lst_errors, 1);
	ck_assert_int_eq(d[1].lst_reason, EVRDMA_REASON_DEVICE_REMOVAL);
	ck_assert_int_eq(d[1].lst_errno, ENODEV);
	ck_assert_uint_lt(d[1].c.srv->rx, 64 * MiB);
	/* rxe0: untouched, and serving */
	ck_assert_int_eq(d[0].p.cli_events, 1);
	ck_assert_int_eq(d[0].p.srv_events, 0);
	ck_assert_int_eq(d[0].lst_errors, 0);
	dev_side_traffic(&env, &d[0], 4 * MiB);
	memset(&late, 0, sizeof(late));
	setenv("EVRDMA_TEST_ADDR", d[0].host, 1);
	chp_open(&late, &env, EVRDMA_CHANNEL_STREAM, 1);
	ep_xfer(&env, &late.cli, late.srv, 1 * MiB, 20000);
	ep_free(&late.cli);
	chl_close(&late.l);
	for (i = 0; i < 2; i++)
		dev_side_close(&d[i]);
	ch_drain(&env, 20000);
	/* (the warm sets that held them open go after 50 ms idle) */
	CH_WAIT(env.eb, (evrdma_base_get_stats(env.base, &st, sizeof(st)),
	    st.devices == 0), 5000);
	ck_assert_uint_eq(st.devices, 0);
	ck_assert_uint_eq(st.cqs, 0);
	dt_env_fini(&env);
}
END_TEST

Suite *
dt_suite_devices(void)
{
	Suite *s = suite_create("device-multi");
	TCase *tc = tcase_create("bind");

	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, dev2_add, dev2_remove);
	tcase_add_test(tc, devices_bind_by_address);
	tcase_add_test(tc, devices_srq);
	suite_add_tcase(s, tc);

	tc = tcase_create("removal");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, dev2_add, dev2_remove);
	tcase_add_test(tc, devices_one_removed);
	suite_add_tcase(s, tc);
	return s;
}
