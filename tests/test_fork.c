/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: fork. A child of a process with live RDMA
 * connections execs or exits, or misuses what it inherited, and the
 * parent's transfers carry on byte for byte; a child cannot read the
 * channels' buffers, and what it writes to memory the parent registered
 * stays its own; a daemon that forks after creating its base serves from
 * the child.
 */
#include "devtest.h"
#include "chtest.h"

#include <sys/mman.h>
#include <sys/wait.h>

#include <event2/buffer.h>
#include <evrdma/channel.h>

static int
fk_wait(pid_t pid)
{
	int st = 0;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st), "child %d ended by signal %d", (int)pid,
	    WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	return WEXITSTATUS(st);
}

/*
 * Mid-transfer, one child execs a program and another exits at once: the
 * 16 MiB stream arrives whole, the reverse direction works afterwards, no
 * end is reported on either side, and teardown leaves nothing in the
 * kernel.
 */
START_TEST(fork_exec_and_exit_mid_transfer)
{
	struct dt_env env;
	struct chp p;
	pid_t a, b;

	memset(&p, 0, sizeof(p));
	dt_env_init(&env, NULL);
	chp_open(&p, &env, EVRDMA_CHANNEL_STREAM, 1);
	p.srv->drain = 1;
	p.srv->rx_seed = p.cli.tx_seed;
	p.cli.tx_total = 16 * MiB;
	p.cli.pump_hi = 1 * MiB;
	p.cli.pump_in_wcb = 1;
	ep_pump(&p.cli);
	CH_WAIT(env.eb, p.srv->rx >= 2 * MiB || p.srv->ends, 20000);
	ck_assert_int_eq(p.srv->ends, 0);

	a = fork();
	ck_assert_int_ge(a, 0);
	if (a == 0) {
		execl("/bin/sh", "sh", "-c", "exit 7", (char *)NULL);
		_exit(99);
	}
	ch_step(env.eb, 5);
	b = fork();
	ck_assert_int_ge(b, 0);
	if (b == 0)
		_exit(5);
	CH_WAIT(env.eb, p.srv->rx == p.cli.tx_total || p.srv->ends ||
	    p.cli.ends, 60000);
	ck_assert_uint_eq(p.srv->rx, 16 * MiB);
	ck_assert_int_eq(fk_wait(a), 7);
	ck_assert_int_eq(fk_wait(b), 5);
	ep_xfer(&env, p.srv, &p.cli, 1 * MiB, 20000);
	ck_assert_int_eq(p.cli.ends + p.srv->ends, 0);
	chp_close(&p);
	dt_env_fini(&env);
	dt_assert_no_rdma_resources();
}
END_TEST

struct fk_region {
	struct evrdma_mr *mr;
	uint8_t *mem;
};

static int
fk_prepare(struct evrdma_listener *l, struct evrdma_conn *c, const void *pd,
    size_t len, void *arg)
{
	struct fk_region *r = arg;

	r->mr = evrdma_mr_reg(c, r->mem, 4096, EVRDMA_ACCESS_REMOTE_READ);
	ck_assert_ptr_nonnull(r->mr);
	return 0;
}

/* RDMA READ the server's region from the client: all bytes @p want? */
static void
fk_read_expect(struct dt_env *env, struct dt_pair *dp, struct fk_region *r,
    struct evrdma_mr *lmr, uint8_t *local, uint8_t want)
{
	struct evrdma_remote rem;
	struct dt_wc w;
	size_t i;

	ck_assert_int_eq(evrdma_mr_export(r->mr, 0, 4096, &rem), 0);
	memset(local, 0, 4096);
	memset(&w, 0, sizeof(w));
	ck_assert_int_eq(evrdma_conn_post_read(dp->cli, lmr, 0, 4096, &rem, 0,
	    dt_wc_cb, &w), 0);
	DT_WAIT(env, w.done, 5000);
	ck_assert_int_eq(w.wc.status, 0);
	for (i = 0; i < 4096; i++)
		ck_assert_msg(local[i] == want, "byte %zu is 0x%02x, not "
		    "0x%02x", i, local[i], want);
}

/* What the child of fork_child_misuses_inheritance found, a bit each. */
enum {
	FK_RING_ABSENT = 1 << 0,	/* the send ring is not mapped */
	FK_REG_REFUSED = 1 << 1,	/* evrdma_mr_reg: EPERM */
	FK_POST_REFUSED = 1 << 2,	/* evrdma_conn_post_read: EPERM */
	FK_BASE_REFUSED = 1 << 3,	/* evrdma_base_new: EPERM */
	FK_NO_CALLBACK = 1 << 4,	/* the parent's loop, run here, called
					 * no callback of the channels */
	FK_CHAN_REFUSED = 1 << 5,	/* channel write, reserve, flush and
					 * read: EPERM */
	FK_SRQ_REFUSED = 1 << 6,	/* evrdma_srq_set_limit: EPERM */
	FK_ALL = (1 << 7) - 1
};

/* the parent's shared receive queue, its limit armed */
static struct evrdma_srq *fk_srq;

static void
fk_limit_cb(struct evrdma_srq *srq, void *arg)
{
	(void)srq;
	(void)arg;
}

static int
fk_child(struct dt_env *env, struct chp *p, struct dt_pair *dp,
    struct fk_region *r, struct evrdma_mr *lmr, void *ring)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char vec[1];
	struct evrdma_remote rem;
	struct event_base *eb2;
	struct dt_wc w;
	uint8_t other[64];
	int got = 0, seen, i;

	if (mincore((void *)((uintptr_t)ring & ~(uintptr_t)(pg - 1)), pg,
	    vec) < 0 && errno == ENOMEM)
		got |= FK_RING_ABSENT;
	/* the child's own copy of the registered region */
	memset(r->mem, 'X', 4096);
	errno = 0;
	if (!evrdma_mr_reg(dp->srv, other, sizeof(other), 0) &&
	    errno == EPERM)
		got |= FK_REG_REFUSED;
	memset(&w, 0, sizeof(w));
	evrdma_mr_export(r->mr, 0, 4096, &rem);
	errno = 0;
	if (evrdma_conn_post_read(dp->cli, lmr, 0, 64, &rem, 0, dt_wc_cb,
	    &w) < 0 && errno == EPERM)
		got |= FK_POST_REFUSED;
	eb2 = event_base_new();
	errno = 0;
	if (!evrdma_base_new(eb2, NULL) && errno == EPERM)
		got |= FK_BASE_REFUSED;
	/* (would disarm the parent's limit, on the inherited device) */
	errno = 0;
	if (evrdma_srq_set_limit(fk_srq, 0, NULL, NULL) < 0 && errno == EPERM)
		got |= FK_SRQ_REFUSED;
	event_base_free(eb2);
	/* write, flush and free the inherited channels, free the rest, and
	 * run the parent's loop as libevent allows after fork */
	seen = p->cli.nevent + p->cli.nread + p->cli.nwrite +
	    p->srv->nevent + p->srv->nread + p->srv->nwrite;
	errno = 0;
	if (evrdma_channel_write(p->cli.ch, "child", 5) < 0 &&
	    errno == EPERM && !evrdma_channel_reserve(p->cli.ch, 8) &&
	    evrdma_channel_flush(p->cli.ch) < 0 && errno == EPERM &&
	    evrdma_channel_read(p->srv->ch, other, sizeof(other)) == 0)
		got |= FK_CHAN_REFUSED;
	evrdma_channel_free(p->srv->ch);
	evrdma_channel_free(p->cli.ch);
	evrdma_conn_free(dp->cli);
	evrdma_srq_free(fk_srq);
	evrdma_mr_free(r->mr);
	evrdma_listener_free(p->l.lst);
	evrdma_listener_free(dp->lst);
	evrdma_base_free(env->base);
	event_reinit(env->eb);
	for (i = 0; i < 50; i++) {
		event_base_loop(env->eb, EVLOOP_NONBLOCK);
			usleep(2000);
	}
	if (seen == p->cli.nevent + p->cli.nread + p->cli.nwrite +
	    p->srv->nevent + p->srv->nread + p->srv->nwrite && !w.done)
		got |= FK_NO_CALLBACK;
	return got;
}

/*
 * A child that does everything wrong with what it inherited: reads a
 * channel's buffer (it is not there), writes over memory the parent
 * registered (its own copy), registers, posts and creates a base (EPERM),
 * writes to, reads from and flushes the parent's channels (EPERM), frees
 * them and the parent's connections,
 * listeners and base, and runs the parent's event_base. The parent's
 * peers see none of it: the region still reads as the parent wrote it,
 * and both channels carry data both ways, byte for byte.
 */
START_TEST(fork_child_misuses_inheritance)
{
	struct dt_env env;
	struct chp p;
	struct dt_pair dp;
	struct fk_region r;
	struct evrdma_mr *lmr;
	uint8_t *local;
	uint8_t *ring;
	int fds[2], got = 0;
	pid_t pid;

	memset(&p, 0, sizeof(p));
	memset(&dp, 0, sizeof(dp));
	memset(&r, 0, sizeof(r));
	r.mem = aligned_alloc(4096, 4096);
	local = aligned_alloc(4096, 4096);
	ck_assert(r.mem && local);
	memset(r.mem, 'P', 4096);
	dt_env_init(&env, NULL);
	dp.prepare = fk_prepare;
	dp.prepare_arg = &r;
	dt_pair_connect(&dp, &env, dt_addr(), 1);
	lmr = evrdma_mr_reg(dp.cli, local, 4096, EVRDMA_ACCESS_LOCAL_WRITE);
	ck_assert_ptr_nonnull(lmr);
	fk_read_expect(&env, &dp, &r, lmr, local, 'P');
	chp_open(&p, &env, EVRDMA_CHANNEL_STREAM, 1);
	ep_xfer(&env, &p.cli, p.srv, 256 * KiB, 20000);
	ring = evrdma_channel_reserve(p.cli.ch, 64);
	ck_assert_ptr_nonnull(ring);
	fk_srq = evrdma_srq_new(env.base, NULL, 16);
	ck_assert_ptr_nonnull(fk_srq);
	ck_assert_int_eq(evrdma_srq_set_limit(fk_srq, 4, fk_limit_cb, NULL),
	    0);

	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		got = fk_child(&env, &p, &dp, &r, lmr, ring);
		if (write(fds[1], &got, sizeof(got)) != sizeof(got))
			_exit(2);
		_exit(0);
	}
	close(fds[1]);
	ck_assert_int_eq(fk_wait(pid), 0);
	ck_assert_int_eq(read(fds[0], &got, sizeof(got)), sizeof(got));
	close(fds[0]);
	ck_assert_msg(got == FK_ALL, "the child saw 0x%x, not 0x%x", got,
	    FK_ALL);

	/* the parent's region is as it wrote it, and the device sees what it
	 * writes next */
	fk_read_expect(&env, &dp, &r, lmr, local, 'P');
	memset(r.mem, 'Q', 4096);
	fk_read_expect(&env, &dp, &r, lmr, local, 'Q');
	/* the reservation made before the fork goes out as reserved */
	pat_fill(ring, p.cli.tx_total, 64, p.cli.tx_seed);
	ck_assert_int_eq(evrdma_channel_commit(p.cli.ch, 64), 0);
	p.cli.tx_total += 64;
	p.cli.tx_queued += 64;
	CH_WAIT(env.eb, p.srv->rx == p.cli.tx_total || p.srv->ends, 10000);
	ck_assert_uint_eq(p.srv->rx, p.cli.tx_total);
	ep_xfer(&env, &p.cli, p.srv, 1 * MiB, 20000);
	ep_xfer(&env, p.srv, &p.cli, 1 * MiB, 20000);
	ck_assert_int_eq(p.cli.ends + p.srv->ends, 0);
	ck_assert_int_eq(dp.cli_events, 1);	/* CONNECTED only */
	ck_assert_int_eq(dp.srv_events, 0);

	evrdma_mr_free(lmr);
	evrdma_mr_free(r.mr);
	evrdma_conn_free(dp.cli);
	evrdma_conn_free(dp.srv);
	evrdma_listener_free(dp.lst);
	evrdma_srq_free(fk_srq);
	chp_close(&p);	/* (waits for both pairs) */
	dt_env_fini(&env);
	dt_assert_no_rdma_resources();
	free(r.mem);
	free(local);
}
END_TEST

/*
 * A daemon: the base is created, the process forks, the parent leaves and
 * the child serves with the base it inherited, since nothing of RDMA had
 * been opened yet.
 */
START_TEST(fork_daemon_serves_from_child)
{
	struct dt_env env;
	pid_t pid;

	dt_env_init(&env, NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct chp p;

		event_reinit(env.eb);
		memset(&p, 0, sizeof(p));
		chp_open(&p, &env, EVRDMA_CHANNEL_STREAM, 1);
		ep_xfer(&env, &p.cli, p.srv, 4 * MiB, 20000);
		ep_xfer(&env, p.srv, &p.cli, 4 * MiB, 20000);
		ck_assert_int_eq(p.cli.ends + p.srv->ends, 0);
		chp_close(&p);
		dt_env_fini(&env);
		_exit(0);
	}
	ck_assert_int_eq(fk_wait(pid), 0);
	/* the parent's base, never used, goes as usual */
	dt_env_fini(&env);
}
END_TEST

Suite *
dt_suite_fork(void)
{
	Suite *s = suite_create("device-fork");
	TCase *tc = tcase_create("fork");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, fork_exec_and_exit_mid_transfer);
	tcase_add_test(tc, fork_child_misuses_inheritance);
	tcase_add_test(tc, fork_daemon_serves_from_child);
	suite_add_tcase(s, tc);
	return s;
}
