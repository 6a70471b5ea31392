/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: shared fixture helpers (need a real RDMA device:
 * rxe0 in the Soft-RoCE guest, or hardware). Each test runs forked by Check.
 */
#ifndef EVRDMA_DEVTEST_H_INCLUDED_
#define EVRDMA_DEVTEST_H_INCLUDED_

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <sys/select.h>
#include <sys/time.h>
#include <unistd.h>

#include <check.h>
#include <event2/event.h>
#include <evrdma.h>

#include "testutil.h"

/* The address of the RDMA-capable interface (the guest exports these). */
static inline const char *
dt_addr(void)
{
	const char *a = getenv("EVRDMA_TEST_ADDR");
	return a && *a ? a : "192.0.2.1";
}

static inline const char *
dt_addr6(void)
{
	const char *a = getenv("EVRDMA_TEST_ADDR6");
	return a && *a ? a : "2001:db8::1";
}

static inline const char *
dt_ibdev(void)
{
	const char *a = getenv("EVRDMA_TEST_IBDEV");
	return a && *a ? a : "rxe0";
}

/* Fill a sockaddr_storage from a numeric host and port, without Check
 * (for code that runs outside a test). @return socklen, or -1 */
static inline int
dt_sockaddr_of(struct sockaddr_storage *ss, const char *host, int port)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		return (int)sizeof(*sin);
	}
	if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1)
		return -1;
	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = htons((uint16_t)port);
	return (int)sizeof(*sin6);
}

/* The same in a test: a bad address fails it. @return socklen */
static inline int
dt_sockaddr(struct sockaddr_storage *ss, const char *host, int port)
{
	int len = dt_sockaddr_of(ss, host, port);

	ck_assert_msg(len > 0, "not a numeric address: %s", host);
	return len;
}

/* One of the test device's port counters (rxe: hw_counters/@p name). */
static inline unsigned long long
dt_hw_counter(const char *name)
{
	char path[256];
	unsigned long long n = 0;
	FILE *f;

	snprintf(path, sizeof(path),
	    "/sys/class/infiniband/%s/ports/1/hw_counters/%s", dt_ibdev(),
	    name);
	f = fopen(path, "r");
	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(fscanf(f, "%llu", &n), 1);
	fclose(f);
	return n;
}

/* Log library messages to stderr while a test runs (EVRDMA_TEST_LOG=1). */
static inline void
dt_log_cb(int level, const char *msg, void *arg)
{
	(void)arg;
	fprintf(stderr, "%llu evrdma[%d]: %s\n",
	    (unsigned long long)tu_now_ms() % 100000, level, msg);
}

static inline void
dt_log_init(void)
{
	const char *v = getenv("EVRDMA_TEST_LOG");
	if (v && *v == '1')
		evrdma_set_log_callback(dt_log_cb, EVRDMA_LOG_DEBUG, NULL);
}

/* One event_base with one evrdma_base. */
struct dt_env {
	struct event_base *eb;
	struct evrdma_base *base;
};

static inline void
dt_env_init(struct dt_env *env, struct evrdma_config *cfg)
{
	dt_log_init();
	env->eb = event_base_new();
	ck_assert_ptr_nonnull(env->eb);
	env->base = evrdma_base_new(env->eb, cfg);
	if (!env->base)
		ck_abort_msg("evrdma_base_new: %s (%s)", strerror(errno),
		    evrdma_errmsg());
}

/* Free everything and assert that no rdma-core object of ours is left. */
static inline void
dt_env_fini(struct dt_env *env)
{
	struct evrdma_stats st;

	evrdma_base_get_stats(env->base, &st, sizeof(st));
	ck_assert_msg(st.conns == 0 && st.listeners == 0 && st.cm_ids == 0 &&
	    st.qps == 0 && st.mrs == 0 && st.reqs == 0,
	    "leak: conns %u listeners %u cm_ids %u qps %u mrs %u reqs %u",
	    st.conns, st.listeners, st.cm_ids, st.qps, st.mrs, st.reqs);
	evrdma_base_free(env->base);
	event_base_free(env->eb);
}

/* Run the loop until *flag is nonzero; fail the test after timeout_ms. */
#define DT_WAIT(env, flag, timeout_ms)					\
	ck_assert_msg(tu_loop_until((env)->eb, &(flag), (timeout_ms)) == 0, \
	    "timed out waiting for " #flag)

/*
 * Ask the kernel (rdma-core's `rdma resource show`) whether this process
 * still owns any QP, CQ, MR or rdma_cm id: the library's own counters are
 * checked by dt_env_fini(), this checks them against the device.
 */
static inline void
dt_assert_no_rdma_resources(void)
{
	static const char *const kinds[] = { "qp", "cq", "mr", "cm_id" };
	char cmd[256], line[512];
	unsigned i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		FILE *f;
		int n = 0;

		snprintf(cmd, sizeof(cmd), "rdma resource show %s 2>&1",
		    kinds[i]);
		f = popen(cmd, "r");
		ck_assert_ptr_nonnull(f);
		while (fgets(line, sizeof(line), f)) {
			char pid[32];
			snprintf(pid, sizeof(pid), " pid %d ", (int)getpid());
			if (strstr(line, pid))
				n++;
		}
		ck_assert_int_eq(pclose(f), 0);
		ck_assert_msg(n == 0, "%d %s(s) of pid %d left on the device",
		    n, kinds[i], (int)getpid());
	}
}

/* Run the loop until *counter >= target; fail the test after timeout_ms. */
static inline void
dt_wait_ge(struct dt_env *env, int *counter, int target, int timeout_ms)
{
	uint64_t deadline = tu_now_ms() + (uint64_t)timeout_ms;
	int never = 0;

	while (*counter < target) {
		ck_assert_msg(tu_now_ms() < deadline, "timed out: %d of %d",
		    *counter, target);
		tu_loop_until(env->eb, &never, 20);
	}
}

/* Run the loop until all connections and listeners are destroyed. */
static inline void
dt_drain(struct dt_env *env, int timeout_ms)
{
	struct timeval start, now;
	struct evrdma_stats st;

	gettimeofday(&start, NULL);
	for (;;) {
		evrdma_base_get_stats(env->base, &st, sizeof(st));
		if (st.conns == 0 && st.cm_ids == 0 && st.reqs == 0)
			return;
		gettimeofday(&now, NULL);
		ck_assert_msg((now.tv_sec - start.tv_sec) * 1000 +
		    (now.tv_usec - start.tv_usec) / 1000 < timeout_ms,
		    "teardown did not finish: conns %u cm_ids %u reqs %u",
		    st.conns, st.cm_ids, st.reqs);
		event_base_loop(env->eb, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		{
			struct timeval tv = { 0, 2000 };
			select(0, NULL, NULL, NULL, &tv);
		}
	}
}

/*
 * A connected pair on one loop: a listener, the client connection and the
 * accepted server connection. The prepare hook lets tests post receives
 * before the server accepts.
 */
struct dt_pair {
	struct dt_env *env;
	struct evrdma_listener *lst;
	struct evrdma_conn *cli;
	struct evrdma_conn *srv;
	struct evrdma_conn *extra[8];	/* later accepts on the same listener */
	int nextra;
	int cli_connected;
	int cli_events;		/* count of event callbacks */
	short cli_what;
	int cli_reason;
	int srv_accepted;
	int srv_events;
	short srv_what;
	int srv_reason;
	evrdma_prepare_cb prepare;
	void *prepare_arg;
};

static inline void
dt_pair_cli_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct dt_pair *p = arg;
	(void)c;
	p->cli_events++;
	p->cli_what = what;
	p->cli_reason = reason;
	if (what & EVRDMA_EV_CONNECTED)
		p->cli_connected = 1;
}

static inline void
dt_pair_srv_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct dt_pair *p = arg;
	(void)c;
	p->srv_events++;
	p->srv_what = what;
	p->srv_reason = reason;
}

static inline void
dt_pair_accept(struct evrdma_listener *l, struct evrdma_conn *c,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct dt_pair *p = arg;
	(void)l;
	ck_assert_ptr_nonnull(peer);
	ck_assert_int_gt(socklen, 0);
	if (p->srv) {
		ck_assert_int_lt(p->nextra, 8);
		p->extra[p->nextra++] = c;
		return;
	}
	p->srv = c;
	p->srv_accepted = 1;
	evrdma_conn_setcb(c, dt_pair_srv_event, p);
}

static inline int
dt_pair_prepare(struct evrdma_listener *l, struct evrdma_conn *c,
    const void *pd, size_t len, void *arg)
{
	struct dt_pair *p = arg;
	return p->prepare ? p->prepare(l, c, pd, len, p->prepare_arg) : 0;
}

/* The pair's listener on host:0 (its accept and prepare hooks), before
 * anything connects: a test may send a stranger to it first. */
static inline void
dt_pair_listen(struct dt_pair *p, struct dt_env *env, const char *host,
    int raw)
{
	struct sockaddr_storage ss;
	int len = dt_sockaddr(&ss, host, 0);

	p->env = env;
	p->lst = evrdma_listener_new(env->base, dt_pair_accept, p,
	    raw ? EVRDMA_LISTEN_RAW : 0, 16, (struct sockaddr *)&ss, len);
	if (!p->lst)
		ck_abort_msg("listener: %s (%s)", strerror(errno),
		    evrdma_errmsg());
	evrdma_listener_set_prepare_cb(p->lst, dt_pair_prepare, p);
}

/* Connect the pair's client to its listener (dt_pair_listen()); returns
 * when both sides are up. */
static inline void
dt_pair_dial(struct dt_pair *p, const char *host, int raw)
{
	struct dt_env *env = p->env;
	struct sockaddr_storage ss;
	int len = dt_sockaddr(&ss, host, evrdma_listener_get_port(p->lst));

	if (ss.ss_family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(
	    &((struct sockaddr_in6 *)&ss)->sin6_addr))
		((struct sockaddr_in6 *)&ss)->sin6_scope_id =
		    if_nametoindex(getenv("EVRDMA_TEST_NETDEV") ?
		    getenv("EVRDMA_TEST_NETDEV") : "rdma0");
	p->cli = evrdma_conn_new(env->base, raw ? EVRDMA_CONN_RAW : 0);
	ck_assert_ptr_nonnull(p->cli);
	evrdma_conn_setcb(p->cli, dt_pair_cli_event, p);
	if (evrdma_conn_connect(p->cli, (struct sockaddr *)&ss, len) < 0)
		ck_abort_msg("connect: %s (%s)", strerror(errno),
		    evrdma_errmsg());
	DT_WAIT(env, p->cli_connected, 10000);
	ck_assert_int_eq(p->cli_events, 1);
	DT_WAIT(env, p->srv_accepted, 5000);
}

/* Listen on host:0 and connect to it; returns when both sides are up. */
static inline void
dt_pair_connect(struct dt_pair *p, struct dt_env *env, const char *host,
    int raw)
{
	dt_pair_listen(p, env, host, raw);
	dt_pair_dial(p, host, raw);
}

/* Free both ends and the listener; wait for complete teardown. */
static inline void
dt_pair_close(struct dt_pair *p)
{
	evrdma_conn_free(p->cli);
	evrdma_conn_free(p->srv);
	while (p->nextra)
		evrdma_conn_free(p->extra[--p->nextra]);
	evrdma_listener_free(p->lst);
	p->cli = p->srv = NULL;
	p->lst = NULL;
	dt_drain(p->env, 10000);
}

/* Completion recorder for work requests. */
struct dt_wc {
	int done;
	struct evrdma_wc wc;
};

static inline void
dt_wc_cb(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct dt_wc *r = arg;
	(void)c;
	r->done++;
	r->wc = *wc;
}

/* Run a shell command in the guest; the test fails if it does. */
static inline void
dt_run_cmd(const char *cmd)
{
	int rc = system(cmd);

	ck_assert_msg(rc == 0, "'%s' failed (%d)", cmd, rc);
}

/*
 * Put the device back as the guest made it. rxe does not carry connections
 * again after its netdev went down and up, so both are made anew. Use it as
 * an unchecked fixture, in Check's parent process, after the test's process
 * is gone: `rdma link delete` waits for every process that has the device
 * open, and librdmacm keeps it open for the life of a process.
 */
static inline void
dt_restore_device(void)
{
	const char *r = getenv("EVRDMA_TEST_RXE_RESTORE");
	const char *nd = getenv("EVRDMA_TEST_NETDEV");
	char cmd[256];

	if (!r || !*r || !nd || !*nd) {
		fprintf(stderr, "EVRDMA_TEST_RXE_RESTORE/NETDEV not set: "
		    "cannot restore the device\n");
		return;
	}
	snprintf(cmd, sizeof(cmd), "timeout 30 rdma link delete %s "
	    "2>/dev/null; ip link del %s 2>/dev/null; %s", dt_ibdev(), nd, r);
	if (system(cmd) != 0)
		fprintf(stderr, "restoring the device failed: %s\n", cmd);
}

/* Tests that change the device must not run without fork. */
static inline void
dt_require_fork(void)
{
	ck_assert_msg(!tu_nofork(), "device tests that change the device "
	    "need CK_FORK (the default)");
}

/* Test suites (one file each). */
Suite *dt_suite_smoke(void);		/* test_device.c */
Suite *dt_suite_conn(void);		/* test_conn.c */
Suite *dt_suite_srq(void);		/* test_srq.c */
Suite *dt_suite_fail(void);		/* test_fail.c */
Suite *dt_suite_rping(void);		/* test_rping.c */
Suite *dt_suite_bev_examples(void);	/* test_rping.c */
Suite *dt_suite_chan_stream(void);	/* test_chan_stream.c */
Suite *dt_suite_chan_compare(void);	/* test_chan_compare.c */
Suite *dt_suite_chan_semantics(void);	/* test_chan_semantics.c */
Suite *dt_suite_chan_recv(void);	/* test_chan_recv.c */
Suite *dt_suite_chan_scale(void);	/* test_chan_scale.c */
Suite *dt_suite_chan_srq(void);		/* test_chan_srq.c */
Suite *dt_suite_chan_failure(void);	/* test_chan_failure.c */
Suite *dt_suite_chan_attack(void);	/* test_chan_attack.c */
Suite *dt_suite_chan_fast(void);	/* test_chan_fast.c */
Suite *dt_suite_chan_pull(void);	/* test_chan_pull.c */
Suite *dt_suite_chan_isolation(void);	/* test_chan_isolation.c */
Suite *dt_suite_warm(void);		/* test_warm.c */
Suite *dt_suite_lifetime(void);		/* test_lifetime.c */
Suite *dt_suite_liveness(void);		/* test_liveness.c */
Suite *dt_suite_fork(void);		/* test_fork.c */
Suite *dt_suite_devices(void);		/* test_devices.c */
Suite *dt_suite_storm(void);		/* test_storm.c */
Suite *dt_suite_conn_attack(void);	/* test_conn_attack.c */
Suite *dt_suite_strangers(void);	/* test_strangers.c */

#endif /* EVRDMA_DEVTEST_H_INCLUDED_ */
