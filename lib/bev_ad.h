/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the bufferevent adapter's own object, private to its three
 * files (bev.h is what the listener sees; evrdma/bufferevent.h the user):
 *   bev_io.c   the data path: whether the bufferevent reads, rate limits,
 *              receiving (the input filter), sending (the output filter)
 *   bev_tp.c   the transport: the channel or a TCP bufferevent, the
 *              connect, the fallback to TCP, the transport's callbacks
 *   bev.c      the adapter: making one, closing, the public calls
 * Each calls only those listed before it (tools/check-layering).
 */
#ifndef EVRDMA_BEV_AD_H_INCLUDED_
#define EVRDMA_BEV_AD_H_INCLUDED_

#include <limits.h>
#include <stdint.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "bev.h"
#include "bev_lev.h"	/* libevent's installed structs, read there only */

#define AD_MAGIC	0x65766265u	/* "evbe" */
#define AD_OPTIONS	EVRDMA__BEV_OPTIONS
/* TCP: what the adapter hands the socket bufferevent beyond the kernel */
#define SOCK_CAP	(256 * 1024)
#define RESUME_MS_MAX	64
/* output gathered from a burst of small writes before it moves
 * (evrdma__ad_out()) */
#define AD_GATHER_MAX	(16 * 1024)
/* u's read timeout: only its event's being pending counts
 * (evrdma__ad_probe()); it never expires (68 years) */
#define AD_U_TIMEOUT_S	INT_MAX
/* written straight into the channel below this (ad_direct()): the size
 * from which the channel sends a write as a message of its own (its
 * STAGE_MIN), which would cut the stream where a socket does not */
#define AD_DIRECT_MAX	1024
/* what a read of libevent 2.1's socket bufferevent takes at most, beside
 * its max single read (evbuffer_read()'s EVBUFFER_MAX_READ; 2.2 reads up
 * to the max single read) */
#define AD_READ_MAX_21	4096

enum ad_state { AD_IDLE, AD_CONNECTING, AD_UP, AD_FAILED };

struct ad;
/*
 * The adapter's transport, an evrdma channel or a TCP socket bufferevent:
 * what the data path and the close ask of it, in one table each
 * (bev_tp.c), so that they never branch on which it is.
 */
struct ad_tp {
	/* Connect to ad->host (when set) or ad->sa: 0, or -1 with errno
	 * (NULL: it connected as it was made, a TCP fallback's socket). */
	int (*connect)(struct ad *ad);
	/* Our end is finished: EOF after what output holds. */
	void (*shutdown)(struct ad *ad);
	/* BEV_FLUSH: what output holds goes now (NULL: it goes anyway). */
	void (*flush)(struct ad *ad);
	/* @p n bytes sent straight, past output: 0, or -1 to move them as
	 * usual (NULL: never). */
	int (*write)(struct ad *ad, const void *p, size_t n);
	/* Its numbers (evrdma_bufferevent_get_stats()); NULL: the socket's
	 * kernel has them. */
	int (*stats)(struct ad *ad, struct evrdma_channel_stats *out,
	    size_t outlen);
	/* Freed now, with a reset when ad->reset_due. */
	void (*free)(struct ad *ad);
	/* At a close the adapter waits, bounded, while output drains (a
	 * socket bufferevent; a channel sends what it took by itself). */
	uint8_t lingers;
};
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
	/* the transport (NULL until there is one, and once freed), its
	 * input and output, and its object: one of ch and sock */
	const struct ad_tp *tp;
	struct evbuffer *in, *out;
	struct evrdma_channel *ch;
	struct bufferevent *sock;
	int transport;			/* EVRDMA_TRANSPORT_* */
	enum ad_state state;
	int fallback;			/* may fall back to TCP */
	size_t cap;			/* output the transport takes */
	size_t read_max;		/* a read takes at most this
					 * (AD_READ_MAX_21 or SIZE_MAX), and
					 * the max single read */
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
	uint8_t finish_due;		/* BEV_FINISHED once output went
					 * (before connected, or held by
					 * the rate limit) */
	uint8_t shut;			/* our end shut down (BEV_FINISHED) */
	uint8_t shut_due;		/* TCP: shutdown once output drained */
	uint8_t reset_due;		/* TCP closing: a reset, unread bytes */
	uint8_t delivering;
	uint8_t moving;			/* enum ad_move: in ad_move_out() */
	int error;			/* evrdma_bufferevent_get_error() */
	int err;			/* the errno of the end, for the
					 * event callback (ECONNRESET...) */
	int dns_error;			/* evrdma_bufferevent_get_dns_error() */
	struct event *work;		/* evrdma__ad_work_cb(): from the
					 * loop */
	struct event *move;		/* evrdma__ad_move_cb(): a burst's
					 * output */
	uint8_t move_due;
	struct event *resume;		/* looks for EV_WRITE enabled again */
	unsigned resume_ms;
	struct event *linger;		/* closing: bounded wait for output */
	size_t linger_left;
	struct evrdma__linger lg;	/* the base's bound on that wait */
};

/* The adapter's transport's input and output (while it has one). */
static inline struct evbuffer *
tp_in(const struct ad *ad)
{
	return ad->in;
}

static inline struct evbuffer *
tp_out(const struct ad *ad)
{
	return ad->out;
}

/*
 * The application may freeze the bufferevent's input at its end or its
 * output at its front (evbuffer_freeze()). A socket bufferevent's own read
 * and write thaw those ends (libevent keeps them frozen in between), so
 * such a freeze changes nothing on a socket; nor here (review r45): a move
 * of the adapter's own that the freeze refused is made again thawed, and
 * the freeze put back. Tried as is first, so that the common case pays
 * nothing (keeping the ends frozen as a socket's are cost 62 instructions
 * per round trip, in libevent's freeze calls).
 *
 * A move refused for another reason (the transport's buffer frozen) leaves
 * the thawed end frozen after it: as a socket's is between its reads and
 * writes, so the application sees no difference.
 *
 * ad_move(): evbuffer_remove_buffer(src, dst, n) past the application's
 * freeze of @p src's front (@p front) or @p dst's end; what it returns.
 */
static inline int
ad_move(struct evbuffer *src, struct evbuffer *dst, size_t n, int front)
{
	struct evbuffer *b = front ? src : dst;
	int r = evbuffer_remove_buffer(src, dst, n);

	if (r >= 0)
		return r;
	evbuffer_unfreeze(b, front);
	r = evbuffer_remove_buffer(src, dst, n);
	evbuffer_freeze(b, front);
	return r;
}

/* evbuffer_drain() of @p b's front, past the application's freeze: 0, -1 */
static inline int
ad_drain(struct evbuffer *b, size_t n)
{
	int r = evbuffer_drain(b, n);

	if (r == 0)
		return 0;
	evbuffer_unfreeze(b, 1);
	r = evbuffer_drain(b, n);
	evbuffer_freeze(b, 1);
	return r;
}

/* evbuffer_add() at @p b's end, past the application's freeze: 0, -1 */
static inline int
ad_add(struct evbuffer *b, const void *p, size_t n)
{
	int r = evbuffer_add(b, p, n);

	if (r == 0)
		return 0;
	evbuffer_unfreeze(b, 0);
	r = evbuffer_add(b, p, n);
	evbuffer_freeze(b, 0);
	return r;
}

/* ---- bev_io.c: the data path ---- */

/* The adapter of @p bev, or NULL (not an adapter, or freed). */
struct ad *evrdma__ad_of(struct bufferevent *bev);
/* The user's bufferevent while it is there and its callbacks may run,
 * else NULL. */
struct bufferevent *evrdma__ad_live(const struct ad *ad);
/* Whether the bufferevent reads now (EV_READ on, not suspended); arms
 * the doorbell when it does not. */
int evrdma__ad_probe(struct ad *ad);
/* u's read callback: the bufferevent reads again. */
void evrdma__ad_doorbell(struct bufferevent *u, void *arg);
/* The filters of the user's bufferevent (bufferevent_filter_new()). */
enum bufferevent_filter_result evrdma__ad_in(struct evbuffer *src,
    struct evbuffer *dst, ev_ssize_t limit, enum bufferevent_flush_mode mode,
    void *arg);
enum bufferevent_filter_result evrdma__ad_out(struct evbuffer *src,
    struct evbuffer *dst, ev_ssize_t limit, enum bufferevent_flush_mode mode,
    void *arg);
/* The bufferevent's output grew: the callback on its evbuffer. */
void evrdma__ad_output_cb(struct evbuffer *buf,
    const struct evbuffer_cb_info *info, void *arg);
/* The adapter's own events: work from the loop, a burst's output, a
 * resumed write. */
void evrdma__ad_work_cb(evutil_socket_t fd, short what, void *arg);
void evrdma__ad_move_cb(evutil_socket_t fd, short what, void *arg);
void evrdma__ad_resume_cb(evutil_socket_t fd, short what, void *arg);
/* The bufferevent's timeouts are ours to run (it has no fd). */
void evrdma__ad_take_timeouts(struct ad *ad);
/* The connect started (@p on: its write timeout runs), or ended. */
void evrdma__ad_connecting(struct ad *ad, int on);
/* What the rate limit lets move now, in or out (SIZE_MAX: no limit). */
size_t evrdma__ad_rate_max(const struct ad *ad, int wr);
/* What one read callback gets at most (a socket's read). */
size_t evrdma__ad_read_max(const struct ad *ad, struct bufferevent *bev);
/* Room in the bufferevent's input below its read high watermark. */
size_t evrdma__ad_read_room(const struct bufferevent *bev,
    const struct evbuffer *dst);
/* Bytes arrived: the read timeout restarts. */
void evrdma__ad_read_restart(struct bufferevent *bev);
/* Move the transport's input into @p dst; the bytes moved. */
size_t evrdma__ad_take(struct ad *ad, struct bufferevent *bev,
    struct evbuffer *dst);
/* Received bytes (or the end) to the bufferevent. */
void evrdma__ad_deliver(struct ad *ad);
/* The transport has room: output moves. */
void evrdma__ad_pull(struct ad *ad);
/* The write side ended: its event, once. */
void evrdma__ad_write_end(struct ad *ad);
/* What the transport takes beyond @p have. */
size_t evrdma__ad_room(const struct ad *ad, size_t have);

/* ---- bev_tp.c: the transport ---- */

/* @p ch (connecting or connected) becomes the transport. */
void evrdma__ad_attach_channel(struct ad *ad, struct evrdma_channel *ch);
/* @p sock (connecting or connected) becomes the transport. */
void evrdma__ad_attach_sock(struct ad *ad, struct bufferevent *sock);
/* Connect over TCP to the address or host of the RDMA attempt: 0, or -1
 * with errno. */
int evrdma__ad_tcp_start(struct ad *ad);
/* The transport goes (its free op), and the adapter has none. */
void evrdma__ad_tp_free(struct ad *ad);

#endif /* EVRDMA_BEV_AD_H_INCLUDED_ */
