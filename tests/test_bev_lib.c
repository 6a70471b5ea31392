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
 * bufferevent's, and once its objects are freed nothing of evrdma's is
 * left on the event_base (its dispatch returns, as with sockets). On the
 * host the evrdma build runs on the fallback (plain sockets) and on the
 * adapter over TCP; in the guest over RDMA and on the fallback.
 *
 * Then the listener on the program's own socket (SO_REUSEPORT,
 * IPV6_V6ONLY beside an IPv4 socket on the same port, a Unix socket, a
 * socket the listener must leave open), misuse, and a base the program
 * made on the event_base, which the event_base calls use.
 */
#include "bevtest.h"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>

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

	/* (libevhtp keeps the peer's address from here) */
	ck_assert_int_eq(sa->sa_family, AF_INET);
	bev = bufferevent_socket_new(h->evbase, fd,	/* creation line */
	    BEV_OPT_CLOSE_ON_FREE);
	ck_assert_ptr_nonnull(bev);
	mh_conn_accept(h, c, bev);
}

static void
mh_accept_bev(struct evrdma_listener *lst,	/* creation lines */
    struct bufferevent *bev, const struct sockaddr *sa, int socklen,
    void *arg)
{
	struct mh *h = arg;
	struct mh_conn *c = mh_conn_new(h, h->evbase, 0);

	ck_assert_int_eq(sa->sa_family, AF_INET);
	mh_conn_accept(h, c, bev);
}

/* The library's server: its own socket, bound, then a listener on it
 * (libevhtp's evhtp_bind_sockaddr() and evhtp_accept_socket()). */
static void
mh_bind(struct mh *h, const char *addr)
{
	struct sockaddr_storage ss, bound;
	socklen_t bl = sizeof(bound);
	int len = dt_sockaddr(&ss, addr, 0), one = 1;

	h->fd = socket(ss.ss_family, SOCK_STREAM, 0);
	ck_assert_int_ge(h->fd, 0);
	evutil_make_socket_closeonexec(h->fd);
	evutil_make_socket_nonblocking(h->fd);
	ck_assert_int_eq(setsockopt(h->fd, SOL_SOCKET, SO_REUSEADDR, &one,
	    sizeof(one)), 0);
	ck_assert_int_eq(bind(h->fd, (struct sockaddr *)&ss, (socklen_t)len),
	    0);
	if (h->evrdma) {	/* creation line */
		h->lst = evrdma_evconnlistener_new(h->evbase, mh_accept_bev,
		    h, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, -1, h->fd);
		ck_assert_msg(h->lst != NULL, "listen: %s", evrdma_errmsg());
	} else {
		h->server = evconnlistener_new(h->evbase, mh_accept_fd, h,
		    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, -1, h->fd);
		ck_assert_ptr_nonnull(h->server);
	}
	ck_assert_int_eq(getsockname(h->fd, (struct sockaddr *)&bound, &bl),
	    0);
	h->sslen = dt_sockaddr(&h->ss, bt_connect_addr(h->backend),
	    ntohs(((struct sockaddr_in *)&bound)->sin_port));
}

static void mh_wait_up(struct mh *h);

/* The library's client connection: connect(evbase, address). */
static struct mh_conn *
mh_connection_new(struct mh *h, struct event_base *evbase)
{
	struct mh_conn *c = mh_conn_new(h, evbase, 1);

	if (h->evrdma)	/* creation line */
		c->bev = evrdma_bufferevent_socket_new(evbase, -1,
		    BEV_OPT_CLOSE_ON_FREE);
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

/*
 * The program around the library: its event_base, and for the evrdma
 * build the one configuration it sets (the fallback; the test knob of
 * the adapter over TCP), with no object of evrdma's to thread through.
 */
static struct event_base *
mh_program_start(int backend)
{
	struct evrdma_config *cfg = evrdma_config_new();
	struct event_base *eb = event_base_new();

	dt_log_init();
	ck_assert_ptr_nonnull(eb);
	ck_assert_ptr_nonnull(cfg);
	if (backend == BT_ADAPTER)
		ck_assert_int_eq(setenv("EVRDMA_BEV_ADAPTER", "1", 1), 0);
	else
		unsetenv("EVRDMA_BEV_ADAPTER");
	ck_assert_int_eq(evrdma_config_set_tcp_fallback(cfg,
	    backend != BT_RDMA), 0);
	ck_assert_int_eq(evrdma_config_set_default(cfg), 0);
	evrdma_config_free(cfg);
	return eb;
}

/* Once its objects are gone, nothing of evrdma's is left on the
 * event_base (the shared base went with them): event_base_dispatch()
 * returns at once, as with sockets. */
static void
mh_program_end(struct event_base *eb)
{
	uint64_t dl = tu_now_ms() + 20000;

	while (event_base_get_num_events(eb, EVENT_BASE_COUNT_ADDED |
	    EVENT_BASE_COUNT_ACTIVE | EVENT_BASE_COUNT_VIRTUAL)) {
		ck_assert_msg(tu_now_ms() < dl, "%d events left on the "
		    "event_base", event_base_get_num_events(eb,
		    EVENT_BASE_COUNT_ADDED | EVENT_BASE_COUNT_ACTIVE));
		bt_step(eb, 10);
	}
	ck_assert_int_eq(event_base_dispatch(eb), 1);
	event_base_free(eb);
	ck_assert_int_eq(evrdma_config_set_default(NULL), 0);
	unsetenv("EVRDMA_BEV_ADAPTER");
}

static void
mh_run(struct mh *h, int backend, const struct mh_case *k)
{
	uint64_t dl;

	memset(h, 0, sizeof(*h));
	h->evbase = mh_program_start(backend);
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
	mh_program_end(h->evbase);
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

/* ==== the listener on the program's socket, and the base ==== */

#define LT_MAX	16

/* A program's accepted and connecting ends. */
struct lt {
	struct event_base *eb;
	int n[2];			/* accepted by listener 0 and 1 */
	struct bufferevent *acc[LT_MAX], *cli[LT_MAX];
	int nacc, ncli, up;
};

struct lt_side {
	struct lt *t;
	int which;
};

static void
lt_accept(struct evrdma_listener *lst, struct bufferevent *bev,
    const struct sockaddr *sa, int socklen, void *arg)
{
	struct lt_side *side = arg;
	struct lt *t = side->t;

	ck_assert_int_lt(t->nacc, LT_MAX);
	ck_assert_int_gt(socklen, 0);
	t->acc[t->nacc++] = bev;
	t->n[side->which]++;
}

static void
lt_client_event(struct bufferevent *bev, short what, void *arg)
{
	struct lt *t = arg;

	ck_assert_msg(what & BEV_EVENT_CONNECTED, "client event 0x%x", what);
	t->up++;
}

/* A client of the program's, through the event_base call. */
static void
lt_connect(struct lt *t, const char *addr, int port)
{
	struct sockaddr_storage ss;
	int len = dt_sockaddr(&ss, addr, port);
	struct bufferevent *bev = evrdma_bufferevent_socket_new(t->eb, -1, 0);

	ck_assert_msg(bev != NULL, "client: %s", evrdma_errmsg());
	ck_assert_int_lt(t->ncli, LT_MAX);
	t->cli[t->ncli++] = bev;
	bufferevent_setcb(bev, NULL, NULL, lt_client_event, t);
	ck_assert_int_eq(evrdma_bufferevent_connect(bev,
	    (struct sockaddr *)&ss, len), 0);
}

static void
lt_free_ends(struct lt *t)
{
	int i;

	for (i = 0; i < t->nacc; i++)
		bufferevent_free(t->acc[i]);
	for (i = 0; i < t->ncli; i++)
		bufferevent_free(t->cli[i]);
	t->nacc = t->ncli = 0;
}

/* A stream socket of @p family bound to @p addr:@p port, with
 * SO_REUSEPORT and IPV6_V6ONLY as asked (-1: untouched). */
static evutil_socket_t
lt_socket(const char *addr, int port, int reuseport, int v6only)
{
	struct sockaddr_storage ss;
	int len = dt_sockaddr(&ss, addr, port), one = 1;
	evutil_socket_t fd = socket(ss.ss_family, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(evutil_make_socket_nonblocking(fd), 0);
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
	    sizeof(one)), 0);
	if (reuseport >= 0)
		ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_REUSEPORT,
		    &reuseport, sizeof(reuseport)), 0);
	if (v6only >= 0)
		ck_assert_int_eq(setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY,
		    &v6only, sizeof(v6only)), 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&ss, (socklen_t)len), 0);
	return fd;
}

static int
lt_port(evutil_socket_t fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
	return ss.ss_family == AF_INET ?
	    ntohs(((struct sockaddr_in *)&ss)->sin_port) :
	    ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

/*
 * SO_REUSEPORT: two sockets of the program on one port, each under a
 * listener. Both are made (rdma_cm shares no port: the first listens
 * over RDMA too, the second serves its socket), and every client is
 * accepted, those over RDMA by the first.
 */
START_TEST(bev_lib_reuseport)
{
	int backend = BT_RDMA + _i;	/* BT_RDMA, BT_FALLBACK, BT_ADAPTER */
	struct lt_side side[2];
	struct evrdma_listener *l[2];
	evutil_socket_t fd[2];
	struct lt t;
	int port, i;

	if (!bt_available(backend))
		return;
	memset(&t, 0, sizeof(t));
	t.eb = mh_program_start(backend);
	fd[0] = lt_socket(bt_listen_addr(backend), 0, 1, -1);
	port = lt_port(fd[0]);
	fd[1] = lt_socket(bt_listen_addr(backend), port, 1, -1);
	for (i = 0; i < 2; i++) {
		side[i].t = &t;
		side[i].which = i;
		l[i] = evrdma_evconnlistener_new(t.eb, lt_accept, &side[i],
		    LEV_OPT_CLOSE_ON_FREE, -1, fd[i]);
		ck_assert_msg(l[i] != NULL, "listener %d: %s", i,
		    evrdma_errmsg());
		ck_assert_int_eq(evrdma_listener_get_fd(l[i]), fd[i]);
		ck_assert_int_eq(evrdma_listener_get_port(l[i]), port);
	}
	for (i = 0; i < 8; i++)
		lt_connect(&t, bt_connect_addr(backend), port);
	BT_WAIT(t.eb, t.up == 8 && t.nacc == 8, 20000);
	fprintf(stderr, "SO_REUSEPORT on %s: %d and %d accepted\n",
	    bt_name(backend), t.n[0], t.n[1]);
	if (backend == BT_RDMA)
		ck_assert_int_eq(t.n[0], 8);
	lt_free_ends(&t);
	evrdma_listener_free(l[0]);
	evrdma_listener_free(l[1]);
	mh_program_end(t.eb);
}
END_TEST

/*
 * IPV6_V6ONLY: an IPv6-only socket on [::] and an IPv4 one on 0.0.0.0,
 * on one port, as libevhtp binds them. The listener over RDMA on the
 * first is IPv6-only as well (rdma_cm's AFONLY), else the second could
 * not listen over RDMA on its port; each takes its own family.
 */
START_TEST(bev_lib_v6only)
{
	int backend = BT_RDMA + _i;
	struct lt_side side[2];
	struct evrdma_listener *l[2];
	evutil_socket_t fd[2];
	struct lt t;
	int port, i;

	if (!bt_available(backend))
		return;
	memset(&t, 0, sizeof(t));
	t.eb = mh_program_start(backend);
	fd[0] = lt_socket("::", 0, -1, 1);
	port = lt_port(fd[0]);
	fd[1] = lt_socket("0.0.0.0", port, -1, -1);
	for (i = 0; i < 2; i++) {
		side[i].t = &t;
		side[i].which = i;
		l[i] = evrdma_evconnlistener_new(t.eb, lt_accept, &side[i],
		    LEV_OPT_CLOSE_ON_FREE, 16, fd[i]);
		ck_assert_msg(l[i] != NULL, "listener %d: %s", i,
		    evrdma_errmsg());
	}
	lt_connect(&t, backend == BT_RDMA ? dt_addr6() : "::1", port);
	BT_WAIT(t.eb, t.up == 1 && t.nacc == 1, 20000);
	lt_connect(&t, bt_connect_addr(backend), port);
	BT_WAIT(t.eb, t.up == 2 && t.nacc == 2, 20000);
	ck_assert_int_eq(t.n[0], 1);
	ck_assert_int_eq(t.n[1], 1);
	lt_free_ends(&t);
	evrdma_listener_free(l[0]);
	evrdma_listener_free(l[1]);
	mh_program_end(t.eb);
}
END_TEST

static void
lt_echo(struct bufferevent *bev, void *arg)
{
	bufferevent_write_buffer(bev, bufferevent_get_input(bev));
}

static void
lt_unix_accept(struct evrdma_listener *lst, struct bufferevent *bev,
    const struct sockaddr *sa, int socklen, void *arg)
{
	struct lt *t = arg;

	ck_assert_int_eq(sa->sa_family, AF_UNIX);
	/* a socket's bufferevent: its descriptor is there (not under the
	 * test knob's adapter) */
	if (getenv("EVRDMA_BEV_ADAPTER") == NULL)
		ck_assert_int_ge(bufferevent_getfd(bev), 0);
	t->acc[t->nacc++] = bev;
	bufferevent_setcb(bev, lt_echo, NULL, NULL, t);
	bufferevent_enable(bev, EV_READ);
}

/*
 * A Unix socket: the listener serves it alone (no RDMA there), and
 * without LEV_OPT_CLOSE_ON_FREE it stays the program's after the free.
 * The client is the program's own connected socket, through
 * evrdma_bufferevent_socket_new().
 */
START_TEST(bev_lib_unix)
{
	int backend = BT_RDMA + _i;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct evrdma_listener *lst;
	evutil_socket_t fd, cfd;
	struct bufferevent *c;
	struct lt t;
	char buf[8];

	if (!bt_available(backend))
		return;
	memset(&t, 0, sizeof(t));
	t.eb = mh_program_start(backend);
	/* (abstract: the guest's TMPDIR is a 9p share, which has none) */
	snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1,
	    "evrdma-lib-%d", (int)getpid());
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	lst = evrdma_evconnlistener_new(t.eb, lt_unix_accept, &t, 0, 4, fd);
	ck_assert_msg(lst != NULL, "listener: %s", evrdma_errmsg());
	ck_assert_int_eq(evrdma_listener_get_fd(lst), fd);
	ck_assert_int_eq(evrdma_listener_get_port(lst), 0);
	cfd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ge(cfd, 0);
	ck_assert_int_eq(connect(cfd, (struct sockaddr *)&sun, sizeof(sun)),
	    0);
	ck_assert_int_eq(evutil_make_socket_nonblocking(cfd), 0);
	c = evrdma_bufferevent_socket_new(t.eb, cfd, BEV_OPT_CLOSE_ON_FREE);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(bufferevent_getfd(c), cfd);
	bufferevent_enable(c, EV_READ);
	ck_assert_int_eq(bufferevent_write(c, "hello", 5), 0);
	BT_WAIT(t.eb, evbuffer_get_length(bufferevent_get_input(c)) == 5,
	    10000);
	ck_assert_int_eq(bufferevent_read(c, buf, 5), 5);
	ck_assert(!memcmp(buf, "hello", 5));
	bufferevent_free(c);
	lt_free_ends(&t);
	evrdma_listener_free(lst);
	/* the program's still */
	ck_assert_int_ne(fcntl(fd, F_GETFD), -1);
	close(fd);
	mh_program_end(t.eb);
}
END_TEST

/* Misuse is an error, and a failed listener leaves the socket open. */
START_TEST(bev_lib_misuse)
{
	int backend = BT_RDMA + _i;
	struct evrdma_config *cfg;
	struct event_base *eb;
	evutil_socket_t fd;
	int p[2];

	if (!bt_available(backend))
		return;
	eb = mh_program_start(backend);
	fd = lt_socket(bt_listen_addr(backend), 0, -1, -1);
	errno = 0;
	ck_assert_ptr_null(evrdma_evconnlistener_new(NULL, lt_accept, NULL,
	    0, -1, fd));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(evrdma_evconnlistener_new(eb, NULL, NULL, 0, -1,
	    fd));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(evrdma_evconnlistener_new(eb, lt_accept, NULL, 0,
	    -1, -1));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(evrdma_evconnlistener_new(eb, lt_accept, NULL,
	    LEV_OPT_THREADSAFE, -1, fd));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_ne(fcntl(fd, F_GETFD), -1);
	close(fd);
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_ptr_null(evrdma_evconnlistener_new(eb, lt_accept, NULL, 0,
	    -1, p[0]));
	ck_assert_int_eq(errno, ENOTSOCK);
	close(p[0]);
	close(p[1]);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_ptr_null(evrdma_evconnlistener_new(eb, lt_accept, NULL, 0,
	    -1, fd));
	ck_assert_int_eq(errno, EINVAL);
	close(fd);
	ck_assert_int_eq(evrdma_listener_get_fd(NULL), -1);
	ck_assert_ptr_null(evrdma_bufferevent_socket_new(NULL, -1, 0));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(evrdma_bufferevent_socket_new(eb, -2, 0));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(evrdma_bufferevent_socket_new(eb, -1, 0x1000));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(evrdma_evconnlistener_new_bind(NULL, lt_accept,
	    NULL, 0, -1, NULL, 0));
	ck_assert_int_eq(errno, EINVAL);
	/* a configuration evrdma_base_new() would refuse */
	cfg = evrdma_config_new();
	ck_assert_ptr_nonnull(cfg);
	ck_assert_int_eq(evrdma_config_set_cq_size(cfg, 64), 0);
	ck_assert_int_eq(evrdma_config_set_default(cfg), -1);
	ck_assert_int_eq(errno, EINVAL);
	/* without the fallback, no RDMA is an error (the host) */
	if (!tu_have_rdma_cm()) {
		ck_assert_int_eq(evrdma_config_set_tcp_fallback(cfg, 0), 0);
		ck_assert_int_eq(evrdma_config_set_cq_size(cfg, 4096), 0);
		ck_assert_int_eq(evrdma_config_set_default(cfg), 0);
		ck_assert_ptr_null(evrdma_bufferevent_socket_new(eb, -1, 0));
		ck_assert(errno == ENOSYS || errno == ENODEV);
	}
	evrdma_config_free(cfg);
	mh_program_end(eb);
}
END_TEST

/* A base the program made on its event_base is the one the event_base
 * calls use (its configuration applies); once it is freed, they share
 * one of their own. */
START_TEST(bev_lib_program_base)
{
	int backend = _i ? BT_ADAPTER : BT_RDMA;
	struct evrdma_config *cfg;
	struct evrdma_stats st;
	struct evrdma_base *base;
	struct evrdma_listener *lst;
	struct bufferevent *bev;
	struct sockaddr_storage ss;
	struct lt_side side = { NULL, 0 };
	struct lt t;
	int len;

	if (!bt_available(backend))
		return;
	memset(&t, 0, sizeof(t));
	side.t = &t;
	t.eb = mh_program_start(backend);
	cfg = evrdma_config_new();
	ck_assert_ptr_nonnull(cfg);
	ck_assert_int_eq(evrdma_config_set_tcp_fallback(cfg,
	    backend != BT_RDMA), 0);
	base = evrdma_base_new(t.eb, cfg);
	evrdma_config_free(cfg);
	ck_assert_ptr_nonnull(base);
	bev = evrdma_bufferevent_socket_new(t.eb, -1, 0);
	ck_assert_ptr_nonnull(bev);
	len = dt_sockaddr(&ss, bt_listen_addr(backend), 0);
	lst = evrdma_evconnlistener_new_bind(t.eb, lt_accept, &side,
	    LEV_OPT_REUSEABLE, -1, (struct sockaddr *)&ss, len);
	ck_assert_ptr_nonnull(lst);
	/* the fallback's socket, where there is one */
	if (backend == BT_RDMA)
		ck_assert_int_eq(evrdma_listener_get_fd(lst), -1);
	else
		ck_assert_int_ge(evrdma_listener_get_fd(lst), 0);
	ck_assert_int_eq(evrdma_base_get_stats(base, &st, sizeof(st)), 0);
	ck_assert_uint_eq(st.bevs, 1);
	ck_assert_uint_eq(st.listeners, 1);
	bufferevent_free(bev);
	evrdma_listener_free(lst);
	BT_WAIT(t.eb, evrdma_base_get_stats(base, &st, sizeof(st)) == 0 &&
	    !st.bevs && !st.conns && !st.listeners, 10000);
	evrdma_base_free(base);
	/* now a shared one */
	bev = evrdma_bufferevent_socket_new(t.eb, -1, 0);
	ck_assert_ptr_nonnull(bev);
	ck_assert(bt_is_adapter(bev));
	bufferevent_free(bev);
	mh_program_end(t.eb);
}
END_TEST

/* A connect by name, with no evrdma base of the program's and nothing
 * else of evrdma's on its event_base (the server runs on another): it
 * resolves (an RDMA bufferevent with its shared base's resolver, a
 * socket as libevent does with no evdns_base) and connects. */
START_TEST(bev_lib_hostname)
{
	int backend = BT_RDMA + _i;
	struct lt_side side = { NULL, 0 };
	struct sockaddr_storage ss;
	struct evrdma_listener *lst;
	struct event_base *seb;
	struct bufferevent *bev;
	struct lt t, srv;
	uint64_t dl;
	int len;

	if (!bt_available(backend))
		return;
	memset(&t, 0, sizeof(t));
	memset(&srv, 0, sizeof(srv));
	side.t = &srv;
	t.eb = mh_program_start(backend);
	seb = srv.eb = event_base_new();
	ck_assert_ptr_nonnull(seb);
	len = dt_sockaddr(&ss, bt_listen_addr(backend), 0);
	lst = evrdma_evconnlistener_new_bind(seb, lt_accept, &side,
	    LEV_OPT_REUSEABLE, -1, (struct sockaddr *)&ss, len);
	ck_assert_msg(lst != NULL, "listener: %s", evrdma_errmsg());
	bev = evrdma_bufferevent_socket_new(t.eb, -1, 0);
	ck_assert_ptr_nonnull(bev);
	t.cli[t.ncli++] = bev;
	bufferevent_setcb(bev, NULL, NULL, lt_client_event, &t);
	ck_assert_msg(evrdma_bufferevent_connect_hostname(bev, NULL, AF_INET,
	    bt_connect_addr(backend), evrdma_listener_get_port(lst)) == 0,
	    "connect_hostname: %s", evrdma_errmsg());
	dl = tu_now_ms() + 20000;
	while (!(t.up == 1 && srv.nacc == 1)) {
		ck_assert_msg(tu_now_ms() < dl, "no connection");
		bt_step(t.eb, 10);
		bt_step(seb, 10);
	}
	lt_free_ends(&t);
	lt_free_ends(&srv);
	evrdma_listener_free(lst);
	dl = tu_now_ms() + 20000;
	while (event_base_get_num_events(seb, EVENT_BASE_COUNT_ADDED |
	    EVENT_BASE_COUNT_ACTIVE)) {
		ck_assert(tu_now_ms() < dl);
		bt_step(seb, 10);
		bt_step(t.eb, 10);
	}
	event_base_free(seb);
	mh_program_end(t.eb);
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
	tc = tcase_create("socket");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, bev_lib_reuseport, 0, 3);
	tcase_add_loop_test(tc, bev_lib_v6only, 0, 3);
	tcase_add_loop_test(tc, bev_lib_unix, 0, 3);
	tcase_add_loop_test(tc, bev_lib_misuse, 0, 3);
	suite_add_tcase(s, tc);
	tc = tcase_create("base");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, bev_lib_program_base, 0, 2);
	tcase_add_loop_test(tc, bev_lib_hostname, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}
