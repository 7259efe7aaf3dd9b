#include "bench/compare/redis_conn.h"

#include <poll.h>

#include "absl/strings/str_cat.h"

namespace lapse {
namespace compare {

std::string ReplyError(const redisReply* reply) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ERROR) return "";
  return std::string(reply->str, reply->len);
}

absl::StatusOr<std::unique_ptr<RedisConn>> RedisConn::Connect(const std::string& host, int port) {
  const timeval timeout = {5, 0};
  redisContext* context = redisConnectWithTimeout(host.c_str(), port, timeout);
  if (context == nullptr) return absl::UnavailableError("redis: out of memory");
  if (context->err != 0) {
    std::string error = absl::StrCat("redis ", host, ":", port, ": ", context->errstr);
    redisFree(context);
    return absl::UnavailableError(error);
  }
  // Back to fully blocking reads: a drain can keep a reply waiting for long.
  const timeval none = {0, 0};
  redisSetTimeout(context, none);
  return std::unique_ptr<RedisConn>(new RedisConn(context));
}

RedisConn::~RedisConn() { redisFree(context_); }

void RedisConn::Append(const std::vector<absl::string_view>& argv) {
  argv_.clear();
  argv_len_.clear();
  for (absl::string_view arg : argv) {
    argv_.push_back(arg.data());
    argv_len_.push_back(arg.size());
  }
  redisAppendCommandArgv(context_, static_cast<int>(argv_.size()), argv_.data(), argv_len_.data());
}

ReplyPtr RedisConn::Reply() {
  void* reply = nullptr;
  if (redisGetReply(context_, &reply) != REDIS_OK) return nullptr;
  return ReplyPtr(static_cast<redisReply*>(reply));
}

ReplyPtr RedisConn::BufferedReply() {
  void* reply = nullptr;
  if (redisGetReplyFromReader(context_, &reply) != REDIS_OK) return nullptr;
  return ReplyPtr(static_cast<redisReply*>(reply));
}

ReplyPtr RedisConn::Command(const std::vector<absl::string_view>& argv) {
  Append(argv);
  return Reply();
}

ReplyPtr RedisConn::ReplyWithin(absl::Duration timeout) {
  // A reply may already be parsed and buffered from an earlier read.
  void* reply = nullptr;
  if (redisGetReplyFromReader(context_, &reply) != REDIS_OK) return nullptr;
  if (reply != nullptr) return ReplyPtr(static_cast<redisReply*>(reply));
  pollfd fd = {context_->fd, POLLIN, 0};
  const int ms = static_cast<int>(absl::ToInt64Milliseconds(timeout));
  if (poll(&fd, 1, ms) <= 0) return nullptr;
  if (redisBufferRead(context_) != REDIS_OK) return nullptr;
  if (redisGetReplyFromReader(context_, &reply) != REDIS_OK) return nullptr;
  return ReplyPtr(static_cast<redisReply*>(reply));
}

std::string RedisConn::error() const {
  return context_->err == 0 ? "" : std::string(context_->errstr);
}

}  // namespace compare
}  // namespace lapse
