#include "server/storage/redis/redis_script.h"

#include <openssl/sha.h>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

namespace lapse::redis {
namespace {

std::string Sha1Hex(const std::string& data) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

}  // namespace

RedisScript::RedisScript(std::string body) : body_(std::move(body)), sha1_(Sha1Hex(body_)) {}

}  // namespace lapse::redis
