// BearerToken: the token a Client sends as "authorization: Bearer TOKEN"
// (ClientOptions::bearer_token, or bearer_token_file read again whenever the
// file changes, so a rotated token is picked up without a new Client).
//
//   BearerToken token(options);
//   if (absl::Status s = token.AddTo(&context); !s.ok()) return s;
//
// Thread-safe.
#ifndef LAPSE_CLIENT_CPP_BEARER_TOKEN_H_
#define LAPSE_CLIENT_CPP_BEARER_TOKEN_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "grpcpp/client_context.h"
#include "lapse/client.h"
#include "server/base/mutex.h"

namespace lapse::client::internal {

class BearerToken final {
 public:
  explicit BearerToken(const ClientOptions& options);
  BearerToken(const BearerToken&) = delete;
  BearerToken& operator=(const BearerToken&) = delete;

  // Adds the token to `context`'s metadata, if there is one. UNAUTHENTICATED
  // naming the file when bearer_token_file cannot be read or is empty.
  absl::Status AddTo(grpc::ClientContext* context);

 private:
  // Constant after construction.
  const std::string file_;

  Mutex mu_;
  // The token; from the file as it was when identity_ was taken.
  std::string token_ ABSL_GUARDED_BY(mu_);
  std::string identity_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lapse::client::internal

#endif  // LAPSE_CLIENT_CPP_BEARER_TOKEN_H_
