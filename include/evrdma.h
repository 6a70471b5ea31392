/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma: RDMA (rdma_cm + verbs) driven by a libevent event_base.
 * Umbrella header: include this one.
 */
#ifndef EVRDMA_H_INCLUDED_
#define EVRDMA_H_INCLUDED_

/** @file evrdma.h
 * Includes every public evrdma header.
 */
#include <evrdma/version.h>
#include <evrdma/util.h>
#include <evrdma/config.h>
#include <evrdma/base.h>
#include <evrdma/mr.h>
#include <evrdma/conn.h>
#include <evrdma/listener.h>
#include <evrdma/srq.h>
#include <evrdma/channel.h>
#include <evrdma/bufferevent.h>

#endif /* EVRDMA_H_INCLUDED_ */
