/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * NAME
 *	evrdma-info - why RDMA is or is not used on this host
 *
 * SYNOPSIS
 *	evrdma-info [--json]
 *	evrdma-info --help | --version
 *
 * DESCRIPTION
 *	Reports, in plain text or (--json) as one JSON object:
 *	whether rdma-core (libibverbs, librdmacm) loads and from which files;
 *	the RDMA devices and their ports (state, link layer, MTU, GIDs, and
 *	the netdevs and addresses under them) as the kernel and rdma-core see
 *	them; whether /dev/infiniband/rdma_cm opens; RLIMIT_MEMLOCK against
 *	what one channel of the default configuration pins; the fork-safety
 *	settings; and what evrdma_base_new() does here, without and with the
 *	TCP fallback. Its last line (text) or "rdma" member (JSON) says
 *	whether RDMA is available, and if not, why; where it is not, the
 *	lines before it (text) or "rdma"."fix" (JSON) give the commands
 *	that would make it so (rdma-core, Soft-RoCE, rdma_ucm, links).
 *	The exit status says it too. man/evrdma-info.1 is its manual.
 *	It goes through libevrdma, as any program linked with it does, so the
 *	answer is that program's. It needs no privileges, but RLIMIT_MEMLOCK
 *	and CAP_IPC_LOCK are this process's: run it as the service's user.
 *
 * JSON MEMBERS (null where unknown or not applicable)
 *	evrdma_version; rdma_core {loaded, error, libibverbs {path, file},
 *	librdmacm {path, file}}; rdma_cm {path, present, usable, error};
 *	devices_error; devices [{name, in_kernel, in_rdma_core, opened,
 *	error, node_type, fw_ver, node_guid, ports [{port, state,
 *	phys_state, link_layer, rate, active_mtu, max_mtu, gids [{index,
 *	gid, type, netdev}], netdevs [{name, up, running, mtu,
 *	addresses}]}]}]; memlock {limit, hard_limit (bytes; null:
 *	unlimited), cap_ipc_lock, channel_bytes, channels (null: no limit
 *	applies)}; fork {RDMAV_FORK_SAFE, IBV_FORK_SAFE,
 *	ibv_is_fork_initialized ("disabled", "enabled", "unneeded"), evrdma};
 *	base {default, tcp_fallback: {result ("rdma", "tcp", "fails"),
 *	errno, error}}; rdma {available, reason, active_ports ["dev/port"],
 *	fix ["command"]}.
 *
 * EXIT STATUS (the report is made in each case but 1)
 *	0	RDMA is available: evrdma_base_new() makes RDMA bases and a
 *		port is ACTIVE;
 *	1	bad usage, or the tool itself failed (out of memory, output);
 *	2	rdma-core could not be loaded: not installed, or too old for
 *		evrdma (evrdma_rdma_load() fails with ENOSYS);
 *	3	rdma-core loads, but RDMA is not available (no device, no
 *		ACTIVE port, rdma_cm missing, ...).
 *
 * ENVIRONMENT
 *	EVRDMA_LIBIBVERBS, EVRDMA_LIBRDMACM: the file names evrdma dlopens
 *	instead of libibverbs.so.1 and librdmacm.so.1 (for every program
 *	linked with evrdma, this one included). EVRDMA_LOG: the library's
 *	log on stderr, which this tool leaves off unless it is set.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <infiniband/verbs.h>
#include <evrdma.h>

#include "info.h"

#define CM_PATH		"/dev/infiniband/rdma_cm"
#define EXIT_NO_RDMA_CORE	2
#define EXIT_NO_RDMA		3
#define INFO_FIX_MAX	8

static const char usage[] =
    "usage: evrdma-info [--json]\n"
    "       evrdma-info --help | --version\n"
    "Tells why RDMA is or is not used on this host: rdma-core, the RDMA\n"
    "devices, ports and addresses, /dev/infiniband/rdma_cm, the memlock\n"
    "limit, fork safety, and what evrdma_base_new() does here.\n"
    "  --json     one JSON object instead of text\n"
    "  --help     this text\n"
    "  --version  evrdma's version\n"
    "Where RDMA is not available, it says why and the commands that would\n"
    "make it so.\n"
    "Exit status: 0 RDMA is available; 1 bad usage or failure; 2 rdma-core\n"
    "could not be loaded (not installed, or too old); 3 rdma-core loads\n"
    "but RDMA is not available (no device, no ACTIVE port, ...).\n"
    "EVRDMA_LIBIBVERBS and EVRDMA_LIBRDMACM name other files for evrdma to\n"
    "load instead of libibverbs.so.1 and librdmacm.so.1.\n";

struct info_lib {
	char path[PATH_MAX];	/* as the dynamic loader found it */
	char file[PATH_MAX];	/* with the symbolic links resolved */
};

/* What evrdma_base_new() did with one configuration. */
struct info_base {
	const char *result;	/* "rdma", "tcp", "fails" */
	int err;
	char error[512];
};

struct info {
	int loaded;
	char load_error[512];
	struct info_lib ibv, cm;
	int cm_present, cm_usable;
	char cm_error[256];
	struct info_devs devs;
	int limited;		/* RLIMIT_MEMLOCK is not infinite */
	unsigned long long limit, hard_limit;	/* bytes (if limited) */
	int hard_limited;
	int cap_ipc_lock;
	size_t channel_bytes;
	unsigned warm_sets;	/* cached per base by default */
	const char *rdmav_fork_safe, *ibv_fork_safe;
	const char *fork_status;	/* NULL: rdma-core not loaded */
	struct info_base base_default, base_fallback;
	int available;
	char reason[768];
	int cm_errno;			/* why rdma_cm does not open */
	/* the commands that would make RDMA available (as root) */
	char fix[INFO_FIX_MAX][192];
	unsigned nfix;
};

static const char fork_evrdma[] = "a child forked after its parent opened "
    "RDMA objects gets EPERM from evrdma (it should exec or exit); channel "
    "rings are left out of children (MADV_DONTFORK); evrdma calls "
    "ibv_fork_init() at load where the kernel needs it";

static const char *
errno_name(int err)
{
	switch (err) {
	case ENOSYS: return "ENOSYS";
	case ENODEV: return "ENODEV";
	case EPERM: return "EPERM";
	case EINVAL: return "EINVAL";
	case ENOMEM: return "ENOMEM";
	default: return "other";
	}
}

/* ---- finding out ---- */

static void
lib_where(struct info_lib *l, const char *fn)
{
	void *p = evrdma_rdma_sym(fn);
	Dl_info di;

	if (!p || !dladdr(p, &di) || !di.dli_fname)
		return;
	snprintf(l->path, sizeof(l->path), "%s", di.dli_fname);
	if (!realpath(di.dli_fname, l->file))
		l->file[0] = '\0';
}

static void
find_rdma_core(struct info *in)
{
	if (evrdma_rdma_load() < 0) {
		snprintf(in->load_error, sizeof(in->load_error), "%s",
		    evrdma_errmsg());
		return;
	}
	in->loaded = 1;
	lib_where(&in->ibv, "ibv_get_device_list");
	lib_where(&in->cm, "rdma_create_id");
}

static void
find_rdma_cm(struct info *in)
{
	struct stat st;
	int fd;

	in->cm_present = stat(CM_PATH, &st) == 0;
	fd = open(CM_PATH, O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		in->cm_usable = 1;
		close(fd);
		return;
	}
	in->cm_errno = errno;
	snprintf(in->cm_error, sizeof(in->cm_error), "%s%s", strerror(errno),
	    errno == ENOENT ? " (no RDMA in the kernel, or the rdma_ucm "
	    "module is not loaded)" : errno == EACCES ? " (rdma-core's udev "
	    "rules make it readable and writable by all)" : "");
}

/* CAP_IPC_LOCK lets registrations pass RLIMIT_MEMLOCK. */
static int
has_cap_ipc_lock(void)
{
	unsigned long long caps;
	char line[256];
	int found = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &caps) == 1) {
			found = (caps >> CAP_IPC_LOCK) & 1;
			break;
		}
	fclose(f);
	return found;
}

static void
find_memlock(struct info *in)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
		in->limited = rl.rlim_cur != RLIM_INFINITY;
		in->limit = rl.rlim_cur;
		in->hard_limited = rl.rlim_max != RLIM_INFINITY;
		in->hard_limit = rl.rlim_max;
	}
	in->cap_ipc_lock = has_cap_ipc_lock();
	in->channel_bytes = evrdma_config_get_channel_pinned(NULL);
	evrdma_config_get_warm(NULL, &in->warm_sets, NULL);
}

static void
find_fork(struct info *in)
{
	enum ibv_fork_status (*is_init)(void);
	void *p;

	in->rdmav_fork_safe = getenv("RDMAV_FORK_SAFE");
	in->ibv_fork_safe = getenv("IBV_FORK_SAFE");
	if (!in->loaded || !(p = evrdma_rdma_sym("ibv_is_fork_initialized")))
		return;
	memcpy(&is_init, &p, sizeof(p));
	switch (is_init()) {
	case IBV_FORK_DISABLED:
		in->fork_status = "disabled";
		break;
	case IBV_FORK_ENABLED:
		in->fork_status = "enabled";
		break;
	case IBV_FORK_UNNEEDED:
		in->fork_status = "unneeded";
		break;
	}
}

static void
try_base(struct event_base *eb, const struct evrdma_config *cfg,
    struct info_base *b)
{
	struct evrdma_base *base;

	errno = 0;
	base = evrdma_base_new(eb, cfg);
	if (!base) {
		b->result = "fails";
		b->err = errno;
		snprintf(b->error, sizeof(b->error), "%s", evrdma_errmsg());
		return;
	}
	b->result = "rdma";
	evrdma_base_free(base);
}

static int
find_base(struct info *in)
{
	struct event_base *eb = event_base_new();
	struct evrdma_config *cfg = evrdma_config_new();

	if (!eb || !cfg || evrdma_config_set_tcp_fallback(cfg, 1) < 0) {
		if (eb)
			event_base_free(eb);
		evrdma_config_free(cfg);
		return -1;
	}
	try_base(eb, NULL, &in->base_default);
	try_base(eb, cfg, &in->base_fallback);
	/* the fallback gives a base either way; only the failure of the
	 * first says it is a TCP one (the errors it falls back on) */
	if (!strcmp(in->base_fallback.result, "rdma") &&
	    strcmp(in->base_default.result, "rdma")) {
		in->base_fallback.result = "tcp";
		in->base_fallback.err = in->base_default.err;
		memcpy(in->base_fallback.error, in->base_default.error,
		    sizeof(in->base_fallback.error));
	}
	evrdma_config_free(cfg);
	event_base_free(eb);
	return 0;
}

/* Calls @p fn for every ACTIVE port that rdma-core can use. */
static unsigned
active_ports(const struct info *in, void (*fn)(const struct info_dev *,
    const struct info_port *, void *), void *arg)
{
	unsigned n = 0;

	for (unsigned i = 0; i < in->devs.n; i++) {
		const struct info_dev *dev = &in->devs.dev[i];

		for (unsigned p = 0; dev->opened && p < dev->nports; p++)
			if (!strcmp(dev->ports[p].state, "ACTIVE")) {
				if (fn)
					fn(dev, &dev->ports[p], arg);
				n++;
			}
	}
	return n;
}

static void
find_verdict(struct info *in)
{
	if (!in->loaded)
		snprintf(in->reason, sizeof(in->reason), "rdma-core cannot be "
		    "loaded: %s", in->load_error);
	else if (strcmp(in->base_default.result, "rdma"))
		snprintf(in->reason, sizeof(in->reason), "%s",
		    in->base_default.error);
	else if (!active_ports(in, NULL, NULL))
		snprintf(in->reason, sizeof(in->reason), "evrdma_base_new() "
		    "makes RDMA bases, but no port is ACTIVE: connections fail "
		    "until a link is up");
	else {
		in->available = 1;
		snprintf(in->reason, sizeof(in->reason), "evrdma_base_new() "
		    "makes RDMA bases");
	}
}

static void
add_fix(struct info *in, const char *fmt, const char *arg)
{
	if (in->nfix < INFO_FIX_MAX)
		snprintf(in->fix[in->nfix++], sizeof(in->fix[0]), fmt, arg);
}

/*
 * What would make RDMA available, in the order to do it: rdma-core; a
 * device (Soft-RoCE over an interface with an address, where the kernel
 * has none); the rdma_cm device file; the links of ports that are down.
 * Nothing where RDMA is available, or where the cause is none of these
 * (the reason says it).
 */
static void
find_fix(struct info *in)
{
	char nd[IF_NAMESIZE];

	if (in->available)
		return;
	if (!in->loaded)
		add_fix(in, "%s", "apt-get install rdma-core ibverbs-providers "
		    "libibverbs1 librdmacm1");
	if (!in->devs.n) {
		add_fix(in, "%s", "modprobe rdma_rxe");
		add_fix(in, "rdma link add rxe0 type rxe netdev %s",
		    info_rxe_netdev(nd) ? nd : "IF");
	}
	if (!in->cm_usable && (in->cm_errno == ENOENT || in->cm_errno == ENODEV))
		add_fix(in, "%s", "modprobe rdma_ucm");
	else if (!in->cm_usable && in->cm_errno == EACCES && in->loaded)
		add_fix(in, "%s", "apt-get install rdma-core   # its udev rules "
		    "let every user open /dev/infiniband/rdma_cm");
	for (unsigned i = 0; i < in->devs.n; i++) {
		const struct info_dev *d = &in->devs.dev[i];

		for (unsigned p = 0; p < d->nports; p++) {
			const struct info_port *port = &d->ports[p];

			if (!strcmp(port->state, "ACTIVE"))
				continue;
			for (unsigned n = 0; n < port->nnetdevs; n++)
				if (port->netdevs[n].found &&
				    !port->netdevs[n].up)
					add_fix(in, "ip link set %s up",
					    port->netdevs[n].name);
		}
	}
}

static int
find_all(struct info *in)
{
	memset(in, 0, sizeof(*in));
	find_rdma_core(in);
	find_rdma_cm(in);
	if (info_devices_scan(&in->devs, in->loaded) < 0)
		return -1;
	find_memlock(in);
	find_fork(in);
	if (find_base(in) < 0)
		return -1;
	find_verdict(in);
	find_fix(in);
	return 0;
}

/* ---- text ---- */

static void
text_port(const struct info_port *p)
{
	printf("    port %u: %s", p->num, p->state[0] ? p->state : "?");
	if (p->phys_state[0])
		printf(" (%s)", p->phys_state);
	printf(", %s", p->link_layer[0] ? p->link_layer : "link layer ?");
	if (p->queried)
		printf(", MTU %u active / %u max", p->active_mtu, p->max_mtu);
	if (p->rate[0])
		printf(", %s", p->rate);
	printf("\n");
	for (unsigned n = 0; n < p->nnetdevs; n++) {
		const struct info_netdev *nd = &p->netdevs[n];

		printf("      netdev %s: ", nd->name);
		if (!nd->found)
			printf("not found");
		else
			printf("%s, %s", nd->up ? "up" : "down", nd->running ?
			    "carrier" : "no carrier");
		if (nd->mtu)
			printf(", MTU %u", nd->mtu);
		printf("%s", nd->naddrs ? ":" : ", no IP address");
		for (unsigned a = 0; a < nd->naddrs; a++)
			printf(" %s", nd->addrs[a]);
		printf("\n");
	}
	if (!p->nnetdevs && !strcmp(p->link_layer, "Ethernet"))
		printf("      no netdev: RoCE needs one with an IP address\n");
	for (unsigned g = 0; g < p->ngids; g++) {
		const struct info_gid *gid = &p->gids[g];

		printf("      GID %u: %s", gid->index, gid->gid);
		if (gid->type[0] || gid->netdev[0])
			printf(" (%s%s%s)", gid->type, gid->type[0] &&
			    gid->netdev[0] ? ", " : "", gid->netdev);
		printf("\n");
	}
}

static void
text_devices(const struct info *in)
{
	printf("devices:%s\n", in->devs.n ? "" : " none in the kernel "
	    "(/sys/class/infiniband is missing or empty)");
	if (in->devs.error[0])
		printf("  rdma-core's device list: %s\n", in->devs.error);
	for (unsigned i = 0; i < in->devs.n; i++) {
		const struct info_dev *d = &in->devs.dev[i];

		printf("  %s:", d->name);
		if (d->node_type[0])
			printf(" %s,", d->node_type);
		if (d->fw_ver[0])
			printf(" firmware %s,", d->fw_ver);
		printf(" %s\n", d->opened ? "rdma-core opens it" :
		    d->error[0] ? d->error : "rdma-core not loaded");
		for (unsigned p = 0; p < d->nports; p++)
			text_port(&d->ports[p]);
	}
}

static void
text_memlock(const struct info *in)
{
	printf("memlock:        ");
	if (in->limited)
		printf("%llu KiB (RLIMIT_MEMLOCK", in->limit / 1024);
	else
		printf("unlimited (RLIMIT_MEMLOCK");
	if (in->hard_limited)
		printf(", hard limit %llu KiB)\n", in->hard_limit / 1024);
	else
		printf(", hard limit unlimited)\n");
	printf("  one channel of the default configuration pins %zu KiB",
	    in->channel_bytes / 1024);
	if (in->cap_ipc_lock)
		printf(": any number fit, as this process has CAP_IPC_LOCK\n"
		    "  (a service without it gets the limit above)\n");
	else if (!in->limited)
		printf(": any number fit\n");
	else
		printf(": %llu channels fit\n",
		    in->limit / in->channel_bytes);
	printf("  and a base keeps up to %u ended channels' rings registered "
	    "for the next\n  ones (warm sets, evrdma_config_set_warm()), "
	    "given up when the limit is near\n", in->warm_sets);
}

static void
text_base(const char *what, const struct info_base *b)
{
	printf("  %s: ", what);
	if (!strcmp(b->result, "rdma"))
		printf("an RDMA base\n");
	else if (!strcmp(b->result, "tcp"))
		printf("a base whose bufferevents use TCP, because %s: %s\n",
		    errno_name(b->err), b->error);
	else
		printf("fails with %s: %s\n", errno_name(b->err), b->error);
}

/* What ibv_is_fork_initialized()'s answer means here. rdma-core asks the
 * kernel whether it copies registered pages for a child (Linux 5.13 and
 * later do) through RDMA itself: a kernel without RDMA cannot answer, and
 * its silence says nothing of its version. */
static const char *
fork_note(const struct info *in)
{
	if (!strcmp(in->fork_status, "unneeded"))
		return " (the kernel copies registered pages for a child: "
		    "Linux 5.13 or later)";
	if (strcmp(in->fork_status, "enabled"))
		return "";
	if (!in->devs.n)
		return " (rdma-core's fork support, ibv_fork_init(), by evrdma "
		    "or RDMAV_FORK_SAFE: with no RDMA device the kernel cannot "
		    "be asked whether it copies registered pages for a child; "
		    "nothing is registered here)";
	return " (rdma-core's fork support, ibv_fork_init(), by evrdma or "
	    "RDMAV_FORK_SAFE: the kernel did not say that it copies "
	    "registered pages for a child, as Linux 5.13 and later do)";
}

/* " dev port N (addresses)", a comma before all but the first */
static void
text_active(const struct info_dev *d, const struct info_port *p, void *arg)
{
	unsigned *nth = arg;
	const char *sep = " (";

	printf("%s %s port %u", (*nth)++ ? "," : "", d->name, p->num);
	for (unsigned n = 0; n < p->nnetdevs; n++)
		for (unsigned a = 0; a < p->netdevs[n].naddrs; a++) {
			printf("%s%s", sep, p->netdevs[n].addrs[a]);
			sep = " ";
		}
	if (sep[1] == '\0')
		printf(")");
}

static void
print_text(const struct info *in)
{
	printf("evrdma %s\n", evrdma_version());
	printf("rdma-core:      %s\n", in->loaded ? "loaded" :
	    in->load_error);
	if (in->loaded) {
		printf("  libibverbs:   %s (%s)\n", in->ibv.path[0] ?
		    in->ibv.path : "?", in->ibv.file[0] ? in->ibv.file : "?");
		printf("  librdmacm:    %s (%s)\n", in->cm.path[0] ?
		    in->cm.path : "?", in->cm.file[0] ? in->cm.file : "?");
	}
	printf("rdma_cm:        " CM_PATH " %s%s\n", in->cm_usable ?
	    "opens" : "cannot be opened: ", in->cm_error);
	text_devices(in);
	text_memlock(in);
	printf("fork:           RDMAV_FORK_SAFE %s, IBV_FORK_SAFE %s\n",
	    in->rdmav_fork_safe ? in->rdmav_fork_safe : "unset",
	    in->ibv_fork_safe ? in->ibv_fork_safe : "unset");
	if (in->fork_status)
		printf("  ibv_is_fork_initialized(): %s%s\n", in->fork_status,
		    fork_note(in));
	printf("  evrdma: %s\n", fork_evrdma);
	printf("evrdma_base_new():\n");
	text_base("default configuration", &in->base_default);
	text_base("with evrdma_config_set_tcp_fallback()",
	    &in->base_fallback);
	if (in->available) {
		unsigned nth = 0;

		printf("RDMA is available: %s; ACTIVE:", in->reason);
		active_ports(in, text_active, &nth);
		printf("\n");
	} else {
		if (in->nfix) {
			printf("to make it available (as root; rdma_rxe is "
			    "Soft-RoCE, RDMA over an Ethernet interface with an "
			    "IP address):\n");
			for (unsigned i = 0; i < in->nfix; i++)
				printf("  %s\n", in->fix[i]);
			printf("  (a kernel without rdma_rxe, as in a container, "
			    "has none: the source tree's\n  Soft-RoCE guest, "
			    "tests/vm/evrdma-vm, runs programs with a device)\n");
		}
		printf("RDMA is not available on this host: %s\n", in->reason);
	}
}

/* ---- JSON ---- */

struct jw {
	int depth;
	int more[16];		/* a member was written at this depth */
};

static void
j_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* The start of a member: separator, indent, and "key": in an object. */
static void
j_key(struct jw *w, const char *key)
{
	printf("%s\n%*s", w->more[w->depth] ? "," : "", 2 * w->depth, "");
	w->more[w->depth] = 1;
	if (key) {
		j_string(key);
		printf(": ");
	}
}

static void
j_open(struct jw *w, const char *key, char c)
{
	if (w->depth)
		j_key(w, key);
	putchar(c);
	w->more[++w->depth] = 0;
}

static void
j_close(struct jw *w, char c)
{
	int had = w->more[w->depth--];

	if (had)
		printf("\n%*s", 2 * w->depth, "");
	putchar(c);
}

/* @p s, or null when it is NULL or "" */
static void
j_str(struct jw *w, const char *key, const char *s)
{
	j_key(w, key);
	if (s && *s)
		j_string(s);
	else
		printf("null");
}

static void
j_num(struct jw *w, const char *key, int known, unsigned long long v)
{
	j_key(w, key);
	if (known)
		printf("%llu", v);
	else
		printf("null");
}

static void
j_bool(struct jw *w, const char *key, int v)
{
	j_key(w, key);
	printf("%s", v ? "true" : "false");
}

static void
json_lib(struct jw *w, const char *key, const struct info_lib *l, int loaded)
{
	if (!loaded) {
		j_str(w, key, NULL);
		return;
	}
	j_open(w, key, '{');
	j_str(w, "path", l->path);
	j_str(w, "file", l->file);
	j_close(w, '}');
}

static void
json_port(struct jw *w, const struct info_port *p)
{
	j_open(w, NULL, '{');
	j_num(w, "port", 1, p->num);
	j_str(w, "state", p->state);
	j_str(w, "phys_state", p->phys_state);
	j_str(w, "link_layer", p->link_layer);
	j_str(w, "rate", p->rate);
	j_num(w, "active_mtu", p->queried, p->active_mtu);
	j_num(w, "max_mtu", p->queried, p->max_mtu);
	j_open(w, "gids", '[');
	for (unsigned g = 0; g < p->ngids; g++) {
		j_open(w, NULL, '{');
		j_num(w, "index", 1, p->gids[g].index);
		j_str(w, "gid", p->gids[g].gid);
		j_str(w, "type", p->gids[g].type);
		j_str(w, "netdev", p->gids[g].netdev);
		j_close(w, '}');
	}
	j_close(w, ']');
	j_open(w, "netdevs", '[');
	for (unsigned n = 0; n < p->nnetdevs; n++) {
		const struct info_netdev *nd = &p->netdevs[n];

		j_open(w, NULL, '{');
		j_str(w, "name", nd->name);
		j_bool(w, "up", nd->up);
		j_bool(w, "running", nd->running);
		j_num(w, "mtu", nd->mtu != 0, nd->mtu);
		j_open(w, "addresses", '[');
		for (unsigned a = 0; a < nd->naddrs; a++)
			j_str(w, NULL, nd->addrs[a]);
		j_close(w, ']');
		j_close(w, '}');
	}
	j_close(w, ']');
	j_close(w, '}');
}

static void
json_devices(struct jw *w, const struct info *in)
{
	j_str(w, "devices_error", in->devs.error);
	j_open(w, "devices", '[');
	for (unsigned i = 0; i < in->devs.n; i++) {
		const struct info_dev *d = &in->devs.dev[i];

		j_open(w, NULL, '{');
		j_str(w, "name", d->name);
		j_bool(w, "in_kernel", d->in_kernel);
		j_bool(w, "in_rdma_core", d->in_rdma_core);
		j_bool(w, "opened", d->opened);
		j_str(w, "error", d->error);
		j_str(w, "node_type", d->node_type);
		j_str(w, "fw_ver", d->fw_ver);
		j_str(w, "node_guid", d->node_guid);
		j_open(w, "ports", '[');
		for (unsigned p = 0; p < d->nports; p++)
			json_port(w, &d->ports[p]);
		j_close(w, ']');
		j_close(w, '}');
	}
	j_close(w, ']');
}

static void
json_base(struct jw *w, const char *key, const struct info_base *b)
{
	int ok = !strcmp(b->result, "rdma");

	j_open(w, key, '{');
	j_str(w, "result", b->result);
	j_str(w, "errno", ok ? NULL : errno_name(b->err));
	j_str(w, "error", ok ? NULL : b->error);
	j_close(w, '}');
}

static void
json_active(const struct info_dev *d, const struct info_port *p, void *arg)
{
	char name[300];

	snprintf(name, sizeof(name), "%s/%u", d->name, p->num);
	j_str(arg, NULL, name);
}

static void
print_json(const struct info *in)
{
	struct jw w = { 0, { 0 } };

	j_open(&w, NULL, '{');
	j_str(&w, "evrdma_version", evrdma_version());
	j_open(&w, "rdma_core", '{');
	j_bool(&w, "loaded", in->loaded);
	j_str(&w, "error", in->load_error);
	json_lib(&w, "libibverbs", &in->ibv, in->loaded);
	json_lib(&w, "librdmacm", &in->cm, in->loaded);
	j_close(&w, '}');
	j_open(&w, "rdma_cm", '{');
	j_str(&w, "path", CM_PATH);
	j_bool(&w, "present", in->cm_present);
	j_bool(&w, "usable", in->cm_usable);
	j_str(&w, "error", in->cm_error);
	j_close(&w, '}');
	json_devices(&w, in);
	j_open(&w, "memlock", '{');
	j_num(&w, "limit", in->limited, in->limit);
	j_num(&w, "hard_limit", in->hard_limited, in->hard_limit);
	j_bool(&w, "cap_ipc_lock", in->cap_ipc_lock);
	j_num(&w, "channel_bytes", 1, in->channel_bytes);
	j_num(&w, "channels", in->limited && !in->cap_ipc_lock &&
	    in->channel_bytes, in->channel_bytes ? in->limit /
	    in->channel_bytes : 0);
	j_num(&w, "warm_sets", 1, in->warm_sets);
	j_close(&w, '}');
	j_open(&w, "fork", '{');
	j_str(&w, "RDMAV_FORK_SAFE", in->rdmav_fork_safe);
	j_str(&w, "IBV_FORK_SAFE", in->ibv_fork_safe);
	j_str(&w, "ibv_is_fork_initialized", in->fork_status);
	j_str(&w, "evrdma", fork_evrdma);
	j_close(&w, '}');
	j_open(&w, "base", '{');
	json_base(&w, "default", &in->base_default);
	json_base(&w, "tcp_fallback", &in->base_fallback);
	j_close(&w, '}');
	j_open(&w, "rdma", '{');
	j_bool(&w, "available", in->available);
	j_str(&w, "reason", in->reason);
	j_open(&w, "active_ports", '[');
	active_ports(in, json_active, &w);
	j_close(&w, ']');
	j_open(&w, "fix", '[');
	for (unsigned i = 0; i < in->nfix; i++)
		j_str(&w, NULL, in->fix[i]);
	j_close(&w, ']');
	j_close(&w, '}');
	j_close(&w, '}');
	putchar('\n');
}

int
main(int argc, char **argv)
{
	struct info *in;
	int json = 0, i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--help") ||
		    !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return fflush(stdout) ? 1 : 0;
		} else if (!strcmp(argv[i], "--version")) {
			printf("evrdma-info (evrdma) %s\n", evrdma_version());
			return fflush(stdout) ? 1 : 0;
		} else {
			fprintf(stderr, "evrdma-info: unknown argument %s\n%s",
			    argv[i], usage);
			return 1;
		}
	}
	/* The report says what evrdma would log here (the fallback and its
	 * reason); the log itself only when asked for (EVRDMA_LOG). */
	if (!getenv("EVRDMA_LOG"))
		evrdma_set_log_callback(NULL, 0, NULL);
	if (!(in = malloc(sizeof(*in))) || find_all(in) < 0) {
		fprintf(stderr, "evrdma-info: out of memory\n");
		free(in);
		return 1;
	}
	if (json)
		print_json(in);
	else
		print_text(in);
	info_devices_free(&in->devs);
	i = !in->loaded ? EXIT_NO_RDMA_CORE : !in->available ? EXIT_NO_RDMA : 0;
	free(in);
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "evrdma-info: cannot write the report\n");
		return 1;
	}
	return i;
}
