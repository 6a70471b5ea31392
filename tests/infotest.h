/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma tests: evrdma-info run as a process, on a host without RDMA
 * (test_info.c, in test_host) and on a device (test_info_device.c, in
 * test_device). Its JSON is read by perl's JSON::PP, so that a report
 * that does not parse fails, and flattened into "path=value" lines: an
 * array element is named by its "name", "port" or "index" member
 * ("devices.rxe0.ports.1.state=ACTIVE"), a scalar one as "path[]=value",
 * an empty array or object as "path=[]" or "path={}".
 */
#ifndef EVRDMA_INFOTEST_H_INCLUDED_
#define EVRDMA_INFOTEST_H_INCLUDED_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <check.h>

#ifndef TOOLS_DIR
#error "TOOLS_DIR must name the build's tools directory"
#endif
#define TI_TOOL		TOOLS_DIR "/evrdma-info"

static const char ti_flatten[] =
    "use strict; use JSON::PP; local $/;\n"
    "my $j = JSON::PP->new->decode(scalar <STDIN>);\n"
    "sub id { my $o = shift; return undef unless ref $o eq 'HASH';\n"
    "  for (qw(name port index)) { return $o->{$_} if defined $o->{$_} }\n"
    "  undef }\n"
    "sub f { my ($p, $v) = @_;\n"
    "  if (ref $v eq 'HASH') { print \"$p={}\\n\" unless %$v;\n"
    "    f($p eq '' ? $_ : \"$p.$_\", $v->{$_}) for sort keys %$v }\n"
    "  elsif (ref $v eq 'ARRAY') { print \"$p=[]\\n\" unless @$v;\n"
    "    for my $e (@$v) { my $k = id($e);\n"
    "      f(defined $k ? \"$p.$k\" : \"$p\\[]\", $e) } }\n"
    "  else { print \"$p=\", !defined $v ? 'null' : JSON::PP::is_bool($v)\n"
    "    ? ($v ? 'true' : 'false') : $v, \"\\n\" } }\n"
    "f('', $j);\n";

/*
 * Run evrdma-info with @p args after the shell words @p prefix (an
 * environment assignment, a wrapper; "" for none) and take its stdout and
 * stderr into @p out. With @p json, its stdout goes through ti_flatten
 * instead (a report that does not parse leaves "perl failed").
 * @return its exit status
 */
static inline int
ti_run(char *out, size_t size, const char *prefix, const char *args,
    int json)
{
	char cmd[1024];
	size_t len = 0;
	const char *st;
	FILE *p;
	int rc;

	ck_assert_int_eq(setenv("TI_TOOL", TI_TOOL, 1), 0);
	ck_assert_int_eq(setenv("TI_FLATTEN", ti_flatten, 1), 0);
	if (json)
		snprintf(cmd, sizeof(cmd), "j=$(%s \"$TI_TOOL\" %s); st=$?; "
		    "printf '%%s\\n' \"$j\" | perl -e \"$TI_FLATTEN\" || "
		    "echo 'perl failed'; echo \"exit=$st\"", prefix, args);
	else
		snprintf(cmd, sizeof(cmd), "%s \"$TI_TOOL\" %s 2>&1; "
		    "echo \"exit=$?\"", prefix, args);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while (len + 1 < size && !feof(p) && !ferror(p))
		len += fread(out + len, 1, size - 1 - len, p);
	out[len] = '\0';
	rc = pclose(p);
	ck_assert_msg(rc == 0, "%s: shell status %d:\n%s", cmd, rc, out);
	ck_assert_msg(!strstr(out, "perl failed"), "not JSON:\n%s", out);
	st = strstr(out, "exit=");
	ck_assert_msg(st != NULL, "no exit status:\n%s", out);
	while (strstr(st + 1, "exit="))
		st = strstr(st + 1, "exit=");
	return atoi(st + 5);
}

/* @p out has the line @p line, whole. */
static inline int
ti_has_line(const char *out, const char *line)
{
	size_t n = strlen(line);

	for (const char *s = out; (s = strstr(s, line)); s++)
		if ((s == out || s[-1] == '\n') && (s[n] == '\n' || !s[n]))
			return 1;
	return 0;
}

/* Fail unless @p out has the line @p fmt says. */
#define TI_LINE(out, ...) do {						\
	char ti_l_[1024];						\
	snprintf(ti_l_, sizeof(ti_l_), __VA_ARGS__);			\
	ck_assert_msg(ti_has_line(out, ti_l_), "no line \"%s\" in:\n%s", \
	    ti_l_, out);						\
} while (0)

/* The value of the line "@p key=..." (up to the newline) in @p val. */
static inline int
ti_value(const char *out, const char *key, char *val, size_t size)
{
	size_t n = strlen(key);

	for (const char *s = out; (s = strstr(s, key)); s++)
		if ((s == out || s[-1] == '\n') && s[n] == '=') {
			size_t l = strcspn(s + n + 1, "\n");

			snprintf(val, size, "%.*s", (int)l, s + n + 1);
			return 1;
		}
	return 0;
}

Suite *ti_suite_host(void);	/* "info" (test_info.c) */
Suite *dt_suite_info(void);	/* "device-info" (test_info_device.c) */

#endif /* EVRDMA_INFOTEST_H_INCLUDED_ */
