/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma-tls-echo: an echo server and client over TLS over RDMA. TLS is
 * libevent's own bufferevent_openssl, stacked with
 * bufferevent_openssl_filter_new() on an RDMA bufferevent, as it would be
 * on any bufferevent; with the TCP fallback the same binary speaks TLS over
 * TCP where there is no RDMA.
 *
 *   evrdma-tls-echo server ADDR PORT CERT.pem KEY.pem
 *   evrdma-tls-echo client ADDR PORT CA.pem SERVERNAME MESSAGE
 *
 * The client verifies the server's certificate against CA.pem and its name
 * against SERVERNAME, sends MESSAGE, prints the echo and exits 0 when it is
 * MESSAGE. The server drops a connection silent or not reading for 30 s,
 * and the client gives up on a server that does not answer for as long;
 * EVRDMA_TLS_ECHO_IDLE_S=SECONDS in the environment sets another limit
 * (a test waits 1 s, not 30). A certificate for a test:
 *   openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=echo \
 *       -addext subjectAltName=DNS:echo -keyout key.pem -out cert.pem
 */
#include <err.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <evrdma.h>

static SSL_CTX *ctx;
static const char *message;
static int status = 1;
static long idle_s;		/* IDLE_S, or EVRDMA_TLS_ECHO_IDLE_S */

static void tls_fail(const char *what)
{
	unsigned long e = ERR_get_error();

	errx(1, "%s: %s", what, e ? ERR_reason_error_string(e) :
	    evrdma_errmsg());
}

/* ---- server ---- */

/* Past this much unsent, stop reading until output drains to half: a
 * peer that sends and never reads must not make us buffer without end;
 * and a peer silent (or not reading) for IDLE_S (or
 * EVRDMA_TLS_ECHO_IDLE_S) seconds goes, so that idle connections cannot
 * hold every descriptor. */
#define ECHO_MAX	(1 << 20)
#define IDLE_S		30

static void echo_read(struct bufferevent *tls, void *arg)
{
	struct evbuffer *out = bufferevent_get_output(tls);

	evbuffer_add_buffer(out, bufferevent_get_input(tls));
	if (evbuffer_get_length(out) >= ECHO_MAX) {
		bufferevent_disable(tls, EV_READ);
		bufferevent_setwatermark(tls, EV_WRITE, ECHO_MAX / 2, 0);
	}
}

static void echo_write(struct bufferevent *tls, void *arg)
{
	bufferevent_setwatermark(tls, EV_WRITE, 0, 0);
	bufferevent_enable(tls, EV_READ);
}

static void echo_event(struct bufferevent *tls, short what, void *arg)
{
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		bufferevent_free(tls);
}

static void accept_cb(struct evrdma_listener *lst, struct bufferevent *bev,
    const struct sockaddr *peer, int socklen, void *arg)
{
	SSL *ssl = SSL_new(ctx);
	struct bufferevent *tls;

	fprintf(stderr, "connection over %s\n",
	    evrdma_bufferevent_get_transport(bev) == EVRDMA_TRANSPORT_RDMA ?
	    "RDMA" : "TCP");
	/* BEV_OPT_CLOSE_ON_FREE: freeing the TLS bufferevent frees the
	 * RDMA one under it, and with it the connection */
	if (!ssl || !(tls = bufferevent_openssl_filter_new(arg, bev, ssl,
	    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE))) {
		warnx("cannot start TLS on a new connection");
		SSL_free(ssl);
		bufferevent_free(bev);
		return;
	}
	struct timeval idle = { idle_s, 0 };

	bufferevent_setcb(tls, echo_read, echo_write, echo_event, NULL);
	/* The TLS filter moves tls's output down into bev's until that
	 * holds bev's write high watermark, and with none it moves it all:
	 * output never waited in tls, so echo_read() never stopped reading
	 * and the write timeout never began (a TLS peer that sent and never
	 * read took the server past 1 GB in 6 s, and kept it) */
	bufferevent_setwatermark(bev, EV_WRITE, 0, ECHO_MAX);
	bufferevent_set_timeouts(tls, &idle, &idle);
	bufferevent_enable(tls, EV_READ);
}

static int serve(struct event_base *eb, struct evrdma_base *base,
    const struct addrinfo *ai, const char *cert, const char *key)
{
	if (!(ctx = SSL_CTX_new(TLS_server_method())) ||
	    SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
		tls_fail("certificate");
	if (!evrdma_bufferevent_listener_new(base, accept_cb, eb,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 16, ai->ai_addr,
	    (int)ai->ai_addrlen))
		errx(1, "listen: %s", evrdma_errmsg());
	printf("listening\n");
	fflush(stdout);
	return event_base_dispatch(eb);
}

/* ---- client ---- */

static void reply_read(struct bufferevent *tls, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(tls);
	size_t len = strlen(message);

	if (evbuffer_get_length(in) < len)
		return;
	status = memcmp(evbuffer_pullup(in, -1), message, len) != 0;
	printf("%.*s\n", (int)len, (char *)evbuffer_pullup(in, -1));
	bufferevent_free(tls);
	event_base_loopexit(arg, NULL);
}

static void reply_event(struct bufferevent *tls, short what, void *arg)
{
	unsigned long e;

	if (what & BEV_EVENT_CONNECTED) {
		/* the TLS handshake is done (the certificate verified) */
		fprintf(stderr, "TLS up over %s\n",
		    evrdma_bufferevent_get_transport(tls) ==
		    EVRDMA_TRANSPORT_RDMA ? "RDMA" : "TCP");
		bufferevent_write(tls, message, strlen(message));
		return;
	}
	e = bufferevent_get_openssl_error(tls);
	warnx("connection %s before the echo came back%s%s",
	    what & BEV_EVENT_EOF ? "closed" : what & BEV_EVENT_TIMEOUT ?
	    "timed out" : "failed", e ? ": " : "",
	    e ? ERR_reason_error_string(e) : "");
	bufferevent_free(tls);
	event_base_loopexit(arg, NULL);
}

static int call(struct event_base *eb, struct evrdma_base *base,
    const struct addrinfo *ai, const char *ca, const char *name)
{
	struct bufferevent *bev, *tls;
	struct timeval idle = { idle_s, 0 };
	SSL *ssl;

	if (!(ctx = SSL_CTX_new(TLS_client_method())) ||
	    SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1)
		tls_fail("CA certificate");
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (!(ssl = SSL_new(ctx)) || SSL_set1_host(ssl, name) != 1 ||
	    SSL_set_tlsext_host_name(ssl, name) != 1)
		tls_fail("TLS");
	/* TLS stacks on the RDMA bufferevent before it connects, as on an
	 * unconnected bufferevent_socket: the handshake starts once the
	 * connection is up, and the event callback hears CONNECTED when
	 * TLS is */
	if (!(bev = evrdma_bufferevent_new(base, 0)))
		errx(1, "bufferevent: %s", evrdma_errmsg());
	if (!(tls = bufferevent_openssl_filter_new(eb, bev, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE)))
		tls_fail("bufferevent_openssl_filter_new");
	bufferevent_setcb(tls, reply_read, NULL, reply_event, eb);
	bufferevent_set_timeouts(tls, &idle, &idle);
	bufferevent_enable(tls, EV_READ);
	if (evrdma_bufferevent_connect(bev, ai->ai_addr,
	    (int)ai->ai_addrlen) < 0)
		errx(1, "connect: %s", evrdma_errmsg());
	event_base_dispatch(eb);
	return status;
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST }, *ai;
	struct event_base *eb = event_base_new();
	struct evrdma_config *cfg = evrdma_config_new();
	struct evrdma_base *base;
	int server = argc == 6 && strcmp(argv[1], "server") == 0;
	int client = argc == 7 && strcmp(argv[1], "client") == 0;
	const char *env = getenv("EVRDMA_TLS_ECHO_IDLE_S");
	char *end = NULL;
	int rc;

	/* 1 s to a day: 0 would turn the limit off without a word
	 * (libevent takes a zero timeval as no timeout), and a longer one
	 * is hardly a limit against idle peers */
	idle_s = env ? strtol(env, &end, 10) : IDLE_S;
	if ((!server && !client) || !*argv[argc - 1] ||
	    (env && (!*env || *end || idle_s < 1 || idle_s > 86400)) ||
	    getaddrinfo(argv[2], argv[3], &hints, &ai) != 0)
		errx(1, "usage: %s server ADDR PORT CERT.pem KEY.pem\n"
		    "       %s client ADDR PORT CA.pem SERVERNAME MESSAGE\n"
		    "  EVRDMA_TLS_ECHO_IDLE_S=SECONDS (1 to 86400, default %d):"
		    " the server drops\n  a connection silent or not reading"
		    " that long, the client gives up after it",
		    argv[0], argv[0], IDLE_S);
	/* RDMA where there is a device, TCP where there is none */
	evrdma_config_set_tcp_fallback(cfg, 1);
	base = evrdma_base_new(eb, cfg);
	evrdma_config_free(cfg);
	if (!base)
		errx(1, "evrdma_base_new: %s", evrdma_errmsg());
	if (server) {
		rc = serve(eb, base, ai, argv[4], argv[5]);
	} else {
		message = argv[6];
		rc = call(eb, base, ai, argv[4], argv[5]);
	}
	freeaddrinfo(ai);
	SSL_CTX_free(ctx);
	evrdma_base_free(base);
	event_base_free(eb);
	return rc;
}
