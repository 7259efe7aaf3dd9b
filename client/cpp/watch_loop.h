// WatchLoop: the machinery behind a Subscription.
//
// One WatchExpirations call at a time (an Attempt, on gRPC's callback API) and
// one thread of its own that runs the handlers, reconnects with backoff and
// remembers where to resume. The Attempt's reactions only record what arrived
// (they never block and never run user code); the thread hands a response to
// the handlers and only then asks gRPC for the next one, so a slow handler
// slows the server's stream through flow control instead of piling up memory.
//
// Resuming: every response carries examined_sequence and, from a server that
// has them, a resume_token standing for it. The loop keeps the highest
// sequence it has fully handled (position_) and the token of the last
// response it has fully handled (token_), and reconnects with
// START_POSITION_AFTER_TOKEN from the token, so that a server now serving
// another store refuses (OUT_OF_RANGE, reported through on_error) instead of
// streaming from a position that means nothing there; without a token, with
// START_POSITION_AFTER_SEQUENCE from position_. Events at or below position_
// are never delivered again. A stream that ends before its first response
// leaves the position unknown for kNew/kOldest, except that a draining server
// names it ("last delivered sequence N"); otherwise the loop starts over as
// asked.
//
//   auto loop = std::make_unique<WatchLoop>(connection, options,
//                                           std::move(handlers), backoff);
//   ...
//   loop->Cancel();  // joins the thread; no handler runs afterwards
//
// Thread-safe. Must not be destroyed from one of its handlers.
#ifndef LAPSE_CLIENT_CPP_WATCH_LOOP_H_
#define LAPSE_CLIENT_CPP_WATCH_LOOP_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "client/cpp/connection.h"
#include "grpcpp/support/status.h"
#include "lapse/client.h"
#include "lapse/v1/lapse.pb.h"
#include "server/base/mutex.h"

namespace lapse::client::internal {

class WatchLoop final {
 public:
  // Starts the thread and the first call.
  WatchLoop(std::shared_ptr<Connection> connection, const WatchOptions& options,
            WatchHandlers handlers, const BackoffPolicy& backoff);
  ~WatchLoop();
  WatchLoop(const WatchLoop&) = delete;
  WatchLoop& operator=(const WatchLoop&) = delete;

  // See Subscription::Cancel.
  void Cancel();
  // See Subscription::position.
  uint64_t position() const;
  // See Subscription::resume_token.
  std::string resume_token() const;

 private:
  class Attempt;

  // How one call ended.
  struct AttemptEnd {
    grpc::Status status;
    bool got_response = false;
  };

  // The thread: calls, handlers, reconnects, until cancelled or a status that
  // is not retried.
  void Run();
  // Runs one call to its end, delivering what it receives.
  AttemptEnd RunAttempt();
  // Hands the events of `response` beyond position_ to on_event, moving
  // position_ along, then to the response's examined_sequence and token_ to
  // its resume_token (when it has one). Stops early when cancelled.
  void Deliver(const v1::WatchExpirationsResponse& response);
  bool cancelled() const;

  // Reactions of the current Attempt.
  void OnHeaders();
  void OnResponse();
  void OnEnd(const grpc::Status& status);

  bool AttemptHasNews() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const std::shared_ptr<Connection> connection_;
  const WatchOptions options_;
  const WatchHandlers handlers_;
  const BackoffPolicy backoff_;

  // State below is protected by mu_; cv_ is signalled when the current call
  // reports something and on Cancel().
  mutable Mutex mu_;
  CondVar cv_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  // Every event up to here has been handled; unknown before the first
  // response of a kNew or kOldest subscription.
  std::optional<uint64_t> position_ ABSL_GUARDED_BY(mu_);
  // Where to resume, naming the store: the resume_token of the last response
  // fully handled, or the start token; empty when not known.
  std::string token_ ABSL_GUARDED_BY(mu_);
  // The current call, if any; replaced only by the loop's thread, after
  // OnDone. Shared so that Cancel() can call TryCancel outside mu_ (gRPC may
  // run reactions, which take mu_, inside TryCancel) while the loop's thread
  // lets go of a call that just ended.
  std::shared_ptr<Attempt> attempt_ ABSL_GUARDED_BY(mu_);
  // What the current call has reported.
  bool headers_received_ ABSL_GUARDED_BY(mu_) = false;
  bool headers_reported_ ABSL_GUARDED_BY(mu_) = false;
  bool response_ready_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status end_status_ ABSL_GUARDED_BY(mu_);

  // State below is protected by join_mu_; it serializes joins.
  Mutex join_mu_;
  std::thread thread_ ABSL_GUARDED_BY(join_mu_);
};

}  // namespace lapse::client::internal

#endif  // LAPSE_CLIENT_CPP_WATCH_LOOP_H_
