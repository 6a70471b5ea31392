/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: evrdma-info on the test device (rxe0 on rdma0 with
 * 192.0.2.1 and 2001:db8::1 in the Soft-RoCE guest) lists it, its ACTIVE
 * Ethernet port, the netdev and addresses, and says that a base uses
 * RDMA, in text and in JSON; and a channel pins what it reports.
 */
#include "config.h"

#include "devtest.h"
#include "chtest.h"
#include "infotest.h"

#define TI_OUT	(256 * 1024)

static const char *
ti_netdev(void)
{
	const char *n = getenv("EVRDMA_TEST_NETDEV");

	return n && *n ? n : "rdma0";
}

START_TEST(info_device_text)
{
	char *out = malloc(TI_OUT), want[256];

	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(ti_run(out, TI_OUT, "", "", 0), 0);
	ck_assert_ptr_nonnull(strstr(out, "\nrdma_cm:        "
	    "/dev/infiniband/rdma_cm opens\n"));
	snprintf(want, sizeof(want), "\n  %s: ", dt_ibdev());
	ck_assert_msg(strstr(out, want) != NULL, "no %s in:\n%s", want, out);
	ck_assert_ptr_nonnull(strstr(out, "rdma-core opens it\n    port 1: "
	    "ACTIVE (LinkUp), Ethernet, MTU "));
	snprintf(want, sizeof(want), "\n      netdev %s: up, carrier, ",
	    ti_netdev());
	ck_assert_msg(strstr(out, want) != NULL, "no %s in:\n%s", want, out);
	snprintf(want, sizeof(want), " %s ", dt_addr());
	ck_assert_msg(strstr(out, want) != NULL, "no %s in:\n%s", want, out);
	TI_LINE(out, "  default configuration: an RDMA base");
	TI_LINE(out, "  with evrdma_config_set_tcp_fallback(): an RDMA base");
	snprintf(want, sizeof(want), "\nRDMA is available: evrdma_base_new() "
	    "makes RDMA bases; ACTIVE: %s port 1 (%s", dt_ibdev(), dt_addr());
	ck_assert_msg(strstr(out, want) != NULL, "no %s in:\n%s", want, out);
	free(out);
}
END_TEST

START_TEST(info_device_json)
{
	char *out = malloc(TI_OUT), key[256], v[256];
	char dev[128], port[192], nd[256];

	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(ti_run(out, TI_OUT, "", "--json", 1), 0);
	TI_LINE(out, "rdma_core.loaded=true");
	TI_LINE(out, "rdma_cm.usable=true");
	snprintf(dev, sizeof(dev), "devices.%s", dt_ibdev());
	TI_LINE(out, "%s.in_kernel=true", dev);
	TI_LINE(out, "%s.in_rdma_core=true", dev);
	TI_LINE(out, "%s.opened=true", dev);
	TI_LINE(out, "%s.error=null", dev);
	snprintf(port, sizeof(port), "%s.ports.1", dev);
	TI_LINE(out, "%s.state=ACTIVE", port);
	TI_LINE(out, "%s.link_layer=Ethernet", port);
	/* the MTUs come from rdma-core: at least 256 */
	snprintf(key, sizeof(key), "%s.active_mtu", port);
	ck_assert(ti_value(out, key, v, sizeof(v)));
	ck_assert_int_ge(atoi(v), 256);
	snprintf(key, sizeof(key), "%s.max_mtu", port);
	ck_assert(ti_value(out, key, v, sizeof(v)));
	ck_assert_int_ge(atoi(v), 256);
	snprintf(nd, sizeof(nd), "%s.netdevs.%s", port, ti_netdev());
	TI_LINE(out, "%s.up=true", nd);
	TI_LINE(out, "%s.running=true", nd);
	TI_LINE(out, "%s.addresses[]=%s", nd, dt_addr());
	TI_LINE(out, "%s.addresses[]=%s", nd, dt_addr6());
	/* the RoCE v2 GID of the IPv4 address, on that netdev */
	snprintf(key, sizeof(key), ".gid=::ffff:%s\n", dt_addr());
	ck_assert_msg(strstr(out, key) != NULL, "no %s in:\n%s", key, out);
	snprintf(key, sizeof(key), ".type=RoCE v2\n");
	ck_assert_msg(strstr(out, key) != NULL, "no %s in:\n%s", key, out);
	snprintf(key, sizeof(key), ".netdev=%s\n", ti_netdev());
	ck_assert_msg(strstr(out, key) != NULL, "no %s in:\n%s", key, out);
	TI_LINE(out, "base.default.result=rdma");
	TI_LINE(out, "base.default.error=null");
	TI_LINE(out, "base.tcp_fallback.result=rdma");
	TI_LINE(out, "rdma.available=true");
	TI_LINE(out, "rdma.active_ports[]=%s/1", dt_ibdev());
	TI_LINE(out, "rdma.fix=[]");	/* nothing to fix */
	free(out);
}
END_TEST

/* Locked memory in kB (VmPin: what registrations pin). */
static long
ti_vmpin_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "re");

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %ld kB", &kb) == 1)
			break;
	fclose(f);
	ck_assert_int_ge(kb, 0);
	return kb;
}

/* What evrdma_config_get_channel_pinned() says (and evrdma-info reports)
 * is what the kernel counts: a connected channel pair of the default
 * configuration, both ends in this process, pins twice that. */
START_TEST(info_device_channel_pinned)
{
	size_t pinned = evrdma_config_get_channel_pinned(NULL);
	struct dt_env env;
	struct evrdma_stats st;
	struct chp p;
	long before;

	memset(&p, 0, sizeof(p));
	dt_env_init(&env, NULL);
	before = ti_vmpin_kb();
	chp_open(&p, &env, EVRDMA_CHANNEL_STREAM, 1);
	/* (and the warm sets the listener may have made ahead) */
	evrdma_base_get_stats(env.base, &st, sizeof(st));
	ck_assert_int_eq(ti_vmpin_kb() - before, (long)((2 * pinned +
	    st.warm_bytes) / 1024));
	chp_close(&p);
	ch_drain(&env, 20000);
	/* what stays pinned is the warm sets' (evrdma_config_set_warm()),
	 * as counted */
	evrdma_base_get_stats(env.base, &st, sizeof(st));
	ck_assert_int_eq(ti_vmpin_kb() - before, (long)(st.warm_bytes / 1024));
	dt_env_fini(&env);
}
END_TEST

Suite *
dt_suite_info(void)
{
	Suite *s = suite_create("device-info");
	TCase *tc = tcase_create("info");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, info_device_text);
	tcase_add_test(tc, info_device_json);
	tcase_add_test(tc, info_device_channel_pinned);
	suite_add_tcase(s, tc);
	return s;
}
