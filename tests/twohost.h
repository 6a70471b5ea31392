/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma two-guest tests: what guest A's suite (test_twohost.c) and guest
 * B's peer (twohost_peer.c) share, both built into tests/test_twohost. The
 * services B offers, their ports and sizes (A's side must match them), the
 * log line of either role, the stream check of the byte pattern and the
 * files of evrdma-vm2's control directory.
 *
 * Services of the peer (B), all on B's address:
 *  TH_PORT_CH  stream channels; the first line is a command:
 *     ECHO                       send back every byte until EOF
 *     SINK <n> <seed>            check n pattern bytes, answer "OK n" or
 *                                "BAD <offset>"
 *     SOURCE <n> <seed>          send n pattern bytes, then shut down
 *     CONNECT raw|ch <host> <port> <n>   open n connections to A; "OK"
 *     STATS                      "STATS <objects> <conns> <cm_ids> <qps>"
 *                                (objects: B's connections but this one)
 *  TH_PORT_CH6 the same on B's IPv6 address
 *  TH_PORT_MSG message-mode channels: every message echoed whole
 *  TH_PORT_CH_LONGKA stream channels as TH_PORT_CH, on a second base of B
 *     whose keepalive waits 60 s (the netem tests: see netem_echo())
 *  TH_PORT_CH_SMALL stream channels as TH_PORT_CH, on a third base of B
 *     with rings of SMALL_SLOTS x SMALL_SLOT and a backlog of 1024 (the
 *     scale cases: 1,000 channels at once)
 *  TH_PORT_RAW raw connections: B first SENDs the descriptor of a 1 MiB
 *     region A may WRITE and READ, then echoes every SEND it receives
 *  TH_PORT_RAW_SMALL raw connections on the third base, backlog 1024: no
 *     descriptor, SR_SLOTS receives of SR_LEN bytes each, every SEND
 *     echoed (the scale cases: 1,000 raw connections at once)
 *  TH_PORT_RAW_SRQ the same, but every connection draws its receives from
 *     one shared receive queue of SRQ_BUFS buffers of SR_LEN bytes
 *
 * STATS also gives B's resident and pinned memory (VmRSS, VmPin in KiB)
 * and how often its shared receive queue ran low (below SRQ_LOW):
 *  "STATS <objects> <conns> <cm_ids> <qps> <rss> <pinned> <srq_low>"
 */
#ifndef EVRDMA_TWOHOST_H_INCLUDED_
#define EVRDMA_TWOHOST_H_INCLUDED_

#include <inttypes.h>
#include <limits.h>

#include "chtest.h"

#define TH_PORT_CH	7471
#define TH_PORT_RAW	7472
#define TH_PORT_CH6	7473
#define TH_PORT_MSG	7474
#define TH_PORT_CH_LONGKA 7475
#define TH_PORT_CH_SMALL 7476
#define TH_PORT_RAW_SMALL 7477
#define TH_PORT_RAW_SRQ	7478
#define SMALL_SLOTS	4		/* ring of the scale cases */
#define SMALL_SLOT	(4 * KiB)
/* teardown timeout of the scale cases: a thousand channels closing at once
 * on one emulated vCPU take rxe more than the default 2 s to flush, and a
 * channel whose receives are cancelled before its peer's EOF is polled
 * ends in an error rather than EOF (a third of them did) */
#define SCALE_TEARDOWN	20000
#define LONG_KA_MS	60000		/* keepalive idle of the netem tests */

#define RAW_SLOTS	32		/* receives B and A keep posted */
#define RAW_SLOT	(64 * KiB)	/* bytes per receive */
#define RAW_REGION	(1 * MiB)	/* B's region for WRITE/READ */

#define SR_SLOTS	4		/* raw scale: receives posted each side */
#define SR_LEN		512		/* raw scale: bytes per message */
#define SR_WINDOW	2		/* raw scale: A's messages in flight */
/* B's shared receive queue. A connection holds up to SR_WINDOW + 1 of its
 * buffers (an echo's buffer goes back to the queue when the echo's send
 * completes, which may be after A sent the next message): 1,000 of them
 * never find it empty, which would cost an RNR NAK and the sender's wait */
#define SRQ_BUFS	3072
#define SRQ_LOW		32		/* ... and its limit, counted */

/* "A" or "B": the guest this program plays (twohost_peer_main() makes it
 * "B"), in every line say() writes */
extern const char *th_role;

/* A line "twohost[<role>] <ms>: <text>" on stderr (ms: tu_now_ms(), mod
 * 1,000,000: enough to line up A's and B's logs) */
void say(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* the byte pattern of chtest.h, checked as a stream arrives */
int64_t pat_drain(struct evbuffer *in, uint64_t *off, uint64_t seed);

/* evrdma-vm2's control directory (tests/vm/vm2ctl), or NULL when not run
 * under it */
static inline const char *
ctl_dir(void)
{
	return getenv("EVRDMA_VM2_CTL");
}

/* this process's memory, as A and B report it */
long proc_kib(const char *key);

/* Guest B's services (twohost_peer.c): serve until evrdma-vm2 says A is
 * done. @return the exit status: 0 when B was left clean */
int twohost_peer_main(void);

#endif /* EVRDMA_TWOHOST_H_INCLUDED_ */
