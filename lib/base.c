/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the per-event_base context; it drains its rdma_cm event channel
 * (opened on first use by lib/cm.c) into the listeners and connections.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "chan_warm.h"
#include "evrdma-internal.h"

/* The bases without RDMA, for evrdma__base_without_rdma_of(): their
 * bufferevents are libevent's own and know nothing of them. Bases live on
 * several threads. */
static LIST_HEAD(, evrdma_base) tcp_bases = LIST_HEAD_INITIALIZER(tcp_bases);
static pthread_mutex_t tcp_bases_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Every base, for the exit: a process that ends with connections open
 * ends them as its kernel ends its sockets, a FIN after what was sent, or
 * a reset when bytes were left unread (evrdma/channel.h). TCP gets that
 * from the kernel; RDMA only from a library that runs: an atexit handler.
 * (A process killed gets neither: its peers judge by what arrived.)
 */
static LIST_HEAD(, evrdma_base) all_bases = LIST_HEAD_INITIALIZER(all_bases);
static pthread_mutex_t all_bases_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void
base_at_exit(void)
{
	struct evrdma_base *base;
	struct evrdma__hook *h;

	if (evrdma__forked)
		return;
	pthread_mutex_lock(&all_bases_lock);
	LIST_FOREACH(base, &all_bases, all_link)
		if (!base->freeing)
			LIST_FOREACH(h, &base->hooks, link)
				if (h->exiting)
					h->exiting(h);
	pthread_mutex_unlock(&all_bases_lock);
}

static void
base_exit_register(void)
{
	if (atexit(base_at_exit) != 0)
		evrdma__log(EVRDMA_LOG_WARN, "atexit: no room; connections "
		    "open at exit end as if the process were killed");
}

static struct evrdma_base *
base_ready(struct evrdma_base *base)
{
	pthread_once(&exit_once, base_exit_register);
	pthread_mutex_lock(&all_bases_lock);
	LIST_INSERT_HEAD(&all_bases, base, all_link);
	pthread_mutex_unlock(&all_bases_lock);
	return base;
}

struct evrdma_base *
evrdma__base_without_rdma_of(struct event_base *eb)
{
	struct evrdma_base *base;

	pthread_mutex_lock(&tcp_bases_lock);
	LIST_FOREACH(base, &tcp_bases, tcp_link)
		if (base->eb == eb && !base->shared)
			break;
	pthread_mutex_unlock(&tcp_bases_lock);
	return base;
}

/*
 * The TCP fallback (evrdma_config_set_tcp_fallback()): no RDMA here, say
 * why (evrdma_errmsg() still holds the cause), and hand out a base on which
 * only the bufferevent calls work, over TCP. (The shared bases of the
 * event_base calls say it once: one comes and goes with every connection
 * a library makes.)
 */
static struct evrdma_base *
base_without_rdma(struct evrdma_base *base, int why)
{
	static int said;

	if (!base->shared || !said)
		evrdma__log(EVRDMA_LOG_WARN, "no RDMA on this host (%s): "
		    "bufferevents use TCP", evrdma_errmsg());
	if (base->shared)
		said = 1;
	base->no_rdma = why;
	pthread_mutex_lock(&tcp_bases_lock);
	LIST_INSERT_HEAD(&tcp_bases, base, tcp_link);
	pthread_mutex_unlock(&tcp_bases_lock);
	return base_ready(base);
}

static struct evrdma_base *
base_new(struct event_base *eb, const struct evrdma_config *cfg, int shared)
{
	struct evrdma_base *base;
	int err;

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
	if (evrdma__rdma_load() < 0 && !(cfg && cfg->tcp_fallback))
		return NULL;
	base = calloc(1, sizeof(*base));
	if (!base) {
		evrdma__fail(ENOMEM, "evrdma_base_new: out of memory");
		return NULL;
	}
	base->eb = eb;
	base->shared = shared;
	base->listen_v6only = -1;
	if (cfg)
		base->cfg = *cfg;
	else
		evrdma__config_defaults(&base->cfg);
	base->cfg.slow_path = evrdma__config_slow_path();
	base->fail_post_send = evrdma__config_fail_post_send(
	    &base->fail_post_send_on);
	LIST_INIT(&base->devs);
	TAILQ_INIT(&base->conns);
	LIST_INIT(&base->listeners);
	LIST_INIT(&base->mrs);
	LIST_INIT(&base->srqs);
	LIST_INIT(&base->hooks);
	base->reqs.next_gen = 1;
	evrdma__rings_init(&base->rings);
	if (evrdma__work_init(base) < 0) {
		free(base);
		return NULL;
	}
	if (evrdma__linger_init(base) < 0 || evrdma__warm_init(base) < 0) {
		evrdma__linger_fini(base);
		evrdma__warm_fini(base);
		evrdma__work_fini(base);
		free(base);
		evrdma__fail(ENOMEM, "evrdma_base_new: out of memory");
		return NULL;
	}
	/* with the fallback, a host without rdma-core or without a device
	 * still gets a base (TCP bufferevents); a forked child (EPERM) fails
	 * as without it: what it lacks is not RDMA on this host but the
	 * right to use its parent's, and a base that silently served TCP
	 * there would hide the mistake */
	if (evrdma__rdma_load() < 0)
		return base_without_rdma(base, ENOSYS);
	if (evrdma__rdma_check() < 0) {
		if (base->cfg.tcp_fallback && errno == ENODEV)
			return base_without_rdma(base, ENODEV);
		goto fail;
	}
	return base_ready(base);
fail:
	err = errno;
	evrdma__linger_fini(base);
	evrdma__warm_fini(base);
	evrdma__work_fini(base);
	free(base);
	errno = err;
	return NULL;
}

struct evrdma_base *
evrdma_base_new(struct event_base *eb, const struct evrdma_config *cfg)
{
	return base_new(eb, cfg, 0);
}

/* ---- the bases of the event_base calls ---- */

struct evrdma_base *
evrdma__base_for(struct event_base *eb)
{
	struct evrdma_base *base, *found = NULL;
	struct evrdma_config cfg;

	if (!eb) {
		evrdma__fail(EINVAL, "no event_base");
		return NULL;
	}
	/* (newest first: a program's before a shared one) */
	pthread_mutex_lock(&all_bases_lock);
	LIST_FOREACH(base, &all_bases, all_link)
		if (base->eb == eb && !base->freeing &&
		    (!found || (found->shared && !base->shared)))
			found = base;
	pthread_mutex_unlock(&all_bases_lock);
	if (!found) {
		evrdma__config_default(&cfg);
		if (!(found = base_new(eb, &cfg, 1)))
			return NULL;
	}
	evrdma__base_hold(found);
	return found;
}

void
evrdma__base_hold(struct evrdma_base *base)
{
	if (base && base->shared)
		base->holds++;
}

/* Nothing it made is still there, closing or not. */
static int
base_idle(const struct evrdma_base *base)
{
	const struct evrdma_stats *st = &base->stats;

	return !st->conns && !st->cm_ids && !st->listeners && !st->bevs &&
	    !base->reqs.live && TAILQ_EMPTY(&base->lingering);
}

static void
base_idle_check(void *arg)
{
	struct evrdma_base *base = arg;

	if (base->holds)
		return;
	if (base_idle(base))
		evrdma_base_free(base);
	else if (evrdma__ev_timer_start(base->idle_ev, 50) < 0)
		evrdma__log(EVRDMA_LOG_WARN, "a shared base stays: %s",
		    evrdma_errmsg());
}

/*
 * The last hold of a shared base went: it goes now, or, while connections
 * it made still close (sending what was written before their free), once
 * they are done, looked for every 50 ms. Until then the event_base has an
 * event; after it none of evrdma's, and its dispatch returns, as once a
 * socket program's last bufferevent is freed.
 */
void
evrdma__base_release(struct evrdma_base *base)
{
	if (!base || !base->shared || base->freeing || --base->holds)
		return;
	if (base_idle(base)) {
		evrdma_base_free(base);
		return;
	}
	if (!base->idle_ev &&
	    !(base->idle_ev = evrdma__ev_timer_new(base, base_idle_check,
	    base))) {
		evrdma__log(EVRDMA_LOG_WARN, "a shared base stays: %s",
		    evrdma_errmsg());
		return;
	}
	base_idle_check(base);
}

static void base_release(struct evrdma_base *base);
static void base_free_due(void *arg);

void
evrdma_base_free(struct evrdma_base *base)
{
	if (!base || base->freeing)
		return;
	if (evrdma__forked) {
		/* the parent's objects: releasing them here would destroy
		 * them there; this process's exit or exec takes the memory */
		evrdma__log(EVRDMA_LOG_INFO, "evrdma_base_free in a forked "
		    "child: nothing released");
		return;
	}
	/* no user callback from here on; what the user still holds becomes
	 * a husk that its own free call releases */
	base->freeing = 1;
	/* Inside an evrdma callback (review r46): the dispatch that runs it
	 * holds what the release would destroy (an rdma_cm event not yet
	 * acked, whose id's destruction would wait for it for ever; a
	 * device being polled), so the release waits for it to return. */
	if (base->depth) {
		evrdma__ev_after_dispatch(base, base_free_due, base);
		return;
	}
	base_release(base);
}

/* (the dispatch that called evrdma_base_free() returned: loop.c) */
static void
base_free_due(void *arg)
{
	base_release(arg);
}

static void
base_release(struct evrdma_base *base)
{
	struct evrdma_conn *conn;
	struct evrdma_listener *lst;
	struct evrdma__hook *c;

	pthread_mutex_lock(&all_bases_lock);
	LIST_REMOVE(base, all_link);
	pthread_mutex_unlock(&all_bases_lock);
	evrdma__linger_fini(base);
	evrdma__warm_fini(base);
	while ((c = LIST_FIRST(&base->hooks))) {
		LIST_REMOVE(c, link);
		c->base_gone(c);
	}
	while ((lst = LIST_FIRST(&base->listeners)))
		evrdma__listener_release_now(lst);
	while ((conn = TAILQ_FIRST(&base->conns)))
		evrdma__conn_release_now(conn);
	evrdma__srq_release_all(base);
	evrdma__mr_release_all(base);
	evrdma__dev_free_all(base);
	evrdma__work_fini(base);
	evrdma__ev_free(base->idle_ev);
	evrdma__ev_free(base->cm_ev);
	if (base->cm_ch)
		EVRDMA_SYM(rdma_destroy_event_channel)(base->cm_ch);
	evrdma__resolver_free(base->resolver);
	evrdma__reqtab_fini(&base->reqs);
	evrdma__rings_fini(base);
	if (base->no_rdma) {
		pthread_mutex_lock(&tcp_bases_lock);
		LIST_REMOVE(base, tcp_link);
		pthread_mutex_unlock(&tcp_bases_lock);
	}
	free(base);
}

struct event_base *
evrdma_base_get_event_base(struct evrdma_base *base)
{
	return base ? base->eb : NULL;
}

/*
 * struct evrdma_stats as the first release made it, through its last
 * field: the smallest size a caller compiled against any release passes.
 * Fields added later go after it (doc/ABI.md); this never changes.
 */
#define STATS_SIZE_0_1 \
	(offsetof(struct evrdma_stats, bevs) + sizeof(unsigned))

int
evrdma_base_get_stats(struct evrdma_base *base, struct evrdma_stats *out,
    size_t outlen)
{
	struct evrdma_stats st;

	if (!base || !out)
		return evrdma__fail(EINVAL, "evrdma_base_get_stats: no %s",
		    base ? "struct evrdma_stats" : "base");
	if (outlen < STATS_SIZE_0_1)
		return evrdma__fail(EINVAL, "evrdma_base_get_stats: size %zu "
		    "is below that of struct evrdma_stats (%zu); pass "
		    "sizeof(struct evrdma_stats)", outlen, sizeof(st));
	st = base->stats;
	st.reqs = base->reqs.live;
	return evrdma__stats_out(out, outlen, &st, sizeof(st),
	    STATS_SIZE_0_1);
}
