// Members: the synthetic members every load scenario writes, for lapse and
// for the Redis peers alike, so both sides carry the same bytes.
//
// Member i has key "k" + i zero-padded to key_bytes ("k000000000000042" at the
// default 16 bytes) and value "v" + i padded the same way to value_bytes, so
// an expiry notification can be traced back to its member (IndexOfKey). Batch
// j (members j*batch ... j*batch+batch-1) goes to collection
// prefix + "c" + (j % collections): one collection per RPC or pipelined
// batch, as a client grouping its writes would do.
//
//   char key[64];
//   lapse::load::WriteDigits('k', 42, key, 16);   // "k000000000000042"
//
// Pure functions of the index: safe from any thread.
#ifndef LAPSE_BENCH_COMMON_MEMBERS_H_
#define LAPSE_BENCH_COMMON_MEMBERS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "bench/common/workload.h"

namespace lapse {
namespace load {

// Shortest key that still holds a 7-digit index after its tag.
inline constexpr size_t kMinKeyBytes = 8;

// Writes `tag` and `n` zero-padded to exactly `bytes` bytes into `out` (no
// terminator). With bytes < 2 only the tag (or nothing) is written.
inline void WriteDigits(char tag, uint64_t n, char* out, size_t bytes) {
  if (bytes == 0) return;
  out[0] = tag;
  for (size_t i = bytes - 1; i > 0; --i) {
    out[i] = static_cast<char>('0' + n % 10);
    n /= 10;
  }
}

inline std::string KeyFor(uint64_t i, size_t key_bytes) {
  std::string key(key_bytes, '0');
  WriteDigits('k', i, key.data(), key_bytes);
  return key;
}

inline std::string ValueFor(uint64_t i, size_t value_bytes) {
  std::string value(value_bytes, '0');
  WriteDigits('v', i, value.data(), value_bytes);
  return value;
}

// The member index a key was made from; false for a key not made by KeyFor.
inline bool IndexOfKey(absl::string_view key, uint64_t* index) {
  if (key.size() < 2 || key[0] != 'k') return false;
  return absl::SimpleAtoi(key.substr(1), index);
}

inline std::string CollectionFor(absl::string_view prefix, uint64_t batch, uint64_t collections) {
  return absl::StrCat(prefix, "c", batch % collections);
}

// Member i's deadline when deadlines are spread pseudo-randomly and uniformly
// over [start_ms, start_ms + spread_ms), so they arrive in no particular order
// relative to the writes.
inline int64_t SpreadDeadlineMs(int64_t start_ms, int64_t spread_ms, uint64_t i) {
  if (spread_ms <= 0) return start_ms;
  return start_ms + static_cast<int64_t>(bench::Mix(i) % static_cast<uint64_t>(spread_ms));
}

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_COMMON_MEMBERS_H_
