#include "bench/cluster/store_puts.h"

#include <cstdint>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/common/members.h"
#include "bench/common/report.h"
#include "bench/common/stats.h"

namespace lapse {
namespace load {
namespace {

// The calls in flight and what came back, shared with the completions.
class Window {
 public:
  explicit Window(int size) : size_(size) {}

  // Blocks until fewer than `size` calls are in flight, then counts one more.
  void Enter() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &Window::HasRoom));
    ++in_flight_;
  }
  void Leave(int64_t latency_us, const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    --in_flight_;
    latencies_.push_back(latency_us);
    if (!status.ok() && ++errors_ == 1) first_error_ = status.ToString();
  }
  void AwaitEmpty() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &Window::Empty));
  }
  void Fill(LoadOutcome& out) {
    absl::MutexLock lock(&mu_);
    out.errors = errors_;
    out.first_error = first_error_;
    LatencyRecorder recorder;
    recorder.RecordAll(latencies_);
    out.latency = recorder.Summarize();
  }

 private:
  bool HasRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ < size_; }
  bool Empty() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; }

  const int size_;
  absl::Mutex mu_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::string first_error_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> latencies_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

LoadOutcome RunStorePuts(Store& store, const StorePutShape& shape, const LoadPlan& plan) {
  const size_t batch = shape.batch;
  Window window(shape.in_flight);
  LoadOutcome out;
  const absl::Time start = absl::Now();
  const absl::Time end = plan.members == 0 ? start + plan.duration : absl::InfiniteFuture();
  std::vector<std::string> keys(batch);
  std::vector<std::string> values(batch);
  std::vector<MemberWrite> writes;
  PutOptions options;
  options.default_expiration = Expiration::Ttl(plan.ttl);
  for (uint64_t b = 0; b < plan.Batches(batch) && absl::Now() < end; ++b) {
    const auto [first, last] = plan.BatchMembers(batch, b);
    writes.clear();
    for (uint64_t i = first; i < last; ++i) {
      keys[i - first] = KeyFor(i, shape.key_bytes);
      values[i - first] = ValueFor(i, shape.value_bytes);
      MemberWrite& w = writes.emplace_back();
      w.key = keys[i - first];
      w.value = values[i - first];
    }
    window.Enter();
    const int64_t sent_us = NowMicros();
    store.PutMembers(shape.collections[b % shape.collections.size()], writes, options,
                     [&window, sent_us](absl::StatusOr<std::vector<PutResult>> results) {
                       window.Leave(NowMicros() - sent_us, results.status());
                     });
    out.members += last - first;
    ++out.requests;
  }
  window.AwaitEmpty();
  out.elapsed = absl::Now() - start;
  window.Fill(out);
  return out;
}

}  // namespace load
}  // namespace lapse
