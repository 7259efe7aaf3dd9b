"""The order-timeout flow on lapse, in Python.

A user may have at most 3 unpaid orders: each is a member of the collection
"unpaid:<user>" with the payment deadline as its TTL, written with
max_members=3, so a fourth is refused atomically (FAILED_PRECONDITION).
Paying removes the member (no expiry event). An order whose deadline passes
expires, and the watcher cancels it: one expiry event per order, so each
timed-out order is cancelled exactly once.

    PYTHONPATH=client/python:build/release/client/python/gen \\
        /usr/bin/python3 examples/python/order_timeout.py 127.0.0.1:50051

(one watcher for now; a pool of workers sharing the events comes with
consumer groups).
"""

import datetime
import json
import sys
from typing import Callable, List

import grpc

import lapse

MAX_UNPAID = 3


def place_order(client: lapse.Client, user: str, order: str, total: int, pay_within) -> bool:
    """Places an unpaid order; False when the user already has 3 unpaid."""
    try:
        client.put(
            f"unpaid:{user}",
            {order: json.dumps({"total": total})},
            ttl=pay_within,
            max_members=MAX_UNPAID,
        )
        return True
    except lapse.LapseError as error:
        if error.code == grpc.StatusCode.FAILED_PRECONDITION:
            return False
        raise


def pay(client: lapse.Client, user: str, order: str) -> bool:
    """Marks an order paid; False if it had already timed out."""
    return client.remove(f"unpaid:{user}", [order])[0].existed


def cancel_timed_out_orders(
    watch: lapse.Watch, cancel: Callable[[str, str, dict], None], count: int
) -> None:
    """Cancels orders as their deadlines pass, until `count` were cancelled
    (a real watcher runs until it is stopped, and keeps watch.position to
    resume from after a restart)."""
    for _ in range(count):
        event = next(watch)
        user = event.collection[len("unpaid:") :]
        cancel(user, event.key, json.loads(event.value))


def run(target: str, pay_within: datetime.timedelta) -> List[str]:
    """The whole flow for user-42; returns the orders cancelled, in order."""
    cancelled: List[str] = []
    with lapse.Client(target) as client:
        # OLDEST: a watcher that starts after orders were placed still sees
        # their timeouts.
        with client.watch(prefix="unpaid:", include_values=True, start=lapse.Start.OLDEST) as watch:
            for number in (1, 2, 3):
                assert place_order(client, "user-42", f"order-{number}", 10 * number, pay_within)
            print("order-4 placed:", place_order(client, "user-42", "order-4", 40, pay_within))
            print("order-2 paid:", pay(client, "user-42", "order-2"))

            def cancel(user: str, order: str, details: dict) -> None:
                print(f"cancelled {order} of {user} ({details['total']})")
                cancelled.append(order)

            cancel_timed_out_orders(watch, cancel, count=2)
    return cancelled


if __name__ == "__main__":
    run(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051", datetime.timedelta(seconds=2))
