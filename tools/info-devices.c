/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma-info: the RDMA devices, seen twice. The kernel's view comes from
 * sysfs (/sys/class/infiniband: ports, their state and link layer, the GID
 * table with each entry's type and netdev); rdma-core's from its device
 * list, opened and queried through the functions evrdma loaded
 * (evrdma_rdma_sym()), which adds the MTUs. A device the kernel has and
 * rdma-core does not list lacks its user-space driver, the commonest
 * reason for "no RDMA device" on a host that has one.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <evrdma.h>

#include "info.h"

#define SYS_IB		"/sys/class/infiniband"
#define SYS_NET		"/sys/class/net"

/* Append a zeroed element to the array *@p arr of *@p n elements. */
static void *
push(void *arr, unsigned *n, size_t size)
{
	char **a = arr;
	char *p = realloc(*a, (size_t)(*n + 1) * size);

	if (!p)
		return NULL;
	*a = p;
	memset(p + (size_t)*n * size, 0, size);
	return p + (size_t)(*n)++ * size;
}

/* The first line of a sysfs file, without its newline; "" and -1 when it
 * cannot be read (an unused GID entry's attributes read as EINVAL). */
static int
read_line(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int
read_line(char *buf, size_t size, const char *fmt, ...)
{
	char path[512];
	va_list ap;
	FILE *f;
	int ok;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	buf[0] = '\0';
	if (!(f = fopen(path, "re")))
		return -1;
	ok = fgets(buf, (int)size, f) != NULL;
	fclose(f);
	if (!ok) {
		buf[0] = '\0';
		return -1;
	}
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* sysfs says "4: ACTIVE", "1: CA": keep the name */
static void
strip_number(char *s)
{
	char *c = strstr(s, ": ");

	if (c)
		memmove(s, c + 2, strlen(c + 2) + 1);
}

/* A directory's entries that are numbers, ascending; *@p n of them. */
static unsigned *
numbered_entries(const char *path, unsigned *n)
{
	unsigned *v = NULL, *e;
	struct dirent *d;
	DIR *dir;
	char *end;

	*n = 0;
	if (!(dir = opendir(path)))
		return NULL;
	while ((d = readdir(dir))) {
		unsigned long x = strtoul(d->d_name, &end, 10);

		if (d->d_name[0] < '0' || d->d_name[0] > '9' || *end)
			continue;
		if (!(e = push(&v, n, sizeof(*v))))
			break;
		*e = (unsigned)x;
	}
	closedir(dir);
	/* few entries (ports; GIDs up to a few hundred): insertion sort */
	for (unsigned i = 1; i < *n; i++)
		for (unsigned j = i; j > 0 && v[j - 1] > v[j]; j--) {
			unsigned t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return v;
}

static int
sys_gids(struct info_port *port, const char *dev)
{
	char path[512], raw[64];
	struct in6_addr a;
	static const struct in6_addr zero;
	struct info_gid *g;
	unsigned *idx, n, i;

	snprintf(path, sizeof(path), SYS_IB "/%s/ports/%u/gids", dev,
	    port->num);
	idx = numbered_entries(path, &n);
	for (i = 0; i < n; i++) {
		if (read_line(raw, sizeof(raw), "%s/%u", path, idx[i]) < 0 ||
		    inet_pton(AF_INET6, raw, &a) != 1 ||
		    !memcmp(&a, &zero, sizeof(a)))
			continue;	/* an unused entry */
		if (!(g = push(&port->gids, &port->ngids, sizeof(*g)))) {
			free(idx);
			return -1;
		}
		g->index = idx[i];
		inet_ntop(AF_INET6, &a, g->gid, sizeof(g->gid));
		read_line(g->type, sizeof(g->type),
		    SYS_IB "/%s/ports/%u/gid_attrs/types/%u", dev, port->num,
		    idx[i]);
		read_line(g->netdev, sizeof(g->netdev),
		    SYS_IB "/%s/ports/%u/gid_attrs/ndevs/%u", dev, port->num,
		    idx[i]);
	}
	free(idx);
	return 0;
}

static struct info_dev *
dev_find(struct info_devs *devs, const char *name)
{
	for (unsigned i = 0; i < devs->n; i++)
		if (!strcmp(devs->dev[i].name, name))
			return &devs->dev[i];
	return NULL;
}

static struct info_port *
port_find(struct info_dev *dev, unsigned num)
{
	struct info_port *p;

	for (unsigned i = 0; i < dev->nports; i++)
		if (dev->ports[i].num == num)
			return &dev->ports[i];
	if ((p = push(&dev->ports, &dev->nports, sizeof(*p))))
		p->num = num;
	return p;
}

/* The kernel's devices and ports. */
static int
sys_scan(struct info_devs *devs)
{
	struct info_dev *dev;
	struct info_port *port;
	struct dirent *d;
	char path[512];
	unsigned *nums, n;
	DIR *dir;
	int ret = 0;

	if (!(dir = opendir(SYS_IB)))
		return 0;	/* no RDMA in the kernel: no device */
	while (ret == 0 && (d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		if (!(dev = push(&devs->dev, &devs->n, sizeof(*dev)))) {
			ret = -1;
			break;
		}
		snprintf(dev->name, sizeof(dev->name), "%s", d->d_name);
		dev->in_kernel = 1;
		read_line(dev->node_type, sizeof(dev->node_type),
		    SYS_IB "/%s/node_type", dev->name);
		strip_number(dev->node_type);
		read_line(dev->fw_ver, sizeof(dev->fw_ver), SYS_IB "/%s/fw_ver",
		    dev->name);
		read_line(dev->node_guid, sizeof(dev->node_guid),
		    SYS_IB "/%s/node_guid", dev->name);
		snprintf(path, sizeof(path), SYS_IB "/%s/ports", dev->name);
		nums = numbered_entries(path, &n);
		for (unsigned i = 0; ret == 0 && i < n; i++) {
			if (!(port = port_find(dev, nums[i]))) {
				ret = -1;
				break;
			}
			read_line(port->state, sizeof(port->state),
			    "%s/%u/state", path, port->num);
			strip_number(port->state);
			read_line(port->phys_state, sizeof(port->phys_state),
			    "%s/%u/phys_state", path, port->num);
			strip_number(port->phys_state);
			read_line(port->link_layer, sizeof(port->link_layer),
			    "%s/%u/link_layer", path, port->num);
			read_line(port->rate, sizeof(port->rate), "%s/%u/rate",
			    path, port->num);
			ret = sys_gids(port, dev->name);
		}
		free(nums);
	}
	closedir(dir);
	return ret;
}

/* ---- rdma-core's view ---- */

struct verbs {
	struct ibv_device **(*get_device_list)(int *);
	void (*free_device_list)(struct ibv_device **);
	const char *(*get_device_name)(struct ibv_device *);
	struct ibv_context *(*open_device)(struct ibv_device *);
	int (*close_device)(struct ibv_context *);
	int (*query_device)(struct ibv_context *, struct ibv_device_attr *);
	/* the exported ibv_query_port fills the whole ibv_port_attr through
	 * the provider (verbs.h's inline only prefers a newer op) */
	int (*query_port)(struct ibv_context *, uint8_t,
	    struct ibv_port_attr *);
};

static int
verbs_fn(void *fnp, const char *name)
{
	void *p = evrdma_rdma_sym(name);

	if (!p)
		return -1;
	memcpy(fnp, &p, sizeof(p));
	return 0;
}

static int
verbs_load(struct verbs *v)
{
	memset(v, 0, sizeof(*v));
	if (verbs_fn(&v->get_device_list, "ibv_get_device_list") < 0 ||
	    verbs_fn(&v->free_device_list, "ibv_free_device_list") < 0 ||
	    verbs_fn(&v->get_device_name, "ibv_get_device_name") < 0 ||
	    verbs_fn(&v->open_device, "ibv_open_device") < 0 ||
	    verbs_fn(&v->close_device, "ibv_close_device") < 0 ||
	    verbs_fn(&v->query_device, "ibv_query_device") < 0 ||
	    verbs_fn(&v->query_port, "ibv_query_port") < 0)
		return -1;
	return 0;
}

static const char *
port_state_str(enum ibv_port_state s)
{
	static const char *const name[] = { "NOP", "DOWN", "INIT", "ARMED",
	    "ACTIVE", "ACTIVE_DEFER" };

	return (unsigned)s < sizeof(name) / sizeof(name[0]) ? name[s] :
	    "unknown";
}

static unsigned
mtu_bytes(enum ibv_mtu m)
{
	return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128u << m : 0;
}

/* Open @p d and query its ports into @p dev. */
static int
verbs_dev(const struct verbs *v, struct ibv_device *d, struct info_dev *dev)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_context *ctx;
	struct info_port *port;
	int ret = 0;

	errno = 0;
	if (!(ctx = v->open_device(d))) {
		snprintf(dev->error, sizeof(dev->error), "ibv_open_device: %s "
		    "(its /dev/infiniband/uverbs* file)",
		    strerror(errno ? errno : ENODEV));
		return 0;
	}
	if ((errno = v->query_device(ctx, &da)) != 0) {
		snprintf(dev->error, sizeof(dev->error), "ibv_query_device: %s",
		    strerror(errno));
		v->close_device(ctx);
		return 0;
	}
	dev->opened = 1;
	for (unsigned p = 1; p <= da.phys_port_cnt; p++) {
		if (!(port = port_find(dev, p))) {
			ret = -1;
			break;
		}
		memset(&pa, 0, sizeof(pa));
		if (v->query_port(ctx, (uint8_t)p, &pa) != 0)
			continue;
		port->queried = 1;
		snprintf(port->verbs_state, sizeof(port->verbs_state), "%s",
		    port_state_str(pa.state));
		port->active_mtu = mtu_bytes(pa.active_mtu);
		port->max_mtu = mtu_bytes(pa.max_mtu);
		if (!port->link_layer[0])
			snprintf(port->link_layer, sizeof(port->link_layer),
			    "%s", pa.link_layer == IBV_LINK_LAYER_ETHERNET ?
			    "Ethernet" : "InfiniBand");
		if (!port->state[0])
			memcpy(port->state, port->verbs_state,
			    sizeof(port->state));
	}
	v->close_device(ctx);
	return ret;
}

static int
verbs_scan(struct info_devs *devs)
{
	struct ibv_device **list;
	struct info_dev *dev;
	struct verbs v;
	int n = 0, i, ret = 0;

	if (verbs_load(&v) < 0) {
		snprintf(devs->error, sizeof(devs->error), "%s",
		    evrdma_errmsg());
		return 0;
	}
	errno = 0;
	if (!(list = v.get_device_list(&n))) {
		int err = errno ? errno : ENODEV;

		snprintf(devs->error, sizeof(devs->error),
		    "ibv_get_device_list: %s%s", strerror(err), err == ENOSYS ?
		    " (the kernel has no RDMA user access: ib_uverbs)" : "");
		return 0;
	}
	for (i = 0; ret == 0 && i < n; i++) {
		const char *name = v.get_device_name(list[i]);

		if (!(dev = dev_find(devs, name)) &&
		    (dev = push(&devs->dev, &devs->n, sizeof(*dev))))
			snprintf(dev->name, sizeof(dev->name), "%s", name);
		if (!dev) {
			ret = -1;
			break;
		}
		dev->in_rdma_core = 1;
		ret = verbs_dev(&v, list[i], dev);
	}
	v.free_device_list(list);
	for (i = 0; i < (int)devs->n; i++)
		if (!devs->dev[i].in_rdma_core)
			snprintf(devs->dev[i].error, sizeof(devs->dev[i].error),
			    "rdma-core does not list it: its user-space driver "
			    "is missing (Debian: ibverbs-providers)");
	return ret;
}

/* ---- the netdevs under the ports ---- */

static int
netdev_fill(struct info_netdev *nd, const struct ifaddrs *ifs)
{
	char mtu[32], (*a)[INET6_ADDRSTRLEN];
	size_t len = strlen(nd->name);
	const void *src;

	for (const struct ifaddrs *ia = ifs; ia; ia = ia->ifa_next) {
		const struct sockaddr *sa = ia->ifa_addr;

		/* an IPv4 alias is named "rdma0:1" */
		if (strncmp(ia->ifa_name, nd->name, len) ||
		    (ia->ifa_name[len] && ia->ifa_name[len] != ':'))
			continue;
		nd->found = 1;
		nd->up = (ia->ifa_flags & IFF_UP) != 0;
		nd->running = (ia->ifa_flags & IFF_RUNNING) != 0;
		if (!sa)
			continue;
		if (sa->sa_family == AF_INET)
			src = &((const struct sockaddr_in *)(const void *)sa)->
			    sin_addr;
		else if (sa->sa_family == AF_INET6)
			src = &((const struct sockaddr_in6 *)(const void *)sa)->
			    sin6_addr;
		else
			continue;
		if (!(a = push(&nd->addrs, &nd->naddrs, sizeof(*a))))
			return -1;
		inet_ntop(sa->sa_family, src, *a, sizeof(*a));
	}
	if (read_line(mtu, sizeof(mtu), SYS_NET "/%s/mtu", nd->name) == 0)
		nd->mtu = (unsigned)strtoul(mtu, NULL, 10);
	return 0;
}

static int
port_netdevs(struct info_port *port, const struct ifaddrs *ifs)
{
	struct info_netdev *nd;
	unsigned j;

	for (unsigned i = 0; i < port->ngids; i++) {
		const char *name = port->gids[i].netdev;

		for (j = 0; j < port->nnetdevs; j++)
			if (!strcmp(port->netdevs[j].name, name))
				break;
		if (!name[0] || j < port->nnetdevs)
			continue;
		if (!(nd = push(&port->netdevs, &port->nnetdevs, sizeof(*nd))))
			return -1;
		snprintf(nd->name, sizeof(nd->name), "%s", name);
		if (netdev_fill(nd, ifs) < 0)
			return -1;
	}
	return 0;
}

static int
dev_cmp(const void *a, const void *b)
{
	return strcmp(((const struct info_dev *)a)->name,
	    ((const struct info_dev *)b)->name);
}

static int
port_cmp(const void *a, const void *b)
{
	unsigned x = ((const struct info_port *)a)->num;
	unsigned y = ((const struct info_port *)b)->num;

	return x < y ? -1 : x > y;
}

int
info_devices_scan(struct info_devs *devs, int rdma_core)
{
	struct ifaddrs *ifs = NULL;
	int ret;

	memset(devs, 0, sizeof(*devs));
	ret = sys_scan(devs);
	if (ret == 0 && rdma_core)
		ret = verbs_scan(devs);
	if (ret == 0 && getifaddrs(&ifs) < 0)
		ifs = NULL;	/* the ports are still worth showing */
	for (unsigned i = 0; ret == 0 && i < devs->n; i++) {
		struct info_dev *dev = &devs->dev[i];

		qsort(dev->ports, dev->nports, sizeof(*dev->ports), port_cmp);
		for (unsigned p = 0; ret == 0 && p < dev->nports; p++)
			ret = port_netdevs(&dev->ports[p], ifs);
	}
	if (ifs)
		freeifaddrs(ifs);
	if (devs->n)
		qsort(devs->dev, devs->n, sizeof(*devs->dev), dev_cmp);
	if (ret < 0) {
		info_devices_free(devs);
		errno = ENOMEM;
	}
	return ret;
}

int
info_rxe_netdev(char name[IF_NAMESIZE])
{
	struct ifaddrs *ifs;
	int found = 0;

	if (getifaddrs(&ifs) < 0)
		return 0;
	/* first pass: with a carrier; second: up */
	for (int pass = 0; pass < 2 && !found; pass++)
		for (const struct ifaddrs *ia = ifs; ia && !found;
		    ia = ia->ifa_next) {
			unsigned want = IFF_UP | (pass ? 0 : IFF_RUNNING);

			if (!ia->ifa_addr || ia->ifa_addr->sa_family != AF_INET ||
			    (ia->ifa_flags & IFF_LOOPBACK) ||
			    (ia->ifa_flags & want) != want)
				continue;
			snprintf(name, IF_NAMESIZE, "%s", ia->ifa_name);
			found = 1;
		}
	freeifaddrs(ifs);
	return found;
}

void
info_devices_free(struct info_devs *devs)
{
	for (unsigned i = 0; i < devs->n; i++) {
		struct info_dev *dev = &devs->dev[i];

		for (unsigned p = 0; p < dev->nports; p++) {
			struct info_port *port = &dev->ports[p];

			for (unsigned n = 0; n < port->nnetdevs; n++)
				free(port->netdevs[n].addrs);
			free(port->netdevs);
			free(port->gids);
		}
		free(dev->ports);
	}
	free(devs->dev);
	memset(devs, 0, sizeof(*devs));
}
