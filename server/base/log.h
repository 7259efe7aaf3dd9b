// Log: the server's diagnostic lines, the one sink for the whole server
// (lapse's own lines, and protobuf's and gRPC's, which the service and the
// server route here), written to stderr as
//
//   lapsed WARNING: cut a torn write-ahead log tail: 12 bytes at the end of ...
//
// or, with SetLogFormat(LogFormat::kJson) (lapsed --log_format=json), as one
// JSON object per line for a log collector:
//
//   {"time":"2026-11-23T17:02:15.123456Z","level":"warning","message":"cut a ..."}
//
// where the message is a JSON string whatever its bytes: control characters
// are escaped and bytes that are not UTF-8 become U+FFFD.
//
// A process-wide minimum level (lapsed sets it from --log_level; info until
// then) drops the lines less severe than it, without formatting them.
//
//   lapse::SetMinLogLevel(lapse::LogLevel::kWarning);
//   lapse::Log(lapse::LogLevel::kError, "snapshot failed: %s", status.message());
//
// The format is absl::StrFormat's, checked at compile time.
//
// Lines that anyone can cause (a client's malformed request, a library's
// complaint about it) go through a RateLimitedLog, so that a flood of them
// cannot flood the log:
//
//   static lapse::RateLimitedLog* const refusals =
//       new lapse::RateLimitedLog(10, absl::Minutes(1));
//   refusals->Log(lapse::LogLevel::kWarning, "refused a malformed %s", type);
//
// Thread-safe: each line is written whole with one call, so lines logged by
// different threads never interleave.
#ifndef LAPSE_SERVER_BASE_LOG_H_
#define LAPSE_SERVER_BASE_LOG_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/base/clock.h"
#include "server/base/mutex.h"

namespace lapse {

// From least to most severe.
enum class LogLevel { kInfo, kWarning, kError };

// "info", "warning" or "error"; false for anything else.
bool ParseLogLevel(absl::string_view name, LogLevel* level);

// Lines less severe than `level` are dropped from now on.
void SetMinLogLevel(LogLevel level);

enum class LogFormat { kText, kJson };

// "text" or "json"; false for anything else.
bool ParseLogFormat(absl::string_view name, LogFormat* format);

// Lines are written in `format` from now on (text until then).
void SetLogFormat(LogFormat format);

// One line as it is written, with its newline.
std::string FormatLogLine(LogFormat format, absl::Time time, LogLevel level,
                          absl::string_view message);

namespace log_internal {
bool Enabled(LogLevel level);
void Write(LogLevel level, absl::string_view message);
}  // namespace log_internal

template <typename... Args>
void Log(LogLevel level, const absl::FormatSpec<Args...>& format, const Args&... args) {
  if (!log_internal::Enabled(level)) return;
  log_internal::Write(level, absl::StrFormat(format, args...));
}

// Writes at most `max_lines` lines per `interval` (intervals start with the
// first line after the previous one ended) and counts the rest; the first line
// let through after lines were dropped is preceded by one saying how many.
// The count waits for that line: nothing is written by a timer.
class RateLimitedLog {
 public:
  RateLimitedLog(int max_lines, absl::Duration interval, const Clock* clock = RealClock());
  RateLimitedLog(const RateLimitedLog&) = delete;
  RateLimitedLog& operator=(const RateLimitedLog&) = delete;

  template <typename... Args>
  void Log(LogLevel level, const absl::FormatSpec<Args...>& format, const Args&... args) {
    if (!log_internal::Enabled(level)) return;
    int64_t dropped = 0;
    if (!Admit(&dropped)) return;
    if (dropped > 0) WriteDropped(level, dropped);
    log_internal::Write(level, absl::StrFormat(format, args...));
  }

 private:
  // Whether a line may be written now; if so, `dropped` is how many were
  // dropped since the last line written.
  bool Admit(int64_t* dropped);
  void WriteDropped(LogLevel level, int64_t dropped) const;

  // Constant after construction.
  const int max_lines_;
  const absl::Duration interval_;
  const Clock* const clock_;

  Mutex mu_;
  absl::Time interval_end_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int written_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// Test-only: lines go to `sink` instead of stderr; nullptr restores stderr.
// The caller keeps `sink` open until it is replaced.
void SetLogSinkForTesting(std::FILE* sink);

}  // namespace lapse

#endif  // LAPSE_SERVER_BASE_LOG_H_
