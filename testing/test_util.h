// Small helpers shared by every test: how long to wait before giving up, a
// patient wait on a condition, and an address where nothing answers.
//
//   MutexLock lock(&mu_);
//   ASSERT_TRUE(WaitWithPatience(mu_, cv_, [&] { return done_; }));
//
//   RefusedPort nobody;
//   Client client(absl::StrCat("127.0.0.1:", nobody.port()));  // UNAVAILABLE
//
// Test support shares state across threads through lapse::Mutex and CondVar
// (server/base/mutex.h), which ThreadSanitizer sees, not absl::Mutex.
// Thread-compatible.
#ifndef LAPSE_TESTING_TEST_UTIL_H_
#define LAPSE_TESTING_TEST_UTIL_H_

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/base/mutex.h"

namespace lapse::testing {

// How long a test waits for something that should happen promptly before it
// gives up; only a failing test ever waits this long.
inline constexpr absl::Duration kPatience = absl::Seconds(30);

// Waits on `cv` until done() (called with `mu` held) is true, at most
// kPatience; done()'s last value. Whoever changes what done() reads signals
// `cv`.
template <typename Done>
bool WaitWithPatience(Mutex& mu, CondVar& cv, Done done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  return cv.WaitUntil(&mu, absl::Now() + kPatience, std::move(done));
}

// A loopback port bound for as long as this object lives but never listened
// on: connections to it are refused, and no server can take it meanwhile
// (a port merely found free could be taken by the next test that binds
// 127.0.0.1:0).
class RefusedPort final {
 public:
  RefusedPort();
  ~RefusedPort();
  RefusedPort(const RefusedPort&) = delete;
  RefusedPort& operator=(const RefusedPort&) = delete;

  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_TEST_UTIL_H_
