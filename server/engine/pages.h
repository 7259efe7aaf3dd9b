// Pages of listings (AIP-158) bounded by Limits::max_response_bytes: the one
// home of how a page is cut by bytes, for the engine and for stores that
// assemble a page from several parts (a Redis Cluster's partitions).
//
//   PageBytes bytes(limits.max_response_bytes);
//   while (fit < members.size() && bytes.Take(members[fit].key.size())) ++fit;
//
//   CollectionPage page = CollectionPageOf(std::move(candidates), limit, max_bytes);
//
// Pure functions and a thread-compatible counter.
#ifndef LAPSE_SERVER_ENGINE_PAGES_H_
#define LAPSE_SERVER_ENGINE_PAGES_H_

#include <cstddef>
#include <vector>

#include "server/engine/engine.h"
#include "server/engine/limits.h"

namespace lapse {

// Counts the entries of a page against Limits::max_response_bytes.
class PageBytes {
 public:
  explicit PageBytes(size_t max) : max_(max) {}

  // Counts an entry of `payload` bytes of keys, values and names; false,
  // counting nothing, when it would pass the maximum. The first entry always
  // fits: a page holds at least one.
  bool Take(size_t payload) {
    const size_t entry = payload + kResponseEntryOverhead;
    if (used_ > 0 && used_ + entry > max_) return false;
    used_ += entry;
    return true;
  }

 private:
  const size_t max_;
  size_t used_ = 0;
};

// A page of ListCollections from the candidates of several parts (the
// engine's shards, a cluster's partitions), each part's first `limit` + 1
// live collections after the cursor: their first `limit` by name, ending
// early before the one that would pass `max_response_bytes` (it always holds
// one), with next_after set when more may follow.
CollectionPage CollectionPageOf(std::vector<CollectionInfo> candidates, size_t limit,
                                size_t max_response_bytes);

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_PAGES_H_
