"""The order-timeout flow on lapse, in Python, with a pool of workers.

A user may have at most 3 unpaid orders: each is a member of the collection
"unpaid:<user>" with the payment deadline as its TTL, written with
max_members=3, so a fourth is refused atomically (FAILED_PRECONDITION).
Paying removes the member (no expiry event). An order whose deadline passes
expires, and one worker of the consumer group "cancel-unpaid" cancels it:
the group hands each expiry event to one worker at a time and takes it back
(for another worker) only if that worker fails, so each timed-out order is
cancelled exactly once however many workers run.

    PYTHONPATH=client/python:build/release/client/python/gen \\
        /usr/bin/python3 examples/python/order_timeout.py 127.0.0.1:50051
"""

import datetime
import json
import sys
import threading
from typing import List, Tuple

import grpc

import lapse

MAX_UNPAID = 3
GROUP = "cancel-unpaid"
WORKERS = 3


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


def create_group(client: lapse.Client) -> None:
    """The group of the cancelling workers: every event of "unpaid:"
    collections from now on, with the order's details."""
    try:
        client.create_group(GROUP, prefix="unpaid:", include_values=True)
    except lapse.LapseError as error:
        if error.code != grpc.StatusCode.ALREADY_EXISTS:
            raise


def cancel_timed_out_orders(client: lapse.Client, count: int) -> List[Tuple[str, str]]:
    """Runs WORKERS workers of the group until `count` orders were cancelled
    (a real pool runs until it is stopped); returns (order, worker) per
    cancellation. A handler that raises would leave its order to another
    delivery."""
    cancelled: List[Tuple[str, str]] = []
    done = threading.Condition()

    def worker(name: str) -> lapse.Worker:
        def cancel(delivery: lapse.Delivery) -> None:
            event = delivery.event
            user = event.collection[len("unpaid:") :]
            total = json.loads(event.value)["total"]
            print(f"{name} cancelled {event.key} of {user} ({total})")
            with done:
                cancelled.append((event.key, name))
                done.notify_all()

        return client.worker(GROUP, name, cancel, wait=datetime.timedelta(seconds=5))

    pool = [worker(f"worker-{number}") for number in range(1, WORKERS + 1)]
    failures: List[BaseException] = []

    def run(w: lapse.Worker) -> None:
        try:
            w.run()
        except lapse.LapseError as error:
            with done:
                failures.append(error)
                done.notify_all()

    threads = [threading.Thread(target=run, args=(w,)) for w in pool]
    for thread in threads:
        thread.start()
    with done:
        done.wait_for(lambda: len(cancelled) >= count or failures)
    for w in pool:
        w.stop()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return cancelled


def run(target: str, pay_within: datetime.timedelta) -> List[Tuple[str, str]]:
    """The whole flow for user-42; returns (order, worker) per cancellation."""
    with lapse.Client(target) as client:
        create_group(client)
        for number in (1, 2, 3):
            assert place_order(client, "user-42", f"order-{number}", 10 * number, pay_within)
        print("order-4 placed:", place_order(client, "user-42", "order-4", 40, pay_within))
        print("order-2 paid:", pay(client, "user-42", "order-2"))
        return cancel_timed_out_orders(client, count=2)


if __name__ == "__main__":
    run(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051", datetime.timedelta(seconds=2))
