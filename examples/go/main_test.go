package main

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	lapse "lapse/client"
	lapsetest "lapse/testing"
)

func TestAPoolOfThreeWorkersCancelsEachUnpaidOrderExactlyOnceAndThePaidOneNever(t *testing.T) {
	lapsed := lapsetest.Start(t, nil, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Long enough for the orders to be placed and one paid before any
	// deadline passes, even on a loaded machine.
	cancelled, err := run(ctx, lapsed.Address, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var orders []string
	for _, c := range cancelled {
		orders = append(orders, c.Order)
		if !strings.HasPrefix(c.Worker, "worker-") {
			t.Errorf("cancelled by %q", c.Worker)
		}
	}
	sort.Strings(orders)
	if strings.Join(orders, ",") != "order-1,order-3" {
		t.Fatalf("cancelled %v, want order-1 and order-3 once each", orders)
	}
	client, err := lapse.Dial(lapsed.Address, lapse.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// Each event acknowledged once, none left to hand out again.
	g, err := client.Group(ctx, group, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.DeliveredTotal != 2 || g.AckedTotal != 2 || g.Pending != 0 || g.DeadLettered != 0 {
		t.Errorf("group: %+v", g)
	}
	// The whole event feed: the two timeouts, then a marker expired now, so
	// no other event (the paid order, the refused one) came between.
	feed, err := client.Watch(ctx, lapse.WatchOptions{Start: lapse.StartOldest})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Put(ctx, "marker", []lapse.MemberWrite{{Key: "m"}}, lapse.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	past := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := client.Expire(ctx, "marker", []string{"m"}, lapse.At(past), lapse.ExpireAlways); err != nil {
		t.Fatal(err)
	}
	events, err := lapsetest.Take(feed, 3)
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{events[0].Key, events[1].Key}
	sort.Strings(keys)
	if strings.Join(keys, ",") != "order-1,order-3" || events[2].Collection != "marker" {
		t.Errorf("event feed: %+v", events)
	}
}
