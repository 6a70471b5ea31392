/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: what the kernel knows of a TCP connection (TCP_INFO), for the
 * statistics of a bufferevent over TCP. A file of its own: linux/tcp.h,
 * which has the fields Debian 12's netinet/tcp.h lacks (bytes acked and
 * received, data segments), cannot be included beside it.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <linux/tcp.h>

#include <evrdma/channel.h>
#include "evrdma-internal.h"

/* (include/net/tcp_states.h: not installed) */
enum { SI_ESTABLISHED = 1, SI_SYN_SENT, SI_SYN_RECV };

int
evrdma__tcp_stats(int fd, struct evrdma_channel_stats *st)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return evrdma__fail(errno == ENOPROTOOPT ? EINVAL : errno,
		    "getsockopt(TCP_INFO): %s", strerror(errno));
	st->transport = EVRDMA_TRANSPORT_TCP;
	st->state = ti.tcpi_state == SI_ESTABLISHED ?
	    EVRDMA_CHANNEL_CONNECTED : ti.tcpi_state == SI_SYN_SENT ||
	    ti.tcpi_state == SI_SYN_RECV ? EVRDMA_CHANNEL_CONNECTING :
	    EVRDMA_CHANNEL_ENDED;
	/* (Linux counts the SYN's sequence number among the bytes acked) */
	st->bytes_sent = ti.tcpi_bytes_acked ? ti.tcpi_bytes_acked - 1 : 0;
	st->bytes_received = ti.tcpi_bytes_received;
	st->msgs_sent = ti.tcpi_data_segs_out;
	st->msgs_received = ti.tcpi_segs_in;
	st->retransmits = ti.tcpi_total_retrans;
	return 0;
}
