"""The order-timeout example end to end against a real lapsed."""

import datetime

from lapse_testing import LapsedProcess, take

import lapse
import order_timeout

PAST = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)


def test_a_pool_of_three_workers_cancels_each_unpaid_order_exactly_once_and_the_paid_one_never():
    lapsed = LapsedProcess()
    try:
        # Long enough for the orders to be placed and one paid before any
        # deadline passes, even on a loaded machine.
        cancelled = order_timeout.run(lapsed.address, datetime.timedelta(seconds=3))
        assert sorted(order for order, _ in cancelled) == ["order-1", "order-3"]
        assert {worker for _, worker in cancelled} <= {"worker-1", "worker-2", "worker-3"}
        with lapse.Client(lapsed.address) as client:
            group = client.group(order_timeout.GROUP)
            # Each event acknowledged once, none left to hand out again.
            assert (group.delivered_total, group.acked_total) == (2, 2)
            assert (group.pending, group.dead_lettered) == (0, 0)
            # The whole event feed: the two timeouts, then a marker expired
            # now, so no other event (the paid order, the refused one) came
            # between.
            with client.watch(start=lapse.Start.OLDEST) as feed:
                client.put("marker", {"m": b""})
                client.expire("marker", ["m"], deadline=PAST)
                events = take(feed, 3)
            assert sorted(e.key for e in events[:2]) == ["order-1", "order-3"]
            assert events[2].collection == "marker"
    finally:
        lapsed.kill()
