#include "server/service/group_hub.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace lapse {

GroupHub::GroupHub(const Options& options) : options_(options) {
  dispatcher_ = std::thread([this] { Run(); });
}

GroupHub::~GroupHub() { Shutdown(); }

absl::Status GroupHub::Register(GroupWaiter* waiter, absl::string_view group, Kind kind,
                                absl::Time due) {
  MutexLock lock(&mu_);
  if (shutting_down_) return absl::UnavailableError("server shutting down");
  if (kind == Kind::kPoll && polls_ >= options_.max_waiting_polls) {
    return absl::ResourceExhaustedError(
        absl::StrCat(polls_,
                     " polls are waiting, the limit (--max_waiting_polls); poll without a wait "
                     "or retry later"));
  }
  if (kind == Kind::kStream && streams_ >= options_.max_consume_streams) {
    return absl::ResourceExhaustedError(
        absl::StrCat(streams_,
                     " Consume streams open, the limit (--max_consume_streams); retry later or "
                     "close streams you do not need"));
  }
  ++(kind == Kind::kPoll ? polls_ : streams_);
  waiters_.emplace(waiter, Entry{std::string(group), kind, due});
  // Either OnEventsReadable sees this waiter counted and wakes the
  // dispatcher, or this sees its flag (both sequentially consistent).
  waiter_count_.fetch_add(1, std::memory_order_seq_cst);
  const bool events_untold = events_readable_.load(std::memory_order_seq_cst);
  if (due < next_due_ || events_untold) {
    next_due_ = std::min(next_due_, due);
    wakeup_.Wake();
  }
  stats_changed_.SignalAll();
  return absl::OkStatus();
}

void GroupHub::Unregister(GroupWaiter* waiter) {
  MutexLock lock(&mu_);
  auto it = waiters_.find(waiter);
  if (it == waiters_.end()) return;
  --(it->second.kind == Kind::kPoll ? polls_ : streams_);
  waiters_.erase(it);
  waiter_count_.fetch_sub(1, std::memory_order_relaxed);
  stats_changed_.SignalAll();
}

void GroupHub::OnGroupReadable(absl::string_view group) {
  MutexLock lock(&mu_);
  readable_.emplace(group);
  wakeup_.Wake();
}

void GroupHub::OnEventsReadable() {
  events_readable_.store(true, std::memory_order_seq_cst);
  // With no waiter there is nobody to wake; Register wakes the dispatcher.
  if (waiter_count_.load(std::memory_order_seq_cst) > 0) wakeup_.Wake();
}

void GroupHub::Shutdown() {
  std::vector<GroupWaiter*> waiters;
  {
    MutexLock lock(&mu_);
    if (shutting_down_) return;
    shutting_down_ = true;
    for (const auto& [waiter, entry] : waiters_) {
      waiter->Ref();
      waiters.push_back(waiter);
    }
    wakeup_.Wake();
  }
  dispatcher_.join();
  for (GroupWaiter* waiter : waiters) {
    waiter->Shutdown();
    waiter->Unref();
  }
}

GroupHub::Stats GroupHub::stats() {
  MutexLock lock(&mu_);
  return StatsLocked();
}

bool GroupHub::AwaitStatsForTesting(const std::function<bool(const Stats&)>& done,
                                    absl::Duration timeout) {
  MutexLock lock(&mu_);
  return stats_changed_.WaitUntil(
      &mu_, absl::Now() + timeout,
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done(StatsLocked()); });
}

GroupHub::Stats GroupHub::StatsLocked() const { return Stats{polls_, streams_}; }

void GroupHub::Run() {
  struct Call {
    GroupWaiter* waiter;
    bool readable;
  };
  while (true) {
    std::vector<Call> calls;
    absl::Time now;
    {
      MutexLock lock(&mu_);
      while (true) {
        // Read before the checks: a Wake() after them ends the Wait at once.
        const uint32_t epoch = wakeup_.Epoch();
        if (shutting_down_ || events_readable_.load(std::memory_order_acquire) ||
            !readable_.empty() || absl::Now() >= next_due_) {
          break;
        }
        wakeup_.Wait(&mu_, epoch, next_due_ - absl::Now());
      }
      if (shutting_down_) return;
      // Cleared before the waiters are called: events announced from here on
      // make another pass.
      const bool all_readable = events_readable_.exchange(false, std::memory_order_acq_rel);
      now = absl::Now();
      next_due_ = absl::InfiniteFuture();
      for (const auto& [waiter, entry] : waiters_) {
        const bool readable = all_readable || readable_.contains(entry.group);
        if (readable || entry.due <= now) {
          waiter->Ref();
          calls.push_back({waiter, readable});
        } else {
          next_due_ = std::min(next_due_, entry.due);
        }
      }
      readable_.clear();
    }
    for (const Call& call : calls) {
      const absl::Time due = call.waiter->Wake(call.readable, now);
      {
        MutexLock lock(&mu_);
        auto it = waiters_.find(call.waiter);
        if (it != waiters_.end()) {
          it->second.due = due;
          next_due_ = std::min(next_due_, due);
        }
      }
      call.waiter->Unref();
    }
  }
}

}  // namespace lapse
