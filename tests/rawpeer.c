/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: the raw verbs peer (see rawpeer.h).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "rawpeer.h"
#include "testutil.h"

#define now_ms tu_now_ms

static void
put_be(uint8_t *p, uint64_t v, int n)
{
	while (n--) {
		p[n] = (uint8_t)v;
		v >>= 8;
	}
}

static uint64_t
get_be(const uint8_t *p, int n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | *p++;
	return v;
}

uint32_t
rp_fnv1a(const uint8_t *p, size_t len)
{
	uint32_t h = 2166136261u;

	while (len--) {
		h ^= *p++;
		h *= 16777619u;
	}
	return h;
}

size_t
rp_pdata(uint8_t *out, unsigned version, const void *data, size_t len,
    size_t claim)
{
	out[0] = 'E';
	out[1] = 'V';
	out[2] = 'R';
	out[3] = (uint8_t)version;
	out[4] = 1;		/* connect */
	out[5] = out[6] = 0;
	out[7] = (uint8_t)claim;
	if (len)
		memcpy(out + 8, data, len);
	return 8 + len;
}

size_t
rp_chs_encode(uint8_t *b, const struct rp_chs *h)
{
	b[0] = 'C';
	b[1] = 'H';
	b[2] = (uint8_t)h->version;
	b[3] = (uint8_t)h->mode;
	put_be(b + 4, h->slots, 2);
	b[6] = (uint8_t)h->ctrl;
	b[7] = (uint8_t)(h->length < 0 ? 32 : h->length);
	put_be(b + 8, h->slot_size, 4);
	put_be(b + 12, h->pull_min, 4);
	put_be(b + 16, h->src_rkey, 4);
	put_be(b + 20, h->src_base, 8);
	put_be(b + 28, rp_fnv1a(b, 28) ^ (h->bad_check ? 1 : 0), 4);
	return 32;
}

int
rp_chs_decode(const uint8_t *pd, size_t len, struct rp_chs *h)
{
	const uint8_t *b = pd + 8;

	if (len < 8 + 32 || b[0] != 'C' || b[1] != 'H')
		return -1;
	memset(h, 0, sizeof(*h));
	h->version = b[2];
	h->mode = b[3];
	h->slots = (unsigned)get_be(b + 4, 2);
	h->ctrl = b[6];
	h->length = b[7];
	h->slot_size = (uint32_t)get_be(b + 8, 4);
	h->pull_min = (uint32_t)get_be(b + 12, 4);
	h->src_rkey = (uint32_t)get_be(b + 16, 4);
	h->src_base = get_be(b + 20, 8);
	h->bad_check = get_be(b + 28, 4) != rp_fnv1a(b, 28);
	return 0;
}

uint32_t
rp_imm(unsigned type, unsigned dret, unsigned cret, int starved, int pull,
    unsigned pdone)
{
	return (uint32_t)type << 30 | (dret & 0x3fffu) << 16 |
	    (cret & 0xffu) << 8 | (starved ? 0x80u : 0) | (pull ? 0x40u : 0) |
	    (pdone & 0x3fu);
}

/* ---- the loop ---- */

static void
rp_cm_poll(struct rawpeer *rp)
{
	struct rdma_cm_event *ev;

	while (rdma_get_cm_event(rp->cm, &ev) == 0) {
		switch (ev->event) {
		case RDMA_CM_EVENT_ESTABLISHED:
		case RDMA_CM_EVENT_CONNECT_RESPONSE:
			rp->established = 1;
			if (ev->param.conn.private_data) {
				rp->reply_len = ev->param.conn.private_data_len;
				if (rp->reply_len > sizeof(rp->reply))
					rp->reply_len = sizeof(rp->reply);
				memcpy(rp->reply, ev->param.conn.private_data,
				    rp->reply_len);
			}
			break;
		case RDMA_CM_EVENT_REJECTED:
			rp->rejected = 1;
			if (ev->param.conn.private_data &&
			    ev->param.conn.private_data_len >= 8 &&
			    !memcmp(ev->param.conn.private_data, "EVR", 3))
				rp->reject_code = ((const uint8_t *)
				    ev->param.conn.private_data)[7];
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			rp->disconnected = 1;
			break;
		case RDMA_CM_EVENT_ADDR_RESOLVED:
		case RDMA_CM_EVENT_ROUTE_RESOLVED:
			break;
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			if (rp->id) {	/* one connection at a time */
				rdma_reject(ev->id, NULL, 0);
				break;
			}
			rp->id = ev->id;
			rp->req_len = ev->param.conn.private_data_len;
			if (rp->req_len > sizeof(rp->req))
				rp->req_len = sizeof(rp->req);
			if (ev->param.conn.private_data)
				memcpy(rp->req, ev->param.conn.private_data,
				    rp->req_len);
			break;
		default:
			rp->failed = 1;
			break;
		}
		rdma_ack_cm_event(ev);
	}
}

static void
rp_cq_poll(struct rawpeer *rp)
{
	struct ibv_wc wc[16];
	int n, i;

	if (!rp->cq)
		return;
	while ((n = ibv_poll_cq(rp->cq, 16, wc)) > 0) {
		for (i = 0; i < n && rp->nwc < RP_MAX_WC; i++) {
			struct rp_wc *w = &rp->wc[rp->nwc++];

			w->wr_id = wc[i].wr_id;
			w->status = wc[i].status;
			w->is_recv = (wc[i].wr_id & RP_RECV_BIT) != 0;
			if (wc[i].status == IBV_WC_SUCCESS) {
				w->opcode = wc[i].opcode;
				w->byte_len = wc[i].byte_len;
				w->has_imm = !!(wc[i].wc_flags &
				    IBV_WC_WITH_IMM);
				w->imm = ntohl(wc[i].imm_data);
			}
		}
	}
}

static void
rp_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	*(int *)arg = 1;
}

/* One round: the loop for at most 2 ms, then the peer's own events. */
static void
rp_round(struct rawpeer *rp)
{
	struct timeval tv = { 0, 2000 };
	struct event *t;
	int fired = 0;

	if (rp->eb) {
		t = evtimer_new(rp->eb, rp_tick_cb, &fired);
		evtimer_add(t, &tv);
		while (!fired)
			if (event_base_loop(rp->eb, EVLOOP_ONCE) < 0)
				break;
		event_free(t);
	}
	if (rp->cm && !rp->cm_skip)
		rp_cm_poll(rp);
	rp_cq_poll(rp);
}

void
rp_poll(struct rawpeer *rp)
{
	if (rp->cm && !rp->cm_skip)
		rp_cm_poll(rp);
	rp_cq_poll(rp);
}

void
rp_run(struct rawpeer *rp, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (now_ms() < end)
		rp_round(rp);
}

int
rp_wait_wc(struct rawpeer *rp, unsigned n, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (rp->nwc < n) {
		if (now_ms() >= end)
			return -1;
		rp_round(rp);
	}
	return 0;
}

const struct rp_wc *
rp_wait_wr(struct rawpeer *rp, uint64_t wr_id, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	unsigned i = 0;

	for (;;) {
		for (; i < rp->nwc; i++)
			if (rp->wc[i].wr_id == wr_id && !rp->wc[i].is_recv)
				return &rp->wc[i];
		if (now_ms() >= end)
			return NULL;
		rp_round(rp);
	}
}

int
rp_wait_disconnect(struct rawpeer *rp, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (!rp->disconnected) {
		if (now_ms() >= end)
			return -1;
		rp_round(rp);
	}
	return 0;
}

/* Wait for one CM event of type @p want (address, route). */
static int
rp_wait_step(struct rawpeer *rp, enum rdma_cm_event_type want, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	struct rdma_cm_event *ev;

	for (;;) {
		if (rdma_get_cm_event(rp->cm, &ev) == 0) {
			enum rdma_cm_event_type got = ev->event;

			rdma_ack_cm_event(ev);
			if (got == want)
				return 0;
			return -1;
		}
		if (now_ms() >= end)
			return -1;
		rp->cm_skip = 1;
		rp_round(rp);
		rp->cm_skip = 0;
	}
}

/* The PD, CQ, memory and QP of rp->id (resolved, or a request's). */
static int
rp_resources(struct rawpeer *rp)
{
	struct ibv_qp_init_attr qa;

	rp->pd = ibv_alloc_pd(rp->id->verbs);
	rp->cq = ibv_create_cq(rp->id->verbs, 1024, NULL, NULL, 0);
	if (!rp->pd || !rp->cq)
		return -1;
	if (posix_memalign((void **)&rp->mem, 4096, RP_MEM))
		return -1;
	memset(rp->mem, 0, RP_MEM);
	rp->mr = ibv_reg_mr(rp->pd, rp->mem, RP_MEM, IBV_ACCESS_LOCAL_WRITE |
	    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
	    IBV_ACCESS_REMOTE_ATOMIC);
	if (!rp->mr)
		return -1;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = rp->cq;
	qa.recv_cq = rp->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 256;
	qa.cap.max_recv_wr = 256;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(rp->id, rp->pd, &qa))
		return -1;
	rp->qp = rp->id->qp;
	return 0;
}

int
rp_prepare(struct rawpeer *rp, struct event_base *eb,
    const struct sockaddr *sa, int salen)
{
	int fl;

	rp->eb = eb;
	rp->reject_code = -1;
	rp->cm = rdma_create_event_channel();
	if (!rp->cm)
		return -1;
	fl = fcntl(rp->cm->fd, F_GETFL);
	fcntl(rp->cm->fd, F_SETFL, fl | O_NONBLOCK);
	if (rdma_create_id(rp->cm, &rp->id, rp, RDMA_PS_TCP) ||
	    rdma_resolve_addr(rp->id, (struct sockaddr *)rp->src,
	    (struct sockaddr *)sa, 2000) ||
	    rp_wait_step(rp, RDMA_CM_EVENT_ADDR_RESOLVED, 5000) ||
	    rdma_resolve_route(rp->id, 2000) ||
	    rp_wait_step(rp, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000))
		return -1;
	if (rp->no_qp)
		return 0;	/* a half-open connect needs nothing more */
	return rp_resources(rp);
}

int
rp_connect_now(struct rawpeer *rp, const void *pdata, size_t len, int ms)
{
	struct rdma_conn_param p;
	uint64_t end = now_ms() + (uint64_t)ms;

	memset(&p, 0, sizeof(p));
	p.responder_resources = rp->no_rd ? 0 : 16;
	p.initiator_depth = 16;
	p.retry_count = 6;	/* (7 is "for ever" on Soft-RoCE) */
	p.rnr_retry_count = 7;
	p.private_data = pdata;
	p.private_data_len = (uint8_t)len;
	if (rp->no_qp)
		/* none: the reply goes unanswered. Each half-open peer names
		 * another QP number: the CM refuses a second request from the
		 * same one as a stale connection. */
		p.qp_num = 0x1000 + (uint32_t)(((uintptr_t)rp >> 4) & 0xfffff);
	if (rp->ack_timeout) {
		uint8_t t = (uint8_t)rp->ack_timeout;

		if (rdma_set_option(rp->id, RDMA_OPTION_ID,
		    RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof(t)))
			return -1;
	}
	if (rdma_connect(rp->id, &p))
		return -1;
	while (!rp->established && !rp->rejected && !rp->failed) {
		if (now_ms() >= end)
			return -1;
		rp_round(rp);
	}
	return 0;
}

int
rp_connect(struct rawpeer *rp, struct event_base *eb,
    const struct sockaddr *sa, int salen, const void *pdata, size_t len,
    int ms)
{
	if (rp_prepare(rp, eb, sa, salen) < 0)
		return -1;
	return rp_connect_now(rp, pdata, len, ms);
}

int
rp_post_recv(struct rawpeer *rp, size_t off, size_t len)
{
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge = { (uintptr_t)rp->mem + off, (uint32_t)len,
	    rp->mr->lkey };

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = rp->next_wr++ | RP_RECV_BIT;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	return ibv_post_recv(rp->qp, &wr, &bad);
}

static int
rp_post(struct rawpeer *rp, struct ibv_send_wr *wr, size_t off, size_t len)
{
	struct ibv_send_wr *bad;
	struct ibv_sge sge = { (uintptr_t)rp->mem + off, (uint32_t)len,
	    rp->mr->lkey };

	wr->wr_id = rp->next_wr++;
	wr->sg_list = &sge;
	wr->num_sge = len ? 1 : 0;
	wr->send_flags = IBV_SEND_SIGNALED;
	return ibv_post_send(rp->qp, wr, &bad);
}

int
rp_send_imm(struct rawpeer *rp, size_t off, size_t len, uint32_t imm)
{
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htonl(imm);
	return rp_post(rp, &wr, off, len);
}

int
rp_send(struct rawpeer *rp, size_t off, size_t len)
{
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_SEND;
	return rp_post(rp, &wr, off, len);
}

int
rp_read(struct rawpeer *rp, size_t off, size_t len, uint64_t raddr,
    uint32_t rkey)
{
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return rp_post(rp, &wr, off, len);
}

int
rp_write(struct rawpeer *rp, size_t off, size_t len, uint64_t raddr,
    uint32_t rkey, int with_imm, uint32_t imm)
{
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
	wr.imm_data = htonl(imm);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return rp_post(rp, &wr, off, len);
}

int
rp_fadd(struct rawpeer *rp, size_t off, uint64_t raddr, uint32_t rkey)
{
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = 1;
	return rp_post(rp, &wr, off, 8);
}

int
rp_listen(struct rawpeer *rp, struct event_base *eb,
    const struct sockaddr *sa)
{
	int fl;

	rp->eb = eb;
	rp->reject_code = -1;
	rp->cm = rdma_create_event_channel();
	if (!rp->cm)
		return -1;
	fl = fcntl(rp->cm->fd, F_GETFL);
	fcntl(rp->cm->fd, F_SETFL, fl | O_NONBLOCK);
	if (rdma_create_id(rp->cm, &rp->lid, rp, RDMA_PS_TCP) ||
	    rdma_bind_addr(rp->lid, (struct sockaddr *)sa) ||
	    rdma_listen(rp->lid, 8))
		return -1;
	return ntohs(rdma_get_src_port(rp->lid));
}

int
rp_wait_request(struct rawpeer *rp, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (!rp->id) {
		if (now_ms() >= end)
			return -1;
		rp_round(rp);
	}
	return 0;
}

int
rp_accept(struct rawpeer *rp, const void *pdata, size_t len, int rnr_retry)
{
	struct rdma_conn_param p;

	if (!rp->id || rp_resources(rp) < 0)
		return -1;
	memset(&p, 0, sizeof(p));
	p.responder_resources = 16;
	p.initiator_depth = 16;
	p.retry_count = 7;
	p.rnr_retry_count = (uint8_t)rnr_retry;
	p.private_data = pdata;
	p.private_data_len = (uint8_t)len;
	return rdma_accept(rp->id, &p);
}

void
rp_close(struct rawpeer *rp)
{
	if (rp->id && rp->established && !rp->disconnected)
		rdma_disconnect(rp->id);
	if (rp->qp)
		rdma_destroy_qp(rp->id);
	if (rp->mr)
		ibv_dereg_mr(rp->mr);
	if (rp->cq)
		ibv_destroy_cq(rp->cq);
	if (rp->pd)
		ibv_dealloc_pd(rp->pd);
	if (rp->id)
		rdma_destroy_id(rp->id);
	if (rp->lid)
		rdma_destroy_id(rp->lid);
	if (rp->cm)
		rdma_destroy_event_channel(rp->cm);
	free(rp->mem);
	memset(rp, 0, sizeof(*rp));
}
