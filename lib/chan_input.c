/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel's input: where what arrived goes, each pass. The
 * transport hands over a batch of pieces (chan.h, the receive seam); here
 * each goes to the receive callback or the sink while input is empty, or
 * into input, copied or by reference, as far as the mode and the read
 * high watermark let it; then the read callback. The transport keeps its
 * buffers and their credits, and learns only how much was taken.
 */

#include "config.h"

#include "chan.h"

/* One piece into input: @p take bytes of @p pc, copied or by reference.
 * 0 taken; 1 held back (its buffer may not be referenced now, nor copied);
 * -1 refused by input. */
static int
input_take(struct evrdma_channel *ch, struct evrdma__chan_batch *b,
    struct evrdma__chan_piece *pc, const uint8_t *p, size_t have,
    size_t room, size_t take)
{
	/* (once the connection is over there is no peer to hold back: what
	 * arrived goes in, as far as the watermark lets. Within small_max of
	 * the read high watermark a piece is copied even past copy_max:
	 * input never passes the mark, so that costs at most small_max
	 * more, and a reader that frees a few bytes at a time gets them, as
	 * from a socket, without a reference per piece into one buffer) */
	int gone = (ch->end & CHE_GONE) != 0;
	int copy_ok = gone || have + take <= b->copy_max ||
	    room < b->small_max;
	int ref_ok = gone || b->ref_room > 0;

	if ((take < b->small_max || !ref_ok) && copy_ok)
		return evrdma__chan_input_add(ch, p, take, NULL, NULL) < 0 ?
		    -1 : 0;
	if (!ref_ok)
		return 1;	/* held in its buffer: the peer waits */
	/* counted before the add: the application's own evbuffer callback,
	 * run inside it, may take the chain out, and its cleanup run,
	 * before it returns (found by review) */
	if (b->ref_take(b->tp, pc->ref_arg) && b->ref_room)
		b->ref_room--;
	if (evrdma__chan_input_add(ch, p, take, b->ref_cleanup,
	    pc->ref_arg) < 0) {
		b->ref_undo(b->tp, pc->ref_arg);
		return -1;
	}
	return 0;
}

void
evrdma__chan_deliver(struct evrdma_channel *ch, struct evrdma__chan_batch *b)
{
	/* input's length, kept here: only we add to it in this loop */
	size_t have = evbuffer_get_length(ch->input);
	int moved = 0, held = 0, refused = 0;
	unsigned i = 0;

	b->done = 0;
	b->fail = 0;
	while (i < b->n && evrdma__chan_reading(ch)) {
		struct evrdma__chan_piece *pc = &b->v[i];
		size_t len = pc->len - pc->took, room, take;
		int r;

		if (!have && ch->recvcb) {
			/* zero-copy to the user; the buffer goes back to
			 * the peer as soon as the pass is over */
			pc->took = pc->len;
			b->done = ++i;
			evrdma__chan_recv(ch, pc->p, len);
			if (ch->end & CHE_FREED)
				return;
			/* it may have put bytes in input: what comes next
			 * goes there, behind them. (Asked only when something
			 * comes next or the watermark needs it: nothing was
			 * moved before a callback, which needs input empty,
			 * so input_added() below does not run.) */
			if (i < b->n || ch->rd_hi)
				have = evbuffer_get_length(ch->input);
			continue;
		}
		if (!have && len < b->small_max && ch->sink &&
		    ch->sink->take(ch->sink_arg, pc->p + pc->took, len)) {
			/* copied by the adapter: its slot goes back with the
			 * pass, and its credit with the reply the read
			 * callback writes (the pass sends after us) */
			pc->took = pc->len;
			b->done = ++i;
			evrdma__chan_sunk(ch);
			if (ch->end & CHE_FREED)
				return;
			have = evbuffer_get_length(ch->input);
			continue;
		}
		room = evrdma__chan_room(ch, have);
		take = evrdma__chan_admit(ch, have, room, len);
		if (!take) {
			/* (an application's callback on input, run inside
			 * an add, may have taken bytes: have is then stale,
			 * and holding would wait for a drain already done:
			 * found by review) */
			size_t now = evbuffer_get_length(ch->input);

			if (now < have) {
				have = now;
				continue;
			}
			held = 1;
			break;
		}
		/* (counted taken before the add: an application's callback
		 * on input, run inside it, may free the channel, and what
		 * input has is then read, not lost: evrdma__rx_unread()) */
		pc->took += take;
		if (pc->took == pc->len)
			b->done = i + 1;
		if ((r = input_take(ch, b, pc, pc->p + pc->took - take, have,
		    room, take)) != 0) {
			pc->took -= take;
			b->done = i;
			held = 1;
			refused = r < 0;
			break;
		}
		have += take;
		moved = 1;
		i = b->done;
		/* (else cut at the high watermark: the loop finds no room) */
	}
	/* (the same: the watermark's test needs input's real length) */
	if (moved && ch->rd_hi)
		have = evbuffer_get_length(ch->input);
	/* before the read callback: what it reads may let more in */
	if (evrdma__chan_watch_input(ch, held, have) < 0)
		b->fail = EVRDMA_REASON_RESOURCE;
	if (moved)
		evrdma__chan_input_added(ch, have);
	/* Input refused bytes it had room for: out of memory, or the
	 * application froze its end. A socket bufferevent's read fails
	 * there (BEV_EVENT_ERROR | READING); holding them waited for a
	 * drain that may never come, with the read timeout suspended
	 * (review r44). */
	if (refused && !b->fail)
		b->fail = evrdma__chan_input_refused(ch);
}
