/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: private declarations of the core (everything below channels).
 * Never installed. Includes no libevent header: the libevent glue is
 * loop.c, behind the evrdma__ev_* functions declared here.
 *
 * Layers, each calling only those below it (upward news travels through
 * the ops tables named here, never by a direct call):
 *   util, wire, config, rdma_sym
 *   loop (libevent glue)       work (deferred work)
 *   req (request table and each QP's request queues)
 *   device (CQs, protection domains, completion polling, async events)
 *   mr
 *   conn (rdma_cm state machine and handshake; owner and parent interfaces)
 *   listener
 *   base (the rdma_cm event channel; frees everything)
 * Channels (chan.h) are built on top through the owner interface.
 */
#ifndef EVRDMA_INTERNAL_H_INCLUDED_
#define EVRDMA_INTERNAL_H_INCLUDED_

#include <errno.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <evrdma/util.h>
#include <evrdma/config.h>
#include <evrdma/base.h>
#include <evrdma/mr.h>
#include <evrdma/conn.h>
#include <evrdma/listener.h>
#include "mem.h"
#include "srq.h"
#include "rdma-sym.h"
#include "testhooks.h"
#include "wire.h"

struct event;
struct evdns_base;
struct evrdma__resolve_req;

/* ---- errors and logging (util.c) ---- */
void evrdma__set_errmsg(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
void evrdma__log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Copy the statistics @p st (@p len bytes) to the caller's @p out of
 * @p outlen bytes (its struct as it was compiled: fewer fields, or more,
 * zeroed): 0, or -1 with EINVAL when @p out is NULL or @p outlen below
 * @p min (the first release's struct). */
int evrdma__stats_out(void *out, size_t outlen, const void *st, size_t len,
    size_t min);
/* The statistics of TCP socket @p fd from TCP_INFO (sockinfo.c): 0, or
 * -1 with errno (EINVAL: not a TCP socket). */
struct evrdma_channel_stats;
int evrdma__tcp_stats(int fd, struct evrdma_channel_stats *st);
/* Why TCP socket @p fd's connection failed, as an evrdma_reason
 * (sockinfo.c): EVRDMA_REASON_CONNECT_ERROR, _DISCONNECTED, or _NONE
 * while it is up, ends in order, or is no TCP socket. */
int evrdma__tcp_reason(int fd);
/* A monotonic clock in microseconds. */
uint64_t evrdma__now_us(void);
/* The errno an event of @p reason leaves (EVRDMA_REASON_*: ECONNRESET,
 * ETIMEDOUT, EPROTO...), for callbacks that report an error. */
int evrdma__reason_errno(int reason);
/* errno = err; return -1, recording a message (rdma-core's ERR()). */
int evrdma__fail(int err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- configuration (config.c) ---- */
struct evrdma_config {
	unsigned sq_depth;
	unsigned rq_depth;
	unsigned cq_size;
	unsigned inline_threshold;
	unsigned timeout_ms[5];		/* indexed by enum evrdma_timeout */
	unsigned poll_budget;
	unsigned busy_poll_us;		/* 0: sleep at once */
	unsigned rnr_retry;
	unsigned half_open;		/* per listener, with resources */
	unsigned ka_idle_ms;		/* channels' keepalive (0: off) */
	unsigned ka_interval_ms;
	unsigned ka_count;
	unsigned ack_timeout;		/* IB exponent: 4.096 us * 2^n (0: rdma_cm's) */
	unsigned retry_count;		/* transport retries, 0..7 */
	unsigned ch_slots;		/* channel ring */
	unsigned ch_slot_size;
	size_t ch_max_input;
	unsigned ch_pull_min;		/* pull DATA of this size on; 0: never */
	int tcp_fallback;		/* a base without RDMA serves TCP */
	unsigned linger_ms;		/* a freed connection's life, at most */
	unsigned linger_max;		/* freed connections still ending */
	unsigned warm_max;		/* warm sets cached (chan_warm.c) */
	unsigned warm_idle_ms;		/* a cached set's life, at most */
	/* the test knob EVRDMA_TEST_SLOW_PATH=1, read at evrdma_base_new():
	 * channels take the general path where a fast one exists (prepared
	 * sends, the read callback's open write, large writes staged
	 * straight into slots), so that a test can show both put the same
	 * on the wire */
	int slow_path;
};
void evrdma__config_defaults(struct evrdma_config *cfg);
void evrdma__config_default(struct evrdma_config *cfg);	/* _set_default's */

/* ---- libevent glue (loop.c) ---- */
typedef void (*evrdma__fd_cb)(int fd, void *arg);
typedef void (*evrdma__timer_cb)(void *arg);
struct event *evrdma__ev_fd_new(struct evrdma_base *base, int fd,
    evrdma__fd_cb cb, void *arg);
struct event *evrdma__ev_timer_new(struct evrdma_base *base,
    evrdma__timer_cb cb, void *arg);
/* Timers keep microseconds; a zero timeout runs at the next iteration. */
int evrdma__ev_timer_start_us(struct event *ev, uint64_t usec);
int evrdma__ev_timer_start_tv(struct event *ev, const struct timeval *tv);
static inline int
evrdma__ev_timer_start(struct event *ev, unsigned ms)
{
	return evrdma__ev_timer_start_us(ev, (uint64_t)ms * 1000);
}
void evrdma__ev_stop(struct event *ev);
int evrdma__ev_pending(struct event *ev);
void evrdma__ev_free(struct event *ev);
/* @p cb(@p arg) runs as soon as the callbacks of @p base's events that
 * are running now have returned (they count in base->depth). */
void evrdma__ev_after_dispatch(struct evrdma_base *base, evrdma__timer_cb cb,
    void *arg);
/* errno as the application left it when the loop called @p base's running
 * callback (errno outside one), which restores it as it returns (as last
 * set): evrdma's system calls never reach the application's errno. */
int evrdma__errno_app(const struct evrdma_base *base);
void evrdma__errno_app_set(struct evrdma_base *base, int err);
int evrdma__set_nonblock(int fd);
/* Resolve host:port without blocking; cb gets 0 and the first address, or
 * an error with sa == NULL, always from @p base's loop (also when @p dns
 * runs on another thread's loop). */
typedef void (*evrdma__resolve_cb)(int err, const struct sockaddr *sa,
    int socklen, void *arg);
struct evrdma__resolve_req *evrdma__resolve(struct evrdma_base *base,
    struct evdns_base *dns, int family, const char *host, int port,
    evrdma__resolve_cb cb, void *arg);
void evrdma__resolve_cancel(struct evrdma__resolve_req *req);
/* The base's own evdns_base (what a NULL @p dns above uses), made on
 * first use and freed with the base; NULL with errno ENOMEM. */
struct evdns_base *evrdma__base_evdns(struct evrdma_base *base);
/* The base's resolver state: made on first use, freed by base free. */
struct evrdma__resolver;
void evrdma__resolver_free(struct evrdma__resolver *r);

/* ---- deferred work (work.c) ----
 *
 * Work that completions make due (a channel's pass) runs once, after the
 * whole poll pass that made it due: every completion of the pass is in, so
 * one pass of work batches them, and it runs before the loop sleeps again.
 * Queued outside a poll pass, it runs from a 0 ms timer, i.e. at the next
 * iteration (that is what coalesces the writes a user makes during one
 * iteration).
 */
enum { WORK_NEXT = 1, WORK_RUNNING };
struct evrdma__work {
	void (*fn)(struct evrdma__work *w);
	int queued;			/* 0, WORK_NEXT or WORK_RUNNING */
	TAILQ_ENTRY(evrdma__work) link;
};
TAILQ_HEAD(evrdma__work_list, evrdma__work);

struct evrdma__workq {
	struct evrdma__work_list due;
	struct evrdma__work_list running;
	struct event *ev;		/* runs work queued outside a pass */
	int armed;			/* ev is pending */
	unsigned in_poll;		/* inside a poll pass */
};
int evrdma__work_init(struct evrdma_base *base);
void evrdma__work_fini(struct evrdma_base *base);
/* Queue @p w (no-op if queued). */
void evrdma__work_queue(struct evrdma_base *base, struct evrdma__work *w);
/* The end of the outermost poll, around the rings' passes: take the work
 * due now aside (1 if any), then run what was taken (what the passes and
 * that work queue waits for the next iteration). */
int evrdma__work_take(struct evrdma_base *base);
void evrdma__work_run_taken(struct evrdma_base *base);
/* Take @p w off the queue it is on (inline: once per message). */
#define evrdma__work_cancel(base, w) do {				\
	struct evrdma__work *w_ = (w);					\
	if (w_->queued == WORK_NEXT)					\
		TAILQ_REMOVE(&(base)->work.due, w_, link);		\
	else if (w_->queued == WORK_RUNNING)				\
		TAILQ_REMOVE(&(base)->work.running, w_, link);		\
	w_->queued = 0;							\
} while (0)

#include "ep.h"

/* ---- shared receive queues: srq.h ---- */

#include "dev.h"

/* ---- connections (conn.c) ---- */
enum evrdma_conn_state {
	EVRDMA_CONN_IDLE = 0,
	EVRDMA_CONN_RESOLVING_NAME,
	EVRDMA_CONN_RESOLVING_ADDR,
	EVRDMA_CONN_RESOLVING_ROUTE,
	EVRDMA_CONN_CONNECTING,		/* rdma_connect sent */
	EVRDMA_CONN_ACCEPTING,		/* passive: rdma_accept sent */
	EVRDMA_CONN_ESTABLISHED,
	EVRDMA_CONN_FAILED,		/* ended: error/EOF reported */
	EVRDMA_CONN_CLOSING,		/* freed: flushing */
	EVRDMA_CONN_CLOSED		/* resources gone (or base freed) */
};

/* A QP made in a protection domain (evrdma__qp_make()), in the RESET
 * state, with room reserved for it in a CQ of the device. */
struct evrdma__qp_made {
	struct ibv_qp *qp;
	struct evrdma_cq *cq;
	unsigned depth;			/* the CQ entries reserved */
	unsigned max_inline;		/* what the device granted */
};
/* (conn_cm.c) Make one: @p sq sends and @p rq receives (0 with @p srq,
 * whose receives it takes), inline sends up to @p inl bytes where the
 * device allows any. 0, or -1 with errno (nothing held). */
int evrdma__qp_make(struct evrdma_dev *dev, struct evrdma__pd *pd,
    struct evrdma_srq *srq, unsigned sq, unsigned rq, unsigned inl,
    struct evrdma__qp_made *m);
/* Destroy one that no connection took, and give back its CQ room. */
void evrdma__qp_unmake(struct evrdma__qp_made *m);

/*
 * The owner of a connection (a channel): what the connection asks of it
 * and tells it. Every call holds a reference on the connection. After
 * closed() no call follows and the owner must not touch the connection.
 */
struct evrdma__owner_ops {
	/* (NULL: a fresh one) The protection domain for the QP, with a
	 * reference for the connection, or NULL with errno; and in @p qp,
	 * if the domain comes with one, a QP made in it for this
	 * connection's depths (the connection owns it from here). */
	struct evrdma__pd *(*pd)(void *owner, struct evrdma_dev *dev,
	    struct evrdma__qp_made *qp);
	/*
	 * The QP exists: set up (register, post receives) and write at most
	 * *len bytes of private data into @p out, for the connect request
	 * (active side, @p peer NULL) or the accept reply (passive side,
	 * @p peer the requester's data). 0, or -1 with errno; on the
	 * passive side *code is then the reject code.
	 */
	int (*prepare)(void *owner, struct evrdma_conn *conn,
	    const uint8_t *peer, size_t peer_len, uint8_t *out, size_t *len,
	    int *code);
	/* Active side: the accept reply's data, before our QP may send,
	 * which the owner may refuse (-1: the connection fails, PROTOCOL);
	 * it sets what our QP needs from it (evrdma__conn_set_rnr_retry). */
	int (*reply)(void *owner, struct evrdma_conn *conn,
	    const uint8_t *peer, size_t peer_len);
	/* Established (-1: the connection fails, PROTOCOL). */
	int (*established)(void *owner, struct evrdma_conn *conn);
	/* The connection ended (once): EVRDMA_REASON_DISCONNECTED when the
	 * peer disconnected, else a failure. Requests still complete
	 * (flushed) until closed(). */
	void (*ended)(void *owner, struct evrdma_conn *conn, int reason,
	    int err);
	/* Gone: no further call. @p husk when base free ended it (no user
	 * callback may run). */
	void (*closed)(void *owner, int husk);
	/* (an owner that posts rings of its own, rings above; else NULL)
	 * The QP went to the error state: everything posted is flushed,
	 * but a send left unsignaled that completed before has no
	 * completion of its own; post a signaled one, whose flush says
	 * so. */
	void (*drain)(void *owner, struct evrdma_conn *conn);
	/* The teardown stops waiting for what is outstanding: forget it,
	 * uncompleted (evrdma__ep_ring_forget()); no completion of it is
	 * delivered any more. */
	void (*cancel)(void *owner, struct evrdma_conn *conn);
};

/* A passive connection's listener, until the connection is handed out. */
struct evrdma__parent_ops {
	void (*established)(void *parent, struct evrdma_conn *conn);
	void (*dropped)(void *parent, struct evrdma_conn *conn);
};

struct evrdma_conn {
	struct evrdma__ep ep;		/* first: requests and refcount */
	struct evrdma__cm_owner cm;	/* its id's context */
	struct evrdma_base *base;	/* NULL: a husk (base freed) */
	struct rdma_cm_id *id;
	struct evrdma_dev *dev;
	struct evrdma__pd *pd;
	struct evrdma_cq *cq;
	struct ibv_qp *qp;
	enum evrdma_conn_state state;
	int flags;
	int passive;
	int user_freed;			/* the user's handle is gone */
	int disconnect_sent;
	int disconnect_seen;
	int qp_in_error;
	int await_disconnect;		/* rdma_disconnect sent, DISCONNECTED due */
	int rts;			/* the QP may send: passive after
					 * rdma_accept(), active established */
	int fin_due;			/* finaliser scheduled */
	int td_polled;			/* teardown timeout: CQs polled */
	/* passive: what the requester serves of our READs and atomics, and
	 * how many of its own it may have outstanding at us */
	uint8_t peer_rd, peer_init;
	/* the RDMA READs and atomics we may have outstanding, as agreed
	 * with the peer (its responder resources bound it): 0, the peer
	 * serves none, and one posted would wait for ever */
	uint8_t rd_out;
	/* the READs and atomics of the peer's we serve at once (our QP's
	 * max_dest_rd_atomic): what we offered, bounded by its request */
	uint8_t rd_in;
	evrdma_conn_event_cb cb;
	void *cb_arg;
	const struct evrdma__owner_ops *owner_ops;
	void *owner;
	const struct evrdma__parent_ops *parent_ops;
	void *parent;
	unsigned sq_depth, rq_depth;
	/* our QP's RNR retries (the owner's decision, or the
	 * configuration's), and what we ask the peer's QP for (the
	 * connection parameters: a peer decides its own) */
	uint8_t rnr_retry, rnr_ask;
	struct event *timer;		/* step timeout / teardown timeout */
	struct event *fin_ev;		/* deferred finalisation */
	/* keepalive (evrdma_conn_set_keepalive) */
	struct event *ka_ev;
	unsigned ka_idle_ms, ka_interval_ms, ka_count;
	unsigned ka_seen;		/* ep.activity at the last look */
	unsigned ka_misses;		/* silent intervals while probing */
	unsigned long long ka_probes;	/* probes sent, for the statistics */
	int ka_probing;			/* silent for an idle time: probing */
	int ka_probe;			/* a probe is in flight */
	struct evrdma__resolve_req *dns_req;
	int dns_error;			/* EVUTIL_EAI_* of a failed lookup */
	uint8_t pdata[EVRDMA_PDATA_CONNECT_MAX];
	uint8_t pdata_len;
	uint8_t peer_pdata[EVRDMA_PDATA_ACCEPT_MAX];
	uint8_t peer_pdata_len;
	int rejected;
	int reject_status;
	int reject_code;
	struct sockaddr_storage peer_addr;
	LIST_ENTRY(evrdma_conn) parent_link;	/* the parent's to use */
	TAILQ_ENTRY(evrdma_conn) link;
	/* a shared receive queue's connection: a reference on the queue
	 * from evrdma_conn_set_srq() to conn_destroy(); while the QP exists,
	 * in the queue's QP-number table */
	struct evrdma_srq *srq;
	LIST_ENTRY(evrdma_conn) srq_link;	/* while srq and qp are set */
	unsigned srq_held;	/* its completions srq.c holds (bounded there) */
};

static inline struct evrdma_conn *
evrdma__ep_conn(struct evrdma__ep *ep)
{
	return (struct evrdma_conn *)ep;
}

struct evrdma_conn *evrdma__conn_alloc(struct evrdma_base *base, int flags);
/* Attach an owner (before connect, or in a listener's attach op). */
void evrdma__conn_set_owner(struct evrdma_conn *conn,
    const struct evrdma__owner_ops *ops, void *owner);
/* Passive side, inside the CONNECT_REQUEST dispatch: QP, the owner's
 * prepare, accept. 0, or -1 with the reject code in *code (the caller
 * rejects; the connection is then dropped). */
int evrdma__conn_setup_passive(struct evrdma_conn *conn,
    struct rdma_cm_id *id, const struct rdma_conn_param *param,
    const struct sockaddr *peer, int *code);
int evrdma__conn_accept(struct evrdma_conn *conn);
/* Undo a passive set-up whose request is being rejected; the dispatcher
 * destroys the id after the ack. */
void evrdma__conn_abort_passive(struct evrdma_conn *conn);
void evrdma__conn_set_parent(struct evrdma_conn *conn,
    const struct evrdma__parent_ops *ops, void *parent);
/* Revoke the peer's access at once (QP to error, disconnect) and end the
 * connection with @p reason: a protocol violation. */
void evrdma__conn_abort(struct evrdma_conn *conn, int reason);
/* Base free: release everything now, no callback of the user's runs;
 * a connection the user still holds becomes a husk. */
void evrdma__conn_release_now(struct evrdma_conn *conn);
const struct ibv_device_attr *evrdma__conn_dev_attr(struct evrdma_conn *c);
/* Post a chain of sends on @p ep's QP (the test knob
 * EVRDMA_TEST_FAIL_POST_SEND may refuse it): ibv_post_send()'s result. */
int evrdma__ep_post_send(struct evrdma__ep *ep, struct ibv_send_wr *wr,
    struct ibv_send_wr **bad);
/* The most a send of @p conn's carries inline. */
static inline unsigned
evrdma__conn_max_inline(const struct evrdma_conn *conn)
{
	return conn->ep.max_inline;
}
/* The connection's QP, for an owner that posts rings of its own: NULL
 * before it exists and once it is gone. */
static inline struct ibv_qp *
evrdma__conn_qp(const struct evrdma_conn *conn)
{
	return conn->qp;
}
/* The connection's protection domain (NULL before its QP exists). */
struct evrdma__pd *evrdma__conn_pd(struct evrdma_conn *conn);
unsigned evrdma__conn_sq_depth(const struct evrdma_conn *conn);
/* Our QP's RNR retries (0..7, 7: for ever): an owner whose credits
 * guarantee a posted receive sets 0, before the QP goes to RTS (passive:
 * in prepare; active: in reply); and what the connection parameters ask
 * of the peer's QP (before connect or accept). */
void evrdma__conn_set_rnr_retry(struct evrdma_conn *conn, unsigned count);
void evrdma__conn_set_rnr_ask(struct evrdma_conn *conn, unsigned count);
void *evrdma__conn_owner(const struct evrdma_conn *conn);

/* ---- listeners (listener.c) ---- */

/* What a listener built for an owner type (channels) does with requests. */
struct evrdma__listen_ops {
	/* A connect request: attach an owner to @p conn. 0, or -1 with the
	 * reject code in *code. */
	int (*attach)(void *arg, struct evrdma_listener *lst,
	    struct evrdma_conn *conn, int *code);
	/* An attached connection is established: hand it to the user. */
	void (*accepted)(void *arg, struct evrdma_listener *lst,
	    struct evrdma_conn *conn, const struct sockaddr *peer,
	    int socklen);
	void (*free_arg)(void *arg);
	int channels;		/* its connections are channels: it takes a
				 * queue of channels (evrdma_listener_set_srq) */
};

struct evrdma__queued;

struct evrdma_listener {
	struct evrdma__cm_owner cm;	/* its id's context */
	struct evrdma_base *base;	/* NULL: a husk (base freed) */
	struct rdma_cm_id *id;		/* NULL once its device went away */
	int flags;
	unsigned refcnt;		/* around callbacks and the dispatch */
	int user_freed;
	evrdma_accept_cb accept_cb;
	void *accept_arg;
	evrdma_prepare_cb prepare_cb;
	void *prepare_arg;
	evrdma_listener_errorcb error_cb;	/* gets accept_arg */
	int error;			/* evrdma_listener_get_error() */
	int disabled;			/* evrdma_listener_disable() */
	const struct evrdma__listen_ops *ops;
	void *ops_arg;
	const struct evrdma__listen_side *side;
	void *side_arg;
	int port;			/* bound port, host order */
	struct evrdma_srq *srq;		/* for the connections it accepts */
	unsigned backlog;
	unsigned n_queued;		/* waiting for a half-open place */
	unsigned n_half_open;		/* accepted, not established */
	LIST_HEAD(, evrdma_conn) half_open;
	/* established while disabled, waiting to be handed out */
	LIST_HEAD(, evrdma_conn) held;
	TAILQ_HEAD(, evrdma__queued) queued;
	struct event *queue_ev;		/* serves and expires the queue */
	LIST_ENTRY(evrdma_listener) link;
};

/* What listens beside a listener's rdma_cm id (a bufferevent listener's
 * TCP side): it follows evrdma_listener_enable() and _disable(). */
struct evrdma__listen_side {
	void (*set_enabled)(void *arg, int enabled);
};

/* A listener without an rdma_cm id (its owner listens on TCP; a base
 * without RDMA): nothing but the handle, its ops and its port. Above
 * LEV_OPT_* and evrdma's public flags. */
#define EVRDMA__LISTEN_BARE	0x40000000
/* The LEV_OPT_* flags a listener takes (evrdma/listener.h says what each
 * means there); the others fail with EINVAL. */
#define EVRDMA__LEV_OPTS	(LEV_OPT_CLOSE_ON_FREE | \
				 LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE | \
				 LEV_OPT_DISABLED | LEV_OPT_DEFERRED_ACCEPT)
/* A negative backlog's, as libevent's listen(fd, 128) */
#define EVRDMA__BACKLOG_DEFAULT	128

/* @p flags: EVRDMA__LEV_OPTS, EVRDMA_LISTEN_RAW, EVRDMA__LISTEN_BARE;
 * @p fn names the caller in errors. */
struct evrdma_listener *evrdma__listener_new(struct evrdma_base *base,
    const struct sockaddr *sa, int socklen, int backlog, int flags,
    const struct evrdma__listen_ops *ops, void *ops_arg, const char *fn);
/* 0, or -1 with errno EINVAL when @p flags has bits other than
 * EVRDMA__LEV_OPTS and @p own, naming @p fn. */
int evrdma__listener_flags(int flags, int own, const char *fn);
/* @p backlog as the user gave it (negative: the default), or -1 with
 * errno EINVAL for 0, naming @p fn. */
int evrdma__listener_backlog(int backlog, const char *fn);
/* Tell the user (the error callback, errno @p err): @p reason. May free
 * the listener (not inside the CM dispatch, which holds a reference). */
void evrdma__listener_error(struct evrdma_listener *lst, int reason,
    int err);
void evrdma__listener_release_now(struct evrdma_listener *lst);

/* ---- freed connections still ending (linger.c) ---- */

/*
 * A freed connection that still waits for its peer (a channel, a
 * bufferevent over TCP) embeds one while it lingers: the base ends it
 * (expire: reset now, without a user callback) at the linger bound after
 * the free, or earlier when more than the cap linger and it is the
 * oldest. Its owner stops it when it ends by itself.
 */
struct evrdma__linger {
	void (*expire)(struct evrdma__linger *lg);
	uint64_t deadline;		/* evrdma__now_us() */
	int on;
	TAILQ_ENTRY(evrdma__linger) link;
};
int evrdma__linger_init(struct evrdma_base *base);
void evrdma__linger_fini(struct evrdma_base *base);
void evrdma__linger_start(struct evrdma_base *base, struct evrdma__linger *lg,
    void (*expire)(struct evrdma__linger *lg));
void evrdma__linger_stop(struct evrdma_base *base, struct evrdma__linger *lg);

/* ---- the base (base.c) ---- */
struct evrdma_base {
	struct event_base *eb;
	struct evrdma_config cfg;
	struct rdma_event_channel *cm_ch;
	struct event *cm_ev;
	LIST_HEAD(, evrdma_dev) devs;
	TAILQ_HEAD(, evrdma_conn) conns;
	LIST_HEAD(, evrdma_listener) listeners;
	LIST_HEAD(, evrdma_mr) mrs;
	LIST_HEAD(, evrdma_srq) srqs;
	struct evrdma__resolver *resolver;
	struct evrdma_stats stats;
	size_t spill_bytes;		/* its channels' spills, chan_spill.c */
	struct evrdma__reqtab reqs;
	struct evrdma__rings rings;
	/* posts of sends until the one the test knob refuses (0: none), and
	 * whether it refuses the later ones too */
	unsigned fail_post_send;
	int fail_post_send_on;
	struct evrdma__workq work;
	/* freed connections still ending, oldest first (linger.c) */
	TAILQ_HEAD(, evrdma__linger) lingering;
	struct event *linger_ev;
	/* warm sets, oldest first (chan_warm.c) */
	TAILQ_HEAD(evrdma__warm_q, evrdma__warm) warm;
	struct event *warm_ev;
	struct event *warm_fill_ev;	/* makes sets ahead of requests */
	struct event *warm_qp_ev;	/* makes the QPs of cached sets */
	struct evrdma_dev *warm_fill_dev;	/* (a reference) for whom */
	/* a device of this base was removed or failed (evrdma__dev_dead()):
	 * chan_warm.c's sets of it go, so that it can close */
	void (*dev_dead)(struct evrdma_base *base, struct evrdma_dev *dev);
	/* a registration would exceed RLIMIT_MEMLOCK: chan_warm.c's sets
	 * give their pinned bytes back (evrdma__base_pin_check()); 1 when
	 * some went */
	int (*pin_relief)(struct evrdma_base *base);
	int freeing;			/* evrdma_base_free() was called */
	/* how many of its events' callbacks are running, and what runs
	 * when the last returns (lib/loop.c): an evrdma_base_free() called
	 * inside them */
	unsigned depth;
	evrdma__timer_cb after_cb;
	void *after_arg;
	int errno_in;	/* errno as the first came (evrdma__errno_app()) */
	/* 0, or why this base has no RDMA (ENOSYS: rdma-core missing,
	 * ENODEV: no device): a base made with the TCP fallback, on which
	 * only the bufferevent calls work (they make TCP bufferevents) */
	int no_rdma;
	/* objects above the core (bufferevents, their listeners) that must
	 * hear evrdma_base_free(): it calls each hook first, without a user
	 * callback, and forgets it (a hook's owner unlinks itself when it
	 * goes first) */
	LIST_HEAD(, evrdma__hook) hooks;
	LIST_ENTRY(evrdma_base) tcp_link;	/* no_rdma: on base.c's list */
	LIST_ENTRY(evrdma_base) all_link;	/* base.c's list of them all */
	int shared;		/* the event_base calls' (base_for) */
	unsigned holds;		/* its adapters and listeners */
	struct event *idle_ev;	/* (shared) waits for closings */
	int listen_v6only;	/* the next listener's, as its socket's; -1 */
};

/* A base without RDMA the program made on @p eb (the one whose resolver a
 * TCP bufferevent of @p eb uses: a shared one may go meanwhile), or NULL. */
struct evrdma_base *evrdma__base_without_rdma_of(struct event_base *eb);
/* The base of the event_base calls, held for the caller: the newest the
 * program made on @p eb, else a shared one; NULL with errno. Adapters and
 * listeners hold theirs; a shared one goes once none does or closes. */
struct evrdma_base *evrdma__base_for(struct event_base *eb);
void evrdma__base_hold(struct evrdma_base *base);
void evrdma__base_release(struct evrdma_base *base);

struct evrdma__hook {
	void (*base_gone)(struct evrdma__hook *h);
	/* the process exits (exit(), or a return from main), with the base
	 * still alive: end the connection as the kernel ends a socket's
	 * (NULL: nothing to do) */
	void (*exiting)(struct evrdma__hook *h);
	LIST_ENTRY(evrdma__hook) link;
};

/* Whether @p base can do RDMA: 0, or -1 with errno EINVAL (no base) or
 * the reason it has none (ENOSYS, ENODEV), naming @p fn. */
static inline int
evrdma__base_rdma(const struct evrdma_base *base, const char *fn)
{
	if (!base)
		return evrdma__fail(EINVAL, "%s: no base", fn);
	if (base->no_rdma)
		return evrdma__fail(base->no_rdma, "%s: this base has no RDMA "
		    "(made with the TCP fallback: %s)", fn,
		    base->no_rdma == ENOSYS ? "rdma-core is not installed" :
		    "no RDMA device");
	return 0;
}


/* ---- the rdma_cm channel (cm.c) ---- */
/* The base's rdma_cm channel, opened on first use; NULL with errno (ENODEV,
 * or EPERM in a forked child). */
struct rdma_event_channel *evrdma__base_cm(struct evrdma_base *base);
/* Read every pending CM event and hand each to its id's owner
 * (evrdma__cm_owner): from the channel's fd, and from a connection whose
 * step timer finds the loop has not read the event yet. */
void evrdma__cm_drain(struct evrdma_base *base);
/* Can this process do RDMA at all (opening nothing)? 0, or -1 with errno
 * EPERM (a forked child), ENODEV (no rdma_cm, no device). */
int evrdma__rdma_check(void);

/* Is a user callback allowed now? Never once evrdma_base_free() was
 * called. */
static inline int
evrdma__base_user_ok(const struct evrdma_base *base)
{
	return base && !base->freeing;
}

#endif /* EVRDMA_INTERNAL_H_INCLUDED_ */
