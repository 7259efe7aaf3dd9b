// How the Redis Cluster store reads its scripts' answers: an error reply
// whose first word is a canonical status code ("NOT_FOUND consumer group
// ...") becomes that status; anything else Redis answers with an error is
// INTERNAL.
//
//   router.Send(call, AnswerWith(std::move(done), [](const RedisReply& r) -> absl::StatusOr<T> {
//                 if (r.elements.size() != 2) return Malformed("get");
//                 ...
//               }));
//
// Thread-safe (plain functions).
#ifndef LAPSE_SERVER_STORAGE_REDIS_SCRIPT_REPLY_H_
#define LAPSE_SERVER_STORAGE_REDIS_SCRIPT_REPLY_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/storage/redis/cluster_router.h"
#include "server/storage/redis/redis_reply.h"
#include "server/storage/store.h"

namespace lapse::redis {

// The status of an error reply (see the top comment).
absl::Status StatusOfErrorReply(const RedisReply& error);

// OK for a reply that is not an error reply; else the failed call's status,
// or the error reply's (StatusOfErrorReply). A call the cluster refused for
// lapsed's password (the router's UNAUTHENTICATED) is UNAVAILABLE with the
// router's message (naming Redis and RouterOptions::password_origin), and is
// logged (rate-limited): at lapse's edge UNAUTHENTICATED means the caller's
// own credentials.
absl::Status ReplyStatus(const absl::StatusOr<RedisReply>& reply);

// INTERNAL: `script`'s answer does not have the shape its caller expects.
absl::Status Malformed(absl::string_view script);

// A router callback that calls `done` with `parse` of the reply, or with the
// error (a failed call, or an error reply).
template <typename T, typename Parse>
ClusterRouter::Done AnswerWith(StoreDone<T> done, Parse parse) {
  return [done = std::move(done), parse](absl::StatusOr<RedisReply> reply) mutable {
    if (absl::Status s = ReplyStatus(reply); !s.ok()) {
      std::move(done)(s);
    } else {
      std::move(done)(parse(*reply));
    }
  };
}

}  // namespace lapse::redis

#endif  // LAPSE_SERVER_STORAGE_REDIS_SCRIPT_REPLY_H_
