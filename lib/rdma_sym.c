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

/* Tests name a missing library through these to exercise the ENOSYS path. */
static const char *
lib_name(const char *env, const char *dflt)
{
	const char *v = getenv(env);
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
