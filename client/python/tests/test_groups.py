"""Consumer groups against a real lapsed: the admin calls, Poll/Ack/Nack/
ExtendLeases, and the Worker loop (ack on return, release on raise, polling
on across a restart under its name, lost events raised)."""

import contextlib
import datetime
import queue
import threading

import grpc
import pytest
from lapse_testing import PAST, PATIENCE, LapsedProcess, expire_now, wait_until

import lapse

QUICK = lapse.ClientOptions(
    retry_backoff=lapse.Backoff(initial=0.05, max=0.2),
    reconnect_backoff_initial=0.1,
    reconnect_backoff_max=0.2,
)


@contextlib.contextmanager
def running(worker):
    """Runs `worker` on a thread; on exit stops it and raises what run()
    raised."""
    failure: "queue.Queue" = queue.Queue()

    def run():
        try:
            worker.run()
        except BaseException as error:  # noqa: B902 - handed to the test thread
            failure.put(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        worker.stop()
        thread.join(PATIENCE)
        assert not thread.is_alive(), "the worker did not stop"
    if not failure.empty():
        raise failure.get()


def handled_keys(handled: "queue.Queue", count: int):
    return [handled.get(timeout=PATIENCE).event.key for _ in range(count)]


def test_group_admin_calls_create_get_list_reset_and_delete(client):
    created = client.create_group(
        "cancel",
        prefix="unpaid:",
        include_values=True,
        start=lapse.Start.OLDEST,
        visibility_timeout=datetime.timedelta(seconds=5),
        max_deliveries=3,
    )
    assert (created.name, created.prefix, created.include_values) == ("cancel", "unpaid:", True)
    assert created.visibility_timeout == datetime.timedelta(seconds=5)
    assert created.max_deliveries == 3
    client.create_group("audit", collections=["b", "a"])
    with pytest.raises(lapse.LapseError) as taken:
        client.create_group("cancel")
    assert taken.value.code == grpc.StatusCode.ALREADY_EXISTS

    expire_now(client, "unpaid:1", ["o1"])
    client.poll("cancel", "w1")
    got = client.group("cancel", max_leases=10)
    assert got.delivered_total == 1 and got.pending == 1
    assert [c.name for c in got.consumers] == ["w1"]
    assert [(l.consumer, l.delivery_count) for l in got.leases] == [("w1", 1)]

    first = client.groups(page_size=1)
    rest = client.groups(page_token=first.next_page_token)
    assert [g.name for g in first.groups + rest.groups] == ["audit", "cancel"]
    assert rest.next_page_token == ""
    assert first.groups[0].collections == ["a", "b"]

    reset = client.reset_group("cancel", start=lapse.Start.NEW)
    assert reset.pending == 0
    assert client.delete_group("cancel").name == "cancel"
    with pytest.raises(lapse.LapseError) as gone:
        client.group("cancel")
    assert gone.value.code == grpc.StatusCode.NOT_FOUND


def test_poll_ack_nack_and_extend_report_per_lease(client):
    client.create_group("g", start=lapse.Start.OLDEST, include_values=True)
    expire_now(client, "orders", ["a", "b"])
    polled = client.poll("g", "w1", max_events=10, wait=datetime.timedelta(seconds=1))
    assert [(d.event.key, d.event.value, d.delivery_count) for d in polled.deliveries] == [
        ("a", b"a", 1),
        ("b", b"b", 1),
    ]
    assert polled.lost is None
    a, b = polled.deliveries
    extended = client.extend_leases("g", "w1", [a], datetime.timedelta(minutes=1))
    assert extended[0].ok
    assert [r.ok for r in client.ack("g", "w1", [a])] == [True]
    again = client.ack("g", "w1", [a.lease])
    assert again[0].code == grpc.StatusCode.FAILED_PRECONDITION and again[0].message
    assert client.nack("g", "w1", [b])[0].ok
    redelivered = client.poll("g", "w2", max_events=10)
    assert [(d.event.key, d.delivery_count) for d in redelivered.deliveries] == [("b", 2)]


def test_a_worker_acks_each_event_its_handler_returns_from(client):
    client.create_group("g", start=lapse.Start.OLDEST)
    handled: "queue.Queue" = queue.Queue()
    worker = client.worker("g", "w1", handled.put, max_events=5)
    with running(worker):
        expire_now(client, "orders", ["a", "b", "c"])
        assert handled_keys(handled, 3) == ["a", "b", "c"]
    group = client.group("g")
    assert (group.acked_total, group.pending) == (3, 0)


def test_a_worker_releases_an_event_whose_handler_raises_and_it_is_redelivered(client):
    client.create_group("g", start=lapse.Start.OLDEST)
    handled: "queue.Queue" = queue.Queue()
    errors: "queue.Queue" = queue.Queue()

    def handler(delivery):
        if delivery.delivery_count == 1:
            raise RuntimeError("the payment service is down")
        handled.put(delivery)

    worker = client.worker("g", "w1", handler, on_error=lambda d, e: errors.put((d, e)))
    with running(worker):
        expire_now(client, "orders", ["a"])
        delivery = handled.get(timeout=PATIENCE)
    assert (delivery.event.key, delivery.delivery_count) == ("a", 2)
    failed, error = errors.get_nowait()
    assert failed.delivery_count == 1 and "payment" in str(error)
    assert client.group("g").acked_total == 1


def test_a_worker_polls_on_across_a_durable_restart_under_its_name(tmp_path):
    flags = [f"--data-dir={tmp_path}"]
    lapsed = LapsedProcess(flags)
    try:
        with lapse.Client(lapsed.address, QUICK) as client:
            client.create_group("g", start=lapse.Start.OLDEST)
            handled: "queue.Queue" = queue.Queue()
            worker = client.worker("g", "w1", handled.put, wait=datetime.timedelta(seconds=1))
            with running(worker):
                expire_now(client, "orders", ["a"])
                assert handled_keys(handled, 1) == ["a"]
                # Its ack is through: no redelivery to wait for after the
                # restart.
                wait_until(lambda: client.group("g").acked_total == 1)
                assert lapsed.stop() == 0
                lapsed = LapsedProcess(flags, port=lapsed.port)
                with lapse.Client(lapsed.address) as writer:
                    expire_now(writer, "orders", ["b"])
                assert handled_keys(handled, 1) == ["b"]
            group = client.group("g")
        assert [c.name for c in group.consumers] == ["w1"]
        # Counted since the server started: "b".
        assert (group.acked_total, group.pending) == (1, 0)
    finally:
        lapsed.kill()


@pytest.fixture
def lapsed_small_retention():
    process = LapsedProcess(["--event_retention_events=2"])
    yield process
    process.kill()


def test_events_a_group_lost_to_retention_end_the_worker_with_lost_events_error(
    lapsed_small_retention,
):
    with lapse.Client(lapsed_small_retention.address) as client:
        client.create_group("g", start=lapse.Start.OLDEST)
        expire_now(client, "orders", ["a", "b", "c", "d"])
        handled: "queue.Queue" = queue.Queue()
        worker = client.worker("g", "w1", handled.put, max_events=10)
        with pytest.raises(lapse.LostEventsError) as lost:
            with running(worker) as thread:
                thread.join(PATIENCE)
        assert lost.value.code == grpc.StatusCode.OUT_OF_RANGE
        assert lost.value.first_sequence <= lost.value.last_sequence
        assert "discarded" in lost.value.details
        assert handled.empty()
        # The deliveries of that poll were released, not dropped.
        assert client.group("g").awaiting_redelivery == 2


def test_a_worker_with_on_lost_is_told_and_goes_on(lapsed_small_retention):
    with lapse.Client(lapsed_small_retention.address) as client:
        client.create_group("g", start=lapse.Start.OLDEST)
        expire_now(client, "orders", ["a", "b", "c", "d"])
        handled: "queue.Queue" = queue.Queue()
        lost: "queue.Queue" = queue.Queue()
        worker = client.worker("g", "w1", handled.put, max_events=10, on_lost=lost.put)
        with running(worker):
            assert handled_keys(handled, 2) == ["c", "d"]
        assert isinstance(lost.get_nowait(), lapse.LostEventsError)


def test_stop_ends_a_worker_waiting_in_a_poll(client):
    client.create_group("g")
    worker = client.worker("g", "w1", lambda d: None, wait=datetime.timedelta(seconds=60))
    with running(worker) as thread:
        pass
    assert not thread.is_alive()


def test_a_worker_on_a_deleted_group_ends_with_not_found(client):
    worker = client.worker("missing", "w1", lambda d: None)
    with pytest.raises(lapse.LapseError) as missing:
        worker.run()
    assert missing.value.code == grpc.StatusCode.NOT_FOUND


def test_a_worker_whose_lease_ran_out_is_told_at_its_ack_and_another_worker_got_the_event(client):
    client.create_group(
        "g", start=lapse.Start.OLDEST, visibility_timeout=datetime.timedelta(seconds=1)
    )
    redelivered = threading.Event()
    errors: "queue.Queue" = queue.Queue()

    def slow(delivery):
        # Holds the event until its lease ran out and another worker got it.
        assert redelivered.wait(PATIENCE)

    def fast(delivery):
        if delivery.delivery_count == 2:
            redelivered.set()

    with running(client.worker("g", "w1", slow, on_error=lambda d, e: errors.put((d, e)))):
        expire_now(client, "orders", ["a"])
        wait_until(lambda: client.group("g").delivered_total == 1)
        with running(client.worker("g", "w2", fast)):
            delivery, error = errors.get(timeout=PATIENCE)
    assert (delivery.event.key, delivery.delivery_count) == ("a", 1)
    assert error.code == grpc.StatusCode.FAILED_PRECONDITION
    assert client.group("g").acked_total == 1
