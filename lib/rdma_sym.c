/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: loading rdma-core at run time.
 *
 * The library does not link libibverbs or librdmacm. They are dlopen()ed on
 * first use, so a program linked with evrdma starts on a host without
 * rdma-core and gets ENOSYS from the evrdma call that needs it (as brpc's
 * RDMA support does). This is the only file that knows symbol names.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evrdma-internal.h"

struct evrdma_rdma_syms evrdma__syms;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_errno;
static char load_msg[512];
static void *ibv_lib, *cm_lib;	/* for evrdma_rdma_sym() */

/* ---- fork ----
 * A child shares the parent's kernel RDMA handles (the uverbs and rdma_cm
 * files) and the queues the device maps into both: a child that posted,
 * polled or destroyed through them would change the parent's connections,
 * and rdma-core's own state in the child describes the parent's devices.
 * So a child of a process that had opened RDMA objects does no RDMA through
 * evrdma at all; a child of one that had not (a daemon that forks after
 * evrdma_base_new() and before serving) starts fresh. The memory side is
 * handled where it is allocated (rings are MADV_DONTFORK) and by the
 * kernel's copy-on-fork of pinned pages (or ibv_fork_init() where the
 * kernel lacks it, below). */
int evrdma__forked;
static int rdma_opened;

static void
atfork_child(void)
{
	if (rdma_opened)
		evrdma__forked = 1;
}

void
evrdma__rdma_opened(void)
{
	rdma_opened = 1;
}

/* Before Linux 5.13 a child that wrote to a page registered by its parent
 * could take the page away from the device (copy-on-write gives the parent
 * the copy); rdma-core's fork support prevents that. It must come before
 * any RDMA object exists, which load time is. */
static void
fork_setup(void)
{
	enum ibv_fork_status st = evrdma__syms.ibv_is_fork_initialized();

	if (st == IBV_FORK_DISABLED && evrdma__syms.ibv_fork_init())
		evrdma__log(EVRDMA_LOG_WARN, "ibv_fork_init failed (RDMA "
		    "objects exist already): a child that writes to memory "
		    "registered by this process may corrupt transfers");
	pthread_atfork(NULL, NULL, atfork_child);
}

/* EVRDMA_LIBIBVERBS and EVRDMA_LIBRDMACM name other files to load
 * (evrdma/util.h: an rdma-core of one's own; the tests name a missing
 * one). Not a test knob of testhooks.c, as they name what is loaded, not
 * how the library behaves; but what a set-user-ID program loads is not
 * its invoker's to choose: secure_getenv(), as the dynamic loader ignores
 * LD_LIBRARY_PATH there. */
static const char *
lib_name(const char *env, const char *dflt)
{
	const char *v = secure_getenv(env);
	return (v && *v) ? v : dflt;
}

static void *
open_lib(const char *name, const char *pkg)
{
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h && !load_errno) {
		load_errno = ENOSYS;
		snprintf(load_msg, sizeof(load_msg),
		    "cannot load %s (%s): install the Debian package %s",
		    name, dlerror(), pkg);
	}
	return h;
}

static void
load_all(void)
{
	const char *ibv_name = lib_name("EVRDMA_LIBIBVERBS", "libibverbs.so.1");
	const char *cm_name = lib_name("EVRDMA_LIBRDMACM", "librdmacm.so.1");
	void *ibv = open_lib(ibv_name, "libibverbs1");
	void *cm = ibv ? open_lib(cm_name, "librdmacm1") : NULL;
	void *sym;

	if (!ibv || !cm)
		goto fail;
#define EVRDMA_SYM_LOAD(lib, ret, name, args)				\
	sym = dlsym(lib, #name);					\
	if (!sym) {							\
		load_errno = ENOSYS;					\
		snprintf(load_msg, sizeof(load_msg),			\
		    "%s has no symbol %s: rdma-core is too old",	\
		    lib == ibv ? ibv_name : cm_name, #name);		\
		goto fail;						\
	}								\
	memcpy(&evrdma__syms.name, &sym, sizeof(sym));
	EVRDMA_IBV_SYMS(EVRDMA_SYM_LOAD)
	EVRDMA_RDMACM_SYMS(EVRDMA_SYM_LOAD)
#undef EVRDMA_SYM_LOAD
	sym = dlsym(ibv, "ibv_query_port");
	if (!sym) {
		load_errno = ENOSYS;
		snprintf(load_msg, sizeof(load_msg),
		    "%s has no symbol ibv_query_port", ibv_name);
		goto fail;
	}
	memcpy(&evrdma__syms.ibv_query_port_compat, &sym, sizeof(sym));
	sym = dlsym(ibv, "ibv_reg_mr_iova2");
	if (sym)
		memcpy(&evrdma__syms.ibv_reg_mr_iova2, &sym, sizeof(sym));
	fork_setup();
	ibv_lib = ibv;
	cm_lib = cm;
	return;
fail:
	/* Keep the handles: dlclose of a half-used verbs library is unsafe
	 * and the process is free to retry nothing anyway. */
	memset(&evrdma__syms, 0, sizeof(evrdma__syms));
	if (ibv && !cm)
		dlclose(ibv);
}

int
evrdma__rdma_load(void)
{
	pthread_once(&load_once, load_all);
	if (load_errno) {
		evrdma__set_errmsg("%s", load_msg);
		errno = load_errno;
		return -1;
	}
	return 0;
}

int
evrdma_rdma_load(void)
{
	return evrdma__rdma_load();
}

void *
evrdma_rdma_sym(const char *name)
{
	void *sym;

	if (!name) {
		evrdma__fail(EINVAL, "evrdma_rdma_sym: no name");
		return NULL;
	}
	if (evrdma__rdma_load() < 0)
		return NULL;
	if ((sym = dlsym(ibv_lib, name)) || (sym = dlsym(cm_lib, name)))
		return sym;
	evrdma__fail(ENOENT, "evrdma_rdma_sym: neither libibverbs nor "
	    "librdmacm has %s", name);
	return NULL;
}

int
evrdma__query_port(struct ibv_context *ctx, uint8_t port,
    struct ibv_port_attr *attr)
{
	struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);

	memset(attr, 0, sizeof(*attr));
	if (vctx)
		return vctx->query_port(ctx, port, attr, sizeof(*attr));
	return evrdma__syms.ibv_query_port_compat(ctx, port, attr);
}
