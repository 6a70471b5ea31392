/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: connections, private: what conn_cm.c (establishment) and
 * conn_post.c (posting) call of conn.c (the object, failure, teardown),
 * and the state test of a post (also a channel's send ring's).
 * The struct and the interface to the rest of the library are in
 * evrdma-internal.h.
 */
#ifndef EVRDMA_CONN_PRIVATE_H_INCLUDED_
#define EVRDMA_CONN_PRIVATE_H_INCLUDED_

#include "evrdma-internal.h"

/* Closing, failed or closed: nothing more may be posted. */
static inline int
evrdma__conn_closing(const struct evrdma_conn *conn)
{
	return conn->state == EVRDMA_CONN_CLOSING ||
	    conn->state == EVRDMA_CONN_FAILED ||
	    conn->state == EVRDMA_CONN_CLOSED;
}

/*
 * May @p conn post a send now? What conn_post.c's checks of a send ask,
 * in one inline test (they say why not).
 */
static inline int
evrdma__conn_postable(const struct evrdma_conn *conn)
{
	return conn && conn->base && !conn->user_freed &&
	    !evrdma__conn_closing(conn) && !conn->qp_in_error && conn->rts;
}

/* Call the user's event callback, once per outcome, never after free nor
 * inside evrdma_base_free(); errno is @p err there. */
void evrdma__conn_event(struct evrdma_conn *conn, short what, int reason,
    int err);
/* Disconnect the id; @p was_established: a DISCONNECTED is owed and
 * teardown waits for it. */
void evrdma__conn_disconnect(struct evrdma_conn *conn, int was_established);
/* End the connection (once): FAILED, QP to error, the owner's ended() or
 * the user's event. A closing connection only has its QP put in error. */
void evrdma__conn_fail(struct evrdma_conn *conn, int reason, int err);
/* A closing connection whose requests and DISCONNECTED are all in is
 * finalised (deferred). */
void evrdma__conn_check_done(struct evrdma_conn *conn);

#endif /* EVRDMA_CONN_PRIVATE_H_INCLUDED_ */
