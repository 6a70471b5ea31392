/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma-info: what it finds out about the host, shared by the device scan
 * (info-devices.c) and the report (evrdma-info.c).
 */
#ifndef EVRDMA_INFO_H_INCLUDED_
#define EVRDMA_INFO_H_INCLUDED_

#include <arpa/inet.h>
#include <net/if.h>

/* One network interface an RDMA port sits on. */
struct info_netdev {
	char name[IF_NAMESIZE];
	int found;		/* getifaddrs() knows it (flags are valid) */
	int up;			/* IFF_UP */
	int running;		/* IFF_RUNNING: it has a carrier */
	unsigned mtu;		/* 0: unknown */
	char (*addrs)[INET6_ADDRSTRLEN];
	unsigned naddrs;
};

/* One entry of a port's GID table that is in use. */
struct info_gid {
	unsigned index;
	char gid[INET6_ADDRSTRLEN];	/* as an IPv6 address */
	char type[32];		/* "RoCE v2", "IB/RoCE v1"; "": not said */
	char netdev[IF_NAMESIZE];	/* "": none */
};

struct info_port {
	unsigned num;
	/* from sysfs; "" where it says nothing */
	char state[32];		/* ACTIVE, DOWN, ... */
	char phys_state[32];	/* LinkUp, Disabled, ... */
	char link_layer[32];	/* Ethernet, InfiniBand */
	char rate[64];
	/* from rdma-core (ibv_query_port) */
	int queried;
	char verbs_state[32];
	unsigned active_mtu, max_mtu;	/* bytes */
	struct info_gid *gids;
	unsigned ngids;
	struct info_netdev *netdevs;	/* those its GIDs name, each once */
	unsigned nnetdevs;
};

struct info_dev {
	char name[256];
	int in_kernel;		/* /sys/class/infiniband lists it */
	int in_rdma_core;	/* ibv_get_device_list() lists it */
	int opened;		/* ibv_open_device() and ibv_query_device() */
	char error[256];	/* why rdma-core cannot use it; "" */
	char node_type[32];
	char fw_ver[64];
	char node_guid[32];
	struct info_port *ports;
	unsigned nports;
};

struct info_devs {
	struct info_dev *dev;
	unsigned n;
	char error[256];	/* rdma-core's device list failed; "" */
};

/*
 * Find the RDMA devices: the kernel's (sysfs), and what rdma-core makes
 * of them when @p rdma_core is set (it was loaded: evrdma_rdma_sym()
 * works), with their ports, GIDs and the netdevs and addresses under them.
 * @return 0, or -1 with errno ENOMEM
 */
int info_devices_scan(struct info_devs *out, int rdma_core);

/*
 * The interface Soft-RoCE would best sit on: the first one that is up,
 * not the loopback, and has an IPv4 address, one with a carrier first.
 * @return 1 with its name in @p name, or 0 (none)
 */
int info_rxe_netdev(char name[IF_NAMESIZE]);
void info_devices_free(struct info_devs *devs);

#endif /* EVRDMA_INFO_H_INCLUDED_ */
