package lapse_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	lapse "lapse/client"
	lapsetest "lapse/testing"
)

// working runs client.Work on a goroutine; stop cancels it, and both stop
// and wait return what Work returned (an error if it did not return within
// Patience).
func working(t *testing.T, client *lapse.Client, options lapse.WorkerOptions,
	handler func(context.Context, lapse.Delivery) error) (stop, wait func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	var err error
	go func() {
		err = client.Work(ctx, options, handler)
		close(finished)
	}()
	wait = func() error {
		select {
		case <-finished:
			return err
		case <-time.After(lapsetest.Patience):
			return errors.New("the worker did not return")
		}
	}
	stop = func() error {
		cancel()
		return wait()
	}
	t.Cleanup(func() { stop() })
	return stop, wait
}

// groupReaches waits until the group's counters satisfy done.
func groupReaches(t *testing.T, client *lapse.Client, group string, done func(lapse.ConsumerGroup) bool) {
	t.Helper()
	for deadline := time.Now().Add(lapsetest.Patience); ; time.Sleep(10 * time.Millisecond) {
		g, err := client.Group(context.Background(), group, 0)
		must(t, err)
		if done(g) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %+v did not get there within %v", g, lapsetest.Patience)
		}
	}
}

// groupWithLostEvents starts a lapsed that keeps two events, with group "g"
// starting at the oldest, then expires "orders" a, b, c and d: the group lost
// a and b before it read them.
func groupWithLostEvents(t *testing.T) *lapse.Client {
	t.Helper()
	lapsed := lapsetest.Start(t, []string{"--event_retention_events=2"}, 0)
	client := dial(t, lapsed.Address, lapse.Options{})
	_, err := client.CreateGroup(context.Background(), "g", lapse.GroupOptions{Start: lapse.StartOldest})
	must(t, err)
	expireNow(t, client, "orders", "a", "b", "c", "d")
	return client
}

// handled collects the deliveries a handler was given.
type handled chan lapse.Delivery

func (h handled) handler(ctx context.Context, d lapse.Delivery) error {
	h <- d
	return nil
}

func (h handled) keys(t *testing.T, count int) []string {
	t.Helper()
	var keys []string
	for len(keys) < count {
		select {
		case d := <-h:
			keys = append(keys, d.Event.Key)
		case <-time.After(lapsetest.Patience):
			t.Fatalf("%d of %d deliveries came within %v", len(keys), count, lapsetest.Patience)
		}
	}
	return keys
}

func TestGroupAdminCallsCreateGetListResetAndDelete(t *testing.T) {
	client, ctx := newClient(t), context.Background()
	created, err := client.CreateGroup(ctx, "cancel", lapse.GroupOptions{Prefix: "unpaid:",
		IncludeValues: true, Start: lapse.StartOldest, VisibilityTimeout: 5 * time.Second, MaxDeliveries: 3})
	must(t, err)
	if created.Name != "cancel" || created.Prefix != "unpaid:" || !created.IncludeValues ||
		created.VisibilityTimeout != 5*time.Second || created.MaxDeliveries != 3 {
		t.Errorf("created: %+v", created)
	}
	_, err = client.CreateGroup(ctx, "audit", lapse.GroupOptions{Collections: []string{"b", "a"}})
	must(t, err)
	if _, err := client.CreateGroup(ctx, "cancel", lapse.GroupOptions{}); codeOf(err) != codes.AlreadyExists {
		t.Errorf("a taken name: %v", err)
	}
	if _, err := client.CreateGroup(ctx, "x", lapse.GroupOptions{Start: lapse.StartAfterToken}); codeOf(err) != codes.InvalidArgument {
		t.Errorf("a group after a token: %v", err)
	}
	expireNow(t, client, "unpaid:1", "o1")
	_, err = client.Poll(ctx, "cancel", "w1", lapse.PollOptions{})
	must(t, err)
	got, err := client.Group(ctx, "cancel", 10)
	must(t, err)
	if got.DeliveredTotal != 1 || got.Pending != 1 || len(got.Consumers) != 1 || got.Consumers[0].Name != "w1" ||
		len(got.Leases) != 1 || got.Leases[0].Consumer != "w1" || got.Leases[0].DeliveryCount != 1 {
		t.Errorf("group: %+v", got)
	}
	first, err := client.Groups(ctx, lapse.GroupsOptions{PageSize: 1})
	must(t, err)
	rest, err := client.Groups(ctx, lapse.GroupsOptions{PageToken: first.NextPageToken})
	must(t, err)
	if len(first.Groups) != 1 || first.Groups[0].Name != "audit" || strings.Join(first.Groups[0].Collections, ",") != "a,b" ||
		len(rest.Groups) != 1 || rest.Groups[0].Name != "cancel" || rest.NextPageToken != "" {
		t.Errorf("pages: %+v %+v", first, rest)
	}
	reset, err := client.ResetGroup(ctx, "cancel", lapse.StartNew, 0)
	must(t, err)
	if reset.Pending != 0 {
		t.Errorf("reset: %+v", reset)
	}
	deleted, err := client.DeleteGroup(ctx, "cancel")
	must(t, err)
	if deleted.Name != "cancel" {
		t.Errorf("deleted: %+v", deleted)
	}
	if _, err := client.Group(ctx, "cancel", 0); codeOf(err) != codes.NotFound {
		t.Errorf("a deleted group: %v", err)
	}
}

func TestPollAckNackAndExtendReportPerLease(t *testing.T) {
	client, ctx := newClient(t), context.Background()
	_, err := client.CreateGroup(ctx, "g", lapse.GroupOptions{Start: lapse.StartOldest, IncludeValues: true})
	must(t, err)
	expireNow(t, client, "orders", "a", "b")
	polled, err := client.Poll(ctx, "g", "w1", lapse.PollOptions{MaxEvents: 10, Wait: time.Second})
	must(t, err)
	if len(polled.Deliveries) != 2 || polled.Lost != nil {
		t.Fatalf("poll: %+v", polled)
	}
	a, b := polled.Deliveries[0], polled.Deliveries[1]
	if a.Event.Key != "a" || string(a.Event.Value) != "a" || a.DeliveryCount != 1 || b.Event.Key != "b" {
		t.Errorf("deliveries: %+v", polled.Deliveries)
	}
	extended, err := client.ExtendLeases(ctx, "g", "w1", []lapse.Lease{a.Lease()}, time.Minute)
	must(t, err)
	acked, err := client.Ack(ctx, "g", "w1", []lapse.Lease{a.Lease()})
	must(t, err)
	again, err := client.Ack(ctx, "g", "w1", []lapse.Lease{a.Lease()})
	must(t, err)
	if extended[0].Code != codes.OK || acked[0].Code != codes.OK || again[0].Code != codes.FailedPrecondition ||
		again[0].Message == "" {
		t.Errorf("extend %+v, ack %+v, ack again %+v", extended, acked, again)
	}
	nacked, err := client.Nack(ctx, "g", "w1", []lapse.Lease{b.Lease()})
	must(t, err)
	redelivered, err := client.Poll(ctx, "g", "w2", lapse.PollOptions{MaxEvents: 10})
	must(t, err)
	if nacked[0].Code != codes.OK || len(redelivered.Deliveries) != 1 ||
		redelivered.Deliveries[0].Event.Key != "b" || redelivered.Deliveries[0].DeliveryCount != 2 {
		t.Errorf("nack %+v, then %+v", nacked, redelivered)
	}
}

func TestAWorkerAcksEachEventItsHandlerReturnsNilFrom(t *testing.T) {
	client, ctx := newClient(t), context.Background()
	_, err := client.CreateGroup(ctx, "g", lapse.GroupOptions{Start: lapse.StartOldest})
	must(t, err)
	deliveries := make(handled, 10)
	stop, _ := working(t, client, lapse.WorkerOptions{Group: "g", Consumer: "w1", MaxEvents: 5}, deliveries.handler)
	expireNow(t, client, "orders", "a", "b", "c")
	if keys := deliveries.keys(t, 3); strings.Join(keys, ",") != "a,b,c" {
		t.Errorf("handled %v", keys)
	}
	must(t, stop())
	group, err := client.Group(ctx, "g", 0)
	must(t, err)
	if group.AckedTotal != 3 || group.Pending != 0 {
		t.Errorf("group: %+v", group)
	}
}

func TestAWorkerReleasesAnEventWhoseHandlerFailsAndItIsRedelivered(t *testing.T) {
	client, ctx := newClient(t), context.Background()
	_, err := client.CreateGroup(ctx, "g", lapse.GroupOptions{Start: lapse.StartOldest})
	must(t, err)
	deliveries := make(handled, 10)
	failures := make(chan error, 10)
	stop, _ := working(t, client, lapse.WorkerOptions{Group: "g", Consumer: "w1",
		OnError: func(d lapse.Delivery, err error) { failures <- err }},
		func(ctx context.Context, d lapse.Delivery) error {
			if d.DeliveryCount == 1 {
				return errors.New("the payment service is down")
			}
			return deliveries.handler(ctx, d)
		})
	expireNow(t, client, "orders", "a")
	deliveries.keys(t, 1)
	must(t, stop())
	if err := <-failures; !strings.Contains(err.Error(), "payment") {
		t.Errorf("OnError got %v", err)
	}
	group, err := client.Group(ctx, "g", 0)
	must(t, err)
	if group.AckedTotal != 1 || group.DeliveredTotal != 2 {
		t.Errorf("group: %+v", group)
	}
}

func TestAWorkerPollsOnAcrossADurableRestartUnderItsName(t *testing.T) {
	flags := []string{"--data-dir=" + t.TempDir()}
	lapsed := lapsetest.Start(t, flags, 0)
	options := quick
	options.RetryBackoff = lapse.Backoff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond, Multiplier: 2}
	client, ctx := dial(t, lapsed.Address, options), context.Background()
	_, err := client.CreateGroup(ctx, "g", lapse.GroupOptions{Start: lapse.StartOldest})
	must(t, err)
	deliveries := make(handled, 10)
	stop, _ := working(t, client, lapse.WorkerOptions{Group: "g", Consumer: "w1", Wait: time.Second}, deliveries.handler)
	expireNow(t, client, "orders", "a")
	deliveries.keys(t, 1)
	// Its ack is through: no redelivery to wait for after the restart.
	groupReaches(t, client, "g", func(g lapse.ConsumerGroup) bool { return g.AckedTotal == 1 })
	if code := lapsed.Stop(); code != 0 {
		t.Fatalf("lapsed exited %d", code)
	}
	lapsed = lapsetest.Start(t, flags, lapsed.Port)
	expireNow(t, dial(t, lapsed.Address, lapse.Options{}), "orders", "b")
	if keys := deliveries.keys(t, 1); keys[0] != "b" {
		t.Errorf("after the restart: %v", keys)
	}
	must(t, stop())
	group, err := client.Group(ctx, "g", 0)
	must(t, err)
	// AckedTotal counts since the server started: "b".
	if group.AckedTotal != 1 || group.Pending != 0 || len(group.Consumers) != 1 || group.Consumers[0].Name != "w1" {
		t.Errorf("group: %+v", group)
	}
}

func TestEventsAGroupLostToRetentionEndTheWorkerWithOutOfRange(t *testing.T) {
	client, ctx := groupWithLostEvents(t), context.Background()
	deliveries := make(handled, 10)
	_, wait := working(t, client, lapse.WorkerOptions{Group: "g", Consumer: "w1", MaxEvents: 10}, deliveries.handler)
	if err := wait(); codeOf(err) != codes.OutOfRange || !strings.Contains(err.Error(), "discarded") {
		t.Errorf("Work returned %v, want OUT_OF_RANGE naming the lost events", err)
	}
	if len(deliveries) != 0 {
		t.Errorf("%d events handled past the loss", len(deliveries))
	}
	// The deliveries of that poll were released, not dropped.
	group, err := client.Group(ctx, "g", 0)
	must(t, err)
	if group.AwaitingRedelivery != 2 {
		t.Errorf("group: %+v", group)
	}
}

func TestAWorkerWithOnLostIsToldAndGoesOn(t *testing.T) {
	client := groupWithLostEvents(t)
	deliveries, lost := make(handled, 10), make(chan lapse.LostRange, 1)
	stop, _ := working(t, client, lapse.WorkerOptions{Group: "g", Consumer: "w1", MaxEvents: 10,
		OnLost: func(r lapse.LostRange) { lost <- r }}, deliveries.handler)
	if keys := deliveries.keys(t, 2); strings.Join(keys, ",") != "c,d" {
		t.Errorf("handled %v", keys)
	}
	must(t, stop())
	if r := <-lost; r.First == 0 || r.Last < r.First {
		t.Errorf("lost %+v", r)
	}
}

func TestCancellingItsContextEndsAWorkerWaitingInAPoll(t *testing.T) {
	client, ctx := newClient(t), context.Background()
	_, err := client.CreateGroup(ctx, "g", lapse.GroupOptions{})
	must(t, err)
	stop, _ := working(t, client, lapse.WorkerOptions{Group: "g", Consumer: "w1", Wait: time.Minute},
		func(context.Context, lapse.Delivery) error { return nil })
	must(t, stop())
}

func TestAWorkerOfAMissingGroupEndsWithNotFound(t *testing.T) {
	client := newClient(t)
	err := client.Work(context.Background(), lapse.WorkerOptions{Group: "missing", Consumer: "w1"},
		func(context.Context, lapse.Delivery) error { return nil })
	if codeOf(err) != codes.NotFound {
		t.Errorf("Work returned %v", err)
	}
}

func TestAWorkerWhoseLeaseRanOutIsToldAtItsAckAndAnotherWorkerGotTheEvent(t *testing.T) {
	client, ctx := newClient(t), context.Background()
	_, err := client.CreateGroup(ctx, "g", lapse.GroupOptions{Start: lapse.StartOldest, VisibilityTimeout: time.Second})
	must(t, err)
	redelivered := make(chan struct{})
	type failure struct {
		delivery lapse.Delivery
		err      error
	}
	failures := make(chan failure, 1)
	stopSlow, _ := working(t, client, lapse.WorkerOptions{Group: "g", Consumer: "w1",
		OnError: func(d lapse.Delivery, err error) { failures <- failure{d, err} }},
		func(ctx context.Context, d lapse.Delivery) error {
			// Holds the event until its lease ran out and another worker got it.
			select {
			case <-redelivered:
			case <-time.After(lapsetest.Patience):
			}
			return nil
		})
	expireNow(t, client, "orders", "a")
	groupReaches(t, client, "g", func(g lapse.ConsumerGroup) bool { return g.DeliveredTotal == 1 })
	stopFast, _ := working(t, client, lapse.WorkerOptions{Group: "g", Consumer: "w2"},
		func(ctx context.Context, d lapse.Delivery) error {
			if d.DeliveryCount == 2 {
				close(redelivered)
			}
			return nil
		})
	select {
	case f := <-failures:
		if f.delivery.Event.Key != "a" || f.delivery.DeliveryCount != 1 || codeOf(f.err) != codes.FailedPrecondition {
			t.Errorf("OnError got %+v, %v", f.delivery, f.err)
		}
	case <-time.After(lapsetest.Patience):
		t.Fatal("the first worker was not told its lease ran out")
	}
	must(t, stopFast())
	must(t, stopSlow())
}
