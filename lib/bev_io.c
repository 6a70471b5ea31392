/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the bufferevent adapter's data path (bev_ad.h has the map).
 * Received bytes move from the transport's input into the bufferevent's
 * while it reads (evrdma__ad_deliver(), then the read callback; the input
 * filter only answers the user's flush); written bytes move from the
 * bufferevent's output into the transport's, up to a cap (the channel's
 * ring), when libevent runs the output filter (on every write, and from
 * evrdma__ad_pull() when the transport has room again). What the
 * bufferevent does not take waits in the transport's input, up to its
 * read high watermark, where the peer is held back by the channel's
 * credits (or TCP's window), not by memory here.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bev_ad.h"

/* ---- the transport's end ---- */

/* Our end is finished (BEV_FINISHED): the peer gets EOF after the data. */
static void
tp_shutdown(struct ad *ad)
{
	if (ad->shut || !ad->tp)
		return;
	ad->shut = 1;
	ad->tp->shutdown(ad);
}

/* ---- whether the bufferevent reads: the pair's token ---- */

/*
 * Whether the bufferevent reads now: its EV_READ enabled and reading not
 * suspended by its high watermark, a rate limit or a bufferevent stacked
 * on it. libevent tells only the underlying pair end (u), which then takes
 * what its partner (d) holds. So hand d the token: if u takes it at once,
 * the bufferevent reads (the token comes back). If not, the token waits at
 * d and a second byte joins it; when u reads again it takes both, which
 * reaches its read low watermark of 2 and runs evrdma__ad_doorbell().
 * While the token waits, the answer is no without asking.
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
int
evrdma__ad_probe(struct ad *ad)
{
	struct evbuffer *dout = bufferevent_get_output(ad->d);
	struct evbuffer *uin = bufferevent_get_input(ad->u);

	if (evbuffer_get_length(dout))
		return 0;
	if (evrdma__lev_flags(evrdma__lev_ev_read(ad->u)) & EVLIST_TIMEOUT)
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
void
evrdma__ad_doorbell(struct bufferevent *u, void *arg)
{
	struct ad *ad = arg;
	struct evbuffer *uin = bufferevent_get_input(u);

	evbuffer_drain(uin, evbuffer_get_length(uin));
	if (!evbuffer_get_length(ad->tok))
		evbuffer_add(ad->tok, "", 1);
	evrdma__ad_deliver(ad);
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
 * u's read callback is read from the installed struct (bev_lev.h).
 */
struct bufferevent *
evrdma__ad_live(const struct ad *ad)
{
	if (!ad->bev)
		return NULL;
	return evrdma__lev_readcb_is(ad->u, evrdma__ad_doorbell) ? ad->bev :
	    NULL;
}

/* ---- rate limits: the bufferevent's own bucket ---- */

/* What the bufferevent's rate limit lets move now (@p wr: writing), or
 * SIZE_MAX without a limit: then nothing is charged (ad_charge()), so that
 * the common case asks libevent once per move, not four times. */
size_t
evrdma__ad_rate_max(const struct ad *ad, int wr)
{
	ev_ssize_t max;

	if ((wr ? bufferevent_get_write_limit(ad->bev) :
	    bufferevent_get_read_limit(ad->bev)) == EV_SSIZE_MAX)
		return SIZE_MAX;	/* no limit set */
	max = wr ? bufferevent_get_max_to_write(ad->bev) :
	    bufferevent_get_max_to_read(ad->bev);
	return max > 0 ? (size_t)max : 0;
}

/* @p n bytes moved under a limit of @p max (evrdma__ad_rate_max()). */
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
 * What a read of a socket bufferevent takes at most, and so what one read
 * callback gets here (issue 50: libraries parse a request per read
 * callback): the max single read (bufferevent_set_max_single_read(),
 * 16384 unless set) and, in libevent 2.1, evbuffer_read()'s 4096 bytes.
 */
size_t
evrdma__ad_read_max(const struct ad *ad, struct bufferevent *bev)
{
	size_t max = (size_t)bufferevent_get_max_single_read(bev);

	return max < ad->read_max ? max : ad->read_max;
}

/*
 * Move received bytes from the transport into @p dst (the bufferevent's
 * input), at most @p limit (-1: no limit), one read's worth
 * (evrdma__ad_read_max()) and what the rate limit lets through. The bytes
 * moved, or -1.
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
	max = evrdma__ad_read_max(ad, ad->bev);
	if (n > max)
		n = max;
	max = evrdma__ad_rate_max(ad, 0);
	if (n > max)
		n = max;
	if (n > INT_MAX)
		n = INT_MAX;
	if (n == 0)
		return 0;
	if (ad_move(in, dst, n, 0) < 0)
		return -1;
	ad_charge(ad, n, max, 0);
	return (ev_ssize_t)n;
}

/*
 * The input filter (src is u's input: at most the doorbell's bytes). The
 * adapter moves received bytes itself, with the read callback after each
 * move (evrdma__ad_deliver()); libevent runs this one only on the user's
 * bufferevent_flush(bev, EV_READ, mode), which moves nothing here: a
 * socket bufferevent's does nothing (be_socket_flush()), and bytes moved
 * by a flush would sit in input with no read callback, then or later
 * (the transport's input empty). They wait in the transport until the
 * bufferevent reads, as in a socket's kernel. libevent then flushes u, a
 * pair end, which in BEV_FLUSH and BEV_FINISHED would push the doorbell's
 * token across while the bufferevent does not read, and restart u's read
 * timeout (evrdma__ad_probe() would take that for a yes, and the
 * doorbell would never ring): the token comes back first, and the loop
 * arms the doorbell again.
 */
enum bufferevent_filter_result
evrdma__ad_in(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t limit,
    enum bufferevent_flush_mode mode, void *arg)
{
	struct ad *ad = arg;
	struct evbuffer *dout;

	if (evbuffer_get_length(src))
		evbuffer_drain(src, evbuffer_get_length(src));
	if (mode == BEV_NORMAL || !evrdma__ad_live(ad) ||
	    !evbuffer_get_length(dout = bufferevent_get_output(ad->d)))
		return BEV_NEED_MORE;
	/* (a pair end's output is frozen at its front: only the pair moves
	 * its bytes on) */
	evbuffer_unfreeze(dout, 1);
	evbuffer_drain(dout, evbuffer_get_length(dout));
	evbuffer_freeze(dout, 1);
	if (!evbuffer_get_length(ad->tok))
		evbuffer_add(ad->tok, "", 1);
	event_active(ad->work, EV_TIMEOUT, 1);
	return BEV_NEED_MORE;
}

/* Room in the bufferevent's input @p dst below its read high watermark
 * (SIZE_MAX: none set), as libevent's filter path reckons it. */
size_t
evrdma__ad_read_room(const struct bufferevent *bev, const struct evbuffer *dst)
{
	size_t hi = evrdma__lev_rd_high(bev), len;

	if (!hi)
		return SIZE_MAX;
	len = evbuffer_get_length(dst);
	return len < hi ? hi - len : 0;
}

/* Bytes arrived in the bufferevent's input: its read timeout starts
 * again, as a socket's read does. */
void
evrdma__ad_read_restart(struct bufferevent *bev)
{
	const struct timeval *tv = evrdma__lev_tv_read(bev);

	if (tv)
		event_add(evrdma__lev_ev_read(bev), tv);
}

/*
 * What libevent's input filter path does for a flush of EV_READ in
 * BEV_NORMAL mode (be_filter_process_input()), without its cost: up to
 * the read high watermark, through ad_move_in(); then the read timeout
 * restarts. u's input holds nothing to drain here (evrdma__ad_probe()
 * takes the token back), and a flush of u (a pair) in BEV_NORMAL does
 * nothing. Called once evrdma__ad_probe() said the bufferevent reads.
 * Returns the bytes moved.
 */
size_t
evrdma__ad_take(struct ad *ad, struct bufferevent *bev, struct evbuffer *dst)
{
	size_t room = evrdma__ad_read_room(bev, dst);
	ev_ssize_t n;

	if (!(evrdma__lev_enabled(bev) & EV_READ) || !room)
		return 0;
	n = ad_move_in(ad, dst, room > EV_SSIZE_MAX ? -1 : (ev_ssize_t)room);
	if (n <= 0)
		return 0;
	evrdma__ad_read_restart(bev);
	return (size_t)n;
}

/*
 * The reading end, once every received byte is in the bufferevent's
 * input: reading stops and the event callback hears it, as a socket's
 * read of 0 (or of an error) does. The end stays readable, as a socket at
 * its end: each enable of EV_READ after it reports it again, from the
 * loop (the doorbell), an error once and EOF after it, as a socket's read
 * fails once and then returns 0 (issue 50: libraries that take an EOF
 * for spurious enable reading again and wait for the next).
 */
static void
ad_read_end(struct ad *ad)
{
	struct bufferevent *bev = ad->bev;	/* the caller holds it */
	short what = ad->rd_end_done ? BEV_EVENT_EOF | BEV_EVENT_READING :
	    ad->rd_end;

	bufferevent_disable(bev, EV_READ);
	if (!ad->rd_end_done)
		evrdma__log(EVRDMA_LOG_DEBUG, "bufferevent %p: %s",
		    (void *)bev, what & BEV_EVENT_EOF ? "end of stream" :
		    evrdma_reason_str(ad->error));
	ad->rd_end_done = 1;
	/* errno as a socket's read leaves it: the error's, or at EOF what
	 * the application left (a read of 0 sets none; libevent keeps it
	 * across a deferred callback) */
	errno = what & BEV_EVENT_ERROR ? (ad->err ? ad->err : ECONNRESET) :
	    evrdma__errno_app(ad->base);
	bufferevent_trigger_event(bev, what, 0);
	evrdma__errno_app_set(ad->base, errno);
	/* enabled again inside the callback: the doorbell rings from the
	 * loop; else it waits for the enable */
	if (evrdma__ad_live(ad) == bev && evrdma__ad_probe(ad))
		bufferevent_trigger(ad->u, EV_READ,
		    BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

/*
 * Move what the transport received into the bufferevent while it reads,
 * with its read callback after each move (libevent's input filter path),
 * then the reading end. What it does not take waits in the transport's
 * input, which holds the peer back once it reaches its high watermark
 * (the channel's credits, TCP's window), and the doorbell brings us back.
 */
void
evrdma__ad_deliver(struct ad *ad)
{
	struct bufferevent *bev = evrdma__ad_live(ad);
	int had_cb;

	/* (a bufferevent without callbacks reads all the same, as a
	 * socket's does: freed by the user but held by a reference, or
	 * handed on with none set; see below) */
	if (!bev || ad->delivering)
		return;
	ad->delivering = 1;
	bufferevent_incref(bev);
	while (ad->tp) {
		size_t have = evbuffer_get_length(tp_in(ad));

		if (!have && !ad->rd_end)
			break;
		if (!evrdma__ad_probe(ad))
			break;		/* the doorbell brings us back */
		if (!have) {
			ad_read_end(ad);
			break;
		}
		if (!evrdma__ad_take(ad, bev, bufferevent_get_input(bev)))
			break;		/* nothing taken (a rate limit) */
		had_cb = !evrdma__lev_no_callbacks(bev);
		bufferevent_trigger(bev, EV_READ, 0);
		/* more than one read took: the next read from the loop, as a
		 * socket's, after what the callback made due there */
		if (evbuffer_get_length(tp_in(ad))) {
			event_active(ad->work, EV_TIMEOUT, 1);
			break;
		}
		/*
		 * A read callback that freed the bufferevent (our reference
		 * keeps it, its callbacks cleared): nothing more goes into
		 * it in this pass, or the free would find the transport's
		 * bytes read and end with EOF, where a socket's kernel keeps
		 * them and resets (review r44). A socket reads once per
		 * loop pass: so does this, from the loop, if the callbacks
		 * were only cleared (evrdma__ad_live() says no once our
		 * reference was the last, review r45).
		 */
		if (had_cb && evrdma__lev_no_callbacks(bev)) {
			event_active(ad->work, EV_TIMEOUT, 1);
			break;
		}
	}
	bufferevent_decref(bev);
	ad->delivering = 0;
}

/* ---- sending ---- */

/* Arm the write timeout if it is set and not running: output waits. */
static void
ad_arm_write_timeout(struct ad *ad)
{
	struct bufferevent *bev = evrdma__ad_live(ad);
	const struct timeval *tv = bev ? evrdma__lev_tv_write(bev) : NULL;

	if (tv && (bufferevent_get_enabled(bev) & EV_WRITE) &&
	    !event_pending(evrdma__lev_ev_write(bev), EV_TIMEOUT, NULL))
		event_add(evrdma__lev_ev_write(bev), tv);
}

/* The read timeout, as a socket has it: not while reading is held (at
 * the high watermark, by a rate limit, a stacked filter). libevent's
 * filter re-arms it after a read that reached the high watermark, once
 * reading was already suspended: such a timeout is not one. */
static void
ad_read_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct bufferevent *bev = arg;
	struct ad *ad = evrdma__ad_of(bev);

	if (!ad || !(bufferevent_get_enabled(bev) & EV_READ) ||
	    !evrdma__ad_probe(ad))
		return;
	bufferevent_incref(bev);
	bufferevent_disable(bev, EV_READ);
	bufferevent_trigger_event(bev, BEV_EVENT_TIMEOUT | BEV_EVENT_READING,
	    0);
	bufferevent_decref(bev);
}

/* The connect's write timeout: its event added with the write timeout,
 * when one is set, anew (@p reset) or if it is not running. */
static void
ad_connect_arm(struct bufferevent *bev, int reset)
{
	const struct timeval *tv = evrdma__lev_tv_write(bev);

	if (tv && (reset || !(evrdma__lev_flags(evrdma__lev_ev_write(bev)) &
	    (EVLIST_TIMEOUT | EVLIST_ACTIVE | EVLIST_ACTIVE_LATER))))
		event_add(evrdma__lev_ev_write(bev), tv);
}

/*
 * The write timeout, as a socket has it: while output waits, and while
 * connecting. A socket's connect adds its write event with the write
 * timeout whatever EV_WRITE, and keeps it until connected (its disable
 * leaves it): BEV_EVENT_TIMEOUT|BEV_EVENT_WRITING then comes every
 * timeout while the connect lasts, EV_WRITE enabled or not.
 */
static void
ad_write_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct bufferevent *bev = arg;
	struct ad *ad = evrdma__ad_of(bev);
	int connecting;

	if (!ad)
		return;
	connecting = ad->state == AD_CONNECTING;
	if (!connecting && (!(bufferevent_get_enabled(bev) & EV_WRITE) ||
	    !evbuffer_get_length(bufferevent_get_output(bev))))
		return;		/* nothing waits: not a timeout */
	bufferevent_incref(bev);
	bufferevent_disable(bev, EV_WRITE);
	bufferevent_trigger_event(bev, BEV_EVENT_TIMEOUT | BEV_EVENT_WRITING,
	    0);
	if (connecting && ad->state == AD_CONNECTING && evrdma__ad_live(ad))
		ad_connect_arm(bev, 1);
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
void
evrdma__ad_take_timeouts(struct ad *ad)
{
	struct bufferevent *bev = ad->bev;	/* just made */

	event_assign(evrdma__lev_ev_read(bev), bufferevent_get_base(bev), -1,
	    EV_FINALIZE, ad_read_timeout, bev);
	event_assign(evrdma__lev_ev_write(bev), bufferevent_get_base(bev), -1,
	    EV_FINALIZE, ad_write_timeout, bev);
}

/* Look, backing off, for output held while EV_WRITE was off (or by a rate
 * limit) to be able to go again: libevent 2.1's filter does not pass an
 * enable of EV_WRITE on (libevent PR 613). While connecting, look after
 * the connect's write timeout (evrdma__ad_connecting()). */
static void
ad_resume_start(struct ad *ad)
{
	struct timeval tv = { 0, 1000 };

	if (evtimer_pending(ad->resume, NULL))
		return;
	ad->resume_ms = 1;
	evtimer_add(ad->resume, &tv);
}

/*
 * The connect started (@p on), or ended: its write timeout, as a socket's
 * connect has it (ad_write_timeout()), from the write timeout set now.
 * libevent's filter deletes the event where a socket's keeps it: on a
 * bufferevent_set_timeouts() with output empty (so also one after the
 * connect), on a disable of EV_WRITE. The resume timer adds it back while
 * connecting, within its back-off (1 to 64 ms). Connected or failed, the
 * event goes, as a socket's write event does then; what output holds
 * starts it again as it moves (ad_wrote()).
 */
void
evrdma__ad_connecting(struct ad *ad, int on)
{
	struct bufferevent *bev = evrdma__ad_live(ad);

	if (!bev || (on && ad->state != AD_CONNECTING))
		return;
	if (!on) {
		event_del(evrdma__lev_ev_write(bev));
		return;
	}
	ad_connect_arm(bev, 1);
	ad_resume_start(ad);
}

/* The connection is over, or our end of it shut down (BEV_FINISHED), and
 * output holds bytes: they cannot go, and a socket's write fails. */
void
evrdma__ad_write_end(struct ad *ad)
{
	struct bufferevent *bev = evrdma__ad_live(ad);

	if (!bev || !(ad->gone || ad->shut) || ad->wr_end_done ||
	    !evbuffer_get_length(bufferevent_get_output(bev)) ||
	    !(bufferevent_get_enabled(bev) & EV_WRITE))
		return;
	ad->wr_end_done = 1;
	if (ad->gone && !ad->error)
		ad->error = EVRDMA_REASON_DISCONNECTED;
	bufferevent_incref(bev);
	bufferevent_disable(bev, EV_WRITE);
	errno = ad->gone && ad->err && ad->err != ECONNRESET ? ad->err :
	    EPIPE;
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
	struct bufferevent *bev = evrdma__ad_live(ad);
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
	 * every write, so ask the struct first (bev_lev.h) */
	if (!left) {
		if (evrdma__lev_flags(evrdma__lev_ev_write(bev)) &
		    (EVLIST_TIMEOUT | EVLIST_ACTIVE | EVLIST_ACTIVE_LATER))
			event_del(evrdma__lev_ev_write(bev));
	} else if (evrdma__lev_tv_write(bev) &&
	    (evrdma__lev_enabled(bev) & EV_WRITE)) {
		event_add(evrdma__lev_ev_write(bev), evrdma__lev_tv_write(bev));
	}
	if (evrdma__lev_has_writecb(bev))
		bufferevent_trigger(bev, EV_WRITE, ad->moving ==
		    AD_MOVE_PULL ? 0 : BEV_TRIG_DEFER_CALLBACKS);
}

/* What the transport takes beyond the @p have bytes it holds. */
size_t
evrdma__ad_room(const struct ad *ad, size_t have)
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

	if (!ad->tp->write || n >= AD_DIRECT_MAX ||
	    (size_t)evbuffer_get_contiguous_space(src) < n)
		return -1;
	p = evbuffer_pullup(src, (ev_ssize_t)n);
	if (!p || ad->tp->write(ad, p, n) < 0)
		return -1;
	/* (a drain that failed would leave the bytes just sent to go
	 * again) */
	ad_drain(src, n);
	return 0;
}

/*
 * The output filter: written bytes, into the transport up to its cap
 * (everything for BEV_FLUSH and BEV_FINISHED). It always answers
 * BEV_NEED_MORE, so that libevent neither re-arms the write timeout nor
 * calls the write callback from inside the user's write (ad_wrote() does
 * both as a socket would).
 */
enum bufferevent_filter_result
evrdma__ad_out(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t limit,
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
		/* the error comes from the loop, as a socket's would
		 * (after a shutdown: EPIPE) */
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
	if (mode == BEV_NORMAL && n > evrdma__ad_room(ad, have))
		n = evrdma__ad_room(ad, have);
	max = evrdma__ad_rate_max(ad, 1);
	if (n > max)
		n = max;
	if (n > INT_MAX)
		n = INT_MAX;
	if (n) {
		if (ad_direct(ad, src, n) < 0 && ad_move(src, out, n, 1) < 0)
			return BEV_ERROR;
		ad_charge(ad, n, max, 1);
	} else if (evbuffer_get_length(src) && (mode != BEV_NORMAL ||
	    have < ad->cap)) {
		ad_resume_start(ad);	/* held by the rate limit */
	}
	/* BEV_FINISHED with bytes the rate limit held: they go as it lets
	 * them (the resume timer, the transport's write callback), then the
	 * end, as without a limit */
	if (mode == BEV_FINISHED)
		ad->finish_due = 1;
	if ((mode != BEV_NORMAL || ad->finish_due) &&
	    !evbuffer_get_length(src)) {
		if (ad->finish_due) {
			ad->finish_due = 0;
			tp_shutdown(ad);
		} else if (ad->tp->flush) {
			ad->tp->flush(ad);
		}
	}
	ad_wrote(ad, n);
	return BEV_NEED_MORE;
}

/*
 * Move what output holds into the transport, from the loop: AD_MOVE_PULL,
 * the transport has room again or the connection is up (the write
 * callback may run at once); AD_MOVE_BURST, a burst gathered by
 * evrdma__ad_out() (the write callback is deferred, as for the writes
 * themselves: a write callback that writes must not recurse).
 */
static void
ad_move_out(struct ad *ad, enum ad_move why)
{
	struct bufferevent *bev = evrdma__ad_live(ad);

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

void
evrdma__ad_pull(struct ad *ad)
{
	ad_move_out(ad, AD_MOVE_PULL);
}

void
evrdma__ad_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ad *ad = arg;
	struct bufferevent *bev = evrdma__ad_live(ad);
	struct timeval tv;
	size_t before;

	if (bev && ad->state == AD_CONNECTING) {
		ad_connect_arm(bev, 0);
		goto again;
	}
	if (!bev || ad->state != AD_UP || ad->gone)
		return;
	before = evbuffer_get_length(bufferevent_get_output(bev));
	if (!before)
		return;
	if (bufferevent_get_enabled(bev) & EV_WRITE) {
		evrdma__ad_pull(ad);
		/* it went, or waits for the transport's room (its write
		 * callback pulls then) */
		if (evbuffer_get_length(bufferevent_get_output(bev)) < before ||
		    evbuffer_get_length(tp_out(ad)) >= ad->cap)
			return;
	}
again:
	if (ad->resume_ms < RESUME_MS_MAX)
		ad->resume_ms *= 2;
	tv.tv_sec = 0;
	tv.tv_usec = (suseconds_t)ad->resume_ms * 1000;
	evtimer_add(ad->resume, &tv);
}

/* A burst's gathered output (evrdma__ad_out()). */
void
evrdma__ad_move_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ad *ad = arg;

	ad->move_due = 0;
	ad_move_out(ad, AD_MOVE_BURST);
}

/* Written to after the connection ended, or a check the loop should make
 * rather than the code that asked for it. */
void
evrdma__ad_work_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ad *ad = arg;

	evrdma__ad_write_end(ad);
	evrdma__ad_deliver(ad);
}

/*
 * A write that evrdma__ad_out() would move straight into the channel, moved
 * here instead: this callback runs before the filter's own on the same
 * output (libevent runs an evbuffer's callbacks newest first), which then
 * finds output empty and does not run the output filter. That spares its
 * reference, its callback flags and the filter's checks, about 150
 * instructions per write. Anything else (output waiting in the channel, a
 * rate limit, a large or scattered write, writing off) is left to
 * evrdma__ad_out(), unchanged. 0 when the bytes went.
 */
static int
ad_write_now(struct ad *ad, struct bufferevent *bev, struct evbuffer *src)
{
	size_t n;

	if (!ad->tp || !ad->tp->write || ad->state != AD_UP || ad->gone ||
	    ad->shut || ad->finish_due ||
	    ad->moving || !(evrdma__lev_enabled(bev) & EV_WRITE))
		return -1;
	n = evbuffer_get_length(src);
	if (!n || n > ad->cap || evbuffer_get_length(tp_out(ad)) ||
	    evrdma__ad_rate_max(ad, 1) != SIZE_MAX || ad_direct(ad, src, n) < 0)
		return -1;
	ad_wrote(ad, n);
	return 0;
}

/* Output grew: a small write goes at once (ad_write_now()); while it
 * cannot go, watch for EV_WRITE, or end it. */
void
evrdma__ad_output_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct ad *ad = arg;
	struct bufferevent *bev;

	if (!info->n_added || !(bev = evrdma__ad_live(ad)))
		return;
	if (ad_write_now(ad, bev, buf) == 0)
		return;
	if (ad->gone || ad->shut)
		event_active(ad->work, EV_TIMEOUT, 1);
	else if (ad->state == AD_UP &&
	    !(bufferevent_get_enabled(bev) & EV_WRITE))
		ad_resume_start(ad);
}


/* The adapter of @p bev, or NULL: its underlying bufferevent's read
 * callback is our doorbell. */
struct ad *
evrdma__ad_of(struct bufferevent *bev)
{
	bufferevent_data_cb rcb = NULL;
	struct bufferevent *u;
	void *arg = NULL;
	struct ad *ad;

	if (!bev || !(u = bufferevent_get_underlying(bev)))
		return NULL;
	bufferevent_getcb(u, &rcb, NULL, NULL, &arg);
	if (rcb != evrdma__ad_doorbell || !arg)
		return NULL;
	ad = arg;
	return ad->magic == AD_MAGIC && ad->bev == bev ? ad : NULL;
}
