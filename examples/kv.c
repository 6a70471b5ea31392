/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma-kv: a tiny key-value store over message-mode channels.
 *
 *   evrdma-kv -s -a ADDR [-p PORT]               the server (until SIGINT)
 *   evrdma-kv -c -a ADDR [-p PORT] [REQUEST...]  the client
 *   evrdma-kv -a ADDR [-p PORT] [REQUEST...]     both ends in this process
 *
 * Each request and each reply is one channel message: the channel keeps the
 * boundaries, so there is no framing code here. Requests:
 *
 *   SET key value   -> OK               (value: the rest, any bytes)
 *   GET key         -> VALUE value | NOT_FOUND
 *   DEL key         -> DELETED | NOT_FOUND
 *   anything else   -> ERROR ...
 *
 * The client sends all its requests at once (pipelined) and matches the
 * replies in order. Without REQUESTs it runs a built-in script, including
 * a value that fills a whole message and a message one byte too large
 * (refused with EMSGSIZE by evrdma_channel_write()), and checks every
 * reply. ADDR is numeric; PORT defaults to 7178 (any free port when both
 * ends run here). Exit status 0 when every reply was as expected.
 */
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <evrdma.h>
#include <evrdma/channel.h>

struct entry {			/* one key and its value */
	struct entry *next;
	char *key, *val;
	size_t klen, vlen;
};

struct session {		/* one client channel of the server */
	struct session *next;
	struct evrdma_channel *ch;
	struct kv *kv;
};

struct req {			/* one request of the client */
	char *msg;
	size_t len;
	const char *expect;	/* NULL: any reply (user requests) */
	size_t expect_len;
};

struct kv {
	struct event_base *eb;
	struct evrdma_base *base;
	int ends, status;	/* ends still running; exit status */
	int keep_serving;	/* -s: the server outlives its clients */
	char *buf, *reply;	/* message buffers (max message size) */
	size_t max;
	struct evrdma_listener *lst;	/* server end */
	struct session *sessions;
	struct entry *store;
	struct evrdma_channel *cli;	/* client end */
	struct req *reqs;
	int nreqs, nreplies;
	char **user_reqs;
	int nuser;
	char *script_buf;	/* the built-in script's largest message */
};

static void
end(struct kv *kv, int failed)
{
	if (failed)
		kv->status = 1;
	if (--kv->ends <= 0 || failed)
		event_base_loopbreak(kv->eb);
}

/* Buffers for one whole message, sized when the first channel exists. */
static int
get_buffers(struct kv *kv, struct evrdma_channel *ch)
{
	if (kv->buf)
		return 0;
	kv->max = evrdma_channel_max_message(ch);
	kv->buf = malloc(kv->max);
	kv->reply = malloc(kv->max);
	return kv->buf && kv->reply ? 0 : -1;
}

/* ---------------------------------------------------------------- server */

static struct entry **
lookup(struct kv *kv, const char *key, size_t klen)
{
	struct entry **e;

	for (e = &kv->store; *e; e = &(*e)->next)
		if ((*e)->klen == klen && memcmp((*e)->key, key, klen) == 0)
			break;
	return e;
}

static char *
dup_bytes(const char *p, size_t n)
{
	char *s = malloc(n ? n : 1);

	if (s && n)
		memcpy(s, p, n);
	return s;
}

/* Execute one request; the reply goes to kv->reply. @return its length */
static size_t
execute(struct kv *kv, const char *msg, size_t len)
{
	const char *key, *val, *sp;
	size_t klen, vlen;
	struct entry **e, *n;
	char *copy;

#define REPLY(s) (memcpy(kv->reply, s, sizeof(s) - 1), sizeof(s) - 1)
	if (len < 4 || (memcmp(msg, "SET ", 4) != 0 &&
	    memcmp(msg, "GET ", 4) != 0 && memcmp(msg, "DEL ", 4) != 0))
		return REPLY("ERROR unknown command");
	key = msg + 4;
	sp = memchr(key, ' ', len - 4);
	klen = sp ? (size_t)(sp - key) : len - 4;
	if (klen == 0)
		return REPLY("ERROR empty key");
	e = lookup(kv, key, klen);
	if (msg[0] == 'S') {
		if (!sp)
			return REPLY("ERROR SET wants a value");
		val = sp + 1;
		vlen = len - (size_t)(val - msg);
		if (!*e) {
			n = calloc(1, sizeof(*n));
			if (!n || !(n->key = dup_bytes(key, klen))) {
				free(n);
				return REPLY("ERROR out of memory");
			}
			n->klen = klen;
			*e = n;
		}
		if (!(copy = dup_bytes(val, vlen)))
			return REPLY("ERROR out of memory");
		free((*e)->val);
		(*e)->val = copy;
		(*e)->vlen = vlen;
		return REPLY("OK");
	}
	if (sp)
		return REPLY("ERROR too many arguments");
	if (!*e)
		return REPLY("NOT_FOUND");
	if (msg[0] == 'D') {
		n = *e;
		*e = n->next;
		free(n->key);
		free(n->val);
		free(n);
		return REPLY("DELETED");
	}
	/* "VALUE " + value fits: the SET that stored it was longer */
	memcpy(kv->reply, "VALUE ", 6);
	memcpy(kv->reply + 6, (*e)->val, (*e)->vlen);
	return 6 + (*e)->vlen;
#undef REPLY
}

static void
session_free(struct session *s)
{
	struct session **p;

	for (p = &s->kv->sessions; *p != s; p = &(*p)->next)
		;
	*p = s->next;
	evrdma_channel_free(s->ch);
	free(s);
}

static void
server_read(struct evrdma_channel *ch, void *arg)
{
	struct session *s = arg;
	struct kv *kv = s->kv;
	ssize_t n;
	size_t rlen;

	while ((n = evrdma_channel_read_message(ch, kv->buf, kv->max)) >= 0) {
		rlen = execute(kv, kv->buf, (size_t)n);
		if (evrdma_channel_write(ch, kv->reply, rlen) < 0) {
			fprintf(stderr, "server: evrdma_channel_write: %s\n",
			    strerror(errno));
			break;
		}
	}
}

static void
server_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct session *s = arg;
	struct kv *kv = s->kv;
	int failed = !(what & BEV_EVENT_EOF);

	if (failed)
		fprintf(stderr, "server: channel %s: %s\n",
		    what & BEV_EVENT_TIMEOUT ? "timeout" : "error",
		    evrdma_reason_str(evrdma_channel_get_error(ch)));
	else
		printf("server: client left, %s\n",
		    kv->store ? "keys remain" : "store empty");
	session_free(s);
	if (!kv->keep_serving)
		end(kv, failed);
}

static void
server_accept(struct evrdma_listener *lst, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct kv *kv = arg;
	struct session *s = calloc(1, sizeof(*s));

	if (!s || get_buffers(kv, ch) < 0) {
		fprintf(stderr, "server: out of memory\n");
		free(s);
		evrdma_channel_free(ch);
		return;
	}
	s->ch = ch;
	s->kv = kv;
	s->next = kv->sessions;
	kv->sessions = s;
	if (!kv->keep_serving) {	/* one client is enough */
		evrdma_listener_free(lst);
		kv->lst = NULL;
	}
	evrdma_channel_setcb(ch, server_read, NULL, server_event, s);
	evrdma_channel_enable(ch, EV_READ);
}

/* ---------------------------------------------------------------- client */

static int
add_req(struct kv *kv, const char *msg, size_t len, const char *expect,
    size_t expect_len)
{
	struct req *r = &kv->reqs[kv->nreqs];

	r->msg = dup_bytes(msg, len);
	if (!r->msg)
		return -1;
	r->len = len;
	r->expect = expect;
	r->expect_len = expect_len;
	kv->nreqs++;
	return 0;
}

#define ADD(m, e) add_req(kv, m, sizeof(m) - 1, e, sizeof(e) - 1)

/* The built-in script; @return 0, or -1 (ENOMEM) */
static int
build_script(struct kv *kv)
{
	char *big;
	size_t vlen = kv->max - 8;	/* "SET big " + value = one full message */
	int rc;

	if (ADD("SET greeting hello, RDMA", "OK") < 0 ||
	    ADD("GET greeting", "VALUE hello, RDMA") < 0 ||
	    ADD("GET nothing", "NOT_FOUND") < 0 ||
	    ADD("SET greeting hi", "OK") < 0 ||
	    ADD("GET greeting", "VALUE hi") < 0 ||
	    ADD("DEL greeting", "DELETED") < 0 ||
	    ADD("GET greeting", "NOT_FOUND") < 0 ||
	    ADD("FETCH greeting", "ERROR unknown command") < 0)
		return -1;
	/* a value that makes the request exactly the largest message; its
	 * reply "VALUE " + value is 2 bytes shorter */
	big = kv->script_buf = malloc(kv->max + 1);
	if (!big)
		return -1;
	memcpy(big, "SET big ", 8);
	memset(big + 8, 'x', vlen);
	rc = add_req(kv, big, kv->max, "OK", 2);
	if (rc == 0) {
		memcpy(big + 2, "VALUE ", 6);	/* the expected reply */
		rc = add_req(kv, "GET big", 7, big + 2, kv->max - 2);
	}
	if (rc == 0)
		rc = ADD("DEL big", "DELETED");
	return rc;	/* script_buf stays: the expected reply is in it */
}

static void
show(const char *what, const char *p, size_t len)
{
	if (len > 40)
		printf("%s%.30s... (%zu bytes)", what, p, len);
	else
		printf("%s%.*s", what, (int)len, p);
}

static void
client_read(struct evrdma_channel *ch, void *arg)
{
	struct kv *kv = arg;
	struct req *r;
	ssize_t n;

	while (kv->nreplies < kv->nreqs &&
	    (n = evrdma_channel_read_message(ch, kv->buf, kv->max)) >= 0) {
		r = &kv->reqs[kv->nreplies++];
		show("> ", r->msg, r->len);
		show("  < ", kv->buf, (size_t)n);
		if (r->expect && ((size_t)n != r->expect_len ||
		    memcmp(kv->buf, r->expect, r->expect_len) != 0)) {
			show("  WRONG, expected ", r->expect, r->expect_len);
			printf("\n");
			kv->status = 1;
		} else
			printf("\n");
	}
	if (kv->nreplies < kv->nreqs)
		return;
	printf("client: %d replies%s\n", kv->nreplies, kv->nuser ? "" :
	    kv->status ? ", some wrong" : ", all as expected");
	fflush(stdout);
	/* freeing sends EOF after nothing: every request was answered */
	evrdma_channel_free(ch);
	kv->cli = NULL;
	end(kv, kv->status);
}

static void
client_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct kv *kv = arg;
	int i;

	if (!(what & BEV_EVENT_CONNECTED)) {
		fprintf(stderr, "client: %s\n", what & BEV_EVENT_ERROR ?
		    evrdma_reason_str(evrdma_channel_get_error(ch)) :
		    "the server closed the channel");
		end(kv, 1);
		return;
	}
	if (get_buffers(kv, ch) < 0)
		goto nomem;
	kv->reqs = calloc((size_t)kv->nuser + 16, sizeof(*kv->reqs));
	if (!kv->reqs)
		goto nomem;
	if (kv->nuser == 0) {
		if (build_script(kv) < 0)
			goto nomem;
		/* one byte more than a message holds: refused locally */
		if (evrdma_channel_write(ch, kv->script_buf, kv->max + 1) == 0 ||
		    errno != EMSGSIZE) {
			fprintf(stderr, "client: a %zu-byte message was not "
			    "refused with EMSGSIZE\n", kv->max + 1);
			end(kv, 1);
			return;
		}
		printf("client: a %zu-byte message is refused: %s\n",
		    kv->max + 1, strerror(EMSGSIZE));
	}
	for (i = 0; i < kv->nuser; i++)
		if (add_req(kv, kv->user_reqs[i], strlen(kv->user_reqs[i]),
		    NULL, 0) < 0)
			goto nomem;
	/* pipelined: every request now, one message each */
	for (i = 0; i < kv->nreqs; i++) {
		if (evrdma_channel_write(ch, kv->reqs[i].msg,
		    kv->reqs[i].len) < 0) {
			fprintf(stderr, "client: request %d: %s\n", i + 1,
			    strerror(errno));
			end(kv, 1);
			return;
		}
	}
	evrdma_channel_enable(ch, EV_READ);
	return;
nomem:
	fprintf(stderr, "client: out of memory\n");
	end(kv, 1);
}

/* ---------------------------------------------------------------- main */

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	event_base_loopbreak(arg);
}

int
main(int argc, char **argv)
{
	struct kv kv = { 0 };
	struct addrinfo hints = { 0 }, *ai = NULL;
	struct evrdma_stats st;
	struct event *sigint = NULL, *sigterm = NULL;
	const char *addr = NULL, *port = NULL;
	int opt, server = 1, client = 1, bad = 0, i;
	struct entry *e;

	while ((opt = getopt(argc, argv, "+sca:p:")) != -1) {
		switch (opt) {
		case 's': client = 0; break;
		case 'c': server = 0; break;
		case 'a': addr = optarg; break;
		case 'p': port = optarg; break;
		default: bad = 1;
		}
	}
	kv.user_reqs = argv + optind;
	kv.nuser = argc - optind;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	hints.ai_socktype = SOCK_STREAM;
	if (bad || !addr || !(server || client) || (!client && kv.nuser) ||
	    getaddrinfo(addr, port ? port : server && client ? "0" : "7178",
	    &hints, &ai) != 0) {
		fprintf(stderr, "usage: evrdma-kv [-s|-c] -a ADDR [-p PORT] "
		    "[REQUEST...]\n");
		return 1;
	}
	kv.ends = server + client;
	kv.keep_serving = server && !client;
	kv.eb = event_base_new();
	kv.base = kv.eb ? evrdma_base_new(kv.eb, NULL) : NULL;
	if (!kv.base) {
		fprintf(stderr, "evrdma_base_new: %s (%s)\n", strerror(errno),
		    evrdma_errmsg());
		return 1;
	}
	if (server) {
		kv.lst = evrdma_channel_listener_new(kv.base, server_accept,
		    &kv, EVRDMA_CHANNEL_MESSAGE, 16, ai->ai_addr,
		    (int)ai->ai_addrlen);
		if (!kv.lst) {
			fprintf(stderr, "evrdma_channel_listener_new: %s (%s)\n",
			    strerror(errno), evrdma_errmsg());
			kv.status = 1;
			goto out;
		}
		printf("listening on %s port %d\n", addr,
		    evrdma_listener_get_port(kv.lst));
		fflush(stdout);
		((struct sockaddr_in *)ai->ai_addr)->sin_port =
		    htons((uint16_t)evrdma_listener_get_port(kv.lst));
		sigint = evsignal_new(kv.eb, SIGINT, on_signal, kv.eb);
		sigterm = evsignal_new(kv.eb, SIGTERM, on_signal, kv.eb);
		if (sigint)
			evsignal_add(sigint, NULL);
		if (sigterm)
			evsignal_add(sigterm, NULL);
	}
	if (client) {
		kv.cli = evrdma_channel_new(kv.base, EVRDMA_CHANNEL_MESSAGE);
		if (!kv.cli) {
			fprintf(stderr, "evrdma_channel_new: %s\n",
			    strerror(errno));
			kv.status = 1;
			goto out;
		}
		evrdma_channel_setcb(kv.cli, client_read, NULL, client_event,
		    &kv);
		if (evrdma_channel_connect(kv.cli, ai->ai_addr,
		    (int)ai->ai_addrlen) < 0) {
			fprintf(stderr, "evrdma_channel_connect: %s (%s)\n",
			    strerror(errno), evrdma_errmsg());
			kv.status = 1;
			goto out;
		}
	}
	event_base_dispatch(kv.eb);
out:
	/* close what is left and let the teardown finish */
	if (kv.cli)
		evrdma_channel_free(kv.cli);
	while (kv.sessions)
		session_free(kv.sessions);
	evrdma_listener_free(kv.lst);
	do
		evrdma_base_get_stats(kv.base, &st);
	while (st.conns > 0 && event_base_loop(kv.eb, EVLOOP_ONCE) == 0);
	evrdma_base_free(kv.base);
	if (sigint)
		event_free(sigint);
	if (sigterm)
		event_free(sigterm);
	event_base_free(kv.eb);
	freeaddrinfo(ai);
	while ((e = kv.store)) {
		kv.store = e->next;
		free(e->key);
		free(e->val);
		free(e);
	}
	for (i = 0; kv.reqs && i < kv.nreqs; i++)
		free(kv.reqs[i].msg);
	free(kv.reqs);
	free(kv.script_buf);
	free(kv.buf);
	free(kv.reply);
	return kv.status;
}
