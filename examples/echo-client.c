/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma-echo-client: stream lines through an echo server and check them.
 *
 *   evrdma-echo-client [-n LINES] [-l LENGTH] ADDR PORT
 *
 * Connects a stream channel to ADDR PORT (evrdma-echo-server), sends LINES
 * lines (default 1000) of LENGTH bytes each (default 64, newline included),
 * reads the echo line by line, checks every byte, and prints how long it
 * took. Writing is driven by the write callback (output is refilled when it
 * drains to its low watermark), so any number of lines streams in bounded
 * memory; the channel's credits pace the sender. Exit status 0 when every
 * line came back intact.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <evrdma.h>
#include <evrdma/channel.h>

#define FILL	(256 * 1024)	/* output is refilled up to this ... */
#define LOWMARK	(64 * 1024)	/* ... when it drains to this */

struct client {
	struct event_base *eb;
	struct evrdma_channel *ch;
	long lines, sent, received;
	size_t len;
	char *line, *want;
	struct timespec t0;
	int status;		/* exit status; 1 until every line is back */
};

/* Line i: LENGTH-1 letters that depend on i, then '\n'. */
static void
make_line(char *buf, size_t len, long i)
{
	size_t j;

	for (j = 0; j + 1 < len; j++)
		buf[j] = (char)('a' + (i + (long)j) % 26);
	buf[len - 1] = '\n';
}

static double
elapsed_s(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) +
	    (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static void
finish(struct client *c, int status)
{
	c->status = status;
	evrdma_channel_free(c->ch);	/* allowed inside its callbacks */
	c->ch = NULL;
	event_base_loopbreak(c->eb);
}

/* Output drained to LOWMARK (or the channel just connected): refill. */
static void
write_cb(struct evrdma_channel *ch, void *arg)
{
	struct client *c = arg;
	struct evbuffer *out = evrdma_channel_get_output(ch);

	while (c->sent < c->lines && evbuffer_get_length(out) < FILL) {
		make_line(c->line, c->len, c->sent++);
		if (evbuffer_add(out, c->line, c->len) < 0) {
			fprintf(stderr, "evbuffer_add failed\n");
			finish(c, 1);
			return;
		}
	}
}

static void
read_cb(struct evrdma_channel *ch, void *arg)
{
	struct client *c = arg;
	struct evbuffer *in = evrdma_channel_get_input(ch);
	double s;

	while (c->received < c->lines && evbuffer_get_length(in) >= c->len) {
		make_line(c->want, c->len, c->received);
		/* remove, not readln: a line that lost its '\n' must not
		 * swallow the next one */
		evbuffer_remove(in, c->line, c->len);
		if (memcmp(c->line, c->want, c->len) != 0) {
			fprintf(stderr, "line %ld came back wrong: \"%.*s\"\n",
			    c->received, (int)c->len - 1, c->line);
			finish(c, 1);
			return;
		}
		c->received++;
	}
	if (c->received < c->lines)
		return;
	if (evbuffer_get_length(in) > 0) {
		fprintf(stderr, "%zu bytes more than sent came back\n",
		    evbuffer_get_length(in));
		finish(c, 1);
		return;
	}
	s = elapsed_s(&c->t0);
	printf("%ld lines of %zu bytes echoed intact in %.3f ms: "
	    "%.1f us per line, %.2f MB/s each way\n", c->lines, c->len,
	    s * 1e3, s * 1e6 / (double)c->lines,
	    (double)c->lines * (double)c->len / s / 1e6);
	finish(c, 0);
}

static void
event_cb(struct evrdma_channel *ch, short what, void *arg)
{
	struct client *c = arg;

	if (what & BEV_EVENT_CONNECTED) {
		clock_gettime(CLOCK_MONOTONIC, &c->t0);
		evrdma_channel_enable(ch, EV_READ);
		write_cb(ch, c);
		return;
	}
	if (what & BEV_EVENT_ERROR)
		fprintf(stderr, "channel error: %s\n",
		    evrdma_reason_str(evrdma_channel_get_error(ch)));
	else
		fprintf(stderr, "channel %s after %ld of %ld lines\n",
		    what & BEV_EVENT_EOF ? "closed by the server" : "timed out",
		    c->received, c->lines);
	finish(c, 1);
}

int
main(int argc, char **argv)
{
	struct client c = { .lines = 1000, .len = 64, .status = 1 };
	struct addrinfo hints = { 0 }, *ai = NULL;
	struct evrdma_base *base = NULL;
	struct evrdma_stats st;
	char *end;
	int opt;

	while ((opt = getopt(argc, argv, "n:l:")) != -1) {
		switch (opt) {
		case 'n':
			c.lines = strtol(optarg, &end, 10);
			if (*end || c.lines < 1)
				goto usage;
			break;
		case 'l':
			c.len = (size_t)strtoul(optarg, &end, 10);
			if (*end || c.len < 1 || c.len > (1 << 20))
				goto usage;
			break;
		default:
			goto usage;
		}
	}
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	hints.ai_socktype = SOCK_STREAM;
	if (argc - optind != 2 ||
	    getaddrinfo(argv[optind], argv[optind + 1], &hints, &ai) != 0)
		goto usage;

	c.line = malloc(c.len);
	c.want = malloc(c.len);
	c.eb = event_base_new();
	if (!c.line || !c.want || !c.eb)
		goto out;
	base = evrdma_base_new(c.eb, NULL);
	c.ch = base ? evrdma_channel_new(base, EVRDMA_CHANNEL_STREAM) : NULL;
	if (!c.ch) {
		fprintf(stderr, "evrdma: %s (%s)\n", strerror(errno),
		    evrdma_errmsg());
		goto out;
	}
	evrdma_channel_setcb(c.ch, read_cb, write_cb, event_cb, &c);
	evrdma_channel_setwatermark(c.ch, EV_WRITE, LOWMARK, 0);
	evrdma_channel_setwatermark(c.ch, EV_READ, c.len, 0);
	if (evrdma_channel_connect(c.ch, ai->ai_addr, (int)ai->ai_addrlen) < 0) {
		fprintf(stderr, "evrdma_channel_connect: %s (%s)\n",
		    strerror(errno), evrdma_errmsg());
		goto out;
	}
	event_base_dispatch(c.eb);
out:
	/* let the teardown finish so that the server sees an orderly EOF */
	if (c.ch)
		evrdma_channel_free(c.ch);
	if (base) {
		do
			evrdma_base_get_stats(base, &st, sizeof(st));
		while (st.conns > 0 &&
		    event_base_loop(c.eb, EVLOOP_ONCE) == 0);
		evrdma_base_free(base);
	}
	if (c.eb)
		event_base_free(c.eb);
	free(c.line);
	free(c.want);
	freeaddrinfo(ai);
	return c.status;
usage:
	fprintf(stderr, "usage: evrdma-echo-client [-n LINES] [-l LENGTH] "
	    "ADDR PORT\n");
	return 2;
}
