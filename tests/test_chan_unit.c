/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma host tests: the channel's semantics (lib/chan.c), compiled into
 * this program over a transport that records what it is asked and moves
 * nothing. What is tested is how output is cut into messages when the
 * application's evbuffer callbacks change output inside another change:
 * libevent runs a buffer's callbacks after each change, newest first, so
 * an application's callback runs before the channel's, and what it adds
 * there nests. Each message keeps its place, or the channel ends with
 * EVRDMA_REASON_MISUSE; it never sends bytes cut apart (review r42,
 * findings 2 and 3). On a device the same paths run under
 * device-chan-semantics' output-removal case.
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

/* rdma_sym.c's, which this program leaves out: loop.c reads it */
int evrdma__forked;

/* ---- a transport that records ---- */

static int kicks, aborts, abort_reason;

static void
t_kick(struct evrdma_channel *ch)
{
	(void)ch;
	kicks++;
}

static void
t_abort(struct evrdma_channel *ch, int reason)
{
	(void)ch;
	if (!aborts++)	/* the transport's end keeps the first reason */
		abort_reason = reason;
}

static void
t_cleanup(const void *data, size_t len, void *arg)
{
	(void)len, (void)arg;
	free((void *)data);
}

/* stage 0: no faster road, the write goes by way of output; 1: as
 * chan_tx.c's rc_write_slot(), a copy (its send slot) added to output by
 * reference, by the call the transport uses, unless the write is small
 * and output holds bytes (review r43: the staged write went in unmarked) */
static int stage;

static int
t_write(struct evrdma_channel *ch, const void *data, size_t len)
{
	void *p;

	if (!stage || (len < 1024 && ch->out_len))
		return -1;
	p = malloc(len);
	ck_assert_ptr_nonnull(p);
	memcpy(p, data, len);
	if (evrdma__chan_output_put(ch, p, len, t_cleanup, NULL) < 0) {
		free(p);
		return -1;
	}
	return 0;
}

static size_t
t_max_message(struct evrdma_channel *ch)
{
	(void)ch;
	return 65536;
}

static void
t_close(struct evrdma_channel *ch)
{
	evrdma__chan_output_discard(ch);
}

static void
t_none(struct evrdma_channel *ch)
{
	(void)ch;
}

static void
t_destruct(struct evrdma_channel *ch)
{
	evrdma__chan_fini(ch);
	free(ch);
}

static const struct evrdma__chan_ops t_ops = {
	.kick = t_kick,
	.abort = t_abort,
	.write = t_write,
	.max_message = t_max_message,
	.close = t_close,
	.exiting = t_none,
	.base_gone = t_none,
	.destruct = t_destruct,
};

static struct evrdma_base *tb;

static void
setup(void)
{
	tb = calloc(1, sizeof(*tb));
	ck_assert_ptr_nonnull(tb);
	stage = 0;
	tb->eb = event_base_new();
	ck_assert_ptr_nonnull(tb->eb);
	LIST_INIT(&tb->hooks);
	kicks = aborts = abort_reason = 0;
}

static void
teardown(void)
{
	event_base_free(tb->eb);
	free(tb);
}

static struct evrdma_channel *
mk(int mode)
{
	struct evrdma_channel *ch = calloc(1, sizeof(*ch));

	ck_assert_ptr_nonnull(ch);
	ck_assert_int_eq(evrdma__chan_init(ch, tb, &t_ops, mode), 0);
	return ch;
}

/* The queued lengths, as "5 10 20", and the bytes they add up to. */
static const char *
lengths(const struct evrdma_channel *ch)
{
	static char s[256];
	size_t o = 0;
	unsigned i;

	s[0] = 0;
	for (i = 0; i < ch->out_msgs.count; i++)
		o += (size_t)snprintf(s + o, sizeof(s) - o, "%s%zu", i ? " " :
		    "", ch->out_msgs.v[(ch->out_msgs.head + i) %
		    ch->out_msgs.cap]);
	return s;
}

/* output holds exactly @p want, each message's bytes one letter */
static void
check_output(struct evrdma_channel *ch, const char *want_lengths)
{
	size_t len = evbuffer_get_length(ch->output);

	ck_assert_str_eq(lengths(ch), want_lengths);
	ck_assert_uint_eq(ch->out_msgs.bytes, len);
	ck_assert_uint_eq(ch->out_len, len);
	ck_assert_int_eq(aborts, 0);
}

/* Each message is its length's worth of one letter, the next each time,
 * so that a length queued out of place shows in the bytes too. */
static void
check_bytes(struct evrdma_channel *ch)
{
	unsigned char *p = evbuffer_pullup(ch->output, -1);
	size_t off = 0;
	unsigned i;

	for (i = 0; i < ch->out_msgs.count; i++) {
		size_t n = ch->out_msgs.v[(ch->out_msgs.head + i) %
		    ch->out_msgs.cap], k;

		for (k = 1; k < n; k++)
			ck_assert_msg(p[off + k] == p[off], "message %u (%zu "
			    "bytes) is cut: byte %zu is '%c', not '%c'", i, n,
			    k, p[off + k], p[off]);
		off += n;
	}
}

static void
msg(char *buf, int letter, size_t n)
{
	memset(buf, letter, n);
}

/* ---- an application that tops output up from its own callback ---- */

static const size_t sizes[] = { 10, 20, 30 };
static int refill_n, refill_raw;
static struct evrdma_channel *refill_ch;

/* Tops output up with messages of 10, 20 and 30 bytes while it holds
 * less than @p until; each addition runs this again, inside it. */
static void
refill_cb(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *until)
{
	char m[32];

	(void)info;
	if (refill_n >= 3 || evbuffer_get_length(b) >= (size_t)until)
		return;
	msg(m, 'b' + refill_n, sizes[refill_n]);
	refill_n++;
	if (refill_raw)
		evbuffer_add(b, m, sizes[refill_n - 1]);
	else
		ck_assert_int_eq(evrdma_channel_write(refill_ch, m,
		    sizes[refill_n - 1]), 0);
}

static struct evrdma_channel *
refill_setup(int raw, size_t until)
{
	struct evrdma_channel *ch = mk(EVRDMA_CHANNEL_MESSAGE);

	refill_n = 0;
	refill_raw = raw;
	refill_ch = ch;
	ck_assert_ptr_nonnull(evbuffer_add_cb(ch->output, refill_cb,
	    (void *)until));
	return ch;
}

/* A write whose callback writes the next messages, each inside the last:
 * they queue in the order their bytes lie (before: 30 20 10 5). _i 1:
 * the first write staged as the transport stages it (before: MISUSE,
 * review r43 C1). */
START_TEST(nested_writes_keep_order)
{
	struct evrdma_channel *ch = refill_setup(0, 60);

	stage = _i;
	ck_assert_int_eq(evrdma_channel_write(ch, "aaaaa", 5), 0);
	check_output(ch, "5 10 20 30");
	check_bytes(ch);
	ck_assert_int_eq(kicks, 4);
	evrdma_channel_free(ch);
}
END_TEST

/* A message of 5 bytes written, then the top-up callback registered,
 * and the channel takes that message out for the wire: the callback runs
 * inside the channel's removal. */
static struct evrdma_channel *
refill_take(int raw)
{
	struct evrdma_channel *ch = mk(EVRDMA_CHANNEL_MESSAGE);
	char d[8];

	ck_assert_int_eq(evrdma_channel_write(ch, "aaaaa", 5), 0);
	refill_n = 0;
	refill_raw = raw;
	refill_ch = ch;
	evbuffer_add_cb(ch->output, refill_cb, (void *)40);
	kicks = 0;
	ck_assert_int_eq(evrdma__chan_output_took(ch, d, 5), 0);
	return ch;
}

/* The same from inside the channel's own removal of a message. */
START_TEST(nested_writes_inside_the_take)
{
	struct evrdma_channel *ch = refill_take(0);

	check_output(ch, "10 20 30");
	check_bytes(ch);
	ck_assert_int_eq(kicks, 3);
	evrdma_channel_free(ch);
}
END_TEST

/* Raw evbuffer_add()s nested the same way have no known place: MISUSE
 * (before: queued 30 20 10 over bytes 10 20 30, sent cut and merged). */
START_TEST(nested_raw_adds_are_misuse)
{
	struct evrdma_channel *ch = refill_setup(1, 60);

	ck_assert_int_eq(evrdma_channel_write(ch, "aaaaa", 5), 0);
	ck_assert_int_ge(aborts, 1);
	ck_assert_int_eq(abort_reason, EVRDMA_REASON_MISUSE);
	evrdma_channel_free(ch);
}
END_TEST

START_TEST(nested_raw_adds_inside_the_take_are_misuse)
{
	struct evrdma_channel *ch = refill_take(1);

	ck_assert_int_ge(aborts, 1);
	ck_assert_int_eq(abort_reason, EVRDMA_REASON_MISUSE);
	evrdma_channel_free(ch);
}
END_TEST

/* Raw additions one after the other from one callback do not nest in
 * each other: each is a message, in order (what the documentation
 * promises of "each addition to output"). */
static int two_done;

static void
add_two_cb(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *arg)
{
	(void)arg;
	if (!info->n_deleted || two_done)
		return;
	two_done = 1;
	evbuffer_add(b, "ccccccc", 7);
	evbuffer_add(b, "ddd", 3);
}

START_TEST(raw_adds_in_sequence_inside_the_take)
{
	struct evrdma_channel *ch = mk(EVRDMA_CHANNEL_MESSAGE);
	char d[8];

	two_done = 0;
	ck_assert_int_eq(evrdma_channel_write(ch, "aaaaa", 5), 0);
	evbuffer_add_cb(ch->output, add_two_cb, NULL);
	kicks = 0;
	ck_assert_int_eq(evrdma__chan_output_took(ch, d, 5), 0);
	check_output(ch, "7 3");
	check_bytes(ch);
	ck_assert_int_eq(kicks, 2);
	evrdma_channel_free(ch);
}
END_TEST

/* ---- the channel puts a message back in front ---- */

static int once;

static void
add_once_cb(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *arg)
{
	(void)info, (void)arg;
	if (once++)
		return;
	evbuffer_add(b, "xxxxxxx", 7);
}

/* The application's addition inside the channel's own is its message,
 * with its length and a kick (before: swallowed, queue 5 6 over 18
 * bytes). */
START_TEST(addition_inside_the_unget)
{
	struct evrdma_channel *ch = mk(EVRDMA_CHANNEL_MESSAGE);
	struct evbuffer *tmp = evbuffer_new();

	once = 0;
	ck_assert_int_eq(evrdma_channel_write(ch, "bbbbbb", 6), 0);
	evbuffer_add_cb(ch->output, add_once_cb, NULL);
	evbuffer_add(tmp, "aaaaa", 5);
	kicks = 0;
	ck_assert_int_eq(evrdma__chan_output_unget(ch, tmp, 5), 0);
	check_output(ch, "5 6 7");
	check_bytes(ch);
	ck_assert_int_eq(kicks, 1);
	evbuffer_free(tmp);
	evrdma_channel_free(ch);
}
END_TEST

/* ---- drains ---- */

static int drain_done;

static void
drain4_cb(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *arg)
{
	(void)arg;
	if (drain_done || !info->n_deleted)
		return;
	drain_done = 1;
	evbuffer_drain(b, 4);
}

/* The application drains a message channel's output inside the channel's
 * removal: MISUSE, as outside it (before: no error, and the next message
 * sent was 6 bytes of "BBCCCCCCC"). */
START_TEST(drain_inside_the_take_is_misuse)
{
	struct evrdma_channel *ch = mk(EVRDMA_CHANNEL_MESSAGE);
	char d[8];

	drain_done = 0;
	ck_assert_int_eq(evrdma_channel_write(ch, "aaaaa", 5), 0);
	ck_assert_int_eq(evrdma_channel_write(ch, "bbbbbb", 6), 0);
	ck_assert_int_eq(evrdma_channel_write(ch, "ccccccc", 7), 0);
	evbuffer_add_cb(ch->output, drain4_cb, NULL);
	ck_assert_int_eq(evrdma__chan_output_took(ch, d, 5), 0);
	ck_assert_int_ge(aborts, 1);
	ck_assert_int_eq(abort_reason, EVRDMA_REASON_MISUSE);
	evrdma_channel_free(ch);
}
END_TEST

START_TEST(drain_is_misuse)
{
	struct evrdma_channel *ch = mk(EVRDMA_CHANNEL_MESSAGE);

	ck_assert_int_eq(evrdma_channel_write(ch, "aaaaa", 5), 0);
	evbuffer_drain(ch->output, 2);
	ck_assert_int_ge(aborts, 1);
	ck_assert_int_eq(abort_reason, EVRDMA_REASON_MISUSE);
	evrdma_channel_free(ch);
}
END_TEST

/* In stream mode the application may drain output, also from inside its
 * own addition: the channel's count follows the buffer. */
static void
drain_all_cb(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *arg)
{
	(void)arg;
	if (info->n_added)
		evbuffer_drain(b, evbuffer_get_length(b));
}

START_TEST(stream_drain_inside_an_addition)
{
	struct evrdma_channel *ch = mk(EVRDMA_CHANNEL_STREAM);

	evbuffer_add_cb(ch->output, drain_all_cb, NULL);
	ck_assert_int_eq(evrdma_channel_write(ch, "hello", 5), 0);
	ck_assert_uint_eq(ch->out_len, 0);
	ck_assert_uint_eq(evrdma__chan_output_next(ch, 4096), 0);
	ck_assert_int_eq(aborts, 0);
	evrdma_channel_free(ch);
}
END_TEST

/* Plain use: a write, a write of a buffer and a raw addition are a
 * message each, with a kick each; the channel's removal kicks nothing. */
START_TEST(plain_messages)
{
	struct evrdma_channel *ch = mk(EVRDMA_CHANNEL_MESSAGE);
	struct evbuffer *b = evbuffer_new();
	char d[16];

	ck_assert_int_eq(evrdma_channel_write(ch, "aaa", 3), 0);
	evbuffer_add(b, "bbbb", 4);
	ck_assert_int_eq(evrdma_channel_write_buffer(ch, b), 0);
	evbuffer_add(ch->output, "ccccc", 5);
	check_output(ch, "3 4 5");
	check_bytes(ch);
	ck_assert_int_eq(kicks, 3);
	ck_assert_int_eq(evrdma__chan_output_took(ch, d, 3), 0);
	check_output(ch, "4 5");
	ck_assert_int_eq(kicks, 3);
	evbuffer_free(b);
	evrdma_channel_free(ch);
}
END_TEST

/* ---- evrdma_channel_write_buffer() ---- */

static int from_done, from_raw;
static struct evrdma_channel *from_ch;

/* The source buffer's own callback writes a message as its bytes leave. */
static void
from_cb(struct evbuffer *b, const struct evbuffer_cb_info *info, void *arg)
{
	(void)b, (void)arg;
	if (!info->n_deleted || from_done++)
		return;
	if (from_raw)
		evbuffer_add(evrdma_channel_get_output(from_ch), "ccc", 3);
	else
		ck_assert_int_eq(evrdma_channel_write(from_ch, "ccc", 3), 0);
}

/* The source's callback runs as its 6 bytes leave it, before they are in
 * output: its message comes first, and each is one message, whole
 * (before: output's callback saw one addition of 9 bytes, and queued
 * 6 3 9 or 6 9 over them, with no error: review r43 C2). _i: the
 * callback writes (0) or adds directly (1). */
START_TEST(write_buffer_whose_source_writes)
{
	struct evrdma_channel *ch = mk(EVRDMA_CHANNEL_MESSAGE);
	struct evbuffer *from = evbuffer_new();

	from_done = 0;
	from_raw = _i;
	from_ch = ch;
	evbuffer_add(from, "bbbbbb", 6);
	evbuffer_add_cb(from, from_cb, NULL);
	ck_assert_int_eq(evrdma_channel_write_buffer(ch, from), 0);
	check_output(ch, "3 6");
	check_bytes(ch);
	ck_assert_uint_eq(evbuffer_get_length(from), 0);
	evbuffer_free(from);
	evrdma_channel_free(ch);
}
END_TEST

/* Output onto itself: nothing moves, EINVAL (before: a message of no
 * bytes queued: review r43 C3). */
START_TEST(write_buffer_of_its_own_output)
{
	struct evrdma_channel *ch = mk(EVRDMA_CHANNEL_MESSAGE);

	ck_assert_int_eq(evrdma_channel_write(ch, "aaaaa", 5), 0);
	ck_assert_int_eq(evrdma_channel_write_buffer(ch,
	    evrdma_channel_get_output(ch)), -1);
	ck_assert_int_eq(errno, EINVAL);
	check_output(ch, "5");
	evrdma_channel_free(ch);
}
END_TEST

/* ---- an addition output's callback did not see ---- */

static int unseen_done, unseen_write, unseen_logged;
static struct evrdma_channel *unseen_ch;

/* Set with libevent's evbuffer_setcb(), which replaces every callback on
 * output, the channel's with them: inside the first addition, it adds a
 * message of its own, directly or by a write. */
static void
unseen_cb(struct evbuffer *b, size_t old_len, size_t new_len, void *arg)
{
	(void)arg;
	if (new_len <= old_len || unseen_done++)
		return;
	if (unseen_write)
		ck_assert_int_eq(evrdma_channel_write(unseen_ch, "ccc", 3), 0);
	else
		evbuffer_add(b, "ccc", 3);
}

static void
unseen_log(int level, const char *m, void *arg)
{
	(void)arg;
	if (level == EVRDMA_LOG_WARN && strstr(m, "was not seen whole"))
		unseen_logged++;
}

/* The write's addition never reached output's callback, and output grew
 * by more than the message inside it: ch_put_message()'s guard ends the
 * channel (MISUSE) from inside the write, and the 5 bytes stay one
 * message, not merged with the 3 (with the guard's condition made false:
 * no end at all, and with the channel's callback gone nothing is ever
 * kicked to send). The written bytes' queue is right with _i 1; the end
 * comes all the same, as output's own callback is gone. _i: the callback
 * adds directly (0) or writes (1). (evbuffer_defer_callbacks() does not
 * reach the guard: no callback of the application's runs inside the
 * addition then.) */
START_TEST(addition_not_seen_whole_is_misuse)
{
	struct evrdma_channel *ch = mk(EVRDMA_CHANNEL_MESSAGE);

	unseen_done = unseen_logged = 0;
	unseen_write = _i;
	unseen_ch = ch;
	ck_assert_int_eq(evbuffer_setcb(ch->output, unseen_cb, NULL), 0);
	evrdma_set_log_callback(unseen_log, EVRDMA_LOG_WARN, NULL);
	ck_assert_int_eq(evrdma_channel_write(ch, "aaaaa", 5), 0);
	evrdma_set_log_callback(NULL, EVRDMA_LOG_DEBUG, NULL);
	ck_assert_int_ge(aborts, 1);
	ck_assert_int_eq(abort_reason, EVRDMA_REASON_MISUSE);
	ck_assert_int_eq(unseen_logged, 1);
	ck_assert_uint_eq(evbuffer_get_length(ch->output), 8);
	ck_assert_str_eq(lengths(ch), _i ? "5 3" : "5");
	check_bytes(ch);
	evrdma_channel_free(ch);
}
END_TEST

static int took_logged;

static void
took_log(int level, const char *m, void *arg)
{
	(void)arg;
	if (level == EVRDMA_LOG_WARN && strstr(m, "did not see the bytes"))
		took_logged++;
}

/* The application froze output's front, or deferred output's callbacks:
 * the transport's take of a message is not seen by output's callback
 * (the drain failed, or its callback waits for the loop), so output may
 * still hold the bytes or its length is stale. The take fails, the
 * channel ends (MISUSE), and the transport sends nothing (review r44:
 * before, a frozen front had the same bytes sent again at every take,
 * and deferral queued every message's length twice, "5 7 12" over 12
 * bytes; device-chan-semantics' channel_output_callbacks_unseen shows
 * it on the wire). _i: bit 0 message mode, bit 1 deferral (else the
 * freeze). */
START_TEST(take_unseen_is_misuse)
{
	struct evrdma_channel *ch = mk(_i & 1 ? EVRDMA_CHANNEL_MESSAGE :
	    EVRDMA_CHANNEL_STREAM);
	char d[8];

	took_logged = 0;
	if (_i & 2)
		ck_assert_int_eq(evbuffer_defer_callbacks(ch->output, tb->eb),
		    0);
	ck_assert_int_eq(evrdma_channel_write(ch, "aaaaa", 5), 0);
	if (_i & 2)
		(void)event_base_loop(tb->eb, EVLOOP_NONBLOCK);
	else
		ck_assert_int_eq(evbuffer_freeze(ch->output, 1), 0);
	ck_assert_uint_eq(ch->out_len, 5);
	ck_assert_int_eq(aborts, 0);
	evrdma_set_log_callback(took_log, EVRDMA_LOG_WARN, NULL);
	ck_assert_int_eq(evrdma__chan_output_took(ch, d, 5), -1);
	evrdma_set_log_callback(NULL, EVRDMA_LOG_DEBUG, NULL);
	ck_assert_int_eq(aborts, 1);
	ck_assert_int_eq(abort_reason, EVRDMA_REASON_MISUSE);
	ck_assert_int_eq(took_logged, 1);
	/* (frozen: the bytes are still there, and would have gone again) */
	ck_assert_uint_eq(evbuffer_get_length(ch->output), _i & 2 ? 0 : 5);
	if (!(_i & 2))
		ck_assert_int_eq(evbuffer_unfreeze(ch->output, 1), 0);
	evrdma_channel_free(ch);
	/* (a deferred callback holds output until the loop runs it) */
	(void)event_base_loop(tb->eb, EVLOOP_NONBLOCK);
}
END_TEST

/* A raw addition to a message channel's output larger than its largest
 * message: MISUSE at once, as evrdma_channel_write() refuses it with
 * EMSGSIZE (review r44: the transport sent nothing and ended the channel
 * with RESOURCE, as for a message queued before the connection that the
 * peer's slots cannot take). One of the largest size is a message. */
START_TEST(raw_addition_over_the_largest_message)
{
	struct evrdma_channel *ch = mk(EVRDMA_CHANNEL_MESSAGE);
	size_t max = t_max_message(ch);
	char *big = calloc(1, max + 1);

	ck_assert_ptr_nonnull(big);
	ck_assert_int_eq(evbuffer_add(ch->output, big, max), 0);
	ck_assert_int_eq(aborts, 0);
	ck_assert_str_eq(lengths(ch), "65536");
	ck_assert_int_eq(evbuffer_add(ch->output, big, max + 1), 0);
	ck_assert_int_eq(aborts, 1);
	ck_assert_int_eq(abort_reason, EVRDMA_REASON_MISUSE);
	free(big);
	evrdma_channel_free(ch);
}
END_TEST

/* ---- the discard ---- */

static void
prepend_cb(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *arg)
{
	(void)arg;
	if (info->n_deleted && !from_done++)
		evbuffer_prepend(b, "zz", 2);
}

/* A callback that puts bytes back in front while the channel discards
 * output: output is empty after it all the same, and takes no more
 * (before: the 2 bytes stayed, and a freed stream channel's EOF waited
 * for them: review r43 C4). _i: stream (0) or message (1) mode. */
START_TEST(discard_with_a_prepend_inside)
{
	struct evrdma_channel *ch = mk(_i ? EVRDMA_CHANNEL_MESSAGE :
	    EVRDMA_CHANNEL_STREAM);

	from_done = 0;
	ck_assert_int_eq(evrdma_channel_write(ch, "aaaaa", 5), 0);
	evbuffer_add_cb(ch->output, prepend_cb, NULL);
	evrdma__chan_output_discard(ch);
	ck_assert_int_eq(from_done, 2);	/* it did prepend */
	ck_assert_uint_eq(evbuffer_get_length(ch->output), 0);
	ck_assert_uint_eq(ch->out_len, 0);
	ck_assert_uint_eq(ch->out_msgs.count, 0);
	ck_assert_int_eq(evbuffer_prepend(ch->output, "y", 1), -1);
	ck_assert_int_eq(evbuffer_add(ch->output, "y", 1), -1);
	ck_assert_int_eq(aborts, 0);
	evrdma_channel_free(ch);
}
END_TEST

/* Staged writes in a row, each its own message (the control: nothing
 * nested, no error). */
START_TEST(staged_writes)
{
	struct evrdma_channel *ch = mk(EVRDMA_CHANNEL_MESSAGE);

	stage = 1;
	ck_assert_int_eq(evrdma_channel_write(ch, "aaaaa", 5), 0);
	ck_assert_int_eq(evrdma_channel_write(ch, "bbbbbbb", 7), 0);
	check_output(ch, "5 7");
	check_bytes(ch);
	ck_assert_int_eq(kicks, 2);
	evrdma_channel_free(ch);
}
END_TEST

static Suite *
chan_unit_suite(void)
{
	Suite *s = suite_create("chan-output");
	TCase *tc = tcase_create("nesting");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, plain_messages);
	tcase_add_loop_test(tc, nested_writes_keep_order, 0, 2);
	tcase_add_test(tc, nested_writes_inside_the_take);
	tcase_add_test(tc, nested_raw_adds_are_misuse);
	tcase_add_test(tc, nested_raw_adds_inside_the_take_are_misuse);
	tcase_add_test(tc, raw_adds_in_sequence_inside_the_take);
	tcase_add_test(tc, addition_inside_the_unget);
	tcase_add_test(tc, drain_inside_the_take_is_misuse);
	tcase_add_test(tc, drain_is_misuse);
	tcase_add_test(tc, stream_drain_inside_an_addition);
	tcase_add_test(tc, staged_writes);
	tcase_add_loop_test(tc, write_buffer_whose_source_writes, 0, 2);
	tcase_add_test(tc, write_buffer_of_its_own_output);
	tcase_add_loop_test(tc, discard_with_a_prepend_inside, 0, 2);
	tcase_add_loop_test(tc, addition_not_seen_whole_is_misuse, 0, 2);
	tcase_add_loop_test(tc, take_unseen_is_misuse, 0, 4);
	tcase_add_test(tc, raw_addition_over_the_largest_message);
	suite_add_tcase(s, tc);
	return s;
}

/* tests/test_chan_unit_rx.c: the receive path */
Suite *chan_unit_rx_suite(void);

int
main(void)
{
	SRunner *sr;
	int failed;

	/* quiet, as tu_log_quiet() (testutil.h) */
	setenv("EVRDMA_LOG", "off", 0);
	sr = srunner_create(chan_unit_suite());
	srunner_add_suite(sr, chan_unit_rx_suite());

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
