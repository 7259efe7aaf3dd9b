// Package lapse is the Go client of lapse.v1.LapseService (expiring
// collections).
//
//	client, err := lapse.Dial("127.0.0.1:50051", lapse.Options{})
//	defer client.Close()
//	_, err = client.Put(ctx, "unpaid:user-42",
//		[]lapse.MemberWrite{{Key: "order-17", Value: []byte(`{"total": 12}`),
//			Expiration: lapse.TTL(30 * time.Minute)}}, lapse.PutOptions{MaxMembers: 3})
//	watch, err := client.Watch(ctx, lapse.WatchOptions{Prefix: "unpaid:"})
//	for event := range watch.Events() { ... }
//	err = watch.Err() // e.g. OUT_OF_RANGE
//
// Every call has a deadline: the context's, or Options.Timeout when the
// context has none. Calls that are safe to repeat (Get without a refresh,
// Remove, Persist, List, Collection, Collections, Delete, Group, Groups, Ack,
// Nack, ExtendLeases) are retried on UNAVAILABLE with exponential backoff and
// jitter, within that deadline; Put, Expire, a refreshing Get, CreateGroup,
// DeleteGroup, ResetGroup and Poll are attempted exactly once, because
// UNAVAILABLE does not say whether the server applied them. Other errors are
// never retried, RESOURCE_EXHAUSTED included (a limit, or a full disk on the
// server). Errors are *Error, carrying the gRPC status code.
//
// Consumer groups: CreateGroup ... ExtendLeases, and Work, the loop that
// handles a group's events (groups.go). TLS and bearer tokens: Options.TLS,
// BearerToken, BearerTokenFile (auth.go).
//
// A Client is safe for concurrent use by many goroutines.
package lapse

import (
	"context"
	"math/rand"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	pb "lapse/gen/lapse/v1"
)

// Backoff: delays grow from Initial by Multiplier up to Max; each actual
// delay is drawn from [delay/2, delay], so clients that failed together do
// not retry together. An Initial under 1ms, a Max below it or a Multiplier
// below 1 is clamped rather than refused.
type Backoff struct {
	Initial    time.Duration
	Max        time.Duration
	Multiplier float64
}

type backoffState struct {
	policy  Backoff
	ceiling time.Duration
}

func (b Backoff) start() *backoffState {
	if b.Initial < time.Millisecond {
		b.Initial = time.Millisecond
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.Multiplier < 1 {
		b.Multiplier = 1
	}
	return &backoffState{policy: b, ceiling: b.Initial}
}

func (s *backoffState) next() time.Duration {
	delay := s.ceiling/2 + time.Duration(rand.Int63n(int64(s.ceiling/2)+1))
	s.ceiling = time.Duration(float64(s.ceiling) * s.policy.Multiplier)
	if s.ceiling > s.policy.Max {
		s.ceiling = s.policy.Max
	}
	return delay
}

// Options says how a Client connects and calls; zero fields take the
// defaults in brackets.
type Options struct {
	// The deadline of a call (all its attempts) whose context has none [10s].
	Timeout time.Duration
	// Attempts of a retryable call, the first included; 1 disables retries [4].
	MaxAttempts int
	// Between retries of a call [50ms, 2s, x2].
	RetryBackoff Backoff
	// Between reconnects of a Watch; reset by every response [100ms, 10s, x2].
	WatchBackoff Backoff
	// gRPC's own backoff between connection attempts [1s, 30s].
	ReconnectBackoffInitial time.Duration
	ReconnectBackoffMax     time.Duration
	// Match the server's --max_message_bytes [16 MiB].
	MaxMessageBytes int
	// TLS from files (a CA, a client certificate and key for mTLS, a server
	// name), or any Credentials (e.g. credentials.NewClientTLSFromFile(...)),
	// not both; neither is plaintext.
	TLS         *TLSOptions
	Credentials credentials.TransportCredentials
	// For a server with --auth_file: sent with every call as
	// "authorization: Bearer TOKEN"; the token itself, or a file that holds
	// it, read again when it changes. At most one of the two.
	BearerToken     string
	BearerTokenFile string
	// A Worker's pause after an empty Poll answered sooner than its wait (a
	// server that does not long-poll); reset by every delivery [50ms, 1s, x2].
	IdlePollBackoff Backoff
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 4
	}
	if o.RetryBackoff == (Backoff{}) {
		o.RetryBackoff = Backoff{Initial: 50 * time.Millisecond, Max: 2 * time.Second, Multiplier: 2}
	}
	if o.WatchBackoff == (Backoff{}) {
		o.WatchBackoff = Backoff{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2}
	}
	if o.ReconnectBackoffInitial <= 0 {
		o.ReconnectBackoffInitial = time.Second
	}
	if o.ReconnectBackoffMax <= 0 {
		o.ReconnectBackoffMax = 30 * time.Second
	}
	if o.IdlePollBackoff == (Backoff{}) {
		o.IdlePollBackoff = Backoff{Initial: 50 * time.Millisecond, Max: time.Second, Multiplier: 2}
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 16 << 20
	}
	return o
}

// Client is a channel to one lapse server.
type Client struct {
	options Options
	conn    *grpc.ClientConn
	stub    pb.LapseServiceClient
}

// Dial makes a Client of target ("host:port" or any gRPC target). It does not
// wait for a connection: the first call does. INVALID_ARGUMENT naming the
// option when TLS files cannot be read or options contradict each other.
func Dial(target string, options Options) (*Client, error) {
	options = options.withDefaults()
	security := grpc.WithInsecure()
	switch {
	case options.TLS != nil && options.Credentials != nil:
		return nil, invalidArgument("TLS, Credentials: set one, not both")
	case options.TLS != nil:
		tlsCredentials, err := options.TLS.credentials()
		if err != nil {
			return nil, err
		}
		security = grpc.WithTransportCredentials(tlsCredentials)
	case options.Credentials != nil:
		security = grpc.WithTransportCredentials(options.Credentials)
	}
	dialOptions := []grpc.DialOption{security}
	switch {
	case options.BearerToken != "" && options.BearerTokenFile != "":
		return nil, invalidArgument("BearerToken, BearerTokenFile: set one, not both")
	case options.BearerToken != "" || options.BearerTokenFile != "":
		dialOptions = append(dialOptions, grpc.WithPerRPCCredentials(
			&bearerToken{token: options.BearerToken, file: options.BearerTokenFile}))
	}
	conn, err := grpc.Dial(target, append(dialOptions,
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(options.MaxMessageBytes),
			grpc.MaxCallSendMsgSize(options.MaxMessageBytes)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{BaseDelay: options.ReconnectBackoffInitial, Multiplier: 1.6,
				Jitter: 0.2, MaxDelay: options.ReconnectBackoffMax},
			MinConnectTimeout: 20 * time.Second,
		}))...)
	if err != nil {
		return nil, invalidArgument("target: " + err.Error())
	}
	return &Client{options: options, conn: conn, stub: pb.NewLapseServiceClient(conn)}, nil
}

// Close ends the channel; calls and watches in flight end.
func (c *Client) Close() error { return c.conn.Close() }

// Stub is the generated stub, for what this client does not wrap.
func (c *Client) Stub() pb.LapseServiceClient { return c.stub }

// call runs attempt until it succeeds, fails with anything but UNAVAILABLE,
// is not idempotent, used up MaxAttempts, or the next backoff would end past
// the call's deadline.
func (c *Client) call(ctx context.Context, idempotent bool, attempt func(context.Context) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.options.Timeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	delays := c.options.RetryBackoff.start()
	for attempts := 1; ; attempts++ {
		err := attempt(ctx)
		if err == nil {
			return nil
		}
		delay := delays.next()
		if !idempotent || status.Code(err) != codes.Unavailable ||
			attempts >= c.options.MaxAttempts || time.Now().Add(delay).After(deadline) {
			return errorFrom(err)
		}
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return errorFrom(err)
		}
	}
}

// unary calls a method of the stub through c.call.
func unary[Request, Response any](ctx context.Context, c *Client, idempotent bool,
	method func(context.Context, Request, ...grpc.CallOption) (Response, error),
	request Request) (Response, error) {
	var response Response
	err := c.call(ctx, idempotent, func(ctx context.Context) (err error) {
		response, err = method(ctx, request)
		return err
	})
	return response, err
}

// convert maps each element of a response's list to the client's type.
func convert[From, To any](from []From, f func(From) To) []To {
	to := make([]To, 0, len(from))
	for _, x := range from {
		to = append(to, f(x))
	}
	return to
}
