#include "server/service/watch_hub.h"

#include <algorithm>

#include "server/service/watch_reactor.h"

namespace lapse {

WatchHub::WatchHub(const Options& options) : options_(options) {
  dispatcher_ = std::thread([this] { Run(); });
}

WatchHub::~WatchHub() { Shutdown(); }

bool WatchHub::Register(WatchReactor* reactor) {
  MutexLock lock(&mu_);
  if (shutting_down_) return false;
  reactors_.insert(reactor);
  const absl::Time due = absl::Now() + options_.heartbeat_interval;
  if (due < next_heartbeat_) {
    next_heartbeat_ = due;
    cv_.Signal();
  }
  return true;
}

void WatchHub::Unregister(WatchReactor* reactor) {
  MutexLock lock(&mu_);
  reactors_.erase(reactor);
}

void WatchHub::Shutdown() {
  std::vector<WatchReactor*> reactors;
  {
    MutexLock lock(&mu_);
    if (shutting_down_) return;
    shutting_down_ = true;
    reactors = SnapshotLocked();
    cv_.Signal();
  }
  dispatcher_.join();
  for (WatchReactor* reactor : reactors) {
    reactor->Shutdown();
    reactor->Unref();
  }
}

void WatchHub::OnReadable(uint64_t last_sequence) {
  MutexLock lock(&mu_);
  appended_sequence_ = std::max(appended_sequence_, last_sequence);
  cv_.Signal();
}

void WatchHub::Run() {
  absl::Time next_due = absl::InfiniteFuture();
  while (true) {
    bool new_events;
    std::vector<WatchReactor*> reactors;
    {
      MutexLock lock(&mu_);
      // Streams registered during the last pass may have lowered it.
      next_heartbeat_ = std::min(next_heartbeat_, next_due);
      while (!shutting_down_ && appended_sequence_ == dispatched_sequence_ &&
             absl::Now() < next_heartbeat_) {
        cv_.WaitWithTimeout(&mu_, next_heartbeat_ - absl::Now());
      }
      if (shutting_down_) return;
      new_events = appended_sequence_ != dispatched_sequence_;
      dispatched_sequence_ = appended_sequence_;
      next_heartbeat_ = absl::InfiniteFuture();
      reactors = SnapshotLocked();
    }
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

}  // namespace lapse
