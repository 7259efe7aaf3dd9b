// Command order-timeout is the order-timeout flow on lapse, in Go.
//
// A user may have at most 3 unpaid orders: each is a member of the collection
// "unpaid:<user>" with the payment deadline as its TTL, written with
// MaxMembers 3, so a fourth is refused atomically (FAILED_PRECONDITION).
// Paying removes the member (no expiry event). An order whose deadline passes
// expires, and the watcher cancels it: one expiry event per order, so each
// timed-out order is cancelled exactly once. One watcher for now; a pool of
// workers sharing the events comes with consumer groups.
//
//	go run lapse/examples -target=127.0.0.1:50051
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	lapse "lapse/client"
)

const maxUnpaid = 3

type order struct {
	Total int `json:"total"`
}

// placeOrder places an unpaid order; false when the user already has 3
// unpaid.
func placeOrder(ctx context.Context, client *lapse.Client, user, id string, total int, payWithin time.Duration) (bool, error) {
	value, err := json.Marshal(order{Total: total})
	if err != nil {
		return false, err
	}
	_, err = client.Put(ctx, "unpaid:"+user,
		[]lapse.MemberWrite{{Key: id, Value: value, Expiration: lapse.TTL(payWithin)}},
		lapse.PutOptions{MaxMembers: maxUnpaid})
	if lapseErr, ok := err.(*lapse.Error); ok && lapseErr.Code == codes.FailedPrecondition {
		return false, nil
	}
	return err == nil, err
}

// pay marks an order paid; false if it had already timed out.
func pay(ctx context.Context, client *lapse.Client, user, id string) (bool, error) {
	removed, err := client.Remove(ctx, "unpaid:"+user, []string{id})
	if err != nil {
		return false, err
	}
	return removed[0].Existed, nil
}

// cancelTimedOutOrders cancels orders as their deadlines pass, until count
// were cancelled (a real watcher runs until its context ends, and keeps
// watch.Position() to resume from after a restart).
func cancelTimedOutOrders(watch *lapse.Watch, cancel func(user, id string, o order), count int) error {
	for i := 0; i < count; i++ {
		event, open := <-watch.Events()
		if !open {
			return watch.Err()
		}
		var o order
		if err := json.Unmarshal(event.Value, &o); err != nil {
			return err
		}
		cancel(strings.TrimPrefix(event.Collection, "unpaid:"), event.Key, o)
	}
	return nil
}

// run is the whole flow for user-42; it returns the orders cancelled, in
// order.
func run(ctx context.Context, target string, payWithin time.Duration) ([]string, error) {
	client, err := lapse.Dial(target, lapse.Options{})
	if err != nil {
		return nil, err
	}
	defer client.Close()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	// StartOldest: a watcher that starts after orders were placed still sees
	// their timeouts.
	watch, err := client.Watch(ctx, lapse.WatchOptions{Prefix: "unpaid:", IncludeValues: true,
		Start: lapse.StartOldest})
	if err != nil {
		return nil, err
	}
	for number := 1; number <= 3; number++ {
		placed, err := placeOrder(ctx, client, "user-42", fmt.Sprintf("order-%d", number), 10*number, payWithin)
		if err != nil || !placed {
			return nil, fmt.Errorf("order-%d not placed: %v", number, err)
		}
	}
	placed, err := placeOrder(ctx, client, "user-42", "order-4", 40, payWithin)
	if err != nil {
		return nil, err
	}
	fmt.Println("order-4 placed:", placed)
	paid, err := pay(ctx, client, "user-42", "order-2")
	if err != nil {
		return nil, err
	}
	fmt.Println("order-2 paid:", paid)
	var cancelled []string
	err = cancelTimedOutOrders(watch, func(user, id string, o order) {
		fmt.Printf("cancelled %s of %s (%d)\n", id, user, o.Total)
		cancelled = append(cancelled, id)
	}, 2)
	return cancelled, err
}

func main() {
	target := flag.String("target", "127.0.0.1:50051", "the lapse server")
	flag.Parse()
	if _, err := run(context.Background(), *target, 2*time.Second); err != nil {
		log.Fatal(err)
	}
}
