#include "server/storage/redis/reaper.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/base/deadline.h"
#include "server/engine/resume_token.h"
#include "server/storage/redis/partition_owners.h"
#include "server/storage/redis/partition_scripts.h"
#include "server/storage/redis/script_clock.h"

namespace lapse::redis {
namespace {

ReaperOptions WithReplicaId(ReaperOptions options) {
  if (options.replica_id.empty()) options.replica_id = StoreId::Random().ToString();
  return options;
}

// An integer of a script's answer, sent as an integer or a string.
int64_t IntegerOf(const RedisReply& r) {
  int64_t n = r.integer;
  if (r.type != RedisReply::Type::kInteger && !absl::SimpleAtoi(r.str, &n)) n = -1;
  return n;
}

}  // namespace

Reaper::Reaper(ClusterRouter& router, std::vector<std::string> tags, ReaperOptions options)
    : router_(router),
      tags_(std::move(tags)),
      options_(WithReplicaId(std::move(options))),
      owned_(tags_.size(), false),
      busy_(tags_.size(), false),
      next_(tags_.size(), absl::InfinitePast()),
      retry_(tags_.size(), absl::InfiniteFuture()),
      failures_(tags_.size(), 0),
      candidates_(tags_.size()) {
  assert(options_.max_collections_per_pass > 0 && "a pass declares at least one collection");
  wakeups_ = std::make_unique<PartitionWakeups>(
      router_, tags_,
      PartitionWakeups::Handlers{
          .due = [this](int p, absl::Time due) { PassAt(p, due, /*due_heard=*/true); },
          .delivered = [this](int p, uint64_t delivered) { Advance(p, delivered); },
          .subscribed = [this](int p) { PassAt(p, absl::InfinitePast(), /*due_heard=*/false); },
      });
  thread_ = std::thread([this] { Run(); });
}

Reaper::~Reaper() {
  wakeups_.reset();
  MutexLock lock(&mu_);
  stopping_ = true;
  changed_.SignalAll();
  mu_.Unlock();
  thread_.join();
  mu_.Lock();
  if (options_.deregister) SendHeartbeat("leave");
  // The router answers every call within its retry budget.
  while (in_flight_ > 0) changed_.WaitWithTimeout(&mu_, absl::InfiniteDuration());
}

void Reaper::Wake() {
  MutexLock lock(&mu_);
  std::fill(next_.begin(), next_.end(), absl::InfinitePast());
  changed_.SignalAll();
}

Reaper::Stats Reaper::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

std::vector<int> Reaper::owned() const {
  MutexLock lock(&mu_);
  std::vector<int> out;
  for (int p = 0; p < static_cast<int>(owned_.size()); ++p) {
    if (owned_[p]) out.push_back(p);
  }
  return out;
}

bool Reaper::AwaitStats(absl::FunctionRef<bool(const Stats&)> done, absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  while (!done(stats_)) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    changed_.WaitWithTimeout(&mu_, left);
  }
  return true;
}

void Reaper::Run() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    const absl::Time now = options_.clock->Now();
    const absl::Time real_now = absl::Now();
    absl::Time earliest = absl::InfiniteFuture();
    absl::Time earliest_retry = absl::InfiniteFuture();
    if (!heartbeat_busy_) {
      if (next_heartbeat_ <= now) {
        SendHeartbeat("renew");
      } else {
        earliest = next_heartbeat_;
      }
    }
    for (int p = 0; p < static_cast<int>(tags_.size()); ++p) {
      if (!owned_[p] || busy_[p]) continue;
      if (next_[p] <= now || retry_[p] <= real_now) {
        SendPass(p);
      } else {
        earliest = std::min(earliest, next_[p]);
        earliest_retry = std::min(earliest_retry, retry_[p]);
      }
    }
    const absl::Duration wait = std::min(earliest - now, earliest_retry - real_now);
    if (wait > absl::ZeroDuration()) {
      if (stats_.due_heard_at_sleep != stats_.due_heard) {
        stats_.due_heard_at_sleep = stats_.due_heard;
        // For AwaitStats, which waits on changed_ too.
        changed_.SignalAll();
      }
      changed_.WaitWithTimeout(&mu_, wait);
    }
  }
}

void Reaper::SendPass(int p) {
  busy_[p] = true;
  next_[p] = absl::InfiniteFuture();
  retry_[p] = absl::InfiniteFuture();
  ++in_flight_;
  if (candidates_[p].has_value()) {
    SendReap(p);
    return;
  }
  const PartitionKeys keys(tags_[p]);
  router_.Send(RedisCall::Command(keys.due, {"ZRANGE", keys.due, "0",
                                             absl::StrCat(options_.max_collections_per_pass - 1)}),
               [this, p](absl::StatusOr<RedisReply> reply) {
                 MutexLock lock(&mu_);
                 if (reply.ok() && reply->type != RedisReply::Type::kArray) {
                   reply = absl::InternalError("Redis answered the due index's ZRANGE malformed");
                 }
                 if (!reply.ok()) {
                   Failed(p, reply.status());
                   return;
                 }
                 SetCandidates(p, reply->elements);
                 if (stopping_) {
                   busy_[p] = false;
                   --in_flight_;
                   changed_.SignalAll();
                   return;
                 }
                 SendReap(p);
               });
}

void Reaper::SendReap(int p) {
  const PartitionKeys keys(tags_[p]);
  const std::vector<std::string>& candidates = *candidates_[p];
  std::vector<std::string> args = {
      ScriptTimeArg(options_.script_clock), absl::StrCat(options_.event_retention),
      absl::StrCat(options_.max_members_per_pass), absl::StrCat(options_.max_collections_per_pass)};
  args.insert(args.end(), candidates.begin(), candidates.end());
  RedisCall call =
      RedisCall::Eval(ReapPartitionScript(), keys.ReapKeys(candidates), std::move(args));
  if (options_.wait_replicas > 0) {
    call = std::move(call).WaitForReplicas(options_.wait_replicas, options_.wait_timeout);
  }
  router_.Send(std::move(call),
               [this, p](absl::StatusOr<RedisReply> reply) { OnPass(p, std::move(reply)); });
}

void Reaper::SetCandidates(int p, const std::vector<RedisReply>& names) {
  std::vector<std::string>& candidates = candidates_[p].emplace();
  for (const RedisReply& name : names) candidates.push_back(name.str);
}

void Reaper::SendHeartbeat(absl::string_view action) {
  heartbeat_busy_ = true;
  ++in_flight_;
  const absl::Duration lease = 3 * options_.heartbeat_interval;
  router_.Send(
      RedisCall::Eval(HeartbeatScript(), {kReplicasKey},
                      {ScriptTimeArg(options_.script_clock), options_.replica_id,
                       absl::StrCat(absl::ToInt64Milliseconds(lease)), std::string(action)}),
      [this](absl::StatusOr<RedisReply> reply) { OnHeartbeat(std::move(reply)); });
}

void Reaper::OnPass(int p, absl::StatusOr<RedisReply> reply) {
  {
    MutexLock lock(&mu_);
    if (reply.ok() && reply->type == RedisReply::Type::kError) {
      reply = absl::InternalError(absl::StrCat("Redis answered: ", reply->str));
    } else if (reply.ok() && (reply->elements.size() != 6 ||
                              reply->elements[5].type != RedisReply::Type::kArray)) {
      reply = absl::InternalError("Redis answered the reap script malformed");
    }
    if (!reply.ok()) {
      Failed(p, reply.status());
      return;
    }
    const std::vector<RedisReply>& e = reply->elements;
    const int64_t reaped = IntegerOf(e[0]);
    const int64_t earliest = IntegerOf(e[2]);
    const int64_t sequence = IntegerOf(e[3]);
    const int64_t delivered = IntegerOf(e[4]);
    SetCandidates(p, e[5].elements);
    failures_[p] = 0;
    ++stats_.passes;
    stats_.reaped += static_cast<uint64_t>(std::max<int64_t>(0, reaped));
    absl::Time next = IntegerOf(e[1]) == 1 ? absl::InfinitePast()
                      : earliest < 0       ? absl::InfiniteFuture()
                                           : TimeOfDeadline(earliest);
    const absl::Time now = options_.clock->Now();
    if (next != absl::InfinitePast() && next <= now) {
      // Due by this clock, not yet by the master's: the clocks differ.
      next = now + options_.min_retry;
    }
    next_[p] = std::min(next_[p], next);
    if (sequence > delivered && !stopping_) {
      // Replicated: WAIT counted the replicas after the script wrote.
      const PartitionKeys keys(tags_[p]);
      router_.Send(
          RedisCall::Eval(
              AdvanceWatermarkScript(), {keys.delivered},
              {ScriptTimeArg(options_.script_clock), absl::StrCat(sequence), keys.wake}),
          [this, p](absl::StatusOr<RedisReply> reply) { OnAdvanced(p, std::move(reply)); });
    } else {
      busy_[p] = false;
      --in_flight_;
    }
    // Under the lock, so that the destructor cannot return while it runs.
    if (delivered > 0) Advance(p, static_cast<uint64_t>(delivered));
    changed_.SignalAll();
  }
}

void Reaper::OnAdvanced(int p, absl::StatusOr<RedisReply> reply) {
  {
    MutexLock lock(&mu_);
    if (reply.ok() && reply->type == RedisReply::Type::kError) {
      reply = absl::InternalError(absl::StrCat("Redis answered: ", reply->str));
    }
    if (!reply.ok()) {
      Failed(p, reply.status());
      return;
    }
    const int64_t delivered = IntegerOf(*reply);
    ++stats_.watermark_advances;
    busy_[p] = false;
    --in_flight_;
    // Under the lock, so that the destructor cannot return while it runs.
    if (delivered > 0) Advance(p, static_cast<uint64_t>(delivered));
    changed_.SignalAll();
  }
}

void Reaper::Failed(int p, const absl::Status& status) {
  // The pass's answer is lost: the next one reads the due index first.
  candidates_[p].reset();
  const bool wait_failed =
      absl::IsUnavailable(status) && absl::StrContains(status.message(), "WAIT");
  ++(wait_failed ? stats_.wait_failures : stats_.failures);
  const int doublings = std::min(failures_[p]++, 16);
  const absl::Duration backoff =
      std::min(options_.max_retry, options_.min_retry * (int64_t{1} << doublings));
  retry_[p] = absl::Now() + backoff;
  busy_[p] = false;
  --in_flight_;
  log_.Log(LogLevel::kWarning,
           "redis reaper: partition %d: %s; its watermark stays, retrying in %s", p,
           status.ToString(), absl::FormatDuration(backoff));
  changed_.SignalAll();
}

void Reaper::OnHeartbeat(absl::StatusOr<RedisReply> reply) {
  MutexLock lock(&mu_);
  --in_flight_;
  heartbeat_busy_ = false;
  const absl::Time now = options_.clock->Now();
  if (!reply.ok() || reply->type != RedisReply::Type::kArray || reply->elements.empty() ||
      reply->elements.size() % 2 != 1) {
    ++stats_.failures;
    log_.Log(LogLevel::kWarning, "redis reaper: heartbeat failed (%s); keeping %d partitions",
             reply.ok() ? reply->str : reply.status().ToString(), stats_.owned);
    next_heartbeat_ = now + std::min(options_.heartbeat_interval, options_.max_retry);
    changed_.SignalAll();
    return;
  }
  if (stopping_) {
    changed_.SignalAll();
    return;
  }
  const std::vector<RedisReply>& e = reply->elements;
  std::vector<ReplicaLease> leases;
  for (size_t i = 1; i + 1 < e.size(); i += 2) {
    leases.push_back({e[i].str, TimeOfDeadline(IntegerOf(e[i + 1]))});
  }
  const std::vector<std::string> live = LiveReplicas(leases, TimeOfDeadline(IntegerOf(e[0])));
  int owned = 0;
  for (int p = 0; p < static_cast<int>(tags_.size()); ++p) {
    const bool mine = OwnerOf(p, live) == options_.replica_id;
    if (mine && !owned_[p]) {
      next_[p] = absl::InfinitePast();
      ++stats_.partitions_gained;
    }
    owned_[p] = mine;
    owned += mine ? 1 : 0;
  }
  ++stats_.heartbeats;
  stats_.live_replicas = static_cast<int>(live.size());
  stats_.owned = owned;
  next_heartbeat_ = now + options_.heartbeat_interval;
  changed_.SignalAll();
}

void Reaper::Advance(int p, uint64_t delivered) {
  if (options_.advance) options_.advance(p, delivered);
}

void Reaper::PassAt(int p, absl::Time when, bool due_heard) {
  MutexLock lock(&mu_);
  if (due_heard) ++stats_.due_heard;
  next_[p] = std::min(next_[p], when);
  changed_.SignalAll();
}

}  // namespace lapse::redis
