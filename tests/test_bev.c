/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma tests, the bufferevent adapter used as libevent programs use
 * bufferevents: filters stacked on it (bufferevent_filter_new() with a
 * byte transform, bufferevent_openssl_filter_new(): TLS over RDMA), many
 * bufferevents on one loop, and bufferevent_free() from inside each of its
 * callbacks. Every test runs on every backend of bevtest.h; every byte is
 * checked where it arrives against the sender's seeded stream, and every
 * event callback's flags are asserted. The expectations are the socket
 * bufferevent's (BT_TCP meets them too); where the adapter differs on
 * purpose, evrdma/bufferevent.h says so and the case says which.
 */
#include "bevtest.h"

#include <linux/capability.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

/* how long to go on looking once an end was reported, for a second one
 * that must not come (the guest is slower than the host) */
#define TB_QUIET_MS	(tu_have_rdma_cm() ? 300 : 150)
#define TB_WAIT_MS	60000
#define TB_CHUNK	(16 * KiB)

#define TB_ENDS		(BEV_EVENT_EOF | BEV_EVENT_ERROR)

/* ==== seeded byte streams ==== */

/*
 * The stream of a seed: its first 8 bytes are the seed (little endian),
 * so that a receiver that does not know it can learn it; byte 8 + i is
 * byte i % 8 of splitmix64's value for word i / 8. Any offset can be made
 * without the bytes before it.
 */
static uint64_t
sb_word(uint64_t seed, uint64_t i)
{
	uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void
sb_fill(uint64_t seed, uint64_t off, uint8_t *p, size_t n)
{
	size_t k = 0;

	for (; k < n && off < 8; k++, off++)
		p[k] = (uint8_t)(seed >> (8 * off));
	while (k < n) {
		uint64_t j = off - 8, w = sb_word(seed, j / 8);
		unsigned b;

		for (b = (unsigned)(j % 8); b < 8 && k < n; b++, k++, off++)
			p[k] = (uint8_t)(w >> (8 * b));
	}
}

/* What a receiver expects. */
struct sb_rx {
	const char *name;
	uint64_t seed;
	int learn;		/* the seed comes with the stream */
	uint64_t off;		/* bytes checked */
	uint8_t hdr[8];
};

static void
sb_rx_init(struct sb_rx *r, const char *name, uint64_t seed, int learn)
{
	memset(r, 0, sizeof(*r));
	r->name = name;
	r->seed = seed;
	r->learn = learn;
}

static void
sb_check(struct sb_rx *r, const uint8_t *buf, size_t n)
{
	uint8_t want[TB_CHUNK];
	size_t k = 0, m, i;

	for (; r->learn && k < n && r->off < 8; k++, r->off++) {
		r->hdr[r->off] = buf[k];
		if (r->off == 7)
			for (i = 0, r->seed = 0; i < 8; i++)
				r->seed |= (uint64_t)r->hdr[i] << (8 * i);
	}
	while (k < n) {
		m = n - k < sizeof(want) ? n - k : sizeof(want);
		sb_fill(r->seed, r->off, want, m);
		if (memcmp(buf + k, want, m)) {
			for (i = 0; buf[k + i] == want[i]; i++)
				;
			ck_abort_msg("%s: byte %llu of stream 0x%llx is 0x%02x, "
			    "not 0x%02x", r->name,
			    (unsigned long long)(r->off + i),
			    (unsigned long long)r->seed, buf[k + i], want[i]);
		}
		k += m;
		r->off += m;
	}
}

/* Check what @p in holds and take it: drained, or moved to @p echo. */
static void
sb_take(struct sb_rx *r, struct evbuffer *in, struct evbuffer *echo)
{
	uint8_t buf[TB_CHUNK];
	size_t n;

	while ((n = evbuffer_get_length(in)) > 0) {
		if (n > sizeof(buf))
			n = sizeof(buf);
		ck_assert_int_eq(evbuffer_copyout(in, buf, n), (int)n);
		sb_check(r, buf, n);
		if (echo)
			ck_assert_int_eq(evbuffer_remove_buffer(in, echo, n),
			    (int)n);
		else
			ck_assert_int_eq(evbuffer_drain(in, n), 0);
	}
}

/* Check what @p in holds, leaving it there. */
static void
sb_peek(struct sb_rx *r, struct evbuffer *in)
{
	size_t n = evbuffer_get_length(in);

	sb_check(r, n ? evbuffer_pullup(in, -1) : NULL, n);
}

/* Write @p n bytes of @p seed's stream from @p off. */
static void
sb_write(struct bufferevent *bev, uint64_t seed, uint64_t off, size_t n)
{
	uint8_t *p = malloc(n ? n : 1);

	ck_assert_ptr_nonnull(p);
	sb_fill(seed, off, p, n);
	ck_assert_int_eq(bufferevent_write(bev, p, n), 0);
	free(p);
}

/* ==== one end of a connection ==== */

struct tb_end;
typedef void (*tb_hook)(struct tb_end *);

struct tb_end {
	const char *name;
	void *t;			/* the test's state */
	struct bufferevent *bev;	/* the one the test uses (on top) */
	struct bufferevent *low;	/* under a filter (or bev itself) */
	struct sb_rx rx;
	int echo;			/* send back what arrives */
	int up;				/* BEV_EVENT_CONNECTED */
	int ends;			/* EOF and ERROR events */
	short what;			/* the first of them */
	short what2;			/* the second, if any */
	int others;			/* any other event */
	unsigned long ssl_err;		/* bufferevent_get_openssl_error() */
	int adapter;			/* an RDMA bufferevent (the adapter) */
	int free_on_end;		/* free it in the event callback */
	/* the test's own steps; NULL: check (and echo) / record */
	tb_hook on_read, on_write;
	void (*on_event)(struct tb_end *, short);
};

static void
tb_free(struct tb_end *e)
{
	if (e->bev)
		bufferevent_free(e->bev);
	e->bev = e->low = NULL;
}

static void
tb_readcb(struct bufferevent *bev, void *arg)
{
	struct tb_end *e = arg;

	ck_assert_ptr_eq(bev, e->bev);
	if (e->on_read) {
		e->on_read(e);
		return;
	}
	sb_take(&e->rx, bufferevent_get_input(bev),
	    e->echo ? bufferevent_get_output(bev) : NULL);
}

static void
tb_writecb(struct bufferevent *bev, void *arg)
{
	struct tb_end *e = arg;

	ck_assert_ptr_eq(bev, e->bev);
	if (e->on_write)
		e->on_write(e);
}

static void
tb_eventcb(struct bufferevent *bev, short what, void *arg)
{
	struct tb_end *e = arg;

	ck_assert_ptr_eq(bev, e->bev);
	if (what & BEV_EVENT_CONNECTED)
		e->up++;
	else if (what & TB_ENDS) {
		if (!e->ends++)
			e->what = what;
		else if (e->ends == 2)
			e->what2 = what;
	} else
		e->others++;
	if (what & BEV_EVENT_ERROR)
		e->ssl_err = bufferevent_get_openssl_error(bev);
	if (e->on_event)
		e->on_event(e, what);
	if (e->free_on_end && (what & TB_ENDS) && e->bev)
		tb_free(e);
}

static void
tb_setcb(struct tb_end *e)
{
	bufferevent_setcb(e->bev, tb_readcb, tb_writecb, tb_eventcb, e);
	ck_assert_int_eq(bufferevent_enable(e->bev, EV_READ), 0);
}

/* One end (EOF or error), and no second after a quiet while. */
static void
tb_one_end(struct bt_env *env, struct tb_end *e, short want)
{
	BT_WAIT(env->eb, e->ends, TB_WAIT_MS);
	bt_loop_for(env->eb, TB_QUIET_MS);
	ck_assert_msg(e->ends == 1 && e->what == want && !e->others,
	    "%s on %s: %d ends, the first 0x%x, the second 0x%x, %d other "
	    "events; wanted one end 0x%x", e->name, bt_name(env->backend),
	    e->ends, e->what, e->what2, e->others, want);
}

/* ==== 1. a libevent filter stacked on the bufferevent ==== */

#define FL_BYTES	(4 * MiB)
#define FL_SEED		0xf117e5eedull

/* The filter's transform: XOR with a key per direction, counted. */
struct xf {
	uint8_t in_key, out_key;
	uint64_t in_n, out_n;
};

static enum bufferevent_filter_result
xf_move(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t limit,
    enum bufferevent_flush_mode mode, uint8_t key, uint64_t *count)
{
	uint8_t buf[TB_CHUNK];
	size_t n = evbuffer_get_length(src), m, i, moved = 0;

	/* libevent passes what dst may take below its high watermark */
	if (mode == BEV_NORMAL && limit >= 0 && n > (size_t)limit)
		n = (size_t)limit;
	while (moved < n) {
		m = n - moved < sizeof(buf) ? n - moved : sizeof(buf);
		ck_assert_int_eq(evbuffer_remove(src, buf, m), (int)m);
		for (i = 0; i < m; i++)
			buf[i] ^= key;
		ck_assert_int_eq(evbuffer_add(dst, buf, m), 0);
		moved += m;
	}
	*count += moved;
	return moved ? BEV_OK : BEV_NEED_MORE;
}

static enum bufferevent_filter_result
xf_in(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t limit,
    enum bufferevent_flush_mode mode, void *ctx)
{
	struct xf *x = ctx;

	return xf_move(src, dst, limit, mode, x->in_key, &x->in_n);
}

static enum bufferevent_filter_result
xf_out(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t limit,
    enum bufferevent_flush_mode mode, void *ctx)
{
	struct xf *x = ctx;

	return xf_move(src, dst, limit, mode, x->out_key, &x->out_n);
}

struct fl {
	struct bt_env env;
	struct bt_listener l;
	struct tb_end c, s;
	struct xf cx, sx;
};

/* Stack the XOR filter on @p low (its context is the test's; no free
 * hook: the test outlives it). */
static void
fl_stack(struct tb_end *e, struct bufferevent *low, struct xf *x)
{
	e->low = low;
	e->adapter = bt_is_adapter(low);
	e->bev = bufferevent_filter_new(low, xf_in, xf_out,
	    BEV_OPT_CLOSE_ON_FREE, NULL, x);
	ck_assert_ptr_nonnull(e->bev);
	tb_setcb(e);
}

static void
fl_accept(struct bufferevent *bev, void *arg)
{
	struct fl *t = arg;

	ck_assert_ptr_null(t->s.bev);
	fl_stack(&t->s, bev, &t->sx);
}

/*
 * The client writes 4 MiB at once through its filter, the server's filter
 * undoes the transform and the server echoes every byte as it arrives
 * through its own; both directions run at the same time. Each direction
 * has its own key, so a byte that skipped a filter, or went through one
 * twice, arrives wrong. Then the client frees its filter (which frees the
 * bufferevent under it) and the server sees EOF, once.
 */
START_TEST(bev_filter_stacked)
{
	struct fl *t;

	if (!bt_available(_i))
		return;
	signal(SIGPIPE, SIG_IGN);
	t = calloc(1, sizeof(*t));
	ck_assert_ptr_nonnull(t);
	t->c.name = "filter client";
	t->s.name = "filter server";
	t->cx.out_key = t->sx.in_key = 0x5a;
	t->sx.out_key = t->cx.in_key = 0xa5;
	sb_rx_init(&t->c.rx, "filter client", FL_SEED, 0);
	sb_rx_init(&t->s.rx, "filter server", FL_SEED, 0);
	t->s.echo = 1;
	bt_env_init(&t->env, _i, NULL);
	bt_listen(&t->l, &t->env, fl_accept, t, 0);
	fl_stack(&t->c, bt_new(&t->env, 0), &t->cx);
	/* the connect is the bufferevent's under the filter; its events
	 * come up through the filter */
	bt_connect(&t->l, t->c.low, 0);
	BT_WAIT(t->env.eb, t->c.up && t->s.bev, TB_WAIT_MS);
	ck_assert_int_eq(t->c.up, 1);
	/* evrdma_bufferevent_get_transport() looks through the filter */
	ck_assert_int_eq(evrdma_bufferevent_get_transport(t->c.bev),
	    _i == BT_RDMA ? EVRDMA_TRANSPORT_RDMA : EVRDMA_TRANSPORT_TCP);

	sb_write(t->c.bev, FL_SEED, 0, FL_BYTES);
	BT_WAIT(t->env.eb, t->c.rx.off == FL_BYTES, TB_WAIT_MS);
	ck_assert_uint_eq(t->s.rx.off, FL_BYTES);
	ck_assert_uint_eq(t->cx.out_n, FL_BYTES);
	ck_assert_uint_eq(t->sx.in_n, FL_BYTES);
	ck_assert_uint_eq(t->sx.out_n, FL_BYTES);
	ck_assert_uint_eq(t->cx.in_n, FL_BYTES);
	ck_assert_int_eq(t->c.ends + t->s.ends + t->c.others + t->s.others,
	    0);

	/* the end: on every backend EOF|READING, as a socket's FIN */
	tb_free(&t->c);
	tb_one_end(&t->env, &t->s, BEV_EVENT_EOF | BEV_EVENT_READING);
	ck_assert_uint_eq(t->s.rx.off, FL_BYTES);
	tb_free(&t->s);
	bt_listener_free(&t->l);
	bt_env_fini(&t->env);
	free(t);
}
END_TEST

/* ==== 2. TLS over the bufferevent ==== */

#define TL_BYTES	(2 * MiB)
#define TL_C_SEED	0x7150c11e47ull
#define TL_S_SEED	0x71505e7e7ull
#define TL_NAME		"evrdma-test"

/* A P-256 key and a self-signed certificate for it, in memory. */
static void
tl_make_cert(EVP_PKEY **keyp, X509 **certp)
{
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_NAME *name;

	ck_assert_ptr_nonnull(key);
	ck_assert_ptr_nonnull(x);
	ck_assert_int_eq(X509_set_version(x, X509_VERSION_3), 1);
	ck_assert_int_eq(ASN1_INTEGER_set(X509_get_serialNumber(x), 1), 1);
	ck_assert_ptr_nonnull(X509_gmtime_adj(X509_getm_notBefore(x), -3600));
	ck_assert_ptr_nonnull(X509_gmtime_adj(X509_getm_notAfter(x), 3600));
	ck_assert_int_eq(X509_set_pubkey(x, key), 1);
	name = X509_get_subject_name(x);
	ck_assert_int_eq(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	    (const unsigned char *)TL_NAME, -1, -1, 0), 1);
	ck_assert_int_eq(X509_set_issuer_name(x, name), 1);
	ck_assert_int_gt(X509_sign(x, key, EVP_sha256()), 0);
	*keyp = key;
	*certp = x;
}

struct tl {
	struct bt_env env;
	struct bt_listener l;
	SSL_CTX *sctx, *cctx;
	struct tb_end c, s;
};

static struct bufferevent *
tl_wrap(struct tl *t, struct bufferevent *low, SSL_CTX *ctx,
    enum bufferevent_ssl_state state)
{
	SSL *ssl = SSL_new(ctx);
	struct bufferevent *bev;

	ck_assert_ptr_nonnull(ssl);
	if (state == BUFFEREVENT_SSL_CONNECTING)
		ck_assert_int_eq(SSL_set1_host(ssl, TL_NAME), 1);
	/* the SSL object is the bufferevent's from here on (freed with it,
	 * BEV_OPT_CLOSE_ON_FREE, as is low) */
	bev = bufferevent_openssl_filter_new(t->env.eb, low, ssl, state,
	    BEV_OPT_CLOSE_ON_FREE);
	ck_assert_ptr_nonnull(bev);
	return bev;
}

static void
tl_accept(struct bufferevent *bev, void *arg)
{
	struct tl *t = arg;

	ck_assert_ptr_null(t->s.bev);
	t->s.low = bev;
	t->s.adapter = bt_is_adapter(bev);
	t->s.bev = tl_wrap(t, bev, t->sctx, BUFFEREVENT_SSL_ACCEPTING);
	tb_setcb(&t->s);
	/* written now, sent once the handshake is done */
	sb_write(t->s.bev, TL_S_SEED, 0, TL_BYTES);
}

static void
tl_init(struct tl *t, int backend, int trust)
{
	EVP_PKEY *key;
	X509 *cert;

	t->c.name = "TLS client";
	t->s.name = "TLS server";
	sb_rx_init(&t->c.rx, "TLS client", TL_S_SEED, 0);
	sb_rx_init(&t->s.rx, "TLS server", TL_C_SEED, 0);
	tl_make_cert(&key, &cert);
	t->sctx = SSL_CTX_new(TLS_server_method());
	t->cctx = SSL_CTX_new(TLS_client_method());
	ck_assert_ptr_nonnull(t->sctx);
	ck_assert_ptr_nonnull(t->cctx);
	ck_assert_int_eq(SSL_CTX_use_certificate(t->sctx, cert), 1);
	ck_assert_int_eq(SSL_CTX_use_PrivateKey(t->sctx, key), 1);
	/* the client trusts exactly that certificate, or nothing */
	if (trust)
		ck_assert_int_eq(X509_STORE_add_cert(
		    SSL_CTX_get_cert_store(t->cctx), cert), 1);
	SSL_CTX_set_verify(t->cctx, SSL_VERIFY_PEER, NULL);
	X509_free(cert);
	EVP_PKEY_free(key);

	bt_env_init(&t->env, backend, NULL);
	bt_listen(&t->l, &t->env, tl_accept, t, 0);
	t->c.low = bt_new(&t->env, 0);
	t->c.adapter = bt_is_adapter(t->c.low);
	/* the handshake starts now: the ClientHello waits in the output of
	 * the unconnected bufferevent under it, and goes once connected */
	t->c.bev = tl_wrap(t, t->c.low, t->cctx, BUFFEREVENT_SSL_CONNECTING);
	tb_setcb(&t->c);
	bt_connect(&t->l, t->c.low, 0);
}

static void
tl_fini(struct tl *t)
{
	tb_free(&t->c);
	tb_free(&t->s);
	bt_listener_free(&t->l);
	bt_env_fini(&t->env);
	SSL_CTX_free(t->sctx);
	SSL_CTX_free(t->cctx);
}

/* The handshake done: the client's stream. */
static void
tl_client_event(struct tb_end *e, short what)
{
	if (what & BEV_EVENT_CONNECTED)
		sb_write(e->bev, TL_C_SEED, 0, TL_BYTES);
}

/*
 * TLS over the bufferevent: the client verifies the server's certificate
 * (and name) against the one it trusts, both send 2 MiB at once, checked
 * as they arrive; then a clean close: the client sends its close_notify
 * (SSL_shutdown()) and frees, and the server gets EOF|READING (libevent's
 * openssl bufferevent reports a close_notify so; an end without one would
 * be BEV_EVENT_ERROR, a truncation). The server frees its bufferevent in
 * that callback, as programs do: libevent 2.1's openssl bufferevent goes
 * on to report the end of the connection under it as a second event
 * (BEV_EVENT_ERROR), over plain TCP as over the adapter.
 */
START_TEST(bev_tls)
{
	struct tl *t;

	if (!bt_available(_i))
		return;
	signal(SIGPIPE, SIG_IGN);
	t = calloc(1, sizeof(*t));
	ck_assert_ptr_nonnull(t);
	t->c.on_event = tl_client_event;
	t->s.free_on_end = 1;
	tl_init(t, _i, 1);
	BT_WAIT(t->env.eb, (t->c.rx.off == TL_BYTES && t->s.rx.off ==
	    TL_BYTES) || t->c.ends || t->s.ends, TB_WAIT_MS);
	ck_assert_msg(!t->c.ends && !t->s.ends, "TLS on %s: client end 0x%x "
	    "(ssl error %lu), server end 0x%x (ssl error %lu)", bt_name(_i),
	    t->c.what, t->c.ssl_err, t->s.what, t->s.ssl_err);
	ck_assert_int_eq(t->c.up, 1);
	ck_assert_int_eq(t->s.up, 1);
	ck_assert_int_eq(evrdma_bufferevent_get_transport(t->c.bev),
	    _i == BT_RDMA ? EVRDMA_TRANSPORT_RDMA : EVRDMA_TRANSPORT_TCP);
	ck_assert_int_eq(SSL_get_verify_result(
	    bufferevent_openssl_get_ssl(t->c.bev)), X509_V_OK);

	ck_assert_int_ge(SSL_shutdown(bufferevent_openssl_get_ssl(t->c.bev)),
	    0);
	/* A socket bufferevent frees what it has not written yet; an
	 * adapter has moved it to its connection already (evrdma/
	 * bufferevent.h), so this holds at once there */
	BT_WAIT(t->env.eb, !evbuffer_get_length(bufferevent_get_output(
	    t->c.low)), TB_WAIT_MS);
	tb_free(&t->c);
	tb_one_end(&t->env, &t->s, BEV_EVENT_EOF | BEV_EVENT_READING);
	ck_assert_uint_eq(t->s.rx.off, TL_BYTES);
	tl_fini(t);
	free(t);
}
END_TEST

/*
 * A client that trusts nothing: its handshake fails on the server's
 * certificate with BEV_EVENT_ERROR and an OpenSSL error; the server hears
 * the client's alert as its own handshake's error. Both free their
 * bufferevents in the event callback (libevent's openssl bufferevent
 * would report the failure a second time otherwise, over TCP too). No
 * data moved, nothing left behind.
 */
START_TEST(bev_tls_untrusted)
{
	struct tl *t;

	if (!bt_available(_i))
		return;
	signal(SIGPIPE, SIG_IGN);
	t = calloc(1, sizeof(*t));
	ck_assert_ptr_nonnull(t);
	t->c.on_event = tl_client_event;
	t->c.free_on_end = t->s.free_on_end = 1;
	tl_init(t, _i, 0);
	tb_one_end(&t->env, &t->c, BEV_EVENT_ERROR | BEV_EVENT_READING);
	ck_assert_msg(t->c.ssl_err != 0, "no OpenSSL error on %s",
	    bt_name(_i));
	fprintf(stderr, "untrusted TLS on %s: client 0x%x %s\n", bt_name(_i),
	    t->c.what, ERR_error_string(t->c.ssl_err, NULL));
	/*
	 * The client's alert: a socket bufferevent freed in its callback
	 * drops it (not yet written to the kernel), and the server's
	 * openssl bufferevent turns the bare end of the connection into
	 * BEV_EVENT_ERROR; an adapter has moved it to its connection
	 * (evrdma/bufferevent.h), which delivers it, and the server's
	 * handshake fails reading it, with the alert's OpenSSL error.
	 */
	if (t->c.adapter) {
		tb_one_end(&t->env, &t->s, BEV_EVENT_ERROR |
		    BEV_EVENT_READING);
		ck_assert_msg(t->s.ssl_err != 0, "no OpenSSL error on the "
		    "server on %s", bt_name(_i));
	} else {
		tb_one_end(&t->env, &t->s, BEV_EVENT_ERROR);
	}
	ck_assert_int_eq(t->c.up + t->s.up, 0);
	ck_assert_uint_eq(t->c.rx.off + t->s.rx.off, 0);
	tl_fini(t);
	free(t);
}
END_TEST

/* ==== 3. many bufferevents on one loop ==== */

#define MB_N		200
#define MB_BYTES	(64 * KiB)
#define MB_SEED		0x3000u
/* connects waiting to be accepted at most (the listeners' backlog: 64) */
#define MB_PENDING	48
/* RDMA rings: 8 slots of 4 KiB each way, 64 KiB per channel, 400
 * channels: 25 MiB registered, where the default rings (2 MiB) would
 * want 800 MiB */
#define MB_SLOTS	8
#define MB_SLOT		4096

struct mb {
	struct bt_env env;
	struct bt_listener l;
	struct tb_end c[MB_N], s[MB_N];
	int nsrv;
	char limits[160];	/* the process's limits, for messages */
};

static void
mb_accept(struct bufferevent *bev, void *arg)
{
	struct mb *t = arg;
	struct tb_end *e;

	ck_assert_int_lt(t->nsrv, MB_N);
	e = &t->s[t->nsrv++];
	e->bev = e->low = bev;
	e->name = "server";
	/* which client this is, it learns from the stream's first bytes */
	sb_rx_init(&e->rx, "server", 0, 1);
	e->echo = 1;
	tb_setcb(e);
}

/* Once connected, the client sends the stream its echo is checked
 * against. */
static void
mb_client_event(struct tb_end *e, short what)
{
	if (what & BEV_EVENT_CONNECTED)
		sb_write(e->bev, e->rx.seed, 0, MB_BYTES);
}

/* CAP_IPC_LOCK lifts RLIMIT_MEMLOCK for registrations (ib_umem_get();
 * the guest runs the tests as root, with the default limit of 8 MiB). */
static int
mb_ipc_lock(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) != 0)
		return 0;
	return (d[CAP_IPC_LOCK / 32].effective &
	    (1u << (CAP_IPC_LOCK % 32))) != 0;
}

/* Enough descriptors and locked memory for the test, or a failure that
 * says which limit bites (not a skip). */
static void
mb_limits(struct mb *t, int backend)
{
	struct rlimit rl;
	/* rings both ways, each side; half again for the QPs and CQs */
	unsigned long long need = (unsigned long long)MB_N * 2 * 2 *
	    MB_SLOTS * MB_SLOT * 3 / 2;
	rlim_t fds = 3 * MB_N + 64;

	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < fds && rl.rlim_max >= fds) {
		rl.rlim_cur = fds;
		ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	ck_assert_msg(rl.rlim_cur >= fds, "RLIMIT_NOFILE %llu (hard %llu): "
	    "%llu descriptors needed for %d connections",
	    (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
	    (unsigned long long)fds, MB_N);
	ck_assert_int_eq(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
	snprintf(t->limits, sizeof(t->limits), "RLIMIT_MEMLOCK %s%llu "
	    "bytes%s, about %llu needed",
	    rl.rlim_cur == RLIM_INFINITY ? "unlimited, " : "",
	    rl.rlim_cur == RLIM_INFINITY ? 0ull :
	    (unsigned long long)rl.rlim_cur,
	    mb_ipc_lock() ? " (lifted: CAP_IPC_LOCK)" : "", need);
	if (backend == BT_TCP || !tu_have_rdma_cm())
		return;
	ck_assert_msg(mb_ipc_lock() || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur >= need,
	    "%d RDMA bufferevents on %s: %s", MB_N, bt_name(backend),
	    t->limits);
}

/*
 * 200 clients connect to one listener (at most MB_PENDING waiting to be
 * accepted at a time), each sends 64 KiB once connected and checks the
 * echo, all at the same time on one loop; the server side of each learns
 * which client it serves from the stream and checks it too. Then every
 * client is freed, and every server side sees EOF|READING, once.
 */
START_TEST(bev_many)
{
	struct evrdma_config *cfg;
	struct mb *t;
	uint8_t seen[MB_N];
	int i, started = 0, done;
	uint64_t dl;

	if (!bt_available(_i))
		return;
	signal(SIGPIPE, SIG_IGN);
	t = calloc(1, sizeof(*t));
	ck_assert_ptr_nonnull(t);
	mb_limits(t, _i);
	cfg = evrdma_config_new();
	ck_assert_ptr_nonnull(cfg);
	ck_assert_int_eq(evrdma_config_set_channel_ring(cfg, MB_SLOTS, MB_SLOT,
	    16 * KiB), 0);
	ck_assert_int_eq(evrdma_config_set_queue_depth(cfg, 32, 32), 0);
	bt_env_init(&t->env, _i, cfg);
	evrdma_config_free(cfg);
	bt_listen(&t->l, &t->env, mb_accept, t, 0);

	dl = tu_now_ms() + 120000;
	for (;;) {
		for (; started < MB_N && started - t->nsrv < MB_PENDING;
		    started++) {
			struct tb_end *e = &t->c[started];

			e->name = "client";
			sb_rx_init(&e->rx, "client", MB_SEED + started, 0);
			e->on_event = mb_client_event;
			e->bev = e->low = bt_new(&t->env, 0);
			tb_setcb(e);
			bt_connect(&t->l, e->bev, 0);
		}
		for (done = 0, i = 0; i < started; i++) {
			ck_assert_msg(!t->c[i].ends, "client %d on %s: event "
			    "0x%x (%s; %s)", i, bt_name(_i), t->c[i].what,
			    evrdma_reason_str(evrdma_bufferevent_get_error(
			    t->c[i].bev)), t->limits);
			done += t->c[i].rx.off == MB_BYTES;
		}
		if (done == MB_N)
			break;
		ck_assert_msg(tu_now_ms() < dl, "on %s: %d of %d connects "
		    "started, %d accepted, %d echoes complete", bt_name(_i),
		    started, MB_N, t->nsrv, done);
		bt_step(t->env.eb, 50);
	}
	ck_assert_int_eq(t->nsrv, MB_N);
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < MB_N; i++) {
		struct tb_end *s = &t->s[i];
		uint64_t k = s->rx.seed - MB_SEED;

		ck_assert_uint_eq(t->c[i].up, 1);
		ck_assert_uint_eq(s->rx.off, MB_BYTES);
		ck_assert_msg(k < MB_N && !seen[k], "server %d served stream "
		    "0x%llx", i, (unsigned long long)s->rx.seed);
		seen[k] = 1;
	}

	for (i = 0; i < MB_N; i++)
		tb_free(&t->c[i]);
	dl = tu_now_ms() + TB_WAIT_MS;
	for (;;) {
		for (done = 0, i = 0; i < MB_N; i++)
			done += t->s[i].ends > 0;
		if (done == MB_N)
			break;
		ck_assert_msg(tu_now_ms() < dl, "%d of %d servers saw their "
		    "client's end", done, MB_N);
		bt_step(t->env.eb, 50);
	}
	bt_loop_for(t->env.eb, TB_QUIET_MS);
	for (i = 0; i < MB_N; i++)
		ck_assert_msg(t->s[i].ends == 1 && t->s[i].what ==
		    (BEV_EVENT_EOF | BEV_EVENT_READING) && !t->s[i].others,
		    "server %d on %s: %d ends, the first 0x%x", i, bt_name(_i),
		    t->s[i].ends, t->s[i].what);
	for (i = 0; i < MB_N; i++)
		tb_free(&t->s[i]);
	bt_listener_free(&t->l);
	bt_env_fini(&t->env);
	free(t);
}
END_TEST

/* ==== 4. bufferevent_free() from inside each callback ==== */

enum fc_variant {
	FC_READ,		/* (a) client, read callback */
	FC_WRITE,		/* (b) client, write callback */
	FC_WRITE_LOW,		/* (b) the same, output at its low mark */
	FC_CONNECTED,		/* (c) client, event callback: CONNECTED */
	FC_EOF,			/* (d) server, event callback: EOF */
	FC_RESET,		/* (e) client, ERROR: the peer reset it */
	FC_REFUSED,		/* (e) client, ERROR: connect refused */
	FC_N
};

static const char *const fc_names[FC_N] = {
	"read callback", "write callback", "write callback at the low mark",
	"CONNECTED", "EOF",
	"ERROR (reset)", "ERROR (refused)"
};

#define FC_C_SEED	0xfc0c11e47ull
#define FC_S_SEED	0xfc05e7e7ull
#define FC_IN		(32 * KiB)	/* (a) what the client gets */
#define FC_PENDING	(4 * KiB)	/* (a) what it writes, then frees */
#define FC_DATA		(4 * MiB)	/* (b), (d): more than the channel takes */
#define FC_LOW		(1 * MiB)	/* (b) the write low watermark */
#define FC_EARLY	1000		/* (c) written before connecting */
#define FC_HIGH		1000		/* (e) the server's high watermark */
#define FC_UNREAD	4000		/* (e) what the client sends it */

struct fc {
	struct bt_env env;
	struct bt_listener l;
	int variant;
	struct tb_end c, s;
	int c_freed, s_freed;	/* freed from inside a callback */
	int wrote;
	int shut_pending;	/* (d) over TCP: shutdown once drained */
};

static void
fc_free_client(struct fc *t)
{
	ck_assert_int_eq(t->c_freed, 0);
	t->c_freed = 1;
	tb_free(&t->c);
}

/* (a) All that was sent is here (the low watermark): check it, leave it
 * unread, write more, free. */
static void
fc_read_free(struct tb_end *e)
{
	struct fc *t = e->t;

	ck_assert_uint_eq(evbuffer_get_length(bufferevent_get_input(e->bev)),
	    FC_IN);
	sb_peek(&e->rx, bufferevent_get_input(e->bev));
	sb_write(e->bev, FC_C_SEED, 0, FC_PENDING);
	fc_free_client(t);
}

/* (b) Output is empty (or at its low watermark): free. */
static void
fc_write_free(struct tb_end *e)
{
	struct fc *t = e->t;
	size_t left = evbuffer_get_length(bufferevent_get_output(e->bev));

	if (!t->wrote || left > (t->variant == FC_WRITE_LOW ? FC_LOW : 0))
		return;
	fc_free_client(t);
}

/* (d) over TCP: shutdown(2) once the socket took everything */
static void
fc_write_shut(struct tb_end *e)
{
	struct fc *t = e->t;

	if (t->shut_pending &&
	    !evbuffer_get_length(bufferevent_get_output(e->bev)))
		t->shut_pending = bt_shutdown(e->bev);
}

static void
fc_client_event(struct tb_end *e, short what)
{
	struct fc *t = e->t;

	switch (t->variant) {
	case FC_WRITE:
	case FC_WRITE_LOW:
		if (what & BEV_EVENT_CONNECTED) {
			sb_write(e->bev, FC_C_SEED, 0, FC_DATA);
			t->wrote = 1;
		}
		break;
	case FC_CONNECTED:
		if (what & BEV_EVENT_CONNECTED)
			fc_free_client(t);
		break;
	case FC_EOF:
		if (what & BEV_EVENT_CONNECTED) {
			sb_write(e->bev, FC_C_SEED, 0, FC_DATA);
			t->shut_pending = bt_shutdown(e->bev);
		}
		break;
	case FC_RESET:
		if (what & BEV_EVENT_CONNECTED)
			sb_write(e->bev, FC_C_SEED, 0, FC_UNREAD);
		else if (what & BEV_EVENT_ERROR)
			fc_free_client(t);
		break;
	case FC_REFUSED:
		if (what & BEV_EVENT_ERROR)
			fc_free_client(t);
		break;
	}
}

static void
fc_server_event(struct tb_end *e, short what)
{
	struct fc *t = e->t;

	if (t->variant == FC_EOF && (what & BEV_EVENT_EOF)) {
		/* everything came before the end */
		ck_assert_uint_eq(e->rx.off, FC_DATA);
		ck_assert_int_eq(t->s_freed, 0);
		t->s_freed = 1;
		tb_free(e);
	}
}

/* (e) reset: the server reads up to its high watermark and no further;
 * it checks what it holds from the start each time (input only grows) */
static void
fc_server_hold(struct tb_end *e)
{
	e->rx.off = 0;
	sb_peek(&e->rx, bufferevent_get_input(e->bev));
}

static void
fc_accept(struct bufferevent *bev, void *arg)
{
	struct fc *t = arg;

	ck_assert_ptr_null(t->s.bev);
	t->s.bev = t->s.low = bev;
	t->s.adapter = bt_is_adapter(bev);
	t->s.on_event = fc_server_event;
	tb_setcb(&t->s);
	switch (t->variant) {
	case FC_READ:
		sb_write(bev, FC_S_SEED, 0, FC_IN);
		break;
	case FC_RESET:
		bufferevent_setwatermark(bev, EV_READ, 0, FC_HIGH);
		t->s.on_read = fc_server_hold;
		break;
	}
}

/*
 * Variant _i / BT_N on backend _i % BT_N: the client (the server in (d))
 * frees its bufferevent from inside a callback; the loop goes on, the
 * other end hears one end, with the flags a socket bufferevent gives, and
 * nothing is left (bt_env_fini()). Under ASan, any use of the freed
 * bufferevent by the adapter after the callback returns shows here.
 */
START_TEST(bev_free_in_callback)
{
	int variant = _i / BT_N, backend = _i % BT_N, port;
	struct fc *t;

	if (!bt_available(backend))
		return;
	signal(SIGPIPE, SIG_IGN);
	t = calloc(1, sizeof(*t));
	ck_assert_ptr_nonnull(t);
	t->variant = variant;
	t->c.t = t->s.t = t;
	t->c.name = "client";
	t->s.name = "server";
	sb_rx_init(&t->c.rx, "client", FC_S_SEED, 0);
	sb_rx_init(&t->s.rx, "server", FC_C_SEED, 0);
	bt_env_init(&t->env, backend, NULL);
	bt_listen(&t->l, &t->env, fc_accept, t, 0);
	port = 0;
	if (variant == FC_REFUSED) {
		/* a port that was just free: listen, note it, stop */
		port = ntohs(((struct sockaddr_in *)&t->l.ss)->sin_port);
		bt_listener_free(&t->l);
		bt_loop_for(t->env.eb, 100);
	}
	t->c.bev = t->c.low = bt_new(&t->env, 0);
	t->c.adapter = bt_is_adapter(t->c.bev);
	t->c.on_event = fc_client_event;
	switch (variant) {
	case FC_READ:
		bufferevent_setwatermark(t->c.bev, EV_READ, FC_IN, 0);
		t->c.on_read = fc_read_free;
		break;
	case FC_WRITE_LOW:
		bufferevent_setwatermark(t->c.bev, EV_WRITE, FC_LOW, 0);
		/* FALLTHROUGH */
	case FC_WRITE:
		t->c.on_write = fc_write_free;
		break;
	case FC_CONNECTED:
		sb_write(t->c.bev, FC_C_SEED, 0, FC_EARLY);
		break;
	case FC_EOF:
		t->c.on_write = fc_write_shut;
		break;
	}
	tb_setcb(&t->c);
	bt_connect(&t->l, t->c.bev, port);
	fprintf(stderr, "free in the %s on %s\n", fc_names[variant],
	    bt_name(backend));

	switch (variant) {
	case FC_READ:
		BT_WAIT(t->env.eb, t->c_freed, TB_WAIT_MS);
		ck_assert_uint_eq(t->c.rx.off, FC_IN);
		tb_one_end(&t->env, &t->s, BEV_EVENT_EOF | BEV_EVENT_READING);
		/* What the client wrote just before its free: a socket
		 * bufferevent drops it (not yet written to the kernel), an
		 * adapter has moved it to its connection, which sends it
		 * (evrdma/bufferevent.h); in either case byte-exact. */
		ck_assert_uint_eq(t->s.rx.off, (t->c.adapter ? FC_PENDING : 0));
		break;
	case FC_WRITE:
		BT_WAIT(t->env.eb, t->c_freed, TB_WAIT_MS);
		tb_one_end(&t->env, &t->s, BEV_EVENT_EOF | BEV_EVENT_READING);
		ck_assert_uint_eq(t->s.rx.off, FC_DATA);
		break;
	case FC_WRITE_LOW:
		/* What output still held is dropped, as a socket
		 * bufferevent drops what it had not written; what went to
		 * the kernel or the channel arrives (byte-exact, checked),
		 * at least all but the low watermark's worth */
		BT_WAIT(t->env.eb, t->c_freed, TB_WAIT_MS);
		tb_one_end(&t->env, &t->s, BEV_EVENT_EOF | BEV_EVENT_READING);
		ck_assert_uint_ge(t->s.rx.off, FC_DATA - FC_LOW);
		ck_assert_uint_le(t->s.rx.off, FC_DATA);
		fprintf(stderr, "%llu of %u bytes arrived\n",
		    (unsigned long long)t->s.rx.off, FC_DATA);
		break;
	case FC_CONNECTED:
		BT_WAIT(t->env.eb, t->c_freed, TB_WAIT_MS);
		tb_one_end(&t->env, &t->s, BEV_EVENT_EOF | BEV_EVENT_READING);
		/* Bytes written before connecting go even so: a socket
		 * bufferevent writes its output after the event callback
		 * returns (libevent 2.1's bufferevent_writecb() holds its
		 * reference meanwhile), and the adapter's connect sends
		 * output after the callback too, the bufferevent not yet
		 * finalized (ad_connected()). */
		ck_assert_uint_eq(t->s.rx.off, FC_EARLY);
		break;
	case FC_EOF:
		/* the server frees on the EOF; the client hears EOF, once */
		BT_WAIT(t->env.eb, t->s_freed, TB_WAIT_MS);
		tb_one_end(&t->env, &t->c, BEV_EVENT_EOF | BEV_EVENT_READING);
		ck_assert_uint_eq(t->c.rx.off, 0);
		break;
	case FC_RESET:
		/* the server holds FC_HIGH bytes in its input and the rest
		 * in its transport (kernel or channel), unread, when it is
		 * freed: a socket answers with a reset, an adapter resets
		 * its channel; either way the client's read fails */
		BT_WAIT(t->env.eb, t->s.bev && evbuffer_get_length(
		    bufferevent_get_input(t->s.bev)) == FC_HIGH, TB_WAIT_MS);
		bt_loop_for(t->env.eb, TB_QUIET_MS);
		ck_assert_uint_eq(evbuffer_get_length(bufferevent_get_input(
		    t->s.bev)), FC_HIGH);
		tb_free(&t->s);
		BT_WAIT(t->env.eb, t->c_freed, TB_WAIT_MS);
		bt_loop_for(t->env.eb, TB_QUIET_MS);
		ck_assert_msg(t->c.ends == 1 && t->c.what ==
		    (BEV_EVENT_ERROR | BEV_EVENT_READING), "client on %s: "
		    "%d ends, the first 0x%x", bt_name(backend), t->c.ends,
		    t->c.what);
		break;
	case FC_REFUSED:
		BT_WAIT(t->env.eb, t->c_freed, TB_WAIT_MS);
		bt_loop_for(t->env.eb, TB_QUIET_MS);
		ck_assert_msg(t->c.ends == 1 && t->c.what == BEV_EVENT_ERROR &&
		    !t->c.up, "client on %s: %d ends, the first 0x%x",
		    bt_name(backend), t->c.ends, t->c.what);
		break;
	}
	ck_assert_int_eq(t->c.others + t->s.others, 0);
	tb_free(&t->c);
	tb_free(&t->s);
	bt_listener_free(&t->l);
	bt_env_fini(&t->env);
	free(t);
}
END_TEST

/* ==== per-connection statistics (issue 28) ==== */

struct bs {
	struct bt_env env;
	struct bt_listener l;
	struct bufferevent *srv;
	size_t rx;		/* what the server read */
	size_t cli_rx;		/* what the client read */
	int srv_eof;
};

static void
bs_read(struct bufferevent *bev, void *arg)
{
	struct bs *b = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	b->rx += evbuffer_get_length(in);
	evbuffer_drain(in, evbuffer_get_length(in));
}

static void
bs_cli_read(struct bufferevent *bev, void *arg)
{
	struct bs *b = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	b->cli_rx += evbuffer_get_length(in);
	evbuffer_drain(in, evbuffer_get_length(in));
}

static void
bs_srv_event(struct bufferevent *bev, short what, void *arg)
{
	struct bs *b = arg;

	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		b->srv_eof = what;
}

static void
bs_accept(struct bufferevent *bev, void *arg)
{
	struct bs *b = arg;

	b->srv = bev;
	bufferevent_setcb(bev, bs_read, NULL, bs_srv_event, b);
	bufferevent_enable(bev, EV_READ);
}

static struct evrdma_channel_stats
bs_get(struct bufferevent *bev)
{
	struct evrdma_channel_stats st;

	ck_assert_int_eq(evrdma_bufferevent_get_stats(bev, &st, sizeof(st)),
	    0);
	return st;
}

#define BS_BYTES	(100 * 1000)
#define BS_BACK		(30 * 1000)

/*
 * evrdma_bufferevent_get_stats() on every backend, on both ends: after
 * 100,000 bytes from the client and 30,000 back, each end reports exactly
 * what it sent and received, over RDMA (its channel's counts) and over TCP
 * (TCP_INFO: a socket bufferevent too, in fallback), with the transport
 * and the state; the server's data messages (segments) received are no
 * more than the client's sent; after the client's end the server still
 * counts the data alone (TCP counts the FIN in its sequence); what is no
 * bufferevent of either kind, or no buffer, fails with EINVAL.
 */
START_TEST(bev_stats)
{
	struct bs b;
	struct bufferevent *cli, *pair[2];
	struct evrdma_channel_stats st, sv;
	static uint8_t data[BS_BYTES];
	int want;

	if (!bt_available(_i))
		return;
	memset(&b, 0, sizeof(b));
	bt_env_init(&b.env, _i, NULL);
	bt_listen(&b.l, &b.env, bs_accept, &b, 0);
	cli = bt_new(&b.env, 0);
	bufferevent_setcb(cli, bs_cli_read, NULL, NULL, &b);
	bufferevent_enable(cli, EV_READ);
	bt_connect(&b.l, cli, 0);
	BT_WAIT(b.env.eb, b.srv != NULL, 20000);
	ck_assert_int_eq(bufferevent_write(cli, data, sizeof(data)), 0);
	ck_assert_int_eq(bufferevent_write(b.srv, data, BS_BACK), 0);
	BT_WAIT(b.env.eb, b.rx == BS_BYTES && b.cli_rx == BS_BACK, 20000);
	want = evrdma_bufferevent_get_transport(cli) == EVRDMA_TRANSPORT_RDMA ?
	    EVRDMA_TRANSPORT_RDMA : EVRDMA_TRANSPORT_TCP;
	/* (what the peer read the kernel sent: a moment ago, at most) */
	BT_WAIT(b.env.eb, bs_get(cli).bytes_sent == BS_BYTES &&
	    bs_get(b.srv).bytes_sent == BS_BACK, 5000);
	st = bs_get(cli);
	sv = bs_get(b.srv);
	fprintf(stderr, "bufferevent stats on %s: transport %d; client sent "
	    "%llu B in %llu, received %llu B in %llu, retransmits %llu; "
	    "server sent %llu B in %llu, received %llu B in %llu\n",
	    bt_name(_i), st.transport, st.bytes_sent, st.msgs_sent,
	    st.bytes_received, st.msgs_received, st.retransmits, sv.bytes_sent,
	    sv.msgs_sent, sv.bytes_received, sv.msgs_received);
	ck_assert_int_eq(st.transport, want);
	ck_assert_int_eq(st.state, EVRDMA_CHANNEL_CONNECTED);
	ck_assert_uint_eq(st.bytes_received, BS_BACK);
	ck_assert_uint_gt(st.msgs_sent, 0);
	ck_assert_int_eq(sv.transport, want);
	ck_assert_int_eq(sv.state, EVRDMA_CHANNEL_CONNECTED);
	ck_assert_uint_eq(sv.bytes_sent, BS_BACK);
	ck_assert_uint_eq(sv.bytes_received, BS_BYTES);
	/* data messages or segments on both counts: what one end received
	 * the other sent (TCP: and may have sent twice) */
	ck_assert_uint_gt(sv.msgs_received, 0);
	ck_assert_uint_le(sv.msgs_received, st.msgs_sent);
	ck_assert_uint_gt(st.msgs_received, 0);
	ck_assert_uint_le(st.msgs_received, sv.msgs_sent);
	if (want == EVRDMA_TRANSPORT_RDMA) {
		ck_assert_uint_eq(sv.msgs_received, st.msgs_sent);
		ck_assert_uint_eq(st.msgs_received, sv.msgs_sent);
	}
	/* the client's end: the server counts the same bytes */
	bufferevent_free(cli);
	BT_WAIT(b.env.eb, b.srv_eof != 0, 20000);
	ck_assert_int_eq(b.srv_eof, BEV_EVENT_EOF | BEV_EVENT_READING);
	sv = bs_get(b.srv);
	ck_assert_uint_eq(sv.bytes_received, BS_BYTES);
	ck_assert_uint_eq(sv.bytes_sent, BS_BACK);
	/* misuse */
	ck_assert_int_eq(evrdma_bufferevent_get_stats(NULL, &st, sizeof(st)),
	    -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(evrdma_bufferevent_get_stats(b.srv, NULL, sizeof(st)),
	    -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(bufferevent_pair_new(b.env.eb, 0, pair), 0);
	ck_assert_int_eq(evrdma_bufferevent_get_stats(pair[0], &st,
	    sizeof(st)), -1);
	ck_assert_int_eq(errno, EINVAL);
	bufferevent_free(pair[0]);
	bufferevent_free(pair[1]);
	bufferevent_free(b.srv);
	bt_listener_free(&b.l);
	bt_env_fini(&b.env);
}
END_TEST

/* ==== why a connection failed (issue 51) ==== */

struct be {
	struct bufferevent *srv;
	short what;		/* the client's end */
	int reason;		/* evrdma_bufferevent_get_error() then */
};

static void
be_event(struct bufferevent *bev, short what, void *arg)
{
	struct be *e = arg;

	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		e->what = what;
		e->reason = evrdma_bufferevent_get_error(bev);
	}
}

static void
be_accept(struct bufferevent *bev, void *arg)
{
	((struct be *)arg)->srv = bev;	/* not reading: bytes stay unread */
}

/*
 * The server frees its bufferevent with the client's bytes unread: the
 * client's connection is reset, BEV_EVENT_ERROR on every backend, and
 * evrdma_bufferevent_get_error() says why, in the event callback and
 * after it, also for a socket bufferevent (the fallback of a base without
 * RDMA, and libevent's own): over TCP the peer disconnected; before, the
 * socket said nothing ("no error").
 */
START_TEST(bev_error_reason)
{
	struct bt_env env;
	struct bt_listener l;
	struct bufferevent *cli;
	struct be e;

	if (!bt_available(_i))
		return;
	memset(&e, 0, sizeof(e));
	bt_env_init(&env, _i, NULL);
	bt_listen(&l, &env, be_accept, &e, 0);
	cli = bt_new(&env, 0);
	bufferevent_setcb(cli, NULL, NULL, be_event, &e);
	bufferevent_enable(cli, EV_READ);
	bt_connect(&l, cli, 0);
	BT_WAIT(env.eb, e.srv != NULL, 20000);
	ck_assert_int_eq(evrdma_bufferevent_get_error(cli), EVRDMA_REASON_NONE);
	ck_assert_int_eq(bufferevent_write(cli, "unread", 6), 0);
	bt_loop_for(env.eb, 200);	/* (at the server's end) */
	bufferevent_free(e.srv);
	BT_WAIT(env.eb, e.what != 0, 20000);
	fprintf(stderr, "reset on %s: 0x%x, %s\n", bt_name(_i), e.what,
	    evrdma_reason_str(e.reason));
	ck_assert(e.what & BEV_EVENT_ERROR);
	ck_assert_int_ne(e.reason, EVRDMA_REASON_NONE);
	if (evrdma_bufferevent_get_transport(cli) == EVRDMA_TRANSPORT_TCP)
		ck_assert_int_eq(e.reason, EVRDMA_REASON_DISCONNECTED);
	ck_assert_int_eq(evrdma_bufferevent_get_error(cli), e.reason);
	ck_assert_int_eq(evrdma_bufferevent_get_error(NULL),
	    EVRDMA_REASON_NONE);
	bufferevent_free(cli);
	bt_listener_free(&l);
	bt_env_fini(&env);
}
END_TEST

Suite *
bt_suite_bev(void)
{
	Suite *s = suite_create(tu_have_rdma_cm() ? "device-bev" : "bev");
	TCase *tc;

	tc = tcase_create("filter");
	tcase_set_timeout(tc, 180);
	tcase_add_loop_test(tc, bev_filter_stacked, 0, BT_N);
	suite_add_tcase(s, tc);
	tc = tcase_create("tls");
	tcase_set_timeout(tc, 180);
	tcase_add_loop_test(tc, bev_tls, 0, BT_N);
	tcase_add_loop_test(tc, bev_tls_untrusted, 0, BT_N);
	suite_add_tcase(s, tc);
	tc = tcase_create("many");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, bev_many, 0, BT_N);
	suite_add_tcase(s, tc);
	tc = tcase_create("free-in-callback");
	tcase_set_timeout(tc, 180);
	tcase_add_loop_test(tc, bev_free_in_callback, 0, FC_N * BT_N);
	tcase_add_loop_test(tc, bev_stats, 0, BT_N);
	tcase_add_loop_test(tc, bev_error_reason, 0, BT_N);
	suite_add_tcase(s, tc);
	return s;
}
