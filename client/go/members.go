package lapse

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "lapse/gen/lapse/v1"
)

// Expiration of a write (AIP-214): the zero value is none (persistent), TTL
// counts from the server's clock, At is an absolute time.
type Expiration struct {
	ttl time.Duration
	at  time.Time
	set bool
}

// TTL expires d after the server applies the write.
func TTL(d time.Duration) Expiration { return Expiration{ttl: d, set: true} }

// At expires at t.
func At(t time.Time) Expiration { return Expiration{at: t, set: true} }

// IsNone says whether e is the zero value.
func (e Expiration) IsNone() bool { return !e.set }

// proto returns the Duration or the Timestamp of e (both nil for none).
func (e Expiration) proto() (*durationpb.Duration, *timestamppb.Timestamp) {
	switch {
	case !e.set:
		return nil, nil
	case e.at.IsZero():
		return durationpb.New(e.ttl), nil
	default:
		return nil, timestamppb.New(e.at)
	}
}

func optionalTime(t *timestamppb.Timestamp) *time.Time {
	if t == nil {
		return nil
	}
	v := t.AsTime()
	return &v
}

// Member is a member as the server holds it; ExpireTime is nil when it is
// persistent.
type Member struct {
	Key        string
	Value      []byte
	ExpireTime *time.Time
}

func memberFrom(m *pb.Member) Member {
	return Member{Key: m.GetKey(), Value: m.GetValue(), ExpireTime: optionalTime(m.GetExpireTime())}
}

// PutCondition: PutAlways, PutIfAbsent (like HSETNX), PutIfPresent.
type PutCondition = pb.PutCondition

const (
	PutAlways    = pb.PutCondition_PUT_CONDITION_UNSPECIFIED
	PutIfAbsent  = pb.PutCondition_PUT_CONDITION_IF_ABSENT
	PutIfPresent = pb.PutCondition_PUT_CONDITION_IF_PRESENT
)

// MemberWrite is one member of a Put.
type MemberWrite struct {
	Key        string
	Value      []byte
	Expiration Expiration
	Condition  PutCondition
	// Overwrite the value but keep the existing deadline (like KEEPTTL).
	KeepExpiration bool
}

// PutOptions: with MaxMembers > 0, a Put that would leave the collection with
// more live members fails FAILED_PRECONDITION and writes nothing.
type PutOptions struct {
	MaxMembers uint32
}

// PutOutcome: Created, Replaced or Skipped (the condition did not hold).
type PutOutcome = pb.PutOutcome

const (
	Created  = pb.PutOutcome_PUT_OUTCOME_CREATED
	Replaced = pb.PutOutcome_PUT_OUTCOME_REPLACED
	Skipped  = pb.PutOutcome_PUT_OUTCOME_SKIPPED
)

type PutResult struct {
	Key     string
	Outcome PutOutcome
	// nil when persistent.
	ExpireTime *time.Time
}

// Put writes members (unique keys) of one collection atomically; one result
// per member, in order. Never retried.
func (c *Client) Put(ctx context.Context, collection string, members []MemberWrite, options PutOptions) ([]PutResult, error) {
	request := &pb.PutMembersRequest{Collection: collection, MaxMembers: options.MaxMembers}
	for _, m := range members {
		write := &pb.MemberWrite{Key: m.Key, Value: m.Value, Condition: m.Condition,
			KeepExpiration: m.KeepExpiration}
		switch ttl, at := m.Expiration.proto(); {
		case ttl != nil:
			write.Expiration = &pb.MemberWrite_Ttl{Ttl: ttl}
		case at != nil:
			write.Expiration = &pb.MemberWrite_ExpireTime{ExpireTime: at}
		}
		request.Members = append(request.Members, write)
	}
	response, err := unary(ctx, c, false, c.stub.PutMembers, request)
	if err != nil {
		return nil, err
	}
	return convert(response.GetResults(), func(r *pb.PutMemberResult) PutResult {
		return PutResult{r.GetKey(), r.GetOutcome(), optionalTime(r.GetExpireTime())}
	}), nil
}

type GetResult struct {
	Found bool
	// Member.Key is always set; Value and ExpireTime only when Found.
	Member Member
}

// Get reads keys; one result per key, in order. A refresh other than none
// slides the deadline of the members found (like HGETEX); such a call is
// never retried: a repeat after an applied attempt would move them again.
func (c *Client) Get(ctx context.Context, collection string, keys []string, refresh Expiration) ([]GetResult, error) {
	request := &pb.GetMembersRequest{Collection: collection, Keys: keys}
	switch ttl, at := refresh.proto(); {
	case ttl != nil:
		request.RefreshExpiration = &pb.GetMembersRequest_RefreshTtl{RefreshTtl: ttl}
	case at != nil:
		request.RefreshExpiration = &pb.GetMembersRequest_RefreshExpireTime{RefreshExpireTime: at}
	}
	response, err := unary(ctx, c, refresh.IsNone(), c.stub.GetMembers, request)
	if err != nil {
		return nil, err
	}
	return convert(response.GetResults(), func(r *pb.GetMemberResult) GetResult {
		return GetResult{r.GetFound(), memberFrom(r.GetMember())}
	}), nil
}

type RemoveResult struct {
	Key string
	// Whether a live member was removed.
	Existed bool
}

// Remove deletes members; no expiry events. Retried.
func (c *Client) Remove(ctx context.Context, collection string, keys []string) ([]RemoveResult, error) {
	request := &pb.RemoveMembersRequest{Collection: collection, Keys: keys}
	response, err := unary(ctx, c, true, c.stub.RemoveMembers, request)
	if err != nil {
		return nil, err
	}
	return convert(response.GetResults(), func(r *pb.RemoveMemberResult) RemoveResult {
		return RemoveResult{r.GetKey(), r.GetExisted()}
	}), nil
}

// ExpireCondition is like HEXPIRE's NX / XX / GT / LT; a persistent member
// counts as expiring infinitely late.
type ExpireCondition = pb.ExpireCondition

const (
	ExpireAlways          = pb.ExpireCondition_EXPIRE_CONDITION_UNSPECIFIED
	ExpireIfNoExpiration  = pb.ExpireCondition_EXPIRE_CONDITION_IF_NO_EXPIRATION
	ExpireIfHasExpiration = pb.ExpireCondition_EXPIRE_CONDITION_IF_HAS_EXPIRATION
	ExpireIfLater         = pb.ExpireCondition_EXPIRE_CONDITION_IF_LATER
	ExpireIfEarlier       = pb.ExpireCondition_EXPIRE_CONDITION_IF_EARLIER
)

// ExpireOutcome: Updated, ConditionNotMet, ExpireNotFound, or Expired (the
// deadline had passed: the member expired now, with its event).
type ExpireOutcome = pb.ExpireOutcome

const (
	Updated         = pb.ExpireOutcome_EXPIRE_OUTCOME_UPDATED
	ConditionNotMet = pb.ExpireOutcome_EXPIRE_OUTCOME_CONDITION_NOT_MET
	ExpireNotFound  = pb.ExpireOutcome_EXPIRE_OUTCOME_NOT_FOUND
	Expired         = pb.ExpireOutcome_EXPIRE_OUTCOME_EXPIRED
)

type ExpireResult struct {
	Key     string
	Outcome ExpireOutcome
	// nil if persistent, not found or expired.
	ExpireTime *time.Time
}

// Expire sets a new deadline (not none) under condition. A deadline in the
// past expires the members now, with their events. Never retried.
func (c *Client) Expire(ctx context.Context, collection string, keys []string, expiration Expiration, condition ExpireCondition) ([]ExpireResult, error) {
	request := &pb.ExpireMembersRequest{Collection: collection, Keys: keys, Condition: condition}
	switch ttl, at := expiration.proto(); {
	case ttl != nil:
		request.Expiration = &pb.ExpireMembersRequest_Ttl{Ttl: ttl}
	case at != nil:
		request.Expiration = &pb.ExpireMembersRequest_ExpireTime{ExpireTime: at}
	default:
		return nil, invalidArgument("expiration: give a TTL or a time (At)")
	}
	response, err := unary(ctx, c, false, c.stub.ExpireMembers, request)
	if err != nil {
		return nil, err
	}
	return convert(response.GetResults(), func(r *pb.ExpireMemberResult) ExpireResult {
		return ExpireResult{r.GetKey(), r.GetOutcome(), optionalTime(r.GetExpireTime())}
	}), nil
}

// PersistOutcome: Persisted, NoExpiration or PersistNotFound.
type PersistOutcome = pb.PersistOutcome

const (
	Persisted       = pb.PersistOutcome_PERSIST_OUTCOME_PERSISTED
	NoExpiration    = pb.PersistOutcome_PERSIST_OUTCOME_NO_EXPIRATION
	PersistNotFound = pb.PersistOutcome_PERSIST_OUTCOME_NOT_FOUND
)

type PersistResult struct {
	Key     string
	Outcome PersistOutcome
}

// Persist clears deadlines. Retried.
func (c *Client) Persist(ctx context.Context, collection string, keys []string) ([]PersistResult, error) {
	request := &pb.PersistMembersRequest{Collection: collection, Keys: keys}
	response, err := unary(ctx, c, true, c.stub.PersistMembers, request)
	if err != nil {
		return nil, err
	}
	return convert(response.GetResults(), func(r *pb.PersistMemberResult) PersistResult {
		return PersistResult{r.GetKey(), r.GetOutcome()}
	}), nil
}

// MemberOrder: ByKey, or ByExpireTime (ties by key, persistent members last).
type MemberOrder = pb.MemberOrder

const (
	ByKey        = pb.MemberOrder_MEMBER_ORDER_KEY
	ByExpireTime = pb.MemberOrder_MEMBER_ORDER_EXPIRE_TIME
)

type ListOptions struct {
	OrderBy MemberOrder
	// 0: the server's default (100); more than its maximum is coerced down.
	PageSize int32
	// From the previous page, with the same collection and OrderBy.
	PageToken string
	KeysOnly  bool
}

type MemberPage struct {
	Members []Member
	// Empty when there are no more members.
	NextPageToken string
}

// List returns one page of a collection. Retried.
func (c *Client) List(ctx context.Context, collection string, options ListOptions) (MemberPage, error) {
	request := &pb.ListMembersRequest{Collection: collection, OrderBy: options.OrderBy,
		PageSize: options.PageSize, PageToken: options.PageToken, KeysOnly: options.KeysOnly}
	response, err := unary(ctx, c, true, c.stub.ListMembers, request)
	if err != nil {
		return MemberPage{}, err
	}
	return MemberPage{convert(response.GetMembers(), memberFrom), response.GetNextPageToken()}, nil
}

type CollectionInfo struct {
	Name          string
	MemberCount   uint64
	ExpiringCount uint64
	// nil when no member expires.
	NextExpireTime *time.Time
}

func collectionFrom(c *pb.CollectionInfo) CollectionInfo {
	return CollectionInfo{c.GetName(), c.GetMemberCount(), c.GetExpiringCount(),
		optionalTime(c.GetNextExpireTime())}
}

// Collection returns counts and the next deadline of a collection; NOT_FOUND
// when it has no live member. Retried.
func (c *Client) Collection(ctx context.Context, name string) (CollectionInfo, error) {
	response, err := unary(ctx, c, true, c.stub.GetCollection, &pb.GetCollectionRequest{Name: name})
	if err != nil {
		return CollectionInfo{}, err
	}
	return collectionFrom(response.GetCollection()), nil
}

type CollectionsOptions struct {
	Prefix    string
	PageSize  int32
	PageToken string
}

type CollectionPage struct {
	// Ordered by name, byte-wise.
	Collections   []CollectionInfo
	NextPageToken string
}

// Collections returns one page of collection names. Retried.
func (c *Client) Collections(ctx context.Context, options CollectionsOptions) (CollectionPage, error) {
	request := &pb.ListCollectionsRequest{Prefix: options.Prefix, PageSize: options.PageSize,
		PageToken: options.PageToken}
	response, err := unary(ctx, c, true, c.stub.ListCollections, request)
	if err != nil {
		return CollectionPage{}, err
	}
	return CollectionPage{convert(response.GetCollections(), collectionFrom),
		response.GetNextPageToken()}, nil
}

// Delete removes a collection and returns how many live members it had (0 if
// it did not exist). No expiry events. Retried.
func (c *Client) Delete(ctx context.Context, name string) (uint64, error) {
	response, err := unary(ctx, c, true, c.stub.DeleteCollection, &pb.DeleteCollectionRequest{Name: name})
	if err != nil {
		return 0, err
	}
	return response.GetRemovedCount(), nil
}
