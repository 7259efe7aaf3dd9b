// Command order-timeout is the order-timeout flow on lapse, in Go, with a
// pool of workers.
//
// A user may have at most 3 unpaid orders: each is a member of the collection
// "unpaid:<user>" with the payment deadline as its TTL, written with
// MaxMembers 3, so a fourth is refused atomically (FAILED_PRECONDITION).
// Paying removes the member (no expiry event). An order whose deadline passes
// expires, and one worker of the consumer group "cancel-unpaid" cancels it:
// the group hands each expiry event to one worker at a time and takes it back
// (for another worker) only if that worker fails, so each timed-out order is
// cancelled exactly once however many workers run.
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
	"sync"
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

const (
	group   = "cancel-unpaid"
	workers = 3
)

// createGroup creates the group of the cancelling workers: every event of
// "unpaid:" collections from now on, with the order's details.
func createGroup(ctx context.Context, client *lapse.Client) error {
	_, err := client.CreateGroup(ctx, group, lapse.GroupOptions{Prefix: "unpaid:", IncludeValues: true})
	if lapseErr, ok := err.(*lapse.Error); ok && lapseErr.Code == codes.AlreadyExists {
		return nil
	}
	return err
}

// cancellation is one order cancelled, by one worker.
type cancellation struct {
	Order, Worker string
}

// cancelTimedOutOrders runs a pool of workers of the group until count orders
// were cancelled (a real pool runs until its context ends). A handler that
// returned an error would leave its order to another delivery.
func cancelTimedOutOrders(ctx context.Context, client *lapse.Client, count int) ([]cancellation, error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var mu sync.Mutex
	var cancelled []cancellation
	errs := make(chan error, workers)
	var pool sync.WaitGroup
	for number := 1; number <= workers; number++ {
		name := fmt.Sprintf("worker-%d", number)
		pool.Add(1)
		go func() {
			defer pool.Done()
			errs <- client.Work(ctx, lapse.WorkerOptions{Group: group, Consumer: name, Wait: 5 * time.Second},
				func(ctx context.Context, d lapse.Delivery) error {
					var o order
					if err := json.Unmarshal(d.Event.Value, &o); err != nil {
						return err
					}
					fmt.Printf("%s cancelled %s of %s (%d)\n", name, d.Event.Key,
						strings.TrimPrefix(d.Event.Collection, "unpaid:"), o.Total)
					mu.Lock()
					defer mu.Unlock()
					if cancelled = append(cancelled, cancellation{d.Event.Key, name}); len(cancelled) >= count {
						stop()
					}
					return nil
				})
		}()
	}
	pool.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return cancelled, nil
}

// run is the whole flow for user-42; it returns the orders cancelled.
func run(ctx context.Context, target string, payWithin time.Duration) ([]cancellation, error) {
	client, err := lapse.Dial(target, lapse.Options{})
	if err != nil {
		return nil, err
	}
	defer client.Close()
	if err := createGroup(ctx, client); err != nil {
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
	return cancelTimedOutOrders(ctx, client, 2)
}

func main() {
	target := flag.String("target", "127.0.0.1:50051", "the lapse server")
	flag.Parse()
	if _, err := run(context.Background(), *target, 2*time.Second); err != nil {
		log.Fatal(err)
	}
}
