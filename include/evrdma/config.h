/*
 * evrdma: configuration object.
 */
#ifndef EVRDMA_CONFIG_H_INCLUDED_
#define EVRDMA_CONFIG_H_INCLUDED_

/** @file evrdma/config.h
 * Tunables of an evrdma_base. Every setter validates its input and returns
 * -1 with errno EINVAL for values outside the documented range, so that a
 * nonsense value never turns into a later failure or crash.
 */

#include <evrdma/util.h>

#ifdef __cplusplus
extern "C" {
#endif

/** An opaque set of tunables, copied by evrdma_base_new(). */
struct evrdma_config;

/** Which timeout evrdma_config_set_timeout() sets. */
enum evrdma_timeout {
	EVRDMA_TIMEOUT_ADDR = 0,	/**< address resolution; default 2000 ms */
	EVRDMA_TIMEOUT_ROUTE,		/**< route resolution; default 2000 ms */
	EVRDMA_TIMEOUT_CONNECT,		/**< connect request to ESTABLISHED; default 5000 ms */
	EVRDMA_TIMEOUT_TEARDOWN		/**< wait for flush and DISCONNECTED at free; default 2000 ms */
};

/**
 * Allocate a configuration holding the defaults:
 * send and receive queue depth 128, CQ size 4096 entries, inline threshold
 * 64 bytes, timeouts as listed in evrdma_timeout, polling budget 64
 * completions per wake-up, rnr_retry 7.
 * @return a new configuration (free with evrdma_config_free()), or NULL
 *   with errno ENOMEM
 */
EVRDMA_EXPORT struct evrdma_config *evrdma_config_new(void);

/** Free a configuration. NULL is allowed. */
EVRDMA_EXPORT void evrdma_config_free(struct evrdma_config *cfg);

/**
 * Set the work-queue depths of every QP created by the base.
 * @param send send queue entries, 1..16384
 * @param recv receive queue entries, 1..16384
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_queue_depth(struct evrdma_config *cfg,
    unsigned send, unsigned recv);

/**
 * Set the number of entries of each shared completion queue. Connections
 * reserve send+recv entries in a CQ; when one is full another CQ is made on
 * the same completion channel. Must be at least send+recv queue depth
 * (checked by evrdma_base_new()).
 * @param entries 64..1048576 (clamped to the device's max_cqe at use)
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_cq_size(struct evrdma_config *cfg,
    unsigned entries);

/**
 * Set the largest SEND / RDMA WRITE payload sent inline (copied into the
 * work request, so the buffer is reusable at once). 0 disables inline.
 * Lowered to what the device accepts when a QP is created.
 * @param bytes 0..1024
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_inline_threshold(struct evrdma_config *cfg,
    unsigned bytes);

/**
 * Set one of the timeouts.
 * @param which an evrdma_timeout
 * @param ms 1..600000 milliseconds
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_timeout(struct evrdma_config *cfg,
    int which, unsigned ms);

/**
 * Set how many completions are handled per wake-up before yielding to the
 * rest of the event loop (polling resumes on the next loop iteration).
 * @param completions 1..65536
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_poll_budget(struct evrdma_config *cfg,
    unsigned completions);

/**
 * Busy polling, the RDMA counterpart of the kernel's SO_BUSY_POLL: after a
 * wake-up that found completions, keep polling the device's completion
 * queues for up to @p usec microseconds before going back to sleep on the
 * completion channel. A reply that arrives within that time is handled
 * without the wake-up (an interrupt, a context switch and two system calls
 * per message), which is most of an event-driven round trip. A spin goes
 * on through up to 16 polls that find completions (their callbacks run
 * inside it) and then yields, so the loop serves its other events between
 * spins; the spin ends, and the loop sleeps, once no completion has come
 * for about @p usec. It takes CPU time up to @p usec after each burst of
 * traffic. 0 (the default) never spins.
 * @param usec 0..100000 microseconds
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_busy_poll(struct evrdma_config *cfg,
    unsigned usec);

/**
 * Set the RNR retry count put into the connection parameters (0..7, 7 means
 * retry forever). The raw core leaves flow control to the user.
 * @return 0, or -1 with errno EINVAL
 */
EVRDMA_EXPORT int evrdma_config_set_rnr_retry(struct evrdma_config *cfg,
    unsigned count);

#ifdef __cplusplus
}
#endif
#endif /* EVRDMA_CONFIG_H_INCLUDED_ */
