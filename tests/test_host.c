/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma tests that need no RDMA device: configuration, remote
 * descriptors, reason strings, error messages, logging, behaviour without
 * rdma-core or without RDMA support, listeners' flags and getters, and
 * NULL arguments.
 *
 * Each test runs in its own process (Check's CK_FORK default), which the
 * rdma-core loading tests rely on: the load happens once per process.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <check.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include <evrdma.h>
/* White box for the configuration only: the defaults and the effect of a
 * rejected setter are not observable through the public API. */
#include "../lib/evrdma-internal.h"

#include "testutil.h"
#include "bevtest.h"
#include "infotest.h"

#define TEST_TIMEOUT_S 10

/* ---- configuration ---- */

START_TEST(test_config_defaults)
{
	struct evrdma_config *cfg = evrdma_config_new();

	ck_assert_ptr_nonnull(cfg);
	/* The values documented for evrdma_config_new(). */
	ck_assert_uint_eq(cfg->sq_depth, 128);
	ck_assert_uint_eq(cfg->rq_depth, 128);
	ck_assert_uint_eq(cfg->cq_size, 4096);
	ck_assert_uint_eq(cfg->inline_threshold, 64);
	ck_assert_uint_eq(cfg->timeout_ms[EVRDMA_TIMEOUT_ADDR], 2000);
	ck_assert_uint_eq(cfg->timeout_ms[EVRDMA_TIMEOUT_ROUTE], 2000);
	ck_assert_uint_eq(cfg->timeout_ms[EVRDMA_TIMEOUT_CONNECT], 30000);
	ck_assert_uint_eq(cfg->timeout_ms[EVRDMA_TIMEOUT_TEARDOWN], 2000);
	ck_assert_uint_eq(cfg->timeout_ms[EVRDMA_TIMEOUT_ACCEPT], 5000);
	ck_assert_uint_eq(cfg->poll_budget, 64);
	ck_assert_uint_eq(cfg->rnr_retry, 7);
	ck_assert_uint_eq(cfg->busy_poll_us, 0);	/* never spins */
	/* The defaults pass their own setters and the CQ check of
	 * evrdma_base_new(). */
	ck_assert_int_eq(evrdma_config_set_queue_depth(cfg, cfg->sq_depth,
	    cfg->rq_depth), 0);
	ck_assert_int_eq(evrdma_config_set_cq_size(cfg, cfg->cq_size), 0);
	ck_assert_uint_ge(cfg->cq_size, cfg->sq_depth + cfg->rq_depth);
	ck_assert_int_eq(evrdma_config_set_inline_threshold(cfg,
	    cfg->inline_threshold), 0);
	ck_assert_int_eq(evrdma_config_set_poll_budget(cfg, cfg->poll_budget),
	    0);
	ck_assert_int_eq(evrdma_config_set_rnr_retry(cfg, cfg->rnr_retry), 0);
	evrdma_config_free(cfg);
}
END_TEST

#define ck_assert_einval(expr)						\
	do {								\
		errno = 0;						\
		ck_assert_int_eq((expr), -1);				\
		ck_assert_int_eq(errno, EINVAL);			\
	} while (0)

START_TEST(test_config_queue_depth)
{
	struct evrdma_config *cfg = evrdma_config_new();

	ck_assert_ptr_nonnull(cfg);
	ck_assert_einval(evrdma_config_set_queue_depth(NULL, 1, 1));
	ck_assert_einval(evrdma_config_set_queue_depth(cfg, 0, 1));
	ck_assert_einval(evrdma_config_set_queue_depth(cfg, 1, 0));
	ck_assert_einval(evrdma_config_set_queue_depth(cfg, 16385, 1));
	ck_assert_einval(evrdma_config_set_queue_depth(cfg, 1, 16385));
	ck_assert_einval(evrdma_config_set_queue_depth(cfg, UINT32_MAX, 1));
	/* A rejected call changes nothing, not even the valid half. */
	ck_assert_einval(evrdma_config_set_queue_depth(cfg, 5, 0));
	ck_assert_uint_eq(cfg->sq_depth, 128);
	ck_assert_uint_eq(cfg->rq_depth, 128);

	ck_assert_int_eq(evrdma_config_set_queue_depth(cfg, 1, 1), 0);
	ck_assert_uint_eq(cfg->sq_depth, 1);
	ck_assert_uint_eq(cfg->rq_depth, 1);
	ck_assert_int_eq(evrdma_config_set_queue_depth(cfg, 16384, 16384), 0);
	ck_assert_uint_eq(cfg->sq_depth, 16384);
	ck_assert_uint_eq(cfg->rq_depth, 16384);
	ck_assert_int_eq(evrdma_config_set_queue_depth(cfg, 7, 9), 0);
	ck_assert_uint_eq(cfg->sq_depth, 7);
	ck_assert_uint_eq(cfg->rq_depth, 9);
	evrdma_config_free(cfg);
}
END_TEST

START_TEST(test_config_cq_size)
{
	struct evrdma_config *cfg = evrdma_config_new();

	ck_assert_ptr_nonnull(cfg);
	ck_assert_einval(evrdma_config_set_cq_size(NULL, 4096));
	ck_assert_einval(evrdma_config_set_cq_size(cfg, 0));
	ck_assert_einval(evrdma_config_set_cq_size(cfg, 63));
	ck_assert_einval(evrdma_config_set_cq_size(cfg, 1048577));
	ck_assert_einval(evrdma_config_set_cq_size(cfg, UINT32_MAX));
	ck_assert_uint_eq(cfg->cq_size, 4096);
	ck_assert_int_eq(evrdma_config_set_cq_size(cfg, 64), 0);
	ck_assert_uint_eq(cfg->cq_size, 64);
	ck_assert_int_eq(evrdma_config_set_cq_size(cfg, 1048576), 0);
	ck_assert_uint_eq(cfg->cq_size, 1048576);
	evrdma_config_free(cfg);
}
END_TEST

START_TEST(test_config_inline)
{
	struct evrdma_config *cfg = evrdma_config_new();

	ck_assert_ptr_nonnull(cfg);
	ck_assert_einval(evrdma_config_set_inline_threshold(NULL, 0));
	ck_assert_einval(evrdma_config_set_inline_threshold(cfg, 1025));
	ck_assert_einval(evrdma_config_set_inline_threshold(cfg, UINT32_MAX));
	ck_assert_uint_eq(cfg->inline_threshold, 64);
	/* 0 is valid: it disables inline sends. */
	ck_assert_int_eq(evrdma_config_set_inline_threshold(cfg, 0), 0);
	ck_assert_uint_eq(cfg->inline_threshold, 0);
	ck_assert_int_eq(evrdma_config_set_inline_threshold(cfg, 1024), 0);
	ck_assert_uint_eq(cfg->inline_threshold, 1024);
	evrdma_config_free(cfg);
}
END_TEST

START_TEST(test_config_timeout)
{
	struct evrdma_config *cfg = evrdma_config_new();
	int w;

	ck_assert_ptr_nonnull(cfg);
	ck_assert_einval(evrdma_config_set_timeout(NULL,
	    EVRDMA_TIMEOUT_ADDR, 1000));
	ck_assert_einval(evrdma_config_set_timeout(cfg, -1, 1000));
	ck_assert_einval(evrdma_config_set_timeout(cfg,
	    EVRDMA_TIMEOUT_ACCEPT + 1, 1000));
	ck_assert_einval(evrdma_config_set_timeout(cfg, 1000, 1000));
	for (w = EVRDMA_TIMEOUT_ADDR; w <= EVRDMA_TIMEOUT_ACCEPT; w++) {
		unsigned before = cfg->timeout_ms[w];

		ck_assert_einval(evrdma_config_set_timeout(cfg, w, 0));
		ck_assert_einval(evrdma_config_set_timeout(cfg, w, 600001));
		ck_assert_einval(evrdma_config_set_timeout(cfg, w,
		    UINT32_MAX));
		ck_assert_uint_eq(cfg->timeout_ms[w], before);
		ck_assert_int_eq(evrdma_config_set_timeout(cfg, w, 1), 0);
		ck_assert_uint_eq(cfg->timeout_ms[w], 1);
		ck_assert_int_eq(evrdma_config_set_timeout(cfg, w, 600000), 0);
		ck_assert_uint_eq(cfg->timeout_ms[w], 600000);
	}
	evrdma_config_free(cfg);
}
END_TEST

START_TEST(test_config_poll_budget)
{
	struct evrdma_config *cfg = evrdma_config_new();

	ck_assert_ptr_nonnull(cfg);
	ck_assert_einval(evrdma_config_set_poll_budget(NULL, 64));
	ck_assert_einval(evrdma_config_set_poll_budget(cfg, 0));
	ck_assert_einval(evrdma_config_set_poll_budget(cfg, 65537));
	ck_assert_einval(evrdma_config_set_poll_budget(cfg, UINT32_MAX));
	ck_assert_uint_eq(cfg->poll_budget, 64);
	ck_assert_int_eq(evrdma_config_set_poll_budget(cfg, 1), 0);
	ck_assert_uint_eq(cfg->poll_budget, 1);
	ck_assert_int_eq(evrdma_config_set_poll_budget(cfg, 65536), 0);
	ck_assert_uint_eq(cfg->poll_budget, 65536);
	evrdma_config_free(cfg);
}
END_TEST

START_TEST(test_config_busy_poll)
{
	struct evrdma_config *cfg = evrdma_config_new();

	ck_assert_ptr_nonnull(cfg);
	ck_assert_einval(evrdma_config_set_busy_poll(NULL, 50));
	ck_assert_einval(evrdma_config_set_busy_poll(cfg, 100001));
	ck_assert_einval(evrdma_config_set_busy_poll(cfg, UINT32_MAX));
	ck_assert_uint_eq(cfg->busy_poll_us, 0);
	ck_assert_int_eq(evrdma_config_set_busy_poll(cfg, 100000), 0);
	ck_assert_uint_eq(cfg->busy_poll_us, 100000);
	ck_assert_int_eq(evrdma_config_set_busy_poll(cfg, 0), 0);
	ck_assert_uint_eq(cfg->busy_poll_us, 0);
	evrdma_config_free(cfg);
}
END_TEST

START_TEST(test_config_rnr_retry)
{
	struct evrdma_config *cfg = evrdma_config_new();

	ck_assert_ptr_nonnull(cfg);
	ck_assert_einval(evrdma_config_set_rnr_retry(NULL, 7));
	ck_assert_einval(evrdma_config_set_rnr_retry(cfg, 8));
	ck_assert_einval(evrdma_config_set_rnr_retry(cfg, UINT32_MAX));
	ck_assert_uint_eq(cfg->rnr_retry, 7);
	ck_assert_int_eq(evrdma_config_set_rnr_retry(cfg, 0), 0);
	ck_assert_uint_eq(cfg->rnr_retry, 0);
	ck_assert_int_eq(evrdma_config_set_rnr_retry(cfg, 7), 0);
	ck_assert_uint_eq(cfg->rnr_retry, 7);
	evrdma_config_free(cfg);
}
END_TEST

START_TEST(test_config_warm)
{
	struct evrdma_config *cfg = evrdma_config_new();
	unsigned n, ms;

	ck_assert_ptr_nonnull(cfg);
	ck_assert_uint_eq(cfg->warm_max, 4);
	ck_assert_uint_eq(cfg->warm_idle_ms, 10000);
	ck_assert_einval(evrdma_config_set_warm(NULL, 4, 1000));
	ck_assert_einval(evrdma_config_set_warm(cfg, 1025, 1000));
	ck_assert_einval(evrdma_config_set_warm(cfg, 4, 0));
	ck_assert_einval(evrdma_config_set_warm(cfg, 4, 600001));
	ck_assert_uint_eq(cfg->warm_max, 4);
	ck_assert_int_eq(evrdma_config_set_warm(cfg, 0, 1), 0);
	ck_assert_uint_eq(cfg->warm_max, 0);
	ck_assert_int_eq(evrdma_config_set_warm(cfg, 1024, 600000), 0);
	ck_assert_uint_eq(cfg->warm_max, 1024);
	ck_assert_uint_eq(cfg->warm_idle_ms, 600000);
	ck_assert_int_eq(evrdma_config_get_warm(cfg, &n, &ms), 0);
	ck_assert_uint_eq(n, 1024);
	ck_assert_uint_eq(ms, 600000);
	ck_assert_int_eq(evrdma_config_get_warm(NULL, &n, NULL), 0);
	ck_assert_uint_eq(n, 4);
	evrdma_config_free(cfg);
}
END_TEST

START_TEST(test_config_channel_ring)
{
	struct evrdma_config *cfg = evrdma_config_new();

	ck_assert_ptr_nonnull(cfg);
	/* edges of every range are accepted */
	ck_assert_int_eq(evrdma_config_set_channel_ring(cfg, 2, 64, 0), 0);
	ck_assert_int_eq(evrdma_config_set_channel_ring(cfg, 4096, 4u << 20,
	    (size_t)1 << 30), 0);
	/* and one step outside each is refused, leaving cfg usable */
	errno = 0;
	ck_assert_int_eq(evrdma_config_set_channel_ring(cfg, 1, 4096, 0), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(evrdma_config_set_channel_ring(cfg, 4097, 4096, 0),
	    -1);
	ck_assert_int_eq(evrdma_config_set_channel_ring(cfg, 16, 63, 0), -1);
	ck_assert_int_eq(evrdma_config_set_channel_ring(cfg, 16, 100, 0), -1);
	ck_assert_int_eq(evrdma_config_set_channel_ring(cfg, 16,
	    (4u << 20) + 64, 0), -1);
	ck_assert_int_eq(evrdma_config_set_channel_ring(cfg, 16, 4096,
	    ((size_t)1 << 30) + 1), -1);
	ck_assert_int_eq(evrdma_config_set_channel_ring(NULL, 16, 4096, 0),
	    -1);
	/* pulls: 0 (never) .. 4 MiB */
	ck_assert_int_eq(evrdma_config_set_channel_pull(cfg, 0), 0);
	ck_assert_int_eq(evrdma_config_set_channel_pull(cfg, 4u << 20), 0);
	errno = 0;
	ck_assert_int_eq(evrdma_config_set_channel_pull(cfg, (4u << 20) + 1),
	    -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(evrdma_config_set_channel_pull(NULL, 1), -1);
	ck_assert_int_eq(errno, EINVAL);
	evrdma_config_free(cfg);
}
END_TEST

/* What a channel pins: its receive ring (slots + 4 control + up to 4
 * spare buffers, as the receive queue allows) and its send ring with a
 * pull descriptor per slot, each in whole pages. */
START_TEST(test_config_channel_pinned)
{
	struct evrdma_config *cfg = evrdma_config_new();
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t kib4 = 4096;

	ck_assert_ptr_nonnull(cfg);
	/* the defaults: 16 slots of 64 KiB, queues of 128 */
	ck_assert_uint_eq(evrdma_config_get_channel_pinned(NULL),
	    24 * 65536 + ((16 * 65536 + 16 * 8 + pg - 1) & ~(pg - 1)));
	ck_assert_uint_eq(evrdma_config_get_channel_pinned(cfg),
	    evrdma_config_get_channel_pinned(NULL));
	/* spares only where the receive queue has room beyond slots + 4 */
	ck_assert_int_eq(evrdma_config_set_channel_ring(cfg, 16, 4096, 0), 0);
	ck_assert_int_eq(evrdma_config_set_queue_depth(cfg, 20, 22), 0);
	ck_assert_uint_eq(evrdma_config_get_channel_pinned(cfg),
	    22 * kib4 + ((16 * kib4 + 16 * 8 + pg - 1) & ~(pg - 1)));
	ck_assert_int_eq(evrdma_config_set_queue_depth(cfg, 20, 20), 0);
	ck_assert_uint_eq(evrdma_config_get_channel_pinned(cfg),
	    20 * kib4 + ((16 * kib4 + 16 * 8 + pg - 1) & ~(pg - 1)));
	/* tiny rings take a page each */
	ck_assert_int_eq(evrdma_config_set_channel_ring(cfg, 2, 64, 0), 0);
	ck_assert_uint_eq(evrdma_config_get_channel_pinned(cfg), 2 * pg);
	/* queues too shallow for the ring: no channel, so nothing */
	ck_assert_int_eq(evrdma_config_set_channel_ring(cfg, 64, 4096, 0), 0);
	errno = 0;
	ck_assert_uint_eq(evrdma_config_get_channel_pinned(cfg), 0);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(evrdma_errmsg(), "queue depths"));
	evrdma_config_free(cfg);
}
END_TEST

START_TEST(test_config_errmsg)
{
	struct evrdma_config *cfg = evrdma_config_new();

	ck_assert_ptr_nonnull(cfg);
	ck_assert_einval(evrdma_config_set_cq_size(cfg, 1));
	ck_assert_ptr_nonnull(strstr(evrdma_errmsg(), "cq_size"));
	evrdma_config_free(cfg);
}
END_TEST

/* ---- remote descriptors ---- */

static const uint8_t remote_wire[EVRDMA_REMOTE_ENCODED_LEN] = {
	'E', 'M', 1, 0,
	0x12, 0x34, 0x56, 0x78,				/* rkey */
	0x00, 0x00, 0x7f, 0xaa, 0xbb, 0xcc, 0xdd, 0x00,	/* addr */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00	/* len */
};

static const struct evrdma_remote remote_val = {
	.addr = 0x00007faabbccdd00ULL,
	.len = 0x100000,
	.rkey = 0x12345678
};

START_TEST(test_remote_roundtrip)
{
	uint8_t buf[64];
	struct evrdma_remote out;

	memset(buf, 0xee, sizeof(buf));
	ck_assert_int_eq(evrdma_remote_encode(&remote_val, buf, sizeof(buf)),
	    EVRDMA_REMOTE_ENCODED_LEN);
	/* The wire format is fixed: big-endian, versioned. */
	ck_assert_mem_eq(buf, remote_wire, sizeof(remote_wire));
	ck_assert_uint_eq(buf[EVRDMA_REMOTE_ENCODED_LEN], 0xee);

	memset(&out, 0, sizeof(out));
	ck_assert_int_eq(evrdma_remote_decode(&out, buf,
	    EVRDMA_REMOTE_ENCODED_LEN), 0);
	ck_assert_uint_eq(out.addr, remote_val.addr);
	ck_assert_uint_eq(out.len, remote_val.len);
	ck_assert_uint_eq(out.rkey, remote_val.rkey);

	/* Exact-fit buffer. */
	ck_assert_int_eq(evrdma_remote_encode(&remote_val, buf,
	    EVRDMA_REMOTE_ENCODED_LEN), EVRDMA_REMOTE_ENCODED_LEN);
}
END_TEST

START_TEST(test_remote_roundtrip_edges)
{
	static const struct evrdma_remote cases[] = {
		{ .addr = 0, .len = UINT64_MAX, .rkey = 0 },
		{ .addr = UINT64_MAX - 1, .len = 1, .rkey = UINT32_MAX },
		{ .addr = 1, .len = UINT64_MAX - 1, .rkey = 1 },
		{ .addr = 0x1000, .len = 1, .rkey = 0x80000000u },
	};
	uint8_t buf[EVRDMA_REMOTE_ENCODED_LEN];
	struct evrdma_remote out;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(evrdma_remote_encode(&cases[i], buf,
		    sizeof(buf)), EVRDMA_REMOTE_ENCODED_LEN);
		ck_assert_int_eq(evrdma_remote_decode(&out, buf, sizeof(buf)),
		    0);
		ck_assert_uint_eq(out.addr, cases[i].addr);
		ck_assert_uint_eq(out.len, cases[i].len);
		ck_assert_uint_eq(out.rkey, cases[i].rkey);
	}
}
END_TEST

START_TEST(test_remote_encode_errors)
{
	uint8_t buf[EVRDMA_REMOTE_ENCODED_LEN];

	errno = 0;
	ck_assert_int_eq(evrdma_remote_encode(NULL, buf, sizeof(buf)), -1);
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_int_eq(evrdma_remote_encode(&remote_val, NULL, sizeof(buf)),
	    -1);
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_int_eq(evrdma_remote_encode(&remote_val, buf,
	    EVRDMA_REMOTE_ENCODED_LEN - 1), -1);
	ck_assert_int_eq(errno, ENOSPC);
	errno = 0;
	ck_assert_int_eq(evrdma_remote_encode(&remote_val, buf, 0), -1);
	ck_assert_int_eq(errno, ENOSPC);
}
END_TEST

/* Decode @p wire (24 bytes) and expect failure with @p err, leaving the
 * output untouched. */
static void
expect_decode_fails(const uint8_t *wire, size_t len, int err)
{
	struct evrdma_remote out, before;

	memset(&out, 0xa5, sizeof(out));
	memcpy(&before, &out, sizeof(out));
	errno = 0;
	ck_assert_int_eq(evrdma_remote_decode(&out, wire, len), -1);
	ck_assert_int_eq(errno, err);
	ck_assert_mem_eq(&out, &before, sizeof(out));
}

START_TEST(test_remote_decode_errors)
{
	uint8_t w[EVRDMA_REMOTE_ENCODED_LEN + 1];
	struct evrdma_remote out;

	memcpy(w, remote_wire, sizeof(remote_wire));
	w[EVRDMA_REMOTE_ENCODED_LEN] = 0;

	errno = 0;
	ck_assert_int_eq(evrdma_remote_decode(NULL, w,
	    EVRDMA_REMOTE_ENCODED_LEN), -1);
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_int_eq(evrdma_remote_decode(&out, NULL,
	    EVRDMA_REMOTE_ENCODED_LEN), -1);
	ck_assert_int_eq(errno, EINVAL);

	/* Wrong lengths. */
	expect_decode_fails(w, 0, EINVAL);
	expect_decode_fails(w, EVRDMA_REMOTE_ENCODED_LEN - 1, EINVAL);
	expect_decode_fails(w, EVRDMA_REMOTE_ENCODED_LEN + 1, EINVAL);

	/* Bad magic, either byte. */
	memcpy(w, remote_wire, sizeof(remote_wire));
	w[0] = 'X';
	expect_decode_fails(w, EVRDMA_REMOTE_ENCODED_LEN, EPROTO);
	memcpy(w, remote_wire, sizeof(remote_wire));
	w[1] = 'm';
	expect_decode_fails(w, EVRDMA_REMOTE_ENCODED_LEN, EPROTO);

	/* Unknown versions. */
	memcpy(w, remote_wire, sizeof(remote_wire));
	w[2] = 0;
	expect_decode_fails(w, EVRDMA_REMOTE_ENCODED_LEN, EPROTO);
	w[2] = 2;
	expect_decode_fails(w, EVRDMA_REMOTE_ENCODED_LEN, EPROTO);
	w[2] = 0xff;
	expect_decode_fails(w, EVRDMA_REMOTE_ENCODED_LEN, EPROTO);

	/* Reserved byte must be zero. */
	memcpy(w, remote_wire, sizeof(remote_wire));
	w[3] = 1;
	expect_decode_fails(w, EVRDMA_REMOTE_ENCODED_LEN, EPROTO);

	/* Zero length. */
	memcpy(w, remote_wire, sizeof(remote_wire));
	memset(w + 16, 0, 8);
	expect_decode_fails(w, EVRDMA_REMOTE_ENCODED_LEN, EPROTO);

	/* addr + len past 2^64: UINT64_MAX + 1, and 1 + UINT64_MAX. */
	memcpy(w, remote_wire, sizeof(remote_wire));
	memset(w + 8, 0xff, 8);
	memset(w + 16, 0, 8);
	w[23] = 1;
	expect_decode_fails(w, EVRDMA_REMOTE_ENCODED_LEN, EPROTO);
	memset(w + 8, 0, 8);
	w[15] = 1;
	memset(w + 16, 0xff, 8);
	expect_decode_fails(w, EVRDMA_REMOTE_ENCODED_LEN, EPROTO);
	/* Both halves large. */
	memset(w + 8, 0, 8);
	w[8] = 0x80;
	memset(w + 16, 0, 8);
	w[16] = 0x80;
	expect_decode_fails(w, EVRDMA_REMOTE_ENCODED_LEN, EPROTO);
}
END_TEST

START_TEST(test_mr_null_args)
{
	struct evrdma_remote out;
	char buf[16];

	errno = 0;
	ck_assert_ptr_null(evrdma_mr_reg(NULL, buf, sizeof(buf),
	    EVRDMA_ACCESS_LOCAL_WRITE));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_int_eq(evrdma_mr_export(NULL, 0, 1, &out), -1);
	ck_assert_int_eq(errno, EINVAL);
	evrdma_mr_free(NULL);
}
END_TEST

/* ---- reasons ---- */

START_TEST(test_reason_strings)
{
	const char *s[EVRDMA_REASON_EVICTED + 1];
	const char *unknown = evrdma_reason_str(-1);
	int i, j;

	ck_assert_ptr_nonnull(unknown);
	ck_assert_str_eq(unknown, "unknown reason");
	ck_assert_str_eq(evrdma_reason_str(EVRDMA_REASON_EVICTED + 1),
	    "unknown reason");
	ck_assert_str_eq(evrdma_reason_str(1000000), "unknown reason");
	for (i = EVRDMA_REASON_NONE; i <= EVRDMA_REASON_EVICTED; i++) {
		s[i] = evrdma_reason_str(i);
		ck_assert_ptr_nonnull(s[i]);
		ck_assert_uint_gt(strlen(s[i]), 0);
		ck_assert_str_ne(s[i], unknown);
		for (j = 0; j < i; j++)
			ck_assert_str_ne(s[i], s[j]);
	}
}
END_TEST

/* ---- version, error messages ---- */

START_TEST(test_version)
{
	char v[32];

	ck_assert_ptr_nonnull(evrdma_version());
	ck_assert_str_eq(evrdma_version(), PACKAGE_VERSION);
	/* <evrdma/version.h>, the compile-time version, agrees with the
	 * library's and with itself */
	ck_assert_str_eq(evrdma_version(), EVRDMA_VERSION);
	snprintf(v, sizeof(v), "%d.%d.%d", EVRDMA_VERSION_MAJOR,
	    EVRDMA_VERSION_MINOR, EVRDMA_VERSION_PATCH);
	ck_assert_str_eq(evrdma_version(), v);
	ck_assert_int_eq(EVRDMA_VERSION_NUMBER, (EVRDMA_VERSION_MAJOR << 16) |
	    (EVRDMA_VERSION_MINOR << 8) | EVRDMA_VERSION_PATCH);
#if EVRDMA_VERSION_NUMBER < 0x000100 || EVRDMA_VERSION_NUMBER > 0xffffff
#error "EVRDMA_VERSION_NUMBER is not a number the preprocessor can compare"
#endif
	/* the library's number at run time: its string's, and the
	 * headers' (a build's library and headers are one release) */
	ck_assert_uint_eq(evrdma_get_version_number(), EVRDMA_VERSION_NUMBER);
	snprintf(v, sizeof(v), "%u.%u.%u", evrdma_get_version_number() >> 16,
	    (evrdma_get_version_number() >> 8) & 0xff,
	    evrdma_get_version_number() & 0xff);
	ck_assert_str_eq(evrdma_version(), v);
}
END_TEST

static void *
errmsg_thread(void *arg)
{
	/* strdup: the string is this thread's own buffer. */
	return strdup(evrdma_errmsg());
}

START_TEST(test_errmsg_thread_local)
{
	pthread_t t;
	void *other;

	ck_assert_ptr_nonnull(evrdma_errmsg());
	ck_assert_einval(evrdma_config_set_poll_budget(NULL, 1));
	ck_assert_str_ne(evrdma_errmsg(), "");
	/* Another thread has had no failure: its message is empty. */
	ck_assert_int_eq(pthread_create(&t, NULL, errmsg_thread, NULL), 0);
	ck_assert_int_eq(pthread_join(t, &other), 0);
	ck_assert_ptr_nonnull(other);
	ck_assert_str_eq(other, "");
	free(other);
	ck_assert_str_ne(evrdma_errmsg(), "");
}
END_TEST

/* ---- logging ---- */

struct log_capture {
	int n;
	int min_seen;
	int last_level;
	char last[512];
};

static void
log_cb(int level, const char *msg, void *arg)
{
	struct log_capture *lc = arg;

	ck_assert_ptr_nonnull(msg);
	if (lc->n == 0 || level < lc->min_seen)
		lc->min_seen = level;
	lc->n++;
	lc->last_level = level;
	snprintf(lc->last, sizeof(lc->last), "%s", msg);
}

START_TEST(test_log_callback)
{
	struct log_capture lc;
	struct evrdma_config *cfg = evrdma_config_new();

	ck_assert_ptr_nonnull(cfg);
	memset(&lc, 0, sizeof(lc));

	/* Failures are logged at DEBUG, with the error message's text. */
	evrdma_set_log_callback(log_cb, EVRDMA_LOG_DEBUG, &lc);
	ck_assert_einval(evrdma_config_set_cq_size(cfg, 1));
	ck_assert_int_ge(lc.n, 1);
	ck_assert_int_ge(lc.min_seen, EVRDMA_LOG_DEBUG);
	ck_assert_str_eq(lc.last, evrdma_errmsg());

	/* Below min_level: nothing arrives. */
	memset(&lc, 0, sizeof(lc));
	evrdma_set_log_callback(log_cb, EVRDMA_LOG_INFO, &lc);
	ck_assert_einval(evrdma_config_set_cq_size(cfg, 1));
	ck_assert_einval(evrdma_config_set_rnr_retry(cfg, 99));
	ck_assert_int_eq(lc.n, 0);

	/* NULL discards, and errno still reports the failure. */
	evrdma_set_log_callback(NULL, EVRDMA_LOG_DEBUG, &lc);
	ck_assert_einval(evrdma_config_set_cq_size(cfg, 1));
	ck_assert_int_eq(lc.n, 0);

	evrdma_set_log_callback(NULL, EVRDMA_LOG_DEBUG, NULL);
	evrdma_config_free(cfg);
}
END_TEST

/* Whatever evrdma_base_new() logs on a host without RDMA arrives at or
 * above the chosen level. */
START_TEST(test_log_min_level_base_new)
{
	struct log_capture lc;
	struct event_base *eb;
	struct evrdma_base *base;

	if (tu_have_rdma_cm())
		return;	/* an RDMA host: base creation succeeds */
	memset(&lc, 0, sizeof(lc));
	evrdma_set_log_callback(log_cb, EVRDMA_LOG_INFO, &lc);
	eb = event_base_new();
	ck_assert_ptr_nonnull(eb);
	base = evrdma_base_new(eb, NULL);
	ck_assert_ptr_null(base);
	if (lc.n > 0)
		ck_assert_int_ge(lc.min_seen, EVRDMA_LOG_INFO);
	evrdma_set_log_callback(NULL, EVRDMA_LOG_DEBUG, NULL);
	event_base_free(eb);
}
END_TEST

/* ---- rdma-core missing or unusable ---- */

static void
expect_missing_lib(const char *env, const char *pkg)
{
	struct event_base *eb;

	/* The library is loaded once per process: only a fresh (forked)
	 * test process sees the variable. */
	if (tu_nofork())
		return;
	ck_assert_int_eq(setenv(env, "libdoesnotexist.so.1", 1), 0);
	eb = event_base_new();
	ck_assert_ptr_nonnull(eb);
	errno = 0;
	ck_assert_ptr_null(evrdma_base_new(eb, NULL));
	ck_assert_int_eq(errno, ENOSYS);
	ck_assert_ptr_nonnull(strstr(evrdma_errmsg(), "libdoesnotexist"));
	ck_assert_ptr_nonnull(strstr(evrdma_errmsg(), pkg));

	/* The explicit load reports the same, every time. */
	errno = 0;
	ck_assert_int_eq(evrdma_rdma_load(), -1);
	ck_assert_int_eq(errno, ENOSYS);
	ck_assert_ptr_nonnull(strstr(evrdma_errmsg(), pkg));
	errno = 0;
	ck_assert_ptr_null(evrdma_base_new(eb, NULL));
	ck_assert_int_eq(errno, ENOSYS);
	/* and so does a symbol look-up */
	errno = 0;
	ck_assert_ptr_null(evrdma_rdma_sym("ibv_get_device_list"));
	ck_assert_int_eq(errno, ENOSYS);
	ck_assert_ptr_nonnull(strstr(evrdma_errmsg(), pkg));
	event_base_free(eb);
}

/* rdma-core's functions from the libraries evrdma loaded, by name; dladdr
 * names their files. */
START_TEST(test_rdma_sym)
{
	Dl_info di;
	void *f;

	if (evrdma_rdma_load() < 0)
		return;	/* rdma-core not installed: the ENOSYS tests apply */
	f = evrdma_rdma_sym("ibv_open_device");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_ne(dladdr(f, &di), 0);
	ck_assert_ptr_nonnull(strstr(di.dli_fname, "libibverbs.so"));
	f = evrdma_rdma_sym("rdma_create_id");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_ne(dladdr(f, &di), 0);
	ck_assert_ptr_nonnull(strstr(di.dli_fname, "librdmacm.so"));
	errno = 0;
	ck_assert_ptr_null(evrdma_rdma_sym("ibv_no_such_function"));
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_ptr_nonnull(strstr(evrdma_errmsg(), "ibv_no_such_function"));
	errno = 0;
	ck_assert_ptr_null(evrdma_rdma_sym(NULL));
	ck_assert_int_eq(errno, EINVAL);
}
END_TEST

START_TEST(test_missing_libibverbs)
{
	expect_missing_lib("EVRDMA_LIBIBVERBS", "libibverbs1");
}
END_TEST

START_TEST(test_missing_librdmacm)
{
	expect_missing_lib("EVRDMA_LIBRDMACM", "librdmacm1");
}
END_TEST

/* rdma-core installed but no RDMA in the kernel: rdma_create_event_channel
 * fails with ENODEV when /dev/infiniband/rdma_cm is absent, and
 * evrdma_base_new() passes that on. */
START_TEST(test_no_rdma_device)
{
	struct event_base *eb;
	struct evrdma_config *cfg;
	int i;

	if (tu_have_rdma_cm())
		return;	/* the device tests cover RDMA hosts */
	if (evrdma_rdma_load() < 0)
		return;	/* rdma-core not installed: the ENOSYS tests apply */
	eb = event_base_new();
	ck_assert_ptr_nonnull(eb);
	cfg = evrdma_config_new();
	ck_assert_ptr_nonnull(cfg);
	/* Repeated attempts fail the same way and leak nothing. */
	for (i = 0; i < 3; i++) {
		errno = 0;
		ck_assert_ptr_null(evrdma_base_new(eb, i == 1 ? cfg : NULL));
		ck_assert_int_eq(errno, ENODEV);
		ck_assert_str_ne(evrdma_errmsg(), "");
	}
	evrdma_config_free(cfg);
	/* Nothing was left on the event_base. */
	ck_assert_int_eq(event_base_get_num_events(eb, EVENT_BASE_COUNT_ADDED),
	    0);
	event_base_free(eb);
}
END_TEST

/* ---- listeners, as evconnlistener (a base without RDMA) ---- */

static struct evrdma_base *
lh_base(struct event_base **eb)
{
	struct evrdma_config *cfg = evrdma_config_new();
	struct evrdma_base *base;

	*eb = event_base_new();
	ck_assert_ptr_nonnull(*eb);
	ck_assert_ptr_nonnull(cfg);
	ck_assert_int_eq(evrdma_config_set_tcp_fallback(cfg, 1), 0);
	base = evrdma_base_new(*eb, cfg);
	ck_assert_ptr_nonnull(base);
	evrdma_config_free(cfg);
	return base;
}

static int
lh_sin(struct sockaddr_in *sin)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return (int)sizeof(*sin);
}

static void
lh_accept(struct evrdma_listener *lst, struct bufferevent *bev,
    const struct sockaddr *peer, int socklen, void *arg)
{
	bufferevent_free(bev);
}

static void
lh_raw_accept(struct evrdma_listener *lst, struct evrdma_conn *conn,
    const struct sockaddr *peer, int socklen, void *arg)
{
	evrdma_conn_free(conn);
}

static void
lh_ch_accept(struct evrdma_listener *lst, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	evrdma_channel_free(ch);
}

/* The three constructors with @p flags and @p backlog: each fails with
 * EINVAL. */
static void
lh_all_einval(struct evrdma_base *base, int flags, int backlog)
{
	struct sockaddr_in sin;
	int len = lh_sin(&sin);

	errno = 0;
	ck_assert_ptr_null(evrdma_bufferevent_listener_new(base, lh_accept,
	    NULL, flags, backlog, (struct sockaddr *)&sin, len));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(evrdma_listener_new(base, lh_raw_accept, NULL,
	    flags, backlog, (struct sockaddr *)&sin, len));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(evrdma_channel_listener_new(base, lh_ch_accept,
	    NULL, flags, backlog, (struct sockaddr *)&sin, len));
	ck_assert_int_eq(errno, EINVAL);
}

/* LEV_OPT_* flags the listeners do not offer, unknown bits, evrdma's
 * flags where they do not belong, and backlog 0: EINVAL, whether or not
 * the base has RDMA; the flags they take, and backlog -1, are taken. */
START_TEST(test_listener_flags)
{
	static const int never[] = {
		LEV_OPT_LEAVE_SOCKETS_BLOCKING, LEV_OPT_THREADSAFE,
		LEV_OPT_REUSEABLE_PORT, LEV_OPT_BIND_IPV6ONLY, 1 << 12,
		1 << 20, 1 << 30,
	};
	struct event_base *eb;
	struct evrdma_base *base = lh_base(&eb);
	struct evrdma_listener *lst;
	struct sockaddr_in sin;
	int len = lh_sin(&sin);
	size_t i;

	/* evrdma's own flags: above libevent's, and apart */
	ck_assert_int_eq(EVRDMA_LISTEN_RAW & 0xffff, 0);
	ck_assert_int_eq(EVRDMA_CHANNEL_MESSAGE & 0xffff, 0);
	ck_assert_int_eq(EVRDMA_LISTEN_RAW & EVRDMA_CHANNEL_MESSAGE, 0);
	for (i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		lh_all_einval(base, LEV_OPT_CLOSE_ON_FREE | never[i], -1);
	lh_all_einval(base, LEV_OPT_CLOSE_ON_FREE, 0);
	/* each constructor's own flag is not the others' */
	errno = 0;
	ck_assert_ptr_null(evrdma_bufferevent_listener_new(base, lh_accept,
	    NULL, EVRDMA_LISTEN_RAW, -1, (struct sockaddr *)&sin, len));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(evrdma_bufferevent_listener_new(base, lh_accept,
	    NULL, EVRDMA_CHANNEL_MESSAGE, -1, (struct sockaddr *)&sin, len));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(evrdma_channel_listener_new(base, lh_ch_accept,
	    NULL, EVRDMA_LISTEN_RAW, -1, (struct sockaddr *)&sin, len));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(evrdma_listener_new(base, lh_raw_accept, NULL,
	    EVRDMA_CHANNEL_MESSAGE, -1, (struct sockaddr *)&sin, len));
	ck_assert_int_eq(errno, EINVAL);
	/* what they take */
	lst = evrdma_bufferevent_listener_new(base, lh_accept, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE |
	    LEV_OPT_DISABLED | LEV_OPT_DEFERRED_ACCEPT, -1,
	    (struct sockaddr *)&sin, len);
	ck_assert_ptr_nonnull(lst);
	evrdma_listener_free(lst);
	if (!tu_have_rdma_cm()) {
		/* the flags are right: what fails is RDMA */
		errno = 0;
		ck_assert_ptr_null(evrdma_listener_new(base, lh_raw_accept,
		    NULL, EVRDMA_LISTEN_RAW | LEV_OPT_REUSEABLE, -1,
		    (struct sockaddr *)&sin, len));
		ck_assert(errno == ENODEV || errno == ENOSYS);
		errno = 0;
		ck_assert_ptr_null(evrdma_channel_listener_new(base,
		    lh_ch_accept, NULL, EVRDMA_CHANNEL_MESSAGE |
		    LEV_OPT_CLOSE_ON_FREE, -1, (struct sockaddr *)&sin, len));
		ck_assert(errno == ENODEV || errno == ENOSYS);
	}
	evrdma_base_free(base);
	event_base_free(eb);
}
END_TEST

/* The TCP listener's socket, found by its port. */
static int
lh_listening_fd(int port)
{
	struct sockaddr_in sin;
	socklen_t sl;
	int fd, acc;
	socklen_t al;

	for (fd = 0; fd < 4096; fd++) {
		sl = sizeof(sin);
		al = sizeof(acc);
		if (getsockname(fd, (struct sockaddr *)&sin, &sl) == 0 &&
		    sin.sin_family == AF_INET &&
		    ntohs(sin.sin_port) == port &&
		    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) == 0 &&
		    acc)
			return fd;
	}
	return -1;
}

/* The fallback's listening socket has the options its flags ask for
 * (evrdma/listener.h), and no other. */
START_TEST(test_listener_sockopts)
{
	struct event_base *eb;
	struct evrdma_base *base;
	struct evrdma_listener *lst;
	struct sockaddr_in sin;
	int len = lh_sin(&sin), pass, fd, v, port;
	socklen_t vl;

	if (tu_have_rdma_cm())
		return;		/* (a host without RDMA: TCP only) */
	base = lh_base(&eb);
	for (pass = 0; pass < 2; pass++) {
		lst = evrdma_bufferevent_listener_new(base, lh_accept, NULL,
		    pass ? LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC |
		    LEV_OPT_DEFERRED_ACCEPT : 0, -1,
		    (struct sockaddr *)&sin, len);
		ck_assert_ptr_nonnull(lst);
		port = evrdma_listener_get_port(lst);
		fd = lh_listening_fd(port);
		ck_assert_int_ge(fd, 0);
		vl = sizeof(v);
		ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &v,
		    &vl), 0);
		ck_assert_int_eq(!!v, pass);
		ck_assert_int_eq(!!(fcntl(fd, F_GETFD) & FD_CLOEXEC), pass);
		vl = sizeof(v);
		ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT,
		    &v, &vl), 0);
		ck_assert_int_eq(!!v, pass);
		evrdma_listener_free(lst);
		/* (LEV_OPT_CLOSE_ON_FREE is implied: it is closed) */
		ck_assert_int_eq(lh_listening_fd(port), -1);
	}
	evrdma_base_free(base);
	event_base_free(eb);
}
END_TEST

/* The getters and setters, on NULL, on a listener, after the base went. */
START_TEST(test_listener_getters)
{
	struct event_base *eb;
	struct evrdma_base *base = lh_base(&eb);
	struct evrdma_listener *lst;
	struct bufferevent *bev;
	struct sockaddr_in sin;
	int len = lh_sin(&sin);

	ck_assert_ptr_null(evrdma_listener_get_base(NULL));
	ck_assert_int_eq(evrdma_listener_get_error(NULL), EVRDMA_REASON_NONE);
	evrdma_listener_set_error_cb(NULL, NULL);
	errno = 0;
	ck_assert_int_eq(evrdma_listener_enable(NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_int_eq(evrdma_listener_disable(NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_int_eq(evrdma_bufferevent_listener_set_options(NULL,
	    BEV_OPT_CLOSE_ON_FREE), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(evrdma_bufferevent_get_dns_error(NULL), 0);
	/* a socket bufferevent of libevent's own: its getter answers */
	bev = bufferevent_socket_new(eb, -1, BEV_OPT_CLOSE_ON_FREE);
	ck_assert_ptr_nonnull(bev);
	ck_assert_int_eq(evrdma_bufferevent_get_dns_error(bev), 0);
	bufferevent_free(bev);

	lst = evrdma_bufferevent_listener_new(base, lh_accept, NULL,
	    LEV_OPT_CLOSE_ON_FREE, -1, (struct sockaddr *)&sin, len);
	ck_assert_ptr_nonnull(lst);
	ck_assert_ptr_eq(evrdma_listener_get_base(lst), eb);
	ck_assert_int_eq(evrdma_listener_get_error(lst), EVRDMA_REASON_NONE);
	errno = 0;
	ck_assert_int_eq(evrdma_bufferevent_listener_set_options(lst,
	    1 << 20), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(evrdma_bufferevent_listener_set_options(lst,
	    BEV_OPT_DEFER_CALLBACKS), 0);
	ck_assert_int_eq(evrdma_listener_disable(lst), 0);
	ck_assert_int_eq(evrdma_listener_disable(lst), 0);
	ck_assert_int_eq(evrdma_listener_enable(lst), 0);
	ck_assert_int_eq(evrdma_listener_enable(lst), 0);
	evrdma_base_free(base);
	/* a husk: closed */
	ck_assert_ptr_null(evrdma_listener_get_base(lst));
	errno = 0;
	ck_assert_int_eq(evrdma_listener_enable(lst), -1);
	ck_assert_int_eq(errno, EPIPE);
	evrdma_listener_free(lst);
	event_base_free(eb);
}
END_TEST

/* ---- statistics: the size the caller was compiled with (doc/ABI.md) ---- */

START_TEST(test_base_stats_size)
{
	struct event_base *eb;
	struct evrdma_base *base;
	union {
		struct evrdma_stats st;
		unsigned char b[sizeof(struct evrdma_stats) + 32];
	} u;
	/* the struct of 0.1.0, through its last field */
	size_t v0 = offsetof(struct evrdma_stats, bevs) + sizeof(unsigned);
	size_t i;

	errno = 0;
	ck_assert_int_eq(evrdma_base_get_stats(NULL, &u.st, sizeof(u.st)), -1);
	ck_assert_int_eq(errno, EINVAL);
	base = lh_base(&eb);
	errno = 0;
	ck_assert_int_eq(evrdma_base_get_stats(base, NULL, sizeof(u.st)), -1);
	ck_assert_int_eq(errno, EINVAL);
	/* the size of a pointer, not of the struct */
	errno = 0;
	ck_assert_int_eq(evrdma_base_get_stats(base, &u.st, sizeof(&u.st)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(evrdma_errmsg(), "sizeof"));
	ck_assert_int_eq(evrdma_base_get_stats(base, &u.st, v0 - 1), -1);

	memset(&u, 0xa5, sizeof(u));
	ck_assert_int_eq(evrdma_base_get_stats(base, &u.st, sizeof(u.st)), 0);
	ck_assert_uint_eq(u.st.conns, 0);
	ck_assert_uint_eq(u.st.listeners, 0);
	ck_assert_uint_eq(u.st.bevs, 0);
	ck_assert_uint_eq(u.st.ch_written, 0);
	for (i = sizeof(u.st); i < sizeof(u.b); i++)
		ck_assert_uint_eq(u.b[i], 0xa5);
	/* a caller compiled against a later release, with fields this
	 * library does not know: they read 0 */
	memset(&u, 0xa5, sizeof(u));
	ck_assert_int_eq(evrdma_base_get_stats(base, &u.st, sizeof(u.b)), 0);
	ck_assert_uint_eq(u.st.bevs, 0);
	for (i = sizeof(u.st); i < sizeof(u.b); i++)
		ck_assert_uint_eq(u.b[i], 0);
	/* one compiled against 0.1.0: its fields, nothing past them */
	memset(&u, 0xa5, sizeof(u));
	ck_assert_int_eq(evrdma_base_get_stats(base, &u.st, v0), 0);
	ck_assert_uint_eq(u.st.conns, 0);
	ck_assert_uint_eq(u.st.bevs, 0);
	for (i = v0; i < sizeof(u.b); i++)
		ck_assert_uint_eq(u.b[i], 0xa5);
	evrdma_base_free(base);
	event_base_free(eb);
}
END_TEST

/* ---- NULL arguments ---- */

START_TEST(test_free_null)
{
	evrdma_conn_free(NULL);
	evrdma_listener_free(NULL);
	evrdma_mr_free(NULL);
	evrdma_base_free(NULL);
	evrdma_config_free(NULL);
	evrdma_srq_free(NULL);
}
END_TEST

/* Shared receive queues: NULL arguments, and a base without RDMA. */
START_TEST(test_srq_args)
{
	struct event_base *eb;
	struct evrdma_base *base;
	char buf[16];

	errno = 0;
	ck_assert_ptr_null(evrdma_srq_new(NULL, NULL, 16));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(evrdma_srq_mr_reg(NULL, buf, sizeof(buf)));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(evrdma_srq_post_recv(NULL, NULL, 0, 1, NULL, NULL),
	    -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(evrdma_srq_set_limit(NULL, 1, NULL, NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_uint_eq(evrdma_srq_get_posted(NULL), 0);
	ck_assert_int_eq(evrdma_conn_set_srq(NULL, NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(evrdma_listener_set_srq(NULL, NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_int_eq(evrdma_bufferevent_set_srq(NULL, NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	if (tu_have_rdma_cm() || evrdma_rdma_load() < 0)
		return;	/* a base with RDMA: the device tests */
	/* the TCP fallback's base has no device to make a queue on */
	base = lh_base(&eb);
	errno = 0;
	ck_assert_ptr_null(evrdma_srq_new(base, NULL, 16));
	ck_assert_int_eq(errno, ENODEV);
	{
		/* its bufferevents are TCP ones: no queue for them */
		struct bufferevent *bev = evrdma_bufferevent_new(base, 0);

		ck_assert_ptr_nonnull(bev);
		errno = 0;
		ck_assert_int_eq(evrdma_bufferevent_set_srq(bev, NULL), -1);
		ck_assert_int_eq(errno, EINVAL);
		bufferevent_free(bev);
	}
	evrdma_base_free(base);
	event_base_free(eb);
}
END_TEST

/* ---- test utilities ---- */

static void
set_flag_cb(evutil_socket_t fd, short what, void *arg)
{
	*(int *)arg = 1;
}

START_TEST(test_tu_loop_until)
{
	struct event_base *eb = event_base_new();
	struct timeval tv = { 0, 20 * 1000 };
	struct event *ev;
	uint64_t t0;
	int flag = 0;

	ck_assert_ptr_nonnull(eb);
	/* Nothing pending: times out without spinning forever. */
	t0 = tu_now_ms();
	ck_assert_int_eq(tu_loop_until(eb, &flag, 50), -1);
	ck_assert_uint_ge(tu_now_ms() - t0, 40);

	ev = evtimer_new(eb, set_flag_cb, &flag);
	ck_assert_ptr_nonnull(ev);
	evtimer_add(ev, &tv);
	ck_assert_int_eq(tu_loop_until(eb, &flag, 5000), 0);
	ck_assert_int_eq(flag, 1);
	/* The helper's own timer is gone. */
	ck_assert_int_eq(event_base_get_num_events(eb, EVENT_BASE_COUNT_ADDED),
	    0);
	event_free(ev);
	event_base_free(eb);
}
END_TEST

/* ---- runner ---- */

static TCase *
tcase(const char *name)
{
	TCase *tc = tcase_create(name);

	tcase_set_timeout(tc, TEST_TIMEOUT_S);
	return tc;
}

static Suite *
host_suite(void)
{
	Suite *s = suite_create("host");
	TCase *tc;

	tc = tcase("config");
	tcase_add_test(tc, test_config_defaults);
	tcase_add_test(tc, test_config_queue_depth);
	tcase_add_test(tc, test_config_cq_size);
	tcase_add_test(tc, test_config_inline);
	tcase_add_test(tc, test_config_timeout);
	tcase_add_test(tc, test_config_poll_budget);
	tcase_add_test(tc, test_config_busy_poll);
	tcase_add_test(tc, test_config_rnr_retry);
	tcase_add_test(tc, test_config_warm);
	tcase_add_test(tc, test_config_errmsg);
	tcase_add_test(tc, test_config_channel_ring);
	tcase_add_test(tc, test_config_channel_pinned);
	suite_add_tcase(s, tc);

	tc = tcase("remote");
	tcase_add_test(tc, test_remote_roundtrip);
	tcase_add_test(tc, test_remote_roundtrip_edges);
	tcase_add_test(tc, test_remote_encode_errors);
	tcase_add_test(tc, test_remote_decode_errors);
	tcase_add_test(tc, test_mr_null_args);
	suite_add_tcase(s, tc);

	tc = tcase("util");
	tcase_add_test(tc, test_reason_strings);
	tcase_add_test(tc, test_version);
	tcase_add_test(tc, test_errmsg_thread_local);
	tcase_add_test(tc, test_log_callback);
	tcase_add_test(tc, test_log_min_level_base_new);
	tcase_add_test(tc, test_base_stats_size);
	tcase_add_test(tc, test_free_null);
	tcase_add_test(tc, test_srq_args);
	tcase_add_test(tc, test_tu_loop_until);
	suite_add_tcase(s, tc);

	tc = tcase("listener");
	tcase_add_test(tc, test_listener_flags);
	tcase_add_test(tc, test_listener_sockopts);
	tcase_add_test(tc, test_listener_getters);
	suite_add_tcase(s, tc);

	tc = tcase("no_rdma");
	tcase_add_test(tc, test_missing_libibverbs);
	tcase_add_test(tc, test_missing_librdmacm);
	tcase_add_test(tc, test_no_rdma_device);
	tcase_add_test(tc, test_rdma_sym);
	suite_add_tcase(s, tc);

	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	tu_log_quiet();
	sr = srunner_create(host_suite());
	srunner_add_suite(sr, bt_suite_compare());
	srunner_add_suite(sr, bt_suite_bev());
	srunner_add_suite(sr, bt_suite_attack());
	srunner_add_suite(sr, bt_suite_strangers());
	srunner_add_suite(sr, bt_suite_lib());
	srunner_add_suite(sr, ti_suite_host());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
