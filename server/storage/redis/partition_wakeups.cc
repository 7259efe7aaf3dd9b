#include "server/storage/redis/partition_wakeups.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "server/base/deadline.h"
#include "server/base/mutex.h"
#include "server/storage/redis/partition_scripts.h"

namespace lapse::redis {

// Shared with the router's callbacks, which may outlive the dispatcher.
struct PartitionWakeups::State {
  Mutex mu;
  // Cleared by the destructor: no handler runs after.
  bool alive ABSL_GUARDED_BY(mu) = true;
  Handlers handlers ABSL_GUARDED_BY(mu);
  uint64_t messages ABSL_GUARDED_BY(mu) = 0;
  uint64_t malformed ABSL_GUARDED_BY(mu) = 0;

  void OnMessage(int partition, absl::string_view message) {
    const std::pair<absl::string_view, absl::string_view> parts =
        absl::StrSplit(message, absl::MaxSplits(' ', 1));
    int64_t number = 0;
    MutexLock lock(&mu);
    if (!alive) return;
    ++messages;
    if (!absl::SimpleAtoi(parts.second, &number) || number < 0) {
      ++malformed;
    } else if (parts.first == "due") {
      handlers.due(partition, TimeOfDeadline(number));
    } else if (parts.first == "delivered") {
      handlers.delivered(partition, static_cast<uint64_t>(number));
    } else {
      ++malformed;
    }
  }

  void OnSubscribed(int partition) {
    MutexLock lock(&mu);
    if (alive) handlers.subscribed(partition);
  }
};

PartitionWakeups::PartitionWakeups(ClusterRouter& router, absl::Span<const std::string> tags,
                                   Handlers handlers)
    : state_(std::make_shared<State>()) {
  {
    MutexLock lock(&state_->mu);
    state_->handlers = std::move(handlers);
  }
  for (int p = 0; p < static_cast<int>(tags.size()); ++p) {
    router.Subscribe(
        PartitionKeys(tags[p]).wake,
        [state = state_, p](absl::string_view message) { state->OnMessage(p, message); },
        [state = state_, p] { state->OnSubscribed(p); });
  }
}

PartitionWakeups::~PartitionWakeups() {
  MutexLock lock(&state_->mu);
  state_->alive = false;
}

uint64_t PartitionWakeups::messages() const {
  MutexLock lock(&state_->mu);
  return state_->messages;
}

uint64_t PartitionWakeups::malformed() const {
  MutexLock lock(&state_->mu);
  return state_->malformed;
}

}  // namespace lapse::redis
