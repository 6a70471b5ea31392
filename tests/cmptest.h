/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma tests: the scripted scenarios that compare callbacks with those of
 * libevent's socket bufferevent, shared by test_chan_compare.c (channels)
 * and test_bev_compare.c (the backends of bevtest.h). A scenario runs on
 * two ends, each a bufferevent or a channel, recording every callback as a
 * token in the end's log. Each step acts, runs the loop until a buffer
 * condition holds (never until the callback under test), then until
 * nothing happened for sc.quiet_ms (a socket's next callback follows
 * within milliseconds, an RDMA one in the guest, under the sanitizers, may
 * take longer). The step sizes are chosen so that TCP's read granularity
 * and a channel's slots agree (each write fits one slot and one TCP read;
 * high watermark = one write), or the scenario logs only what the
 * application sees (lines), not how reads were cut. The test programs open
 * the ends, each on its own transports, and compare the logs; the
 * scenarios both run are here, with what bufferevent_socket logs in them
 * (SC_*_CLIENT, SC_*_SERVER).
 */
#ifndef EVRDMA_CMPTEST_H_INCLUDED_
#define EVRDMA_CMPTEST_H_INCLUDED_

#include <netinet/in.h>

#include <evrdma/channel.h>

#include "bevtest.h"

/* A TCP listener on 127.0.0.1, on a port the kernel picks; *@p sin is
 * its address. */
struct evconnlistener *sc_tcp_listen(struct event_base *eb,
    evconnlistener_cb cb, void *arg, struct sockaddr_in *sin);

struct sc;

/* One end of a scenario: a bufferevent (bev) or a channel (ch). */
struct sc_end {
	struct sc *sc;
	const char *name;
	struct bufferevent *bev;
	int adapter;			/* bev is an RDMA bufferevent */
	int shut_pending;		/* sc_shutdown() once output drained */
	struct evrdma_channel *ch;
	char log[2048];
	char last[64];
	int drain_mode;		/* read cb drains; repeated tokens fold */
	uint64_t rx;
	size_t last_rlen;	/* input length at the last read callback */
	int rlen_valid;		/* no drain since then */
	uint64_t drained;	/* bytes sc_drain() took */
	unsigned repeats;	/* read callbacks without new data */
	int up, eof, timeouts;
	/* at EOF: log whether errno is still this (0: not logged), as the
	 * application left it before the loop ran (a socket's read of 0
	 * sets none) */
	int errno_want;
	/* at EOF or an error: enable EV_READ again inside the event
	 * callback, this many more times */
	int reenable;
	/* a scenario's own read or write callback (then only it logs) */
	void (*on_read)(struct sc_end *);
	void (*on_write)(struct sc_end *);
	int nwrite, depth, max_depth;	/* the flushing write callback */
	int wrote;		/* sc_write() since the last write callback */
};

/* A scenario's two ends and loop; a test program's own state around it. */
struct sc {
	struct event_base *eb;
	uint8_t *zeros;		/* what sc_write() writes: big bytes */
	size_t big;		/* the largest write (the program's SC_BIG) */
	unsigned quiet_ms;	/* no callback for this long: they are over */
	int print_errors;	/* print a bufferevent's errors, with errno */
	struct sc_end c, s;
	unsigned act;		/* tokens logged: sc_quiet() waits for none */
};

#define SC_WAIT(sc, cond) BT_WAIT((sc)->eb, cond, 60000)
#define SC_INLEN(e) evbuffer_get_length(sc_in(e))
#define SC_OUTLEN(e) evbuffer_get_length(sc_out(e))

/* Log token @p fmt on @p e (in drain mode, a repeated token once). */
void sc_tok(struct sc_end *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Log the start of step @p step on both ends. */
void sc_mark(struct sc *sc, const char *step);
/* EV_READ and EV_WRITE of @p en as a token: e-, eR, eW, eRW */
const char *sc_enstr(short en);

/* The end's buffers and bufferevent_*() or evrdma_channel_*() on it. */
struct evbuffer *sc_in(struct sc_end *e);
struct evbuffer *sc_out(struct sc_end *e);
short sc_enabled(struct sc_end *e);
void sc_enable(struct sc_end *e, short ev);
void sc_disable(struct sc_end *e, short ev);
void sc_setwm(struct sc_end *e, short ev, size_t lo, size_t hi);
/* Read and write timeouts in microseconds; -1: none. */
void sc_settimeouts(struct sc_end *e, long rd_us, long wr_us);
/* Write @p n zeros (at most sc.big). */
void sc_write(struct sc_end *e, size_t n);
/* Shut down writing after what output holds (a socket: shutdown() once
 * output has drained, as a channel and an adapter do). */
void sc_shutdown(struct sc_end *e);
void sc_free(struct sc_end *e);
/* The driver drains input (never the read callback, outside drain mode). */
void sc_drain(struct sc_end *e, size_t n);
/* Run the loop until no callback came for sc.quiet_ms. */
void sc_quiet(struct sc *sc);

/* @p e is @p bev (or @p ch), with the scenario's logging callbacks. */
void sc_set_bev(struct sc_end *e, struct bufferevent *bev);
void sc_set_ch(struct sc_end *e, struct evrdma_channel *ch);
/* Accept callbacks (bt_accept_fn, evrdma_channel_accept_cb) whose @p arg
 * is the struct sc: the server's end, logged "A". */
void sc_accept_bev(struct bufferevent *bev, void *arg);
void sc_accept_ch(struct evrdma_listener *l, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg);

/* A zeroed @p sc on @p eb: its ends and what it writes. */
void sc_init(struct sc *sc, struct event_base *eb, size_t big,
    unsigned quiet_ms);
/* Once the client connects: wait until both ends are up, log what each
 * has enabled, enable EV_READ, run @p run, log "end", free both ends. */
void sc_play(struct sc *sc, void (*run)(struct sc *));
void sc_fini(struct sc *sc);

/* ---- the scenarios, and what bufferevent_socket (libevent 2.1) logs ---- */

/* Watermarks, EV_WRITE off, a reader that stops, shutdown, half-close.
 * Ring: 4 x 4096, max input 8192. */
void sc_basic(struct sc *sc);
#define SC_BASIC_CLIENT							\
	" ev:CONNECTED eW |lowmark W |1b W |1c"				\
	" |highmark W |2b W |2c W |2d |2e |2f |writeoff eR out1500 |3b W" \
	" |3c |stall out>0 |4b W out0 |shutdown W |halfclose R500"	\
	" |6b ev:EOF|READING,eW,in500 |end"
#define SC_BASIC_SERVER							\
	" A eW |lowmark |1b R120 |1c"					\
	" |highmark R1000 |2b in1000 |2c in1000 |2d R1000 |2e R1000 |2f" \
	" in0 |writeoff in0 |3b R1500 |3c |stall eW in0 |4b R*"		\
	" |shutdown R3000 ev:EOF|READING,eW,in3000 |halfclose W |6b |end"

/* Finding 9: the read high watermark cuts a line (the libevent book's
 * rot13 server). Ring: the default. */
void sc_hiwm_cut(struct sc *sc);
#define SC_HIWM_CUT_CLIENT " ev:CONNECTED eW |rot13 L16384 L3621 |end"
#define SC_HIWM_CUT_SERVER " A eW |rot13 cut16384 line3621 |end"

/* Finding 9: a lowered high watermark holds back. Ring: as sc_basic. */
void sc_hiwm_lower(struct sc *sc);
#define SC_HIWM_LOWER_CLIENT						\
	" ev:CONNECTED eW |nomark W |mark1500 W |mark1000 W |drain |drain2" \
	" |end"
#define SC_HIWM_LOWER_SERVER						\
	" A eW |nomark R1000 |mark1500 R1500 in1500 |mark1000 in1500"	\
	" |drain R1000 |drain2 R500 in500 |end"

/* Finding 10: no read timeout while held. Ring: as sc_basic. */
void sc_rdtimeout_held(struct sc *sc);
#define SC_RDTIMEOUT_HELD_CLIENT					\
	" ev:CONNECTED eW |fill W |held W |drain |drain2 |end"
#define SC_RDTIMEOUT_HELD_SERVER					\
	" A eW |fill R1000 |held in1000,eRW |drain R1000 |drain2"	\
	" ev:TIMEOUT|READING in0,eW |end"

/* Finding 11: one write timeout. Ring: as sc_basic. */
void sc_wrtimeout_once(struct sc *sc);
#define SC_WRTIMEOUT_ONCE_CLIENT					\
	" ev:CONNECTED eW |stall ev:TIMEOUT|WRITING eR |credits eR,out>0" \
	" |resume W out0 |end"
#define SC_WRTIMEOUT_ONCE_SERVER					\
	" A eW |stall |credits R* |resume R* |end"

/* Finding 14: write after reset. Ring: as sc_basic. */
void sc_write_after_reset(struct sc *sc);
#define SC_WRITE_AFTER_RESET_CLIENT					\
	" ev:CONNECTED eW |unread W |reset |write"			\
	" ev:ERROR|WRITING,e-,in0 |end"
#define SC_WRITE_AFTER_RESET_SERVER					\
	" A eW |unread W |reset |write |end"

/* Finding 14: write after the reset was reported. Ring: as sc_basic. */
void sc_write_after_error(struct sc *sc);
#define SC_WRITE_AFTER_ERROR_CLIENT					\
	" ev:CONNECTED eW |unread W |reset ev:ERROR|READING,eW,in0 |write" \
	" ev:ERROR|WRITING,e-,in0 out100 |end"
#define SC_WRITE_AFTER_ERROR_SERVER					\
	" A eW |unread |reset |write |end"

#endif /* EVRDMA_CMPTEST_H_INCLUDED_ */
