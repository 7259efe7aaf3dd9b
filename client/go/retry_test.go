package lapse_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	lapse "lapse/client"
	pb "lapse/gen/lapse/v1"
)

// scripted fails its first `failures` calls with UNAVAILABLE; GetCollection
// hangs until the test ends.
type scripted struct {
	pb.UnimplementedLapseServiceServer
	release  chan struct{}
	mu       sync.Mutex
	failures int
	calls    int
	// When each Poll that did not fail was answered; polled is closed at the
	// third.
	polls  []time.Time
	polled chan struct{}
}

func (s *scripted) failOr(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls <= s.failures {
		return status.Error(codes.Unavailable, "scripted")
	}
	return err
}

func (s *scripted) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *scripted) GetMembers(ctx context.Context, r *pb.GetMembersRequest) (*pb.GetMembersResponse, error) {
	return &pb.GetMembersResponse{}, s.failOr(nil)
}

func (s *scripted) PutMembers(ctx context.Context, r *pb.PutMembersRequest) (*pb.PutMembersResponse, error) {
	return &pb.PutMembersResponse{}, s.failOr(nil)
}

func (s *scripted) Ack(ctx context.Context, r *pb.AckRequest) (*pb.AckResponse, error) {
	return &pb.AckResponse{}, s.failOr(nil)
}

func (s *scripted) Poll(ctx context.Context, r *pb.PollRequest) (*pb.PollResponse, error) {
	if err := s.failOr(nil); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.polls = append(s.polls, time.Now()); len(s.polls) == 3 {
		close(s.polled)
	}
	return &pb.PollResponse{}, nil
}

func (s *scripted) GetCollection(ctx context.Context, r *pb.GetCollectionRequest) (*pb.GetCollectionResponse, error) {
	<-s.release
	return &pb.GetCollectionResponse{}, nil
}

func startScripted(t *testing.T, failures int) (*scripted, *lapse.Client) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	service := &scripted{failures: failures, release: make(chan struct{}), polled: make(chan struct{})}
	server := grpc.NewServer()
	pb.RegisterLapseServiceServer(server, service)
	go server.Serve(listener)
	t.Cleanup(server.Stop)
	t.Cleanup(func() { close(service.release) })
	quick := lapse.Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond, Multiplier: 2}
	idle := lapse.Backoff{Initial: 200 * time.Millisecond, Max: 200 * time.Millisecond, Multiplier: 2}
	return service, dial(t, listener.Addr().String(), lapse.Options{RetryBackoff: quick, IdlePollBackoff: idle})
}

func TestAnIdempotentCallIsRetriedOnUnavailableUntilItSucceeds(t *testing.T) {
	service, client := startScripted(t, 3)
	_, err := client.Get(context.Background(), "c", nil, lapse.Expiration{})
	must(t, err)
	if service.callCount() != 4 {
		t.Errorf("%d attempts, want 4", service.callCount())
	}
}

func TestAnIdempotentCallGivesUpAfterMaxAttempts(t *testing.T) {
	service, client := startScripted(t, 10)
	_, err := client.Get(context.Background(), "c", nil, lapse.Expiration{})
	if codeOf(err) != codes.Unavailable || service.callCount() != 4 {
		t.Errorf("%v after %d attempts, want UNAVAILABLE after 4", err, service.callCount())
	}
}

func TestPutsAndRefreshingGetsAreAttemptedOnce(t *testing.T) {
	service, client := startScripted(t, 10)
	ctx := context.Background()
	if _, err := client.Put(ctx, "c", []lapse.MemberWrite{{Key: "a"}}, lapse.PutOptions{}); codeOf(err) != codes.Unavailable {
		t.Errorf("put: %v", err)
	}
	if _, err := client.Get(ctx, "c", []string{"a"}, lapse.TTL(time.Second)); codeOf(err) != codes.Unavailable {
		t.Errorf("refreshing get: %v", err)
	}
	if service.callCount() != 2 {
		t.Errorf("%d attempts, want 2", service.callCount())
	}
}

func TestACallOutlivingItsContextDeadlineFailsDeadlineExceeded(t *testing.T) {
	_, client := startScripted(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := client.Collection(ctx, "c"); codeOf(err) != codes.DeadlineExceeded {
		t.Errorf("a hanging call: %v", err)
	}
}

func TestAcksAreRetriedOnUnavailableAndPollsAreNot(t *testing.T) {
	service, client := startScripted(t, 3)
	ctx := context.Background()
	_, err := client.Ack(ctx, "g", "w", []lapse.Lease{{Sequence: 1, DeliveryCount: 1}})
	must(t, err)
	if service.callCount() != 4 {
		t.Errorf("%d attempts of an ack, want 4", service.callCount())
	}
	service.mu.Lock()
	service.failures = 5
	service.mu.Unlock()
	if _, err := client.Poll(ctx, "g", "w", lapse.PollOptions{}); codeOf(err) != codes.Unavailable || service.callCount() != 5 {
		t.Errorf("a poll: %v after %d calls, want UNAVAILABLE after 5", err, service.callCount())
	}
}

// A server that does not long-poll answers at once: the worker waits the idle
// backoff (at least half its 200ms) between such polls, not spinning.
func TestAWorkerPausesAfterAPollAnsweredEmptySoonerThanItsWait(t *testing.T) {
	service, client := startScripted(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- client.Work(ctx, lapse.WorkerOptions{Group: "g", Consumer: "w", Wait: 10 * time.Second},
			func(context.Context, lapse.Delivery) error { return nil })
	}()
	select {
	case <-service.polled:
	case <-time.After(30 * time.Second):
		t.Fatal("fewer than 3 polls within 30s")
	}
	cancel()
	must(t, <-done)
	service.mu.Lock()
	defer service.mu.Unlock()
	for i := 1; i < len(service.polls); i++ {
		if gap := service.polls[i].Sub(service.polls[i-1]); gap < 100*time.Millisecond {
			t.Errorf("poll %d came %v after the one before", i, gap)
		}
	}
}
