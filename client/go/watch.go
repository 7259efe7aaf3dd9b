package lapse

import (
	"context"
	"io"
	"regexp"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "lapse/gen/lapse/v1"
)

// Start is where a Watch begins.
type Start int

const (
	// StartNew: only events appended after the watch starts.
	StartNew Start = iota
	// StartOldest: the oldest event the server still holds.
	StartOldest
	// StartAfterSequence: right after WatchOptions.AfterSequence (resume
	// within one store).
	StartAfterSequence
	// StartAfterToken: right after WatchOptions.ResumeToken (resume; refused
	// with OUT_OF_RANGE by a server that now serves another store).
	StartAfterToken
)

type WatchOptions struct {
	// Only these collections, or only those whose name starts with Prefix:
	// at most one of the two; neither means every collection.
	Collections   []string
	Prefix        string
	IncludeValues bool
	Start         Start
	// With StartAfterSequence: the last sequence already handled, e.g. a
	// previous Watch's Position().
	AfterSequence uint64
	// With StartAfterToken: a previous Watch's ResumeToken(), as it was.
	ResumeToken []byte
}

type ExpiryEvent struct {
	// Strictly increasing across the server, never reused.
	Sequence   uint64
	Collection string
	Key        string
	// Empty unless WatchOptions.IncludeValues.
	Value []byte
	// The deadline the member had, and when the server expired it.
	ExpireTime time.Time
	ExpiredAt  time.Time
}

func eventFrom(e *pb.ExpiryEvent) ExpiryEvent {
	return ExpiryEvent{Sequence: e.GetSequence(), Collection: e.GetCollection(), Key: e.GetKey(),
		Value: e.GetValue(), ExpireTime: e.GetExpireTime().AsTime(), ExpiredAt: e.GetExpiredAt().AsTime()}
}

// Watch is a running watch (see Client.Watch). Its methods are safe for
// concurrent use.
//
// It reconnects by itself when its stream breaks (UNAVAILABLE, a dropped
// connection, a server restart) and resumes with START_POSITION_AFTER_TOKEN
// and the resume_token of the last response it handed over (as the C++ client
// does; without one yet, right after the last sequence it examined), so the
// events on Events() form one stream with no gap and no duplicate, and a
// server that now serves another store (a memory-only server restarted,
// another data directory) refuses instead of streaming from a position that
// means nothing there. The ways to lose events are for the server to no
// longer hold them or to serve another store: the watch then ends with an
// *Error of code OUT_OF_RANGE (the message says which), never a silent skip.
// One caveat, as in the C++ client: a StartNew watch learns its
// position from its first response (events or a heartbeat); if that first
// stream drops before any response without the server naming its position
// (a draining lapse server does), the watch starts new again.
type Watch struct {
	events chan ExpiryEvent

	mu sync.Mutex
	// Known once a response came, or from the start with StartAfterSequence.
	position      uint64
	positionKnown bool
	// The resume_token of the last response handed over; where a reconnect
	// resumes when set.
	token []byte
	err   error
}

// Events delivers each event once, in sequence order. It is closed when the
// watch ends: its context was cancelled (Err is nil; an event already on its
// way may still come first) or an error that is not worth a reconnect ended
// it (Err says which).
func (w *Watch) Events() <-chan ExpiryEvent { return w.events }

// Err is the error that ended the watch, once Events is closed; nil when its
// context ended it.
func (w *Watch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Position is the resume point: every event up to it has been examined and,
// if it matched, received from Events(), so a watch with StartAfterSequence
// from here continues with no gap and no duplicate. 0 while a StartNew or
// StartOldest watch has not learnt it.
func (w *Watch) Position() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.position
}

// ResumeToken is the same resume point as the server's opaque token, the one
// to keep: a watch with StartAfterToken from it continues with no gap and no
// duplicate, or ends OUT_OF_RANGE on another store. nil while no response has
// been handed over.
func (w *Watch) ResumeToken() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]byte(nil), w.token...)
}

// Watch starts a watch that runs until ctx is cancelled or an error ends it.
// INVALID_ARGUMENT when both Collections and Prefix are set, or StartAfterToken
// has no ResumeToken.
func (c *Client) Watch(ctx context.Context, options WatchOptions) (*Watch, error) {
	if len(options.Collections) > 0 && options.Prefix != "" {
		return nil, invalidArgument("watch: set Collections or Prefix, not both")
	}
	w := &Watch{events: make(chan ExpiryEvent)}
	switch options.Start {
	case StartAfterSequence:
		w.position, w.positionKnown = options.AfterSequence, true
	case StartAfterToken:
		if len(options.ResumeToken) == 0 {
			return nil, invalidArgument("watch: StartAfterToken needs a ResumeToken")
		}
		w.token = append([]byte(nil), options.ResumeToken...)
	}
	go w.run(ctx, c.stub, options, c.options.WatchBackoff)
	return w, nil
}

// A draining lapse server ends a stream with "server shutting down; last
// delivered sequence N" (see the README's WatchExpirations section).
var lastDelivered = regexp.MustCompile(`last delivered sequence (\d+)`)

func (w *Watch) request(options WatchOptions) *pb.WatchExpirationsRequest {
	request := &pb.WatchExpirationsRequest{Collections: options.Collections,
		CollectionPrefix: options.Prefix, IncludeValues: options.IncludeValues}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.token != nil:
		request.StartPosition = pb.StartPosition_START_POSITION_AFTER_TOKEN
		request.ResumeToken = w.token
	case w.positionKnown:
		request.StartPosition = pb.StartPosition_START_POSITION_AFTER_SEQUENCE
		request.AfterSequence = w.position
	case options.Start == StartOldest:
		request.StartPosition = pb.StartPosition_START_POSITION_OLDEST
	default:
		request.StartPosition = pb.StartPosition_START_POSITION_NEW
	}
	return request
}

func (w *Watch) run(ctx context.Context, stub pb.LapseServiceClient, options WatchOptions, policy Backoff) {
	defer close(w.events)
	delays := policy.start()
	for {
		err := w.attempt(ctx, stub, options, func() { delays = policy.start() })
		if ctx.Err() != nil {
			return
		}
		// Streams that end like this are resumed: the server went away or is
		// draining, a connection dropped, or something between us ended the
		// stream (the server's OK end included).
		switch status.Code(err) {
		case codes.Unavailable, codes.Canceled, codes.OK:
		default:
			w.mu.Lock()
			w.err = errorFrom(err)
			w.mu.Unlock()
			return
		}
		if named := lastDelivered.FindStringSubmatch(status.Convert(err).Message()); named != nil {
			if sequence, parsed := strconv.ParseUint(named[1], 10, 64); parsed == nil {
				w.mu.Lock()
				if !w.positionKnown {
					w.position, w.positionKnown = sequence, true
				}
				w.mu.Unlock()
			}
		}
		pause(ctx, delays.next())
	}
}

// attempt runs one stream until it ends; nil for an end with OK. gotResponse
// is called on each response.
func (w *Watch) attempt(ctx context.Context, stub pb.LapseServiceClient, options WatchOptions, gotResponse func()) error {
	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := stub.WatchExpirations(streamCtx, w.request(options))
	if err != nil {
		return err
	}
	for {
		response, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		gotResponse()
		if !w.deliver(ctx, response) {
			return ctx.Err()
		}
	}
}

// deliver hands the response's new events over; false if ctx ended first.
func (w *Watch) deliver(ctx context.Context, response *pb.WatchExpirationsResponse) bool {
	for _, e := range response.GetEvents() {
		w.mu.Lock()
		seen := w.positionKnown && e.GetSequence() <= w.position
		w.mu.Unlock()
		if seen {
			continue
		}
		select {
		case w.events <- eventFrom(e):
		case <-ctx.Done():
			return false
		}
		w.mu.Lock()
		w.position, w.positionKnown = e.GetSequence(), true
		w.mu.Unlock()
	}
	// Every event the response examined has been handed over.
	w.mu.Lock()
	if examined := response.GetExaminedSequence(); !w.positionKnown || examined > w.position {
		w.position = examined
	}
	w.positionKnown = true
	if token := response.GetResumeToken(); len(token) > 0 {
		w.token = token
	}
	w.mu.Unlock()
	return true
}
