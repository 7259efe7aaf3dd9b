// Recorder: client::WatchHandlers that record what a Subscription delivers,
// with waits for tests (each gives up after kPatience); and TestClientOptions,
// the client options of the client tests.
//
//   Recorder recorder;  // declared before the subscription it outlives
//   auto subscription = client.Watch(options, recorder.Handlers());
//   ASSERT_TRUE(recorder.WaitForConnections(1));
//   ...
//   ASSERT_TRUE(recorder.WaitForEvents(3));
//
// Thread-safe.
#ifndef LAPSE_TESTING_RECORDER_H_
#define LAPSE_TESTING_RECORDER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "lapse/client.h"
#include "server/base/mutex.h"

namespace lapse::testing {

// Client options for tests: quick reconnects, patient calls.
client::ClientOptions TestClientOptions();

class Recorder final {
 public:
  // Handlers that record into this Recorder; `on_event`, if given, runs after
  // each event is recorded.
  client::WatchHandlers Handlers(
      std::function<void(const client::ExpiryEvent&)> on_event = nullptr);

  bool WaitForEvents(size_t count);
  bool WaitForConnections(int count);
  bool WaitForReconnects(int count);
  // The status passed to on_error; DEADLINE_EXCEEDED if none came.
  absl::Status WaitForError();

  std::vector<client::ExpiryEvent> events();
  std::vector<uint64_t> sequences();
  std::vector<std::string> keys();
  int connections();
  int reconnects();
  std::optional<absl::Status> error();

 private:
  // Waits until done() (called with mu_ held) or an error.
  template <typename Done>
  bool WaitFor(Done done) ABSL_LOCKS_EXCLUDED(mu_);

  // Signalled on every change.
  Mutex mu_;
  CondVar cv_;
  std::vector<client::ExpiryEvent> events_ ABSL_GUARDED_BY(mu_);
  int connections_ ABSL_GUARDED_BY(mu_) = 0;
  int reconnects_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Status> error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_RECORDER_H_
