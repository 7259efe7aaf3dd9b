"""Watch: the expiry events of a lapse server as one resumable iterator.

    with client.watch(prefix="unpaid:", include_values=True) as watch:
        for event in watch:          # blocks; ends only by cancel() or an error
            cancel_order(event.key)

The stream starts at the first next(): a Start.NEW watch sees the events
appended after that. A Watch reconnects by itself when its stream breaks
(UNAVAILABLE, a dropped connection, a server restart) and resumes with
START_POSITION_AFTER_TOKEN and the resume_token of the last response it
handed over (as the C++ client does), so the events it yields form one
stream with no gap and no duplicate, and a server that now serves another
store (a memory-only server restarted, another data directory) refuses
instead of streaming from a position that means nothing there. Without a
token yet, it resumes after the last sequence it examined. The ways to lose
events are for the server to no longer hold them or to serve another store:
iteration then raises OutOfRangeError (code OUT_OF_RANGE, the message says
which) and the watch is over; it never skips silently. Any other error
(INVALID_ARGUMENT for a bad filter, ...) raises LapseError. After cancel()
iteration just stops.

`resume_token` is the resume point to keep: every event up to it has been
examined and, if it matched, yielded (and the consumer asked for the next
one), so client.watch(resume_token=watch.resume_token) continues with no gap
and no duplicate, or raises OutOfRangeError on another store. `position` is
the same point as a sequence (within one store: after_sequence=). One caveat,
as in the C++ client: a Start.NEW watch learns its position from its first
response (events or a heartbeat); if that first stream drops before any
response without the server naming its position (a draining lapse server
does), the watch starts new again.

Thread-safety: iterate a Watch from one thread; cancel() may be called from
any thread.
"""

import dataclasses
import datetime
import enum
import re
import threading
from typing import Iterator, Optional, Sequence

import grpc

from lapse._convert import to_datetime
from lapse.errors import InvalidArgumentError, from_rpc_error
from lapse.v1 import lapse_pb2 as pb

# A draining lapse server ends a stream with "server shutting down; last
# delivered sequence N" (see the README's WatchExpirations section).
_LAST_DELIVERED = re.compile(r"last delivered sequence (\d+)")

# Streams that end like this are resumed: the server went away or is
# draining, a connection dropped, or something between us ended the stream
# (a cancel() of ours is checked first).
_RESUMABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)


class Start(enum.IntEnum):
    # Only events appended after the watch starts.
    NEW = pb.START_POSITION_NEW
    # The oldest event the server still holds.
    OLDEST = pb.START_POSITION_OLDEST


@dataclasses.dataclass(frozen=True)
class ExpiryEvent:
    # Strictly increasing across the server, never reused.
    sequence: int
    collection: str
    key: str
    # Empty unless the watch asked for values.
    value: bytes
    # The deadline the member had, and when the server expired it.
    expire_time: datetime.datetime
    expired_at: datetime.datetime


class Watch:
    """Made by Client.watch(); iterate it for ExpiryEvents."""

    def __init__(
        self,
        stub,
        backoff,
        *,
        collections: Sequence[str] = (),
        prefix: str = "",
        include_values: bool = False,
        start: Start = Start.NEW,
        after_sequence: Optional[int] = None,
        resume_token: Optional[bytes] = None,
    ):
        if collections and prefix:
            raise InvalidArgumentError("watch: give collections or prefix, not both")
        if after_sequence is not None and resume_token is not None:
            raise InvalidArgumentError("watch: give after_sequence or resume_token, not both")
        self._stub = stub
        self._backoff = backoff
        self._collections = list(collections)
        self._prefix = prefix
        self._include_values = include_values
        self._start = start
        self._position = after_sequence
        # The resume_token of the last response handed over; where a
        # reconnect resumes when set.
        self._token = resume_token
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._call = None
        self._events = self._run()

    @property
    def position(self) -> int:
        """The resume point (0 while a NEW or OLDEST watch has not learnt it)."""
        return self._position or 0

    @property
    def resume_token(self) -> Optional[bytes]:
        """The resume point as the server's opaque token (None while no
        response has been handed over): keep it as it is to resume later."""
        return self._token

    def cancel(self) -> None:
        """Stops the watch: iteration ends (a blocked next() returns at once
        with StopIteration). Idempotent."""
        with self._lock:
            self._cancelled.set()
            call = self._call
        if call is not None:
            call.cancel()

    def __iter__(self) -> Iterator[ExpiryEvent]:
        return self

    def __next__(self) -> ExpiryEvent:
        return next(self._events)

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc) -> None:
        self.cancel()

    def _request(self) -> pb.WatchExpirationsRequest:
        request = pb.WatchExpirationsRequest(
            collections=self._collections,
            collection_prefix=self._prefix,
            include_values=self._include_values,
        )
        if self._token is not None:
            request.start_position = pb.START_POSITION_AFTER_TOKEN
            request.resume_token = self._token
        elif self._position is None:
            request.start_position = int(self._start)
        else:
            request.start_position = pb.START_POSITION_AFTER_SEQUENCE
            request.after_sequence = self._position
        return request

    def _run(self) -> Iterator[ExpiryEvent]:
        delays = self._backoff.delays()
        while not self._cancelled.is_set():
            call = self._stub.WatchExpirations(self._request())
            with self._lock:
                self._call = call
            if self._cancelled.is_set():
                call.cancel()
            try:
                for response in call:
                    delays = self._backoff.delays()
                    yield from self._deliver(response)
                # The server ended the stream with OK: resume as after a break.
            except grpc.RpcError as error:
                if self._cancelled.is_set():
                    return
                if error.code() not in _RESUMABLE:
                    raise from_rpc_error(error) from None
                if self._position is None:
                    named = _LAST_DELIVERED.search(error.details() or "")
                    if named:
                        self._position = int(named.group(1))
            finally:
                call.cancel()
            self._cancelled.wait(next(delays))

    def _deliver(self, response: pb.WatchExpirationsResponse) -> Iterator[ExpiryEvent]:
        for event in response.events:
            if self._position is not None and event.sequence <= self._position:
                continue
            if self._cancelled.is_set():
                return
            yield event_from(event)
            # The consumer asked for the next one: this event is handed over.
            self._position = event.sequence
        # Every event the response examined has been handed over.
        self._position = max(self._position or 0, response.examined_sequence)
        if response.resume_token:
            self._token = response.resume_token


def event_from(event: pb.ExpiryEvent) -> ExpiryEvent:
    return ExpiryEvent(
        event.sequence,
        event.collection,
        event.key,
        event.value,
        to_datetime(event.expire_time),
        to_datetime(event.expired_at),
    )
