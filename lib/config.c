/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: configuration object.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>

#include "evrdma-internal.h"

#define QUEUE_DEPTH_MAX		16384
#define CQ_SIZE_MIN		64
#define CQ_SIZE_MAX		1048576
#define INLINE_MAX		1024
#define TIMEOUT_MAX_MS		600000
#define POLL_BUDGET_MAX		65536
#define BUSY_POLL_MAX		100000	/* us: a tenth of a second */
#define RNR_RETRY_MAX		7
#define PULL_MIN_MAX		(4u << 20)
#define HALF_OPEN_MAX		65536

/*
 * The checks every one-value setter makes: a configuration, and @p v in
 * lo..hi; fails with EINVAL and says which setter and which range.
 */
static int
cfg_check(const struct evrdma_config *cfg, const char *fn, unsigned v,
    unsigned lo, unsigned hi, const char *unit)
{
	if (cfg == NULL)
		return evrdma__fail(EINVAL, "%s: NULL configuration", fn);
	if (v < lo || v > hi)
		return evrdma__fail(EINVAL, "%s: %u%s outside %u..%u", fn, v,
		    unit, lo, hi);
	return 0;
}

void
evrdma__config_defaults(struct evrdma_config *cfg)
{
	cfg->sq_depth = 128;
	cfg->rq_depth = 128;
	cfg->cq_size = 4096;
	cfg->inline_threshold = 64;
	cfg->ch_slots = 16;
	cfg->ch_slot_size = 65536;
	cfg->ch_max_input = 4u << 20;
	cfg->ch_pull_min = 32768;
	cfg->timeout_ms[EVRDMA_TIMEOUT_ADDR] = 2000;
	cfg->timeout_ms[EVRDMA_TIMEOUT_ROUTE] = 2000;
	cfg->timeout_ms[EVRDMA_TIMEOUT_CONNECT] = 30000;
	cfg->timeout_ms[EVRDMA_TIMEOUT_TEARDOWN] = 2000;
	cfg->timeout_ms[EVRDMA_TIMEOUT_ACCEPT] = 5000;
	cfg->poll_budget = 64;
	cfg->rnr_retry = 7;
	cfg->half_open = 32;
	cfg->ka_idle_ms = 5000;
	cfg->ka_interval_ms = 1000;
	cfg->ka_count = 3;
	cfg->retry_count = 6;	/* (Soft-RoCE takes 7 for "for ever") */
	cfg->linger_ms = 30000;
	cfg->linger_max = 1024;
	cfg->warm_max = 4;
	cfg->warm_idle_ms = 10000;
}

struct evrdma_config *
evrdma_config_new(void)
{
	struct evrdma_config *cfg = calloc(1, sizeof(*cfg));

	if (cfg == NULL) {
		evrdma__fail(ENOMEM, "evrdma_config_new: out of memory");
		return NULL;
	}
	evrdma__config_defaults(cfg);
	return cfg;
}

void
evrdma_config_free(struct evrdma_config *cfg)
{
	free(cfg);
}

int
evrdma_config_set_queue_depth(struct evrdma_config *cfg, unsigned send,
    unsigned recv)
{
	if (cfg_check(cfg, __func__, send, 1, QUEUE_DEPTH_MAX, " (send)") < 0 ||
	    cfg_check(cfg, __func__, recv, 1, QUEUE_DEPTH_MAX, " (recv)") < 0)
		return -1;
	cfg->sq_depth = send;
	cfg->rq_depth = recv;
	return 0;
}

int
evrdma_config_set_cq_size(struct evrdma_config *cfg, unsigned entries)
{
	if (cfg_check(cfg, __func__, entries, CQ_SIZE_MIN, CQ_SIZE_MAX, "") < 0)
		return -1;
	cfg->cq_size = entries;
	return 0;
}

int
evrdma_config_set_inline_threshold(struct evrdma_config *cfg, unsigned bytes)
{
	if (cfg_check(cfg, __func__, bytes, 0, INLINE_MAX, " bytes") < 0)
		return -1;
	cfg->inline_threshold = bytes;
	return 0;
}

int
evrdma_config_set_timeout(struct evrdma_config *cfg, int which, unsigned ms)
{
	if (cfg_check(cfg, __func__, ms, 1, TIMEOUT_MAX_MS, " ms") < 0)
		return -1;
	if (which < EVRDMA_TIMEOUT_ADDR || which > EVRDMA_TIMEOUT_ACCEPT)
		return evrdma__fail(EINVAL, "%s: unknown timeout %d", __func__,
		    which);
	cfg->timeout_ms[which] = ms;
	return 0;
}

int
evrdma_config_set_poll_budget(struct evrdma_config *cfg, unsigned completions)
{
	if (cfg_check(cfg, __func__, completions, 1, POLL_BUDGET_MAX, "") < 0)
		return -1;
	cfg->poll_budget = completions;
	return 0;
}

int
evrdma_config_set_busy_poll(struct evrdma_config *cfg, unsigned usec)
{
	if (cfg_check(cfg, __func__, usec, 0, BUSY_POLL_MAX, " us") < 0)
		return -1;
	cfg->busy_poll_us = usec;
	return 0;
}

int
evrdma_config_set_half_open(struct evrdma_config *cfg, unsigned max)
{
	if (cfg_check(cfg, __func__, max, 1, HALF_OPEN_MAX, "") < 0)
		return -1;
	cfg->half_open = max;
	return 0;
}

int
evrdma_config_set_keepalive(struct evrdma_config *cfg, unsigned idle_ms,
    unsigned interval_ms, unsigned count)
{
	if (cfg_check(cfg, __func__, idle_ms, 0, TIMEOUT_MAX_MS, " ms (idle)")
	    < 0)
		return -1;
	if (idle_ms && (cfg_check(cfg, __func__, interval_ms, 1,
	    TIMEOUT_MAX_MS, " ms (interval)") < 0 ||
	    cfg_check(cfg, __func__, count, 1, 100, " (count)") < 0))
		return -1;
	cfg->ka_idle_ms = idle_ms;
	cfg->ka_interval_ms = interval_ms;
	cfg->ka_count = count;
	return 0;
}

int
evrdma_config_set_transport_retry(struct evrdma_config *cfg,
    unsigned ack_timeout_ms, unsigned retries)
{
	unsigned exp = 0;

	if (cfg_check(cfg, __func__, ack_timeout_ms, 0, 60000, " ms") < 0 ||
	    cfg_check(cfg, __func__, retries, 0, 7, " (retries)") < 0)
		return -1;
	/* the IB timeout is 4.096 us * 2^exp: the smallest exp that covers
	 * the wish (0 leaves rdma_cm's own) */
	if (ack_timeout_ms) {
		uint64_t us = (uint64_t)ack_timeout_ms * 1000;

		for (exp = 1; exp < 31 && (4096ull << exp) / 1000 < us; exp++)
			;
	}
	cfg->ack_timeout = exp;
	cfg->retry_count = retries;
	return 0;
}

int
evrdma_config_set_linger(struct evrdma_config *cfg, unsigned max_ms,
    unsigned max_count)
{
	if (cfg_check(cfg, __func__, max_ms, 1, TIMEOUT_MAX_MS, " ms") < 0 ||
	    cfg_check(cfg, __func__, max_count, 1, 1u << 20, " connections") <
	    0)
		return -1;
	cfg->linger_ms = max_ms;
	cfg->linger_max = max_count;
	return 0;
}

int
evrdma_config_set_warm(struct evrdma_config *cfg, unsigned max_sets,
    unsigned idle_ms)
{
	if (cfg_check(cfg, __func__, max_sets, 0, 1024, " sets") < 0 ||
	    cfg_check(cfg, __func__, idle_ms, 1, TIMEOUT_MAX_MS, " ms") < 0)
		return -1;
	cfg->warm_max = max_sets;
	cfg->warm_idle_ms = idle_ms;
	return 0;
}

int
evrdma_config_get_warm(const struct evrdma_config *cfg, unsigned *max_sets,
    unsigned *idle_ms)
{
	struct evrdma_config dflt;

	if (!cfg) {
		memset(&dflt, 0, sizeof(dflt));
		evrdma__config_defaults(&dflt);
		cfg = &dflt;
	}
	if (max_sets)
		*max_sets = cfg->warm_max;
	if (idle_ms)
		*idle_ms = cfg->warm_idle_ms;
	return 0;
}

int
evrdma_config_set_rnr_retry(struct evrdma_config *cfg, unsigned count)
{
	if (cfg_check(cfg, __func__, count, 0, RNR_RETRY_MAX, "") < 0)
		return -1;
	cfg->rnr_retry = count;
	return 0;
}

int
evrdma_config_set_channel_ring(struct evrdma_config *cfg, unsigned slots,
    unsigned slot_size, size_t max_input)
{
	if (cfg == NULL || slots < 2 || slots > 4096 || slot_size < 64 ||
	    slot_size > (4u << 20) || slot_size % 64 ||
	    max_input > ((size_t)1 << 30))
		return evrdma__fail(EINVAL, "evrdma_config_set_channel_ring: "
		    "%u slots of %u bytes, max_input %zu out of range", slots,
		    slot_size, max_input);
	cfg->ch_slots = slots;
	cfg->ch_slot_size = slot_size;
	cfg->ch_max_input = max_input;
	return 0;
}

int
evrdma_config_set_channel_pull(struct evrdma_config *cfg, unsigned min_bytes)
{
	if (cfg_check(cfg, __func__, min_bytes, 0, PULL_MIN_MAX, " bytes") < 0)
		return -1;
	cfg->ch_pull_min = min_bytes;
	return 0;
}

int
evrdma_config_set_tcp_fallback(struct evrdma_config *cfg, int enable)
{
	if (cfg_check(cfg, __func__, (unsigned)enable, 0, 1, "") < 0)
		return -1;
	cfg->tcp_fallback = enable;
	return 0;
}

/* evrdma_config_set_default()'s: the bases of the event_base calls
 * (base.c), made on any thread */
static struct evrdma_config dflt;
static int dflt_set;
static pthread_mutex_t dflt_lock = PTHREAD_MUTEX_INITIALIZER;

int
evrdma_config_set_default(const struct evrdma_config *cfg)
{
	if (cfg && cfg->cq_size < cfg->sq_depth + cfg->rq_depth)
		return evrdma__fail(EINVAL, "evrdma_config_set_default: cq "
		    "size %u is below send+recv queue depth %u",
		    cfg->cq_size, cfg->sq_depth + cfg->rq_depth);
	pthread_mutex_lock(&dflt_lock);
	if (cfg)
		dflt = *cfg;
	dflt_set = cfg != NULL;
	pthread_mutex_unlock(&dflt_lock);
	return 0;
}

void
evrdma__config_default(struct evrdma_config *cfg)
{
	pthread_mutex_lock(&dflt_lock);
	if (dflt_set) {
		*cfg = dflt;
	} else {
		evrdma__config_defaults(cfg);
		cfg->tcp_fallback = 1;
	}
	pthread_mutex_unlock(&dflt_lock);
}
