// ConsumeReactor: one Consume stream, a consumer of a group receiving
// deliveries and sending acks, nacks and lease extensions.
//
// The first request must carry `start` alone: the group and consumer names,
// which the caller must be allowed to consume (PERMISSION_DENIED, checked
// first); otherwise the stream ends INVALID_ARGUMENT naming `start`,
// `start.group` or `start.consumer`, and a group that does not exist ends it
// NOT_FOUND. The stream then registers with the
// GroupHub (RESOURCE_EXHAUSTED past --max_consume_streams) and delivers: it
// polls the store for up to `max_batch` events whenever it has room — never
// more than `max_in_flight` deliveries of this stream unacknowledged, not
// released and not lost (a lease whose deadline passed on the store's clock)
// — and again each time the hub says the group may be readable (new events,
// a lease expired or released, a re-drive, a reset). Each batch is one
// response, with the loss report of the poll that found a gap.
//
// Requests are read one at a time: their acks, then nacks, then extends are
// applied through the store, in that order, and answered with their results
// in one response; the next request is read once that response is queued
// (and fewer than kMaxQueuedResponses wait to be written, so a client that
// stops reading is held back by flow control). A request that carries
// `start` again, more leases in a list than --max_members_per_request, or
// `extend` without a positive `extension` ends the stream INVALID_ARGUMENT.
// An idle stream gets an empty response every heartbeat interval (the watch
// streams' --heartbeat_interval) so that a dead peer is noticed.
//
// The stream ends OK once the client has closed its side and every answer
// is written; when the server shuts down, it stops reading and delivering,
// writes what it owes and ends UNAVAILABLE. Ending a stream, in any way,
// releases no lease: a consumer that reconnects with the same name keeps
// them (and can ack them), otherwise they expire after the visibility timeout
// and go to the group's other consumers.
//
//   // In LapseServiceImpl::Consume:
//   return new lapse::ConsumeReactor(store, &group_hub, authorize, absl::OkStatus());
//
// One write in flight; the reactor finishes exactly once (also after
// cancellation) and deletes itself once gRPC is done with it (OnDone), the
// hub holds no reference and the store has answered every operation it
// started. It never blocks and never calls the store with its mutex held.
// Thread-safe.
#ifndef LAPSE_SERVER_SERVICE_CONSUME_REACTOR_H_
#define LAPSE_SERVER_SERVICE_CONSUME_REACTOR_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/support/server_callback.h"
#include "lapse/v1/lapse.pb.h"
#include "server/base/mutex.h"
#include "server/service/group_hub.h"
#include "server/storage/store.h"

namespace lapse {

class ConsumeReactor final
    : public grpc::ServerBidiReactor<v1::ConsumeRequest, v1::ConsumeResponse>,
      public GroupWaiter {
 public:
  // Checks the caller's permission for the stream's start.
  using Authorize = std::function<absl::Status(const v1::ConsumeStart&)>;

  // ConsumeStart::max_batch: the default, and the most.
  static constexpr uint32_t kDefaultMaxBatch = 100;
  static constexpr uint32_t kMaxBatch = 1000;
  // Responses queued for writing before the stream stops reading requests.
  static constexpr size_t kMaxQueuedResponses = 8;

  // Serves the stream with `store`, woken by `hub`; or, when `refusal` is not
  // OK (unauthenticated, draining), finishes with it at once. Allocate with
  // new: the reactor deletes itself.
  ConsumeReactor(Store* store, GroupHub* hub, Authorize authorize, const absl::Status& refusal);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  // GroupWaiter.
  absl::Time Wake(bool readable, absl::Time now) override;
  void Shutdown() override;

 private:
  // A lease delivered on this stream and not yet answered.
  struct Held {
    uint32_t delivery_count = 0;
    absl::Time deadline;
  };
  // The results of one request, gathered as the store answers.
  struct Applying;

  ~ConsumeReactor() override = default;

  // The first request: authorizes and validates it, then looks the group up.
  void Start(const v1::ConsumeRequest& first);
  void OnGroup(const v1::ConsumeStart& start, absl::StatusOr<ConsumerGroupInfo> group);
  // A later request: validates it and applies it, one step at a time.
  void Apply(std::unique_ptr<v1::ConsumeRequest> request);
  void ApplyStep(std::unique_ptr<Applying> applying);
  void Applied(std::unique_ptr<Applying> applying);
  // Polls the store if there is room and no poll is in flight.
  void Deliver();
  void OnPolled(absl::StatusOr<PollResult> result);

  // Deliveries this stream may still have outstanding; forgets leases that
  // expired.
  size_t RoomLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EnqueueLocked(std::unique_ptr<v1::ConsumeResponse> response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the stream once it has closed (or is draining) and owes nothing.
  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishOnceLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  Store* const store_;
  GroupHub* const hub_;
  const Authorize authorize_;
  Clock* const clock_;
  const absl::Duration heartbeat_interval_;

  // State below is protected by mu_.
  Mutex mu_;
  // The request being read (one read in flight at a time).
  v1::ConsumeRequest read_ ABSL_GUARDED_BY(mu_);
  // A request was answered while too many responses were queued.
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  // The client closed its side (or the stream broke).
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  // Set once `start` has been accepted and the stream registered.
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::string group_ ABSL_GUARDED_BY(mu_);
  std::string consumer_ ABSL_GUARDED_BY(mu_);
  size_t max_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  size_t max_batch_ ABSL_GUARDED_BY(mu_) = 0;
  // Store operations in flight: the start's lookup or a request's steps.
  bool applying_ ABSL_GUARDED_BY(mu_) = false;
  bool polling_ ABSL_GUARDED_BY(mu_) = false;
  // Woken while polling: poll again once the store answers.
  bool again_ ABSL_GUARDED_BY(mu_) = false;
  absl::btree_map<uint64_t, Held> held_ ABSL_GUARDED_BY(mu_);
  // Responses to write, the first one in flight while writing_.
  std::deque<std::unique_ptr<v1::ConsumeResponse>> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  // Wall time of the last write started (or of the stream's start).
  absl::Time last_write_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_CONSUME_REACTOR_H_
