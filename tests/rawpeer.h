/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: a raw verbs peer, the attacker. It speaks rdma_cm and
 * libibverbs directly (its own event channel, protection domain, CQ and QP),
 * so it can send anything, right or wrong, to an evrdma listener or client
 * running on the same event loop: while it waits it runs that loop.
 *
 * The channel's wire format is encoded here by hand, independently of
 * lib/wire.c, so that the two check each other.
 */
#ifndef EVRDMA_RAWPEER_H_INCLUDED_
#define EVRDMA_RAWPEER_H_INCLUDED_

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <event2/event.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define RP_MEM		(1u << 20)	/* the peer's registered memory */
#define RP_MAX_WC	512

#define RP_RECV_BIT	(1ull << 63)	/* in the wr_id of receives */
/* the channel protocol version it speaks (doc/channel-protocol.md) */
#define RP_CH_VERSION	4

/* What the peer saw of one completion. */
struct rp_wc {
	uint64_t wr_id;
	int is_recv;
	int status;			/* enum ibv_wc_status */
	int opcode;			/* enum ibv_wc_opcode (success only) */
	uint32_t byte_len;
	uint32_t imm;			/* host order */
	int has_imm;
};

struct rawpeer {
	struct event_base *eb;		/* the loop run while waiting */
	struct rdma_event_channel *cm;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;		/* mem, local + remote read/write */
	uint8_t *mem;
	int no_qp;			/* connect without a QP (half-open) */
	int no_rd;			/* offer 0 responder resources */
	/* the QP's local ACK timeout, 4.096 us << ack_timeout (rdma_cm's
	 * option); 0 keeps rdma_cm's default (about a second on rxe) */
	int ack_timeout;
	int cm_skip;			/* rp_connect() reads its own events */
	/* the source address to connect from (NULL: the route's) */
	const struct sockaddr *src;
	/* a raw listener (rp_listen()): its id; rp->id is the one request
	 * it took, with that request's private data */
	struct rdma_cm_id *lid;
	uint8_t req[64];
	size_t req_len;
	/* connection outcome */
	int established, rejected, disconnected, failed;
	int reject_code;		/* evrdma reject code, -1 if none */
	uint8_t reply[256];		/* the accept reply's private data */
	size_t reply_len;
	/* completions, in order */
	struct rp_wc wc[RP_MAX_WC];
	unsigned nwc;
	uint64_t next_wr;
};

/* The channel handshake, as the peer writes or reads it. */
struct rp_chs {
	unsigned version, mode, slots, ctrl;
	uint32_t slot_size, pull_min, src_rkey;
	uint64_t src_base;
	int length;			/* byte 7; -1: the right one (32) */
	int bad_check;			/* corrupt the check value */
};

/* The connect request's private data: evrdma's header claiming @p claim
 * bytes of user data, then @p len bytes of @p data. Returns its length. */
size_t rp_pdata(uint8_t *out, unsigned version, const void *data, size_t len,
    size_t claim);
/* Encode @p h (32 bytes); returns 32. */
size_t rp_chs_encode(uint8_t *out, const struct rp_chs *h);
/* Decode the channel handshake in an accept reply (after evrdma's 8-byte
 * header); 0 or -1. */
int rp_chs_decode(const uint8_t *pdata, size_t len, struct rp_chs *h);
/* FNV-1a over @p len bytes (the handshake's check value; a test's hash
 * of what arrived). */
uint32_t rp_fnv1a(const uint8_t *p, size_t len);
uint32_t rp_imm(unsigned type, unsigned dret, unsigned cret, int starved,
    int pull, unsigned pdone);

/*
 * Connect to @p sa with private data @p pdata (@p len bytes) and wait
 * (running the loop) up to @p ms for ESTABLISHED or a reject. With
 * rp->no_qp set before, the connection stays half-open: the peer gets the
 * accept and never answers it. Returns 0 when it got an answer.
 */
int rp_connect(struct rawpeer *rp, struct event_base *eb,
    const struct sockaddr *sa, int salen, const void *pdata, size_t len,
    int ms);
/* The two halves of rp_connect(): resolve, and make the PD, CQ, memory
 * (its rkey is rp->mr->rkey, to put in a handshake) and QP; then connect. */
int rp_prepare(struct rawpeer *rp, struct event_base *eb,
    const struct sockaddr *sa, int salen);
int rp_connect_now(struct rawpeer *rp, const void *pdata, size_t len, int ms);
/* Take the peer's CM events and completions, without running the loop. */
void rp_poll(struct rawpeer *rp);
/* Run the loop and the peer's CM events for @p ms. */
void rp_run(struct rawpeer *rp, int ms);
/* Run until @p n completions in all (rp->nwc) or @p ms pass: 0 or -1. */
int rp_wait_wc(struct rawpeer *rp, unsigned n, int ms);
/* Run until the send request @p wr_id (rp->next_wr before it was posted)
 * completed, or @p ms pass: its completion, or NULL. */
const struct rp_wc *rp_wait_wr(struct rawpeer *rp, uint64_t wr_id, int ms);
/* Run until DISCONNECTED or @p ms pass: 0 or -1. */
int rp_wait_disconnect(struct rawpeer *rp, int ms);

/* Work requests; each returns ibv_post_*'s result (0 posted). The local
 * buffer is [off, off+len) of rp->mem. */
int rp_post_recv(struct rawpeer *rp, size_t off, size_t len);
int rp_send_imm(struct rawpeer *rp, size_t off, size_t len, uint32_t imm);
/* (a plain SEND, no immediate: never one of the channel protocol's) */
int rp_send(struct rawpeer *rp, size_t off, size_t len);
int rp_read(struct rawpeer *rp, size_t off, size_t len, uint64_t raddr,
    uint32_t rkey);
int rp_write(struct rawpeer *rp, size_t off, size_t len, uint64_t raddr,
    uint32_t rkey, int with_imm, uint32_t imm);
int rp_fadd(struct rawpeer *rp, size_t off, uint64_t raddr, uint32_t rkey);

/*
 * A raw listener, the hostile server: listen on @p sa (its port 0: any);
 * returns the port, or -1. rp_wait_request() runs the loop until a connect
 * request came (rp->id, its private data in rp->req), then rp_accept()
 * makes the PD, CQ, memory and QP and accepts with @p pdata, asking the
 * requester's QP for @p rnr_retry (0..7) and 7 transport retries.
 */
int rp_listen(struct rawpeer *rp, struct event_base *eb,
    const struct sockaddr *sa);
int rp_wait_request(struct rawpeer *rp, int ms);
int rp_accept(struct rawpeer *rp, const void *pdata, size_t len,
    int rnr_retry);

/* Disconnect (if connected) and free everything. */
void rp_close(struct rawpeer *rp);

#endif /* EVRDMA_RAWPEER_H_INCLUDED_ */
