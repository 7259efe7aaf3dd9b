"""Protobuf Timestamps as timezone-aware UTC datetimes."""

import datetime

from google.protobuf import timestamp_pb2


def to_datetime(timestamp: timestamp_pb2.Timestamp) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(
        timestamp.seconds, tz=datetime.timezone.utc
    ) + datetime.timedelta(microseconds=timestamp.nanos // 1000)
