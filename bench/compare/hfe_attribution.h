// HfeAttribution: what a client of Redis's native hash-field expiration can
// infer from a `hexpired` keyspace event, which names only the hash (the
// collection): every member of that collection whose deadline has passed and
// that no earlier event covered. That is the most a client can infer without
// reading the hash again, so it flatters Redis's latency.
//
//   lapse::compare::HfeAttribution attribution(options, n, deadline_ms);
//   ledger.Deliver(attribution.Credit("rb1.drain.c7", lapse::load::NowMicros()));
//
// Not thread-safe: the subscriber's thread alone credits events.
#ifndef LAPSE_BENCH_COMPARE_HFE_ATTRIBUTION_H_
#define LAPSE_BENCH_COMPARE_HFE_ATTRIBUTION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "bench/common/ledger.h"
#include "bench/compare/redis_options.h"

namespace lapse {
namespace compare {

// Which members each collection holds, by deadline, and how far the
// collection's notifications have covered them.
class HfeAttribution {
 public:
  HfeAttribution(const Options& o, uint64_t members,
                 const std::function<int64_t(uint64_t)>& deadline_ms);

  // One `hexpired` event for `collection`, received at `received_us`.
  std::vector<load::Delivery> Credit(absl::string_view collection, int64_t received_us);

 private:
  struct Collection {
    std::vector<std::pair<int64_t, uint64_t>> members;
    size_t next = 0;
  };
  const std::string prefix_;
  std::vector<Collection> by_collection_;
};

}  // namespace compare
}  // namespace lapse

#endif  // LAPSE_BENCH_COMPARE_HFE_ATTRIBUTION_H_
