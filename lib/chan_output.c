/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel's output (see chan.h): the writes, and which of
 * output's changes are the application's. A transport takes bytes from
 * output and puts them back through the calls here; an application
 * changes output through evrdma_channel_write() and its kin, or as the
 * evbuffer it is, with evbuffer callbacks of its own on it.
 *
 * Why the marks: libevent runs a buffer's callbacks after each change,
 * newest first, so an application's callback on output runs before the
 * channel's, and what it changes there nests inside the change it was
 * called for. Output's callback cannot tell the changes apart by order.
 * It tells them apart by their exact evbuffer_cb_info: the channel marks
 * each change it makes or expects (struct evrdma__chan_own), and
 * whatever else happened is the application's. In message mode that
 * places each message where its bytes lie, or ends the channel with
 * EVRDMA_REASON_MISUSE; it never sends a message cut apart (reviews r42,
 * r43).
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "chan.h"

/*
 * Output changed. Bytes the user added are sent at the end of the loop
 * iteration (coalesced with whatever else is written meanwhile); in
 * message mode each addition is one message. Draining a message channel's
 * output directly would cut messages apart unseen: that ends the channel
 * (EVRDMA_REASON_MISUSE) rather than send garbage. So does an addition
 * whose place among the messages is unknown: one whose own callbacks
 * changed output before this one ran (an application's evbuffer callback
 * that adds again, registered after the channel's, runs first), unless it
 * was made by evrdma_channel_write(), which queues the length before.
 */
void
evrdma__chan_output_cb(struct evbuffer *buf,
    const struct evbuffer_cb_info *info, void *arg)
{
	struct evrdma_channel *ch = arg;
	struct evrdma__chan_own *own = &ch->out_own;
	int kick = info->n_added != 0;
	const char *misuse = NULL;

	/* (from the buffer, not the info: libevent runs callbacks inside a
	 * change, the channel's or the application's, and the info of the
	 * change around them, passed after, is stale: found by review) */
	ch->out_len = evbuffer_get_length(buf);
	/* (matched also once freed: the transport still sends what output
	 * holds, and asks whether each of its drains was seen) */
	if (own->set && info->orig_size == own->orig &&
	    info->n_added == own->added && info->n_deleted == own->deleted) {
		own->set = 0;	/* the change marked; nested ones are not */
		kick = own->kick;
	} else if (ch->end & CHE_FREED) {
		return;
	} else if (ch->mode == EVRDMA_CHANNEL_MESSAGE) {
		if (info->n_deleted)
			misuse = "drained directly";
		else if (ch->out_len != info->orig_size + info->n_added)
			misuse = "added to inside the callback of an addition";
		/* (as evrdma_channel_write() refuses it: EMSGSIZE; sent, it
		 * ended the channel as if the peer's slots were too small,
		 * with RESOURCE: review r44) */
		else if (info->n_added > ch->ops->max_message(ch))
			misuse = "given a message larger than its largest";
		else if (evrdma__lenq_push(&ch->out_msgs, info->n_added) < 0) {
			if (ch->base)
				ch->ops->abort(ch, EVRDMA_REASON_RESOURCE);
			return;
		}
	}
	if (ch->end & CHE_FREED)
		return;
	if (misuse) {
		evrdma__log(EVRDMA_LOG_WARN, "channel %p: output of a message "
		    "channel %s", (void *)ch, misuse);
		if (ch->base)
			ch->ops->abort(ch, EVRDMA_REASON_MISUSE);
		return;
	}
	if (kick && ch->base)
		ch->ops->kick(ch);
}

void
evrdma__chan_output_taken(struct evrdma_channel *ch)
{
	ch->out_taken = 1;
}

/*
 * Output's callback never saw a change the channel made: the application
 * froze output's front, or deferred or replaced output's callbacks
 * (evbuffer_defer_callbacks(), evbuffer_setcb()). Output's length and
 * its messages are then unknown, and bytes the transport took may still
 * be there to go again: the channel ends rather than send them twice or
 * cut apart (found by review r44).
 */
int
evrdma__chan_output_unseen(struct evrdma_channel *ch)
{
	evrdma__log(EVRDMA_LOG_WARN, "channel %p: output's callback did not "
	    "see the bytes sent (output frozen, or its callbacks deferred or "
	    "replaced)", (void *)ch);
	if (ch->base)
		ch->ops->abort(ch, EVRDMA_REASON_MISUSE);
	return -1;
}

static void
ch_own_mark(struct evrdma_channel *ch, size_t orig, size_t added,
    size_t deleted, int kick)
{
	ch->out_own.orig = orig;
	ch->out_own.added = added;
	ch->out_own.deleted = deleted;
	ch->out_own.set = 1;
	ch->out_own.kick = (uint8_t)kick;
}

void
evrdma__chan_output_discard(struct evrdma_channel *ch)
{
	/* (inside a take: an application's free) */
	struct evrdma__chan_own was = ch->out_own;
	size_t len;
	int pass;

	/* For good: a callback adding inside the drain held a freed
	 * channel's EOF back (review r42), and one that puts bytes back in
	 * front did the same (r43): output takes nothing more, and what a
	 * callback put back is drained again, a few times at most (one
	 * that refills every drain is not followed for ever). */
	evbuffer_freeze(ch->output, 0);
	for (pass = 0; pass < 4 && (len = evbuffer_get_length(ch->output));
	    pass++) {
		ch_own_mark(ch, len, 0, len, 0);
		evbuffer_drain(ch->output, len);
	}
	evbuffer_freeze(ch->output, 1);
	ch->out_own = was;
	while (ch->out_msgs.count)
		evrdma__lenq_pop(&ch->out_msgs);
}

int
evrdma__chan_output_unget(struct evrdma_channel *ch, struct evbuffer *b,
    size_t len)
{
	struct evrdma__chan_own was = ch->out_own;
	int r;

	if (evrdma__chan_messages(ch) &&
	    evrdma__lenq_push_front(&ch->out_msgs, len) < 0)
		return -1;
	/* libevent has no prepend of a reference: by way of a buffer; an
	 * addition the application's callback makes inside it is its own
	 * message, after these bytes (review) */
	ch_own_mark(ch, evbuffer_get_length(ch->output), len, 0, 0);
	r = evbuffer_prepend_buffer(ch->output, b);
	ch->out_own = was;
	if (r < 0 && evrdma__chan_messages(ch))
		evrdma__lenq_pop(&ch->out_msgs);
	return r;
}

/* One addition to output: @p len bytes copied from @p data, or by
 * reference (@p cleanup), or moved from @p from. */
static int
ch_put(struct evrdma_channel *ch, const void *data, struct evbuffer *from,
    size_t len, evbuffer_ref_cleanup_cb cleanup, void *arg)
{
	if (from)
		return evbuffer_add_buffer(ch->output, from);
	if (cleanup)
		return evbuffer_add_reference(ch->output, data, len, cleanup,
		    arg);
	return evbuffer_add(ch->output, data, len);
}

/*
 * A message written to output, the application's or the transport's on
 * its behalf (a write it staged in a send slot). Its length is queued
 * first, so that messages written from output's callbacks, inside this
 * addition, queue theirs after it, as their bytes lie (review r42). A
 * buffer's bytes move to one of the channel's first: the source's own
 * callbacks run then, while output is as it was, and what they write
 * comes before, as it does in output (r43).
 */
static int
ch_put_message(struct evrdma_channel *ch, const void *data,
    struct evbuffer *from, size_t len, evbuffer_ref_cleanup_cb cleanup,
    void *arg)
{
	struct evrdma__chan_own was = ch->out_own;
	struct evbuffer *tmp = NULL, *src = from;
	size_t orig;
	int r;

	if (from) {
		if (!(tmp = evbuffer_new()) || evbuffer_add_buffer(tmp,
		    from) < 0) {
			if (tmp)
				evbuffer_free(tmp);
			return -1;
		}
		from = tmp;
	}
	if (evrdma__lenq_push(&ch->out_msgs, len) < 0)
		r = -1;
	else {
		orig = evbuffer_get_length(ch->output);
		ch_own_mark(ch, orig, len, 0, 1);
		r = ch_put(ch, data, from, len, cleanup, arg);
		/* (the mark unmatched: output's callback saw this addition
		 * merged with another, or never) */
		if (r == 0 && ch->out_own.set && !(ch->end & CHE_FREED) &&
		    evbuffer_get_length(ch->output) != orig + len) {
			evrdma__log(EVRDMA_LOG_WARN, "channel %p: a message "
			    "of %zu bytes was not seen whole", (void *)ch,
			    len);
			if (ch->base)
				ch->ops->abort(ch, EVRDMA_REASON_MISUSE);
		}
		ch->out_own = was;
		if (r < 0)
			evrdma__lenq_pop_back(&ch->out_msgs);
	}
	if (tmp) {
		if (r < 0)	/* (back where they were) */
			(void)evbuffer_prepend_buffer(src, tmp);
		evbuffer_free(tmp);
	}
	return r;
}

int
evrdma__chan_output_put(struct evrdma_channel *ch, const void *data,
    size_t len, evbuffer_ref_cleanup_cb cleanup, void *arg)
{
	if (!evrdma__chan_messages(ch))
		return ch_put(ch, data, NULL, len, cleanup, arg);
	return ch_put_message(ch, data, NULL, len, cleanup, arg);
}

/* (inlined: every write asks) */
static inline __attribute__((always_inline)) int
ch_check_write(struct evrdma_channel *ch, size_t len)
{
	if (evrdma__chan_live(ch) < 0)
		return -1;
	if (ch->shut_wr)
		return evrdma__fail(EPIPE, "channel is shut down");
	/* (as evbuffer_add() refuses: a length that wraps, (size_t)-1 from
	 * a failed read(), would be copied past the caller's bytes into
	 * send slots a peer may read; found by review) */
	if (len > EV_SSIZE_MAX)
		return evrdma__fail(EINVAL, "a length of %zu bytes", len);
	if (ch->mode == EVRDMA_CHANNEL_MESSAGE &&
	    (len == 0 || len > ch->ops->max_message(ch)))
		return evrdma__fail(len ? EMSGSIZE : EINVAL, "message of %zu "
		    "bytes (1..%zu)", len, ch->ops->max_message(ch));
	return 0;
}

int
evrdma_channel_write(struct evrdma_channel *ch, const void *data, size_t len)
{
	int r;

	if (ch_check_write(ch, len) < 0)
		return -1;
	if (len == 0)
		return 0;	/* as bufferevent_write(): nothing to send */
	if (!data)
		return evrdma__fail(EINVAL, "no data");
	/* (a reference: an evbuffer callback of the application's on
	 * output, run inside the addition, may free the channel, and the
	 * last reference must not go under libevent's feet: review r44) */
	evrdma__chan_ref(ch);
	r = ch->base ? ch->ops->write(ch, data, len) : -1;
	if (r != -1)
		r = r == 0 ? 0 : -1;
	else if ((r = evrdma__chan_output_put(ch, data, len, NULL, NULL)) < 0)
		evrdma__fail(ENOMEM, "out of memory");
	evrdma__chan_unref(ch);
	return r;
}

int
evrdma_channel_write_buffer(struct evrdma_channel *ch, struct evbuffer *buf)
{
	size_t len = buf ? evbuffer_get_length(buf) : 0;
	int r;

	if (!buf)
		return evrdma__fail(EINVAL, "no buffer");
	if (ch_check_write(ch, len) < 0)
		return -1;
	/* (a move onto itself moves nothing, and would queue a message of
	 * no bytes: review r43) */
	if (buf == ch->output)
		return evrdma__fail(EINVAL, "the channel's own output");
	evrdma__chan_ref(ch);	/* (as evrdma_channel_write()) */
	r = evrdma__chan_messages(ch) ?
	    ch_put_message(ch, NULL, buf, len, NULL, NULL) :
	    ch_put(ch, NULL, buf, len, NULL, NULL);
	evrdma__chan_unref(ch);
	return r < 0 ? evrdma__fail(ENOMEM, "out of memory") : 0;
}

void *
evrdma_channel_reserve(struct evrdma_channel *ch, size_t len)
{
	if (ch_check_write(ch, len) < 0)
		return NULL;
	if (!ch->base || (ch->end & CHE_GONE)) {
		evrdma__fail(EPIPE, "the channel's connection is over");
		return NULL;
	}
	return ch->ops->reserve(ch, len);
}

int
evrdma_channel_commit(struct evrdma_channel *ch, size_t len)
{
	int r;

	if (evrdma__chan_live(ch) < 0)
		return -1;
	evrdma__chan_ref(ch);	/* (as evrdma_channel_write()) */
	r = ch->ops->commit(ch, len);
	evrdma__chan_unref(ch);
	return r;
}
