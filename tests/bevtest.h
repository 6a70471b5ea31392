/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma tests of the bufferevent adapter (evrdma/bufferevent.h): the
 * backends a test runs on, and fixtures that open connected bufferevents
 * on each. The same test bodies run in test_host (the backends that need
 * no device) and in test_device (in the Soft-RoCE guest). No mutable
 * state outside a test's own structs.
 */
#ifndef EVRDMA_BEVTEST_H_INCLUDED_
#define EVRDMA_BEVTEST_H_INCLUDED_

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <evrdma/bufferevent.h>

#include "devtest.h"

#ifndef KiB
#define KiB (1024u)
#define MiB (1024u * 1024u)
#endif

/* What makes the bufferevents of a test. */
enum bt_backend {
	/* bufferevent_socket and evconnlistener on 127.0.0.1: the reference */
	BT_TCP = 0,
	/* RDMA bufferevents on the test device (guest) */
	BT_RDMA,
	/* evrdma with the TCP fallback. Host: a base without RDMA, whose
	 * bufferevents are plain sockets. Guest: a base with RDMA whose
	 * client cannot route 127.0.0.1 over RDMA and falls back to TCP
	 * under its RDMA bufferevent; the listener (0.0.0.0) accepts it on
	 * TCP, as a plain socket */
	BT_FALLBACK,
	/* host: RDMA bufferevents over TCP on both ends (the adapter with
	 * a socket transport: EVRDMA_BEV_ADAPTER=1 on a base without RDMA) */
	BT_ADAPTER,
	BT_N
};

const char *bt_name(int backend);
/* Whether @p backend runs here: the device ones only with rdma_cm, the
 * host ones only without. */
int bt_available(int backend);

/* Step the loop; see ch_step() in chtest.h (a timer breaks EVLOOP_ONCE,
 * which libevent/libevent#891 may otherwise keep busy). */
void bt_step(struct event_base *eb, int ms);
void bt_loop_for(struct event_base *eb, int ms);

#define BT_WAIT(eb, cond, ms)						\
	do {								\
		uint64_t bt_dl_ = tu_now_ms() + (uint64_t)(ms);		\
		while (!(cond)) {					\
			ck_assert_msg(tu_now_ms() < bt_dl_,		\
			    "timed out after %d ms waiting for %s",	\
			    (int)(ms), #cond);				\
			bt_step((eb), 50);				\
		}							\
	} while (0)

struct bt_env {
	int backend;
	struct event_base *eb;
	struct evrdma_base *base;	/* NULL for BT_TCP */
};

/* @p cfg (may be NULL) gets the fallback the backend needs; the base
 * copies it. */
void bt_env_init(struct bt_env *env, int backend, struct evrdma_config *cfg);
/* Wait until every bufferevent, connection and listener is gone (also
 * those still sending after their free), then free; assert no leak. */
void bt_env_fini(struct bt_env *env);

typedef void (*bt_accept_fn)(struct bufferevent *bev, void *arg);

struct bt_listener {
	struct bt_env *env;
	struct evconnlistener *tcp;
	struct evrdma_listener *lst;
	struct sockaddr_storage ss;	/* where clients connect */
	int sslen;
	bt_accept_fn accept;
	void *arg;
	/* BEV_OPT_* of the accepted bufferevents (bt_listener_set_options) */
	int options;
	/* 4 KiB socket buffers where the test makes the sockets (BT_TCP;
	 * evrdma's own sockets keep the kernel's: shrinking a connected
	 * socket's buffers makes the kernel drop data it advertised room for,
	 * and stall in retransmissions) */
	int small_bufs;
};

/* The address a backend listens on, and the one its clients connect to. */
const char *bt_listen_addr(int backend);
const char *bt_connect_addr(int backend);
/* Listen on the backend's address, port 0. */
void bt_listen(struct bt_listener *l, struct bt_env *env, bt_accept_fn fn,
    void *arg, int small_bufs);
/* The same with libevent's LEV_OPT_* @p flags and @p backlog, for
 * BT_TCP by evconnlistener_new_bind(): 0, or -1 with errno when the
 * listener cannot be made. */
int bt_listen_opts(struct bt_listener *l, struct bt_env *env,
    bt_accept_fn fn, void *arg, int flags, int backlog);
/* evconnlistener_enable()/_disable(), or evrdma_listener_*() */
void bt_listener_enable(struct bt_listener *l, int on);
void bt_listener_free(struct bt_listener *l);
/* The BEV_OPT_* options of the bufferevents @p l hands out from now on
 * (evrdma_bufferevent_listener_set_options(), or what bufferevent_socket
 * gets), BEV_OPT_CLOSE_ON_FREE with them. */
void bt_listener_set_options(struct bt_listener *l, int options);
/* A new bufferevent of the backend (unconnected). */
struct bufferevent *bt_new(struct bt_env *env, int options);
/* Connect @p bev to @p l (or, with @p port nonzero, to that port of the
 * listener's address). */
void bt_connect(struct bt_listener *l, struct bufferevent *bev, int port);
/* Whether @p bev is an RDMA bufferevent (the adapter), whatever carries
 * its bytes: it has an underlying bufferevent, a socket has none. */
int bt_is_adapter(struct bufferevent *bev);
/* Shut down writing after what output holds: an adapter by
 * bufferevent_flush(BEV_FINISHED), a socket by shutdown() once drained
 * (returns 1 when that is still to do, from the write callback). */
int bt_shutdown(struct bufferevent *bev);

/* Test suites. */
Suite *bt_suite_compare(void);		/* test_bev_compare.c */
Suite *bt_suite_compare2(void);		/* (its second part, the guest's) */
Suite *bt_suite_bev(void);		/* test_bev.c */
Suite *bt_suite_attack(void);		/* test_bev_attack.c */
Suite *bt_suite_strangers(void);	/* test_bev_strangers.c */
Suite *bt_suite_lib(void);		/* test_bev_lib.c */

#endif /* EVRDMA_BEVTEST_H_INCLUDED_ */
