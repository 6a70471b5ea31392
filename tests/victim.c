/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: the attacker's tools (see victim.h).
 */
#include "victim.h"

#include <linux/capability.h>
#include <sys/syscall.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

static void
v_read(struct evrdma_channel *ch, void *arg)
{
	struct vch *c = arg;
	struct evbuffer *in = evrdma_channel_get_input(ch);
	size_t n = evbuffer_get_length(in);

	if (c->v->keep || c->keep)
		return;
	if (c->rx_seed && n) {
		uint8_t *p = evbuffer_pullup(in, (ssize_t)n);
		size_t bad = pat_check(p, c->rx, n, c->rx_seed);

		if (bad != (size_t)-1 && !c->bad_at)
			c->bad_at = c->rx + bad + 1;
	}
	c->rx += n;
	if (c->v->echo)
		evbuffer_add_buffer(evrdma_channel_get_output(ch), in);
	else
		evbuffer_drain(in, n);
}

static void
v_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct vch *c = arg;

	ck_assert_msg(!c->freed, "event 0x%x after free", what);
	c->events++;
	c->what = what;
	if (what & BEV_EVENT_EOF)
		c->eof++;
	if (what & BEV_EVENT_ERROR) {
		c->error++;
		c->reason = evrdma_channel_get_error(ch);
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		c->ends++;
		if (c->v->free_on_end) {
			evrdma_channel_free(ch);
			c->freed = 1;
			c->ch = NULL;
		}
	}
}

void
v_accept(struct evrdma_listener *l, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct victim *v = arg;
	struct vch *c;

	ck_assert_int_lt(v->naccepted, 8);
	c = &v->ch[v->naccepted++];
	c->v = v;
	c->ch = ch;
	evrdma_channel_setcb(ch, v_read, NULL, v_event, c);
	evrdma_channel_enable(ch, EV_READ);
}

/* The log sink records the last protocol violation a victim caught. */
void
v_log(int level, const char *msg, void *arg)
{
	struct victim *v = arg;

	if (level == EVRDMA_LOG_WARN && strstr(msg, "protocol violation"))
		snprintf(v->log, sizeof(v->log), "%s", msg);
}

void
v_listen(struct victim *v, struct dt_env *env)
{
	v->env = env;
	v->sslen = dt_sockaddr(&v->ss, dt_addr(), 0);
	v->lst = evrdma_channel_listener_new(env->base, v_accept, v,
	    EVRDMA_CHANNEL_STREAM, 16, (struct sockaddr *)&v->ss, v->sslen);
	ck_assert_ptr_nonnull(v->lst);
	v->sslen = dt_sockaddr(&v->ss, dt_addr(),
	    evrdma_listener_get_port(v->lst));
	if (!getenv("EVRDMA_TEST_LOG"))
		evrdma_set_log_callback(v_log, EVRDMA_LOG_WARN, v);
}

struct evrdma_srq *
v_listen_pool(struct victim *v, struct dt_env *env, struct evrdma_config *cfg,
    unsigned nbuf)
{
	struct evrdma_srq *srq;

	dt_env_init(env, cfg);
	evrdma_config_free(cfg);
	srq = evrdma_channel_srq_new(env->base, NULL, nbuf);
	ck_assert_ptr_nonnull(srq);
	v->echo = 1;
	v_listen(v, env);
	ck_assert_int_eq(evrdma_listener_set_srq(v->lst, srq), 0);
	return srq;
}

void
v_close(struct victim *v)
{
	int i;

	for (i = 0; i < v->naccepted; i++)
		if (v->ch[i].ch && !v->ch[i].freed) {
			evrdma_channel_free(v->ch[i].ch);
			v->ch[i].freed = 1;
		}
	evrdma_listener_free(v->lst);
	ch_drain(v->env, 20000);
	if (!getenv("EVRDMA_TEST_LOG"))
		evrdma_set_log_callback(NULL, 0, NULL);
}

static void
f_read(struct evrdma_channel *ch, void *arg)
{
	struct friend *f = arg;
	struct evbuffer *in = evrdma_channel_get_input(ch);

	f->rx += evbuffer_get_length(in);
	evbuffer_drain(in, evbuffer_get_length(in));
}

static void
f_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct friend *f = arg;

	if (what & BEV_EVENT_CONNECTED)
		f->connected = 1;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		f->ends++;
}

void
f_open(struct friend *f, struct victim *v)
{
	ck_assert_int_eq(f_connect(f, v), 1);
}

void
f_new(struct friend *f, struct victim *v)
{
	memset(f, 0, sizeof(*f));
	f->ch = evrdma_channel_new(v->env->base, EVRDMA_CHANNEL_STREAM);
	ck_assert_ptr_nonnull(f->ch);
	evrdma_channel_setcb(f->ch, f_read, NULL, f_event, f);
	evrdma_channel_enable(f->ch, EV_READ);
}

int
f_connect(struct friend *f, struct victim *v)
{
	f_new(f, v);
	ck_assert_int_eq(evrdma_channel_connect(f->ch,
	    (struct sockaddr *)&v->ss, v->sslen), 0);
	CH_WAIT(v->env->eb, f->connected || f->ends, 15000);
	return f->connected;
}

/* An echo round trip of @p n bytes through victim channel @p idx. */
void
f_echo(struct friend *f, struct victim *v, size_t n)
{
	static const uint8_t zeros[4096];
	size_t want = f->rx + n, k;

	while (n) {
		k = n < sizeof(zeros) ? n : sizeof(zeros);
		ck_assert_int_eq(evrdma_channel_write(f->ch, zeros, k), 0);
		n -= k;
	}
	CH_WAIT(v->env->eb, f->rx >= want || f->ends, 20000);
	ck_assert_uint_eq(f->rx, want);
	ck_assert_int_eq(f->ends, 0);
}

struct rp_chs
rp_hs(void)
{
	struct rp_chs h;

	memset(&h, 0, sizeof(h));
	h.version = RP_CH_VERSION;
	h.mode = 0;
	h.slots = RP_SLOTS;
	h.ctrl = RP_CTRL;
	h.slot_size = RP_SLOT;
	h.length = -1;
	return h;
}

/* Connect with channel handshake @p h (@p hs_len bytes of it; @p claim:
 * the user data length evrdma's header claims). 0 when accepted. With
 * h->src_rkey set, the peer's send ring is offered: that field and
 * src_base are filled in from its memory. */
int
rp_open(struct rawpeer *rp, struct victim *v, struct rp_chs *h,
    size_t hs_len, size_t claim)
{
	uint8_t hs[32], pd[56];
	size_t len;

	ck_assert_int_eq(rp_prepare(rp, v->env->eb,
	    (struct sockaddr *)&v->ss, v->sslen), 0);
	if (h->src_rkey) {
		h->src_rkey = rp->mr->rkey;
		h->src_base = (uintptr_t)rp->mem + RP_SEND_OFF;
	}
	rp_chs_encode(hs, h);
	len = rp_pdata(pd, 1, hs, hs_len, claim);
	ck_assert_int_eq(rp_connect_now(rp, pd, len, 15000), 0);
	return rp->established ? 0 : -1;
}

/*
 * A raw channel client: connects with a correct handshake (@p pull_min,
 * and its send ring offered when @p src), checks the victim's reply, posts
 * the receives its credits promise, and waits for the victim to accept.
 */
void
rp_channel(struct rawpeer *rp, struct victim *v, uint32_t pull_min,
    int src, struct rp_chs *vh)
{
	struct rp_chs h = rp_hs();
	int i, before = v->naccepted;

	h.pull_min = pull_min;
	h.src_rkey = src ? 1 : 0;
	ck_assert_int_eq(rp_open(rp, v, &h, 32, 32), 0);
	ck_assert_int_eq(rp_chs_decode(rp->reply, rp->reply_len, vh), 0);
	ck_assert_uint_eq(vh->version, RP_CH_VERSION);
	ck_assert_int_eq(vh->length, 32);
	ck_assert_int_eq(vh->bad_check, 0);
	for (i = 0; i < RP_SLOTS + RP_CTRL; i++)
		ck_assert_int_eq(rp_post_recv(rp, (size_t)i * RP_SLOT,
		    RP_SLOT), 0);
	CH_WAIT(v->env->eb, v->naccepted > before, 10000);
}

int
rp_status_of(struct rawpeer *rp, uint64_t wr, int ms, int must)
{
	const struct rp_wc *w = rp_wait_wr(rp, wr, ms);

	if (must)
		ck_assert_msg(w != NULL, "no completion for request %llu",
		    (unsigned long long)wr);
	return w ? w->status : -1;
}

/* The raw peer sends DATA: @p len bytes of its memory at @p off. */
void
rp_data(struct rawpeer *rp, size_t off, size_t len)
{
	ck_assert_int_eq(rp_send_imm(rp, off, len,
	    rp_imm(0, 0, 0, 0, 0, 0)), 0);
}

/* Wait until victim channel @p c has ended (or @p ms passed). */
void
v_wait_end(struct victim *v, struct vch *c, struct rawpeer *rp, int ms)
{
	uint64_t dl = tu_now_ms() + (uint64_t)ms;

	while (!c->ends) {
		ck_assert_msg(tu_now_ms() < dl, "the victim channel never "
		    "ended");
		if (rp)
			rp_run(rp, 20);
		else
			ch_step(v->env->eb, 20);
	}
}

void
v_drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	ck_assert_int_eq(syscall(SYS_capget, &h, d), 0);
	d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	d[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
	ck_assert_int_eq(syscall(SYS_capset, &h, d), 0);
}
