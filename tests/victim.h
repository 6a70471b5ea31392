/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: the attacker's tools (tests/victim.c). A victim is
 * a channel listener and the channels it accepted, with what each saw; a
 * friend is a healthy channel beside it; the raw peer (rawpeer.h) speaks
 * the channel protocol to it by hand, right or wrong.
 */
#ifndef EVRDMA_VICTIM_H_INCLUDED_
#define EVRDMA_VICTIM_H_INCLUDED_

#include "devtest.h"
#include "chtest.h"
#include "rawpeer.h"

#include <evrdma/channel.h>

#define AT_SLOTS	8
#define AT_SLOT		4096
/* the raw peer's side of the protocol */
#define RP_SLOTS	4
#define RP_CTRL		4
#define RP_SLOT		4096
#define RP_SEND_OFF	(256 * 1024)	/* its send ring, in rp->mem */
#define RP_SCRATCH	(512 * 1024)	/* where its READs land */

/* ---- the victim: a channel listener and what its channels saw ---- */

struct victim;

struct vch {
	struct victim *v;
	struct evrdma_channel *ch;
	int keep;			/* leave input alone */
	int events, ends, eof, error, freed;
	short what;
	int reason;
	size_t rx;
	uint64_t rx_seed;		/* checks what arrives, when set */
	size_t bad_at;			/* first wrong byte + 1 */
};

struct victim {
	struct dt_env *env;
	struct evrdma_listener *lst;
	struct sockaddr_storage ss;
	int sslen;
	int echo;			/* write back what arrives */
	int keep;			/* leave input alone */
	int free_on_end;		/* free at EOF / ERROR, as echo-server.c */
	struct vch ch[8];
	int naccepted;
	char log[256];			/* the last protocol violation logged */
};

void v_accept(struct evrdma_listener *l, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg);

/* The log sink records the last protocol violation a victim caught. */
void v_log(int level, const char *msg, void *arg);

void v_listen(struct victim *v, struct dt_env *env);
/* @p env made with @p cfg (freed), and @p v, echoing, listening for
 * channels on a queue of @p nbuf buffers: returned, the caller frees it. */
struct evrdma_srq *v_listen_pool(struct victim *v, struct dt_env *env,
    struct evrdma_config *cfg, unsigned nbuf);

void v_close(struct victim *v);

/* ---- a healthy channel beside the victim ---- */

struct friend {
	struct evrdma_channel *ch;
	int connected, ends;
	size_t rx;
};

void f_open(struct friend *f, struct victim *v);
/* @p f: a new channel, not connected, its callbacks counting. */
void f_new(struct friend *f, struct victim *v);
/* Connect @p f (a new channel) to the victim and wait: 1 connected, 0
 * refused or failed (f->ends). */
int f_connect(struct friend *f, struct victim *v);

/* An echo round trip of @p n bytes through victim channel @p idx. */
void f_echo(struct friend *f, struct victim *v, size_t n);

/* ---- the raw peer as a channel client ---- */

struct rp_chs rp_hs(void);

/* Connect with channel handshake @p h (@p hs_len bytes of it; @p claim:
 * the user data length evrdma's header claims). 0 when accepted. With
 * h->src_rkey set, the peer's send ring is offered: that field and
 * src_base are filled in from its memory. */
int rp_open(struct rawpeer *rp, struct victim *v, struct rp_chs *h,
    size_t hs_len, size_t claim);

/*
 * A raw channel client: connects with a correct handshake (@p pull_min,
 * and its send ring offered when @p src), checks the victim's reply, posts
 * the receives its credits promise, and waits for the victim to accept.
 */
void rp_channel(struct rawpeer *rp, struct victim *v, uint32_t pull_min,
    int src, struct rp_chs *vh);

/* Post a request of raw peer @p rp with @p call and wait for it: its
 * completion status (RP_TRY: -1 when none came within @p ms). */
#define RP_DO(rp, call) ({						\
	uint64_t wr_ = (rp)->next_wr;					\
	ck_assert_int_eq((call), 0);					\
	rp_status_of((rp), wr_, 10000, 1);				\
})
#define RP_TRY(rp, call, ms) ({						\
	uint64_t wr_ = (rp)->next_wr;					\
	(call) == 0 ? rp_status_of((rp), wr_, (ms), 0) : -1;		\
})

int rp_status_of(struct rawpeer *rp, uint64_t wr, int ms, int must);

/* The raw peer sends DATA: @p len bytes of its memory at @p off. */
void rp_data(struct rawpeer *rp, size_t off, size_t len);

/* Wait until victim channel @p c has ended (or @p ms passed). */
void v_wait_end(struct victim *v, struct vch *c, struct rawpeer *rp, int ms);

/* Drop CAP_IPC_LOCK (the guest runs tests as root), so that the
 * RLIMIT_MEMLOCK set next applies to registrations. */
void v_drop_ipc_lock(void);

#endif /* EVRDMA_VICTIM_H_INCLUDED_ */
