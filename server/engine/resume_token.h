// ResumeToken: the opaque position a watcher resumes from, and the identity of
// the store it belongs to.
//
// Every store has a StoreId, 128 random bits made when its history begins (a
// data directory is first initialised; a memory-only server starts). A token
// names that id and, for each partition of the store, the last sequence
// examined in it. The embedded store has one partition (0) and one total
// order; a store with several partitions, each with its own sequence (Redis
// Cluster), lists one entry per partition in the same format, so tokens need
// no new format when such a store comes.
//
// Wire format (version 1), built with coding.h:
//   byte     version (1)
//   fixed64  store id, high half; fixed64 store id, low half
//   varint32 number of partitions, 1..kMaxTokenPartitions
//   per partition, in increasing partition order:
//     varint32 partition; varint64 last examined sequence
// Nothing may follow. A later format changes the version byte; a token with a
// version this server does not know is refused, never guessed at.
//
//   std::string token = lapse::EncodeResumeToken({.store = id, .partitions = {{0, 41}}});
//   absl::StatusOr<lapse::ResumePosition> position = lapse::DecodeResumeToken(token);
//
// Pure functions and value types; safe to use from any thread.
#ifndef LAPSE_SERVER_ENGINE_RESUME_TOKEN_H_
#define LAPSE_SERVER_ENGINE_RESUME_TOKEN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lapse {

struct StoreId {
  uint64_t high = 0;
  uint64_t low = 0;

  // 128 bits from a random source seeded by the operating system.
  static StoreId Random();
  // 32 lowercase hexadecimal digits.
  std::string ToString() const;

  friend bool operator==(const StoreId& a, const StoreId& b) {
    return a.high == b.high && a.low == b.low;
  }
  friend bool operator!=(const StoreId& a, const StoreId& b) { return !(a == b); }
};

inline constexpr uint8_t kResumeTokenVersion = 1;
// Bounds what a token may make the server decode.
inline constexpr size_t kMaxTokenPartitions = 65536;

struct PartitionPosition {
  uint32_t partition = 0;
  // Every event of the partition up to and including this one was examined.
  uint64_t sequence = 0;
};

struct ResumePosition {
  StoreId store;
  // In increasing partition order, without duplicates; never empty.
  std::vector<PartitionPosition> partitions;
};

// REQUIRES: `position` is as ResumePosition describes.
std::string EncodeResumeToken(const ResumePosition& position);

// INVALID_ARGUMENT (naming the field `resume_token`) when `token` is not a
// token this format describes.
absl::StatusOr<ResumePosition> DecodeResumeToken(absl::string_view token);

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_RESUME_TOKEN_H_
