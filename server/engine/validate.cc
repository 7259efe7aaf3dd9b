#include "server/engine/validate.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_format.h"
#include "server/base/deadline.h"
#include "server/base/utf8.h"

namespace lapse {
namespace {

constexpr absl::string_view kAfterLatestDeadline =
    "ends after the latest deadline lapse keeps (the year 6429)";

// DeadlineOf, with the field prefix formatted by `prefix()` only for an error.
template <typename Prefix>
absl::StatusOr<int64_t> DeadlineOfImpl(const Expiration& e, const Prefix& prefix, absl::Time now,
                                       PastDeadline past, const Limits& limits) {
  switch (e.kind) {
    case Expiration::Kind::kNone:
      return kNoDeadlineMs;
    case Expiration::Kind::kTtl:
      if (e.ttl <= absl::ZeroDuration()) {
        return InvalidField(absl::StrCat(prefix(), "ttl"), "must be positive");
      }
      if (e.ttl > limits.max_ttl) {
        return InvalidField(
            absl::StrCat(prefix(), "ttl"),
            absl::StrCat("exceeds the maximum of ", absl::FormatDuration(limits.max_ttl)));
      }
      if (const int64_t ms = CeilMillis(now + e.ttl); ms <= kLatestDeadlineMs) return ms;
      return InvalidField(absl::StrCat(prefix(), "ttl"), kAfterLatestDeadline);
    case Expiration::Kind::kTime: {
      if (e.time == absl::InfiniteFuture() || e.time == absl::InfinitePast()) {
        return InvalidField(absl::StrCat(prefix(), "expire_time"), "must be a finite time");
      }
      if (e.time - now > limits.max_ttl) {
        return InvalidField(
            absl::StrCat(prefix(), "expire_time"),
            absl::StrCat("is more than ", absl::FormatDuration(limits.max_ttl), " in the future"));
      }
      const int64_t ms = CeilMillis(e.time);
      if (ms > kLatestDeadlineMs) {
        return InvalidField(absl::StrCat(prefix(), "expire_time"), kAfterLatestDeadline);
      }
      if (past == PastDeadline::kRejected && ms <= FloorMillis(now)) {
        return InvalidField(absl::StrCat(prefix(), "expire_time"), "must be in the future");
      }
      return ms;
    }
  }
  return InvalidField(absl::StrCat(prefix(), "expiration"), "unknown kind");
}

}  // namespace

absl::Status InvalidField(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

absl::Status ValidateName(absl::string_view field, absl::string_view name, const Limits& limits) {
  if (name.empty()) return InvalidField(field, "must not be empty");
  if (name.size() > limits.max_collection_name_bytes) {
    return InvalidField(field, absl::StrFormat("%d bytes exceeds the limit of %d", name.size(),
                                               limits.max_collection_name_bytes));
  }
  if (const size_t i = PrintableAsciiPrefix(name, 0x21); i < name.size()) {
    return InvalidField(field, absl::StrFormat("invalid byte 0x%02x at offset %d; names are "
                                               "printable ASCII without spaces",
                                               static_cast<unsigned char>(name[i]), i));
  }
  return absl::OkStatus();
}

size_t FindInvalidKeyByte(absl::string_view s) {
  for (size_t i = PrintableAsciiPrefix(s); i < s.size();) {
    uint32_t cp;
    const size_t length = DecodeUtf8(s.substr(i), &cp);
    // C0 and C1 control characters and DEL are not key text.
    if (length == 0 || cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) return i;
    i += length;
  }
  return absl::string_view::npos;
}

namespace validate_internal {

std::string KeyProblem(absl::string_view key, const Limits& limits) {
  if (key.empty()) return "must not be empty";
  if (key.size() > limits.max_key_bytes) {
    return absl::StrFormat("%d bytes exceeds the limit of %d", key.size(), limits.max_key_bytes);
  }
  if (size_t bad = FindInvalidKeyByte(key); bad != absl::string_view::npos) {
    return absl::StrFormat("invalid UTF-8 or control character at offset %d", bad);
  }
  return std::string();
}

}  // namespace validate_internal

absl::Status ValidateKey(absl::string_view field, absl::string_view key, const Limits& limits) {
  if (std::string problem = validate_internal::KeyProblem(key, limits); !problem.empty()) {
    return InvalidField(field, problem);
  }
  return absl::OkStatus();
}

absl::Status ValidateCount(absl::string_view field, size_t n, const Limits& limits) {
  if (n == 0) return InvalidField(field, "at least one is required");
  if (n > limits.max_members_per_request) {
    return InvalidField(field, absl::StrFormat("%d entries exceed the limit of %d", n,
                                               limits.max_members_per_request));
  }
  return absl::OkStatus();
}

absl::Status ValidateKeys(absl::Span<const absl::string_view> keys, const Limits& limits) {
  return ValidateKeyList(
      "keys", keys.size(), [&](size_t i) { return keys[i]; }, "", limits);
}

absl::Status ValidatePageSize(int page_size) {
  if (page_size < 0) return InvalidField("page_size", "must not be negative");
  return absl::OkStatus();
}

size_t EffectivePageSize(int page_size, const Limits& limits) {
  if (page_size == 0) return static_cast<size_t>(limits.default_page_size);
  return static_cast<size_t>(std::min(page_size, limits.max_page_size));
}

absl::StatusOr<int64_t> DeadlineOf(const Expiration& e, absl::string_view prefix, absl::Time now,
                                   PastDeadline past, const Limits& limits) {
  return DeadlineOfImpl(
      e, [prefix] { return prefix; }, now, past, limits);
}

absl::StatusOr<int64_t> ValidateMemberWrite(size_t index, absl::string_view value,
                                            const Expiration& expiration, bool keep_expiration,
                                            absl::Time now, const Limits& limits) {
  // Formatted only for an error: this runs per member.
  const auto prefix = [index] { return absl::StrCat("members[", index, "]."); };
  if (value.size() > limits.max_value_bytes) {
    return InvalidField(
        absl::StrCat(prefix(), "value"),
        absl::StrFormat("%d bytes exceeds the limit of %d", value.size(), limits.max_value_bytes));
  }
  if (keep_expiration && expiration.kind != Expiration::Kind::kNone) {
    return InvalidField(absl::StrCat(prefix(), "keep_expiration"),
                        "cannot be combined with ttl or expire_time");
  }
  return DeadlineOfImpl(expiration, prefix, now, PastDeadline::kRejected, limits);
}

}  // namespace lapse
