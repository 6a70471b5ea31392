/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma host tests: the rings' registry (lib/rings.c), compiled in. What
 * is tested is the order of the passes that a poll's completions make due:
 * each owner's once, in the order they were first asked, at the poll's end
 * (evrdma__rings_run()); an owner that goes before its pass ran is
 * skipped and told so; a pass may make others due, or end them. The
 * device suites run the same registry under real traffic.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "evrdma-internal.h"

#define NOWN	4

static struct evrdma_base base;
static uint64_t tag[NOWN];
static int order[16], norder;
/* what owner i's pass does besides noting that it ran */
static int ready_in_pass[NOWN], del_in_pass[NOWN];

static void
o_complete(void *owner, const struct ibv_wc *wc, unsigned idx)
{
	(void)owner, (void)wc, (void)idx;
}

static int owners[NOWN];

static void
o_pass_rec(void *owner)
{
	int i = (int)((int *)owner - owners);

	ck_assert_int_lt(norder, 16);
	order[norder++] = i;
	if (ready_in_pass[i] >= 0)
		evrdma__rings_ready(&base.rings, tag[ready_in_pass[i]]);
	if (del_in_pass[i] >= 0)
		ck_assert_int_eq(evrdma__rings_del(&base,
		    tag[del_in_pass[i]]), 1);
}

static const struct evrdma__rings_ops ops = {
	.complete = { o_complete },
	.pass = o_pass_rec,
};

static void
setup(void)
{
	int i;

	memset(&base, 0, sizeof(base));
	evrdma__rings_init(&base.rings);
	for (i = 0; i < NOWN; i++) {
		tag[i] = evrdma__rings_add(&base, &ops, &owners[i]);
		ck_assert(tag[i] != 0);
		ready_in_pass[i] = del_in_pass[i] = -1;
	}
	norder = 0;
}

static void
teardown(void)
{
	evrdma__rings_fini(&base);
}

/* The passes ran in the order @p want, @p n of them, and no others. */
static void
check_order(const int *want, int n)
{
	int i;

	ck_assert_int_eq(norder, n);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(order[i], want[i]);
}

/* Owners 0 to @p n - 1 ask for their pass, in that order. */
static void
ready_first(int n)
{
	int i;

	for (i = 0; i < n; i++)
		evrdma__rings_ready(&base.rings, tag[i]);
}

START_TEST(passes_in_the_order_asked_once_each)
{
	evrdma__rings_ready(&base.rings, tag[2]);
	evrdma__rings_ready(&base.rings, tag[0]);
	evrdma__rings_ready(&base.rings, tag[2]);
	evrdma__rings_ready(&base.rings, tag[3]);
	evrdma__rings_ready(&base.rings, tag[0]);
	evrdma__rings_run(&base.rings);
	check_order((const int[]){ 2, 0, 3 }, 3);
	/* the list is empty, and may fill again */
	evrdma__rings_run(&base.rings);
	ck_assert_int_eq(norder, 3);
	evrdma__rings_ready(&base.rings, tag[3]);
	evrdma__rings_run(&base.rings);
	check_order((const int[]){ 2, 0, 3, 3 }, 4);
}
END_TEST

/* head, middle and tail of the list: each unlinked, the rest run */
START_TEST(an_owner_gone_is_skipped_and_told)
{
	int gone = _i, i, k = 0;

	ready_first(NOWN);
	ck_assert_int_eq(evrdma__rings_del(&base, tag[gone]), 1);
	/* (gone already: nothing due) */
	ck_assert_int_eq(evrdma__rings_del(&base, tag[gone]), 0);
	evrdma__rings_run(&base.rings);
	ck_assert_int_eq(norder, NOWN - 1);
	for (i = 0; i < NOWN; i++)
		if (i != gone)
			ck_assert_int_eq(order[k++], i);
	/* its entry serves a new owner, with nothing due */
	tag[gone] = evrdma__rings_add(&base, &ops, &owners[gone]);
	ck_assert(tag[gone] != 0);
	evrdma__rings_run(&base.rings);
	ck_assert_int_eq(norder, NOWN - 1);
	ck_assert_int_eq(evrdma__rings_del(&base, tag[gone]), 0);
}
END_TEST

/* a pass makes another due (a poll inside it): one not due yet joins
 * the end of this run, one due already runs once */
START_TEST(a_pass_makes_others_due)
{
	ready_in_pass[0] = 1;	/* due already */
	ready_in_pass[1] = 3;	/* not due */
	ready_first(3);
	evrdma__rings_run(&base.rings);
	check_order((const int[]){ 0, 1, 2, 3 }, 4);
}
END_TEST

/* a pass ends an owner due after it (its channel freed): skipped */
START_TEST(a_pass_ends_one_due_later)
{
	del_in_pass[0] = 2;
	ready_first(3);
	evrdma__rings_run(&base.rings);
	check_order((const int[]){ 0, 1 }, 2);
}
END_TEST

static Suite *
rings_suite(void)
{
	Suite *s = suite_create("rings");
	TCase *tc = tcase_create("ready");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, passes_in_the_order_asked_once_each);
	tcase_add_loop_test(tc, an_owner_gone_is_skipped_and_told, 0, NOWN);
	tcase_add_test(tc, a_pass_makes_others_due);
	tcase_add_test(tc, a_pass_ends_one_due_later);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	setenv("EVRDMA_LOG", "off", 0);
	sr = srunner_create(rings_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
