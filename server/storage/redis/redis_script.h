// RedisScript: a Lua script with its SHA1, for EVALSHA. The router loads it
// on a node that answers NOSCRIPT (a new master after a failover, SCRIPT
// FLUSH) and runs it again there.
//
//   static const RedisScript* const kPut = new RedisScript(R"lua(...)lua");
//   router.Send(RedisCall::Eval(*kPut, {key}, {arg}), done);
//
// Immutable; thread-safe.
#ifndef LAPSE_SERVER_STORAGE_REDIS_REDIS_SCRIPT_H_
#define LAPSE_SERVER_STORAGE_REDIS_REDIS_SCRIPT_H_

#include <string>

namespace lapse::redis {

class RedisScript final {
 public:
  explicit RedisScript(std::string body);

  const std::string& body() const { return body_; }
  // 40 lowercase hex digits, as SCRIPT LOAD answers.
  const std::string& sha1() const { return sha1_; }

 private:
  const std::string body_;
  const std::string sha1_;
};

}  // namespace lapse::redis

#endif  // LAPSE_SERVER_STORAGE_REDIS_REDIS_SCRIPT_H_
