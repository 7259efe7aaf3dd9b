#include "bench/compare/hfe_attribution.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace lapse {
namespace compare {

using load::Delivery;

HfeAttribution::HfeAttribution(const Options& o, uint64_t members,
                               const std::function<int64_t(uint64_t)>& deadline_ms)
    : prefix_(o.prefix + "c") {
  by_collection_.resize(o.collections);
  for (uint64_t i = 0; i < members; ++i) {
    const uint64_t c = (i / o.batch) % o.collections;
    by_collection_[c].members.push_back({deadline_ms(i), i});
  }
  for (Collection& c : by_collection_) {
    std::sort(c.members.begin(), c.members.end());
  }
}

std::vector<Delivery> HfeAttribution::Credit(absl::string_view collection, int64_t received_us) {
  std::vector<Delivery> out;
  uint64_t c;
  if (!absl::ConsumePrefix(&collection, prefix_) || !absl::SimpleAtoi(collection, &c) ||
      c >= by_collection_.size()) {
    return out;
  }
  Collection& col = by_collection_[c];
  while (col.next < col.members.size() && col.members[col.next].first * 1000 <= received_us) {
    const auto& [deadline, index] = col.members[col.next++];
    out.push_back({index, deadline * 1000, received_us});
  }
  return out;
}

}  // namespace compare
}  // namespace lapse
