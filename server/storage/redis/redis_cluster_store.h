// RedisClusterStore: the Store (server/storage/store.h) whose state lives in
// a Redis Cluster, so that any number of stateless lapsed replicas can serve
// it (issue #11; the data model is in docs/redis-cluster.md).
//
//   absl::StatusOr<std::unique_ptr<RedisClusterStore>> store =
//       RedisClusterStore::Open({.router = {.seeds = {"10.0.0.1:7000"}}});
//   (*store)->PutMembers("orders:42", writes, {}, done);
//
// A collection lives in one of P partitions (P recorded in the cluster when
// the store is first opened), and each of its operations is one Lua script
// (collection_scripts.h) run atomically on the master of its partition's
// slot, timed by that master's clock. Requests are validated here first, with
// the errors the embedded store gives (an expire_time is checked against this
// machine's clock; the deadline itself is computed by the master). A mutating
// operation is acknowledged once WAIT counts `wait_replicas` replicas; else it
// fails UNAVAILABLE, its outcome unknown.
//
// Unless options.reap is false, it runs a Reaper (reaper.h) from Open until
// it is destroyed: this replica's share of the partitions is expired, each
// member with one event, and their delivery watermarks advanced, each
// advance handed to the event source.
//
// Every operation is done: the collection operations, events() (the
// partitions' streams read into one local buffer, redis_event_source.h, up to
// each partition's delivery watermark as event_source().Advance is told of
// it) and the consumer groups (redis_consumer_groups.h). ListCollections asks
// every partition at once and merges their answers in the last one's
// completion.
// Limits::max_total_members is shared among the partitions: partition p
// holds at most MemberShareOf(p) members (max_total_members / P, the first
// max_total_members % P partitions one more), so the store never holds more
// than max_total_members, and a put past its partition's share is
// RESOURCE_EXHAUSTED even when other partitions have room. Open refuses a
// max_total_members below P.
//
// Thread safety: every method may be called from many threads at once; `done`
// is called on the router's I/O thread.
#ifndef LAPSE_SERVER_STORAGE_REDIS_REDIS_CLUSTER_STORE_H_
#define LAPSE_SERVER_STORAGE_REDIS_REDIS_CLUSTER_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/base/clock.h"
#include "server/base/mutex.h"
#include "server/storage/redis/cluster_router.h"
#include "server/storage/redis/reaper.h"
#include "server/storage/redis/redis_consumer_groups.h"
#include "server/storage/redis/redis_event_source.h"
#include "server/storage/store.h"

namespace lapse::redis {

struct RedisClusterStoreOptions {
  RouterOptions router;
  Limits limits;
  // The partition count of a store opened for the first time (1..16384); a
  // store already recorded in the cluster keeps its own.
  int partitions = 64;
  // Replicas WAIT must count before a write is acknowledged; 0 acknowledges
  // once the master has it.
  int wait_replicas = 1;
  absl::Duration wait_timeout = absl::Seconds(1);
  // Events each partition's stream keeps (MAXLEN ~).
  size_t event_retention = 1'000'000;
  // This replica's buffer of events for its watchers (RedisEventSource).
  size_t event_buffer_events = 1'000'000;
  size_t event_buffer_bytes = size_t{256} << 20;
  // Told whenever new events become readable from events(), on the router's
  // thread, cheaply and without blocking; may be empty.
  EventsReadableListener on_events_readable;
  // Told of a consumer group that can deliver something other than new
  // events (redis_consumer_groups.h), on the router's thread; may be empty.
  std::function<void(absl::string_view group)> on_group_readable;
  // Every event this replica reads into its buffer (each replica reads every
  // partition), for metrics; may be empty.
  std::function<void(const ExpiryEventView&)> on_event;
  // For validating expire_time, and what lease alarms wait on; not owned.
  Clock* clock = RealClock();
  // The time scripts run at (script_clock.h); not owned. Null (production):
  // each partition's master's TIME. Tests set a FakeClock.
  const Clock* script_clock = nullptr;
  // Runs a Reaper (reaper.h) from Open to the destructor; false for tools
  // that only read or write.
  bool reap = true;
  // The reaper's heartbeat H: registered for 3H, its partitions taken over
  // within 4H of its death (--redis_heartbeat_interval).
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // Times the reaper's passes and heartbeats; not owned.
  const Clock* reaper_clock = RealClock();
  // This replica's registration among the reapers (reaper.h); "" picks a
  // random one.
  std::string replica_id;
  // The destructor removes the reaper's registration, so the other replicas
  // take its partitions over at their next heartbeat; false leaves it to
  // expire, as a replica that crashed does (tests of the takeover bound).
  bool deregister = true;
};

class RedisClusterStore final : public Store {
 public:
  // Connects and reads (on first use, records) the partition count and the
  // store's identity. Blocks for up to the router's retry budget: call it at
  // start-up, not from a gRPC reactor.
  static absl::StatusOr<std::unique_ptr<RedisClusterStore>> Open(RedisClusterStoreOptions options);
  ~RedisClusterStore() override;

  int partitions() const { return static_cast<int>(tags_.size()); }
  // Passes every partition the reaper owns now (tests that moved a FakeClock);
  // nothing without a reaper.
  void WakeReaperForTesting();
  // Null without options.reap.
  const Reaper* reaper() const { return reaper_.get(); }
  RedisConsumerGroups& consumer_groups() { return *groups_; }
  // The partition of `collection`: CRC32C of its name modulo partitions().
  int PartitionOf(absl::string_view collection) const;
  // The members `partition` may hold: its share of Limits::max_total_members
  // (the shares add up to it).
  uint64_t MemberShareOf(int partition) const;
  // The hash tag of a partition's keys; the tags of the partitions are spread
  // evenly over the cluster's slots.
  const std::string& TagOf(int partition) const { return tags_[partition]; }
  // Collection operations sent to each partition since Open (its load: hot
  // spots show here), indexed by partition; cheap (atomic loads).
  std::vector<uint64_t> PartitionCalls() const;
  // The router's figures (ClusterRouter::Stats).
  ClusterRouter::Stats router_stats() const { return router_->stats(); }

  const Limits& limits() const override { return options_.limits; }
  void PutMembers(absl::string_view collection, absl::Span<const MemberWrite> writes,
                  const PutOptions& options, StoreDone<std::vector<PutResult>> done) override;
  void GetMembers(absl::string_view collection, absl::Span<const absl::string_view> keys,
                  const Expiration& refresh, StoreDone<std::vector<GetResult>> done) override;
  void RemoveMembers(absl::string_view collection, absl::Span<const absl::string_view> keys,
                     StoreDone<std::vector<bool>> done) override;
  void ExpireMembers(absl::string_view collection, absl::Span<const absl::string_view> keys,
                     const Expiration& expiration, ExpireCondition condition,
                     StoreDone<std::vector<ExpireResult>> done) override;
  void PersistMembers(absl::string_view collection, absl::Span<const absl::string_view> keys,
                      StoreDone<std::vector<PersistOutcome>> done) override;
  void ListMembers(absl::string_view collection, const ListMembersOptions& options,
                   StoreDone<MemberPage> done) override;
  void GetCollection(absl::string_view name, StoreDone<CollectionInfo> done) override;
  void ListCollections(absl::string_view prefix, int page_size, absl::string_view after,
                       StoreDone<CollectionPage> done) override;
  void DeleteCollection(absl::string_view name, StoreDone<uint64_t> done) override;
  const EventSource& events() const override;
  // The same source. The reaper hands it every watermark; without one
  // (options.reap false), whoever advances the watermarks calls Advance.
  RedisEventSource& event_source() { return *events_; }
  void CreateConsumerGroup(absl::string_view name, const ConsumerGroupOptions& options,
                           const GroupStart& start, StoreDone<ConsumerGroupInfo> done) override;
  void GetConsumerGroup(absl::string_view name, size_t max_leases,
                        StoreDone<ConsumerGroupInfo> done) override;
  void ListConsumerGroups(int page_size, absl::string_view after,
                          StoreDone<ConsumerGroups::Page> done) override;
  void DeleteConsumerGroup(absl::string_view name, StoreDone<ConsumerGroupInfo> done) override;
  void ResetConsumerGroup(absl::string_view name, const GroupStart& start,
                          StoreDone<ConsumerGroupInfo> done) override;
  void Poll(absl::string_view group, absl::string_view consumer, size_t max_events,
            StoreDone<PollResult> done) override;
  void Ack(absl::string_view group, absl::string_view consumer, absl::Span<const LeaseRef> leases,
           StoreDone<std::vector<absl::Status>> done) override;
  void Nack(absl::string_view group, absl::string_view consumer, absl::Span<const LeaseRef> leases,
            StoreDone<std::vector<absl::Status>> done) override;
  void ExtendLeases(absl::string_view group, absl::string_view consumer,
                    absl::Span<const LeaseRef> leases, absl::Duration extension,
                    StoreDone<std::vector<absl::Status>> done) override;
  void ListDeadLetters(absl::string_view group, uint64_t after, int page_size,
                       StoreDone<DeadLetterPage> done) override;
  void RedriveDeadLetters(absl::string_view group, absl::Span<const uint64_t> sequences,
                          StoreDone<size_t> done) override;

 private:
  // A ListCollections page being merged from the partitions' answers, and a
  // call of one partition's part of it (redis_cluster_store.cc).
  class CollectionMerge;
  struct ListingRound;

  RedisClusterStore(RedisClusterStoreOptions options, std::unique_ptr<ClusterRouter> router,
                    std::vector<std::string> tags, std::unique_ptr<RedisEventSource> events);
  // A script call on `collection`'s keys: the time, the collection and the
  // retention, then `args`.
  RedisCall CollectionCall(const RedisScript& script, absl::string_view collection,
                           std::vector<std::string> args) const;
  // When the expiry events a collection script appended become readable
  // from events(): before its answer (a write, acknowledged after its WAIT,
  // so that a write's own expiries are readable once it is acknowledged, as
  // on the embedded store), or when the reaper delivers them (a read: its
  // events are not known replicated).
  enum class Delivery { kBeforeAnswer, kByTheReaper };
  // Sends a collection script's call (collection_scripts.h) and answers
  // `done` with `parse` of its answer, after DeliverThen when `delivery`
  // says so and it appended events.
  template <typename T, typename Parse>
  void SendCollection(RedisCall call, absl::string_view collection, Delivery delivery,
                      StoreDone<T> done, Parse parse);
  // SendCollection of a write: `script` on `collection` with `args`
  // (CollectionCall), acknowledged once WAIT counts wait_replicas, its events
  // readable before the answer.
  template <typename T, typename Parse>
  void SendWrite(const RedisScript& script, absl::string_view collection,
                 std::vector<std::string> args, StoreDone<T> done, Parse parse);
  // SendWrite of `script` with `keys` of `collection` as its arguments, once
  // they pass the engine's checks: one T per key, each read by `one` as
  // EachMember reads it (`what` names the script when the answer is
  // malformed).
  template <typename T, typename One>
  void SendKeyedWrite(const RedisScript& script, absl::string_view collection,
                      absl::Span<const absl::string_view> keys, absl::string_view what,
                      StoreDone<std::vector<T>> done, One one);
  // Raises `partition`'s delivery watermark to `sequence`, which a WAIT has
  // confirmed replicated, then calls `then` once events() has read that
  // far; if the watermark cannot be raised, calls `then` at once (the
  // reaper delivers the events).
  void DeliverThen(int partition, uint64_t sequence, absl::AnyInvocable<void() &&> then);
  // Adds `round.partition`'s part of a ListCollections page to `merge`:
  // ListCollectionsScript with `round.candidates` declared, and again from
  // where it stopped, with the collections it named, until it answers in
  // full. ABORTED when two rounds in a row list nothing because collections
  // were created ahead of them meanwhile.
  void ListPartition(std::shared_ptr<CollectionMerge> merge, ListingRound round);
  // Counts a call whose answer does more (DeliverThen's, ListPartition's),
  // and its end.
  void ChainStarted();
  void ChainEnded();

  // Constant after construction.
  const RedisClusterStoreOptions options_;
  const std::unique_ptr<ClusterRouter> router_;
  const std::vector<std::string> tags_;
  // Destroyed before the router it reads through.
  const std::unique_ptr<RedisEventSource> events_;
  const std::unique_ptr<RedisConsumerGroups> groups_;
  // Null without options_.reap; destroyed before events_ and router_.
  std::unique_ptr<Reaper> reaper_;
  // Per partition: the calls CollectionCall made.
  const std::unique_ptr<std::atomic<uint64_t>[]> partition_calls_;

  // ChainStarted's calls not yet answered; the destructor waits for them,
  // since their answers reach events_ or send again.
  Mutex chains_mu_;
  CondVar chains_done_;
  int chains_in_flight_ ABSL_GUARDED_BY(chains_mu_) = 0;
};

}  // namespace lapse::redis

#endif  // LAPSE_SERVER_STORAGE_REDIS_REDIS_CLUSTER_STORE_H_
