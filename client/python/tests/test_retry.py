"""Retries against a scripted server: idempotent calls only, within the deadline."""

import datetime
import threading
import time
from concurrent import futures

import grpc
import pytest

import lapse
from lapse.v1 import lapse_pb2 as pb
from lapse.v1 import lapse_pb2_grpc as pb_grpc


class Scripted(pb_grpc.LapseServiceServicer):
    """Fails the first `failures` calls with UNAVAILABLE; GetCollection can
    be told to hang until released."""

    def __init__(self, failures: int):
        self.failures = failures
        self.calls = 0
        self.release = threading.Event()
        self.hang = False
        # When each Poll that did not fail was answered.
        self.polls = []
        self.polled = threading.Event()

    def _fail_or(self, context, response):
        self.calls += 1
        if self.calls <= self.failures:
            context.abort(grpc.StatusCode.UNAVAILABLE, "scripted")
        return response

    def GetMembers(self, request, context):
        return self._fail_or(context, pb.GetMembersResponse())

    def PutMembers(self, request, context):
        return self._fail_or(context, pb.PutMembersResponse())

    def Ack(self, request, context):
        return self._fail_or(context, pb.AckResponse())

    def Poll(self, request, context):
        response = self._fail_or(context, pb.PollResponse())
        self.polls.append(time.monotonic())
        if len(self.polls) == 3:
            self.polled.set()
        return response

    def GetCollection(self, request, context):
        if self.hang:
            self.release.wait()
        return self._fail_or(context, pb.GetCollectionResponse())


@pytest.fixture
def scripted():
    servicer = Scripted(failures=3)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_LapseServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    options = lapse.ClientOptions(
        retry_backoff=lapse.Backoff(initial=0.001, max=0.002),
        idle_poll_backoff=lapse.Backoff(initial=0.2, max=0.2),
    )
    with lapse.Client(f"127.0.0.1:{port}", options) as client:
        yield servicer, client
    servicer.release.set()
    server.stop(None)


def test_an_idempotent_call_is_retried_on_unavailable_until_it_succeeds(scripted):
    servicer, client = scripted
    assert client.get("c", []) == []
    assert servicer.calls == 4


def test_an_idempotent_call_gives_up_after_max_attempts(scripted):
    servicer, client = scripted
    servicer.failures = 10
    with pytest.raises(lapse.LapseError) as failed:
        client.get("c", [])
    assert failed.value.code == grpc.StatusCode.UNAVAILABLE
    assert servicer.calls == 4


def test_puts_and_refreshing_gets_are_attempted_once(scripted):
    servicer, client = scripted
    with pytest.raises(lapse.LapseError) as put:
        client.put("c", {"a": b""})
    assert put.value.code == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(lapse.LapseError):
        client.get("c", ["a"], refresh_ttl=datetime.timedelta(seconds=1))
    assert servicer.calls == 2


def test_acks_are_retried_on_unavailable_and_polls_are_not(scripted):
    servicer, client = scripted
    assert client.ack("g", "w", [lapse.Lease(1, 1)]) == []
    assert servicer.calls == 4
    servicer.failures = 5
    with pytest.raises(lapse.LapseError) as poll:
        client.poll("g", "w")
    assert poll.value.code == grpc.StatusCode.UNAVAILABLE
    assert servicer.calls == 5


def test_a_worker_pauses_after_a_poll_answered_empty_sooner_than_its_wait(scripted):
    # A server that does not long-poll answers at once: the worker waits the
    # idle backoff (at least half its 0.2 s) between such polls, not spinning.
    servicer, client = scripted
    worker = client.worker("g", "w", lambda d: None, wait=datetime.timedelta(seconds=10))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    assert servicer.polled.wait(30)
    worker.stop()
    thread.join(30)
    gaps = [later - earlier for earlier, later in zip(servicer.polls, servicer.polls[1:])]
    assert len(gaps) >= 2 and min(gaps) >= 0.1


def test_a_call_that_outlives_its_timeout_raises_deadline_exceeded(scripted):
    servicer, client = scripted
    servicer.hang = True
    with pytest.raises(lapse.LapseError) as late:
        client.collection("c", timeout=0.05)
    assert late.value.code == grpc.StatusCode.DEADLINE_EXCEEDED


def test_backoff_delays_grow_to_the_max_with_jitter_below_each_ceiling():
    delays = lapse.Backoff(initial=0.01, max=0.04, multiplier=2).delays()
    for ceiling in (0.01, 0.02, 0.04, 0.04):
        assert ceiling / 2 <= next(delays) <= ceiling


def test_a_backoff_that_would_not_wait_is_clamped_to_a_millisecond():
    delays = lapse.Backoff(initial=0, max=0, multiplier=0.5).delays()
    for _ in range(5):
        assert 0.0005 <= next(delays) <= 0.001
