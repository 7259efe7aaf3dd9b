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
#include "bench/common/group_ledger.h"
#include "bench/common/scenario.h"

namespace lapse {
namespace compare {

enum class Mode { kClassic, kHfe };

// What the classic poller does with the members it removed: one PUBLISH per
// script call or per member, or one XADD per member to a stream (the group
// scenario's Redis Streams consumer group reads it).
enum class Publish { kBatch, kMember, kStream };

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
  Publish publish = Publish::kBatch;
  std::string prefix;
  // group: the consumer group, and how often each consumer runs XAUTOCLAIM.
  load::GroupShape group;
  absl::Duration claim_interval;
  // classic: the sorted set of deadlines and the notification channel (the
  // stream, with Publish::kStream).
  std::string deadlines_key;
  std::string channel;
};

}  // namespace compare
}  // namespace lapse

#endif  // LAPSE_BENCH_COMPARE_REDIS_OPTIONS_H_
