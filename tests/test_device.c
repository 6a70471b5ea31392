/*
 * evrdma device tests: the entry point and the smoke suite. Needs a real
 * RDMA device; tests/device-tests runs this in the Soft-RoCE guest when the
 * host has none.
 */
#include "devtest.h"
#include "bevtest.h"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <poll.h>

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

int
main(void)
{
	SRunner *sr = srunner_create(dt_suite_smoke());
	int failed;

	srunner_add_suite(sr, dt_suite_conn());
	srunner_add_suite(sr, dt_suite_chan_stream());
	srunner_add_suite(sr, dt_suite_chan_compare());
	srunner_add_suite(sr, dt_suite_chan_semantics());
	srunner_add_suite(sr, dt_suite_chan_recv());
	srunner_add_suite(sr, dt_suite_chan_scale());
	srunner_add_suite(sr, dt_suite_chan_failure());
	srunner_add_suite(sr, dt_suite_storm());
	srunner_add_suite(sr, dt_suite_chan_attack());
	srunner_add_suite(sr, dt_suite_liveness());
	srunner_add_suite(sr, dt_suite_fork());
	srunner_add_suite(sr, dt_suite_devices());
	srunner_add_suite(sr, dt_suite_lifetime());
	srunner_add_suite(sr, bt_suite_compare());
	srunner_add_suite(sr, bt_suite_bev());
	srunner_add_suite(sr, dt_suite_fail());
	srunner_add_suite(sr, dt_suite_rping());
	srunner_add_suite(sr, dt_suite_bev_examples());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
