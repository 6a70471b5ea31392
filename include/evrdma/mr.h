/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: registered memory regions and their remote descriptors.
 */
#ifndef EVRDMA_MR_H_INCLUDED_
#define EVRDMA_MR_H_INCLUDED_

/** @file evrdma/mr.h
 * Memory must be registered before RDMA can touch it. Registration is slow
 * (tens of microseconds): register buffers once, up front, and reuse them.
 * Register with the least access needed; only regions a user exposes on
 * purpose should carry remote access.
 */

#include <stddef.h>
#include <stdint.h>
#include <evrdma/util.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evrdma_conn;

/** An opaque registered memory region. */
struct evrdma_mr;

/** Access flags for evrdma_mr_reg(). 0 allows only local reads (SEND source). */
#define EVRDMA_ACCESS_LOCAL_WRITE	0x01	/**< RECV, READ and atomic targets */
#define EVRDMA_ACCESS_REMOTE_READ	0x02	/**< the peer may RDMA READ it */
#define EVRDMA_ACCESS_REMOTE_WRITE	0x04	/**< the peer may RDMA WRITE it (implies LOCAL_WRITE) */
#define EVRDMA_ACCESS_REMOTE_ATOMIC	0x08	/**< the peer may do atomics on it (implies LOCAL_WRITE) */

/**
 * Register @p len bytes at @p addr for @p conn: in @p conn's own
 * protection domain, so that only @p conn (and its peer, if remote access
 * is granted) can use it. Every connection has a domain of its own: a peer
 * can never reach memory registered for another connection, whatever rkey
 * it tries. Posting the region on another connection fails with EXDEV;
 * register the buffer once per connection that uses it. A region with
 * remote access is registered zero-based where rdma-core allows
 * (ibv_reg_mr_iova2): evrdma_mr_export() then hands the peer offsets, not
 * process addresses. The connection must have its QP, i.e. be past route
 * resolution (any time from the prepare callback or EVRDMA_EV_CONNECTED
 * on). Registered memory counts against RLIMIT_MEMLOCK; evrdma checks it
 * first and says so.
 * @param conn the connection whose device is used
 * @param addr start of the memory; owned by the caller, must stay valid
 *   until the region is freed and no request using it is outstanding
 * @param len bytes, > 0
 * @param access EVRDMA_ACCESS_* flags
 * @return the region, or NULL with errno EINVAL (bad argument or flags),
 *   ENOTCONN (no QP yet), EPIPE (the connection's base was freed), ENOMEM
 *   (RLIMIT_MEMLOCK would be exceeded; evrdma_errmsg() names the limit),
 *   or ibv_reg_mr()'s error
 */
EVRDMA_EXPORT struct evrdma_mr *evrdma_mr_reg(struct evrdma_conn *conn,
    void *addr, size_t len, int access);

/**
 * Deregister and free a region. If requests using it are still outstanding,
 * the deregistration happens when the last of them completes, before its
 * callback: from then on no peer reaches the memory. A region
 * whose base was freed (evrdma_base_free()) is already deregistered; this
 * frees its handle.
 * @param mr the region; NULL is allowed
 */
EVRDMA_EXPORT void evrdma_mr_free(struct evrdma_mr *mr);

/** @return the start address given to evrdma_mr_reg() */
EVRDMA_EXPORT void *evrdma_mr_addr(const struct evrdma_mr *mr);
/** @return the length given to evrdma_mr_reg() */
EVRDMA_EXPORT size_t evrdma_mr_len(const struct evrdma_mr *mr);

/**
 * What a peer needs to access a region remotely: address, length and rkey.
 * Hand it to the peer (e.g. in a SEND) as bytes from evrdma_remote_encode().
 */
struct evrdma_remote {
	uint64_t addr;		/**< the first byte's address as the peer's device knows it (zero-based regions: its offset in the region's first page) */
	uint64_t len;		/**< bytes accessible from @c addr */
	uint32_t rkey;		/**< remote key */
};

/**
 * Describe bytes [off, off+len) of @p mr for a peer. The range is what the
 * descriptor says, not what the device enforces: a peer with the rkey
 * reaches the whole region. Register apart what a peer must not reach.
 * @return 0, or -1 with errno EINVAL (range outside the region) or EACCES
 *   (the region has no remote access flag)
 */
EVRDMA_EXPORT int evrdma_mr_export(const struct evrdma_mr *mr, size_t off,
    size_t len, struct evrdma_remote *out);

/** Size of an encoded evrdma_remote. */
#define EVRDMA_REMOTE_ENCODED_LEN 24

/**
 * Encode a descriptor into a portable byte string (versioned, big-endian).
 * @param buf receives EVRDMA_REMOTE_ENCODED_LEN bytes
 * @param buflen size of @p buf
 * @return EVRDMA_REMOTE_ENCODED_LEN, or -1 with errno EINVAL (NULL) or
 *   ENOSPC (@p buflen too small)
 */
EVRDMA_EXPORT int evrdma_remote_encode(const struct evrdma_remote *rem,
    void *buf, size_t buflen);

/**
 * Decode and validate a byte string made by evrdma_remote_encode(), e.g.
 * received from an untrusted peer.
 * @return 0, or -1 with errno EINVAL (NULL, wrong length) or EPROTO (bad
 *   magic or version, zero length, or address + length overflowing)
 */
EVRDMA_EXPORT int evrdma_remote_decode(struct evrdma_remote *out,
    const void *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* EVRDMA_MR_H_INCLUDED_ */
