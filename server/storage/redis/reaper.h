// Reaper: expires the due members of the Redis Cluster store's partitions
// that this lapsed replica owns, and advances their delivery watermarks
// (docs/redis-cluster.md, "Expiry").
//
//   Reaper reaper(router, tags, {.advance = [&](int p, uint64_t s) {
//                                  events.Advance(p, s); }});
//   ...
//   clock.Advance(absl::Seconds(2));
//   reaper.Wake();  // tests: pass every owned partition now
//
// - Ownership. It registers `replica_id` in `lapse:{meta}:replicas` and
//   renews it every heartbeat_interval H for 3H (partition_owners.h); each
//   answer gives the live replicas, and the partitions it owns by rendezvous
//   hashing. A partition it gains is passed at once. A replica that died
//   without deregistering loses its partitions to the others within 4H plus
//   one pass (its lease runs out within 3H, the others see it at their next
//   heartbeat). Ownership only avoids redundant work: two reapers passing one
//   partition at once expire each member once.
// - Passes. One thread waits, on `clock`, for the earliest of the owned
//   partitions' next deadlines and the next heartbeat — never a coarse poll
//   — then runs ReapPartitionScript on each partition due (at most
//   max_members_per_pass members per call; again at once while more are due).
//   Each call declares the keys of the collections it may reap: the first
//   max_collections_per_pass of the partition's due index, as the call
//   before answered them, or as a ZRANGE of the index reads them first when
//   there was no answer (the first pass, or one after a failure); a
//   collection that became due since is reaped by the call after, which is
//   sent at once.
//   A "due <ms>" wake-up (PartitionWakeups) moves a partition's next pass
//   earlier; a (re)subscription passes it at once. A partition due by
//   `clock` but not yet by its master's (the clocks differ) is passed again
//   every min_retry until the master agrees.
// - Watermark. The pass runs with WAIT `wait_replicas` (on the connection
//   that wrote, after the script wrote `wait` when sequence > delivered); if
//   WAIT counts them, AdvanceWatermarkScript sets delivered = max(delivered,
//   sequence), which SPUBLISHes "delivered <sequence>". A WAIT that fails
//   leaves the watermark where it was; the pass is retried after a backoff
//   doubling from min_retry to max_retry (real time), counted in wait_failures and
//   logged (rate-limited). Write scripts that emitted events SPUBLISH
//   "due <now>", so their events are delivered by the pass that follows.
// - `advance(partition, delivered)` is called, on the router's thread, with
//   each partition's watermark after every pass and on every "delivered"
//   message (from any replica); it must be cheap and never block.
//
// Thread-safe. The destructor stops passing, waits for the calls in flight
// and, with `deregister`, removes the registration.
#ifndef LAPSE_SERVER_STORAGE_REDIS_REAPER_H_
#define LAPSE_SERVER_STORAGE_REDIS_REAPER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/base/clock.h"
#include "server/base/log.h"
#include "server/base/mutex.h"
#include "server/storage/redis/cluster_router.h"
#include "server/storage/redis/partition_wakeups.h"

namespace lapse::redis {

struct ReaperOptions {
  // This replica's registration; "" picks a random one.
  std::string replica_id;
  int wait_replicas = 1;
  absl::Duration wait_timeout = absl::Seconds(1);
  // Events each partition's stream keeps (MAXLEN ~).
  size_t event_retention = 1'000'000;
  int max_members_per_pass = 1000;
  int max_collections_per_pass = 64;
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration min_retry = absl::Milliseconds(10);
  absl::Duration max_retry = absl::Seconds(1);
  // Times the passes and heartbeats; not owned.
  const Clock* clock = RealClock();
  // The time scripts run at (script_clock.h); not owned; null: the masters'.
  const Clock* script_clock = nullptr;
  // A partition's watermark (see above); may be empty.
  std::function<void(int partition, uint64_t delivered)> advance;
  // Removes the registration when destroyed; false leaves it to expire, as a
  // replica that crashed does.
  bool deregister = true;
};

class Reaper final {
 public:
  struct Stats {
    uint64_t heartbeats = 0;
    uint64_t passes = 0;
    uint64_t reaped = 0;
    uint64_t watermark_advances = 0;
    uint64_t wait_failures = 0;
    uint64_t failures = 0;
    int live_replicas = 0;
    int owned = 0;
    // Partitions this replica came to own: at start, and taken over from
    // replicas that stopped or died.
    uint64_t partitions_gained = 0;
    // `due` messages heard on the partitions' wake channels: a write moved a
    // partition's earliest deadline earlier, or emitted events.
    uint64_t due_heard = 0;
    // Of those, the ones heard when the reaper last went to sleep: its sleep
    // ends by the earliest deadline they carried.
    uint64_t due_heard_at_sleep = 0;
  };

  // `tags[p]` is partition p's hash tag; `router` must outlive the reaper.
  Reaper(ClusterRouter& router, std::vector<std::string> tags, ReaperOptions options);
  ~Reaper();
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  const std::string& replica_id() const { return options_.replica_id; }
  // Passes every owned partition now and heartbeats if one is due: for tests
  // that moved a FakeClock.
  void Wake();
  Stats stats() const;
  // The partitions owned now, ascending.
  std::vector<int> owned() const;
  // Waits until `done(stats())` or `timeout`; whether `done` held.
  bool AwaitStats(absl::FunctionRef<bool(const Stats&)> done, absl::Duration timeout) const;

 private:
  void Run();
  // Starts a pass: SendReap, after reading the candidates if unknown.
  void SendPass(int partition) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendReap(int partition) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetCandidates(int partition, const std::vector<RedisReply>& names)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendHeartbeat(absl::string_view action) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnPass(int partition, absl::StatusOr<RedisReply> reply);
  void OnAdvanced(int partition, absl::StatusOr<RedisReply> reply);
  void OnHeartbeat(absl::StatusOr<RedisReply> reply);
  // A failed call on `partition`: passed again after a backoff.
  void Failed(int partition, const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Advance(int partition, uint64_t delivered);
  void PassAt(int partition, absl::Time when, bool due_heard);

  // Constant after construction.
  ClusterRouter& router_;
  const std::vector<std::string> tags_;
  const ReaperOptions options_;

  mutable Mutex mu_;
  mutable CondVar changed_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Calls sent and not answered.
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // Per partition: owned, a pass (and its watermark step) in flight, when to
  // pass next (on `clock`), when to retry a failed pass (real time: Redis
  // recovers on its own clock), consecutive failures.
  std::vector<bool> owned_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> busy_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> next_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> retry_ ABSL_GUARDED_BY(mu_);
  std::vector<int> failures_ ABSL_GUARDED_BY(mu_);
  // Per partition: the collections the next pass declares, as the last pass
  // answered them; none while unknown.
  std::vector<std::optional<std::vector<std::string>>> candidates_ ABSL_GUARDED_BY(mu_);
  absl::Time next_heartbeat_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool heartbeat_busy_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  RateLimitedLog log_{10, absl::Minutes(1)};

  // Its handlers call into the members above; destroyed before them.
  std::unique_ptr<PartitionWakeups> wakeups_;
  // Last: started once everything above is constructed.
  std::thread thread_;
};

}  // namespace lapse::redis

#endif  // LAPSE_SERVER_STORAGE_REDIS_REAPER_H_
