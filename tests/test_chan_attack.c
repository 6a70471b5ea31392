/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: channels against a stranger. A raw verbs peer
 * (rawpeer.h) speaks the channel protocol by hand and then does the wrong
 * thing on purpose: bad handshakes, every protocol violation, reads and
 * writes of memory it was not given, another connection's keys, a flood of
 * half-open connects, an accept reply answered with a REJ or a
 * disconnect. Each test says what must hold: the victim ends that one
 * channel with the right reason, once; the peer loses its access at once;
 * every other channel goes on; nothing crashes, hangs or leaks.
 */
#include "victim.h"

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <evrdma/bufferevent.h>
#include <evrdma/channel.h>
#include <evrdma/srq.h>

/* ==== 1. handshakes ==== */

enum {
	HS_OK, HS_CTRL_2, HS_CTRL_255, HS_TRUNCATED, HS_V1, HS_V2,
	HS_BAD_CHECK, HS_CTRL_1, HS_SLOTS, HS_MODE, HS_LENGTH, HS_NONE,
	HS_COUNT
};
static const char *const hs_names[HS_COUNT] = {
	"a correct handshake", "2 control credits", "255 control credits",
	"20 bytes claimed as 32 (rdma_cm pads the rest with zeros)",
	"version 1", "version 2 (before LOAN)", "a wrong check value",
	"1 control credit",
	"4097 slots", "the other mode", "a length byte of 24",
	"no channel handshake at all"
};

/*
 * Finding 17 and the handshake's ranges: what padding or a stranger can
 * make of a channel handshake is refused with the right reject code, and
 * nothing of the listener is pinned for it; what the protocol allows (C
 * from 2 to 255) is accepted, and the reply exposes nothing to a peer
 * that does not pull.
 */
START_TEST(attack_handshake)
{
	struct dt_env env;
	struct victim v;
	struct rawpeer rp;
	struct rp_chs h = rp_hs(), vh;
	struct evrdma_stats st;
	int want = EVRDMA_REJECT_PROTOCOL;
	size_t hs_len = 32, claim = 32;

	memset(&v, 0, sizeof(v));
	memset(&rp, 0, sizeof(rp));
	dt_env_init(&env, NULL);
	v_listen(&v, &env);
	switch (_i) {
	case HS_OK:
	case HS_CTRL_2:
	case HS_CTRL_255:
		h.ctrl = _i == HS_CTRL_2 ? 2 : _i == HS_CTRL_255 ? 255 : 4;
		want = 0;
		break;
	case HS_TRUNCATED:
		hs_len = 20;
		break;
	case HS_V1:
	case HS_V2:
		h.version = _i == HS_V1 ? 1 : 2;
		want = EVRDMA_REJECT_VERSION;
		break;
	case HS_BAD_CHECK:
		h.bad_check = 1;
		break;
	case HS_CTRL_1:
		h.ctrl = 1;
		break;
	case HS_SLOTS:
		h.slots = 4097;
		break;
	case HS_MODE:
		h.mode = 1;
		break;
	case HS_LENGTH:
		h.length = 24;
		break;
	case HS_NONE:
		hs_len = claim = 0;
		break;
	}
	rp_open(&rp, &v, &h, hs_len, claim);
	fprintf(stderr, "channel handshake, %s: %s (code %d)\n", hs_names[_i],
	    rp.established ? "accepted" : "rejected", rp.reject_code);
	if (want) {
		ck_assert_int_eq(rp.rejected, 1);
		ck_assert_int_eq(rp.reject_code, want);
		ch_loop_for(env.eb, 200);
		ck_assert_int_eq(v.naccepted, 0);
		/* nothing of the request is left on the listener */
		evrdma_base_get_stats(env.base, &st, sizeof(st));
		ck_assert_uint_eq(st.qps, 0);
		ck_assert_uint_eq(st.mrs, 0);
	} else {
		ck_assert_int_eq(rp.established, 1);
		ck_assert_int_eq(rp_chs_decode(rp.reply, rp.reply_len, &vh), 0);
		ck_assert_uint_eq(vh.version, RP_CH_VERSION);
		ck_assert_int_eq(vh.length, 32);
		ck_assert_int_eq(vh.bad_check, 0);
		ck_assert_uint_ge(vh.ctrl, 2);
		/* the peer said it does not pull: nothing readable offered */
		ck_assert_uint_eq(vh.src_rkey, 0);
		ck_assert_uint_eq(vh.src_base, 0);
		CH_WAIT(env.eb, v.naccepted == 1, 10000);
	}
	rp_close(&rp);
	v_close(&v);
	dt_env_fini(&env);
}
END_TEST

/* ==== 2. protocol violations ==== */

enum {
	PV_CREDITS, PV_EMPTY, PV_TYPE3, PV_PULL_CREDIT, PV_PULL_NO_SRC,
	PV_PULL_DESC_LEN, PV_PULL_SLOT, PV_PULL_LONG, PV_PDONE, PV_RETURN,
	PV_CTRL, PV_AFTER_EOF, PV_EOF_TWICE, PV_LONG, PV_WRITE_IMM,
	PV_WIDE_NO_SRC, PV_WIDE_LONG, PV_WIDE_WRAP, PV_WIDE_NOWHERE,
	PV_CTRL_PAYLOAD, PV_WRITE_IMM0, PV_SEND_PLAIN,
	PV_COUNT
};
static const char *const pv_names[PV_COUNT] = {
	"DATA beyond its credits", "empty DATA",
	"a RECLAIM from a peer that lends nothing",
	"CREDIT marked as a pull", "a pull from a peer without a send ring",
	"a pull descriptor of 7 bytes", "a pull from a slot it has not",
	"a pull longer than a slot", "pulls reported done never made",
	"credits returned that were not lent", "control beyond its credits",
	"DATA after EOF", "a second EOF", "a message longer than a slot",
	"an RDMA WRITE WITH IMMEDIATE instead of a SEND",
	"a wide pull from a peer without a send ring",
	"a wide pull longer than a slot",
	"a wide pull whose range wraps the address space",
	"a wide pull of memory the peer never registered",
	"a CREDIT with a payload",
	"an empty RDMA WRITE WITH IMMEDIATE (it consumes a receive)",
	"a SEND without an immediate"
};
/* what the victim logs: it caught the violation itself (NULL: the device
 * fails the connection, the reason is QP_FATAL) */
static const char *const pv_why[PV_COUNT] = {
	"data beyond its credits", "empty data message",
	"a reclaim of credits not lent",
	"bad immediate", "pull not offered", "bad pull descriptor length",
	"pull from a slot the peer's ring does not have",
	"pull length out of range", "pulls acknowledged that were not made",
	"credits returned that were not lent", "control beyond its credits",
	"data after EOF", "a second EOF", NULL, NULL,
	"pull not offered", "pull length out of range",
	"pull length out of range",
	/* the victim's READ fails at the peer's device: the peer can name
	 * only its own memory, and a wrong name costs it the connection */
	NULL,
	"a control message with a payload",
	"not a SEND with immediate", "not a SEND with immediate"
};

static void
pv_desc(struct rawpeer *rp, size_t off, uint32_t slot, uint32_t len)
{
	uint8_t *d = rp->mem + off;

	d[0] = (uint8_t)(slot >> 24);
	d[1] = (uint8_t)(slot >> 16);
	d[2] = (uint8_t)(slot >> 8);
	d[3] = (uint8_t)slot;
	d[4] = (uint8_t)(len >> 24);
	d[5] = (uint8_t)(len >> 16);
	d[6] = (uint8_t)(len >> 8);
	d[7] = (uint8_t)len;
}

/* A wide pull descriptor (the sender's spill): address, rkey, length. */
static void
pv_wide(struct rawpeer *rp, size_t off, uint64_t addr, uint32_t rkey,
    uint32_t len)
{
	uint8_t *d = rp->mem + off;
	int i;

	for (i = 0; i < 8; i++)
		d[i] = (uint8_t)(addr >> (56 - 8 * i));
	for (i = 0; i < 4; i++) {
		d[8 + i] = (uint8_t)(rkey >> (24 - 8 * i));
		d[12 + i] = (uint8_t)(len >> (24 - 8 * i));
	}
}

/* Do violation @p which as raw peer @p rp (a connected channel client
 * whose send ring is offered). */
static void
pv_commit(struct rawpeer *rp, int which, const struct rp_chs *vh)
{
	size_t d = RP_SCRATCH;
	unsigned i;

	switch (which) {
	case PV_CREDITS:
		for (i = 0; i <= vh->slots; i++)
			rp_data(rp, d, 16);
		break;
	case PV_EMPTY:
		ck_assert_int_eq(rp_send_imm(rp, d, 0, rp_imm(0, 0, 0, 0, 0,
		    0)), 0);
		break;
	case PV_TYPE3:
		ck_assert_int_eq(rp_send_imm(rp, d, 0, rp_imm(3, 0, 0, 0, 0,
		    0)), 0);
		break;
	case PV_PULL_CREDIT:
		ck_assert_int_eq(rp_send_imm(rp, d, 0, rp_imm(1, 0, 0, 0, 1,
		    0)), 0);
		break;
	case PV_PULL_NO_SRC:	/* (this peer's handshake offered none) */
	case PV_PULL_DESC_LEN:
	case PV_PULL_SLOT:
	case PV_PULL_LONG:
		pv_desc(rp, d, which == PV_PULL_SLOT ? RP_SLOTS : 0,
		    which == PV_PULL_LONG ? vh->slot_size + 64 : 64);
		ck_assert_int_eq(rp_send_imm(rp, d,
		    which == PV_PULL_DESC_LEN ? 7 : 8, rp_imm(0, 0, 0, 0, 1,
		    0)), 0);
		break;
	case PV_WIDE_NO_SRC:
	case PV_WIDE_LONG:
	case PV_WIDE_WRAP:
	case PV_WIDE_NOWHERE:
		/* (NOWHERE: a key of nothing the peer registered; the other
		 * cases name its scratch memory, which it did) */
		pv_wide(rp, d, which == PV_WIDE_WRAP ? UINT64_MAX - 63 :
		    which == PV_WIDE_NOWHERE ? 0x1000 :
		    (uint64_t)(uintptr_t)(rp->mem + RP_SCRATCH + 4096),
		    which == PV_WIDE_NOWHERE ? rp->mr->rkey ^ 0x5a5a00u :
		    rp->mr->rkey,
		    which == PV_WIDE_LONG ? vh->slot_size + 64 : 64);
		ck_assert_int_eq(rp_send_imm(rp, d, 16, rp_imm(0, 0, 0, 0, 1,
		    0)), 0);
		break;
	case PV_PDONE:
		ck_assert_int_eq(rp_send_imm(rp, d, 0, rp_imm(1, 0, 0, 0, 0,
		    5)), 0);
		break;
	case PV_RETURN:
		ck_assert_int_eq(rp_send_imm(rp, d, 0, rp_imm(1, RP_SLOTS + 1,
		    0, 0, 0, 0)), 0);
		break;
	case PV_CTRL:
		/* in one burst: the victim returns control credits only
		 * after its pass, so it sees more than it lent */
		for (i = 0; i < 3 * vh->ctrl; i++)
			ck_assert_int_eq(rp_send_imm(rp, d, 0, rp_imm(1, 0, 0,
			    0, 0, 0)), 0);
		break;
	case PV_AFTER_EOF:
		ck_assert_int_eq(rp_send_imm(rp, d, 0, rp_imm(2, 0, 0, 0, 0,
		    0)), 0);
		rp_data(rp, d, 16);
		break;
	case PV_EOF_TWICE:
		ck_assert_int_eq(rp_send_imm(rp, d, 0, rp_imm(2, 0, 0, 0, 0,
		    0)), 0);
		ck_assert_int_eq(rp_send_imm(rp, d, 0, rp_imm(2, 0, 0, 0, 0,
		    0)), 0);
		break;
	case PV_LONG:
		rp_data(rp, d, vh->slot_size + 64);
		break;
	case PV_WRITE_IMM:
		/* the peer has no writable memory to name: the device refuses
		 * the WRITE (at the peer), and its receive is never used */
		ck_assert_int_eq(rp_write(rp, d, 16, 0, 0, 1, 0), 0);
		break;
	case PV_CTRL_PAYLOAD:
		ck_assert_int_eq(rp_send_imm(rp, d, 16, rp_imm(1, 0, 0, 0, 0,
		    0)), 0);
		break;
	case PV_WRITE_IMM0:
		/* no bytes, so no memory named: the device lets it through,
		 * and the victim's check of the opcode must catch it */
		ck_assert_int_eq(rp_write(rp, d, 0, 0, 0, 1, rp_imm(0, 0, 0,
		    0, 0, 0)), 0);
		break;
	case PV_SEND_PLAIN:
		ck_assert_int_eq(rp_send(rp, d, 16), 0);
		break;
	}
}

/*
 * A raw channel client breaks the protocol. The victim (its accepted
 * channel) must end with BEV_EVENT_ERROR and reason PROTOCOL (QP_FATAL
 * where the device itself refuses), once, having caught the violation
 * itself; the peer must lose its access at once (its connection is torn
 * down: a READ of the victim's send ring that worked before fails); a
 * healthy channel on the same listener and loop goes on working; nothing
 * leaks.
 */
START_TEST(attack_violation)
{
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct victim v;
	struct friend f;
	struct rawpeer rp;
	struct rp_chs vh;
	struct vch *c;
	struct evrdma_stats st;
	int n;
	int src = _i == PV_PULL_DESC_LEN || _i == PV_PULL_SLOT ||
	    _i == PV_PULL_LONG || _i == PV_WIDE_LONG || _i == PV_WIDE_WRAP ||
	    _i == PV_WIDE_NOWHERE;

	memset(&v, 0, sizeof(v));
	memset(&f, 0, sizeof(f));
	memset(&rp, 0, sizeof(rp));
	/* 67 ms: the READ after the end (below) fails by running out of
	 * its 7 tries within half a second, before the test gives up on it */
	rp.ack_timeout = 14;
	ck_assert_int_eq(evrdma_config_set_channel_pull(cfg, 64), 0);
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	v.echo = 1;
	v_listen(&v, &env);
	f_open(&f, &v);
	f_echo(&f, &v, 32 * KiB);

	/* the peer pulls (so the victim offers its send ring) */
	rp_channel(&rp, &v, 1, src, &vh);
	ck_assert_uint_ne(vh.src_rkey, 0);
	ck_assert_uint_lt(vh.src_base, 4096);	/* zero-based: no address */
	c = &v.ch[1];
	/* it works before it turns: an echo (left in the victim's send
	 * ring for the peer to pull), and a READ of it */
	memset(rp.mem + RP_SCRATCH, 'x', 64);
	ck_assert_int_eq(RP_DO(&rp, rp_send_imm(&rp, RP_SCRATCH, 64,
	    rp_imm(0, 0, 0, 0, 0, 0))), IBV_WC_SUCCESS);
	ck_assert_int_eq(RP_DO(&rp, rp_read(&rp, RP_SCRATCH + 4096, 64,
	    vh.src_base, vh.src_rkey)), IBV_WC_SUCCESS);
	ck_assert_int_eq(c->ends, 0);

	if (_i == PV_CREDITS)
		c->keep = 1;	/* nothing read: no credit comes back */
	if (_i == PV_AFTER_EOF || _i == PV_EOF_TWICE)
		/* (EOF alone, read at once, would be an orderly end) */
		evrdma_channel_disable(c->ch, EV_READ);
	v.log[0] = 0;
	pv_commit(&rp, _i, &vh);
	v_wait_end(&v, c, &rp, 10000);
	ck_assert_int_eq(rp_wait_disconnect(&rp, 10000), 0);
	rp_run(&rp, 300);
	fprintf(stderr, "channel violation, %s: 0x%x, %s; logged: %s\n",
	    pv_names[_i], c->what, evrdma_reason_str(c->reason),
	    v.log[0] ? v.log : "(nothing)");
	ck_assert_int_eq(c->ends, 1);
	ck_assert_int_eq(c->error, 1);
	ck_assert(c->what & BEV_EVENT_ERROR);
	if (pv_why[_i]) {
		ck_assert_int_eq(c->reason, EVRDMA_REASON_PROTOCOL);
		ck_assert_msg(strstr(v.log, pv_why[_i]) != NULL,
		    "victim logged \"%s\", not \"%s\"", v.log, pv_why[_i]);
	} else {
		ck_assert(c->reason == EVRDMA_REASON_QP_FATAL ||
		    c->reason == EVRDMA_REASON_DISCONNECTED);
	}
	/* the peer's access ended with it: the same READ fails (its
	 * retries run out: the victim's QP is in error, or gone),
	 * and the victim's QP and rings are gone without the application
	 * freeing the channel */
	n = RP_TRY(&rp, rp_read(&rp, RP_SCRATCH + 4096, 64, vh.src_base,
	    vh.src_rkey), 2000);
	ck_assert_msg(n > 0, "the READ after the end: status %d, want an "
	    "error (-1: no completion)", n);
	/* The first variant leaves the victim's disconnect unanswered, as
	 * a hostile peer may: the victim's QP goes when its CM gives up on
	 * the reply (1.2 s later on rxe). The others answer it, as an
	 * evrdma peer does, and the QP goes at once. */
	if (_i > 0)
		rdma_disconnect(rp.id);
	CH_WAIT(env.eb, (evrdma_base_get_stats(env.base, &st, sizeof(st)),
	    st.qps == 2), 10000);
	/* the healthy channel goes on */
	f_echo(&f, &v, 64 * KiB);
	evrdma_channel_free(f.ch);
	rp_close(&rp);
	v_close(&v);
	dt_env_fini(&env);
}
END_TEST

/* ==== 3. isolation: other connections, old bytes ==== */

/*
 * Findings 2 and 3. Peer A, a client that pulls, gets data echoed by the
 * victim (so A's channel's send ring holds it). Then peer B connects: the
 * whole of its own channel's send ring reads as zeros (no earlier
 * client's bytes), and a READ with A's key and address, or a WRITE into
 * anything of the victim's, fails at B's end and costs B its connection,
 * while A goes on.
 */
START_TEST(attack_isolation)
{
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct victim v;
	struct rawpeer a, b;
	struct rp_chs ah, bh;
	unsigned n, i;
	const size_t ring = (size_t)AT_SLOTS * AT_SLOT;

	memset(&v, 0, sizeof(v));
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	ck_assert_int_eq(evrdma_config_set_channel_pull(cfg, 64), 0);
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	v.echo = 1;
	v_listen(&v, &env);

	rp_channel(&a, &v, 1, 0, &ah);
	memset(a.mem + RP_SCRATCH, 0xa5, 1024);
	for (i = 0; i < 3; i++)
		rp_data(&a, RP_SCRATCH, 1024);
	/* the echo, coalesced, left for A to pull (a descriptor) */
	for (n = 0; ; n++) {
		ck_assert_uint_lt(n, 1000);
		rp_run(&a, 10);
		for (i = 0; i < a.nwc && !a.wc[i].is_recv; i++)
			;
		if (i < a.nwc)
			break;
	}
	ck_assert(a.wc[i].imm & 0x40);
	/* A reads its own ring: the echoed bytes are there */
	ck_assert_int_eq(RP_DO(&a, rp_read(&a, RP_SCRATCH + 8192, 1024,
	    ah.src_base, ah.src_rkey)), IBV_WC_SUCCESS);
	ck_assert_int_eq(a.mem[RP_SCRATCH + 8192], 0xa5);

	rp_channel(&b, &v, 1, 0, &bh);
	ck_assert_uint_ne(bh.src_rkey, ah.src_rkey);
	/* B's own ring, right after connecting: nothing but zeros */
	ck_assert_int_eq(RP_DO(&b, rp_read(&b, RP_SCRATCH, ring, bh.src_base,
	    bh.src_rkey)), IBV_WC_SUCCESS);
	for (i = 0; i < ring; i++)
		ck_assert_msg(b.mem[RP_SCRATCH + i] == 0, "byte %u of a new "
		    "channel's send ring is 0x%02x", i,
		    b.mem[RP_SCRATCH + i]);
	/* A's ring with A's key, from B's connection: refused */
	n = RP_DO(&b, rp_read(&b, RP_SCRATCH, 1024, ah.src_base, ah.src_rkey));
	fprintf(stderr, "channel isolation: B reading A's ring: %s\n",
	    ibv_wc_status_str(n));
	ck_assert_int_eq(n, IBV_WC_REM_ACCESS_ERR);
	v_wait_end(&v, &v.ch[1], &b, 10000);
	ck_assert_int_eq(v.ch[1].error, 1);

	/* A is untouched, and its ring still reads */
	ck_assert_int_eq(v.ch[0].ends, 0);
	memset(a.mem + RP_SCRATCH + 8192, 0, 1024);
	ck_assert_int_eq(RP_DO(&a, rp_read(&a, RP_SCRATCH + 8192, 1024,
	    ah.src_base, ah.src_rkey)), IBV_WC_SUCCESS);
	ck_assert_int_eq(a.mem[RP_SCRATCH + 8192], 0xa5);
	/* and a WRITE into its send ring (read-only) is refused too */
	ck_assert_int_eq(RP_DO(&a, rp_write(&a, RP_SCRATCH, 64, ah.src_base,
	    ah.src_rkey, 0, 0)), IBV_WC_REM_ACCESS_ERR);
	v_wait_end(&v, &v.ch[0], &a, 10000);

	rp_close(&a);
	rp_close(&b);
	v_close(&v);
	dt_env_fini(&env);
}
END_TEST

/*
 * Finding 3 for raw connections: a region the application exposes to one
 * connection's peer (REMOTE_READ | REMOTE_WRITE) is out of reach of every
 * other connection, with the right key and address.
 */
struct iso_srv {
	struct evrdma_mr *mr[3];
	struct evrdma_remote rem[3];
	struct evrdma_conn *conn[3];
	uint8_t mem[3][4096];
	int n, naccepted;
};

static int
iso_prepare(struct evrdma_listener *l, struct evrdma_conn *c,
    const void *pd, size_t len, void *arg)
{
	struct iso_srv *s = arg;
	int i = s->n++;

	ck_assert_int_lt(i, 3);
	memset(s->mem[i], 'A' + i, sizeof(s->mem[i]));
	s->mr[i] = evrdma_mr_reg(c, s->mem[i], sizeof(s->mem[i]),
	    EVRDMA_ACCESS_REMOTE_READ | EVRDMA_ACCESS_REMOTE_WRITE);
	ck_assert_ptr_nonnull(s->mr[i]);
	ck_assert_int_eq(evrdma_mr_export(s->mr[i], 0, 4096, &s->rem[i]), 0);
	/* zero-based: the peer learns no process address */
	ck_assert_uint_lt(s->rem[i].addr, 4096);
	return 0;
}

static void
iso_accept(struct evrdma_listener *l, struct evrdma_conn *c,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct iso_srv *s = arg;

	ck_assert_int_lt(s->naccepted, 3);
	s->conn[s->naccepted++] = c;
}

START_TEST(attack_isolation_raw)
{
	struct dt_env env;
	struct iso_srv s;
	struct evrdma_listener *lst;
	struct sockaddr_storage ss;
	struct rawpeer a, b;
	uint8_t pd[8];
	int len;
	unsigned n;

	memset(&s, 0, sizeof(s));
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	dt_env_init(&env, NULL);
	len = dt_sockaddr(&ss, dt_addr(), 0);
	lst = evrdma_listener_new(env.base, iso_accept, &s, 0, 4,
	    (struct sockaddr *)&ss, len);
	ck_assert_ptr_nonnull(lst);
	evrdma_listener_set_prepare_cb(lst, iso_prepare, &s);
	len = dt_sockaddr(&ss, dt_addr(), evrdma_listener_get_port(lst));
	rp_pdata(pd, 1, NULL, 0, 0);
	ck_assert_int_eq(rp_connect(&a, env.eb, (struct sockaddr *)&ss, len,
	    pd, 8, 15000), 0);
	ck_assert_int_eq(rp_connect(&b, env.eb, (struct sockaddr *)&ss, len,
	    pd, 8, 15000), 0);
	ck_assert(a.established && b.established);
	CH_WAIT(env.eb, s.conn[1] != NULL, 10000);

	/* each reaches its own region */
	ck_assert_int_eq(RP_DO(&a, rp_read(&a, 0, 64, s.rem[0].addr,
	    s.rem[0].rkey)), IBV_WC_SUCCESS);
	ck_assert_int_eq(a.mem[0], 'A');
	/* B with A's key: neither READ nor WRITE */
	ck_assert_int_eq(RP_DO(&b, rp_write(&b, 0, 64, s.rem[0].addr,
	    s.rem[0].rkey, 0, 0)), IBV_WC_REM_ACCESS_ERR);
	ck_assert_int_eq(s.mem[0][0], 'A');
	rp_close(&b);
	/* B's fresh connection, same key: still nothing */
	memset(&b, 0, sizeof(b));
	ck_assert_int_eq(rp_connect(&b, env.eb, (struct sockaddr *)&ss, len,
	    pd, 8, 15000), 0);
	ck_assert_int_eq(RP_DO(&b, rp_read(&b, 0, 64, s.rem[0].addr,
	    s.rem[0].rkey)), IBV_WC_REM_ACCESS_ERR);
	/* and on the server, a region of one connection cannot be posted on
	 * another */
	errno = 0;
	ck_assert_int_eq(evrdma_conn_post_send(s.conn[0], s.mr[1], 0, 8, NULL,
	    NULL), -1);
	ck_assert_int_eq(errno, EXDEV);

	rp_close(&a);
	rp_close(&b);
	CH_WAIT(env.eb, s.naccepted == 3, 10000);
	for (n = 0; n < 3; n++)
		evrdma_conn_free(s.conn[n]);
	evrdma_listener_free(lst);
	dt_drain(&env, 20000);
	for (n = 0; n < 3; n++)
		evrdma_mr_free(s.mr[n]);
	dt_env_fini(&env);
}
END_TEST

/* ==== 4. delivered bytes do not change ==== */

/*
 * Finding 4: the victim leaves a 4 KiB message in input; the peer then
 * tries every way it has to write into the victim's memory (RDMA WRITEs
 * and atomics with the only key it knows, at every address it could
 * guess) and sends more. The bytes in input stay what arrived.
 */
START_TEST(attack_rewrite_delivered)
{
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct victim v;
	struct rawpeer rp;
	struct rp_chs vh;
	struct evbuffer *in;
	uint8_t want[4096];
	unsigned n, i;

	memset(&v, 0, sizeof(v));
	memset(&rp, 0, sizeof(rp));
	ck_assert_int_eq(evrdma_config_set_channel_pull(cfg, 64), 0);
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	v.keep = 1;
	v_listen(&v, &env);
	rp_channel(&rp, &v, 1, 0, &vh);
	pat_fill(want, 0, sizeof(want), 0x7e57);
	memcpy(rp.mem + RP_SCRATCH, want, sizeof(want));
	rp_data(&rp, RP_SCRATCH, sizeof(want));
	in = evrdma_channel_get_input(v.ch[0].ch);
	CH_WAIT(env.eb, evbuffer_get_length(in) == sizeof(want), 10000);

	memset(rp.mem + RP_SCRATCH, 0xee, 8192);
	for (i = 0; i < 4; i++) {
		/* the victim's send ring key, all over its address range,
		 * and keys near it: none works (the first failure costs the
		 * peer its connection; what follows fails or never comes) */
		n = RP_TRY(&rp, rp_write(&rp, RP_SCRATCH, 4096, vh.src_base +
		    (uint64_t)i * 4096, vh.src_rkey + i, 0, 0), 3000);
		ck_assert_int_ne(n, IBV_WC_SUCCESS);
	}
	rp_run(&rp, 300);
	ck_assert_uint_eq(evbuffer_get_length(in), sizeof(want));
	ck_assert_int_eq(memcmp(evbuffer_pullup(in, -1), want, sizeof(want)),
	    0);
	rp_close(&rp);
	v_close(&v);
	dt_env_fini(&env);
}
END_TEST

/* ==== 5. the channel that never closes ==== */

enum { FO_READ_PAST, FO_WRITE_SEND_RING, FO_ATOMIC, FO_READ_GUESS,
	FO_COUNT };
static const char *const fo_names[FO_COUNT] = {
	"a READ past the send ring", "a WRITE into the send ring",
	"an atomic on the send ring", "a READ with a guessed key"
};

/*
 * Finding 15: one RDMA operation the victim's memory refuses, then a
 * disconnect. The victim's channel must end (BEV_EVENT_ERROR) within a
 * few seconds and give back its QP and registered memory, without the
 * application's help.
 */
START_TEST(attack_forbidden_then_gone)
{
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct victim v;
	struct rawpeer rp;
	struct rp_chs vh;
	struct evrdma_stats st;
	uint64_t t0;
	unsigned n;

	memset(&v, 0, sizeof(v));
	memset(&rp, 0, sizeof(rp));
	ck_assert_int_eq(evrdma_config_set_channel_pull(cfg, 64), 0);
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	v_listen(&v, &env);
	rp_channel(&rp, &v, 1, 0, &vh);
	switch (_i) {
	case FO_READ_PAST:
		n = RP_DO(&rp, rp_read(&rp, RP_SCRATCH, 64, vh.src_base +
		    (uint64_t)AT_SLOTS * AT_SLOT + 4096, vh.src_rkey));
		break;
	case FO_WRITE_SEND_RING:
		n = RP_DO(&rp, rp_write(&rp, RP_SCRATCH, 64, vh.src_base,
		    vh.src_rkey, 0, 0));
		break;
	case FO_ATOMIC:
		n = RP_DO(&rp, rp_fadd(&rp, RP_SCRATCH, vh.src_base,
		    vh.src_rkey));
		break;
	default:
		n = RP_DO(&rp, rp_read(&rp, RP_SCRATCH, 64, 0,
		    vh.src_rkey + 1));
		break;
	}
	ck_assert_int_ne(n, IBV_WC_SUCCESS);
	rp_close(&rp);
	t0 = tu_now_ms();
	v_wait_end(&v, &v.ch[0], NULL, 10000);
	fprintf(stderr, "channel after %s and a disconnect: 0x%x (%s) after "
	    "%llu ms\n", fo_names[_i], v.ch[0].what,
	    evrdma_reason_str(v.ch[0].reason),
	    (unsigned long long)(tu_now_ms() - t0));
	ck_assert_int_eq(v.ch[0].error, 1);
	/* the QP and the rings went without the application freeing */
	CH_WAIT(env.eb, (evrdma_base_get_stats(env.base, &st, sizeof(st)),
	    st.qps == 0 && st.mrs == 0), 10000);
	v_close(&v);
	dt_env_fini(&env);
}
END_TEST

/* ==== 6. freed while the peer owes pulls, then abused ==== */

/*
 * Finding 1. A peer that pulls gets the victim's echo as a pull, never
 * reports it done, and sends EOF: the victim (freeing at EOF, as
 * examples/echo-server.c does) lingers for the pull. The peer then sends
 * a burst of control messages beyond its credits and disconnects. The
 * victim must close in order: no use after free (ASan watches), nothing
 * left behind.
 */
START_TEST(attack_linger_abuse)
{
	struct dt_env env;
	struct victim v;
	struct rawpeer rp;
	struct rp_chs vh;
	unsigned n, i;

	memset(&v, 0, sizeof(v));
	memset(&rp, 0, sizeof(rp));
	dt_env_init(&env, NULL);
	v.echo = 1;
	v.free_on_end = 1;
	v_listen(&v, &env);
	rp_channel(&rp, &v, 1, 0, &vh);
	memset(rp.mem + RP_SCRATCH, 'e', 4096);
	ck_assert_int_eq(RP_DO(&rp, rp_send_imm(&rp, RP_SCRATCH, 4096,
	    rp_imm(0, 0, 0, 0, 0, 0))), IBV_WC_SUCCESS);
	/* the echo comes as a pull, which the peer never does */
	for (n = 0; n < 1000; n++) {
		unsigned k;

		rp_run(&rp, 10);
		for (k = 0; k < rp.nwc && !rp.wc[k].is_recv; k++)
			;
		if (k < rp.nwc)
			break;
	}
	ck_assert_int_eq(rp_send_imm(&rp, RP_SCRATCH, 0, rp_imm(2, 0, 0, 0, 0,
	    0)), 0);
	CH_WAIT(env.eb, v.ch[0].freed, 10000);
	/* lingering now; the abuse */
	for (i = 0; i < 3 * vh.ctrl + vh.slots; i++)
		if (rp_send_imm(&rp, RP_SCRATCH, 0, rp_imm(1, 0, 0, 0, 0,
		    0)) != 0)
			break;
	rp_run(&rp, 500);
	rp_close(&rp);
	ch_loop_for(env.eb, 500);
	v_close(&v);	/* asserts everything is gone */
	dt_env_fini(&env);
}
END_TEST

/* ==== 7. a violation before the listener hands the channel out ==== */

/*
 * The peer breaks the protocol in its very first message, sent the moment
 * it is connected (before the victim has read its own ESTABLISHED, when
 * the loop is busy). The channel must never reach the application
 * silently failed: either the accept callback never runs for it, or the
 * accepted channel gets BEV_EVENT_ERROR.
 */
START_TEST(attack_violation_first)
{
	struct dt_env env;
	struct victim v;
	struct rawpeer rp;
	struct rp_chs h = rp_hs();
	uint8_t hs[32], pd[56];
	size_t len;
	int i;

	memset(&v, 0, sizeof(v));
	memset(&rp, 0, sizeof(rp));
	dt_env_init(&env, NULL);
	v_listen(&v, &env);
	ck_assert_int_eq(rp_prepare(&rp, env.eb, (struct sockaddr *)&v.ss,
	    v.sslen), 0);
	for (i = 0; i < RP_SLOTS + RP_CTRL; i++)
		ck_assert_int_eq(rp_post_recv(&rp, (size_t)i * RP_SLOT,
		    RP_SLOT), 0);
	rp_chs_encode(hs, &h);
	len = rp_pdata(pd, 1, hs, 32, 32);
	ck_assert_int_eq(rp_connect_now(&rp, pd, len, 15000), 0);
	ck_assert_int_eq(rp.established, 1);
	ck_assert_int_eq(rp_send_imm(&rp, RP_SCRATCH, 0, rp_imm(3, 0, 0, 0, 0,
	    0)), 0);
	ck_assert_int_eq(rp_wait_disconnect(&rp, 10000), 0);
	ch_loop_for(env.eb, 500);
	fprintf(stderr, "channel violation at once: accepted %d, ends %d\n",
	    v.naccepted, v.naccepted ? v.ch[0].ends : 0);
	if (v.naccepted) {
		ck_assert_int_eq(v.ch[0].ends, 1);
		ck_assert_int_eq(v.ch[0].error, 1);
		ck_assert_int_eq(v.ch[0].reason, EVRDMA_REASON_PROTOCOL);
	}
	rp_close(&rp);
	v_close(&v);
	dt_env_fini(&env);
}
END_TEST

/* ==== 8. a flood of half-open connects under a low memlock limit ==== */

#define FLOOD		40
#define FLOOD_HALF	4
#define FLOOD_BACKLOG	8

struct flood_log {
	int memlock, rejecting;
};

static void
flood_log_cb(int level, const char *msg, void *arg)
{
	struct flood_log *fl = arg;

	if (getenv("EVRDMA_TEST_LOG"))
		fprintf(stderr, "flood log: %s\n", msg);
	if (strstr(msg, "RLIMIT_MEMLOCK"))
		fl->memlock++;
	if (strstr(msg, "rejecting"))
		fl->rejecting++;
}

/*
 * Strangers open connections and never finish them. A listener pins at
 * most its half-open limit of them (a QP and rings each), and no more than
 * RLIMIT_MEMLOCK allows, refusing the rest with a clear reason; requests
 * beyond the backlog are rejected at once, waiting ones when they waited
 * past the connect timeout; once the flood has gone, a real client
 * connects.
 */
START_TEST(attack_half_open_flood)
{
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(4, 65536, 0);
	struct victim v;
	struct friend f;
	struct rawpeer *rp = calloc(FLOOD, sizeof(*rp));
	struct rp_chs h = rp_hs();
	struct flood_log fl = { 0, 0 };
	struct evrdma_stats st;
	struct rlimit rl;
	unsigned qps_max = 0;
	uint8_t hs[32], pd[56];
	size_t len;
	int i, rejected = 0, answered = 0, by_kernel = 0;

	/* rings of 4 x 64 KiB: 1 MiB registered a channel; room for two
	 * (a client in this process needs both ends) */
	v_drop_ipc_lock();
	rl.rlim_cur = rl.rlim_max = 2560 * KiB;
	ck_assert_int_eq(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
	ck_assert_int_eq(evrdma_config_set_half_open(cfg, FLOOD_HALF), 0);
	ck_assert_int_eq(evrdma_config_set_timeout(cfg,
	    EVRDMA_TIMEOUT_CONNECT, 1500), 0);
	ck_assert_int_eq(evrdma_config_set_timeout(cfg,
	    EVRDMA_TIMEOUT_ACCEPT, 1500), 0);
	memset(&v, 0, sizeof(v));
	memset(&f, 0, sizeof(f));
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	v.sslen = dt_sockaddr(&v.ss, dt_addr(), 0);
	v.env = &env;
	v.lst = evrdma_channel_listener_new(env.base, v_accept, &v,
	    EVRDMA_CHANNEL_STREAM, FLOOD_BACKLOG, (struct sockaddr *)&v.ss,
	    v.sslen);
	ck_assert_ptr_nonnull(v.lst);
	v.sslen = dt_sockaddr(&v.ss, dt_addr(),
	    evrdma_listener_get_port(v.lst));
	evrdma_set_log_callback(flood_log_cb, EVRDMA_LOG_INFO, &fl);

	rp_chs_encode(hs, &h);
	len = rp_pdata(pd, 1, hs, 32, 32);
	for (i = 0; i < FLOOD; i++) {
		rp[i].no_qp = 1;
		ck_assert_int_eq(rp_prepare(&rp[i], env.eb,
		    (struct sockaddr *)&v.ss, v.sslen), 0);
		/* connect, and do not wait for the answer */
		rp_connect_now(&rp[i], pd, len, 0);
	}
	/* until those beyond the limits are turned away (a slow build under
	 * a busy guest takes longer; 20 s bounds it) */
	for (i = 0; i < 2000; i++) {
		int k, n = 0;

		rp_run(&rp[0], 10);
		for (k = 1; k < FLOOD; k++)
			rp_poll(&rp[k]);
		evrdma_base_get_stats(env.base, &st, sizeof(st));
		if (st.qps > qps_max)
			qps_max = st.qps;
		for (k = 0; k < FLOOD; k++)
			n += rp[k].rejected;
		if (i >= 300 && n >= FLOOD - FLOOD_HALF - FLOOD_BACKLOG)
			break;
	}
	for (i = 0; i < FLOOD; i++) {
		rejected += rp[i].rejected;
		answered += rp[i].established;
		/* by the listener (RESOURCES), or by the kernel's own rdma_cm
		 * backlog before the listener saw the request (no code) */
		if (rp[i].rejected) {
			ck_assert(rp[i].reject_code == EVRDMA_REJECT_RESOURCES
			    || rp[i].reject_code == -1);
			by_kernel += rp[i].reject_code == -1;
		}
	}
	fprintf(stderr, "half-open flood of %d: at most %u QPs pinned, %d "
	    "answered, %d rejected (%d by the kernel's backlog); memlock "
	    "refusals logged: %d\n", FLOOD, qps_max, answered, rejected,
	    by_kernel, fl.memlock);
	/* at most the half-open limit held anything, and memlock capped it
	 * further (two channels' rings fit) */
	ck_assert_uint_le(qps_max, 2);
	ck_assert_int_ge(fl.memlock, 1);
	/* beyond the backlog, at once; the rest after the connect timeout */
	ck_assert_int_ge(rejected, FLOOD - FLOOD_HALF - FLOOD_BACKLOG);
	/* the half-open ones time out and let go of what they held while
	 * their peers are still there */
	CH_WAIT(env.eb, (evrdma_base_get_stats(env.base, &st, sizeof(st)),
	    st.qps == 0 && st.mrs == 0), 10000);
	for (i = 0; i < FLOOD; i++)
		rp_close(&rp[i]);
	free(rp);
	ch_loop_for(env.eb, 300);
	evrdma_base_get_stats(env.base, &st, sizeof(st));
	ck_assert_uint_eq(st.qps, 0);
	ck_assert_uint_eq(st.mrs, 0);
	/* the listener still serves */
	evrdma_set_log_callback(NULL, 0, NULL);
	f_open(&f, &v);
	evrdma_channel_free(f.ch);
	v_close(&v);
	dt_env_fini(&env);
}
END_TEST

/* ==== 9. pulls reported done at once, many times over ==== */

#define PD_MSGS		200

/* The raw peer's bookkeeping as a pulling receiver. */
struct pd_state {
	unsigned next_recv, got, read_ok, ccred, pend_dret, pend_done;
	uint64_t read_wr[PD_MSGS];	/* wr_id of each message's READ */
};

/* One completion of the raw peer: a message of the victim (a pull to do,
 * or a CREDIT), or one of its own READs, checked against the pattern. */
static void
pd_take(struct rawpeer *rp, struct pd_state *ps, const struct rp_wc *w,
    const struct rp_chs *vh)
{
	unsigned buf, slot, k;
	uint32_t plen;
	uint8_t *d;

	ck_assert_int_eq(w->status, IBV_WC_SUCCESS);
	if (w->opcode == IBV_WC_RDMA_READ) {
		for (k = 0; k < ps->got; k++)
			if (ps->read_wr[k] == w->wr_id)
				break;
		ck_assert_uint_lt(k, ps->got);
		ck_assert(pat_check(rp->mem + RP_SCRATCH + (size_t)(k % 64) *
		    AT_SLOT, (uint64_t)k * AT_SLOT, AT_SLOT, 0x9011) ==
		    (size_t)-1);
		ps->read_ok++;
		return;
	}
	if (w->opcode != IBV_WC_RECV)
		return;
	ck_assert(w->has_imm);
	buf = ps->next_recv++ % (RP_SLOTS + RP_CTRL);
	d = rp->mem + (size_t)buf * RP_SLOT;
	ps->ccred += (w->imm >> 8) & 0xff;
	if (w->imm >> 30 == 0 && !(w->imm & 0x40)) {
		/* written rather than pulled (the victim shares the work):
		 * the bytes are here */
		ck_assert_uint_eq(w->byte_len, AT_SLOT);
		ck_assert(pat_check(d, (uint64_t)ps->got * AT_SLOT, AT_SLOT,
		    0x9011) == (size_t)-1);
		ck_assert_uint_lt(ps->got, PD_MSGS);
		ps->read_wr[ps->got++] = UINT64_MAX;
		ps->read_ok++;
		ps->pend_dret++;
	} else if (w->imm >> 30 == 0) {
		slot = (unsigned)d[0] << 24 | d[1] << 16 | d[2] << 8 | d[3];
		plen = (uint32_t)d[4] << 24 | d[5] << 16 | d[6] << 8 | d[7];
		ck_assert_uint_lt(slot, vh->slots);
		ck_assert_uint_eq(plen, AT_SLOT);
		ck_assert_uint_lt(ps->got, PD_MSGS);
		ps->read_wr[ps->got] = rp->next_wr;
		ck_assert_int_eq(rp_read(rp, RP_SCRATCH + (size_t)(ps->got %
		    64) * AT_SLOT, plen, vh->src_base + (uint64_t)slot *
		    vh->slot_size, vh->src_rkey), 0);
		ps->got++;
		ps->pend_dret++;
		ps->pend_done++;
	}
	ck_assert_int_eq(rp_post_recv(rp, (size_t)buf * RP_SLOT, RP_SLOT), 0);
	/* reported done at once, before the READ, within our control
	 * credits */
	if (ps->ccred && (ps->pend_dret || ps->pend_done)) {
		unsigned done = ps->pend_done < 63 ? ps->pend_done : 63;

		ck_assert_int_eq(rp_send_imm(rp, RP_SCRATCH, 0, rp_imm(1,
		    ps->pend_dret, 0, 0, 0, done)), 0);
		ps->ccred--;
		ps->pend_dret = 0;
		ps->pend_done -= done;
	}
}

/*
 * A peer that pulls reports every pull done the moment its descriptor
 * arrives (before the victim's own send of it may have completed), and
 * reads the bytes afterwards. The victim frees a send slot only when both
 * have happened: its ring never overflows, and every byte is intact.
 */
START_TEST(attack_pull_done_early)
{
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct victim v;
	struct rawpeer rp;
	struct rp_chs vh;
	struct pd_state *ps = calloc(1, sizeof(*ps));
	uint8_t chunk[AT_SLOT];
	unsigned i, seen = 0;
	uint64_t dl;

	memset(&v, 0, sizeof(v));
	memset(&rp, 0, sizeof(rp));
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	v_listen(&v, &env);
	rp_channel(&rp, &v, 1, 0, &vh);
	ps->ccred = vh.ctrl;
	for (i = 0; i < PD_MSGS; i++) {
		pat_fill(chunk, (uint64_t)i * AT_SLOT, AT_SLOT, 0x9011);
		ck_assert_int_eq(evrdma_channel_write(v.ch[0].ch, chunk,
		    AT_SLOT), 0);
	}
	dl = tu_now_ms() + 60000;
	while (ps->read_ok < PD_MSGS) {
		ck_assert_msg(tu_now_ms() < dl, "%u of %u messages read",
		    ps->read_ok, PD_MSGS);
		rp_run(&rp, 5);
		ck_assert_uint_lt(rp.nwc, RP_MAX_WC);
		for (; seen < rp.nwc; seen++)
			pd_take(&rp, ps, &rp.wc[seen], &vh);
		/* (the completion log is short: start it over) */
		if (seen > RP_MAX_WC / 2) {
			rp.nwc = seen = 0;
		}
	}
	ck_assert_int_eq(v.ch[0].ends, 0);
	free(ps);
	rp_close(&rp);
	v_close(&v);
	dt_env_fini(&env);
}
END_TEST

/* ==== 10. a server that abandons a connection ==== */

struct abandon {
	struct evrdma_channel *cli;
	int connected, ends, eof, error, reason;
	short what;
	int srv_freed;
};

static void
ab_cli_event(struct evrdma_channel *ch, short what, void *arg)
{
	struct abandon *a = arg;

	if (what & BEV_EVENT_CONNECTED) {
		static const uint8_t req[4096];

		a->connected = 1;
		ck_assert_int_eq(evrdma_channel_write(ch, req, sizeof(req)),
		    0);
		return;
	}
	a->ends++;
	a->what = what;
	if (what & BEV_EVENT_EOF)
		a->eof++;
	if (what & BEV_EVENT_ERROR) {
		a->error++;
		a->reason = evrdma_channel_get_error(ch);
	}
}

/* The server gives up on the connection as soon as data arrives, without
 * reading it (as a server whose handshake timed out, or a crashing one). */
static void
ab_srv_read(struct evrdma_channel *ch, void *arg)
{
	struct abandon *a = arg;

	evrdma_channel_free(ch);
	a->srv_freed = 1;
}

static void
ab_accept(struct evrdma_listener *l, struct evrdma_channel *ch,
    const struct sockaddr *peer, int socklen, void *arg)
{
	evrdma_channel_setcb(ch, ab_srv_read, NULL, NULL, arg);
	evrdma_channel_enable(ch, EV_READ);
}

/*
 * Finding 16: a client whose server abandons the connection after the
 * client saw CONNECTED (and wrote) must learn it as an error, never as an
 * orderly EOF: its data was not taken.
 */
START_TEST(attack_server_abandons)
{
	struct dt_env env;
	struct abandon a;
	struct evrdma_listener *lst;
	struct sockaddr_storage ss;
	int len;

	memset(&a, 0, sizeof(a));
	dt_env_init(&env, NULL);
	len = dt_sockaddr(&ss, dt_addr(), 0);
	lst = evrdma_channel_listener_new(env.base, ab_accept, &a,
	    EVRDMA_CHANNEL_STREAM, 4, (struct sockaddr *)&ss, len);
	ck_assert_ptr_nonnull(lst);
	len = dt_sockaddr(&ss, dt_addr(), evrdma_listener_get_port(lst));
	a.cli = evrdma_channel_new(env.base, EVRDMA_CHANNEL_STREAM);
	ck_assert_ptr_nonnull(a.cli);
	evrdma_channel_setcb(a.cli, NULL, NULL, ab_cli_event, &a);
	evrdma_channel_enable(a.cli, EV_READ);
	ck_assert_int_eq(evrdma_channel_connect(a.cli, (struct sockaddr *)&ss,
	    len), 0);
	CH_WAIT(env.eb, a.ends, 20000);
	ch_loop_for(env.eb, 300);
	fprintf(stderr, "server abandons: client got 0x%x (%s)\n", a.what,
	    evrdma_reason_str(a.reason));
	ck_assert_int_eq(a.connected, 1);
	ck_assert_int_eq(a.srv_freed, 1);
	ck_assert_int_eq(a.ends, 1);
	ck_assert_int_eq(a.eof, 0);
	ck_assert_int_eq(a.error, 1);
	ck_assert_int_eq(a.reason, EVRDMA_REASON_DISCONNECTED);
	evrdma_channel_free(a.cli);
	evrdma_listener_free(lst);
	ch_drain(&env, 20000);
	dt_env_fini(&env);
}
END_TEST

/* ==== 11. freed with no control credit in hand ==== */

/*
 * The peer grants 2 control credits and never returns one unless the
 * test says so. The victim spends both (returning data credits), then is
 * freed: its EOF must wait for a credit, not be skipped. Variant 0: no
 * credit ever comes; the victim gives up after its teardown timeout and
 * disconnects (no hang, nothing left). Variant 1: a credit comes after a
 * while; the EOF goes, and the victim disconnects once it is through,
 * well before the timeout.
 */
START_TEST(attack_linger_no_credit)
{
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct victim v;
	struct rawpeer rp;
	struct rp_chs h = rp_hs(), vh;
	struct evrdma_stats st;
	unsigned i, ctrl_seen = 0, eof_seen = 0, k;
	uint64_t t_free, t_end;

	memset(&v, 0, sizeof(v));
	memset(&rp, 0, sizeof(rp));
	ck_assert_int_eq(evrdma_config_set_timeout(cfg,
	    EVRDMA_TIMEOUT_TEARDOWN, 1500), 0);
	dt_env_init(&env, cfg);
	evrdma_config_free(cfg);
	v_listen(&v, &env);
	h.ctrl = 2;
	ck_assert_int_eq(rp_open(&rp, &v, &h, 32, 32), 0);
	ck_assert_int_eq(rp_chs_decode(rp.reply, rp.reply_len, &vh), 0);
	for (i = 0; i < RP_SLOTS + 2; i++)
		ck_assert_int_eq(rp_post_recv(&rp, (size_t)i * RP_SLOT,
		    RP_SLOT), 0);
	CH_WAIT(env.eb, v.naccepted == 1, 10000);
	/* data the victim reads: it returns the credits by CREDIT
	 * messages, two of them, and then has no control credit left */
	for (i = 0; i < 2 * (AT_SLOTS / 4); i++) {
		rp_data(&rp, RP_SCRATCH, 16);
		rp_run(&rp, 20);
	}
	for (k = 0, i = 0; k < 500 && ctrl_seen < 2; k++) {
		rp_run(&rp, 10);
		for (; i < rp.nwc; i++)
			if (rp.wc[i].is_recv && rp.wc[i].imm >> 30 == 1)
				ctrl_seen++;
	}
	ck_assert_uint_eq(ctrl_seen, 2);
	evrdma_channel_free(v.ch[0].ch);
	v.ch[0].freed = 1;
	t_free = tu_now_ms();
	if (_i == 1) {
		rp_run(&rp, 300);
		/* no EOF yet: it waits for a control credit */
		for (k = 0; k < rp.nwc; k++)
			ck_assert(!(rp.wc[k].is_recv && rp.wc[k].imm >> 30 == 2));
		ck_assert_int_eq(rp_send_imm(&rp, RP_SCRATCH, 0, rp_imm(1, 0, 1,
		    0, 0, 0)), 0);
	}
	ck_assert_int_eq(rp_wait_disconnect(&rp, 10000), 0);
	t_end = tu_now_ms();
	for (k = 0; k < rp.nwc; k++)
		if (rp.wc[k].is_recv && rp.wc[k].status == IBV_WC_SUCCESS &&
		    rp.wc[k].imm >> 30 == 2)
			eof_seen++;
	fprintf(stderr, "linger without a control credit (%s): EOF %u, "
	    "disconnected %llu ms after the free (teardown 1500 ms)\n",
	    _i ? "one comes later" : "none comes", eof_seen,
	    (unsigned long long)(t_end - t_free));
	if (_i == 0) {
		ck_assert_uint_eq(eof_seen, 0);
		ck_assert_uint_ge(t_end - t_free, 1400);
	} else {
		ck_assert_uint_eq(eof_seen, 1);
		ck_assert_uint_lt(t_end - t_free, 1400);
	}
	ck_assert_uint_lt(t_end - t_free, 5000);
	rp_close(&rp);
	CH_WAIT(env.eb, (evrdma_base_get_stats(env.base, &st, sizeof(st)),
	    st.qps == 0), 10000);
	v_close(&v);
	dt_env_fini(&env);
}
END_TEST

/*
 * A victim on a queue's pool lends its credits (LEND in its handshake:
 * its peer starts with one and is lent more as the pool allows, never more
 * than R). A raw peer that sends R + 2 messages at once has broken the
 * rules whatever it was lent: its channel ends (PROTOCOL), the messages it
 * took out of turn go back to the pool, and a channel beside it on the
 * same pool echoes on, byte for byte.
 */
START_TEST(attack_pool_credits)
{
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct victim v;
	struct rawpeer rp;
	struct friend f;
	struct rp_chs vh;
	struct evrdma_srq *srq;
	int i;

	memset(&v, 0, sizeof(v));
	memset(&rp, 0, sizeof(rp));
	memset(&f, 0, sizeof(f));
	srq = v_listen_pool(&v, &env, cfg, 64);
	f_open(&f, &v);
	f_echo(&f, &v, 64 * KiB);
	rp_channel(&rp, &v, 0, 0, &vh);
	ck_assert_uint_eq(vh.mode, 0x80);	/* stream, LEND */
	ck_assert_uint_eq(vh.src_rkey, 0);	/* nothing readable */
	ck_assert_uint_eq(vh.pull_min, 0);
	for (i = 0; i < AT_SLOTS + 2; i++)
		rp_data(&rp, RP_SCRATCH, 512);
	v_wait_end(&v, &v.ch[1], &rp, 10000);
	/* (an echoing victim may then be told that its write failed too,
	 * as a socket's after a reset) */
	ck_assert_int_ge(v.ch[1].error, 1);
	ck_assert_int_le(v.ch[1].ends, 2);
	ck_assert_int_eq(v.ch[1].reason, EVRDMA_REASON_PROTOCOL);
	ck_assert_msg(strstr(v.log, "data beyond its credits") != NULL,
	    "logged: %s", v.log);
	f_echo(&f, &v, 256 * KiB);
	rp_close(&rp);
	f_echo(&f, &v, 64 * KiB);
	evrdma_channel_free(f.ch);
	evrdma_srq_free(srq);
	v_close(&v);
	ch_loop_for(env.eb, 100);
	dt_env_fini(&env);
}
END_TEST

/*
 * Requests refused after their QP was made, by a listener whose channels
 * draw on a shared receive queue (a bad channel handshake is refused only
 * once the QP exists): each QP's entry in the queue's table of QP numbers
 * must go with it. SRQ_REFUSED of them, more than the table's 256
 * buckets: rxe numbers QPs in turn, and these raw peers make none of
 * their own, so every bucket gets one. Then channels join the queue,
 * move data, and go. With an entry left behind, joining and leaving
 * relinked the freed connections (found by review: ASan reports a use
 * after free; the normal build corrupted the heap).
 */
#define SRQ_REFUSED	264

START_TEST(attack_srq_refused)
{
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct victim v;
	struct friend f[2];
	struct rp_chs h = rp_hs();
	struct evrdma_stats st;
	struct evrdma_srq *srq;
	uint8_t hs[32], pd[56];
	size_t len;
	int i;

	memset(&v, 0, sizeof(v));
	srq = v_listen_pool(&v, &env, cfg, 64);
	h.bad_check = 1;
	rp_chs_encode(hs, &h);
	len = rp_pdata(pd, 1, hs, 32, 32);
	for (i = 0; i < SRQ_REFUSED; i++) {
		struct rawpeer rp;

		memset(&rp, 0, sizeof(rp));
		rp.no_qp = 1;
		ck_assert_int_eq(rp_prepare(&rp, env.eb,
		    (struct sockaddr *)&v.ss, v.sslen), 0);
		rp_connect_now(&rp, pd, len, 15000);
		ck_assert_int_eq(rp.rejected, 1);
		ck_assert_int_eq(rp.reject_code, EVRDMA_REJECT_PROTOCOL);
		rp_close(&rp);
	}
	ch_loop_for(env.eb, 100);
	evrdma_base_get_stats(env.base, &st, sizeof(st));
	ck_assert_uint_eq(st.qps, 0);
	ck_assert_int_eq(v.naccepted, 0);
	/* two channels on the queue, in buckets the refused ones used */
	for (i = 0; i < 2; i++) {
		f_open(&f[i], &v);
		f_echo(&f[i], &v, 64 * KiB);
	}
	f_echo(&f[0], &v, 16 * KiB);
	for (i = 0; i < 2; i++)
		evrdma_channel_free(f[i].ch);
	evrdma_srq_free(srq);
	v_close(&v);
	ch_loop_for(env.eb, 100);
	evrdma_base_get_stats(env.base, &st, sizeof(st));
	ck_assert_uint_eq(st.qps, 0);
	dt_env_fini(&env);
}
END_TEST

/* ==== 12. a bufferevent as the victim ==== */

/* An evrdma bufferevent accepted from the listener, and what its
 * callbacks saw. */
struct bvictim {
	struct victim v;		/* env, address, log, naccepted */
	struct bufferevent *bev;
	int reading;			/* EV_READ enabled at accept */
	size_t rx;			/* bytes the read callback saw */
	size_t bad_at;			/* first wrong byte + 1 */
	int events, ends, error;
	short what;
	int reason;
};

#define BV_SEED	0xbe7a77acull

static void
bv_read(struct bufferevent *bev, void *arg)
{
	struct bvictim *b = arg;

	pat_take(bufferevent_get_input(bev), BV_SEED, &b->rx, &b->bad_at);
}

static void
bv_event(struct bufferevent *bev, short what, void *arg)
{
	struct bvictim *b = arg;

	b->events++;
	b->what = what;
	if (what & BEV_EVENT_ERROR) {
		b->error++;
		b->reason = evrdma_bufferevent_get_error(bev);
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		b->ends++;
}

static void
bv_accept(struct evrdma_listener *lst, struct bufferevent *bev,
    const struct sockaddr *peer, int socklen, void *arg)
{
	struct bvictim *b = arg;

	ck_assert_ptr_null(b->bev);
	b->bev = bev;
	b->v.naccepted++;
	bufferevent_setcb(bev, bv_read, NULL, bv_event, b);
	if (b->reading)
		bufferevent_enable(bev, EV_READ);
}

/* @p env made with @p cfg (freed), and @p b (zeroed) listening for
 * bufferevents, EV_READ enabled at accept when @p reading; the log sink
 * records the protocol violations it catches. */
static void
bv_listen(struct bvictim *b, struct dt_env *env, struct evrdma_config *cfg,
    int reading)
{
	memset(b, 0, sizeof(*b));
	dt_env_init(env, cfg);
	evrdma_config_free(cfg);
	b->v.env = env;
	b->reading = reading;
	b->v.sslen = dt_sockaddr(&b->v.ss, dt_addr(), 0);
	b->v.lst = evrdma_bufferevent_listener_new(env->base, bv_accept, b, 0,
	    16, (struct sockaddr *)&b->v.ss, b->v.sslen);
	ck_assert_ptr_nonnull(b->v.lst);
	b->v.sslen = dt_sockaddr(&b->v.ss, dt_addr(),
	    evrdma_listener_get_port(b->v.lst));
	if (!getenv("EVRDMA_TEST_LOG"))
		evrdma_set_log_callback(v_log, EVRDMA_LOG_WARN, &b->v);
}

/* The raw peer sends @p len pattern bytes of the stream at @p off. */
static void
bv_send(struct rawpeer *rp, uint64_t off, size_t len)
{
	pat_fill(rp->mem + RP_SCRATCH, off, len, BV_SEED);
	rp_data(rp, RP_SCRATCH, len);
	ck_assert_int_eq(rp_status_of(rp, rp->next_wr - 1, 10000, 1),
	    IBV_WC_SUCCESS);
}

enum { BV_EDGES, BV_CREDITS, BV_LONG, BV_COUNT };
static const char *const bv_names[BV_COUNT] = {
	"lengths at the edges of the slot and of the sink",
	"DATA beyond its credits, the bufferevent not reading",
	"a message longer than a slot, the bufferevent reading"
};

/*
 * A raw channel client against an evrdma bufferevent (the adapter, whose
 * channel offers small arrivals straight to the bufferevent's input):
 * _i 0: messages of 1 B, either side of the sink's 1 KiB and of a slot
 * arrive byte for byte, and nothing else; 1: DATA beyond the credits while
 * the bufferevent does not read is caught by the channel at once, and the
 * bufferevent, once it reads, gets what came within the credits, then its
 * one end, PROTOCOL; 2: a message longer than a slot (the device fails it) ends it
 * once, and the read callback never saw a byte that was not sent. In
 * each, the peer's connection goes with it and nothing leaks.
 */
START_TEST(attack_bufferevent)
{
	static const size_t edges[] = {
		1, 1023, 1024, 1025, 2, AT_SLOT - 1, AT_SLOT, 3
	};
	struct dt_env env;
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 0);
	struct bvictim b;
	struct rawpeer rp;
	struct rp_chs vh;
	struct evrdma_stats st;
	size_t sent = 0;
	unsigned i;

	memset(&rp, 0, sizeof(rp));
	bv_listen(&b, &env, cfg, _i != BV_CREDITS);
	rp_channel(&rp, &b.v, 0, 0, &vh);
	ck_assert_ptr_nonnull(b.bev);

	switch (_i) {
	case BV_EDGES:
		/* one at a time, each whole before the next (the sink
		 * takes it only while nothing waits in the channel) */
		for (i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
			bv_send(&rp, sent, edges[i]);
			sent += edges[i];
			CH_WAIT(env.eb, b.rx >= sent || b.ends, 10000);
			ck_assert_uint_eq(b.rx, sent);
		}
		/* then a burst of small ones: the first may be taken, the
		 * rest queue in the channel behind it, in order */
		for (i = 0; i < 4; i++) {
			pat_fill(rp.mem + RP_SCRATCH + i * 512, sent, 100,
			    BV_SEED);
			rp_data(&rp, RP_SCRATCH + i * 512, 100);
			sent += 100;
		}
		CH_WAIT(env.eb, b.rx >= sent || b.ends, 10000);
		rp_run(&rp, 200);
		ck_assert_uint_eq(b.rx, sent);
		ck_assert_int_eq(b.events, 0);
		break;
	case BV_CREDITS:
		for (i = 0; i < AT_SLOTS + 1; i++) {
			pat_fill(rp.mem + RP_SCRATCH + i * 64, sent, 16,
			    BV_SEED);
			rp_data(&rp, RP_SCRATCH + i * 64, 16);
			sent += 16;
		}
		/* caught at once (logged), but, as on a socket that is not
		 * read, told when the application reads */
		CH_WAIT(env.eb, strstr(b.v.log, "beyond") != NULL, 10000);
		rp_run(&rp, 300);
		bufferevent_enable(b.bev, EV_READ);
		break;
	case BV_LONG:
		bv_send(&rp, 0, 100);
		sent = 100;
		CH_WAIT(env.eb, b.rx >= sent, 10000);
		rp_data(&rp, RP_SCRATCH, AT_SLOT + 64);
		break;
	}
	if (_i != BV_EDGES) {
		uint64_t dl = tu_now_ms() + 10000;

		while (!b.ends && tu_now_ms() < dl)
			rp_run(&rp, 20);
		ck_assert_int_eq(rp_wait_disconnect(&rp, 10000), 0);
		rp_run(&rp, 300);
		fprintf(stderr, "bufferevent attack, %s: %zu of %zu bytes "
		    "read, then 0x%x, %s; logged: %s\n", bv_names[_i], b.rx,
		    sent, b.what, evrdma_reason_str(b.reason), b.v.log[0] ?
		    b.v.log : "(nothing)");
		ck_assert_int_eq(b.ends, 1);
		ck_assert_int_eq(b.events, 1);
		ck_assert(b.what & BEV_EVENT_ERROR);
		if (_i == BV_CREDITS) {
			ck_assert_int_eq(b.reason, EVRDMA_REASON_PROTOCOL);
			ck_assert_msg(strstr(b.v.log, "data beyond its "
			    "credits") != NULL, "logged: %s", b.v.log);
		} else {
			ck_assert(b.reason == EVRDMA_REASON_QP_FATAL ||
			    b.reason == EVRDMA_REASON_DISCONNECTED);
		}
	}
	/* never a byte that was not sent (_i 1: at most what came within
	 * the credits) */
	ck_assert_uint_eq(b.bad_at, 0);
	ck_assert_uint_le(b.rx, _i == BV_CREDITS ? AT_SLOTS * 16 : sent);
	/* the connection is gone with its QP, the bufferevent still the
	 * application's to free */
	if (_i != BV_EDGES) {
		CH_WAIT(env.eb, (evrdma_base_get_stats(env.base, &st,
		    sizeof(st)), st.qps == 0), 10000);
		ck_assert_uint_eq(st.qps, 0);
	}
	bufferevent_free(b.bev);
	rp_close(&rp);
	evrdma_listener_free(b.v.lst);
	ch_drain(&env, 20000);
	dt_env_fini(&env);
}
END_TEST

/*
 * The adapter's sink and a moved reference (bd45075): the start of a
 * message cut at the channel's read high watermark (the ring, 32 KiB
 * here) goes into the channel's input by reference; the adapter moves
 * that chain into the bufferevent's input (evbuffer_remove_buffer), so
 * the channel's input is empty while its receive buffer is still
 * referenced, and the message's rest (< 1 KiB) then goes the sink's way,
 * copied straight into the bufferevent's input. Before bd45075 the sink
 * released the buffer with the rest's delivery: it went back to the peer,
 * whose later messages landed in it and changed bytes the application
 * had not read yet. Here: the bufferevent does not read while the client
 * sends BVC_NSMALL messages of BVC_SMALL bytes (copied into the channel's
 * input, each its own message) and one of BVC_LEN, cut at the mark
 * (29,000 + 3,768 by reference; 232 left in the ring). Then it reads,
 * at most BVC_BITE bytes per read callback, so the chain stays in its
 * input while BVC_MORE messages of BVC_LEN come round the ring (16
 * receive buffers) four times; then it reads the rest. Every byte must
 * be the stream's, in order, and neither end may see an event.
 */
#define BVC_SMALL	1000
#define BVC_NSMALL	29
#define BVC_LEN		4000
#define BVC_MORE	64
#define BVC_BITE	128

/* The read callback reads a little per call: the chain moved from the
 * channel stays in the bufferevent's input meanwhile. */
static void
bv_read_bite(struct bufferevent *bev, void *arg)
{
	struct bvictim *b = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n = evbuffer_get_length(in), at;

	if (n > BVC_BITE)
		n = BVC_BITE;
	if (!n)
		return;
	at = pat_check(evbuffer_pullup(in, (ev_ssize_t)n), b->rx, n, BV_SEED);
	if (at != (size_t)-1 && !b->bad_at)
		b->bad_at = b->rx + at + 1;
	b->rx += n;
	evbuffer_drain(in, n);
}

/* The client sends the next @p len bytes of the stream as one message
 * (its output is empty before the write) and waits until the
 * bufferevent's channel has it: its messages and bytes received. */
static void
bvc_send(struct bvictim *b, struct friend *f, uint8_t *buf, size_t len,
    uint64_t *sent, unsigned long long *msgs)
{
	struct evbuffer *out = evrdma_channel_get_output(f->ch);
	struct evrdma_channel_stats st;

	memset(&st, 0, sizeof(st));
	ck_assert_uint_eq(evbuffer_get_length(out), 0);
	pat_fill(buf, *sent, len, BV_SEED);
	ck_assert_int_eq(evrdma_channel_write(f->ch, buf, len), 0);
	*sent += len;
	++*msgs;
	CH_WAIT(b->v.env->eb, (evrdma_bufferevent_get_stats(b->bev, &st,
	    sizeof(st)) == 0 && st.msgs_received >= *msgs) || b->ends ||
	    f->ends, 10000);
	ck_assert_msg(!b->ends && !f->ends, "an end at byte %llu: "
	    "bufferevent 0x%x (%s), client %d; logged: %s",
	    (unsigned long long)*sent, b->what, evrdma_reason_str(b->reason),
	    f->ends, b->v.log[0] ? b->v.log : "(nothing)");
	ck_assert_uint_eq(evbuffer_get_length(out), 0);
	ck_assert_uint_eq(st.msgs_received, *msgs);
	ck_assert_uint_eq(st.bytes_received, *sent);
	ck_assert_uint_eq(st.pulls_done, 0);
}

START_TEST(attack_bufferevent_cut_moved)
{
	const uint64_t first = (uint64_t)BVC_NSMALL * BVC_SMALL;
	struct dt_env env;
	/* (max_input above the ring: the small messages are copied) */
	struct evrdma_config *cfg = ring_config(AT_SLOTS, AT_SLOT, 64 * 1024);
	struct bvictim b;
	struct friend f;
	struct evbuffer *in;
	uint8_t *buf = malloc(BVC_LEN);
	uint64_t sent = 0;
	unsigned long long msgs = 0;
	unsigned i;

	ck_assert_ptr_nonnull(buf);
	bv_listen(&b, &env, cfg, 0);
	ck_assert_int_eq(f_connect(&f, &b.v), 1);
	CH_WAIT(env.eb, b.bev != NULL, 10000);
	bufferevent_setcb(b.bev, bv_read_bite, NULL, bv_event, &b);
	in = bufferevent_get_input(b.bev);

	/* not reading: the small ones wait in the channel's input, the
	 * last message is cut at the ring's 32 KiB, its start by reference,
	 * its rest in its buffer */
	for (i = 0; i < BVC_NSMALL; i++)
		bvc_send(&b, &f, buf, BVC_SMALL, &sent, &msgs);
	ck_assert_uint_lt(sent, (uint64_t)AT_SLOTS * AT_SLOT);
	ck_assert_uint_ge((uint64_t)AT_SLOTS * AT_SLOT - sent, 1024);
	bvc_send(&b, &f, buf, BVC_LEN, &sent, &msgs);
	ck_assert_uint_gt(sent, (uint64_t)AT_SLOTS * AT_SLOT);
	ck_assert_uint_lt(sent - (uint64_t)AT_SLOTS * AT_SLOT, 1024);
	ch_loop_for(env.eb, 50);
	ck_assert_uint_eq(b.rx, 0);
	ck_assert_uint_eq(evbuffer_get_length(in), 0);

	/* reading: the adapter moves the channel's input, the chain
	 * included, and the sink takes the rest */
	ck_assert_int_eq(bufferevent_enable(b.bev, EV_READ), 0);
	CH_WAIT(env.eb, b.rx + evbuffer_get_length(in) == sent || b.ends ||
	    f.ends, 10000);
	ck_assert_int_eq(b.ends + f.ends, 0);
	ck_assert_uint_gt(b.rx, 0);

	/* the ring comes round while the chain is still held */
	for (i = 0; i < BVC_MORE; i++) {
		bvc_send(&b, &f, buf, BVC_LEN, &sent, &msgs);
		CH_WAIT(env.eb, b.rx + evbuffer_get_length(in) == sent ||
		    b.ends || f.ends, 10000);
	}
	ch_loop_for(env.eb, 100);
	ck_assert_int_eq(b.events, 0);
	ck_assert_int_eq(f.ends, 0);
	ck_assert_uint_eq(b.rx + evbuffer_get_length(in), sent);
	/* (the test's premise: the cut message's start was not read yet) */
	ck_assert_msg(b.rx < first, "the read callback read %zu bytes, "
	    "the cut message's start (at %llu) among them", b.rx,
	    (unsigned long long)first);

	/* everything left, in order, no byte changed */
	pat_take(in, BV_SEED, &b.rx, &b.bad_at);
	ck_assert_msg(b.bad_at == 0, "byte %zu of the stream changed in the "
	    "bufferevent's input (the cut message's start: bytes %llu to "
	    "%llu)", b.bad_at - 1, (unsigned long long)first,
	    (unsigned long long)AT_SLOTS * AT_SLOT);
	ck_assert_uint_eq(b.rx, sent);
	ch_loop_for(env.eb, 200);
	ck_assert_uint_eq(evbuffer_get_length(in), 0);
	ck_assert_uint_eq(b.rx, sent);
	ck_assert_int_eq(b.events, 0);
	ck_assert_int_eq(f.ends, 0);
	ck_assert_msg(b.v.log[0] == 0, "logged: %s", b.v.log);
	fprintf(stderr, "bufferevent, a cut message's start moved, its rest "
	    "sunk: %llu bytes in %llu messages read intact\n",
	    (unsigned long long)sent, msgs);

	free(buf);
	bufferevent_free(b.bev);
	evrdma_channel_free(f.ch);
	evrdma_listener_free(b.v.lst);
	ch_drain(&env, 20000);
	if (!getenv("EVRDMA_TEST_LOG"))
		evrdma_set_log_callback(NULL, 0, NULL);
	dt_env_fini(&env);
}
END_TEST

/* ==== 13. the accept reply answered with a REJ or a disconnect ==== */

/*
 * A requester that connects without a QP bound to its id (rawpeer's
 * no_qp) gets the listener's accept reply (the CM's REP) as
 * RDMA_CM_EVENT_CONNECT_RESPONSE, and it, not librdmacm, must send the
 * RTU that establishes the connection (rdma_establish()). A stranger
 * answers otherwise:
 *  - RR_REJ: rdma_reject(), a REJ from the CM's REP_RCVD state: the
 *    listener's half-made connection hears RDMA_CM_EVENT_REJECTED.
 *  - RR_DISCONNECT: rdma_disconnect() and no RTU. The kernel's IB CM
 *    sends a DREQ only from ESTABLISHED (drivers/infiniband/core/cm.c,
 *    cm_send_dreq_locked()), so nothing goes on the wire and the call
 *    still returns 0: the listener hears nothing, and only its accept
 *    timeout ends the connection (the silent half-open case for a
 *    connection listener, which no other test has; attack_half_open_flood
 *    has it for channels). When the listener then destroys the id, its
 *    CM sends the stranger a REJ.
 *  - RR_RTU_DREQ: the RTU and the DREQ at once, the nearest a peer comes
 *    to a DREQ for a reply: ESTABLISHED and DISCONNECTED reach the
 *    listener back to back, usually in one read of its CM channel. (The
 *    kernel's CM handles the two MADs in work items that may run on two
 *    CPUs: should the DREQ be taken first, the RTU is ignored and the
 *    listener hears only DISCONNECTED, a connection never established,
 *    which it must drop as the others.)
 */
enum { RR_REJ, RR_DISCONNECT, RR_RTU_DREQ, RR_COUNT };
static const char *const rr_names[RR_COUNT] = {
	"a REJ", "rdma_disconnect() without an RTU",
	"the RTU and at once a DREQ"
};

/* the accept timeout: what ends RR_DISCONNECT's connection */
#define RR_ACCEPT_MS	1500

/* Run the loop and the stranger's own CM events until @p cond holds;
 * fail after @p ms. */
#define RR_WAIT(rp, cond, ms)						\
	do {								\
		uint64_t rr_dl_ = tu_now_ms() + (uint64_t)(ms);		\
		while (!(cond)) {					\
			ck_assert_msg(tu_now_ms() < rr_dl_,		\
			    "timed out after %d ms waiting for %s",	\
			    (int)(ms), #cond);				\
			rp_run((rp), 10);				\
		}							\
	} while (0)

/* What the listener logged of connections it dropped before handing
 * them out (conn.c): how many, and the last one's reason, in words. */
struct rr_log {
	int drops;
	char why[64];
};

static void
rr_log_cb(int level, const char *msg, void *arg)
{
	static const char tag[] = "dropped before it was accepted: ";
	struct rr_log *rl = arg;
	const char *p = strstr(msg, tag);

	if (getenv("EVRDMA_TEST_LOG"))
		fprintf(stderr, "rr log: %s\n", msg);
	if (p) {
		rl->drops++;
		snprintf(rl->why, sizeof(rl->why), "%s", p + sizeof(tag) - 1);
	}
}

/* The log as the test found it: dt_log_init()'s, or none. */
static void
rr_log_off(void)
{
	evrdma_set_log_callback(NULL, 0, NULL);
	dt_log_init();
}

/* One half-open place: a place the stranger's connection kept would
 * leave the honest client after it waiting in the backlog, and its
 * connect would time out. */
static void
rr_env(struct dt_env *env, struct rr_log *rl)
{
	struct evrdma_config *cfg = evrdma_config_new();

	ck_assert_ptr_nonnull(cfg);
	ck_assert_int_eq(evrdma_config_set_half_open(cfg, 1), 0);
	ck_assert_int_eq(evrdma_config_set_timeout(cfg,
	    EVRDMA_TIMEOUT_ACCEPT, RR_ACCEPT_MS), 0);
	dt_env_init(env, cfg);
	evrdma_config_free(cfg);
	memset(rl, 0, sizeof(*rl));
}

/* Nothing of a connection is left on the base but @p mrs regions (the
 * application's own): the listener's id is its only id. */
static int
rr_let_go(struct dt_env *env, unsigned mrs)
{
	struct evrdma_stats st;

	evrdma_base_get_stats(env->base, &st, sizeof(st));
	return !st.conns && !st.qps && !st.reqs && st.cm_ids == 1 &&
	    st.mrs == mrs;
}

/*
 * The stranger @p rp connects to @p ss with private data @p pd, gets the
 * accept reply and answers it @p how. RR_REJ and RR_DISCONNECT return
 * once the listener has dropped the connection, @p mrs regions of the
 * application's left; RR_RTU_DREQ returns at once (the caller waits for
 * what the application sees). @p rp stays open: closed, its id would
 * send a REJ of its own.
 */
static void
rr_stranger(struct rawpeer *rp, struct dt_env *env,
    const struct sockaddr_storage *ss, int sslen, const void *pd,
    size_t len, int how, struct rr_log *rl, unsigned mrs)
{
	/* an evrdma reject header (code 4, the application's) in the REJ:
	 * what a listener reading the REJ's private data as a handshake
	 * would take for one */
	static const uint8_t rej[8] = { 'E', 'V', 'R', 1, 3, 0, 0, 4 };
	const char *want = evrdma_reason_str(how == RR_REJ ?
	    EVRDMA_REASON_REJECTED : EVRDMA_REASON_TIMEOUT);
	struct evrdma_stats st;
	uint64_t t0;
	int rc;

	memset(rp, 0, sizeof(*rp));
	rp->no_qp = 1;
	ck_assert_int_eq(rp_prepare(rp, env->eb, (const struct sockaddr *)ss,
	    sslen), 0);
	ck_assert_int_eq(rp_connect_now(rp, pd, len, 15000), 0);
	/* the reply came (CONNECT_RESPONSE): the listener holds a half-made
	 * connection, a QP and memory, for it (without them, nothing below
	 * could show that they were let go of) */
	ck_assert_int_eq(rp->established, 1);
	ck_assert_int_eq(rp->rejected, 0);
	evrdma_base_get_stats(env->base, &st, sizeof(st));
	ck_assert_uint_eq(st.conns, 1);
	ck_assert_uint_eq(st.qps, 1);
	ck_assert_uint_ge(st.mrs, 1);
	t0 = tu_now_ms();
	switch (how) {
	case RR_REJ:
		ck_assert_int_eq(rdma_reject(rp->id, rej, sizeof(rej)), 0);
		break;
	case RR_DISCONNECT:
		/* (whatever it returns: the listener must cope) */
		rc = rdma_disconnect(rp->id);
		fprintf(stderr, "accept reply refused: rdma_disconnect() "
		    "without an RTU returned %d\n", rc);
		break;
	case RR_RTU_DREQ:
		ck_assert_int_eq(rdma_establish(rp->id), 0);
		ck_assert_int_eq(rdma_disconnect(rp->id), 0);
		return;
	}
	/* the listener lets go of everything, within its accept timeout
	 * (and the teardown's) at the latest */
	while (!(rl->drops && rr_let_go(env, mrs) &&
	    (how != RR_DISCONNECT || rp->rejected))) {
		ck_assert_msg(tu_now_ms() - t0 < RR_ACCEPT_MS + 10000,
		    "%s: after %llu ms, drops %d, rr_let_go %d, the stranger "
		    "told %d", rr_names[how],
		    (unsigned long long)(tu_now_ms() - t0), rl->drops,
		    rr_let_go(env, mrs), rp->rejected);
		rp_run(rp, 10);
	}
	fprintf(stderr, "accept reply refused with %s: dropped after %llu "
	    "ms (%s)\n", rr_names[how],
	    (unsigned long long)(tu_now_ms() - t0), rl->why);
	/* once, and for the reason the peer gave: a REJ is heard at once
	 * (not at the accept timeout); for a disconnect without an RTU the
	 * timeout, or a DREQ on a kernel that would send one */
	ck_assert_int_eq(rl->drops, 1);
	if (how == RR_DISCONNECT && !strcmp(rl->why,
	    evrdma_reason_str(EVRDMA_REASON_DISCONNECTED)))
		want = rl->why;
	ck_assert_str_eq(rl->why, want);
}

/* A connection listener's pair (devtest.h) and what its prepare
 * callback gave the stranger's connection: a region and a receive, which
 * the application owns from then on. */
struct rr_conn {
	struct dt_pair p;
	uint8_t buf[64];
	struct evrdma_mr *mr;
	struct dt_wc wc;
	int prepared;
};

static int
rr_prepare(struct evrdma_listener *l, struct evrdma_conn *c,
    const void *pd, size_t len, void *arg)
{
	struct rr_conn *r = arg;

	r->prepared++;
	r->mr = evrdma_mr_reg(c, r->buf, sizeof(r->buf),
	    EVRDMA_ACCESS_LOCAL_WRITE);
	ck_assert_ptr_nonnull(r->mr);
	ck_assert_int_eq(evrdma_conn_post_recv(c, r->mr, 0, sizeof(r->buf),
	    dt_wc_cb, &r->wc), 0);
	return 0;
}

/*
 * A connection listener (evrdma_listener_new()) against the three
 * answers. REJ and disconnect: the accept callback never runs, the
 * listener drops the connection once, for the peer's reason, and nothing
 * of it is left; the receive posted from the prepare callback completes
 * once, ECANCELED (listener.h: all the application hears of a connection
 * dropped before it was accepted). RTU and DREQ: the connection was
 * established, so the accept callback runs once and the connection then
 * ends once, with EOF (the peer disconnected); or, the DREQ taken first,
 * it is dropped as the others. Then an honest client connects, on the
 * one half-open place.
 */
START_TEST(attack_reply_refused_conn)
{
	struct dt_env env;
	struct rr_conn r;
	struct rr_log rl;
	struct rawpeer rp;
	struct sockaddr_storage ss;
	uint8_t pd[8];
	int sslen;

	memset(&r, 0, sizeof(r));
	rr_env(&env, &rl);
	dt_pair_listen(&r.p, &env, dt_addr(), 0);
	r.p.prepare = rr_prepare;
	r.p.prepare_arg = &r;
	evrdma_set_log_callback(rr_log_cb, EVRDMA_LOG_INFO, &rl);
	sslen = dt_sockaddr(&ss, dt_addr(),
	    evrdma_listener_get_port(r.p.lst));
	rp_pdata(pd, 1, NULL, 0, 0);
	rr_stranger(&rp, &env, &ss, sslen, pd, sizeof(pd), _i, &rl, 1);
	if (_i == RR_RTU_DREQ) {
		RR_WAIT(&rp, r.p.srv_events || rl.drops, 10000);
		ch_loop_for(env.eb, 300);
		fprintf(stderr, "accept reply refused with %s: %s\n",
		    rr_names[_i], r.p.srv_accepted ? "accepted, then "
		    "ended" : "dropped, never established");
		if (r.p.srv_accepted) {
			/* established, so handed out; then it ends once, an
			 * EOF: the peer disconnected */
			ck_assert_int_eq(r.p.nextra, 0);
			ck_assert_int_eq(r.p.srv_events, 1);
			ck_assert_int_eq(r.p.srv_what, EVRDMA_EV_EOF);
			ck_assert_int_eq(r.p.srv_reason,
			    EVRDMA_REASON_DISCONNECTED);
			ck_assert_int_eq(rl.drops, 0);
			evrdma_conn_free(r.p.srv);
			r.p.srv = NULL;
			r.p.srv_accepted = 0;
		} else {
			ck_assert_int_eq(r.p.nextra, 0);
			ck_assert_int_eq(rl.drops, 1);
			ck_assert_str_eq(rl.why, evrdma_reason_str(
			    EVRDMA_REASON_DISCONNECTED));
		}
		RR_WAIT(&rp, rr_let_go(&env, 1), 10000);
	} else {
		/* (time for a late, wrong hand-out to show) */
		ch_loop_for(env.eb, 300);
		ck_assert_int_eq(r.p.srv_accepted, 0);
		ck_assert_int_eq(r.p.nextra, 0);
	}
	ck_assert_int_eq(r.prepared, 1);
	ck_assert_int_eq(r.wc.done, 1);
	ck_assert_int_eq(r.wc.wc.status, ECANCELED);
	rp_close(&rp);
	rr_log_off();
	/* the region was the application's to free; then none is left */
	evrdma_mr_free(r.mr);
	ck_assert(rr_let_go(&env, 0));

	/* the listener still serves */
	r.p.prepare = NULL;
	dt_pair_dial(&r.p, dt_addr(), 0);
	ck_assert_int_eq(r.p.nextra, 0);
	ck_assert_int_eq(r.prepared, 1);
	dt_pair_close(&r.p);
	dt_env_fini(&env);
	dt_assert_no_rdma_resources();
}
END_TEST

/*
 * The same against a channel listener, whose half-made connection holds
 * a channel's registered rings too: REJ and disconnect, the accept
 * callback never runs and the rings go with the QP; RTU and DREQ, the
 * channel is accepted once and ends once (or is dropped, the DREQ taken
 * first). An honest channel then connects and echoes.
 */
START_TEST(attack_reply_refused_channel)
{
	struct dt_env env;
	struct victim v;
	struct friend f;
	struct rr_log rl;
	struct rawpeer rp;
	struct rp_chs h = rp_hs();
	uint8_t hs[32], pd[56];
	size_t len;
	int honest = 0;

	memset(&v, 0, sizeof(v));
	rr_env(&env, &rl);
	v.echo = 1;
	v_listen(&v, &env);
	evrdma_set_log_callback(rr_log_cb, EVRDMA_LOG_INFO, &rl);
	rp_chs_encode(hs, &h);
	len = rp_pdata(pd, 1, hs, 32, 32);
	rr_stranger(&rp, &env, &v.ss, v.sslen, pd, len, _i, &rl, 0);
	if (_i == RR_RTU_DREQ) {
		RR_WAIT(&rp, (v.naccepted && v.ch[0].ends) || rl.drops, 10000);
		ch_loop_for(env.eb, 300);
		if (v.naccepted)
			fprintf(stderr, "accept reply refused with %s: the "
			    "channel ended with 0x%x (%s)\n", rr_names[_i],
			    v.ch[0].what, v.ch[0].error ?
			    evrdma_reason_str(v.ch[0].reason) : "EOF");
		else
			fprintf(stderr, "accept reply refused with %s: "
			    "dropped, never established\n", rr_names[_i]);
		if (v.naccepted) {
			/* handed out, then one end, whichever */
			ck_assert_int_eq(v.naccepted, 1);
			ck_assert_int_eq(v.ch[0].ends, 1);
			ck_assert_int_eq(v.ch[0].eof + v.ch[0].error, 1);
			ck_assert_int_eq(rl.drops, 0);
			evrdma_channel_free(v.ch[0].ch);
			v.ch[0].freed = 1;
			honest = 1;
		} else {
			ck_assert_int_eq(rl.drops, 1);
			ck_assert_str_eq(rl.why, evrdma_reason_str(
			    EVRDMA_REASON_DISCONNECTED));
		}
		RR_WAIT(&rp, rr_let_go(&env, 0), 10000);
	} else {
		ch_loop_for(env.eb, 300);
		ck_assert_int_eq(v.naccepted, 0);
	}
	rp_close(&rp);
	rr_log_off();

	/* the listener still serves */
	f_open(&f, &v);
	CH_WAIT(env.eb, v.naccepted == honest + 1, 10000);
	f_echo(&f, &v, 64 * KiB);
	evrdma_channel_free(f.ch);
	v_close(&v);
	dt_env_fini(&env);
	dt_assert_no_rdma_resources();
}
END_TEST

Suite *
dt_suite_chan_attack(void)
{
	Suite *s = suite_create("device-chan-attack");
	TCase *tc;

	tc = tcase_create("handshake");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, attack_handshake, 0, HS_COUNT);
	suite_add_tcase(s, tc);

	tc = tcase_create("violation");
	tcase_set_timeout(tc, 90);
	tcase_add_loop_test(tc, attack_violation, 0, PV_COUNT);
	tcase_add_test(tc, attack_violation_first);
	tcase_add_test(tc, attack_linger_abuse);
	tcase_add_loop_test(tc, attack_linger_no_credit, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("memory");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, attack_isolation);
	tcase_add_test(tc, attack_isolation_raw);
	tcase_add_test(tc, attack_pool_credits);
	tcase_add_loop_test(tc, attack_bufferevent, 0, BV_COUNT);
	tcase_add_test(tc, attack_bufferevent_cut_moved);
	tcase_add_test(tc, attack_rewrite_delivered);
	tcase_add_loop_test(tc, attack_forbidden_then_gone, 0, FO_COUNT);
	tcase_add_test(tc, attack_pull_done_early);
	suite_add_tcase(s, tc);

	tc = tcase_create("listener");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, attack_half_open_flood);
	tcase_add_test(tc, attack_server_abandons);
	tcase_add_test(tc, attack_srq_refused);
	suite_add_tcase(s, tc);

	tc = tcase_create("reply");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, attack_reply_refused_conn, 0, RR_COUNT);
	tcase_add_loop_test(tc, attack_reply_refused_channel, 0, RR_COUNT);
	suite_add_tcase(s, tc);
	return s;
}
