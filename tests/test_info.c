/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma host tests: evrdma-info on a host without RDMA. It says so, with
 * the reason evrdma_base_new() gives and the commands that would give it
 * RDMA, in text and in JSON that parses and has the documented members,
 * and exits 3; without rdma-core it exits 2.
 * (On a host with RDMA these cases return at once: the device suite
 * "device-info" covers it.)
 */
#include "config.h"

#include <errno.h>
#include <unistd.h>

#include <event2/event.h>
#include <evrdma.h>

#include "testutil.h"
#include "infotest.h"

#define TI_OUT	65536
#define TI_MISSING	"EVRDMA_LIBIBVERBS=libdoesnotexist.so.1"

/* What evrdma_base_new() says here, as the tool must report it. */
static void
ti_base_error(char *msg, size_t size, int *err)
{
	struct event_base *eb = event_base_new();

	ck_assert_ptr_nonnull(eb);
	errno = 0;
	ck_assert_ptr_null(evrdma_base_new(eb, NULL));
	*err = errno;
	snprintf(msg, size, "%s", evrdma_errmsg());
	event_base_free(eb);
}

START_TEST(info_text_no_rdma)
{
	char *out = malloc(TI_OUT), why[512];
	int err;

	ck_assert_ptr_nonnull(out);
	if (tu_have_rdma_cm() || evrdma_rdma_load() < 0) {
		free(out);
		return;	/* RDMA here, or no rdma-core: other cases */
	}
	ti_base_error(why, sizeof(why), &err);
	ck_assert_int_eq(err, ENODEV);
	ck_assert_int_eq(ti_run(out, TI_OUT, "", "", 0), 3);
	TI_LINE(out, "RDMA is not available on this host: %s", why);
	/* the commands that fix it, Soft-RoCE where the kernel has no
	 * device, before the verdict (still the last line) */
	ck_assert_ptr_nonnull(strstr(out, "\nto make it available (as root;"));
	if (access("/sys/class/infiniband", F_OK) != 0) {
		TI_LINE(out, "  modprobe rdma_rxe");
		ck_assert_ptr_nonnull(strstr(out, "\n  rdma link add rxe0 type "
		    "rxe netdev "));
	}
	TI_LINE(out, "  modprobe rdma_ucm");
	ck_assert_ptr_nonnull(strstr(out, "tests/vm/evrdma-vm"));
	ck_assert_ptr_nonnull(strstr(strstr(out, "\nto make it available"),
	    "\nRDMA is not available on this host: "));
	/* a kernel without RDMA cannot say how it forks: not "did not say" */
	ck_assert_ptr_null(strstr(out, "the kernel did not say"));
	TI_LINE(out, "  default configuration: fails with ENODEV: %s", why);
	ck_assert_ptr_nonnull(strstr(out, "\nrdma-core:      loaded\n"));
	ck_assert_ptr_nonnull(strstr(out, "  libibverbs:   /"));
	ck_assert_ptr_nonnull(strstr(out, "rdma_cm:        "
	    "/dev/infiniband/rdma_cm cannot be opened: "));
	ck_assert_ptr_nonnull(strstr(out, "a base whose bufferevents use "
	    "TCP, because ENODEV"));
	free(out);
}
END_TEST

/* Every documented member is there (a device's are the device suite's). */
static const char *const ti_members[] = {
	"evrdma_version", "rdma_core.loaded", "rdma_core.error",
	"rdma_cm.path", "rdma_cm.present", "rdma_cm.usable", "rdma_cm.error",
	"devices_error", "memlock.limit", "memlock.hard_limit",
	"memlock.cap_ipc_lock", "memlock.channel_bytes", "memlock.channels",
	"memlock.warm_sets",
	"fork.RDMAV_FORK_SAFE", "fork.IBV_FORK_SAFE",
	"fork.ibv_is_fork_initialized", "fork.evrdma",
	"base.default.result", "base.default.errno", "base.default.error",
	"base.tcp_fallback.result", "base.tcp_fallback.errno",
	"base.tcp_fallback.error", "rdma.available", "rdma.reason",
};

static void
ti_members_check(const char *out)
{
	char v[512];

	for (size_t i = 0; i < sizeof(ti_members) / sizeof(ti_members[0]); i++)
		ck_assert_msg(ti_value(out, ti_members[i], v, sizeof(v)),
		    "no member %s in:\n%s", ti_members[i], out);
}

START_TEST(info_json_no_rdma)
{
	char *out = malloc(TI_OUT), why[512], v[512];
	int err;

	ck_assert_ptr_nonnull(out);
	if (tu_have_rdma_cm() || evrdma_rdma_load() < 0) {
		free(out);
		return;
	}
	ti_base_error(why, sizeof(why), &err);
	ck_assert_int_eq(ti_run(out, TI_OUT, "", "--json", 1), 3);
	ti_members_check(out);
	TI_LINE(out, "evrdma_version=%s", evrdma_version());
	TI_LINE(out, "rdma_core.loaded=true");
	ck_assert(ti_value(out, "rdma_core.libibverbs.path", v, sizeof(v)));
	ck_assert_ptr_nonnull(strstr(v, "libibverbs.so"));
	ck_assert(ti_value(out, "rdma_core.librdmacm.file", v, sizeof(v)));
	ck_assert_ptr_nonnull(strstr(v, "librdmacm.so"));
	TI_LINE(out, "rdma_cm.usable=false");
	TI_LINE(out, "devices=[]");
	TI_LINE(out, "memlock.channel_bytes=%zu",
	    evrdma_config_get_channel_pinned(NULL));
	TI_LINE(out, "base.default.result=fails");
	TI_LINE(out, "base.default.errno=ENODEV");
	TI_LINE(out, "base.default.error=%s", why);
	TI_LINE(out, "base.tcp_fallback.result=tcp");
	TI_LINE(out, "rdma.available=false");
	TI_LINE(out, "rdma.reason=%s", why);
	TI_LINE(out, "rdma.active_ports=[]");
	TI_LINE(out, "rdma.fix[]=modprobe rdma_ucm");
	if (access("/sys/class/infiniband", F_OK) != 0)
		TI_LINE(out, "rdma.fix[]=modprobe rdma_rxe");
	free(out);
}
END_TEST

/* Without rdma-core (evrdma cannot load it): said plainly, exit 2, in
 * both forms. */
START_TEST(info_no_rdma_core)
{
	char *out = malloc(TI_OUT);

	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(ti_run(out, TI_OUT, TI_MISSING, "", 0), 2);
	ck_assert_ptr_nonnull(strstr(out, "\nRDMA is not available on this "
	    "host: rdma-core cannot be loaded: cannot load "
	    "libdoesnotexist.so.1"));
	ck_assert_ptr_nonnull(strstr(out, "install the Debian package "
	    "libibverbs1\n"));
	ck_assert_ptr_nonnull(strstr(out, "fails with ENOSYS: "));
	TI_LINE(out, "  apt-get install rdma-core ibverbs-providers libibverbs1 "
	    "librdmacm1");
	ck_assert_int_eq(ti_run(out, TI_OUT, TI_MISSING, "--json", 1), 2);
	ti_members_check(out);
	TI_LINE(out, "rdma_core.loaded=false");
	TI_LINE(out, "rdma_core.libibverbs=null");
	TI_LINE(out, "base.default.errno=ENOSYS");
	TI_LINE(out, "base.tcp_fallback.result=tcp");
	TI_LINE(out, "base.tcp_fallback.errno=ENOSYS");
	TI_LINE(out, "rdma.available=false");
	TI_LINE(out, "rdma.fix[]=apt-get install rdma-core ibverbs-providers "
	    "libibverbs1 librdmacm1");
	ck_assert_ptr_nonnull(strstr(out, "\nrdma.reason=rdma-core cannot be "
	    "loaded: cannot load libdoesnotexist.so.1"));
	free(out);
}
END_TEST

/* The report was made: RDMA (0), no rdma-core (2), no RDMA (3); not 1. */
static int
ti_made(int status)
{
	return status == 0 || status == 2 || status == 3;
}

/* The memlock limit against what a channel pins: with 8 MiB and no
 * CAP_IPC_LOCK (root drops it through setpriv), 8 MiB / channel_bytes
 * channels fit; with CAP_IPC_LOCK, any number (null). */
START_TEST(info_memlock)
{
	const char *drop = geteuid() == 0 ? "setpriv --bounding-set=-ipc_lock "
	    "-- " : "";
	size_t pinned = evrdma_config_get_channel_pinned(NULL);
	char *out = malloc(TI_OUT), prefix[256];

	ck_assert_ptr_nonnull(out);
	if (*drop && access("/usr/bin/setpriv", X_OK) != 0) {
		fprintf(stderr, "info_memlock: no setpriv (util-linux) to "
		    "drop CAP_IPC_LOCK: not checked\n");
		free(out);
		return;
	}
	snprintf(prefix, sizeof(prefix), "%ssh -c 'ulimit -S -l 8192 && "
	    "exec \"$@\"' sh", drop);
	/* (2 or 3 where rdma-core or RDMA is missing: the memlock part
	 * stands) */
	ck_assert(ti_made(ti_run(out, TI_OUT, prefix, "--json", 1)));
	TI_LINE(out, "memlock.cap_ipc_lock=false");
	TI_LINE(out, "memlock.limit=%d", 8 << 20);
	TI_LINE(out, "memlock.channel_bytes=%zu", pinned);
	TI_LINE(out, "memlock.channels=%zu", (size_t)(8 << 20) / pinned);
	ck_assert(ti_made(ti_run(out, TI_OUT, prefix, "", 0)));
	TI_LINE(out, "  one channel of the default configuration pins %zu "
	    "KiB: %zu channels fit", pinned / 1024, (size_t)(8 << 20) / pinned);
	/* the process's own CAP_IPC_LOCK lifts the limit */
	if (*drop) {
		ck_assert(ti_made(ti_run(out, TI_OUT, "", "--json", 1)));
		TI_LINE(out, "memlock.cap_ipc_lock=true");
		TI_LINE(out, "memlock.channels=null");
	}
	free(out);
}
END_TEST

START_TEST(info_usage)
{
	char *out = malloc(TI_OUT);

	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(ti_run(out, TI_OUT, "", "--help", 0), 0);
	ck_assert_ptr_nonnull(strstr(out, "usage: evrdma-info [--json]"));
	ck_assert_ptr_nonnull(strstr(out, "2 rdma-core\ncould not be loaded"));
	ck_assert_ptr_nonnull(strstr(out, "3 rdma-core loads\nbut RDMA is not "
	    "available"));
	ck_assert_int_eq(ti_run(out, TI_OUT, "", "--version", 0), 0);
	TI_LINE(out, "evrdma-info (evrdma) %s", evrdma_version());
	ck_assert_int_eq(ti_run(out, TI_OUT, "", "--jsn", 0), 1);
	ck_assert_ptr_nonnull(strstr(out, "unknown argument --jsn"));
	free(out);
}
END_TEST

Suite *
ti_suite_host(void)
{
	Suite *s = suite_create("info");
	TCase *tc = tcase_create("info");

	/* a sanitizer build's tool starts slowly */
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, info_text_no_rdma);
	tcase_add_test(tc, info_json_no_rdma);
	tcase_add_test(tc, info_no_rdma_core);
	tcase_add_test(tc, info_memlock);
	tcase_add_test(tc, info_usage);
	suite_add_tcase(s, tc);
	return s;
}
