/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma-rawpp --conn-rate N: the floor of a serial connection on raw
 * rdma_cm, beside evrdma-bench --conn-rate (the same cycle over evrdma
 * channels or TCP). N connections one after another, each: create an id,
 * resolve the address and the route, create a queue pair, connect, send
 * one ping and take its echo, disconnect, destroy the queue pair and the
 * id (without waiting for the peer's answer to the disconnect). That is what any rdma_cm program pays per connection and no more:
 * the protection domain, the completion queue and the registered buffer
 * are made once, for all the connections (a program that wanted each
 * connection's memory apart from the others', as evrdma does, would pay
 * for those too), every wait blocks in the kernel, and there is no event
 * loop. cmtime (rdmacm-utils) times each step for many connections at
 * once; this is the same steps one connection at a time, as a client
 * that opens a connection per request does.
 *
 * The server takes the connections one at a time: CONNECT_REQUEST, a
 * queue pair and a receive, accept, ESTABLISHED, the ping, its echo,
 * DISCONNECTED, destroy. The client prints evrdma-bench's line:
 * connections per second and the mean connect time (rdma_create_id to
 * ESTABLISHED), and the time from there to the echo.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "rawconn.h"

struct rc_shared {
	struct rdma_event_channel *ec;
	struct ibv_context *verbs;	/* the device of the first id */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *mem;			/* [0, size): receive; then the send */
	size_t size;
};

static int
rc_die(const char *what)
{
	fprintf(stderr, "evrdma-rawpp --conn-rate: %s: %s\n", what,
	    strerror(errno));
	return -1;
}

/* PD, CQ and buffer, once, on the device of the first connection */
static int
rc_shared_make(struct rc_shared *s, struct ibv_context *verbs)
{
	if (s->pd) {
		if (verbs != s->verbs) {
			errno = EXDEV;
			return rc_die("a connection on another device");
		}
		return 0;
	}
	s->verbs = verbs;
	s->pd = ibv_alloc_pd(verbs);
	s->cc = s->pd ? ibv_create_comp_channel(verbs) : NULL;
	s->cq = s->cc ? ibv_create_cq(verbs, 16, NULL, s->cc, 0) : NULL;
	s->mem = calloc(2, s->size);
	s->mr = s->cq && s->mem ? ibv_reg_mr(s->pd, s->mem, 2 * s->size,
	    IBV_ACCESS_LOCAL_WRITE) : NULL;
	return s->mr ? 0 : rc_die("PD, CQ or memory");
}

/* a queue pair for @p id, with one receive posted */
static int
rc_qp(struct rc_shared *s, struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa = { 0 };
	struct ibv_sge sge = { (uintptr_t)s->mem, (uint32_t)s->size,
	    s->mr->lkey };
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;

	qa.send_cq = qa.recv_cq = s->cq;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	if (rdma_create_qp(id, s->pd, &qa))
		return rc_die("rdma_create_qp");
	if (ibv_post_recv(id->qp, &wr, &bad))
		return rc_die("ibv_post_recv");
	return 0;
}

/* Sleep until the receive of @p qp completes (its send's completion, if
 * it comes first, is taken on the way, and so are the flushes of an
 * earlier connection's QP: the CQ is shared, and a server that destroyed
 * its QP before its echo's completion came leaves one). */
static int
rc_recv(struct rc_shared *s, const struct ibv_qp *qp)
{
	struct ibv_wc wc;
	struct ibv_cq *cq;
	void *ctx;
	int n;

	for (;;) {
		while ((n = ibv_poll_cq(s->cq, 1, &wc)) > 0) {
			if (wc.qp_num != qp->qp_num)
				continue;
			if (wc.status != IBV_WC_SUCCESS) {
				fprintf(stderr, "evrdma-rawpp --conn-rate: "
				    "%s\n", ibv_wc_status_str(wc.status));
				return -1;
			}
			if (wc.opcode == IBV_WC_RECV)
				return 0;
		}
		if (n < 0 || ibv_req_notify_cq(s->cq, 0))
			return rc_die("ibv_poll_cq");
		/* what came before the arm raised no event */
		if ((n = ibv_poll_cq(s->cq, 1, &wc)) > 0) {
			if (wc.qp_num != qp->qp_num)
				continue;
			if (wc.status != IBV_WC_SUCCESS)
				return -1;
			if (wc.opcode == IBV_WC_RECV)
				return 0;
			continue;
		}
		if (ibv_get_cq_event(s->cc, &cq, &ctx))
			return rc_die("ibv_get_cq_event");
		ibv_ack_cq_events(cq, 1);
	}
}

static int
rc_send(struct rc_shared *s, struct rdma_cm_id *id, const uint8_t *buf)
{
	struct ibv_sge sge = { (uintptr_t)buf, (uint32_t)s->size,
	    s->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
	    .opcode = IBV_WR_SEND }, *bad;

	return ibv_post_send(id->qp, &wr, &bad) ? rc_die("ibv_post_send") : 0;
}

static int
rc_client(struct rc_shared *s, const struct addrinfo *ai, long n)
{
	struct rdma_conn_param cp = { .retry_count = 7, .rnr_retry_count = 7 };
	uint64_t t0 = evrdma_raw_now_ns(), c0, c1, sum_connect = 0, sum_first = 0;
	uint8_t *ping;
	double sec;
	long i;

	for (i = 0; i < n; i++) {
		struct rdma_cm_id *id;

		c0 = evrdma_raw_now_ns();
		if (rdma_create_id(s->ec, &id, NULL, RDMA_PS_TCP))
			return rc_die("rdma_create_id");
		if (rdma_resolve_addr(id, NULL, ai->ai_addr, 2000) ||
		    evrdma_raw_cm_wait(s->ec, RDMA_CM_EVENT_ADDR_RESOLVED, NULL) ||
		    rdma_resolve_route(id, 2000) ||
		    evrdma_raw_cm_wait(s->ec, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL) ||
		    rc_shared_make(s, id->verbs) || rc_qp(s, id) ||
		    rdma_connect(id, &cp) ||
		    evrdma_raw_cm_wait(s->ec, RDMA_CM_EVENT_ESTABLISHED, NULL))
			return rc_die("connect");
		c1 = evrdma_raw_now_ns();
		sum_connect += c1 - c0;
		ping = s->mem + s->size;
		ping[0] = (uint8_t)i;
		if (rc_send(s, id, ping) || rc_recv(s, id->qp))
			return -1;
		if (s->mem[0] != ping[0]) {
			fprintf(stderr, "evrdma-rawpp --conn-rate: the echo "
			    "differs from the ping\n");
			return -1;
		}
		sum_first += evrdma_raw_now_ns() - c1;
		/* No wait for the peer's DREP: the id's DISCONNECTED, still
		 * to come, dies with it (a close as cheap as rdma_cm allows;
		 * evrdma's channel closes the same way, without waiting) */
		if (rdma_disconnect(id))
			return rc_die("rdma_disconnect");
		rdma_destroy_qp(id);
		rdma_destroy_id(id);
	}
	sec = (double)(evrdma_raw_now_ns() - t0) / 1e9;
	printf("connection setup: %ld connections one after another on raw "
	    "rdma_cm (connect, a %zu-byte ping and its echo, close), "
	    "%.3f s\n", n, s->size, sec);
	printf(" #conns     seconds[s]   ConnRate[conn/s]   "
	    "t_connect[usec]   t_first[usec]\n");
	printf(" %-10ld %-12.3f %-18.2f %-17.2f %.2f\n", n, sec,
	    (double)n / sec, (double)sum_connect / 1e3 / (double)n,
	    (double)sum_first / 1e3 / (double)n);
	fflush(stdout);
	return 0;
}

static int
rc_server(struct rc_shared *s, const struct addrinfo *ai, long n)
{
	struct rdma_conn_param cp = { .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_id *lid;
	long i;

	if (rdma_create_id(s->ec, &lid, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(lid, ai->ai_addr) || rdma_listen(lid, 16))
		return rc_die("listen");
	printf("listening on port %d\n", ntohs(rdma_get_src_port(lid)));
	fflush(stdout);
	for (i = 0; i < n; i++) {
		struct rdma_cm_id *id;

		if (evrdma_raw_cm_wait(s->ec, RDMA_CM_EVENT_CONNECT_REQUEST, &id) ||
		    rc_shared_make(s, id->verbs) || rc_qp(s, id) ||
		    rdma_accept(id, &cp) ||
		    evrdma_raw_cm_wait(s->ec, RDMA_CM_EVENT_ESTABLISHED, NULL))
			return rc_die("accept");
		/* the echo goes from where the ping landed */
		if (rc_recv(s, id->qp) || rc_send(s, id, s->mem) ||
		    evrdma_raw_cm_wait(s->ec, RDMA_CM_EVENT_DISCONNECTED, NULL))
			return -1;
		rdma_disconnect(id);
		rdma_destroy_qp(id);
		rdma_destroy_id(id);
	}
	rdma_destroy_id(lid);
	return 0;
}

int
evrdma_rawconn(int server, const struct addrinfo *ai, long n, size_t size)
{
	struct rc_shared s = { .size = size };
	int rc;

	if (!(s.ec = rdma_create_event_channel()))
		return rc_die("rdma_create_event_channel");
	rc = server ? rc_server(&s, ai, n) : rc_client(&s, ai, n);
	if (s.mr)
		ibv_dereg_mr(s.mr);
	if (s.cq)
		ibv_destroy_cq(s.cq);
	if (s.cc)
		ibv_destroy_comp_channel(s.cc);
	if (s.pd)
		ibv_dealloc_pd(s.pd);
	free(s.mem);
	rdma_destroy_event_channel(s.ec);
	return rc;
}
