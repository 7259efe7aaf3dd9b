#include "client/lapsectl/cli_output.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/base/utf8.h"

namespace lapse::cli {
namespace {

constexpr char kTimeFormat[] = "%Y-%m-%dT%H:%M:%E3SZ";

}  // namespace

absl::StatusOr<absl::Duration> ParseDurationFlag(absl::string_view flag, absl::string_view text) {
  absl::Duration duration;
  if (!absl::ParseDuration(text, &duration)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, "=", text, ": not a duration (write e.g. 1500ms, 30s, 30m or 1h30m)"));
  }
  if (duration <= absl::ZeroDuration() || duration == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", text, ": must be positive and finite"));
  }
  return duration;
}

absl::StatusOr<absl::Time> ParseTimeFlag(absl::string_view flag, absl::string_view text) {
  absl::Time time;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, text, &time, &error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", text,
                     ": not an RFC 3339 time (write e.g. 2025-01-02T15:04:05Z): ", error));
  }
  return time;
}

absl::StatusOr<uint64_t> ParseNumberFlag(absl::string_view flag, absl::string_view text,
                                         uint64_t min, uint64_t max) {
  uint64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < min || value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", text, ": expected a whole number from ", min, " to ", max));
  }
  return value;
}

absl::StatusOr<std::string> ParseHexFlag(absl::string_view flag, absl::string_view text) {
  const bool hex =
      !text.empty() && text.size() % 2 == 0 &&
      std::all_of(text.begin(), text.end(), [](char c) { return absl::ascii_isxdigit(c); });
  if (!hex) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, "=", text, ": expected hexadecimal digits, two per byte, as printed"));
  }
  return absl::HexStringToBytes(text);
}

std::string FormatTimestamp(absl::Time time) {
  return absl::FormatTime(kTimeFormat, time, absl::UTCTimeZone());
}

std::string FormatExpireTime(const std::optional<absl::Time>& time) {
  return time.has_value() ? FormatTimestamp(*time) : "-";
}

std::string FormatRemaining(absl::Time expire_time, absl::Time now) {
  const absl::Duration remaining = absl::Trunc(expire_time - now, absl::Milliseconds(1));
  return absl::FormatDuration(std::max(remaining, absl::ZeroDuration()));
}

std::string DisplayValue(absl::string_view value) {
  const bool printable = IsValidUtf8(value) && std::none_of(value.begin(), value.end(), [](char c) {
                           return static_cast<unsigned char>(c) < 0x20 || c == 0x7F;
                         });
  if (printable) return std::string(value);
  return absl::StrCat("\"", absl::CHexEscape(value), "\"");
}

Table::Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }

void Table::AddRow(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }

std::string Table::Render() const {
  std::vector<size_t> widths;
  for (const std::vector<std::string>& row : rows_) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string out;
  for (const std::vector<std::string>& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      absl::StrAppend(&line, row[i]);
      if (i + 1 < row.size()) {
        line.append(widths[i] - row[i].size() + 2, ' ');
      }
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
        } else {
          out += c;
        }
    }
  }
  out += "\"";
  return out;
}

void JsonObject::AddRaw(absl::string_view key, absl::string_view json) {
  if (!fields_.empty()) fields_ += ",";
  absl::StrAppend(&fields_, JsonQuote(key), ":", json);
}

JsonObject& JsonObject::Add(absl::string_view key, absl::string_view value) {
  AddRaw(key, JsonQuote(value));
  return *this;
}

JsonObject& JsonObject::Add(absl::string_view key, uint64_t value) {
  AddRaw(key, absl::StrCat(value));
  return *this;
}

JsonObject& JsonObject::Add(absl::string_view key, int64_t value) {
  AddRaw(key, absl::StrCat(value));
  return *this;
}

JsonObject& JsonObject::Add(absl::string_view key, bool value) {
  AddRaw(key, value ? "true" : "false");
  return *this;
}

JsonObject& JsonObject::AddTime(absl::string_view key, const std::optional<absl::Time>& time) {
  AddRaw(key, time.has_value() ? JsonQuote(FormatTimestamp(*time)) : "null");
  return *this;
}

JsonObject& JsonObject::AddBytes(absl::string_view key, absl::string_view bytes) {
  if (IsValidUtf8(bytes)) return Add(key, bytes);
  return Add(absl::StrCat(key, "_base64"), absl::Base64Escape(bytes));
}

}  // namespace lapse::cli
