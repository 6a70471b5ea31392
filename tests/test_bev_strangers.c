/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma tests, review r47: a stranger against evrdma's bufferevents, on
 * every backend of bevtest.h where evrdma does the work (an adapter over
 * RDMA in the guest, over TCP on the host; a plain socket's linger is its
 * kernel's). A slow reader keeps a freed server bufferevent lingering, and
 * several do at once: each is bounded (evrdma_config_set_linger()). And
 * the TCP fallback's listener under a crowd of idle connections still
 * serves a newcomer.
 */
#include "bevtest.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#define BS_BOUND_MS	3000
#define BS_TEARDOWN_MS	1000
#define BS_FILL		(16 * MiB)	/* beyond any socket's buffers */
#define BS_TAKE		(16 * KiB)	/* what the reader takes at a time */

struct bs {
	struct bt_env env;
	struct bt_listener l;
	int fd[3];		/* BT_ADAPTER: the reader is a bare socket */
	struct evrdma_base *cbase;	/* BT_RDMA: the reader's base */
	struct bufferevent *srv[3];
	int nsrv, srv_freed[3];
	uint64_t freed_ms[3];
	struct bufferevent *cli[3];
	int c_up[3], c_ends[3], c_error[3], c_eof[3];
	uint64_t c_end_ms[3];
	size_t c_rx[3];
};

/* The server: the first byte makes it write BS_FILL bytes; at the
 * client's EOF it frees its bufferevent, its output still full. */
static void
bs_s_read(struct bufferevent *bev, void *arg)
{
	static uint8_t chunk[64 * KiB];
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n;

	evbuffer_drain(in, evbuffer_get_length(in));
	for (n = 0; n < BS_FILL; n += sizeof(chunk))
		ck_assert_int_eq(bufferevent_write(bev, chunk, sizeof(chunk)),
		    0);
}

static void
bs_s_event(struct bufferevent *bev, short what, void *arg)
{
	struct bs *t = arg;
	int i;

	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
		return;
	for (i = 0; i < t->nsrv; i++)
		if (t->srv[i] == bev) {
			t->srv_freed[i] = 1;
			t->freed_ms[i] = tu_now_ms();
			t->srv[i] = NULL;
		}
	bufferevent_free(bev);
}

static void
bs_accept(struct bufferevent *bev, void *arg)
{
	struct bs *t = arg;

	ck_assert_int_lt(t->nsrv, 3);
	t->srv[t->nsrv++] = bev;
	bufferevent_setcb(bev, bs_s_read, NULL, bs_s_event, t);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
}

static int
bs_idx(struct bs *t, struct bufferevent *bev)
{
	int i;

	for (i = 0; i < 3; i++)
		if (t->cli[i] == bev)
			return i;
	ck_abort_msg("not a client");
	return -1;
}

/* The reader takes what one enabled read brings, then stops again. */
static void
bs_c_read(struct bufferevent *bev, void *arg)
{
	struct bs *t = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	int i = bs_idx(t, bev);
	size_t n = evbuffer_get_length(in);

	if (n > BS_TAKE)
		n = BS_TAKE;
	t->c_rx[i] += n;
	evbuffer_drain(in, n);
	bufferevent_disable(bev, EV_READ);
}

static void
bs_c_event(struct bufferevent *bev, short what, void *arg)
{
	struct bs *t = arg;
	int i = bs_idx(t, bev);

	if (what & BEV_EVENT_CONNECTED) {
		t->c_up[i] = 1;
		return;
	}
	if (what & BEV_EVENT_EOF)
		t->c_eof[i]++;
	if (what & BEV_EVENT_ERROR)
		t->c_error[i]++;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		t->c_ends[i]++;
		t->c_end_ms[i] = tu_now_ms();
	}
}

/* Whether evrdma lingers for the server's bufferevents of @p backend
 * (an adapter: over RDMA, or the host's over TCP), else the kernel. */
static int
bs_evrdma_lingers(int backend)
{
	return bt_available(backend) && (backend == BT_RDMA ||
	    backend == BT_ADAPTER);
}

static void
bs_init(struct bs *t, int backend, unsigned teardown, unsigned bound,
    unsigned cap)
{
	struct evrdma_config *cfg = evrdma_config_new();

	ck_assert_ptr_nonnull(cfg);
	signal(SIGPIPE, SIG_IGN);	/* (a write to a reset socket) */
	ck_assert_int_eq(evrdma_config_set_timeout(cfg,
	    EVRDMA_TIMEOUT_TEARDOWN, teardown), 0);
	ck_assert_int_eq(evrdma_config_set_linger(cfg, bound, cap), 0);
	memset(t, 0, sizeof(*t));
	bt_env_init(&t->env, backend, cfg);
	evrdma_config_free(cfg);
	bt_listen(&t->l, &t->env, bs_accept, t, 0);
	if (backend == BT_RDMA) {
		/* a reader that holds what it did not take: a small ring,
		 * nothing copied into its channel's input */
		cfg = evrdma_config_new();
		ck_assert_ptr_nonnull(cfg);
		ck_assert_int_eq(evrdma_config_set_channel_ring(cfg, 8, 4096,
		    0), 0);
		t->cbase = evrdma_base_new(t->env.eb, cfg);
		evrdma_config_free(cfg);
		ck_assert_ptr_nonnull(t->cbase);
	}
}

/*
 * Client @p i: connects, sends a byte, ends its sending; reads nothing
 * until bs_take(). Over TCP a bare socket with a small receive buffer, so
 * that the kernels do not take the server's output off its hands (an
 * adapter's socket reads into its transport whatever the application
 * does); over RDMA an RDMA bufferevent, whose channel holds what it did
 * not read.
 */
static void
bs_client(struct bs *t, int i)
{
	if (t->env.backend == BT_ADAPTER) {
		int v = 4096;

		t->fd[i] = socket(AF_INET, SOCK_STREAM, 0);
		ck_assert_int_ge(t->fd[i], 0);
		ck_assert_int_eq(setsockopt(t->fd[i], SOL_SOCKET, SO_RCVBUF,
		    &v, sizeof(v)), 0);
		ck_assert_int_eq(connect(t->fd[i],
		    (struct sockaddr *)&t->l.ss, (socklen_t)t->l.sslen), 0);
		ck_assert_int_eq(evutil_make_socket_nonblocking(t->fd[i]),
		    0);
		t->c_up[i] = 1;
		ck_assert_int_eq(write(t->fd[i], "x", 1), 1);
		ck_assert_int_eq(shutdown(t->fd[i], SHUT_WR), 0);
		BT_WAIT(t->env.eb, t->srv_freed[i], 15000);
		return;
	}
	t->cli[i] = evrdma_bufferevent_new(t->cbase, 0);
	ck_assert_ptr_nonnull(t->cli[i]);
	bufferevent_setcb(t->cli[i], bs_c_read, NULL, bs_c_event, t);
	/* (the adapter moves nothing past it into the bufferevent) */
	bufferevent_setwatermark(t->cli[i], EV_READ, 0, BS_TAKE);
	bt_connect(&t->l, t->cli[i], 0);
	BT_WAIT(t->env.eb, t->c_up[i] || t->c_ends[i], 15000);
	ck_assert_int_eq(t->c_up[i], 1);
	ck_assert_int_eq(bufferevent_write(t->cli[i], "x", 1), 0);
	bt_shutdown(t->cli[i]);
	BT_WAIT(t->env.eb, t->srv_freed[i], 15000);
}

/* Client @p i takes BS_TAKE bytes (a bare socket: sees its end). */
static void
bs_take(struct bs *t, int i)
{
	static uint8_t buf[BS_TAKE];
	ssize_t n;

	if (!t->fd[i]) {
		bufferevent_enable(t->cli[i], EV_READ);
		return;
	}
	if (t->c_ends[i])
		return;
	n = recv(t->fd[i], buf, sizeof(buf), 0);
	if (n > 0) {
		t->c_rx[i] += (size_t)n;
		return;
	}
	if (n < 0 && errno == EAGAIN)
		return;
	if (n == 0)
		t->c_eof[i]++;
	else
		t->c_error[i]++;
	t->c_ends[i]++;
	t->c_end_ms[i] = tu_now_ms();
}

/* Over TCP the reader sees its end only by reading: look often. */
static void
bs_look(struct bs *t, int i)
{
	while (t->fd[i] && !t->c_ends[i]) {
		uint8_t b[65536];
		ssize_t n = recv(t->fd[i], b, sizeof(b), MSG_PEEK);

		if (n > 0 || (n < 0 && errno == EAGAIN))
			return;
		bs_take(t, i);
	}
}

static void
bs_fini(struct bs *t)
{
	int i;

	for (i = 0; i < 3; i++) {
		if (t->cli[i])
			bufferevent_free(t->cli[i]);
		if (t->fd[i])
			close(t->fd[i]);
	}
	if (t->cbase) {
		struct evrdma_stats st;
		uint64_t dl = tu_now_ms() + 20000;

		for (;;) {
			evrdma_base_get_stats(t->cbase, &st, sizeof(st));
			if (!st.bevs && !st.conns && !st.qps)
				break;
			ck_assert_msg(tu_now_ms() < dl, "the reader's base "
			    "keeps %u bufferevents", st.bevs);
			bt_step(t->env.eb, 10);
		}
		evrdma_base_free(t->cbase);
	}
	bt_listener_free(&t->l);
	bt_env_fini(&t->env);
}

/*
 * The server frees its bufferevent with 16 MiB of output; its client
 * takes 16 KiB every 300 ms, progress enough to renew the teardown
 * timeout for minutes. Evrdma's part of the linger ends no later than the
 * bound and a teardown timeout after the free. Over RDMA the bound ends
 * it: the client gets an error (a reset, never EOF after a cut stream).
 * Over TCP the server's kernel may take the rest off its hands before
 * that (autotuned socket buffers), and sends it as a closed socket's
 * kernel does; a reset by the bound still reaches the client as one.
 */
START_TEST(bs_linger_bound)
{
	struct bs t;
	struct evrdma_stats st;
	uint64_t next, gone = 0;

	if (!bs_evrdma_lingers(_i))
		return;
	bs_init(&t, _i, BS_TEARDOWN_MS, BS_BOUND_MS, 1024);
	bs_client(&t, 0);
	evrdma_base_get_stats(t.env.base, &st, sizeof(st));
	ck_assert_uint_le(st.lingering, 1);
	next = t.freed_ms[0];
	while (!t.c_ends[0] && tu_now_ms() - t.freed_ms[0] < 30000) {
		if (tu_now_ms() >= next) {
			bs_take(&t, 0);
			next += 300;
		}
		bs_look(&t, 0);
		bt_step(t.env.eb, 20);
		evrdma_base_get_stats(t.env.base, &st, sizeof(st));
		if (!st.lingering && !gone)
			gone = tu_now_ms();
		if (gone && st.linger_resets == 0 && _i == BT_ADAPTER)
			break;	/* the kernel's now */
	}
	fprintf(stderr, "%s: linger bound %u ms: the reader took %zu bytes; "
	    "evrdma's linger ended %llu ms after the free (%llu reset); the "
	    "reader's end: error %d, eof %d\n", bt_name(_i), BS_BOUND_MS,
	    t.c_rx[0], (unsigned long long)(gone - t.freed_ms[0]),
	    st.linger_resets, t.c_error[0], t.c_eof[0]);
	ck_assert_uint_ne(gone, 0);
	ck_assert_uint_le(gone - t.freed_ms[0], BS_BOUND_MS + BS_TEARDOWN_MS +
	    1000);
	if (_i == BT_RDMA || st.linger_resets) {
		ck_assert_uint_eq(st.linger_resets, 1);
		ck_assert_int_eq(t.c_ends[0], 1);
		ck_assert_int_eq(t.c_error[0], 1);
	}
	bs_fini(&t);
}
END_TEST

/* The cap: at most 2 linger; the third free resets the oldest at once,
 * the other two go on. */
START_TEST(bs_linger_cap)
{
	struct bs t;
	struct evrdma_stats st;
	int i;

	if (!bs_evrdma_lingers(_i))
		return;
	bs_init(&t, _i, 20000, 60000, 2);
	for (i = 0; i < 3; i++)
		bs_client(&t, i);
	for (i = 0; i < 100 && !t.c_ends[0]; i++) {
		bs_take(&t, 0);
		bt_step(t.env.eb, 20);
	}
	bs_look(&t, 1);
	bs_look(&t, 2);
	evrdma_base_get_stats(t.env.base, &st, sizeof(st));
	fprintf(stderr, "%s: linger cap 2: the oldest ended (error %d), "
	    "%u linger, %llu reset\n", bt_name(_i), t.c_error[0],
	    st.lingering, st.linger_resets);
	ck_assert_int_eq(t.c_error[0], 1);
	ck_assert_int_eq(t.c_ends[1] + t.c_ends[2], 0);
	ck_assert_uint_eq(st.lingering, 2);
	ck_assert_uint_eq(st.linger_resets, 1);
	bs_fini(&t);
}
END_TEST

/* ---- the fallback's listener and a crowd of idle connections ---- */

#define BS_IDLE		200
#define BS_ECHO_MS	2000

struct crowd {
	struct bt_env env;
	struct bt_listener l;
	struct bufferevent *srv[BS_IDLE + 1];
	int n;
	struct bufferevent *cli;
	int up;
	size_t rx;
};

static void
cr_s_read(struct bufferevent *bev, void *arg)
{
	bufferevent_write_buffer(bev, bufferevent_get_input(bev));
}

static void
cr_accept(struct bufferevent *bev, void *arg)
{
	struct crowd *c = arg;

	ck_assert_int_le(c->n, BS_IDLE);
	c->srv[c->n++] = bev;
	bufferevent_setcb(bev, cr_s_read, NULL, NULL, c);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
}

static void
cr_c_read(struct bufferevent *bev, void *arg)
{
	struct crowd *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	c->rx += evbuffer_get_length(in);
	evbuffer_drain(in, evbuffer_get_length(in));
}

static void
cr_c_event(struct bufferevent *bev, short what, void *arg)
{
	struct crowd *c = arg;

	if (what & BEV_EVENT_CONNECTED)
		c->up = 1;
}

/*
 * The TCP fallback's listener (a base without RDMA; the host's
 * backends): one host opens 200 connections and sends nothing on them.
 * A socket's idle connection reserves nothing the listener shares, so a
 * newcomer connects and echoes within BS_ECHO_MS, as over TCP.
 */
START_TEST(bs_fallback_idle_crowd)
{
	struct crowd c;
	int fds[BS_IDLE], i;
	uint64_t t0, took;

	if ((_i != BT_FALLBACK && _i != BT_ADAPTER) || !bt_available(_i) ||
	    tu_have_rdma_cm())
		return;
	memset(&c, 0, sizeof(c));
	bt_env_init(&c.env, _i, NULL);
	bt_listen(&c.l, &c.env, cr_accept, &c, 0);
	for (i = 0; i < BS_IDLE; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		ck_assert_int_ge(fds[i], 0);
		ck_assert_int_eq(evutil_make_socket_nonblocking(fds[i]), 0);
		if (connect(fds[i], (struct sockaddr *)&c.l.ss,
		    (socklen_t)c.l.sslen) < 0)
			ck_assert_int_eq(errno, EINPROGRESS);
		if (i % 16 == 15)
			bt_step(c.env.eb, 10);
	}
	BT_WAIT(c.env.eb, c.n == BS_IDLE, 20000);
	bt_loop_for(c.env.eb, 200);
	t0 = tu_now_ms();
	c.cli = bt_new(&c.env, 0);
	bufferevent_setcb(c.cli, cr_c_read, NULL, cr_c_event, &c);
	bufferevent_enable(c.cli, EV_READ);
	bt_connect(&c.l, c.cli, 0);
	BT_WAIT(c.env.eb, c.up, BS_ECHO_MS);
	ck_assert_int_eq(bufferevent_write(c.cli, "hello", 5), 0);
	BT_WAIT(c.env.eb, c.rx == 5, BS_ECHO_MS);
	took = tu_now_ms() - t0;
	fprintf(stderr, "%s: %d idle connections; a newcomer echoed in %llu "
	    "ms\n", bt_name(_i), BS_IDLE, (unsigned long long)took);
	ck_assert_uint_le(took, BS_ECHO_MS);
	for (i = 0; i < BS_IDLE; i++)
		close(fds[i]);
	bufferevent_free(c.cli);
	bt_loop_for(c.env.eb, 100);
	for (i = 0; i < c.n; i++)
		bufferevent_free(c.srv[i]);
	bt_listener_free(&c.l);
	bt_env_fini(&c.env);
}
END_TEST

Suite *
bt_suite_strangers(void)
{
	Suite *s = suite_create(tu_have_rdma_cm() ? "device-bev-strangers" :
	    "bev-strangers");
	TCase *tc = tcase_create("linger");

	tcase_set_timeout(tc, 90);
	tcase_add_loop_test(tc, bs_linger_bound, 0, BT_N);
	tcase_add_loop_test(tc, bs_linger_cap, 0, BT_N);
	tcase_add_loop_test(tc, bs_fallback_idle_crowd, 0, BT_N);
	suite_add_tcase(s, tc);
	return s;
}
