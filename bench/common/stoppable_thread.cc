#include "bench/common/stoppable_thread.h"

#include <utility>

namespace lapse {
namespace load {

void StoppableThread::Start(std::function<void()> loop) {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = false;
  }
  thread_ = std::thread(std::move(loop));
}

void StoppableThread::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool StoppableThread::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

bool StoppableThread::WaitForStop(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline(absl::Condition(&stopping_), deadline);
}

}  // namespace load
}  // namespace lapse
