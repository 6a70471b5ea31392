/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the test knobs, environment variables that make the library
 * behave as the tests need (fail its posts, take its slow paths, make
 * adapters over TCP, read another resolv.conf). This file is built twice
 * (Makefile.am): into the installed libevrdma, where every knob reads as
 * unset and no environment variable changes what the library does, and,
 * with EVRDMA_TEST_HOOKS, into lib/libevrdma-test.la, which only the test
 * programs link. The rest of the library is one build for both.
 */
#include "config.h"

#include <stddef.h>
#ifdef EVRDMA_TEST_HOOKS
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#endif

#include "testhooks.h"

#ifdef EVRDMA_TEST_HOOKS

int
evrdma__config_slow_path(void)
{
	const char *v = getenv("EVRDMA_TEST_SLOW_PATH");

	return v && v[0] == '1';
}

unsigned
evrdma__config_fail_post_send(int *on)
{
	const char *v = getenv("EVRDMA_TEST_FAIL_POST_SEND");
	char *end;
	unsigned long k;

	*on = 0;
	if (!v || !*v)
		return 0;
	errno = 0;
	k = strtoul(v, &end, 10);
	if (*end == '+' || *end == '!') {
		*on = *end == '+' ? 1 : 2;
		end++;
	}
	if (errno || *end || k > UINT_MAX)
		return 0;
	return (unsigned)k;
}

int
evrdma__bev_tcp_adapters(void)
{
	const char *v = getenv("EVRDMA_BEV_ADAPTER");

	return v && v[0] == '1';
}

const char *
evrdma__test_resolv_conf(void)
{
	const char *v = getenv("EVRDMA_TEST_RESOLV_CONF");

	return v != NULL && *v ? v : NULL;
}

#else /* the installed library: no knob */

int
evrdma__config_slow_path(void)
{
	return 0;
}

unsigned
evrdma__config_fail_post_send(int *on)
{
	*on = 0;
	return 0;
}

int
evrdma__bev_tcp_adapters(void)
{
	return 0;
}

const char *
evrdma__test_resolv_conf(void)
{
	return NULL;
}

#endif /* EVRDMA_TEST_HOOKS */
