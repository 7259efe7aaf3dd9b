// RedisConsumerGroups: the consumer groups of the Redis Cluster store — the
// Store's group operations (store.h) with the semantics of ConsumerGroups
// (server/engine/consumer_groups.h), over the cluster, so that every lapsed
// replica serves every group (docs/redis-cluster.md, "Consumer groups").
//
//   RedisConsumerGroups groups(&router, &tags, &events, {.limits = limits});
//   groups.Poll("billing", "worker-1", 10, [](absl::StatusOr<PollResult> r) { ... });
//
// - State. A group lives under its own hash tag (group_scripts.h): one
//   script per operation sees all of it atomically on one master. Its
//   position is one partition sequence per partition. An index under {meta}
//   lists the groups by name.
// - Event ids. A group's event id is partition_sequence * 16384 + partition
//   (GroupEventId): Delivery::event.sequence, LeaseRef::sequence, dead
//   letters and LostRange (first and last of the lost partition sequences,
//   as ids) use it; position is the sum of the partition positions.
// - Poll. PollBegin expires due leases and answers the group's filter and
//   positions; the partitions this replica's event source has read past the
//   group's position (up to their delivery watermark, never beyond) are read
//   asynchronously, up to 8 per Poll starting at a partition that rotates
//   from one Poll to the next (fairness); PollCommit leases the redeliveries,
//   then new events of the partitions whose position nobody moved meanwhile
//   — two replicas polling one group lease each event once. A Poll that
//   leased nothing but moved a position (past events its filter does not
//   match) or found one moved by another Poll starts again, at most
//   P / 8 + 3 times.
// - Durability. Every mutation is acknowledged once WAIT counts
//   wait_replicas replicas (else UNAVAILABLE, outcome unknown); reads are
//   sent again after a lost connection.
// - Readable. on_group_readable(group) runs when a group may deliver
//   something other than new events: on the router's thread after an
//   operation of this replica (an ack or nack, a re-drive, a reset, a
//   delete), and on the lease alarms' thread when a lease of a group this
//   replica polled expires, whoever held it (the earliest lease deadline of
//   each group this replica polled is kept, measured on `clock`; at it, the
//   group is announced and its next lease deadline read). New events are
//   announced by the event source's listener. A replica subscribes to the
//   wake channel of each group it polls (at most 4 x max_consumer_groups of
//   them), so an ack, nack, re-drive, reset or delete made through another
//   replica is announced too.
//
// Thread safety: every method may be called from many threads at once; `done`
// runs on the router's thread (or the caller's, for bad input). `router`,
// `tags` and `events` must outlive the groups; the destructor waits for the
// calls in flight to be answered.
#ifndef LAPSE_SERVER_STORAGE_REDIS_REDIS_CONSUMER_GROUPS_H_
#define LAPSE_SERVER_STORAGE_REDIS_REDIS_CONSUMER_GROUPS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "server/base/clock.h"
#include "server/base/mutex.h"
#include "server/engine/consumer_groups.h"
#include "server/engine/expirer.h"
#include "server/engine/limits.h"
#include "server/storage/redis/cluster_router.h"
#include "server/storage/redis/redis_event_source.h"
#include "server/storage/store.h"

namespace lapse::redis {

struct RedisConsumerGroupsOptions {
  Limits limits;
  int wait_replicas = 1;
  absl::Duration wait_timeout = absl::Seconds(1);
  // The time scripts run at (script_clock.h); not owned; null: the masters'.
  const Clock* script_clock = nullptr;
  // See the top comment; may be empty.
  std::function<void(absl::string_view group)> on_group_readable;
  // What lease alarms wait on; not owned.
  Clock* clock = RealClock();
};

class RedisConsumerGroups final {
 public:
  RedisConsumerGroups(ClusterRouter* router, const std::vector<std::string>* tags,
                      const RedisEventSource* events, RedisConsumerGroupsOptions options);
  // Waits for the calls in flight to be answered.
  ~RedisConsumerGroups();
  RedisConsumerGroups(const RedisConsumerGroups&) = delete;
  RedisConsumerGroups& operator=(const RedisConsumerGroups&) = delete;

  // Fires the lease alarms due by a FakeClock that was moved, on the
  // caller's thread: its announcements are made when it returns.
  void FireDueAlarmsForTesting();

  // As the Store's methods of the same names.
  void Create(absl::string_view name, const ConsumerGroupOptions& options, const GroupStart& start,
              StoreDone<ConsumerGroupInfo> done);
  void Get(absl::string_view name, size_t max_leases, StoreDone<ConsumerGroupInfo> done);
  void List(int page_size, absl::string_view after, StoreDone<ConsumerGroups::Page> done);
  void Delete(absl::string_view name, StoreDone<ConsumerGroupInfo> done);
  void Reset(absl::string_view name, const GroupStart& start, StoreDone<ConsumerGroupInfo> done);
  void Poll(absl::string_view group, absl::string_view consumer, size_t max_events,
            StoreDone<PollResult> done);
  void Ack(absl::string_view group, absl::string_view consumer, absl::Span<const LeaseRef> leases,
           StoreDone<std::vector<absl::Status>> done);
  void Nack(absl::string_view group, absl::string_view consumer, absl::Span<const LeaseRef> leases,
            StoreDone<std::vector<absl::Status>> done);
  void ExtendLeases(absl::string_view group, absl::string_view consumer,
                    absl::Span<const LeaseRef> leases, absl::Duration extension,
                    StoreDone<std::vector<absl::Status>> done);
  void ListDeadLetters(absl::string_view group, uint64_t after, int page_size,
                       StoreDone<DeadLetterPage> done);
  void RedriveDeadLetters(absl::string_view group, absl::Span<const uint64_t> sequences,
                          StoreDone<size_t> done);

 private:
  struct PollState;
  struct Subscriptions;
  using Positions = std::vector<uint64_t>;
  using Replies = std::vector<absl::StatusOr<RedisReply>>;

  // router_->Send, counted in in_flight_.
  void Send(RedisCall call, ClusterRouter::Done done);
  // Sends every call at once and calls `done` with the replies, in order,
  // once all have come (at once when there is none).
  void FanOut(std::vector<RedisCall> calls, absl::AnyInvocable<void(Replies) &&> done);
  // Announces `group` once `deadline_ms` passes on options_.clock (the
  // earliest one per group is kept).
  void ArmLeaseAlarm(absl::string_view group, int64_t deadline_ms);
  // The Expirer's work: announces the groups whose alarms are due, and arms
  // their next lease deadlines, read from Redis.
  void FireDueAlarms();
  absl::Time NextAlarm() const;
  // Subscribes to `group`'s wake channel (GroupKeys::wake), once.
  void Subscribe(absl::string_view group);

  // ARGV[1..3] of a group script (group_scripts.h), then `args`.
  RedisCall GroupCall(const RedisScript& script, absl::string_view group,
                      std::vector<std::string> args) const;
  RedisCall Durable(RedisCall call) const;
  // Each partition's position for `start`.
  void StartPositions(const GroupStart& start, StoreDone<Positions> done);
  // Ack, Nack or ExtendLeases.
  void Settle(absl::string_view group, absl::string_view consumer,
              absl::Span<const LeaseRef> leases, absl::string_view op, absl::Duration extension,
              StoreDone<std::vector<absl::Status>> done);
  void PollOnce(std::shared_ptr<PollState> poll);
  void OnPollBegun(std::shared_ptr<PollState> poll, absl::StatusOr<RedisReply> reply);
  void Commit(std::shared_ptr<PollState> poll, std::vector<std::string> args);
  // Parses the state a group script answers (GroupInfo in group_scripts.h).
  absl::StatusOr<ConsumerGroupInfo> InfoOf(absl::string_view name, const RedisReply& state) const;
  void Announce(absl::string_view group) const;
  // The scripts' `reads` (group_scripts.h): what this replica's event source
  // has read of each partition.
  std::string Reads() const;

  // Constant after construction.
  ClusterRouter* const router_;
  const std::vector<std::string>* const tags_;
  const RedisEventSource* const events_;
  const RedisConsumerGroupsOptions options_;

  // The partition the next Poll reads first.
  std::atomic<uint32_t> next_partition_{0};
  // Shared with the router's subscription callbacks, which outlive the groups.
  const std::shared_ptr<Subscriptions> subscriptions_;

  // State below is protected by mu_.
  mutable Mutex mu_;
  CondVar calls_done_;
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // Lease alarms: per group, and by time.
  absl::flat_hash_map<std::string, int64_t> alarm_of_ ABSL_GUARDED_BY(mu_);
  absl::btree_set<std::pair<int64_t, std::string>> alarm_times_ ABSL_GUARDED_BY(mu_);

  ExpirerWakeup wakeup_;
  // Last: its thread calls into the members above; stopped first.
  std::unique_ptr<Expirer> alarms_;
};

}  // namespace lapse::redis

#endif  // LAPSE_SERVER_STORAGE_REDIS_REDIS_CONSUMER_GROUPS_H_
