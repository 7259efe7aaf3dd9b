// RedisConn: one blocking hiredis connection, for the Redis peers of
// bench/compare. Commands can be pipelined (Append ... Reply ... Reply) and a
// SUBSCRIBE connection can wait for the next message with a timeout.
//
//   absl::StatusOr<std::unique_ptr<lapse::compare::RedisConn>> conn =
//       lapse::compare::RedisConn::Connect("127.0.0.1", 6379);
//   (*conn)->Append({"HSET", "c1", "k1", "v1"});
//   (*conn)->Append({"ZADD", "deadlines", "1700000000000", "c1\tk1"});
//   lapse::compare::ReplyPtr a = (*conn)->Reply();  // HSET's
//   lapse::compare::ReplyPtr b = (*conn)->Reply();  // ZADD's
//
// Not thread-safe: one thread per connection.
#ifndef LAPSE_BENCH_COMPARE_REDIS_CONN_H_
#define LAPSE_BENCH_COMPARE_REDIS_CONN_H_

#include <hiredis/hiredis.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lapse {
namespace compare {

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

// "ERR ..." for an error reply, "" otherwise.
std::string ReplyError(const redisReply* reply);

class RedisConn {
 public:
  static absl::StatusOr<std::unique_ptr<RedisConn>> Connect(const std::string& host, int port);
  ~RedisConn();
  RedisConn(const RedisConn&) = delete;
  RedisConn& operator=(const RedisConn&) = delete;

  // Queues a command; nothing is sent until Reply (or Flush).
  void Append(const std::vector<absl::string_view>& argv);
  // Sends what is queued and reads the next reply; null when the connection
  // failed (see error()).
  ReplyPtr Reply();
  // A reply already read from the socket and buffered, or null: never
  // blocks. After a Reply, draining these first lets a pipelining client
  // refill its window with one write instead of one per reply.
  ReplyPtr BufferedReply();
  // Append + Reply.
  ReplyPtr Command(const std::vector<absl::string_view>& argv);
  // The next reply if one arrives within `timeout`; null on timeout or
  // failure (error() tells which: empty on timeout).
  ReplyPtr ReplyWithin(absl::Duration timeout);

  std::string error() const;

 private:
  explicit RedisConn(redisContext* context) : context_(context) {}

  redisContext* const context_;
  // Reused by Append so argument arrays are not reallocated per command.
  std::vector<const char*> argv_;
  std::vector<size_t> argv_len_;
};

}  // namespace compare
}  // namespace lapse

#endif  // LAPSE_BENCH_COMPARE_REDIS_CONN_H_
