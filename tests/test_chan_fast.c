/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: the channel's fast paths change nothing a peer or
 * the application can see. A raw verbs peer (rawpeer.h) drives the same
 * traffic, in lock step so that nothing depends on timing, against a
 * channel with its fast paths (prepared sends, the read callback's open
 * write, a large write staged straight into slots) and against one on the general path (the test knob
 * EVRDMA_TEST_SLOW_PATH=1): every message the channel puts on the wire
 * (its immediate: kind, credits returned, flags; its length and bytes) and
 * every callback the application gets must be the same, and a peer that
 * turns hostile once the fast path is hot is caught exactly as on the
 * general path.
 */
#include "victim.h"

#include <stdarg.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <evrdma/channel.h>

#define FX_MSGS		64		/* lock-step round trips */
#define FX_LOG		16384

/* The application's side: echoes what it reads with
 * evrdma_channel_write() (the call the open write serves), three times
 * over in one write from FX_TRIPLE bytes on (a write larger than a slot),
 * and logs its callbacks. */
#define FX_TRIPLE	2000
#define fx_back(n)	((n) >= FX_TRIPLE ? 3 * (n) : (n))

struct fx {
	struct evrdma_channel *ch;
	int keep;			/* read nothing */
	int ends, reason;
	char log[FX_LOG];
	size_t len;
};

static void
fx_say(char *log, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(log + *len, FX_LOG - *len, fmt, ap);
	va_end(ap);
	ck_assert_msg(n >= 0 && (size_t)n < FX_LOG - *len, "log full");
	*len += (size_t)n;
}

static void
fx_read(struct evrdma_channel *ch, void *arg)
{
	struct fx *x = arg;
	struct evbuffer *in = evrdma_channel_get_input(ch);
	uint8_t buf[3 * AT_SLOT];
	size_t n;

	if (x->keep)
		return;
	n = (size_t)evbuffer_remove(in, buf, AT_SLOT);
	fx_say(x->log, &x->len, "read %zu\n", n);
	if (n >= FX_TRIPLE) {
		memcpy(buf + n, buf, n);
		memcpy(buf + 2 * n, buf, n);
	}
	ck_assert_int_eq(evrdma_channel_write(ch, buf, fx_back(n)), 0);
}

static void
fx_write(struct evrdma_channel *ch, void *arg)
{
	struct fx *x = arg;

	fx_say(x->log, &x->len, "written\n");
}

static void
fx_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct fx *x = arg;

	fx_say(x->log, &x->len, "event 0x%x\n", (unsigned)what);
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		x->ends++;
		if (what & BEV_EVENT_ERROR)
			x->reason = evrdma_channel_get_error(ch);
	}
}

/* The raw peer's side of the protocol, and what it saw on the wire. */
struct fxp {
	struct rawpeer rp;
	struct rp_chs vh;
	uint64_t rwr[RP_SLOTS + RP_CTRL];	/* receive i's wr_id */
	unsigned seen;			/* of rp.wc[], handled */
	unsigned credits, ctrl;		/* the victim lent us */
	unsigned owe_data, owe_ctrl;	/* we owe the victim */
	size_t echoed;
	char log[FX_LOG];
	size_t len;
};

static void
fxp_post(struct fxp *p, unsigned i)
{
	p->rwr[i] = p->rp.next_wr | RP_RECV_BIT;
	ck_assert_int_eq(rp_post_recv(&p->rp, (size_t)i * RP_SLOT, RP_SLOT),
	    0);
}

/* Handle what completed at the peer: each receive is logged whole and
 * posted again, its credits taken. */
static void
fxp_take(struct fxp *p)
{
	for (; p->seen < p->rp.nwc; p->seen++) {
		const struct rp_wc *w = &p->rp.wc[p->seen];
		unsigned i, type;

		if (!w->is_recv) {
			if (w->status != IBV_WC_SUCCESS)
				fx_say(p->log, &p->len, "send status %d\n",
				    w->status);
			continue;
		}
		if (w->status != IBV_WC_SUCCESS) {
			fx_say(p->log, &p->len, "recv status %d\n",
			    w->status);
			continue;
		}
		for (i = 0; i < RP_SLOTS + RP_CTRL; i++)
			if (p->rwr[i] == w->wr_id)
				break;
		ck_assert_uint_lt(i, RP_SLOTS + RP_CTRL);
		type = w->imm >> 30;
		/* the bytes: their hash, so that a difference shows */
		fx_say(p->log, &p->len, "msg imm 0x%08x len %u hash %08x\n",
		    w->imm, w->byte_len, rp_fnv1a(p->rp.mem +
		    (size_t)i * RP_SLOT, w->byte_len));
		p->credits += (w->imm >> 16) & 0x3fffu;
		p->ctrl += (w->imm >> 8) & 0xffu;
		if (type == 0) {
			p->owe_data++;
			p->echoed += w->byte_len;
		} else {
			p->owe_ctrl++;
		}
		fxp_post(p, i);
	}
	if (p->seen == p->rp.nwc)
		p->rp.nwc = p->seen = 0;	/* (room for more) */
}

/* DATA of @p len bytes (pattern from @p seq), with what we owe. */
static void
fxp_data(struct fxp *p, size_t len, unsigned seq)
{
	size_t k;

	ck_assert_uint_gt(p->credits, 0);
	for (k = 0; k < len; k++)
		p->rp.mem[RP_SEND_OFF + k] = (uint8_t)(seq * 7 + k);
	ck_assert_int_eq(rp_send_imm(&p->rp, RP_SEND_OFF, len,
	    rp_imm(0, p->owe_data, p->owe_ctrl, 0, 0, 0)), 0);
	p->credits--;
	p->owe_data = p->owe_ctrl = 0;
}

static void
fxp_run(struct fxp *p, int ms)
{
	rp_run(&p->rp, ms);
	fxp_take(p);
}

/*
 * One run: a channel (fast paths on or off) and a raw peer, FX_MSGS round
 * trips of varied sizes in lock step, then (@p attack) a violation, or
 * an orderly end: the peer's EOF, then the channel freed. The logs of
 * both sides go to @p wire and @p app.
 */
enum {
	FX_END, FX_RETURN, FX_PULL_FLAG, FX_BEYOND, FX_WRITE_IMM, FX_COUNT
};
static const char *const fx_names[FX_COUNT] = {
	"an orderly end", "credits returned that were not lent",
	"CREDIT marked as a pull", "DATA beyond its credits",
	"an RDMA WRITE WITH IMMEDIATE instead of a SEND"
};
/* what the channel logs (NULL: the device fails the connection) */
static const char *const fx_why[FX_COUNT] = {
	NULL, "credits returned that were not lent", "bad immediate",
	"data beyond its credits", NULL
};

static void
fx_run(int slow, int attack, char *wire, char *app)
{
	/* (2000 and 4096 come back as 6000 and 12288 bytes) */
	static const size_t sizes[] = { 64, 1, 100, 4096, 7, 2000, 64, 512 };
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct victim v;
	struct fxp *p = calloc(1, sizeof(*p));
	struct fx *x = calloc(1, sizeof(*x));
	struct rp_chs h = rp_hs();
	size_t sent = 0, done;
	unsigned i;

	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(x);
	if (slow)
		ck_assert_int_eq(setenv("EVRDMA_TEST_SLOW_PATH", "1", 1), 0);
	else
		unsetenv("EVRDMA_TEST_SLOW_PATH");
	memset(&v, 0, sizeof(v));
	dt_env_init(&env, cfg);
	unsetenv("EVRDMA_TEST_SLOW_PATH");
	evrdma_config_free(cfg);
	v_listen(&v, &env);
	ck_assert_int_eq(rp_open(&p->rp, &v, &h, 32, 32), 0);
	ck_assert_int_eq(rp_chs_decode(p->rp.reply, p->rp.reply_len, &p->vh),
	    0);
	for (i = 0; i < RP_SLOTS + RP_CTRL; i++)
		fxp_post(p, i);
	CH_WAIT(env.eb, v.naccepted == 1, 10000);
	p->credits = p->vh.slots;
	p->ctrl = p->vh.ctrl;
	x->ch = v.ch[0].ch;
	evrdma_channel_setcb(x->ch, fx_read, fx_write, fx_event, x);

	for (i = 0; i < FX_MSGS; i++) {
		uint64_t dl = tu_now_ms() + 10000;
		size_t n = sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];

		fxp_data(p, n, i);
		sent += fx_back(n);
		while (p->echoed < sent) {
			ck_assert_msg(tu_now_ms() < dl, "round trip %u: %zu "
			    "of %zu bytes back", i, p->echoed, sent);
			fxp_run(p, 2);
		}
	}
	/* anything that follows the traffic (an idle CREDIT) */
	fxp_run(p, 100);
	fx_say(p->log, &p->len, "-- traffic done\n");
	done = p->len;

	switch (attack) {
	case FX_END:
		ck_assert_int_eq(rp_send_imm(&p->rp, RP_SEND_OFF, 0,
		    rp_imm(2, p->owe_data, p->owe_ctrl, 0, 0, 0)), 0);
		p->owe_data = p->owe_ctrl = 0;
		CH_WAIT(env.eb, (fxp_take(p), x->ends == 1), 10000);
		fxp_run(p, 100);
		fx_say(p->log, &p->len, "-- channel freed\n");
		evrdma_channel_free(x->ch);
		v.ch[0].freed = 1;
		v.ch[0].ch = NULL;
		fxp_run(p, 300);
		break;
	case FX_RETURN:
		ck_assert_int_eq(rp_send_imm(&p->rp, RP_SEND_OFF, 0,
		    rp_imm(1, RP_SLOTS + 1, 0, 0, 0, 0)), 0);
		break;
	case FX_PULL_FLAG:
		ck_assert_int_eq(rp_send_imm(&p->rp, RP_SEND_OFF, 0,
		    rp_imm(1, 0, 0, 0, 1, 0)), 0);
		break;
	case FX_BEYOND:
		/* the application stops reading: no credit can come back,
		 * and the peer sends one message more than it was lent */
		x->keep = 1;
		for (i = 0; i <= p->vh.slots; i++)
			ck_assert_int_eq(rp_send_imm(&p->rp, RP_SEND_OFF, 16,
			    rp_imm(0, 0, 0, 0, 0, 0)), 0);
		break;
	case FX_WRITE_IMM:
		/* the peer has no writable memory of the channel's to name:
		 * the device refuses the WRITE */
		ck_assert_int_eq(rp_write(&p->rp, RP_SEND_OFF, 16, 0, 0, 1,
		    rp_imm(0, 0, 0, 0, 0, 0)), 0);
		break;
	}
	if (attack != FX_END) {
		CH_WAIT(env.eb, (fxp_take(p), x->ends == 1), 10000);
		if (fx_why[attack]) {
			ck_assert_int_eq(x->reason, EVRDMA_REASON_PROTOCOL);
			ck_assert_msg(strstr(v.log, fx_why[attack]) != NULL,
			    "%s: the channel logged \"%s\", not \"%s\"",
			    fx_names[attack], v.log, fx_why[attack]);
		} else {
			ck_assert(x->reason == EVRDMA_REASON_QP_FATAL ||
			    x->reason == EVRDMA_REASON_DISCONNECTED);
		}
		ck_assert_int_eq(rp_wait_disconnect(&p->rp, 10000), 0);
		/* the wire's log ends with the traffic: what the channel
		 * sent before it took in the violation depends on timing */
		p->log[done] = 0;
	}
	snprintf(wire, FX_LOG, "%s", p->log);
	snprintf(app, FX_LOG, "%s", x->log);
	rp_close(&p->rp);
	v_close(&v);
	dt_env_fini(&env);
	free(p);
	free(x);
}

START_TEST(fast_path_differential)
{
	static char wire[2][FX_LOG], app[2][FX_LOG];
	int slow;

	for (slow = 0; slow < 2; slow++)
		fx_run(slow, _i, wire[slow], app[slow]);
	fprintf(stderr, "fast path against the general path, %s: %zu bytes "
	    "of wire log, %zu of callbacks\n", fx_names[_i], strlen(wire[0]),
	    strlen(app[0]));
	ck_assert_msg(strcmp(wire[0], wire[1]) == 0, "%s: the wire differs; "
	    "fast path:\n%s\ngeneral path:\n%s", fx_names[_i], wire[0],
	    wire[1]);
	ck_assert_msg(strcmp(app[0], app[1]) == 0, "%s: the callbacks "
	    "differ; fast path:\n%s\ngeneral path:\n%s", fx_names[_i], app[0],
	    app[1]);
	/* and the traffic happened at all: a message per round trip */
	ck_assert_ptr_nonnull(strstr(wire[0], "-- traffic done"));
	ck_assert_uint_ge(strlen(wire[0]), FX_MSGS * 40);
}
END_TEST

Suite *
dt_suite_chan_fast(void)
{
	Suite *s = suite_create("device-chan-fast");
	TCase *tc = tcase_create("differential");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, fast_path_differential, 0, FX_COUNT);
	suite_add_tcase(s, tc);
	return s;
}
