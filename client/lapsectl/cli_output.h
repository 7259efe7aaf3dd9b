// What lapsectl reads from and writes for people and scripts: durations and
// RFC 3339 times on input; aligned tables, readable values and one JSON
// object per line on output.
//
//   absl::StatusOr<absl::Duration> ttl = ParseDurationFlag("ttl", "1h30m");
//   Table table({"KEY", "VALUE"});
//   table.AddRow({"a", DisplayValue(value)});
//   std::cout << table.Render();
//   std::cout << JsonObject().Add("key", "a").AddTime("expire_time", t).str();
//
// All functions are pure and thread-safe.
#ifndef LAPSE_CLIENT_LAPSECTL_CLI_OUTPUT_H_
#define LAPSE_CLIENT_LAPSECTL_CLI_OUTPUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lapse::cli {

// ---- Input ------------------------------------------------------------------

// A positive, finite duration such as "1500ms", "30m" or "1h30m"; errors
// name the flag.
absl::StatusOr<absl::Duration> ParseDurationFlag(absl::string_view flag, absl::string_view text);
// An RFC 3339 time such as "2025-01-02T15:04:05Z" or with an offset.
absl::StatusOr<absl::Time> ParseTimeFlag(absl::string_view flag, absl::string_view text);
// A whole number within [min, max].
absl::StatusOr<uint64_t> ParseNumberFlag(absl::string_view flag, absl::string_view text,
                                         uint64_t min, uint64_t max);
// Bytes written as hexadecimal digits, two per byte, e.g. a resume token as
// `lapsectl watch` prints it; not empty.
absl::StatusOr<std::string> ParseHexFlag(absl::string_view flag, absl::string_view text);

// ---- Output -----------------------------------------------------------------

// RFC 3339 in UTC with milliseconds: "2025-01-02T15:04:05.000Z".
std::string FormatTimestamp(absl::Time time);
// "-" for a persistent member.
std::string FormatExpireTime(const std::optional<absl::Time>& time);
// Remaining time to live, to the millisecond ("29m59.5s", "0s").
std::string FormatRemaining(absl::Time expire_time, absl::Time now);
// A value for a table: as is when it is printable UTF-8, otherwise quoted
// with C escapes ("\x00\x01").
std::string DisplayValue(absl::string_view value);

// Columns padded to their widest cell, separated by two spaces.
class Table final {
 public:
  explicit Table(std::vector<std::string> header);
  void AddRow(std::vector<std::string> cells);
  std::string Render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// One JSON object, built field by field, written on one line.
class JsonObject final {
 public:
  JsonObject& Add(absl::string_view key, absl::string_view value);
  JsonObject& Add(absl::string_view key, const char* value) {
    return Add(key, absl::string_view(value));
  }
  JsonObject& Add(absl::string_view key, uint64_t value);
  JsonObject& Add(absl::string_view key, int64_t value);
  JsonObject& Add(absl::string_view key, bool value);
  // A time as FormatTimestamp, or null.
  JsonObject& AddTime(absl::string_view key, const std::optional<absl::Time>& time);
  // Bytes: "<key>" as a string when valid UTF-8, else "<key>_base64".
  JsonObject& AddBytes(absl::string_view key, absl::string_view bytes);
  std::string str() const { return "{" + fields_ + "}"; }

 private:
  void AddRaw(absl::string_view key, absl::string_view json);

  std::string fields_;
};

// `text` (valid UTF-8) as a JSON string literal.
std::string JsonQuote(absl::string_view text);

}  // namespace lapse::cli

#endif  // LAPSE_CLIENT_LAPSECTL_CLI_OUTPUT_H_
