/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests, channels whose peer fails or goes: a peer process
 * killed mid-stream, a peer that frees with unsent output (while the reader
 * reads, has EV_READ off, or holds its high watermark), and a sender that
 * frees as soon as its output is empty (its last messages still to be
 * pulled: the peer gets them, then EOF, long before the teardown timeout),
 * a channel whose last sends were left unsignaled when its peer died, and
 * a post of sends refused.
 * The survivor sees the end exactly once, after the data, and never a read
 * after it.
 */
#include "chtest.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

/* ==== a peer in a process of its own ==== */

/* The peer's child process signals its parent once ready, then serves
 * until it is killed. */
static void
child_ready(struct dt_env *env, int sigfd)
{
	char c = 'c';

	if (write(sigfd, &c, 1) != 1)
		_exit(4);
	for (;;)
		ch_loop_for(env->eb, 1000);
}

/* A peer process: its pid, the pipe its port goes down, and the one on
 * which it says it is ready */
struct peer_proc {
	pid_t pid;
	int to_child, sig;
};

/*
 * Fork a peer process (before this process opens any RDMA object) that
 * waits for a port and then runs @p run (which does not return); its
 * parent's death kills it.
 */
static void
peer_fork(struct peer_proc *pp, void (*run)(int, uint64_t, int),
    uint64_t seed)
{
	int to_child[2], sig[2], port;
	pid_t parent = getpid();

	ck_assert_int_eq(pipe(to_child), 0);
	ck_assert_int_eq(pipe(sig), 0);
	pp->pid = tu_fork_tied(parent, 2);
	ck_assert_int_ge(pp->pid, 0);
	if (pp->pid == 0) {
		close(sig[0]);
		close(to_child[1]);
		if (read(to_child[0], &port, sizeof(port)) != sizeof(port))
			_exit(2);
		run(port, seed, sig[1]);
		_exit(0);
	}
	close(sig[1]);
	close(to_child[0]);
	pp->to_child = to_child[1];
	pp->sig = sig[0];
}

/* Tell the peer @p l's port and wait until it connected. */
static void
peer_start(struct peer_proc *pp, struct dt_env *env, struct chl *l)
{
	int port = evrdma_listener_get_port(l->lst);

	ck_assert_int_eq(write(pp->to_child, &port, sizeof(port)),
	    sizeof(port));
	CH_WAIT(env->eb, l->naccepted == 1, 20000);
}

/* Wait until the peer says it is ready. */
static void
peer_wait_ready(struct peer_proc *pp, struct dt_env *env)
{
	struct pollfd pfd = { pp->sig, POLLIN, 0 };
	char c;

	CH_WAIT(env->eb, poll(&pfd, 1, 0) == 1, 20000);
	ck_assert_int_eq(read(pp->sig, &c, 1), 1);
}

/* Kill the peer process and reap it. */
static void
peer_kill(struct peer_proc *pp)
{
	int status;

	kill(pp->pid, SIGKILL);
	ck_assert_int_eq(waitpid(pp->pid, &status, 0), pp->pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	close(pp->sig);
	close(pp->to_child);
}

/* ==== the peer process is killed mid-stream ==== */

static void
child_stream(int port, uint64_t seed, int sigfd)
{
	struct dt_env env;
	struct sockaddr_storage ss;
	struct ep e;
	int len = dt_sockaddr(&ss, dt_addr(), port);

	dt_env_init(&env, NULL);
	memset(&e, 0, sizeof(e));
	e.tx_seed = seed;
	e.tx_total = 1ull << 40;	/* until killed */
	e.pump_hi = 2 * MiB;
	e.pump_in_wcb = 1;
	ep_connect(&env, &e, "child", &ss, len, EVRDMA_CHANNEL_STREAM, 1);
	evrdma_channel_setwatermark(e.ch, EV_WRITE, 1 * MiB, 0);
	{
		uint64_t dl = tu_now_ms() + 15000;

		while (!e.connected && !e.ends && tu_now_ms() < dl)
			ch_step(env.eb, 50);
		if (!e.connected)
			_exit(3);
	}
	ep_pump(&e);
	child_ready(&env, sigfd);
}

START_TEST(channel_peer_killed)
{
	struct dt_env env;
	struct chl l;
	struct ep *srv = &l.acc[0];
	struct peer_proc pp;

	memset(&l, 0, sizeof(l));
	peer_fork(&pp, child_stream, 0x4b111ed);
	dt_env_init(&env, NULL);
	srv->name = "survivor";
	srv->drain = 1;
	srv->rx_seed = 0x4b111ed;
	l.read[0] = 1;
	chl_listen(&l, &env, EVRDMA_CHANNEL_STREAM);
	peer_start(&pp, &env, &l);
	peer_wait_ready(&pp, &env);
	/* mid-stream: some data arrived, much more is on its way */
	CH_WAIT(env.eb, srv->rx >= 512 * KiB || srv->ends, 30000);
	ck_assert_int_eq(srv->ends, 0);
	peer_kill(&pp);
	CH_WAIT(env.eb, srv->ends, 20000);
	ch_loop_for(env.eb, 500);
	fprintf(stderr, "channel peer killed: survivor got 0x%x (%s) after %llu "
	    "bytes\n", srv->what, evrdma_reason_str(srv->reason),
	    (unsigned long long)srv->rx);
	ck_assert_int_eq(srv->ends, 1);
	ck_assert_int_eq(srv->eof + srv->error, 1);
	ck_assert_int_eq(srv->reads_after_end, 0);
	chl_close(&l);
	ch_drain(&env, 20000);
	dt_env_fini(&env);
}
END_TEST

/* ==== the peer frees with unsent output ==== */

/*
 * The writer frees its channel with most of its output unsent. Variant 0:
 * the reader reads all along. Variant 1: the reader has EV_READ off, and
 * variant 2 a read high watermark it leaves full, while the peer goes away;
 * it resumes reading a second later. In each the reader gets EOF or ERROR
 * exactly once, never a read after it, and never hangs. In 1 and 2 what had
 * already been written into its ring (the writer's first window: the whole
 * ring, 1 MiB) was sent and arrived, so it is delivered before EOF, as a
 * TCP bufferevent delivers what is in the socket before EOF.
 */
START_TEST(channel_peer_frees_unsent)
{
	struct dt_env env;
	struct chp p;
	const size_t ring = 16 * 64 * KiB;	/* the default ring */
	size_t total = _i == 0 ? 8 * MiB : 2 * MiB;
	static const char *const names[] = { "reader active", "EV_READ off",
		"high watermark held" };

	memset(&p, 0, sizeof(p));
	dt_env_init(&env, NULL);
	chp_open(&p, &env, EVRDMA_CHANNEL_STREAM, _i != 1);
	p.srv->drain = _i == 0;
	p.srv->rx_seed = p.cli.tx_seed;
	if (_i == 2)
		evrdma_channel_setwatermark(p.srv->ch, EV_READ, 0, 128 * KiB);
	p.cli.tx_total = total;
	ep_pump(&p.cli);
	if (_i == 0)
		CH_WAIT(env.eb, p.srv->rx >= 256 * KiB || p.srv->ends, 30000);
	else
		ch_loop_for(env.eb, 1000);
	ck_assert_uint_gt(evbuffer_get_length(
	    evrdma_channel_get_output(p.cli.ch)), 0);
	ep_free(&p.cli);
	if (_i != 0) {
		ch_loop_for(env.eb, 1000);
		p.srv->drain = 1;
		if (p.srv->ch && _i == 1)
			ck_assert_int_eq(evrdma_channel_enable(p.srv->ch,
			    EV_READ), 0);
		if (p.srv->ch && _i == 2) {
			evrdma_channel_setwatermark(p.srv->ch, EV_READ, 0, 0);
			ep_consume(p.srv);
		}
	}
	CH_WAIT(env.eb, p.srv->ends, 20000);
	ch_loop_for(env.eb, 500);
	fprintf(stderr, "channel peer freed (%s): 0x%x after %llu of %zu "
	    "bytes\n", names[_i], p.srv->what, (unsigned long long)p.srv->rx,
	    total);
	ck_assert_int_eq(p.srv->ends, 1);
	ck_assert_int_eq(p.srv->eof + p.srv->error, 1);
	ck_assert_int_eq(p.srv->reads_after_end, 0);
	ck_assert_uint_lt(p.srv->rx, total);
	if (_i != 0)
		ck_assert_msg(p.srv->rx == ring && p.srv->rx_at_end == ring,
		    "%s: %llu bytes delivered (%llu by EOF); the ring held %zu",
		    names[_i], (unsigned long long)p.srv->rx,
		    (unsigned long long)p.srv->rx_at_end, ring);
	else
		ck_assert_uint_eq(p.srv->rx, p.srv->rx_at_end);
	chp_close(&p);
	dt_env_fini(&env);
}
END_TEST

/* ==== lingering after free ==== */

/*
 * The common case of lingering: a sender frees its channel as soon as its
 * output is empty (as a TCP program closes after its last write). Its last
 * messages are pulls the peer has not done yet; the peer still gets every
 * byte, then EOF, as soon as it has them, long before the teardown timeout.
 */
START_TEST(channel_linger_done)
{
	struct dt_env env;
	struct evrdma_config *cfg = evrdma_config_new();
	struct chp p;
	struct evrdma_stats st;
	const size_t total = 256 * KiB;	/* 4 messages of 64 KiB */
	uint8_t *buf = malloc(total);
	uint64_t t_free, t_end;

	memset(&p, 0, sizeof(p));
	ck_assert_ptr_nonnull(cfg);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(evrdma_config_set_timeout(cfg,
	    EVRDMA_TIMEOUT_TEARDOWN, 20000), 0);
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	chp_open(&p, &env, EVRDMA_CHANNEL_STREAM, 1);
	p.srv->drain = 1;
	p.srv->rx_seed = p.cli.tx_seed;
	pat_fill(buf, 0, total, p.cli.tx_seed);
	ck_assert_int_eq(evrdma_channel_write(p.cli.ch, buf, total), 0);
	free(buf);
	CH_WAIT(env.eb, evbuffer_get_length(evrdma_channel_get_output(
	    p.cli.ch)) == 0, 10000);
	evrdma_base_get_stats(env.base, &st, sizeof(st));
	ck_assert_uint_gt(st.ch_pulled, 0);
	ep_free(&p.cli);
	t_free = tu_now_ms();
	CH_WAIT(env.eb, p.srv->ends, 30000);
	t_end = tu_now_ms();
	fprintf(stderr, "channel linger: %zu bytes (%llu messages pulled), "
	    "then 0x%x, %llu ms after the free\n", (size_t)p.srv->rx,
	    st.ch_pulled, p.srv->what, (unsigned long long)(t_end - t_free));
	ck_assert_uint_eq(p.srv->rx, total);
	ck_assert_int_eq(p.srv->eof, 1);
	ck_assert_uint_lt(t_end - t_free, 5000);
	chp_close(&p);
	ch_drain(&env, 20000);
	dt_env_fini(&env);
}
END_TEST

/* ==== sends whose completions were deferred, at teardown ==== */

/* what the survivor sends before its peer is killed */
#define DEFERRED_BYTES	(3 * 64)

static void
child_reader(int port, uint64_t seed, int sigfd)
{
	struct dt_env env;
	struct sockaddr_storage ss;
	struct ep e;
	int len = dt_sockaddr(&ss, dt_addr(), port);
	uint64_t dl = tu_now_ms() + 15000;

	dt_env_init(&env, NULL);
	memset(&e, 0, sizeof(e));
	e.rx_seed = seed;
	e.drain = 1;
	ep_connect(&env, &e, "child", &ss, len, EVRDMA_CHANNEL_STREAM, 1);
	while (e.rx < DEFERRED_BYTES && !e.ends && tu_now_ms() < dl)
		ch_step(env.eb, 50);
	if (e.rx != DEFERRED_BYTES)
		_exit(3);
	child_ready(&env, sigfd);
}

/*
 * A busy-polling channel's last messages go unsignaled (evrdma__ep_uncork):
 * their completions come with a later send's, and when the connection ends
 * under it, with the drain's (evrdma__ep_drain). Here its peer's process
 * is killed after it got three small messages, each its own pass (fewer
 * than the ring's half: none signaled), so no later send of ours comes.
 * With no drain, the connection would wait for them until the teardown
 * timeout (20 s here). The survivor's channel must be gone, every request
 * completed, well before that.
 */
START_TEST(channel_deferred_teardown)
{
	struct dt_env env;
	struct evrdma_config *cfg = evrdma_config_new();
	struct chl l;
	struct ep *srv = &l.acc[0];
	struct peer_proc pp;
	const uint64_t seed = 0xdefe4ed;
	uint64_t t0, t1;
	int i;

	memset(&l, 0, sizeof(l));
	ck_assert_ptr_nonnull(cfg);
	peer_fork(&pp, child_reader, seed);
	ck_assert_int_eq(evrdma_config_set_timeout(cfg,
	    EVRDMA_TIMEOUT_TEARDOWN, 20000), 0);
	/* (busy polling: event-driven, the last message of a pass is
	 * signaled, evrdma__rc_send_all) */
	ck_assert_int_eq(evrdma_config_set_busy_poll(cfg, 50), 0);
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	srv->name = "survivor";
	l.read[0] = 1;
	chl_listen(&l, &env, EVRDMA_CHANNEL_STREAM);
	peer_start(&pp, &env, &l);
	srv->tx_seed = seed;
	for (i = 0; i < DEFERRED_BYTES / 64; i++) {
		srv->tx_total += 64;
		ep_pump(srv);
		ch_loop_for(env.eb, 100);
	}
	peer_wait_ready(&pp, &env);
	ch_loop_for(env.eb, 200);
	peer_kill(&pp);
	t0 = tu_now_ms();
	CH_WAIT(env.eb, srv->ends, 20000);
	ck_assert_int_eq(srv->ends, 1);
	chl_close(&l);
	ch_drain(&env, 15000);
	t1 = tu_now_ms();
	fprintf(stderr, "deferred sends: survivor all gone %llu ms after its "
	    "peer was killed\n", (unsigned long long)(t1 - t0));
	ck_assert_uint_lt(t1 - t0, 5000);
	dt_env_fini(&env);
}
END_TEST

/* ==== a post of sends the provider refuses ==== */

static void
qe_log(int level, const char *msg, void *arg)
{
	(void)level;
	if (strstr(msg, "internal error"))
		(*(int *)arg)++;
}

/*
 * A stream both ways under the test knob EVRDMA_TEST_FAIL_POST_SEND=@p k
 * (@p what: what the knob does, for the log line), until the failure it
 * makes ends it: both channels end exactly once (one with ERROR), no byte
 * arrives that was not sent, no impossible state of the transport's is
 * logged ("internal error": a slot or buffer released twice, a completion
 * of nothing posted), and the teardown leaves nothing (dt_env_fini();
 * under ASan: nothing freed twice, nothing leaked).
 */
static void
stream_under_knob(const char *k, const char *what)
{
	struct dt_env env;
	struct chp p;
	int internal = 0;

	memset(&p, 0, sizeof(p));
	evrdma_set_log_callback(qe_log, EVRDMA_LOG_ERROR, &internal);
	ck_assert_int_eq(setenv("EVRDMA_TEST_FAIL_POST_SEND", k, 1), 0);
	dt_env_init(&env, NULL);
	unsetenv("EVRDMA_TEST_FAIL_POST_SEND");
	chp_open(&p, &env, EVRDMA_CHANNEL_STREAM, 1);
	p.srv->drain = 1;
	p.srv->rx_seed = p.cli.tx_seed;
	p.cli.drain = 1;
	p.cli.rx_seed = p.srv->tx_seed;
	p.cli.tx_total = p.srv->tx_total = 1ull << 40;	/* until the end */
	p.cli.pump_hi = p.srv->pump_hi = 1 * MiB;
	p.cli.pump_in_wcb = p.srv->pump_in_wcb = 1;
	ep_pump(&p.cli);
	ep_pump(p.srv);
	CH_WAIT(env.eb, p.cli.ends && p.srv->ends, 20000);
	ch_loop_for(env.eb, 300);
	fprintf(stderr, "%s %s: client 0x%x (%s) after %llu bytes, server "
	    "0x%x (%s) after %llu\n", what, k, p.cli.what,
	    evrdma_reason_str(p.cli.reason), (unsigned long long)p.cli.rx,
	    p.srv->what, evrdma_reason_str(p.srv->reason),
	    (unsigned long long)p.srv->rx);
	ck_assert_int_eq(p.cli.ends, 1);
	ck_assert_int_eq(p.srv->ends, 1);
	ck_assert_int_ge(p.cli.error + p.srv->error, 1);
	ck_assert_int_eq(p.cli.reads_after_end + p.srv->reads_after_end, 0);
	chp_close(&p);
	ch_drain(&env, 20000);
	dt_env_fini(&env);
	ck_assert_int_eq(internal, 0);
	evrdma_set_log_callback(NULL, 0, NULL);
}

/*
 * The base's k-th post of sends is refused, as a provider with a full
 * queue refuses it (the test knob EVRDMA_TEST_FAIL_POST_SEND: no other
 * way makes the device refuse a post that fits the queue). k = 1..8 hits
 * the first DATA passes and credit returns of a stream in both
 * directions; variants 9..16 refuse the (k - 8)-th and every later post
 * too, so the failure's own sends (the reset, the drain) are
 * refused as well. The refused requests complete once with the error,
 * the connection fails, both channels end exactly once (one with ERROR),
 * no byte arrives that was not sent, and every request completes: nothing
 * left at teardown (stream_under_knob()).
 */
START_TEST(channel_post_refused)
{
	char k[16];

	snprintf(k, sizeof(k), _i > 8 ? "%d+" : "%d", _i > 8 ? _i - 8 : _i);
	stream_under_knob(k, "post refused:");
}
END_TEST

/* ==== a QP that fails mid-burst ==== */

/*
 * The base's k-th post of sends goes, and then its QP is moved to the
 * error state (the test knob EVRDMA_TEST_FAIL_POST_SEND=k!), as a
 * device's fault does: with both rings' sends and receives outstanding,
 * mid-burst, every one of them flushes, and each comes back to its ring
 * once (stream_under_knob()'s checks).
 */
static const unsigned qe_k[] = { 1, 2, 3, 5, 8, 40, 200 };

START_TEST(channel_qp_error)
{
	char k[16];

	snprintf(k, sizeof(k), "%u!", qe_k[_i]);
	stream_under_knob(k, "QP in error after post");
}
END_TEST

Suite *
dt_suite_chan_failure(void)
{
	Suite *s = suite_create("device-chan-failure");
	TCase *tc;

	tc = tcase_create("peer-failure");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, channel_peer_killed);
	tcase_add_loop_test(tc, channel_peer_frees_unsent, 0, 3);
	suite_add_tcase(s, tc);

	tc = tcase_create("linger");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, channel_linger_done);
	tcase_add_test(tc, channel_deferred_teardown);
	suite_add_tcase(s, tc);

	tc = tcase_create("refused");
	tcase_set_timeout(tc, 60);	/* each */
	tcase_add_loop_test(tc, channel_post_refused, 1, 17);
	suite_add_tcase(s, tc);

	tc = tcase_create("qp-error");
	tcase_set_timeout(tc, 60);	/* each */
	tcase_add_loop_test(tc, channel_qp_error, 0,
	    (int)(sizeof(qe_k) / sizeof(qe_k[0])));
	suite_add_tcase(s, tc);
	return s;
}
