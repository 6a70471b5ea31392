/*
 * evrdma device tests: the examples as real processes. evrdma-rping against
 * rdma-core's rping (package rdmacm-utils) in both directions, and
 * evrdma-onesided. Each test forks and execs the programs and waits for
 * them with a deadline; a child dies with the test process (PDEATHSIG), so
 * a failed test leaves nothing behind. Ports 7301.. are one per test.
 */
#include "config.h"	/* _GNU_SOURCE: pipe2() */

#include "devtest.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#ifndef EXAMPLES_DIR
#error "EXAMPLES_DIR must name the build's examples directory"
#endif

#define RP_EVRDMA_RPING	EXAMPLES_DIR "/evrdma-rping"
#define RP_ONESIDED	EXAMPLES_DIR "/evrdma-onesided"
#define RP_WAIT_MS	30000	/* per process; the guest is slow */

/* A child process whose stdout and stderr go to one pipe we read. */
struct rp_proc {
	const char *name;
	pid_t pid;
	int fd;			/* the pipe's read end; -1 after EOF */
	size_t len;
	char out[65536];	/* what it wrote, NUL-terminated */
};

static void
rp_start(struct rp_proc *p, char *const argv[])
{
	pid_t parent = getpid();
	int pfd[2];

	p->name = argv[0];
	p->len = 0;
	p->out[0] = '\0';
	ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	p->pid = fork();
	ck_assert_int_ge(p->pid, 0);
	if (p->pid == 0) {
		/* die with the test process, however it ends */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		dup2(pfd[1], STDOUT_FILENO);
		dup2(pfd[1], STDERR_FILENO);
		execvp(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	p->fd = pfd[0];
}

/* Take what the child wrote, waiting at most @p ms for something. */
static void
rp_read(struct rp_proc *p, int ms)
{
	struct pollfd pfd;
	char discard[4096];
	ssize_t n;

	if (p->fd < 0)
		return;
	pfd.fd = p->fd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, ms < 0 ? 0 : ms) <= 0)
		return;
	if (p->len + 1 < sizeof(p->out))
		n = read(p->fd, p->out + p->len, sizeof(p->out) - 1 - p->len);
	else
		n = read(p->fd, discard, sizeof(discard));
	if (n <= 0) {
		close(p->fd);
		p->fd = -1;
		return;
	}
	if (p->len + 1 < sizeof(p->out)) {
		p->len += (size_t)n;
		p->out[p->len] = '\0';
	}
}

/* Run until the child's output holds @p needle; fail after @p ms. */
static void
rp_expect_output(struct rp_proc *p, const char *needle, int ms)
{
	uint64_t end = tu_now_ms() + (uint64_t)ms;

	while (!strstr(p->out, needle)) {
		ck_assert_msg(p->fd >= 0 && tu_now_ms() < end,
		    "%s: no \"%s\" in its output:\n%s", p->name, needle,
		    p->out);
		rp_read(p, (int)(end - tu_now_ms()));
	}
}

/* Collect the child's output and exit status; kill it and fail if it
 * takes longer than @p ms or dies from a signal. */
static int
rp_wait(struct rp_proc *p, int ms)
{
	uint64_t end = tu_now_ms() + (uint64_t)ms;
	int st;

	/* The pipe reaches EOF when the child exits. */
	while (p->fd >= 0 && tu_now_ms() < end)
		rp_read(p, (int)(end - tu_now_ms()));
	while (waitpid(p->pid, &st, WNOHANG) == 0) {
		struct timespec ts = { 0, 1000000 };

		if (tu_now_ms() >= end) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &st, 0);
			ck_abort_msg("%s did not exit within %d ms; output:\n%s",
			    p->name, ms, p->out);
		}
		nanosleep(&ts, NULL);
	}
	if (p->fd >= 0) {
		close(p->fd);
		p->fd = -1;
	}
	ck_assert_msg(WIFEXITED(st), "%s killed by signal %d; output:\n%s",
	    p->name, WTERMSIG(st), p->out);
	return WEXITSTATUS(st);
}

static void
rp_expect_exit0(struct rp_proc *p)
{
	int rc = rp_wait(p, RP_WAIT_MS);

	ck_assert_msg(rc == 0, "%s exited %d; output:\n%s", p->name, rc,
	    p->out);
}

static int
rp_count(const char *s, const char *needle)
{
	int n = 0;

	while ((s = strstr(s, needle)) != NULL) {
		n++;
		s += strlen(needle);
	}
	return n;
}

/* A device test never skips: without rping it fails and says why. */
static void
rp_need_rping(void)
{
	const char *path = getenv("PATH");
	char file[4096];

	while (path && *path) {
		size_t n = strcspn(path, ":");

		snprintf(file, sizeof(file), "%.*s/rping", (int)n, path);
		if (n && access(file, X_OK) == 0)
			return;
		path += n + (path[n] == ':');
	}
	ck_abort_msg("rping not found in PATH: install rdmacm-utils "
	    "(apt-get install rdmacm-utils)");
}

/* Real rping server, evrdma-rping client. */
START_TEST(rping_real_server)
{
	struct rp_proc srv, cli;
	char *addr = (char *)dt_addr();
	char *sargv[] = { "rping", "-s", "-a", addr, "-p", "7301", "-v",
	    NULL };
	char *cargv[] = { RP_EVRDMA_RPING, "-c", "-a", addr, "-p", "7301",
	    "-C", "5", "-V", "-v", NULL };
	int tries, rc;

	rp_need_rping();
	rp_start(&srv, sargv);
	/* rping prints nothing once it listens: retry while the connect
	 * request is rejected for want of a listener. */
	for (tries = 0;; tries++) {
		rp_start(&cli, cargv);
		rc = rp_wait(&cli, RP_WAIT_MS);
		if (rc == 0 || tries == 100 ||
		    !strstr(cli.out, evrdma_reason_str(EVRDMA_REASON_REJECTED)))
			break;
		{
			struct timespec ts = { 0, 50 * 1000000 };

			nanosleep(&ts, NULL);
		}
	}
	ck_assert_msg(rc == 0, "evrdma-rping -c exited %d after %d tries; "
	    "output:\n%s", rc, tries + 1, cli.out);
	ck_assert_int_eq(rp_count(cli.out, "ping data: rdma-ping-"), 5);
	rp_expect_exit0(&srv);
	ck_assert_int_eq(rp_count(srv.out, "server ping data: rdma-ping-"),
	    5);
}
END_TEST

/* evrdma-rping server, real rping client (which validates the echo). */
static void
rp_our_server(const char *addr, const char *port)
{
	struct rp_proc srv, cli;
	char *sargv[] = { RP_EVRDMA_RPING, "-s", "-a", (char *)addr, "-p",
	    (char *)port, "-C", "5", "-v", NULL };
	char *cargv[] = { "rping", "-c", "-a", (char *)addr, "-p",
	    (char *)port, "-C", "5", "-V", "-v", NULL };

	rp_need_rping();
	rp_start(&srv, sargv);
	rp_expect_output(&srv, "listening on", RP_WAIT_MS);
	rp_start(&cli, cargv);
	rp_expect_exit0(&cli);
	ck_assert_int_eq(rp_count(cli.out, "ping data: rdma-ping-"), 5);
	rp_expect_exit0(&srv);
	ck_assert_int_eq(rp_count(srv.out, "server ping data: rdma-ping-"),
	    5);
}

START_TEST(rping_real_client)
{
	rp_our_server(dt_addr(), "7302");
}
END_TEST

START_TEST(rping_real_client_ipv6)
{
	rp_our_server(dt_addr6(), "7303");
}
END_TEST

/* evrdma-rping on both ends, a larger size. */
START_TEST(rping_both_ours)
{
	struct rp_proc srv, cli;
	char *addr = (char *)dt_addr();
	char *sargv[] = { RP_EVRDMA_RPING, "-s", "-a", addr, "-p", "7304",
	    "-C", "3", "-S", "4000", NULL };
	char *cargv[] = { RP_EVRDMA_RPING, "-c", "-a", addr, "-p", "7304",
	    "-C", "3", "-S", "4000", "-V", NULL };

	rp_start(&srv, sargv);
	rp_expect_output(&srv, "listening on", RP_WAIT_MS);
	rp_start(&cli, cargv);
	rp_expect_exit0(&cli);
	rp_expect_exit0(&srv);
}
END_TEST

/* The lines evrdma-onesided's client end prints, one per completion. */
static const char *const rp_onesided_client_lines[] = {
	"write: 32 bytes ok\n",
	"read: 32 bytes ok \"one-sided hello from evrdma!\"\n",
	"fetch-and-add: +5, old value 100 ok\n",
	"compare-and-swap: 105 -> 42, old value 105 ok\n",
};
static const char rp_onesided_server_line[] =
    "server: region holds \"one-sided hello from evrdma!\", counter 42: ok\n";

static void
rp_check_onesided_client(const struct rp_proc *p)
{
	size_t i;

	for (i = 0; i < sizeof(rp_onesided_client_lines) /
	    sizeof(rp_onesided_client_lines[0]); i++)
		ck_assert_msg(strstr(p->out, rp_onesided_client_lines[i]),
		    "no \"%s\" in the output:\n%s",
		    rp_onesided_client_lines[i], p->out);
}

START_TEST(onesided_one_process)
{
	struct rp_proc p;
	char *argv[] = { RP_ONESIDED, "-a", (char *)dt_addr(), NULL };

	rp_start(&p, argv);
	rp_expect_exit0(&p);
	rp_check_onesided_client(&p);
	ck_assert_msg(strstr(p.out, rp_onesided_server_line),
	    "no server line in the output:\n%s", p.out);
}
END_TEST

START_TEST(onesided_two_processes)
{
	struct rp_proc srv, cli;
	char *addr = (char *)dt_addr();
	char *sargv[] = { RP_ONESIDED, "-s", "-a", addr, "-p", "7305", NULL };
	char *cargv[] = { RP_ONESIDED, "-c", "-a", addr, "-p", "7305", NULL };

	rp_start(&srv, sargv);
	rp_expect_output(&srv, "listening on", RP_WAIT_MS);
	rp_start(&cli, cargv);
	rp_expect_exit0(&cli);
	rp_check_onesided_client(&cli);
	rp_expect_exit0(&srv);
	ck_assert_msg(strstr(srv.out, rp_onesided_server_line),
	    "no server line in the output:\n%s", srv.out);
}
END_TEST

Suite *
dt_suite_rping(void)
{
	Suite *s = suite_create("device-rping");
	TCase *tc = tcase_create("examples");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, rping_real_server);
	tcase_add_test(tc, rping_real_client);
	tcase_add_test(tc, rping_real_client_ipv6);
	tcase_add_test(tc, rping_both_ours);
	tcase_add_test(tc, onesided_one_process);
	tcase_add_test(tc, onesided_two_processes);
	suite_add_tcase(s, tc);
	return s;
}
