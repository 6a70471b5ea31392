/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the run-time table of rdma-core entry points (private).
 *
 * Every rdma-core call of the library goes through EVRDMA_SYM(name).
 * ibv_post_send, ibv_post_recv, ibv_poll_cq and ibv_req_notify_cq are
 * static inline calls through the device context's ops and need no symbol,
 * so they are called directly.
 */
#ifndef EVRDMA_RDMA_SYM_H_INCLUDED_
#define EVRDMA_RDMA_SYM_H_INCLUDED_

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

/* X(library, return type, name, parameter list) */
#define EVRDMA_IBV_SYMS(X) \
	X(ibv, struct ibv_device **, ibv_get_device_list, (int *)) \
	X(ibv, void, ibv_free_device_list, (struct ibv_device **)) \
	X(ibv, const char *, ibv_get_device_name, (struct ibv_device *)) \
	X(ibv, struct ibv_pd *, ibv_alloc_pd, (struct ibv_context *)) \
	X(ibv, int, ibv_dealloc_pd, (struct ibv_pd *)) \
	X(ibv, struct ibv_comp_channel *, ibv_create_comp_channel, (struct ibv_context *)) \
	X(ibv, int, ibv_destroy_comp_channel, (struct ibv_comp_channel *)) \
	X(ibv, struct ibv_cq *, ibv_create_cq, (struct ibv_context *, int, void *, struct ibv_comp_channel *, int)) \
	X(ibv, int, ibv_destroy_cq, (struct ibv_cq *)) \
	X(ibv, int, ibv_get_cq_event, (struct ibv_comp_channel *, struct ibv_cq **, void **)) \
	X(ibv, void, ibv_ack_cq_events, (struct ibv_cq *, unsigned int)) \
	X(ibv, struct ibv_mr *, ibv_reg_mr, (struct ibv_pd *, void *, size_t, int)) \
	X(ibv, int, ibv_dereg_mr, (struct ibv_mr *)) \
	X(ibv, int, ibv_query_device, (struct ibv_context *, struct ibv_device_attr *)) \
	X(ibv, struct ibv_qp *, ibv_create_qp, (struct ibv_pd *, struct ibv_qp_init_attr *)) \
	X(ibv, int, ibv_destroy_qp, (struct ibv_qp *)) \
	X(ibv, int, ibv_modify_qp, (struct ibv_qp *, struct ibv_qp_attr *, int)) \
	X(ibv, int, ibv_query_qp, (struct ibv_qp *, struct ibv_qp_attr *, int, struct ibv_qp_init_attr *)) \
	X(ibv, struct ibv_srq *, ibv_create_srq, (struct ibv_pd *, struct ibv_srq_init_attr *)) \
	X(ibv, int, ibv_modify_srq, (struct ibv_srq *, struct ibv_srq_attr *, int)) \
	X(ibv, int, ibv_destroy_srq, (struct ibv_srq *)) \
	X(ibv, int, ibv_get_async_event, (struct ibv_context *, struct ibv_async_event *)) \
	X(ibv, void, ibv_ack_async_event, (struct ibv_async_event *)) \
	X(ibv, const char *, ibv_wc_status_str, (enum ibv_wc_status)) \
	X(ibv, const char *, ibv_event_type_str, (enum ibv_event_type)) \
	X(ibv, int, ibv_fork_init, (void)) \
	X(ibv, enum ibv_fork_status, ibv_is_fork_initialized, (void))

#define EVRDMA_RDMACM_SYMS(X) \
	X(cm, struct rdma_event_channel *, rdma_create_event_channel, (void)) \
	X(cm, void, rdma_destroy_event_channel, (struct rdma_event_channel *)) \
	X(cm, int, rdma_create_id, (struct rdma_event_channel *, struct rdma_cm_id **, void *, enum rdma_port_space)) \
	X(cm, int, rdma_destroy_id, (struct rdma_cm_id *)) \
	X(cm, int, rdma_bind_addr, (struct rdma_cm_id *, struct sockaddr *)) \
	X(cm, int, rdma_listen, (struct rdma_cm_id *, int)) \
	X(cm, int, rdma_resolve_addr, (struct rdma_cm_id *, struct sockaddr *, struct sockaddr *, int)) \
	X(cm, int, rdma_resolve_route, (struct rdma_cm_id *, int)) \
	X(cm, int, rdma_init_qp_attr, (struct rdma_cm_id *, struct ibv_qp_attr *, int *)) \
	X(cm, int, rdma_establish, (struct rdma_cm_id *)) \
	X(cm, int, rdma_connect, (struct rdma_cm_id *, struct rdma_conn_param *)) \
	X(cm, int, rdma_accept, (struct rdma_cm_id *, struct rdma_conn_param *)) \
	X(cm, int, rdma_reject, (struct rdma_cm_id *, const void *, uint8_t)) \
	X(cm, int, rdma_disconnect, (struct rdma_cm_id *)) \
	X(cm, int, rdma_get_cm_event, (struct rdma_event_channel *, struct rdma_cm_event **)) \
	X(cm, int, rdma_ack_cm_event, (struct rdma_cm_event *)) \
	X(cm, const char *, rdma_event_str, (enum rdma_cm_event_type)) \
	X(cm, __be16, rdma_get_src_port, (struct rdma_cm_id *)) \
	X(cm, int, rdma_notify, (struct rdma_cm_id *, enum ibv_event_type)) \
	X(cm, int, rdma_set_option, (struct rdma_cm_id *, int, int, void *, size_t)) \
	X(cm, struct ibv_context **, rdma_get_devices, (int *)) \
	X(cm, void, rdma_free_devices, (struct ibv_context **))

struct evrdma_rdma_syms {
#define EVRDMA_SYM_FIELD(lib, ret, name, args) ret (*name) args;
	EVRDMA_IBV_SYMS(EVRDMA_SYM_FIELD)
	EVRDMA_RDMACM_SYMS(EVRDMA_SYM_FIELD)
#undef EVRDMA_SYM_FIELD
	/* ibv_query_port's exported symbol takes the old, shorter attribute
	 * struct; the header's inline wrapper prefers the provider's op. */
	int (*ibv_query_port_compat)(struct ibv_context *, uint8_t, void *);
	/* Optional (rdma-core 29+): registration at an address of our
	 * choosing, so that no process address goes on the wire. NULL when
	 * the library is older. */
	struct ibv_mr *(*ibv_reg_mr_iova2)(struct ibv_pd *, void *, size_t,
	    uint64_t, unsigned int);
};

extern struct evrdma_rdma_syms evrdma__syms;

/** Call an rdma-core function through the table (evrdma__rdma_load() first). */
#define EVRDMA_SYM(name) (evrdma__syms.name)

/* Loads both libraries once; 0, or -1 with errno ENOSYS and evrdma_errmsg. */
int evrdma__rdma_load(void);

/* Nonzero in a process forked from one that had opened RDMA objects: the
 * kernel handles it inherited are the parent's, so nothing here may use or
 * destroy them (rdma_sym.c). */
extern int evrdma__forked;
/* The process now holds RDMA objects of its own (a child forked from here
 * on sets evrdma__forked). */
void evrdma__rdma_opened(void);

/* ibv_query_port through the provider op, as verbs.h's inline does. */
int evrdma__query_port(struct ibv_context *ctx, uint8_t port,
    struct ibv_port_attr *attr);

#endif /* EVRDMA_RDMA_SYM_H_INCLUDED_ */
