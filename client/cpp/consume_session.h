// ConsumeSession: the machinery behind a Consumer (lapse/consumer.h).
//
// One Consume call at a time (a Call, on gRPC's callback API) and one thread
// of its own that opens it, waits for it to end and opens the next after a
// backoff, under the same consumer name. The Call's reactions only record
// what arrived and start the next read or write (they never block and never
// run user code): deliveries, loss reports and refusals become Items that
// NextItem() hands out; lease operations (ack, nack, extend) wait in
// `unsent_`, go up in one request at a time (together, up to kMaxLeases per
// list), and each gets its answer through its Done once the response to its
// request arrives. When a Call ends, the operations it had sent and not had
// answered go back to the front of `unsent_` and are sent again on the next.
//
// Flow control: a read is started only while fewer than max_in_flight
// deliveries are held (received and not yet acked or nacked: `held_`), or
// while requests await their answers.
//
// Stopping: no item is handed out any more; the handler running (if any)
// answers its delivery; the operations owed are answered (up to
// stop_timeout); the call is cancelled; and the deliveries never handed out
// are released by a unary Nack, now that no stream could receive them again.
//
//   auto session = std::make_unique<ConsumeSession>(connection, options, backoff);
//   absl::StatusOr<ConsumeSession::Item> item = session->NextItem(absl::Seconds(1));
//   session->Send(LeaseOp::kAck, item->delivery, absl::ZeroDuration(),
//                 [](const absl::Status& answer) { ... });
//   session->Stop();  // joins the thread; every Done has run
//
// Thread-safe. Dones run on gRPC's threads or in Stop(), without the lock.
#ifndef LAPSE_CLIENT_CPP_CONSUME_SESSION_H_
#define LAPSE_CLIENT_CPP_CONSUME_SESSION_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cpp/connection.h"
#include "grpcpp/support/status.h"
#include "lapse/client.h"
#include "lapse/consumer.h"
#include "lapse/v1/lapse.pb.h"
#include "server/base/mutex.h"

namespace lapse::client::internal {

enum class LeaseOp { kAck, kNack, kExtend };

class ConsumeSession final {
 public:
  // The answer to one lease operation.
  using Done = std::function<void(const absl::Status&)>;

  // What NextItem hands out.
  struct Item {
    enum class Kind { kDelivery, kLost, kRefused };
    Kind kind = Kind::kDelivery;
    // kDelivery.
    Delivery delivery;
    // kLost: the sequences lost to retention.
    uint64_t lost_first = 0;
    uint64_t lost_last = 0;
    // kRefused (see Refused()).
    LeaseResult refused;
  };

  // Leases per list of one request, at most (the server's
  // --max_members_per_request defaults to 1000).
  static constexpr size_t kMaxLeases = 100;

  // Starts the thread and the first call.
  ConsumeSession(std::shared_ptr<Connection> connection, const ConsumerOptions& options,
                 const BackoffPolicy& backoff);
  ~ConsumeSession();
  ConsumeSession(const ConsumeSession&) = delete;
  ConsumeSession& operator=(const ConsumeSession&) = delete;

  // The next item, waiting up to `timeout`: DEADLINE_EXCEEDED, CANCELLED once
  // stopping, or the status that ended the session. `for_handler`: a
  // delivery goes to a handler of Run's, which calls Handled() once it has
  // Sent its answer; Stop() waits for that.
  absl::StatusOr<Item> NextItem(absl::Duration timeout, bool for_handler = false);
  void Handled();
  // Queues an operation on `delivery`'s lease; `done` gets its answer (see
  // lapse/consumer.h). An ack or nack frees the delivery's place.
  void Send(LeaseOp op, const Delivery& delivery, absl::Duration extension, Done done);
  // Queues a kRefused item for NextItem (Run's report of a refused answer).
  void Refused(const LeaseResult& result);
  // See Consumer::Stop. Idempotent.
  void Stop();
  // Whether Stop() was called.
  bool stopping() const;
  ConsumerStats stats() const;

 private:
  class Call;
  // One lease operation and who wants its answer.
  struct Pending {
    LeaseOp op = LeaseOp::kAck;
    LeaseRef lease;
    absl::Duration extension;
    Done done;
    // Sent on a stream that ended before answering it.
    bool resent = false;
  };
  // An answer to hand to its Done once mu_ is released.
  struct Answer {
    Done done;
    absl::Status status;
  };

  // The thread: calls and reconnects until stopped or a status that is not
  // retried.
  void Loop();
  // Opens a call and waits for it to end; its status.
  grpc::Status RunCall();

  // Reactions of the current Call.
  void OnWriteDone(bool ok);
  void OnReadDone(bool ok);
  void OnDone(const grpc::Status& status);

  // Starts the next read or write if the rules above allow.
  void ReadIfAllowedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteIfAllowedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes what `response_` carries: deliveries, a loss, answers.
  void TakeResponseLocked(std::vector<Answer>* answers) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AnswerLocked(Pending& pending, absl::Status status, std::vector<Answer>* answers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The stream cannot go on: releases the Call's hold once (outside mu_:
  // returns whether the caller must).
  bool EndingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers every operation left with `status`.
  void AnswerAllLocked(const absl::Status& status, std::vector<Answer>* answers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Deliver(std::vector<Answer> answers);

  // Constant after construction.
  const std::shared_ptr<Connection> connection_;
  const ConsumerOptions options_;
  const size_t max_in_flight_;
  const size_t max_batch_;
  const BackoffPolicy backoff_;

  // State below is protected by mu_; cv_ is signalled on every change that
  // a waiter may be waiting for.
  mutable Mutex mu_;
  CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Set once Stop() has drained (or given up): the thread ends the call.
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  // Not OK once the session ended by itself.
  absl::Status ended_ ABSL_GUARDED_BY(mu_);
  std::deque<Item> items_ ABSL_GUARDED_BY(mu_);
  // Sequences of the deliveries received and not yet acked or nacked.
  std::set<uint64_t> held_ ABSL_GUARDED_BY(mu_);
  // Deliveries with a handler of Run's, which runs on handler_thread_.
  size_t handling_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread::id handler_thread_ ABSL_GUARDED_BY(mu_);
  // Operations to send, oldest first, and those sent, one entry per request
  // (acks, then nacks, then extends, as the request lists them).
  std::deque<Pending> unsent_ ABSL_GUARDED_BY(mu_);
  std::deque<std::vector<Pending>> sent_ ABSL_GUARDED_BY(mu_);
  ConsumerStats stats_ ABSL_GUARDED_BY(mu_);

  // The current call; replaced only by the thread, after its OnDone.
  Call* call_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Its state: a read or a write in flight; the hold released (the stream
  // is ending); OnDone ran, with this status; a response arrived.
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status done_status_ ABSL_GUARDED_BY(mu_);
  bool got_response_ ABSL_GUARDED_BY(mu_) = false;
  // The request being written and the response being read.
  v1::ConsumeRequest request_ ABSL_GUARDED_BY(mu_);
  v1::ConsumeResponse response_ ABSL_GUARDED_BY(mu_);

  // State below is protected by join_mu_; it serializes joins.
  Mutex join_mu_;
  std::thread thread_ ABSL_GUARDED_BY(join_mu_);
};

}  // namespace lapse::client::internal

#endif  // LAPSE_CLIENT_CPP_CONSUME_SESSION_H_
