/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: lifetimes across objects and threads. The base
 * freed under live connections, listeners, channels and regions; two bases
 * on one device, one per thread, both hearing a port go down; a listener
 * whose device is removed; a resolver whose evdns_base runs on another
 * thread's loop.
 */
#include "devtest.h"
#include "chtest.h"

#include <pthread.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/thread.h>
#include <evrdma/bufferevent.h>
#include <evrdma/channel.h>

/* ==== 1. the base freed under live objects ==== */

struct live {
	int in_base_free;		/* no user callback may run now */
	int ch_connected, ch_ends;
	struct evrdma_channel *srv;	/* accepted */
	struct evrdma_conn *rsrv;	/* accepted raw connection */
	int rcv_done;
};

static void
lv_ch_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct live *l = arg;

	ck_assert_msg(!l->in_base_free, "a callback inside evrdma_base_free");
	if (what & BEV_EVENT_CONNECTED)
		l->ch_connected = 1;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		l->ch_ends++;
}

static void
lv_ch_read(struct evrdma_channel *ch, void *arg)
{
	struct live *l = arg;

	ck_assert_msg(!l->in_base_free, "a callback inside evrdma_base_free");
	/* leave it in input */
}

static void
lv_accept(struct evrdma_listener *lst, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct live *l = arg;

	l->srv = ch;
	evrdma_channel_setcb(ch, lv_ch_read, NULL, lv_ch_event, l);
	evrdma_channel_enable(ch, EV_READ);
}

static void
lv_raw_accept(struct evrdma_listener *lst, struct evrdma_conn *c,
    const struct sockaddr *peer, int socklen, void *arg)
{
	((struct live *)arg)->rsrv = c;
}

static void
lv_conn_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct live *l = arg;

	ck_assert_msg(!l->in_base_free, "a callback inside evrdma_base_free");
	if (what & EVRDMA_EV_CONNECTED)
		l->ch_connected++;
}

static void
lv_recv_cb(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct live *l = arg;

	ck_assert_msg(!l->in_base_free, "a callback inside evrdma_base_free");
	l->rcv_done++;
}

/*
 * Finding 5. A channel pair with data waiting in input and more in flight,
 * a raw pair with receives posted, their listeners and a region, all live:
 * evrdma_base_free() releases every RDMA resource at once and calls no
 * callback of ours; everything we hold stays valid (calls on it fail
 * cleanly, a channel's input still holds what arrived) until we free it,
 * after the base and after the event_base. ASan watches every step.
 */
START_TEST(lifetime_base_free_live)
{
	struct event_base *eb;
	struct evrdma_base *base;
	struct evrdma_listener *clst, *rlst;
	struct evrdma_channel *cli;
	struct evrdma_conn *rcli;
	struct evrdma_mr *mr;
	struct sockaddr_storage ss;
	struct live l;
	static uint8_t buf[64 * 1024], big[256 * 1024];
	struct timeval tv = { 0, 500 };
	size_t in;
	int len, i;

	memset(&l, 0, sizeof(l));
	dt_log_init();
	eb = event_base_new();
	base = evrdma_base_new(eb, NULL);
	ck_assert_ptr_nonnull(base);
	len = dt_sockaddr(&ss, dt_addr(), 0);
	clst = evrdma_channel_listener_new(base, lv_accept, &l,
	    EVRDMA_CHANNEL_STREAM, 4, (struct sockaddr *)&ss, len);
	rlst = evrdma_listener_new(base, lv_raw_accept, &l, 0, 4,
	    (struct sockaddr *)&ss, len);
	ck_assert(clst && rlst);

	/* a channel with 64 KiB waiting in the server's input */
	cli = evrdma_channel_new(base, EVRDMA_CHANNEL_STREAM);
	evrdma_channel_setcb(cli, NULL, NULL, lv_ch_event, &l);
	len = dt_sockaddr(&ss, dt_addr(), evrdma_listener_get_port(clst));
	ck_assert_int_eq(evrdma_channel_connect(cli, (struct sockaddr *)&ss,
	    len), 0);
	CH_WAIT(eb, l.ch_connected && l.srv, 15000);
	pat_fill(buf, 0, sizeof(buf), 0x11fe);
	ck_assert_int_eq(evrdma_channel_write(cli, buf, sizeof(buf)), 0);
	CH_WAIT(eb, evbuffer_get_length(evrdma_channel_get_input(l.srv)) ==
	    sizeof(buf), 15000);
	/* and more on its way, a timeout set, a write queued */
	ck_assert_int_eq(evrdma_channel_write(cli, big, sizeof(big)), 0);
	evrdma_channel_set_timeouts(l.srv, &tv, &tv);

	/* a raw pair, the client with a region and receives posted */
	rcli = evrdma_conn_new(base, 0);
	evrdma_conn_setcb(rcli, lv_conn_event, &l);
	len = dt_sockaddr(&ss, dt_addr(), evrdma_listener_get_port(rlst));
	ck_assert_int_eq(evrdma_conn_connect(rcli, (struct sockaddr *)&ss,
	    len), 0);
	CH_WAIT(eb, l.ch_connected == 2 && l.rsrv, 15000);
	mr = evrdma_mr_reg(rcli, buf, sizeof(buf), EVRDMA_ACCESS_LOCAL_WRITE);
	ck_assert_ptr_nonnull(mr);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(evrdma_conn_post_recv(rcli, mr, 0, 64,
		    lv_recv_cb, &l), 0);

	l.in_base_free = 1;
	evrdma_base_free(base);
	l.in_base_free = 0;
	ck_assert_int_eq(l.rcv_done, 0);

	/* the husks: valid, closed */
	in = evbuffer_get_length(evrdma_channel_get_input(l.srv));
	ck_assert_uint_ge(in, sizeof(buf));
	ck_assert(pat_check(evbuffer_pullup(evrdma_channel_get_input(l.srv),
	    sizeof(buf)), 0, sizeof(buf), 0x11fe) == (size_t)-1);
	errno = 0;
	ck_assert_int_eq(evrdma_channel_flush(cli), -1);
	ck_assert_int_eq(errno, EPIPE);
	ck_assert_ptr_null(evrdma_channel_reserve(cli, 16));
	ck_assert_int_eq(evrdma_channel_enable(l.srv, EV_READ | EV_WRITE), 0);
	ck_assert_int_eq(evrdma_channel_write(l.srv, "x", 1), 0);
	errno = 0;
	ck_assert_int_eq(evrdma_conn_post_recv(rcli, mr, 0, 64, lv_recv_cb,
	    &l), -1);
	ck_assert_int_eq(errno, EPIPE);
	errno = 0;
	ck_assert_int_eq(evrdma_conn_connect(rcli, (struct sockaddr *)&ss,
	    len), -1);
	ck_assert_int_eq(errno, EPIPE);
	ck_assert_ptr_null(evrdma_mr_reg(rcli, buf, 64, 0));

	/* freed after the event_base, as a program's exit path may */
	event_base_free(eb);
	evrdma_channel_free(cli);
	evrdma_channel_free(l.srv);
	evrdma_conn_free(rcli);
	evrdma_conn_free(l.rsrv);
	evrdma_mr_free(mr);
	evrdma_listener_free(clst);
	evrdma_listener_free(rlst);
	dt_assert_no_rdma_resources();
}
END_TEST

static void
bl_never(struct evrdma_listener *l, struct bufferevent *bev,
    const struct sockaddr *peer, int socklen, void *arg)
{
	(void)l; (void)peer; (void)socklen; (void)arg;
	bufferevent_free(bev);
}

/* libevent's frees, counted */
static int lev_frees;

static void
counting_free(void *p)
{
	if (p)
		lev_frees++;
	free(p);
}

/*
 * A bufferevent listener (RDMA only, the default) freed as a husk after
 * event_base_free(), as base.h allows: nothing of it may be libevent's
 * any more (an event freed now would read the freed event_base: libevent
 * takes its lock; ASan does not see libevent's reads). Counted through
 * libevent's memory functions: the husk's free frees nothing of
 * libevent's. (Found by review: its retry timer went with the husk,
 * after the event_base; one libevent free there before the fix.)
 */
START_TEST(lifetime_bev_listener_after_event_base)
{
	struct event_base *eb;
	struct evrdma_base *base;
	struct evrdma_listener *lst;
	struct sockaddr_storage ss;
	int len, frees;

	/* (this test's own process: Check forks each) */
	event_set_mem_functions(malloc, realloc, counting_free);
	dt_log_init();
	eb = event_base_new();
	ck_assert_ptr_nonnull(eb);
	base = evrdma_base_new(eb, NULL);
	ck_assert_ptr_nonnull(base);
	len = dt_sockaddr(&ss, dt_addr(), 0);
	lst = evrdma_bufferevent_listener_new(base, bl_never, NULL, 0, 4,
	    (struct sockaddr *)&ss, len);
	ck_assert_ptr_nonnull(lst);
	evrdma_base_free(base);
	event_base_free(eb);
	frees = lev_frees;
	evrdma_listener_free(lst);
	ck_assert_int_eq(lev_frees, frees);
	dt_assert_no_rdma_resources();
}
END_TEST

/* A stream channel listener on @p env and a client channel connected to
 * it (l->srv the accepted one); the listener's address in @p ss. */
static struct evrdma_listener *
lv_pair(struct dt_env *env, struct live *l, struct evrdma_channel **cli,
    struct sockaddr_storage *ss, int *len)
{
	struct evrdma_listener *clst;

	memset(l, 0, sizeof(*l));
	dt_env_init(env, NULL);
	*len = dt_sockaddr(ss, dt_addr(), 0);
	clst = evrdma_channel_listener_new(env->base, lv_accept, l,
	    EVRDMA_CHANNEL_STREAM, 4, (struct sockaddr *)ss, *len);
	ck_assert_ptr_nonnull(clst);
	*len = dt_sockaddr(ss, dt_addr(), evrdma_listener_get_port(clst));
	*cli = evrdma_channel_new(env->base, EVRDMA_CHANNEL_STREAM);
	evrdma_channel_setcb(*cli, NULL, NULL, lv_ch_event, l);
	ck_assert_int_eq(evrdma_channel_connect(*cli, (struct sockaddr *)ss,
	    *len), 0);
	CH_WAIT(env->eb, l->ch_connected && l->srv, 15000);
	return clst;
}

/* A channel freed by the user (lingering) and a connection closing, when
 * the base goes: finished at once, no callback. */
START_TEST(lifetime_base_free_closing)
{
	struct dt_env env;
	struct evrdma_listener *clst;
	struct evrdma_channel *cli;
	struct sockaddr_storage ss;
	struct live l;
	static uint8_t big[512 * 1024];
	int len;

	clst = lv_pair(&env, &l, &cli, &ss, &len);
	ck_assert_int_eq(evrdma_channel_write(cli, big, sizeof(big)), 0);
	ch_loop_for(env.eb, 20);
	evrdma_channel_free(cli);	/* lingers for its EOF */
	evrdma_channel_free(l.srv);	/* unread input: a reset */
	evrdma_listener_free(clst);
	l.in_base_free = 1;
	evrdma_base_free(env.base);
	event_base_free(env.eb);
	dt_assert_no_rdma_resources();
}
END_TEST

static void
lv_bev_event(struct bufferevent *bev, short what, void *arg)
{
	struct live *l = arg;

	ck_assert_msg(!l->in_base_free, "a callback inside evrdma_base_free");
	if (what & BEV_EVENT_CONNECTED)
		l->ch_connected++;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		l->ch_ends++;
}

/*
 * Connections that already ended when the base goes: a channel the user
 * still holds (its connection closed, so no connection's release reaches
 * it), and a bufferevent the user freed just before (libevent finishes
 * it from the loop, here only in event_base_free()). Neither touches the
 * base after evrdma_base_free(), and no callback runs; ASan watches.
 */
START_TEST(lifetime_base_free_ended)
{
	struct dt_env env;
	struct evrdma_listener *clst;
	struct evrdma_channel *cli, *srv;
	struct bufferevent *bev;
	struct sockaddr_storage ss;
	struct live l;
	int len;

	clst = lv_pair(&env, &l, &cli, &ss, &len);
	evrdma_channel_enable(cli, EV_READ);
	srv = l.srv;
	l.srv = NULL;
	evrdma_channel_free(srv);
	CH_WAIT(env.eb, l.ch_ends == 1, 15000);

	bev = evrdma_bufferevent_new(env.base, 0);
	ck_assert_ptr_nonnull(bev);
	bufferevent_setcb(bev, NULL, NULL, lv_bev_event, &l);
	bufferevent_enable(bev, EV_READ);
	ck_assert_int_eq(evrdma_bufferevent_connect(bev,
	    (struct sockaddr *)&ss, len), 0);
	CH_WAIT(env.eb, l.ch_connected == 2 && l.srv, 15000);
	evrdma_channel_free(l.srv);
	CH_WAIT(env.eb, l.ch_ends == 2, 15000);
	bufferevent_free(bev);
	evrdma_listener_free(clst);
	/* the ended channel asked for a pass, which the loop never runs */
	ck_assert_int_eq(evrdma_channel_enable(cli, EV_READ | EV_WRITE), 0);

	l.in_base_free = 1;
	evrdma_base_free(env.base);
	errno = 0;
	ck_assert_int_eq(evrdma_channel_flush(cli), -1);
	ck_assert_int_eq(errno, EPIPE);
	event_base_free(env.eb);
	evrdma_channel_free(cli);
	dt_assert_no_rdma_resources();
}
END_TEST

/* ==== 2. two bases on one device, one per thread ==== */

struct side {
	struct event_base *eb;
	struct evrdma_base *base;
	struct dt_env env;
	struct dt_pair p;
	pthread_t thread;
	int ready, go, errors;
	int cli_reason, srv_reason;
};

static void *
side_run(void *arg)
{
	struct side *s = arg;
	uint64_t dl;

	s->env.eb = event_base_new();
	s->env.base = evrdma_base_new(s->env.eb, NULL);
	if (!s->env.base)
		return NULL;
	memset(&s->p, 0, sizeof(s->p));
	dt_pair_connect(&s->p, &s->env, dt_addr(), 0);
	__atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
	/* until both ends heard of the port */
	dl = tu_now_ms() + 20000;
	while ((s->p.cli_events < 2 || s->p.srv_events < 1) &&
	    tu_now_ms() < dl)
		tu_loop_for(s->env.eb, 20);
	s->cli_reason = s->p.cli_reason;
	s->srv_reason = s->p.srv_reason;
	return NULL;
}

/*
 * Finding 6: two bases on one device, each on its own thread and
 * event_base, with a connection pair each. The port goes down: both
 * bases' connections hear it (PORT_ERROR), whichever thread's loop read
 * the device's shared async fd.
 */
START_TEST(lifetime_two_bases_port_down)
{
	struct side s[2];
	char cmd[128];
	const char *nd = getenv("EVRDMA_TEST_NETDEV");
	int i;

	ck_assert_msg(nd && *nd, "EVRDMA_TEST_NETDEV not set");
	memset(s, 0, sizeof(s));
	for (i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&s[i].thread, NULL, side_run,
		    &s[i]), 0);
	for (i = 0; i < 2; i++) {
		uint64_t dl = tu_now_ms() + 30000;

		while (!__atomic_load_n(&s[i].ready, __ATOMIC_ACQUIRE)) {
			ck_assert_msg(tu_now_ms() < dl, "side %d never "
			    "connected", i);
			usleep(10000);
		}
	}
	/* the carrier, not the link: see fail_port_down in test_fail.c */
	snprintf(cmd, sizeof(cmd), "ip link set %s carrier off", nd);
	dt_run_cmd(cmd);
	for (i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_join(s[i].thread, NULL), 0);
	for (i = 0; i < 2; i++) {
		fprintf(stderr, "base %d: client %s, server %s\n", i,
		    evrdma_reason_str(s[i].cli_reason),
		    evrdma_reason_str(s[i].srv_reason));
		ck_assert_int_eq(s[i].p.cli_what, EVRDMA_EV_ERROR);
		ck_assert_int_eq(s[i].cli_reason, EVRDMA_REASON_PORT_ERROR);
		ck_assert_int_eq(s[i].srv_reason, EVRDMA_REASON_PORT_ERROR);
	}
	/* the port back before the ids go (see fail_port_down) */
	snprintf(cmd, sizeof(cmd), "ip link set %s carrier on", nd);
	dt_run_cmd(cmd);
	for (i = 0; i < 2; i++) {
		dt_pair_close(&s[i].p);
		dt_env_fini(&s[i].env);
	}
}
END_TEST

/* ==== 3. a listener whose device goes away ==== */

struct lremoval {
	int errors, reason, errno_seen;
	struct evrdma_listener *lst;
};

static void
lr_error(struct evrdma_listener *lst, void *ctx)
{
	struct lremoval *r = ctx;

	r->errno_seen = errno;
	r->errors++;
	r->reason = evrdma_listener_get_error(lst);
	ck_assert_ptr_eq(lst, r->lst);
	evrdma_listener_free(lst);	/* safe from here */
	r->lst = NULL;
}

static void
lr_accept(struct evrdma_listener *lst, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	evrdma_channel_free(ch);
}

START_TEST(lifetime_listener_device_removal)
{
	struct dt_env env;
	struct lremoval r;
	struct sockaddr_storage ss;
	struct evrdma_stats st;
	char cmd[128];
	int len;

	memset(&r, 0, sizeof(r));
	dt_env_init(&env, NULL);
	len = dt_sockaddr(&ss, dt_addr(), 0);
	r.lst = evrdma_channel_listener_new(env.base, lr_accept, &r,
	    EVRDMA_CHANNEL_STREAM, 4, (struct sockaddr *)&ss, len);
	ck_assert_ptr_nonnull(r.lst);
	evrdma_listener_set_error_cb(r.lst, lr_error);
	/* rdma link delete blocks until every user has let go: background */
	snprintf(cmd, sizeof(cmd), "rdma link delete %s &", dt_ibdev());
	dt_run_cmd(cmd);
	CH_WAIT(env.eb, r.errors, 10000);
	ch_loop_for(env.eb, 300);
	ck_assert_int_eq(r.errors, 1);
	ck_assert_int_eq(r.reason, EVRDMA_REASON_DEVICE_REMOVAL);
	ck_assert_int_eq(r.errno_seen, ENODEV);
	ck_assert_ptr_null(r.lst);
	evrdma_base_get_stats(env.base, &st, sizeof(st));
	ck_assert_uint_eq(st.listeners, 0);
	ck_assert_uint_eq(st.cm_ids, 0);
	dt_env_fini(&env);
}
END_TEST

/* ==== 4. an evdns_base on another thread's loop ==== */

/* A DNS server of one name on the loopback: answers an A query for
 * "evrdma-test.example" with the test address. */
struct fake_dns {
	int fd, port;
	pthread_t thread;
	volatile int stop;
};

static void *
fake_dns_run(void *arg)
{
	struct fake_dns *d = arg;
	uint8_t q[512], r[600];
	struct sockaddr_storage from;
	socklen_t fl;
	struct in_addr a;
	ssize_t n;
	size_t qend;

	inet_pton(AF_INET, dt_addr(), &a);
	while (!d->stop) {
		fl = sizeof(from);
		n = recvfrom(d->fd, q, sizeof(q), 0, (struct sockaddr *)&from,
		    &fl);
		if (n < 12)
			continue;
		/* the question: name labels, then type and class */
		for (qend = 12; qend < (size_t)n && q[qend]; qend += q[qend] + 1)
			;
		qend += 5;
		if (qend > (size_t)n)
			continue;
		memcpy(r, q, qend);
		r[2] = 0x81;	/* a response, recursion desired */
		r[3] = 0x80;	/* recursion available, no error */
		r[6] = 0;
		r[7] = (q[qend - 3] == 1) ? 1 : 0;	/* an answer for A */
		r[8] = r[9] = r[10] = r[11] = 0;
		n = (ssize_t)qend;
		if (r[7]) {
			static const uint8_t rr[] = { 0xc0, 12, 0, 1, 0, 1, 0,
			    0, 0, 60, 0, 4 };

			memcpy(r + n, rr, sizeof(rr));
			n += sizeof(rr);
			memcpy(r + n, &a, 4);
			n += 4;
		}
		sendto(d->fd, r, (size_t)n, 0, (struct sockaddr *)&from, fl);
	}
	return NULL;
}

struct dns_thread {
	struct event_base *eb;
	struct evdns_base *dns;
	pthread_t thread;
	volatile int stop;
};

static void *
dns_thread_run(void *arg)
{
	struct dns_thread *t = arg;

	while (!t->stop)
		tu_loop_for(t->eb, 20);
	return NULL;
}

struct resolved {
	pthread_t loop_thread;
	int connected, events, on_loop_thread;
};

static void
rs_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct resolved *r = arg;

	r->events++;
	r->on_loop_thread = pthread_equal(pthread_self(), r->loop_thread);
	if (what & EVRDMA_EV_CONNECTED)
		r->connected = 1;
}

/*
 * An application passes an evdns_base that runs on another thread's loop.
 * The name is answered there (by a DNS server on the loopback, so the
 * answer comes asynchronously, on that thread); the connection's callback
 * must still run on the base's own loop thread, and connect.
 */
START_TEST(lifetime_dns_other_thread)
{
	struct dt_env env;
	struct dt_pair p;
	struct fake_dns fd;
	struct dns_thread t;
	struct resolved r;
	struct evrdma_conn *c;
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	char ns[64];

	memset(&p, 0, sizeof(p));
	memset(&fd, 0, sizeof(fd));
	memset(&t, 0, sizeof(t));
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(evthread_use_pthreads(), 0);
	dt_env_init(&env, NULL);
	dt_pair_connect(&p, &env, dt_addr(), 0);

	fd.fd = socket(AF_INET, SOCK_DGRAM, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd.fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ck_assert_int_eq(getsockname(fd.fd, (struct sockaddr *)&sin, &sl), 0);
	{
		struct timeval tv = { 0, 100000 };

		setsockopt(fd.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	ck_assert_int_eq(pthread_create(&fd.thread, NULL, fake_dns_run, &fd),
	    0);

	t.eb = event_base_new();
	t.dns = evdns_base_new(t.eb, 0);
	ck_assert_ptr_nonnull(t.dns);
	snprintf(ns, sizeof(ns), "127.0.0.1:%d", ntohs(sin.sin_port));
	ck_assert_int_eq(evdns_base_nameserver_ip_add(t.dns, ns), 0);
	ck_assert_int_eq(pthread_create(&t.thread, NULL, dns_thread_run, &t),
	    0);

	r.loop_thread = pthread_self();
	c = evrdma_conn_new(env.base, 0);
	evrdma_conn_setcb(c, rs_event, &r);
	ck_assert_int_eq(evrdma_conn_connect_hostname(c, t.dns, AF_INET,
	    "evrdma-test.example", evrdma_listener_get_port(p.lst)), 0);
	CH_WAIT(env.eb, r.events, 20000);
	fprintf(stderr, "resolved on another thread's evdns_base: %s, "
	    "callback on the loop thread: %d\n",
	    r.connected ? "connected" : "failed", r.on_loop_thread);
	ck_assert_int_eq(r.on_loop_thread, 1);
	ck_assert_int_eq(r.connected, 1);
	CH_WAIT(env.eb, p.nextra == 1, 10000);

	evrdma_conn_free(c);
	t.stop = 1;
	pthread_join(t.thread, NULL);
	fd.stop = 1;
	pthread_join(fd.thread, NULL);
	close(fd.fd);
	evdns_base_free(t.dns, 0);
	event_base_free(t.eb);
	dt_pair_close(&p);
	dt_env_fini(&env);
}
END_TEST

Suite *
dt_suite_lifetime(void)
{
	Suite *s = suite_create("device-lifetime");
	TCase *tc;

	tc = tcase_create("base-free");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, lifetime_base_free_live);
	tcase_add_test(tc, lifetime_bev_listener_after_event_base);
	tcase_add_test(tc, lifetime_base_free_closing);
	tcase_add_test(tc, lifetime_base_free_ended);
	suite_add_tcase(s, tc);

	tc = tcase_create("threads");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, lifetime_dns_other_thread);
	suite_add_tcase(s, tc);

	/* these change the device, and put it back */
	tc = tcase_create("device");
	tcase_set_timeout(tc, 90);
	tcase_add_unchecked_fixture(tc, NULL, dt_restore_device);
	tcase_add_test(tc, lifetime_two_bases_port_down);
	suite_add_tcase(s, tc);

	tc = tcase_create("removal");
	tcase_set_timeout(tc, 90);
	tcase_add_unchecked_fixture(tc, NULL, dt_restore_device);
	tcase_add_test(tc, lifetime_listener_device_removal);
	suite_add_tcase(s, tc);
	return s;
}
