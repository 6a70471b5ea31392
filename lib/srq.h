/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: shared receive queues (srq.c), as the connections, listeners,
 * channels' pool and the base see them.
 */
#ifndef EVRDMA_INTERNAL_SRQ_H_INCLUDED_
#define EVRDMA_INTERNAL_SRQ_H_INCLUDED_

struct evrdma_base;
struct evrdma_conn;
struct evrdma_cq;
struct evrdma__ep;
struct evrdma__pd;
struct ibv_qp_init_attr;

struct evrdma_srq;
struct evrdma_dev;

/* @p conn will use @p srq (a reference; before its QP exists). 0, or -1
 * with errno. */
int evrdma__srq_use(struct evrdma_conn *conn, struct evrdma_srq *srq);
/* The QP of @p conn exists / is about to be destroyed. */
void evrdma__srq_attach(struct evrdma_conn *conn);
void evrdma__srq_detach(struct evrdma_conn *conn);
/* @p conn was dropped before it was handed out: what it held completes
 * now, without it, from the loop (not when its QP goes: review) */
void evrdma__srq_dropped(struct evrdma_conn *conn);
/* A raw listener's @p conn was handed to the application (its accept
 * callback returned): the receives it consumed before complete now, in
 * order (srq.c's held completions). */
void evrdma__srq_handed_out(struct evrdma_conn *conn);
/* conn_destroy: the connection's reference goes. */
void evrdma__srq_unuse(struct evrdma_conn *conn);
/* A listener's reference goes (NULL allowed). */
void evrdma__srq_drop(struct evrdma_srq *srq);
/* The queue's protection domain, with a reference, for a connection on
 * @p dev: NULL with errno EINVAL when the queue is on another device. */
struct evrdma__pd *evrdma__srq_pd_get(struct evrdma_srq *srq,
    struct evrdma_dev *dev);
/* A QP of the queue's: its receives from the queue, on its CQ share. */
void evrdma__srq_qp_attr(const struct evrdma_srq *srq,
    struct ibv_qp_init_attr *attr);
/* Base free: release every queue now (no callback); handles the user
 * still holds become husks. After the connections, before the regions. */
void evrdma__srq_release_all(struct evrdma_base *base);
/* A queue of channels (evrdma_channel_srq_new) holds their receive pool,
 * which chan_pool.c keeps: srq.c only carries it and tells it through its
 * ops when the device objects go (fini, before the PD; husk: base free)
 * and when the queue's memory goes (free). */
struct evrdma__chpool;
struct evrdma__chpool_ops {
	void (*fini)(struct evrdma__chpool *pool, int husk);
	void (*free)(struct evrdma__chpool *pool);
};
struct evrdma__chpool *evrdma__srq_chpool(const struct evrdma_srq *srq);
void evrdma__srq_set_chpool(struct evrdma_srq *srq,
    struct evrdma__chpool *pool, const struct evrdma__chpool_ops *ops);
struct evrdma__pd *evrdma__srq_pd(const struct evrdma_srq *srq);
struct evrdma__ep *evrdma__srq_ep(struct evrdma_srq *srq);
/* its CQ share, NULL once its device objects are gone */
struct evrdma_cq *evrdma__srq_cq(const struct evrdma_srq *srq);
int evrdma__srq_alive(const struct evrdma_srq *srq);

#endif
