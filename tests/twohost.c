/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma two-guest tests: the helpers of twohost.h that guest A's suite
 * and guest B's peer both call (the log line, the stream check of the
 * byte pattern, this process's memory).
 */
#include "twohost.h"

#include <stdarg.h>

const char *th_role = "A";

void
say(const char *fmt, ...)
{
	va_list ap;
	char buf[512];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "twohost[%s] %" PRIu64 ": %s\n", th_role,
	    (uint64_t)(tu_now_ms() % 1000000), buf);
}

/* ---- the byte pattern of chtest.h: a function of (seed, offset) ---- */

/* Check all of @p in against the pattern at *off, drain it, advance *off.
 * @return -1, or the stream offset of the first wrong byte */
int64_t
pat_drain(struct evbuffer *in, uint64_t *off, uint64_t seed)
{
	struct evbuffer_iovec v[16];
	int n, i;

	while (evbuffer_get_length(in) > 0) {
		size_t tot = 0;

		n = evbuffer_peek(in, -1, NULL, v, 16);
		if (n > 16)
			n = 16;
		for (i = 0; i < n; i++) {
			size_t bad = pat_check(v[i].iov_base, *off + tot,
			    v[i].iov_len, seed);
			if (bad != (size_t)-1)
				return (int64_t)(*off + tot + bad);
			tot += v[i].iov_len;
		}
		evbuffer_drain(in, tot);
		*off += tot;
	}
	return -1;
}

/* A line of /proc/self/status in KiB (@p key "VmRSS:", "VmPin:"), or
 * -1. */
long
proc_kib(const char *key)
{
	char l[256];
	long kib = -1;
	size_t k = strlen(key);
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(l, sizeof(l), f))
		if (!strncmp(l, key, k) && sscanf(l + k, "%ld", &kib) == 1)
			break;
	fclose(f);
	return kib;
}
