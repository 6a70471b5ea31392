/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma host tests: the channel's receive path (lib/chan.c), driven the
 * way the RDMA transport drives it (lib/chan_rx.c, lib/chan_rdma.c): a
 * kick schedules a pass from the loop; a pass holds a reference, moves
 * what arrived into input while reading is enabled and input has room
 * (evrdma__chan_room(); in message mode whole messages only, and one past
 * the high watermark into an empty input, as chan_rx.c's rule), tells the
 * semantics whether it holds bytes back (evrdma__chan_watch_input()),
 * then evrdma__chan_input_added() (the read callback), then the end's
 * check. What arrived is a queue of pieces here, copied into input or
 * added by reference with a cleanup, as chan_rx.c does with its slots.
 * Each test checks one promise of include/evrdma/channel.h or chan.h.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <event2/buffer.h>
#include <event2/buffer_compat.h>
#include <event2/event.h>

#include "chan.h"

Suite *chan_unit_rx_suite(void);

/* ---- a transport that receives ---- */

struct piece {
	const char *p;
	size_t len, off;
	int by_ref;
	int cleaned;		/* its cleanup's calls */
};

struct rx {
	struct evrdma_channel ch;	/* first, as the transport's */
	struct event *pass_ev;
	struct piece *q[16];		/* arrived, not yet all in input */
	unsigned head, tail;
};

/* (outside the channel: tests look at them after its free) */
static struct piece pieces[16];
static unsigned npieces;
static struct evrdma_base *rb;
static int kicks, passes, destructed;

static void
rx_cleanup(const void *data, size_t len, void *arg)
{
	struct piece *pc = arg;

	(void)data, (void)len;
	pc->cleaned++;
}

static int
rx_waiting(const struct rx *r)
{
	return r->head < r->tail;
}

/* the seam's rule (chan_input.c): a piece under small_max is copied, one
 * of small_max or more referenced; arrive() sets it from the pieces a
 * test wants referenced */
static size_t t_small;

static int
rx_ref_take(void *tp, void *arg)
{
	(void)tp;
	ck_assert_int_eq(((struct piece *)arg)->by_ref, 1);
	return 1;
}

static void
rx_ref_undo(void *tp, void *arg)
{
	(void)tp, (void)arg;
}

/* chan_rx.c's evrdma__rc_deliver(): what waits, as one batch through the
 * receive seam (evrdma__chan_deliver()); then what it took goes */
static void
rx_deliver(struct rx *r)
{
	struct evrdma__chan_piece v[16];
	struct evrdma__chan_batch b;
	unsigned n = 0, k;

	memset(&b, 0, sizeof(b));
	for (k = r->head; k < r->tail; k++) {
		struct piece *pc = r->q[k];

		v[n].p = (const uint8_t *)pc->p + pc->off;
		v[n].len = pc->len - pc->off;
		v[n].ref_arg = pc;
		v[n].took = 0;
		n++;
	}
	b.v = v;
	b.n = n;
	b.small_max = t_small;
	b.copy_max = (size_t)-1;
	b.ref_room = 16;
	b.tp = r;
	b.ref_take = rx_ref_take;
	b.ref_undo = rx_ref_undo;
	b.ref_cleanup = rx_cleanup;
	evrdma__chan_deliver(&r->ch, &b);
	for (k = 0; k < b.done; k++) {
		r->q[r->head]->off = r->q[r->head]->len;
		r->head++;
	}
	if (b.done < n)		/* cut at the read high watermark */
		r->q[r->head]->off += v[b.done].took;
	/* (input refused them: chan_rx.c holds them in their slot and ends
	 * the channel, as a socket's failed read does) */
	if (b.fail && !(r->ch.end & CHE_FREED))
		r->ch.ops->abort(&r->ch, b.fail);
}

/* chan_rdma.c's rc_pass(), its receiving half */
static void
rx_pass_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rx *r = arg;
	struct evrdma_channel *ch = &r->ch;

	(void)fd, (void)what;
	passes++;
	evrdma__chan_ref(ch);
	if (!(ch->end & (CHE_FREED | CHE_RD_ENDED)))
		rx_deliver(r);
	if (ch->end & (CHE_PEER_EOF | CHE_GONE))
		evrdma__chan_check_end(ch, rx_waiting(r));
	evrdma__chan_unref(ch);
}

static void
rx_kick(struct evrdma_channel *ch)
{
	kicks++;
	event_active(((struct rx *)ch)->pass_ev, EV_TIMEOUT, 0);
}

/* (set by a test that lets the channel end: the reason is recorded) */
static int abort_ok, aborts, abort_reason;

static void
rx_abort(struct evrdma_channel *ch, int reason)
{
	(void)ch;
	if (!abort_ok)
		ck_abort_msg("the receive path aborted the channel");
	if (!aborts++)
		abort_reason = reason;
}

static int
rx_write(struct evrdma_channel *ch, const void *data, size_t len)
{
	(void)ch, (void)data, (void)len;
	return -1;
}

static size_t
rx_max_message(struct evrdma_channel *ch)
{
	(void)ch;
	return 65536;
}

/* the user's free: the transport lets go of its reference */
static void
rx_close(struct evrdma_channel *ch)
{
	evrdma__chan_output_discard(ch);
	evrdma__chan_unref(ch);
}

static void
rx_none(struct evrdma_channel *ch)
{
	(void)ch;
}

/* (set by a test: the freed channel's memory is filled with a pattern
 * and kept, so that anything that still reaches it afterwards reads
 * garbage pointers and faults at once, as it may by chance otherwise) */
static int poison_on_destruct;
static void *poisoned;		/* (freed at the teardown) */

static void
rx_destruct(struct evrdma_channel *ch)
{
	struct rx *r = (struct rx *)ch;

	destructed++;
	event_free(r->pass_ev);
	evrdma__chan_fini(ch);
	if (poison_on_destruct) {
		memset(r, 0x5a, sizeof(*r));
		poisoned = r;
		return;
	}
	free(r);
}

static const struct evrdma__chan_ops rx_ops = {
	.kick = rx_kick,
	.abort = rx_abort,
	.write = rx_write,
	.max_message = rx_max_message,
	.close = rx_close,
	.exiting = rx_none,
	.base_gone = rx_none,
	.destruct = rx_destruct,
};

/* ---- what the application sees ---- */

static int reads, events, last_what, last_errno;
static size_t read_len, event_len;	/* input's length then */
static enum { R_NONE, R_FREE, R_DRAIN } read_does;

static void
on_read(struct evrdma_channel *ch, void *arg)
{
	(void)arg;
	reads++;
	read_len = evbuffer_get_length(evrdma_channel_get_input(ch));
	if (read_does == R_FREE)
		evrdma_channel_free(ch);
	else if (read_does == R_DRAIN)
		evbuffer_drain(ch->input, read_len);
}

static int event_frees;

static void
on_event(struct evrdma_channel *ch, short what, void *arg)
{
	(void)arg;
	last_errno = errno;
	events++;
	last_what = what;
	event_len = evbuffer_get_length(evrdma_channel_get_input(ch));
	if (event_frees)
		evrdma_channel_free(ch);
}

static void
setup(void)
{
	rb = calloc(1, sizeof(*rb));
	ck_assert_ptr_nonnull(rb);
	rb->eb = event_base_new();
	ck_assert_ptr_nonnull(rb->eb);
	LIST_INIT(&rb->hooks);
	kicks = passes = destructed = 0;
	reads = events = last_what = last_errno = 0;
	read_len = event_len = 0;
	read_does = R_NONE;
	event_frees = 0;
	abort_ok = aborts = abort_reason = 0;
	poison_on_destruct = 0;
	memset(pieces, 0, sizeof(pieces));
	npieces = 0;
	t_small = (size_t)-1;
}

static void
teardown(void)
{
	free(poisoned);
	poisoned = NULL;
	event_base_free(rb->eb);
	free(rb);
}

/* An accepted channel (connected, no event), callbacks set; reading
 * enabled unless @p mode says EV_READ stays off. */
#define NO_READ 0x1
static struct rx *
mk(int mode, int flags)
{
	struct rx *r = calloc(1, sizeof(*r));

	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(evrdma__chan_init(&r->ch, rb, &rx_ops, mode), 0);
	r->pass_ev = event_new(rb->eb, -1, 0, rx_pass_cb, r);
	ck_assert_ptr_nonnull(r->pass_ev);
	evrdma__chan_ref(&r->ch);	/* the transport's, until close */
	evrdma__chan_accepted(&r->ch);
	evrdma_channel_setcb(&r->ch, on_read, NULL, on_event, NULL);
	if (!(flags & NO_READ))
		ck_assert_int_eq(evrdma_channel_enable(&r->ch, EV_READ), 0);
	return r;
}

/* @p s arrives (one message in message mode); the transport kicks */
static struct piece *
arrive(struct rx *r, const char *s, size_t len, int by_ref)
{
	struct piece *pc;
	unsigned k;

	ck_assert_uint_lt(r->tail, 16);
	ck_assert_uint_lt(npieces, 16);
	pc = r->q[r->tail++] = &pieces[npieces++];
	pc->p = s;
	pc->len = len;
	pc->by_ref = by_ref;
	/* (the seam decides by length: every piece of the test must agree
	 * with the rule the one threshold makes) */
	if (by_ref && len < t_small)
		t_small = len;
	for (k = 0; k < npieces; k++)
		ck_assert_msg(pieces[k].by_ref ? pieces[k].len >= t_small :
		    pieces[k].len < t_small, "piece %u: the test wants it %s, "
		    "the seam's rule decides by length", k,
		    pieces[k].by_ref ? "referenced" : "copied");
	rx_kick(&r->ch);
	return pc;
}

/* run the loop until no pass is due */
static void
spin(void)
{
	int i;

	for (i = 0; i < 8; i++)
		event_base_loop(rb->eb, EVLOOP_NONBLOCK);
}

static void
run_ms(int ms)
{
	struct timeval tv = { 0, ms * 1000 };

	event_base_loopexit(rb->eb, &tv);
	event_base_dispatch(rb->eb);
}

static void
expect_input(struct rx *r, const char *want)
{
	size_t n = strlen(want);
	struct evbuffer *in = evrdma_channel_get_input(&r->ch);
	char got[64];

	/* (copied out, not pulled up: a pullup would copy referenced
	 * chains and run their cleanups) */
	ck_assert_uint_le(n, sizeof(got));
	ck_assert_uint_eq(evbuffer_get_length(in), n);
	ck_assert_int_eq(evbuffer_copyout(in, got, n), (ev_ssize_t)n);
	ck_assert_mem_eq(got, want, n);
}

/* ---- bytes join input ---- */

/* Copied bytes join input, then the read callback runs once, seeing them
 * (channel.h: "the read callback runs after new data"). */
START_TEST(copied_bytes_join_input_then_read_cb)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);

	arrive(r, "hello", 5, 0);
	spin();
	expect_input(r, "hello");
	ck_assert_int_eq(reads, 1);
	ck_assert_uint_eq(read_len, 5);
	evrdma_channel_free(&r->ch);
	ck_assert_int_eq(destructed, 1);
}
END_TEST

/* Bytes added by reference: the cleanup runs once, when the application
 * drains the last of them, not at a partial drain nor again at free
 * (chan.h: "cleanup(p, len, arg) when input lets them go"). */
START_TEST(referenced_bytes_cleanup_once_at_drain)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);
	struct piece *pc = arrive(r, "0123456789", 10, 1);
	char buf[16];

	spin();
	expect_input(r, "0123456789");
	ck_assert_int_eq(pc->cleaned, 0);
	ck_assert_uint_eq(evrdma_channel_read(&r->ch, buf, 4), 4);
	ck_assert_int_eq(pc->cleaned, 0);
	ck_assert_uint_eq(evrdma_channel_read(&r->ch, buf, sizeof(buf)), 6);
	ck_assert_mem_eq(buf, "456789", 6);
	ck_assert_int_eq(pc->cleaned, 1);
	evrdma_channel_free(&r->ch);
	ck_assert_int_eq(pc->cleaned, 1);
}
END_TEST

/* ... and once when the channel is freed with them unread. */
START_TEST(referenced_bytes_cleanup_once_at_free)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);
	struct piece *pc = arrive(r, "abcdef", 6, 1);
	struct piece *pc2 = arrive(r, "gh", 2, 1);

	spin();
	expect_input(r, "abcdefgh");
	ck_assert_int_eq(pc->cleaned + pc2->cleaned, 0);
	evrdma_channel_free(&r->ch);
	ck_assert_int_eq(destructed, 1);
	ck_assert_int_eq(pc->cleaned, 1);
	ck_assert_int_eq(pc2->cleaned, 1);
}
END_TEST

/* A pass that moves nothing calls no read callback (channel.h: "after
 * new data"): a drain kicks the transport, its pass finds nothing new. */
START_TEST(read_cb_only_after_new_data)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);
	int k;

	arrive(r, "abc", 3, 0);
	spin();
	ck_assert_int_eq(reads, 1);
	k = passes;
	rx_kick(&r->ch);
	spin();
	ck_assert_int_gt(passes, k);
	ck_assert_int_eq(reads, 1);
	arrive(r, "d", 1, 0);
	spin();
	ck_assert_int_eq(reads, 2);
	ck_assert_uint_eq(read_len, 4);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* A new channel has EV_READ disabled: what arrives waits, with no read
 * callback; enabling EV_READ kicks the transport and delivers it; a
 * disable holds the next arrival again (channel.h: "enable EV_READ to
 * receive", set_recv_cb: "EV_READ still gates delivery"). */
START_TEST(ev_read_disabled_holds_delivery)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, NO_READ);
	int k;

	ck_assert_int_eq(evrdma_channel_get_enabled(&r->ch), EV_WRITE);
	arrive(r, "abc", 3, 0);
	spin();
	expect_input(r, "");
	ck_assert_int_eq(reads, 0);
	ck_assert_uint_eq(evrdma__chan_room(&r->ch, 0), 0);
	k = kicks;
	ck_assert_int_eq(evrdma_channel_enable(&r->ch, EV_READ), 0);
	ck_assert_int_eq(kicks, k + 1);
	spin();
	expect_input(r, "abc");
	ck_assert_int_eq(reads, 1);
	ck_assert_int_eq(evrdma_channel_disable(&r->ch, EV_READ), 0);
	arrive(r, "de", 2, 0);
	spin();
	expect_input(r, "abc");
	ck_assert_int_eq(reads, 1);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* ---- messages ---- */

/* Each arrival is one message, read whole and in order; NULL asks the
 * length only; none left is EAGAIN (channel.h, read_message). */
START_TEST(read_message_whole_in_order)
{
	struct rx *r = mk(EVRDMA_CHANNEL_MESSAGE, 0);
	struct piece *pc;
	char buf[16];

	arrive(r, "aaa", 3, 0);
	pc = arrive(r, "bbbbb", 5, 1);
	spin();
	ck_assert_int_eq(evrdma_channel_read_message(&r->ch, NULL, 0), 3);
	ck_assert_int_eq(evrdma_channel_read_message(&r->ch, buf, 16), 3);
	ck_assert_mem_eq(buf, "aaa", 3);
	ck_assert_int_eq(pc->cleaned, 0);
	ck_assert_int_eq(evrdma_channel_read_message(&r->ch, buf, 16), 5);
	ck_assert_mem_eq(buf, "bbbbb", 5);
	ck_assert_int_eq(pc->cleaned, 1);
	errno = 0;
	ck_assert_int_eq(evrdma_channel_read_message(&r->ch, buf, 16), -1);
	ck_assert_int_eq(errno, EAGAIN);
	evrdma_channel_free(&r->ch);
	ck_assert_int_eq(pc->cleaned, 1);
}
END_TEST

/* A buffer too small: EMSGSIZE, and the message stays queued whole. */
START_TEST(read_message_too_small_keeps_it)
{
	struct rx *r = mk(EVRDMA_CHANNEL_MESSAGE, 0);
	char buf[16];

	arrive(r, "abcdef", 6, 0);
	spin();
	errno = 0;
	ck_assert_int_eq(evrdma_channel_read_message(&r->ch, buf, 5), -1);
	ck_assert_int_eq(errno, EMSGSIZE);
	expect_input(r, "abcdef");
	ck_assert_int_eq(evrdma_channel_read_message(&r->ch, buf, 6), 6);
	ck_assert_mem_eq(buf, "abcdef", 6);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* Input drained other than by read_message (directly, or by
 * evrdma_channel_read()): the boundaries are lost, EBADMSG (channel.h). */
START_TEST(read_message_ebadmsg_after_direct_drain)
{
	struct rx *r = mk(EVRDMA_CHANNEL_MESSAGE, 0);
	char buf[16];

	arrive(r, "aaaa", 4, 0);
	arrive(r, "bbbb", 4, 0);
	spin();
	evbuffer_drain(evrdma_channel_get_input(&r->ch), 4);
	errno = 0;
	ck_assert_int_eq(evrdma_channel_read_message(&r->ch, buf, 16), -1);
	ck_assert_int_eq(errno, EBADMSG);
	evrdma_channel_free(&r->ch);
}
END_TEST

START_TEST(read_message_ebadmsg_after_channel_read)
{
	struct rx *r = mk(EVRDMA_CHANNEL_MESSAGE, 0);
	char buf[16];

	arrive(r, "aaaa", 4, 0);
	spin();
	ck_assert_uint_eq(evrdma_channel_read(&r->ch, buf, 2), 2);
	errno = 0;
	ck_assert_int_eq(evrdma_channel_read_message(&r->ch, NULL, 0), -1);
	ck_assert_int_eq(errno, EBADMSG);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* ---- watermarks ---- */

/* Read low watermark: the read callback runs only once input holds at
 * least that much (channel.h). */
START_TEST(low_watermark_read_cb_when_reached)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);

	evrdma_channel_setwatermark(&r->ch, EV_READ, 8, 0);
	arrive(r, "12345", 5, 0);
	spin();
	expect_input(r, "12345");
	ck_assert_int_eq(reads, 0);
	arrive(r, "678", 3, 0);
	spin();
	ck_assert_int_eq(reads, 1);
	ck_assert_uint_eq(read_len, 8);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* Read high watermark: a stream is cut there, the channel reports itself
 * held (rd_held, input's drains watched), room is 0; a drain below the
 * mark resumes and kicks the transport, which moves the rest, in order
 * (channel.h: "input takes at most the read high watermark"). */
START_TEST(high_watermark_holds_and_drain_resumes)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);
	int k;

	evrdma_channel_setwatermark(&r->ch, EV_READ, 0, 8);
	arrive(r, "abcdefghijklmnopqrst", 20, 0);
	spin();
	expect_input(r, "abcdefgh");
	ck_assert_int_eq(r->ch.rd_held, 1);
	ck_assert_int_eq(r->ch.in_watch, 1);
	ck_assert_uint_eq(evrdma__chan_room(&r->ch, 8), 0);
	ck_assert_int_eq(reads, 1);
	k = kicks;
	evbuffer_drain(r->ch.input, 3);
	ck_assert_int_eq(r->ch.rd_held, 0);
	ck_assert_int_eq(kicks, k + 1);
	spin();
	expect_input(r, "defghijk");
	ck_assert_int_eq(r->ch.rd_held, 1);
	ck_assert_int_eq(reads, 2);
	read_does = R_DRAIN;
	evbuffer_drain(r->ch.input, 8);
	spin();
	/* the rest came in two passes, each drained by the read callback */
	ck_assert_int_eq(reads, 4);
	ck_assert_uint_eq(read_len, 1);
	ck_assert_int_eq(r->ch.rd_held, 0);
	ck_assert_int_eq(r->ch.in_watch, 0);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* Raising the high watermark releases a held input at once and kicks the
 * transport ("a watermark moved"). */
START_TEST(high_watermark_raised_resumes)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);
	int k;

	evrdma_channel_setwatermark(&r->ch, EV_READ, 0, 4);
	arrive(r, "abcdefgh", 8, 0);
	spin();
	expect_input(r, "abcd");
	ck_assert_int_eq(r->ch.rd_held, 1);
	k = kicks;
	evrdma_channel_setwatermark(&r->ch, EV_READ, 0, 0);
	ck_assert_int_eq(r->ch.rd_held, 0);
	ck_assert_int_eq(kicks, k + 1);
	spin();
	expect_input(r, "abcdefgh");
	evrdma_channel_free(&r->ch);
}
END_TEST

/* Message mode: the high watermark admits whole messages only, and one
 * past it into an empty input (channel.h): the rule is chan.h's
 * evrdma__chan_admit(), which chan_rx.c calls as the fake transport
 * here does; checked too, that the semantics hold the channel then and
 * release it when read_message() drains. */
START_TEST(message_high_watermark_whole_messages)
{
	struct rx *r = mk(EVRDMA_CHANNEL_MESSAGE, 0);
	char big[30], buf[32];
	int k;

	memset(big, 'z', sizeof(big));
	evrdma_channel_setwatermark(&r->ch, EV_READ, 0, 10);
	arrive(r, "aaaaaa", 6, 0);
	arrive(r, "bbbbbb", 6, 0);
	spin();
	expect_input(r, "aaaaaa");
	ck_assert_int_eq(r->ch.rd_held, 0);	/* below the mark ... */
	ck_assert_int_eq(r->ch.in_watch, 1);	/* ... but drains watched */
	k = kicks;
	ck_assert_int_eq(evrdma_channel_read_message(&r->ch, buf, 32), 6);
	ck_assert_int_eq(kicks, k + 1);
	spin();
	expect_input(r, "bbbbbb");
	ck_assert_int_eq(evrdma_channel_read_message(&r->ch, buf, 32), 6);
	arrive(r, big, sizeof(big), 1);
	spin();
	ck_assert_uint_eq(evbuffer_get_length(r->ch.input), 30);
	ck_assert_int_eq(r->ch.rd_held, 1);
	ck_assert_uint_eq(evrdma__chan_room(&r->ch, 30), 0);
	k = kicks;
	ck_assert_int_eq(evrdma_channel_read_message(&r->ch, buf, 32), 30);
	ck_assert_int_eq(r->ch.rd_held, 0);
	ck_assert_int_eq(kicks, k + 1);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* ---- the read callback ---- */

/* An application that frees the channel from inside its read callback:
 * nothing after touches freed memory (the pass's reference), the bytes
 * in input go with their cleanup run once, and nothing more is delivered
 * (channel.h, free: "at any time, also from its callbacks"). */
START_TEST(free_inside_read_cb)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);
	struct piece *pc = arrive(r, "abcd", 4, 1);

	read_does = R_FREE;
	spin();
	ck_assert_int_eq(reads, 1);
	ck_assert_int_eq(destructed, 1);
	ck_assert_int_eq(pc->cleaned, 1);
}
END_TEST

/* ---- the end of the stream ---- */

/* Freed from inside the event callback of its EOF: nothing after touches
 * freed memory, the bytes left in input go with their cleanup once. */
START_TEST(free_inside_eof_event)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);
	struct piece *pc = arrive(r, "abcd", 4, 1);

	event_frees = 1;
	evrdma__chan_peer_eof(&r->ch, 0);
	spin();
	ck_assert_int_eq(reads, 1);
	ck_assert_int_eq(events, 1);
	ck_assert_int_eq(destructed, 1);
	ck_assert_int_eq(pc->cleaned, 1);
}
END_TEST

/* The peer's orderly end: EOF | READING after the data (the read
 * callback saw it all first), once, and EV_READ disabled after. */
START_TEST(eof_after_data_once)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);

	arrive(r, "abc", 3, 0);
	evrdma__chan_peer_eof(&r->ch, 0);
	spin();
	ck_assert_int_eq(reads, 1);
	ck_assert_int_eq(events, 1);
	ck_assert_int_eq(last_what, BEV_EVENT_EOF | BEV_EVENT_READING);
	ck_assert_uint_eq(event_len, 3);
	ck_assert_int_eq(evrdma_channel_get_enabled(&r->ch) & EV_READ, 0);
	rx_kick(&r->ch);
	spin();
	evrdma__chan_check_end(&r->ch, 0);
	ck_assert_int_eq(events, 1);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* Bytes the transport still holds (high watermark) keep the EOF waiting
 * until they are in input (chan.h: check_end's @p waiting). */
START_TEST(eof_waits_for_held_bytes)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);

	evrdma_channel_setwatermark(&r->ch, EV_READ, 0, 4);
	arrive(r, "abcdef", 6, 0);
	evrdma__chan_peer_eof(&r->ch, 0);
	spin();
	expect_input(r, "abcd");
	ck_assert_int_eq(events, 0);
	evbuffer_drain(r->ch.input, 4);
	spin();
	expect_input(r, "ef");
	ck_assert_int_eq(events, 1);
	ck_assert_int_eq(last_what, BEV_EVENT_EOF | BEV_EVENT_READING);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* With EV_READ disabled and the connection not over, the EOF waits (a
 * socket would not know); enabling EV_READ reports it. */
START_TEST(eof_waits_while_reading_disabled)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, NO_READ);

	evrdma__chan_peer_eof(&r->ch, 0);
	rx_kick(&r->ch);
	spin();
	ck_assert_int_eq(events, 0);
	evrdma_channel_enable(&r->ch, EV_READ);
	spin();
	ck_assert_int_eq(events, 1);
	ck_assert_int_eq(last_what, BEV_EVENT_EOF | BEV_EVENT_READING);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* The peer freed its channel with our bytes unread: ERROR | READING after
 * the data, reason DISCONNECTED, errno ECONNRESET (channel.h). */
START_TEST(peer_reset_is_error_after_data)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);

	arrive(r, "xy", 2, 0);
	evrdma__chan_peer_eof(&r->ch, 1);
	spin();
	ck_assert_int_eq(reads, 1);
	ck_assert_int_eq(events, 1);
	ck_assert_int_eq(last_what, BEV_EVENT_ERROR | BEV_EVENT_READING);
	ck_assert_uint_eq(event_len, 2);
	ck_assert_int_eq(evrdma_channel_get_error(&r->ch),
	    EVRDMA_REASON_DISCONNECTED);
	ck_assert_int_eq(last_errno, ECONNRESET);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* The connection is over (no orderly end): reported even with EV_READ
 * disabled and nothing to write, once, with its reason (channel.h:
 * "Where a socket cannot know and a channel can"). */
START_TEST(gone_reported_once_with_reading_disabled)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, NO_READ);

	evrdma__chan_end_reason(&r->ch, EVRDMA_REASON_PEER_DEAD, 0);
	evrdma__chan_gone(&r->ch);
	rx_kick(&r->ch);
	spin();
	ck_assert_int_eq(events, 1);
	ck_assert_int_eq(last_what, BEV_EVENT_ERROR | BEV_EVENT_READING);
	ck_assert_int_eq(evrdma_channel_get_error(&r->ch),
	    EVRDMA_REASON_PEER_DEAD);
	ck_assert_int_eq(last_errno, ETIMEDOUT);
	rx_kick(&r->ch);
	spin();
	ck_assert_int_eq(events, 1);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* ... but bytes still waiting to be read hold it until reading is
 * enabled, and it comes after them. */
START_TEST(gone_waits_for_unread_bytes)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, NO_READ);

	arrive(r, "abc", 3, 0);
	evrdma__chan_end_reason(&r->ch, EVRDMA_REASON_PEER_DEAD, 0);
	evrdma__chan_gone(&r->ch);
	spin();
	ck_assert_int_eq(events, 0);
	evrdma_channel_enable(&r->ch, EV_READ);
	spin();
	ck_assert_int_eq(reads, 1);
	ck_assert_int_eq(events, 1);
	ck_assert_int_eq(last_what, BEV_EVENT_ERROR | BEV_EVENT_READING);
	ck_assert_uint_eq(event_len, 3);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* EOF | READING, then the connection goes with output holding bytes:
 * ERROR | WRITING follows, each once (channel.h). */
START_TEST(eof_then_gone_with_output_is_write_error)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);

	evrdma__chan_peer_eof(&r->ch, 0);
	rx_kick(&r->ch);
	spin();
	ck_assert_int_eq(events, 1);
	ck_assert_int_eq(last_what, BEV_EVENT_EOF | BEV_EVENT_READING);
	ck_assert_int_eq(evrdma_channel_write(&r->ch, "late", 4), 0);
	evrdma__chan_end_reason(&r->ch, EVRDMA_REASON_DISCONNECTED, 0);
	evrdma__chan_gone(&r->ch);
	rx_kick(&r->ch);
	spin();
	ck_assert_int_eq(events, 2);
	ck_assert_int_eq(last_what, BEV_EVENT_ERROR | BEV_EVENT_WRITING);
	ck_assert_int_eq(last_errno, EPIPE);
	rx_kick(&r->ch);
	spin();
	ck_assert_int_eq(events, 2);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* ---- the read timeout ---- */

/* No data for that long with EV_READ enabled: EV_READ is disabled and
 * TIMEOUT | READING reported, once (channel.h). */
START_TEST(read_timeout_when_idle)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);
	struct timeval tv = { 0, 20000 };

	ck_assert_int_eq(evrdma_channel_set_timeouts(&r->ch, &tv, NULL), 0);
	run_ms(150);
	ck_assert_int_eq(events, 1);
	ck_assert_int_eq(last_what, BEV_EVENT_TIMEOUT | BEV_EVENT_READING);
	ck_assert_int_eq(evrdma_channel_get_enabled(&r->ch) & EV_READ, 0);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* Input at its high watermark suspends the read timeout; a drain below
 * it starts the count again (channel.h: "while EV_READ is enabled and
 * input is below the high watermark"). */
START_TEST(read_timeout_suspended_at_high_watermark)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);
	struct timeval tv = { 0, 20000 };

	evrdma_channel_setwatermark(&r->ch, EV_READ, 0, 4);
	arrive(r, "abcd", 4, 0);
	spin();
	ck_assert_int_eq(r->ch.rd_held, 1);
	ck_assert_int_eq(evrdma_channel_set_timeouts(&r->ch, &tv, NULL), 0);
	run_ms(120);
	ck_assert_int_eq(events, 0);
	evbuffer_drain(r->ch.input, 4);
	run_ms(120);
	ck_assert_int_eq(events, 1);
	ck_assert_int_eq(last_what, BEV_EVENT_TIMEOUT | BEV_EVENT_READING);
	evrdma_channel_free(&r->ch);
}
END_TEST

/*
 * Message mode, a message held back below the high watermark (it does not
 * fit the room left, and input is not empty): the transport says it holds
 * bytes (evrdma__chan_watch_input(held = 1)), as at the mark, and the
 * peer is not silent, so the read timeout must not fire (channel.h,
 * set_timeouts: "fires when no data arrived for that long while ...
 * input is below its high watermark"; chan.c: "reading, and the read
 * timeout, are suspended" while input cannot take more). A stream in the
 * same place is cut to fill input to the mark, which suspends the timer
 * (read_timeout_suspended_at_high_watermark). FAILS: rd_held stays 0
 * below the mark, the timer runs, TIMEOUT | READING disables EV_READ
 * with a message waiting.
 */
START_TEST(read_timeout_suspended_while_a_message_is_held)
{
	struct rx *r = mk(EVRDMA_CHANNEL_MESSAGE, 0);
	struct timeval tv = { 0, 20000 };

	evrdma_channel_setwatermark(&r->ch, EV_READ, 0, 10);
	ck_assert_int_eq(evrdma_channel_set_timeouts(&r->ch, &tv, NULL), 0);
	arrive(r, "aaaaaa", 6, 0);
	arrive(r, "bbbbbb", 6, 0);
	spin();
	expect_input(r, "aaaaaa");
	ck_assert(rx_waiting(r));
	run_ms(120);
	ck_assert_msg(events == 0, "%d event(s), the last 0x%x (TIMEOUT | "
	    "READING is 0x%x) with a message held", events, last_what,
	    BEV_EVENT_TIMEOUT | BEV_EVENT_READING);
	ck_assert_int_eq(evrdma_channel_get_enabled(&r->ch) & EV_READ,
	    EV_READ);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* Freed from inside the TIMEOUT's event callback: the read timer is freed
 * inside its own callback, and nothing after touches it. */
START_TEST(free_inside_read_timeout)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);
	struct timeval tv = { 0, 10000 };

	event_frees = 1;
	ck_assert_int_eq(evrdma_channel_set_timeouts(&r->ch, &tv, NULL), 0);
	run_ms(80);
	ck_assert_int_eq(events, 1);
	ck_assert_int_eq(last_what, BEV_EVENT_TIMEOUT | BEV_EVENT_READING);
	ck_assert_int_eq(destructed, 1);
}
END_TEST

/* ---- the receive callback ---- */

static int recvs;
static size_t recv_total;

static void
on_recv(struct evrdma_channel *ch, const void *data, size_t len, void *arg)
{
	(void)ch, (void)data, (void)arg;
	recvs++;
	recv_total += len;
}

/* While input is empty, arrivals go to the receive callback, not to input
 * nor the read callback; EOF comes after the last call (channel.h,
 * evrdma_channel_set_recv_cb()). */
START_TEST(recv_cb_takes_arrivals_then_eof)
{
	struct rx *r = mk(EVRDMA_CHANNEL_MESSAGE, 0);

	recvs = 0;
	recv_total = 0;
	ck_assert_int_eq(evrdma_channel_set_recv_cb(&r->ch, on_recv), 0);
	arrive(r, "aaa", 3, 0);
	arrive(r, "bbbbb", 5, 1);
	evrdma__chan_peer_eof(&r->ch, 0);
	spin();
	ck_assert_int_eq(recvs, 2);
	ck_assert_uint_eq(recv_total, 8);
	ck_assert_int_eq(reads, 0);
	expect_input(r, "");
	ck_assert_int_eq(events, 1);
	ck_assert_int_eq(last_what, BEV_EVENT_EOF | BEV_EVENT_READING);
	evrdma_channel_free(&r->ch);
}
END_TEST

/*
 * ---- review r44: the application's own use of input through libevent's
 * public API. Each test below FAILED when written (the defect it shows is
 * in its comment); they are a case of their own, "r44-misuse", so that
 * CK_RUN_CASE=input runs the rest alone. ----
 */

/* evbuffer_setcb() on input (libevent 2.1: it frees every callback entry
 * of the buffer, the channel's with them) while the transport holds bytes
 * back for input's room. The channel kept the entry it had registered and
 * handed it, freed, to evbuffer_remove_cb_entry() at the next pass that
 * found input below the mark: a double free (glibc aborted, or ASan
 * reported it). Now it finds its callback by function and argument. What
 * evbuffer_setcb() costs, as on a socket bufferevent's buffers: the
 * channel's watch is gone, so the drain kicks nothing (_i 0), and the held
 * bytes come at the next pass for any other reason (an arrival, an
 * enable: _i 1), as channel.h says. */
START_TEST(r44_setcb_on_input_while_held)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);

	evrdma_channel_setwatermark(&r->ch, EV_READ, 0, 4);
	arrive(r, "abcdef", 6, 0);
	spin();
	expect_input(r, "abcd");
	ck_assert_int_eq(r->ch.in_watch, 1);
	ck_assert_int_eq(evbuffer_setcb(r->ch.input, NULL, NULL), 0);
	evbuffer_drain(r->ch.input, 4);
	spin();
	expect_input(r, "");
	if (_i) {
		rx_kick(&r->ch);	/* (an arrival, an enable...) */
		spin();
		expect_input(r, "ef");
		ck_assert_int_eq(r->ch.in_watch, 0);
	}
	ck_assert_int_eq(aborts, 0);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* evbuffer_freeze(input, 0): the transport's evbuffer_add() fails, and
 * chan_rx.c (lines 252-256, 265-272) takes that as memory running short:
 * it holds the bytes in their slot, says so (watch_input(held)), which
 * suspends the read timeout (rd_wait), and waits for a drain of input.
 * Nothing fails: no event, no timeout, the peer held back, the EOF never
 * reported; unfreezing kicks nothing either. A socket bufferevent's
 * evbuffer_read() into a frozen input fails the read: BEV_EVENT_ERROR |
 * READING. Wanted: an error (MISUSE) or the bytes once unfrozen. */
START_TEST(r44_freeze_input_end_hangs)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);
	struct timeval tv = { 0, 20000 };

	abort_ok = 1;
	ck_assert_int_eq(evrdma_channel_set_timeouts(&r->ch, &tv, NULL), 0);
	ck_assert_int_eq(evbuffer_freeze(r->ch.input, 0), 0);
	arrive(r, "abc", 3, _i);
	evrdma__chan_peer_eof(&r->ch, 0);
	run_ms(120);
	ck_assert_int_eq(evbuffer_unfreeze(r->ch.input, 0), 0);
	run_ms(60);
	ck_assert_msg(aborts || events || evbuffer_get_length(r->ch.input),
	    "input frozen, then thawed: %d event(s), no abort, input empty, "
	    "3 bytes and the EOF held for ever (read timeout suspended: "
	    "rd_wait %d)", events, r->ch.rd_wait);
	/* (now: the end, as a socket's failed read, for the misuse) */
	ck_assert_int_eq(aborts, 1);
	ck_assert_int_eq(abort_reason, EVRDMA_REASON_MISUSE);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* evbuffer_freeze(input, 1), then read_message(): chan.c:565-567 pops the
 * message's length, then ignores evbuffer_remove()'s -1 (libevent copies
 * the bytes out, then its drain fails): the message is returned as read
 * and stays in input, and the queue is one message short of input, so the
 * next message is lost behind EBADMSG (or, with none queued, EAGAIN while
 * input holds bytes). Wanted: -1 with the message kept, or the message
 * really taken. */
START_TEST(r44_read_message_on_frozen_input)
{
	struct rx *r = mk(EVRDMA_CHANNEL_MESSAGE, 0);
	char buf[16];
	ssize_t n;

	arrive(r, "aaa", 3, 0);
	arrive(r, "bbbbb", 5, 0);
	spin();
	ck_assert_int_eq(evbuffer_freeze(r->ch.input, 1), 0);
	n = evrdma_channel_read_message(&r->ch, buf, sizeof(buf));
	ck_assert_msg(n == -1 || evbuffer_get_length(r->ch.input) == 5,
	    "read_message() returned %zd, input still holds %zu bytes", n,
	    evbuffer_get_length(r->ch.input));
	ck_assert_int_eq(evbuffer_unfreeze(r->ch.input, 1), 0);
	if (n == -1) {
		ck_assert_int_eq(evrdma_channel_read_message(&r->ch, buf,
		    sizeof(buf)), 3);
		ck_assert_mem_eq(buf, "aaa", 3);
	}
	ck_assert_int_eq(evrdma_channel_read_message(&r->ch, buf,
	    sizeof(buf)), 5);
	ck_assert_mem_eq(buf, "bbbbb", 5);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* The channel freed from an evbuffer callback of the application's on its
 * own input (_i 0, inside evrdma_channel_read()'s removal) or output
 * (_i 1, message mode, inside evrdma_channel_write()'s addition), once its
 * transport has let go (after the connection closed: chan_rdma.c's
 * own_closed() dropped the connection's reference; the fake's close lets
 * go at once): evrdma_channel_free() drops the last reference, and
 * chan.c:331-333 evbuffer_free()s the buffer whose callbacks libevent is
 * running. libevent then reads the freed buffer (the next callback entry,
 * its lock), and for output chan_output.c:217-225 (ch_put_message())
 * reads and writes the freed channel. A socket bufferevent freed there
 * is safe: libevent 2.1 finalizes it, its buffers included, from the
 * loop. */
static struct evrdma_channel *cb_free_ch;
static int cb_free_done;

static void
cb_free(struct evbuffer *b, const struct evbuffer_cb_info *info, void *arg)
{
	(void)b, (void)arg;
	if (cb_free_done || !(info->n_deleted || info->n_added))
		return;
	cb_free_done = 1;
	evrdma_channel_free(cb_free_ch);
	ck_assert_msg(destructed == 0, "the channel was destroyed, its "
	    "evbuffer freed, inside that evbuffer's own callback: libevent "
	    "goes on using it when this returns");
}

START_TEST(r44_free_inside_an_evbuffer_callback)
{
	struct rx *r = mk(_i ? EVRDMA_CHANNEL_MESSAGE : EVRDMA_CHANNEL_STREAM,
	    0);
	char buf[4];

	cb_free_ch = &r->ch;
	cb_free_done = 0;
	if (!_i) {
		arrive(r, "abcd", 4, 1);
		spin();
		ck_assert_ptr_nonnull(evbuffer_add_cb(r->ch.input, cb_free,
		    NULL));
		(void)evrdma_channel_read(&r->ch, buf, 2);
	} else {
		ck_assert_ptr_nonnull(evbuffer_add_cb(r->ch.output, cb_free,
		    NULL));
		(void)evrdma_channel_write(&r->ch, "hello", 5);
	}
	ck_assert_int_eq(cb_free_done, 1);
	ck_assert_int_eq(destructed, 1);
}
END_TEST

/* evbuffer_defer_callbacks() on input (_i 0) or output (_i 1), a change,
 * then the free, in the same loop iteration, once the transport has let
 * go: libevent's deferred callback holds a reference to the buffer, so
 * chan_fini()'s evbuffer_free() (chan.c:331-333) leaves it alive with
 * the channel's callbacks still on it (ch_input_cb while input is held,
 * chan.c:127; evrdma__chan_output_cb always, chan.c:315), and the loop
 * then runs them on the freed channel (here its memory is poisoned and
 * kept, so that shows as a fault; otherwise a read and, for output, a
 * write, chan_output.c:52, of freed memory). */
START_TEST(r44_deferred_callbacks_after_the_free)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);

	poison_on_destruct = 1;
	if (!_i) {
		evrdma_channel_setwatermark(&r->ch, EV_READ, 0, 4);
		arrive(r, "abcdef", 6, 0);
		spin();
		ck_assert_int_eq(r->ch.in_watch, 1);
		ck_assert_int_eq(evbuffer_defer_callbacks(r->ch.input,
		    rb->eb), 0);
		evbuffer_drain(r->ch.input, 1);
	} else {
		ck_assert_int_eq(evbuffer_defer_callbacks(r->ch.output,
		    rb->eb), 0);
		ck_assert_int_eq(evrdma_channel_write(&r->ch, "hello", 5), 0);
	}
	evrdma_channel_free(&r->ch);
	ck_assert_int_eq(destructed, 1);
	spin();		/* (faults here) */
}
END_TEST

/* A message channel whose input is drained other than by read_message()
 * (evbuffer_drain(), evbuffer_remove(), evrdma_channel_read(): what a
 * bufferevent program being ported does): read_message() fails with
 * EBADMSG as documented, but the lengths of every message that arrives
 * after are still queued (chan.h:369, evrdma__chan_input_add()) and
 * never popped: 8 bytes per message for ever, with nothing to free them
 * but the channel's end. Here 12 messages, each drained whole by the
 * read callback, leave input empty and 12 lengths queued. */
START_TEST(r44_direct_drains_grow_the_length_queue)
{
	struct rx *r = mk(EVRDMA_CHANNEL_MESSAGE, 0);
	int i;

	read_does = R_DRAIN;
	for (i = 0; i < 12; i++) {
		arrive(r, "mmmm", 4, 0);
		spin();
	}
	ck_assert_int_eq(reads, 12);
	expect_input(r, "");
	ck_assert_msg(r->ch.in_msgs.count <= 1, "input empty, %u message "
	    "lengths (%zu bytes) still queued", r->ch.in_msgs.count,
	    r->ch.in_msgs.bytes);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* An evbuffer callback of the application's on input that takes what
 * arrives (a tee, a parser fed as bytes come) leaves input below the
 * read low watermark, even empty; chan_rx.c passes the length it counted
 * (have += take, lines 277 and 288-294: refreshed only with a high
 * watermark) to evrdma__chan_input_added(), which runs the read callback
 * on it. A socket bufferevent tests input's real length against the low
 * watermark after the read (bufferevent_trigger_nolock_()). */
static void
cb_take_all(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *arg)
{
	(void)arg;
	if (info->n_added)
		evbuffer_drain(b, evbuffer_get_length(b));
}

START_TEST(r44_read_cb_below_low_watermark)
{
	struct rx *r = mk(EVRDMA_CHANNEL_STREAM, 0);

	evrdma_channel_setwatermark(&r->ch, EV_READ, 4, 0);
	ck_assert_ptr_nonnull(evbuffer_add_cb(r->ch.input, cb_take_all,
	    NULL));
	arrive(r, "abcdef", 6, 0);
	spin();
	expect_input(r, "");
	ck_assert_msg(reads == 0, "read callback with input at %zu bytes, "
	    "its low watermark 4", read_len);
	evrdma_channel_free(&r->ch);
}
END_TEST

/* read_message() from an evbuffer callback of the application's on input,
 * run inside the transport's addition of a message: chan.h:365-369
 * evrdma__chan_input_add() queues the new length only after
 * evbuffer_add() returned (its callbacks ran), so input is one message
 * ahead of the queue there and read_message() (chan.c:550) reports
 * EBADMSG, "message boundaries lost", for the message already waiting,
 * whose boundaries are intact (they are right again once the addition
 * returns). */
static ssize_t cb_rm_got = -2;
static int cb_rm_errno;

static void
cb_read_message(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *arg)
{
	(void)b;
	if (!info->n_added || cb_rm_got != -2)
		return;
	errno = 0;
	cb_rm_got = evrdma_channel_read_message(arg, NULL, 0);
	cb_rm_errno = errno;
}

START_TEST(r44_read_message_inside_the_addition)
{
	struct rx *r = mk(EVRDMA_CHANNEL_MESSAGE, 0);

	arrive(r, "aaa", 3, 0);
	spin();
	cb_rm_got = -2;
	ck_assert_ptr_nonnull(evbuffer_add_cb(r->ch.input, cb_read_message,
	    &r->ch));
	arrive(r, "bbbbb", 5, 0);
	spin();
	ck_assert_msg(cb_rm_got == 3, "read_message(NULL) inside the "
	    "addition: %zd, errno %d (EBADMSG %d), with \"aaa\" waiting whole",
	    cb_rm_got, cb_rm_errno, EBADMSG);
	ck_assert_int_eq(evrdma_channel_read_message(&r->ch, NULL, 0), 3);
	evrdma_channel_free(&r->ch);
}
END_TEST

Suite *
chan_unit_rx_suite(void)
{
	Suite *s = suite_create("chan-input");
	TCase *tc = tcase_create("input");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, copied_bytes_join_input_then_read_cb);
	tcase_add_test(tc, referenced_bytes_cleanup_once_at_drain);
	tcase_add_test(tc, referenced_bytes_cleanup_once_at_free);
	tcase_add_test(tc, read_cb_only_after_new_data);
	tcase_add_test(tc, ev_read_disabled_holds_delivery);
	tcase_add_test(tc, read_message_whole_in_order);
	tcase_add_test(tc, read_message_too_small_keeps_it);
	tcase_add_test(tc, read_message_ebadmsg_after_direct_drain);
	tcase_add_test(tc, read_message_ebadmsg_after_channel_read);
	tcase_add_test(tc, low_watermark_read_cb_when_reached);
	tcase_add_test(tc, high_watermark_holds_and_drain_resumes);
	tcase_add_test(tc, high_watermark_raised_resumes);
	tcase_add_test(tc, message_high_watermark_whole_messages);
	tcase_add_test(tc, free_inside_read_cb);
	tcase_add_test(tc, free_inside_eof_event);
	tcase_add_test(tc, eof_after_data_once);
	tcase_add_test(tc, eof_waits_for_held_bytes);
	tcase_add_test(tc, eof_waits_while_reading_disabled);
	tcase_add_test(tc, peer_reset_is_error_after_data);
	tcase_add_test(tc, gone_reported_once_with_reading_disabled);
	tcase_add_test(tc, gone_waits_for_unread_bytes);
	tcase_add_test(tc, eof_then_gone_with_output_is_write_error);
	tcase_add_test(tc, read_timeout_when_idle);
	tcase_add_test(tc, read_timeout_suspended_at_high_watermark);
	tcase_add_test(tc, free_inside_read_timeout);
	tcase_add_test(tc, read_timeout_suspended_while_a_message_is_held);
	tcase_add_test(tc, recv_cb_takes_arrivals_then_eof);
	suite_add_tcase(s, tc);

	/* review r44: these fail on the code they were written against */
	tc = tcase_create("r44-misuse");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, r44_setcb_on_input_while_held, 0, 2);
	tcase_add_loop_test(tc, r44_freeze_input_end_hangs, 0, 2);
	tcase_add_test(tc, r44_read_message_on_frozen_input);
	tcase_add_loop_test(tc, r44_free_inside_an_evbuffer_callback, 0, 2);
	tcase_add_loop_test(tc, r44_deferred_callbacks_after_the_free, 0, 2);
	tcase_add_test(tc, r44_direct_drains_grow_the_length_queue);
	tcase_add_test(tc, r44_read_cb_below_low_watermark);
	tcase_add_test(tc, r44_read_message_inside_the_addition);
	suite_add_tcase(s, tc);
	return s;
}
