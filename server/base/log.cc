#include "server/base/log.h"

#include <atomic>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "server/base/enum_names.h"
#include "server/base/mutex.h"
#include "server/base/utf8.h"

namespace lapse {
namespace {

std::atomic<LogLevel> g_min_level{LogLevel::kInfo};
std::atomic<LogFormat> g_format{LogFormat::kText};
// nullptr: stderr.
std::atomic<std::FILE*> g_sink{nullptr};
// One line at a time. stdio locks its FILEs too, but with glibc's internal
// locks, which ThreadSanitizer cannot see; this one it can.
Mutex g_write_mu;

// As --log_level takes them and JSON lines show them; text lines show them in
// capitals.
constexpr EnumName<LogLevel> kLevelNames[] = {
    {LogLevel::kInfo, "info"},
    {LogLevel::kWarning, "warning"},
    {LogLevel::kError, "error"},
};

absl::string_view LevelName(LogLevel level) { return NameOf(kLevelNames, level, "unknown"); }

// `text` as the body of a JSON string: quotes, backslashes and control
// characters escaped, each byte that is not part of valid UTF-8 replaced by
// U+FFFD, so any bytes make a valid JSON string.
void AppendJsonString(absl::string_view text, std::string* out) {
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    uint32_t code_point;
    const size_t length = DecodeUtf8(text.substr(i), &code_point);
    if (length == 0) {
      out->append("\ufffd");
      ++i;
      continue;
    }
    i += length;
    if (length > 1) {
      out->append(text.data() + i - length, length);
    } else if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '\t') {
      out->append("\\t");
    } else if (c == '\r') {
      out->append("\\r");
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppend(out, absl::StrFormat("\\u%04x", c));
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
}

}  // namespace

bool ParseLogFormat(absl::string_view name, LogFormat* format) {
  if (name == "text") {
    *format = LogFormat::kText;
  } else if (name == "json") {
    *format = LogFormat::kJson;
  } else {
    return false;
  }
  return true;
}

void SetLogFormat(LogFormat format) { g_format.store(format, std::memory_order_relaxed); }

std::string FormatLogLine(LogFormat format, absl::Time time, LogLevel level,
                          absl::string_view message) {
  if (format == LogFormat::kText) {
    return absl::StrCat("lapsed ", absl::AsciiStrToUpper(LevelName(level)), ": ", message, "\n");
  }
  std::string line = absl::StrCat(
      "{\"time\":\"", absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", time, absl::UTCTimeZone()),
      "\",\"level\":\"", LevelName(level), "\",\"message\":\"");
  AppendJsonString(message, &line);
  line.append("\"}\n");
  return line;
}

bool ParseLogLevel(absl::string_view name, LogLevel* level) {
  return ParseName(kLevelNames, name, level);
}

void SetMinLogLevel(LogLevel level) { g_min_level.store(level, std::memory_order_relaxed); }

void SetLogSinkForTesting(std::FILE* sink) { g_sink.store(sink); }

RateLimitedLog::RateLimitedLog(int max_lines, absl::Duration interval, const Clock* clock)
    : max_lines_(max_lines), interval_(interval), clock_(clock) {}

bool RateLimitedLog::Admit(int64_t* dropped) {
  const absl::Time now = clock_->Now();
  MutexLock lock(&mu_);
  if (now >= interval_end_) {
    interval_end_ = now + interval_;
    written_ = 0;
  }
  if (written_ >= max_lines_) {
    ++dropped_;
    return false;
  }
  ++written_;
  *dropped = dropped_;
  dropped_ = 0;
  return true;
}

void RateLimitedLog::WriteDropped(LogLevel level, int64_t dropped) const {
  log_internal::Write(
      level, absl::StrCat("dropped ", dropped, " similar lines (at most ", max_lines_, " per ",
                          absl::FormatDuration(interval_), ")"));
}

namespace log_internal {

bool Enabled(LogLevel level) { return level >= g_min_level.load(std::memory_order_relaxed); }

void Write(LogLevel level, absl::string_view message) {
  const std::string line =
      FormatLogLine(g_format.load(std::memory_order_relaxed), absl::Now(), level, message);
  std::FILE* sink = g_sink.load();
  if (sink == nullptr) sink = stderr;
  MutexLock lock(&g_write_mu);
  std::fwrite(line.data(), 1, line.size(), sink);
  std::fflush(sink);
}

}  // namespace log_internal
}  // namespace lapse
