#include "server/storage/redis/event_loop.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/time/clock.h"

namespace lapse::redis {

EventLoop::EventLoop() : wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (wake_fd_ < 0) {
    std::perror("eventfd");
    std::abort();
  }
  thread_ = std::thread([this] { Run(); });
}

EventLoop::~EventLoop() {
  Post([this] {
    MutexLock lock(&mu_);
    stopping_ = true;
  });
  thread_.join();
  close(wake_fd_);
}

void EventLoop::Post(Task task) {
  {
    MutexLock lock(&mu_);
    posted_.push_back(std::move(task));
  }
  const uint64_t one = 1;
  while (write(wake_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

void EventLoop::RunAt(absl::Time when, Task task) { timers_.emplace(when, std::move(task)); }

void EventLoop::Watch(Handler* handler) { handlers_.push_back(handler); }

void EventLoop::Unwatch(Handler* handler) {
  handlers_.erase(std::remove(handlers_.begin(), handlers_.end(), handler), handlers_.end());
}

bool EventLoop::RunPosted() {
  uint64_t count;
  while (read(wake_fd_, &count, sizeof(count)) < 0 && errno == EINTR) {
  }
  std::vector<Task> tasks;
  {
    MutexLock lock(&mu_);
    tasks.swap(posted_);
  }
  for (Task& task : tasks) std::move(task)();
  MutexLock lock(&mu_);
  return !stopping_;
}

void EventLoop::Run() {
  std::vector<pollfd> polls;
  std::vector<Handler*> polled;
  while (true) {
    polls.assign(1, {wake_fd_, POLLIN, 0});
    polled.assign(1, nullptr);
    for (Handler* handler : handlers_) {
      if (handler->fd() < 0 || handler->events() == 0) continue;
      polls.push_back({handler->fd(), handler->events(), 0});
      polled.push_back(handler);
    }
    int timeout_ms = -1;
    if (!timers_.empty()) {
      const absl::Duration left = timers_.begin()->first - absl::Now();
      timeout_ms = static_cast<int>(
          std::max<int64_t>(0, absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)))));
    }
    const int ready = poll(polls.data(), polls.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) {
      std::perror("poll");
      std::abort();
    }
    for (size_t i = 1; ready > 0 && i < polls.size(); ++i) {
      Handler* handler = polled[i];
      // A handler may have been unwatched, or its descriptor replaced, by
      // one that ran before it.
      if (polls[i].revents == 0 ||
          std::find(handlers_.begin(), handlers_.end(), handler) == handlers_.end() ||
          handler->fd() != polls[i].fd) {
        continue;
      }
      handler->OnEvents(polls[i].revents);
    }
    const absl::Time now = absl::Now();
    while (!timers_.empty() && timers_.begin()->first <= now) {
      Task task = std::move(timers_.begin()->second);
      timers_.erase(timers_.begin());
      std::move(task)();
    }
    if ((polls[0].revents & POLLIN) != 0 && !RunPosted()) return;
  }
}

}  // namespace lapse::redis
