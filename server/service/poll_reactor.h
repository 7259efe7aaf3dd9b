// PollReactor: one Poll call with a `wait` (the long poll).
//
// The reactor registers with the GroupHub on the request's group, then polls
// the store. When the store answers with deliveries or a loss report (or an
// error: NOT_FOUND once the group is deleted), the call is answered. When it
// answers with nothing, the reactor parks: it holds no thread, and polls the
// store again each time the hub wakes it for the group. When the wait ends,
// or the server shuts down, it polls one last time and answers with what is
// deliverable, possibly nothing. A cancelled call is finished at once; a poll
// the store had started then still leases its events, which come back after
// the visibility timeout like those of a lost answer.
//
//   // In LapseServiceImpl, once the request is parsed and authorized:
//   return new lapse::PollReactor(store, &group_hub, request, response, wait);
//
// The reactor finishes exactly once and deletes itself once gRPC is done with
// it (OnDone), the hub holds no reference and the store has answered. It
// never blocks, and never calls the store with its mutex held (the store may
// answer at once). Thread-safe.
#ifndef LAPSE_SERVER_SERVICE_POLL_REACTOR_H_
#define LAPSE_SERVER_SERVICE_POLL_REACTOR_H_

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/support/server_callback.h"
#include "lapse/v1/lapse.pb.h"
#include "server/base/mutex.h"
#include "server/service/group_hub.h"
#include "server/storage/store.h"

namespace lapse {

class PollReactor final : public grpc::ServerUnaryReactor, public GroupWaiter {
 public:
  // Answers `request` into `response` (both must outlive the call), waiting
  // up to `wait` (positive). Allocate with new: the reactor deletes itself.
  PollReactor(Store* store, GroupHub* hub, const v1::PollRequest* request,
              v1::PollResponse* response, absl::Duration wait);

  void OnCancel() override;
  void OnDone() override;

  // GroupWaiter.
  absl::Time Wake(bool readable, absl::Time now) override;
  void Shutdown() override;

 private:
  ~PollReactor() override = default;

  // Polls the store unless a poll is in flight (then polls again after it
  // when `again_`). Requires mu_ not held.
  void PollStore();
  void OnPolled(absl::StatusOr<PollResult> result);
  void FinishOnceLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  Store* const store_;
  GroupHub* const hub_;
  const v1::PollRequest* const request_;
  v1::PollResponse* const response_;
  // Wall time.
  const absl::Time deadline_;

  // State below is protected by mu_.
  Mutex mu_;
  bool polling_ ABSL_GUARDED_BY(mu_) = false;
  // Woken while polling: poll again once the store answers.
  bool again_ ABSL_GUARDED_BY(mu_) = false;
  // The wait is over (deadline or shutdown): the next answer is final.
  bool last_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_POLL_REACTOR_H_
