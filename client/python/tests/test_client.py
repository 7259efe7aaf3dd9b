"""The Python client against a real lapsed: every RPC, errors as LapseError."""

import datetime

import grpc
import pytest
from lapse_testing import PAST

import lapse

MINUTE = datetime.timedelta(minutes=1)


def now():
    return datetime.datetime.now(datetime.timezone.utc)


def test_put_writes_with_ttl_or_deadline_and_get_reads_them_back(client):
    deadline = now() + datetime.timedelta(hours=2)
    put = client.put("orders", {"a": b"1", "b": "2"}, ttl=MINUTE)
    assert [(r.key, r.outcome) for r in put] == [
        ("a", lapse.PutOutcome.CREATED),
        ("b", lapse.PutOutcome.CREATED),
    ]
    assert put[0].expire_time > now()
    client.put("orders", [lapse.MemberWrite("c", b"3", deadline=deadline)])
    client.put("orders", [lapse.MemberWrite("d", b"4")])

    got = client.get("orders", ["a", "c", "d", "missing"])
    assert [r.found for r in got] == [True, True, True, False]
    assert got[0].member.value == b"1"
    assert now() < got[0].member.expire_time <= now() + MINUTE
    # Deadlines are rounded up to the millisecond.
    assert datetime.timedelta(0) <= got[1].member.expire_time - deadline
    assert got[1].member.expire_time - deadline < datetime.timedelta(milliseconds=1)
    assert got[2].member.expire_time is None
    assert got[3].member.key == "missing"


def test_put_conditions_skip_and_max_members_refuses_the_whole_write(client):
    client.put("orders", {"a": b"1"})
    put = client.put("orders", {"a": b"2"}, condition=lapse.PutCondition.IF_ABSENT)
    assert put[0].outcome == lapse.PutOutcome.SKIPPED
    client.put("orders", {"b": b"1"}, max_members=2)
    with pytest.raises(lapse.LapseError) as refused:
        client.put("orders", {"c": b"1"}, max_members=2)
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert client.get("orders", ["c"])[0].found is False


def test_get_with_refresh_slides_the_deadline(client):
    client.put("sessions", {"s": b""}, ttl=MINUTE)
    got = client.get("sessions", ["s"], refresh_ttl=datetime.timedelta(hours=1))
    assert got[0].member.expire_time > now() + datetime.timedelta(minutes=59)


def test_remove_says_which_members_existed(client):
    client.put("orders", {"a": b"1"})
    removed = client.remove("orders", ["a", "b"])
    assert [(r.key, r.existed) for r in removed] == [("a", True), ("b", False)]


def test_expire_and_persist_report_their_outcome_per_key(client):
    client.put("orders", {"a": b"1", "b": b"2"})
    expired = client.expire(
        "orders", ["a", "x"], ttl=MINUTE, condition=lapse.ExpireCondition.IF_NO_EXPIRATION
    )
    assert [r.outcome for r in expired] == [
        lapse.ExpireOutcome.UPDATED,
        lapse.ExpireOutcome.NOT_FOUND,
    ]
    assert expired[0].expire_time > now()
    persisted = client.persist("orders", ["a", "b", "x"])
    assert [r.outcome for r in persisted] == [
        lapse.PersistOutcome.PERSISTED,
        lapse.PersistOutcome.NO_EXPIRATION,
        lapse.PersistOutcome.NOT_FOUND,
    ]
    gone = client.expire("orders", ["b"], deadline=PAST)
    assert gone[0].outcome == lapse.ExpireOutcome.EXPIRED
    assert client.get("orders", ["b"])[0].found is False


def test_list_pages_through_a_collection_by_key_and_by_expire_time(client):
    client.put("c", {"k1": b"1", "k2": b"2"}, ttl=datetime.timedelta(hours=2))
    client.put("c", {"k3": b"3"}, ttl=MINUTE)
    first = client.list("c", page_size=2)
    assert [m.key for m in first.members] == ["k1", "k2"]
    rest = client.list("c", page_size=2, page_token=first.next_page_token)
    assert [m.key for m in rest.members] == ["k3"]
    assert rest.next_page_token == ""
    by_time = client.list("c", order_by=lapse.MemberOrder.EXPIRE_TIME, keys_only=True)
    assert [m.key for m in by_time.members] == ["k3", "k1", "k2"]
    assert by_time.members[0].value == b""


def test_collection_collections_and_delete(client):
    client.put("user:1", {"a": b"", "b": b""}, ttl=MINUTE)
    client.put("user:2", {"a": b""})
    client.put("other", {"a": b""})
    info = client.collection("user:1")
    assert (info.name, info.member_count, info.expiring_count) == ("user:1", 2, 2)
    assert info.next_expire_time > now()
    page = client.collections(prefix="user:")
    assert [(c.name, c.member_count) for c in page.collections] == [("user:1", 2), ("user:2", 1)]
    assert page.next_page_token == ""
    assert client.delete("user:1") == 2
    assert client.delete("user:1") == 0
    with pytest.raises(lapse.LapseError) as missing:
        client.collection("user:1")
    assert missing.value.code == grpc.StatusCode.NOT_FOUND


def test_bad_input_raises_invalid_argument_naming_the_field(client):
    with pytest.raises(lapse.InvalidArgumentError) as refused:
        client.put("orders", {"a": b"1"}, ttl=-MINUTE)
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "members[0].ttl" in refused.value.details
    with pytest.raises(lapse.LapseError) as empty:
        client.get("", ["a"])
    assert empty.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "collection" in empty.value.details


def test_arguments_the_client_refuses_raise_invalid_argument_before_sending(client):
    with pytest.raises(lapse.InvalidArgumentError, match="not both"):
        client.put("orders", {"a": b""}, ttl=MINUTE, deadline=now())
    with pytest.raises(ValueError, match="timezone-aware"):
        client.expire("orders", ["a"], deadline=datetime.datetime(2030, 1, 1))
    with pytest.raises(lapse.InvalidArgumentError, match="ttl or deadline"):
        client.expire("orders", ["a"])
    with pytest.raises(lapse.InvalidArgumentError, match="not both"):
        client.watch(collections=["a"], prefix="b")
