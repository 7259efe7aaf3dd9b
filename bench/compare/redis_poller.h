// Poller: the classic Redis recipe's expirer. Every --poll-interval it runs a
// Lua script that removes the members that are due from the deadline sorted
// set and their hashes and PUBLISHes them (collection, key, value, deadline)
// to the run's channel, or XADDs each to the run's stream (Publish::kStream); while a call comes
// back full (--poll-limit) it calls again at once, so a backlog drains without waiting a tick.
//
//   lapse::compare::Poller poller(options);
//   if (!poller.Start().ok()) ...
//   ...
//   poller.Stop();
//
// Start and Stop are called from one thread; the counters are thread-safe.
#ifndef LAPSE_BENCH_COMPARE_REDIS_POLLER_H_
#define LAPSE_BENCH_COMPARE_REDIS_POLLER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "bench/common/stoppable_thread.h"
#include "bench/compare/redis_conn.h"
#include "bench/compare/redis_options.h"

namespace lapse {
namespace compare {

// One member as the poller's script hands it out, in a line of
// "collection \t key \t value \t deadline_ms".
struct PolledMember {
  uint64_t index = 0;
  int64_t deadline_ms = 0;
  // Whether the value is the one written for the member (members.h).
  bool value_ok = false;
};

// Parses one such line; false when it names no member of this run.
bool ParsePolledLine(absl::string_view line, size_t value_bytes, PolledMember* out);

class Poller {
 public:
  explicit Poller(const Options& o) : o_(o) {}
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  // Connects, loads the script and starts polling on a thread of its own.
  absl::Status Start();
  // Stops polling and waits for the thread. Idempotent.
  void Stop();

  uint64_t calls() const { return calls_.load(); }
  uint64_t removed() const { return removed_.load(); }
  uint64_t errors() const { return errors_.load(); }
  // Time spent inside the script calls (ms).
  double busy_ms() const { return static_cast<double>(busy_us_.load()) / 1000.0; }
  std::string first_error() const {
    absl::MutexLock lock(&mu_);
    return first_error_;
  }

 private:
  void Run();

  // Constant after construction.
  const Options o_;
  std::unique_ptr<RedisConn> conn_;
  std::string sha_;

  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> removed_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<int64_t> busy_us_{0};

  mutable absl::Mutex mu_;
  std::string first_error_ ABSL_GUARDED_BY(mu_);

  // Declared last: destroying it stops the loop before the rest goes.
  load::StoppableThread thread_;
};

}  // namespace compare
}  // namespace lapse

#endif  // LAPSE_BENCH_COMPARE_REDIS_POLLER_H_
