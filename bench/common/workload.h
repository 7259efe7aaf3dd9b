// Workload: the synthetic data every lapse benchmark uses, so that
// engine_bench and memory_probe measure the same shape of member.
//
// Member i of a workload lives in collection i % collections (round-robin, so
// consecutive writes touch different collections, as unrelated clients would),
// has the 16-byte key "k000000000000042" and the 16-byte value
// "v000000000000042", and a TTL spread pseudo-randomly and uniformly over one
// hour. Collection names are 16 bytes too ("c000000000000007").
//
//   char key[lapse::bench::kNameBytes];
//   lapse::bench::FormatName('k', i, key);
//   absl::Duration ttl = lapse::bench::TtlFor(i);
//
// Everything here is a pure function of the member's index: no state, safe
// from any thread.
#ifndef LAPSE_BENCH_COMMON_WORKLOAD_H_
#define LAPSE_BENCH_COMMON_WORKLOAD_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lapse {
namespace bench {

// Bytes of every key, value and collection name.
inline constexpr size_t kNameBytes = 16;

// Where every FakeClock starts. Any fixed instant would do; a fixed one keeps
// runs comparable.
inline absl::Time StartTime() { return absl::FromUnixSeconds(1'700'000'000); }

// How far apart the deadlines are spread.
inline constexpr absl::Duration kTtlSpread = absl::Hours(1);

// splitmix64: a cheap, well-mixed, deterministic hash of an index.
inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Writes `tag` followed by `n` as 15 zero-padded decimal digits into `out`
// (exactly kNameBytes bytes, no terminator) and returns a view of it.
// Hand-rolled because snprintf would cost about as much as a Put.
inline absl::string_view FormatName(char tag, uint64_t n, char* out) {
  out[0] = tag;
  for (size_t i = kNameBytes - 1; i > 0; --i) {
    out[i] = static_cast<char>('0' + n % 10);
    n /= 10;
  }
  return absl::string_view(out, kNameBytes);
}

// Member i's TTL: uniform over (0, kTtlSpread], millisecond resolution, so
// deadlines arrive in no particular order relative to insertion.
inline absl::Duration TtlFor(uint64_t i) {
  const uint64_t spread_ms = absl::ToInt64Milliseconds(kTtlSpread);
  return absl::Milliseconds(static_cast<int64_t>(1 + Mix(i) % spread_ms));
}

}  // namespace bench
}  // namespace lapse

#endif  // LAPSE_BENCH_COMMON_WORKLOAD_H_
