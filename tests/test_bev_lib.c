/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma tests, issue 50: a libevent library ported by its creation lines.
 * "mh" below is a small HTTP-like library written the way libevhtp is
 * written: only an event_base travels through its API, it makes its own
 * listening socket, it takes an EOF that comes with EAGAIN in errno for a
 * spurious one (it enables reading again and waits for the next), and it
 * serves pipelined requests by pausing a connection (EV_READ disabled
 * while a request is answered) and resuming it from an event of its own,
 * which parses what input still holds: at once when output is empty, else
 * from the write callback once output has drained. Its libevent build and
 * its evrdma build differ only in the lines marked "creation line".
 *
 * Each scenario runs the library on every backend of bevtest.h and logs
 * what the library does (requests parsed and answered, connections
 * closed, how each end ends); every log must be the socket
 * bufferevent's. On the host the evrdma build runs on the fallback (plain
 * sockets) and on the adapter over TCP; in the guest over RDMA and on the
 * fallback.
 */
#include "bevtest.h"

#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>

#define MH_QUIET_MS	(tu_have_rdma_cm() ? 300 : 120)
#define MH_WAIT_MS	5000

enum {
	MH_PAUSED = 1,		/* no request is parsed */
	MH_WAITING = 2,		/* resumed: parse once output drained */
	MH_FREE_CONN = 4,	/* ended while paused: free at the resume */
	MH_KEEPALIVE = 8,
};

struct mh;

struct mh_req {
	int n;			/* its number, from the request line */
	int keepalive;
	int finished;		/* answered */
	int paused;		/* the handler answers later */
};

struct mh_conn {
	struct mh *h;
	struct event_base *evbase;
	struct bufferevent *bev;
	struct event *resume_ev;
	struct event *answer_ev;	/* the application's handler */
	struct mh_req *request;
	int flags;
	int client;
	int answers;			/* client: answer lines read */
	int eagain;			/* client: EOFs taken for spurious */
};

struct mh {
	struct event_base *evbase;
	int evrdma;			/* which creation lines */
	struct evrdma_base *base;	/* (until issue 50's API) */
	int backend;
	evutil_socket_t fd;		/* its own listening socket */
	struct evconnlistener *server;
	struct evrdma_listener *lst;
	struct sockaddr_storage ss;	/* where clients connect */
	int sslen;
	int async;			/* the handler answers from an event */
	int conns;			/* server connections alive */
	struct mh_conn *client;
	int client_done;
	char slog[1024], clog[512];
	unsigned act;
};

static void
mh_log(struct mh *h, int client, const char *fmt, ...)
{
	char *log = client ? h->clog : h->slog, t[64];
	size_t size = client ? sizeof(h->clog) : sizeof(h->slog);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t, sizeof(t), fmt, ap);
	va_end(ap);
	ck_assert_uint_lt(strlen(log) + strlen(t) + 2, size);
	strcat(log, " ");
	strcat(log, t);
	h->act++;
}

static void mh_readcb(struct bufferevent *bev, void *arg);
static void mh_writecb(struct bufferevent *bev, void *arg);
static void mh_eventcb(struct bufferevent *bev, short what, void *arg);

/* ---- the connection ---- */

static void
mh_conn_free(struct mh_conn *c)
{
	if (!c->client) {
		mh_log(c->h, 0, "closed");
		c->h->conns--;
	}
	if (c->bev)
		bufferevent_free(c->bev);
	if (c->resume_ev)
		event_free(c->resume_ev);
	if (c->answer_ev)
		event_free(c->answer_ev);
	free(c->request);
	free(c);
}

static void
mh_conn_pause(struct mh_conn *c)
{
	if (c->flags & MH_PAUSED)
		return;
	c->flags |= MH_PAUSED;
	if (bufferevent_get_enabled(c->bev) & EV_READ)
		bufferevent_disable(c->bev, EV_READ);
}

static void
mh_conn_resume(struct mh_conn *c)
{
	if (!(c->flags & MH_PAUSED))
		return;
	c->flags &= ~MH_PAUSED;
	event_active(c->resume_ev, EV_WRITE, 1);
}

static void
mh_send_reply(struct mh_req *r, struct mh_conn *c)
{
	char line[32];
	int n = snprintf(line, sizeof(line), "A%d\n", r->n);

	r->finished = 1;
	ck_assert_int_eq(bufferevent_write(c->bev, line, (size_t)n), 0);
}

/* The application's handler: it answers at once, or pauses the request
 * and answers from an event of its own. */
static void
mh_handle(struct mh_conn *c, struct mh_req *r)
{
	mh_log(c->h, 0, "Q%d", r->n);
	if (!c->h->async) {
		mh_send_reply(r, c);
		return;
	}
	r->paused = 1;
	mh_conn_pause(c);
	event_active(c->answer_ev, EV_TIMEOUT, 1);
}

static void
mh_answer(evutil_socket_t fd, short what, void *arg)
{
	struct mh_conn *c = arg;

	if (!c->request || !c->request->paused)
		return;
	c->request->paused = 0;
	mh_send_reply(c->request, c);
	mh_conn_resume(c);
}

/*
 * The parser (htparser's contract): requests are lines "Q <n> <k|c>"; it
 * stops where a hook refuses (a paused connection, a request begun while
 * the last is not answered) and returns the bytes it took; -1 in *err for
 * a line it cannot parse.
 */
static size_t
mh_parse(struct mh_conn *c, const char *buf, size_t len, int *err)
{
	size_t off = 0;

	*err = 0;
	while (off < len) {
		const char *nl = memchr(buf + off, '\n', len - off);
		struct mh_req *r;
		char k;
		int n;

		if (!nl)
			break;
		if (c->flags & MH_PAUSED)
			break;
		if (c->request) {
			if (!c->request->finished)
				break;
			free(c->request);
			c->request = NULL;
		}
		if (sscanf(buf + off, "Q %d %c", &n, &k) != 2) {
			*err = 1;
			break;
		}
		r = calloc(1, sizeof(*r));
		ck_assert_ptr_nonnull(r);
		r->n = n;
		r->keepalive = k == 'k';
		c->request = r;
		off = (size_t)(nl - buf) + 1;
		mh_handle(c, r);
		if (c->flags & MH_PAUSED)
			break;
	}
	return off;
}

static void
mh_readcb(struct bufferevent *bev, void *arg)
{
	struct mh_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t avail = evbuffer_get_length(in), nread;
	int err;

	if (c->client) {
		char *line;

		while ((line = evbuffer_readln(in, NULL, EVBUFFER_EOL_LF))) {
			c->answers++;
			free(line);
		}
		return;
	}
	if (!avail || (c->flags & MH_PAUSED))
		return;
	nread = mh_parse(c, (const char *)evbuffer_pullup(in, (ev_ssize_t)
	    avail), avail, &err);
	evbuffer_drain(in, nread);
	if (c->request && c->request->paused) {
		mh_conn_pause(c);
	} else if (err) {
		mh_log(c->h, 0, "bad");
		mh_conn_free(c);
	} else if (nread < avail) {
		/* (libevhtp: "we still have more data to read (piped
		 * request probably)"; a resume of a connection not paused
		 * does nothing) */
		mh_conn_resume(c);
	}
}

static void
mh_writecb(struct bufferevent *bev, void *arg)
{
	struct mh_conn *c = arg;

	if (c->client || !c->request || (c->flags & MH_PAUSED))
		return;
	if (c->flags & MH_WAITING) {
		c->flags &= ~MH_WAITING;
		if (!(bufferevent_get_enabled(bev) & EV_READ))
			bufferevent_enable(bev, EV_READ);
		if (evbuffer_get_length(bufferevent_get_input(bev))) {
			mh_readcb(bev, arg);
			return;
		}
	}
	if (!c->request->finished ||
	    evbuffer_get_length(bufferevent_get_output(bev)))
		return;
	if (c->request->keepalive) {
		free(c->request);
		c->request = NULL;
		c->flags |= MH_KEEPALIVE;
		return;
	}
	mh_conn_free(c);
}

static void
mh_eventcb(struct bufferevent *bev, short what, void *arg)
{
	struct mh_conn *c = arg;
	struct mh *h = c->h;

	if (what & BEV_EVENT_CONNECTED) {
		mh_log(h, c->client, "connected");
		return;
	}
	if (what == (BEV_EVENT_EOF | BEV_EVENT_READING) && errno == EAGAIN) {
		/* (libevhtp: "libevent will sometimes recv again when it's
		 * not actually ready ... we must re-enable it") */
		if (c->client)
			c->eagain++;
		if (!(bufferevent_get_enabled(bev) & EV_READ))
			bufferevent_enable(bev, EV_READ);
		errno = 0;
		if (c->eagain < 5)
			return;
	}
	if (c->client) {
		mh_log(h, 1, "A*%d", c->answers);
		mh_log(h, 1, "%s%s%s", c->eagain ? "eagain," : "",
		    what & BEV_EVENT_EOF ? "EOF" : "",
		    what & BEV_EVENT_ERROR ? "ERROR" : "");
		h->client = NULL;
		h->client_done = 1;
		mh_conn_free(c);
		return;
	}
	mh_log(h, 0, "%s", what & BEV_EVENT_EOF ? "eof" : "error");
	if (c->flags & MH_PAUSED)
		c->flags |= MH_FREE_CONN;
	else
		mh_conn_free(c);
}

static void
mh_resumecb(evutil_socket_t fd, short what, void *arg)
{
	struct mh_conn *c = arg;

	c->flags &= ~MH_PAUSED;
	if (c->flags & MH_FREE_CONN) {
		mh_conn_free(c);
		return;
	}
	if (evbuffer_get_length(bufferevent_get_output(c->bev))) {
		c->flags |= MH_WAITING;
		if (!(bufferevent_get_enabled(c->bev) & EV_WRITE))
			bufferevent_enable(c->bev, EV_WRITE);
	} else {
		if (!(bufferevent_get_enabled(c->bev) & EV_READ))
			bufferevent_enable(c->bev, EV_READ | EV_WRITE);
		if (evbuffer_get_length(bufferevent_get_input(c->bev)))
			mh_readcb(c->bev, c);
	}
}

static struct mh_conn *
mh_conn_new(struct mh *h, struct event_base *evbase, int client)
{
	struct mh_conn *c = calloc(1, sizeof(*c));

	ck_assert_ptr_nonnull(c);
	c->h = h;
	c->evbase = evbase;
	c->client = client;
	c->resume_ev = event_new(evbase, -1, EV_READ | EV_PERSIST,
	    mh_resumecb, c);
	c->answer_ev = event_new(evbase, -1, 0, mh_answer, c);
	ck_assert_ptr_nonnull(c->resume_ev);
	ck_assert_ptr_nonnull(c->answer_ev);
	event_add(c->resume_ev, NULL);
	return c;
}

/* The accepted connection's bufferevent: set up as libevhtp does. */
static void
mh_conn_accept(struct mh *h, struct mh_conn *c, struct bufferevent *bev)
{
	evutil_socket_t fd = bufferevent_getfd(bev);
	int one = 1;

	c->bev = bev;
	/* TCP_NODELAY on the socket, when there is one */
	if (fd >= 0)
		ck_assert_int_eq(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one)), 0);
	h->conns++;
	mh_log(h, 0, "accept");
	bufferevent_setcb(bev, mh_readcb, mh_writecb, mh_eventcb, c);
	bufferevent_enable(bev, EV_READ);
}

static void
mh_accept_fd(struct evconnlistener *serv, evutil_socket_t fd,
    struct sockaddr *sa, int socklen, void *arg)
{
	struct mh *h = arg;
	struct mh_conn *c = mh_conn_new(h, h->evbase, 0);
	struct bufferevent *bev;

	bev = bufferevent_socket_new(h->evbase, fd,	/* creation line */
	    BEV_OPT_CLOSE_ON_FREE);
	ck_assert_ptr_nonnull(bev);
	mh_conn_accept(h, c, bev);
}

static void
mh_accept_bev(struct evrdma_listener *lst,	/* creation line */
    struct bufferevent *bev, const struct sockaddr *sa, int socklen,
    void *arg)
{
	struct mh *h = arg;
	struct mh_conn *c = mh_conn_new(h, h->evbase, 0);

	mh_conn_accept(h, c, bev);
}

/* The library's server: its own socket, bound, then a listener on it. */
static void
mh_bind(struct mh *h, const char *addr)
{
	struct sockaddr_storage ss, bound;
	socklen_t bl = sizeof(bound);
	int len = dt_sockaddr(&ss, addr, 0), one = 1, port;

	if (h->evrdma) {	/* (until issue 50: by address) */
		h->lst = evrdma_bufferevent_listener_new(h->base,
		    mh_accept_bev, h, LEV_OPT_CLOSE_ON_FREE |
		    LEV_OPT_REUSEABLE, -1, (struct sockaddr *)&ss, len);
		ck_assert_msg(h->lst != NULL, "listen: %s", evrdma_errmsg());
		port = evrdma_listener_get_port(h->lst);
	} else {
		h->fd = socket(ss.ss_family, SOCK_STREAM, 0);
		ck_assert_int_ge(h->fd, 0);
		evutil_make_socket_closeonexec(h->fd);
		evutil_make_socket_nonblocking(h->fd);
		ck_assert_int_eq(setsockopt(h->fd, SOL_SOCKET, SO_REUSEADDR,
		    &one, sizeof(one)), 0);
		ck_assert_int_eq(bind(h->fd, (struct sockaddr *)&ss,
		    (socklen_t)len), 0);
		h->server = evconnlistener_new(h->evbase, mh_accept_fd, h,
		    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, -1, h->fd);
		ck_assert_ptr_nonnull(h->server);
		ck_assert_int_eq(getsockname(h->fd, (struct sockaddr *)&bound,
		    &bl), 0);
		port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
	}
	h->sslen = dt_sockaddr(&h->ss, bt_connect_addr(h->backend), port);
}

static void mh_wait_up(struct mh *h);

/* The library's client connection: connect(evbase, address). */
static struct mh_conn *
mh_connection_new(struct mh *h, struct event_base *evbase)
{
	struct mh_conn *c = mh_conn_new(h, evbase, 1);

	if (h->evrdma)	/* creation lines */
		c->bev = evrdma_bufferevent_new(h->base, 0);
	else
		c->bev = bufferevent_socket_new(evbase, -1,
		    BEV_OPT_CLOSE_ON_FREE);
	ck_assert_ptr_nonnull(c->bev);
	bufferevent_setcb(c->bev, mh_readcb, mh_writecb, mh_eventcb, c);
	bufferevent_enable(c->bev, EV_READ);
	if (h->evrdma)	/* creation line */
		ck_assert_int_eq(evrdma_bufferevent_connect(c->bev,
		    (struct sockaddr *)&h->ss, h->sslen), 0);
	else
		ck_assert_int_eq(bufferevent_socket_connect(c->bev,
		    (struct sockaddr *)&h->ss, h->sslen), 0);
	h->client = c;
	mh_wait_up(h);
	return c;
}

/* ---- the scenarios ---- */

static void
mh_step(struct mh *h, int ms)
{
	bt_step(h->evbase, ms);
}

/* Run the loop until @p cond, or MH_WAIT_MS, then until quiet. */
#define MH_RUN(h, cond)							\
	do {								\
		uint64_t mh_dl_ = tu_now_ms() + MH_WAIT_MS;		\
		unsigned mh_a_;						\
		while (!(cond) && tu_now_ms() < mh_dl_)			\
			mh_step((h), 50);				\
		do {							\
			mh_a_ = (h)->act;				\
			bt_loop_for((h)->evbase, MH_QUIET_MS);		\
		} while (mh_a_ != (h)->act);				\
	} while (0)

/* Both ends up (the accept done: a socket listener's leaves EAGAIN in
 * errno, before the scenario sets it). */
static void
mh_wait_up(struct mh *h)
{
	MH_RUN(h, h->conns && strstr(h->clog, "connected"));
}

static void
mh_send(struct mh *h, const char *reqs)
{
	ck_assert_ptr_nonnull(h->client);
	ck_assert_int_eq(bufferevent_write(h->client->bev, reqs,
	    strlen(reqs)), 0);
}

/* keep-alive: three requests one after the other, the last closes; the
 * client's EOF comes with errno as the program left it (0). */
static void
mh_keepalive(struct mh *h)
{
	struct mh_conn *c = mh_connection_new(h, h->evbase);

	mh_send(h, "Q 1 k\n");
	MH_RUN(h, c->answers == 1);
	mh_send(h, "Q 2 k\n");
	MH_RUN(h, c->answers == 2);
	mh_send(h, "Q 3 c\n");
	errno = 0;
	MH_RUN(h, h->client_done);
}

/* Twelve requests in one write, the last closes; errno is EAGAIN when
 * the EOF comes (as a server's accept loop leaves it): the library takes
 * the first EOF for spurious, and the second for the end. */
static void
mh_pipeline(struct mh *h)
{
	char reqs[256];
	size_t n = 0;
	int i;

	mh_connection_new(h, h->evbase);
	for (i = 1; i <= 12; i++)
		n += (size_t)snprintf(reqs + n, sizeof(reqs) - n, "Q %d %c\n",
		    i, i < 12 ? 'k' : 'c');
	mh_send(h, reqs);
	errno = EAGAIN;
	MH_RUN(h, h->client_done);
}

static void
mh_pipeline_async(struct mh *h)
{
	h->async = 1;
	mh_pipeline(h);
}

/* A request it cannot parse: the server drops the connection. */
static void
mh_bad_request(struct mh *h)
{
	mh_connection_new(h, h->evbase);
	mh_send(h, "nonsense\nQ 2 k\n");
	errno = 0;
	MH_RUN(h, h->client_done);
}

struct mh_case {
	const char *name;
	void (*run)(struct mh *);
	const char *server, *client;
};

static const struct mh_case mh_cases[] = {
	{ "keep-alive", mh_keepalive,
	    " accept Q1 Q2 Q3 closed", " connected A*3 EOF" },
	{ "pipelined, answered at once", mh_pipeline,
	    " accept Q1 Q2 Q3 Q4 Q5 Q6 Q7 Q8 Q9 Q10 Q11 Q12 closed",
	    " connected A*12 eagain,EOF" },
	{ "pipelined, answered from an event", mh_pipeline_async,
	    " accept Q1 Q2 Q3 Q4 Q5 Q6 Q7 Q8 Q9 Q10 Q11 Q12 closed",
	    " connected A*12 eagain,EOF" },
	{ "a bad request", mh_bad_request,
	    " accept bad closed", " connected A*0 EOF" },
};

#define MH_NCASES ((int)(sizeof(mh_cases) / sizeof(mh_cases[0])))

static void
mh_run(struct mh *h, int backend, const struct mh_case *k)
{
	struct bt_env env;
	uint64_t dl;

	memset(h, 0, sizeof(*h));
	bt_env_init(&env, backend, NULL);
	h->evbase = env.eb;
	h->base = env.base;
	h->backend = backend;
	h->evrdma = backend != BT_TCP;
	h->fd = -1;
	mh_bind(h, bt_listen_addr(backend));
	k->run(h);
	if (h->client)
		mh_conn_free(h->client);
	/* the server's connections close by themselves */
	dl = tu_now_ms() + MH_WAIT_MS;
	while (h->conns && tu_now_ms() < dl)
		mh_step(h, 50);
	if (h->server)
		evconnlistener_free(h->server);
	if (h->lst)
		evrdma_listener_free(h->lst);
	bt_env_fini(&env);
}

START_TEST(bev_lib_like_socket)
{
	const struct mh_case *k = &mh_cases[_i / BT_N];
	int backend = _i % BT_N;
	struct mh *h;

	if (!bt_available(backend) || (TU_SANITIZED && backend == BT_TCP))
		return;
	signal(SIGPIPE, SIG_IGN);
	h = calloc(1, sizeof(*h));
	ck_assert_ptr_nonnull(h);
	fprintf(stderr, "library \"%s\" on %s\n", k->name, bt_name(backend));
	mh_run(h, backend, k);
	fprintf(stderr, "%s server:%s\n%s client:%s\n", bt_name(backend),
	    h->slog, bt_name(backend), h->clog);
	ck_assert_msg(!strcmp(h->slog, k->server) &&
	    !strcmp(h->clog, k->client), "%s on %s: the library does not "
	    "do what it does over sockets:\nserver:%s\nwanted:%s\n"
	    "client:%s\nwanted:%s", k->name, bt_name(backend), h->slog,
	    k->server, h->clog, k->client);
	free(h);
}
END_TEST

Suite *
bt_suite_lib(void)
{
	Suite *s = suite_create(tu_have_rdma_cm() ? "device-bev-lib" :
	    "bev-lib");
	TCase *tc = tcase_create("library");

	tcase_set_timeout(tc, 180);
	tcase_add_loop_test(tc, bev_lib_like_socket, 0, MH_NCASES * BT_N);
	suite_add_tcase(s, tc);
	return s;
}
