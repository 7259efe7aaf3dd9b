#include "server/service/watch_hub.h"

#include <malloc.h>

#include <algorithm>
#include <future>

#include "absl/strings/str_cat.h"
#include "server/service/watch_reactor.h"

namespace lapse {
namespace {

// What an open stream holds in gRPC and its reactor (lapse-watch-burst: about
// 17 KB each), counted as freed when it closes.
constexpr size_t kStreamBytes = 16 << 10;
// Memory freed by streams before it is returned to the system.
constexpr size_t kTrimAfterBytes = 32 << 20;
// malloc_trim walks every arena under its lock: not more often than this.
constexpr absl::Duration kTrimInterval = absl::Seconds(5);

}  // namespace

WatchHub::WatchHub(const Options& options) : options_(options) {
  std::promise<AppliedPriority> applied;
  std::future<AppliedPriority> got = applied.get_future();
  dispatcher_ = std::thread([this, &applied] {
    applied.set_value(ApplyThreadPriority(options_.dispatcher_priority));
    Run();
  });
  dispatcher_priority_ = got.get();
}

WatchHub::~WatchHub() { Shutdown(); }

absl::Status WatchHub::Register(WatchReactor* reactor) {
  MutexLock lock(&mu_);
  if (shutting_down_) return absl::UnavailableError("server shutting down");
  if (reactors_.size() >= options_.max_streams) {
    return absl::ResourceExhaustedError(
        absl::StrCat(reactors_.size(),
                     " watch streams open, the limit (--max_watch_streams); "
                     "retry later or close streams you do not need"));
  }
  reactors_.insert(reactor);
  const absl::Time due = absl::Now() + options_.heartbeat_interval;
  if (due < next_heartbeat_) {
    next_heartbeat_ = due;
    wakeup_.Wake();
  }
  stats_changed_.SignalAll();
  return absl::OkStatus();
}

void WatchHub::Unregister(WatchReactor* reactor) {
  MutexLock lock(&mu_);
  reactors_.erase(reactor);
  FreedLocked(kStreamBytes);
  stats_changed_.SignalAll();
}

bool WatchHub::Pin(WatchReactor* reactor, size_t bytes) {
  MutexLock lock(&mu_);
  const bool first_in_line = waiting_.empty() || waiting_.front() == reactor;
  const bool fits = pinned_bytes_ == 0 || (pinned_bytes_ <= options_.max_pinned_bytes &&
                                           bytes <= options_.max_pinned_bytes - pinned_bytes_);
  if (first_in_line && fits) {
    if (!waiting_.empty()) waiting_.pop_front();
    pinned_bytes_ += bytes;
    stats_changed_.SignalAll();
    return true;
  }
  if (std::find(waiting_.begin(), waiting_.end(), reactor) == waiting_.end()) {
    waiting_.push_back(reactor);
  }
  stats_changed_.SignalAll();
  return false;
}

void WatchHub::Unpin(size_t bytes) {
  MutexLock lock(&mu_);
  pinned_bytes_ -= bytes;
  FreedLocked(bytes);
  if (!waiting_.empty()) {
    room_made_ = true;
    wakeup_.Wake();
  }
  stats_changed_.SignalAll();
}

void WatchHub::StopWaiting(WatchReactor* reactor) {
  MutexLock lock(&mu_);
  const bool was_first = !waiting_.empty() && waiting_.front() == reactor;
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), reactor), waiting_.end());
  // The next in line may fit now.
  if (was_first && !waiting_.empty()) {
    room_made_ = true;
    wakeup_.Wake();
  }
  stats_changed_.SignalAll();
}

void WatchHub::CountStall() {
  MutexLock lock(&mu_);
  ++stalls_;
  stats_changed_.SignalAll();
}

void WatchHub::Shutdown() {
  std::vector<WatchReactor*> reactors;
  {
    MutexLock lock(&mu_);
    if (shutting_down_) return;
    shutting_down_ = true;
    reactors = SnapshotLocked();
    wakeup_.Wake();
  }
  dispatcher_.join();
  for (WatchReactor* reactor : reactors) {
    reactor->Shutdown();
    reactor->Unref();
  }
}

void WatchHub::OnReadable(uint64_t last_sequence) {
  // Several threads may announce at once: keep the newest.
  uint64_t appended = appended_sequence_.load(std::memory_order_relaxed);
  while (appended < last_sequence &&
         !appended_sequence_.compare_exchange_weak(
             appended, last_sequence, std::memory_order_release, std::memory_order_relaxed)) {
  }
  wakeup_.Wake();
}

WatchHub::Stats WatchHub::stats() {
  MutexLock lock(&mu_);
  return StatsLocked();
}

bool WatchHub::AwaitStatsForTesting(const std::function<bool(const Stats&)>& done,
                                    absl::Duration timeout) {
  MutexLock lock(&mu_);
  return stats_changed_.WaitUntil(
      &mu_, absl::Now() + timeout,
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done(StatsLocked()); });
}

WatchHub::Stats WatchHub::StatsLocked() const {
  return Stats{reactors_.size(), pinned_bytes_, waiting_.size(), stalls_, trims_};
}

bool WatchHub::TrimDueLocked() const {
  return freed_since_trim_ >= kTrimAfterBytes && pinned_bytes_ == 0;
}

void WatchHub::FreedLocked(size_t bytes) {
  freed_since_trim_ += bytes;
  if (TrimDueLocked()) wakeup_.Wake();
}

void WatchHub::Run() {
  absl::Time next_due = absl::InfiniteFuture();
  while (true) {
    bool new_events;
    bool trim;
    std::vector<WatchReactor*> reactors;
    std::vector<WatchReactor*> waiting;
    {
      MutexLock lock(&mu_);
      // Streams registered during the last pass may have lowered it.
      next_heartbeat_ = std::min(next_heartbeat_, next_due);
      const auto trim_at = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return TrimDueLocked() ? next_trim_ : absl::InfiniteFuture();
      };
      uint64_t appended;
      while (true) {
        // Read before the checks: a Wake() after them ends the Wait at once.
        const uint32_t epoch = wakeup_.Epoch();
        appended = appended_sequence_.load(std::memory_order_acquire);
        const absl::Time wake_at = std::min(next_heartbeat_, trim_at());
        if (shutting_down_ || appended != dispatched_sequence_ || room_made_ ||
            absl::Now() >= wake_at) {
          break;
        }
        wakeup_.Wait(&mu_, epoch, wake_at - absl::Now());
      }
      if (shutting_down_) return;
      trim = absl::Now() >= trim_at();
      if (trim) {
        freed_since_trim_ = 0;
        next_trim_ = absl::Now() + kTrimInterval;
      }
      if (room_made_) {
        room_made_ = false;
        waiting = WaitingLocked();
      }
      new_events = appended != dispatched_sequence_;
      const bool heartbeats_due = absl::Now() >= next_heartbeat_;
      dispatched_sequence_ = appended;
      if (new_events || heartbeats_due) {
        next_heartbeat_ = absl::InfiniteFuture();
        reactors = SnapshotLocked();
      }
    }
    if (trim) {
      malloc_trim(0);
      MutexLock lock(&mu_);
      ++trims_;
      stats_changed_.SignalAll();
    }
    // Those waiting for room go first, in line, until one finds none.
    bool room = true;
    for (WatchReactor* reactor : waiting) {
      if (room) room = reactor->Resume();
      reactor->Unref();
    }
    if (reactors.empty()) continue;
    const absl::Time now = absl::Now();
    next_due = absl::InfiniteFuture();
    for (WatchReactor* reactor : reactors) {
      next_due = std::min(next_due, reactor->Poll(new_events, now));
      reactor->Unref();
    }
  }
}

std::vector<WatchReactor*> WatchHub::SnapshotLocked() {
  std::vector<WatchReactor*> reactors(reactors_.begin(), reactors_.end());
  for (WatchReactor* reactor : reactors) reactor->Ref();
  return reactors;
}

std::vector<WatchReactor*> WatchHub::WaitingLocked() {
  std::vector<WatchReactor*> waiting(waiting_.begin(), waiting_.end());
  for (WatchReactor* reactor : waiting) reactor->Ref();
  return waiting;
}

}  // namespace lapse
