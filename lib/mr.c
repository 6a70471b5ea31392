/*
 * evrdma: registered memory regions and their remote descriptors.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "evrdma-internal.h"

#define ACCESS_ALL (EVRDMA_ACCESS_LOCAL_WRITE | EVRDMA_ACCESS_REMOTE_READ | \
	EVRDMA_ACCESS_REMOTE_WRITE | EVRDMA_ACCESS_REMOTE_ATOMIC)
#define ACCESS_REMOTE (EVRDMA_ACCESS_REMOTE_READ | \
	EVRDMA_ACCESS_REMOTE_WRITE | EVRDMA_ACCESS_REMOTE_ATOMIC)

/* Encoded descriptor: magic[2] version reserved rkey[4] addr[8] len[8]. */
#define REMOTE_MAGIC0		'E'
#define REMOTE_MAGIC1		'M'
#define REMOTE_VERSION		1

int
evrdma__access_to_ibv(int access)
{
	int ibv = 0;

	if (access & EVRDMA_ACCESS_LOCAL_WRITE)
		ibv |= IBV_ACCESS_LOCAL_WRITE;
	if (access & EVRDMA_ACCESS_REMOTE_READ)
		ibv |= IBV_ACCESS_REMOTE_READ;
	if (access & EVRDMA_ACCESS_REMOTE_WRITE)
		ibv |= IBV_ACCESS_REMOTE_WRITE;
	if (access & EVRDMA_ACCESS_REMOTE_ATOMIC)
		ibv |= IBV_ACCESS_REMOTE_ATOMIC;
	/* ibv_reg_mr fails with EINVAL for remote write or atomic access
	 * without local write. */
	if (ibv & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC))
		ibv |= IBV_ACCESS_LOCAL_WRITE;
	return ibv;
}

struct evrdma_mr *
evrdma_mr_reg(struct evrdma_conn *conn, void *addr, size_t len, int access)
{
	struct evrdma_mr *mr;
	struct evrdma_dev *dev;
	struct ibv_mr *ibmr;
	int err;

	if (conn == NULL || addr == NULL || len == 0) {
		evrdma__fail(EINVAL, "evrdma_mr_reg: NULL connection or "
		    "address, or zero length");
		return NULL;
	}
	if (access & ~ACCESS_ALL) {
		evrdma__fail(EINVAL, "evrdma_mr_reg: unknown access flags 0x%x",
		    (unsigned)(access & ~ACCESS_ALL));
		return NULL;
	}
	dev = conn->dev;
	if (dev == NULL) {
		evrdma__fail(ENOTCONN, "evrdma_mr_reg: the connection has no "
		    "device yet (register after address resolution)");
		return NULL;
	}
	/* Record what verbs will really grant, so that the checks at post
	 * time agree with the hardware. */
	if (access & (EVRDMA_ACCESS_REMOTE_WRITE | EVRDMA_ACCESS_REMOTE_ATOMIC))
		access |= EVRDMA_ACCESS_LOCAL_WRITE;

	mr = calloc(1, sizeof(*mr));
	if (mr == NULL) {
		evrdma__fail(ENOMEM, "evrdma_mr_reg: out of memory");
		return NULL;
	}
	errno = 0;
	ibmr = EVRDMA_SYM(ibv_reg_mr)(dev->pd, addr, len,
	    evrdma__access_to_ibv(access));
	if (ibmr == NULL) {
		err = errno ? errno : ENOMEM;
		free(mr);
		if (err == ENOMEM)
			evrdma__fail(err, "ibv_reg_mr(%zu bytes): %s; registered "
			    "memory counts against RLIMIT_MEMLOCK (ulimit -l)",
			    len, strerror(err));
		else
			evrdma__fail(err, "ibv_reg_mr(%zu bytes): %s", len,
			    strerror(err));
		return NULL;
	}
	mr->base = conn->base;
	mr->dev = dev;
	mr->mr = ibmr;
	mr->addr = addr;
	mr->len = len;
	mr->access = access;
	/* The PD must outlive every region registered on it. */
	dev->refcnt++;
	LIST_INSERT_HEAD(&mr->base->mrs, mr, link);
	mr->base->stats.mrs++;
	return mr;
}

static void
mr_destroy(struct evrdma_mr *mr)
{
	struct evrdma_dev *dev = mr->dev;
	int rc;

	rc = EVRDMA_SYM(ibv_dereg_mr)(mr->mr);
	if (rc != 0)
		/* Nothing to retry: the device may be gone. The handle is
		 * dropped either way so that the device can be closed. */
		evrdma__log(EVRDMA_LOG_WARN, "ibv_dereg_mr: %s",
		    strerror(rc > 0 ? rc : errno));
	LIST_REMOVE(mr, link);
	mr->base->stats.mrs--;
	free(mr);
	evrdma__dev_put(dev);
}

void
evrdma_mr_free(struct evrdma_mr *mr)
{
	if (mr == NULL)
		return;
	if (mr->inflight > 0) {
		/* The HCA may still touch the memory: deregister when the
		 * last request using it completes (evrdma__mr_release). */
		mr->freed = 1;
		return;
	}
	mr_destroy(mr);
}

void
evrdma__mr_release_last(struct evrdma_mr *mr)
{
	if (mr->freed)
		mr_destroy(mr);
}

void
evrdma__mr_free_all(struct evrdma_base *base)
{
	struct evrdma_mr *mr;

	/* Called by base free after every connection is gone, so nothing
	 * still references these regions; inflight is ignored. */
	while ((mr = LIST_FIRST(&base->mrs)) != NULL)
		mr_destroy(mr);
}

void *
evrdma_mr_addr(const struct evrdma_mr *mr)
{
	return mr ? mr->addr : NULL;
}

size_t
evrdma_mr_len(const struct evrdma_mr *mr)
{
	return mr ? mr->len : 0;
}

int
evrdma_mr_export(const struct evrdma_mr *mr, size_t off, size_t len,
    struct evrdma_remote *out)
{
	if (mr == NULL || out == NULL)
		return evrdma__fail(EINVAL, "evrdma_mr_export: NULL argument");
	/* Written so that off + len cannot wrap around. */
	if (len == 0 || off > mr->len || len > mr->len - off)
		return evrdma__fail(EINVAL, "evrdma_mr_export: range "
		    "[%zu, +%zu) outside the %zu-byte region", off, len,
		    mr->len);
	if (!(mr->access & ACCESS_REMOTE))
		return evrdma__fail(EACCES, "evrdma_mr_export: the region "
		    "has no remote access flag");
	out->addr = (uint64_t)((uintptr_t)mr->addr + off);
	out->len = len;
	out->rkey = mr->mr->rkey;
	return 0;
}

static void
put_be32(uint8_t *p, uint32_t v)
{
	int i;

	for (i = 3; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static void
put_be64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 7; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static uint32_t
get_be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
	    ((uint32_t)p[2] << 8) | p[3];
}

static uint64_t
get_be64(const uint8_t *p)
{
	return ((uint64_t)get_be32(p) << 32) | get_be32(p + 4);
}

int
evrdma_remote_encode(const struct evrdma_remote *rem, void *buf,
    size_t buflen)
{
	uint8_t *p = buf;

	if (rem == NULL || buf == NULL)
		return evrdma__fail(EINVAL, "evrdma_remote_encode: NULL "
		    "argument");
	if (buflen < EVRDMA_REMOTE_ENCODED_LEN)
		return evrdma__fail(ENOSPC, "evrdma_remote_encode: buffer of "
		    "%zu bytes, need %d", buflen, EVRDMA_REMOTE_ENCODED_LEN);
	p[0] = REMOTE_MAGIC0;
	p[1] = REMOTE_MAGIC1;
	p[2] = REMOTE_VERSION;
	p[3] = 0;
	put_be32(p + 4, rem->rkey);
	put_be64(p + 8, rem->addr);
	put_be64(p + 16, rem->len);
	return EVRDMA_REMOTE_ENCODED_LEN;
}

int
evrdma_remote_decode(struct evrdma_remote *out, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	struct evrdma_remote rem;

	if (out == NULL || buf == NULL)
		return evrdma__fail(EINVAL, "evrdma_remote_decode: NULL "
		    "argument");
	if (len != EVRDMA_REMOTE_ENCODED_LEN)
		return evrdma__fail(EINVAL, "evrdma_remote_decode: %zu bytes, "
		    "expected %d", len, EVRDMA_REMOTE_ENCODED_LEN);
	if (p[0] != REMOTE_MAGIC0 || p[1] != REMOTE_MAGIC1)
		return evrdma__fail(EPROTO, "evrdma_remote_decode: bad magic");
	if (p[2] != REMOTE_VERSION)
		return evrdma__fail(EPROTO, "evrdma_remote_decode: "
		    "unsupported version %u", p[2]);
	if (p[3] != 0)
		return evrdma__fail(EPROTO, "evrdma_remote_decode: nonzero "
		    "reserved byte");
	rem.rkey = get_be32(p + 4);
	rem.addr = get_be64(p + 8);
	rem.len = get_be64(p + 16);
	/* The bytes may come from an untrusted peer: reject descriptors
	 * whose end does not fit in a 64-bit address. */
	if (rem.len == 0)
		return evrdma__fail(EPROTO, "evrdma_remote_decode: zero length");
	if (rem.len > UINT64_MAX - rem.addr)
		return evrdma__fail(EPROTO, "evrdma_remote_decode: address + "
		    "length overflows");
	*out = rem;
	return 0;
}
