"""Client: one method per lapse.v1 RPC, over plain Python types.

Expirations follow AIP-214: pass `ttl=` (a datetime.timedelta, counted from
the server's clock) or `deadline=` (a timezone-aware datetime), never both;
neither means persistent. Times returned are timezone-aware UTC datetimes,
None for a persistent member.

Every call has a deadline: `timeout=` (a timedelta or seconds) or
ClientOptions.timeout. Calls that are safe to repeat (get without a refresh,
remove, persist, list, collection, collections, delete, group, groups, ack,
nack, extend_leases) are retried on UNAVAILABLE with exponential backoff and
jitter, within that deadline; put, expire, a refreshing get, create_group,
delete_group, reset_group and poll are attempted exactly once, because
UNAVAILABLE does not say whether the server applied them. Other errors are never
retried, RESOURCE_EXHAUSTED included (a limit, or a full disk on the server).
Failures raise lapse.LapseError (see lapse.errors).

Consumer groups (create_group ... extend_leases, and worker(), the loop that
handles a group's events): see lapse.groups. TLS and bearer tokens:
ClientOptions.tls, bearer_token, bearer_token_file (lapse._auth).

Thread-safety: a Client may be shared by many threads; a Watch belongs to
the thread that iterates it (its cancel() may be called from any thread), a
Worker to the thread that runs it (its stop() may be called from any thread).
"""

import dataclasses
import datetime
import enum
import random
import time
from typing import Callable, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

import grpc
from google.protobuf import duration_pb2

from lapse import groups as _groups
from lapse._auth import BearerToken, TlsOptions, TokenInterceptor, channel_credentials
from lapse._convert import to_datetime
from lapse.errors import InvalidArgumentError, LostEventsError, from_rpc_error
from lapse.groups import ConsumerGroup, Delivery, GroupPage, Lease, LeaseResult, PollResult, Worker
from lapse.v1 import lapse_pb2 as pb
from lapse.v1 import lapse_pb2_grpc as pb_grpc
from lapse.watch import Start, Watch

Seconds = Union[datetime.timedelta, float, int]


@dataclasses.dataclass(frozen=True)
class Backoff:
    """Delays grow from `initial` by `multiplier` up to `max` (seconds); each
    actual delay is drawn from [delay / 2, delay], so clients that failed
    together do not retry together. An initial delay under 1 ms, a max below
    it or a multiplier below 1 is clamped rather than refused."""

    initial: float = 0.05
    max: float = 2.0
    multiplier: float = 2.0

    def delays(self) -> Iterator[float]:
        ceiling = max(self.initial, 0.001)
        cap = max(self.max, ceiling)
        multiplier = max(self.multiplier, 1.0)
        while True:
            yield random.uniform(ceiling / 2, ceiling)
            ceiling = min(cap, ceiling * multiplier)


@dataclasses.dataclass(frozen=True)
class ClientOptions:
    """How a Client connects and calls. `tls` (TlsOptions: a CA, a client
    certificate and key for mTLS, a server name) or `credentials`
    (grpc.ChannelCredentials, e.g. grpc.ssl_channel_credentials(...)) makes
    the channel TLS, not both; neither is plaintext. For a server with
    --auth_file, `bearer_token` or `bearer_token_file` (read again when it
    changes) is sent with every call (see lapse._auth)."""

    # The deadline of a call (all its attempts), in seconds.
    timeout: float = 10.0
    # Attempts of a retryable call, the first included; 1 disables retries.
    max_attempts: int = 4
    retry_backoff: Backoff = Backoff()
    # Between reconnects of a Watch; reset by every response.
    watch_backoff: Backoff = Backoff(initial=0.1, max=10.0)
    # gRPC's own backoff between connection attempts, in seconds.
    reconnect_backoff_initial: float = 1.0
    reconnect_backoff_max: float = 30.0
    # Match the server's --max_message_bytes.
    max_message_bytes: int = 16 << 20
    credentials: Optional[grpc.ChannelCredentials] = None
    tls: Optional[TlsOptions] = None
    bearer_token: str = ""
    bearer_token_file: str = ""
    # A Worker's pause after an empty Poll answered sooner than its wait (a
    # server that does not long-poll); reset by every delivery.
    idle_poll_backoff: Backoff = Backoff(initial=0.05, max=1.0)


class PutCondition(enum.IntEnum):
    ALWAYS = pb.PUT_CONDITION_UNSPECIFIED
    IF_ABSENT = pb.PUT_CONDITION_IF_ABSENT
    IF_PRESENT = pb.PUT_CONDITION_IF_PRESENT


class PutOutcome(enum.IntEnum):
    CREATED = pb.PUT_OUTCOME_CREATED
    REPLACED = pb.PUT_OUTCOME_REPLACED
    SKIPPED = pb.PUT_OUTCOME_SKIPPED


class ExpireCondition(enum.IntEnum):
    """Like HEXPIRE's NX / XX / GT / LT; a persistent member counts as
    expiring infinitely late."""

    ALWAYS = pb.EXPIRE_CONDITION_UNSPECIFIED
    IF_NO_EXPIRATION = pb.EXPIRE_CONDITION_IF_NO_EXPIRATION
    IF_HAS_EXPIRATION = pb.EXPIRE_CONDITION_IF_HAS_EXPIRATION
    IF_LATER = pb.EXPIRE_CONDITION_IF_LATER
    IF_EARLIER = pb.EXPIRE_CONDITION_IF_EARLIER


class ExpireOutcome(enum.IntEnum):
    UPDATED = pb.EXPIRE_OUTCOME_UPDATED
    CONDITION_NOT_MET = pb.EXPIRE_OUTCOME_CONDITION_NOT_MET
    NOT_FOUND = pb.EXPIRE_OUTCOME_NOT_FOUND
    # The deadline had passed: the member expired now, with its event.
    EXPIRED = pb.EXPIRE_OUTCOME_EXPIRED


class PersistOutcome(enum.IntEnum):
    PERSISTED = pb.PERSIST_OUTCOME_PERSISTED
    NO_EXPIRATION = pb.PERSIST_OUTCOME_NO_EXPIRATION
    NOT_FOUND = pb.PERSIST_OUTCOME_NOT_FOUND


class MemberOrder(enum.IntEnum):
    KEY = pb.MEMBER_ORDER_KEY
    # Ascending expire_time, ties by key; persistent members last.
    EXPIRE_TIME = pb.MEMBER_ORDER_EXPIRE_TIME


@dataclasses.dataclass(frozen=True)
class MemberWrite:
    """One member of a put with its own expiration and condition."""

    key: str
    value: Union[bytes, str] = b""
    ttl: Optional[datetime.timedelta] = None
    deadline: Optional[datetime.datetime] = None
    condition: PutCondition = PutCondition.ALWAYS
    # Overwrite the value but keep the existing deadline (like KEEPTTL).
    keep_expiration: bool = False


@dataclasses.dataclass(frozen=True)
class Member:
    key: str
    value: bytes
    # None for a persistent member.
    expire_time: Optional[datetime.datetime]


@dataclasses.dataclass(frozen=True)
class PutResult:
    key: str
    outcome: PutOutcome
    expire_time: Optional[datetime.datetime]


@dataclasses.dataclass(frozen=True)
class GetResult:
    found: bool
    # The key is always set; value and expire_time only when found.
    member: Member


@dataclasses.dataclass(frozen=True)
class RemoveResult:
    key: str
    existed: bool


@dataclasses.dataclass(frozen=True)
class ExpireResult:
    key: str
    outcome: ExpireOutcome
    # None if persistent, not found or expired.
    expire_time: Optional[datetime.datetime]


@dataclasses.dataclass(frozen=True)
class PersistResult:
    key: str
    outcome: PersistOutcome


@dataclasses.dataclass(frozen=True)
class MemberPage:
    members: List[Member]
    # Empty when there are no more members.
    next_page_token: str


@dataclasses.dataclass(frozen=True)
class CollectionInfo:
    name: str
    member_count: int
    expiring_count: int
    # None when no member expires.
    next_expire_time: Optional[datetime.datetime]


@dataclasses.dataclass(frozen=True)
class CollectionPage:
    # Ordered by name, byte-wise.
    collections: List[CollectionInfo]
    next_page_token: str


# ---- Conversions -----------------------------------------------------------


def _optional_time(message, field: str) -> Optional[datetime.datetime]:
    return to_datetime(getattr(message, field)) if message.HasField(field) else None


def _seconds(value: Seconds, name: str) -> float:
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise InvalidArgumentError(f"{name}: must be a datetime.timedelta or seconds, not {value!r}")


def _set_expiration(
    message,
    ttl_field: str,
    time_field: str,
    ttl: Optional[datetime.timedelta],
    deadline: Optional[datetime.datetime],
    name: str,
) -> None:
    """Sets the oneof of `message` from ttl= or deadline= (at most one)."""
    if ttl is not None and deadline is not None:
        raise InvalidArgumentError(f"{name}: give ttl or deadline, not both")
    if ttl is not None:
        if not isinstance(ttl, datetime.timedelta):
            raise InvalidArgumentError(f"{name}.ttl: must be a datetime.timedelta, not {ttl!r}")
        duration = duration_pb2.Duration()
        duration.FromTimedelta(ttl)
        getattr(message, ttl_field).CopyFrom(duration)
    elif deadline is not None:
        if not isinstance(deadline, datetime.datetime) or deadline.tzinfo is None:
            raise InvalidArgumentError(
                f"{name}.deadline: must be a timezone-aware datetime, not {deadline!r}"
            )
        getattr(message, time_field).FromDatetime(deadline.astimezone(datetime.timezone.utc))


def _set_start(request, start: Start, after_sequence: Optional[int]) -> None:
    """A group's start: `start`, or right after `after_sequence` when given."""
    if after_sequence is None:
        request.start_position = int(start)
    else:
        request.start_position = pb.START_POSITION_AFTER_SEQUENCE
        request.after_sequence = after_sequence


def _bytes(value: Union[bytes, str]) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def _member(member: pb.Member) -> Member:
    return Member(member.key, member.value, _optional_time(member, "expire_time"))


def _collection_info(info: pb.CollectionInfo) -> CollectionInfo:
    return CollectionInfo(
        info.name,
        info.member_count,
        info.expiring_count,
        _optional_time(info, "next_expire_time"),
    )


# ---- The client --------------------------------------------------------------


class Client:
    """A channel to one lapse server (a gRPC target, "host:port")."""

    def __init__(self, target: str, options: ClientOptions = ClientOptions()):
        self._options = options
        channel_options = [
            ("grpc.max_receive_message_length", options.max_message_bytes),
            ("grpc.max_send_message_length", options.max_message_bytes),
            ("grpc.initial_reconnect_backoff_ms", int(options.reconnect_backoff_initial * 1000)),
            ("grpc.min_reconnect_backoff_ms", int(options.reconnect_backoff_initial * 1000)),
            ("grpc.max_reconnect_backoff_ms", int(options.reconnect_backoff_max * 1000)),
        ]
        credentials = options.credentials
        if options.tls is not None:
            if credentials is not None:
                raise InvalidArgumentError("tls, credentials: give one, not both")
            credentials = channel_credentials(options.tls)
            if options.tls.server_name:
                channel_options.append(("grpc.ssl_target_name_override", options.tls.server_name))
        if options.bearer_token and options.bearer_token_file:
            raise InvalidArgumentError("bearer_token, bearer_token_file: give one, not both")
        if credentials is None:
            self._channel = grpc.insecure_channel(target, channel_options)
        else:
            self._channel = grpc.secure_channel(target, credentials, channel_options)
        if options.bearer_token or options.bearer_token_file:
            token = BearerToken(options.bearer_token, options.bearer_token_file)
            self._channel = grpc.intercept_channel(self._channel, TokenInterceptor(token))
        self._stub = pb_grpc.LapseServiceStub(self._channel)

    def close(self) -> None:
        """Closes the channel; calls and watches in flight end CANCELLED."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def options(self) -> ClientOptions:
        return self._options

    @property
    def stub(self) -> pb_grpc.LapseServiceStub:
        """The generated stub, for what this client does not wrap."""
        return self._stub

    def put(
        self,
        collection: str,
        members: Union[Mapping[str, Union[bytes, str]], Iterable[MemberWrite]],
        *,
        ttl: Optional[datetime.timedelta] = None,
        deadline: Optional[datetime.datetime] = None,
        condition: PutCondition = PutCondition.ALWAYS,
        max_members: int = 0,
        timeout: Optional[Seconds] = None,
    ) -> List[PutResult]:
        """Writes members atomically: a mapping key -> value that shares `ttl`
        / `deadline` / `condition`, or MemberWrites with their own. With
        max_members, a write that would leave more live members fails
        FAILED_PRECONDITION and writes nothing. Never retried."""
        if isinstance(members, Mapping):
            writes = [
                MemberWrite(key, value, ttl=ttl, deadline=deadline, condition=condition)
                for key, value in members.items()
            ]
        else:
            if ttl is not None or deadline is not None or condition != PutCondition.ALWAYS:
                raise InvalidArgumentError(
                    "members: MemberWrites carry their own ttl, deadline and condition"
                )
            writes = list(members)
        request = pb.PutMembersRequest(collection=collection, max_members=max_members)
        for index, write in enumerate(writes):
            proto = request.members.add(
                key=write.key,
                value=_bytes(write.value),
                condition=int(write.condition),
                keep_expiration=write.keep_expiration,
            )
            _set_expiration(
                proto, "ttl", "expire_time", write.ttl, write.deadline, f"members[{index}]"
            )
        response = self._call(self._stub.PutMembers, request, False, timeout)
        return [
            PutResult(r.key, PutOutcome(r.outcome), _optional_time(r, "expire_time"))
            for r in response.results
        ]

    def get(
        self,
        collection: str,
        keys: Sequence[str],
        *,
        refresh_ttl: Optional[datetime.timedelta] = None,
        refresh_deadline: Optional[datetime.datetime] = None,
        timeout: Optional[Seconds] = None,
    ) -> List[GetResult]:
        """One result per key, in order. A refresh slides the deadline of the
        members found (like HGETEX); such a call is never retried."""
        request = pb.GetMembersRequest(collection=collection, keys=keys)
        _set_expiration(
            request, "refresh_ttl", "refresh_expire_time", refresh_ttl, refresh_deadline, "refresh"
        )
        # A refresh moves deadlines relative to when it runs: a repeat after
        # an applied attempt would move them again.
        idempotent = request.WhichOneof("refresh_expiration") is None
        response = self._call(self._stub.GetMembers, request, idempotent, timeout)
        return [GetResult(r.found, _member(r.member)) for r in response.results]

    def remove(
        self, collection: str, keys: Sequence[str], *, timeout: Optional[Seconds] = None
    ) -> List[RemoveResult]:
        """Deletes members; no expiry events. Retried."""
        request = pb.RemoveMembersRequest(collection=collection, keys=keys)
        response = self._call(self._stub.RemoveMembers, request, True, timeout)
        return [RemoveResult(r.key, r.existed) for r in response.results]

    def expire(
        self,
        collection: str,
        keys: Sequence[str],
        *,
        ttl: Optional[datetime.timedelta] = None,
        deadline: Optional[datetime.datetime] = None,
        condition: ExpireCondition = ExpireCondition.ALWAYS,
        timeout: Optional[Seconds] = None,
    ) -> List[ExpireResult]:
        """Sets a new deadline (ttl or deadline is required) under `condition`.
        A deadline in the past expires the members now, with their events.
        Never retried."""
        if ttl is None and deadline is None:
            raise InvalidArgumentError("expiration: give ttl or deadline")
        request = pb.ExpireMembersRequest(
            collection=collection, keys=keys, condition=int(condition)
        )
        _set_expiration(request, "ttl", "expire_time", ttl, deadline, "expiration")
        response = self._call(self._stub.ExpireMembers, request, False, timeout)
        return [
            ExpireResult(r.key, ExpireOutcome(r.outcome), _optional_time(r, "expire_time"))
            for r in response.results
        ]

    def persist(
        self, collection: str, keys: Sequence[str], *, timeout: Optional[Seconds] = None
    ) -> List[PersistResult]:
        """Clears deadlines. Retried."""
        request = pb.PersistMembersRequest(collection=collection, keys=keys)
        response = self._call(self._stub.PersistMembers, request, True, timeout)
        return [PersistResult(r.key, PersistOutcome(r.outcome)) for r in response.results]

    def list(
        self,
        collection: str,
        *,
        order_by: MemberOrder = MemberOrder.KEY,
        page_size: int = 0,
        page_token: str = "",
        keys_only: bool = False,
        timeout: Optional[Seconds] = None,
    ) -> MemberPage:
        """One page of a collection (page_size 0: the server's default, 100).
        Only an empty next_page_token ends the listing. Retried."""
        request = pb.ListMembersRequest(
            collection=collection,
            order_by=int(order_by),
            page_size=page_size,
            page_token=page_token,
            keys_only=keys_only,
        )
        response = self._call(self._stub.ListMembers, request, True, timeout)
        return MemberPage([_member(m) for m in response.members], response.next_page_token)

    def collection(self, name: str, *, timeout: Optional[Seconds] = None) -> CollectionInfo:
        """Counts and next deadline; NOT_FOUND when it has no live member. Retried."""
        request = pb.GetCollectionRequest(name=name)
        response = self._call(self._stub.GetCollection, request, True, timeout)
        return _collection_info(response.collection)

    def collections(
        self,
        *,
        prefix: str = "",
        page_size: int = 0,
        page_token: str = "",
        timeout: Optional[Seconds] = None,
    ) -> CollectionPage:
        """One page of collection names, optionally by prefix. Retried."""
        request = pb.ListCollectionsRequest(
            prefix=prefix, page_size=page_size, page_token=page_token
        )
        response = self._call(self._stub.ListCollections, request, True, timeout)
        return CollectionPage(
            [_collection_info(c) for c in response.collections], response.next_page_token
        )

    def delete(self, name: str, *, timeout: Optional[Seconds] = None) -> int:
        """Removes a collection; returns how many live members it had (0 if it
        did not exist). No expiry events. Retried."""
        request = pb.DeleteCollectionRequest(name=name)
        return self._call(self._stub.DeleteCollection, request, True, timeout).removed_count

    def watch(
        self,
        *,
        collections: Sequence[str] = (),
        prefix: str = "",
        include_values: bool = False,
        start: Start = Start.NEW,
        after_sequence: Optional[int] = None,
        resume_token: Optional[bytes] = None,
    ) -> Watch:
        """Iterate the Watch for ExpiryEvents (see lapse.watch). Filter by
        `collections` or by `prefix` (at most one; neither means every
        collection). Starts at `start`, or right after `resume_token` (a
        previous Watch's resume_token: the way to resume) or `after_sequence`
        (a previous Watch's position) when one of them is given."""
        return Watch(
            self._stub,
            self._options.watch_backoff,
            collections=collections,
            prefix=prefix,
            include_values=include_values,
            start=start,
            after_sequence=after_sequence,
            resume_token=resume_token,
        )

    # ---- Consumer groups (see lapse.groups) ----------------------------------

    def create_group(
        self,
        name: str,
        *,
        collections: Sequence[str] = (),
        prefix: str = "",
        include_values: bool = False,
        start: Start = Start.NEW,
        after_sequence: Optional[int] = None,
        visibility_timeout: Optional[datetime.timedelta] = None,
        max_deliveries: int = 0,
        max_unacked_per_consumer: int = 0,
        timeout: Optional[Seconds] = None,
    ) -> ConsumerGroup:
        """Creates a consumer group reading the events of `collections` or
        `prefix` (neither: every collection) from `start`, or right after
        `after_sequence`. Zero or None options take the server's defaults
        (visibility timeout 30 s, 5 deliveries, 100 unacked per consumer).
        ALREADY_EXISTS when the name is taken. Never retried."""
        request = pb.CreateConsumerGroupRequest(
            name=name,
            collections=collections,
            collection_prefix=prefix,
            include_values=include_values,
            max_deliveries=max_deliveries,
            max_unacked_per_consumer=max_unacked_per_consumer,
        )
        _set_start(request, start, after_sequence)
        if visibility_timeout is not None:
            request.visibility_timeout.CopyFrom(_groups.duration(visibility_timeout))
        response = self._call(self._stub.CreateConsumerGroup, request, False, timeout)
        return _groups.group_from(response.group)

    def group(
        self, name: str, *, max_leases: int = 0, timeout: Optional[Seconds] = None
    ) -> ConsumerGroup:
        """A group's position, lag, counts and consumers, and up to
        `max_leases` of its leases. NOT_FOUND when there is none. Retried."""
        request = pb.GetConsumerGroupRequest(name=name, max_leases=max_leases)
        response = self._call(self._stub.GetConsumerGroup, request, True, timeout)
        return _groups.group_from(response.group)

    def groups(
        self, *, page_size: int = 0, page_token: str = "", timeout: Optional[Seconds] = None
    ) -> GroupPage:
        """One page of consumer groups, by name. Retried."""
        request = pb.ListConsumerGroupsRequest(page_size=page_size, page_token=page_token)
        response = self._call(self._stub.ListConsumerGroups, request, True, timeout)
        return GroupPage([_groups.group_from(g) for g in response.groups], response.next_page_token)

    def delete_group(self, name: str, *, timeout: Optional[Seconds] = None) -> ConsumerGroup:
        """Deletes a group and returns it as it was. Never retried (a repeat
        would answer NOT_FOUND)."""
        request = pb.DeleteConsumerGroupRequest(name=name)
        response = self._call(self._stub.DeleteConsumerGroup, request, False, timeout)
        return _groups.group_from(response.group)

    def reset_group(
        self,
        name: str,
        *,
        start: Start = Start.NEW,
        after_sequence: Optional[int] = None,
        timeout: Optional[Seconds] = None,
    ) -> ConsumerGroup:
        """Moves a group to `start` (or right after `after_sequence`); its
        pending events are dropped. Never retried."""
        request = pb.ResetConsumerGroupRequest(name=name)
        _set_start(request, start, after_sequence)
        response = self._call(self._stub.ResetConsumerGroup, request, False, timeout)
        return _groups.group_from(response.group)

    def poll(
        self,
        group: str,
        consumer: str,
        *,
        max_events: int = 1,
        wait: Optional[datetime.timedelta] = None,
        timeout: Optional[Seconds] = None,
    ) -> PollResult:
        """Leases up to `max_events` events of `group` to `consumer` until the
        group's visibility timeout; with `wait`, waits that long at most for
        one when none is deliverable (a server that does not long-poll
        answers at once). The call's deadline is `timeout` plus `wait`. Never
        retried: a repeat would lease more."""
        request = pb.PollRequest(group=group, consumer=consumer, max_events=max_events)
        budget = self._options.timeout if timeout is None else _seconds(timeout, "timeout")
        if wait is not None:
            request.wait.CopyFrom(_groups.duration(wait))
            budget += wait.total_seconds()
        response = self._call(self._stub.Poll, request, False, budget)
        return _groups.poll_result_from(group, response)

    def ack(
        self,
        group: str,
        consumer: str,
        leases: Sequence[Union[Lease, Delivery]],
        *,
        timeout: Optional[Seconds] = None,
    ) -> List[LeaseResult]:
        """Finishes events; one result per lease, in order: OK, or
        FAILED_PRECONDITION when the lease is no longer held (the event may be
        handled twice). Retried: a repeat changes nothing, though it reports
        FAILED_PRECONDITION for a lease the first attempt finished."""
        return self._lease_call(
            self._stub.Ack, pb.AckRequest(group=group, consumer=consumer), leases, timeout
        )

    def nack(
        self,
        group: str,
        consumer: str,
        leases: Sequence[Union[Lease, Delivery]],
        *,
        timeout: Optional[Seconds] = None,
    ) -> List[LeaseResult]:
        """Releases events at once, for redelivery; results as ack's. Retried,
        as ack."""
        return self._lease_call(
            self._stub.Nack, pb.NackRequest(group=group, consumer=consumer), leases, timeout
        )

    def extend_leases(
        self,
        group: str,
        consumer: str,
        leases: Sequence[Union[Lease, Delivery]],
        extension: datetime.timedelta,
        *,
        timeout: Optional[Seconds] = None,
    ) -> List[LeaseResult]:
        """Each lease then ends `extension` after now (at most 12 h); results
        as ack's. Retried: a repeat extends from a moment later."""
        request = pb.ExtendLeasesRequest(
            group=group, consumer=consumer, extension=_groups.duration(extension)
        )
        return self._lease_call(self._stub.ExtendLeases, request, leases, timeout)

    def _lease_call(self, method, request, leases, timeout: Optional[Seconds]) -> List[LeaseResult]:
        """Sends `request` (an Ack, Nack or ExtendLeases request naming its
        group and consumer) with `leases` to `method`, retried as idempotent,
        and returns one result per lease."""
        request.leases.extend(_groups.lease_refs(leases))
        response = self._call(method, request, True, timeout)
        return _groups.lease_results_from(response.results)

    def worker(
        self,
        group: str,
        consumer: str,
        handler: Callable[[Delivery], None],
        *,
        max_events: int = 1,
        wait: datetime.timedelta = datetime.timedelta(seconds=10),
        on_lost: Optional[Callable[[LostEventsError], None]] = None,
        on_error: Optional[Callable[[Delivery, Exception], None]] = None,
    ) -> Worker:
        """A Worker that handles `group`'s events as `consumer` with
        `handler`, polling up to `max_events` at a time and waiting up to
        `wait` for them; run() it (see lapse.groups). `on_lost` is called
        with the LostEventsError of events the group lost (None: run() raises
        it); `on_error` with a delivery whose handler raised, whose lease was
        lost before its ack, or whose ack or nack could not reach the
        server, and the error."""
        if max_events < 1:
            raise InvalidArgumentError(f"max_events: must be positive, not {max_events}")
        return Worker(
            self,
            group,
            consumer,
            handler,
            max_events=max_events,
            wait=wait,
            on_lost=on_lost,
            on_error=on_error,
        )

    def _call(self, method, request, idempotent: bool, timeout: Optional[Seconds]):
        """Calls `method` until it succeeds, fails with anything but
        UNAVAILABLE, was not idempotent, used up max_attempts, or the next
        backoff would end past the call's deadline."""
        budget = self._options.timeout if timeout is None else _seconds(timeout, "timeout")
        deadline = time.monotonic() + budget
        delays = self._options.retry_backoff.delays()
        attempt = 1
        while True:
            try:
                return method(request, timeout=max(0.0, deadline - time.monotonic()))
            except grpc.RpcError as error:
                delay = next(delays)
                if (
                    not idempotent
                    or error.code() != grpc.StatusCode.UNAVAILABLE
                    or attempt >= self._options.max_attempts
                    or time.monotonic() + delay >= deadline
                ):
                    raise from_rpc_error(error) from None
            time.sleep(delay)
            attempt += 1
