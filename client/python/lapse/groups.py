"""Consumer groups: every expiry event of a group handled by one worker.

    client.create_group("cancel-orders", prefix="unpaid:", include_values=True)

    def cancel(delivery):            # raise to release the event for redelivery
        cancel_order(delivery.event.key)

    worker = client.worker("cancel-orders", "worker-1", cancel)
    worker.run()                     # until worker.stop() (any thread) or an error

A Worker polls the group (Poll with `wait`, the long poll) under its
consumer name and calls the handler once per delivery, in order: when the
handler returns, the event is acknowledged (Ack); when it raises, the event is
released (Nack) and goes to the next Poll of any worker of the group with its
delivery count one higher (after the group's max_deliveries it is
dead-lettered). A worker that does not finish an event within the group's
visibility timeout loses its lease and the event may be handled twice: the
Ack then reports FAILED_PRECONDITION, passed to `on_error` (extend_leases
gives a slow handler more time).

A worker's poll waits for the channel to be ready (gRPC's wait_for_ready)
within its deadline, so a worker rides out a server restart without failing
fast. When the server stays unreachable or restarts (UNAVAILABLE, CANCELLED,
DEADLINE_EXCEEDED), the worker polls again with backoff under the same
consumer name, so it keeps its leases; an Ack or Nack that fails so (after
its retries) goes to `on_error` and its event is redelivered once the lease
ends. Events the server's retention discarded before the group received
them are never skipped silently: run() raises LostEventsError (after releasing
the deliveries of that poll), or, with `on_lost`, calls it and goes on. Any
other error (the group deleted: NOT_FOUND, PERMISSION_DENIED, ...) ends run()
with LapseError.

A server that does not honour `wait` answers an empty Poll at once: the worker
then waits a short backoff (up to a second) before it polls again, instead of
spinning.

Thread-safety: run() a Worker on one thread; stop() may be called from any
thread. Run several Workers (one thread each) for a pool in one process.
"""

import dataclasses
import datetime
import threading
import time
from typing import Callable, List, Optional, Sequence, Union

import grpc
from google.protobuf import duration_pb2

from lapse._convert import to_datetime
from lapse.errors import LapseError, LostEventsError, from_rpc_error
from lapse.v1 import lapse_pb2 as pb
from lapse.watch import ExpiryEvent, event_from


@dataclasses.dataclass(frozen=True)
class GroupConsumer:
    name: str
    # Events leased to it and not yet acknowledged.
    unacked: int
    last_seen: datetime.datetime


@dataclasses.dataclass(frozen=True)
class GroupLease:
    sequence: int
    consumer: str
    # 1 for the first delivery.
    delivery_count: int
    deadline: datetime.datetime


@dataclasses.dataclass(frozen=True)
class ConsumerGroup:
    name: str
    collections: List[str]
    prefix: str
    include_values: bool
    visibility_timeout: datetime.timedelta
    max_deliveries: int
    max_unacked_per_consumer: int
    # Every event up to this sequence has been received by the group.
    position: int
    # An upper bound on the matching events the group has not received yet.
    lag: int
    # Leased, or awaiting redelivery.
    pending: int
    awaiting_redelivery: int
    dead_lettered: int
    delivered_total: int
    acked_total: int
    lost_sequences_total: int
    consumers: List[GroupConsumer]
    # Only from Client.group(max_leases=N): the leases held, in sequence order.
    leases: List[GroupLease]


@dataclasses.dataclass(frozen=True)
class GroupPage:
    groups: List[ConsumerGroup]
    # Empty when there are no more groups.
    next_page_token: str


@dataclasses.dataclass(frozen=True)
class Lease:
    """One lease: the event's sequence and the delivery count it came with."""

    sequence: int
    delivery_count: int


@dataclasses.dataclass(frozen=True)
class Delivery:
    event: ExpiryEvent
    # 1 for the first delivery.
    delivery_count: int
    lease_deadline: datetime.datetime

    @property
    def lease(self) -> Lease:
        return Lease(self.event.sequence, self.delivery_count)


@dataclasses.dataclass(frozen=True)
class PollResult:
    # Redeliveries first, then new events; empty when nothing is deliverable.
    deliveries: List[Delivery]
    # Set (told once) when the server's retention discarded events the group
    # had not received.
    lost: Optional[LostEventsError]


@dataclasses.dataclass(frozen=True)
class LeaseResult:
    sequence: int
    # OK, or FAILED_PRECONDITION: the lease is no longer held (it expired,
    # went to another consumer, or was finished already).
    code: grpc.StatusCode
    message: str

    @property
    def ok(self) -> bool:
        return self.code == grpc.StatusCode.OK


_CODES = {code.value[0]: code for code in grpc.StatusCode}


def group_from(group: pb.ConsumerGroup) -> ConsumerGroup:
    return ConsumerGroup(
        name=group.name,
        collections=list(group.collections),
        prefix=group.collection_prefix,
        include_values=group.include_values,
        visibility_timeout=group.visibility_timeout.ToTimedelta(),
        max_deliveries=group.max_deliveries,
        max_unacked_per_consumer=group.max_unacked_per_consumer,
        position=group.position,
        lag=group.lag,
        pending=group.pending,
        awaiting_redelivery=group.awaiting_redelivery,
        dead_lettered=group.dead_lettered,
        delivered_total=group.delivered_total,
        acked_total=group.acked_total,
        lost_sequences_total=group.lost_sequences_total,
        consumers=[
            GroupConsumer(c.name, c.unacked, to_datetime(c.last_seen)) for c in group.consumers
        ],
        leases=[
            GroupLease(l.sequence, l.consumer, l.delivery_count, to_datetime(l.deadline))
            for l in group.leases
        ],
    )


def poll_result_from(group: str, response: pb.PollResponse) -> PollResult:
    lost = None
    if response.lost_first_sequence or response.lost_last_sequence:
        lost = LostEventsError(group, response.lost_first_sequence, response.lost_last_sequence)
    deliveries = [
        Delivery(event_from(d.event), d.delivery_count, to_datetime(d.lease_deadline))
        for d in response.deliveries
    ]
    return PollResult(deliveries, lost)


def lease_refs(leases: Sequence[Union[Lease, Delivery]]) -> List[pb.LeaseRef]:
    refs = []
    for lease in leases:
        if isinstance(lease, Delivery):
            lease = lease.lease
        refs.append(pb.LeaseRef(sequence=lease.sequence, delivery_count=lease.delivery_count))
    return refs


def lease_results_from(results) -> List[LeaseResult]:
    return [
        LeaseResult(r.sequence, _CODES.get(r.code, grpc.StatusCode.UNKNOWN), r.message)
        for r in results
    ]


def duration(value: datetime.timedelta) -> duration_pb2.Duration:
    proto = duration_pb2.Duration()
    proto.FromTimedelta(value)
    return proto


# Poll errors after which a worker polls again: the server is away or
# restarting (a draining server cancels a waiting poll), or the long poll
# outlived its deadline on the way (a stop() of ours is checked first).
_RETRIED = (
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
)

Handler = Callable[[Delivery], None]


class Worker:
    """Made by Client.worker(); see the module's docstring."""

    def __init__(
        self,
        client,
        group: str,
        consumer: str,
        handler: Handler,
        *,
        max_events: int,
        wait: datetime.timedelta,
        on_lost: Optional[Callable[[LostEventsError], None]],
        on_error: Optional[Callable[[Delivery, Exception], None]],
    ):
        self._client = client
        self._group = group
        self._consumer = consumer
        self._handler = handler
        self._max_events = max_events
        self._wait = wait
        self._on_lost = on_lost
        self._on_error = on_error
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._call = None

    def stop(self) -> None:
        """Ends run(): a poll in flight is cancelled, deliveries not yet handled
        are released. Idempotent."""
        with self._lock:
            self._stopped.set()
            call = self._call
        if call is not None:
            call.cancel()

    def run(self) -> None:
        """Polls and handles until stop() or an error (see the module's
        docstring)."""
        options = self._client.options
        errors = options.retry_backoff.delays()
        idle = options.idle_poll_backoff.delays()
        while not self._stopped.is_set():
            started = time.monotonic()
            try:
                result = self._poll()
            except LapseError as error:
                if self._stopped.is_set():
                    return
                if error.code not in _RETRIED:
                    raise
                self._stopped.wait(next(errors))
                continue
            if result is None:
                return
            errors = options.retry_backoff.delays()
            if result.lost is not None:
                if self._on_lost is None:
                    self._settle(self._client.nack, result.deliveries)
                    raise result.lost
                self._on_lost(result.lost)
            if not result.deliveries:
                # An empty answer sooner than the wait asked for: the server
                # did not wait (or is shutting down).
                if time.monotonic() - started < self._wait.total_seconds() / 2:
                    self._stopped.wait(next(idle))
                continue
            idle = options.idle_poll_backoff.delays()
            self._handle(result.deliveries)

    def _poll(self) -> Optional[PollResult]:
        """One Poll; None when stop() cancelled it."""
        request = pb.PollRequest(
            group=self._group,
            consumer=self._consumer,
            max_events=self._max_events,
            wait=duration(self._wait),
        )
        timeout = self._client.options.timeout + self._wait.total_seconds()
        with self._lock:
            if self._stopped.is_set():
                return None
            # Failing fast while the channel reconnects would keep gRPC
            # Python's channel from reconnecting promptly.
            self._call = self._client.stub.Poll.future(
                request, timeout=timeout, wait_for_ready=True
            )
        try:
            return poll_result_from(self._group, self._call.result())
        except grpc.FutureCancelledError:
            return None
        except grpc.RpcError as error:
            if self._stopped.is_set():
                return None
            raise from_rpc_error(error) from None
        finally:
            with self._lock:
                self._call = None

    def _handle(self, deliveries: List[Delivery]) -> None:
        for index, delivery in enumerate(deliveries):
            if self._stopped.is_set():
                self._settle(self._client.nack, deliveries[index:])
                return
            try:
                self._handler(delivery)
            except Exception as error:  # noqa: B902 - any failure releases the event
                self._settle(self._client.nack, [delivery])
                if self._on_error is not None:
                    self._on_error(delivery, error)
                continue
            self._settle(self._client.ack, [delivery])

    def _settle(self, method, deliveries: List[Delivery]) -> None:
        """Acks or nacks `deliveries`. A lease no longer held goes to
        on_error, and so does each delivery when the call fails transiently
        (after its retries): its lease then ends by itself and the event is
        redelivered. Other failures are raised."""
        if not deliveries:
            return
        try:
            results = method(self._group, self._consumer, deliveries)
        except LapseError as error:
            if error.code not in _RETRIED:
                raise
            for delivery in deliveries:
                if self._on_error is not None:
                    self._on_error(delivery, error)
            return
        for delivery, result in zip(deliveries, results):
            if not result.ok and self._on_error is not None:
                self._on_error(delivery, LapseError(result.code, result.message))
