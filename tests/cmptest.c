/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma tests: the scenario harness of test_chan_compare.c and
 * test_bev_compare.c (cmptest.h): callback logging on either kind of end,
 * the steps a scenario takes, and the scenarios both programs run.
 */
#include "cmptest.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>

/* ==== the log ==== */

void
sc_tok(struct sc_end *e, const char *fmt, ...)
{
	char t[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t, sizeof(t), fmt, ap);
	va_end(ap);
	if (e->drain_mode && !strcmp(t, e->last))
		return;
	e->sc->act++;
	snprintf(e->last, sizeof(e->last), "%s", t);
	ck_assert_msg(strlen(e->log) + strlen(t) + 2 < sizeof(e->log),
	    "callback log overflows:%.300s ...%s", e->log,
	    e->log + strlen(e->log) - 200);
	strcat(e->log, " ");
	strcat(e->log, t);
}

void
sc_mark(struct sc *sc, const char *step)
{
	sc_tok(&sc->c, "|%s", step);
	sc_tok(&sc->s, "|%s", step);
}

const char *
sc_enstr(short en)
{
	static const char *const s[] = { "e-", "eR", "eW", "eRW" };

	return s[((en & EV_READ) ? 1 : 0) | ((en & EV_WRITE) ? 2 : 0)];
}

/* ==== an end: a bufferevent or a channel ==== */

struct evbuffer *
sc_in(struct sc_end *e)
{
	return e->ch ? evrdma_channel_get_input(e->ch) :
	    bufferevent_get_input(e->bev);
}

struct evbuffer *
sc_out(struct sc_end *e)
{
	return e->ch ? evrdma_channel_get_output(e->ch) :
	    bufferevent_get_output(e->bev);
}

short
sc_enabled(struct sc_end *e)
{
	return e->ch ? evrdma_channel_get_enabled(e->ch) :
	    bufferevent_get_enabled(e->bev);
}

void
sc_enable(struct sc_end *e, short ev)
{
	ck_assert_int_eq(e->ch ? evrdma_channel_enable(e->ch, ev) :
	    bufferevent_enable(e->bev, ev), 0);
}

void
sc_disable(struct sc_end *e, short ev)
{
	ck_assert_int_eq(e->ch ? evrdma_channel_disable(e->ch, ev) :
	    bufferevent_disable(e->bev, ev), 0);
}

void
sc_setwm(struct sc_end *e, short ev, size_t lo, size_t hi)
{
	if (e->ch)
		evrdma_channel_setwatermark(e->ch, ev, lo, hi);
	else
		bufferevent_setwatermark(e->bev, ev, lo, hi);
}

void
sc_settimeouts(struct sc_end *e, long rd_us, long wr_us)
{
	struct timeval rd = { rd_us / 1000000, rd_us % 1000000 };
	struct timeval wr = { wr_us / 1000000, wr_us % 1000000 };

	ck_assert_int_eq(e->ch ? evrdma_channel_set_timeouts(e->ch,
	    rd_us < 0 ? NULL : &rd, wr_us < 0 ? NULL : &wr) :
	    bufferevent_set_timeouts(e->bev, rd_us < 0 ? NULL : &rd,
	    wr_us < 0 ? NULL : &wr), 0);
}

void
sc_write(struct sc_end *e, size_t n)
{
	ck_assert_uint_le(n, e->sc->big);
	ck_assert_int_eq(e->ch ? evrdma_channel_write(e->ch, e->sc->zeros,
	    n) : bufferevent_write(e->bev, e->sc->zeros, n), 0);
	e->wrote = 1;
}

void
sc_shutdown(struct sc_end *e)
{
	if (e->ch)
		ck_assert_int_eq(evrdma_channel_shutdown(e->ch), 0);
	else
		e->shut_pending = bt_shutdown(e->bev);
}

void
sc_free(struct sc_end *e)
{
	if (e->ch)
		evrdma_channel_free(e->ch);
	else if (e->bev)
		bufferevent_free(e->bev);
	e->bev = NULL;
	e->ch = NULL;
}

void
sc_drain(struct sc_end *e, size_t n)
{
	ck_assert_int_eq(evbuffer_drain(sc_in(e), n), 0);
	e->drained += n;
	e->rlen_valid = 0;
}

void
sc_quiet(struct sc *sc)
{
	uint64_t dl = tu_now_ms() + 30000;
	unsigned a;

	do {
		ck_assert_msg(tu_now_ms() < dl, "callbacks never stop");
		a = sc->act;
		bt_loop_for(sc->eb, sc->quiet_ms);
	} while (a != sc->act);
}

/* ==== the callbacks ==== */

static void
sc_on_read(struct sc_end *e)
{
	struct evbuffer *in = sc_in(e);
	size_t len = evbuffer_get_length(in);

	if (e->on_read) {
		e->on_read(e);
		return;
	}
	/*
	 * libevent >= 2.1.11 calls a bufferevent's read callback again and
	 * again, without reading, while input is at the high watermark and
	 * the callback leaves it there (libevent/libevent#891), on every
	 * kind of bufferevent, and once more with empty input after the
	 * user drained it. Such a call reports nothing new: it is counted,
	 * not logged (and a channel must not make any: test_chan_compare.c
	 * checks).
	 */
	if (!e->drain_mode &&
	    (len == 0 || (e->rlen_valid && len == e->last_rlen))) {
		e->repeats++;
		return;
	}
	e->last_rlen = len;
	e->rlen_valid = 1;
	if (e->drain_mode) {
		sc_tok(e, "R*");
		e->rx += len;
		evbuffer_drain(in, len);
	} else {
		sc_tok(e, "R%zu", len);
	}
}

static void
sc_on_write(struct sc_end *e)
{
	if (e->on_write) {
		e->on_write(e);
		return;
	}
	sc_tok(e, "W");
	/* (only a socket's shutdown waits: sc_shutdown()) */
	if (e->shut_pending && !evbuffer_get_length(sc_out(e)))
		e->shut_pending = bt_shutdown(e->bev);
}

static void
sc_on_event(struct sc_end *e, short what)
{
	static const struct {
		short f;
		const char *n;
	} names[] = {
		{ BEV_EVENT_CONNECTED, "CONNECTED" }, { BEV_EVENT_EOF, "EOF" },
		{ BEV_EVENT_ERROR, "ERROR" }, { BEV_EVENT_TIMEOUT, "TIMEOUT" },
		{ BEV_EVENT_READING, "READING" },
		{ BEV_EVENT_WRITING, "WRITING" },
	};
	char f[64] = "", en[16] = "";
	int err = errno;	/* first: what the transport left */
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (what & names[i].f) {
			if (*f)
				strcat(f, "|");
			strcat(f, names[i].n);
		}
	if (what & BEV_EVENT_CONNECTED)
		e->up = 1;
	if (what & BEV_EVENT_TIMEOUT)
		e->timeouts++;
	if (e->sc->print_errors && (what & BEV_EVENT_ERROR))
		fprintf(stderr, "bufferevent %s: 0x%x, %s\n", e->name, what,
		    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		e->eof++;
		/* where reading stands, and what input holds, at EOF; and
		 * errno, when the scenario asks */
		if (e->errno_want && (what & BEV_EVENT_EOF))
			snprintf(en, sizeof(en), err == e->errno_want ?
			    ",kept" : ",errno%d", err);
		sc_tok(e, "ev:%s,%s,in%zu%s", f, sc_enstr(sc_enabled(e)),
		    evbuffer_get_length(sc_in(e)), en);
		if (e->reenable > 0) {
			e->reenable--;
			sc_enable(e, EV_READ);
		}
	} else {
		sc_tok(e, "ev:%s", f);
	}
}

static void
sc_bev_read(struct bufferevent *b, void *arg)
{
	(void)b;
	sc_on_read(arg);
}

static void
sc_bev_write(struct bufferevent *b, void *arg)
{
	(void)b;
	sc_on_write(arg);
}

static void
sc_bev_event(struct bufferevent *b, short what, void *arg)
{
	(void)b;
	sc_on_event(arg, what);
}

static void
sc_ch_read(struct evrdma_channel *ch, void *arg)
{
	(void)ch;
	sc_on_read(arg);
}

static void
sc_ch_write(struct evrdma_channel *ch, void *arg)
{
	(void)ch;
	sc_on_write(arg);
}

static void
sc_ch_event(struct evrdma_channel *ch, short what, void *arg)
{
	(void)ch;
	sc_on_event(arg, what);
}

struct evconnlistener *
sc_tcp_listen(struct event_base *eb, evconnlistener_cb cb, void *arg,
    struct sockaddr_in *sin)
{
	struct evconnlistener *l;
	socklen_t sl = sizeof(*sin);

	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = evconnlistener_new_bind(eb, cb, arg,
	    LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE, -1,
	    (struct sockaddr *)sin, sizeof(*sin));
	ck_assert_ptr_nonnull(l);
	ck_assert_int_eq(getsockname(evconnlistener_get_fd(l),
	    (struct sockaddr *)sin, &sl), 0);
	return l;
}

void
sc_set_bev(struct sc_end *e, struct bufferevent *bev)
{
	e->bev = bev;
	e->adapter = bt_is_adapter(bev);
	bufferevent_setcb(bev, sc_bev_read, sc_bev_write, sc_bev_event, e);
}

void
sc_set_ch(struct sc_end *e, struct evrdma_channel *ch)
{
	e->ch = ch;
	evrdma_channel_setcb(ch, sc_ch_read, sc_ch_write, sc_ch_event, e);
}

void
sc_accept_bev(struct bufferevent *bev, void *arg)
{
	struct sc *sc = arg;

	ck_assert_ptr_null(sc->s.bev);
	sc_set_bev(&sc->s, bev);
	sc_tok(&sc->s, "A");
	sc->s.up = 1;
}

void
sc_accept_ch(struct evrdma_listener *l, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct sc *sc = arg;

	(void)l;
	(void)peer;
	(void)socklen;
	ck_assert_ptr_null(sc->s.ch);
	sc_set_ch(&sc->s, ch);
	sc_tok(&sc->s, "A");
	sc->s.up = 1;
}

/* ==== a scenario's run ==== */

void
sc_init(struct sc *sc, struct event_base *eb, size_t big, unsigned quiet_ms)
{
	sc->eb = eb;
	sc->big = big;
	sc->quiet_ms = quiet_ms;
	sc->c.sc = sc->s.sc = sc;
	sc->c.name = "client";
	sc->s.name = "server";
	sc->zeros = calloc(1, big);
	ck_assert_ptr_nonnull(sc->zeros);
}

void
sc_play(struct sc *sc, void (*run)(struct sc *))
{
	struct sc_end *c = &sc->c, *s = &sc->s;

	SC_WAIT(sc, c->up && s->up);
	sc_quiet(sc);
	sc_tok(c, "%s", sc_enstr(sc_enabled(c)));
	sc_tok(s, "%s", sc_enstr(sc_enabled(s)));
	sc_enable(c, EV_READ);
	sc_enable(s, EV_READ);
	run(sc);
	sc_mark(sc, "end");
	sc_free(c);
	sc_free(s);
}

void
sc_fini(struct sc *sc)
{
	free(sc->zeros);
	sc->zeros = NULL;
}

/* ==== the scenarios ==== */

void
sc_basic(struct sc *sc)
{
	struct sc_end *c = &sc->c, *s = &sc->s;

	/* 1: read low watermark 100: no read callback for 60 bytes */
	sc_mark(sc, "lowmark");
	sc_setwm(s, EV_READ, 100, 0);
	sc_write(c, 60);
	SC_WAIT(sc, SC_INLEN(s) == 60);
	sc_quiet(sc);
	sc_mark(sc, "1b");
	sc_write(c, 60);
	SC_WAIT(sc, SC_INLEN(s) == 120);
	sc_quiet(sc);
	sc_mark(sc, "1c");
	sc_drain(s, 120);
	sc_quiet(sc);

	/* 2: read high watermark 1000: input stops there, resumes on drain */
	sc_mark(sc, "highmark");
	sc_setwm(s, EV_READ, 0, 1000);
	sc_write(c, 1000);
	SC_WAIT(sc, SC_INLEN(s) == 1000);
	sc_quiet(sc);
	sc_mark(sc, "2b");
	sc_write(c, 1000);
	SC_WAIT(sc, SC_OUTLEN(c) == 0);
	sc_quiet(sc);
	sc_tok(s, "in%zu", SC_INLEN(s));
	sc_mark(sc, "2c");
	sc_write(c, 1000);
	SC_WAIT(sc, SC_OUTLEN(c) == 0);
	sc_quiet(sc);
	sc_tok(s, "in%zu", SC_INLEN(s));
	sc_mark(sc, "2d");
	sc_drain(s, 1000);
	SC_WAIT(sc, SC_INLEN(s) == 1000);
	sc_quiet(sc);
	sc_mark(sc, "2e");
	sc_drain(s, 1000);
	SC_WAIT(sc, SC_INLEN(s) == 1000);
	sc_quiet(sc);
	sc_mark(sc, "2f");
	sc_drain(s, 1000);
	sc_quiet(sc);
	sc_tok(s, "in%zu", SC_INLEN(s));
	sc_setwm(s, EV_READ, 0, 0);

	/* 3: EV_WRITE off holds output; the write callback after it is sent */
	sc_mark(sc, "writeoff");
	sc_setwm(c, EV_WRITE, 2000, 0);
	sc_disable(c, EV_WRITE);
	sc_tok(c, "%s", sc_enstr(sc_enabled(c)));
	sc_write(c, 1500);
	sc_quiet(sc);
	sc_tok(c, "out%zu", SC_OUTLEN(c));
	sc_tok(s, "in%zu", SC_INLEN(s));
	sc_mark(sc, "3b");
	sc_enable(c, EV_WRITE);
	SC_WAIT(sc, SC_INLEN(s) == 1500);
	sc_quiet(sc);
	sc_mark(sc, "3c");
	sc_drain(s, 1500);
	sc_setwm(c, EV_WRITE, 0, 0);
	sc_quiet(sc);

	/* 4: the reader stops: output stays (the peer is held back); one
	 * write callback once it read everything */
	sc_mark(sc, "stall");
	sc_disable(s, EV_READ);
	sc_tok(s, "%s", sc_enstr(sc_enabled(s)));
	sc_write(c, sc->big);
	sc_quiet(sc);
	bt_loop_for(sc->eb, 500);
	sc_tok(c, SC_OUTLEN(c) > 0 ? "out>0" : "out0");
	sc_tok(s, "in%zu", SC_INLEN(s));
	sc_mark(sc, "4b");
	s->drain_mode = 1;
	sc_enable(s, EV_READ);
	SC_WAIT(sc, s->rx == sc->big);
	sc_quiet(sc);
	s->drain_mode = 0;
	sc_tok(c, "out%zu", SC_OUTLEN(c));

	/* 5: shutdown after data: all data, then EOF|READING */
	sc_mark(sc, "shutdown");
	sc_write(c, 3000);
	sc_shutdown(c);
	SC_WAIT(sc, s->eof);
	sc_quiet(sc);

	/* 6: the half-closed side still receives; then the other EOF */
	sc_mark(sc, "halfclose");
	sc_drain(s, SC_INLEN(s));
	sc_write(s, 500);
	SC_WAIT(sc, SC_INLEN(c) == 500);
	sc_quiet(sc);
	sc_mark(sc, "6b");
	sc_shutdown(s);
	SC_WAIT(sc, c->eof);
	sc_quiet(sc);
}

/*
 * Finding 9: the read high watermark is a cap. The libevent book's rot13
 * server ("A simple rot13 server with bufferevents", MAX_LINE 16384 as
 * its read high watermark) gets one line of 20,006 bytes (20,005 and the
 * newline, one write: one message of a channel's default 64 KiB slots). A
 * socket reads at most the mark, so the server finds no newline in 16,384
 * bytes, sends those on as a line of their own, and then the rest: the
 * client gets 16,384 + 3,621 characters. A channel or an RDMA
 * bufferevent must cut the same way, never hand over the whole message
 * past the mark.
 */
#define ROT13_MAX_LINE	16384
#define ROT13_LINE	20006

static char
rot13_char(char c)
{
	if ((c >= 'a' && c <= 'm') || (c >= 'A' && c <= 'M'))
		return (char)(c + 13);
	if ((c >= 'n' && c <= 'z') || (c >= 'N' && c <= 'Z'))
		return (char)(c - 13);
	return c;
}

/* The book's readcb, line by line; it logs what it sends on. */
static void
rot13_server_read(struct sc_end *e)
{
	struct evbuffer *input = sc_in(e), *output = sc_out(e);
	char *line;
	size_t n, i;

	while ((line = evbuffer_readln(input, &n, EVBUFFER_EOL_LF))) {
		for (i = 0; i < n; ++i)
			line[i] = rot13_char(line[i]);
		evbuffer_add(output, line, n);
		evbuffer_add(output, "\n", 1);
		free(line);
		sc_tok(e, "line%zu", n);
	}
	if (evbuffer_get_length(input) >= ROT13_MAX_LINE) {
		/* Too long; just process what there is and go on so that
		 * the buffer doesn't grow infinitely long. */
		char buf[1024];
		size_t cut = evbuffer_get_length(input);

		while (evbuffer_get_length(input)) {
			int k = evbuffer_remove(input, buf, sizeof(buf));

			for (i = 0; i < (size_t)k; ++i)
				buf[i] = rot13_char(buf[i]);
			evbuffer_add(output, buf, (size_t)k);
		}
		evbuffer_add(output, "\n", 1);
		sc_tok(e, "cut%zu", cut);
	}
}

/* Write callbacks that log nothing: when output drains depends on how
 * the transport buffers, which a scenario that logs lines leaves aside. */
static void
sc_quiet_write(struct sc_end *e)
{
	(void)e;
}

/* The client: the lines it gets back, each checked (rot13 of 'a'). */
static void
rot13_client_read(struct sc_end *e)
{
	char *line;
	size_t n, i;

	while ((line = evbuffer_readln(sc_in(e), &n, EVBUFFER_EOL_LF))) {
		for (i = 0; i < n; i++)
			ck_assert_int_eq(line[i], 'n');
		free(line);
		sc_tok(e, "L%zu", n);
	}
}

void
sc_hiwm_cut(struct sc *sc)
{
	struct sc_end *c = &sc->c, *s = &sc->s;
	char *line = malloc(ROT13_LINE);

	ck_assert_ptr_nonnull(line);
	memset(line, 'a', ROT13_LINE - 1);
	line[ROT13_LINE - 1] = '\n';
	s->on_read = rot13_server_read;
	c->on_read = rot13_client_read;
	s->on_write = c->on_write = sc_quiet_write;
	sc_setwm(s, EV_READ, 0, ROT13_MAX_LINE);
	sc_mark(sc, "rot13");
	ck_assert_int_eq(evbuffer_add(sc_out(c), line, ROT13_LINE), 0);
	free(line);
	SC_WAIT(sc, SC_OUTLEN(c) == 0 && SC_OUTLEN(s) == 0 &&
	    SC_INLEN(s) == 0 && SC_INLEN(c) == 0);
	sc_quiet(sc);
	s->on_read = c->on_read = NULL;
	s->on_write = c->on_write = NULL;
}

/*
 * Finding 9, continued: lowering the mark holds what comes next back.
 * 1000 bytes in input; the mark set to 1500 lets 500 of the next 1000 in;
 * set to 1000 (below what input holds) it lets none of a third 1000 in;
 * drained, input takes the mark's worth (the rest of the second write and
 * half of the third), then the rest.
 */
void
sc_hiwm_lower(struct sc *sc)
{
	struct sc_end *c = &sc->c, *s = &sc->s;

	sc_mark(sc, "nomark");
	sc_write(c, 1000);
	SC_WAIT(sc, SC_INLEN(s) >= 1000);
	sc_quiet(sc);
	sc_mark(sc, "mark1500");
	sc_setwm(s, EV_READ, 0, 1500);
	sc_write(c, 1000);
	SC_WAIT(sc, SC_INLEN(s) >= 1500);
	sc_quiet(sc);
	sc_tok(s, "in%zu", SC_INLEN(s));
	sc_mark(sc, "mark1000");
	sc_setwm(s, EV_READ, 0, 1000);
	sc_write(c, 1000);
	SC_WAIT(sc, SC_OUTLEN(c) == 0);
	sc_quiet(sc);
	sc_tok(s, "in%zu", SC_INLEN(s));
	sc_mark(sc, "drain");
	sc_drain(s, SC_INLEN(s));
	SC_WAIT(sc, SC_INLEN(s) >= 1000 || s->drained + SC_INLEN(s) == 3000);
	sc_quiet(sc);
	sc_mark(sc, "drain2");
	sc_drain(s, SC_INLEN(s));
	SC_WAIT(sc, SC_INLEN(s) >= 500 || s->drained + SC_INLEN(s) == 3000);
	sc_quiet(sc);
	sc_tok(s, "in%zu", SC_INLEN(s));
	sc_drain(s, SC_INLEN(s));
	sc_setwm(s, EV_READ, 0, 0);
	sc_quiet(sc);
}

/*
 * Finding 10: no read timeout while input is held at the high watermark
 * (a socket bufferevent suspends reading, and its timeout, there). The
 * server's read timeout (SC_TMO_US) counts while input fills to the mark;
 * held there with more data waiting, it does not fire however long it
 * waits; drained, reading resumes (input fills again, held again), and
 * once nothing more comes the timeout fires.
 */
#define SC_TMO_US	1000000
#define SC_HOLD_MS	2500	/* well past the timeout */

void
sc_rdtimeout_held(struct sc *sc)
{
	struct sc_end *c = &sc->c, *s = &sc->s;

	sc_mark(sc, "fill");
	sc_setwm(s, EV_READ, 0, 1000);
	sc_settimeouts(s, SC_TMO_US, -1);
	sc_write(c, 1000);
	SC_WAIT(sc, SC_INLEN(s) >= 1000);
	sc_quiet(sc);
	sc_mark(sc, "held");
	sc_write(c, 1000);
	SC_WAIT(sc, SC_OUTLEN(c) == 0);
	sc_quiet(sc);
	bt_loop_for(sc->eb, SC_HOLD_MS);
	sc_tok(s, "in%zu,%s", SC_INLEN(s), sc_enstr(sc_enabled(s)));
	sc_mark(sc, "drain");
	sc_drain(s, SC_INLEN(s));
	SC_WAIT(sc, SC_INLEN(s) >= 1000 || s->timeouts);
	sc_quiet(sc);
	sc_mark(sc, "drain2");
	sc_drain(s, SC_INLEN(s));
	SC_WAIT(sc, s->timeouts);
	sc_quiet(sc);
	sc_tok(s, "in%zu,%s", SC_INLEN(s), sc_enstr(sc_enabled(s)));
	sc_settimeouts(s, -1, -1);
	sc_setwm(s, EV_READ, 0, 0);
}

/*
 * Finding 11: one write timeout, not a second while EV_WRITE is disabled.
 * The server stops reading; the client's sc.big bytes stall and its write
 * timeout fires (disabling EV_WRITE). The server reads what reached it
 * (a channel gets its credits back): with EV_WRITE off nothing is sent and
 * no second timeout comes. Enabled again, everything goes, then one write
 * callback.
 */
void
sc_wrtimeout_once(struct sc *sc)
{
	struct sc_end *c = &sc->c, *s = &sc->s;

	sc_mark(sc, "stall");
	sc_disable(s, EV_READ);
	sc_settimeouts(c, -1, SC_TMO_US);
	sc_write(c, sc->big);
	SC_WAIT(sc, c->timeouts);
	sc_quiet(sc);
	sc_tok(c, "%s", sc_enstr(sc_enabled(c)));
	sc_mark(sc, "credits");
	s->drain_mode = 1;
	sc_enable(s, EV_READ);
	SC_WAIT(sc, s->rx > 0);
	sc_quiet(sc);
	bt_loop_for(sc->eb, SC_HOLD_MS);
	sc_tok(c, "%s,%s", sc_enstr(sc_enabled(c)),
	    SC_OUTLEN(c) > 0 ? "out>0" : "out0");
	sc_mark(sc, "resume");
	sc_enable(c, EV_WRITE);
	SC_WAIT(sc, s->rx == sc->big);
	sc_quiet(sc);
	s->drain_mode = 0;
	sc_settimeouts(c, -1, -1);
	sc_tok(c, "out%zu", SC_OUTLEN(c));
}

/*
 * Finding 14: writing after the peer is gone gives ERROR|WRITING. The
 * peer (the server) frees its end with bytes it never read: a socket then
 * resets the connection, a channel ends it at once (DISCONNECTED). The
 * client, reading disabled and with bytes of its own unread (so that a
 * channel, too, has nothing to say until it writes; see
 * channel_end_with_reading_off for what it says otherwise), writes:
 * ERROR|WRITING, and EV_WRITE is disabled.
 */
void
sc_write_after_reset(struct sc *sc)
{
	struct sc_end *c = &sc->c, *s = &sc->s;

	sc_mark(sc, "unread");
	sc_disable(c, EV_READ);
	sc_disable(s, EV_READ);
	sc_write(c, 100);
	sc_write(s, 100);
	SC_WAIT(sc, SC_OUTLEN(c) == 0 && SC_OUTLEN(s) == 0);
	sc_quiet(sc);
	sc_mark(sc, "reset");
	sc_free(s);
	sc_quiet(sc);
	sc_mark(sc, "write");
	sc_write(c, 100);
	SC_WAIT(sc, c->eof);
	sc_quiet(sc);
}

/*
 * Finding 14, after the reset was reported: the client reads, so it hears
 * of the reset at once (ERROR|READING); what it writes after that cannot
 * go either, and says so (ERROR|WRITING, as a socket's EPIPE), rather
 * than wait in output forever.
 */
void
sc_write_after_error(struct sc *sc)
{
	struct sc_end *c = &sc->c, *s = &sc->s;

	sc_mark(sc, "unread");
	sc_disable(s, EV_READ);
	sc_write(c, 100);
	SC_WAIT(sc, SC_OUTLEN(c) == 0);
	sc_quiet(sc);
	sc_mark(sc, "reset");
	sc_free(s);
	SC_WAIT(sc, c->eof);
	sc_quiet(sc);
	sc_mark(sc, "write");
	sc_write(c, 100);
	sc_quiet(sc);
	bt_loop_for(sc->eb, 500);
	sc_tok(c, "out%zu", SC_OUTLEN(c));
}
