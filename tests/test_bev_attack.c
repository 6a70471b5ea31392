/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma tests, review r45: the bufferevent adapter attacked as an
 * application, with libevent's public API on the bufferevent and on its
 * buffers (evbuffer_freeze(), evbuffer_setcb(), an evbuffer callback of
 * the application's own, bufferevent_socket_connect() on an adapter,
 * bufferevent_setcb() with NULLs, a filter unstacked, writes after the
 * end of writing). Each case runs on every backend of bevtest.h; the
 * expectation is what libevent's socket bufferevent does (BT_TCP, and the
 * host's BT_FALLBACK, meet it), unless the case says it is misuse that
 * must fail cleanly. Two findings of the review have no case here: they
 * are libevent's, on every filter bufferevent, and evrdma/bufferevent.h
 * documents them (evbuffer_setcb() on the bufferevent's buffers, then its
 * free: libevent's filter frees its watches twice; and
 * bufferevent_socket_connect() on an adapter, which libevent lets make and
 * connect a socket of its own).
 */
#include "bevtest.h"

#include <signal.h>
#include <sys/socket.h>

#include <event2/thread.h>
#include <unistd.h>

#define AK_WAIT_MS	2000
#define AK_QUIET_MS	(tu_have_rdma_cm() ? 300 : 150)

struct ak {
	struct bt_env env;
	struct bt_listener l;
	struct bufferevent *c, *s;	/* client, accepted server end */
	int c_up;
	char c_buf[256], s_buf[256];
	size_t c_len, s_len;		/* what each read callback took */
	short c_what, s_what;		/* last event */
	int c_events, s_events;
	int freed;			/* the client was freed */
	size_t s_count;			/* bytes ak_count_read() took */
	int cb_after_free;		/* an evbuffer cb ran after it */
};

static void
ak_take(struct bufferevent *bev, char *buf, size_t *len)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n = evbuffer_get_length(in);

	if (*len + n > 255)
		n = 255 - *len;
	evbuffer_remove(in, buf + *len, n);
	*len += n;
	buf[*len] = 0;
	evbuffer_drain(in, evbuffer_get_length(in));
}

static void
ak_c_read(struct bufferevent *bev, void *arg)
{
	struct ak *t = arg;

	ak_take(bev, t->c_buf, &t->c_len);
}

static void
ak_c_event(struct bufferevent *bev, short what, void *arg)
{
	struct ak *t = arg;

	if (what & BEV_EVENT_CONNECTED) {
		t->c_up = 1;
		return;
	}
	t->c_what = what;
	t->c_events++;
}

static void
ak_s_read(struct bufferevent *bev, void *arg)
{
	struct ak *t = arg;

	ak_take(bev, t->s_buf, &t->s_len);
}

static void
ak_s_event(struct bufferevent *bev, short what, void *arg)
{
	struct ak *t = arg;

	t->s_what = what;
	t->s_events++;
}

static void
ak_accept(struct bufferevent *bev, void *arg)
{
	struct ak *t = arg;

	ck_assert_ptr_null(t->s);
	t->s = bev;
	bufferevent_setcb(bev, ak_s_read, NULL, ak_s_event, t);
	bufferevent_enable(bev, EV_READ);
}

/* A connected client (EV_READ on) and its server end; 0 when the backend
 * does not run here. */
static int
ak_open(struct ak *t, int backend, int options, const char *name)
{
	if (!bt_available(backend))
		return 0;
	signal(SIGPIPE, SIG_IGN);
	memset(t, 0, sizeof(*t));
	bt_env_init(&t->env, backend, NULL);
	bt_listen(&t->l, &t->env, ak_accept, t, 0);
	t->c = bt_new(&t->env, options);
	bufferevent_setcb(t->c, ak_c_read, NULL, ak_c_event, t);
	bufferevent_enable(t->c, EV_READ);
	bt_connect(&t->l, t->c, 0);
	BT_WAIT(t->env.eb, t->c_up && t->s, AK_WAIT_MS * 10);
	fprintf(stderr, "%s on %s\n", name, bt_name(backend));
	return 1;
}

static void
ak_close(struct ak *t)
{
	if (t->c && !t->freed)
		bufferevent_free(t->c);
	if (t->s)
		bufferevent_free(t->s);
	bt_listener_free(&t->l);
	bt_env_fini(&t->env);
}

/*
 * evbuffer_freeze(output, 1) by the application. A socket bufferevent's
 * output is frozen at its front already (bufferevent_socket_new(),
 * libevent bufferevent_sock.c:374) and its write callback unfreezes it
 * around each write (:294-296): the freeze changes nothing, both writes
 * arrive, once each. The adapter's output filter cannot remove from a
 * frozen front: evbuffer_remove_buffer() fails (BEV_ERROR, nothing moves:
 * a hang over TCP) and ad_direct() on a channel sends the bytes, then
 * fails to drain them (evbuffer_drain() on a frozen front), so the next
 * write sends them again.
 */
START_TEST(ak_freeze_output)
{
	struct ak t;

	if (!ak_open(&t, _i, 0, __func__))
		return;
	ck_assert_int_eq(evbuffer_freeze(bufferevent_get_output(t.c), 1), 0);
	ck_assert_int_eq(bufferevent_write(t.c, "abc", 3), 0);
	bt_loop_for(t.env.eb, 30);
	ck_assert_int_eq(bufferevent_write(t.c, "def", 3), 0);
	bt_loop_for(t.env.eb, 30);
	ck_assert_int_eq(bufferevent_write(t.c, "ghi", 3), 0);
	BT_WAIT(t.env.eb, t.s_len >= 9, AK_WAIT_MS);
	bt_loop_for(t.env.eb, AK_QUIET_MS);
	ck_assert_str_eq(t.s_buf, "abcdefghi");
	ak_close(&t);
}
END_TEST

/*
 * evbuffer_freeze(input, 0) by the application. A socket bufferevent's
 * input is frozen at its end already (bufferevent_sock.c:373) and its read
 * callback unfreezes it around each read (:189-191): the bytes arrive and
 * the read callback runs. The adapter's evrdma__ad_take() fails to add to
 * a frozen end and stops: the bytes wait in the transport for ever.
 */
START_TEST(ak_freeze_input)
{
	struct ak t;

	if (!ak_open(&t, _i, 0, __func__))
		return;
	ck_assert_int_eq(evbuffer_freeze(bufferevent_get_input(t.c), 0), 0);
	ck_assert_int_eq(bufferevent_write(t.s, "hello", 5), 0);
	BT_WAIT(t.env.eb, t.c_len >= 5, AK_WAIT_MS);
	ck_assert_str_eq(t.c_buf, "hello");
	ak_close(&t);
}
END_TEST


static void
ak_out_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct ak *t = arg;

	if (t->freed)
		t->cb_after_free++;
}

/*
 * An evbuffer callback of the application's own on the bufferevent's
 * output, then two quick writes and bufferevent_free(). After the free the
 * application owes the bufferevent nothing, and may free what its
 * callbacks' argument points to: a socket bufferevent never calls them
 * again (its finalizer frees the output without callbacks). The adapter's
 * ad_user_freed() (the filter's free_context, run by the finalizer from
 * the loop) moves the burst it gathered out of output with
 * evbuffer_remove_buffer(), which runs the application's callback after
 * its free.
 */
START_TEST(ak_outcb_after_free)
{
	struct ak t;
	char data[100];

	if (!ak_open(&t, _i, 0, __func__))
		return;
	memset(data, 'x', sizeof(data));
	ck_assert_ptr_nonnull(evbuffer_add_cb(bufferevent_get_output(t.c),
	    ak_out_cb, &t));
	ck_assert_int_eq(bufferevent_write(t.c, data, sizeof(data)), 0);
	ck_assert_int_eq(bufferevent_write(t.c, data, sizeof(data)), 0);
	ck_assert_int_eq(bufferevent_write(t.c, data, sizeof(data)), 0);
	bufferevent_free(t.c);
	t.freed = 1;
	bt_loop_for(t.env.eb, AK_QUIET_MS);
	ck_assert_int_eq(t.cb_after_free, 0);
	ak_close(&t);
}
END_TEST

/*
 * Writing after our end of writing was shut down (an adapter:
 * bufferevent_flush(BEV_FINISHED), as evrdma/bufferevent.h says; a socket:
 * shutdown(fd, SHUT_WR)). A socket's write fails with EPIPE: the event
 * callback hears BEV_EVENT_ERROR|BEV_EVENT_WRITING. The adapter's output
 * filter returns at once when ad->shut (bev_io.c): the bytes stay in
 * output for ever and nothing is reported.
 */
START_TEST(ak_write_after_shutdown)
{
	struct ak t;

	if (!ak_open(&t, _i, 0, __func__))
		return;
	ck_assert_int_eq(bt_shutdown(t.c), 0);
	BT_WAIT(t.env.eb, t.s_events > 0, AK_WAIT_MS);
	ck_assert_int_eq(t.s_what, BEV_EVENT_EOF | BEV_EVENT_READING);
	ck_assert_int_eq(bufferevent_write(t.c, "late", 4), 0);
	BT_WAIT(t.env.eb, t.c_events > 0, AK_WAIT_MS);
	ck_assert_int_eq(t.c_what, BEV_EVENT_ERROR | BEV_EVENT_WRITING);
	ck_assert_uint_eq(t.s_len, 0);
	ak_close(&t);
}
END_TEST


/*
 * bufferevent_setcb(bev, NULL, NULL, NULL, NULL) while reading is on (a
 * bufferevent handed from one module to another), bytes arrive, then the
 * new owner sets its callbacks and looks at input. A socket bufferevent
 * reads whatever its callbacks: the bytes are in input. The adapter takes
 * "no callback at all" for a free by the user (evrdma__ad_deliver(),
 * evrdma__lev_no_callbacks()) and leaves them in the transport; nothing
 * brings them in later but a new arrival: input stays empty for ever.
 */
START_TEST(ak_nullcb_then_setcb)
{
	struct ak t;

	if (!ak_open(&t, _i, 0, __func__))
		return;
	bufferevent_setcb(t.c, NULL, NULL, NULL, NULL);
	ck_assert_int_eq(bufferevent_write(t.s, "request", 7), 0);
	bt_loop_for(t.env.eb, AK_QUIET_MS);
	bufferevent_setcb(t.c, ak_c_read, NULL, ak_c_event, &t);
	BT_WAIT(t.env.eb, evbuffer_get_length(bufferevent_get_input(t.c)) +
	    t.c_len >= 7, AK_WAIT_MS);
	ak_close(&t);
}
END_TEST

/*
 * A filter stacked on the bufferevent without BEV_OPT_CLOSE_ON_FREE, then
 * freed to go on in clear (the reason libevent makes CLOSE_ON_FREE
 * optional): be_filter_unlink() clears the callbacks of the bufferevent
 * under it (bufferevent_filter.c:248-250), so the adapter stops reading
 * as in ak_nullcb_then_setcb. A socket reads on; its input has the bytes
 * that came after the filter went.
 */
START_TEST(ak_filter_unstacked)
{
	struct ak t;
	struct bufferevent *f;

	if (!ak_open(&t, _i, 0, __func__))
		return;
	f = bufferevent_filter_new(t.c, NULL, NULL, 0, NULL, NULL);
	ck_assert_ptr_nonnull(f);
	bufferevent_enable(f, EV_READ | EV_WRITE);
	ck_assert_int_eq(bufferevent_write(t.s, "one", 3), 0);
	BT_WAIT(t.env.eb, evbuffer_get_length(bufferevent_get_input(f)) >= 3,
	    AK_WAIT_MS);
	bufferevent_free(f);
	bt_loop_for(t.env.eb, 20);
	ck_assert_int_eq(bufferevent_write(t.s, "two", 3), 0);
	bt_loop_for(t.env.eb, AK_QUIET_MS);
	bufferevent_setcb(t.c, ak_c_read, NULL, ak_c_event, &t);
	bufferevent_enable(t.c, EV_READ);
	BT_WAIT(t.env.eb, evbuffer_get_length(bufferevent_get_input(t.c)) +
	    t.c_len >= 3, AK_WAIT_MS);
	ak_close(&t);
}
END_TEST

/* ==== batch 2: probes that behaved (kept as regression tests) ==== */

static void
ak_free_on_add(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct ak *t = arg;

	if (info->n_added && !t->freed) {
		t->freed = 1;
		bufferevent_free(t->c);
	}
}

/* An evbuffer callback of the application's own on input frees the
 * bufferevent as bytes are added (inside the read path). */
START_TEST(ak_free_in_input_cb)
{
	struct ak t;

	if (!ak_open(&t, _i, 0, __func__))
		return;
	ck_assert_ptr_nonnull(evbuffer_add_cb(bufferevent_get_input(t.c),
	    ak_free_on_add, &t));
	ck_assert_int_eq(bufferevent_write(t.s, "hello", 5), 0);
	BT_WAIT(t.env.eb, t.freed, AK_WAIT_MS);
	BT_WAIT(t.env.eb, t.s_events > 0, AK_WAIT_MS);
	ck_assert_int_eq(t.s_events, 1);
	ak_close(&t);
}
END_TEST

/* The same on output, inside bufferevent_write(): adapters only (a
 * socket bufferevent crashes in libevent: its outbuf callback adds the
 * write event of the freed bufferevent, then bufferevent_disable() on
 * it from the loop). */
START_TEST(ak_free_in_output_cb)
{
	struct ak t;

	if (_i == BT_TCP || (_i == BT_FALLBACK && !tu_have_rdma_cm()))
		return;
	if (!ak_open(&t, _i, 0, __func__))
		return;
	ck_assert_ptr_nonnull(evbuffer_add_cb(bufferevent_get_output(t.c),
	    ak_free_on_add, &t));
	ck_assert_int_eq(bufferevent_write(t.c, "hello", 5), 0);
	ck_assert(t.freed);
	BT_WAIT(t.env.eb, t.s_events > 0, AK_WAIT_MS);
	bt_loop_for(t.env.eb, AK_QUIET_MS);
	ck_assert_int_eq(t.s_events, 1);
	fprintf(stderr, "server got %zu bytes, then 0x%x\n", t.s_len,
	    t.s_what);
	ak_close(&t);
}
END_TEST

/* bufferevent_incref() held across bufferevent_free(), traffic meanwhile,
 * then bufferevent_decref(). */
START_TEST(ak_incref_across_free)
{
	struct ak t;

	if (!ak_open(&t, _i, 0, __func__))
		return;
	bufferevent_incref(t.c);
	ck_assert_int_eq(bufferevent_write(t.c, "abc", 3), 0);
	bufferevent_free(t.c);
	t.freed = 1;
	ck_assert_int_eq(bufferevent_write(t.s, "xyz", 3), 0);
	bt_loop_for(t.env.eb, AK_QUIET_MS);
	ck_assert_uint_eq(t.c_len, 0);		/* no callback after free */
	bufferevent_decref(t.c);
	BT_WAIT(t.env.eb, t.s_events > 0, AK_WAIT_MS);
	ak_close(&t);
}
END_TEST

/* A rate limit that suspends both directions, then the free while
 * suspended; a rate-limit group the same. */
START_TEST(ak_ratelimit_free)
{
	struct ak t;
	struct timeval tick = { 0, 100000 };
	struct ev_token_bucket_cfg *cfg;
	struct bufferevent_rate_limit_group *g;
	static char big[64 * 1024];

	if (!ak_open(&t, _i % BT_N, 0, __func__))
		return;
	cfg = ev_token_bucket_cfg_new(1000, 1000, 1000, 1000, &tick);
	ck_assert_ptr_nonnull(cfg);
	if (_i / BT_N == 0) {
		ck_assert_int_eq(bufferevent_set_rate_limit(t.c, cfg), 0);
		g = NULL;
	} else {
		g = bufferevent_rate_limit_group_new(t.env.eb, cfg);
		ck_assert_ptr_nonnull(g);
		ck_assert_int_eq(bufferevent_add_to_rate_limit_group(t.c, g),
		    0);
		ck_assert_int_eq(bufferevent_add_to_rate_limit_group(t.s, g),
		    0);
	}
	bufferevent_set_max_single_read(t.c, 100);
	bufferevent_set_max_single_write(t.c, 100);
	ck_assert_int_eq(bufferevent_write(t.c, big, sizeof(big)), 0);
	ck_assert_int_eq(bufferevent_write(t.s, big, sizeof(big)), 0);
	bt_loop_for(t.env.eb, 250);
	if (!g) {
		bufferevent_decrement_read_limit(t.c, 5000);
		bufferevent_decrement_write_limit(t.c, 5000);
	}
	bt_loop_for(t.env.eb, 50);
	bufferevent_free(t.c);
	t.freed = 1;
	bt_loop_for(t.env.eb, AK_QUIET_MS);
	if (g) {
		bufferevent_free(t.s);
		t.s = NULL;
		bt_loop_for(t.env.eb, 20);
		bufferevent_rate_limit_group_free(g);
	}
	ak_close(&t);
	ev_token_bucket_cfg_free(cfg);
}
END_TEST

static void
ak_lock_read(struct bufferevent *bev, void *arg)
{
	struct ak *t = arg;

	bufferevent_lock(bev);
	ak_take(bev, t->c_buf, &t->c_len);
	bufferevent_unlock(bev);
	if (t->c_len >= 5 && !t->freed) {
		t->freed = 1;
		bufferevent_write(bev, "bye", 3);
		bufferevent_free(bev);
	}
}

/* BEV_OPT_THREADSAFE (after evthread_use_pthreads()), deferred and
 * unlocked callbacks, bufferevent_lock() in the read callback, which
 * frees. */
START_TEST(ak_threadsafe)
{
	struct ak t;
	int opt = BEV_OPT_THREADSAFE | BEV_OPT_DEFER_CALLBACKS |
	    (_i / BT_N ? BEV_OPT_UNLOCK_CALLBACKS : 0);

	ck_assert_int_eq(evthread_use_pthreads(), 0);
	if (!ak_open(&t, _i % BT_N, opt, __func__))
		return;
	bufferevent_setcb(t.c, ak_lock_read, NULL, ak_c_event, &t);
	bufferevent_lock(t.c);
	ck_assert_int_eq(bufferevent_write(t.c, "hi", 2), 0);
	bufferevent_unlock(t.c);
	ck_assert_int_eq(bufferevent_write(t.s, "hello", 5), 0);
	BT_WAIT(t.env.eb, t.freed, AK_WAIT_MS);
	BT_WAIT(t.env.eb, t.s_events > 0, AK_WAIT_MS);
	ak_close(&t);
}
END_TEST

/* A filter without BEV_OPT_CLOSE_ON_FREE; the bufferevent under it freed
 * first, traffic, then the filter; and two filters with CLOSE_ON_FREE,
 * the top one freed from its read callback. */
static void
ak_f_read_free(struct bufferevent *f, void *arg)
{
	struct ak *t = arg;

	t->c_len += evbuffer_get_length(bufferevent_get_input(f));
	bufferevent_write(f, "bye", 3);
	bufferevent_free(f);
	t->freed = 1;
}

START_TEST(ak_filter_orders)
{
	struct ak t;
	struct bufferevent *f, *f2;

	if (!ak_open(&t, _i % BT_N, 0, __func__))
		return;
	if (_i / BT_N == 0) {
		f = bufferevent_filter_new(t.c, NULL, NULL, 0, NULL, NULL);
		ck_assert_ptr_nonnull(f);
		bufferevent_enable(f, EV_READ | EV_WRITE);
		bufferevent_free(t.c);
		t.freed = 1;
		ck_assert_int_eq(bufferevent_write(t.s, "abc", 3), 0);
		ck_assert_int_eq(bufferevent_write(f, "def", 3), 0);
		bt_loop_for(t.env.eb, AK_QUIET_MS);
		bufferevent_free(f);
	} else {
		f = bufferevent_filter_new(t.c, NULL, NULL,
		    BEV_OPT_CLOSE_ON_FREE, NULL, NULL);
		f2 = bufferevent_filter_new(f, NULL, NULL,
		    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS, NULL,
		    NULL);
		ck_assert_ptr_nonnull(f2);
		bufferevent_setcb(f2, ak_f_read_free, NULL, NULL, &t);
		bufferevent_enable(f2, EV_READ | EV_WRITE);
		ck_assert_int_eq(bufferevent_write(t.s, "abc", 3), 0);
		BT_WAIT(t.env.eb, t.freed, AK_WAIT_MS);
	}
	BT_WAIT(t.env.eb, t.s_events > 0, AK_WAIT_MS);
	bt_loop_for(t.env.eb, AK_QUIET_MS);
	fprintf(stderr, "server got \"%s\", then 0x%x\n", t.s_buf, t.s_what);
	ak_close(&t);
}
END_TEST


static int ak_cleanups;

static void
ak_cleanup(const void *data, size_t len, void *arg)
{
	ak_cleanups++;
}

/* evbuffer_add_reference() with a cleanup, evbuffer_add_buffer_reference()
 * and evbuffer_add_file() into output, then the free at once: every
 * cleanup runs once, and what arrives is byte-exact and no more than was
 * written. */
START_TEST(ak_references)
{
	struct ak t;
	static char ref[3000], tmpl[] = "/tmp/ak-fileXXXXXX";
	char path[sizeof(tmpl)];
	struct evbuffer *src;
	int fd;

	if (!ak_open(&t, _i, 0, __func__))
		return;
	ak_cleanups = 0;
	memset(ref, 'r', sizeof(ref));
	memcpy(path, tmpl, sizeof(tmpl));
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(write(fd, "file", 4), 4);
	ck_assert_int_eq(evbuffer_add_reference(bufferevent_get_output(t.c),
	    ref, sizeof(ref), ak_cleanup, NULL), 0);
	src = evbuffer_new();
	evbuffer_add(src, "buf", 3);
	ck_assert_int_eq(evbuffer_add_buffer_reference(
	    bufferevent_get_output(t.c), src), 0);
	ck_assert_int_eq(evbuffer_add_file(bufferevent_get_output(t.c), fd,
	    0, 4), 0);
	bt_loop_for(t.env.eb, AK_QUIET_MS);
	ck_assert_int_eq(bufferevent_write(t.c, "end", 3), 0);
	bufferevent_free(t.c);
	t.freed = 1;
	evbuffer_free(src);
	BT_WAIT(t.env.eb, t.s_events > 0, AK_WAIT_MS);
	bt_loop_for(t.env.eb, AK_QUIET_MS);
	ck_assert_int_eq(ak_cleanups, 1);
	fprintf(stderr, "server got %zu bytes, then 0x%x\n", t.s_len,
	    t.s_what);
	ak_close(&t);
}
END_TEST

/* bufferevent_flush() in each mode on EV_READ while reading is off and
 * bytes wait, then reading on: they arrive once; bufferevent_setfd() and
 * _getfd(), bufferevent_trigger_event(). */
START_TEST(ak_flush_misc)
{
	struct ak t;

	if (!ak_open(&t, _i, 0, __func__))
		return;
	bufferevent_disable(t.c, EV_READ);
	ck_assert_int_eq(bufferevent_write(t.s, "abcdef", 6), 0);
	bt_loop_for(t.env.eb, AK_QUIET_MS);
	bufferevent_flush(t.c, EV_READ, BEV_NORMAL);
	bufferevent_flush(t.c, EV_READ, BEV_FLUSH);
	bufferevent_flush(t.c, EV_READ | EV_WRITE, BEV_FLUSH);
	bufferevent_flush(t.c, EV_READ, BEV_FINISHED);
	bt_loop_for(t.env.eb, AK_QUIET_MS);
	ck_assert_uint_eq(t.c_len, 0);
	bufferevent_enable(t.c, EV_READ);
	BT_WAIT(t.env.eb, t.c_len >= 6, AK_WAIT_MS);
	bt_loop_for(t.env.eb, AK_QUIET_MS);
	ck_assert_str_eq(t.c_buf, "abcdef");
	bufferevent_trigger_event(t.c, BEV_EVENT_EOF | BEV_EVENT_READING, 0);
	ck_assert_int_eq(t.c_events, 1);
	if (bt_is_adapter(t.c)) {
		ck_assert_int_eq(bufferevent_getfd(t.c), -1);
		ck_assert_int_eq(bufferevent_setfd(t.c, 0), -1);
		ck_assert_int_eq(bufferevent_getfd(t.c), -1);
	}
	ck_assert_int_eq(bufferevent_write(t.s, "gh", 2), 0);
	BT_WAIT(t.env.eb, t.c_len >= 8, AK_WAIT_MS);
	ck_assert_str_eq(t.c_buf, "abcdefgh");
	ak_close(&t);
}
END_TEST

/* ==== a producer in an output callback; a free with DEFER_CALLBACKS ==== */

#define AK_PROD_TOTAL	(1024 * 1024)
#define AK_PROD_CHUNK	1000

struct ak_prod {
	struct ak *t;
	size_t made, got, bad;
};

static void
ak_prod_fill(struct evbuffer *out, struct ak_prod *p)
{
	uint8_t chunk[AK_PROD_CHUNK];
	size_t i, n = AK_PROD_TOTAL - p->made;

	if (n > sizeof(chunk))
		n = sizeof(chunk);
	for (i = 0; i < n; i++)
		chunk[i] = (uint8_t)((p->made + i) % 251);
	p->made += n;
	evbuffer_add(out, chunk, n);
}

/* output drained: add the next chunk from inside the callback */
static void
ak_prod_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct ak_prod *p = arg;

	if (info->n_deleted && p->made < AK_PROD_TOTAL &&
	    evbuffer_get_length(buf) < 4 * AK_PROD_CHUNK)
		ak_prod_fill(buf, p);
}

static void
ak_prod_read(struct bufferevent *bev, void *arg)
{
	struct ak_prod *p = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t buf[4096];
	int n, i;

	while ((n = evbuffer_remove(in, buf, sizeof(buf))) > 0) {
		for (i = 0; i < n; i++)
			if (buf[i] != (uint8_t)((p->got + (size_t)i) % 251))
				p->bad++;
		p->got += (size_t)n;
	}
}

/*
 * The application produces from an evbuffer callback on output: each
 * time bytes leave it, it adds the next chunk, inside the adapter's move
 * (the output filter runs again within itself). 1 MiB arrives, in order,
 * once.
 */
START_TEST(ak_producer_in_output_cb)
{
	struct ak t;
	struct ak_prod p;

	if (!ak_open(&t, _i, 0, __func__))
		return;
	memset(&p, 0, sizeof(p));
	p.t = &t;
	bufferevent_setcb(t.s, ak_prod_read, NULL, ak_s_event, &p);
	ck_assert_ptr_nonnull(evbuffer_add_cb(bufferevent_get_output(t.c),
	    ak_prod_cb, &p));
	ak_prod_fill(bufferevent_get_output(t.c), &p);
	BT_WAIT(t.env.eb, p.got >= AK_PROD_TOTAL, AK_WAIT_MS * 3);
	bt_loop_for(t.env.eb, AK_QUIET_MS);
	ck_assert_uint_eq(p.got, AK_PROD_TOTAL);
	ck_assert_uint_eq(p.bad, 0);
	bufferevent_setcb(t.s, ak_s_read, NULL, ak_s_event, &t);
	ak_close(&t);
}
END_TEST

static void
ak_read_free_pending(struct bufferevent *bev, void *arg)
{
	struct ak *t = arg;
	static char big[100 * 1000];

	if (t->freed)
		return;
	bufferevent_write(bev, big, sizeof(big));
	t->freed = 1;
	bufferevent_free(bev);
}

/*
 * With BEV_OPT_DEFER_CALLBACKS (and without), the read callback writes
 * 100 kB and frees with input unread behind it: the other end hears one
 * end, and no callback of the freed one runs.
 */
START_TEST(ak_defer_free_pending)
{
	struct ak t;
	static char big[200 * 1000];

	if (!ak_open(&t, _i % BT_N, _i / BT_N ? BEV_OPT_DEFER_CALLBACKS : 0,
	    __func__))
		return;
	bufferevent_setcb(t.c, ak_read_free_pending, NULL, ak_c_event, &t);
	bufferevent_setcb(t.s, NULL, NULL, ak_s_event, &t);
	ck_assert_int_eq(bufferevent_write(t.s, big, sizeof(big)), 0);
	BT_WAIT(t.env.eb, t.freed, AK_WAIT_MS);
	BT_WAIT(t.env.eb, t.s_events > 0, AK_WAIT_MS);
	bt_loop_for(t.env.eb, AK_QUIET_MS);
	fprintf(stderr, "server: %d ends, the last 0x%x\n", t.s_events,
	    t.s_what);
	ck_assert_int_eq(t.c_events, 0);
	ak_close(&t);
}
END_TEST

static void
ak_count_read(struct bufferevent *bev, void *arg)
{
	struct ak *t = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	t->s_count += evbuffer_get_length(in);
	evbuffer_drain(in, evbuffer_get_length(in));
}

/* 8 MiB in one write, the end of writing at once after it (a socket's
 * shutdown() once output drained), then a write after the peer's EOF
 * (half-close: ours still goes): the peer reads exactly 8 MiB, then
 * EOF; our end reads the peer's bytes after its EOF was sent. */
START_TEST(ak_big_finished)
{
	struct ak t;
	char *big;
	size_t n = 8 * MiB;

	if (!ak_open(&t, _i, 0, __func__))
		return;
	big = calloc(1, n);
	ck_assert_ptr_nonnull(big);
	bufferevent_setcb(t.s, ak_count_read, NULL, ak_s_event, &t);
	ck_assert_int_eq(bufferevent_write(t.c, big, n), 0);
	free(big);
	BT_WAIT(t.env.eb, bt_shutdown(t.c) == 0, AK_WAIT_MS * 5);
	BT_WAIT(t.env.eb, t.s_events > 0, AK_WAIT_MS * 5);
	ck_assert_uint_eq(t.s_count, n);
	ck_assert_int_eq(t.s_what, BEV_EVENT_EOF | BEV_EVENT_READING);
	ck_assert_int_eq(bufferevent_write(t.s, "after", 5), 0);
	BT_WAIT(t.env.eb, t.c_len >= 5, AK_WAIT_MS);
	ck_assert_str_eq(t.c_buf, "after");
	bt_loop_for(t.env.eb, AK_QUIET_MS);
	ck_assert_int_eq(t.c_events, 0);
	bufferevent_setcb(t.s, ak_s_read, NULL, ak_s_event, &t);
	ak_close(&t);
}
END_TEST

Suite *
bt_suite_attack(void)
{
	Suite *s = suite_create(tu_have_rdma_cm() ? "device-bev-attack" :
	    "bev-attack");
	TCase *tc;

	tc = tcase_create("r45-freeze");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, ak_freeze_output, 0, BT_N);
	tcase_add_loop_test(tc, ak_freeze_input, 0, BT_N);
	suite_add_tcase(s, tc);
	tc = tcase_create("r45-outcb");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, ak_outcb_after_free, 0, BT_N);
	suite_add_tcase(s, tc);
	tc = tcase_create("r45-end");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, ak_write_after_shutdown, 0, BT_N);
	suite_add_tcase(s, tc);
	tc = tcase_create("r45-handoff");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, ak_nullcb_then_setcb, 0, BT_N);
	tcase_add_loop_test(tc, ak_filter_unstacked, 0, BT_N);
	suite_add_tcase(s, tc);
	tc = tcase_create("r45-probes");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, ak_free_in_input_cb, 0, BT_N);
	tcase_add_loop_test(tc, ak_free_in_output_cb, 0, BT_N);
	tcase_add_loop_test(tc, ak_incref_across_free, 0, BT_N);
	tcase_add_loop_test(tc, ak_ratelimit_free, 0, 2 * BT_N);
	tcase_add_loop_test(tc, ak_threadsafe, 0, 2 * BT_N);
	tcase_add_loop_test(tc, ak_filter_orders, 0, 2 * BT_N);
	tcase_add_loop_test(tc, ak_references, 0, BT_N);
	tcase_add_loop_test(tc, ak_flush_misc, 0, BT_N);
	tcase_add_loop_test(tc, ak_producer_in_output_cb, 0, BT_N);
	tcase_add_loop_test(tc, ak_big_finished, 0, BT_N);
	tcase_add_loop_test(tc, ak_defer_free_pending, 0, 2 * BT_N);
	suite_add_tcase(s, tc);
	return s;
}
