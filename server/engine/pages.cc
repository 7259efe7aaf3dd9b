#include "server/engine/pages.h"

#include <algorithm>
#include <utility>

namespace lapse {

CollectionPage CollectionPageOf(std::vector<CollectionInfo> candidates, size_t limit,
                                size_t max_response_bytes) {
  std::sort(candidates.begin(), candidates.end(),
            [](const CollectionInfo& a, const CollectionInfo& b) { return a.name < b.name; });
  // The page ends early, before the collection that would not fit in one
  // response.
  PageBytes bytes(max_response_bytes);
  size_t fit = 0;
  while (fit < std::min(candidates.size(), limit) && bytes.Take(candidates[fit].name.size())) {
    ++fit;
  }
  CollectionPage page;
  if (candidates.size() > fit) {
    candidates.resize(fit);
    page.next_after = candidates.back().name;
  }
  page.collections = std::move(candidates);
  return page;
}

}  // namespace lapse
