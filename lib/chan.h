/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: channels, private. A channel is the bufferevent's semantics
 * (chan.c: input and output, watermarks, enable/disable, timeouts, EOF,
 * shutdown and the end of the stream, message boundaries, one reference
 * count) over a transport that only moves bytes (chan_rdma.c), plugged in
 * through struct evrdma__chan_ops, as libevent's bufferevent.c is over
 * bufferevent_sock.c. The transport embeds struct evrdma_channel first and
 * calls the evrdma__chan_* functions below to tell the semantics what
 * happened; the semantics call the transport only through the ops.
 *
 * Uses libevent's evbuffer API, which is the channel's own API.
 */
#ifndef EVRDMA_CHAN_H_INCLUDED_
#define EVRDMA_CHAN_H_INCLUDED_

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <evrdma/channel.h>
#include "evrdma-internal.h"
#include "lenq.h"

struct evrdma__chan_ops {
	/* Something the transport acts on changed (output grew, input has
	 * room again, a direction was enabled, a watermark moved, shutdown):
	 * run a pass soon, from the loop. */
	void (*kick)(struct evrdma_channel *ch);
	/* Send what output holds now, without calling the user. */
	int (*flush)(struct evrdma_channel *ch);
	/* The user freed the channel: finish what was sent, tell the peer,
	 * release the transport, and drop the transport's reference. */
	void (*close)(struct evrdma_channel *ch);
	/* End the connection at once (the user broke a rule). */
	void (*abort)(struct evrdma_channel *ch, int reason);
	int (*connect)(struct evrdma_channel *ch, const struct sockaddr *sa,
	    int socklen);
	int (*connect_hostname)(struct evrdma_channel *ch,
	    struct evdns_base *dns, int family, const char *host, int port);
	/* A write the transport takes by a faster road than output: 0, or
	 * -1 when it goes to output (the semantics then add it there), or
	 * -2 when memory ran out part of the way (errno set; what was taken
	 * before is sent, the caller reports the failure). */
	int (*write)(struct evrdma_channel *ch, const void *data, size_t len);
	void *(*reserve)(struct evrdma_channel *ch, size_t len);
	int (*commit)(struct evrdma_channel *ch, size_t len);
	size_t (*max_message)(struct evrdma_channel *ch);
	/* evrdma_base_free() while the user still holds the channel: let go
	 * of the base (evrdma__chan_orphan()), unless a connection that
	 * base_free releases next does that. No callback. */
	void (*base_gone)(struct evrdma_channel *ch);
	/* The process exits with the channel still the user's: end its
	 * connection as a free would, without waiting (no callback). */
	void (*exiting)(struct evrdma_channel *ch);
	/* What the connection carried (all of @p st, zeroed before). */
	void (*stats)(struct evrdma_channel *ch,
	    struct evrdma_channel_stats *st);
	/* The last reference went: free the transport and the memory. */
	void (*destruct)(struct evrdma_channel *ch);
};

/* struct evrdma_channel's end bits */
#define CHE_FREED	0x01	/* the user's handle is gone */
#define CHE_PEER_EOF	0x02	/* the transport: the peer shut down in
				 * order */
#define CHE_PEER_RESET	0x04	/* ... or reset the connection (it was
				 * freed with bytes it never read) */
#define CHE_GONE	0x08	/* the transport: the connection is over */
#define CHE_RD_ENDED	0x10	/* the user was told: EOF or ERROR|READING */
#define CHE_WR_ENDED	0x20	/* ... ERROR|WRITING or the whole end */

/*
 * A change to output that output's callback must not take for a new
 * message of the application's: the channel's own (bytes leaving for the
 * wire, put back, discarded), or a message write whose length the channel
 * queued before making it. libevent runs output's callbacks after each
 * change, and those may change output again, nested: the callback knows
 * the change by its exact info (the first that matches takes the mark),
 * and whatever else happened inside it is the application's.
 */
struct evrdma__chan_own {
	size_t orig, added, deleted;	/* the evbuffer_cb_info expected */
	uint8_t set;
	uint8_t kick;			/* a write: the transport sends it */
};

struct evrdma_channel {
	const struct evrdma__chan_ops *ops;
	struct evrdma_base *base;	/* NULL: a husk (base freed) */
	/* on base->hooks while linked: evrdma_base_free() must reach a
	 * channel the user still holds after its connection ended */
	struct evrdma__hook hook;
	uint8_t hooked;
	unsigned refcnt;		/* the user, the transport, passes */
	int mode;
	struct evbuffer *input;
	struct evbuffer *output;
	/* output's length, kept by output's callback, which every change
	 * of output calls (evbuffer_get_length() costs a call and a lock,
	 * 13 instructions, five times a round trip) */
	size_t out_len;
	/* input's callback, registered only while input's room holds the
	 * transport back (evrdma__chan_watch_input): a registered one costs
	 * each evbuffer operation on input some 80 instructions */
	/* input's drains watched (ch_input_cb): found by its function and
	 * argument, not kept as an entry, which evbuffer_setcb() would free
	 * under us (review r44) */
	uint8_t in_watch;
	evrdma_channel_data_cb readcb, writecb;
	evrdma_channel_event_cb eventcb;
	evrdma_channel_recv_cb recvcb;
	void *cbarg;
	/* the bufferevent adapter's sink (evrdma__chan_set_sink()) */
	const struct evrdma__chan_sink *sink;
	void *sink_arg;
	short enabled;
	size_t rd_lo, rd_hi, wr_lo, wr_hi;
	struct timeval tv_read, tv_write;
	uint8_t has_tv_read, has_tv_write;
	struct event *rd_timer, *wr_timer;
	struct evrdma__lenq in_msgs, out_msgs;
	struct evrdma__chan_own out_own;	/* set around such a change */
	uint8_t connected;		/* CONNECTED happened (or accepted) */
	uint8_t shut_wr;		/* evrdma_channel_shutdown() */
	uint8_t rd_held;		/* input full: reading suspended */
	uint8_t rd_wait;		/* the transport holds bytes for
					 * input's room: the read timeout
					 * suspended */
	uint8_t write_kick;		/* EV_WRITE enabled: a write callback */
	uint8_t in_read_cb;		/* inside the read or receive callback */
	/* output holds bytes the user was told are written (the bufferevent
	 * adapter's channel: they passed its write callback); a free sends
	 * them instead of discarding them, as a kernel sends what a socket
	 * accepted */
	uint8_t out_taken;
	/* How the channel ends, CHE_* bits in one word: what the transport
	 * reported, what the user was told, the user's free. Zero in the
	 * steady state, so a pass asks one question (chan.c sets them all;
	 * the transport only reads them). */
	uint8_t end;
	int gone_reason;
	int error;			/* evrdma_channel_get_error() */
	int dns_error;			/* EVUTIL_EAI_* of a failed lookup */
};

/* ---- set-up and lifetime (chan.c) ---- */
int evrdma__chan_init(struct evrdma_channel *ch, struct evrdma_base *base,
    const struct evrdma__chan_ops *ops, int mode);

static inline void
evrdma__chan_ref(struct evrdma_channel *ch)
{
	ch->refcnt++;
}

void evrdma__chan_fini(struct evrdma_channel *ch);
/* The last reference went: ops->destruct(), which calls chan_fini()
 * once the evbuffers' cleanups can no longer reach the transport (the
 * transport frees its part around ours). (Inline: the writes in
 * chan_output.c hold a reference, and call nothing of chan.c.) */
static inline void
evrdma__chan_release(struct evrdma_channel *ch)
{
	ch->ops->destruct(ch);
}

static inline void
evrdma__chan_unref(struct evrdma_channel *ch)
{
	if (--ch->refcnt == 0)
		evrdma__chan_release(ch);
}

/* The base is going: timers go, the channel stays as a closed husk. */
void evrdma__chan_orphan(struct evrdma_channel *ch);

/*
 * ---- what the transport reads of the channel, through these alone ----
 * (tools/check-owners: a transport reads no field of the channel; these
 * are what it may know, inline)
 */
static inline const struct evrdma__chan_ops *
evrdma__chan_ops(const struct evrdma_channel *ch)
{
	return ch->ops;
}
/* NULL: a husk (the base was freed) */
static inline struct evrdma_base *
evrdma__chan_base(const struct evrdma_channel *ch)
{
	return ch->base;
}
/* How it ends: CHE_* bits (0 in the steady state). */
static inline unsigned
evrdma__chan_end(const struct evrdma_channel *ch)
{
	return ch->end;
}
static inline int
evrdma__chan_peer_eof_seen(const struct evrdma_channel *ch)
{
	return (ch->end & CHE_PEER_EOF) != 0;
}
/* Output's length (kept by output's callback: no call into libevent). */
static inline size_t
evrdma__chan_out_len(const struct evrdma_channel *ch)
{
	return ch->out_len;
}
/* Output, for the transport's look at its front (evbuffer_peek()): its
 * changes go through evrdma__chan_output_*() below. */
static inline struct evbuffer *
evrdma__chan_output(const struct evrdma_channel *ch)
{
	return ch->output;
}
static inline size_t
evrdma__chan_input_len(const struct evrdma_channel *ch)
{
	return evbuffer_get_length(ch->input);
}
/* Output holds bytes its user was told are written (the adapter's). */
static inline int
evrdma__chan_out_taken(const struct evrdma_channel *ch)
{
	return ch->out_taken;
}
/* evrdma_channel_shutdown() was called. */
static inline int
evrdma__chan_shut_wr(const struct evrdma_channel *ch)
{
	return ch->shut_wr;
}
/* Writing is enabled (output may go). */
static inline int
evrdma__chan_writing(const struct evrdma_channel *ch)
{
	return (ch->enabled & EV_WRITE) != 0;
}
/* Why the connection went (EVRDMA_REASON_*), once it did. */
static inline int
evrdma__chan_gone_reason(const struct evrdma_channel *ch)
{
	return ch->gone_reason;
}

/* ---- what the transport tells the semantics ---- */

static inline int
evrdma__chan_reading(const struct evrdma_channel *ch)
{
	return (ch->enabled & EV_READ) && !(ch->end & CHE_FREED);
}

/*
 * How many bytes input takes now: none while reading is disabled, up to
 * the read high watermark when one is set (bufferevent reads at most that
 * much), else any.
 */
static inline size_t
evrdma__chan_room(const struct evrdma_channel *ch, size_t have)
{
	if (!evrdma__chan_reading(ch))
		return 0;
	if (!ch->rd_hi)
		return (size_t)-1;
	return have >= ch->rd_hi ? 0 : ch->rd_hi - have;
}
/* How much of an arrival of @p len bytes input takes now, with @p have in
 * it and @p room (evrdma__chan_room()) left: in message mode all or
 * nothing, whole messages, and one even past the mark when input is empty
 * (it could never enter otherwise); in stream mode up to the room. */
static inline size_t
evrdma__chan_admit(const struct evrdma_channel *ch, size_t have,
    size_t room, size_t len)
{
	if (ch->mode == EVRDMA_CHANNEL_MESSAGE)
		return (len <= room || !have) && room ? len : 0;
	return len < room ? len : room;
}

/* The connection is up: CONNECTED (active side). */
void evrdma__chan_connected(struct evrdma_channel *ch);
/* The connection could not be made: ERROR, once. */
void evrdma__chan_connect_failed(struct evrdma_channel *ch, int reason);
/* The transport put bytes into input (@p have: input's length now). */
void evrdma__chan_input_added(struct evrdma_channel *ch, size_t have);
/* The transport could not move all it has into input (@p held) or can
 * again: watch input's drains only while it cannot (@p have: input's
 * length now). */
int evrdma__chan_watch_input_any(struct evrdma_channel *ch, int held,
    size_t have);
static inline int
evrdma__chan_watch_input(struct evrdma_channel *ch, int held, size_t have)
{
	/* (inline: every delivery asks, and in steady state, with no read
	 * high watermark and nothing held, there is nothing to do) */
	if (!held && !ch->rd_hi && !ch->rd_held && !ch->in_watch)
		return 0;
	return evrdma__chan_watch_input_any(ch, held, have);
}
/*
 * A sink: a consumer inside the library (the bufferevent adapter) that
 * takes small arrivals straight from their receive slot while input is
 * empty, as the receive callback does, but may decline one (it then goes
 * to input as usual). take() copies the bytes and answers 1, or 0 to
 * decline; it runs no user code. taken() comes once the slot went back,
 * and may run user callbacks (the read callback). Stream mode only.
 */
struct evrdma__chan_sink {
	int (*take)(void *arg, const void *p, size_t len);
	void (*taken)(void *arg);
};
/* The receive callback is set (arrivals go to it while input is empty). */
static inline int
evrdma__chan_has_recvcb(const struct evrdma_channel *ch)
{
	return ch->recvcb != NULL;
}
/* Offer @p len arrived bytes at @p p to the sink, if there is one: 1 when
 * it took (copied) them. */
static inline int
evrdma__chan_sink_take(const struct evrdma_channel *ch, const void *p,
    size_t len)
{
	return ch->sink && ch->sink->take(ch->sink_arg, p, len);
}
/* A read high watermark is set (input's length then matters each pass). */
static inline int
evrdma__chan_rd_capped(const struct evrdma_channel *ch)
{
	return ch->rd_hi != 0;
}
/*
 * ---- the receive seam (chan_input.c) ----
 * Each pass, the transport hands over what arrived, in order: a batch of
 * pieces, each the bytes of one arrival that input does not have yet,
 * and the argument of a release handle (the batch's ref_cleanup) for a
 * reference into it. The channel decides where each goes (the receive
 * callback, the sink, input by copy or by reference), as the mode and the
 * watermarks allow, and says how much of each it took; the transport then
 * lets go of what was taken whole (unless input still refers to it).
 */
struct evrdma__chan_piece {
	const uint8_t *p;		/* the bytes input does not have */
	size_t len;
	void *ref_arg;			/* ref_cleanup()'s for a reference */
	size_t took;			/* out: of which the channel took */
};
struct evrdma__chan_batch {
	struct evrdma__chan_piece *v;
	unsigned n;
	/* the transport's limits: a piece under small_max is copied (and
	 * one may go to the sink); input copies while it stays within
	 * copy_max; references while ref_room buffers more may be held */
	size_t small_max, copy_max;
	unsigned ref_room;
	/* a reference into a piece: ref_take() before it is added (1 when
	 * the piece's buffer had none: one less of ref_room), ref_undo()
	 * when input refused it, ref_cleanup() when input lets it go */
	void *tp;
	int (*ref_take)(void *tp, void *ref_arg);
	void (*ref_undo)(void *tp, void *ref_arg);
	evbuffer_ref_cleanup_cb ref_cleanup;
	/* out */
	unsigned done;			/* pieces taken whole, from the first */
	int fail;			/* the reason the connection must end
					 * for (EVRDMA_REASON_*), or 0 */
};
/* Deliver @p b (then the read callback). The channel may be freed inside:
 * the transport applies b->done and the next piece's took, and looks at
 * nothing else of the channel's when evrdma__chan_end() says CHE_FREED. */
void evrdma__chan_deliver(struct evrdma_channel *ch,
    struct evrdma__chan_batch *b);

/* Output holds bytes its user was told are written (the adapter's): a
 * free sends them before the end, instead of discarding them. */
void evrdma__chan_output_taken(struct evrdma_channel *ch);
/* Set (or with NULL clear) @p ch's sink. -1 (EINVAL) in message mode. */
int evrdma__chan_set_sink(struct evrdma_channel *ch,
    const struct evrdma__chan_sink *sink, void *arg);
/* A sink took an arrival and its slot went back: the read timeout counts
 * from it, then the sink's taken(). */
void evrdma__chan_sunk(struct evrdma_channel *ch);
/* Hand @p len bytes to the receive callback (input is empty). */
void evrdma__chan_recv(struct evrdma_channel *ch, const void *p, size_t len);
/* After the transport's sends of a pass: the write timeout and the write
 * callback (@p sent: it took bytes from output). */
void evrdma__chan_sent(struct evrdma_channel *ch, int sent);
/* Report the end of the stream if it is due (see chan.c); @p waiting:
 * received bytes the transport holds that input has not taken. */
void evrdma__chan_check_end(struct evrdma_channel *ch, int waiting);
/* Call the event callback (with a reference held). */
void evrdma__chan_event(struct evrdma_channel *ch, short what);

/*
 * ---- what the transport changes, through these alone ----
 * The transport reads the channel but writes none of its fields
 * (tools/check-layering): message framing, output's ownership, input's
 * and output's bookkeeping and the record of the end stay here, so that
 * another transport would reuse them as they are.
 */

/* A message channel: each piece the transport moves is one message. */
static inline int
evrdma__chan_messages(const struct evrdma_channel *ch)
{
	return ch->mode == EVRDMA_CHANNEL_MESSAGE;
}
/* The length of what goes next from output: its next message (message
 * mode; it may exceed @p chunk: the caller refuses it), else up to
 * @p chunk bytes. 0: output is empty. */
static inline size_t
evrdma__chan_output_next(const struct evrdma_channel *ch, size_t chunk)
{
	if (evrdma__chan_messages(ch))
		return evrdma__lenq_front(&ch->out_msgs);
	return ch->out_len < chunk ? ch->out_len : chunk;
}
/* Output's callback did not see a change the channel made (chan_output.c):
 * the channel ends (EVRDMA_REASON_MISUSE). -1. */
int evrdma__chan_output_unseen(struct evrdma_channel *ch);
/* @p n bytes from output's front leave for the wire (one message in
 * message mode): copied to @p dst, or with @p dst NULL dropped, as they
 * already lie in a send slot. Output's callback does not count them as
 * the user's change. 0; or -1 when output's callback did not see them go
 * (the application froze output's front, deferred or replaced its
 * callbacks): output still holds them, or its length is unknown, so the
 * channel ends (MISUSE) and the caller must not send them. */
/* (inline: once per message sent) */
static inline int
evrdma__chan_output_took(struct evrdma_channel *ch, void *dst, size_t n)
{
	struct evrdma__chan_own was = ch->out_own;
	int unseen;

	/* (in message mode every byte of output is in a queued length:
	 * their sum is output's length, without a call into libevent) */
	ch->out_own.orig = evrdma__chan_messages(ch) ? ch->out_msgs.bytes :
	    ch->out_len;
	ch->out_own.added = 0;
	ch->out_own.deleted = n;
	ch->out_own.set = 1;
	ch->out_own.kick = 0;
	if (dst)
		evbuffer_remove(ch->output, dst, n);
	else
		evbuffer_drain(ch->output, n);
	/* (libevent runs output's callbacks inside the drain, ours last:
	 * it has cleared the mark, whatever an application's callback did
	 * there) */
	unseen = ch->out_own.set;
	ch->out_own = was;
	if (unseen)
		return evrdma__chan_output_unseen(ch);
	if (evrdma__chan_messages(ch))
		evrdma__lenq_pop(&ch->out_msgs);
	return 0;
}

/* 0, or -1 with an error: the user's handle is gone, or this is a
 * forked child (its parent's channel's buffers are not even mapped here,
 * rdma_sym.c). */
static inline int
evrdma__chan_live(const struct evrdma_channel *ch)
{
	if (!ch || (ch->end & CHE_FREED))
		return evrdma__fail(EINVAL, "no channel");
	if (evrdma__forked)
		return evrdma__fail(EPERM, "a forked child cannot use its "
		    "parent's channels");
	return 0;
}
/* Output's callback, registered first (chan_output.c). */
void evrdma__chan_output_cb(struct evbuffer *buf,
    const struct evbuffer_cb_info *info, void *arg);
/* @p len bytes join output for the application: copied from @p data, or
 * with @p cleanup by reference (a write the transport staged in a send
 * slot; @p cleanup(data, len, arg) when output lets them go); one
 * message in message mode. 0, or -1 with output unchanged (out of
 * memory). The transport adds to output through this alone, so that a
 * message written inside the addition keeps its place. */
int evrdma__chan_output_put(struct evrdma_channel *ch, const void *data,
    size_t len, evbuffer_ref_cleanup_cb cleanup, void *arg);
/* Output's bytes are discarded, unsent (a free before the connection is
 * up, the process exits): as bufferevent_free() does; it takes no more. */
void evrdma__chan_output_discard(struct evrdma_channel *ch);
/* @p b's @p len bytes (one message in message mode) go back in front of
 * output. 0, or -1 (out of memory). @p b may keep them on failure. */
int evrdma__chan_output_unget(struct evrdma_channel *ch, struct evbuffer *b,
    size_t len);
/* Input refused an arrival it had room for: the log says why, and the
 * reason the channel ends with is returned (MISUSE: the application
 * froze input's end; RESOURCE: out of memory). */
int evrdma__chan_input_refused(struct evrdma_channel *ch);
/* Lengths are queued over bytes that left input other than by
 * evrdma_channel_read_message() (chan.c). */
void evrdma__chan_input_lost(struct evrdma_channel *ch);
/* @p len bytes that arrived join input (one message in message mode):
 * copied, or with @p cleanup by reference (@p cleanup(p, len, arg) when
 * input lets them go). 0, or -1 with input unchanged (out of memory, or
 * input frozen). */
/* (inline: once per arrival) */
static inline int
evrdma__chan_input_add(struct evrdma_channel *ch, const void *p, size_t len,
    evbuffer_ref_cleanup_cb cleanup, void *arg)
{
	int msg = evrdma__chan_messages(ch);

	/* The length first: an application's callback on input runs inside
	 * the addition, and may read the message there (review r44). A
	 * queue whose lengths no longer match input (drained directly)
	 * starts again, or it would grow for ever (r44); in the steady
	 * state every message was read and it is empty. */
	if (msg) {
		if (ch->in_msgs.bytes &&
		    ch->in_msgs.bytes != evbuffer_get_length(ch->input))
			evrdma__chan_input_lost(ch);
		if (evrdma__lenq_push(&ch->in_msgs, len) < 0)
			return -1;
	}
	if (cleanup ? evbuffer_add_reference(ch->input, p, len, cleanup,
	    arg) : evbuffer_add(ch->input, p, len)) {
		if (msg)
			(void)evrdma__lenq_pop_back(&ch->in_msgs);
		return -1;
	}
	return 0;
}

/* The peer ended its side in order (EOF), with @p reset when it freed
 * its channel with our bytes unread. */
void evrdma__chan_peer_eof(struct evrdma_channel *ch, int reset);
/* ... no orderly end after all: it broke the protocol, or data was lost
 * with the connection. */
void evrdma__chan_peer_eof_void(struct evrdma_channel *ch);
/* Why the connection ends, unless a reason is known already (@p dns:
 * the EVUTIL_EAI_* of a failed lookup, with EVRDMA_REASON_DNS). */
void evrdma__chan_end_reason(struct evrdma_channel *ch, int reason,
    int dns);
/* The connection is over: nothing more arrives, nothing more can be
 * sent (the end is reported once input has what arrived). */
void evrdma__chan_gone(struct evrdma_channel *ch);
/* A listener's channel, not yet the user's, is up (the accept callback
 * follows). */
void evrdma__chan_accepted(struct evrdma_channel *ch);
/* A listener's channel whose connection ended before the user was
 * handed it: the handle's reference goes, as the user's free would. */
void evrdma__chan_unhanded(struct evrdma_channel *ch);
/* Its set-up failed: the channel goes now, with every reference the
 * set-up took; nobody else holds one yet. */
void evrdma__chan_discard(struct evrdma_channel *ch);

/* ---- the listener (chan_listen.c) ---- */
/* evrdma_channel_listener_new(), with @p free_arg(@p arg) called when
 * the listener's memory goes. When the call fails it is not called: @p arg
 * stays the caller's. */
struct evrdma_listener *evrdma__channel_listener_new(struct evrdma_base *base,
    const struct sockaddr *sa, int socklen, int backlog, int flags,
    evrdma_channel_accept_cb cb, void *arg, void (*free_arg)(void *));

#endif /* EVRDMA_CHAN_H_INCLUDED_ */
