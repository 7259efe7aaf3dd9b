"""Watches against a real lapsed: resumes across a durable restart with no
gap and no duplicate; OUT_OF_RANGE raised, never skipped."""

import grpc
import pytest
from lapse_testing import PAST, LapsedProcess, expire_now, take

import lapse

# Short reconnect delays so that a watch finds a restarted lapsed promptly.
QUICK = lapse.ClientOptions(
    watch_backoff=lapse.Backoff(initial=0.05, max=0.2),
    reconnect_backoff_initial=0.1,
    reconnect_backoff_max=0.2,
)


def test_a_watch_yields_each_expiry_with_its_member(client):
    # OLDEST: the server is new, so the watch cannot miss what follows even
    # if its stream is not in place yet.
    with client.watch(collections=["orders"], include_values=True, start=lapse.Start.OLDEST) as watch:
        client.put("orders", {"a": b"1"})
        client.expire("orders", ["a"], deadline=PAST)
        (event,) = take(watch, 1)
    assert (event.collection, event.key, event.value) == ("orders", "a", b"1")
    assert event.expire_time <= event.expired_at
    # The event counts as handed over once the consumer asks for the next.
    assert watch.position < event.sequence


# A stop (SIGTERM) ends the stream naming the last sequence delivered; a kill
# (SIGKILL) just drops the connection, so the watch resumes from what it
# examined itself.
@pytest.mark.parametrize("end", ["stop", "kill"])
def test_a_watch_resumes_after_a_durable_restart_with_no_gap_and_no_duplicate(tmp_path, end):
    flags = [f"--data-dir={tmp_path}"]
    lapsed = LapsedProcess(flags)
    try:
        with lapse.Client(lapsed.address, QUICK) as client:
            watch = client.watch(start=lapse.Start.OLDEST)
            expire_now(client, "orders", ["a", "b"])
            before = take(watch, 2)
            if end == "stop":
                assert lapsed.stop() == 0
            else:
                lapsed.kill()
            lapsed = LapsedProcess(flags, port=lapsed.port)
            # A new client: the old channel is still backing off.
            with lapse.Client(lapsed.address) as writer:
                expire_now(writer, "orders", ["c", "d"])
            after = take(watch, 2)
            watch.cancel()
    finally:
        lapsed.kill()
    events = before + after
    assert [e.key for e in events] == ["a", "b", "c", "d"]
    sequences = [e.sequence for e in events]
    assert sequences == sorted(set(sequences))


def test_a_resume_point_no_longer_retained_raises_out_of_range(lapsed_small_retention):
    with lapse.Client(lapsed_small_retention.address) as client:
        with client.watch(start=lapse.Start.OLDEST) as first:
            sequences = []
            for key in ["a", "b", "c", "d"]:
                expire_now(client, "orders", [key])
                sequences += [e.sequence for e in take(first, 1)]
        late = client.watch(after_sequence=sequences[0])
        with pytest.raises(lapse.OutOfRangeError) as gone:
            take(late, 1)
    assert gone.value.code == grpc.StatusCode.OUT_OF_RANGE
    assert "oldest" in gone.value.details


def test_a_cancelled_watch_stops_iterating(client):
    watch = client.watch()
    watch.cancel()
    assert list(watch) == []


@pytest.fixture
def lapsed_small_retention():
    process = LapsedProcess(["--event_retention_events=2"])
    yield process
    process.kill()


def test_a_watch_cancelled_between_two_events_of_a_batch_yields_no_more(client):
    client.put("orders", {"a": b"", "b": b""})
    watch = client.watch(start=lapse.Start.OLDEST)
    # One call: both events reach the watch in one batch.
    client.expire("orders", ["a", "b"], deadline=PAST)
    (first,) = take(watch, 1)
    watch.cancel()
    assert first.key == "a"
    assert list(watch) == []


def test_a_watch_resumes_by_token_and_a_restarted_memory_only_server_raises_out_of_range():
    lapsed = LapsedProcess()
    try:
        with lapse.Client(lapsed.address, QUICK) as client:
            watch = client.watch(start=lapse.Start.OLDEST)
            expire_now(client, "orders", ["a", "b"])
            take(watch, 2)
            lapsed.kill()
            lapsed = LapsedProcess(port=lapsed.port)
            # The new store has events of its own: a bare sequence would not
            # always tell them from the old store's, the token does.
            with lapse.Client(lapsed.address) as writer:
                expire_now(writer, "orders", ["c"])
            with pytest.raises(lapse.OutOfRangeError) as other_store:
                take(watch, 1)
            assert "resume_token: belongs to store" in other_store.value.details
            # The position to keep, as the server gave it: a later watch from
            # it is refused the same way.
            assert watch.resume_token
            with pytest.raises(lapse.OutOfRangeError, match="belongs to store"):
                take(client.watch(resume_token=watch.resume_token), 1)
    finally:
        lapsed.kill()
