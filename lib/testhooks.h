/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: the test knobs (testhooks.c). The environment is read only in
 * the library the test programs link (lib/libevrdma-test.la); in the
 * installed one each knob reads as unset.
 */
#ifndef EVRDMA_TESTHOOKS_H_INCLUDED_
#define EVRDMA_TESTHOOKS_H_INCLUDED_

/* EVRDMA_TEST_SLOW_PATH=1, read at evrdma_base_new(): channels take the
 * general path where a fast one exists (struct evrdma_config's
 * slow_path). */
int evrdma__config_slow_path(void);
/* EVRDMA_TEST_FAIL_POST_SEND=k, k+ or k!, read at evrdma_base_new(): the
 * base's k-th post of sends is refused, and with "+" every later one too;
 * with "!" it goes, and then its QP is moved to the error state, as a
 * device's fault does, mid-burst (ep_post_send). k, 0 when unset; *@p on
 * 1 for "+", 2 for "!". */
unsigned evrdma__config_fail_post_send(int *on);
/* EVRDMA_BEV_ADAPTER=1, read at each call: on a base without RDMA,
 * adapters over TCP rather than plain socket bufferevents, so that the
 * host's tests run the adapter. */
int evrdma__bev_tcp_adapters(void);
/* EVRDMA_TEST_RESOLV_CONF: the resolv.conf of a base's own resolver in
 * place of /etc/resolv.conf; NULL when unset. */
const char *evrdma__test_resolv_conf(void);

#endif /* EVRDMA_TESTHOOKS_H_INCLUDED_ */
