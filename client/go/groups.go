package lapse

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "lapse/gen/lapse/v1"
)

// Consumer groups: every expiry event of a group handled by one worker.
//
//	_, err := client.CreateGroup(ctx, "cancel-orders", lapse.GroupOptions{Prefix: "unpaid:"})
//	err = client.Work(ctx, lapse.WorkerOptions{Group: "cancel-orders", Consumer: "worker-1"},
//		func(ctx context.Context, d lapse.Delivery) error {
//			return cancelOrder(d.Event.Key) // an error releases the event for redelivery
//		})

// GroupOptions: the filter (Collections or Prefix, at most one; neither is
// every collection), where the group starts (StartNew, StartOldest or
// StartAfterSequence with AfterSequence) and its options; zero values take
// the server's defaults (visibility timeout 30s, 5 deliveries, 100 unacked
// per consumer).
type GroupOptions struct {
	Collections           []string
	Prefix                string
	IncludeValues         bool
	Start                 Start
	AfterSequence         uint64
	VisibilityTimeout     time.Duration
	MaxDeliveries         uint32
	MaxUnackedPerConsumer uint32
}

type GroupConsumer struct {
	Name string
	// Events leased to it and not yet acknowledged.
	Unacked  uint64
	LastSeen time.Time
}

type GroupLease struct {
	Sequence uint64
	Consumer string
	// 1 for the first delivery.
	DeliveryCount uint32
	Deadline      time.Time
}

type ConsumerGroup struct {
	Name                  string
	Collections           []string
	Prefix                string
	IncludeValues         bool
	VisibilityTimeout     time.Duration
	MaxDeliveries         uint32
	MaxUnackedPerConsumer uint32
	// Every event up to this sequence has been received by the group.
	Position uint64
	// An upper bound on the matching events the group has not received yet.
	Lag uint64
	// Leased, or awaiting redelivery.
	Pending            uint64
	AwaitingRedelivery uint64
	DeadLettered       uint64
	DeliveredTotal     uint64
	AckedTotal         uint64
	LostSequencesTotal uint64
	Consumers          []GroupConsumer
	// Only from Group with maxLeases > 0: the leases held, in sequence order.
	Leases []GroupLease
}

func groupFrom(g *pb.ConsumerGroup) ConsumerGroup {
	return ConsumerGroup{Name: g.GetName(), Collections: g.GetCollections(),
		Prefix: g.GetCollectionPrefix(), IncludeValues: g.GetIncludeValues(),
		VisibilityTimeout: g.GetVisibilityTimeout().AsDuration(), MaxDeliveries: g.GetMaxDeliveries(),
		MaxUnackedPerConsumer: g.GetMaxUnackedPerConsumer(), Position: g.GetPosition(),
		Lag: g.GetLag(), Pending: g.GetPending(), AwaitingRedelivery: g.GetAwaitingRedelivery(),
		DeadLettered: g.GetDeadLettered(), DeliveredTotal: g.GetDeliveredTotal(),
		AckedTotal: g.GetAckedTotal(), LostSequencesTotal: g.GetLostSequencesTotal(),
		Consumers: convert(g.GetConsumers(), func(c *pb.ConsumerGroupConsumer) GroupConsumer {
			return GroupConsumer{c.GetName(), c.GetUnacked(), c.GetLastSeen().AsTime()}
		}),
		Leases: convert(g.GetLeases(), func(l *pb.ConsumerGroupLease) GroupLease {
			return GroupLease{l.GetSequence(), l.GetConsumer(), l.GetDeliveryCount(), l.GetDeadline().AsTime()}
		}),
	}
}

// groupStart is the proto of a group's start; INVALID_ARGUMENT for
// StartAfterToken, which only watches take.
func groupStart(start Start) (pb.StartPosition, error) {
	switch start {
	case StartNew:
		return pb.StartPosition_START_POSITION_NEW, nil
	case StartOldest:
		return pb.StartPosition_START_POSITION_OLDEST, nil
	case StartAfterSequence:
		return pb.StartPosition_START_POSITION_AFTER_SEQUENCE, nil
	}
	return 0, invalidArgument("start: a group starts new, oldest or after a sequence")
}

// CreateGroup creates a consumer group; ALREADY_EXISTS when the name is
// taken. Never retried.
func (c *Client) CreateGroup(ctx context.Context, name string, options GroupOptions) (ConsumerGroup, error) {
	start, err := groupStart(options.Start)
	if err != nil {
		return ConsumerGroup{}, err
	}
	request := &pb.CreateConsumerGroupRequest{Name: name, Collections: options.Collections,
		CollectionPrefix: options.Prefix, IncludeValues: options.IncludeValues, StartPosition: start,
		AfterSequence: options.AfterSequence, MaxDeliveries: options.MaxDeliveries,
		MaxUnackedPerConsumer: options.MaxUnackedPerConsumer}
	if options.VisibilityTimeout != 0 {
		request.VisibilityTimeout = durationpb.New(options.VisibilityTimeout)
	}
	response, err := unary(ctx, c, false, c.stub.CreateConsumerGroup, request)
	if err != nil {
		return ConsumerGroup{}, err
	}
	return groupFrom(response.GetGroup()), nil
}

// Group returns a group's position, lag, counts and consumers, and up to
// maxLeases of its leases; NOT_FOUND when there is none. Retried.
func (c *Client) Group(ctx context.Context, name string, maxLeases uint32) (ConsumerGroup, error) {
	response, err := unary(ctx, c, true, c.stub.GetConsumerGroup,
		&pb.GetConsumerGroupRequest{Name: name, MaxLeases: maxLeases})
	if err != nil {
		return ConsumerGroup{}, err
	}
	return groupFrom(response.GetGroup()), nil
}

type GroupsOptions struct {
	PageSize  int32
	PageToken string
}

type GroupPage struct {
	// Ordered by name.
	Groups []ConsumerGroup
	// Empty when there are no more groups.
	NextPageToken string
}

// Groups returns one page of consumer groups. Retried.
func (c *Client) Groups(ctx context.Context, options GroupsOptions) (GroupPage, error) {
	response, err := unary(ctx, c, true, c.stub.ListConsumerGroups,
		&pb.ListConsumerGroupsRequest{PageSize: options.PageSize, PageToken: options.PageToken})
	if err != nil {
		return GroupPage{}, err
	}
	return GroupPage{convert(response.GetGroups(), groupFrom), response.GetNextPageToken()}, nil
}

// DeleteGroup deletes a group and returns it as it was. Never retried (a
// repeat would answer NOT_FOUND).
func (c *Client) DeleteGroup(ctx context.Context, name string) (ConsumerGroup, error) {
	response, err := unary(ctx, c, false, c.stub.DeleteConsumerGroup, &pb.DeleteConsumerGroupRequest{Name: name})
	if err != nil {
		return ConsumerGroup{}, err
	}
	return groupFrom(response.GetGroup()), nil
}

// ResetGroup moves a group to start (StartNew, StartOldest, or
// StartAfterSequence with afterSequence); its pending events are dropped.
// Never retried.
func (c *Client) ResetGroup(ctx context.Context, name string, start Start, afterSequence uint64) (ConsumerGroup, error) {
	position, err := groupStart(start)
	if err != nil {
		return ConsumerGroup{}, err
	}
	response, err := unary(ctx, c, false, c.stub.ResetConsumerGroup,
		&pb.ResetConsumerGroupRequest{Name: name, StartPosition: position, AfterSequence: afterSequence})
	if err != nil {
		return ConsumerGroup{}, err
	}
	return groupFrom(response.GetGroup()), nil
}

// Lease is one lease: the event's sequence and the delivery count it came
// with.
type Lease struct {
	Sequence      uint64
	DeliveryCount uint32
}

type Delivery struct {
	Event ExpiryEvent
	// 1 for the first delivery.
	DeliveryCount uint32
	LeaseDeadline time.Time
}

func (d Delivery) Lease() Lease { return Lease{d.Event.Sequence, d.DeliveryCount} }

// LostRange: the server's retention discarded the group's events First to
// Last before the group received them.
type LostRange struct {
	First, Last uint64
}

type PollOptions struct {
	// Events to lease at most [1].
	MaxEvents uint32
	// How long to wait for an event when none is deliverable (the long poll;
	// at most 60s); 0 answers at once.
	Wait time.Duration
}

type PollResult struct {
	// Redeliveries first, then new events; empty when nothing is deliverable.
	Deliveries []Delivery
	// Set (told once) when the group lost events to the server's retention.
	Lost *LostRange
}

// Poll leases up to MaxEvents events of group to consumer until the group's
// visibility timeout, waiting up to Wait for one (a server that does not
// long-poll answers at once). Without a context deadline, the call's is
// Options.Timeout plus Wait. Never retried: a repeat would lease more.
func (c *Client) Poll(ctx context.Context, group, consumer string, options PollOptions) (PollResult, error) {
	return c.poll(ctx, group, consumer, options)
}

// poll is Poll with these call options.
func (c *Client) poll(ctx context.Context, group, consumer string, options PollOptions,
	callOptions ...grpc.CallOption) (PollResult, error) {
	request := &pb.PollRequest{Group: group, Consumer: consumer, MaxEvents: options.MaxEvents}
	if options.Wait > 0 {
		request.Wait = durationpb.New(options.Wait)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.options.Timeout+options.Wait)
		defer cancel()
	}
	response, err := unary(ctx, c, false, func(ctx context.Context, r *pb.PollRequest,
		more ...grpc.CallOption) (*pb.PollResponse, error) {
		return c.stub.Poll(ctx, r, append(callOptions, more...)...)
	}, request)
	if err != nil {
		return PollResult{}, err
	}
	result := PollResult{Deliveries: convert(response.GetDeliveries(), func(d *pb.Delivery) Delivery {
		return Delivery{eventFrom(d.GetEvent()), d.GetDeliveryCount(), d.GetLeaseDeadline().AsTime()}
	})}
	if first, last := response.GetLostFirstSequence(), response.GetLostLastSequence(); first != 0 || last != 0 {
		result.Lost = &LostRange{first, last}
	}
	return result, nil
}

// LeaseResult: Code is OK, or FAILED_PRECONDITION when the lease is no longer
// held (it expired, went to another consumer, or was finished already: the
// event may be handled twice).
type LeaseResult struct {
	Sequence uint64
	Code     codes.Code
	Message  string
}

func leaseRefs(leases []Lease) []*pb.LeaseRef {
	return convert(leases, func(l Lease) *pb.LeaseRef {
		return &pb.LeaseRef{Sequence: l.Sequence, DeliveryCount: l.DeliveryCount}
	})
}

func leaseResults(results []*pb.LeaseResult) []LeaseResult {
	return convert(results, func(r *pb.LeaseResult) LeaseResult {
		return LeaseResult{r.GetSequence(), codes.Code(r.GetCode()), r.GetMessage()}
	})
}

// Ack finishes events; one result per lease, in order. Retried: a repeat
// changes nothing, though it reports FAILED_PRECONDITION for a lease the
// first attempt finished.
func (c *Client) Ack(ctx context.Context, group, consumer string, leases []Lease) ([]LeaseResult, error) {
	response, err := unary(ctx, c, true, c.stub.Ack,
		&pb.AckRequest{Group: group, Consumer: consumer, Leases: leaseRefs(leases)})
	if err != nil {
		return nil, err
	}
	return leaseResults(response.GetResults()), nil
}

// Nack releases events at once, for redelivery; results as Ack's. Retried,
// as Ack.
func (c *Client) Nack(ctx context.Context, group, consumer string, leases []Lease) ([]LeaseResult, error) {
	response, err := unary(ctx, c, true, c.stub.Nack,
		&pb.NackRequest{Group: group, Consumer: consumer, Leases: leaseRefs(leases)})
	if err != nil {
		return nil, err
	}
	return leaseResults(response.GetResults()), nil
}

// ExtendLeases makes each lease end extension after now (at most 12h);
// results as Ack's. Retried: a repeat extends from a moment later.
func (c *Client) ExtendLeases(ctx context.Context, group, consumer string, leases []Lease, extension time.Duration) ([]LeaseResult, error) {
	response, err := unary(ctx, c, true, c.stub.ExtendLeases, &pb.ExtendLeasesRequest{Group: group,
		Consumer: consumer, Leases: leaseRefs(leases), Extension: durationpb.New(extension)})
	if err != nil {
		return nil, err
	}
	return leaseResults(response.GetResults()), nil
}

// WorkerOptions says what Work consumes and how.
type WorkerOptions struct {
	Group string
	// The consumer's name: a worker that reconnects under it keeps its leases.
	Consumer string
	// Events per Poll at most [1].
	MaxEvents uint32
	// How long a Poll waits for an event [10s]; at most 60s.
	Wait time.Duration
	// Told of events the group lost to the server's retention; nil: Work
	// returns an *Error of code OUT_OF_RANGE naming them.
	OnLost func(LostRange)
	// Told of a delivery whose handler failed (the event was released), whose
	// lease was lost before its ack (the event may be handled twice), or
	// whose Ack or Nack could not reach the server.
	OnError func(Delivery, error)
}

// Work handles the events of a consumer group until ctx ends (it then
// returns nil) or an error ends it.
//
// It polls the group (Poll with Wait, the long poll) as options.Consumer and
// calls handler once per delivery, in order: when the handler returns nil,
// the event is acknowledged (Ack); when it returns an error, the event is
// released (Nack) and goes to the next Poll of any worker of the group with
// its delivery count one higher (after the group's max deliveries it is
// dead-lettered). A handler that does not finish within the group's
// visibility timeout loses its lease and the event may be handled twice
// (ExtendLeases gives it more time). The handler's ctx is Work's.
//
// Work's polls wait for the channel to be ready (grpc.WaitForReady) within
// their deadline, so Work rides out a server restart without failing fast.
// When the server stays unreachable or restarts (UNAVAILABLE, CANCELLED,
// DEADLINE_EXCEEDED), Work polls again with Options.RetryBackoff under the
// same consumer name, so it keeps its leases; an Ack or Nack that fails so
// (after its retries) is told to OnError and its event is redelivered once
// the lease ends. Events the server's retention
// discarded before the group received them are never skipped silently: Work
// releases the deliveries of that Poll and returns an *Error of code
// OUT_OF_RANGE, or, with OnLost, tells it and goes on. Any other error (the
// group deleted: NOT_FOUND, PERMISSION_DENIED, ...) is returned as an *Error.
// A server that does not honour Wait answers an empty Poll at once: Work then
// pauses for Options.IdlePollBackoff instead of spinning. When ctx ends, the
// deliveries not yet handled are released.
//
// Run several Work calls (one goroutine each) for a pool in one process.
func (c *Client) Work(ctx context.Context, options WorkerOptions, handler func(context.Context, Delivery) error) error {
	if options.MaxEvents == 0 {
		options.MaxEvents = 1
	}
	if options.Wait <= 0 {
		options.Wait = 10 * time.Second
	}
	errorDelays, idleDelays := c.options.RetryBackoff.start(), c.options.IdlePollBackoff.start()
	for ctx.Err() == nil {
		started := time.Now()
		result, err := c.poll(ctx, options.Group, options.Consumer,
			PollOptions{MaxEvents: options.MaxEvents, Wait: options.Wait}, grpc.WaitForReady(true))
		switch {
		case ctx.Err() != nil:
			c.settle(c.Nack, options, result.Deliveries)
			return nil
		case transient(err):
			pause(ctx, errorDelays.next())
			continue
		case err != nil:
			return err
		}
		errorDelays = c.options.RetryBackoff.start()
		if lost := result.Lost; lost != nil {
			if options.OnLost == nil {
				c.settle(c.Nack, options, result.Deliveries)
				return &Error{Code: codes.OutOfRange, Message: fmt.Sprintf("group %s: events %d..%d were "+
					"discarded by the server's retention before the group received them; they will never "+
					"be delivered", options.Group, lost.First, lost.Last)}
			}
			options.OnLost(*lost)
		}
		if len(result.Deliveries) == 0 {
			// An empty answer sooner than the wait asked for: the server did
			// not wait (or is shutting down).
			if time.Since(started) < options.Wait/2 {
				pause(ctx, idleDelays.next())
			}
			continue
		}
		idleDelays = c.options.IdlePollBackoff.start()
		if err := c.handle(ctx, options, result.Deliveries, handler); err != nil {
			return err
		}
	}
	return nil
}

// handle runs handler on each delivery, then acks or nacks it; the error of
// an Ack or Nack that failed.
func (c *Client) handle(ctx context.Context, options WorkerOptions, deliveries []Delivery,
	handler func(context.Context, Delivery) error) error {
	for i, delivery := range deliveries {
		if ctx.Err() != nil {
			return c.settle(c.Nack, options, deliveries[i:])
		}
		settle := c.Ack
		if err := handler(ctx, delivery); err != nil {
			settle = c.Nack
			if options.OnError != nil {
				options.OnError(delivery, err)
			}
		}
		if err := c.settle(settle, options, []Delivery{delivery}); err != nil {
			return err
		}
	}
	return nil
}

// transient says whether err is worth another Poll: the server is away or
// restarting (a draining server cancels a waiting poll), or a call outlived
// its deadline on the way.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded:
		return err != nil
	}
	return false
}

// settle acks or nacks deliveries, also after Work's ctx ended (with a
// context of its own). A lease no longer held goes to OnError, and so does
// each delivery when the call fails transiently (after its retries): its
// lease then ends by itself and the event is redelivered. Other failures are
// returned.
func (c *Client) settle(method func(context.Context, string, string, []Lease) ([]LeaseResult, error),
	options WorkerOptions, deliveries []Delivery) error {
	if len(deliveries) == 0 {
		return nil
	}
	results, err := method(context.Background(), options.Group, options.Consumer,
		convert(deliveries, Delivery.Lease))
	if transient(err) {
		for _, delivery := range deliveries {
			if options.OnError != nil {
				options.OnError(delivery, err)
			}
		}
		return nil
	}
	if err != nil {
		return err
	}
	for i, result := range results {
		if result.Code != codes.OK && options.OnError != nil && i < len(deliveries) {
			options.OnError(deliveries[i], &Error{Code: result.Code, Message: result.Message})
		}
	}
	return nil
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}
