package lapse_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	lapse "lapse/client"
	lapsetest "lapse/testing"
)

// Short reconnect delays so that a watch finds a restarted lapsed promptly.
var quick = lapse.Options{
	WatchBackoff:            lapse.Backoff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond, Multiplier: 2},
	ReconnectBackoffInitial: 100 * time.Millisecond,
	ReconnectBackoffMax:     200 * time.Millisecond,
}

// expireNow puts keys and expires them at once: one event each, in key order.
func expireNow(t *testing.T, client *lapse.Client, collection string, keys ...string) {
	t.Helper()
	ctx := context.Background()
	for _, key := range keys {
		_, err := client.Put(ctx, collection, []lapse.MemberWrite{{Key: key, Value: []byte(key)}}, lapse.PutOptions{})
		must(t, err)
		_, err = client.Expire(ctx, collection, []string{key}, lapse.At(past), lapse.ExpireAlways)
		must(t, err)
	}
}

func TestAWatchDeliversEachExpiryWithItsMember(t *testing.T) {
	client := newClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// StartOldest: the server is new, so the watch cannot miss what follows
	// even if its stream is not in place yet.
	watch, err := client.Watch(ctx, lapse.WatchOptions{Collections: []string{"orders"},
		IncludeValues: true, Start: lapse.StartOldest})
	must(t, err)
	expireNow(t, client, "orders", "a")
	events, err := lapsetest.Take(watch, 1)
	must(t, err)
	if e := events[0]; e.Collection != "orders" || e.Key != "a" || string(e.Value) != "a" ||
		e.ExpiredAt.Before(e.ExpireTime) {
		t.Errorf("event: %+v", e)
	}
	cancel()
	for range watch.Events() {
	}
	if watch.Err() != nil {
		t.Errorf("a watch ended by its context: %v", watch.Err())
	}
}

// A stop (SIGTERM) ends the stream naming the last sequence delivered; a kill
// (SIGKILL) just drops the connection, so the watch resumes from what it
// examined itself.
func TestAWatchResumesAfterADurableStopWithNoGapAndNoDuplicate(t *testing.T) {
	resumesAfterRestart(t, func(l *lapsetest.Lapsed) {
		if code := l.Stop(); code != 0 {
			t.Fatalf("lapsed exited %d", code)
		}
	})
}

func TestAWatchResumesAfterADurableKillWithNoGapAndNoDuplicate(t *testing.T) {
	resumesAfterRestart(t, (*lapsetest.Lapsed).Kill)
}

func resumesAfterRestart(t *testing.T, end func(*lapsetest.Lapsed)) {
	flags := []string{"--data-dir=" + t.TempDir()}
	lapsed := lapsetest.Start(t, flags, 0)
	client := dial(t, lapsed.Address, quick)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch, err := client.Watch(ctx, lapse.WatchOptions{Start: lapse.StartOldest})
	must(t, err)
	expireNow(t, client, "orders", "a", "b")
	before, err := lapsetest.Take(watch, 2)
	must(t, err)
	end(lapsed)
	lapsed = lapsetest.Start(t, flags, lapsed.Port)
	// A new client: the old channel is still backing off.
	expireNow(t, dial(t, lapsed.Address, lapse.Options{}), "orders", "c", "d")
	after, err := lapsetest.Take(watch, 2)
	must(t, err)
	var keys []string
	events := append(before, after...)
	for i, e := range events {
		keys = append(keys, e.Key)
		if i > 0 && e.Sequence <= events[i-1].Sequence {
			t.Errorf("sequence %d after %d", e.Sequence, events[i-1].Sequence)
		}
	}
	if strings.Join(keys, ",") != "a,b,c,d" {
		t.Errorf("events %v, want a,b,c,d", keys)
	}
}

func TestAResumePointNoLongerRetainedEndsTheWatchWithOutOfRange(t *testing.T) {
	lapsed := lapsetest.Start(t, []string{"--event_retention_events=2"}, 0)
	client := dial(t, lapsed.Address, lapse.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, err := client.Watch(ctx, lapse.WatchOptions{Start: lapse.StartOldest})
	must(t, err)
	var sequences []uint64
	for _, key := range []string{"a", "b", "c", "d"} {
		expireNow(t, client, "orders", key)
		events, err := lapsetest.Take(first, 1)
		must(t, err)
		sequences = append(sequences, events[0].Sequence)
	}
	late, err := client.Watch(ctx, lapse.WatchOptions{Start: lapse.StartAfterSequence, AfterSequence: sequences[0]})
	must(t, err)
	events, err := lapsetest.Take(late, 1)
	if len(events) != 0 || codeOf(err) != codes.OutOfRange || !strings.Contains(err.Error(), "oldest") {
		t.Fatalf("events %+v, error %v; want OUT_OF_RANGE naming the oldest sequence", events, err)
	}
	if codeOf(late.Err()) != codes.OutOfRange {
		t.Errorf("Err(): %v", late.Err())
	}
}
