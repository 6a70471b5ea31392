/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel's semantics, those of libevent's bufferevent over a
 * socket, independent of how the bytes move (see chan.h). What a user of
 * a TCP bufferevent relies on holds here, and where a transport cannot do
 * the same the public header says so:
 *  - input takes at most the read high watermark; reading, and the read
 *    timeout, are suspended while input is at it;
 *  - the read callback runs after new data, when input reaches the low
 *    watermark; the write callback when output drained to its low
 *    watermark after bytes were sent, and once each time EV_WRITE is
 *    enabled (a socket is writable then);
 *  - the read timeout counts while reading is enabled and not suspended,
 *    the write timeout while EV_WRITE is enabled and output holds bytes;
 *    either disables its direction and reports TIMEOUT;
 *  - the end of the stream is reported once, after the data: EOF when the
 *    peer shut down in order, ERROR otherwise (see evrdma__chan_check_end).
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "chan.h"

/* ---- callbacks to the user ---- */

void
evrdma__chan_event(struct evrdma_channel *ch, short what)
{
	if (!ch->eventcb || (ch->end & CHE_FREED) ||
	    !evrdma__base_user_ok(ch->base))
		return;
	/* as a socket's error leaves errno, so does ours: a write after the
	 * peer went is EPIPE, the rest as its reason says (ECONNRESET,
	 * ETIMEDOUT, EPROTO...) */
	if (what & BEV_EVENT_ERROR)
		errno = (what & BEV_EVENT_WRITING) &&
		    ch->error == EVRDMA_REASON_DISCONNECTED ? EPIPE :
		    evrdma__reason_errno(ch->error);
	evrdma__chan_ref(ch);
	ch->eventcb(ch, what, ch->cbarg);
	evrdma__chan_unref(ch);
}

static void
timer_arm(struct event *ev, const struct timeval *tv)
{
	if (ev)
		evrdma__ev_timer_start_tv(ev, tv);
}

/* (inlined: every delivery asks, and without a read timeout the timer is
 * never armed: no event_del() on every delivery, measured 80 instructions
 * of a ~3,200-instruction round trip) */
static inline __attribute__((always_inline)) void
rd_timer_update(struct evrdma_channel *ch)
{
	if (!ch->has_tv_read)
		return;
	if (ch->connected && evrdma__chan_reading(ch) && !ch->rd_held &&
	    !ch->rd_wait && !(ch->end & CHE_RD_ENDED))
		timer_arm(ch->rd_timer, &ch->tv_read);
	else
		evrdma__ev_stop(ch->rd_timer);
}

static void
ch_rd_timeout(void *arg)
{
	struct evrdma_channel *ch = arg;

	ch->enabled &= ~EV_READ;
	evrdma__chan_event(ch, BEV_EVENT_TIMEOUT | BEV_EVENT_READING);
}

static void
ch_wr_timeout(void *arg)
{
	struct evrdma_channel *ch = arg;

	ch->enabled &= ~EV_WRITE;
	evrdma__chan_event(ch, BEV_EVENT_TIMEOUT | BEV_EVENT_WRITING);
}

/* ---- output and input ---- */

/* Input shrank while held: what the transport holds may move in, and a
 * read suspended at the high watermark resumes. */
static void
ch_input_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct evrdma_channel *ch = arg;

	if (!info->n_deleted || (ch->end & CHE_FREED))
		return;
	if (ch->rd_held && (!ch->rd_hi ||
	    evbuffer_get_length(ch->input) < ch->rd_hi)) {
		ch->rd_held = 0;
		rd_timer_update(ch);
	}
	if (ch->base)
		ch->ops->kick(ch);
}

int
evrdma__chan_watch_input_any(struct evrdma_channel *ch, int held, size_t have)
{
	int wm = ch->rd_hi && have >= ch->rd_hi;
	/* (bytes the transport holds back for input's room arrived: the
	 * read timeout waits for the application then, as it does at the
	 * mark; a message that did not fit the room left under the mark
	 * timed out: found by a host test) */
	int wait = held && !wm;

	if (wm != ch->rd_held || wait != ch->rd_wait) {
		ch->rd_held = (uint8_t)wm;
		ch->rd_wait = (uint8_t)wait;
		rd_timer_update(ch);
	}
	held = held || wm;
	if (held && !ch->in_watch) {
		if (!evbuffer_add_cb(ch->input, ch_input_cb, ch))
			return -1;
		ch->in_watch = 1;
	} else if (!held && ch->in_watch) {
		/* (by function and argument: an application's
		 * evbuffer_setcb() on input may have freed the entry, and
		 * its drains then kick nothing: channel.h) */
		(void)evbuffer_remove_cb(ch->input, ch_input_cb, ch);
		ch->in_watch = 0;
	}
	return 0;
}

int
evrdma__chan_input_refused(struct evrdma_channel *ch)
{
	/* (libevent 2.1's evbuffer_add() refuses any addition, even of no
	 * bytes, to a buffer whose end is frozen, before it allocates) */
	int frozen = evbuffer_add(ch->input, "", 0) < 0;

	evrdma__log(EVRDMA_LOG_WARN, "channel %p: input refused arrived "
	    "bytes (%s)", (void *)ch, frozen ? "its end frozen" :
	    "out of memory");
	return frozen ? EVRDMA_REASON_MISUSE : EVRDMA_REASON_RESOURCE;
}

void
evrdma__chan_input_lost(struct evrdma_channel *ch)
{
	/* every length goes: read_message() says EBADMSG while input
	 * holds bytes of the messages they counted, and input's boundaries
	 * are known again once it was empty */
	while (ch->in_msgs.count)
		evrdma__lenq_pop(&ch->in_msgs);
}

void
evrdma__chan_input_added(struct evrdma_channel *ch, size_t have)
{
	if (ch->rd_hi && have >= ch->rd_hi)
		ch->rd_held = 1;
	rd_timer_update(ch);
	/* (input's real length against a low watermark: an application's
	 * callback on input may have taken bytes inside the addition, and
	 * a socket's read callback waits for the mark: review r44) */
	if (ch->rd_lo && have >= ch->rd_lo)
		have = evbuffer_get_length(ch->input);
	if (have >= ch->rd_lo && ch->readcb && !(ch->end & CHE_FREED) &&
	    evrdma__base_user_ok(ch->base)) {
		ch->in_read_cb = 1;
		ch->readcb(ch, ch->cbarg);
		ch->in_read_cb = 0;
	}
}

void
evrdma__chan_recv(struct evrdma_channel *ch, const void *p, size_t len)
{
	rd_timer_update(ch);
	ch->in_read_cb = 1;
	ch->recvcb(ch, p, len, ch->cbarg);
	ch->in_read_cb = 0;
}

void
evrdma__chan_sunk(struct evrdma_channel *ch)
{
	rd_timer_update(ch);
	ch->sink->taken(ch->sink_arg);
}

void
evrdma__chan_sent(struct evrdma_channel *ch, int sent)
{
	size_t olen;

	if ((ch->end & CHE_FREED) || !ch->base)
		return;
	olen = ch->out_len;
	if (ch->has_tv_write) {
		if (!olen || !(ch->enabled & EV_WRITE) ||
		    (ch->end & CHE_WR_ENDED))
			evrdma__ev_stop(ch->wr_timer);
		else if (sent || !evrdma__ev_pending(ch->wr_timer))
			timer_arm(ch->wr_timer, &ch->tv_write);
	}
	if ((sent || ch->write_kick) && olen <= ch->wr_lo && ch->writecb &&
	    (ch->enabled & EV_WRITE) && !(ch->end & CHE_WR_ENDED)) {
		ch->write_kick = 0;
		ch->writecb(ch, ch->cbarg);
	}
	ch->write_kick = 0;
}

void
evrdma__chan_connected(struct evrdma_channel *ch)
{
	ch->connected = 1;
	rd_timer_update(ch);
	evrdma__chan_event(ch, BEV_EVENT_CONNECTED);
}

void
evrdma__chan_connect_failed(struct evrdma_channel *ch, int reason)
{
	if ((ch->end & (CHE_RD_ENDED | CHE_WR_ENDED)) ==
	    (CHE_RD_ENDED | CHE_WR_ENDED))
		return;
	ch->end |= CHE_RD_ENDED | CHE_WR_ENDED;
	ch->error = reason;
	evrdma__ev_stop(ch->rd_timer);
	evrdma__ev_stop(ch->wr_timer);
	evrdma__log(EVRDMA_LOG_INFO, "channel %p: %s", (void *)ch,
	    evrdma_reason_str(reason));
	evrdma__chan_event(ch, BEV_EVENT_ERROR);
}

/*
 * The end of the stream, reported once per direction, as a socket
 * bufferevent would where a socket would know, and always once the
 * connection is over (a socket with reading disabled and nothing to
 * write learns nothing; a channel does, and says so):
 *  - with EV_READ enabled, after every received byte is in input: EOF |
 *    READING when the peer shut down in order (it sent its end: a
 *    shutdown or a free), ERROR | READING when the connection ended
 *    otherwise (reason in evrdma_channel_get_error());
 *  - with output to send and the connection over: ERROR | WRITING (also
 *    after the reading end was reported, when bytes are written then: a
 *    socket's write fails after its read saw the reset);
 *  - with EV_READ disabled, the connection over and nothing left to read
 *    or write: as with EV_READ enabled. Bytes still to read keep the end
 *    waiting until reading is enabled, so that nothing received is lost.
 * Reporting a direction's end disables it, as bufferevent does.
 */
void
evrdma__chan_check_end(struct evrdma_channel *ch, int waiting)
{
	short what;

	if ((ch->end & CHE_FREED) || !ch->connected ||
	    !evrdma__base_user_ok(ch->base))
		return;
	if (!(ch->end & CHE_RD_ENDED) &&
	    (ch->end & (CHE_PEER_EOF | CHE_GONE)) && !waiting &&
	    (evrdma__chan_reading(ch) || ((ch->end & CHE_GONE) &&
	    !ch->out_len))) {
		ch->end |= CHE_RD_ENDED;
		ch->enabled &= ~EV_READ;
		evrdma__ev_stop(ch->rd_timer);
		if ((ch->end & (CHE_PEER_EOF | CHE_PEER_RESET)) ==
		    CHE_PEER_EOF) {
			what = BEV_EVENT_EOF | BEV_EVENT_READING;
		} else {
			what = BEV_EVENT_ERROR | BEV_EVENT_READING;
			ch->error = (ch->end & CHE_PEER_RESET) ?
			    EVRDMA_REASON_DISCONNECTED : ch->gone_reason;
		}
		if (ch->end & CHE_GONE)
			evrdma__ev_stop(ch->wr_timer);
		evrdma__log(EVRDMA_LOG_INFO, "channel %p: %s", (void *)ch,
		    what & BEV_EVENT_EOF ? "end of stream" :
		    (ch->end & CHE_PEER_RESET) ? "reset by the peer" :
		    evrdma_reason_str(ch->gone_reason));
		evrdma__chan_event(ch, what);
		return;
	}
	if ((ch->end & (CHE_GONE | CHE_WR_ENDED)) == CHE_GONE && ch->out_len) {
		ch->end |= CHE_WR_ENDED;
		ch->error = ch->gone_reason;
		ch->enabled &= ~EV_WRITE;
		evrdma__ev_stop(ch->wr_timer);
		evrdma__log(EVRDMA_LOG_INFO, "channel %p: cannot write: %s",
		    (void *)ch, evrdma_reason_str(ch->gone_reason));
		evrdma__chan_event(ch, BEV_EVENT_ERROR | BEV_EVENT_WRITING);
	}
}

/* ---- set-up and lifetime ---- */

/* evrdma_base_free() with the channel still the user's (the hook is
 * already off the list) */
static void
ch_base_gone(struct evrdma__hook *h)
{
	struct evrdma_channel *ch = (struct evrdma_channel *)((char *)h -
	    offsetof(struct evrdma_channel, hook));

	ch->hooked = 0;
	ch->ops->base_gone(ch);
}

static void
ch_exiting(struct evrdma__hook *h)
{
	struct evrdma_channel *ch = (struct evrdma_channel *)((char *)h -
	    offsetof(struct evrdma_channel, hook));

	if (!(ch->end & CHE_FREED) && ch->base)
		ch->ops->exiting(ch);
}

int
evrdma__chan_init(struct evrdma_channel *ch, struct evrdma_base *base,
    const struct evrdma__chan_ops *ops, int mode)
{
	ch->ops = ops;
	ch->base = base;
	ch->hook.base_gone = ch_base_gone;
	ch->hook.exiting = ch_exiting;
	LIST_INSERT_HEAD(&base->hooks, &ch->hook, link);
	ch->hooked = 1;
	ch->refcnt = 1;		/* the user's */
	ch->mode = mode;
	ch->enabled = EV_WRITE;
	ch->input = evbuffer_new();
	ch->output = evbuffer_new();
	ch->rd_timer = evrdma__ev_timer_new(base, ch_rd_timeout, ch);
	ch->wr_timer = evrdma__ev_timer_new(base, ch_wr_timeout, ch);
	if (!ch->input || !ch->output || !ch->rd_timer || !ch->wr_timer ||
	    !evbuffer_add_cb(ch->output, evrdma__chan_output_cb, ch))
		return evrdma__fail(ENOMEM, "channel: out of memory");
	return 0;
}

/* The semantics' share of the end: called by the transport's destruct. */
void
evrdma__chan_fini(struct evrdma_channel *ch)
{
	if (ch->hooked)
		LIST_REMOVE(&ch->hook, link);
	ch->hooked = 0;
	evrdma__ev_free(ch->rd_timer);
	evrdma__ev_free(ch->wr_timer);
	ch->rd_timer = ch->wr_timer = NULL;
	/* The channel's callbacks leave its buffers first: a deferred
	 * callback (evbuffer_defer_callbacks()) holds a buffer past its
	 * free, and would run them on the freed channel (review r44). */
	if (ch->input) {
		if (ch->in_watch)
			(void)evbuffer_remove_cb(ch->input, ch_input_cb, ch);
		evbuffer_free(ch->input);
	}
	if (ch->output) {
		(void)evbuffer_remove_cb(ch->output, evrdma__chan_output_cb,
		    ch);
		evbuffer_free(ch->output);
	}
	ch->input = ch->output = NULL;
	free(ch->in_msgs.v);
	free(ch->out_msgs.v);
}

void
evrdma__chan_orphan(struct evrdma_channel *ch)
{
	evrdma__ev_free(ch->rd_timer);
	evrdma__ev_free(ch->wr_timer);
	ch->rd_timer = ch->wr_timer = NULL;
	ch->base = NULL;
	ch->end |= CHE_GONE | CHE_RD_ENDED | CHE_WR_ENDED;
	if (!ch->error)
		ch->error = EVRDMA_REASON_RESOURCE;
}

/* ---- the bufferevent-like interface ---- */

int
evrdma_channel_connect(struct evrdma_channel *ch, const struct sockaddr *sa,
    int socklen)
{
	if (evrdma__chan_live(ch) < 0)
		return -1;
	if (!ch->base)
		return evrdma__fail(EPIPE, "the channel's base was freed");
	return ch->ops->connect(ch, sa, socklen);
}

int
evrdma_channel_connect_hostname(struct evrdma_channel *ch,
    struct evdns_base *dns, int family, const char *host, int port)
{
	if (evrdma__chan_live(ch) < 0)
		return -1;
	if (!ch->base)
		return evrdma__fail(EPIPE, "the channel's base was freed");
	return ch->ops->connect_hostname(ch, dns, family, host, port);
}

void
evrdma_channel_setcb(struct evrdma_channel *ch, evrdma_channel_data_cb readcb,
    evrdma_channel_data_cb writecb, evrdma_channel_event_cb eventcb,
    void *arg)
{
	if (!ch || (ch->end & CHE_FREED))
		return;
	ch->readcb = readcb;
	ch->writecb = writecb;
	ch->eventcb = eventcb;
	ch->cbarg = arg;
}

void
evrdma__chan_peer_eof(struct evrdma_channel *ch, int reset)
{
	ch->end = (uint8_t)((ch->end & ~CHE_PEER_RESET) | CHE_PEER_EOF |
	    (reset ? CHE_PEER_RESET : 0));
}

void
evrdma__chan_peer_eof_void(struct evrdma_channel *ch)
{
	ch->end &= (uint8_t)~CHE_PEER_EOF;
}

void
evrdma__chan_end_reason(struct evrdma_channel *ch, int reason, int dns)
{
	if (!ch->gone_reason)
		ch->gone_reason = reason;
	if (reason == EVRDMA_REASON_DNS)
		ch->dns_error = dns;
}

void
evrdma__chan_gone(struct evrdma_channel *ch)
{
	ch->end |= CHE_GONE;
}

void
evrdma__chan_accepted(struct evrdma_channel *ch)
{
	ch->connected = 1;
}

void
evrdma__chan_unhanded(struct evrdma_channel *ch)
{
	ch->end |= CHE_FREED;
	evrdma__chan_unref(ch);
}

void
evrdma__chan_discard(struct evrdma_channel *ch)
{
	ch->refcnt = 1;
	evrdma__chan_unref(ch);
}

int
evrdma__chan_set_sink(struct evrdma_channel *ch,
    const struct evrdma__chan_sink *sink, void *arg)
{
	if (evrdma__chan_live(ch) < 0)
		return -1;
	if (sink && ch->mode != EVRDMA_CHANNEL_STREAM)
		return evrdma__fail(EINVAL, "a sink takes a stream only");
	ch->sink = sink;
	ch->sink_arg = arg;
	return 0;
}

int
evrdma_channel_set_recv_cb(struct evrdma_channel *ch,
    evrdma_channel_recv_cb cb)
{
	if (evrdma__chan_live(ch) < 0)
		return -1;
	ch->recvcb = cb;
	/* data waiting goes to it at the next pass, if input is empty */
	if (cb && ch->base)
		ch->ops->kick(ch);
	return 0;
}

int
evrdma_channel_enable(struct evrdma_channel *ch, short events)
{
	if (evrdma__chan_live(ch) < 0)
		return -1;
	ch->enabled |= events & (EV_READ | EV_WRITE);
	if (events & EV_READ)
		rd_timer_update(ch);
	/* a socket is writable at once: one write callback */
	if ((events & EV_WRITE) && ch->connected && !(ch->end & CHE_WR_ENDED))
		ch->write_kick = 1;
	if (ch->base)
		ch->ops->kick(ch);
	return 0;
}

int
evrdma_channel_disable(struct evrdma_channel *ch, short events)
{
	if (evrdma__chan_live(ch) < 0)
		return -1;
	ch->enabled &= ~(events & (EV_READ | EV_WRITE));
	if (events & EV_READ)
		evrdma__ev_stop(ch->rd_timer);
	if (events & EV_WRITE) {
		evrdma__ev_stop(ch->wr_timer);
		ch->write_kick = 0;
	}
	return 0;
}

short
evrdma_channel_get_enabled(struct evrdma_channel *ch)
{
	return ch ? ch->enabled : 0;
}

struct evbuffer *
evrdma_channel_get_input(struct evrdma_channel *ch)
{
	return ch ? ch->input : NULL;
}

struct evbuffer *
evrdma_channel_get_output(struct evrdma_channel *ch)
{
	return ch ? ch->output : NULL;
}

size_t
evrdma_channel_max_message(struct evrdma_channel *ch)
{
	return ch ? ch->ops->max_message(ch) : 0;
}

size_t
evrdma_channel_read(struct evrdma_channel *ch, void *data, size_t len)
{
	int n;

	if (!data || evrdma__chan_live(ch) < 0)
		return 0;
	/* (a reference: an evbuffer callback of the application's on
	 * input, run inside the removal, may free the channel: review r44) */
	evrdma__chan_ref(ch);
	n = evbuffer_remove(ch->input, data, len);
	evrdma__chan_unref(ch);
	return n > 0 ? (size_t)n : 0;
}

ssize_t
evrdma_channel_read_message(struct evrdma_channel *ch, void *data, size_t len)
{
	size_t n;
	int r;

	if (evrdma__chan_live(ch) < 0)
		return -1;
	if (ch->mode != EVRDMA_CHANNEL_MESSAGE) {
		evrdma__fail(EINVAL, "not a message channel");
		return -1;
	}
	if (!ch->in_msgs.count) {
		evrdma__fail(EAGAIN, "no message");
		return -1;
	}
	if (evbuffer_get_length(ch->input) != ch->in_msgs.bytes) {
		/* input was drained (or added to) other than through this
		 * call: the boundaries are lost */
		evrdma__fail(EBADMSG, "input changed outside "
		    "evrdma_channel_read_message(): message boundaries lost");
		return -1;
	}
	n = evrdma__lenq_front(&ch->in_msgs);
	if (!data)
		return (ssize_t)n;
	if (len < n) {
		evrdma__fail(EMSGSIZE, "message of %zu bytes, buffer %zu", n,
		    len);
		return -1;
	}
	/* (popped first: an application's callback on input, run inside
	 * the removal, sees the rest of the messages as they lie) */
	evrdma__lenq_pop(&ch->in_msgs);
	evrdma__chan_ref(ch);
	r = evbuffer_remove(ch->input, data, n);
	if (r != (int)n && !(ch->end & CHE_FREED) &&
	    ch->in_msgs.bytes + n == evbuffer_get_length(ch->input)) {
		/* input's front frozen: the message stays (review r44) */
		(void)evrdma__lenq_push_front(&ch->in_msgs, n);
		evrdma__chan_unref(ch);
		evrdma__fail(EBUSY, "input's front is frozen");
		return -1;
	}
	evrdma__chan_unref(ch);
	return (ssize_t)n;
}

void
evrdma_channel_setwatermark(struct evrdma_channel *ch, short events,
    size_t lowmark, size_t highmark)
{
	if (!ch || (ch->end & CHE_FREED))
		return;
	if (events & EV_READ) {
		ch->rd_lo = lowmark;
		ch->rd_hi = highmark;
		/* a lower mark holds what comes next back at once */
		evrdma__chan_watch_input(ch, ch->in_watch,
		    evbuffer_get_length(ch->input));
		if (ch->base)
			ch->ops->kick(ch);
	}
	if (events & EV_WRITE) {
		ch->wr_lo = lowmark;
		ch->wr_hi = highmark;
	}
}

int
evrdma_channel_set_timeouts(struct evrdma_channel *ch,
    const struct timeval *tv_read, const struct timeval *tv_write)
{
	if (evrdma__chan_live(ch) < 0)
		return -1;
	ch->has_tv_read = tv_read != NULL;
	if (tv_read)
		ch->tv_read = *tv_read;
	ch->has_tv_write = tv_write != NULL;
	if (tv_write)
		ch->tv_write = *tv_write;
	if (!ch->has_tv_read)
		evrdma__ev_stop(ch->rd_timer);
	rd_timer_update(ch);
	if (!ch->has_tv_write)
		evrdma__ev_stop(ch->wr_timer);
	else if ((ch->enabled & EV_WRITE) && ch->connected &&
	    ch->out_len)
		timer_arm(ch->wr_timer, &ch->tv_write);
	return 0;
}

int
evrdma_channel_flush(struct evrdma_channel *ch)
{
	int r;

	if (evrdma__chan_live(ch) < 0)
		return -1;
	if (!ch->base || (ch->end & (CHE_GONE | CHE_WR_ENDED)))
		return evrdma__fail(EPIPE, "channel is closed or failed");
	evrdma__chan_ref(ch);	/* (as evrdma_channel_write()) */
	r = ch->ops->flush(ch);
	evrdma__chan_unref(ch);
	return r;
}

int
evrdma_channel_shutdown(struct evrdma_channel *ch)
{
	if (evrdma__chan_live(ch) < 0)
		return -1;
	if (ch->shut_wr || (ch->end & (CHE_GONE | CHE_WR_ENDED)))
		return evrdma__fail(EPIPE, "channel already shut down, closed "
		    "or failed");
	ch->shut_wr = 1;
	if (ch->base)
		ch->ops->kick(ch);
	return 0;
}

int
evrdma_channel_get_error(struct evrdma_channel *ch)
{
	return ch ? ch->error : EVRDMA_REASON_NONE;
}

int
evrdma_channel_get_stats(struct evrdma_channel *ch,
    struct evrdma_channel_stats *out, size_t outlen)
{
	struct evrdma_channel_stats st;

	if (!ch || (ch->end & CHE_FREED))
		return evrdma__fail(EINVAL, "evrdma_channel_get_stats: no "
		    "channel");
	memset(&st, 0, sizeof(st));
	st.transport = EVRDMA_TRANSPORT_RDMA;
	st.state = (ch->end & CHE_GONE) || !ch->base ? EVRDMA_CHANNEL_ENDED :
	    ch->connected ? EVRDMA_CHANNEL_CONNECTED :
	    EVRDMA_CHANNEL_CONNECTING;
	ch->ops->stats(ch, &st);
	return evrdma__stats_out(out, outlen, &st, sizeof(st), sizeof(st));
}

void
evrdma_channel_free(struct evrdma_channel *ch)
{
	if (!ch || (ch->end & CHE_FREED))
		return;
	ch->end |= CHE_FREED;
	ch->readcb = ch->writecb = NULL;
	ch->eventcb = NULL;
	ch->recvcb = NULL;
	ch->sink = NULL;
	evrdma__ev_stop(ch->rd_timer);
	evrdma__ev_stop(ch->wr_timer);
	ch->ops->close(ch);
	evrdma__chan_unref(ch);
}
