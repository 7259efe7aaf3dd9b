#include "client/lapsectl/command.h"

#include <cstdint>
#include <cstdio>
#include <optional>

namespace lapse::cli {

int UsageError(absl::string_view command, absl::string_view message) {
  std::fprintf(stderr, "%s %s: %s\nRun '%s %s --help' for usage.\n", kProgram,
               std::string(command).c_str(), std::string(message).c_str(), kProgram,
               std::string(command).c_str());
  return kError;
}

int Fail(absl::string_view command, const absl::Status& status) {
  std::fprintf(stderr, "%s %s: %s: %s\n", kProgram, std::string(command).c_str(),
               absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  return status.code() == absl::StatusCode::kNotFound ||
                 status.code() == absl::StatusCode::kFailedPrecondition
             ? kUnmet
             : kError;
}

void WriteStdout(absl::string_view text) { std::fwrite(text.data(), 1, text.size(), stdout); }

absl::StatusOr<Paging> PagingFlags(const ParsedArgs& args) {
  Paging paging;
  if (const std::optional<std::string> limit = args.Value("limit")) {
    absl::StatusOr<uint64_t> n = ParseNumberFlag("limit", *limit, 1, UINT64_MAX);
    if (!n.ok()) return n.status();
    paging.limit = *n;
  }
  if (const std::optional<std::string> size = args.Value("page-size")) {
    absl::StatusOr<uint64_t> n = ParseNumberFlag("page-size", *size, 1, INT32_MAX);
    if (!n.ok()) return n.status();
    paging.page_size = static_cast<int>(*n);
  }
  return paging;
}

}  // namespace lapse::cli
