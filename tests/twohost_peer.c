/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma two-guest tests: guest B's side, the peer (test_twohost --peer).
 * The services of twohost.h on three bases of B, every connection an
 * object on one list so that the end can free what A left and then check
 * that nothing of B is left: B's share of "nothing left behind".
 */
#include "twohost.h"

#include <signal.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <evrdma/channel.h>
#include <evrdma/srq.h>

#define TH_NLST		8		/* B's listeners */

/* B's raw services: receives per connection, bytes each, and whether B
 * first sends the descriptor of a region A may WRITE and READ */
struct rawsvc {
	int nslots;
	size_t slot;
	int region;
};
static const struct rawsvc RAW_SVC = { RAW_SLOTS, RAW_SLOT, 1 };
static const struct rawsvc RAW_SVC_SMALL = { SR_SLOTS, SR_LEN, 0 };
static const struct rawsvc RAW_SVC_SRQ = { 0, SR_LEN, 0 };	/* SRQ */

enum pmode { P_CMD, P_ECHO, P_SINK, P_SOURCE, P_HOLD, P_MSG, P_OUT };

struct pobj {
	LIST_ENTRY(pobj) link;
	int kind;			/* 'c' channel, 'r' raw connection */
	/* channels */
	struct evrdma_channel *ch;
	enum pmode mode;
	uint64_t n, done;
	uint64_t seed;
	int64_t bad;
	/* raw connections */
	const struct rawsvc *svc;
	struct evrdma_conn *c;
	struct evrdma_mr *mr, *rmr, *dmr;
	uint8_t *buf, *region;
	uint8_t desc[EVRDMA_REMOTE_ENCODED_LEN];
	int pending;			/* requests posted, not completed */
	int freed;			/* connection freed */
	struct pslot {
		struct pobj *o;
		int idx;
	} slot[RAW_SLOTS];
};

static struct {
	struct dt_env env;
	LIST_HEAD(, pobj) objs;
	int nobjs;
	struct evrdma_listener *lst[TH_NLST];
	struct evrdma_base *base_longka;	/* keepalive LONG_KA_MS */
	struct evrdma_base *base_small;		/* small rings */
	/* TH_PORT_RAW_SRQ's queue, its buffers, the limit events */
	struct evrdma_srq *srq;
	struct evrdma_mr *srq_mr;
	uint8_t *srq_buf;
	struct psrqbuf {
		int idx;
		struct pobj *o;		/* echoing on this one's connection */
	} srq_b[SRQ_BUFS];
	unsigned srq_low;
	int ending;
	uint64_t conns_total, errors, eofs;
} P;

static struct pobj *
pobj_new(int kind)
{
	struct pobj *o = calloc(1, sizeof(*o));

	if (!o)
		abort();
	o->kind = kind;
	o->bad = -1;
	LIST_INSERT_HEAD(&P.objs, o, link);
	P.nobjs++;
	P.conns_total++;
	return o;
}

static void
pobj_done(struct pobj *o)
{
	LIST_REMOVE(o, link);
	P.nobjs--;
	free(o);
}

/* ---- raw connections: descriptor, then echo ---- */

static void p_raw_try_free(struct pobj *o);

static void
p_raw_close(struct pobj *o)
{
	if (!o->freed) {
		o->freed = 1;
		evrdma_conn_free(o->c);
	}
	p_raw_try_free(o);
}

static void
p_raw_try_free(struct pobj *o)
{
	if (!o->freed || o->pending > 0)
		return;
	evrdma_mr_free(o->mr);
	evrdma_mr_free(o->rmr);
	evrdma_mr_free(o->dmr);
	free(o->buf);
	free(o->region);
	pobj_done(o);
}

static void p_raw_recv_done(struct evrdma_conn *c, const struct evrdma_wc *wc,
    void *arg);

static int
p_raw_post_recv(struct pobj *o, int idx)
{
	if (o->freed)
		return -1;
	if (evrdma_conn_post_recv(o->c, o->mr, (size_t)idx * o->svc->slot,
	    o->svc->slot, p_raw_recv_done, &o->slot[idx]) < 0)
		return -1;
	o->pending++;
	return 0;
}

static void
p_raw_send_done(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct pslot *s = arg;
	struct pobj *o = s->o;

	(void)c;
	o->pending--;
	if (wc->status == 0)
		(void)p_raw_post_recv(o, s->idx);
	p_raw_try_free(o);
}

static void
p_raw_recv_done(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct pslot *s = arg;
	struct pobj *o = s->o;

	o->pending--;
	if (wc->status == 0 && !o->freed) {
		if (evrdma_conn_post_send(c, o->mr, (size_t)s->idx *
		    o->svc->slot, wc->byte_len, p_raw_send_done, s) == 0)
			o->pending++;
	}
	p_raw_try_free(o);
}

static void
p_raw_desc_done(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct pobj *o = arg;

	(void)c;
	(void)wc;
	o->pending--;
	p_raw_try_free(o);
}

static void
p_raw_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct pobj *o = arg;

	(void)c;
	if (what & EVRDMA_EV_CONNECTED)
		return;
	if (what & EVRDMA_EV_ERROR) {
		P.errors++;
		say("raw connection: error %s", evrdma_reason_str(reason));
	} else {
		P.eofs++;
	}
	p_raw_close(o);
}

static int
p_raw_prepare(struct evrdma_listener *l, struct evrdma_conn *c,
    const void *pd, size_t len, void *arg)
{
	const struct rawsvc *svc = arg;
	struct pobj *o = pobj_new('r');
	struct evrdma_remote rem;
	size_t blen = (size_t)svc->nslots * svc->slot;
	int i;

	(void)l; (void)pd; (void)len;
	o->c = c;
	o->svc = svc;
	if (blen) {	/* else its receives come from the queue */
		o->buf = aligned_alloc(4096, (blen + 4095) & ~(size_t)4095);
		o->mr = o->buf ? evrdma_mr_reg(c, o->buf, blen,
		    EVRDMA_ACCESS_LOCAL_WRITE) : NULL;
		if (!o->mr)
			goto fail;
	}
	if (svc->region) {
		o->region = aligned_alloc(4096, RAW_REGION);
		if (!o->region)
			goto fail;
		memset(o->region, 0, RAW_REGION);
		o->rmr = evrdma_mr_reg(c, o->region, RAW_REGION,
		    EVRDMA_ACCESS_LOCAL_WRITE | EVRDMA_ACCESS_REMOTE_READ |
		    EVRDMA_ACCESS_REMOTE_WRITE);
		o->dmr = evrdma_mr_reg(c, o->desc, sizeof(o->desc), 0);
		if (!o->rmr || !o->dmr)
			goto fail;
		if (evrdma_mr_export(o->rmr, 0, RAW_REGION, &rem) < 0 ||
		    evrdma_remote_encode(&rem, o->desc, sizeof(o->desc)) < 0)
			goto fail;
	}
	evrdma_conn_setcb(c, p_raw_event, o);
	/* an A that vanishes (killed, or its goodbye lost) is found by the
	 * keepalive; raw connections have it off unless asked */
	if (evrdma_conn_set_keepalive(c, 3000, 500, 4) < 0)
		goto fail;
	for (i = 0; i < svc->nslots; i++) {
		o->slot[i].o = o;
		o->slot[i].idx = i;
		if (p_raw_post_recv(o, i) < 0)
			goto fail;
	}
	return 0;
fail:
	say("raw prepare failed: %s", strerror(errno));
	o->c = NULL;
	o->freed = 1;	/* the listener frees the refused connection */
	p_raw_try_free(o);
	return 1;
}

static struct pobj *
p_raw_find(struct evrdma_conn *c)
{
	struct pobj *o;

	LIST_FOREACH(o, &P.objs, link)
		if (o->kind == 'r' && o->c == c)
			return o;
	return NULL;
}

static void
p_raw_accept(struct evrdma_listener *l, struct evrdma_conn *c,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct pobj *o = p_raw_find(c);

	(void)l; (void)peer; (void)socklen; (void)arg;
	if (!o) {
		evrdma_conn_free(c);
		return;
	}
	if (o->svc->region && evrdma_conn_post_send(c, o->dmr, 0,
	    sizeof(o->desc), p_raw_desc_done, o) == 0)
		o->pending++;
}

/* ---- raw connections on the shared receive queue: echo ---- */

static void p_srq_recv(struct evrdma_conn *c, const struct evrdma_wc *wc,
    void *arg);

static void
p_srq_post(struct psrqbuf *b)
{
	b->o = NULL;
	if (!P.ending && evrdma_srq_post_recv(P.srq, P.srq_mr, (size_t)b->idx *
	    SR_LEN, SR_LEN, p_srq_recv, b) < 0)
		say("srq: post: %s (%s)", strerror(errno), evrdma_errmsg());
}

static void
p_srq_sent(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct psrqbuf *b = arg;
	struct pobj *o = b->o;

	(void)c;
	(void)wc;
	o->pending--;
	p_srq_post(b);
	p_raw_try_free(o);
}

static void
p_srq_recv(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct psrqbuf *b = arg;
	struct pobj *o;

	if (wc->status == ECANCELED)
		return;			/* the queue is going */
	o = c ? evrdma_conn_get_cb_arg(c) : NULL;
	if (wc->status == 0 && o && !o->freed &&
	    evrdma_conn_post_send(c, P.srq_mr, (size_t)b->idx * SR_LEN,
	    wc->byte_len, p_srq_sent, b) == 0) {
		b->o = o;
		o->pending++;
		return;
	}
	p_srq_post(b);
}

static void
p_srq_limit(struct evrdma_srq *srq, void *arg)
{
	(void)arg;
	P.srq_low++;
	evrdma_srq_set_limit(srq, SRQ_LOW, p_srq_limit, NULL);
}

/* B's queue for TH_PORT_RAW_SRQ, all its buffers posted */
static int
p_srq_start(struct evrdma_base *base)
{
	int i;

	P.srq = evrdma_srq_new(base, NULL, SRQ_BUFS);
	P.srq_buf = aligned_alloc(4096, (size_t)SRQ_BUFS * SR_LEN);
	if (!P.srq || !P.srq_buf)
		return -1;
	P.srq_mr = evrdma_srq_mr_reg(P.srq, P.srq_buf,
	    (size_t)SRQ_BUFS * SR_LEN);
	if (!P.srq_mr)
		return -1;
	for (i = 0; i < SRQ_BUFS; i++) {
		P.srq_b[i].idx = i;
		p_srq_post(&P.srq_b[i]);
	}
	return evrdma_srq_set_limit(P.srq, SRQ_LOW, p_srq_limit, NULL);
}

/* ---- channels ---- */

static void p_ch_event(struct evrdma_channel *ch, short what, void *arg);
static void p_ch_read(struct evrdma_channel *ch, void *arg);
static void p_ch_write(struct evrdma_channel *ch, void *arg);

static void
p_ch_close(struct pobj *o)
{
	evrdma_channel_free(o->ch);
	pobj_done(o);
}

static void
p_source_fill(struct pobj *o)
{
	static uint8_t buf[64 * KiB];
	struct evbuffer *out = evrdma_channel_get_output(o->ch);

	while (o->done < o->n && evbuffer_get_length(out) < 2 * MiB) {
		size_t k = o->n - o->done < sizeof(buf) ?
		    (size_t)(o->n - o->done) : sizeof(buf);
		pat_fill(buf, o->done, k, o->seed);
		if (evrdma_channel_write(o->ch, buf, k) < 0)
			return;
		o->done += k;
	}
	if (o->done == o->n && o->mode == P_SOURCE) {
		o->mode = P_HOLD;
		evrdma_channel_shutdown(o->ch);
	}
}

static void p_out_event(struct evrdma_channel *ch, short what, void *arg);

static void
p_raw_out_event(struct evrdma_conn *c, short what, int reason, void *arg)
{
	struct pobj *o = arg;

	if (what & EVRDMA_EV_CONNECTED)
		return;
	say("outgoing raw connection: %s %s",
	    what & EVRDMA_EV_ERROR ? "error" : "eof", evrdma_reason_str(reason));
	evrdma_conn_free(c);
	pobj_done(o);
}

/* CONNECT raw|ch HOST PORT N */
static int
p_connect(const char *kind, const char *host, int port, int n)
{
	struct sockaddr_storage ss;
	int len, i;

	if (port <= 0 || n <= 0 || n > 64)
		return -1;
	len = dt_sockaddr_of(&ss, host, port);
	if (len < 0)
		return -1;
	for (i = 0; i < n; i++) {
		struct pobj *o;

		if (!strcmp(kind, "raw")) {
			o = pobj_new('o');
			o->c = evrdma_conn_new(P.env.base, 0);
			if (!o->c)
				return -1;
			evrdma_conn_setcb(o->c, p_raw_out_event, o);
			if (evrdma_conn_connect(o->c, (struct sockaddr *)&ss,
			    len) < 0) {
				evrdma_conn_free(o->c);
				pobj_done(o);
				return -1;
			}
		} else {
			o = pobj_new('c');
			o->mode = P_OUT;
			o->ch = evrdma_channel_new(P.env.base,
			    EVRDMA_CHANNEL_STREAM);
			if (!o->ch)
				return -1;
			evrdma_channel_setcb(o->ch, p_ch_read, NULL, p_out_event,
			    o);
			evrdma_channel_enable(o->ch, EV_READ);
			if (evrdma_channel_connect(o->ch, (struct sockaddr *)&ss,
			    len) < 0) {
				p_ch_close(o);
				return -1;
			}
		}
	}
	return 0;
}

static void
p_out_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct pobj *o = arg;

	(void)ch;
	if (what & BEV_EVENT_CONNECTED)
		return;
	say("outgoing channel: event 0x%x", what);
	p_ch_close(o);
}

static void
p_command(struct pobj *o, char *line)
{
	char kind[16], host[64];
	unsigned long long n, seed;
	int port, cnt;
	char reply[160];
	struct evrdma_stats st;

	if (!strcmp(line, "ECHO")) {
		o->mode = P_ECHO;
	} else if (sscanf(line, "SINK %llu %llu", &n, &seed) == 2) {
		o->mode = P_SINK;
		o->n = n;
		o->seed = seed;
	} else if (sscanf(line, "SOURCE %llu %llu", &n, &seed) == 2) {
		o->mode = P_SOURCE;
		o->n = n;
		o->seed = seed;
		evrdma_channel_setwatermark(o->ch, EV_WRITE, 512 * KiB, 0);
		p_source_fill(o);
	} else if (sscanf(line, "CONNECT %15s %63s %d %d", kind, host, &port,
	    &cnt) == 4) {
		o->mode = P_HOLD;
		if (p_connect(kind, host, port, cnt) == 0)
			evrdma_channel_write(o->ch, "OK\n", 3);
		else
			evrdma_channel_write(o->ch, "ERR\n", 4);
	} else if (!strcmp(line, "STATS")) {
		o->mode = P_HOLD;
		evrdma_base_get_stats(P.env.base, &st, sizeof(st));
		snprintf(reply, sizeof(reply), "STATS %d %u %u %u %ld %ld %u\n",
		    P.nobjs - 1, st.conns, st.cm_ids, st.qps,
		    proc_kib("VmRSS:"), proc_kib("VmPin:"), P.srq_low);
		say("STATS: objects %d conns %u cm_ids %u qps %u reqs %u "
		    "written %llu pulled %llu", P.nobjs - 1, st.conns,
		    st.cm_ids, st.qps, st.reqs, st.ch_written, st.ch_pulled);
		{
			struct pobj *x;

			LIST_FOREACH(x, &P.objs, link)
				if (x->kind == 'c' && x != o)
					say("STATS: channel mode %d: input %zu "
					    "output %zu", (int)x->mode,
					    evbuffer_get_length(
					    evrdma_channel_get_input(x->ch)),
					    evbuffer_get_length(
					    evrdma_channel_get_output(x->ch)));
		}
		evrdma_channel_write(o->ch, reply, strlen(reply));
	} else {
		o->mode = P_HOLD;
		evrdma_channel_write(o->ch, "ERR\n", 4);
	}
}

static void
p_ch_read(struct evrdma_channel *ch, void *arg)
{
	struct pobj *o = arg;
	struct evbuffer *in = evrdma_channel_get_input(ch);
	char *line;
	size_t n;

	if (o->mode == P_CMD) {
		line = evbuffer_readln(in, &n, EVBUFFER_EOL_LF);
		if (!line)
			return;
		p_command(o, line);
		free(line);
	}
	switch (o->mode) {
	case P_ECHO:
		evrdma_channel_write_buffer(ch, in);
		if (evbuffer_get_length(evrdma_channel_get_output(ch)) >
		    4 * MiB)
			evrdma_channel_disable(ch, EV_READ);
		break;
	case P_SINK: {
		uint64_t off = o->done;
		size_t have = evbuffer_get_length(in);
		struct evbuffer *part;
		char reply[64];

		if (have > o->n - o->done)
			have = (size_t)(o->n - o->done);
		part = evbuffer_new();
		evbuffer_remove_buffer(in, part, have);
		if (o->bad < 0)
			o->bad = pat_drain(part, &off, o->seed);
		evbuffer_free(part);
		o->done += have;
		if (o->done == o->n) {
			if (o->bad < 0)
				snprintf(reply, sizeof(reply), "OK %llu\n",
				    (unsigned long long)o->n);
			else
				snprintf(reply, sizeof(reply), "BAD %lld\n",
				    (long long)o->bad);
			evrdma_channel_write(ch, reply, strlen(reply));
			o->mode = P_HOLD;
		}
		break;
	}
	case P_MSG: {
		static uint8_t buf[4 * MiB];
		ssize_t m;

		while ((m = evrdma_channel_read_message(ch, buf,
		    sizeof(buf))) >= 0)
			evrdma_channel_write(ch, buf, (size_t)m);
		break;
	}
	default:
		evbuffer_drain(in, evbuffer_get_length(in));
		break;
	}
}

static void
p_ch_write(struct evrdma_channel *ch, void *arg)
{
	struct pobj *o = arg;

	if (o->mode == P_ECHO)
		evrdma_channel_enable(ch, EV_READ);
	else if (o->mode == P_SOURCE)
		p_source_fill(o);
}

static void
p_ch_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct pobj *o = arg;

	(void)ch;
	if (what & BEV_EVENT_CONNECTED)
		return;
	if (what & BEV_EVENT_ERROR) {
		P.errors++;
		say("channel: error 0x%x %s", what,
		    evrdma_reason_str(evrdma_channel_get_error(o->ch)));
	} else if (what & BEV_EVENT_EOF) {
		P.eofs++;
	}
	p_ch_close(o);
}

static void
p_ch_accept(struct evrdma_listener *l, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct pobj *o = pobj_new('c');

	(void)l; (void)peer; (void)socklen;
	o->ch = ch;
	o->mode = arg ? P_MSG : P_CMD;
	evrdma_channel_setcb(ch, p_ch_read, p_ch_write, p_ch_event, o);
	evrdma_channel_setwatermark(ch, EV_WRITE, 1 * MiB, 0);
	evrdma_channel_enable(ch, EV_READ);
}

static struct evrdma_listener *
p_listen_bl(struct evrdma_base *base, const char *host, int port, int msg,
    const struct rawsvc *raw, int backlog)
{
	struct sockaddr_storage ss;
	int len = dt_sockaddr_of(&ss, host, port);
	struct evrdma_listener *l;

	if (len < 0) {
		say("bad address %s", host);
		exit(1);
	}
	if (raw) {
		l = evrdma_listener_new(base, p_raw_accept, NULL, 0, backlog,
		    (struct sockaddr *)&ss, len);
		if (l)
			evrdma_listener_set_prepare_cb(l, p_raw_prepare,
			    (void *)raw);
	} else {
		l = evrdma_channel_listener_new(base, p_ch_accept,
		    msg ? &P : NULL,
		    msg ? EVRDMA_CHANNEL_MESSAGE : EVRDMA_CHANNEL_STREAM,
		    backlog, (struct sockaddr *)&ss, len);
	}
	if (!l) {
		say("cannot listen on %s port %d: %s (%s)", host, port,
		    strerror(errno), evrdma_errmsg());
		exit(1);
	}
	return l;
}

static struct evrdma_listener *
p_listen(struct evrdma_base *base, const char *host, int port, int msg,
    const struct rawsvc *raw)
{
	return p_listen_bl(base, host, port, msg, raw, 64);
}

static void
p_tick(evutil_socket_t fd, short what, void *arg)
{
	char p[PATH_MAX];

	(void)fd; (void)what; (void)arg;
	snprintf(p, sizeof(p), "%s/end", ctl_dir());
	if (access(p, F_OK) == 0)
		P.ending = 1;
}

static int
p_base_busy(struct evrdma_base *base)
{
	struct evrdma_stats st;

	evrdma_base_get_stats(base, &st, sizeof(st));
	return st.conns || st.cm_ids || st.reqs;
}

/* anything left of @p base (at the end, once every object is freed) */
static int
p_base_left(struct evrdma_base *base)
{
	struct evrdma_stats st;

	evrdma_base_get_stats(base, &st, sizeof(st));
	return st.conns || st.listeners || st.cm_ids || st.qps || st.mrs ||
	    st.reqs;
}

/* Guest B: serve until evrdma-vm2 says A is done; then free everything
 * and check that nothing is left. Exit 0 when clean. */
int
twohost_peer_main(void)
{
	struct evrdma_config *cfg = evrdma_config_new();
	struct event *tick;
	struct timeval tv = { 0, 200000 };
	struct evrdma_stats st;
	struct pobj *o, *next;
	char p[PATH_MAX];
	FILE *f;
	int i, clean;

	th_role = "B";
	if (!ctl_dir()) {
		fprintf(stderr, "peer: EVRDMA_VM2_CTL not set\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	dt_log_init();
	evrdma_config_set_queue_depth(cfg, 2 * RAW_SLOTS + 8,
	    2 * RAW_SLOTS + 8);
	P.env.eb = event_base_new();
	P.env.base = evrdma_base_new(P.env.eb, cfg);
	evrdma_config_set_keepalive(cfg, LONG_KA_MS, 1000, 3);
	P.base_longka = evrdma_base_new(P.env.eb, cfg);
	evrdma_config_set_keepalive(cfg, 5000, 1000, 3);
	evrdma_config_set_queue_depth(cfg, 16, 16);
	evrdma_config_set_channel_ring(cfg, SMALL_SLOTS, SMALL_SLOT,
	    64 * KiB);
	evrdma_config_set_timeout(cfg, EVRDMA_TIMEOUT_TEARDOWN, SCALE_TEARDOWN);
	P.base_small = evrdma_base_new(P.env.eb, cfg);
	evrdma_config_free(cfg);
	if (!P.env.base || !P.base_longka || !P.base_small) {
		say("evrdma_base_new: %s (%s)", strerror(errno),
		    evrdma_errmsg());
		return 1;
	}
	LIST_INIT(&P.objs);
	P.lst[0] = p_listen(P.env.base, dt_addr(), TH_PORT_CH, 0, NULL);
	P.lst[1] = p_listen(P.env.base, dt_addr(), TH_PORT_RAW, 0, &RAW_SVC);
	P.lst[2] = p_listen(P.env.base, dt_addr6(), TH_PORT_CH6, 0, NULL);
	P.lst[3] = p_listen(P.env.base, dt_addr(), TH_PORT_MSG, 1, NULL);
	P.lst[4] = p_listen(P.base_longka, dt_addr(), TH_PORT_CH_LONGKA, 0,
	    NULL);
	P.lst[5] = p_listen_bl(P.base_small, dt_addr(), TH_PORT_CH_SMALL, 0,
	    NULL, 1024);
	P.lst[6] = p_listen_bl(P.base_small, dt_addr(), TH_PORT_RAW_SMALL, 0,
	    &RAW_SVC_SMALL, 1024);
	P.lst[7] = p_listen_bl(P.base_small, dt_addr(), TH_PORT_RAW_SRQ, 0,
	    &RAW_SVC_SRQ, 1024);
	if (p_srq_start(P.base_small) < 0 ||
	    evrdma_listener_set_srq(P.lst[7], P.srq) < 0) {
		say("shared receive queue: %s (%s)", strerror(errno),
		    evrdma_errmsg());
		return 1;
	}
	tick = event_new(P.env.eb, -1, EV_PERSIST, p_tick, NULL);
	event_add(tick, &tv);
	snprintf(p, sizeof(p), "%s/B.ready", ctl_dir());
	f = fopen(p, "w");
	if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0) {
		say("cannot write %s", p);
		return 1;
	}
	say("listening on %s and [%s], ports %d-%d", dt_addr(), dt_addr6(),
	    TH_PORT_CH, TH_PORT_RAW_SRQ);
	while (!P.ending)
		event_base_loop(P.env.eb, EVLOOP_ONCE);

	/* A is done: free everything, then nothing may be left */
	event_free(tick);
	for (o = LIST_FIRST(&P.objs); o; o = next) {
		/* no callback runs inside a free: next stays valid */
		next = LIST_NEXT(o, link);
		if (o->kind == 'c') {
			p_ch_close(o);
		} else if (o->kind == 'r') {
			if (!o->freed)
				p_raw_close(o);	/* gone once completed */
		} else {
			evrdma_conn_free(o->c);
			pobj_done(o);
		}
	}
	for (i = 0; i < TH_NLST; i++)
		evrdma_listener_free(P.lst[i]);
	/* its receives complete (cancelled) once its connections are gone */
	evrdma_srq_free(P.srq);
	for (i = 0; i < 1500 && (P.nobjs > 0 || p_base_busy(P.env.base) ||
	    p_base_busy(P.base_longka) || p_base_busy(P.base_small)); i++)
		tu_loop_for(P.env.eb, 10);
	evrdma_mr_free(P.srq_mr);
	free(P.srq_buf);
	clean = P.nobjs == 0 && !p_base_left(P.base_longka) &&
	    !p_base_left(P.base_small);
	evrdma_base_free(P.base_longka);
	evrdma_base_free(P.base_small);
	evrdma_base_get_stats(P.env.base, &st, sizeof(st));
	clean = clean && !p_base_left(P.env.base);
	say("%s: %" PRIu64 " connections served (%" PRIu64 " ended in error, "
	    "%" PRIu64 " in EOF); left: objects %d conns %u cm_ids %u qps %u "
	    "mrs %u reqs %u", clean ? "clean exit" : "LEAK", P.conns_total,
	    P.errors, P.eofs, P.nobjs, st.conns, st.cm_ids, st.qps, st.mrs,
	    st.reqs);
	evrdma_base_free(P.env.base);
	event_base_free(P.env.eb);
	return clean ? 0 : 1;
}
