// Small helpers shared by the client's tests.
#ifndef LAPSE_TESTING_TEST_UTIL_H_
#define LAPSE_TESTING_TEST_UTIL_H_

#include "absl/time/time.h"

namespace lapse::client::testing {

// How long a test waits for something that should happen promptly before it
// gives up; only a failing test ever waits this long.
inline constexpr absl::Duration kPatience = absl::Seconds(30);

// A loopback port the OS just handed out and that nothing listens on.
int UnusedLoopbackPort();

}  // namespace lapse::client::testing

#endif  // LAPSE_TESTING_TEST_UTIL_H_
