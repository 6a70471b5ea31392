/*
 * evrdma: the per-event_base context and its rdma_cm event channel.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "evrdma-internal.h"

/*
 * Drain every pending CM event. Each is handed to the listener or
 * connection that owns its id and then acked at once: rdma_destroy_id()
 * blocks until all events it has seen are acked, and ids are only ever
 * destroyed outside this loop or right after the ack.
 */
static void
cm_channel_cb(int fd, void *arg)
{
	struct evrdma_base *base = arg;
	struct rdma_cm_event *ev;

	while (EVRDMA_SYM(rdma_get_cm_event)(base->cm_ch, &ev) == 0) {
		struct rdma_cm_id *destroy = NULL;
		struct evrdma_listener *lst = NULL;
		enum evrdma_cm_kind *kind;

		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			kind = ev->listen_id->context;
		else
			kind = ev->id->context;
		evrdma__log(EVRDMA_LOG_DEBUG, "cm event %s status %d",
		    EVRDMA_SYM(rdma_event_str)(ev->event), ev->status);
		if (!kind) {
			/* An id whose owner is gone (e.g. destroyed while
			 * events were queued): nothing to tell. */
		} else if (*kind == EVRDMA_CM_LISTENER) {
			lst = (struct evrdma_listener *)kind;
			if (evrdma__listener_cm_event(lst, ev))
				destroy = ev->id;
		} else {
			evrdma__conn_cm_event((struct evrdma_conn *)kind, ev);
		}
		EVRDMA_SYM(rdma_ack_cm_event)(ev);
		if (destroy) {
			EVRDMA_SYM(rdma_destroy_id)(destroy);
			base->stats.cm_ids--;
		}
		/* freed from its prepare callback: now its event is acked */
		if (lst && lst->user_freed && !lst->refcnt)
			evrdma__listener_destroy_now(lst);
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		evrdma__log(EVRDMA_LOG_ERROR, "rdma_get_cm_event: %s",
		    strerror(errno));
}

/* ---- work due after a poll pass ---- */


static void
work_timer_cb(void *arg)
{
	struct evrdma_base *base = arg;

	base->work_armed = 0;
	evrdma__work_run(base);
}

/* The timer runs work queued outside a poll pass at the next iteration. */
static void
work_arm(struct evrdma_base *base)
{
	if (base->work_armed)
		return;
	if (evrdma__ev_timer_start(base->work_ev, 0) < 0)
		evrdma__log(EVRDMA_LOG_ERROR, "cannot schedule work");
	else
		base->work_armed = 1;
}

void
evrdma__work_queue(struct evrdma_base *base, struct evrdma__work *w)
{
	if (w->queued)
		return;
	w->queued = WORK_NEXT;
	TAILQ_INSERT_TAIL(&base->work, w, link);
	/* inside a poll pass, its end runs the list */
	if (!base->in_poll)
		work_arm(base);
}

/*
 * Run what is queued now, in queue order (first due, first served: that
 * is what keeps many channels fair). Work queued by the items themselves
 * waits for the next pass or iteration, so this always ends.
 */
void
evrdma__work_run(struct evrdma_base *base)
{
	struct evrdma__work *w;

	/* (called after every poll, also each busy-poll round: the common
	 * case, nothing due, costs nothing; a stale timer finds nothing) */
	if (TAILQ_EMPTY(&base->work))
		return;
	/* (the flag spares an event_del() of a timer that is not armed:
	 * three calls deep into libevent on every message's path; calls
	 * are what costs most under emulation, see bench/README.md) */
	if (base->work_armed) {
		evrdma__ev_stop(base->work_ev);
		base->work_armed = 0;
	}
	TAILQ_CONCAT(&base->work_running, &base->work, link);
	TAILQ_FOREACH(w, &base->work_running, link)
		w->queued = WORK_RUNNING;
	while ((w = TAILQ_FIRST(&base->work_running))) {
		TAILQ_REMOVE(&base->work_running, w, link);
		w->queued = 0;
		w->fn(w);
	}
	if (!TAILQ_EMPTY(&base->work))
		work_arm(base);
}

struct evrdma_base *
evrdma_base_new(struct event_base *eb, const struct evrdma_config *cfg)
{
	struct evrdma_base *base;

	if (!eb) {
		evrdma__fail(EINVAL, "evrdma_base_new: no event_base");
		return NULL;
	}
	if (cfg && cfg->cq_size < cfg->sq_depth + cfg->rq_depth) {
		evrdma__fail(EINVAL, "evrdma_base_new: cq size %u is below "
		    "send+recv queue depth %u", cfg->cq_size,
		    cfg->sq_depth + cfg->rq_depth);
		return NULL;
	}
	if (evrdma__rdma_load() < 0)
		return NULL;
	base = calloc(1, sizeof(*base));
	if (!base) {
		evrdma__fail(ENOMEM, "evrdma_base_new: out of memory");
		return NULL;
	}
	base->eb = eb;
	if (cfg)
		base->cfg = *cfg;
	else
		evrdma__config_defaults(&base->cfg);
	LIST_INIT(&base->devs);
	TAILQ_INIT(&base->conns);
	LIST_INIT(&base->listeners);
	LIST_INIT(&base->mrs);
	TAILQ_INIT(&base->work);
	TAILQ_INIT(&base->work_running);
	base->next_gen = 1;
	if (!(base->work_ev = evrdma__ev_timer_new(base, work_timer_cb,
	    base))) {
		free(base);
		return NULL;
	}

	base->cm_ch = EVRDMA_SYM(rdma_create_event_channel)();
	if (!base->cm_ch) {
		int err = errno ? errno : ENODEV;
		evrdma__fail(err, "rdma_create_event_channel: %s (no RDMA "
		    "device or the rdma_ucm module is not loaded)",
		    strerror(err));
		evrdma__ev_free(base->work_ev);
		free(base);
		return NULL;
	}
	if (evrdma__set_nonblock(base->cm_ch->fd) < 0 ||
	    !(base->cm_ev = evrdma__ev_fd_new(base, base->cm_ch->fd,
		cm_channel_cb, base))) {
		int err = errno;
		EVRDMA_SYM(rdma_destroy_event_channel)(base->cm_ch);
		evrdma__ev_free(base->work_ev);
		free(base);
		evrdma__fail(err, "evrdma_base_new: cannot watch the rdma_cm "
		    "channel");
		return NULL;
	}
	return base;
}

void
evrdma_base_free(struct evrdma_base *base)
{
	struct evrdma_conn *conn;
	struct evrdma_listener *lst;
	struct evrdma_req *req;

	if (!base)
		return;
	base->freeing = 1;
	while ((lst = LIST_FIRST(&base->listeners)))
		evrdma__listener_destroy_now(lst);
	while ((conn = TAILQ_FIRST(&base->conns)))
		evrdma__conn_destroy_now(conn);
	evrdma__mr_free_all(base);
	evrdma__dev_free_all(base);
	evrdma__ev_free(base->work_ev);
	evrdma__ev_free(base->cm_ev);
	EVRDMA_SYM(rdma_destroy_event_channel)(base->cm_ch);
	evrdma__dns_free(base->own_dns);
	while ((req = base->req_cache)) {
		base->req_cache = (struct evrdma_req *)req->conn;
		free(req);
	}
	free(base->slots);
	free(base->free_slots);
	free(base);
}

struct event_base *
evrdma_base_get_event_base(struct evrdma_base *base)
{
	return base->eb;
}

void
evrdma_base_get_stats(struct evrdma_base *base, struct evrdma_stats *out)
{
	*out = base->stats;
}

/* ---- request slots: wr_id <-> request ---- */

static int
slots_grow(struct evrdma_base *base)
{
	uint32_t n = base->nslots ? base->nslots * 2 : 256;
	struct evrdma_req **slots;
	uint32_t *fr, i;

	slots = realloc(base->slots, n * sizeof(*slots));
	if (!slots)
		return -1;
	base->slots = slots;
	fr = realloc(base->free_slots, n * sizeof(*fr));
	if (!fr)
		return -1;
	base->free_slots = fr;
	for (i = base->nslots; i < n; i++) {
		slots[i] = NULL;
		/* push in reverse so low slots are used first */
		fr[base->nfree++] = n - 1 - (i - base->nslots);
	}
	base->nslots = n;
	return 0;
}

struct evrdma_req *
evrdma__req_new(struct evrdma_base *base)
{
	struct evrdma_req *req;

	if (!base->nfree && slots_grow(base) < 0)
		return NULL;
	if ((req = base->req_cache))
		base->req_cache = (struct evrdma_req *)req->conn;
	else if (!(req = malloc(sizeof(*req))))
		return NULL;
	/* up to the work request, which only a corked post fills (and
	 * fills whole): clearing it too would double the cost of a post */
	memset(req, 0, offsetof(struct evrdma_req, link));
	req->slot = base->free_slots[--base->nfree];
	req->gen = base->next_gen++;
	if (!base->next_gen)
		base->next_gen = 1;
	base->slots[req->slot] = req;
	base->stats.reqs++;
	return req;
}

