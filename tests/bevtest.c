/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma tests: the bufferevent fixtures of bevtest.h.
 */
#include "bevtest.h"

#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>

const char *
bt_name(int backend)
{
	static const char *const names[BT_N] = {
		"tcp", "rdma", "fallback", "adapter-over-tcp"
	};

	return backend >= 0 && backend < BT_N ? names[backend] : "?";
}

int
bt_available(int backend)
{
	switch (backend) {
	case BT_TCP:
	case BT_FALLBACK:
		return 1;
	case BT_RDMA:
		return tu_have_rdma_cm();
	case BT_ADAPTER:
		return !tu_have_rdma_cm();
	}
	return 0;
}

static void
bt_break_cb(evutil_socket_t fd, short what, void *arg)
{
	event_base_loopbreak(arg);
}

void
bt_step(struct event_base *eb, int ms)
{
	struct event *t = evtimer_new(eb, bt_break_cb, eb);
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	ck_assert_ptr_nonnull(t);
	evtimer_add(t, &tv);
	event_base_loop(eb, EVLOOP_ONCE);
	event_free(t);
}

void
bt_loop_for(struct event_base *eb, int ms)
{
	uint64_t end = tu_now_ms() + (uint64_t)ms, now;

	while ((now = tu_now_ms()) < end)
		bt_step(eb, end - now < 50 ? (int)(end - now) : 50);
}

void
bt_env_init(struct bt_env *env, int backend, struct evrdma_config *cfg)
{
	struct evrdma_config *c = cfg ? cfg : evrdma_config_new();

	memset(env, 0, sizeof(*env));
	dt_log_init();
	env->backend = backend;
	env->eb = event_base_new();
	ck_assert_ptr_nonnull(env->eb);
	ck_assert_ptr_nonnull(c);
	if (backend == BT_ADAPTER)
		ck_assert_int_eq(setenv("EVRDMA_BEV_ADAPTER", "1", 1), 0);
	else
		unsetenv("EVRDMA_BEV_ADAPTER");
	if (backend != BT_TCP) {
		ck_assert_int_eq(evrdma_config_set_tcp_fallback(c,
		    backend != BT_RDMA), 0);
		env->base = evrdma_base_new(env->eb, c);
		if (!env->base)
			ck_abort_msg("evrdma_base_new: %s (%s)",
			    strerror(errno), evrdma_errmsg());
	}
	if (!cfg)
		evrdma_config_free(c);
}

void
bt_env_fini(struct bt_env *env)
{
	uint64_t dl = tu_now_ms() + 20000;
	struct evrdma_stats st;

	if (env->base) {
		for (;;) {
			evrdma_base_get_stats(env->base, &st);
			if (!st.bevs && !st.conns && !st.cm_ids && !st.qps &&
			    !st.reqs && !st.mrs && !st.listeners)
				break;
			ck_assert_msg(tu_now_ms() < dl, "not gone: bevs %u "
			    "conns %u listeners %u qps %u reqs %u mrs %u",
			    st.bevs, st.conns, st.listeners, st.qps, st.reqs,
			    st.mrs);
			bt_step(env->eb, 10);
		}
		evrdma_base_free(env->base);
	}
	/* sockets closing, finalizers of freed bufferevents */
	bt_loop_for(env->eb, 20);
	event_base_free(env->eb);
	unsetenv("EVRDMA_BEV_ADAPTER");
}

int
bt_is_adapter(struct bufferevent *bev)
{
	return bufferevent_get_underlying(bev) != NULL;
}

int
bt_shutdown(struct bufferevent *bev)
{
	if (bufferevent_getfd(bev) < 0) {
		ck_assert_int_ge(bufferevent_flush(bev, EV_WRITE,
		    BEV_FINISHED), 0);
		return 0;
	}
	if (evbuffer_get_length(bufferevent_get_output(bev)))
		return 1;
	ck_assert_int_eq(shutdown(bufferevent_getfd(bev), SHUT_WR), 0);
	return 0;
}

/* ---- listeners ---- */

static void
bt_tcp_accept(struct evconnlistener *el, evutil_socket_t fd,
    struct sockaddr *sa, int socklen, void *arg)
{
	struct bt_listener *l = arg;
	struct bufferevent *bev;

	bev = bufferevent_socket_new(l->env->eb, fd,
	    l->options | BEV_OPT_CLOSE_ON_FREE);
	ck_assert_ptr_nonnull(bev);
	l->accept(bev, l->arg);
}

static void
bt_evrdma_accept(struct evrdma_listener *lst, struct bufferevent *bev,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct bt_listener *l = arg;

	ck_assert_ptr_eq(lst, l->lst);
	ck_assert_ptr_nonnull(bev);
	ck_assert_ptr_nonnull(peer);
	ck_assert_int_gt(socklen, 0);
	l->accept(bev, l->arg);
}

const char *
bt_listen_addr(int backend)
{
	if (backend == BT_RDMA)
		return dt_addr();
	if (backend == BT_FALLBACK && tu_have_rdma_cm())
		return "0.0.0.0";	/* RDMA and TCP, any address */
	return "127.0.0.1";
}

const char *
bt_connect_addr(int backend)
{
	return backend == BT_RDMA ? dt_addr() : "127.0.0.1";
}

void
bt_listen(struct bt_listener *l, struct bt_env *env, bt_accept_fn fn,
    void *arg, int small_bufs)
{
	struct sockaddr_storage ss;
	int len = dt_sockaddr(&ss, bt_listen_addr(env->backend), 0), port;

	memset(l, 0, sizeof(*l));
	l->env = env;
	l->accept = fn;
	l->arg = arg;
	l->small_bufs = small_bufs;
	if (env->backend == BT_TCP) {
		int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
		struct sockaddr_in sin;
		socklen_t sl = sizeof(sin);

		ck_assert_int_ge(lfd, 0);
		if (small_bufs) {
			int v = 4096;

			ck_assert_int_eq(setsockopt(lfd, SOL_SOCKET,
			    SO_RCVBUF, &v, sizeof(v)), 0);
			ck_assert_int_eq(setsockopt(lfd, SOL_SOCKET,
			    SO_SNDBUF, &v, sizeof(v)), 0);
		}
		ck_assert_int_eq(setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR,
		    &one, sizeof(one)), 0);
		ck_assert_int_eq(bind(lfd, (struct sockaddr *)&ss, len), 0);
		ck_assert_int_eq(listen(lfd, 64), 0);
		ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sin,
		    &sl), 0);
		ck_assert_int_eq(evutil_make_socket_nonblocking(lfd), 0);
		l->tcp = evconnlistener_new(env->eb, bt_tcp_accept, l,
		    LEV_OPT_CLOSE_ON_FREE, -1, lfd);
		ck_assert_ptr_nonnull(l->tcp);
		port = ntohs(sin.sin_port);
	} else {
		l->lst = evrdma_bufferevent_listener_new(env->base,
		    bt_evrdma_accept, l,
		    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 64,
		    (struct sockaddr *)&ss, len);
		if (!l->lst)
			ck_abort_msg("evrdma_bufferevent_listener_new: %s (%s)",
			    strerror(errno), evrdma_errmsg());
		port = evrdma_listener_get_port(l->lst);
	}
	ck_assert_int_gt(port, 0);
	l->sslen = dt_sockaddr(&l->ss, bt_connect_addr(env->backend), port);
}

int
bt_listen_opts(struct bt_listener *l, struct bt_env *env, bt_accept_fn fn,
    void *arg, int flags, int backlog)
{
	struct sockaddr_storage ss, bound;
	socklen_t bl = sizeof(bound);
	int len = dt_sockaddr(&ss, bt_listen_addr(env->backend), 0), port;

	memset(l, 0, sizeof(*l));
	l->env = env;
	l->accept = fn;
	l->arg = arg;
	if (env->backend == BT_TCP) {
		l->tcp = evconnlistener_new_bind(env->eb, bt_tcp_accept, l,
		    flags, backlog, (struct sockaddr *)&ss, len);
		if (!l->tcp)
			return -1;
		ck_assert_int_eq(getsockname(evconnlistener_get_fd(l->tcp),
		    (struct sockaddr *)&bound, &bl), 0);
		port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
	} else {
		l->lst = evrdma_bufferevent_listener_new(env->base,
		    bt_evrdma_accept, l, flags, backlog,
		    (struct sockaddr *)&ss, len);
		if (!l->lst)
			return -1;
		port = evrdma_listener_get_port(l->lst);
	}
	ck_assert_int_gt(port, 0);
	l->sslen = dt_sockaddr(&l->ss, bt_connect_addr(env->backend), port);
	return 0;
}

void
bt_listener_enable(struct bt_listener *l, int on)
{
	if (l->tcp)
		ck_assert_int_eq(on ? evconnlistener_enable(l->tcp) :
		    evconnlistener_disable(l->tcp), 0);
	else
		ck_assert_int_eq(on ? evrdma_listener_enable(l->lst) :
		    evrdma_listener_disable(l->lst), 0);
}

void
bt_listener_free(struct bt_listener *l)
{
	if (l->tcp)
		evconnlistener_free(l->tcp);
	if (l->lst)
		evrdma_listener_free(l->lst);
	l->tcp = NULL;
	l->lst = NULL;
}

void
bt_listener_set_options(struct bt_listener *l, int options)
{
	l->options = options;
	if (l->lst)
		ck_assert_int_eq(evrdma_bufferevent_listener_set_options(
		    l->lst, options | BEV_OPT_CLOSE_ON_FREE), 0);
}

struct bufferevent *
bt_new(struct bt_env *env, int options)
{
	struct bufferevent *bev;

	if (env->backend == BT_TCP)
		bev = bufferevent_socket_new(env->eb, -1,
		    options | BEV_OPT_CLOSE_ON_FREE);
	else
		bev = evrdma_bufferevent_new(env->base, options);
	if (!bev)
		ck_abort_msg("new bufferevent: %s (%s)", strerror(errno),
		    evrdma_errmsg());
	/* as bufferevent_socket_new() makes one */
	ck_assert_int_eq(bufferevent_get_enabled(bev), EV_WRITE);
	return bev;
}

void
bt_connect(struct bt_listener *l, struct bufferevent *bev, int port)
{
	struct sockaddr_storage ss = l->ss;

	if (port)
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
	if (l->env->backend == BT_TCP) {
		evutil_socket_t fd = socket(AF_INET, SOCK_STREAM, 0);

		ck_assert_int_ge(fd, 0);
		if (l->small_bufs) {
			int v = 4096;

			ck_assert_int_eq(setsockopt(fd, SOL_SOCKET,
			    SO_RCVBUF, &v, sizeof(v)), 0);
			ck_assert_int_eq(setsockopt(fd, SOL_SOCKET,
			    SO_SNDBUF, &v, sizeof(v)), 0);
		}
		ck_assert_int_eq(evutil_make_socket_nonblocking(fd), 0);
		ck_assert_int_eq(bufferevent_setfd(bev, fd), 0);
		ck_assert_int_eq(bufferevent_socket_connect(bev,
		    (struct sockaddr *)&ss, l->sslen), 0);
		return;
	}
	if (evrdma_bufferevent_connect(bev, (struct sockaddr *)&ss,
	    l->sslen) < 0)
		ck_abort_msg("evrdma_bufferevent_connect: %s (%s)",
		    strerror(errno), evrdma_errmsg());
}
