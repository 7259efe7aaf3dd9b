// Validation of engine requests against Limits.
//
// Every error is INVALID_ARGUMENT with a message "field: problem" that names
// the API field at fault ("members[2].ttl: must be positive",
// "keys[1]: duplicates keys[0]"), so the service can hand it on unchanged.
//
//   if (absl::Status s = lapse::ValidateName("collection", name, limits); !s.ok()) return s;
//   absl::StatusOr<int64_t> deadline = lapse::DeadlineOf(
//       refresh, "refresh_", now, lapse::PastDeadline::kRejected, limits);
//
// Pure functions: safe to call from any thread.
#ifndef LAPSE_SERVER_ENGINE_VALIDATE_H_
#define LAPSE_SERVER_ENGINE_VALIDATE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/engine/expiration.h"
#include "server/engine/limits.h"

namespace lapse {

// INVALID_ARGUMENT "field: problem".
absl::Status InvalidField(absl::string_view field, absl::string_view problem);

// Collection names (and name prefixes) are non-empty printable ASCII without
// spaces: safe in logs, URLs, metric labels and shells.
absl::Status ValidateName(absl::string_view field, absl::string_view name, const Limits& limits);

// The offset of the first byte of `s` that is not part of valid UTF-8 text
// without control characters (C0, DEL, C1), or npos. Overlong encodings,
// surrogates and code points past U+10FFFF are invalid.
size_t FindInvalidKeyByte(absl::string_view s);

// Member keys are non-empty UTF-8 text without control characters.
absl::Status ValidateKey(absl::string_view field, absl::string_view key, const Limits& limits);

// A request lists at least one and at most max_members_per_request entries.
absl::Status ValidateCount(absl::string_view field, size_t n, const Limits& limits);

namespace validate_internal {
// What is wrong with `key` as a member key, or "" when nothing is.
std::string KeyProblem(absl::string_view key, const Limits& limits);
}  // namespace validate_internal

// Checks the count and each of the `n` keys `key_of(i)` of the list `field`,
// and rejects duplicates: the result of a batch with a repeated key would
// depend on the order of application. Key fields are named
// "<field>[<i>]<key_suffix>".
template <typename KeyOf>
absl::Status ValidateKeyList(absl::string_view field, size_t n, KeyOf key_of,
                             absl::string_view key_suffix, const Limits& limits) {
  if (absl::Status s = ValidateCount(field, n, limits); !s.ok()) return s;
  absl::flat_hash_map<absl::string_view, size_t> seen;
  if (n > 1) seen.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const absl::string_view key = key_of(i);
    // Field names are formatted only for the error: this runs per member.
    if (std::string problem = validate_internal::KeyProblem(key, limits); !problem.empty()) {
      return InvalidField(absl::StrCat(field, "[", i, "]", key_suffix), problem);
    }
    if (n > 1) {
      auto [it, inserted] = seen.emplace(key, i);
      if (!inserted) {
        return InvalidField(absl::StrCat(field, "[", i, "]", key_suffix),
                            absl::StrCat("duplicates ", field, "[", it->second, "]", key_suffix));
      }
    }
  }
  return absl::OkStatus();
}

// The list of keys of a Get, Remove, Expire or Persist: field "keys".
absl::Status ValidateKeys(absl::Span<const absl::string_view> keys, const Limits& limits);

// AIP-158: a page size is never negative ...
absl::Status ValidatePageSize(int page_size);
// ... 0 means the default, and more than the maximum is coerced down.
size_t EffectivePageSize(int page_size, const Limits& limits);

// Whether an expire_time at or before now is an error (a write) or means
// "expire now" (Expire).
enum class PastDeadline { kRejected, kAllowed };

// The deadline `e` sets at `now`, in whole milliseconds rounded up
// (kNoDeadlineMs for none). Fields are named `prefix` + "ttl" or
// "expire_time". A deadline after kLatestDeadlineMs is refused.
absl::StatusOr<int64_t> DeadlineOf(const Expiration& e, absl::string_view prefix, absl::Time now,
                                   PastDeadline past, const Limits& limits);

// One member of a Put, `members[index]`, apart from its key: the value's size,
// and an expiration that keep_expiration does not contradict. Returns the
// deadline it asks for (kNoDeadlineMs for none, or when it keeps its current
// one).
absl::StatusOr<int64_t> ValidateMemberWrite(size_t index, absl::string_view value,
                                            const Expiration& expiration, bool keep_expiration,
                                            absl::Time now, const Limits& limits);

}  // namespace lapse

#endif  // LAPSE_SERVER_ENGINE_VALIDATE_H_
