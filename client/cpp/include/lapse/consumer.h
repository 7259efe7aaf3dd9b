// lapse/consumer.h: a consumer of a consumer group over the Consume stream.
//
// A Consumer opens one Consume stream (lapse.proto) as the named consumer of
// a group, receives the deliveries the server pushes, at most max_in_flight
// unanswered, and sends acks, nacks and lease extensions up the same stream.
// Two ways to use it, one per Consumer:
//
//   lapse::client::Client client("127.0.0.1:50051");
//   lapse::client::ConsumerOptions options;
//   options.group = "cancel-orders";
//   options.consumer = "worker-1";
//   lapse::client::Consumer consumer(client, options);
//
//   // A handler, run on the thread that calls Run(): OK acks the event, an
//   // error (or an exception) nacks it for redelivery.
//   lapse::client::ConsumeHandlers handlers;
//   handlers.on_delivery = [](const lapse::client::Delivery& d) {
//     return CancelOrder(d.event.key);
//   };
//   absl::Status ended = consumer.Run(handlers);  // until Stop() or an error
//
//   // Or blocking calls, answered explicitly:
//   absl::StatusOr<lapse::client::Delivery> d = consumer.Next(absl::Seconds(1));
//   if (d.ok()) absl::Status acked = consumer.Ack(*d);  // FAILED_PRECONDITION: lease lost
//
// Reconnection: when the stream breaks (UNAVAILABLE, a dropped connection, a
// server restart) the Consumer opens a new one after a backoff
// (ClientOptions::watch_backoff) under the same consumer name, so the leases
// it holds stay its own: deliveries already received can still be acked, and
// acks, nacks and extensions the server had not answered are sent again on
// the new stream. Each is answered exactly once: OK; FAILED_PRECONDITION when
// the lease is no longer held (it expired and went elsewhere; for one sent
// again after a reconnect, the first send may also have been applied, and
// the message says so); the error that ended the Consumer; or CANCELLED when
// Stop() gave up waiting for it. A stream refused for good (NOT_FOUND: no
// such group; INVALID_ARGUMENT; PERMISSION_DENIED; ...) ends the Consumer
// with that status.
//
// Loss: when the server's retention discarded events the group had not
// received, the range is reported once (Next returns DATA_LOSS naming it;
// Run calls on_lost), never skipped silently.
//
// Flow control and memory: the server sends at most max_in_flight deliveries
// not yet answered on a stream, and leases at most the group's
// max_unacked_per_consumer to one consumer name across all its streams. The
// Consumer reads the stream only while it holds fewer than max_in_flight
// deliveries not yet acked or nacked (queued for Next/Run, or handed out),
// or while it waits for the answers to its own requests. So in the steady
// state it holds at most max_in_flight deliveries, a response read for an
// answer may bring at most max_batch more, and whatever happens (a new
// stream after a reconnect starts counting from zero) never more than the
// group's max_unacked_per_consumer, beyond leases that already expired.
//
// Thread-safety: a Consumer is safe for concurrent use; Ack, Nack and Extend
// calls from many threads travel together, one request in flight on the
// stream. Run's handlers run on the thread that called Run, one at a time;
// a handler may call Stop() but must not destroy the Consumer. Use Run or
// Next on one Consumer, not both.
#ifndef LAPSE_CLIENT_CPP_INCLUDE_LAPSE_CONSUMER_H_
#define LAPSE_CLIENT_CPP_INCLUDE_LAPSE_CONSUMER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lapse/client.h"

namespace lapse::client {

namespace internal {
class ConsumeSession;
}  // namespace internal

struct ConsumerOptions {
  // The group (it must exist) and this consumer's name within it: a consumer
  // that comes back under the same name keeps its leases.
  std::string group;
  std::string consumer;
  // Deliveries received and not yet acked or nacked, at most; the server
  // also caps it at the group's max_unacked_per_consumer. 0 counts as 1.
  uint32_t max_in_flight = 100;
  // Deliveries per response at most; 0: max_in_flight. Never more than
  // max_in_flight (nor the server's most, 1000).
  uint32_t max_batch = 0;
  // How long Stop() (and the destructor) waits for the acks, nacks and
  // extensions already asked to be answered.
  absl::Duration stop_timeout = absl::Seconds(5);
};

// The handlers of Consumer::Run, called on Run's thread, one at a time. Only
// on_delivery is required.
struct ConsumeHandlers {
  // Handles one delivery: OK acks it; any other status, or an exception it
  // throws, nacks it so that the group delivers it again (to any consumer,
  // with delivery_count one higher).
  std::function<absl::Status(const Delivery&)> on_delivery;
  // The server's retention discarded the sequences first..last before the
  // group received them: those events will never be delivered. Told once.
  std::function<void(uint64_t first, uint64_t last)> on_lost;
  // The ack or nack of a handled delivery was not applied: FAILED_PRECONDITION
  // when its lease had been lost (the event may be handled twice), or the
  // status that ended the stream. Also counted in ConsumerStats::refused.
  std::function<void(const LeaseResult&)> on_refused;
};

// Counters since the Consumer was made.
struct ConsumerStats {
  uint64_t delivered = 0;
  // Acks and nacks answered OK.
  uint64_t acked = 0;
  uint64_t nacked = 0;
  // Acks, nacks and extensions answered with an error.
  uint64_t refused = 0;
  // Sequences reported lost to retention.
  uint64_t lost_sequences = 0;
  // Streams opened again after one broke.
  uint64_t reconnects = 0;
};

class Consumer final {
 public:
  // Opens the stream at once, over `client`'s channel and credentials, and
  // keeps it open (reconnecting) until Stop() or destruction. The Consumer
  // may outlive the Client. Bad options (an empty group or consumer name, a
  // group that does not exist) end it: Next and Run return the error.
  Consumer(const Client& client, ConsumerOptions options);
  // Stop().
  ~Consumer();
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  // Handles deliveries with `handlers` until Stop() (then OK) or until the
  // Consumer ends with an error (returned). INVALID_ARGUMENT without
  // handlers.on_delivery.
  absl::Status Run(const ConsumeHandlers& handlers);

  // The next delivery, leased to this consumer until its lease_deadline;
  // answer it with Ack, Nack or Extend. Otherwise DATA_LOSS naming the
  // sequences lost to retention (once; the next call goes on),
  // DEADLINE_EXCEEDED when nothing came within `timeout`, CANCELLED after
  // Stop(), or the error that ended the Consumer.
  absl::StatusOr<Delivery> Next(absl::Duration timeout = absl::InfiniteDuration());

  // Acknowledge, release for redelivery, or extend (the lease then ends
  // `extension` after the server's now, at most 12 h) a delivery of this
  // consumer's, and wait for the server's answer (see above), at most
  // ClientOptions::default_timeout (then DEADLINE_EXCEEDED: the request
  // stays queued and is sent when the stream allows).
  absl::Status Ack(const Delivery& delivery);
  absl::Status Nack(const Delivery& delivery);
  absl::Status Extend(const Delivery& delivery, absl::Duration extension);

  // Stops delivering (Next returns CANCELLED, Run returns OK once its
  // handler running, if any, has returned and its answer is sent), waits up
  // to stop_timeout for the answers still owed, closes the stream, and
  // releases the deliveries received and never handed out (a Nack, so that
  // the group delivers them again at once). Idempotent.
  void Stop();

  ConsumerStats stats() const;

 private:
  // Constant after construction.
  const absl::Duration answer_timeout_;
  const std::unique_ptr<internal::ConsumeSession> session_;
};

}  // namespace lapse::client

#endif  // LAPSE_CLIENT_CPP_INCLUDE_LAPSE_CONSUMER_H_
