"""lapse: the Python client of lapse.v1.LapseService (expiring collections).

    import datetime, lapse

    client = lapse.Client("127.0.0.1:50051")
    client.put("unpaid:user-42", {"order-17": b'{"total": 12}'},
               ttl=datetime.timedelta(minutes=30), max_members=3)
    for event in client.watch(prefix="unpaid:"):
        print(event.collection, event.key, event.expired_at)

A Client owns one gRPC channel; its methods are safe to call from many
threads. Errors are LapseError (with the gRPC status code); see lapse.errors
and lapse.watch for the retry and resume rules, lapse.groups for consumer
groups and the Worker loop, lapse._auth for TLS and bearer tokens.
"""

import pkgutil

# The generated stubs (lapse.v1.lapse_pb2, lapse.v1.lapse_pb2_grpc) are built
# from proto/ into the build tree, in a directory of their own on sys.path
# beside this package; this makes them submodules of this package.
__path__ = pkgutil.extend_path(__path__, __name__)

from lapse._auth import TlsOptions  # noqa: E402
from lapse.client import (  # noqa: E402
    Backoff,
    Client,
    ClientOptions,
    CollectionInfo,
    CollectionPage,
    ExpireCondition,
    ExpireOutcome,
    ExpireResult,
    GetResult,
    Member,
    MemberOrder,
    MemberPage,
    MemberWrite,
    PersistOutcome,
    PersistResult,
    PutCondition,
    PutOutcome,
    PutResult,
    RemoveResult,
)
from lapse.errors import (  # noqa: E402
    InvalidArgumentError,
    LapseError,
    LostEventsError,
    OutOfRangeError,
)
from lapse.groups import (  # noqa: E402
    ConsumerGroup,
    Delivery,
    GroupConsumer,
    GroupLease,
    GroupPage,
    Lease,
    LeaseResult,
    PollResult,
    Worker,
)
from lapse.watch import ExpiryEvent, Start, Watch  # noqa: E402

__all__ = [
    "Backoff",
    "Client",
    "ClientOptions",
    "CollectionInfo",
    "CollectionPage",
    "ConsumerGroup",
    "Delivery",
    "ExpireCondition",
    "ExpireOutcome",
    "ExpireResult",
    "ExpiryEvent",
    "GetResult",
    "GroupConsumer",
    "GroupLease",
    "GroupPage",
    "InvalidArgumentError",
    "LapseError",
    "Lease",
    "LeaseResult",
    "LostEventsError",
    "Member",
    "MemberOrder",
    "MemberPage",
    "MemberWrite",
    "OutOfRangeError",
    "PersistOutcome",
    "PersistResult",
    "PollResult",
    "PutCondition",
    "PutOutcome",
    "PutResult",
    "RemoveResult",
    "Start",
    "TlsOptions",
    "Watch",
    "Worker",
]
