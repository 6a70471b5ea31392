/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 the evrdma authors */
/*
 * evrdma device tests: the entry point and the smoke suite. Needs a real
 * RDMA device; tests/device-tests runs this in the Soft-RoCE guest when the
 * host has none.
 */
#include "devtest.h"
#include "bevtest.h"
#include "infotest.h"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <poll.h>
#include <sys/wait.h>

/* rdma-core itself sees the device the tests are meant for. */
START_TEST(smoke_device_list)
{
	struct ibv_device **list;
	int n, i, found = 0;

	list = ibv_get_device_list(&n);
	ck_assert_ptr_nonnull(list);
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dt_ibdev()))
			found = 1;
	ibv_free_device_list(list);
	ck_assert_msg(found, "device %s not in the device list", dt_ibdev());
}
END_TEST

/*
 * Resolve the guest's own address with rdma_cm through a non-blocking event
 * channel driven by poll(), and check the id is bound to the test device.
 */
START_TEST(smoke_resolve_own_address)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct sockaddr_storage ss;
	struct pollfd pfd;
	int flags;

	dt_sockaddr(&ss, dt_addr(), 0);
	ch = rdma_create_event_channel();
	ck_assert_ptr_nonnull(ch);
	flags = fcntl(ch->fd, F_GETFL);
	ck_assert_int_eq(fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK), 0);
	ck_assert_int_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	ck_assert_int_eq(rdma_resolve_addr(id, NULL, (struct sockaddr *)&ss,
	    2000), 0);
	/* non-blocking: nothing may be pending yet, and it must not block */
	pfd.fd = ch->fd;
	pfd.events = POLLIN;
	ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
	ck_assert_int_eq(rdma_get_cm_event(ch, &ev), 0);
	ck_assert_str_eq(rdma_event_str(ev->event),
	    rdma_event_str(RDMA_CM_EVENT_ADDR_RESOLVED));
	ck_assert_int_eq(ev->status, 0);
	rdma_ack_cm_event(ev);
	ck_assert_ptr_nonnull(id->verbs);
	ck_assert_str_eq(ibv_get_device_name(id->verbs->device), dt_ibdev());
	ck_assert_int_eq(rdma_get_cm_event(ch, &ev), -1);
	ck_assert_int_eq(errno, EAGAIN);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}
END_TEST

/* The same through evrdma: a connection resolves onto the test device. */
START_TEST(smoke_evrdma_connect)
{
	struct dt_env env;
	struct dt_pair p;

	memset(&p, 0, sizeof(p));
	dt_env_init(&env, NULL);
	dt_pair_connect(&p, &env, dt_addr(), 0);
	ck_assert_str_eq(evrdma_conn_get_device_name(p.cli), dt_ibdev());
	ck_assert_str_eq(evrdma_conn_get_device_name(p.srv), dt_ibdev());
	dt_pair_close(&p);
	dt_env_fini(&env);
}
END_TEST

Suite *
dt_suite_smoke(void)
{
	Suite *s = suite_create("device-smoke");
	TCase *tc = tcase_create("smoke");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, smoke_device_list);
	tcase_add_test(tc, smoke_resolve_own_address);
	tcase_add_test(tc, smoke_evrdma_connect);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * Every suite runs in a process of its own, forked from this one before any
 * test ran. One runner over all suites spent a third of the sanitizer
 * build's time between tests, growing as the run went on (213 s of 616 s in
 * the guest, against 78 s with a process per suite, the tests themselves
 * taking 405 s either way). The names are those the suites give
 * suite_create(), so that CK_RUN_SUITE still picks one.
 *
 * Most suites spend their time waiting (the guest's CPUs were busy 40% of
 * a full run): those run three at a time (EVRDMA_TEST_JOBS, default 3; 1
 * runs one after the other), longest first. (Three, not two: the longest,
 * device-bev-compare, then bounds the others' time; the whole run with
 * the guest's boot took 243 s against 295.) A suite marked alone runs
 * with no other: it changes what every process in the guest shares (the
 * netdev's ARP or carrier, a device removed or added, the device's packet
 * counters, fixed ports), or its timing is what it tests (keepalive,
 * storms and a thousand channels on two CPUs).
 */
static const struct {
	const char *name;
	Suite *(*make)(void);
	int alone;
} suites[] = {
	{ "device-bev-compare", bt_suite_compare, 0 },
	{ "device-bev-compare-2", bt_suite_compare2, 0 },
	{ "device-chan-compare", dt_suite_chan_compare, 0 },
	{ "device-chan-attack", dt_suite_chan_attack, 0 },
	{ "device-chan-fast", dt_suite_chan_fast, 0 },
	{ "device-chan-pull", dt_suite_chan_pull, 0 },
	{ "device-chan-isolation", dt_suite_chan_isolation, 0 },
	{ "device-warm", dt_suite_warm, 0 },
	{ "device-chan-stream", dt_suite_chan_stream, 0 },
	{ "device-bev", bt_suite_bev, 0 },
	{ "device-bev-attack", bt_suite_attack, 0 },
	{ "device-bev-strangers", bt_suite_strangers, 0 },
	{ "device-bev-lib", bt_suite_lib, 0 },
	{ "device-chan-semantics", dt_suite_chan_semantics, 0 },
	{ "device-chan-failure", dt_suite_chan_failure, 0 },
	{ "device-chan-recv", dt_suite_chan_recv, 0 },
	{ "device-conn", dt_suite_conn, 0 },
	{ "device-conn-attack", dt_suite_conn_attack, 0 },
	{ "device-strangers", dt_suite_strangers, 1 },
	{ "device-srq", dt_suite_srq, 0 },
	{ "device-chan-srq", dt_suite_chan_srq, 1 },
	{ "device-smoke", dt_suite_smoke, 0 },
	{ "device-info", dt_suite_info, 0 },
	{ "device-liveness", dt_suite_liveness, 1 },
	{ "device-storm", dt_suite_storm, 1 },
	{ "device-chan-scale", dt_suite_chan_scale, 1 },
	{ "device-fork", dt_suite_fork, 1 },
	{ "device-multi", dt_suite_devices, 1 },
	{ "device-lifetime", dt_suite_lifetime, 1 },
	{ "device-fail", dt_suite_fail, 1 },
	{ "device-rping", dt_suite_rping, 1 },
	{ "device-bev-examples", dt_suite_bev_examples, 1 },
};
#define NSUITES (sizeof(suites) / sizeof(suites[0]))

/* What one suite's process reports: checks run, failures, errors. */
struct suite_counts {
	int run, failures, errors;
};

static void
run_suite(size_t k, struct suite_counts *c)
{
	SRunner *sr = srunner_create(suites[k].make());
	const char *xml = getenv("CK_XML_LOG_FILE_NAME");
	char path[512];
	TestResult **tr;
	int i, n;

	/* one log per suite, or each process would overwrite the last */
	if (xml && *xml) {
		snprintf(path, sizeof(path), "%s.%s", xml, suites[k].name);
		srunner_set_xml(sr, path);
	}
	srunner_run_all(sr, CK_NORMAL);
	n = srunner_ntests_failed(sr);
	tr = srunner_failures(sr);
	c->run = srunner_ntests_run(sr);
	c->failures = c->errors = 0;
	for (i = 0; i < n; i++) {
		if (tr_rtype(tr[i]) == CK_FAILURE)
			c->failures++;
		else
			c->errors++;
	}
	free(tr);
	srunner_free(sr);
}

/* A suite's process: its counts come back through a pipe; while others
 * run beside it, its output goes to a file, printed whole when it ends. */
struct job {
	pid_t pid;
	size_t k;
	int fd;
	FILE *out;
};

static int
job_start(struct job *j, size_t k, int capture)
{
	struct suite_counts c;
	int fd[2];

	j->k = k;
	j->out = NULL;
	if (capture && !(j->out = tmpfile()))
		return -1;
	fflush(NULL);
	if (pipe(fd) < 0 || (j->pid = fork()) < 0)
		return -1;
	if (!j->pid) {
		close(fd[0]);
		if (j->out && (dup2(fileno(j->out), STDOUT_FILENO) < 0 ||
		    dup2(fileno(j->out), STDERR_FILENO) < 0))
			_exit(2);
		run_suite(k, &c);
		if (write(fd[1], &c, sizeof(c)) != (ssize_t)sizeof(c))
			_exit(2);
		exit(0);
	}
	close(fd[1]);
	j->fd = fd[0];
	return 0;
}

/* The suite's process @p j ended with status @p st: its output, counts. */
static void
job_end(struct job *j, int st, struct suite_counts *c)
{
	char buf[4096];
	size_t n;

	if (read(j->fd, c, sizeof(*c)) != (ssize_t)sizeof(*c))
		memset(c, 0, sizeof(*c));
	close(j->fd);
	if (j->out) {
		rewind(j->out);
		while ((n = fread(buf, 1, sizeof(buf), j->out)) > 0)
			fwrite(buf, 1, n, stdout);
		fclose(j->out);
		fflush(stdout);
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		/* the runner itself died (a leak found at its exit, a crash
		 * outside any test): that is an error */
		fprintf(stderr, "test_device: the process of suite %s ended "
		    "with status 0x%x\n", suites[j->k].name, st);
		c->errors++;
	}
}

static int
picked(size_t k)
{
	const char *only = getenv("CK_RUN_SUITE");

	return !only || !*only || !strcmp(only, suites[k].name);
}

static void
tally(struct suite_counts *all, const struct suite_counts *c)
{
	all->run += c->run;
	all->failures += c->failures;
	all->errors += c->errors;
}

/* May suite @p k start beside the @p nrun suites in @p run? */
static int
may_start(size_t k, const struct job *run, int nrun, int jobs)
{
	int i;

	if (nrun >= jobs || (nrun && suites[k].alone))
		return 0;
	for (i = 0; i < nrun; i++)
		if (suites[run[i].k].alone)
			return 0;
	return 1;
}

int
main(void)
{
	const char *fk = getenv("CK_FORK");
	const char *jv = getenv("EVRDMA_TEST_JOBS");
	int jobs = jv && *jv ? atoi(jv) : 3;
	struct suite_counts c, all = { 0, 0, 0 };
	struct job run[3];
	int nrun = 0, st, i;
	size_t k = 0;
	pid_t pid;

	tu_log_quiet();
	if (jobs < 1)
		jobs = 1;
	if (jobs > 3)
		jobs = 3;	/* run[] */
	if (fk && !strcmp(fk, "no")) {
		/* one process for all (a debugger's view) */
		for (k = 0; k < NSUITES; k++) {
			if (picked(k)) {
				run_suite(k, &c);
				tally(&all, &c);
			}
		}
		goto done;
	}
	while (k < NSUITES || nrun) {
		while (k < NSUITES && (!picked(k) ||
		    may_start(k, run, nrun, jobs))) {
			if (picked(k)) {
				if (job_start(&run[nrun], k, jobs > 1 &&
				    !suites[k].alone) < 0) {
					perror("test_device: pipe/fork");
					return EXIT_FAILURE;
				}
				nrun++;
			}
			k++;
		}
		if (!nrun)
			break;	/* nothing left to start or to wait for */
		while ((pid = waitpid(-1, &st, 0)) < 0 && errno == EINTR)
			;
		for (i = 0; i < nrun && run[i].pid != pid; i++)
			;
		if (pid < 0 || i == nrun) {
			perror("test_device: waitpid");
			return EXIT_FAILURE;
		}
		job_end(&run[i], st, &c);
		tally(&all, &c);
		run[i] = run[--nrun];
	}
done:
	printf("all suites: %d%%: Checks: %d, Failures: %d, "
	    "Errors: %d\n", all.run ? 100 * (all.run - all.failures -
	    all.errors) / all.run : 0, all.run, all.failures, all.errors);
	return all.failures || all.errors ? EXIT_FAILURE : EXIT_SUCCESS;
}
