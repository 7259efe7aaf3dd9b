// Log: the server's diagnostic lines, written to stderr as
//
//   lapsed WARNING: cut a torn write-ahead log tail: 12 bytes at the end of ...
//
// A process-wide minimum level (lapsed sets it from --log_level; info until
// then) drops the lines less severe than it, without formatting them.
//
//   lapse::SetMinLogLevel(lapse::LogLevel::kWarning);
//   lapse::Log(lapse::LogLevel::kError, "snapshot failed: %s", status.message());
//
// The format is absl::StrFormat's, checked at compile time.
//
// Thread-safe: each line is written whole with one call, so lines logged by
// different threads never interleave.
#ifndef LAPSE_SERVER_BASE_LOG_H_
#define LAPSE_SERVER_BASE_LOG_H_

#include <cstdio>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace lapse {

// From least to most severe.
enum class LogLevel { kInfo, kWarning, kError };

// "info", "warning" or "error"; false for anything else.
bool ParseLogLevel(absl::string_view name, LogLevel* level);

// Lines less severe than `level` are dropped from now on.
void SetMinLogLevel(LogLevel level);

namespace log_internal {
bool Enabled(LogLevel level);
void Write(LogLevel level, absl::string_view message);
}  // namespace log_internal

template <typename... Args>
void Log(LogLevel level, const absl::FormatSpec<Args...>& format, const Args&... args) {
  if (!log_internal::Enabled(level)) return;
  log_internal::Write(level, absl::StrFormat(format, args...));
}

// Test-only: lines go to `sink` instead of stderr; nullptr restores stderr.
// The caller keeps `sink` open until it is replaced.
void SetLogSinkForTesting(std::FILE* sink);

}  // namespace lapse

#endif  // LAPSE_SERVER_BASE_LOG_H_
