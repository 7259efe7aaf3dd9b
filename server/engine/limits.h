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

  // Consumer groups (consumer_groups.h); group and consumer names are bound
  // like collection names. Past a count, Create and a new consumer are
  // RESOURCE_EXHAUSTED; past max_group_pending or max_group_bytes a group
  // takes no new events from the feed until it has acknowledged some.
  size_t max_consumer_groups = 1000;
  size_t max_consumers_per_group = 1000;
  // Events a group holds leased or awaiting redelivery.
  size_t max_group_pending = 100'000;
  size_t max_group_dead_letters = 100'000;
  // Bytes of the events one group keeps, pending and dead-lettered.
  size_t max_group_bytes = size_t{64} << 20;
  uint32_t max_unacked_per_consumer = 10'000;
  uint32_t max_deliveries = 1000;
  absl::Duration max_visibility_timeout = absl::Hours(12);
  // Events one Poll may ask for.
  size_t max_poll_events = 1000;
};

// An upper bound on what encoding adds to each entry of an answer: field
// tags and lengths, the entry's expire_time, counts and outcomes
// (proto_convert_test checks it against the real encoding).
inline constexpr size_t kResponseEntryOverhead = 64;

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_LIMITS_H_
