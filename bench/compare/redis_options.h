// Options: how lapse-redis-bench was asked to run, shared by its writer,
// poller, subscriber and scenarios (see redis_bench_main.cc for the flags).
//
// A plain value; thread-compatible.
#ifndef LAPSE_BENCH_COMPARE_REDIS_OPTIONS_H_
#define LAPSE_BENCH_COMPARE_REDIS_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "bench/common/scenario.h"

namespace lapse {
namespace compare {

enum class Mode { kClassic, kHfe };

struct Options {
  std::string host;
  int port = 6379;
  std::string peer;
  Mode mode = Mode::kClassic;
  int connections = 1;
  int concurrency = 16;
  size_t batch = 100;
  size_t key_bytes = 16;
  size_t value_bytes = 16;
  uint64_t collections = 1000;
  uint64_t members = 0;
  absl::Duration duration;
  absl::Duration ttl;
  // expiry-latency and drain.
  load::ExpiryTiming timing;
  absl::Duration poll_interval;
  int poll_limit = 1000;
  bool publish_per_member = false;
  std::string prefix;
  // classic: the sorted set of deadlines and the notification channel.
  std::string deadlines_key;
  std::string channel;
};

}  // namespace compare
}  // namespace lapse

#endif  // LAPSE_BENCH_COMPARE_REDIS_OPTIONS_H_
