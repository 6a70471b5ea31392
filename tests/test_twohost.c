/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma two-guest tests (issue 15): two kernels, each with its own rxe0 on
 * a virtio NIC, joined by an emulated wire (tests/vm/evrdma-vm2). Guest A
 * runs the Check suite; guest B runs this program with --peer, a server of
 * a few services. From A, the tests kill guest B (host death), stop and
 * resume it (a hang), put tc netem on both NICs, and check what A sees:
 * one terminal event per connection, every request completed exactly once,
 * byte-exact transfers, nothing left behind (evrdma_base_get_stats and
 * `rdma resource show`), with the times and rates printed.
 *
 * Control: requests to evrdma-vm2 are files in $EVRDMA_VM2_CTL (see
 * tests/vm/vm2ctl and tests/vm/README.md); B writes $EVRDMA_VM2_CTL/B.ready
 * when it listens and ends when $EVRDMA_VM2_CTL/end appears.
 *
 * Guest B's services, their ports and their commands: twohost.h; B's side
 * of them: twohost_peer.c. Here: guest A's clients and the Check suite.
 */
#include "twohost.h"

#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <evrdma/channel.h>
#include <evrdma/srq.h>

/* receive buffers of a channel with a ring of SMALL_SLOTS and queue depths
 * of 16: R + C (4) + 4 spare */
#define SMALL_RECVS	(SMALL_SLOTS + 4 + 4)
/* A's queue for 1,000 channels: 3 buffers each when they join (2
 * control credits and a data credit), 64 kept back, the rest to lend */
#define SCALE_POOL	4096
#define RAW_SENDS	8		/* A's sends in flight when busy */

static const char *
env_or(const char *name, const char *def)
{
	const char *v = getenv(name);
	return v && *v ? v : def;
}

static const char *
peer_addr(void)
{
	return env_or("EVRDMA_TEST_PEER_ADDR", "198.51.100.2");
}

static const char *
peer_addr6(void)
{
	return env_or("EVRDMA_TEST_PEER_ADDR6", "2001:db8:1::2");
}

/* Seconds scaled by CK_TIMEOUT_MULTIPLIER (slow builds, busy hosts). */
static int
secs(int s)
{
	const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
	int k = m && atoi(m) > 0 ? atoi(m) : 1;
	return s * k;
}

/* ======================================================================
 * Requests to evrdma-vm2 (the protocol of tests/vm/vm2ctl)
 * ====================================================================== */

/*
 * Send "REQUEST" to evrdma-vm2 and wait for the answer, running @p eb (if
 * not NULL) meanwhile. The answer's text goes to @p ans.
 * @return 0 when the request succeeded, -1 otherwise
 */
static int
ctl_request(struct event_base *eb, char *ans, size_t anslen,
    const char *fmt, ...)
{
	static unsigned seq;
	char id[64], tmp[PATH_MAX], req[PATH_MAX], path[PATH_MAX];
	char status[64] = "";
	const char *dir = ctl_dir();
	uint64_t deadline = tu_now_ms() + (uint64_t)secs(180) * 1000;
	va_list ap;
	FILE *f;
	int ok;

	if (ans && anslen)
		ans[0] = '\0';
	ck_assert_msg(dir != NULL, "EVRDMA_VM2_CTL not set: not in evrdma-vm2");
	snprintf(id, sizeof(id), "%s-%d-%u", th_role, (int)getpid(), seq++);
	snprintf(tmp, sizeof(tmp), "%s/tmp.req.%s", dir, id);
	snprintf(req, sizeof(req), "%s/req.%s", dir, id);
	snprintf(path, sizeof(path), "%s/ans.%s", dir, id);
	f = fopen(tmp, "w");
	ck_assert_msg(f != NULL, "%s: %s", tmp, strerror(errno));
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(rename(tmp, req), 0);
	while (access(path, F_OK) != 0) {
		ck_assert_msg(tu_now_ms() < deadline, "no answer from "
		    "evrdma-vm2 to request %s", id);
		if (eb)
			tu_loop_for(eb, 20);
		else
			usleep(20000);
	}
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	if (!fgets(status, sizeof(status), f))
		status[0] = '\0';
	if (ans && anslen) {
		size_t n = fread(ans, 1, anslen - 1, f);
		ans[n] = '\0';
		while (n > 0 && ans[n - 1] == '\n')
			ans[--n] = '\0';
	}
	fclose(f);
	unlink(path);
	ok = strncmp(status, "ok", 2) == 0;
	return ok ? 0 : -1;
}

/* Run a shell command in guest @p who ("A" runs it here). */
static int
guest_sh(const char *who, const char *cmd)
{
	char ans[1024];
	int rc;

	if (!strcmp(who, "A") && !strcmp(th_role, "A")) {
		rc = system(cmd);
		return rc == 0 ? 0 : -1;
	}
	rc = ctl_request(NULL, ans, sizeof(ans), "exec %s %s", who, cmd);
	if (rc)
		say("exec %s '%s' failed: %s", who, cmd, ans);
	return rc;
}

static int
ready_file_exists(const char *who)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s.ready", ctl_dir(), who);
	return access(p, F_OK) == 0;
}

/*
 * Make sure guest B runs and its peer program listens: resume it (a test
 * that stopped it may have failed), boot it again when it was killed, and
 * wait for B.ready.
 */
static void
need_b(void)
{
	char ans[256];
	uint64_t t0 = tu_now_ms(), deadline = t0 + (uint64_t)secs(300) * 1000;

	ck_assert_msg(ctl_dir() != NULL, "EVRDMA_VM2_CTL not set: run under "
	    "tests/vm/evrdma-vm2 (tests/twohost-tests does)");
	if (ready_file_exists("B")) {
		(void)ctl_request(NULL, ans, sizeof(ans), "cont B");
		return;
	}
	ck_assert_int_eq(ctl_request(NULL, ans, sizeof(ans), "status B"), 0);
	if (strncmp(ans, "running", 7) != 0) {
		ck_assert_int_eq(ctl_request(NULL, ans, sizeof(ans),
		    "restart B"), 0);
	} else {
		(void)ctl_request(NULL, ans, sizeof(ans), "cont B");
	}
	while (!ready_file_exists("B")) {
		ck_assert_msg(tu_now_ms() < deadline, "guest B not ready");
		usleep(100000);
	}
	say("guest B ready after %" PRIu64 " ms", tu_now_ms() - t0);
}

/* Boot B again now (after a test killed it), so that the next test finds
 * it sooner; need_b() waits for it. */
static void
restart_b_async(void)
{
	char ans[256];

	(void)ctl_request(NULL, ans, sizeof(ans), "restart B");
}

/* Kill guest B (SIGKILL of its qemu): a host that dies without a word.
 * @return the time the kill was confirmed (ms, tu_now_ms) */
static uint64_t
kill_b(struct event_base *eb)
{
	char ans[256];
	uint64_t t0 = tu_now_ms(), t1;

	ck_assert_int_eq(ctl_request(eb, ans, sizeof(ans), "kill B"), 0);
	t1 = tu_now_ms();
	say("guest B killed (request took %" PRIu64 " ms)", t1 - t0);
	return t1;
}

/* ======================================================================
 * Guest A: clients
 * ====================================================================== */

/* ---- channels ---- */

struct cch {
	struct evrdma_channel *ch;
	int connected;
	int events;			/* terminal events (EOF / ERROR) */
	int settled;			/* connected, or a terminal event */
	short what;
	int reason;
	uint64_t t_event;
	/* the stream A sends and the one it expects */
	uint64_t seed;
	uint64_t to_send, sent;
	uint64_t to_recv, recvd;
	int64_t bad;
	int reading_line;		/* expecting a reply line, not data */
	char line[128];
	int got_line;
	uint64_t t_last_read, max_gap;
	int msg;			/* message mode */
	/* 0, or at most this many bytes sent and not yet back (the scale
	 * cases: bounds what a thousand channels queue) */
	uint64_t window;
};

static uint8_t wbuf[256 * KiB];

static void
cch_fill(struct cch *c)
{
	struct evbuffer *out;

	if (!c->ch || c->events)
		return;
	out = evrdma_channel_get_output(c->ch);
	while (c->sent < c->to_send && evbuffer_get_length(out) < 2 * MiB &&
	    (!c->window || c->sent - c->recvd < c->window)) {
		size_t k = c->to_send - c->sent < 64 * KiB ?
		    (size_t)(c->to_send - c->sent) : 64 * KiB;

		if (c->window && k > c->window - (c->sent - c->recvd))
			k = (size_t)(c->window - (c->sent - c->recvd));
		pat_fill(wbuf, c->sent, k, c->seed);
		if (evrdma_channel_write(c->ch, wbuf, k) < 0)
			return;
		c->sent += k;
	}
}

static void
cch_read(struct evrdma_channel *ch, void *arg)
{
	struct cch *c = arg;
	struct evbuffer *in = evrdma_channel_get_input(ch);
	uint64_t now = tu_now_ms();

	if (c->t_last_read && now - c->t_last_read > c->max_gap)
		c->max_gap = now - c->t_last_read;
	c->t_last_read = now;
	if (c->reading_line) {
		size_t n;
		char *l = evbuffer_readln(in, &n, EVBUFFER_EOL_LF);

		if (!l)
			return;
		snprintf(c->line, sizeof(c->line), "%s", l);
		free(l);
		c->got_line = 1;
		c->reading_line = 0;
	}
	if (c->bad < 0)
		c->bad = pat_drain(in, &c->recvd, c->seed);
	else
		evbuffer_drain(in, evbuffer_get_length(in));
	if (c->window)
		cch_fill(c);
}

static void
cch_write(struct evrdma_channel *ch, void *arg)
{
	(void)ch;
	cch_fill(arg);
}

static void
cch_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct cch *c = arg;

	(void)ch;
	if (what & BEV_EVENT_CONNECTED) {
		c->connected++;
		c->settled = 1;
		return;
	}
	if (what & BEV_EVENT_TIMEOUT)
		return;
	c->settled = 1;
	/* the first end is the one that counts (its time, flags and
	 * reason); the other direction's may follow */
	if (c->events++)
		return;
	c->what = what;
	c->reason = (what & BEV_EVENT_ERROR) ?
	    evrdma_channel_get_error(c->ch) : 0;
	c->t_event = tu_now_ms();
}

/* Connect a stream (or message) channel to B's @p port; wait until up. */
static void
cch_open(struct dt_env *env, struct cch *c, const char *host, int port,
    int msg)
{
	struct sockaddr_storage ss;
	int len = dt_sockaddr(&ss, host, port);
	uint64_t t0 = tu_now_ms();

	memset(c, 0, sizeof(*c));
	c->bad = -1;
	c->msg = msg;
	c->ch = evrdma_channel_new(env->base, msg ? EVRDMA_CHANNEL_MESSAGE :
	    EVRDMA_CHANNEL_STREAM);
	ck_assert_ptr_nonnull(c->ch);
	evrdma_channel_setcb(c->ch, cch_read, cch_write, cch_event, c);
	evrdma_channel_setwatermark(c->ch, EV_WRITE, 512 * KiB, 0);
	evrdma_channel_enable(c->ch, EV_READ);
	if (evrdma_channel_connect(c->ch, (struct sockaddr *)&ss, len) < 0)
		ck_abort_msg("channel connect to %s:%d: %s (%s)", host, port,
		    strerror(errno), evrdma_errmsg());
	/* wait for either outcome, so that a failed connect says why */
	DT_WAIT(env, c->settled, secs(30) * 1000);
	ck_assert_msg(c->connected && !c->events,
	    "channel connect to %s:%d: event 0x%x, %s after %" PRIu64 " ms",
	    host, port, c->what, evrdma_reason_str(c->reason),
	    tu_now_ms() - t0);
	if (tu_now_ms() - t0 > 1000)
		say("channel connect to %s:%d took %" PRIu64 " ms", host, port,
		    tu_now_ms() - t0);
}

static void
cch_cmd(struct cch *c, const char *fmt, ...)
{
	char buf[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	ck_assert_int_eq(evrdma_channel_write(c->ch, buf, strlen(buf)), 0);
}

static void
cch_free(struct cch *c)
{
	evrdma_channel_free(c->ch);
	c->ch = NULL;
}

/* Wait for a reply line on @p c (cch_cmd first sets reading_line). */
static void
cch_wait_line(struct dt_env *env, struct cch *c, int ms)
{
	DT_WAIT(env, c->got_line, ms);
	c->got_line = 0;
}

/*
 * Transfer on an ECHO channel: send @p n pattern bytes and read them back.
 * @return MB/s of the echoed bytes (each byte crosses the wire twice)
 */
static double
cch_echo(struct dt_env *env, struct cch *c, uint64_t n, uint64_t seed,
    int timeout_ms)
{
	uint64_t t0, dt, deadline;
	int never = 0;

	c->seed = seed;
	c->to_send = n;
	c->to_recv = n;
	cch_cmd(c, "ECHO\n");
	t0 = tu_now_ms();
	deadline = t0 + (uint64_t)timeout_ms;
	cch_fill(c);
	while (c->recvd < n && c->bad < 0 && !c->events) {
		ck_assert_msg(tu_now_ms() < deadline, "echo of %" PRIu64
		    " bytes: only %" PRIu64 " back after %d ms (sent %"
		    PRIu64 ")", n, c->recvd, timeout_ms, c->sent);
		tu_loop_until(env->eb, &never, 50);
	}
	dt = tu_now_ms() - t0;
	ck_assert_msg(c->bad < 0, "echo: byte %" PRId64 " differs", c->bad);
	ck_assert_msg(c->events == 0, "echo: event 0x%x (%s) after %" PRIu64
	    " of %" PRIu64 " bytes", c->what, evrdma_reason_str(c->reason),
	    c->recvd, n);
	ck_assert_uint_eq(c->recvd, n);
	return dt ? (double)n / 1000.0 / (double)dt : 0.0;
}

/* Close a channel in order: shut down, wait for B's EOF, free. */
static void
cch_close(struct dt_env *env, struct cch *c)
{
	ck_assert_int_eq(evrdma_channel_shutdown(c->ch), 0);
	DT_WAIT(env, c->events, secs(30) * 1000);
	ck_assert_msg(c->what == (BEV_EVENT_EOF | BEV_EVENT_READING),
	    "want EOF, got 0x%x (%s)", c->what, evrdma_reason_str(c->reason));
	cch_free(c);
}

/* B's count of its own objects and library objects (see STATS). */
static void
b_stats(struct dt_env *env, int *objs, unsigned *conns, unsigned *cm_ids,
    unsigned *qps)
{
	struct cch c;

	cch_open(env, &c, peer_addr(), TH_PORT_CH, 0);
	c.reading_line = 1;
	c.bad = 0;		/* no data follows: drain */
	cch_cmd(&c, "STATS\n");
	cch_wait_line(env, &c, secs(30) * 1000);
	ck_assert_int_eq(sscanf(c.line, "STATS %d %u %u %u", objs, conns,
	    cm_ids, qps), 4);
	cch_free(&c);
}

/* B's resident and pinned memory, KiB (see STATS) */
static void
b_mem(struct dt_env *env, long *rss, long *pin, unsigned *srq_low)
{
	struct cch c;
	int objs;
	unsigned conns, cm_ids, qps;

	cch_open(env, &c, peer_addr(), TH_PORT_CH, 0);
	c.reading_line = 1;
	c.bad = 0;
	cch_cmd(&c, "STATS\n");
	cch_wait_line(env, &c, secs(30) * 1000);
	ck_assert_int_eq(sscanf(c.line, "STATS %d %u %u %u %ld %ld %u", &objs,
	    &conns, &cm_ids, &qps, rss, pin, srq_low), 7);
	cch_free(&c);
}

/*
 * Wait until B holds no connection of ours any more (its objects but the
 * STATS channel itself: none; its library: that channel and its 4
 * listeners). @return the ms it took
 */
static uint64_t
b_wait_clean(struct dt_env *env, int timeout_s)
{
	uint64_t t0 = tu_now_ms(), deadline = t0 + (uint64_t)timeout_s * 1000;
	int objs;
	unsigned conns, cm_ids, qps;

	for (;;) {
		b_stats(env, &objs, &conns, &cm_ids, &qps);
		if (objs == 0 && conns == 1 && cm_ids == 5 && qps == 1)
			return tu_now_ms() - t0;
		ck_assert_msg(tu_now_ms() < deadline, "B still holds objects "
		    "%d conns %u cm_ids %u qps %u after %d s", objs, conns,
		    cm_ids, qps, timeout_s);
		tu_loop_for(env->eb, 500);
	}
}

/* ---- raw connections ---- */

struct rreq {
	struct rconn *r;
	int kind;			/* 's' send, 'r' recv, 'w' write, 'R' read */
	int slot;
	int done;
	int status;
	struct rreq *next;		/* all requests, for the final count */
};

struct rconn {
	struct evrdma_conn *c;
	int connected;
	int events;
	int settled;			/* connected, or an event */
	short what;
	int reason;
	uint64_t t_event;
	struct evrdma_mr *smr, *rmr, *xmr;
	uint8_t *sbuf, *rbuf, *xbuf;
	struct evrdma_remote rem;
	int have_rem;
	struct rreq *all;
	unsigned posted, completed, ok, failed, twice;
	unsigned sends_out;		/* sends in flight */
	int sfree[RAW_SENDS];		/* send slots free */
	uint64_t seq_sent, seq_back;	/* messages sent / echoed back */
	int64_t bad;			/* seq of a wrong echo, or -1 */
	int busy;			/* keep RAW_SENDS sends in flight */
	uint64_t limit;			/* stop after this many messages */
	int window;			/* most messages not yet echoed */
	int wr_done;			/* WRITE / READ completions */
};

#define MSG_LEN(seq)	(8 + (size_t)(((seq) * 7919u) % (RAW_SLOT - 8)))

static void r_pump(struct rconn *r);

static struct rreq *
r_req(struct rconn *r, int kind, int slot)
{
	struct rreq *q = calloc(1, sizeof(*q));

	ck_assert_ptr_nonnull(q);
	q->r = r;
	q->kind = kind;
	q->slot = slot;
	q->next = r->all;
	r->all = q;
	return q;
}

static void
r_completed(struct rreq *q, const struct evrdma_wc *wc)
{
	struct rconn *r = q->r;

	if (q->done)
		r->twice++;
	q->done++;
	q->status = wc->status;
	r->completed++;
	if (wc->status == 0)
		r->ok++;
	else
		r->failed++;
}

static void r_recv_done(struct evrdma_conn *c, const struct evrdma_wc *wc,
    void *arg);

static void
r_post_recv(struct rconn *r, int slot)
{
	struct rreq *q;

	if (r->events)
		return;
	q = r_req(r, 'r', slot);
	if (evrdma_conn_post_recv(r->c, r->rmr, (size_t)slot * RAW_SLOT,
	    RAW_SLOT, r_recv_done, q) == 0)
		r->posted++;
	else
		q->done = -1;	/* never posted: no callback may come */
}

static void
r_recv_done(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct rreq *q = arg;
	struct rconn *r = q->r;
	const uint8_t *m = r->rbuf + (size_t)q->slot * RAW_SLOT;

	(void)c;
	r_completed(q, wc);
	if (wc->status != 0)
		return;
	if (!r->have_rem) {
		/* B's first message: its region's descriptor */
		if (evrdma_remote_decode(&r->rem, m, wc->byte_len) == 0)
			r->have_rem = 1;
		else
			r->bad = 0;
	} else {
		uint64_t seq;

		memcpy(&seq, m, 8);
		if (r->bad < 0 && (seq != r->seq_back ||
		    wc->byte_len != MSG_LEN(seq) ||
		    pat_check(m + 8, 0, wc->byte_len - 8, seq) != (size_t)-1))
			r->bad = (int64_t)r->seq_back;
		r->seq_back++;
	}
	r_post_recv(r, q->slot);
	r_pump(r);
}

static void
r_send_done(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct rreq *q = arg;
	struct rconn *r = q->r;

	(void)c;
	r_completed(q, wc);
	r->sends_out--;
	r->sfree[q->slot] = 1;
	if (wc->status == 0)
		r_pump(r);
}

/* Post sends while there is a free slot, the window allows and the limit
 * is not reached. */
static void
r_pump(struct rconn *r)
{
	int s;

	if (r->events || !r->have_rem)
		return;
	for (s = 0; s < RAW_SENDS; s++) {
		uint8_t *m = r->sbuf + (size_t)s * RAW_SLOT;
		uint64_t seq = r->seq_sent;
		struct rreq *q;

		if (!r->sfree[s])
			continue;
		if (r->limit && seq >= r->limit)
			return;
		if (!r->busy && seq - r->seq_back >= (uint64_t)r->window)
			return;
		memcpy(m, &seq, 8);
		pat_fill(m + 8, 0, MSG_LEN(seq) - 8, seq);
		q = r_req(r, 's', s);
		if (evrdma_conn_post_send(r->c, r->smr, (size_t)s * RAW_SLOT,
		    MSG_LEN(seq), r_send_done, q) < 0) {
			q->done = -1;
			return;
		}
		r->posted++;
		r->sfree[s] = 0;
		r->sends_out++;
		r->seq_sent++;
	}
}

static void
r_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct rconn *r = arg;

	(void)c;
	r->settled = 1;
	if (what & EVRDMA_EV_CONNECTED) {
		r->connected++;
		return;
	}
	r->events++;
	r->what = what;
	r->reason = reason;
	r->t_event = tu_now_ms();
}

/* Keepalive for a raw connection (off by default): 3 s idle, then 4
 * intervals of 0.5 s. */
#define RAW_KA(c)							\
	ck_assert_int_eq(evrdma_conn_set_keepalive((c), 3000, 500, 4), 0)

static void
r_open(struct dt_env *env, struct rconn *r, const char *host)
{
	struct sockaddr_storage ss;
	int len = dt_sockaddr(&ss, host, TH_PORT_RAW), s;
	uint64_t t0 = tu_now_ms();

	memset(r, 0, sizeof(*r));
	r->bad = -1;
	r->window = 16;
	for (s = 0; s < RAW_SENDS; s++)
		r->sfree[s] = 1;
	r->sbuf = aligned_alloc(4096, (size_t)RAW_SENDS * RAW_SLOT);
	r->rbuf = aligned_alloc(4096, (size_t)RAW_SLOTS * RAW_SLOT);
	r->xbuf = aligned_alloc(4096, 2 * RAW_REGION);
	ck_assert(r->sbuf && r->rbuf && r->xbuf);
	r->c = evrdma_conn_new(env->base, 0);
	ck_assert_ptr_nonnull(r->c);
	evrdma_conn_setcb(r->c, r_event, r);
	if (evrdma_conn_connect(r->c, (struct sockaddr *)&ss, len) < 0)
		ck_abort_msg("connect: %s (%s)", strerror(errno),
		    evrdma_errmsg());
	/* wait for either outcome, so that a failed connect says why */
	DT_WAIT(env, r->settled, secs(30) * 1000);
	ck_assert_msg(r->connected, "raw connect to %s: event 0x%x, %s after "
	    "%" PRIu64 " ms", host, r->what, evrdma_reason_str(r->reason),
	    tu_now_ms() - t0);
	/* rdma_cm may settle an address only at its deadline (lib/conn_cm.c,
	 * CM_STEP_GRACE_MS): worth a line when it happens */
	if (tu_now_ms() - t0 > 1000)
		say("raw connect to %s took %" PRIu64 " ms", host,
		    tu_now_ms() - t0);
	r->smr = evrdma_mr_reg(r->c, r->sbuf, (size_t)RAW_SENDS * RAW_SLOT, 0);
	r->rmr = evrdma_mr_reg(r->c, r->rbuf, (size_t)RAW_SLOTS * RAW_SLOT,
	    EVRDMA_ACCESS_LOCAL_WRITE);
	r->xmr = evrdma_mr_reg(r->c, r->xbuf, 2 * RAW_REGION,
	    EVRDMA_ACCESS_LOCAL_WRITE);
	ck_assert(r->smr && r->rmr && r->xmr);
	/* B's descriptor may come before these: RNR retries cover it */
	for (s = 0; s < RAW_SLOTS; s++)
		r_post_recv(r, s);
	{
		int never = 0;
		uint64_t deadline = tu_now_ms() + (uint64_t)secs(30) * 1000;

		while (!r->have_rem && r->bad < 0) {
			ck_assert_msg(tu_now_ms() < deadline, "no descriptor "
			    "from B");
			tu_loop_until(env->eb, &never, 20);
		}
	}
	ck_assert_int_eq(r->have_rem, 1);
}

/* Free the connection and everything of it; every request posted must
 * have completed exactly once by the end of the drain. */
static void
r_close(struct dt_env *env, struct rconn *r, const char *what)
{
	struct rreq *q;
	unsigned never_done = 0;
	uint64_t deadline = tu_now_ms() + (uint64_t)secs(60) * 1000;

	evrdma_conn_free(r->c);
	r->c = NULL;
	/* its own requests only: other connections may live on */
	while (r->completed < r->posted && tu_now_ms() < deadline)
		tu_loop_for(env->eb, 20);
	tu_loop_for(env->eb, 200);	/* a second completion would come now */
	for (q = r->all; q; q = q->next)
		if (q->done == 0)
			never_done++;
	ck_assert_msg(r->twice == 0, "%s: %u request(s) completed twice",
	    what, r->twice);
	ck_assert_msg(never_done == 0 && r->completed == r->posted,
	    "%s: %u of %u requests never completed", what, never_done,
	    r->posted);
	while ((q = r->all) != NULL) {
		r->all = q->next;
		free(q);
	}
	evrdma_mr_free(r->smr);
	evrdma_mr_free(r->rmr);
	evrdma_mr_free(r->xmr);
	free(r->sbuf);
	free(r->rbuf);
	free(r->xbuf);
}

static void
xfer_cb(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct rreq *q = arg;

	(void)c;
	r_completed(q, wc);
	q->r->wr_done++;
}

/* ---- common end of a test ---- */

/* How many objects of @p kind ("qp", "cm_id", ...) the kernel lists for
 * this process (`rdma resource show`). */
static int
rdma_count(const char *kind)
{
	char cmd[128], line[512], pid[32];
	FILE *f;
	int n = 0;

	snprintf(cmd, sizeof(cmd), "rdma resource show %s 2>&1", kind);
	snprintf(pid, sizeof(pid), " pid %d ", (int)getpid());
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, pid))
			n++;
	ck_assert_int_eq(pclose(f), 0);
	return n;
}

/* A's configuration: queues deep enough for RAW_SLOTS each way. */
static struct evrdma_config *
env_cfg(void)
{
	struct evrdma_config *cfg = evrdma_config_new();

	ck_assert_ptr_nonnull(cfg);
	ck_assert_int_eq(evrdma_config_set_queue_depth(cfg, 2 * RAW_SLOTS + 8,
	    2 * RAW_SLOTS + 8), 0);
	return cfg;
}

static void
env_start(struct dt_env *env, struct evrdma_config *cfg)
{
	dt_env_init(env, cfg);
	evrdma_config_free(cfg);
}

static void
env_new(struct dt_env *env)
{
	env_start(env, env_cfg());
}

/* As env_new(), and the size from which A pulls what it receives. */
static void
env_new_pull(struct dt_env *env, unsigned pull)
{
	struct evrdma_config *cfg = env_cfg();

	ck_assert_int_eq(evrdma_config_set_channel_pull(cfg, pull), 0);
	env_start(env, cfg);
}

/*
 * As env_new(), with a keepalive that waits LONG_KA_MS. Under netem's
 * loss and reordering, Soft-RoCE's go-back-N can leave a connection
 * without a single completion for seconds while the peer's device NAKs
 * every burst (seen: 8 s under "reorder 10%" in the sanitizer build). The
 * keepalive counts silence on a busy connection too (as it must: a peer
 * may ask for endless transport retries), so with the default 5 s + 3 s
 * it would end these transfers; they measure transfer under loss, and
 * the keepalive has its own tests.
 */
static void
env_new_longka(struct dt_env *env)
{
	struct evrdma_config *cfg = env_cfg();

	ck_assert_int_eq(evrdma_config_set_keepalive(cfg, LONG_KA_MS, 1000, 3),
	    0);
	env_start(env, cfg);
}

static void
env_done(struct dt_env *env)
{
	dt_drain(env, secs(30) * 1000);
	dt_env_fini(env);
	dt_assert_no_rdma_resources();
}

/* ======================================================================
 * Tests: across the wire
 * ====================================================================== */

/* Raw connection: WRITE then READ back B's region, an echo of 300 SENDs
 * of sizes 8 B .. 64 KiB, close; all byte-exact. */
START_TEST(wire_raw)
{
	struct dt_env env;
	struct rconn r;
	struct rreq *q;
	uint64_t t0;
	int never = 0;

	need_b();
	env_new(&env);
	r_open(&env, &r, peer_addr());
	ck_assert_uint_eq(r.rem.len, RAW_REGION);

	/* one-sided: WRITE 1 MiB of pattern, READ it back elsewhere */
	pat_fill(r.xbuf, 0, RAW_REGION, 77);
	memset(r.xbuf + RAW_REGION, 0, RAW_REGION);
	t0 = tu_now_ms();
	q = r_req(&r, 'w', 0);
	ck_assert_int_eq(evrdma_conn_post_write(r.c, r.xmr, 0, RAW_REGION,
	    &r.rem, 0, xfer_cb, q), 0);
	r.posted++;
	q = r_req(&r, 'R', 0);
	ck_assert_int_eq(evrdma_conn_post_read(r.c, r.xmr, RAW_REGION,
	    RAW_REGION, &r.rem, 0, xfer_cb, q), 0);
	r.posted++;
	while (r.wr_done < 2) {
		ck_assert_msg(tu_now_ms() - t0 < (uint64_t)secs(60) * 1000,
		    "WRITE/READ did not complete");
		tu_loop_until(env.eb, &never, 20);
	}
	ck_assert_int_eq(r.failed, 0);
	ck_assert_uint_eq(pat_check(r.xbuf + RAW_REGION, 0, RAW_REGION, 77),
	    (size_t)-1);
	say("wire-raw: WRITE + READ of 1 MiB: %" PRIu64 " ms",
	    tu_now_ms() - t0);

	/* two-sided: 300 messages echoed, at most 16 outstanding */
	r.limit = 300;
	t0 = tu_now_ms();
	r_pump(&r);
	while (r.seq_back < r.limit && r.bad < 0 && !r.events) {
		ck_assert_msg(tu_now_ms() - t0 < (uint64_t)secs(120) * 1000,
		    "echo: %" PRIu64 " of %" PRIu64 " back", r.seq_back,
		    r.limit);
		tu_loop_until(env.eb, &never, 50);
	}
	ck_assert_msg(r.bad < 0, "echo %" PRId64 " differs", r.bad);
	ck_assert_int_eq(r.events, 0);
	say("wire-raw: 300 SENDs of 8 B..64 KiB echoed in %" PRIu64 " ms",
	    tu_now_ms() - t0);
	ck_assert_int_eq(r.failed, 0);
	r_close(&env, &r, "wire-raw");
	b_wait_clean(&env, secs(30));
	env_done(&env);
}
END_TEST

/* Stream channel over IPv4: ECHO, SINK and SOURCE of 8 MiB each. */
START_TEST(wire_channel)
{
	struct dt_env env;
	struct cch c;
	double mbs;
	uint64_t t0, dt;
	const uint64_t n = 8 * MiB;
	int never = 0;

	need_b();
	env_new(&env);

	cch_open(&env, &c, peer_addr(), TH_PORT_CH, 0);
	mbs = cch_echo(&env, &c, n, 11, secs(240) * 1000);
	say("wire-channel: echo of 8 MiB: %.1f MB/s each way", mbs);
	cch_close(&env, &c);

	cch_open(&env, &c, peer_addr(), TH_PORT_CH, 0);
	c.seed = 12;
	c.to_send = n;
	c.reading_line = 1;
	cch_cmd(&c, "SINK %llu %llu\n", (unsigned long long)n, 12ull);
	t0 = tu_now_ms();
	cch_fill(&c);
	cch_wait_line(&env, &c, secs(240) * 1000);
	dt = tu_now_ms() - t0;
	ck_assert_msg(strncmp(c.line, "OK ", 3) == 0, "B: %s", c.line);
	say("wire-channel: A -> B 8 MiB: %.1f MB/s", (double)n / 1000.0 /
	    (double)(dt ? dt : 1));
	cch_close(&env, &c);

	cch_open(&env, &c, peer_addr(), TH_PORT_CH, 0);
	c.seed = 13;
	cch_cmd(&c, "SOURCE %llu %llu\n", (unsigned long long)n, 13ull);
	t0 = tu_now_ms();
	while (!c.events && c.bad < 0) {
		ck_assert_msg(tu_now_ms() - t0 < (uint64_t)secs(240) * 1000,
		    "B -> A: %" PRIu64 " bytes", c.recvd);
		tu_loop_until(env.eb, &never, 50);
	}
	dt = tu_now_ms() - t0;
	ck_assert_msg(c.bad < 0, "byte %" PRId64 " differs", c.bad);
	ck_assert_uint_eq(c.recvd, n);
	ck_assert_int_eq(c.what, BEV_EVENT_EOF | BEV_EVENT_READING);
	say("wire-channel: B -> A 8 MiB: %.1f MB/s", (double)n / 1000.0 /
	    (double)(dt ? dt : 1));
	cch_free(&c);

	b_wait_clean(&env, secs(30));
	env_done(&env);
}
END_TEST

/* ---- message channels ---- */

#define MSG_N	200

struct mch {
	struct cch c;
	int got;
	int bad;			/* index of a wrong message, or -1 */
};

static size_t
msg_len(int i)
{
	return 1 + ((size_t)i * 4099u) % (64 * KiB);
}

/* Take every whole message there is; check each. */
static void
mch_take(struct mch *m)
{
	static uint8_t back[64 * KiB];
	ssize_t n;

	while ((n = evrdma_channel_read_message(m->c.ch, back,
	    sizeof(back))) >= 0) {
		if (m->bad < 0 && ((size_t)n != msg_len(m->got) ||
		    pat_check(back, 0, (size_t)n, 1000 + (uint64_t)m->got) !=
		    (size_t)-1))
			m->bad = m->got;
		m->got++;
	}
}

static void
mch_read(struct evrdma_channel *ch, void *arg)
{
	(void)ch;
	mch_take(arg);
}

/*
 * MSG_N messages of 1 B .. 64 KiB to B's message echo, all written at
 * once; each must come back whole and in order. They are read by the read
 * callback (@p from_cb) or by the test from its loop, between iterations
 * (both allowed by channel.h).
 */
static void
msg_echo(struct dt_env *env, int from_cb, const char *name)
{
	static uint8_t m[64 * KiB];
	struct mch mc;
	uint64_t t0;
	int i;

	memset(&mc, 0, sizeof(mc));
	mc.bad = -1;
	cch_open(env, &mc.c, peer_addr(), TH_PORT_MSG, 1);
	evrdma_channel_setcb(mc.c.ch, from_cb ? mch_read : NULL, NULL,
	    cch_event, &mc.c);
	ck_assert_uint_ge(evrdma_channel_max_message(mc.c.ch), sizeof(m));
	t0 = tu_now_ms();
	for (i = 0; i < MSG_N; i++) {
		pat_fill(m, 0, msg_len(i), 1000 + (uint64_t)i);
		ck_assert_int_eq(evrdma_channel_write(mc.c.ch, m, msg_len(i)),
		    0);
	}
	while (mc.got < MSG_N && mc.bad < 0 && !mc.c.events) {
		if (tu_now_ms() - t0 >= (uint64_t)secs(120) * 1000) {
			struct evrdma_stats st;
			int objs;
			unsigned conns, cm_ids, qps;

			evrdma_base_get_stats(env->base, &st, sizeof(st));
			say("%s: stalled: A: input %zu bytes, output %zu bytes, "
			    "reqs %u, written %llu, pulled %llu", name,
			    evbuffer_get_length(evrdma_channel_get_input(
			    mc.c.ch)), evbuffer_get_length(
			    evrdma_channel_get_output(mc.c.ch)), st.reqs,
			    st.ch_written, st.ch_pulled);
			b_stats(env, &objs, &conns, &cm_ids, &qps);
		}
		ck_assert_msg(tu_now_ms() - t0 < (uint64_t)secs(120) * 1000,
		    "%s: %d of %d messages back after 120 s, no event", name,
		    mc.got, MSG_N);
		if (!from_cb)
			mch_take(&mc);
		tu_loop_for(env->eb, 20);
	}
	ck_assert_msg(mc.c.events == 0, "%s: event 0x%x %s", name,
	    mc.c.what, evrdma_reason_str(mc.c.reason));
	ck_assert_msg(mc.bad < 0, "%s: message %d differs", name, mc.bad);
	say("%s: %d messages of 1 B..64 KiB echoed whole in %" PRIu64 " ms",
	    name, MSG_N, tu_now_ms() - t0);
	/* cch_close() wants the read callback's state: c is first in mc */
	cch_close(env, &mc.c);
}

/* Stream channel over IPv6. */
START_TEST(wire_channel_v6)
{
	struct dt_env env;
	struct cch c;
	double mbs;

	need_b();
	env_new(&env);
	cch_open(&env, &c, peer_addr6(), TH_PORT_CH6, 0);
	mbs = cch_echo(&env, &c, 2 * MiB, 21, secs(240) * 1000);
	say("wire-channel-v6: echo of 2 MiB: %.1f MB/s each way", mbs);
	cch_close(&env, &c);
	b_wait_clean(&env, secs(30));
	env_done(&env);
}
END_TEST

/*
 * Message channel, messages read in the read callback; A does not pull
 * (evrdma_config_set_channel_pull(cfg, 0): B writes every echo), B pulls
 * A's messages of 32 KiB and more.
 */
START_TEST(wire_message)
{
	struct dt_env env;

	need_b();
	env_new_pull(&env, 0);
	msg_echo(&env, 1, "wire-message");
	b_wait_clean(&env, secs(30));
	env_done(&env);
}
END_TEST

/*
 * The same with the default configuration, so that A pulls B's echoes of
 * 32 KiB and more. This found a stall (1 run in 10): A sent its own DATA
 * while READs of B's pulls were still running, which cleared B's STARVED
 * flag; the pulls done after it were never reported (fewer than the
 * quarter of the ring that makes a CREDIT due), so B, every send slot
 * held, waited for ever with 3.6 MB in output, and A with nothing.
 */
START_TEST(wire_message_pull)
{
	struct dt_env env;

	need_b();
	env_new_pull(&env, 32768);
	msg_echo(&env, 1, "wire-message-pull");
	b_wait_clean(&env, secs(30));
	env_done(&env);
}
END_TEST

/* As wire_message_pull, with A taking the messages from its loop rather
 * than in the read callback (the stall above came more often so: 4 runs
 * in 20 before the fix, none in 50 after). */
START_TEST(wire_message_polled)
{
	struct dt_env env;

	need_b();
	env_new_pull(&env, 32768);
	msg_echo(&env, 0, "wire-message-polled");
	b_wait_clean(&env, secs(30));
	env_done(&env);
}
END_TEST

/* ======================================================================
 * Tests: guest B killed
 * ====================================================================== */

#define NKILL 4

/* How long the tests wait for a dead or stopped host to be noticed
 * (EVRDMA_TH_DEAD_WAIT seconds, default 40: beyond the RC retry budget of
 * 7 x ~1 s on this wire and the keepalive times used here). */
static int
dead_wait_s(void)
{
	int s = atoi(env_or("EVRDMA_TH_DEAD_WAIT", "40"));
	return s > 0 ? s : 40;
}

/* Report the detection times of n terminal events after t_kill. */
static void
report_times(const char *name, const uint64_t *t, int n, uint64_t t_kill)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	int i;

	for (i = 0; i < n; i++) {
		uint64_t d = t[i] - t_kill;
		if (d < lo)
			lo = d;
		if (d > hi)
			hi = d;
	}
	say("%s: %d terminal events %" PRIu64 "..%" PRIu64 " ms after the "
	    "kill", name, n, lo, hi);
}

/*
 * One kill of B with everything A can have open to it at once, on one
 * loop (one kill and reboot of B instead of one per kind: each costs
 * about 25 s of the suite):
 * - idle raw connections (RAW_KA: 3 s + 4 x 0.5 s) and idle channels (the
 *   default keepalive, 5 s + 3 x 1 s): nothing is in flight, only the
 *   keepalive can tell; each gets one error end with
 *   EVRDMA_REASON_PEER_DEAD within 15 s;
 * - busy raw connections (sends always in flight, B echoing back: data
 *   both ways): exactly one EV_ERROR each when the transport's retries
 *   run out, every request completed exactly once;
 * - busy channels (ECHO: A writes without pause, B sends everything
 *   back): BEV_EVENT_ERROR with PEER_DEAD (its other direction's at most
 *   once after it, as a socket's read and write both fail after a
 *   reset), never EOF.
 * Nothing is left afterwards.
 */
#define NIDLE 2

struct kill_set {
	struct rconn idle_r[NIDLE], busy_r[NKILL];
	struct cch idle_c[NIDLE], busy_c[NKILL];
};

/* How many of the set have had their terminal event. */
static int
kill_set_ended(const struct kill_set *k)
{
	int i, n = 0;

	for (i = 0; i < NIDLE; i++)
		n += (k->idle_r[i].events > 0) + (k->idle_c[i].events > 0);
	for (i = 0; i < NKILL; i++)
		n += (k->busy_r[i].events > 0) + (k->busy_c[i].events > 0);
	return n;
}

static void
kill_idle_report(const struct kill_set *k, uint64_t t_kill)
{
	int i;

	for (i = 0; i < NIDLE; i++) {
		const struct rconn *r = &k->idle_r[i];
		const struct cch *c = &k->idle_c[i];

		say("keepalive-kill-idle: raw %d: %s after %" PRIu64 " ms; "
		    "channel %d: %s after %" PRIu64 " ms", i,
		    r->events ? evrdma_reason_str(r->reason) : "no event",
		    r->events ? r->t_event - t_kill : 0, i,
		    c->events ? evrdma_reason_str(c->reason) : "no event",
		    c->events ? c->t_event - t_kill : 0);
	}
}

static void
kill_busy_report(const struct kill_set *k, uint64_t t_kill)
{
	int i;

	for (i = 0; i < NKILL; i++) {
		const struct rconn *r = &k->busy_r[i];
		const struct cch *c = &k->busy_c[i];

		if (r->events)
			say("kill-busy-raw: connection %d: %s after %" PRIu64
			    " ms; %" PRIu64 " messages echoed, %u of %u "
			    "requests completed (%u failed)", i,
			    evrdma_reason_str(r->reason), r->t_event - t_kill,
			    r->seq_back, r->completed, r->posted, r->failed);
		else
			say("kill-busy-raw: connection %d: NO EVENT", i);
		if (c->events)
			say("kill-busy-channel: channel %d: event 0x%x (%s) "
			    "after %" PRIu64 " ms; %" PRIu64 " bytes echoed",
			    i, c->what, evrdma_reason_str(c->reason),
			    c->t_event - t_kill, c->recvd);
		else
			say("kill-busy-channel: channel %d: NO EVENT %" PRIu64
			    " ms after the kill; %" PRIu64 " bytes echoed, "
			    "%zu bytes waiting in output", i,
			    tu_now_ms() - t_kill, c->recvd,
			    evbuffer_get_length(evrdma_channel_get_output(
			    c->ch)));
	}
}

START_TEST(kill_idle_and_busy)
{
	static struct kill_set k;
	struct dt_env env;
	uint64_t t_kill, t[NKILL], deadline;
	int i, all, n, never = 0;
	int wait_s = dead_wait_s();

	need_b();
	env_new(&env);
	for (i = 0; i < NIDLE; i++) {
		r_open(&env, &k.idle_r[i], peer_addr());
		RAW_KA(k.idle_r[i].c);
		cch_open(&env, &k.idle_c[i], peer_addr(), TH_PORT_CH, 0);
		k.idle_c[i].seed = 60 + (uint64_t)i;
		cch_echo(&env, &k.idle_c[i], 64 * KiB, 60 + (uint64_t)i,
		    secs(60) * 1000);
	}
	for (i = 0; i < NKILL; i++) {
		r_open(&env, &k.busy_r[i], peer_addr());
		k.busy_r[i].busy = 1;
		r_pump(&k.busy_r[i]);
		cch_open(&env, &k.busy_c[i], peer_addr(), TH_PORT_CH, 0);
		k.busy_c[i].seed = 100 + (uint64_t)i;
		k.busy_c[i].to_send = UINT64_MAX / 2;
		cch_cmd(&k.busy_c[i], "ECHO\n");
		cch_fill(&k.busy_c[i]);
	}
	/* traffic on every busy one first */
	deadline = tu_now_ms() + (uint64_t)secs(120) * 1000;
	do {
		tu_loop_until(env.eb, &never, 50);
		ck_assert_msg(kill_set_ended(&k) == 0, "a connection or "
		    "channel ended before the kill");
		for (all = 1, i = 0; i < NKILL; i++) {
			ck_assert_msg(k.busy_r[i].bad < 0 &&
			    k.busy_c[i].bad < 0, "echo %d differs before "
			    "the kill", i);
			all &= k.busy_r[i].seq_back >= 20 &&
			    k.busy_c[i].recvd >= 1 * MiB;
		}
		ck_assert_msg(tu_now_ms() < deadline, "no traffic");
	} while (!all);

	t_kill = kill_b(env.eb);
	deadline = t_kill + (uint64_t)wait_s * 1000;
	while ((n = kill_set_ended(&k)) < 2 * (NIDLE + NKILL) &&
	    tu_now_ms() < deadline)
		tu_loop_until(env.eb, &never, 50);
	tu_loop_for(env.eb, 500);	/* no second event may follow */
	kill_idle_report(&k, t_kill);
	kill_busy_report(&k, t_kill);
	restart_b_async();
	ck_assert_msg(n == 2 * (NIDLE + NKILL), "%d of %d connections and "
	    "channels to a dead host got no event within %d s",
	    2 * (NIDLE + NKILL) - n, 2 * (NIDLE + NKILL), wait_s);

	for (i = 0; i < NIDLE; i++) {
		struct rconn *r = &k.idle_r[i];
		struct cch *c = &k.idle_c[i];

		ck_assert_int_eq(r->events, 1);
		ck_assert_int_eq(r->what, EVRDMA_EV_ERROR);
		ck_assert_int_eq(r->reason, EVRDMA_REASON_PEER_DEAD);
		ck_assert_uint_lt(r->t_event - t_kill, 15000);
		ck_assert_int_ge(c->events, 1);
		ck_assert_int_le(c->events, 2);
		ck_assert(c->what & BEV_EVENT_ERROR);
		ck_assert_int_eq(c->reason, EVRDMA_REASON_PEER_DEAD);
		ck_assert_uint_lt(c->t_event - t_kill, 15000);
	}
	for (i = 0; i < NKILL; i++) {
		struct rconn *r = &k.busy_r[i];

		ck_assert_int_eq(r->events, 1);
		ck_assert_msg(r->what == EVRDMA_EV_ERROR &&
		    r->reason == EVRDMA_REASON_PEER_DEAD, "connection %d: "
		    "what 0x%x reason %s", i, r->what,
		    evrdma_reason_str(r->reason));
		ck_assert_msg(r->bad < 0, "echo %" PRId64 " differs", r->bad);
		t[i] = r->t_event;
	}
	report_times("kill-busy-raw", t, NKILL, t_kill);
	for (i = 0; i < NKILL; i++) {
		struct cch *c = &k.busy_c[i];

		ck_assert_int_ge(c->events, 1);
		ck_assert_int_le(c->events, 2);
		ck_assert_msg((c->what & BEV_EVENT_ERROR) &&
		    c->reason == EVRDMA_REASON_PEER_DEAD, "channel %d: "
		    "what 0x%x %s", i, c->what, evrdma_reason_str(c->reason));
		ck_assert_msg(c->bad < 0, "byte %" PRId64 " differs", c->bad);
		t[i] = c->t_event;
	}
	report_times("kill-busy-channel", t, NKILL, t_kill);

	for (i = 0; i < NIDLE; i++) {
		cch_free(&k.idle_c[i]);
		r_close(&env, &k.idle_r[i], "keepalive-kill-idle");
	}
	for (i = 0; i < NKILL; i++) {
		r_close(&env, &k.busy_r[i], "kill-busy-raw");
		cch_free(&k.busy_c[i]);
	}
	env_done(&env);
}
END_TEST

/* ---- A's listener half-way through accepting B's connection ---- */

struct half {
	struct dt_env *env;
	int prepared;
	int accepted;
	int events;
	uint64_t t_kill;
	struct evrdma_conn *conn;	/* an accepted raw connection */
	struct evrdma_channel *ch;	/* an accepted channel */
	int kill;			/* kill B from the prepare callback */
};

static int
half_prepare(struct evrdma_listener *l, struct evrdma_conn *c,
    const void *pd, size_t len, void *arg)
{
	struct half *h = arg;

	(void)l; (void)c; (void)pd; (void)len;
	h->prepared++;
	if (h->kill && h->prepared == 1)
		h->t_kill = kill_b(NULL);	/* the loop waits: B is gone
						 * before we accept */
	return 0;
}

static void
half_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct half *h = arg;

	(void)c;
	say("listener-kill: accepted connection: what 0x%x %s", what,
	    evrdma_reason_str(reason));
	h->events++;
}

static void
half_accept(struct evrdma_listener *l, struct evrdma_conn *c,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct half *h = arg;

	(void)l; (void)peer; (void)socklen;
	h->accepted++;
	ck_assert_ptr_null(h->conn);
	h->conn = c;
	evrdma_conn_setcb(c, half_event, h);
}

static void
half_ch_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct half *h = arg;

	(void)ch;
	say("listener-kill: accepted channel: event 0x%x", what);
	h->events++;
}

static void
half_ch_accept(struct evrdma_listener *l, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct half *h = arg;

	(void)l; (void)peer; (void)socklen;
	h->accepted++;
	ck_assert_ptr_null(h->ch);
	h->ch = ch;
	evrdma_channel_setcb(ch, NULL, NULL, half_ch_event, h);
}

/* Ask B (over a control channel) to open one connection to A's port. */
static void
ask_b_connect(struct dt_env *env, struct cch *ctl, const char *kind, int port)
{
	cch_open(env, ctl, peer_addr(), TH_PORT_CH, 0);
	ctl->reading_line = 1;
	ctl->bad = 0;
	cch_cmd(ctl, "CONNECT %s %s %d 1\n", kind, dt_addr(), port);
}

/* Connect to the dead B: exactly one error, within the connect step
 * timeouts (here a connect timeout of 5 s: the default, 30 s, would only
 * make the case wait longer). On a base of its own, freed at the end. */
static void
connect_to_dead(const char *name)
{
	struct dt_env env_s, *env = &env_s;
	struct evrdma_config *cfg = env_cfg();
	struct rconn r;
	struct cch c;
	struct sockaddr_storage ss;
	int len = dt_sockaddr(&ss, peer_addr(), TH_PORT_RAW);
	uint64_t t0;

	ck_assert_int_eq(evrdma_config_set_timeout(cfg, EVRDMA_TIMEOUT_CONNECT,
	    5000), 0);
	env_start(env, cfg);
	t0 = tu_now_ms();
	memset(&r, 0, sizeof(r));
	r.c = evrdma_conn_new(env->base, 0);
	ck_assert_ptr_nonnull(r.c);
	evrdma_conn_setcb(r.c, r_event, &r);
	memset(&c, 0, sizeof(c));
	c.ch = evrdma_channel_new(env->base, EVRDMA_CHANNEL_STREAM);
	ck_assert_ptr_nonnull(c.ch);
	evrdma_channel_setcb(c.ch, NULL, NULL, cch_event, &c);
	if (evrdma_conn_connect(r.c, (struct sockaddr *)&ss, len) < 0)
		r.events = -1;	/* refused at once: also fine, no event */
	len = dt_sockaddr(&ss, peer_addr(), TH_PORT_CH);
	if (evrdma_channel_connect(c.ch, (struct sockaddr *)&ss, len) < 0)
		c.events = -1;
	while (r.events == 0 || c.events == 0) {
		ck_assert_msg(tu_now_ms() - t0 < (uint64_t)secs(60) * 1000,
		    "%s: connecting to the dead host: no outcome in 60 s "
		    "(raw %d, channel %d)", name, r.events, c.events);
		tu_loop_for(env->eb, 50);
	}
	tu_loop_for(env->eb, 500);
	say("%s: connecting to the dead host: raw connection %s after %"
	    PRIu64 " ms, channel 0x%x %s after %" PRIu64 " ms", name,
	    r.events < 0 ? "refused at once" :
	    evrdma_reason_str(r.reason), r.events < 0 ? 0 : r.t_event - t0,
	    c.what, c.events < 0 ? "refused at once" :
	    evrdma_reason_str(c.reason), c.events < 0 ? 0 : c.t_event - t0);
	ck_assert_int_le(r.connected + c.connected, 0);
	if (r.events > 0) {
		ck_assert_int_eq(r.events, 1);
		ck_assert_int_eq(r.what, EVRDMA_EV_ERROR);
	}
	if (c.events > 0) {
		ck_assert_int_eq(c.events, 1);
		ck_assert(c.what & BEV_EVENT_ERROR);
	}
	evrdma_conn_free(r.c);
	evrdma_channel_free(c.ch);
	/* (not env_done(): the test's own base still holds its objects) */
	dt_drain(env, secs(30) * 1000);
	dt_env_fini(env);
}

/*
 * B connects to a listener of A and dies while A is accepting (after the
 * connect request, before the handshake ends). A's listener must drop the
 * half-made connection by itself, leak nothing, and go on accepting: B,
 * booted again, connects fine. Meanwhile, connections and channels that
 * A had open to B, idle, are freed: every request completes exactly once
 * and nothing is left (whether they heard of B's death is the keepalive
 * suite's business). And a connection attempt to the dead B fails once.
 */
static void
kill_accepting(int channel)
{
	struct dt_env env;
	struct half h;
	struct cch ctl, idle_ch;
	static struct rconn idle[2];
	struct sockaddr_storage ss;
	struct evrdma_listener *lst;
	struct evrdma_stats st;
	uint64_t deadline, t_gone;
	int len, port, i, never = 0;
	const char *name = channel ? "kill-accepting-channel" :
	    "kill-accepting-raw";

	need_b();
	env_new(&env);
	memset(&h, 0, sizeof(h));
	h.env = &env;
	h.kill = 1;
	len = dt_sockaddr(&ss, dt_addr(), 0);
	if (channel)
		lst = evrdma_channel_listener_new(env.base, half_ch_accept, &h,
		    EVRDMA_CHANNEL_STREAM, 8, (struct sockaddr *)&ss, len);
	else
		lst = evrdma_listener_new(env.base, half_accept, &h, 0, 8,
		    (struct sockaddr *)&ss, len);
	ck_assert_ptr_nonnull(lst);
	evrdma_listener_set_prepare_cb(lst, half_prepare, &h);
	port = evrdma_listener_get_port(lst);

	/* idle connections to B, receives posted, that B will not close */
	for (i = 0; i < 2; i++)
		r_open(&env, &idle[i], peer_addr());
	cch_open(&env, &idle_ch, peer_addr(), TH_PORT_CH, 0);
	idle_ch.seed = 3;
	cch_echo(&env, &idle_ch, 64 * KiB, 3, secs(60) * 1000);

	ask_b_connect(&env, &ctl, channel ? "ch" : "raw", port);
	DT_WAIT(&env, h.prepared, secs(60) * 1000);
	/* the control channel is idle towards a dead host now: free it
	 * (it waits for the teardown timeout, as no peer answers) */
	cch_free(&ctl);
	say("%s: idle connections to the dead host: raw %d, %d events, "
	    "channel %d events (freed before their keepalive)", name,
	    idle[0].events, idle[1].events, idle_ch.events);
	for (i = 0; i < 2; i++)
		r_close(&env, &idle[i], name);
	cch_free(&idle_ch);
	deadline = h.t_kill + (uint64_t)secs(120) * 1000;
	for (;;) {
		evrdma_base_get_stats(env.base, &st, sizeof(st));
		/* left: the listener, and an accepted connection only if
		 * it got its terminal event and was not freed yet */
		if (st.conns == (unsigned)(h.accepted && h.events ? 1 : 0) &&
		    st.cm_ids == 1 + (unsigned)(h.accepted && h.events ?
		    1 : 0))
			break;
		ck_assert_msg(tu_now_ms() < deadline, "%s: half-accepted "
		    "connection still there %d s after the kill: conns %u "
		    "cm_ids %u qps %u reqs %u (accepted %d, events %d)", name,
		    secs(120), st.conns, st.cm_ids, st.qps, st.reqs,
		    h.accepted, h.events);
		tu_loop_until(env.eb, &never, 50);
	}
	t_gone = tu_now_ms();
	tu_loop_for(env.eb, 500);
	say("%s: prepare callbacks %d, accepted %d, events %d; the "
	    "half-made connection was gone %" PRIu64 " ms after the kill",
	    name, h.prepared, h.accepted, h.events, t_gone - h.t_kill);
	ck_assert_int_eq(h.prepared, 1);
	ck_assert_msg(h.accepted == h.events, "an accepted connection to a "
	    "dead host got %d events", h.events);
	if (h.conn)
		evrdma_conn_free(h.conn);
	if (h.ch)
		evrdma_channel_free(h.ch);
	h.conn = NULL;
	h.ch = NULL;
	h.accepted = h.events = 0;

	connect_to_dead(name);
	deadline = tu_now_ms() + (uint64_t)secs(30) * 1000;
	do {
		tu_loop_for(env.eb, 20);
		evrdma_base_get_stats(env.base, &st, sizeof(st));
		ck_assert_msg(tu_now_ms() < deadline, "teardown did not finish:"
		    " conns %u cm_ids %u reqs %u", st.conns, st.cm_ids, st.reqs);
	} while (st.conns || st.reqs || st.cm_ids != 1);
	/* none but the warm sets' (new, never connected: chan_warm.c) */
	ck_assert_int_eq(rdma_count("qp"), (int)st.warm_qps);
	ck_assert_int_eq(rdma_count("cm_id"), 1);	/* the listener's */

	/* B again: the listener still accepts */
	restart_b_async();
	h.kill = 0;
	need_b();
	ask_b_connect(&env, &ctl, channel ? "ch" : "raw", port);
	DT_WAIT(&env, h.accepted, secs(60) * 1000);
	cch_wait_line(&env, &ctl, secs(30) * 1000);
	ck_assert_str_eq(ctl.line, "OK");
	ck_assert_int_eq(h.prepared, 2);
	ck_assert_int_eq(h.events, 0);
	if (h.conn)
		evrdma_conn_free(h.conn);
	if (h.ch)
		evrdma_channel_free(h.ch);
	cch_free(&ctl);
	evrdma_listener_free(lst);
	env_done(&env);
}

START_TEST(kill_accepting_raw)
{
	kill_accepting(0);
}
END_TEST

START_TEST(kill_accepting_channel)
{
	kill_accepting(1);
}
END_TEST

/* ======================================================================
 * Tests: guest B stopped (a hang)
 * ====================================================================== */

/*
 * B hangs: its qemu is stopped, and what A sends it is lost (netem loss
 * 100% on A's NIC for as long). The loss is what a hung host's network
 * does; it is also needed here because on the stream wire A's qemu would
 * block writing to a peer that does not read, freezing A with B.
 */
struct hang {
	uint64_t until;		/* when B resumes (0: not hanging) */
};

static void
hang_start(struct dt_env *env, struct hang *h, unsigned ms, const char *who)
{
	char ans[256];

	ck_assert_int_eq(system("tc qdisc replace dev eth0 root netem "
	    "loss 100%"), 0);
	ck_assert_int_eq(ctl_request(env->eb, ans, sizeof(ans), "stop B %u",
	    ms), 0);
	h->until = tu_now_ms() + ms;
	say("%s: %s", who, ans);
}

/* Call from the test's loop: ends the loss when B resumes. */
static void
hang_poll(struct hang *h)
{
	if (h->until && tu_now_ms() >= h->until) {
		(void)system("tc qdisc del dev eth0 root 2>/dev/null");
		h->until = 0;
	}
}

/*
 * B hangs for 2 s during a transfer on a channel and a raw connection,
 * shorter than their keepalive (channel: the default, 5 s idle + 3 x 1 s;
 * raw: RAW_KA, 3 s + 4 x 0.5 s) and the RC retry budget: nothing breaks,
 * both transfers complete byte-exact.
 */
START_TEST(stop_short)
{
	struct dt_env env;
	struct cch c;
	struct rconn r;
	struct hang h = { 0 };
	uint64_t t0, deadline;
	const uint64_t n = 16 * MiB;
	int stopped = 0, never = 0;

	need_b();
	env_new(&env);
	r_open(&env, &r, peer_addr());
	RAW_KA(r.c);
	r.limit = 400;
	cch_open(&env, &c, peer_addr(), TH_PORT_CH, 0);
	c.seed = 31;
	c.to_send = n;
	cch_cmd(&c, "ECHO\n");
	t0 = tu_now_ms();
	cch_fill(&c);
	r_pump(&r);
	deadline = t0 + (uint64_t)secs(300) * 1000;
	while ((c.recvd < n || r.seq_back < r.limit) && c.bad < 0 &&
	    r.bad < 0 && !c.events && !r.events) {
		ck_assert_msg(tu_now_ms() < deadline, "transfer: channel %"
		    PRIu64 " of %" PRIu64 ", raw %" PRIu64 " of %" PRIu64,
		    c.recvd, n, r.seq_back, r.limit);
		if (!stopped && c.recvd >= 2 * MiB) {
			hang_start(&env, &h, 2000, "stop-short");
			stopped = 1;
		}
		hang_poll(&h);
		tu_loop_until(env.eb, &never, 50);
	}
	while (h.until) {
		hang_poll(&h);
		tu_loop_until(env.eb, &never, 50);
	}
	ck_assert_msg(c.events == 0 && r.events == 0, "an event: channel "
	    "0x%x %s, raw 0x%x %s", c.what, evrdma_reason_str(c.reason),
	    r.what, evrdma_reason_str(r.reason));
	ck_assert_msg(c.bad < 0 && r.bad < 0, "not byte-exact");
	ck_assert_int_eq(stopped, 1);
	say("stop-short: 16 MiB echoed on a channel and 400 messages on a "
	    "raw connection in %" PRIu64 " ms, B stopped 2 s; longest "
	    "pause between reads %" PRIu64 " ms", tu_now_ms() - t0,
	    c.max_gap);
	ck_assert_int_eq(r.failed, 0);
	cch_close(&env, &c);
	r_close(&env, &r, "stop-short");
	b_wait_clean(&env, secs(30));
	env_done(&env);
}
END_TEST

/*
 * B stops for 20 s, longer than the keepalive time, while A sends: the
 * busy connection and channel fail with EVRDMA_REASON_PEER_DEAD (one
 * EV_ERROR / one BEV_EVENT_ERROR end each) within it, without waiting for
 * B. (The transport's retries do not run out here: the emulated wire holds
 * the frames of a stopped guest instead of dropping them, and rxe waits.)
 * B, resumed, cleans its side up by itself.
 */
START_TEST(stop_long)
{
	struct dt_env env;
	struct cch c;
	struct rconn r;
	struct hang h = { 0 };
	uint64_t t_stop, deadline;
	int never = 0;

	need_b();
	env_new(&env);
	r_open(&env, &r, peer_addr());
	RAW_KA(r.c);
	r.busy = 1;
	cch_open(&env, &c, peer_addr(), TH_PORT_CH, 0);
	c.seed = 41;
	c.to_send = UINT64_MAX / 2;
	cch_cmd(&c, "ECHO\n");
	cch_fill(&c);
	r_pump(&r);
	deadline = tu_now_ms() + (uint64_t)secs(120) * 1000;
	while (c.recvd < 1 * MiB || r.seq_back < 20) {
		ck_assert_msg(tu_now_ms() < deadline && !c.events &&
		    !r.events, "no traffic");
		tu_loop_until(env.eb, &never, 50);
	}
	hang_start(&env, &h, 20000, "stop-long");
	t_stop = tu_now_ms();
	deadline = t_stop + (uint64_t)dead_wait_s() * 1000;
	while (!c.events || !r.events) {
		hang_poll(&h);
		ck_assert_msg(tu_now_ms() < deadline, "not failed %d s after "
		    "a 20 s stop began: channel %d, raw %d events",
		    dead_wait_s(), c.events, r.events);
		tu_loop_until(env.eb, &never, 50);
	}
	tu_loop_for(env.eb, 500);
	say("stop-long: raw connection: %s after %" PRIu64 " ms; channel: "
	    "0x%x %s after %" PRIu64 " ms", evrdma_reason_str(r.reason),
	    r.t_event - t_stop, c.what, evrdma_reason_str(c.reason),
	    c.t_event - t_stop);
	ck_assert_int_eq(r.events, 1);
	ck_assert_int_eq(r.what, EVRDMA_EV_ERROR);
	ck_assert_int_eq(r.reason, EVRDMA_REASON_PEER_DEAD);
	ck_assert_int_ge(c.events, 1);
	ck_assert_int_le(c.events, 2);
	ck_assert(c.what & BEV_EVENT_ERROR);
	ck_assert_int_eq(c.reason, EVRDMA_REASON_PEER_DEAD);
	/* within the keepalive time (and well before B comes back) */
	ck_assert_uint_lt(r.t_event - t_stop, 15000);
	ck_assert_uint_lt(c.t_event - t_stop, 15000);
	ck_assert(c.bad < 0 && r.bad < 0);
	cch_free(&c);
	r_close(&env, &r, "stop-long");
	/* B comes back after 20 s and must clean up its side */
	while (h.until) {
		hang_poll(&h);
		tu_loop_until(env.eb, &never, 50);
	}
	b_wait_clean(&env, secs(120));
	say("stop-long: B was clean %" PRIu64 " ms after the stop began",
	    tu_now_ms() - t_stop);
	env_done(&env);
}
END_TEST

/* ======================================================================
 * Tests: netem on the wire
 * ====================================================================== */

static void
netem_clear(void)
{
	if (!ctl_dir())
		return;
	(void)system("tc qdisc del dev eth0 root 2>/dev/null");
	(void)guest_sh("B", "tc qdisc del dev eth0 root 2>/dev/null; true");
}

/* netem @p args on both NICs (each direction), then an echo of @p n bytes
 * on a channel that was set up before. */
static void
netem_echo(const char *name, const char *args, uint64_t n)
{
	struct dt_env env;
	struct cch c;
	char cmd[256], stats[512] = "";
	double mbs, base_mbs;
	FILE *f;

	need_b();
	env_new_longka(&env);
	cch_open(&env, &c, peer_addr(), TH_PORT_CH_LONGKA, 0);
	base_mbs = cch_echo(&env, &c, 1 * MiB, 50, secs(120) * 1000);
	cch_close(&env, &c);

	cch_open(&env, &c, peer_addr(), TH_PORT_CH_LONGKA, 0);
	snprintf(cmd, sizeof(cmd), "tc qdisc replace dev eth0 root netem %s",
	    args);
	ck_assert_int_eq(guest_sh("A", cmd), 0);
	ck_assert_int_eq(guest_sh("B", cmd), 0);
	mbs = cch_echo(&env, &c, n, 51, secs(480) * 1000);
	f = popen("tc -s qdisc show dev eth0 | grep -o 'dropped [0-9]*' | "
	    "head -n 1", "r");
	if (f) {
		if (!fgets(stats, sizeof(stats), f))
			stats[0] = '\0';
		pclose(f);
		stats[strcspn(stats, "\n")] = '\0';
	}
	netem_clear();
	say("%s (netem %s both ways): echo of %" PRIu64 " KiB byte-exact "
	    "at %.2f MB/s each way (%.1f MB/s without netem); A's qdisc: %s",
	    name, args, n / KiB, mbs, base_mbs, stats);
	cch_close(&env, &c);
	b_wait_clean(&env, secs(60));
	env_done(&env);
}

/* (The amounts under loss: enough for dozens of frames lost each way;
 * the time of each is the transport's retry timeout, which makes them the
 * slowest cases: 256 KiB at 10% took 9 to 27 s in CI, 4 MiB at 1% 9 s.) */
START_TEST(netem_loss_1)
{
	netem_echo("netem-loss-1%", "loss 1%", 2 * MiB);
}
END_TEST

START_TEST(netem_loss_10)
{
	netem_echo("netem-loss-10%", "loss 10%", 128 * KiB);
}
END_TEST

/* A fixed delay: with jitter (delay 10ms 2ms) netem reorders nearly every
 * burst and rxe's go-back-N makes no progress at all (ib_write_bw: 0 B in
 * 5 s), so jitter is left out. EVRDMA_TH_DELAY='delay 10ms 2ms' puts it
 * back (once, a channel then failed with an RNR, see tests/vm/README.md). */
START_TEST(netem_delay)
{
	netem_echo("netem-delay", env_or("EVRDMA_TH_DELAY", "delay 10ms"),
	    4 * MiB);
}
END_TEST

/* 10% of the frames overtake the others (sent at once, the rest 1 ms
 * later), 2% duplicated */
START_TEST(netem_reorder_dup)
{
	netem_echo("netem-reorder", env_or("EVRDMA_TH_REORDER",
	    "delay 1ms reorder 10% duplicate 2%"), 128 * KiB);
}
END_TEST

/* ======================================================================
 * Tests: keepalive
 * ====================================================================== */

/* ======================================================================
 * Tests: scale
 * ====================================================================== */

/* A's configuration for the scale cases: B's small rings, short queues. */
static void
env_new_small(struct dt_env *env)
{
	struct evrdma_config *cfg = env_cfg();

	ck_assert_int_eq(evrdma_config_set_queue_depth(cfg, 16, 16), 0);
	ck_assert_int_eq(evrdma_config_set_channel_ring(cfg, SMALL_SLOTS,
	    SMALL_SLOT, 64 * KiB), 0);
	ck_assert_int_eq(evrdma_config_set_timeout(cfg,
	    EVRDMA_TIMEOUT_TEARDOWN, SCALE_TEARDOWN), 0);
	env_start(env, cfg);
}


static int
scale_n(void)
{
	int n = atoi(env_or("EVRDMA_TH_SCALE_N", "1000"));

	return n > 0 && n <= 1000 ? n : 1000;
}

/*
 * How long the scale tests run traffic on all (EVRDMA_TH_SCALE_MS). 5 s
 * by default: each connection then echoes some 30 messages or 45 KiB, a
 * rate the half-the-mean check still tells apart; the 10 s the tests
 * first ran cost CI 20 s more and measured nothing else.
 */
static int
scale_ms(void)
{
	int ms = atoi(env_or("EVRDMA_TH_SCALE_MS", "5000"));

	return ms >= 1000 && ms <= 60000 ? ms : 5000;
}

/* The scale cases' objects (static: a thousand of them) */
static struct cch sc_ch[1000];

/*
 * Run A's loop until @p holds(i) for each of the first @p n objects, or
 * @p timeout_s seconds passed. @return how many hold.
 */
static int
scale_wait(struct dt_env *env, int n, int (*holds)(int i), int timeout_s)
{
	uint64_t deadline = tu_now_ms() + (uint64_t)secs(timeout_s) * 1000;
	int i, k, never = 0;

	for (;;) {
		for (i = k = 0; i < n; i++)
			k += holds(i) != 0;
		if (k == n || tu_now_ms() >= deadline)
			return k;
		tu_loop_until(env->eb, &never, 50);
	}
}

static int
ch_settled(int i)
{
	return sc_ch[i].connected > 0 || sc_ch[i].events > 0;
}

static int
ch_echoed(int i)
{
	return sc_ch[i].recvd == sc_ch[i].sent;
}

static int
ch_ended(int i)
{
	return sc_ch[i].events > 0;
}

/*
 * 1,000 channels (EVRDMA_TH_SCALE_N) to B on one loop, as a burst: every
 * connect is issued in one go with the default timeouts, and all must
 * come up (a 200-connect burst once made a listener abandon 69
 * handshakes). Then each echoes pattern bytes with at most 2 KiB in
 * flight for scale_ms(): byte-exact, and no channel below half the mean rate
 * (a small window: many round trips each, so that the rates compare
 * service, not the luck of a few).
 * Then all close in order. Reports the connect rate, the rates and A's
 * memory per channel: _i 0 with a receive ring each, 1 with A's channels
 * on one shared receive queue of SCALE_POOL buffers
 * (evrdma_channel_srq_new).
 */
START_TEST(scale_channels)
{
	struct cch *c = sc_ch;
	struct dt_env env;
	struct sockaddr_storage ss;
	struct evrdma_srq *srq = NULL;
	int n = scale_n(), len, i, up, ended;
	uint64_t t0, t_up, sum = 0, min = UINT64_MAX, max = 0;
	long rss0, rss1;
	double mean;

	need_b();
	env_new_small(&env);
	len = dt_sockaddr(&ss, peer_addr(), TH_PORT_CH_SMALL);
	rss0 = proc_kib("VmRSS:");
	t0 = tu_now_ms();
	if (_i) {
		srq = evrdma_channel_srq_new(env.base, NULL, SCALE_POOL);
		ck_assert_msg(srq != NULL, "evrdma_channel_srq_new: %s",
		    evrdma_errmsg());
	}
	for (i = 0; i < n; i++) {
		memset(&c[i], 0, sizeof(c[i]));
		c[i].bad = -1;
		c[i].ch = evrdma_channel_new(env.base, EVRDMA_CHANNEL_STREAM);
		ck_assert_ptr_nonnull(c[i].ch);
		if (srq)
			ck_assert_int_eq(evrdma_channel_set_srq(c[i].ch, srq),
			    0);
		evrdma_channel_setcb(c[i].ch, cch_read, cch_write, cch_event,
		    &c[i]);
		evrdma_channel_setwatermark(c[i].ch, EV_WRITE, 4 * KiB, 0);
		evrdma_channel_enable(c[i].ch, EV_READ);
		if (evrdma_channel_connect(c[i].ch, (struct sockaddr *)&ss,
		    len) < 0)
			ck_abort_msg("channel %d: connect: %s (%s)", i,
			    strerror(errno), evrdma_errmsg());
	}
	scale_wait(&env, n, ch_settled, 180);
	for (i = up = ended = 0; i < n; i++) {
		up += c[i].connected > 0;
		ended += c[i].events > 0;
	}
	t_up = tu_now_ms() - t0;
	rss1 = proc_kib("VmRSS:");
	if (srq)
		say("scale-channels: %d of %d channels up in %" PRIu64 " ms "
		    "(%.0f connects/s), %d failed; A's memory %ld KiB per "
		    "channel (its send ring %u KiB, and one queue of %u x %u "
		    "KiB: %u KiB a channel)", up, n, t_up, t_up ? up *
		    1000.0 / (double)t_up : 0.0, ended, rss0 >= 0 &&
		    rss1 >= 0 ? (rss1 - rss0) / n : -1L, SMALL_SLOTS *
		    SMALL_SLOT / KiB, SCALE_POOL, SMALL_SLOT / KiB,
		    SCALE_POOL * (SMALL_SLOT / KiB) / (unsigned)n);
	else
		say("scale-channels: %d of %d channels up in %" PRIu64 " ms "
		    "(%.0f connects/s), %d failed; A's memory %ld KiB per "
		    "channel (its send ring %u KiB, receive ring %u KiB)",
		    up, n, t_up, t_up ? up * 1000.0 / (double)t_up : 0.0,
		    ended, rss0 >= 0 && rss1 >= 0 ? (rss1 - rss0) / n : -1L,
		    SMALL_SLOTS * SMALL_SLOT / KiB, SMALL_RECVS * SMALL_SLOT /
		    KiB);
	for (i = 0; i < n; i++)
		ck_assert_msg(c[i].connected && !c[i].events, "channel %d: "
		    "%s (event 0x%x, %s) after %" PRIu64 " ms", i,
		    c[i].connected ? "up, then ended" : "never up", c[i].what,
		    evrdma_reason_str(c[i].reason), t_up);

	/* traffic on all */
	for (i = 0; i < n; i++) {
		c[i].seed = 1000 + (uint64_t)i;
		c[i].window = 2 * KiB;
		c[i].to_send = UINT64_MAX / 2;
		cch_cmd(&c[i], "ECHO\n");
	}
	for (i = 0; i < n; i++)
		cch_fill(&c[i]);
	tu_loop_for(env.eb, scale_ms());
	for (i = 0; i < n; i++) {
		c[i].to_send = c[i].sent;	/* no more */
		sum += c[i].recvd;
		if (c[i].recvd < min)
			min = c[i].recvd;
		if (c[i].recvd > max)
			max = c[i].recvd;
	}
	mean = (double)sum / n;
	{
		/* by groups of 100 in creation order (a CQ serves the
		 * channels made one after the other), and how many got
		 * nothing */
		char b[512];
		size_t o = 0;
		int g, zero = 0;

		for (g = 0; g < n; g += 100) {
			uint64_t gs = 0;

			for (i = g; i < n && i < g + 100; i++)
				gs += c[i].recvd;
			o += (size_t)snprintf(b + o, sizeof(b) - o, " %" PRIu64,
			    gs / 1000);
			if (o >= sizeof(b))
				break;
		}
		for (i = 0; i < n; i++)
			zero += c[i].recvd == 0;
		say("scale-channels: KB echoed per 100 channels:%s; %d got "
		    "none", b, zero);
	}
	say("scale-channels: echoed in %d ms: %.2f MB in all, per channel "
	    "mean %.0f B, min %" PRIu64 " B (%.2f of the mean), max %" PRIu64
	    " B", scale_ms(), (double)sum / 1e6, mean, min, min / mean, max);
	for (i = 0; i < n; i++) {
		ck_assert_msg(c[i].bad < 0, "channel %d: byte %" PRId64
		    " differs", i, c[i].bad);
		ck_assert_msg(!c[i].events, "channel %d: event 0x%x (%s)", i,
		    c[i].what, evrdma_reason_str(c[i].reason));
	}
	ck_assert_msg(min >= mean / 2, "slowest channel %" PRIu64 " B, mean "
	    "%.0f B: below half", min, mean);

	/* the echoes still in flight come back, then all close */
	ck_assert_int_eq(scale_wait(&env, n, ch_echoed, 60), n);
	t0 = tu_now_ms();
	for (i = 0; i < n; i++)
		ck_assert_int_eq(evrdma_channel_shutdown(c[i].ch), 0);
	ended = scale_wait(&env, n, ch_ended, 120);
	say("scale-channels: %d of %d closed in order in %" PRIu64 " ms",
	    ended, n, tu_now_ms() - t0);
	for (i = 0; i < n; i++) {
		ck_assert_msg(c[i].events == 1 && c[i].what ==
		    (BEV_EVENT_EOF | BEV_EVENT_READING), "channel %d: %d "
		    "ends, 0x%x (%s)", i, c[i].events, c[i].what,
		    evrdma_reason_str(c[i].reason));
		cch_free(&c[i]);
	}
	evrdma_srq_free(srq);
	b_wait_clean(&env, secs(60));
	env_done(&env);
}
END_TEST

/* ---- 1,000 raw connections ---- */

/* A raw connection of the scale case: SR_SLOTS receives and SR_WINDOW
 * sends of SR_LEN bytes in one region; messages carry their sequence
 * number and pattern bytes, and B echoes each one. */
struct sraw {
	struct evrdma_conn *c;
	struct evrdma_mr *mr;
	uint8_t *buf;		/* SR_SLOTS receive slots, then send slots */
	int connected, events;
	short what;
	int reason;
	unsigned posted, completed;
	uint64_t seq_sent, seq_back, limit;
	int64_t bad;		/* seq of a wrong echo, or -1 */
	int sfree[SR_WINDOW];
	struct srslot {
		struct sraw *s;
		int idx;
	} slot[SR_SLOTS + SR_WINDOW];
};

static struct sraw sc_raw[1000];

static void sr_pump(struct sraw *s);

static int
sr_settled(int i)
{
	return sc_raw[i].connected != 0 || sc_raw[i].events > 0;
}

static int
sr_echoed(int i)
{
	return sc_raw[i].seq_back == sc_raw[i].seq_sent;
}

static int
sr_completed(int i)
{
	return sc_raw[i].completed >= sc_raw[i].posted;
}

static void
sr_recv_done(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct srslot *sl = arg;
	struct sraw *s = sl->s;
	const uint8_t *m = s->buf + (size_t)sl->idx * SR_LEN;
	uint64_t seq;

	s->completed++;
	if (wc->status != 0)
		return;
	memcpy(&seq, m, 8);
	if (s->bad < 0 && (seq != s->seq_back || wc->byte_len != SR_LEN ||
	    pat_check(m + 8, 0, SR_LEN - 8, seq) != (size_t)-1))
		s->bad = (int64_t)s->seq_back;
	s->seq_back++;
	if (evrdma_conn_post_recv(c, s->mr, (size_t)sl->idx * SR_LEN, SR_LEN,
	    sr_recv_done, sl) == 0)
		s->posted++;
	sr_pump(s);
}

static void
sr_send_done(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct srslot *sl = arg;

	(void)c;
	sl->s->completed++;
	sl->s->sfree[sl->idx - SR_SLOTS] = 1;
	if (wc->status == 0)
		sr_pump(sl->s);
}

static void
sr_pump(struct sraw *s)
{
	int k;

	for (k = 0; k < SR_WINDOW && !s->events && s->seq_sent < s->limit &&
	    s->seq_sent - s->seq_back < SR_WINDOW; k++) {
		struct srslot *sl = &s->slot[SR_SLOTS + k];
		uint8_t *m = s->buf + (size_t)sl->idx * SR_LEN;

		if (!s->sfree[k])
			continue;
		memcpy(m, &s->seq_sent, 8);
		pat_fill(m + 8, 0, SR_LEN - 8, s->seq_sent);
		if (evrdma_conn_post_send(s->c, s->mr, (size_t)sl->idx *
		    SR_LEN, SR_LEN, sr_send_done, sl) < 0)
			return;
		s->posted++;
		s->sfree[k] = 0;
		s->seq_sent++;
	}
}

static void
sr_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct sraw *s = arg;
	int i;

	if (what & EVRDMA_EV_CONNECTED) {
		/* the protection domain exists now: register, post */
		s->mr = evrdma_mr_reg(c, s->buf, (SR_SLOTS + SR_WINDOW) *
		    SR_LEN, EVRDMA_ACCESS_LOCAL_WRITE);
		for (i = 0; s->mr && i < SR_SLOTS; i++)
			if (evrdma_conn_post_recv(c, s->mr, (size_t)i * SR_LEN,
			    SR_LEN, sr_recv_done, &s->slot[i]) == 0)
				s->posted++;
		s->connected = s->mr && s->posted == SR_SLOTS ? 1 : -1;
		return;
	}
	s->events++;
	s->what = what;
	s->reason = reason;
}

/*
 * 1,000 raw connections (EVRDMA_TH_SCALE_N) to B on one loop, as a burst
 * with the default timeouts: all must come up. Each then keeps SR_WINDOW
 * messages of SR_LEN bytes in flight for scale_ms(), echoed by B: byte-exact,
 * and no connection below half the mean rate. Then A frees them all at
 * once: every request completes exactly once, B sees each one end and
 * keeps nothing. Reports the connect rate, the message rate, and the
 * memory per connection on both sides (B's: resident and pinned).
 * Run 0: B posts SR_SLOTS receives of SR_LEN bytes on each connection;
 * run 1: B's connections share one queue of SRQ_BUFS receives
 * (evrdma/srq.h), and B says how often it ran below SRQ_LOW.
 */
START_TEST(scale_raw)
{
	struct sraw *r = sc_raw;
	struct dt_env env;
	struct sockaddr_storage ss;
	int n = scale_n(), len, i, k, up, failed;
	uint64_t t0, t_up, sum = 0, min = UINT64_MAX, max = 0;
	long rss0, rss1, brss0, brss1, bpin0, bpin1;
	unsigned low0, low1;
	double mean;
	const char *how = _i ? "scale-raw-srq" : "scale-raw";

	need_b();
	env_new_small(&env);
	len = dt_sockaddr(&ss, peer_addr(), _i ? TH_PORT_RAW_SRQ :
	    TH_PORT_RAW_SMALL);
	b_mem(&env, &brss0, &bpin0, &low0);
	rss0 = proc_kib("VmRSS:");
	t0 = tu_now_ms();
	for (i = 0; i < n; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].bad = -1;
		r[i].buf = aligned_alloc(4096, 4096);
		ck_assert_ptr_nonnull(r[i].buf);
		for (k = 0; k < SR_SLOTS + SR_WINDOW; k++) {
			r[i].slot[k].s = &r[i];
			r[i].slot[k].idx = k;
		}
		for (k = 0; k < SR_WINDOW; k++)
			r[i].sfree[k] = 1;
		r[i].c = evrdma_conn_new(env.base, 0);
		ck_assert_ptr_nonnull(r[i].c);
		evrdma_conn_setcb(r[i].c, sr_event, &r[i]);
		if (evrdma_conn_connect(r[i].c, (struct sockaddr *)&ss,
		    len) < 0)
			ck_abort_msg("raw %d: connect: %s (%s)", i,
			    strerror(errno), evrdma_errmsg());
	}
	scale_wait(&env, n, sr_settled, 180);
	for (i = up = failed = 0; i < n; i++) {
		up += r[i].connected > 0;
		failed += r[i].events > 0 || r[i].connected < 0;
	}
	t_up = tu_now_ms() - t0;
	rss1 = proc_kib("VmRSS:");
	b_mem(&env, &brss1, &bpin1, &low1);
	say("%s: %d of %d raw connections up in %" PRIu64 " ms (%.0f "
	    "connects/s), %d failed", how, up, n, t_up, t_up ? up * 1000.0 /
	    (double)t_up : 0.0, failed);
	if (_i)
		say("%s: memory per connection: A %ld KiB resident; B %ld KiB "
		    "resident, %ld KiB pinned (one shared receive queue of %d "
		    "receives of %d B: %.2f KiB of buffers per connection)",
		    how, rss0 >= 0 && rss1 >= 0 ? (rss1 - rss0) / n : -1L,
		    brss0 >= 0 && brss1 >= 0 ? (brss1 - brss0) / n : -1L,
		    bpin0 >= 0 && bpin1 >= 0 ? (bpin1 - bpin0) / n : -1L,
		    SRQ_BUFS, SR_LEN, SRQ_BUFS * SR_LEN / 1024.0 / n);
	else
		say("%s: memory per connection: A %ld KiB resident; B %ld KiB "
		    "resident, %ld KiB pinned (%d receives of %d B posted on "
		    "each)", how, rss0 >= 0 && rss1 >= 0 ? (rss1 - rss0) / n :
		    -1L, brss0 >= 0 && brss1 >= 0 ? (brss1 - brss0) / n : -1L,
		    bpin0 >= 0 && bpin1 >= 0 ? (bpin1 - bpin0) / n : -1L,
		    SR_SLOTS, SR_LEN);
	for (i = 0; i < n; i++)
		ck_assert_msg(r[i].connected > 0 && !r[i].events, "raw %d: %s "
		    "(event 0x%x, %s) after %" PRIu64 " ms", i,
		    r[i].connected > 0 ? "up, then ended" : "never up",
		    r[i].what, evrdma_reason_str(r[i].reason), t_up);

	/* traffic on all for scale_ms() */
	for (i = 0; i < n; i++) {
		r[i].limit = UINT64_MAX;
		sr_pump(&r[i]);
	}
	tu_loop_for(env.eb, scale_ms());
	for (i = 0; i < n; i++) {
		r[i].limit = r[i].seq_sent;	/* no more */
		sum += r[i].seq_back;
		if (r[i].seq_back < min)
			min = r[i].seq_back;
		if (r[i].seq_back > max)
			max = r[i].seq_back;
	}
	mean = (double)sum / n;
	say("%s: echoed in %d ms: %" PRIu64 " messages of %d B (%.0f "
	    "per second), per connection mean %.0f, min %" PRIu64 " (%.2f of "
	    "the mean), max %" PRIu64, how, scale_ms(), sum, SR_LEN,
	    sum * 1000.0 / scale_ms(), mean, min, min / mean, max);
	for (i = 0; i < n; i++) {
		ck_assert_msg(r[i].bad < 0, "raw %d: echo %" PRId64 " wrong",
		    i, r[i].bad);
		ck_assert_msg(!r[i].events, "raw %d: event 0x%x (%s)", i,
		    r[i].what, evrdma_reason_str(r[i].reason));
	}
	ck_assert_msg(min >= mean / 2, "slowest connection %" PRIu64
	    " messages, mean %.0f: below half", min, mean);

	/* the echoes in flight come back; then A frees all at once */
	ck_assert_int_eq(scale_wait(&env, n, sr_echoed, 60), n);
	t0 = tu_now_ms();
	for (i = 0; i < n; i++)
		evrdma_conn_free(r[i].c);
	up = scale_wait(&env, n, sr_completed, 120);
	tu_loop_for(env.eb, 200);	/* a second completion would come now */
	say("%s: %d of %d freed with every request completed in %"
	    PRIu64 " ms", how, up, n, tu_now_ms() - t0);
	for (i = 0; i < n; i++) {
		ck_assert_msg(r[i].completed == r[i].posted, "raw %d: %u of %u "
		    "requests completed", i, r[i].completed, r[i].posted);
		evrdma_mr_free(r[i].mr);
		free(r[i].buf);
	}
	b_wait_clean(&env, secs(60));
	if (_i) {
		b_mem(&env, &brss1, &bpin1, &low1);
		say("%s: B's queue ran below %d receives %u times", how,
		    SRQ_LOW, low1 - low0);
	}
	env_done(&env);
}
END_TEST

/*
 * Connection setup rate: 100 times in a row, connect a channel, echo one
 * byte, close in order; reports cycles per second.
 */
START_TEST(scale_setup_rate)
{
	struct dt_env env;
	static struct cch c;
	int i, k = 100;
	uint64_t t0, dt;

	need_b();
	env_new_small(&env);
	t0 = tu_now_ms();
	for (i = 0; i < k; i++) {
		cch_open(&env, &c, peer_addr(), TH_PORT_CH_SMALL, 0);
		cch_echo(&env, &c, 1, 7, secs(30) * 1000);
		cch_close(&env, &c);
	}
	dt = tu_now_ms() - t0;
	say("scale-setup-rate: %d x (connect, 1 byte echoed, close) in %"
	    PRIu64 " ms: %.1f per second", k, dt, dt ? k * 1000.0 /
	    (double)dt : 0.0);
	b_wait_clean(&env, secs(60));
	env_done(&env);
}
END_TEST

/* ====================================================================== */

static Suite *
suite_twohost(void)
{
	Suite *s = suite_create("twohost");
	TCase *tc;

	tc = tcase_create("wire");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, wire_raw);
	tcase_add_test(tc, wire_channel);
	tcase_add_test(tc, wire_channel_v6);
	/* EVRDMA_TH_LOOP: run the message echoes that often (a stall
	 * they found came 1 run in 10) */
	tcase_add_loop_test(tc, wire_message, 0,
	    atoi(env_or("EVRDMA_TH_LOOP", "1")));
	tcase_add_loop_test(tc, wire_message_pull, 0,
	    atoi(env_or("EVRDMA_TH_LOOP", "1")));
	tcase_add_loop_test(tc, wire_message_polled, 0,
	    atoi(env_or("EVRDMA_TH_LOOP", "1")));
	suite_add_tcase(s, tc);

	tc = tcase_create("scale");
	tcase_set_timeout(tc, 900);
	tcase_add_loop_test(tc, scale_channels, 0, 2);
	tcase_add_loop_test(tc, scale_raw, 0, 2);
	tcase_add_test(tc, scale_setup_rate);
	suite_add_tcase(s, tc);

	tc = tcase_create("kill");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, kill_accepting_raw);
	tcase_add_test(tc, kill_accepting_channel);
	tcase_add_test(tc, kill_idle_and_busy);
	suite_add_tcase(s, tc);

	tc = tcase_create("stop");
	tcase_set_timeout(tc, 600);
	tcase_add_unchecked_fixture(tc, netem_clear, netem_clear);
	tcase_add_test(tc, stop_short);
	tcase_add_test(tc, stop_long);
	suite_add_tcase(s, tc);

	tc = tcase_create("netem");
	tcase_set_timeout(tc, 900);
	tcase_add_unchecked_fixture(tc, netem_clear, netem_clear);
	tcase_add_test(tc, netem_loss_1);
	tcase_add_test(tc, netem_loss_10);
	tcase_add_test(tc, netem_delay);
	tcase_add_test(tc, netem_reorder_dup);
	suite_add_tcase(s, tc);
	return s;
}

int
main(int argc, char **argv)
{
	SRunner *sr;
	int failed;

	tu_log_quiet();
	if ((argc > 1 && !strcmp(argv[1], "--peer")) ||
	    !strcmp(env_or("EVRDMA_VM2_ROLE", "A"), "B"))
		return twohost_peer_main();
	signal(SIGPIPE, SIG_IGN);
	sr = srunner_create(suite_twohost());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
