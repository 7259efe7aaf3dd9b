#include "testing/recorder.h"

#include <utility>

#include "testing/test_util.h"

namespace lapse::testing {

client::ClientOptions TestClientOptions() {
  client::ClientOptions options;
  options.default_timeout = kPatience;
  options.max_attempts = 1'000'000;
  options.retry_backoff = {absl::Milliseconds(10), absl::Milliseconds(100), 2.0};
  options.watch_backoff = {absl::Milliseconds(10), absl::Milliseconds(100), 2.0};
  options.reconnect_backoff_initial = absl::Milliseconds(50);
  options.reconnect_backoff_max = absl::Milliseconds(200);
  return options;
}

client::WatchHandlers Recorder::Handlers(std::function<void(const client::ExpiryEvent&)> on_event) {
  client::WatchHandlers handlers;
  handlers.on_event = [this, on_event = std::move(on_event)](const client::ExpiryEvent& event) {
    {
      MutexLock lock(&mu_);
      events_.push_back(event);
      cv_.SignalAll();
    }
    if (on_event) on_event(event);
  };
  handlers.on_connected = [this] {
    MutexLock lock(&mu_);
    ++connections_;
    cv_.SignalAll();
  };
  handlers.on_reconnecting = [this](const absl::Status&) {
    MutexLock lock(&mu_);
    ++reconnects_;
    cv_.SignalAll();
  };
  handlers.on_error = [this](const absl::Status& status) {
    MutexLock lock(&mu_);
    error_ = status;
    cv_.SignalAll();
  };
  return handlers;
}

template <typename Done>
bool Recorder::WaitFor(Done done) {
  MutexLock lock(&mu_);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done() || error_.has_value(); };
  WaitWithPatience(mu_, cv_, ready);
  return done();
}

bool Recorder::WaitForEvents(size_t count) {
  return WaitFor([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return events_.size() >= count; });
}

bool Recorder::WaitForConnections(int count) {
  return WaitFor([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return connections_ >= count; });
}

bool Recorder::WaitForReconnects(int count) {
  return WaitFor([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return reconnects_ >= count; });
}

absl::Status Recorder::WaitForError() {
  MutexLock lock(&mu_);
  auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return error_.has_value(); };
  if (!WaitWithPatience(mu_, cv_, ended)) {
    return absl::DeadlineExceededError("test: no error was reported");
  }
  return *error_;
}

std::vector<client::ExpiryEvent> Recorder::events() {
  MutexLock lock(&mu_);
  return events_;
}

std::vector<uint64_t> Recorder::sequences() {
  std::vector<uint64_t> out;
  for (const client::ExpiryEvent& event : events()) out.push_back(event.sequence);
  return out;
}

std::vector<std::string> Recorder::keys() {
  std::vector<std::string> out;
  for (const client::ExpiryEvent& event : events()) out.push_back(event.key);
  return out;
}

int Recorder::connections() {
  MutexLock lock(&mu_);
  return connections_;
}

int Recorder::reconnects() {
  MutexLock lock(&mu_);
  return reconnects_;
}

std::optional<absl::Status> Recorder::error() {
  MutexLock lock(&mu_);
  return error_;
}

}  // namespace lapse::testing
