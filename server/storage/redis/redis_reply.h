// RedisReply: one reply of a Redis server, copied out of hiredis so it can be
// handed to any thread and kept.
//
//   if (reply.type == RedisReply::Type::kError) return ...reply.str...;
//   for (const RedisReply& e : reply.elements) ...
//
// A plain value; thread-compatible.
#ifndef LAPSE_SERVER_STORAGE_REDIS_REDIS_REPLY_H_
#define LAPSE_SERVER_STORAGE_REDIS_REDIS_REPLY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace lapse::redis {

struct RedisReply {
  enum class Type { kNil, kInteger, kString, kStatus, kError, kArray };

  Type type = Type::kNil;
  int64_t integer = 0;
  // The bytes of a string, a status ("OK") or an error ("ERR ...").
  std::string str;
  std::vector<RedisReply> elements;
};

}  // namespace lapse::redis

#endif  // LAPSE_SERVER_STORAGE_REDIS_REDIS_REPLY_H_
