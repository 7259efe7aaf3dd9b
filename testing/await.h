// Await: runs an asynchronous operation that answers through a
// callback (a Store method's StoreDone, ClusterRouter::Send's Done) and waits
// for its answer, with patience (test_util.h).
//
//   absl::StatusOr<std::vector<bool>> removed = Await<std::vector<bool>>(
//       [&](auto done) { store->RemoveMembers("c", keys, std::move(done)); });
//
// The answer's home lives as long as the callback, so a test that gave up
// waiting (DEADLINE_EXCEEDED "no answer") leaves nothing dangling.
// Thread-safe.
#ifndef LAPSE_TESTING_AWAIT_H_
#define LAPSE_TESTING_AWAIT_H_

#include <memory>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/base/mutex.h"
#include "testing/test_util.h"

namespace lapse::testing {

// An asynchronous operation started now and awaited later, for a test that
// acts while it is in flight:
//
//   PendingAnswer<CollectionPage> listed(
//       [&](auto done) { store->ListCollections("", 10, "", std::move(done)); });
//   ... move a slot ...
//   absl::StatusOr<CollectionPage> page = listed.Wait();
template <typename T>
class PendingAnswer {
 public:
  template <typename Op>
  explicit PendingAnswer(Op op) : state_(std::make_shared<State>()) {
    op([state = state_](absl::StatusOr<T> r) {
      MutexLock lock(&state->mu);
      state->result = std::move(r);
      state->cv.Signal();
    });
  }

  // Its answer, once it came; DEADLINE_EXCEEDED "no answer" after patience.
  absl::StatusOr<T> Wait() {
    State& s = *state_;
    MutexLock lock(&s.mu);
    auto answered = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) { return s.result.has_value(); };
    if (!WaitWithPatience(s.mu, s.cv, answered)) return absl::DeadlineExceededError("no answer");
    return *s.result;
  }

 private:
  struct State {
    Mutex mu;
    CondVar cv;
    std::optional<absl::StatusOr<T>> result ABSL_GUARDED_BY(mu);
  };
  // Shared with the callback, which may outlive this.
  const std::shared_ptr<State> state_;
};

template <typename T, typename Op>
absl::StatusOr<T> Await(Op op) {
  return PendingAnswer<T>(std::move(op)).Wait();
}

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_AWAIT_H_
