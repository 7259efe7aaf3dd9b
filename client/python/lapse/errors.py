"""The exceptions of the lapse client: one type carrying the gRPC status code.

    try:
        client.put("unpaid:user-42", {"order-18": b"..."}, max_members=3)
    except lapse.LapseError as e:
        if e.code == grpc.StatusCode.FAILED_PRECONDITION: ...

INVALID_ARGUMENT (from the server, or an argument the client refuses before
sending) is InvalidArgumentError, also a ValueError; OUT_OF_RANGE (a watch
position the server no longer holds, or another store's) is OutOfRangeError;
events a consumer group lost to the server's retention are LostEventsError,
an OutOfRangeError too.
"""

import grpc


class LapseError(Exception):
    """A call failed; `code` is its grpc.StatusCode, `details` the message."""

    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details


class InvalidArgumentError(LapseError, ValueError):
    """INVALID_ARGUMENT: the message names the offending field."""

    def __init__(self, details: str):
        super().__init__(grpc.StatusCode.INVALID_ARGUMENT, details)


class OutOfRangeError(LapseError):
    """OUT_OF_RANGE: the events a watch needed are no longer held by the server."""

    def __init__(self, details: str):
        super().__init__(grpc.StatusCode.OUT_OF_RANGE, details)


class LostEventsError(OutOfRangeError):
    """The server's retention discarded events of a consumer group before the
    group received them: sequences `first_sequence`..`last_sequence`."""

    def __init__(self, group: str, first_sequence: int, last_sequence: int):
        super().__init__(
            f"group {group}: events {first_sequence}..{last_sequence} were discarded by the "
            "server's retention before the group received them; they will never be delivered"
        )
        self.first_sequence = first_sequence
        self.last_sequence = last_sequence


def from_rpc_error(error: grpc.RpcError) -> LapseError:
    """The exception for a failed call (a grpc.Call that raised)."""
    code, details = error.code(), error.details() or ""
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidArgumentError(details)
    if code == grpc.StatusCode.OUT_OF_RANGE:
        return OutOfRangeError(details)
    return LapseError(code, details)
