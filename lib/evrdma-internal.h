/*
 * evrdma: private declarations shared by the library's files.
 * Never installed.
 */
#ifndef EVRDMA_INTERNAL_H_INCLUDED_
#define EVRDMA_INTERNAL_H_INCLUDED_

#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <evrdma.h>
#include <evrdma/channel.h>
#include "rdma-sym.h"

struct event;
struct evdns_base;
struct evrdma__resolve_req;

/* ---- errors and logging (util.c) ---- */
void evrdma__set_errmsg(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
void evrdma__log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* errno = err; return -1, recording a message (rdma-core's ERR()). */
int evrdma__fail(int err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- configuration (config.c) ---- */
struct evrdma_config {
	unsigned sq_depth;
	unsigned rq_depth;
	unsigned cq_size;
	unsigned inline_threshold;
	unsigned timeout_ms[4];		/* indexed by enum evrdma_timeout */
	unsigned poll_budget;
	unsigned busy_poll_us;		/* 0: sleep at once */
	unsigned rnr_retry;
	unsigned ch_slots;		/* channel ring */
	unsigned ch_slot_size;
	size_t ch_max_input;
	unsigned ch_pull_min;		/* pull DATA of this size on; 0: never */
};
void evrdma__config_defaults(struct evrdma_config *cfg);

/* ---- the evrdma handshake carried in rdma_cm private data ---- */
#define EVRDMA_HS_MAGIC0	'E'
#define EVRDMA_HS_MAGIC1	'V'
#define EVRDMA_HS_MAGIC2	'R'
#define EVRDMA_HS_VERSION	1
#define EVRDMA_HS_LEN		8	/* magic[3] version type flags[2] code */
#define EVRDMA_HS_TYPE_CONNECT	1
#define EVRDMA_HS_TYPE_ACCEPT	2
#define EVRDMA_HS_TYPE_REJECT	3
#define EVRDMA_PDATA_CONNECT_MAX 56	/* rdma_connect(3), RDMA_PS_TCP */
#define EVRDMA_PDATA_ACCEPT_MAX	196	/* rdma_accept(3), RDMA_PS_TCP */

struct evrdma_hs {
	uint8_t version;
	uint8_t type;
	uint16_t flags;		/* feature bits, for later protocols */
	uint8_t code;		/* reject code */
};
void evrdma__hs_encode(uint8_t *buf, const struct evrdma_hs *hs);
/* 0 if buf holds a handshake (version may be unsupported), -1 if not ours */
int evrdma__hs_decode(const uint8_t *buf, size_t len, struct evrdma_hs *hs);

/* ---- base and devices (base.c, device.c) ---- */

/* What an rdma_cm_id's context points to starts with one of these. */
enum evrdma_cm_kind { EVRDMA_CM_CONN = 1, EVRDMA_CM_LISTENER };

struct evrdma_cq {
	struct ibv_cq *cq;
	struct evrdma_dev *dev;
	unsigned cap;		/* entries */
	unsigned reserved;	/* sum of sq+rq of its QPs */
	unsigned unacked;	/* CQ events got but not yet acked */
	int armed_pending;	/* needs polling */
	int armed;		/* notification requested, no event since */
	LIST_ENTRY(evrdma_cq) link;
};

struct evrdma_dev {
	struct evrdma_base *base;
	struct ibv_context *verbs;	/* owned by librdmacm */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct event *cc_ev;		/* completion channel readable */
	struct event *async_ev;		/* async event fd readable */
	struct event *poll_ev;		/* resumes polling after the budget */
	struct event *spin_ev;		/* busy polling, between loop events */
	int spinning;			/* inside dev_spin() */
	struct ibv_device_attr attr;
	LIST_HEAD(, evrdma_cq) cqs;
	unsigned refcnt;		/* conns + mrs */
	unsigned dev_cq_cap;		/* entries per CQ, clamped to max_cqe */
	int dead;			/* removed or fatal: not reused */
	LIST_ENTRY(evrdma_dev) link;
};

struct evrdma_req;

/*
 * Work that completions make due (a channel's pump) runs once, after the
 * whole poll pass that made it due: every completion of the pass is in, so
 * one pass of work batches them, and it runs before the loop sleeps again
 * instead of one loop iteration later. Queued outside a poll pass, it runs
 * from a 0 ms timer, i.e. at the next iteration (that is what coalesces the
 * writes a user makes during one iteration).
 */
enum { WORK_NEXT = 1, WORK_RUNNING };
struct evrdma__work {
	void (*fn)(struct evrdma__work *w);
	int queued;			/* 0, WORK_NEXT or WORK_RUNNING */
	TAILQ_ENTRY(evrdma__work) link;
};
TAILQ_HEAD(evrdma__work_list, evrdma__work);

struct evrdma_base {
	struct event_base *eb;
	struct evrdma_config cfg;
	struct rdma_event_channel *cm_ch;
	struct event *cm_ev;
	LIST_HEAD(, evrdma_dev) devs;
	TAILQ_HEAD(, evrdma_conn) conns;
	LIST_HEAD(, evrdma_listener) listeners;
	LIST_HEAD(, evrdma_mr) mrs;
	struct evdns_base *own_dns;
	struct evrdma_stats stats;
	/* wr_id -> request: slot index in the low 32 bits, generation in the
	 * high 32, so a late completion for a recycled slot is recognised. */
	struct evrdma_req **slots;
	uint32_t nslots;
	uint32_t *free_slots;
	uint32_t nfree;
	uint32_t next_gen;
	struct evrdma_req *req_cache;	/* recycled request structs */
	struct evrdma__work_list work;	/* due at the end of a poll pass */
	struct evrdma__work_list work_running;
	struct event *work_ev;		/* runs work queued outside a pass */
	int work_armed;			/* work_ev is pending */
	unsigned in_poll;		/* inside a poll pass */
	int freeing;
};

struct evrdma_dev *evrdma__dev_get(struct evrdma_base *base,
    struct ibv_context *verbs);
void evrdma__dev_put(struct evrdma_dev *dev);
struct evrdma_cq *evrdma__cq_reserve(struct evrdma_dev *dev, unsigned n);
void evrdma__cq_release(struct evrdma_cq *cq, unsigned n);
void evrdma__dev_poll_soon(struct evrdma_dev *dev);
/* Queue @p w (no-op if queued); run what is due (base.c). */
void evrdma__work_queue(struct evrdma_base *base, struct evrdma__work *w);
void evrdma__work_run(struct evrdma_base *base);

/*
 * The helpers below run several times per message. They are inline here
 * rather than calls into another file: in the Soft-RoCE guest every call
 * and return is an indirect jump that the emulator looks up, and those
 * cost more than the few instructions inside.
 */

/* Take @p w off the queue it is on. */
static inline void
evrdma__work_cancel(struct evrdma_base *base, struct evrdma__work *w)
{
	if (w->queued == WORK_NEXT)
		TAILQ_REMOVE(&base->work, w, link);
	else if (w->queued == WORK_RUNNING)
		TAILQ_REMOVE(&base->work_running, w, link);
	w->queued = 0;
}
void evrdma__dev_free_all(struct evrdma_base *base);

/* ---- requests (conn.c) ---- */
struct evrdma_req {
	struct evrdma_conn *conn;
	evrdma_req_cb cb;
	void *arg;
	struct evrdma_mr *mr;
	uint32_t slot;
	uint32_t gen;
	uint8_t opcode;		/* enum evrdma_opcode posted */
	uint8_t is_recv;
	uint8_t unsignaled;	/* completes when a later send does */
	TAILQ_ENTRY(evrdma_req) link;
	struct ibv_send_wr wr;	/* kept while corked */
	struct ibv_sge sge;
};
struct evrdma_req *evrdma__req_new(struct evrdma_base *base);

static inline void
evrdma__req_free(struct evrdma_base *base, struct evrdma_req *req)
{
	base->slots[req->slot] = NULL;
	base->free_slots[base->nfree++] = req->slot;
	/* the cache is a singly linked list threaded through ->conn */
	req->conn = (struct evrdma_conn *)base->req_cache;
	base->req_cache = req;
	base->stats.reqs--;
}

static inline uint64_t
evrdma__req_wr_id(const struct evrdma_req *req)
{
	return (uint64_t)req->gen << 32 | req->slot;
}

/* Look up a request by wr_id; NULL for a stale one. */
static inline struct evrdma_req *
evrdma__req_lookup(struct evrdma_base *base, uint64_t wr_id)
{
	uint32_t slot = (uint32_t)wr_id, gen = (uint32_t)(wr_id >> 32);
	struct evrdma_req *req;

	if (slot >= base->nslots)
		return NULL;
	req = base->slots[slot];
	return (req && req->gen == gen) ? req : NULL;
}
/* Deliver a work completion (called by the CQ poller). */
void evrdma__conn_complete(struct evrdma_req *req, const struct ibv_wc *wc);

/* ---- memory regions (mr.c) ---- */
struct evrdma_mr {
	struct evrdma_base *base;
	struct evrdma_dev *dev;
	struct ibv_mr *mr;
	void *addr;
	size_t len;
	int access;
	unsigned inflight;	/* outstanding requests that use it */
	int freed;		/* evrdma_mr_free() called, waiting for inflight */
	LIST_ENTRY(evrdma_mr) link;
};
/* The last request using @p mr is done: destroy it if the user freed it. */
void evrdma__mr_release_last(struct evrdma_mr *mr);

static inline void
evrdma__mr_hold(struct evrdma_mr *mr)
{
	mr->inflight++;
}

static inline void
evrdma__mr_release(struct evrdma_mr *mr)
{
	if (--mr->inflight == 0)
		evrdma__mr_release_last(mr);
}
int evrdma__access_to_ibv(int access);
void evrdma__mr_free_all(struct evrdma_base *base);

/* ---- connections (conn.c) ---- */
enum evrdma_conn_state {
	EVRDMA_CONN_IDLE = 0,
	EVRDMA_CONN_RESOLVING_NAME,
	EVRDMA_CONN_RESOLVING_ADDR,
	EVRDMA_CONN_RESOLVING_ROUTE,
	EVRDMA_CONN_CONNECTING,		/* rdma_connect sent */
	EVRDMA_CONN_ACCEPTING,		/* passive: rdma_accept sent */
	EVRDMA_CONN_ESTABLISHED,
	EVRDMA_CONN_FAILED,		/* error/EOF reported, waiting for free */
	EVRDMA_CONN_CLOSING,		/* freed: flushing */
};

struct evrdma_conn {
	enum evrdma_cm_kind kind;	/* first: rdma_cm_id context tag */
	struct evrdma_base *base;
	struct rdma_cm_id *id;
	struct evrdma_dev *dev;
	struct evrdma_cq *cq;
	struct ibv_qp *qp;
	enum evrdma_conn_state state;
	int flags;
	int passive;
	int user_freed;
	int finalizing;
	int disconnect_sent;
	int disconnect_seen;
	int qp_in_error;
	int await_disconnect;		/* rdma_disconnect sent, DISCONNECTED due */
	uint8_t peer_rd, peer_init;	/* passive: requester's depths */
	unsigned refcnt;		/* held while a callback runs */
	evrdma_conn_event_cb cb;
	void *cb_arg;
	struct evrdma_listener *listener;	/* passive, until accepted */
	LIST_ENTRY(evrdma_conn) lst_link;
	unsigned sq_depth, rq_depth, max_inline;
	uint8_t rnr_retry;		/* into the connection parameters */
	unsigned sq_out, rq_out;
	/* outstanding requests in post order: sends (walked to complete the
	 * unsignaled ones) and receives apart */
	TAILQ_HEAD(, evrdma_req) reqs;
	TAILQ_HEAD(, evrdma_req) rreqs;
	struct event *timer;		/* step timeout / teardown timeout */
	struct event *fin_ev;		/* deferred finalisation */
	struct evrdma__resolve_req *dns_req;
	uint16_t port;			/* for connect_hostname */
	uint8_t pdata[EVRDMA_PDATA_CONNECT_MAX];
	uint8_t pdata_len;
	uint8_t peer_pdata[EVRDMA_PDATA_ACCEPT_MAX];
	uint8_t peer_pdata_len;
	int rejected;
	int reject_status;
	int reject_code;
	struct sockaddr_storage peer_addr;
	/* Hooks of an owner built on the connection (a channel):
	 * pre_connect runs after the QP exists, before rdma_connect (post
	 * receives, fill pdata); drop runs when the library frees a passive
	 * connection never handed to the user. */
	int (*pre_connect)(struct evrdma_conn *conn, void *arg);
	void (*drop)(void *arg);
	void *owner;
	/* Corked sends (evrdma__conn_cork): chained, posted together. */
	struct ibv_send_wr *cork_head, *cork_tail;
	unsigned corked, cork_n;
	uint8_t accept_pdata[EVRDMA_PDATA_ACCEPT_MAX - EVRDMA_HS_LEN];
	uint8_t accept_pdata_len;
	TAILQ_ENTRY(evrdma_conn) link;
};
void evrdma__conn_drop_owner(struct evrdma_conn *conn);
/*
 * Batching for owners built on a connection: between cork and uncork, send
 * work requests are chained and posted with one ibv_post_send() (one
 * doorbell) at uncork, and only every 16th and the last are signaled; an
 * unsignaled request completes, in order, when a later one does. Callbacks
 * are unchanged: each request still gets exactly one.
 */
static inline void
evrdma__conn_cork(struct evrdma_conn *conn)
{
	conn->corked++;
}
void evrdma__conn_uncork(struct evrdma_conn *conn);
/*
 * Post n receives without a buffer (for WRITE with immediate) in one
 * ibv_post_recv() call; each gets cb(arg) once, like evrdma_conn_post_recv.
 * Returns how many were posted (< n when the queue or memory ran out, or
 * the provider refused some), or -1 with errno when none was.
 */
int evrdma__conn_post_recvs(struct evrdma_conn *conn, unsigned n,
    evrdma_req_cb cb, void *arg);

struct evrdma_conn *evrdma__conn_alloc(struct evrdma_base *base, int flags);
void evrdma__conn_cm_event(struct evrdma_conn *conn,
    struct rdma_cm_event *ev);
/* Passive side: QP + accept for a new request's id. 0, or -1 (reject code
 * in *code). */
int evrdma__conn_setup_passive(struct evrdma_conn *conn,
    struct rdma_cm_id *id, struct rdma_cm_event *ev, int *code);
int evrdma__conn_accept(struct evrdma_conn *conn);
void evrdma__conn_abort_passive(struct evrdma_conn *conn);
/* Report a failure (async event, device removal) to the user once. */
void evrdma__conn_fail(struct evrdma_conn *conn, int reason, int err);
/* Tear down without waiting (base free, device death). */
void evrdma__conn_destroy_now(struct evrdma_conn *conn);
/* The last reference is gone: finalise if that was waiting for it. */
void evrdma__conn_unref_last(struct evrdma_conn *conn);

static inline void
evrdma__conn_ref(struct evrdma_conn *conn)
{
	conn->refcnt++;
}

static inline void
evrdma__conn_unref(struct evrdma_conn *conn)
{
	if (--conn->refcnt == 0)
		evrdma__conn_unref_last(conn);
}

/* ---- listeners (listener.c) ---- */
struct evrdma_listener {
	enum evrdma_cm_kind kind;	/* first: rdma_cm_id context tag */
	struct evrdma_base *base;
	struct rdma_cm_id *id;
	int flags;
	unsigned refcnt;
	int user_freed;
	evrdma_accept_cb accept_cb;
	void *accept_arg;
	evrdma_prepare_cb prepare_cb;
	void *prepare_arg;
	LIST_HEAD(, evrdma_conn) pending;	/* accepted, not established */
	/* a channel listener (evrdma_channel_listener_new) */
	evrdma_channel_accept_cb ch_accept;
	void *ch_arg;
	int ch_flags;
	LIST_ENTRY(evrdma_listener) link;
};
/* channel.c: build the channel of a passive connection (0, or -1 with a
 * reject code), and hand an established one to the user. */
int evrdma__channel_passive(struct evrdma_listener *lst,
    struct evrdma_conn *conn, int *code);
void evrdma__channel_accepted(struct evrdma_listener *lst,
    struct evrdma_conn *conn, const struct sockaddr *peer, int socklen);
/* Returns nonzero when the event's id must be destroyed after the ack. */
int evrdma__listener_cm_event(struct evrdma_listener *lst,
    struct rdma_cm_event *ev);
void evrdma__listener_established(struct evrdma_listener *lst,
    struct evrdma_conn *conn);
void evrdma__listener_forget(struct evrdma_listener *lst,
    struct evrdma_conn *conn);
void evrdma__listener_destroy_now(struct evrdma_listener *lst);

/* ---- libevent glue (loop.c): the only file that includes libevent ---- */
typedef void (*evrdma__fd_cb)(int fd, void *arg);
typedef void (*evrdma__timer_cb)(void *arg);
struct event *evrdma__ev_fd_new(struct evrdma_base *base, int fd,
    evrdma__fd_cb cb, void *arg);
struct event *evrdma__ev_timer_new(struct evrdma_base *base,
    evrdma__timer_cb cb, void *arg);
int evrdma__ev_timer_start(struct event *ev, unsigned ms);
void evrdma__ev_stop(struct event *ev);
int evrdma__ev_pending(struct event *ev);
void evrdma__ev_free(struct event *ev);
int evrdma__set_nonblock(int fd);
/* Resolve host:port without blocking; cb gets 0 and the first address, or
 * an error with sa == NULL. */
typedef void (*evrdma__resolve_cb)(int err, const struct sockaddr *sa,
    int socklen, void *arg);
struct evrdma__resolve_req *evrdma__resolve(struct evrdma_base *base,
    struct evdns_base *dns, int family, const char *host, int port,
    evrdma__resolve_cb cb, void *arg);
void evrdma__resolve_cancel(struct evrdma__resolve_req *req);
void evrdma__dns_free(struct evdns_base *dns);

#endif /* EVRDMA_INTERNAL_H_INCLUDED_ */
