#include "server/base/log.h"

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/base/mutex.h"

namespace lapse {
namespace {

std::atomic<LogLevel> g_min_level{LogLevel::kInfo};
// nullptr: stderr.
std::atomic<std::FILE*> g_sink{nullptr};
// One line at a time. stdio locks its FILEs too, but with glibc's internal
// locks, which ThreadSanitizer cannot see; this one it can.
Mutex g_write_mu;

absl::string_view LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kError:
      return "ERROR";
  }
  return "UNKNOWN";
}

}  // namespace

bool ParseLogLevel(absl::string_view name, LogLevel* level) {
  if (name == "info") {
    *level = LogLevel::kInfo;
  } else if (name == "warning") {
    *level = LogLevel::kWarning;
  } else if (name == "error") {
    *level = LogLevel::kError;
  } else {
    return false;
  }
  return true;
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
  const std::string line = absl::StrCat("lapsed ", LevelName(level), ": ", message, "\n");
  std::FILE* sink = g_sink.load();
  if (sink == nullptr) sink = stderr;
  MutexLock lock(&g_write_mu);
  std::fwrite(line.data(), 1, line.size(), sink);
  std::fflush(sink);
}

}  // namespace log_internal
}  // namespace lapse
