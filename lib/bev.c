/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the bufferevent adapter (evrdma/bufferevent.h says what it is,
 * doc/ARCHITECTURE.md how it is built and why). An adapter ("ad") is:
 *  - the user's bufferevent, a libevent filter bufferevent whose filter
 *    functions are ad_in() and ad_out() here, and whose free-context hook
 *    (ad_user_freed()) tells us the user is done;
 *  - under it, one end of a bufferevent_pair (u) with its partner (d):
 *    they carry no data, only the token of ad_probe();
 *  - the transport: an evrdma channel, or a TCP bufferevent_socket once a
 *    connect fell back to TCP (or, on a base without RDMA, when the test
 *    knob EVRDMA_BEV_ADAPTER=1 asks for adapters there).
 * Received bytes move from the transport's input into the bufferevent's
 * (ad_deliver() asks libevent to run the input filter, then the read
 * callback); written bytes move from the bufferevent's output into the
 * transport's, up to a cap (the channel's ring), when libevent runs the
 * output filter (on every write, and from ad_pull() when the transport
 * has room again). What the bufferevent does not take waits in the
 * transport's input, up to its read high watermark, where the peer is
 * held back by the channel's credits (or TCP's window), not by memory
 * here.
 *
 * This file and bev_listener.c hold every libevent call of the adapter.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
/* For the timeouts (ad_take_timeouts()) and ad_live(): libevent's
 * deprecated, installed view of struct bufferevent (ev_read, ev_write,
 * timeout_write, readcb). */
#include <event2/bufferevent_struct.h>
#include <event2/event.h>
#include <evrdma/srq.h>

#include "bev.h"

#define AD_MAGIC	0x65766265u	/* "evbe" */
#define AD_OPTIONS	EVRDMA__BEV_OPTIONS
/* TCP: what the adapter hands the socket bufferevent beyond the kernel */
#define SOCK_CAP	(256 * 1024)
#define RESUME_MS_MAX	64
/* output gathered from a burst of small writes before it moves (ad_out()) */
#define AD_GATHER_MAX	(16 * 1024)
/* u's read timeout: only its event's being pending counts (ad_probe()); it
 * never expires (68 years) */
#define AD_U_TIMEOUT_S	INT_MAX
/* written straight into the channel below this (ad_direct()): the size
 * from which the channel sends a write as a message of its own (its
 * STAGE_MIN), which would cut the stream where a socket does not */
#define AD_DIRECT_MAX	1024

/* An event's EVLIST_* flags (event_struct.h, installed): whether it is
 * pending or active, as event_pending() says, without its lock and call
 * on paths that run for every message. */
#define AD_EV_FLAGS(ev)	((ev)->ev_evcallback.evcb_flags)

enum ad_state { AD_IDLE, AD_CONNECTING, AD_UP, AD_FAILED };
/* why ad_move_out() runs (struct ad's moving) */
enum ad_move { AD_MOVE_NONE, AD_MOVE_PULL, AD_MOVE_BURST };

struct ad {
	uint32_t magic;
	struct evrdma__hook hook;	/* on the base's list: base free */
	int on_base;
	struct evrdma_base *base;	/* NULL once the base is gone */
	struct event_base *eb;
	struct bufferevent *bev;	/* the user's; NULL once freed */
	struct bufferevent *u, *d;	/* the pair: u under bev */
	struct evbuffer *tok;		/* the probe's token, between rounds */
	/* the transport: one of */
	struct evrdma_channel *ch;
	struct bufferevent *sock;
	int transport;			/* EVRDMA_TRANSPORT_* */
	enum ad_state state;
	int fallback;			/* may fall back to TCP */
	size_t cap;			/* output the transport takes */
	unsigned teardown_ms;
	/* the connect, for a fallback */
	struct sockaddr_storage sa;
	int salen;
	char *host;
	int family, port;
	struct evdns_base *dns;
	struct evrdma__resolve_req *resolving;
	/* the end of the stream */
	short rd_end;			/* EOF|READING or ERROR|READING due */
	uint8_t rd_end_done;
	uint8_t wr_end_done;		/* ERROR|WRITING reported */
	uint8_t gone;			/* the connection is over */
	uint8_t finish_due;		/* BEV_FINISHED before connected */
	uint8_t shut;			/* our end shut down (BEV_FINISHED) */
	uint8_t shut_due;		/* TCP: shutdown once output drained */
	uint8_t reset_due;		/* TCP closing: a reset, unread bytes */
	uint8_t delivering;
	uint8_t moving;			/* enum ad_move: in ad_move_out() */
	int error;			/* evrdma_bufferevent_get_error() */
	int err;			/* the errno of the end, for the
					 * event callback (ECONNRESET...) */
	int dns_error;			/* evrdma_bufferevent_get_dns_error() */
	struct event *work;		/* ad_work_cb(), from the loop */
	struct event *move;		/* ad_move_cb(): a burst's output */
	uint8_t move_due;
	struct event *resume;		/* looks for EV_WRITE enabled again */
	unsigned resume_ms;
	struct event *linger;		/* closing: bounded wait for output */
	size_t linger_left;
};

static void ad_deliver(struct ad *ad);
static void ad_pull(struct ad *ad);
static struct ad *ad_of(struct bufferevent *bev);
static void ad_destroy(struct ad *ad);
static int ad_tcp_start(struct ad *ad);

/* The test knob: adapters over TCP on a base without RDMA, so that the
 * host's tests run the adapter (evrdma/bufferevent.h). */
int
evrdma__bev_tcp_adapters(void)
{
	const char *v = getenv("EVRDMA_BEV_ADAPTER");

	return v && v[0] == '1';
}

/* ---- the transport: a channel, or a TCP bufferevent ---- */

static struct evbuffer *
tp_in(const struct ad *ad)
{
	return ad->ch ? evrdma_channel_get_input(ad->ch) :
	    bufferevent_get_input(ad->sock);
}

static struct evbuffer *
tp_out(const struct ad *ad)
{
	return ad->ch ? evrdma_channel_get_output(ad->ch) :
	    bufferevent_get_output(ad->sock);
}

/* Our end is finished (BEV_FINISHED): the peer gets EOF after the data. */
static void
tp_shutdown(struct ad *ad)
{
	if (ad->shut)
		return;
	ad->shut = 1;
	if (ad->ch) {
		if (evrdma_channel_shutdown(ad->ch) < 0)
			evrdma__log(EVRDMA_LOG_DEBUG, "bufferevent %p: "
			    "shutdown: %s", (void *)ad->bev, evrdma_errmsg());
	} else if (evbuffer_get_length(tp_out(ad)) == 0) {
		shutdown(bufferevent_getfd(ad->sock), SHUT_WR);
	} else {
		/* after what the socket bufferevent still holds */
		ad->shut_due = 1;
		bufferevent_setwatermark(ad->sock, EV_WRITE, 0, 0);
	}
}

/* ---- whether the bufferevent reads: the pair's token ---- */

/*
 * Whether the bufferevent reads now: its EV_READ enabled and reading not
 * suspended by its high watermark, a rate limit or a bufferevent stacked
 * on it. libevent tells only the underlying pair end (u), which then takes
 * what its partner (d) holds. So hand d the token: if u takes it at once,
 * the bufferevent reads (the token comes back). If not, the token waits at
 * d and a second byte joins it; when u reads again it takes both, which
 * reaches its read low watermark of 2 and runs ad_doorbell(). While the
 * token waits, the answer is no without asking.
 *
 * The yes needs no token: u has a read timeout (AD_U_TIMEOUT_S, never due),
 * and libevent's pair keeps a read timeout's event pending exactly while
 * its end may take bytes: it deletes it when reading is disabled or
 * suspended (be_pair_disable) and adds it again when reading resumes. So
 * a pending event is a yes for the cost of event_pending(), where moving
 * the token over and back cost ~1,200 instructions per message (callgrind:
 * two evbuffer moves, the pair's transfer and their callbacks). Anything
 * else still asks with the token, which also arms the doorbell.
 */
static int
ad_probe(struct ad *ad)
{
	struct evbuffer *dout = bufferevent_get_output(ad->d);
	struct evbuffer *uin = bufferevent_get_input(ad->u);

	if (evbuffer_get_length(dout))
		return 0;
	if (AD_EV_FLAGS(&ad->u->ev_read) & EVLIST_TIMEOUT)
		return 1;	/* event_pending(), without its lock and call */
	evbuffer_add_buffer(dout, ad->tok);
	if (evbuffer_get_length(uin)) {
		evbuffer_add_buffer(ad->tok, uin);
		return 1;
	}
	evbuffer_add(dout, "", 1);
	return 0;
}

/* u's read callback: the bufferevent reads again (deferred: u is a pair
 * end). */
static void
ad_doorbell(struct bufferevent *u, void *arg)
{
	struct ad *ad = arg;
	struct evbuffer *uin = bufferevent_get_input(u);

	evbuffer_drain(uin, evbuffer_get_length(uin));
	if (!evbuffer_get_length(ad->tok))
		evbuffer_add(ad->tok, "", 1);
	ad_deliver(ad);
}

/*
 * The user's bufferevent, or NULL once the user freed it. libevent calls
 * the free-context hook (ad_user_freed()) only when it finalizes the
 * bufferevent, from the loop, later; until then a call into it would take
 * a reference from zero and free it a second time. The free itself shows
 * at once: freeing the filter frees u with it (BEV_OPT_CLOSE_ON_FREE), and
 * bufferevent_free() clears u's callbacks, the doorbell among them. While
 * a callback runs the adapter holds a reference, so the free shows only
 * once that is dropped, when nothing of the adapter's is on the stack.
 * u's read callback is read from the installed struct bufferevent
 * (bufferevent_struct.h, as the timeouts are) rather than with
 * bufferevent_getcb(), whose lock and call cost 32 instructions six times
 * per round trip; one pointer, written on the loop's thread.
 */
static struct bufferevent *
ad_live(const struct ad *ad)
{
	if (!ad->bev)
		return NULL;
	return ad->u->readcb == ad_doorbell ? ad->bev : NULL;
}

/* ---- rate limits: the bufferevent's own bucket ---- */

/* What the bufferevent's rate limit lets move now (@p wr: writing), or
 * SIZE_MAX without a limit: then nothing is charged (ad_charge()), so that
 * the common case asks libevent once per move, not four times. */
static size_t
ad_rate_max(const struct ad *ad, int wr)
{
	ev_ssize_t max;

	if ((wr ? bufferevent_get_write_limit(ad->bev) :
	    bufferevent_get_read_limit(ad->bev)) == EV_SSIZE_MAX)
		return SIZE_MAX;	/* no limit set */
	max = wr ? bufferevent_get_max_to_write(ad->bev) :
	    bufferevent_get_max_to_read(ad->bev);
	return max > 0 ? (size_t)max : 0;
}

/* @p n bytes moved under a limit of @p max (ad_rate_max()). */
static void
ad_charge(const struct ad *ad, size_t n, size_t max, int wr)
{
	if (max == SIZE_MAX || !n)
		return;
	if (wr)
		bufferevent_decrement_write_limit(ad->bev, (ev_ssize_t)n);
	else
		bufferevent_decrement_read_limit(ad->bev, (ev_ssize_t)n);
}

/* ---- receiving ---- */

/*
 * Move received bytes from the transport into @p dst (the bufferevent's
 * input), at most @p limit (-1: no limit) and what the rate limit lets
 * through. The bytes moved, or -1.
 */
static ev_ssize_t
ad_move_in(struct ad *ad, struct evbuffer *dst, ev_ssize_t limit)
{
	struct evbuffer *in = tp_in(ad);
	size_t n = evbuffer_get_length(in), max;

	if (limit >= 0 && n > (size_t)limit)
		n = (size_t)limit;
	if (!n)
		return 0;
	max = ad_rate_max(ad, 0);
	if (n > max)
		n = max;
	if (n > INT_MAX)
		n = INT_MAX;
	if (n == 0)
		return 0;
	if (evbuffer_remove_buffer(in, dst, n) < 0)
		return -1;
	ad_charge(ad, n, max, 0);
	return (ev_ssize_t)n;
}

/* The input filter: received bytes, from the transport (src is u's
 * input: at most the doorbell's bytes). ad_deliver() moves them itself
 * (ad_take()); libevent runs this one on a flush by the user. */
static enum bufferevent_filter_result
ad_in(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t limit,
    enum bufferevent_flush_mode mode, void *arg)
{
	struct ad *ad = arg;
	ev_ssize_t n;

	if (evbuffer_get_length(src))
		evbuffer_drain(src, evbuffer_get_length(src));
	if (!ad_live(ad) || (!ad->ch && !ad->sock))
		return BEV_NEED_MORE;
	n = ad_move_in(ad, dst, mode == BEV_NORMAL ? limit : -1);
	return n < 0 ? BEV_ERROR : n ? BEV_OK : BEV_NEED_MORE;
}

/* Room in the bufferevent's input @p dst below its read high watermark
 * (SIZE_MAX: none set), as libevent's filter path reckons it. */
static size_t
ad_read_room(const struct bufferevent *bev, const struct evbuffer *dst)
{
	size_t len;

	if (!bev->wm_read.high)
		return SIZE_MAX;
	len = evbuffer_get_length(dst);
	return len < bev->wm_read.high ? bev->wm_read.high - len : 0;
}

/* Bytes arrived in the bufferevent's input: its read timeout starts
 * again, as a socket's read does. */
static void
ad_read_restart(struct bufferevent *bev)
{
	if (evutil_timerisset(&bev->timeout_read))
		event_add(&bev->ev_read, &bev->timeout_read);
}

/*
 * What libevent's input filter path does for a flush of EV_READ in
 * BEV_NORMAL mode (be_filter_process_input()), without its cost: up to
 * the read high watermark, through ad_move_in(); then the read timeout
 * restarts. u's input holds nothing to drain here (ad_probe() takes the
 * token back), and a flush of u (a pair) in BEV_NORMAL does nothing.
 * Called once ad_probe() said the bufferevent reads. The bytes moved.
 */
static size_t
ad_take(struct ad *ad, struct bufferevent *bev, struct evbuffer *dst)
{
	size_t room = ad_read_room(bev, dst);
	ev_ssize_t n;

	if (!(bev->enabled & EV_READ) || !room)
		return 0;
	n = ad_move_in(ad, dst, room > EV_SSIZE_MAX ? -1 : (ev_ssize_t)room);
	if (n <= 0)
		return 0;
	ad_read_restart(bev);
	return (size_t)n;
}

/* The reading end, once every received byte is in the bufferevent's
 * input: reading stops and the event callback hears it, as a socket's
 * read of 0 (or of an error) does. */
static void
ad_read_end(struct ad *ad)
{
	struct bufferevent *bev = ad->bev;	/* ad_deliver()'s, held */

	ad->rd_end_done = 1;
	bufferevent_disable(bev, EV_READ);
	evrdma__log(EVRDMA_LOG_DEBUG, "bufferevent %p: %s", (void *)bev,
	    ad->rd_end & BEV_EVENT_EOF ? "end of stream" :
	    evrdma_reason_str(ad->error));
	/* errno as a socket's read leaves it (libevent keeps it across a
	 * deferred callback) */
	if (ad->rd_end & BEV_EVENT_ERROR)
		errno = ad->err ? ad->err : ECONNRESET;
	bufferevent_trigger_event(bev, ad->rd_end, 0);
}

/*
 * Move what the transport received into the bufferevent while it reads,
 * with its read callback after each move (libevent's input filter path),
 * then the reading end. What it does not take waits in the transport's
 * input, which holds the peer back once it reaches its high watermark
 * (the channel's credits, TCP's window), and the doorbell brings us back.
 */
static void
ad_deliver(struct ad *ad)
{
	struct bufferevent *bev = ad_live(ad);

	if (!bev || ad->delivering)
		return;
	ad->delivering = 1;
	bufferevent_incref(bev);
	while (ad->ch || ad->sock) {
		size_t have = evbuffer_get_length(tp_in(ad));

		if (!have && (!ad->rd_end || ad->rd_end_done))
			break;
		if (!ad_probe(ad))
			break;		/* the doorbell brings us back */
		if (!have) {
			if (ad->rd_end && !ad->rd_end_done)
				ad_read_end(ad);
			break;
		}
		if (!ad_take(ad, bev, bufferevent_get_input(bev)))
			break;		/* nothing taken (a rate limit) */
		bufferevent_trigger(bev, EV_READ, 0);
	}
	bufferevent_decref(bev);
	ad->delivering = 0;
}

/* ---- sending ---- */

/* Arm the write timeout if it is set and not running: output waits. */
static void
ad_arm_write_timeout(struct ad *ad)
{
	struct bufferevent *bev = ad_live(ad);

	if (bev && evutil_timerisset(&bev->timeout_write) &&
	    (bufferevent_get_enabled(bev) & EV_WRITE) &&
	    !event_pending(&bev->ev_write, EV_TIMEOUT, NULL))
		event_add(&bev->ev_write, &bev->timeout_write);
}

/* The read timeout, as a socket has it: not while reading is held (at
 * the high watermark, by a rate limit, a stacked filter). libevent's
 * filter re-arms it after a read that reached the high watermark, once
 * reading was already suspended: such a timeout is not one. */
static void
ad_read_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct bufferevent *bev = arg;
	struct ad *ad = ad_of(bev);

	if (!ad || !(bufferevent_get_enabled(bev) & EV_READ) ||
	    !ad_probe(ad))
		return;
	bufferevent_incref(bev);
	bufferevent_disable(bev, EV_READ);
	bufferevent_trigger_event(bev, BEV_EVENT_TIMEOUT | BEV_EVENT_READING,
	    0);
	bufferevent_decref(bev);
}

/* The write timeout, as a socket has it: only while output waits. */
static void
ad_write_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct bufferevent *bev = arg;
	struct ad *ad = ad_of(bev);

	if (!ad || !(bufferevent_get_enabled(bev) & EV_WRITE))
		return;
	if (!evbuffer_get_length(bufferevent_get_output(bev)) &&
	    ad->state != AD_CONNECTING)
		return;		/* nothing waits: not a timeout */
	bufferevent_incref(bev);
	bufferevent_disable(bev, EV_WRITE);
	bufferevent_trigger_event(bev, BEV_EVENT_TIMEOUT | BEV_EVENT_WRITING,
	    0);
	bufferevent_decref(bev);
}

/*
 * Take over the filter's timeout events: libevent 2.1 re-arms the write
 * timeout after every write and on every enable, also with nothing left
 * to write (libevent#67), and the read timeout after a read that
 * suspended reading at the high watermark; as they are it would report
 * timeouts a socket does not. The events stay the bufferevent's (libevent
 * still adds, deletes and finalizes them); only their callbacks are ours,
 * and they report a timeout only where a socket would. Their argument
 * stays the bufferevent: libevent's finalizer takes it from there.
 */
static void
ad_take_timeouts(struct ad *ad)
{
	struct bufferevent *bev = ad->bev;	/* just made */

	event_assign(&bev->ev_read, bufferevent_get_base(bev), -1,
	    EV_FINALIZE, ad_read_timeout, bev);
	event_assign(&bev->ev_write, bufferevent_get_base(bev), -1,
	    EV_FINALIZE, ad_write_timeout, bev);
}

/* Look, backing off, for output held while EV_WRITE was off (or by a rate
 * limit) to be able to go again: libevent 2.1's filter does not pass an
 * enable of EV_WRITE on (libevent PR 613). */
static void
ad_resume_start(struct ad *ad)
{
	struct timeval tv = { 0, 1000 };

	if (evtimer_pending(ad->resume, NULL))
		return;
	ad->resume_ms = 1;
	evtimer_add(ad->resume, &tv);
}

/* The connection is over and output holds bytes: they cannot go. */
static void
ad_write_end(struct ad *ad)
{
	struct bufferevent *bev = ad_live(ad);

	if (!bev || !ad->gone || ad->wr_end_done ||
	    !evbuffer_get_length(bufferevent_get_output(bev)) ||
	    !(bufferevent_get_enabled(bev) & EV_WRITE))
		return;
	ad->wr_end_done = 1;
	if (!ad->error)
		ad->error = EVRDMA_REASON_DISCONNECTED;
	bufferevent_incref(bev);
	bufferevent_disable(bev, EV_WRITE);
	errno = ad->err && ad->err != ECONNRESET ? ad->err : EPIPE;
	bufferevent_trigger_event(bev, BEV_EVENT_ERROR | BEV_EVENT_WRITING, 0);
	bufferevent_decref(bev);
}

/*
 * After the output filter, what a socket bufferevent does after a write:
 * the write timeout restarts when bytes went and stops when none are left,
 * and the write callback runs once output is at its low watermark, from
 * the loop when the bytes came from the user's write (a socket's never
 * runs inside bufferevent_write()).
 */
static void
ad_wrote(struct ad *ad, size_t moved)
{
	struct bufferevent *bev = ad_live(ad);
	size_t left;

	if (!bev)
		return;
	left = evbuffer_get_length(bufferevent_get_output(bev));
	if (!moved) {
		if (left)
			ad_arm_write_timeout(ad);
		return;
	}
	/* event_del() of an event not pending costs ~80 instructions, and
	 * bufferevent_trigger() without a write callback ~100: this runs on
	 * every write, so ask the struct first (bufferevent_struct.h) */
	if (!left) {
		if (AD_EV_FLAGS(&bev->ev_write) & (EVLIST_TIMEOUT | EVLIST_ACTIVE |
		    EVLIST_ACTIVE_LATER))
			event_del(&bev->ev_write);
	} else if (evutil_timerisset(&bev->timeout_write) &&
	    (bev->enabled & EV_WRITE))
		event_add(&bev->ev_write, &bev->timeout_write);
	if (bev->writecb)
		bufferevent_trigger(bev, EV_WRITE, ad->moving ==
		    AD_MOVE_PULL ? 0 : BEV_TRIG_DEFER_CALLBACKS);
}

/* What the transport takes beyond the @p have bytes it holds. */
static size_t
ad_room(const struct ad *ad, size_t have)
{
	return have < ad->cap ? ad->cap - have : 0;
}

/*
 * A small write straight into the channel (evrdma_channel_write()) rather
 * than through the channel's output evbuffer: from a read callback (the
 * channel's pass runs it) the bytes are copied into a send slot at once,
 * the channel's fast path, and spare two evbuffers' moves and callbacks.
 * Only bytes that are contiguous already (no pullup copy), and fewer than
 * AD_DIRECT_MAX: larger ones move as chains, and are cut into messages as
 * output's bytes are. 0 when they went, -1 to move them as usual.
 */
static int
ad_direct(struct ad *ad, struct evbuffer *src, size_t n)
{
	unsigned char *p;

	if (!ad->ch || n >= AD_DIRECT_MAX ||
	    (size_t)evbuffer_get_contiguous_space(src) < n)
		return -1;
	p = evbuffer_pullup(src, (ev_ssize_t)n);
	if (!p || evrdma_channel_write(ad->ch, p, n) < 0)
		return -1;
	evbuffer_drain(src, n);
	return 0;
}

/*
 * The output filter: written bytes, into the transport up to its cap
 * (everything for BEV_FLUSH and BEV_FINISHED). It always answers
 * BEV_NEED_MORE, so that libevent neither re-arms the write timeout nor
 * calls the write callback from inside the user's write (ad_wrote() does
 * both as a socket would).
 */
static enum bufferevent_filter_result
ad_out(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t limit,
    enum bufferevent_flush_mode mode, void *arg)
{
	struct ad *ad = arg;
	struct evbuffer *out;
	size_t n, have, max;

	if (!ad->bev)
		return BEV_NEED_MORE;
	if (ad->state != AD_UP) {
		/* output waits while connecting, as a socket's does */
		if (mode == BEV_FINISHED)
			ad->finish_due = 1;
		ad_wrote(ad, 0);
		return BEV_NEED_MORE;
	}
	if (ad->gone || ad->shut) {
		/* the error comes from the loop, as a socket's would */
		if (ad->gone)
			event_active(ad->work, EV_TIMEOUT, 1);
		return BEV_NEED_MORE;
	}
	out = tp_out(ad);
	n = evbuffer_get_length(src);
	have = evbuffer_get_length(out);
	/*
	 * A burst: the transport has not sent the last write yet (a channel
	 * sends at the end of the loop iteration). The rest gathers in
	 * output, as a socket's waits for its fd, and moves in one go later
	 * in this iteration: moved one write at a time, streaming 64-byte
	 * writes ran at 0.14x a TCP bufferevent's rate. The first write of
	 * a burst still moves at once (a ping-pong's only write), and so
	 * does output of AD_GATHER_MAX or more: large writes lose nothing
	 * to a move each (gathered, 64 KiB writes streamed at 0.68x the
	 * channel's rate, against 0.94x moved at once).
	 */
	if (mode == BEV_NORMAL && !ad->moving && have &&
	    n < AD_GATHER_MAX) {
		if (!ad->move_due) {
			ad->move_due = 1;
			event_active(ad->move, EV_TIMEOUT, 1);
		}
		return BEV_NEED_MORE;
	}
	if (mode == BEV_NORMAL && n > ad_room(ad, have))
		n = ad_room(ad, have);
	max = ad_rate_max(ad, 1);
	if (n > max)
		n = max;
	if (n > INT_MAX)
		n = INT_MAX;
	if (n) {
		if (ad_direct(ad, src, n) < 0 &&
		    evbuffer_remove_buffer(src, out, n) < 0)
			return BEV_ERROR;
		ad_charge(ad, n, max, 1);
	} else if (evbuffer_get_length(src) && mode == BEV_NORMAL &&
	    have < ad->cap) {
		ad_resume_start(ad);	/* held by the rate limit */
	}
	if (mode != BEV_NORMAL && !evbuffer_get_length(src)) {
		if (mode == BEV_FINISHED)
			tp_shutdown(ad);
		else if (ad->ch)
			evrdma_channel_flush(ad->ch);
	}
	ad_wrote(ad, n);
	return BEV_NEED_MORE;
}

/*
 * Move what output holds into the transport, from the loop: AD_MOVE_PULL,
 * the transport has room again or the connection is up (the write
 * callback may run at once); AD_MOVE_BURST, a burst gathered by ad_out()
 * (the write callback is deferred, as for the writes themselves: a write
 * callback that writes must not recurse).
 */
static void
ad_move_out(struct ad *ad, enum ad_move why)
{
	struct bufferevent *bev = ad_live(ad);

	if (!bev || ad->state != AD_UP ||
	    !evbuffer_get_length(bufferevent_get_output(bev)))
		return;
	if (!(bufferevent_get_enabled(bev) & EV_WRITE)) {
		ad_resume_start(ad);
		return;
	}
	bufferevent_incref(bev);
	ad->moving = (uint8_t)why;
	bufferevent_flush(bev, EV_WRITE, BEV_NORMAL);
	ad->moving = AD_MOVE_NONE;
	bufferevent_decref(bev);
}

static void
ad_pull(struct ad *ad)
{
	ad_move_out(ad, AD_MOVE_PULL);
}

static void
ad_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ad *ad = arg;
	struct bufferevent *bev = ad_live(ad);
	struct timeval tv;
	size_t before;

	if (!bev || ad->state != AD_UP || ad->gone)
		return;
	before = evbuffer_get_length(bufferevent_get_output(bev));
	if (!before)
		return;
	if (bufferevent_get_enabled(bev) & EV_WRITE) {
		ad_pull(ad);
		/* it went, or waits for the transport's room (its write
		 * callback pulls then) */
		if (evbuffer_get_length(bufferevent_get_output(bev)) < before ||
		    evbuffer_get_length(tp_out(ad)) >= ad->cap)
			return;
	}
	if (ad->resume_ms < RESUME_MS_MAX)
		ad->resume_ms *= 2;
	tv.tv_sec = 0;
	tv.tv_usec = (suseconds_t)ad->resume_ms * 1000;
	evtimer_add(ad->resume, &tv);
}

/* A burst's gathered output (ad_out()). */
static void
ad_move_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ad *ad = arg;

	ad->move_due = 0;
	ad_move_out(ad, AD_MOVE_BURST);
}

/* Written to after the connection ended, or a check the loop should make
 * rather than the code that asked for it. */
static void
ad_work_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ad *ad = arg;

	ad_write_end(ad);
	ad_deliver(ad);
}

/*
 * A write that ad_out() would move straight into the channel, moved here
 * instead: this callback runs before the filter's own on the same output
 * (libevent runs an evbuffer's callbacks newest first), which then finds
 * output empty and does not run the output filter. That spares its
 * reference, its callback flags and the filter's checks, about 150
 * instructions per write. Anything else (output waiting in the channel,
 * a rate limit, a large or scattered write, writing off) is left to
 * ad_out(), unchanged. 0 when the bytes went.
 */
static int
ad_write_now(struct ad *ad, struct bufferevent *bev, struct evbuffer *src)
{
	size_t n;

	if (!ad->ch || ad->state != AD_UP || ad->gone || ad->shut ||
	    ad->moving || !(bev->enabled & EV_WRITE))
		return -1;
	n = evbuffer_get_length(src);
	if (!n || n > ad->cap || evbuffer_get_length(tp_out(ad)) ||
	    ad_rate_max(ad, 1) != SIZE_MAX || ad_direct(ad, src, n) < 0)
		return -1;
	ad_wrote(ad, n);
	return 0;
}

/* Output grew: a small write goes at once (ad_write_now()); while it
 * cannot go, watch for EV_WRITE, or end it. */
static void
ad_output_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct ad *ad = arg;
	struct bufferevent *bev;

	if (!info->n_added || !(bev = ad_live(ad)))
		return;
	if (ad_write_now(ad, bev, buf) == 0)
		return;
	if (ad->gone)
		event_active(ad->work, EV_TIMEOUT, 1);
	else if (ad->state == AD_UP &&
	    !(bufferevent_get_enabled(bev) & EV_WRITE))
		ad_resume_start(ad);
}

/* ---- connecting ---- */

static void
ad_connected(struct ad *ad)
{
	struct bufferevent *bev = ad_live(ad);

	ad->state = AD_UP;
	if (!bev)
		return;
	evrdma__log(EVRDMA_LOG_DEBUG, "bufferevent %p: connected over %s",
	    (void *)bev, ad->transport == EVRDMA_TRANSPORT_RDMA ? "RDMA" :
	    "TCP");
	bufferevent_incref(bev);
	bufferevent_trigger_event(bev, BEV_EVENT_CONNECTED, 0);
	ad_pull(ad);
	if (ad->finish_due) {
		ad->finish_due = 0;
		bufferevent_flush(bev, EV_WRITE, BEV_FINISHED);
	}
	ad_deliver(ad);
	bufferevent_decref(bev);
}

/* The connect failed: over TCP now, or the user hears it. */
static void
ad_connect_failed(struct ad *ad, int reason, int err)
{
	struct bufferevent *bev = ad_live(ad);

	if (ad->ch && ad->fallback && reason != EVRDMA_REASON_DNS) {
		evrdma__log(EVRDMA_LOG_INFO, "bufferevent %p: the RDMA connect "
		    "failed (%s): connecting over TCP", (void *)bev,
		    evrdma_reason_str(reason));
		if (ad_tcp_start(ad) == 0)
			return;
		reason = EVRDMA_REASON_CONNECT_ERROR;
		err = errno;
	}
	ad->state = AD_FAILED;
	ad->error = reason;
	evrdma__log(EVRDMA_LOG_INFO, "bufferevent %p: connect failed: %s",
	    (void *)bev, evrdma_reason_str(reason));
	if (bev) {
		errno = err;
		bufferevent_trigger_event(bev, BEV_EVENT_ERROR, 0);
	}
}

/* What the transport reports (the BEV_EVENT_* flags of either kind). */
static void
ad_tp_event(struct ad *ad, short what, int reason, int err)
{
	if (what & BEV_EVENT_CONNECTED) {
		ad_connected(ad);
		return;
	}
	if (ad->state == AD_CONNECTING) {
		ad_connect_failed(ad, reason, err);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT)
		return;		/* the transport has no timeouts set */
	if ((what & BEV_EVENT_READING) && !ad->rd_end)
		ad->rd_end = (what & BEV_EVENT_EOF) ?
		    BEV_EVENT_EOF | BEV_EVENT_READING :
		    BEV_EVENT_ERROR | BEV_EVENT_READING;
	if ((what & BEV_EVENT_ERROR) ||
	    (what & (BEV_EVENT_EOF | BEV_EVENT_WRITING)) ==
	    (BEV_EVENT_EOF | BEV_EVENT_WRITING)) {
		ad->gone = 1;
		if (!ad->error)
			ad->error = reason ? reason :
			    EVRDMA_REASON_DISCONNECTED;
		if (!ad->err)
			ad->err = err ? err : evrdma__reason_errno(ad->error);
	}
	ad_deliver(ad);
	ad_write_end(ad);
}

static void
tp_ch_read(struct evrdma_channel *ch, void *arg)
{
	ad_deliver(arg);
}

/*
 * The channel's sink (evrdma__chan_set_sink()): a small arrival, while
 * the channel's input is empty, is copied straight into the bufferevent's
 * input when the bufferevent reads, has room below its read high
 * watermark and no rate limit. That spares the channel's input, the move
 * out of it (ad_take()) and the channel's read callback: about 500
 * instructions per message, a fifth of the adapter's cost. Anything else
 * is declined and goes the usual way (tp_ch_read()).
 */
static int
tp_ch_take(void *arg, const void *p, size_t len)
{
	struct ad *ad = arg;
	struct bufferevent *bev = ad_live(ad);
	struct evbuffer *in;

	if (!bev || ad->delivering || ad->rd_end ||
	    !(bev->enabled & EV_READ) || !ad_probe(ad) ||
	    ad_rate_max(ad, 0) != SIZE_MAX)
		return 0;
	in = bufferevent_get_input(bev);
	if (ad_read_room(bev, in) < len)
		return 0;
	return evbuffer_add(in, p, len) == 0;
}

/* What tp_ch_take() took: the read timeout restarts and the read
 * callback runs, as after ad_take(). */
static void
tp_ch_taken(void *arg)
{
	struct ad *ad = arg;
	struct bufferevent *bev = ad_live(ad);

	if (!bev)
		return;
	ad_read_restart(bev);
	/* no reference of ours: bufferevent_trigger() holds one around the
	 * callback, and nothing here touches bev after it (a free by the
	 * user reaches ad only later, from the loop: ad_user_freed()) */
	ad->delivering = 1;
	bufferevent_trigger(bev, EV_READ, 0);
	ad->delivering = 0;
}

static const struct evrdma__chan_sink tp_ch_sink = {
	.take = tp_ch_take,
	.taken = tp_ch_taken,
};

static void
tp_ch_write(struct evrdma_channel *ch, void *arg)
{
	ad_pull(arg);
}

static void
tp_ch_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct ad *ad = arg;

	ad->dns_error = ch->dns_error;
	ad_tp_event(ad, what, evrdma_channel_get_error(ch),
	    (what & BEV_EVENT_ERROR) ? errno : 0);
}

static void
tp_sock_read(struct bufferevent *sock, void *arg)
{
	ad_deliver(arg);
}

static void
tp_sock_write(struct bufferevent *sock, void *arg)
{
	struct ad *ad = arg;

	if (ad->shut_due && !evbuffer_get_length(bufferevent_get_output(sock))) {
		ad->shut_due = 0;
		shutdown(bufferevent_getfd(sock), SHUT_WR);
		bufferevent_setwatermark(sock, EV_WRITE, ad->cap / 2, 0);
	}
	ad_pull(ad);
}

static void
tp_sock_event(struct bufferevent *sock, short what, void *arg)
{
	struct ad *ad = arg;
	int err = EVUTIL_SOCKET_ERROR(), one = 1;

	if (what & BEV_EVENT_CONNECTED)
		(void)setsockopt(bufferevent_getfd(sock), IPPROTO_TCP,
		    TCP_NODELAY, &one, sizeof(one));
	ad_tp_event(ad, what, ad->state == AD_CONNECTING ?
	    EVRDMA_REASON_CONNECT_ERROR : EVRDMA_REASON_DISCONNECTED, err);
}

/* The fallback resolved the host again (evrdma's resolver). */
static void
ad_resolved(int err, const struct sockaddr *sa, int socklen, void *arg)
{
	struct ad *ad = arg;

	ad->resolving = NULL;
	ad->dns_error = err;
	if (!err && bufferevent_socket_connect(ad->sock, sa, socklen) == 0)
		return;
	ad_connect_failed(ad, err ? EVRDMA_REASON_DNS :
	    EVRDMA_REASON_CONNECT_ERROR, err ? 0 : EVUTIL_SOCKET_ERROR());
}

static void
ad_attach_sock(struct ad *ad, struct bufferevent *sock)
{
	ad->sock = sock;
	ad->transport = EVRDMA_TRANSPORT_TCP;
	ad->cap = SOCK_CAP;
	bufferevent_setcb(sock, tp_sock_read, tp_sock_write, tp_sock_event,
	    ad);
	bufferevent_setwatermark(sock, EV_WRITE, ad->cap / 2, 0);
	bufferevent_setwatermark(sock, EV_READ, 0, ad->cap);
	bufferevent_enable(sock, EV_READ);
}

/*
 * Go over TCP: a socket bufferevent replaces the channel (freed: it never
 * connected) and connects to the same address, or resolves the host again.
 * 0, or -1 with errno.
 */
static int
ad_tcp_start(struct ad *ad)
{
	struct bufferevent *sock;

	sock = bufferevent_socket_new(ad->eb, -1, BEV_OPT_CLOSE_ON_FREE);
	if (!sock)
		return evrdma__fail(ENOMEM, "bufferevent: out of memory");
	if (ad->ch) {
		evrdma_channel_free(ad->ch);
		ad->ch = NULL;
	}
	ad_attach_sock(ad, sock);
	if (ad->host) {
		if (!ad->base)
			return evrdma__fail(EPIPE, "bufferevent: base freed");
		ad->resolving = evrdma__resolve(ad->base, ad->dns, ad->family,
		    ad->host, ad->port, ad_resolved, ad);
		return ad->resolving ? 0 : -1;
	}
	if (bufferevent_socket_connect(sock, (struct sockaddr *)&ad->sa,
	    ad->salen) < 0)
		return evrdma__fail(errno ? errno : ECONNREFUSED, "bufferevent: "
		    "TCP connect: %s", strerror(errno ? errno : ECONNREFUSED));
	return 0;
}

/* ---- closing ---- */

static void
ad_linger_done(struct ad *ad)
{
	if (ad->ch) {
		evrdma_channel_free(ad->ch);
	} else if (ad->sock) {
		if (ad->reset_due) {
			struct linger lg = { 1, 0 };	/* a reset */

			(void)setsockopt(bufferevent_getfd(ad->sock),
			    SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		}
		bufferevent_free(ad->sock);
	}
	ad->ch = NULL;
	ad->sock = NULL;
	ad_destroy(ad);
}

static void
ad_linger_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct ad *ad = arg;
	size_t left = evbuffer_get_length(tp_out(ad));
	struct timeval tv;

	if (left && left < ad->linger_left) {
		/* it moves: wait on, another teardown timeout */
		ad->linger_left = left;
		tv.tv_sec = ad->teardown_ms / 1000;
		tv.tv_usec = (suseconds_t)(ad->teardown_ms % 1000) * 1000;
		evtimer_add(ad->linger, &tv);
		return;
	}
	if (left)
		evrdma__log(EVRDMA_LOG_INFO, "bufferevent closed with %zu "
		    "bytes the peer did not take", left);
	ad_linger_done(ad);
}

/* Closing over TCP: received bytes mean the peer still sends to a closed
 * end (a socket answers with a reset), output drained means done, any end
 * is. (A channel closes by itself: evrdma_channel_free() of a channel
 * whose output is taken sends it first.) */
static void
linger_sock_read(struct bufferevent *sock, void *arg)
{
	struct ad *ad = arg;

	ad->reset_due = 1;
	ad_linger_done(ad);
}

static void
linger_sock_write(struct bufferevent *sock, void *arg)
{
	struct ad *ad = arg;

	if (!evbuffer_get_length(bufferevent_get_output(sock))) {
		if (ad->shut_due && !ad->reset_due)
			shutdown(bufferevent_getfd(sock), SHUT_WR);
		ad_linger_done(ad);
	}
}

static void
linger_sock_event(struct bufferevent *sock, short what, void *arg)
{
	ad_linger_done(arg);
}

/*
 * The user freed the bufferevent: end the connection as closing a socket
 * does. What the transport took (it passed the write callback) is sent
 * first, as a kernel sends what the socket accepted; then the end: a
 * reset when received bytes were never taken (the peer sees an error),
 * else EOF. A channel does all that itself; over TCP the adapter waits
 * while the socket's output drains, as long as it drains, up to the
 * teardown timeout without progress.
 */
static void
ad_close(struct ad *ad)
{
	struct timeval tv;

	if (ad->sock)
		ad->reset_due = evbuffer_get_length(tp_in(ad)) > 0;
	ad->linger_left = ad->sock ? evbuffer_get_length(tp_out(ad)) : 0;
	if (!ad->sock || ad->state != AD_UP || ad->gone || !ad->linger_left ||
	    !ad->base) {
		ad_linger_done(ad);
		return;
	}
	bufferevent_setcb(ad->sock, linger_sock_read, linger_sock_write,
	    linger_sock_event, ad);
	bufferevent_setwatermark(ad->sock, EV_WRITE, 0, 0);
	bufferevent_enable(ad->sock, EV_READ | EV_WRITE);
	tv.tv_sec = ad->teardown_ms / 1000;
	tv.tv_usec = (suseconds_t)(ad->teardown_ms % 1000) * 1000;
	evtimer_add(ad->linger, &tv);
}

/* bufferevent_free() by the user, once libevent is done with it (its
 * free-context hook): u goes with it, d with us. */
static void
ad_user_freed(void *arg)
{
	struct ad *ad = arg;

	/* a burst still gathered goes as it would have gone write by
	 * write: up to the transport's cap */
	if (ad->move_due && ad->state == AD_UP && !ad->gone && !ad->shut) {
		struct evbuffer *src = bufferevent_get_output(ad->bev);
		size_t room = ad_room(ad, evbuffer_get_length(tp_out(ad)));
		size_t n = evbuffer_get_length(src);

		if (n > room)
			n = room;
		if (n)
			evbuffer_remove_buffer(src, tp_out(ad), n);
	}
	event_del(ad->move);
	ad->move_due = 0;
	ad->bev = NULL;
	ad->u = NULL;
	if (ad->d)
		bufferevent_free(ad->d);
	ad->d = NULL;
	event_del(ad->resume);
	event_del(ad->work);
	if (ad->resolving) {
		evrdma__resolve_cancel(ad->resolving);
		ad->resolving = NULL;
	}
	ad_close(ad);
}

static void
ad_destroy(struct ad *ad)
{
	if (ad->on_base) {
		LIST_REMOVE(&ad->hook, link);
		ad->base->stats.bevs--;
	}
	ad->magic = 0;
	if (ad->resolving)
		evrdma__resolve_cancel(ad->resolving);
	if (ad->work)
		event_free(ad->work);
	if (ad->move)
		event_free(ad->move);
	if (ad->resume)
		event_free(ad->resume);
	if (ad->linger)
		event_free(ad->linger);
	if (ad->tok)
		evbuffer_free(ad->tok);
	free(ad->host);
	free(ad);
}

/*
 * evrdma_base_free(): a closing adapter is finished now, without waiting;
 * a live one loses its base (its channel becomes a husk, which reports
 * nothing more; no fallback and no resolution are possible).
 */
static void
ad_base_gone(struct evrdma__hook *c)
{
	struct ad *ad = (struct ad *)((char *)c - offsetof(struct ad, hook));

	ad->on_base = 0;
	ad->base->stats.bevs--;
	ad->base = NULL;
	if (ad->resolving) {
		evrdma__resolve_cancel(ad->resolving);
		ad->resolving = NULL;
	}
	if (!ad->bev)
		ad_linger_done(ad);
}

/* ---- making one ---- */

static void
ad_attach_channel(struct ad *ad, struct evrdma_channel *ch)
{
	const struct evrdma_config *cfg = &ad->base->cfg;

	ad->ch = ch;
	ad->transport = EVRDMA_TRANSPORT_RDMA;
	ad->cap = (size_t)cfg->ch_slots * cfg->ch_slot_size;
	evrdma_channel_setcb(ch, tp_ch_read, tp_ch_write, tp_ch_event, ad);
	(void)evrdma__chan_set_sink(ch, &tp_ch_sink, ad);	/* a stream */
	/* what moved into the channel passed the write callback: a free
	 * sends it, as a kernel sends what a socket accepted */
	evrdma__chan_output_taken(ch);
	evrdma_channel_setwatermark(ch, EV_WRITE, ad->cap / 2, 0);
	/* the receive buffer: what the bufferevent does not take waits in
	 * input up to this mark, then in the ring, holding the peer back */
	evrdma_channel_setwatermark(ch, EV_READ, 0, ad->cap);
	evrdma_channel_enable(ch, EV_READ);
}

/* The adapter without its transport; NULL with errno. */
static struct ad *
ad_new(struct evrdma_base *base, int options)
{
	struct timeval never = { AD_U_TIMEOUT_S, 0 };
	struct bufferevent *pair[2] = { NULL, NULL };
	struct ad *ad = calloc(1, sizeof(*ad));

	if (!ad) {
		evrdma__fail(ENOMEM, "bufferevent: out of memory");
		return NULL;
	}
	ad->magic = AD_MAGIC;
	ad->base = base;
	ad->eb = base->eb;
	ad->teardown_ms = base->cfg.timeout_ms[EVRDMA_TIMEOUT_TEARDOWN];
	ad->tok = evbuffer_new();
	ad->work = event_new(ad->eb, -1, 0, ad_work_cb, ad);
	ad->move = event_new(ad->eb, -1, 0, ad_move_cb, ad);
	ad->resume = evtimer_new(ad->eb, ad_resume_cb, ad);
	ad->linger = evtimer_new(ad->eb, ad_linger_timeout, ad);
	if (!ad->tok || !ad->work || !ad->move || !ad->resume || !ad->linger ||
	    evbuffer_add(ad->tok, "", 1) < 0 ||
	    bufferevent_pair_new(ad->eb, options & BEV_OPT_THREADSAFE,
	    pair) < 0)
		goto fail;
	ad->u = pair[0];
	ad->d = pair[1];
	ad->bev = bufferevent_filter_new(ad->u, ad_in, ad_out,
	    options | BEV_OPT_CLOSE_ON_FREE, ad_user_freed, ad);
	if (!ad->bev)
		goto fail;
	/* from here on bufferevent_free(ad->bev) frees it all, u too */
	bufferevent_setcb(ad->u, ad_doorbell, NULL, NULL, ad);
	bufferevent_setwatermark(ad->u, EV_READ, 2, 0);
	bufferevent_set_timeouts(ad->u, &never, NULL);
	ad_take_timeouts(ad);
	if (!evbuffer_add_cb(bufferevent_get_output(ad->bev), ad_output_cb,
	    ad)) {
		bufferevent_free(ad->bev);
		evrdma__fail(ENOMEM, "bufferevent: out of memory");
		return NULL;
	}
	(void)ad_probe(ad);	/* EV_READ is off: arms the doorbell */
	ad->hook.base_gone = ad_base_gone;
	LIST_INSERT_HEAD(&base->hooks, &ad->hook, link);
	ad->on_base = 1;
	base->stats.bevs++;
	return ad;
fail:
	if (pair[0])
		bufferevent_free(pair[0]);
	if (pair[1])
		bufferevent_free(pair[1]);
	ad->u = ad->d = NULL;
	ad_destroy(ad);
	evrdma__fail(ENOMEM, "bufferevent: out of memory");
	return NULL;
}

/* An accepted transport (one of @p ch, @p sock) under a new adapter; the
 * transport is freed when that fails. */
static struct bufferevent *
ad_accepted(struct evrdma_base *base, struct evrdma_channel *ch,
    struct bufferevent *sock, int options)
{
	struct ad *ad = ad_new(base, options);

	if (!ad) {
		int err = errno;

		if (ch)
			evrdma_channel_free(ch);
		else
			bufferevent_free(sock);
		errno = err;
		return NULL;
	}
	if (ch)
		ad_attach_channel(ad, ch);
	else
		ad_attach_sock(ad, sock);
	ad->state = AD_UP;
	return ad->bev;
}

struct bufferevent *
evrdma__bev_accepted(struct evrdma_base *base, struct evrdma_channel *ch,
    int options)
{
	return ad_accepted(base, ch, NULL, options);
}

struct bufferevent *
evrdma__bev_accepted_tcp(struct evrdma_base *base, struct bufferevent *sock,
    int options)
{
	return ad_accepted(base, NULL, sock, options);
}

struct bufferevent *
evrdma_bufferevent_new(struct evrdma_base *base, int options)
{
	struct evrdma_channel *ch = NULL;
	struct bufferevent *bev;
	struct ad *ad;

	if (!base || (options & ~AD_OPTIONS)) {
		evrdma__fail(EINVAL, "evrdma_bufferevent_new: %s",
		    base ? "unknown options" : "no base");
		return NULL;
	}
	if (base->no_rdma && !evrdma__bev_tcp_adapters()) {
		bev = bufferevent_socket_new(base->eb, -1,
		    options | BEV_OPT_CLOSE_ON_FREE);
		if (!bev)
			evrdma__fail(ENOMEM, "bufferevent_socket_new failed");
		return bev;
	}
	if (!base->no_rdma) {
		ch = evrdma_channel_new(base, EVRDMA_CHANNEL_STREAM);
		if (!ch)
			return NULL;
	}
	ad = ad_new(base, options);
	if (!ad) {
		int err = errno;

		evrdma_channel_free(ch);
		errno = err;
		return NULL;
	}
	if (ch) {
		ad_attach_channel(ad, ch);
		ad->fallback = base->cfg.tcp_fallback;
	} else {
		ad->transport = EVRDMA_TRANSPORT_TCP;
		ad->fallback = 1;
	}
	return ad->bev;
}

/* The adapter of @p bev, or NULL: its underlying bufferevent's read
 * callback is our doorbell. */
static struct ad *
ad_of(struct bufferevent *bev)
{
	bufferevent_data_cb rcb = NULL;
	struct bufferevent *u;
	void *arg = NULL;
	struct ad *ad;

	if (!bev || !(u = bufferevent_get_underlying(bev)))
		return NULL;
	bufferevent_getcb(u, &rcb, NULL, NULL, &arg);
	if (rcb != ad_doorbell || !arg)
		return NULL;
	ad = arg;
	return ad->magic == AD_MAGIC && ad->bev == bev ? ad : NULL;
}

/* The adapter under @p bev, looking through stacked bufferevents. */
static struct ad *
ad_below(struct bufferevent *bev)
{
	int depth;

	for (depth = 0; bev && depth < 16; depth++) {
		struct ad *ad = ad_of(bev);

		if (ad)
			return ad;
		bev = bufferevent_get_underlying(bev);
	}
	return NULL;
}

static int
ad_connect_check(struct ad *ad)
{
	if (ad->state != AD_IDLE)
		return evrdma__fail(EISCONN, "evrdma_bufferevent_connect: "
		    "already connecting or connected");
	return 0;
}

int
evrdma_bufferevent_connect(struct bufferevent *bev, const struct sockaddr *sa,
    int socklen)
{
	struct ad *ad = ad_of(bev);

	if (!bev || !sa || socklen <= 0 ||
	    (size_t)socklen > sizeof(struct sockaddr_storage))
		return evrdma__fail(EINVAL, "evrdma_bufferevent_connect: bad "
		    "argument");
	if (!ad)	/* a TCP bufferevent of a base without RDMA */
		return bufferevent_socket_connect(bev, sa, socklen);
	if (ad_connect_check(ad) < 0)
		return -1;
	memcpy(&ad->sa, sa, (size_t)socklen);
	ad->salen = socklen;
	ad->state = AD_CONNECTING;
	if (!ad->ch) {
		if (ad_tcp_start(ad) == 0)
			return 0;
		ad->state = AD_FAILED;
		return -1;
	}
	if (evrdma_channel_connect(ad->ch, sa, socklen) == 0)
		return 0;
	if (ad->fallback && errno != EINVAL && errno != EAFNOSUPPORT) {
		evrdma__log(EVRDMA_LOG_INFO, "bufferevent %p: cannot connect "
		    "over RDMA (%s): connecting over TCP", (void *)bev,
		    evrdma_errmsg());
		if (ad_tcp_start(ad) == 0)
			return 0;
		ad->state = AD_FAILED;
		return -1;
	}
	ad->state = AD_IDLE;
	return -1;
}

/*
 * A socket bufferevent of a base without RDMA: libevent resolves, so that
 * bufferevent_socket_get_dns_error() answers, but never with a NULL
 * evdns_base (a blocking getaddrinfo()): with the base's own. That one
 * waits for ever on a name it must ask a nameserver for when it has
 * none; then an evdns_base of its own, which resolves numeric names and
 * /etc/hosts' at once (as the base's would), is freed with the query
 * still in it, failing it (EVUTIL_EAI_FAIL) from the loop, as evrdma's
 * resolver fails such a query (loop.c).
 */
static int
sock_connect_hostname(struct bufferevent *bev, struct evdns_base *dns,
    int family, const char *host, int port)
{
	struct evrdma_base *base;
	int rc;

	if (dns)
		return bufferevent_socket_connect_hostname(bev, dns, family,
		    host, port);
	if (!(base = evrdma__base_without_rdma_of(bufferevent_get_base(bev))))
		return evrdma__fail(EINVAL, "evrdma_bufferevent_connect_"
		    "hostname: not a bufferevent of an evrdma base");
	if (!(dns = evrdma__base_evdns(base)))
		return -1;
	if (evdns_base_count_nameservers(dns) > 0)
		return bufferevent_socket_connect_hostname(bev, dns, family,
		    host, port);
	if (!(dns = evdns_base_new(base->eb, 0)))
		return evrdma__fail(ENOMEM, "evdns_base_new failed");
	evdns_base_load_hosts(dns, NULL);
	rc = bufferevent_socket_connect_hostname(bev, dns, family, host,
	    port);
	evdns_base_free(dns, 1);
	return rc;
}

int
evrdma_bufferevent_connect_hostname(struct bufferevent *bev,
    struct evdns_base *dns, int family, const char *host, int port)
{
	struct ad *ad = ad_of(bev);

	if (!bev || !host || port < 1 || port > 65535)
		return evrdma__fail(EINVAL, "evrdma_bufferevent_connect_"
		    "hostname: bad argument");
	if (!ad)
		return sock_connect_hostname(bev, dns, family, host, port);
	if (ad_connect_check(ad) < 0)
		return -1;
	free(ad->host);
	if (!(ad->host = strdup(host)))
		return evrdma__fail(ENOMEM, "out of memory");
	ad->dns = dns;
	ad->family = family;
	ad->port = port;
	ad->state = AD_CONNECTING;
	if (!ad->ch) {
		if (ad_tcp_start(ad) == 0)
			return 0;
		ad->state = AD_FAILED;
		return -1;
	}
	if (evrdma_channel_connect_hostname(ad->ch, dns, family, host,
	    port) == 0)
		return 0;
	ad->state = AD_IDLE;
	return -1;
}

int
evrdma_bufferevent_set_srq(struct bufferevent *bev, struct evrdma_srq *srq)
{
	struct ad *ad = ad_of(bev);

	if (!ad || !ad->ch)
		return evrdma__fail(EINVAL, "evrdma_bufferevent_set_srq: not "
		    "an RDMA bufferevent");
	if (ad->state != AD_IDLE)
		return evrdma__fail(EINVAL, "evrdma_bufferevent_set_srq: "
		    "already connecting or connected");
	return evrdma_channel_set_srq(ad->ch, srq);
}

int
evrdma_bufferevent_get_error(struct bufferevent *bev)
{
	struct ad *ad = ad_below(bev);

	return ad ? ad->error : EVRDMA_REASON_NONE;
}

int
evrdma_bufferevent_get_dns_error(struct bufferevent *bev)
{
	struct ad *ad = ad_below(bev);
	struct bufferevent *u;

	if (ad)
		return ad->dns_error;
	/* a socket's, under what is stacked on it */
	while (bev && (u = bufferevent_get_underlying(bev)))
		bev = u;
	return bev ? bufferevent_socket_get_dns_error(bev) : 0;
}

int
evrdma_bufferevent_get_stats(struct bufferevent *bev,
    struct evrdma_channel_stats *out, size_t outlen)
{
	struct evrdma_channel_stats st;
	struct ad *ad;
	evutil_socket_t fd;

	if (!bev)
		return evrdma__fail(EINVAL, "evrdma_bufferevent_get_stats: no "
		    "bufferevent");
	ad = ad_below(bev);
	if (ad && ad->ch)
		return evrdma_channel_get_stats(ad->ch, out, outlen);
	memset(&st, 0, sizeof(st));
	fd = ad ? (ad->sock ? bufferevent_getfd(ad->sock) : -1) :
	    bufferevent_getfd(bev);
	if (ad && fd < 0) {
		/* not yet connected, or its transport gone */
		st.transport = ad->transport;
		st.state = ad->state == AD_UP || ad->state == AD_FAILED ?
		    EVRDMA_CHANNEL_ENDED : EVRDMA_CHANNEL_CONNECTING;
	} else if (fd < 0) {
		return evrdma__fail(EINVAL, "evrdma_bufferevent_get_stats: "
		    "neither an evrdma nor a socket bufferevent");
	} else if (evrdma__tcp_stats(fd, &st) < 0) {
		return -1;
	}
	return evrdma__stats_out(out, outlen, &st, sizeof(st), sizeof(st));
}

int
evrdma_bufferevent_get_transport(struct bufferevent *bev)
{
	struct ad *ad;

	if (!bev)
		return EVRDMA_TRANSPORT_NONE;
	ad = ad_below(bev);
	return ad ? ad->transport : EVRDMA_TRANSPORT_TCP;
}
