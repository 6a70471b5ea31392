/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests, channels: the receive callback
 * (evrdma_channel_set_recv_cb()), which takes arrivals straight from the
 * receive ring while input is empty. Echoes in both modes with the
 * callback handing over to input and the read callback and back (order
 * kept), flow control while it disables reading, EOF after its last call,
 * and a free from inside it.
 */
#include "chtest.h"

#define RC_TOTAL	(3 * MiB)
#define RC_MSGS		400

/* The server of the receive-callback checks: it checks what arrives
 * against the client's stream (or messages) and echoes it back. Both ends'
 * ep.ctx point to it. */
struct rc {
	struct ep *e;
	int mode;
	uint64_t rx;			/* bytes (stream) or messages checked */
	const size_t *lens;		/* message mode: the lengths sent */
	int ncb;			/* receive callback calls */
	uint64_t via_input;		/* bytes (or messages) through input */
	int every;			/* each every-th call hands over to input */
	int echo;
	int disable_at, free_at;	/* at that call: disable EV_READ, free */
	int after_end;			/* calls after EOF or ERROR */
	uint8_t *buf;
};

/* Check one arrival (the next bytes, or the next message) and echo it. */
static void
rc_take(struct rc *r, const void *data, size_t len)
{
	size_t bad;

	if (r->mode == EVRDMA_CHANNEL_MESSAGE) {
		ck_assert_msg(r->rx < RC_MSGS, "more messages than sent");
		ck_assert_msg(len == r->lens[r->rx], "message %llu: %zu "
		    "bytes, sent %zu", (unsigned long long)r->rx, len,
		    r->lens[r->rx]);
		bad = pat_check(data, 0, len, 0xa5a50000u + (unsigned)r->rx);
		r->rx++;
	} else {
		bad = pat_check(data, r->rx, len, r->e->rx_seed);
		r->rx += len;
	}
	ck_assert_msg(bad == (size_t)-1, "byte %zu of an arrival is wrong",
	    bad);
	if (r->echo)
		ck_assert_int_eq(evrdma_channel_write(r->e->ch, data, len), 0);
}

static void rc_readcb(struct evrdma_channel *ch, void *arg);

static void
rc_recvcb(struct evrdma_channel *ch, const void *data, size_t len,
    void *arg)
{
	struct rc *r = ((struct ep *)arg)->ctx;

	ck_assert_msg(!r->e->freed, "receive callback after free");
	ck_assert_ptr_eq(arg, r->e);
	ck_assert_ptr_eq(ch, r->e->ch);
	/* only while input is empty */
	ck_assert_uint_eq(evbuffer_get_length(evrdma_channel_get_input(ch)),
	    0);
	if (r->e->ends)
		r->after_end++;
	r->ncb++;
	rc_take(r, data, len);
	if (r->every && r->ncb % r->every == 0) {
		/* what comes next goes through input and the read
		 * callback, which hands back to us */
		ck_assert_int_eq(evrdma_channel_set_recv_cb(ch, NULL), 0);
	}
	if (r->ncb == r->disable_at)
		ck_assert_int_eq(evrdma_channel_disable(ch, EV_READ), 0);
	if (r->ncb == r->free_at)
		ep_free(r->e);
}

/* Input: check and echo what is there, then take the receive callback
 * back. */
static void
rc_readcb(struct evrdma_channel *ch, void *arg)
{
	struct rc *r = ((struct ep *)arg)->ctx;
	struct evbuffer *in = evrdma_channel_get_input(ch);
	ssize_t len;

	ck_assert_ptr_eq(arg, r->e);
	if (r->mode == EVRDMA_CHANNEL_MESSAGE) {
		while ((len = evrdma_channel_read_message(ch, r->buf,
		    64 * KiB)) >= 0) {
			rc_take(r, r->buf, (size_t)len);
			r->via_input++;
		}
	} else {
		while ((len = (ssize_t)evbuffer_get_length(in)) > 0) {
			if (len > 64 * KiB)
				len = 64 * KiB;
			ck_assert_int_eq(evbuffer_remove(in, r->buf,
			    (size_t)len), len);
			rc_take(r, r->buf, (size_t)len);
			r->via_input += (uint64_t)len;
		}
	}
	ck_assert_int_eq(evrdma_channel_set_recv_cb(ch, rc_recvcb), 0);
}

/* Client side of message mode: the echoed messages, checked. */
static void
rc_msg_readcb(struct evrdma_channel *ch, void *arg)
{
	struct ep *e = arg;
	struct rc *r = e->ctx;
	uint8_t *buf = r->buf + 64 * KiB;
	ssize_t len;

	while ((len = evrdma_channel_read_message(ch, buf, 64 * KiB)) >= 0) {
		ck_assert_msg((size_t)len == r->lens[e->rx], "echo %llu: "
		    "%zd bytes", (unsigned long long)e->rx, len);
		ck_assert(pat_check(buf, 0, (size_t)len, 0xa5a50000u +
		    (unsigned)e->rx) == (size_t)-1);
		e->rx++;
	}
}

/* A connected pair whose server takes its data with rc_recvcb(). */
static void
rc_open(struct dt_env *env, struct chp *p, struct rc *r, int mode)
{
	memset(p, 0, sizeof(*p));
	memset(r, 0, sizeof(*r));
	dt_env_init(env, NULL);
	chp_open(p, env, mode, 1);
	r->e = p->srv;
	r->mode = mode;
	r->buf = malloc(128 * KiB);
	ck_assert_ptr_nonnull(r->buf);
	p->srv->ctx = p->cli.ctx = r;
	p->srv->rx_seed = p->cli.tx_seed;
	evrdma_channel_setcb(p->srv->ch, rc_readcb, NULL, ep_eventcb, p->srv);
	ck_assert_int_eq(evrdma_channel_set_recv_cb(p->srv->ch, rc_recvcb), 0);
}

/*
 * Variant 0 (stream) and 1 (message): the client sends 3 MiB of random
 * writes (or 400 messages of random sizes, up to a slot: pulled ones
 * too); the server takes them with a receive callback, checks them and
 * echoes each with evrdma_channel_write() from the callback. Every 7th
 * call hands over to input and the read callback (which echoes from
 * there and takes the receive callback back), so the two paths alternate
 * and must keep the order. Both directions arrive byte-exact.
 */
START_TEST(channel_recv_cb_echo)
{
	int mode = _i ? EVRDMA_CHANNEL_MESSAGE : EVRDMA_CHANNEL_STREAM;
	struct dt_env env;
	struct chp p;
	struct rc r;
	size_t lens[RC_MSGS];
	uint64_t rng = 0x7263636200ull + (unsigned)_i;
	uint8_t *buf;
	int i;

	rc_open(&env, &p, &r, mode);
	r.lens = lens;
	r.every = 7;
	r.echo = 1;
	errno = 0;
	ck_assert_int_eq(evrdma_channel_set_recv_cb(NULL, rc_recvcb), -1);
	ck_assert_int_eq(errno, EINVAL);
	if (mode == EVRDMA_CHANNEL_STREAM) {
		/* the echo, checked against the client's own stream */
		p.cli.drain = 1;
		p.cli.rx_seed = p.cli.tx_seed;
		p.cli.tx_total = RC_TOTAL;
		p.cli.zc_rng = rng;	/* random sizes, up to a slot */
		p.cli.pump_in_wcb = 1;
		p.cli.pump_hi = 512 * KiB;
		ep_pump(&p.cli);
		CH_WAIT(env.eb, p.cli.rx >= RC_TOTAL || p.cli.ends ||
		    p.srv->ends, 60000);
		ck_assert_uint_eq(r.rx, RC_TOTAL);
		ck_assert_uint_eq(p.cli.rx, RC_TOTAL);
	} else {
		size_t max = evrdma_channel_max_message(p.cli.ch);

		buf = malloc(max);
		ck_assert_ptr_nonnull(buf);
		lens[0] = 1;
		lens[1] = max;
		for (i = 2; i < RC_MSGS; i++)
			lens[i] = rng_range(&rng, 1, max);
		evrdma_channel_setcb(p.cli.ch, rc_msg_readcb, NULL,
		    ep_eventcb, &p.cli);
		for (i = 0; i < RC_MSGS; i++) {
			pat_fill(buf, 0, lens[i], 0xa5a50000u + (unsigned)i);
			ck_assert_int_eq(evrdma_channel_write(p.cli.ch, buf,
			    lens[i]), 0);
		}
		free(buf);
		CH_WAIT(env.eb, p.cli.rx >= RC_MSGS || p.cli.ends ||
		    p.srv->ends, 60000);
		ck_assert_uint_eq(r.rx, RC_MSGS);
		ck_assert_uint_eq(p.cli.rx, RC_MSGS);
	}
	ch_loop_for(env.eb, 300);
	fprintf(stderr, "channel recv cb (%s): %d callbacks, %llu %s through "
	    "input\n", _i ? "message" : "stream", r.ncb,
	    (unsigned long long)r.via_input, _i ? "messages" : "bytes");
	ck_assert_int_gt(r.ncb, 10);
	ck_assert_uint_gt(r.via_input, 0);
	ck_assert_int_eq(p.srv->ends + p.cli.ends, 0);
	chp_close(&p);
	free(r.buf);
	dt_env_fini(&env);
}
END_TEST

enum { RCF_DISABLE, RCF_EOF, RCF_FREE, RCF_COUNT };

/*
 * Variant RCF_DISABLE: the receive callback disables EV_READ at its 3rd
 * call; nothing more is handed over, the client is held back by flow
 * control (its output keeps bytes), and once EV_READ is enabled again
 * everything arrives in order. RCF_EOF: the client shuts down after its
 * bytes; the callback gets them all, then EOF, then no call. RCF_FREE:
 * the callback frees the channel at its 2nd call; no callback after
 * that, the client sees the end, nothing leaks.
 */
START_TEST(channel_recv_cb_flow)
{
	struct dt_env env;
	struct chp p;
	struct rc r;
	const uint64_t total = 4 * MiB;	/* 4x the peer's ring */
	size_t out;

	rc_open(&env, &p, &r, EVRDMA_CHANNEL_STREAM);
	p.cli.tx_total = total;
	switch (_i) {
	case RCF_DISABLE:
		r.disable_at = 3;
		ep_pump(&p.cli);
		ch_loop_for(env.eb, 1500);
		ck_assert_int_eq(r.ncb, 3);
		out = evbuffer_get_length(evrdma_channel_get_output(p.cli.ch));
		fprintf(stderr, "channel recv cb: reading disabled, the "
		    "writer keeps %zu of %llu bytes\n", out,
		    (unsigned long long)total);
		ck_assert_uint_ge(out, total - 2 * MiB);
		ck_assert_int_eq(evrdma_channel_enable(p.srv->ch, EV_READ), 0);
		CH_WAIT(env.eb, r.rx >= total || p.srv->ends, 60000);
		ck_assert_uint_eq(r.rx, total);
		ck_assert_uint_eq(r.via_input, 0);
		ck_assert_int_eq(p.cli.ends + p.srv->ends, 0);
		break;
	case RCF_EOF:
		ep_pump(&p.cli);
		ck_assert_int_eq(evrdma_channel_shutdown(p.cli.ch), 0);
		CH_WAIT(env.eb, p.srv->ends, 60000);
		ch_loop_for(env.eb, 300);
		ck_assert_int_eq(p.srv->what, BEV_EVENT_EOF | BEV_EVENT_READING);
		ck_assert_uint_eq(r.rx, total);
		ck_assert_uint_eq(p.srv->rx_at_end, 0);	/* input unused */
		ck_assert_int_eq(r.after_end, 0);
		ck_assert_int_eq(p.cli.ends, 0);
		break;
	case RCF_FREE:
		r.free_at = 2;
		ep_pump(&p.cli);
		CH_WAIT(env.eb, p.srv->freed, 20000);
		CH_WAIT(env.eb, p.cli.ends, 20000);
		ch_loop_for(env.eb, 300);
		ck_assert_int_eq(r.ncb, 2);
		ck_assert_int_eq(p.srv->nread + p.srv->nevent, 0);
		ck_assert_int_eq(p.cli.ends, 1);
		break;
	}
	chp_close(&p);
	free(r.buf);
	dt_env_fini(&env);
}
END_TEST

/*
 * The start of a message cut at the read high watermark goes into input
 * by reference; the read callback moves that chain out of input, into an
 * evbuffer of its own, and takes the receive callback, which then gets
 * the message's rest straight from the ring while input is empty. The
 * buffer must stay the application's until its chain goes: released with
 * the rest's delivery (as it was: found by review), it went back to the
 * peer, whose later messages landed in it and changed the bytes the
 * application held, and the chain's cleanup released it a second time.
 * The client sends CUT_MSGS more messages, enough to come round the
 * ring twice; the bytes held must stay the stream's, and every later
 * byte arrive in order.
 */
/* The client writes @p n messages of @p len bytes of stream @p seed from
 * offset @p sent, each once the server took the one before (*@p rx counts
 * what it took): the offset after them. */
static uint64_t
one_at_a_time(struct dt_env *env, struct chp *p, uint8_t *buf, uint64_t sent,
    size_t len, int n, uint64_t seed, const uint64_t *rx)
{
	int i;

	for (i = 0; i < n && !p->srv->ends; i++) {
		pat_fill(buf, sent, len, seed);
		ck_assert_int_eq(evrdma_channel_write(p->cli.ch, buf, len), 0);
		sent += len;
		CH_WAIT(env->eb, *rx == sent || p->srv->ends, 10000);
	}
	return sent;
}

#define CUT_HI		2000
#define CUT_FIRST	3000
#define CUT_LEN		4000
#define CUT_MSGS	96

struct cut {
	struct evbuffer *held;		/* the moved chain */
	uint64_t seed, rx;		/* through the receive callback */
	size_t bad;
};

static void
cut_recvcb(struct evrdma_channel *ch, const void *data, size_t len,
    void *arg)
{
	struct ep *e = arg;
	struct cut *c = e->ctx;
	size_t at = pat_check(data, c->rx, len, c->seed);

	(void)ch;
	if (at != (size_t)-1 && !c->bad)
		c->bad = (size_t)c->rx + at + 1;
	c->rx += len;
}

static void
cut_readcb(struct evrdma_channel *ch, void *arg)
{
	struct ep *e = arg;
	struct cut *c = e->ctx;
	struct evbuffer *in = evrdma_channel_get_input(ch);

	/* the first read callback only: input is the cut message's start */
	ck_assert_uint_eq(evbuffer_get_length(c->held), 0);
	ck_assert_uint_eq(evbuffer_get_length(in), CUT_HI);
	ck_assert_int_eq(evbuffer_add_buffer(c->held, in), 0);
	c->rx = CUT_HI;
	ck_assert_int_eq(evrdma_channel_set_recv_cb(ch, cut_recvcb), 0);
}

START_TEST(channel_recv_cb_after_moved_ref)
{
	struct dt_env env;
	struct chp p;
	struct cut c;
	uint8_t *buf = malloc(CUT_LEN);
	uint64_t sent = 0;
	size_t at;

	ck_assert_ptr_nonnull(buf);
	memset(&p, 0, sizeof(p));
	memset(&c, 0, sizeof(c));
	dt_env_init(&env, NULL);
	chp_open(&p, &env, EVRDMA_CHANNEL_STREAM, 1);
	c.held = evbuffer_new();
	ck_assert_ptr_nonnull(c.held);
	c.seed = p.cli.tx_seed;
	p.srv->ctx = &c;
	evrdma_channel_setcb(p.srv->ch, cut_readcb, NULL, ep_eventcb, p.srv);
	evrdma_channel_setwatermark(p.srv->ch, EV_READ, 0, CUT_HI);
	/* one message, cut: its start by reference (CUT_HI >= 1 KiB) */
	pat_fill(buf, 0, CUT_FIRST, c.seed);
	ck_assert_int_eq(evrdma_channel_write(p.cli.ch, buf, CUT_FIRST), 0);
	sent = CUT_FIRST;
	CH_WAIT(env.eb, c.rx == CUT_FIRST || p.srv->ends, 10000);
	ck_assert_uint_eq(c.rx, CUT_FIRST);
	/* the ring comes round: one message at a time, each taken */
	sent = one_at_a_time(&env, &p, buf, sent, CUT_LEN, CUT_MSGS, c.seed,
	    &c.rx);
	ck_assert_int_eq(p.srv->ends + p.cli.ends, 0);
	ck_assert_uint_eq(c.rx, sent);
	ck_assert_msg(c.bad == 0, "byte %zu through the receive callback is "
	    "wrong", c.bad - 1);
	at = pat_check(evbuffer_pullup(c.held, -1), 0, CUT_HI, c.seed);
	ck_assert_msg(at == (size_t)-1, "byte %zu of the chain held is no "
	    "longer what arrived", at);
	/* the chain goes: its buffer goes back now, once */
	evbuffer_free(c.held);
	ch_loop_for(env.eb, 200);
	ck_assert_int_eq(p.srv->ends + p.cli.ends, 0);
	pat_fill(buf, sent, CUT_LEN, c.seed);
	ck_assert_int_eq(evrdma_channel_write(p.cli.ch, buf, CUT_LEN), 0);
	sent += CUT_LEN;
	CH_WAIT(env.eb, c.rx == sent || p.srv->ends, 10000);
	ck_assert_uint_eq(c.rx, sent);
	ck_assert_int_eq(p.srv->ends + p.cli.ends, 0);
	chp_close(&p);
	free(buf);
	dt_env_fini(&env);
}
END_TEST

/*
 * The application takes every byte out of input from an evbuffer callback
 * of its own, which libevent runs inside the add: the chain of a message
 * added by reference is gone before the add returns (its cleanup ran).
 * The buffer must go back once, and the stream go on: 64 messages of
 * 4 KiB, four times round the default ring. (Found by review: the
 * reference was counted after the add, so the cleanup found none, the
 * channel failed with INTERNAL, and the buffer was never released.)
 */
#define TA_LEN		4096
#define TA_MSGS		64

struct takeall {
	uint64_t seed, rx;
	size_t bad;
	uint8_t tmp[TA_LEN];
};

static void
ta_input_cb(struct evbuffer *in, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct takeall *t = arg;
	size_t n, at;

	if (!info->n_added)
		return;
	while ((n = evbuffer_get_length(in))) {
		n = n > sizeof(t->tmp) ? sizeof(t->tmp) : n;
		ck_assert_int_eq(evbuffer_remove(in, t->tmp, n), (int)n);
		at = pat_check(t->tmp, t->rx, n, t->seed);
		if (at != (size_t)-1 && !t->bad)
			t->bad = (size_t)t->rx + at + 1;
		t->rx += n;
	}
}

/* A pair whose server's input has ta_input_cb(), taking what comes. */
static void
ta_open(struct dt_env *env, struct chp *p, struct takeall *t)
{
	memset(p, 0, sizeof(*p));
	memset(t, 0, sizeof(*t));
	dt_env_init(env, NULL);
	chp_open(p, env, EVRDMA_CHANNEL_STREAM, 1);
	t->seed = p->cli.tx_seed;
	ck_assert_ptr_nonnull(evbuffer_add_cb(evrdma_channel_get_input(
	    p->srv->ch), ta_input_cb, t));
}

START_TEST(channel_input_taken_inside_the_add)
{
	struct dt_env env;
	struct chp p;
	static struct takeall t;
	uint8_t *buf = malloc(TA_LEN);
	uint64_t sent = 0;

	ck_assert_ptr_nonnull(buf);
	ta_open(&env, &p, &t);
	sent = one_at_a_time(&env, &p, buf, sent, TA_LEN, TA_MSGS, t.seed,
	    &t.rx);
	ck_assert_int_eq(p.srv->ends + p.cli.ends, 0);
	ck_assert_uint_eq(t.rx, sent);
	ck_assert_msg(t.bad == 0, "byte %zu is wrong", t.bad - 1);
	chp_close(&p);
	free(buf);
	dt_env_fini(&env);
}
END_TEST

/*
 * Review r42, finding 5: the same callback with a read high watermark of
 * 16 KiB and a read timeout of 1 s on the receiver. The client writes
 * 8 x 4 KiB at once and then waits. Its pass coalesces the eight writes
 * into one 32 KiB message (rc_send_data(): small staged writes are
 * copied into one slot), so the server's delivery cuts that one
 * message at the mark: 16 KiB go into input and the callback takes them
 * inside the add, leaving input empty. Delivery counted input from its
 * own tally, still 16 KiB, so it saw no room, held the rest in the
 * receive buffer, and marked input as held at the mark: that stops the
 * read timeout, and delivery waits for a drain that has already
 * happened. The buffer was not released, so nothing was owed to the
 * client and no later pass came, and the client had nothing more to send.
 * Before the fix: 16 KiB of 32 KiB after 3 s, and no read timeout either
 * (the keepalive's first probe would come after 5 s idle, and consumes
 * nothing at the server). After: all 32 KiB, in order, well within the
 * read timeout, which does not fire meanwhile. (The stream is a single
 * buffer cut in two on purpose. With eight messages, the messages
 * delivered before the mark release their buffers, and a pass's owed
 * credits can bring a later pass that delivers the rest, depending on
 * how arrivals batch.)
 */
#define HW_HI		(16 * KiB)
#define HW_LEN		(4 * KiB)
#define HW_WRITES	8
#define HW_WAIT_MS	3000

START_TEST(channel_input_taken_inside_the_add_at_mark)
{
	struct dt_env env;
	struct chp p;
	static struct takeall t;
	uint8_t *buf = malloc(HW_LEN);
	const struct timeval tv_read = { 1, 0 };
	uint64_t sent = 0, dl;
	int i;

	ck_assert_ptr_nonnull(buf);
	ta_open(&env, &p, &t);
	evrdma_channel_setwatermark(p.srv->ch, EV_READ, 0, HW_HI);
	ck_assert_int_eq(evrdma_channel_set_timeouts(p.srv->ch, &tv_read,
	    NULL), 0);
	for (i = 0; i < HW_WRITES; i++) {
		pat_fill(buf, sent, HW_LEN, t.seed);
		ck_assert_int_eq(evrdma_channel_write(p.cli.ch, buf, HW_LEN),
		    0);
		sent += HW_LEN;
	}
	dl = tu_now_ms() + HW_WAIT_MS;
	while (t.rx < sent && !p.srv->timeout && !p.srv->ends &&
	    !p.cli.ends && tu_now_ms() < dl)
		ch_step(env.eb, 50);
	ck_assert_msg(t.bad == 0, "byte %zu is wrong", t.bad - 1);
	ck_assert_msg(t.rx == sent, "the server took %llu of %llu bytes in "
	    "%d ms, with %d read timeouts (of 1 s): reading stalled with "
	    "input empty, below its high watermark",
	    (unsigned long long)t.rx, (unsigned long long)sent, HW_WAIT_MS,
	    p.srv->timeout);
	ck_assert_int_eq(p.srv->timeout, 0);
	ck_assert_int_eq(p.srv->ends + p.cli.ends, 0);
	chp_close(&p);
	free(buf);
	dt_env_fini(&env);
}
END_TEST

Suite *
dt_suite_chan_recv(void)
{
	Suite *s = suite_create("device-chan-recv");
	TCase *tc;

	tc = tcase_create("recv-cb");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, channel_recv_cb_echo, 0, 2);
	tcase_add_loop_test(tc, channel_recv_cb_flow, 0, RCF_COUNT);
	tcase_add_test(tc, channel_recv_cb_after_moved_ref);
	tcase_add_test(tc, channel_input_taken_inside_the_add);
	suite_add_tcase(s, tc);

	/* (a case of its own: CK_RUN_CASE=input-watermark runs it alone) */
	tc = tcase_create("input-watermark");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, channel_input_taken_inside_the_add_at_mark);
	suite_add_tcase(s, tc);
	return s;
}
