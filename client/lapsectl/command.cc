#include "client/lapsectl/command.h"

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

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

absl::Status FilterFlags(const ParsedArgs& args, std::vector<std::string>* collections,
                         std::string* prefix) {
  if (args.Has("collections") && args.Has("prefix")) {
    return absl::InvalidArgumentError("--collections and --prefix cannot be used together");
  }
  if (const std::optional<std::string> names = args.Value("collections")) {
    *collections = absl::StrSplit(*names, ',', absl::SkipEmpty());
    if (collections->empty()) {
      return absl::InvalidArgumentError("--collections: give at least one name");
    }
  }
  *prefix = args.Value("prefix").value_or("");
  return absl::OkStatus();
}

std::string EventHeader(bool values) {
  return absl::StrCat("SEQUENCE  COLLECTION  KEY  EXPIRE_TIME  EXPIRED_AT", values ? "  VALUE" : "",
                      "\n");
}

std::string EventLine(const client::ExpiryEvent& event, bool json, bool values) {
  if (json) {
    JsonObject object;
    object.Add("sequence", absl::StrCat(event.sequence))
        .AddBytes("collection", event.collection)
        .AddBytes("key", event.key);
    if (values) object.AddBytes("value", event.value);
    object.AddTime("expire_time", event.expire_time).AddTime("expired_at", event.expired_at);
    return object.str() + "\n";
  }
  std::vector<std::string> cells = {absl::StrCat(event.sequence), DisplayValue(event.collection),
                                    DisplayValue(event.key), FormatTimestamp(event.expire_time),
                                    FormatTimestamp(event.expired_at)};
  if (values) cells.push_back(DisplayValue(event.value));
  return absl::StrJoin(cells, "  ") + "\n";
}

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
