// Limits: every size the engine accepts is bounded, and each bound is a
// `lapsed` flag. Defaults are documented in README.md ("Limits").
#ifndef LAPSE_SERVER_ENGINE_LIMITS_H_
#define LAPSE_SERVER_ENGINE_LIMITS_H_

#include <cstddef>
#include <cstdint>

#include "absl/time/time.h"

namespace lapse {

struct Limits {
  size_t max_collection_name_bytes = 256;
  size_t max_key_bytes = 1024;
  size_t max_value_bytes = 1 << 20;
  // Members (or keys) in one request.
  size_t max_members_per_request = 1000;
  int default_page_size = 100;
  int max_page_size = 1000;
  // Deadlines further away than this are refused.
  absl::Duration max_ttl = absl::Hours(24 * 3650);
  // Live members across all collections; a write past it is RESOURCE_EXHAUSTED.
  uint64_t max_total_members = 100'000'000;
  // Collections named in one WatchExpirations filter.
  size_t max_watch_collections = 1000;
  // Bytes of one ListMembers, ListCollections or GetMembers answer, counted
  // as the keys, values and names in it plus kResponseEntryOverhead per
  // entry. A page ends before the entry that would pass it (AIP-158 allows a
  // shorter page; it always holds at least one entry), and a GetMembers whose
  // answer would pass it is RESOURCE_EXHAUSTED. A LapseServer sets it from
  // its largest message (ResponseBytesFor in lapse_server.h).
  size_t max_response_bytes = size_t{15} << 20;
};

// An upper bound on what encoding adds to each entry of an answer: field
// tags and lengths, the entry's expire_time, counts and outcomes
// (proto_convert_test checks it against the real encoding).
inline constexpr size_t kResponseEntryOverhead = 64;

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_LIMITS_H_
