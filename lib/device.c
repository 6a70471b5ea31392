/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: per (base, device) resources: one completion channel on the loop,
 * the completion queues shared by every connection on the device, the
 * polling of those CQs, protection domains (one per connection), and the
 * device's asynchronous events.
 *
 * The async event fd belongs to the verbs context, which librdmacm shares
 * by every id of the process on that device: with several bases (one per
 * thread) on one device, whichever loop reads an event first would keep it
 * from the others. Every event is therefore fanned out to all bases on the
 * device through a process-wide list of subscriptions, each with a queue
 * and an eventfd its own loop watches.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "evrdma-internal.h"

/* ibv_ack_cq_events takes a mutex: ack in batches, and always everything
 * before ibv_destroy_cq (which waits for all events to be acked). */
#define CQ_ACK_BATCH 64

static unsigned dev_poll(struct evrdma_dev *dev);
static void poll_later(struct evrdma_dev *dev);

/* ---- asynchronous events, fanned out to every base on the device ---- */

struct async_item {
	int type;			/* enum ibv_event_type */
	const void *elem;		/* the QP or CQ (compared, never used) */
	uint32_t qp_num;		/* with elem: a QP made at the same
					 * address later is another QP */
	uint8_t port;
};

struct evrdma__async_sub {
	struct ibv_context *verbs;
	int efd;
	struct async_item *q;		/* under subs_lock */
	unsigned n, cap;
	struct evrdma__async_sub *next;
};

static pthread_mutex_t subs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct evrdma__async_sub *subs;

static int
sub_push(struct evrdma__async_sub *s, const struct async_item *it)
{
	if (s->n == s->cap) {
		unsigned cap = s->cap ? s->cap * 2 : 8;
		struct async_item *q = realloc(s->q, cap * sizeof(*q));

		if (!q)
			return -1;
		s->q = q;
		s->cap = cap;
	}
	s->q[s->n++] = *it;
	return 0;
}

static struct evrdma__async_sub *
sub_new(struct ibv_context *verbs)
{
	struct evrdma__async_sub *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->verbs = verbs;
	s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->efd < 0) {
		free(s);
		return NULL;
	}
	pthread_mutex_lock(&subs_lock);
	s->next = subs;
	subs = s;
	pthread_mutex_unlock(&subs_lock);
	return s;
}

static void
sub_free(struct evrdma__async_sub *s)
{
	struct evrdma__async_sub **sp;

	if (!s)
		return;
	pthread_mutex_lock(&subs_lock);
	for (sp = &subs; *sp; sp = &(*sp)->next)
		if (*sp == s) {
			*sp = s->next;
			break;
		}
	pthread_mutex_unlock(&subs_lock);
	close(s->efd);
	free(s->q);
	free(s);
}

static int
async_item_of(const struct ibv_async_event *ae, struct async_item *it)
{
	memset(it, 0, sizeof(*it));
	it->type = ae->event_type;
	switch (ae->event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_COMM_EST:
		it->elem = ae->element.qp;
		it->qp_num = ae->element.qp->qp_num;
		return 0;
	case IBV_EVENT_CQ_ERR:
		it->elem = ae->element.cq;
		return 0;
	case IBV_EVENT_SRQ_LIMIT_REACHED:
	case IBV_EVENT_SRQ_ERR:
		it->elem = ae->element.srq;
		return 0;
	case IBV_EVENT_PORT_ERR:
		it->port = (uint8_t)ae->element.port_num;
		return 0;
	case IBV_EVENT_DEVICE_FATAL:
		return 0;
	default:
		return -1;	/* informational: nobody acts on it */
	}
}

/* Whether @p it concerns @p ep. */
static int
async_hits(const struct async_item *it, const struct evrdma__ep *ep)
{
	switch (it->type) {
	case IBV_EVENT_CQ_ERR:
		return it->elem == ep->cq;
	case IBV_EVENT_SRQ_LIMIT_REACHED:
	case IBV_EVENT_SRQ_ERR:
		return ep->srq && it->elem == ep->srq;
	case IBV_EVENT_PORT_ERR:
		return ep->port == it->port;
	case IBV_EVENT_DEVICE_FATAL:
		return 1;
	default:
		return it->elem == ep->qp && it->qp_num == ep->qp_num;
	}
}

/* Tell the endpoints of this base what concerns them. */
static void
async_dispatch(struct evrdma_dev *dev, const struct async_item *it)
{
	struct evrdma__ep *ep, *next;

	if (it->type == IBV_EVENT_DEVICE_FATAL)
		evrdma__dev_dead(dev);
	for (ep = LIST_FIRST(&dev->eps); ep; ep = next) {
		if (!async_hits(it, ep)) {
			next = LIST_NEXT(ep, dev_link);
			continue;
		}
		/* the endpoint stays listed until its connection is
		 * finalised, which is deferred: next is safe after the call */
		evrdma__ep_ref(ep);
		ep->ops->async(ep, it->type);
		next = LIST_NEXT(ep, dev_link);
		evrdma__ep_unref(ep);
	}
}

/* Take what other bases queued for us (and what we queued ourselves). */
static void
async_drain_own(struct evrdma_dev *dev)
{
	struct async_item *q;
	unsigned n, i;
	uint64_t v;

	if (read(dev->sub->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		evrdma__log(EVRDMA_LOG_WARN, "async eventfd: %s",
		    strerror(errno));
	pthread_mutex_lock(&subs_lock);
	q = dev->sub->q;
	n = dev->sub->n;
	dev->sub->q = NULL;
	dev->sub->n = dev->sub->cap = 0;
	pthread_mutex_unlock(&subs_lock);
	dev->refcnt++;
	for (i = 0; i < n; i++)
		async_dispatch(dev, &q[i]);
	free(q);
	evrdma__dev_put(dev);
}

static void
async_notified(int fd, void *arg)
{
	async_drain_own(arg);
}

/*
 * The shared async fd is readable (every loop on the device may wake; the
 * first to read takes the event): queue each event to every base on the
 * device, wake the others, then act on our own share.
 */
static void
async_readable(int fd, void *arg)
{
	struct evrdma_dev *dev = arg;
	struct ibv_async_event ae;
	struct async_item items[16];
	unsigned n = 0, i;
	int mine = 0;

	while (n < 16 &&
	    EVRDMA_SYM(ibv_get_async_event)(dev->verbs, &ae) == 0) {
		int act = async_item_of(&ae, &items[n]) == 0;

		evrdma__log(EVRDMA_LOG_WARN, "async event on %s: %s",
		    EVRDMA_SYM(ibv_get_device_name)(dev->verbs->device),
		    EVRDMA_SYM(ibv_event_type_str)(ae.event_type));
		/* ack before acting: destroying a QP waits for its acks */
		EVRDMA_SYM(ibv_ack_async_event)(&ae);
		if (act)
			n++;
	}
	/* (more than 16: the level-triggered fd wakes us again) */
	pthread_mutex_lock(&subs_lock);
	for (i = 0; i < n; i++) {
		struct evrdma__async_sub *s;

		for (s = subs; s; s = s->next) {
			uint64_t one = 1;

			if (s->verbs != dev->verbs)
				continue;
			if (sub_push(s, &items[i]) < 0)
				continue;	/* no memory: that base misses it */
			if (s == dev->sub)
				mine = 1;
			else if (write(s->efd, &one, sizeof(one)) < 0)
				continue;	/* full: a wake-up is due */
		}
	}
	pthread_mutex_unlock(&subs_lock);
	if (mine)
		async_drain_own(dev);
}

/* ---- completion queues and polling ---- */

static void
cq_ack_all(struct evrdma_cq *cq)
{
	if (cq->unacked) {
		EVRDMA_SYM(ibv_ack_cq_events)(cq->cq, cq->unacked);
		cq->unacked = 0;
	}
}

static void
cq_arm(struct evrdma_cq *cq)
{
	if (ibv_req_notify_cq(cq->cq, 0))
		evrdma__log(EVRDMA_LOG_ERROR, "ibv_req_notify_cq failed");
	else
		cq->armed = 1;
}

/*
 * Before the loop sleeps: arm every CQ that is not, then poll once more,
 * so that a completion that came before the arm is not left behind. When
 * a resume poll is already due (the budget ran out), that poll comes
 * after the arm and does the same.
 */
static void
cq_arm_all(struct evrdma_dev *dev)
{
	struct evrdma_cq *cq;
	int any = 0, failed = 0;

	LIST_FOREACH(cq, &dev->cqs, link) {
		if (!cq->armed) {
			cq_arm(cq);
			cq->armed_pending = 1;
			any = 1;
			failed |= !cq->armed;
		}
	}
	/* A CQ that could not be armed raises no event: it is polled again
	 * from the loop (and armed again there, busy polling), never from
	 * here, where dev_poll() would call us back for as long as the
	 * arm keeps failing (found by review: the stack overflowed). */
	if (failed) {
		if (!dev->poll_due)
			poll_later(dev);
		return;
	}
	if (any && !dev->poll_due)
		dev_poll(dev);
}

/* Take one pending CQ event (if any) and ack it, batched. */
static void
cq_take_event(struct evrdma_dev *dev)
{
	struct ibv_cq *ibcq;
	void *ctx;

	if (EVRDMA_SYM(ibv_get_cq_event)(dev->cc, &ibcq, &ctx) == 0) {
		struct evrdma_cq *cq = ctx;

		if (++cq->unacked >= CQ_ACK_BATCH)
			cq_ack_all(cq);
		cq->armed = 0;
		cq->armed_pending = 1;
	}
}

/*
 * The completion channel is readable: some CQ of the device has
 * completions. Poll first and take the event afterwards: reading the
 * event and re-arming are two system calls, and doing them after the
 * pass (whose work has by then posted the replies) takes them off the
 * path from a completion to the send it causes. cq_arm_all() re-arms and
 * polls once more, so a completion that lands between the last poll and
 * the re-arm is still found. A CQ event may come with no completion
 * behind it; that is harmless.
 *
 * One event per wake-up: the fd is level-triggered, so another pending
 * event (another CQ) wakes the loop again, and draining until EAGAIN
 * would cost a system call on every wake-up.
 *
 * With busy polling the event is taken first and the CQ is not re-armed
 * here: that waits until the spinning stops (dev_poll -> cq_arm_all),
 * because while traffic flows an armed CQ would raise an event (and the
 * provider a notification) for every completion the spin finds anyway.
 */
static void
cc_readable(int fd, void *arg)
{
	struct evrdma_dev *dev = arg;
	struct evrdma_cq *cq;

	if (dev->base->cfg.busy_poll_us) {
		cq_take_event(dev);
		dev_poll(dev);
		return;
	}
	dev->refcnt++;
	/* the event has not told which CQ yet: look at all of them */
	LIST_FOREACH(cq, &dev->cqs, link)
		cq->armed_pending = 1;
	dev_poll(dev);
	cq_take_event(dev);
	if (!dev->dead)
		cq_arm_all(dev);
	evrdma__dev_put(dev);
}

static void
poll_resume(void *arg)
{
	struct evrdma_dev *dev = arg;

	dev->poll_due = 0;
	dev_poll(dev);
}

/* dev_poll() from the loop, after its other events */
static void
poll_later(struct evrdma_dev *dev)
{
	if (evrdma__ev_timer_start(dev->poll_ev, 0) == 0)
		dev->poll_due = 1;
}

/* Passes with completions one spin runs before it yields to the loop. */
#define SPIN_WORK_PASSES 16

/*
 * Busy polling (evrdma_config_set_busy_poll): poll every CQ of the device
 * until no completion has turned up for the configured time. The CQs stay
 * unarmed meanwhile; when the time is over, cq_arm_all() arms them and
 * polls once more before the loop sleeps.
 *
 * A pass that finds completions runs their work (dev_poll) and the spin
 * goes on, so a reply costs neither a loop iteration nor a system call;
 * after SPIN_WORK_PASSES such passes the spin yields: the next one runs
 * from a 0 ms timer, after the loop has served its other events. The
 * clock is read only every 64th empty round, and the idle time counts
 * from the first of those reads: where the clock is not in the vDSO (an
 * HPET clock source) a read costs more than a poll.
 */
static void
dev_spin(void *arg)
{
	struct evrdma_dev *dev = arg;
	uint64_t idle_since = 0, now;
	struct evrdma_cq *cq;
	unsigned i, found, work = 0;

	dev->refcnt++;
	for (i = 1; !dev->dead; i++) {
		LIST_FOREACH(cq, &dev->cqs, link)
			cq->armed_pending = 1;
		dev->spinning = 1;
		found = dev_poll(dev);
		dev->spinning = 0;
		if (found) {
			if (++work == SPIN_WORK_PASSES) {
				evrdma__ev_timer_start(dev->spin_ev, 0);
				break;
			}
			idle_since = 0;
			i = 0;
			continue;
		}
		if (i % 64)
			continue;
		now = evrdma__now_us();
		if (!idle_since)
			idle_since = now;
		else if (now - idle_since >= dev->base->cfg.busy_poll_us) {
			cq_arm_all(dev);	/* going to sleep */
			break;
		}
	}
	evrdma__dev_put(dev);
}

/*
 * Poll the CQs that were signalled, at most cfg.poll_budget completions per
 * call, round-robin over the CQs. When the budget runs out, polling resumes
 * from a 0 ms timer, i.e. after the loop has served its other events: one
 * busy connection cannot starve the loop, and no completion is left behind
 * (the CQs stay marked until a poll finds them empty).
 */
static unsigned
dev_poll(struct evrdma_dev *dev)
{
	struct evrdma_base *base = dev->base;
	unsigned budget = base->cfg.poll_budget, found;
	struct ibv_wc wc[16];
	struct evrdma_cq *cq;
	int again;

	/* Completions may free connections (CQs stay with the device, which
	 * we hold, so the list walk stays valid; a CQ made meanwhile goes to
	 * the head). Round-robin, 16 completions per CQ per round, so the
	 * connections of one busy CQ cannot starve those of the others, and
	 * each pass starts after the CQ where the last one took its last
	 * completions: with a thousand connections on eight CQs, passes that
	 * all began at the head served the first four and left the others
	 * a seventh of their share (measured, two guests). */
	dev->refcnt++;
	base->work.in_poll++;
	do {
		struct evrdma_cq *start = dev->poll_next ? dev->poll_next :
		    LIST_FIRST(&dev->cqs), *next;

		again = 0;
		for (cq = start; cq; cq = next == start ? NULL : next) {
			int n, i, want;

			next = LIST_NEXT(cq, link) ? LIST_NEXT(cq, link) :
			    LIST_FIRST(&dev->cqs);
			if (!cq->armed_pending || !budget)
				continue;
			want = budget < 16 ? (int)budget : 16;
			n = ibv_poll_cq(cq->cq, want, wc);
			if (n < 0) {
				evrdma__log(EVRDMA_LOG_ERROR,
				    "ibv_poll_cq failed");
				cq->armed_pending = 0;
				continue;
			}
			if (n == 0) {
				cq->armed_pending = 0;
				cq->emptied++;
				continue;
			}
			budget -= (unsigned)n;
			dev->poll_next = next;
			/* fewer than asked: the CQ is empty, no need to come
			 * back (what lands later raises an event, or the
			 * spin or the re-arm's poll finds it) */
			if (n < want) {
				cq->armed_pending = 0;
				cq->emptied++;
			}
			for (i = 0; i < n; i++) {
				struct evrdma_req *req;

				if (wc[i].wr_id & EVRDMA__WR_RING) {
					if (!base->freeing)
						evrdma__rings_complete(
						    &base->rings, &wc[i]);
					continue;
				}
				req = evrdma__req_lookup(&base->reqs,
				    wc[i].wr_id);
				/* (none once the base is being freed: its
				 * requests are cancelled unheard) */
				if (req && !base->freeing)
					evrdma__ep_complete(req, &wc[i]);
				/* else: a late completion of a request that
				 * teardown already cancelled. */
			}
			if (cq->armed_pending)
				again = 1;
		}
	} while (again && budget);
	if (!budget) {
		LIST_FOREACH(cq, &dev->cqs, link)
			if (cq->armed_pending)
				break;
		if (cq)
			poll_later(dev);
	}
	/* what this pass's completions made due, before the loop sleeps:
	 * the rings' owners' passes in the order their completions came,
	 * then the other work due by then (not what they queue: work.c) */
	if (!--base->work.in_poll && !base->freeing) {
		int taken = evrdma__work_take(base);

		evrdma__rings_run(&base->rings);
		if (taken)
			evrdma__work_run_taken(base);
	}
	found = base->cfg.poll_budget - budget;
	if (base->cfg.busy_poll_us && !dev->dead) {
		/* traffic: look for the next completion before sleeping;
		 * none: sleep (unless the budget ran out: resuming). A spin
		 * in progress decides that itself. */
		if (!dev->spinning && found)
			evrdma__ev_timer_start(dev->spin_ev, 0);
		else if (!dev->spinning && !dev->poll_due)
			cq_arm_all(dev);
	}
	evrdma__dev_put(dev);
	return found;
}

/*
 * Poll every CQ of the device soon, from the loop rather than from inside
 * the caller: a flush (QP moved to the error state) may produce completions
 * without a CQ event, and completion callbacks must never run inside an
 * evrdma call such as evrdma_conn_free().
 */
void
evrdma__dev_poll_soon(struct evrdma_dev *dev)
{
	struct evrdma_cq *cq;

	LIST_FOREACH(cq, &dev->cqs, link)
		cq->armed_pending = 1;
	poll_later(dev);
}

void
evrdma__dev_attach(struct evrdma_dev *dev, struct evrdma__ep *ep)
{
	LIST_INSERT_HEAD(&dev->eps, ep, dev_link);
	ep->on_dev = 1;
}

void
evrdma__dev_detach(struct evrdma__ep *ep)
{
	if (ep->on_dev) {
		LIST_REMOVE(ep, dev_link);
		ep->on_dev = 0;
	}
}

/* ---- the device ---- */

void
evrdma__dev_dead(struct evrdma_dev *dev)
{
	if (dev->dead)
		return;
	dev->dead = 1;
	if (dev->base->dev_dead)
		dev->base->dev_dead(dev->base, dev);
}

static void
dev_destroy(struct evrdma_dev *dev)
{
	struct evrdma_cq *cq;

	evrdma__ev_free(dev->cc_ev);
	evrdma__ev_free(dev->async_ev);
	evrdma__ev_free(dev->notify_ev);
	evrdma__ev_free(dev->poll_ev);
	evrdma__ev_free(dev->spin_ev);
	sub_free(dev->sub);
	while ((cq = LIST_FIRST(&dev->cqs))) {
		LIST_REMOVE(cq, link);
		cq_ack_all(cq);
		EVRDMA_SYM(ibv_destroy_cq)(cq->cq);
		dev->base->stats.cqs--;
		free(cq);
	}
	if (dev->cc)
		EVRDMA_SYM(ibv_destroy_comp_channel)(dev->cc);
	free(dev);
}

/* Find or open the device resources for a verbs context (from an id). */
struct evrdma_dev *
evrdma__dev_get(struct evrdma_base *base, struct ibv_context *verbs)
{
	struct evrdma_dev *dev;
	const char *name;

	LIST_FOREACH(dev, &base->devs, link) {
		if (dev->verbs == verbs && !dev->dead) {
			dev->refcnt++;
			return dev;
		}
	}
	name = EVRDMA_SYM(ibv_get_device_name)(verbs->device);
	dev = calloc(1, sizeof(*dev));
	if (!dev) {
		evrdma__fail(ENOMEM, "out of memory");
		return NULL;
	}
	dev->base = base;
	dev->verbs = verbs;
	LIST_INIT(&dev->cqs);
	LIST_INIT(&dev->eps);
	if (EVRDMA_SYM(ibv_query_device)(verbs, &dev->attr)) {
		evrdma__fail(errno ? errno : EIO, "ibv_query_device(%s) "
		    "failed", name);
		goto fail;
	}
	dev->cc = EVRDMA_SYM(ibv_create_comp_channel)(verbs);
	if (!dev->cc) {
		evrdma__fail(errno ? errno : ENOMEM,
		    "ibv_create_comp_channel(%s) failed", name);
		goto fail;
	}
	/* All fds non-blocking: a blocking read on the loop stalls every
	 * connection. verbs->async_fd is shared by librdmacm's cached
	 * context (see the fan-out above). */
	if (evrdma__set_nonblock(dev->cc->fd) < 0 ||
	    evrdma__set_nonblock(verbs->async_fd) < 0) {
		evrdma__fail(errno, "fcntl(O_NONBLOCK) failed");
		goto fail;
	}
	dev->sub = sub_new(verbs);
	if (!dev->sub) {
		evrdma__fail(ENOMEM, "cannot subscribe to async events");
		goto fail;
	}
	dev->cc_ev = evrdma__ev_fd_new(base, dev->cc->fd, cc_readable, dev);
	dev->async_ev = evrdma__ev_fd_new(base, verbs->async_fd,
	    async_readable, dev);
	dev->notify_ev = evrdma__ev_fd_new(base, dev->sub->efd,
	    async_notified, dev);
	dev->poll_ev = evrdma__ev_timer_new(base, poll_resume, dev);
	dev->spin_ev = evrdma__ev_timer_new(base, dev_spin, dev);
	if (!dev->cc_ev || !dev->async_ev || !dev->notify_ev ||
	    !dev->poll_ev || !dev->spin_ev) {
		evrdma__fail(ENOMEM, "cannot add device events to the loop");
		goto fail;
	}
	dev->refcnt = 1;
	LIST_INSERT_HEAD(&base->devs, dev, link);
	base->stats.devices++;
	evrdma__log(EVRDMA_LOG_DEBUG, "opened device %s", name);
	return dev;
fail:
	{
		int err = errno;
		dev_destroy(dev);
		errno = err;
	}
	return NULL;
}

void
evrdma__dev_put(struct evrdma_dev *dev)
{
	if (--dev->refcnt)
		return;
	LIST_REMOVE(dev, link);
	dev->base->stats.devices--;
	dev_destroy(dev);
}

struct evrdma_dev *
evrdma__dev_get_by_name(struct evrdma_base *base, const char *name,
    const char *fn)
{
	struct ibv_context **list, *found = NULL;
	int n = 0, i;

	/* librdmacm's contexts: the ones its ids resolve to */
	list = EVRDMA_SYM(rdma_get_devices)(&n);
	if (!list) {
		evrdma__fail(errno ? errno : ENODEV, "%s: rdma_get_devices "
		    "failed", fn);
		return NULL;
	}
	for (i = 0; i < n; i++) {
		const char *dn = EVRDMA_SYM(ibv_get_device_name)(
		    list[i]->device);

		if (name ? !strcmp(dn, name) : n == 1)
			found = list[i];
	}
	EVRDMA_SYM(rdma_free_devices)(list);
	if (found)
		return evrdma__dev_get(base, found);
	if (name)
		evrdma__fail(ENODEV, "%s: no RDMA device %s", fn, name);
	else
		evrdma__fail(n ? EINVAL : ENODEV, "%s: %d RDMA devices: name "
		    "one", fn, n);
	return NULL;
}

/* Reserve n entries in a CQ with room, making a new one if none has. */
struct evrdma_cq *
evrdma__cq_reserve(struct evrdma_dev *dev, unsigned n)
{
	struct evrdma_cq *cq;
	unsigned cap = dev->dev_cq_cap;

	LIST_FOREACH(cq, &dev->cqs, link) {
		if (cq->cap - cq->reserved >= n) {
			cq->reserved += n;
			return cq;
		}
	}
	if (!cap) {
		cap = dev->base->cfg.cq_size;
		if (dev->attr.max_cqe > 0 && cap > (unsigned)dev->attr.max_cqe)
			cap = (unsigned)dev->attr.max_cqe;
		dev->dev_cq_cap = cap;
	}
	if (n > cap) {
		evrdma__fail(EINVAL, "queue depth %u exceeds the CQ size %u",
		    n, cap);
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		evrdma__fail(ENOMEM, "out of memory");
		return NULL;
	}
	cq->cq = EVRDMA_SYM(ibv_create_cq)(dev->verbs, (int)cap, cq, dev->cc,
	    0);
	if (!cq->cq) {
		int err = errno ? errno : ENOMEM;
		free(cq);
		evrdma__fail(err, "ibv_create_cq(%u) failed", cap);
		return NULL;
	}
	if (ibv_req_notify_cq(cq->cq, 0)) {
		EVRDMA_SYM(ibv_destroy_cq)(cq->cq);
		free(cq);
		evrdma__fail(EIO, "ibv_req_notify_cq failed");
		return NULL;
	}
	cq->armed = 1;
	cq->dev = dev;
	cq->cap = cap;
	cq->reserved = n;
	LIST_INSERT_HEAD(&dev->cqs, cq, link);
	dev->base->stats.cqs++;
	return cq;
}

/*
 * Give back a connection's share. Empty CQs are kept for the next
 * connection; they go with the device.
 */
void
evrdma__cq_release(struct evrdma_cq *cq, unsigned n)
{
	cq->reserved -= n;
}

/* ---- protection domains ---- */

struct evrdma__pd *
evrdma__pd_new(struct evrdma_dev *dev)
{
	struct evrdma__pd *pd = calloc(1, sizeof(*pd));

	if (!pd) {
		evrdma__fail(ENOMEM, "out of memory");
		return NULL;
	}
	pd->pd = EVRDMA_SYM(ibv_alloc_pd)(dev->verbs);
	if (!pd->pd) {
		int err = errno ? errno : ENOMEM;

		free(pd);
		evrdma__fail(err, "ibv_alloc_pd(%s) failed",
		    EVRDMA_SYM(ibv_get_device_name)(dev->verbs->device));
		return NULL;
	}
	pd->dev = dev;
	pd->refcnt = 1;
	dev->refcnt++;
	return pd;
}

void
evrdma__pd_put(struct evrdma__pd *pd)
{
	if (!pd || --pd->refcnt)
		return;
	if (EVRDMA_SYM(ibv_dealloc_pd)(pd->pd))
		evrdma__log(EVRDMA_LOG_WARN, "ibv_dealloc_pd failed");
	evrdma__dev_put(pd->dev);
	free(pd);
}

void
evrdma__dev_free_all(struct evrdma_base *base)
{
	struct evrdma_dev *dev;

	while ((dev = LIST_FIRST(&base->devs))) {
		LIST_REMOVE(dev, link);
		base->stats.devices--;
		dev_destroy(dev);
	}
}
