/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: what a connection posts: the checks of the user's requests
 * (state, local region, remote descriptor) and the posting through the
 * endpoint (ep.c).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "evrdma-internal.h"
#include "conn.h"
#include "conn.h"

/* ---- posting ---- */

/* (inlined: it runs before every batch of a channel's reposted receives;
 * a channel's sends ask evrdma__conn_postable() alone) */
static inline __attribute__((always_inline)) int
conn_check_post(struct evrdma_conn *conn, int recv)
{
	/* A send may go when evrdma__conn_postable() says so (the one
	 * statement of that rule); the tests below only say why not. */
	if (!recv && evrdma__conn_postable(conn))
		return 0;
	if (!conn)
		return evrdma__fail(EINVAL, "no connection");
	if (!conn->base || conn->user_freed || evrdma__conn_closing(conn) ||
	    conn->qp_in_error)
		return evrdma__fail(EPIPE, "connection is closed or failed");
	if (recv && conn->srq)
		return evrdma__fail(EINVAL, "the connection's receives come "
		    "from its shared receive queue (evrdma_srq_post_recv)");
	/* (a receive may be posted before the connection is up) */
	if (recv && (conn->rts || conn->qp))
		return 0;
	return evrdma__fail(ENOTCONN, "connection not established");
}

static int
check_local(struct evrdma_conn *conn, struct evrdma_mr *mr, size_t off,
    size_t len, int need_write)
{
	if (!mr) {
		if (len == 0)
			return 0;
		return evrdma__fail(EINVAL, "no memory region");
	}
	if (!mr->mr)
		return evrdma__fail(EINVAL, "memory region released with its "
		    "base");
	if (mr->pd != conn->pd)
		return evrdma__fail(EXDEV, "memory region of another "
		    "connection (each has its own protection domain)");
	if (mr->freed)
		return evrdma__fail(EINVAL, "memory region is being freed");
	if (off > mr->len || len > mr->len - off || len > UINT32_MAX)
		return evrdma__fail(EINVAL, "range [%zu, +%zu) outside the "
		    "region of %zu bytes", off, len, mr->len);
	if (need_write && !(mr->access & EVRDMA_ACCESS_LOCAL_WRITE))
		return evrdma__fail(EACCES, "region lacks LOCAL_WRITE");
	return 0;
}

static int
check_remote(const struct evrdma_remote *rem, uint64_t roff, uint64_t len,
    int atomic)
{
	if (!rem)
		return evrdma__fail(EINVAL, "no remote descriptor");
	if (roff > rem->len || len > rem->len - roff ||
	    rem->addr + roff < rem->addr)
		return evrdma__fail(EINVAL, "remote range outside the "
		    "descriptor");
	if (atomic && ((rem->addr + roff) & 7))
		return evrdma__fail(EINVAL, "atomic target not 8-byte "
		    "aligned");
	return 0;
}

int
evrdma_conn_post_recv(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, size_t len, evrdma_req_cb cb, void *arg)
{
	if (conn_check_post(conn, 1) < 0 ||
	    check_local(conn, mr, off, len, 1) < 0)
		return -1;
	return evrdma__ep_post(&conn->ep, mr, off, len, NULL, EVRDMA_OP_RECV,
	    cb, arg);
}

static int
post_send_common(struct evrdma_conn *conn, struct evrdma_mr *mr, size_t off,
    size_t len, int with_imm, uint32_t imm, evrdma_req_cb cb, void *arg)
{
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
	wr.imm_data = htonl(imm);
	return evrdma__ep_post(&conn->ep, mr, off, len, &wr, EVRDMA_OP_SEND,
	    cb, arg);
}

int
evrdma_conn_post_send(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, size_t len, evrdma_req_cb cb, void *arg)
{
	if (conn_check_post(conn, 0) < 0 ||
	    check_local(conn, mr, off, len, 0) < 0)
		return -1;
	return post_send_common(conn, mr, off, len, 0, 0, cb, arg);
}

int
evrdma_conn_post_send_imm(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, size_t len, uint32_t imm, evrdma_req_cb cb, void *arg)
{
	if (conn_check_post(conn, 0) < 0 ||
	    check_local(conn, mr, off, len, 0) < 0)
		return -1;
	return post_send_common(conn, mr, off, len, 1, imm, cb, arg);
}

/* A READ or atomic needs the peer to serve one (review r46: one that
 * agreed to none would leave it pending until the connection ends). */
static int
check_rd_out(const struct evrdma_conn *conn)
{
	if (conn->rd_out)
		return 0;
	return evrdma__fail(EOPNOTSUPP, "the peer serves no RDMA READ or "
	    "atomic on this connection (it offered 0 responder resources)");
}

static int
post_rdma(struct evrdma_conn *conn, struct evrdma_mr *mr, size_t off,
    size_t len, const struct evrdma_remote *rem, uint64_t roff,
    enum ibv_wr_opcode op, uint32_t imm, evrdma_req_cb cb, void *arg)
{
	struct ibv_send_wr wr;
	int is_read = op == IBV_WR_RDMA_READ;

	if (conn_check_post(conn, 0) < 0 ||
	    check_local(conn, mr, off, len, is_read) < 0 ||
	    check_remote(rem, roff, len, 0) < 0 ||
	    (is_read && check_rd_out(conn) < 0))
		return -1;
	memset(&wr, 0, sizeof(wr));
	wr.opcode = op;
	wr.imm_data = htonl(imm);
	wr.wr.rdma.remote_addr = rem->addr + roff;
	wr.wr.rdma.rkey = rem->rkey;
	return evrdma__ep_post(&conn->ep, mr, off, len, &wr,
	    is_read ? EVRDMA_OP_READ : EVRDMA_OP_WRITE, cb, arg);
}

int
evrdma_conn_post_write(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, size_t len, const struct evrdma_remote *rem, uint64_t roff,
    evrdma_req_cb cb, void *arg)
{
	return post_rdma(conn, mr, off, len, rem, roff, IBV_WR_RDMA_WRITE, 0,
	    cb, arg);
}

int
evrdma_conn_post_write_imm(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, size_t len, const struct evrdma_remote *rem, uint64_t roff,
    uint32_t imm, evrdma_req_cb cb, void *arg)
{
	return post_rdma(conn, mr, off, len, rem, roff,
	    IBV_WR_RDMA_WRITE_WITH_IMM, imm, cb, arg);
}

int
evrdma_conn_post_read(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, size_t len, const struct evrdma_remote *rem, uint64_t roff,
    evrdma_req_cb cb, void *arg)
{
	return post_rdma(conn, mr, off, len, rem, roff, IBV_WR_RDMA_READ, 0,
	    cb, arg);
}

static int
post_atomic(struct evrdma_conn *conn, struct evrdma_mr *mr, size_t off,
    const struct evrdma_remote *rem, uint64_t roff, enum ibv_wr_opcode op,
    uint64_t a, uint64_t b, evrdma_req_cb cb, void *arg)
{
	struct ibv_send_wr wr;

	if (conn_check_post(conn, 0) < 0 ||
	    check_local(conn, mr, off, 8, 1) < 0 ||
	    check_remote(rem, roff, 8, 1) < 0)
		return -1;
	if (!mr)
		return evrdma__fail(EINVAL, "no memory region");
	if (conn->dev->attr.atomic_cap == IBV_ATOMIC_NONE)
		return evrdma__fail(EOPNOTSUPP, "device has no atomics");
	if (check_rd_out(conn) < 0)
		return -1;
	memset(&wr, 0, sizeof(wr));
	wr.opcode = op;
	wr.wr.atomic.remote_addr = rem->addr + roff;
	wr.wr.atomic.rkey = rem->rkey;
	wr.wr.atomic.compare_add = a;
	wr.wr.atomic.swap = b;
	return evrdma__ep_post(&conn->ep, mr, off, 8, &wr,
	    op == IBV_WR_ATOMIC_CMP_AND_SWP ? EVRDMA_OP_CAS : EVRDMA_OP_FADD,
	    cb, arg);
}

int
evrdma_conn_post_cas(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, const struct evrdma_remote *rem, uint64_t roff,
    uint64_t compare, uint64_t swap, evrdma_req_cb cb, void *arg)
{
	return post_atomic(conn, mr, off, rem, roff, IBV_WR_ATOMIC_CMP_AND_SWP,
	    compare, swap, cb, arg);
}

int
evrdma_conn_post_fadd(struct evrdma_conn *conn, struct evrdma_mr *mr,
    size_t off, const struct evrdma_remote *rem, uint64_t roff, uint64_t add,
    evrdma_req_cb cb, void *arg)
{
	return post_atomic(conn, mr, off, rem, roff, IBV_WR_ATOMIC_FETCH_AND_ADD,
	    add, 0, cb, arg);
}
