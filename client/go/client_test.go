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

var past = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func dial(t *testing.T, address string, options lapse.Options) *lapse.Client {
	t.Helper()
	client, err := lapse.Dial(address, options)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

func newClient(t *testing.T) *lapse.Client {
	return dial(t, lapsetest.Start(t, nil, 0).Address, lapse.Options{})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func codeOf(err error) codes.Code {
	var lapseErr *lapse.Error
	if errors.As(err, &lapseErr) {
		return lapseErr.Code
	}
	return codes.Unknown
}

func TestPutWritesWithTTLOrTimeAndGetReadsThemBack(t *testing.T) {
	client, ctx := newClient(t), context.Background()
	deadline := time.Now().Add(2 * time.Hour)
	put, err := client.Put(ctx, "orders", []lapse.MemberWrite{
		{Key: "a", Value: []byte("1"), Expiration: lapse.TTL(time.Minute)},
		{Key: "b", Value: []byte("2"), Expiration: lapse.At(deadline)},
		{Key: "c", Value: []byte("3")},
	}, lapse.PutOptions{})
	must(t, err)
	if len(put) != 3 || put[0].Outcome != lapse.Created || put[0].ExpireTime == nil || put[2].ExpireTime != nil {
		t.Fatalf("put: %+v", put)
	}
	got, err := client.Get(ctx, "orders", []string{"a", "b", "c", "missing"}, lapse.Expiration{})
	must(t, err)
	if !got[0].Found || string(got[0].Member.Value) != "1" || !got[0].Member.ExpireTime.After(time.Now()) {
		t.Errorf("a: %+v", got[0])
	}
	// Deadlines are rounded up to the millisecond.
	if late := got[1].Member.ExpireTime.Sub(deadline); late < 0 || late >= time.Millisecond {
		t.Errorf("b expires %v after the deadline asked for", late)
	}
	if got[2].Member.ExpireTime != nil || got[3].Found || got[3].Member.Key != "missing" {
		t.Errorf("c, missing: %+v %+v", got[2], got[3])
	}
}

func TestPutConditionsSkipAndMaxMembersRefusesTheWholeWrite(t *testing.T) {
	client, ctx := newClient(t), context.Background()
	_, err := client.Put(ctx, "orders", []lapse.MemberWrite{{Key: "a"}, {Key: "b"}}, lapse.PutOptions{})
	must(t, err)
	put, err := client.Put(ctx, "orders", []lapse.MemberWrite{{Key: "a", Condition: lapse.PutIfAbsent}}, lapse.PutOptions{})
	must(t, err)
	if put[0].Outcome != lapse.Skipped {
		t.Errorf("IF_ABSENT on a present member: %v", put[0].Outcome)
	}
	_, err = client.Put(ctx, "orders", []lapse.MemberWrite{{Key: "c"}}, lapse.PutOptions{MaxMembers: 2})
	if codeOf(err) != codes.FailedPrecondition {
		t.Fatalf("a third member with MaxMembers 2: %v", err)
	}
	got, err := client.Get(ctx, "orders", []string{"c"}, lapse.Expiration{})
	must(t, err)
	if got[0].Found {
		t.Error("a refused put wrote its member")
	}
}

func TestGetWithRefreshSlidesTheDeadline(t *testing.T) {
	client, ctx := newClient(t), context.Background()
	_, err := client.Put(ctx, "sessions", []lapse.MemberWrite{{Key: "s", Expiration: lapse.TTL(time.Minute)}}, lapse.PutOptions{})
	must(t, err)
	got, err := client.Get(ctx, "sessions", []string{"s"}, lapse.TTL(time.Hour))
	must(t, err)
	if !got[0].Member.ExpireTime.After(time.Now().Add(59 * time.Minute)) {
		t.Errorf("refreshed deadline: %v", got[0].Member.ExpireTime)
	}
}

func TestRemoveExpireAndPersistReportTheirOutcomePerKey(t *testing.T) {
	client, ctx := newClient(t), context.Background()
	_, err := client.Put(ctx, "orders", []lapse.MemberWrite{{Key: "a"}, {Key: "b"}, {Key: "c"}}, lapse.PutOptions{})
	must(t, err)
	removed, err := client.Remove(ctx, "orders", []string{"c", "x"})
	must(t, err)
	if !removed[0].Existed || removed[1].Existed {
		t.Errorf("remove: %+v", removed)
	}
	expired, err := client.Expire(ctx, "orders", []string{"a", "x"}, lapse.TTL(time.Minute), lapse.ExpireIfNoExpiration)
	must(t, err)
	if expired[0].Outcome != lapse.Updated || expired[0].ExpireTime == nil || expired[1].Outcome != lapse.ExpireNotFound {
		t.Errorf("expire: %+v", expired)
	}
	persisted, err := client.Persist(ctx, "orders", []string{"a", "b", "x"})
	must(t, err)
	if persisted[0].Outcome != lapse.Persisted || persisted[1].Outcome != lapse.NoExpiration ||
		persisted[2].Outcome != lapse.PersistNotFound {
		t.Errorf("persist: %+v", persisted)
	}
	gone, err := client.Expire(ctx, "orders", []string{"b"}, lapse.At(past), lapse.ExpireAlways)
	must(t, err)
	if gone[0].Outcome != lapse.Expired {
		t.Errorf("expire in the past: %v", gone[0].Outcome)
	}
}

func TestListPagesThroughACollectionByKeyAndByExpireTime(t *testing.T) {
	client, ctx := newClient(t), context.Background()
	_, err := client.Put(ctx, "c", []lapse.MemberWrite{
		{Key: "k1", Value: []byte("1"), Expiration: lapse.TTL(2 * time.Hour)},
		{Key: "k2", Value: []byte("2"), Expiration: lapse.TTL(2 * time.Hour)},
		{Key: "k3", Value: []byte("3"), Expiration: lapse.TTL(time.Minute)},
	}, lapse.PutOptions{})
	must(t, err)
	first, err := client.List(ctx, "c", lapse.ListOptions{PageSize: 2})
	must(t, err)
	rest, err := client.List(ctx, "c", lapse.ListOptions{PageSize: 2, PageToken: first.NextPageToken})
	must(t, err)
	if len(first.Members) != 2 || first.Members[1].Key != "k2" || len(rest.Members) != 1 ||
		rest.Members[0].Key != "k3" || rest.NextPageToken != "" {
		t.Errorf("pages: %+v %+v", first, rest)
	}
	byTime, err := client.List(ctx, "c", lapse.ListOptions{OrderBy: lapse.ByExpireTime, KeysOnly: true})
	must(t, err)
	if byTime.Members[0].Key != "k3" || len(byTime.Members[0].Value) != 0 {
		t.Errorf("by expire time: %+v", byTime.Members)
	}
}

func TestCollectionCollectionsAndDelete(t *testing.T) {
	client, ctx := newClient(t), context.Background()
	for _, name := range []string{"user:1", "user:2", "other"} {
		_, err := client.Put(ctx, name, []lapse.MemberWrite{{Key: "a", Expiration: lapse.TTL(time.Minute)}}, lapse.PutOptions{})
		must(t, err)
	}
	info, err := client.Collection(ctx, "user:1")
	must(t, err)
	if info.MemberCount != 1 || info.ExpiringCount != 1 || info.NextExpireTime == nil {
		t.Errorf("collection: %+v", info)
	}
	page, err := client.Collections(ctx, lapse.CollectionsOptions{Prefix: "user:"})
	must(t, err)
	if len(page.Collections) != 2 || page.Collections[1].Name != "user:2" || page.NextPageToken != "" {
		t.Errorf("collections: %+v", page)
	}
	removed, err := client.Delete(ctx, "user:1")
	must(t, err)
	if removed != 1 {
		t.Errorf("delete removed %d", removed)
	}
	if _, err := client.Collection(ctx, "user:1"); codeOf(err) != codes.NotFound {
		t.Errorf("a deleted collection: %v", err)
	}
}

func TestBadInputIsAnErrorWithInvalidArgumentNamingTheField(t *testing.T) {
	client, ctx := newClient(t), context.Background()
	_, err := client.Put(ctx, "orders", []lapse.MemberWrite{{Key: "a", Expiration: lapse.TTL(-time.Minute)}}, lapse.PutOptions{})
	if codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "members[0].ttl") {
		t.Errorf("a negative TTL: %v", err)
	}
	if _, err := client.Get(ctx, "", []string{"a"}, lapse.Expiration{}); codeOf(err) != codes.InvalidArgument {
		t.Errorf("an empty collection name: %v", err)
	}
	if _, err := client.Expire(ctx, "orders", []string{"a"}, lapse.Expiration{}, lapse.ExpireAlways); codeOf(err) != codes.InvalidArgument {
		t.Errorf("expire without an expiration: %v", err)
	}
	if _, err := client.Watch(ctx, lapse.WatchOptions{Collections: []string{"a"}, Prefix: "b"}); codeOf(err) != codes.InvalidArgument {
		t.Errorf("a watch with both filters: %v", err)
	}
}

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

// watching is a lapsed, a quick client of it and a watch from the oldest
// event that has read two events: "orders" a and b.
type watching struct {
	lapsed *lapsetest.Lapsed
	client *lapse.Client
	watch  *lapse.Watch
	events []lapse.ExpiryEvent
}

// watchTwoEvents starts a lapsed with flags, opens the watch and expires a
// and b.
func watchTwoEvents(t *testing.T, flags []string) watching {
	t.Helper()
	w := watching{lapsed: lapsetest.Start(t, flags, 0)}
	w.client = dial(t, w.lapsed.Address, quick)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var err error
	w.watch, err = w.client.Watch(ctx, lapse.WatchOptions{Start: lapse.StartOldest})
	must(t, err)
	expireNow(t, w.client, "orders", "a", "b")
	w.events, err = lapsetest.Take(w.watch, 2)
	must(t, err)
	return w
}

func resumesAfterRestart(t *testing.T, end func(*lapsetest.Lapsed)) {
	flags := []string{"--data-dir=" + t.TempDir()}
	w := watchTwoEvents(t, flags)
	end(w.lapsed)
	lapsed := lapsetest.Start(t, flags, w.lapsed.Port)
	// A new client: the old channel is still backing off.
	expireNow(t, dial(t, lapsed.Address, lapse.Options{}), "orders", "c", "d")
	after, err := lapsetest.Take(w.watch, 2)
	must(t, err)
	var keys []string
	events := append(w.events, after...)
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

func TestAWatchResumesByTokenAndARestartedMemoryOnlyServerEndsItWithOutOfRange(t *testing.T) {
	w := watchTwoEvents(t, nil)
	w.lapsed.Kill()
	lapsed := lapsetest.Start(t, nil, w.lapsed.Port)
	// The new store has events of its own: a bare sequence would not always
	// tell them from the old store's, the token does.
	expireNow(t, dial(t, lapsed.Address, lapse.Options{}), "orders", "c")
	events, err := lapsetest.Take(w.watch, 1)
	if len(events) != 0 || codeOf(err) != codes.OutOfRange || !strings.Contains(err.Error(), "resume_token: belongs to store") {
		t.Fatalf("events %+v, error %v; want OUT_OF_RANGE naming the stores", events, err)
	}
	// The position to keep, as the server gave it: a later watch from it is
	// refused the same way.
	token := w.watch.ResumeToken()
	if len(token) == 0 {
		t.Fatal("no resume token")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	late, err := w.client.Watch(ctx, lapse.WatchOptions{Start: lapse.StartAfterToken, ResumeToken: token})
	must(t, err)
	if _, err := lapsetest.Take(late, 1); codeOf(err) != codes.OutOfRange {
		t.Errorf("a later watch from the token: %v", err)
	}
}
