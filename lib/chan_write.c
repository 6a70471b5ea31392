/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the channel's RDMA transport: the application's writes straight
 * into send slots (rc->wr, this file's): the read callbacks' open write,
 * large writes staged in slots and the spill, reservations; what goes to
 * output otherwise.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "chan_tx.h"
#include "chan_write.h"

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
rc_write_open(struct ch_rdma *rc, const void *data, size_t len)
{
	struct evrdma_channel *ch = &rc->ch;
	int idx;

	/* (output's length read, not its count: inside an application's
	 * callback on output, the addition it runs for is not counted yet,
	 * and this write would go before it: review r43) */
	if (!(rc->st & RC_PRE_SEND) || evrdma__chan_out_len(ch) || evrdma__chan_base(ch)->cfg.slow_path ||
	    evbuffer_get_length(evrdma__chan_output(ch)))
		return -1;
	if (rc->wr.wopen >= 0) {
		if (evrdma__chan_messages(ch) ||
		    len > rc_chunk(rc) - rc->wr.wopen_len)
			return -1;
		memcpy(slot_mem(rc, (unsigned)rc->wr.wopen) + rc->wr.wopen_len, data,
		    len);
		rc->wr.wopen_len += len;
		return 0;
	}
	if (!rc_up(rc) || !evrdma__chan_writing(ch) ||
	    !evrdma__ch_can_send(rc->cr.s) || len > rc_chunk(rc) ||
	    (rc->sp.busy && rc->sq.data >= rc->slots))
		return -1;
	idx = evrdma__slot_copy(rc, data, len);
	if (idx < 0)
		return -1;
	evrdma__slot_mark(rc, (unsigned)idx, SLOT_OPEN);
	rc->wr.wopen = idx;
	rc->wr.wopen_len = len;
	return 0;
}

/* Writing was disabled with a write open: put it in front of output. */
static int
rc_wopen_to_output(struct ch_rdma *rc)
{
	struct evrdma_channel *ch = &rc->ch;
	struct evbuffer *tmp = evbuffer_new();
	int rc_;

	if (!tmp)
		return -1;
	if (evrdma__tx_stage(rc, tmp, (unsigned)rc->wr.wopen, rc->wr.wopen_len) < 0) {
		evbuffer_free(tmp);
		return -1;
	}
	rc_ = evrdma__chan_output_unget(ch, tmp, rc->wr.wopen_len);
	rc->wr.wopen = -1;
	evbuffer_free(tmp);	/* if the prepend failed, frees the slot */
	return rc_;
}

/* Drop the open write and the reservation (the channel is going or the
 * connection is over). */
void
evrdma__rc_drop_pending_writes(struct ch_rdma *rc)
{
	if (rc->wr.wopen >= 0) {
		evrdma__slot_drop(rc, (unsigned)rc->wr.wopen, rc->wr.wopen_len);
		rc->wr.wopen = -1;
	}
	if (rc->wr.resv >= 0) {
		evrdma__slot_drop(rc, (unsigned)rc->wr.resv, rc->wr.resv_max);
		rc->wr.resv = -1;
	}
}

/*
 * The open write is sent by this pass, unless the connection is over (it
 * goes as unsent output does) or writing was disabled since (it goes to
 * the front of output, to wait there).
 */
void
evrdma__rc_wopen_settle(struct ch_rdma *rc)
{
	if (rc->st & RC_CLOSING)
		return;		/* (kept only when taken: out_taken) */
	if (!rc_up(rc)) {
		evrdma__slot_drop(rc, (unsigned)rc->wr.wopen, rc->wr.wopen_len);
		rc->wr.wopen = -1;
		return;
	}
	if (!evrdma__chan_writing(&rc->ch) && rc_wopen_to_output(rc) < 0) {
		if (rc->wr.wopen >= 0) {
			evrdma__slot_drop(rc, (unsigned)rc->wr.wopen,
			    rc->wr.wopen_len);
			rc->wr.wopen = -1;
		}
		evrdma__rc_fail(rc, EVRDMA_REASON_RESOURCE);
	}
}

/*
 * A write larger than a slot, in stream mode: as many whole slots of it as
 * are free (one stays for the copy path) are copied there and staged, as
 * much of the rest as the spill takes goes to chunks of it (chan_spill.c),
 * and what is left to output behind them. The bytes of a large write are
 * then copied once, not into output and again into a slot (a 1 MiB write
 * went at 60% of a 64 KiB one's speed). All or nothing, as
 * bufferevent_write(): the pieces are gathered in a buffer of their own
 * and moved to output whole (moving chains allocates nothing), so memory
 * that runs out part-way leaves output as it was and the staged slots and
 * chunks free again (when they were put in output directly, a failed write
 * had sent its first slots, and a caller that retried sent them twice:
 * test_chan_stream's channel_write_out_of_memory). -1 when neither a slot
 * nor the spill has room, or memory ran out: the caller's copy into output
 * is then the write.
 */
static int
rc_write_large(struct ch_rdma *rc, const uint8_t *p, size_t len)
{
	struct evbuffer *tmp;
	size_t chunk = rc_chunk(rc), fit;
	int spill;

	fit = rc->tx.nfree > 1 ? (size_t)(rc->tx.nfree - 1) * chunk : 0;
	/* The spill takes what the slots cannot, within its limit, when its
	 * chunks are there already or that is a quarter of the ring or more:
	 * a smaller rest costs less copied twice than registered (a chunk
	 * registered and given back per 1 MiB ping-pong made its round trip
	 * 7% slower, bench/README.md) */
	spill = len > fit && rc_up(rc) && chunk >= RC_SPILL_CHUNK_MIN &&
	    rc->sp.busy * chunk < RC_SPILL_MAX &&
	    (rc->sp.busy || len - fit >= RC_SPILL_MIN(rc) * chunk);
	if ((!fit && !spill) || !(tmp = evbuffer_new()))
		return -1;
	while (len && rc->tx.nfree > 1) {
		size_t n = len < chunk ? len : chunk;
		int idx = evrdma__slot_copy(rc, p, n);

		if (idx < 0)
			break;
		if (evrdma__tx_stage(rc, tmp, (unsigned)idx, n) < 0) {
			evrdma__slot_drop(rc, (unsigned)idx, n);
			goto fail;
		}
		p += n;
		len -= n;
	}
	if (spill && len) {
		size_t n = evrdma__spill_write(rc, tmp, p, len);

		p += n;
		len -= n;
	}
	if ((len && evbuffer_add(tmp, p, len) < 0) ||
	    evbuffer_add_buffer(evrdma__chan_output(&rc->ch), tmp) < 0)
		goto fail;
	evbuffer_free(tmp);
	return 0;
fail:
	evbuffer_free(tmp);	/* (its staged slots and chunks free again) */
	return -1;
}

/*
 * Copy a write straight into a free send slot and put the slot in output
 * by reference, so that sending it needs no second copy. Small writes
 * behind others are left to evbuffer (and coalesced with them when sent);
 * a small write into an empty output is staged too: the common request
 * and reply, sent alone. One slot always stays for the copy path, which
 * must make progress when staged data does not fit a message.
 */
static __attribute__((noinline)) int
rc_write_slot(struct ch_rdma *rc, const void *data, size_t len)
{
	struct evrdma_channel *ch = &rc->ch;
	int idx;

	if (len > rc_chunk(rc) && !evrdma__chan_messages(ch) &&
	    !(rc->st & RC_CLOSING) && !evrdma__chan_base(ch)->cfg.slow_path)
		return rc_write_large(rc, data, len);
	if ((len < STAGE_MIN && evrdma__chan_out_len(ch)) ||
	    len > rc_chunk(rc) || (rc->st & RC_CLOSING))
		return -1;
	idx = evrdma__slot_copy(rc, data, len);
	if (idx < 0)
		return -1;
	if (evrdma__tx_stage(rc, evrdma__chan_output(ch), (unsigned)idx, len) < 0) {
		evrdma__slot_drop(rc, (unsigned)idx, len);
		return -1;
	}
	return 0;
}

/* (the open write inline, the rest apart: this runs for every reply,
 * and the rest's registers cost its entry and exit 5 instructions more
 * per 64 B round trip, callgrind) */
int
evrdma__op_write(struct evrdma_channel *ch, const void *data, size_t len)
{
	struct ch_rdma *rc = to_rc(ch);

	if (rc_write_open(rc, data, len) == 0)
		return 0;
	return rc_write_slot(rc, data, len);
}

void *
evrdma__op_reserve(struct evrdma_channel *ch, size_t len)
{
	struct ch_rdma *rc = to_rc(ch);
	int idx;

	if (!(rc->st & RC_EST)) {
		evrdma__fail(ENOTCONN, "channel not connected");
		return NULL;
	}
	if (len == 0 || len > rc_chunk(rc)) {
		evrdma__fail(len ? EMSGSIZE : EINVAL, "reservation of %zu "
		    "bytes (1..%zu)", len, rc_chunk(rc));
		return NULL;
	}
	/* a new reservation replaces an uncommitted one */
	if (rc->wr.resv >= 0) {
		idx = rc->wr.resv;
	} else {
		/* one slot stays for the copy path, as for staged writes */
		idx = evrdma__slot_alloc(rc, 1);
		if (idx < 0) {
			/* the write callback tells when one is free */
			rc_set(rc, RC_RESV_WANTED);
			evrdma__fail(EAGAIN, "no free send slot (all in "
			    "flight or holding output)");
			return NULL;
		}
		evrdma__slot_mark(rc, (unsigned)idx, SLOT_RESERVED);
		rc->wr.resv = idx;
		rc->wr.resv_max = 0;
	}
	rc->wr.resv_len = len;
	if (len > rc->wr.resv_max)
		rc->wr.resv_max = len;
	return slot_mem(rc, (unsigned)idx);
}

int
evrdma__op_commit(struct evrdma_channel *ch, size_t len)
{
	struct ch_rdma *rc = to_rc(ch);
	unsigned idx;

	if (rc->wr.resv < 0)
		return evrdma__fail(EINVAL, "nothing reserved");
	if (len > rc->wr.resv_len)
		return evrdma__fail(EINVAL, "commit of %zu bytes exceeds the "
		    "reserved %zu", len, rc->wr.resv_len);
	idx = (unsigned)rc->wr.resv;
	rc->wr.resv = -1;
	if (len == 0) {
		evrdma__slot_drop(rc, idx, rc->wr.resv_max);
		return 0;
	}
	if (evrdma__chan_shut_wr(ch)) {
		evrdma__slot_drop(rc, idx, rc->wr.resv_max);
		return evrdma__fail(EPIPE, "channel is shut down");
	}
	/* what was written past @p len is not sent either */
	if (rc->wr.resv_max > len)
		memset(slot_mem(rc, idx) + len, 0, rc->wr.resv_max - len);
	if (evrdma__tx_stage(rc, evrdma__chan_output(ch), idx, len) < 0) {
		evrdma__slot_drop(rc, idx, len);
		return evrdma__fail(ENOMEM, "out of memory");
	}
	return 0;
}

void
evrdma__wr_init(struct ch_rdma *rc)
{
	rc->wr.resv = -1;
	rc->wr.wopen = -1;
}

/* An uncommitted reservation goes (the channel is freed): its slot,
 * zeroed, is free again. */
void
evrdma__wr_drop_resv(struct ch_rdma *rc)
{
	if (rc->wr.resv >= 0) {
		evrdma__slot_drop(rc, (unsigned)rc->wr.resv, rc->wr.resv_max);
		rc->wr.resv = -1;
	}
}

/* The process exits: the open write's bytes stay where they are (user
 * space, lost), the slot with them. */
void
evrdma__wr_forget_open(struct ch_rdma *rc)
{
	rc->wr.wopen = -1;
}
