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
enum {
	SI_ESTABLISHED = 1, SI_SYN_SENT, SI_SYN_RECV, SI_FIN_WAIT1,
	SI_FIN_WAIT2, SI_TIME_WAIT, SI_CLOSE, SI_CLOSE_WAIT, SI_LAST_ACK,
	SI_LISTEN, SI_CLOSING
};

/*
 * Why a TCP socket's connection failed, from what the kernel still holds:
 * libevent gives a socket bufferevent's error in errno during its event
 * callback only, and the kernel hands it out once (to SO_ERROR, or to the
 * read or write that failed). A socket in CLOSE whose SYN was never
 * answered (nothing acked, at most a reset received) failed to connect
 * (refused, unreachable, timed out); one that was established was ended
 * by a reset or a timeout (or closed in order both ways: the peer
 * disconnected all the same). Any other state: no error.
 */
int
evrdma__tcp_reason(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
	    ti.tcpi_state != SI_CLOSE)
		return EVRDMA_REASON_NONE;
	/* established: the connecting end had its SYN acked; the accepting
	 * end's socket is born with the SYN and the ACK received */
	if (ti.tcpi_bytes_acked == 0 && ti.tcpi_segs_in <= 1)
		return EVRDMA_REASON_CONNECT_ERROR;
	return EVRDMA_REASON_DISCONNECTED;
}

/*
 * Linux counts the control flags' sequence numbers among its byte
 * counts: tcpi_bytes_acked has the connecting side's SYN (not the
 * accepting side's SYN-ACK: its socket is born past it) and, once acked,
 * our FIN; tcpi_bytes_received has the peer's FIN. So the bytes sent are
 * read from the data counters, tcpi_bytes_sent less tcpi_bytes_retrans
 * (Linux 4.19: each byte once, whichever side connected), and the peer's
 * FIN is taken off the bytes received in the states that say it came. In
 * CLOSE nothing says whether it came (an orderly close both ways and a
 * reset end alike), and the count is the kernel's (evrdma/channel.h).
 */
int
evrdma__tcp_stats(int fd, struct evrdma_channel_stats *st)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int fin_in;

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return evrdma__fail(errno == ENOPROTOOPT ? EINVAL : errno,
		    "getsockopt(TCP_INFO): %s", strerror(errno));
	st->transport = EVRDMA_TRANSPORT_TCP;
	st->state = ti.tcpi_state == SI_ESTABLISHED ?
	    EVRDMA_CHANNEL_CONNECTED : ti.tcpi_state == SI_SYN_SENT ||
	    ti.tcpi_state == SI_SYN_RECV ? EVRDMA_CHANNEL_CONNECTING :
	    EVRDMA_CHANNEL_ENDED;
	fin_in = ti.tcpi_state == SI_CLOSE_WAIT ||
	    ti.tcpi_state == SI_LAST_ACK || ti.tcpi_state == SI_CLOSING ||
	    ti.tcpi_state == SI_TIME_WAIT;
	st->bytes_sent = ti.tcpi_bytes_sent >= ti.tcpi_bytes_retrans ?
	    ti.tcpi_bytes_sent - ti.tcpi_bytes_retrans : 0;
	st->bytes_received = ti.tcpi_bytes_received -
	    (fin_in && ti.tcpi_bytes_received ? 1 : 0);
	st->msgs_sent = ti.tcpi_data_segs_out;
	st->msgs_received = ti.tcpi_data_segs_in;
	st->retransmits = ti.tcpi_total_retrans;
	return 0;
}
