/*
 * evrdma: channels, a bufferevent over an RDMA connection.
 *
 * Wire protocol: doc/channel-protocol.md. In short, each side advertises a
 * receive ring of R slots of S bytes (registered for REMOTE_WRITE only);
 * data goes as RDMA WRITE WITH IMMEDIATE into the next slot, control
 * messages (credit return, EOF) as zero-length writes with immediate; the
 * immediate carries the type and the credits returned. Receives are
 * zero-length and reposted at once, so credits are ring slots: a sender
 * writes slot n only after the receiver freed it, and a receiver that does
 * not read holds its sender back without any receive-not-ready.
 *
 * Received bytes enter input by reference (evbuffer_add_reference); a slot
 * returns to the sender when the user drains its bytes. If the user holds
 * more than half the slots, new data is copied instead (up to max_input
 * bytes of input) so the sender is not stalled by a slow consumer of
 * references; past that, data waits in the ring and flow control holds the
 * peer.
 *
 * Replies skip the evbuffers: a write from the read callback into an empty
 * output is copied into a send slot left open for the callback's next
 * writes and posted by the same pass (ch_write_open), and a receive
 * callback (evrdma_channel_set_recv_cb) gets the bytes where they landed.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "evrdma-internal.h"

#define CH_MAGIC0	'C'
#define CH_MAGIC1	'H'
#define CH_VERSION	1
#define CH_HS_LEN	24
#define CH_HS_PULL_LEN	40		/* with the pull extension */
#define CH_CTRL		4		/* control credits granted */

#define IMM_DATA	0u
#define IMM_CREDIT	1u
#define IMM_EOF		2u
#define IMM_TYPE(x)	((x) >> 30)
#define IMM_DRET(x)	(((x) >> 16) & 0x3fff)
#define IMM_CRET(x)	(((x) >> 8) & 0xff)
#define IMM_STARVED	0x80u
#define IMM_PULL	0x40u		/* DATA: pull it with an RDMA READ */
#define IMM_PDONE(x)	((x) & 0x3f)	/* pulls completed */
#define IMM_PDONE_MAX	0x3fu
#define IMM_DRET_MAX	0x3fffu

#define SLOT_FREE	0
#define SLOT_STAGED	1
#define SLOT_POSTED	2
#define SLOT_RESERVED	3		/* evrdma_channel_reserve(), not committed */
#define SLOT_OPEN	4		/* a write of this pass, not in output
					 * (ch_write_open) */
#define SFIFO_PULL	0x80000000u	/* sfifo: a pull; its slot waits for the
					 * peer to report it done */
/* receive slot states */
#define RS_READY	0		/* bytes in the slot (or slot free) */
#define RS_PULL_WANT	1		/* a pull whose READ is not posted yet */
#define RS_PULL_POSTED	2		/* its READ is in flight */
#define PULL_DESC_LEN	8		/* offset, length (big-endian) */
/* writes from this size on (and any write into an empty output) are
 * copied straight into a send slot; received messages up to it are copied
 * into input rather than referenced */
#define STAGE_MIN	1024

/*
 * The receive ring outlives its channel while the user still holds
 * references into it (an evbuffer the user moved the bytes to).
 */
struct ch_ring {
	struct evrdma_channel *ch;	/* NULL once the channel is gone */
	uint8_t *mem;
	unsigned refs;			/* evbuffer references + 1 for ch */
	struct ch_slotref {
		struct ch_ring *ring;
		unsigned idx;
	} *slot;
};

struct evrdma_channel {
	struct evrdma_base *base;
	struct evrdma_conn *conn;
	int mode;
	struct evbuffer *input;
	struct evbuffer *output;
	/* ch_input_cb, registered only while the ring holds data back for
	 * lack of room in input (ch_watch_input) */
	struct evbuffer_cb_entry *in_cbent;
	evrdma_channel_data_cb readcb, writecb;
	evrdma_channel_event_cb eventcb;
	evrdma_channel_recv_cb recvcb;	/* input bypassed while it is empty */
	void *cbarg;
	short enabled;
	size_t rd_lo, rd_hi, wr_lo, wr_hi;
	struct timeval tv_read, tv_write;
	int has_tv_read, has_tv_write;
	struct event *rd_timer, *wr_timer;	/* wr_timer: also the end of
						 * lingering (ch_linger_start) */
	struct evrdma__work pump_work;	/* ch_pump() is due */

	/* our receive ring */
	unsigned slots, slot_size;
	size_t max_input;
	struct ch_ring *ring;
	struct evrdma_mr *rmr;
	uint32_t *rlen;			/* bytes in each slot */
	uint8_t *rheld;			/* slot not yet free */
	uint64_t rseq;			/* DATA messages received */
	uint64_t rdeliv;		/* ... of which moved to input */
	uint64_t rtail;			/* ... of which freed, in order */
	unsigned refs_held;		/* slots referenced by input */
	unsigned rq_posted;		/* receives posted, not completed */
	unsigned rq_max;		/* slots + CH_CTRL + a refill batch */
	unsigned ret_data;		/* data credits due to the peer */
	unsigned ret_ctrl;		/* control messages not yet returned */
	int peer_starved;
	/* pulls: DATA messages of at least pull_min bytes the peer leaves in
	 * its send ring for us to READ into the receive slot (0: none) */
	unsigned pull_min;
	uint8_t *rstate;		/* RS_* of each receive slot */
	uint32_t *rpoff;		/* where a pull's bytes are in the peer's
					 * send ring */
	uint64_t rpull;			/* messages before this have no READ to
					 * post */
	unsigned pull_wait;		/* RS_PULL_WANT slots */
	unsigned ret_pull;		/* pulls done, not yet told the peer */
	unsigned pull_out, pull_cap;	/* READs in flight, and the most the
					 * send queue has room for */

	/* our send ring and the peer's receive ring */
	/* Send ring: a slot is FREE, STAGED (a write was copied into it and
	 * sits in output by reference, to be posted without another copy)
	 * or POSTED (its WRITE is in flight; completions come in post order,
	 * so posted slots are a FIFO). The ring outlives the channel while
	 * output references into it may live elsewhere. */
	struct ch_ring *sring;
	struct evrdma_mr *smr;
	uint8_t *sstate;
	unsigned *sfifo, sfifo_head, sfifo_n;
	unsigned snext;			/* where the free-slot search starts */
	int resv;			/* reserved slot, or -1 */
	size_t resv_len;
	int resv_wanted;		/* a reserve failed: EAGAIN */
	/* A write made while the pass runs the user's read callbacks, into
	 * an empty output, goes straight into this send slot (-1: none),
	 * ahead of output; the pass posts it (ch_write_open). */
	int wopen;
	size_t wopen_len;
	unsigned sfree;
	struct evrdma_remote peer;
	unsigned peer_slots, peer_slot_size;
	/* the peer pulls DATA of at least peer_pull_min bytes from our send
	 * ring, if pullable; the send slots of pulls not yet done (the peer
	 * says so in order) in a FIFO */
	unsigned peer_pull_min;
	int pullable;
	unsigned *spq, spq_head, spq_n;
	int linger;			/* freed, waiting for the peer's pulls */
	struct evrdma_remote peer_src;	/* the peer's send ring, if it may be
					 * pulled from */
	uint64_t sseq;			/* DATA messages sent */
	uint64_t s_limit;		/* may send while sseq < s_limit */
	unsigned ctrl_credits;

	/* message mode: lengths of the messages in input / output */
	struct ch_lenq {
		size_t *v;
		unsigned head, count, cap;
	} in_msgs, out_msgs;

	unsigned reqs;			/* posted, callback still due */
	int connected;
	int shut_wr, eof_sent, eof_recv, eof_reported;
	int peer_gone;			/* DISCONNECTED: no more sending */
	int failed, freed, in_pump;
	int pre_send;			/* ch_pump() sends after this */
	int error;
};

static void ch_schedule(struct evrdma_channel *ch);
static void ch_fail(struct evrdma_channel *ch, short what, int reason);
static void ch_deliver(struct evrdma_channel *ch);
static void ch_pump(struct evrdma_channel *ch);

/* ---- small helpers ---- */

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void
put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}

static void
timer_arm(struct event *ev, const struct timeval *tv)
{
	evrdma__ev_timer_start(ev, (unsigned)(tv->tv_sec * 1000 +
	    tv->tv_usec / 1000));
}

static int
lenq_push(struct ch_lenq *q, size_t len)
{
	if (q->count == q->cap) {
		unsigned ncap = q->cap ? q->cap * 2 : 16, i;
		size_t *nv = malloc(ncap * sizeof(*nv));

		if (!nv)
			return -1;
		for (i = 0; i < q->count; i++)
			nv[i] = q->v[(q->head + i) % q->cap];
		free(q->v);
		q->v = nv;
		q->head = 0;
		q->cap = ncap;
	}
	q->v[(q->head + q->count++) % q->cap] = len;
	return 0;
}

/* The open write goes back into output, ahead of what is there. */
static int
lenq_push_front(struct ch_lenq *q, size_t len)
{
	if (lenq_push(q, len) < 0)	/* makes room; the order is fixed below */
		return -1;
	q->count--;
	q->head = (q->head + q->cap - 1) % q->cap;
	q->v[q->head] = len;
	q->count++;
	return 0;
}

static size_t
lenq_front(const struct ch_lenq *q)
{
	return q->v[q->head];
}

static void
lenq_pop(struct ch_lenq *q)
{
	q->head = (q->head + 1) % q->cap;
	q->count--;
}

/* A ring of slots, and @p extra bytes after them. */
static struct ch_ring *
ch_ring_new(struct evrdma_channel *ch, size_t extra)
{
	struct ch_ring *r = calloc(1, sizeof(*r));
	unsigned i;

	if (!r)
		return NULL;
	r->ch = ch;
	r->refs = 1;
	r->mem = malloc((size_t)ch->slots * ch->slot_size + extra);
	r->slot = calloc(ch->slots, sizeof(*r->slot));
	if (!r->mem || !r->slot) {
		free(r->mem);
		free(r->slot);
		free(r);
		return NULL;
	}
	for (i = 0; i < ch->slots; i++) {
		r->slot[i].ring = r;
		r->slot[i].idx = i;
	}
	return r;
}

static void
ring_unref(struct ch_ring *ring)
{
	if (--ring->refs)
		return;
	free(ring->mem);
	free(ring->slot);
	free(ring);
}

/* ---- lifetime ---- */

static void
ch_destroy(struct evrdma_channel *ch)
{
	evrdma__ev_free(ch->rd_timer);
	evrdma__ev_free(ch->wr_timer);
	evrdma__work_cancel(ch->base, &ch->pump_work);
	if (ch->ring)
		ch->ring->ch = NULL;	/* evbuffer_free runs our cleanups */
	if (ch->sring)
		ch->sring->ch = NULL;
	if (ch->input)
		evbuffer_free(ch->input);	/* drops our references */
	if (ch->output)
		evbuffer_free(ch->output);
	evrdma_mr_free(ch->rmr);
	evrdma_mr_free(ch->smr);
	if (ch->ring)
		ring_unref(ch->ring);
	if (ch->sring)
		ring_unref(ch->sring);
	free(ch->sstate);
	free(ch->sfifo);
	free(ch->rlen);
	free(ch->rheld);
	free(ch->rstate);
	free(ch->rpoff);
	free(ch->spq);
	free(ch->in_msgs.v);
	free(ch->out_msgs.v);
	free(ch);
}

/* Freed by the user (or dropped by the library): destroy once every
 * posted request has had its (cancelled) completion. */
static void
ch_maybe_destroy(struct evrdma_channel *ch)
{
	if (ch->freed && ch->reqs == 0 && !ch->in_pump)
		ch_destroy(ch);
}

static void
ch_drop(void *arg)
{
	struct evrdma_channel *ch = arg;

	/* the library frees the connection itself */
	ch->conn = NULL;
	ch->freed = 1;
	ch->linger = 0;
	ch_maybe_destroy(ch);
}

static int ch_post_ctrl(struct evrdma_channel *ch, uint32_t type,
    uint32_t flags);

/*
 * Freed while the peer has yet to pull messages from our send ring: they
 * were sent as far as the user can tell (they left output), so keep the
 * connection until the peer says it has them, at most the teardown
 * timeout. A CREDIT with STARVED asks for that answer as soon as all its
 * pulls are done.
 */
static int
ch_linger_start(struct evrdma_channel *ch)
{
	const struct evrdma_config *cfg = &ch->base->cfg;
	if (!ch->spq_n || !ch->conn || !ch->connected || ch->failed ||
	    ch->peer_gone)
		return 0;
	ch->in_pump++;
	if (ch_post_ctrl(ch, IMM_CREDIT, IMM_STARVED) <= 0) {
		ch->in_pump--;
		return 0;	/* no control credit left: no answer comes */
	}
	ch->in_pump--;
	ch->linger = 1;
	/* the write timer is free: no writing after the free */
	evrdma__ev_timer_start(ch->wr_timer,
	    cfg->timeout_ms[EVRDMA_TIMEOUT_TEARDOWN]);
	return 1;
}

/* The lingering is over (the peer has done our pulls, has gone, or did not
 * answer in time): close. The caller calls ch_maybe_destroy(). */
static void
ch_linger_end(struct evrdma_channel *ch)
{
	struct evrdma_conn *conn = ch->conn;

	if (!ch->linger)
		return;
	ch->linger = 0;
	evrdma__ev_stop(ch->wr_timer);
	ch->conn = NULL;
	if (conn) {
		ch->in_pump++;
		conn->drop = NULL;
		evrdma_conn_free(conn);	/* cancels our requests */
		ch->in_pump--;
	}
}

void
evrdma_channel_free(struct evrdma_channel *ch)
{
	struct evrdma_conn *conn;

	if (!ch || ch->freed)
		return;
	ch->freed = 1;
	ch->readcb = ch->writecb = NULL;
	ch->eventcb = NULL;
	evrdma__ev_stop(ch->rd_timer);
	evrdma__ev_stop(ch->wr_timer);
	evrdma__work_cancel(ch->base, &ch->pump_work);
	if (ch_linger_start(ch))
		return;
	conn = ch->conn;
	ch->conn = NULL;
	if (conn) {
		conn->drop = NULL;
		evrdma_conn_free(conn);	/* cancels our requests */
	}
	ch_maybe_destroy(ch);
}

static void
ch_req_done(struct evrdma_channel *ch)
{
	ch->reqs--;
	ch_maybe_destroy(ch);
}

/* ---- callbacks to the user ---- */

static void
ch_event(struct evrdma_channel *ch, short what)
{
	if (ch->eventcb && !ch->freed) {
		ch->in_pump++;
		ch->eventcb(ch, what, ch->cbarg);
		ch->in_pump--;
	}
}

static void
ch_fail(struct evrdma_channel *ch, short what, int reason)
{
	if (ch->failed || ch->freed)
		return;
	ch->failed = 1;
	ch->error = reason;
	/* as bufferevent: the failing direction(s) are disabled first */
	if (what & BEV_EVENT_READING)
		ch->enabled &= ~EV_READ;
	if (what & BEV_EVENT_WRITING)
		ch->enabled &= ~EV_WRITE;
	evrdma__ev_stop(ch->rd_timer);
	evrdma__ev_stop(ch->wr_timer);
	evrdma__log(EVRDMA_LOG_INFO, "channel %p: %s", (void *)ch,
	    evrdma_reason_str(reason));
	ch_event(ch, what);
	ch_maybe_destroy(ch);
}

static void
ch_protocol_error(struct evrdma_channel *ch, const char *why)
{
	evrdma__log(EVRDMA_LOG_WARN, "channel %p: protocol violation by the "
	    "peer: %s", (void *)ch, why);
	ch_fail(ch, BEV_EVENT_ERROR | BEV_EVENT_READING,
	    EVRDMA_REASON_PROTOCOL);
}

/* ---- receive side ---- */

static void ch_recv_cb(struct evrdma_conn *c, const struct evrdma_wc *wc,
    void *arg);

/*
 * Keep at least @p min receives posted, refilling to rq_max in one batch.
 * Every message of the peer takes a receive, and the peer may have at most
 * slots + CH_CTRL messages unconsumed (its data and control credits), so
 * that many must be posted whenever we return credits (ch_returns_ready);
 * the rq_max - (slots + CH_CTRL) extra ones let the refill wait until the
 * pass has posted its sends, off the path from a message to its reply.
 */
static int
ch_refill(struct evrdma_channel *ch, unsigned min)
{
	int n;

	if (ch->rq_posted >= min)
		return 0;
	n = evrdma__conn_post_recvs(ch->conn, ch->rq_max - ch->rq_posted,
	    ch_recv_cb, ch);
	if (n < 0 && errno == EPIPE)
		return 0;	/* closing: nothing more arrives; the close
				 * itself reports how the channel ended */
	if (n < 0)
		return -1;
	ch->rq_posted += (unsigned)n;
	ch->reqs += (unsigned)n;
	if (ch->rq_posted < min)
		return evrdma__fail(ENOMEM, "cannot post receives");
	return 0;
}

/* Before credits go back to the peer: enough receives for all it may send. */
static int
ch_returns_ready(struct evrdma_channel *ch)
{
	if (!ch->ret_data && !ch->ret_ctrl)
		return 0;
	return ch_refill(ch, ch->slots + CH_CTRL);
}

/* Free slot idx; advance the tail over freed slots (credits are returned
 * in ring order). */
static void
ch_slot_free(struct evrdma_channel *ch, unsigned idx)
{
	ch->rheld[idx] = 0;
	while (ch->rtail < ch->rdeliv && !ch->rheld[ch->rtail % ch->slots]) {
		ch->rtail++;
		ch->ret_data++;
	}
	if (!ch->pre_send)
		ch_schedule(ch);
}

static void
ch_ref_cleanup(const void *data, size_t len, void *arg)
{
	struct ch_slotref *ref = arg;
	struct ch_ring *ring = ref->ring;
	struct evrdma_channel *ch = ring->ch;

	if (ch && !ch->freed) {
		ch->refs_held--;
		ch_slot_free(ch, ref->idx);
	}
	ring_unref(ring);
}

static void ch_input_cb(struct evbuffer *buf,
    const struct evbuffer_cb_info *info, void *arg);

/*
 * Watch input for the user's reads while @p held: the ring then holds data
 * back until input has room (high watermark, max_input). Otherwise input
 * has no callback: a registered one costs each evbuffer operation on input
 * some 80 instructions, twice on the path of every message.
 */
static int
ch_watch_input(struct evrdma_channel *ch, int held)
{
	if (held && !ch->in_cbent) {
		ch->in_cbent = evbuffer_add_cb(ch->input, ch_input_cb, ch);
		if (!ch->in_cbent)
			return -1;
	} else if (!held && ch->in_cbent) {
		evbuffer_remove_cb_entry(ch->input, ch->in_cbent);
		ch->in_cbent = NULL;
	}
	return 0;
}

static int
ch_reading(const struct evrdma_channel *ch)
{
	return (ch->enabled & EV_READ) && !ch->freed;
}

/*
 * Move received slots into input while reading is enabled and input is
 * below the high watermark (or hand them to the receive callback while
 * input is empty); then the read callback, then EOF.
 */
static void
ch_deliver(struct evrdma_channel *ch)
{
	/* input's length, kept here: only we add to it in this loop */
	size_t have = evbuffer_get_length(ch->input);
	int moved = 0, held = 0, handed = 0;

	while (ch_reading(ch) && ch->rdeliv < ch->rseq) {
		unsigned idx = (unsigned)(ch->rdeliv % ch->slots);
		size_t len = ch->rlen[idx];
		uint8_t *p = ch->ring->mem + (size_t)idx * ch->slot_size;
		int small;

		if (ch->rstate[idx] != RS_READY)
			break;	/* its READ is not done: input stays in order */
		if (ch->recvcb && !have) {
			/* zero-copy to the user, and the slot goes back to
			 * the peer as soon as the callback returns; input
			 * would cost a chain, its callbacks and a drain */
			ch->rdeliv++;
			handed = 1;
			ch->recvcb(ch, p, len, ch->cbarg);
			if (ch->freed)
				return;
			ch_slot_free(ch, idx);
			/* it may have put bytes in input: what comes next
			 * goes there, behind them */
			have = evbuffer_get_length(ch->input);
			continue;
		}
		if (ch->rd_hi && have >= ch->rd_hi) {
			held = 1;
			break;
		}
		/* by reference (zero-copy) while the user holds at most
		 * half of the slots, except small messages, which are
		 * copied within max_input: a reference costs more than
		 * their copy, and the slot goes back to the peer at once */
		small = len < STAGE_MIN && have + len <= ch->max_input;
		if (!small && ch->refs_held < ch->slots / 2) {
			ch->ring->refs++;
			if (evbuffer_add_reference(ch->input, p, len,
			    ch_ref_cleanup, &ch->ring->slot[idx]) < 0) {
				ch->ring->refs--;
				held = 1;
				break;
			}
			ch->refs_held++;
			ch->rdeliv++;
			have += len;
		} else if (have + len <= ch->max_input) {
			if (evbuffer_add(ch->input, p, len) < 0) {
				held = 1;
				break;
			}
			ch->rdeliv++;
			have += len;
			ch_slot_free(ch, idx);
		} else {
			held = 1;
			break;	/* held in the ring: the peer waits */
		}
		if (ch->mode == EVRDMA_CHANNEL_MESSAGE &&
		    lenq_push(&ch->in_msgs, len) < 0) {
			ch_fail(ch, BEV_EVENT_ERROR | BEV_EVENT_READING,
			    EVRDMA_REASON_RESOURCE);
			return;
		}
		moved = 1;
	}
	/* before the read callback: what it reads may let more in */
	if (ch_watch_input(ch, held) < 0) {
		ch_fail(ch, BEV_EVENT_ERROR | BEV_EVENT_READING,
		    EVRDMA_REASON_RESOURCE);
		return;
	}
	if ((moved || handed) && ch->has_tv_read && ch_reading(ch))
		timer_arm(ch->rd_timer, &ch->tv_read);
	if (moved && have >= ch->rd_lo && ch->readcb) {
		ch->in_pump++;
		ch->readcb(ch, ch->cbarg);
		ch->in_pump--;
		if (ch->freed) {
			ch_maybe_destroy(ch);
			return;
		}
	}
	if (ch->eof_recv && !ch->eof_reported && ch->rdeliv == ch->rseq &&
	    ch_reading(ch) && !ch->failed) {
		/* as bufferevent: reading stops before EOF is reported */
		ch->eof_reported = 1;
		ch->enabled &= ~EV_READ;
		evrdma__ev_stop(ch->rd_timer);
		ch_event(ch, BEV_EVENT_EOF | BEV_EVENT_READING);
	}
}

/*
 * A pull (DATA with IMM_PULL): the peer wrote an 8-byte descriptor into the
 * slot, the offset and length of the message in its send ring; check it and
 * queue the READ of those bytes into the same slot (ch_post_pulls).
 */
static int
ch_pull_take(struct evrdma_channel *ch, uint32_t byte_len)
{
	unsigned idx = (unsigned)(ch->rseq % ch->slots);
	const uint8_t *d = ch->ring->mem + (size_t)idx * ch->slot_size;
	uint32_t off, len;

	if (!ch->pull_min || !ch->peer_src.len) {
		ch_protocol_error(ch, "pull not offered");
		return -1;
	}
	if (byte_len != PULL_DESC_LEN) {
		ch_protocol_error(ch, "bad pull descriptor length");
		return -1;
	}
	off = get32(d);
	len = get32(d + 4);
	if (len == 0 || len > ch->slot_size || off > ch->peer_src.len ||
	    len > ch->peer_src.len - off) {
		ch_protocol_error(ch, "pull descriptor out of range");
		return -1;
	}
	ch->rlen[idx] = len;
	ch->rpoff[idx] = off;
	ch->rstate[idx] = RS_PULL_WANT;
	ch->pull_wait++;
	return 0;
}

static void
ch_pull_cb(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct ch_slotref *ref = arg;
	struct evrdma_channel *ch = ref->ring->ch;

	ch->reqs--;
	ch->pull_out--;
	if (ch->freed || ch->failed) {
		ch_maybe_destroy(ch);
		return;
	}
	if (wc->status) {
		/* the message's bytes are lost: an error, not EOF */
		ch_fail(ch, BEV_EVENT_ERROR | BEV_EVENT_READING,
		    wc->status == ECANCELED && ch->peer_gone ?
		    EVRDMA_REASON_DISCONNECTED : EVRDMA_REASON_QP_FATAL);
		return;
	}
	ch->rstate[ref->idx] = RS_READY;
	ch->ret_pull++;
	ch_schedule(ch);
}

/* Post the READs of pulls, in ring order, as far as the send queue has
 * room for them beside our own messages. */
static int
ch_post_pulls(struct evrdma_channel *ch)
{
	while (ch->rpull < ch->rseq) {
		unsigned idx = (unsigned)(ch->rpull % ch->slots);

		if (ch->rstate[idx] == RS_PULL_WANT) {
			if (ch->pull_out >= ch->pull_cap)
				break;	/* ch_pull_cb resumes */
			if (evrdma_conn_post_read(ch->conn, ch->rmr,
			    (size_t)idx * ch->slot_size, ch->rlen[idx],
			    &ch->peer_src, ch->rpoff[idx], ch_pull_cb,
			    &ch->ring->slot[idx]) < 0) {
				if (errno == EAGAIN)
					break;	/* a completion resumes */
				return -1;
			}
			ch->rstate[idx] = RS_PULL_POSTED;
			ch->pull_wait--;
			ch->pull_out++;
			ch->reqs++;
		}
		ch->rpull++;
	}
	return 0;
}

static void ch_slot_release(struct evrdma_channel *ch, unsigned idx);
static void ch_linger_end(struct evrdma_channel *ch);

/* The peer has done @p n more of our pulls (in order): their send slots
 * are free. -1 when it claims more than we made. */
static int
ch_pulls_done(struct evrdma_channel *ch, unsigned n)
{
	if (n > ch->spq_n)
		return -1;
	for (; n; n--) {
		ch_slot_release(ch, ch->spq[ch->spq_head]);
		ch->spq_head = (ch->spq_head + 1) % ch->slots;
		ch->spq_n--;
	}
	if (ch->linger && !ch->spq_n)
		ch_linger_end(ch);
	return 0;
}

static void
ch_recv_cb(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct evrdma_channel *ch = arg;
	uint32_t imm = wc->imm_data, dret, cret;

	ch->reqs--;
	ch->rq_posted--;
	if (ch->linger && !wc->status && wc->has_imm &&
	    ch_pulls_done(ch, IMM_PDONE(imm)) < 0)
		ch_linger_end(ch);	/* a lie: no point waiting */
	if (ch->freed || ch->failed) {
		ch_maybe_destroy(ch);
		return;
	}
	if (wc->status) {
		if (wc->status != ECANCELED) {
			ch_fail(ch, BEV_EVENT_ERROR | BEV_EVENT_READING,
			    EVRDMA_REASON_QP_FATAL);
		} else if (ch->peer_gone && !ch->eof_recv) {
			/* The peer disconnected. A flushed receive comes after
			 * every completed one of this QP, so all its data is
			 * in: deliver it, then EOF. */
			ch->eof_recv = 1;
			ch->in_pump++;
			ch_deliver(ch);
			ch->in_pump--;
			/* bytes still in its send ring are lost with it */
			if (ch->pull_wait && !ch->freed)
				ch_fail(ch, BEV_EVENT_ERROR |
				    BEV_EVENT_READING,
				    EVRDMA_REASON_DISCONNECTED);
		}
		ch_maybe_destroy(ch);
		return;
	}
	if (wc->opcode != EVRDMA_OP_RECV_WRITE_IMM || !wc->has_imm) {
		ch_protocol_error(ch, "not a write with immediate");
		return;
	}
	if (IMM_TYPE(imm) > IMM_EOF ||
	    ((imm & IMM_PULL) && IMM_TYPE(imm) != IMM_DATA)) {
		ch_protocol_error(ch, "bad immediate");
		return;
	}
	dret = IMM_DRET(imm);
	cret = IMM_CRET(imm);
	/* a return of more than was ever outstanding is a lie */
	if (ch->s_limit + dret > ch->sseq + ch->peer_slots ||
	    ch->ctrl_credits + cret > CH_CTRL) {
		ch_protocol_error(ch, "credits returned that were not lent");
		return;
	}
	if (ch_pulls_done(ch, IMM_PDONE(imm)) < 0) {
		ch_protocol_error(ch, "pulls acknowledged that were not made");
		return;
	}
	ch->s_limit += dret;
	ch->ctrl_credits += cret;
	if (imm & IMM_STARVED)
		ch->peer_starved = 1;
	switch (IMM_TYPE(imm)) {
	case IMM_DATA:
		if (ch->eof_recv) {
			ch_protocol_error(ch, "data after EOF");
			return;
		}
		if (wc->byte_len == 0 || wc->byte_len > ch->slot_size) {
			ch_protocol_error(ch, "bad data length");
			return;
		}
		/* the peer may use the slots we lent: R plus the returns
		 * already sent (rtail - ret_data) */
		if (ch->rseq + ch->ret_data >= ch->rtail + ch->slots) {
			ch_protocol_error(ch, "data beyond its credits");
			return;
		}
		if (!(imm & IMM_PULL))
			ch->rlen[ch->rseq % ch->slots] = wc->byte_len;
		else if (ch_pull_take(ch, wc->byte_len) < 0)
			return;
		ch->rheld[ch->rseq % ch->slots] = 1;
		ch->rseq++;
		break;
	case IMM_EOF:
		ch->eof_recv = 1;
		/* fall through */
	case IMM_CREDIT:
		if (++ch->ret_ctrl > CH_CTRL) {
			ch_protocol_error(ch, "control beyond its credits");
			return;
		}
		break;
	}
	/* After the poll pass, not from inside it: sending there lets
	 * channels with traffic in flight refill ahead of the others
	 * (measured: unfair with 200 channels), and one pump per pass
	 * batches what all of its completions made due. */
	if (!ch->freed && !ch->failed)
		ch_schedule(ch);
}

/* ---- send side ---- */

/* A free send slot, keeping @p reserve free for the copy path. */
static int
ch_slot_alloc(struct evrdma_channel *ch, unsigned reserve)
{
	unsigned i;

	if (ch->sfree <= reserve)
		return -1;
	for (i = 0; i < ch->slots; i++) {
		unsigned idx = (ch->snext + i) % ch->slots;

		if (ch->sstate[idx] == SLOT_FREE) {
			ch->snext = (idx + 1) % ch->slots;
			ch->sfree--;
			return (int)idx;
		}
	}
	return -1;
}

static void
ch_slot_release(struct evrdma_channel *ch, unsigned idx)
{
	ch->sstate[idx] = SLOT_FREE;
	ch->sfree++;
}

/* Output dropped a staged slot without sending it (the user drained
 * output, or the channel is going): the slot is free again. */
static void
ch_staged_cleanup(const void *data, size_t len, void *arg)
{
	struct ch_slotref *ref = arg;
	struct ch_ring *ring = ref->ring;
	struct evrdma_channel *ch = ring->ch;

	if (ch && ch->sstate[ref->idx] == SLOT_STAGED)
		ch_slot_release(ch, ref->idx);
	ring_unref(ring);
}

/* Copy @p len bytes into a free send slot (one stays for the copy path).
 * @return the slot, or -1 when none is free */
static int
ch_slot_copy(struct evrdma_channel *ch, const void *data, size_t len)
{
	int idx = ch_slot_alloc(ch, 1);

	if (idx >= 0)
		memcpy(ch->sring->mem + (size_t)idx * ch->slot_size, data,
		    len);
	return idx;
}

/* Put the first @p len bytes of send slot @p idx into @p buf by reference,
 * staged: posted from where they are when they reach output's front.
 * -1 (out of memory) leaves the slot as it was. */
static int
ch_slot_stage(struct evrdma_channel *ch, struct evbuffer *buf, unsigned idx,
    size_t len)
{
	ch->sring->refs++;
	if (evbuffer_add_reference(buf, ch->sring->mem +
	    (size_t)idx * ch->slot_size, len, ch_staged_cleanup,
	    &ch->sring->slot[idx]) < 0) {
		ch->sring->refs--;
		return -1;
	}
	ch->sstate[idx] = SLOT_STAGED;
	return 0;
}

static void
ch_send_cb(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct evrdma_channel *ch = arg;

	ch->reqs--;
	/* a pull's slot is freed when the peer has done it (ch_pulls_done) */
	if (!(ch->sfifo[ch->sfifo_head] & SFIFO_PULL))
		ch_slot_release(ch, ch->sfifo[ch->sfifo_head]);
	ch->sfifo_head = (ch->sfifo_head + 1) % ch->slots;
	ch->sfifo_n--;
	if (ch->freed || ch->failed) {
		ch_maybe_destroy(ch);
		return;
	}
	if (wc->status && wc->status != ECANCELED) {
		ch_fail(ch, BEV_EVENT_ERROR | BEV_EVENT_WRITING,
		    EVRDMA_REASON_QP_FATAL);
		return;
	}
	/* a free slot matters only to output waiting for one, or to a
	 * reservation that found none; send queue room to waiting pulls */
	if (evbuffer_get_length(ch->output) || ch->resv_wanted ||
	    ch->pull_wait)
		ch_schedule(ch);
}

static void
ch_ctrl_cb(struct evrdma_conn *c, const struct evrdma_wc *wc, void *arg)
{
	struct evrdma_channel *ch = arg;

	ch_req_done(ch);
}

/* The credits we owe ride on every message we send. */
static uint32_t
ch_take_returns(struct evrdma_channel *ch, uint32_t type)
{
	unsigned d = ch->ret_data > IMM_DRET_MAX ? IMM_DRET_MAX : ch->ret_data;
	unsigned c = ch->ret_ctrl;
	unsigned p = ch->ret_pull > IMM_PDONE_MAX ? IMM_PDONE_MAX :
	    ch->ret_pull;

	ch->ret_data -= d;
	ch->ret_ctrl = 0;
	ch->ret_pull -= p;
	ch->peer_starved = 0;
	return type << 30 | (uint32_t)d << 16 | (uint32_t)c << 8 | p;
}

static int
ch_post_ctrl(struct evrdma_channel *ch, uint32_t type, uint32_t flags)
{
	uint32_t imm;

	if (!ch->ctrl_credits)
		return 0;
	if (ch_returns_ready(ch) < 0) {
		ch_fail(ch, BEV_EVENT_ERROR | BEV_EVENT_READING,
		    EVRDMA_REASON_RESOURCE);
		return -1;
	}
	imm = ch_take_returns(ch, type) | flags;
	if (evrdma_conn_post_write_imm(ch->conn, NULL, 0, 0, &ch->peer, 0,
	    imm, ch_ctrl_cb, ch) < 0) {
		ch_fail(ch, BEV_EVENT_ERROR | BEV_EVENT_WRITING,
		    EVRDMA_REASON_RESOURCE);
		return -1;
	}
	ch->reqs++;
	ch->ctrl_credits--;
	return 1;
}

static size_t
ch_chunk(const struct evrdma_channel *ch)
{
	return ch->peer_slot_size < ch->slot_size ?
	    ch->peer_slot_size : ch->slot_size;
}

/*
 * The read callbacks' fast path: a write made while the pass that runs
 * them is under way (it sends before the loop goes on), into an empty
 * output, with a credit in hand, is copied into a free send slot that
 * stays open for the writes that follow it into an empty output while
 * they fit (stream mode), and that the pass posts as it is. A reply then
 * costs no evbuffer chain, callbacks or drain, and it goes out as soon as
 * it would have from output. Output's length does not count it: it is
 * already on its way, as bytes a socket accepted.
 */
static int
ch_write_open(struct evrdma_channel *ch, const void *data, size_t len)
{
	uint8_t *p;
	int idx;

	if (!ch->pre_send || evbuffer_get_length(ch->output))
		return -1;
	if (ch->wopen >= 0) {
		if (ch->mode == EVRDMA_CHANNEL_MESSAGE ||
		    ch->wopen_len + len > ch_chunk(ch))
			return -1;
		p = ch->sring->mem + (size_t)ch->wopen * ch->slot_size;
		memcpy(p + ch->wopen_len, data, len);
		ch->wopen_len += len;
		return 0;
	}
	if (!ch->connected || !(ch->enabled & EV_WRITE) ||
	    ch->sseq >= ch->s_limit || len > ch_chunk(ch))
		return -1;
	idx = ch_slot_copy(ch, data, len);
	if (idx < 0)
		return -1;
	ch->sstate[idx] = SLOT_OPEN;
	ch->wopen = idx;
	ch->wopen_len = len;
	return 0;
}

/* Writing was disabled with a write open: put it in front of output. */
static int
ch_wopen_to_output(struct evrdma_channel *ch)
{
	struct evbuffer *tmp = evbuffer_new();
	int rc;

	if (!tmp)
		return -1;
	if ((ch->mode == EVRDMA_CHANNEL_MESSAGE &&
	    lenq_push_front(&ch->out_msgs, ch->wopen_len) < 0) ||
	    ch_slot_stage(ch, tmp, (unsigned)ch->wopen, ch->wopen_len) < 0) {
		evbuffer_free(tmp);
		return -1;	/* the caller fails the channel */
	}
	ch->wopen = -1;
	/* libevent has no prepend of a reference: by way of a buffer */
	rc = evbuffer_prepend_buffer(ch->output, tmp);
	evbuffer_free(tmp);	/* if the prepend failed, frees the slot */
	return rc;
}

/*
 * Post send slot @p idx holding @p n bytes as the next DATA message, with
 * the credits we owe; the caller checked the peer's credits. -1 when the
 * channel failed.
 */
static int
ch_post_slot(struct evrdma_channel *ch, unsigned idx, size_t n)
{
	size_t off = (size_t)idx * ch->slot_size;
	uint32_t imm;
	int pull;

	ch->sstate[idx] = SLOT_POSTED;
	/* pull while the peer keeps up with our pulls, write when it lags:
	 * the bytes move either way, but on a software device the work of
	 * moving them falls on the CPU of the side that posts the request,
	 * so this shares it */
	pull = ch->pullable && n >= ch->peer_pull_min &&
	    ch->spq_n < (ch->slots / 4 ? ch->slots / 4 : 1);
	ch->sfifo[(ch->sfifo_head + ch->sfifo_n++) % ch->slots] =
	    idx | (pull ? SFIFO_PULL : 0);
	if (pull) {
		/* the peer READs the bytes where they are; we write only
		 * where: the descriptor after the slots */
		size_t doff = (size_t)ch->slots * ch->slot_size +
		    (size_t)idx * PULL_DESC_LEN;

		put32(ch->sring->mem + doff, (uint32_t)off);
		put32(ch->sring->mem + doff + 4, (uint32_t)n);
		ch->spq[(ch->spq_head + ch->spq_n++) % ch->slots] = idx;
		off = doff;
		n = PULL_DESC_LEN;
	}
	if (ch_returns_ready(ch) < 0) {
		ch_fail(ch, BEV_EVENT_ERROR | BEV_EVENT_READING,
		    EVRDMA_REASON_RESOURCE);
		return -1;
	}
	imm = ch_take_returns(ch, IMM_DATA);
	/* out of credits, or of send slots that pulls hold: the peer
	 * answers at once (ch_pump's CREDIT rule) */
	if (ch->sseq + 1 == ch->s_limit || (pull && !ch->sfree))
		imm |= IMM_STARVED;
	if (pull)
		imm |= IMM_PULL;
	if (evrdma_conn_post_write_imm(ch->conn, ch->smr, off, n, &ch->peer,
	    (ch->sseq % ch->peer_slots) * (uint64_t)ch->peer_slot_size, imm,
	    ch_send_cb, ch) < 0) {
		ch_fail(ch, BEV_EVENT_ERROR | BEV_EVENT_WRITING,
		    EVRDMA_REASON_RESOURCE);
		return -1;
	}
	ch->reqs++;
	ch->sseq++;
	if (pull)
		ch->base->stats.ch_pulled++;
	else
		ch->base->stats.ch_written++;
	return 0;
}

/* Send the open write, then as much of output as the credits and our send
 * ring allow. */
static int
ch_send_data(struct evrdma_channel *ch)
{
	size_t olen;
	int sent = 0;

	if (ch->wopen >= 0) {
		/* it was opened with a credit in hand and goes first, so
		 * the credit is still there */
		unsigned idx = (unsigned)ch->wopen;

		ch->wopen = -1;
		if (ch_post_slot(ch, idx, ch->wopen_len) < 0)
			return -1;
		sent = 1;
	}
	while ((ch->enabled & EV_WRITE) && ch->sseq < ch->s_limit &&
	    (olen = evbuffer_get_length(ch->output))) {
		struct evbuffer_iovec v;
		size_t n, off;
		int idx = -1;

		if (ch->mode == EVRDMA_CHANNEL_MESSAGE) {
			n = lenq_front(&ch->out_msgs);
			if (n > ch_chunk(ch)) {
				/* written before connect, larger than the
				 * peer's slots: it cannot go as one message */
				evrdma__fail(EMSGSIZE, "queued message of %zu "
				    "bytes exceeds the peer's %zu", n,
				    ch_chunk(ch));
				ch_fail(ch, BEV_EVENT_ERROR | BEV_EVENT_WRITING,
				    EVRDMA_REASON_RESOURCE);
				return -1;
			}
		} else {
			n = olen < ch_chunk(ch) ? olen : ch_chunk(ch);
		}
		/* a staged slot at the front, exactly this message, or in
		 * stream mode at least half a message (sent alone: copying
		 * it to coalesce would cost more than the slot space saved):
		 * post it where it is; anything else is copied into a free
		 * slot */
		if (evbuffer_peek(ch->output, -1, NULL, &v, 1) == 1 &&
		    (v.iov_len == n || (ch->mode != EVRDMA_CHANNEL_MESSAGE &&
		    v.iov_len < n && v.iov_len >= ch_chunk(ch) / 2)) &&
		    (uint8_t *)v.iov_base >= ch->sring->mem &&
		    (uint8_t *)v.iov_base < ch->sring->mem +
		    (size_t)ch->slots * ch->slot_size) {
			off = (size_t)((uint8_t *)v.iov_base - ch->sring->mem);
			if (off % ch->slot_size == 0 &&
			    ch->sstate[off / ch->slot_size] == SLOT_STAGED)
				idx = (int)(off / ch->slot_size);
		}
		if (idx >= 0) {
			n = v.iov_len;
			ch->sstate[idx] = SLOT_POSTED;
			evbuffer_drain(ch->output, n);
		} else {
			idx = ch_slot_alloc(ch, 0);
			if (idx < 0)
				break;	/* all in flight: a completion resumes */
			ch->sstate[idx] = SLOT_POSTED;
			off = (size_t)idx * ch->slot_size;
			evbuffer_remove(ch->output, ch->sring->mem + off, n);
		}
		if (ch->mode == EVRDMA_CHANNEL_MESSAGE)
			lenq_pop(&ch->out_msgs);
		if (ch_post_slot(ch, (unsigned)idx, n) < 0)
			return -1;
		sent = 1;
	}
	return sent;
}

/*
 * The open write is sent by this pass (ch_send_data), unless the channel
 * is closing (it goes as unsent output does) or writing was disabled
 * since (it goes to the front of output, to wait there). -1 when that
 * failed the channel.
 */
static int
ch_wopen_settle(struct evrdma_channel *ch)
{
	if (ch->freed || ch->failed || ch->peer_gone) {
		ch_slot_release(ch, (unsigned)ch->wopen);
		ch->wopen = -1;
		return 0;
	}
	if (!(ch->enabled & EV_WRITE) && ch_wopen_to_output(ch) < 0) {
		if (ch->wopen >= 0) {
			ch_slot_release(ch, (unsigned)ch->wopen);
			ch->wopen = -1;
		}
		ch_fail(ch, BEV_EVENT_ERROR | BEV_EVENT_WRITING,
		    EVRDMA_REASON_RESOURCE);
		return -1;
	}
	return 0;
}

/*
 * Once per loop iteration (and on flush): deliver held data, send output
 * (coalescing all writes of the iteration), EOF, credit returns, then the
 * write callback and the write timeout.
 */
static void
ch_pump(struct evrdma_channel *ch)
{
	struct evrdma_conn *conn = ch->conn;
	int sent;
	unsigned thresh;

	if (ch->freed || ch->failed || !ch->connected)
		return;
	/* this pass does what a scheduled one would */
	evrdma__work_cancel(ch->base, &ch->pump_work);
	ch->in_pump++;
	/* what the read callback writes or frees is sent below */
	ch->pre_send = 1;
	ch_deliver(ch);
	ch->pre_send = 0;
	if (ch->wopen >= 0 && ch_wopen_settle(ch) < 0)
		goto out;
	if (ch->freed || ch->failed || ch->peer_gone)
		goto out;
	/* one doorbell for everything this pass sends */
	evrdma__conn_cork(conn);
	if (ch->pull_wait && ch_post_pulls(ch) < 0) {
		evrdma__conn_uncork(conn);
		ch_fail(ch, BEV_EVENT_ERROR | BEV_EVENT_READING,
		    EVRDMA_REASON_RESOURCE);
		goto out;
	}
	sent = ch_send_data(ch);
	if (sent >= 0 && ch->shut_wr && !ch->eof_sent &&
	    !evbuffer_get_length(ch->output)) {
		int r = ch_post_ctrl(ch, IMM_EOF, 0);
		if (r < 0)
			sent = -1;
		else
			ch->eof_sent = r;
	}
	thresh = ch->peer_starved ? 1 : (ch->slots / 4 ? ch->slots / 4 : 1);
	if (sent >= 0 && (ch->ret_data >= thresh || ch->ret_ctrl >= 2 ||
	    ch->ret_pull >= (thresh < IMM_PDONE_MAX ? thresh : IMM_PDONE_MAX) ||
	    (ch->peer_starved && ch->ret_pull && !ch->pull_wait &&
	    !ch->pull_out)) &&
	    ch_post_ctrl(ch, IMM_CREDIT, 0) < 0)
		sent = -1;
	evrdma__conn_uncork(conn);
	if (sent < 0 || ch->freed || ch->failed)
		goto out;
	/* the sends are out: now top up the receives, before half of the
	 * spare ones are used */
	if (ch_refill(ch, ch->rq_max - (ch->rq_max - ch->slots - CH_CTRL) / 2)
	    < 0) {
		ch_fail(ch, BEV_EVENT_ERROR | BEV_EVENT_READING,
		    EVRDMA_REASON_RESOURCE);
		goto out;
	}
	if (ch->has_tv_write) {
		if (!evbuffer_get_length(ch->output))
			evrdma__ev_stop(ch->wr_timer);
		else if (sent || !evrdma__ev_pending(ch->wr_timer))
			timer_arm(ch->wr_timer, &ch->tv_write);
	}
	if ((sent || (ch->resv_wanted && ch->sfree > 1)) &&
	    evbuffer_get_length(ch->output) <= ch->wr_lo && ch->writecb) {
		ch->resv_wanted = 0;
		ch->writecb(ch, ch->cbarg);
	}
out:
	ch->in_pump--;
	ch_maybe_destroy(ch);
}

static void
ch_pump_work(struct evrdma__work *w)
{
	ch_pump((struct evrdma_channel *)((char *)w -
	    offsetof(struct evrdma_channel, pump_work)));
}

/* ch_pump() at the end of this poll pass, or at the next iteration. */
static void
ch_schedule(struct evrdma_channel *ch)
{
	if (!ch->freed && !ch->failed && ch->connected)
		evrdma__work_queue(ch->base, &ch->pump_work);
}

/* Output grew (the user added data): send it at the end of the
 * iteration, coalesced with whatever else is written meanwhile. */
static void
ch_output_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct evrdma_channel *ch = arg;

	if (info->n_added && !ch->pre_send)
		ch_schedule(ch);
}

/* Input shrank (the user read): held data may now move in. */
static void
ch_input_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct evrdma_channel *ch = arg;

	if (info->n_deleted && ch->rdeliv < ch->rseq)
		ch_schedule(ch);
}

static void
ch_rd_timeout(void *arg)
{
	struct evrdma_channel *ch = arg;

	ch->enabled &= ~EV_READ;
	ch_event(ch, BEV_EVENT_TIMEOUT | BEV_EVENT_READING);
	ch_maybe_destroy(ch);
}

static void
ch_wr_timeout(void *arg)
{
	struct evrdma_channel *ch = arg;

	if (ch->linger) {
		evrdma__log(EVRDMA_LOG_INFO, "channel %p: the peer did not "
		    "confirm its pulls in time; closing", (void *)ch);
		ch_linger_end(ch);
		ch_maybe_destroy(ch);
		return;
	}
	ch->enabled &= ~EV_WRITE;
	ch_event(ch, BEV_EVENT_TIMEOUT | BEV_EVENT_WRITING);
	ch_maybe_destroy(ch);
}

/* ---- set-up ---- */

static struct evrdma_channel *
ch_alloc(struct evrdma_base *base, int flags)
{
	const struct evrdma_config *cfg = &base->cfg;
	struct evrdma_channel *ch;

	if (flags & ~EVRDMA_CHANNEL_MESSAGE) {
		evrdma__fail(EINVAL, "channel: unknown flags 0x%x", flags);
		return NULL;
	}
	if (cfg->rq_depth < cfg->ch_slots + CH_CTRL ||
	    cfg->sq_depth < cfg->ch_slots + CH_CTRL) {
		evrdma__fail(EINVAL, "channel: queue depths %u/%u are below "
		    "ring slots + %u", cfg->sq_depth, cfg->rq_depth, CH_CTRL);
		return NULL;
	}
	ch = calloc(1, sizeof(*ch));
	if (!ch)
		goto nomem;
	ch->base = base;
	ch->mode = flags & EVRDMA_CHANNEL_MESSAGE;
	ch->enabled = EV_WRITE;
	ch->slots = cfg->ch_slots;
	ch->slot_size = cfg->ch_slot_size;
	ch->max_input = cfg->ch_max_input;
	ch->input = evbuffer_new();
	ch->output = evbuffer_new();
	ch->ring = ch_ring_new(ch, 0);
	/* after the send slots: a pull descriptor for each */
	ch->sring = ch_ring_new(ch, (size_t)ch->slots * PULL_DESC_LEN);
	ch->rlen = calloc(ch->slots, sizeof(*ch->rlen));
	ch->rheld = calloc(ch->slots, 1);
	ch->rstate = calloc(ch->slots, 1);
	ch->rpoff = calloc(ch->slots, sizeof(*ch->rpoff));
	ch->rd_timer = evrdma__ev_timer_new(base, ch_rd_timeout, ch);
	ch->wr_timer = evrdma__ev_timer_new(base, ch_wr_timeout, ch);
	ch->pump_work.fn = ch_pump_work;
	ch->sstate = calloc(ch->slots, 1);
	ch->sfifo = calloc(ch->slots, sizeof(*ch->sfifo));
	ch->spq = calloc(ch->slots, sizeof(*ch->spq));
	if (!ch->input || !ch->output || !ch->ring || !ch->sring ||
	    !ch->rlen || !ch->rheld || !ch->rstate || !ch->rpoff ||
	    !ch->sstate || !ch->sfifo || !ch->spq ||
	    !ch->rd_timer || !ch->wr_timer)
		goto nomem;
	ch->sfree = ch->slots;
	ch->resv = -1;
	ch->wopen = -1;
	if (!evbuffer_add_cb(ch->output, ch_output_cb, ch))
		goto nomem;
	return ch;
nomem:
	if (ch)
		ch_destroy(ch);
	evrdma__fail(ENOMEM, "channel: out of memory");
	return NULL;
}

/* Register the rings, post the receives, encode our handshake. */
static int
ch_prepare(struct evrdma_channel *ch, struct evrdma_conn *conn, uint8_t *hs)
{
	const struct ibv_device_attr *da = &conn->dev->attr;
	size_t ring_len = (size_t)ch->slots * ch->slot_size;

	ch->conn = conn;
	conn->owner = ch;
	conn->drop = ch_drop;
	/* We pull when the device can issue READs and the send queue has
	 * room for them beside our own messages (slots + CH_CTRL at most);
	 * the peer may READ our send ring when the device can answer. */
	ch->pull_cap = conn->sq_depth - ch->slots - CH_CTRL;
	if (ch->pull_cap > ch->slots)
		ch->pull_cap = ch->slots;
	ch->pull_min = da->max_qp_init_rd_atom > 0 && ch->pull_cap ?
	    ch->base->cfg.ch_pull_min : 0;
	ch->rmr = evrdma_mr_reg(conn, ch->ring->mem, ring_len,
	    EVRDMA_ACCESS_REMOTE_WRITE);
	/* with the pull descriptors, which are local only in effect: the
	 * peer's READs are checked against the slots (ch_pull_take) */
	ch->smr = evrdma_mr_reg(conn, ch->sring->mem, ring_len +
	    (size_t)ch->slots * PULL_DESC_LEN, da->max_qp_rd_atom > 0 ?
	    EVRDMA_ACCESS_REMOTE_READ : 0);
	if (!ch->rmr || !ch->smr)
		return -1;
	/* a refill batch of up to a ring's worth where the queue allows */
	ch->rq_max = conn->rq_depth < 2 * ch->slots + CH_CTRL ?
	    conn->rq_depth : 2 * ch->slots + CH_CTRL;
	if (ch_refill(ch, ch->rq_max) < 0)
		return -1;
	hs[0] = CH_MAGIC0;
	hs[1] = CH_MAGIC1;
	hs[2] = CH_VERSION;
	hs[3] = (uint8_t)ch->mode;
	put16(hs + 4, (uint16_t)ch->slots);
	put16(hs + 6, CH_CTRL);
	put32(hs + 8, ch->slot_size);
	put32(hs + 12, ch->rmr->mr->rkey);
	put32(hs + 16, (uint32_t)((uintptr_t)ch->ring->mem >> 32));
	put32(hs + 20, (uint32_t)(uintptr_t)ch->ring->mem);
	/* the pull extension: what we pull, and where the peer may pull
	 * from (rkey 0, address 0: nowhere) */
	put32(hs + 24, ch->pull_min);
	put32(hs + 28, da->max_qp_rd_atom > 0 ? ch->smr->mr->rkey : 0);
	put32(hs + 32, (uint32_t)((uintptr_t)ch->sring->mem >> 32));
	put32(hs + 36, (uint32_t)(uintptr_t)ch->sring->mem);
	return 0;
}

/* The peer's pull extension: whether it pulls (then we leave messages of
 * its size in our send ring, if our device answers READs), and where we
 * may pull from. */
static int
ch_parse_pull(struct evrdma_channel *ch, const uint8_t *p)
{
	uint64_t src = (uint64_t)get32(p + 32) << 32 | get32(p + 36);
	uint64_t src_len = (uint64_t)ch->peer_slots * ch->peer_slot_size;
	uint32_t src_rkey = get32(p + 28);

	if (src + src_len < src)
		return -1;
	if (src_rkey || src) {
		ch->peer_src.addr = src;
		ch->peer_src.len = src_len;
		ch->peer_src.rkey = src_rkey;
	}
	ch->peer_pull_min = get32(p + 24);
	ch->pullable = ch->peer_pull_min && ch->conn->dev &&
	    ch->conn->dev->attr.max_qp_rd_atom > 0;
	return 0;
}

/* Check the peer's handshake; 0, or -1 with an EVRDMA_REJECT_* code. */
static int
ch_parse_peer(struct evrdma_channel *ch, int *code)
{
	size_t len;
	const uint8_t *p = evrdma_conn_get_peer_private_data(ch->conn, &len);
	uint64_t addr;
	unsigned slots, ctrl, size;

	*code = EVRDMA_REJECT_PROTOCOL;
	if (!p || len < CH_HS_LEN || p[0] != CH_MAGIC0 || p[1] != CH_MAGIC1)
		return -1;
	if (p[2] != CH_VERSION) {
		*code = EVRDMA_REJECT_VERSION;
		return -1;
	}
	slots = get16(p + 4);
	ctrl = get16(p + 6);
	size = get32(p + 8);
	addr = (uint64_t)get32(p + 16) << 32 | get32(p + 20);
	if (p[3] != ch->mode || slots < 2 || slots > 4096 || ctrl != CH_CTRL ||
	    size < 64 || size > (4u << 20) || size % 64 ||
	    addr + (uint64_t)slots * size < addr)
		return -1;
	ch->peer_slots = slots;
	ch->peer_slot_size = size;
	ch->peer.addr = addr;
	ch->peer.len = (uint64_t)slots * size;
	ch->peer.rkey = get32(p + 12);
	ch->s_limit = slots;
	ch->ctrl_credits = CH_CTRL;
	if (len >= CH_HS_PULL_LEN)
		return ch_parse_pull(ch, p);
	return 0;
}

static int
ch_pre_connect(struct evrdma_conn *conn, void *arg)
{
	struct evrdma_channel *ch = arg;

	if (ch_prepare(ch, conn, conn->pdata) < 0)
		return -1;
	conn->pdata_len = CH_HS_PULL_LEN;
	return 0;
}

static void
ch_conn_event(struct evrdma_conn *conn, short what, int reason, void *arg)
{
	struct evrdma_channel *ch = arg;
	int code;

	if (ch->linger) {
		/* the peer went away or the connection failed while we
		 * waited for its pulls: nothing more to wait for */
		ch_linger_end(ch);
		ch_maybe_destroy(ch);
		return;
	}
	if (what & EVRDMA_EV_CONNECTED) {
		if (ch_parse_peer(ch, &code) < 0) {
			ch_fail(ch, BEV_EVENT_ERROR, EVRDMA_REASON_PROTOCOL);
			return;
		}
		ch->connected = 1;
		ch_event(ch, BEV_EVENT_CONNECTED);
		ch_schedule(ch);
		ch_maybe_destroy(ch);
		return;
	}
	if (what & EVRDMA_EV_EOF) {
		/* The peer went away. DISCONNECTED may overtake the last data
		 * completions, so EOF waits for the flush of our receives (see
		 * ch_recv_cb); until then and after, held data is still
		 * delivered as the user reads. Nothing more is sent. */
		ch->peer_gone = 1;
		evrdma__ev_stop(ch->wr_timer);
		return;
	}
	ch_fail(ch, BEV_EVENT_ERROR | (ch->connected ? BEV_EVENT_READING : 0),
	    reason);
}

struct evrdma_channel *
evrdma_channel_new(struct evrdma_base *base, int flags)
{
	struct evrdma_channel *ch;

	if (!base) {
		evrdma__fail(EINVAL, "evrdma_channel_new: no base");
		return NULL;
	}
	ch = ch_alloc(base, flags);
	if (!ch)
		return NULL;
	ch->conn = evrdma_conn_new(base, 0);
	if (!ch->conn) {
		int err = errno;
		ch_destroy(ch);
		errno = err;
		return NULL;
	}
	ch->conn->pre_connect = ch_pre_connect;
	ch->conn->owner = ch;
	/* credits guarantee a posted receive: an RNR is a protocol bug and
	 * must fail at once, not stall for retries */
	ch->conn->rnr_retry = 0;
	evrdma_conn_setcb(ch->conn, ch_conn_event, ch);
	return ch;
}

int
evrdma_channel_connect(struct evrdma_channel *ch, const struct sockaddr *sa,
    int socklen)
{
	if (!ch || ch->freed || !ch->conn)
		return evrdma__fail(EINVAL, "no channel");
	return evrdma_conn_connect(ch->conn, sa, socklen);
}

int
evrdma_channel_connect_hostname(struct evrdma_channel *ch,
    struct evdns_base *dns, int family, const char *host, int port)
{
	if (!ch || ch->freed || !ch->conn)
		return evrdma__fail(EINVAL, "no channel");
	return evrdma_conn_connect_hostname(ch->conn, dns, family, host, port);
}

/* ---- passive side (called by listener.c) ---- */

static void
ch_no_accept(struct evrdma_listener *lst, struct evrdma_conn *conn,
    const struct sockaddr *peer, int socklen, void *arg)
{
	/* never called: channel listeners dispatch to ch_accept */
}

struct evrdma_listener *
evrdma_channel_listener_new(struct evrdma_base *base,
    const struct sockaddr *sa, int socklen, int backlog, int flags,
    evrdma_channel_accept_cb cb, void *arg)
{
	struct evrdma_listener *lst;

	if (!cb || (flags & ~EVRDMA_CHANNEL_MESSAGE)) {
		evrdma__fail(EINVAL, "evrdma_channel_listener_new: bad "
		    "argument");
		return NULL;
	}
	lst = evrdma_listener_new(base, sa, socklen, backlog, 0, ch_no_accept,
	    NULL);
	if (!lst)
		return NULL;
	lst->ch_accept = cb;
	lst->ch_arg = arg;
	lst->ch_flags = flags;
	return lst;
}

int
evrdma__channel_passive(struct evrdma_listener *lst, struct evrdma_conn *conn,
    int *code)
{
	struct evrdma_channel *ch = ch_alloc(lst->base, lst->ch_flags);

	*code = EVRDMA_REJECT_RESOURCES;
	if (!ch)
		return -1;
	ch->conn = conn;
	if (ch_parse_peer(ch, code) < 0 ||
	    ch_prepare(ch, conn, conn->accept_pdata) < 0) {
		if (*code != EVRDMA_REJECT_PROTOCOL &&
		    *code != EVRDMA_REJECT_VERSION)
			*code = EVRDMA_REJECT_RESOURCES;
		/* the caller rejects and drops the connection; our receives
		 * (if any) complete as cancelled, then ch is freed */
		conn->owner = ch;
		conn->drop = ch_drop;
		return -1;
	}
	conn->accept_pdata_len = CH_HS_PULL_LEN;
	conn->rnr_retry = 0;	/* see evrdma_channel_new() */
	evrdma_conn_setcb(conn, ch_conn_event, ch);
	return 0;
}

void
evrdma__channel_accepted(struct evrdma_listener *lst, struct evrdma_conn *conn,
    const struct sockaddr *peer, int socklen)
{
	struct evrdma_channel *ch = conn->owner;

	conn->drop = NULL;	/* the user owns it now */
	ch->connected = 1;
	lst->ch_accept(lst, ch, peer, socklen, lst->ch_arg);
	ch_schedule(ch);
}

/* ---- the bufferevent-like interface ---- */

void
evrdma_channel_setcb(struct evrdma_channel *ch, evrdma_channel_data_cb readcb,
    evrdma_channel_data_cb writecb, evrdma_channel_event_cb eventcb,
    void *arg)
{
	ch->readcb = readcb;
	ch->writecb = writecb;
	ch->eventcb = eventcb;
	ch->cbarg = arg;
}

int
evrdma_channel_set_recv_cb(struct evrdma_channel *ch,
    evrdma_channel_recv_cb cb)
{
	if (!ch)
		return evrdma__fail(EINVAL, "no channel");
	ch->recvcb = cb;
	/* data waiting in the ring goes to it at the next pass, if input
	 * is empty by then */
	if (cb && ch->rdeliv < ch->rseq)
		ch_schedule(ch);
	return 0;
}

int
evrdma_channel_enable(struct evrdma_channel *ch, short events)
{
	ch->enabled |= events & (EV_READ | EV_WRITE);
	if ((events & EV_READ) && ch->has_tv_read)
		timer_arm(ch->rd_timer, &ch->tv_read);
	ch_schedule(ch);
	return 0;
}

int
evrdma_channel_disable(struct evrdma_channel *ch, short events)
{
	ch->enabled &= ~(events & (EV_READ | EV_WRITE));
	if (events & EV_READ)
		evrdma__ev_stop(ch->rd_timer);
	if (events & EV_WRITE)
		evrdma__ev_stop(ch->wr_timer);
	return 0;
}

short
evrdma_channel_get_enabled(struct evrdma_channel *ch)
{
	return ch->enabled;
}

struct evbuffer *
evrdma_channel_get_input(struct evrdma_channel *ch)
{
	return ch->input;
}

struct evbuffer *
evrdma_channel_get_output(struct evrdma_channel *ch)
{
	return ch->output;
}

size_t
evrdma_channel_max_message(struct evrdma_channel *ch)
{
	return ch->peer_slot_size ? ch_chunk(ch) : ch->slot_size;
}

static int
ch_check_write(struct evrdma_channel *ch, size_t len)
{
	if (!ch || ch->freed)
		return evrdma__fail(EINVAL, "no channel");
	if (ch->shut_wr || ch->failed || ch->peer_gone)
		return evrdma__fail(EPIPE, "channel is shut down, closed by "
		    "the peer or failed");
	if (ch->mode == EVRDMA_CHANNEL_MESSAGE &&
	    (len == 0 || len > evrdma_channel_max_message(ch)))
		return evrdma__fail(len ? EMSGSIZE : EINVAL, "message of %zu "
		    "bytes (1..%zu)", len, evrdma_channel_max_message(ch));
	return 0;
}

/*
 * Copy a write straight into a free send slot and put the slot in output
 * by reference, so that sending it needs no second copy. Small writes
 * behind others are left to evbuffer (and coalesced with them when sent);
 * a small write into an empty output is staged too: the common request
 * and reply, sent alone. One slot always stays for the copy path, which
 * must make progress when staged data does not fit a message.
 */
static int
ch_stage(struct evrdma_channel *ch, const void *data, size_t len)
{
	int idx;

	if ((len < STAGE_MIN && evbuffer_get_length(ch->output)) ||
	    len > ch_chunk(ch) || !ch->sstate)
		return -1;
	idx = ch_slot_copy(ch, data, len);
	if (idx < 0)
		return -1;
	if (ch_slot_stage(ch, ch->output, (unsigned)idx, len) < 0) {
		ch_slot_release(ch, (unsigned)idx);
		return -1;
	}
	return 0;
}

void *
evrdma_channel_reserve(struct evrdma_channel *ch, size_t len)
{
	int idx;

	if (ch_check_write(ch, len) < 0)
		return NULL;
	if (!ch->connected) {
		evrdma__fail(ENOTCONN, "channel not connected");
		return NULL;
	}
	if (len == 0 || len > ch_chunk(ch)) {
		evrdma__fail(len ? EMSGSIZE : EINVAL, "reservation of %zu "
		    "bytes (1..%zu)", len, ch_chunk(ch));
		return NULL;
	}
	/* a new reservation replaces an uncommitted one */
	if (ch->resv >= 0) {
		idx = ch->resv;
	} else {
		/* one slot stays for the copy path, as for staged writes */
		idx = ch_slot_alloc(ch, 1);
		if (idx < 0) {
			/* the write callback tells when one is free */
			ch->resv_wanted = 1;
			evrdma__fail(EAGAIN, "no free send slot (all in "
			    "flight or holding output)");
			return NULL;
		}
		ch->sstate[idx] = SLOT_RESERVED;
		ch->resv = idx;
	}
	ch->resv_len = len;
	return ch->sring->mem + (size_t)idx * ch->slot_size;
}

int
evrdma_channel_commit(struct evrdma_channel *ch, size_t len)
{
	unsigned idx;

	if (!ch || ch->freed)
		return evrdma__fail(EINVAL, "no channel");
	if (ch->resv < 0)
		return evrdma__fail(EINVAL, "nothing reserved");
	if (len > ch->resv_len)
		return evrdma__fail(EINVAL, "commit of %zu bytes exceeds the "
		    "reserved %zu", len, ch->resv_len);
	idx = (unsigned)ch->resv;
	ch->resv = -1;
	if (len == 0 || ch_check_write(ch, len) < 0) {
		int err = errno;

		ch_slot_release(ch, idx);
		if (len == 0)
			return 0;
		errno = err;
		return -1;
	}
	if (ch->mode == EVRDMA_CHANNEL_MESSAGE &&
	    lenq_push(&ch->out_msgs, len) < 0) {
		ch_slot_release(ch, idx);
		return evrdma__fail(ENOMEM, "out of memory");
	}
	if (ch_slot_stage(ch, ch->output, idx, len) < 0) {
		ch_slot_release(ch, idx);
		if (ch->mode == EVRDMA_CHANNEL_MESSAGE)
			ch->out_msgs.count--;
		return evrdma__fail(ENOMEM, "out of memory");
	}
	return 0;
}

int
evrdma_channel_write(struct evrdma_channel *ch, const void *data, size_t len)
{
	if (ch_check_write(ch, len) < 0)
		return -1;
	if (ch_write_open(ch, data, len) == 0)
		return 0;
	if (ch->mode == EVRDMA_CHANNEL_MESSAGE &&
	    lenq_push(&ch->out_msgs, len) < 0)
		return evrdma__fail(ENOMEM, "out of memory");
	if (ch_stage(ch, data, len) == 0)
		return 0;
	if (evbuffer_add(ch->output, data, len) < 0) {
		if (ch->mode == EVRDMA_CHANNEL_MESSAGE)
			ch->out_msgs.count--;
		return evrdma__fail(ENOMEM, "out of memory");
	}
	return 0;
}

int
evrdma_channel_write_buffer(struct evrdma_channel *ch, struct evbuffer *buf)
{
	size_t len = buf ? evbuffer_get_length(buf) : 0;

	if (!buf)
		return evrdma__fail(EINVAL, "no buffer");
	if (ch_check_write(ch, len) < 0)
		return -1;
	if (ch->mode == EVRDMA_CHANNEL_MESSAGE &&
	    lenq_push(&ch->out_msgs, len) < 0)
		return evrdma__fail(ENOMEM, "out of memory");
	if (evbuffer_add_buffer(ch->output, buf) < 0) {
		if (ch->mode == EVRDMA_CHANNEL_MESSAGE)
			ch->out_msgs.count--;
		return evrdma__fail(ENOMEM, "out of memory");
	}
	return 0;
}

size_t
evrdma_channel_read(struct evrdma_channel *ch, void *data, size_t len)
{
	int n = evbuffer_remove(ch->input, data, len);

	return n > 0 ? (size_t)n : 0;
}

ssize_t
evrdma_channel_read_message(struct evrdma_channel *ch, void *data, size_t len)
{
	size_t n;

	if (ch->mode != EVRDMA_CHANNEL_MESSAGE) {
		evrdma__fail(EINVAL, "not a message channel");
		return -1;
	}
	if (!ch->in_msgs.count) {
		evrdma__fail(EAGAIN, "no message");
		return -1;
	}
	n = lenq_front(&ch->in_msgs);
	if (!data)
		return (ssize_t)n;
	if (len < n) {
		evrdma__fail(EMSGSIZE, "message of %zu bytes, buffer %zu", n,
		    len);
		return -1;
	}
	lenq_pop(&ch->in_msgs);
	evbuffer_remove(ch->input, data, n);
	return (ssize_t)n;
}

void
evrdma_channel_setwatermark(struct evrdma_channel *ch, short events,
    size_t lowmark, size_t highmark)
{
	if (events & EV_READ) {
		ch->rd_lo = lowmark;
		ch->rd_hi = highmark;
		ch_schedule(ch);
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
	ch->has_tv_read = tv_read != NULL;
	if (tv_read)
		ch->tv_read = *tv_read;
	ch->has_tv_write = tv_write != NULL;
	if (tv_write)
		ch->tv_write = *tv_write;
	if (ch->has_tv_read && (ch->enabled & EV_READ) && ch->connected)
		timer_arm(ch->rd_timer, &ch->tv_read);
	else if (!ch->has_tv_read)
		evrdma__ev_stop(ch->rd_timer);
	if (!ch->has_tv_write)
		evrdma__ev_stop(ch->wr_timer);
	return 0;
}

int
evrdma_channel_flush(struct evrdma_channel *ch)
{
	if (!ch || ch->freed || ch->failed || ch->peer_gone)
		return evrdma__fail(EPIPE, "channel is closed or failed");
	ch_pump(ch);
	return 0;
}

int
evrdma_channel_shutdown(struct evrdma_channel *ch)
{
	if (!ch || ch->freed || ch->failed || ch->shut_wr || ch->peer_gone)
		return evrdma__fail(EPIPE, "channel already shut down, closed "
		    "or failed");
	ch->shut_wr = 1;
	ch_schedule(ch);
	return 0;
}

int
evrdma_channel_get_error(struct evrdma_channel *ch)
{
	return ch->error;
}
