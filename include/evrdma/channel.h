/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: channels, the bufferevent of RDMA.
 */
#ifndef EVRDMA_CHANNEL_H_INCLUDED_
#define EVRDMA_CHANNEL_H_INCLUDED_

/** @file evrdma/channel.h
 * A channel is an RDMA connection carrying evrdma's channel protocol, with
 * the programming model of libevent's bufferevent: an input and an output
 * evbuffer, read / write / event callbacks, enable/disable, watermarks,
 * timeouts, flush and free. Moving a bufferevent-over-TCP program to RDMA
 * mostly means replacing bufferevent_* calls with evrdma_channel_* calls.
 *
 * Semantics (as a socket bufferevent's; the test suite runs the same
 * scenarios on both and compares the callbacks):
 *  - the read callback runs after new data, when input holds at least the
 *    read low watermark (default 0: any data). Input takes at most the
 *    read high watermark (default 0: unlimited): a stream is cut there, as
 *    a socket read of that many bytes would cut it, and the rest waits,
 *    holding the peer back by flow control, never by dropping data;
 *  - the write callback runs when output drains to its write low watermark
 *    (default 0) after data was sent, and once each time EV_WRITE is
 *    enabled while connected (a socket is writable then);
 *  - the read timeout counts while EV_READ is enabled and input is below
 *    the high watermark, from the last arrival; the write timeout while
 *    EV_WRITE is enabled and output holds bytes, from the last send. Either
 *    disables its direction and reports BEV_EVENT_TIMEOUT with it. Timeouts
 *    keep microseconds;
 *  - the event callback gets BEV_EVENT_CONNECTED, BEV_EVENT_EOF,
 *    BEV_EVENT_ERROR or BEV_EVENT_TIMEOUT, combined with BEV_EVENT_READING
 *    or BEV_EVENT_WRITING where a direction applies;
 *  - a new channel has EV_WRITE enabled and EV_READ disabled; enable
 *    EV_READ to receive.
 *
 * The end of the stream is reported once per direction, after the data,
 * by the rule a socket's kernel follows (a FIN or a reset):
 *  - BEV_EVENT_EOF | BEV_EVENT_READING when the peer ended in order, once
 *    every byte it sent is in input: it shut down (evrdma_channel_shutdown())
 *    or was freed with nothing of ours left unread, or its process ended
 *    (exit(), a return from main: evrdma ends every connection then, as
 *    the kernel does a socket's), or it disconnected (killed) after every
 *    message we sent was consumed (its credits came back);
 *  - BEV_EVENT_ERROR | BEV_EVENT_READING, with evrdma_channel_get_error(),
 *    when the connection ended otherwise, also after the data that did
 *    arrive: the peer was freed (or exited) with bytes it never read
 *    (EVRDMA_REASON_DISCONNECTED: it said so, as a reset), it was killed
 *    with a message of ours not consumed, its host went away or stopped
 *    answering (_PEER_DEAD), it broke the protocol (_PROTOCOL), its own
 *    failure (its reset), a transport error of ours;
 *  - BEV_EVENT_ERROR | BEV_EVENT_WRITING when the connection is over and
 *    output holds bytes (written before or after), as a socket's write
 *    fails; this can follow an EOF | READING (the peer shut down, then
 *    went away). Writes are still accepted, as bufferevent_write() accepts
 *    them: they wait in output.
 * With BEV_EVENT_ERROR errno says why, as after a socket's: ECONNRESET
 * (the peer reset or went), EPIPE (a write after that), ETIMEDOUT,
 * EPROTO, EHOSTUNREACH, ENOMEM...
 * Where a socket cannot know and a channel can, the channel says so: once
 * the connection is over, the end is reported even with EV_READ disabled
 * and nothing to write, unless received bytes still wait to be read
 * (then it comes after them, when reading is enabled).
 * Where a channel cannot know and a socket's kernel does: a peer killed
 * (no library ran to end its connection) is judged by its credits. One
 * killed within 20 ms of reading our last bytes had not returned their
 * credits yet (they go with its next message, or after 20 ms without
 * traffic): ERROR, where a socket peer's kernel would send a FIN; one
 * killed with small messages of ours copied into its input but unread
 * had returned them: EOF, where a kernel would reset.
 *
 * Modes: EVRDMA_CHANNEL_STREAM (ordered bytes, like TCP) and
 * EVRDMA_CHANNEL_MESSAGE (each evrdma_channel_write(), and each addition
 * to output, is one message that arrives whole; read it with
 * evrdma_channel_read_message()). A message is at most
 * evrdma_channel_max_message() bytes; larger ones fail with EMSGSIZE at
 * the sender. Before the connection is up the limit is the local slot
 * size; if the peer's slots are smaller, a message queued before that
 * which does not fit them fails the channel (BEV_EVENT_ERROR |
 * BEV_EVENT_WRITING, reason EVRDMA_REASON_RESOURCE). In message mode the
 * high watermark admits whole messages only (and one past it into an
 * empty input); draining a message channel's output directly would cut
 * messages apart, so it ends the channel (BEV_EVENT_ERROR, reason
 * EVRDMA_REASON_MISUSE), and input drained other than by
 * evrdma_channel_read_message() makes that call fail with EBADMSG until
 * input has been emptied.
 *
 * Flow control and safety (doc/channel-protocol.md, doc/SECURITY.md): each
 * side posts receives into buffers registered for local writes only, and
 * grants its peer one credit per buffer; a message is a SEND into the next
 * one (or, for large messages, a descriptor the receiver uses to pull the
 * bytes with an RDMA READ from the sender's send ring, see
 * evrdma_config_set_channel_pull()). A receiver that does not read holds
 * the sender back, and no receive is ever missing (no RNR). Nothing of a
 * channel is writable by the peer, and a receive buffer is not posted
 * again before the application has drained it, so received bytes never
 * change after delivery. Received bytes enter input by reference
 * (zero-copy) and the buffer returns to the pool, and a credit to the
 * sender, when the user drains them; messages under 1 KiB are copied
 * instead (cheaper than a reference) while input holds less than
 * max_input. Memory per channel is fixed by
 * evrdma_config_set_channel_ring(): (slots + 8) * slot_size for receiving
 * (the slots, 4 control credits and up to 4 spare buffers), slots *
 * slot_size for sending, plus at most max_input bytes copied (small
 * messages, and any when the user holds more than half of the slots).
 */

#include <sys/socket.h>
#include <sys/time.h>
#include <evrdma/util.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evrdma_base;
struct evrdma_listener;
struct evdns_base;
struct evrdma_config;

/** An opaque channel. */
struct evrdma_channel;

/** Stream mode: ordered bytes. */
#define EVRDMA_CHANNEL_STREAM	0x00
/** Message mode: each write is one message with its boundary. A bit above
 * libevent's LEV_OPT_* flags, with which evrdma_channel_listener_new()
 * takes it (evrdma/listener.h). */
#define EVRDMA_CHANNEL_MESSAGE	0x10000

/** Read or write callback (as bufferevent_data_cb). */
typedef void (*evrdma_channel_data_cb)(struct evrdma_channel *ch, void *arg);
/** Event callback (as bufferevent_event_cb); @p what is BEV_EVENT_* flags. */
typedef void (*evrdma_channel_event_cb)(struct evrdma_channel *ch, short what,
    void *arg);
/**
 * Receive callback (evrdma_channel_set_recv_cb()): @p len bytes at @p data,
 * in the channel's registered receive memory, valid until it returns.
 */
typedef void (*evrdma_channel_recv_cb)(struct evrdma_channel *ch,
    const void *data, size_t len, void *arg);
/** Accept callback of a channel listener; the callback owns @p ch. */
typedef void (*evrdma_channel_accept_cb)(struct evrdma_listener *lst,
    struct evrdma_channel *ch, const struct sockaddr *peer, int socklen,
    void *arg);

/**
 * Create an unconnected channel.
 * @param flags EVRDMA_CHANNEL_STREAM or EVRDMA_CHANNEL_MESSAGE
 * @return the channel, or NULL with errno EINVAL or ENOMEM
 */
EVRDMA_EXPORT struct evrdma_channel *evrdma_channel_new(
    struct evrdma_base *base, int flags);

/** Connect to @p sa; the outcome reaches the event callback
 * (BEV_EVENT_CONNECTED, or BEV_EVENT_ERROR with evrdma_channel_get_error()).
 * @return 0, or -1 with errno as evrdma_conn_connect() */
EVRDMA_EXPORT int evrdma_channel_connect(struct evrdma_channel *ch,
    const struct sockaddr *sa, int socklen);

/** Resolve @p host (see evrdma_conn_connect_hostname()) and connect. */
EVRDMA_EXPORT int evrdma_channel_connect_hostname(struct evrdma_channel *ch,
    struct evdns_base *dns, int family, const char *host, int port);

/**
 * Listen for channels, as evrdma_listener_new() (whose flags, backlog and
 * error callback apply, evrdma/listener.h).
 * @param base the evrdma base
 * @param cb the accept callback, required
 * @param arg its argument, and the error callback's
 * @param flags LEV_OPT_* flags or-ed with the channels' mode,
 *   EVRDMA_CHANNEL_STREAM or EVRDMA_CHANNEL_MESSAGE; peers must use the
 *   same mode
 * @param backlog connect requests that may wait, or -1 for the default
 * @param sa IPv4 or IPv6 address to bind; port 0 picks one
 * @param socklen its length
 * @return a listener (free with evrdma_listener_free()), or NULL with errno
 *   as evrdma_listener_new() (EINVAL also for EVRDMA_LISTEN_RAW)
 */
EVRDMA_EXPORT struct evrdma_listener *evrdma_channel_listener_new(
    struct evrdma_base *base, evrdma_channel_accept_cb cb, void *arg,
    int flags, int backlog, const struct sockaddr *sa, int socklen);

/** Set the callbacks (any may be NULL) and their argument. */
EVRDMA_EXPORT void evrdma_channel_setcb(struct evrdma_channel *ch,
    evrdma_channel_data_cb readcb, evrdma_channel_data_cb writecb,
    evrdma_channel_event_cb eventcb, void *arg);

/**
 * Receive without input: while @p cb is set and input is empty, data that
 * arrives is handed to @p cb (with the setcb() argument) straight from the
 * receive slot it landed in, with no copy and no evbuffer, and the slot
 * goes back to the peer when @p cb returns. In message mode each call is
 * one whole message; in stream mode one arrival, cut wherever the sender's
 * writes were cut (as a read() of a socket). Data that arrives while input
 * holds bytes goes to input, in order, and the read callback as usual;
 * once input is empty again, the next arrival goes to @p cb. EV_READ still
 * gates delivery (disabled, data waits in the ring and the peer is held
 * back), the read timeout still counts from the last arrival, and EOF
 * comes after the last call. The read watermarks apply to input only.
 * @p cb may write, disable, set another callback or free the channel.
 * Replies that @p cb (or the read callback) writes go out in the same
 * pass, see evrdma_channel_write().
 * @param cb the callback, or NULL to receive into input again
 * @return 0, or -1 with errno EINVAL (no channel)
 */
EVRDMA_EXPORT int evrdma_channel_set_recv_cb(struct evrdma_channel *ch,
    evrdma_channel_recv_cb cb);

/** Enable EV_READ and/or EV_WRITE. Enabling EV_WRITE while connected
 * gives one write callback (when output is at or below its low watermark),
 * as a writable socket does. @return 0, or -1 with errno EINVAL (no
 * channel) */
EVRDMA_EXPORT int evrdma_channel_enable(struct evrdma_channel *ch,
    short events);
/** Disable EV_READ and/or EV_WRITE. @return 0, or -1 with errno EINVAL */
EVRDMA_EXPORT int evrdma_channel_disable(struct evrdma_channel *ch,
    short events);
/** @return the enabled events */
EVRDMA_EXPORT short evrdma_channel_get_enabled(struct evrdma_channel *ch);

/** @return the input buffer (owned by the channel). In message mode use
 * evrdma_channel_read_message() instead of draining it directly. Input
 * that refuses arriving bytes (its end frozen with evbuffer_freeze())
 * ends the channel (EVRDMA_REASON_MISUSE), as a socket bufferevent's
 * failed read does. */
EVRDMA_EXPORT struct evbuffer *evrdma_channel_get_input(
    struct evrdma_channel *ch);
/** @return the output buffer (owned by the channel); data added to it is
 * sent. In message mode each addition (evbuffer_add(),
 * evbuffer_add_buffer(), ...) is one message; draining it directly, or
 * an addition larger than evrdma_channel_max_message(), ends the channel
 * (EVRDMA_REASON_MISUSE), and evbuffer_prepend() on it cuts
 * messages wrongly. An evbuffer callback of yours on it runs before the
 * channel's: a message it adds there, inside another addition, comes
 * after that one when that one was made by evrdma_channel_write() or
 * evrdma_channel_write_buffer(); inside an addition made directly its
 * place is unknown, and that ends the channel (EVRDMA_REASON_MISUSE).
 * evbuffer_add_buffer() onto output from a buffer whose own callbacks
 * add to output makes one message of both (libevent reports them as one
 * addition): evrdma_channel_write_buffer() keeps them apart. In both
 * modes output's callbacks must run as it changes, for the channel to
 * know what it sent: freezing output's front (evbuffer_freeze(out, 1))
 * or evbuffer_defer_callbacks() on it ends the channel
 * (EVRDMA_REASON_MISUSE) when it next sends, and none of what output
 * holds is sent; the deprecated evbuffer_setcb() removes the channel's
 * own callbacks, on output and on input, as on a socket bufferevent's:
 * output's bytes then wait unsent, and bytes held back for input's room
 * come only at the next arrival or enable. */
EVRDMA_EXPORT struct evbuffer *evrdma_channel_get_output(
    struct evrdma_channel *ch);

/**
 * Queue @p len bytes for sending (copied). Writes made during one loop
 * iteration are coalesced (stream mode) and sent when the loop continues.
 * In message mode the bytes are one message.
 *
 * Written from the read or receive callback into an empty output, with a
 * credit of the peer at hand, the bytes are copied straight into a send
 * slot (with those written after them there, while they fit, in stream
 * mode) and posted when the callback returns, without passing through
 * output: output's length does not count them, and draining output does
 * not take them back. Everything else about them is as for output: they
 * go in order, before what output holds; if writing is disabled before
 * the callback returns, they wait at the front of output; freeing the
 * channel before the callback returns discards them.
 *
 * As bufferevent_write(), writing zero bytes does nothing (stream mode),
 * and writing after the connection is over is accepted: the bytes wait in
 * output, and BEV_EVENT_ERROR | BEV_EVENT_WRITING tells that they cannot
 * go.
 * All or nothing: after -1, no byte of @p data is written.
 * @return 0, or -1 with errno EINVAL (no channel, no data, an empty
 *   message, or more than EV_SSIZE_MAX bytes, as evbuffer_add() refuses),
 *   EMSGSIZE (message too large), EPIPE (after our own
 *   evrdma_channel_shutdown()) or ENOMEM
 */
EVRDMA_EXPORT int evrdma_channel_write(struct evrdma_channel *ch,
    const void *data, size_t len);
/**
 * Zero-copy write, in two steps like evbuffer_reserve_space() and
 * evbuffer_commit_space(): reserve returns @p len bytes of the channel's
 * registered send memory (a free send slot) for the caller to fill, and
 * evrdma_channel_commit() queues the filled bytes. They are then sent from
 * where they are, with no copy: as one message in message mode, and in
 * stream mode as a message of their own when they fill at least half of
 * one (smaller commits are coalesced with the rest of output, by copy).
 * Committed bytes are part of output like written ones (watermarks,
 * drains, free). At most one reservation is open; reserving again
 * replaces it (same memory, new length). The memory stays valid until
 * the commit, a new reservation, or evrdma_channel_free().
 * @param len 1..evrdma_channel_max_message() bytes
 * @return the memory, or NULL with errno ENOTCONN (not connected yet:
 *   use evrdma_channel_write()), EAGAIN (every send slot is in flight or
 *   holds output: the write callback runs when one is free again and
 *   output is at or below its low watermark), EMSGSIZE, EINVAL, EPIPE
 */
EVRDMA_EXPORT void *evrdma_channel_reserve(struct evrdma_channel *ch,
    size_t len);
/**
 * Queue the first @p len bytes of the open reservation; 0 gives the
 * reservation back unused.
 * @return 0, or -1 with errno EINVAL (nothing reserved, or @p len beyond
 *   the reservation: it stays open), EPIPE (shut down or failed since:
 *   the bytes are dropped) or ENOMEM; but for EINVAL the reservation is
 *   closed
 */
EVRDMA_EXPORT int evrdma_channel_commit(struct evrdma_channel *ch,
    size_t len);
/** Move all of @p buf to the output (stream), or as one message. */
EVRDMA_EXPORT int evrdma_channel_write_buffer(struct evrdma_channel *ch,
    struct evbuffer *buf);

/** Read up to @p len bytes from input (stream mode). @return bytes read */
EVRDMA_EXPORT size_t evrdma_channel_read(struct evrdma_channel *ch,
    void *data, size_t len);

/**
 * Message mode: take the next whole message.
 * @param data receives the message; NULL to only query the length
 * @param len size of @p data
 * @return the message length, or -1 with errno EAGAIN (no message),
 *   EMSGSIZE (@p data too small; the message stays queued), EBADMSG
 *   (input was drained directly: boundaries lost) or EBUSY (input's
 *   front is frozen; the message stays queued)
 */
EVRDMA_EXPORT ssize_t evrdma_channel_read_message(struct evrdma_channel *ch,
    void *data, size_t len);

/** @return the largest message (and slot) size of this channel */
EVRDMA_EXPORT size_t evrdma_channel_max_message(struct evrdma_channel *ch);

/** Set the watermarks of EV_READ and/or EV_WRITE (as
 * bufferevent_setwatermark(); a high mark of 0 is unlimited). */
EVRDMA_EXPORT void evrdma_channel_setwatermark(struct evrdma_channel *ch,
    short events, size_t lowmark, size_t highmark);

/** Set read and write timeouts (NULL: none), to the microsecond. A read
 * timeout fires when no data arrived for that long while EV_READ is
 * enabled and input is below its high watermark; a write timeout when
 * EV_WRITE is enabled, output is pending and nothing was sent for that
 * long. On a timeout that direction is disabled and
 * BEV_EVENT_TIMEOUT|READING/WRITING is reported. @return 0, or -1 with
 * errno EINVAL */
EVRDMA_EXPORT int evrdma_channel_set_timeouts(struct evrdma_channel *ch,
    const struct timeval *tv_read, const struct timeval *tv_write);

/** Send what output holds now, within the peer's credits, without waiting
 * for the end of the loop iteration. Calls no callback (the write callback
 * comes from the loop, as for any send), so a write callback may write and
 * flush without recursing. @return 0, or -1 with errno EPIPE (closed or
 * failed) or ENOTCONN */
EVRDMA_EXPORT int evrdma_channel_flush(struct evrdma_channel *ch);

/**
 * Shut down writing: everything written before arrives, then the peer gets
 * BEV_EVENT_EOF|BEV_EVENT_READING. Reading goes on.
 * @return 0, or -1 with errno EPIPE (already shut down or failed)
 */
EVRDMA_EXPORT int evrdma_channel_shutdown(struct evrdma_channel *ch);

/** @return after BEV_EVENT_ERROR: an evrdma_reason, or EVRDMA_REASON_NONE */
EVRDMA_EXPORT int evrdma_channel_get_error(struct evrdma_channel *ch);

/** Where a channel's connection stands (struct evrdma_channel_stats). */
enum evrdma_channel_state {
	EVRDMA_CHANNEL_CONNECTING = 1,	/**< connect or accept under way */
	EVRDMA_CHANNEL_CONNECTED,	/**< up: bytes move */
	EVRDMA_CHANNEL_ENDED		/**< the connection is over */
};

/**
 * What one connection carried so far, for an operator
 * (evrdma_channel_get_stats(), evrdma_bufferevent_get_stats()). The struct
 * grows at its end in later releases; callers pass its size (doc/ABI.md).
 */
struct evrdma_channel_stats {
	int transport;		/**< enum evrdma_transport */
	int state;		/**< enum evrdma_channel_state */
	/** bytes sent: RDMA, in data messages posted; TCP, data bytes the
	 * kernel sent, each once (TCP_INFO's tcpi_bytes_sent less
	 * tcpi_bytes_retrans, Linux 4.19 and later), on either end */
	unsigned long long bytes_sent;
	/** bytes received: RDMA, in data messages; TCP, data bytes
	 * (tcpi_bytes_received less the peer's FIN, which Linux counts once
	 * it came; in TCP state CLOSE, after an orderly close both ways or a
	 * reset alike, Linux no longer says whether it came, and its count,
	 * one more when it did, is given) */
	unsigned long long bytes_received;
	/** data messages sent (RDMA), data segments sent, retransmissions
	 * included (TCP, tcpi_data_segs_out); no handshake, acknowledgement
	 * or credit message is counted */
	unsigned long long msgs_sent;
	/** data messages received (RDMA), data segments received (TCP,
	 * tcpi_data_segs_in), counted as msgs_sent is on the other end */
	unsigned long long msgs_received;
	/** data messages this side left for the peer to pull (RDMA READ by
	 * the peer, evrdma_config_set_channel_pull()) */
	unsigned long long pulls_sent;
	/** the peer's data messages this side pulled */
	unsigned long long pulls_done;
	/** how often output waited for the peer's credits: the peer read
	 * slower than this side wrote (a TCP window that closed) */
	unsigned long long credit_stalls;
	/** how long output waited for credits, in all, in microseconds
	 * (a wait still on counted up to now) */
	unsigned long long credit_stall_us;
	/** keepalive probes sent (evrdma_config_set_keepalive()) */
	unsigned long long keepalive_probes;
	/** TCP: segments retransmitted (TCP_INFO's tcpi_total_retrans).
	 * RDMA: 0, the device retransmits unseen; see the QP's settings: */
	unsigned long long retransmits;
	/** RDMA (ibv_query_qp(), while the QP exists), else 0: retries of a
	 * request the peer does not acknowledge (0..7), */
	unsigned retry_count;
	/** ... retries of a receiver-not-ready NAK (7: for ever), */
	unsigned rnr_retry;
	/** ... the wait before a retry, 4.096 us * 2^ack_timeout, */
	unsigned ack_timeout;
	/** ... and the RNR wait this side asks its peer for (IB code) */
	unsigned min_rnr_timer;
};

/**
 * Read what @p ch's connection carried so far (struct
 * evrdma_channel_stats): counting costs a few additions per message.
 * @param ch the channel (also after its connection ended)
 * @param out filled in, up to @p outlen bytes
 * @param outlen sizeof(struct evrdma_channel_stats) as the caller was
 *   compiled: a program built against an earlier release gets the fields
 *   it knows (doc/ABI.md)
 * @return 0, or -1 with errno EINVAL (no channel, no @p out, @p outlen
 *   below the first release's struct)
 */
EVRDMA_EXPORT int evrdma_channel_get_stats(struct evrdma_channel *ch,
    struct evrdma_channel_stats *out, size_t outlen);

/**
 * Free the channel at any time, also from its callbacks and from an
 * evbuffer callback of yours on its input or output run inside an
 * evrdma call (not inside your own evbuffer_add() or evbuffer_drain() on
 * them: the buffer may go with the channel; free it from the loop
 * instead, as with event_base_once()); as closing a socket:
 *  - output not yet sent is discarded (as bufferevent does), and with it
 *    a write made from the read callback that the pass had not posted
 *    yet; what already left output arrives;
 *  - then the end goes at once (not at the next loop iteration: a
 *    program may free and return from main): EOF, or, when received bytes
 *    were never read (in input, or still in the channel), a RESET, after
 *    the bytes sent, as a kernel resets a socket closed with unread data
 *    after what it had accepted: the peer gets them, then BEV_EVENT_ERROR
 *    (EVRDMA_REASON_DISCONNECTED, ECONNRESET). Bytes that arrive after
 *    the free are dropped, their credits returned, and turn an EOF not
 *    yet sent into a RESET;
 *  - the connection stays open in the background until the peer has our
 *    end (and has pulled what it was to pull, see
 *    evrdma_config_set_channel_pull()), at most the teardown timeout; a
 *    channel whose peer reset it goes at once. Output that a free sends
 *    (the bufferevent adapter's) is sent while the peer takes it, a
 *    teardown timeout at a time, up to the linger bound after the free
 *    (evrdma_config_set_linger()); what is left then is dropped, and the
 *    end is a RESET.
 * No callback runs after this call. After evrdma_base_free() this frees
 * the closed husk.
 */
EVRDMA_EXPORT void evrdma_channel_free(struct evrdma_channel *ch);

#ifdef __cplusplus
}
#endif
#endif /* EVRDMA_CHANNEL_H_INCLUDED_ */
