#include "server/storage/redis/script_reply.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/base/log.h"

namespace lapse::redis {

absl::Status StatusOfErrorReply(const RedisReply& error) {
  const std::pair<absl::string_view, absl::StatusCode> kCodes[] = {
      {"INVALID_ARGUMENT", absl::StatusCode::kInvalidArgument},
      {"FAILED_PRECONDITION", absl::StatusCode::kFailedPrecondition},
      {"RESOURCE_EXHAUSTED", absl::StatusCode::kResourceExhausted},
      {"NOT_FOUND", absl::StatusCode::kNotFound},
      {"ALREADY_EXISTS", absl::StatusCode::kAlreadyExists},
  };
  const std::pair<absl::string_view, absl::string_view> parts =
      absl::StrSplit(error.str, absl::MaxSplits(' ', 1));
  for (const auto& [name, code] : kCodes) {
    if (parts.first == name) return absl::Status(code, parts.second);
  }
  return absl::InternalError(absl::StrCat("Redis answered: ", error.str));
}

absl::Status ReplyStatus(const absl::StatusOr<RedisReply>& reply) {
  if (absl::IsUnauthenticated(reply.status())) {
    static RateLimitedLog* const refusals = new RateLimitedLog(10, absl::Minutes(1));
    refusals->Log(LogLevel::kError, "%s", reply.status().message());
    return absl::UnavailableError(reply.status().message());
  }
  if (!reply.ok()) return reply.status();
  if (reply->type == RedisReply::Type::kError) return StatusOfErrorReply(*reply);
  return absl::OkStatus();
}

absl::Status Malformed(absl::string_view script) {
  return absl::InternalError(absl::StrCat("Redis answered the ", script, " script malformed"));
}

}  // namespace lapse::redis
