// BurstStream: one WatchExpirations stream of lapse-watch-burst, on gRPC's
// callback API so that thousands fit in one client without a thread each. It
// reads until it has seen `events` events, then stops reading and holds the
// stream open until Close().
//
//   lapse::soak::BurstStream stream(stub, request, 1000, &tally);
//   tally.WaitFor(&BurstTally::ready, n);   // every stream in place
//   ... expire members ...
//   tally.WaitFor(&BurstTally::filled, n);  // every stream got its events
//   stream.Close();
//   tally.WaitFor(&BurstTally::done, n);
//
// Thread-safe.
#ifndef LAPSE_BENCH_SOAK_BURST_STREAM_H_
#define LAPSE_BENCH_SOAK_BURST_STREAM_H_

#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/load/lapse_load.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"

namespace lapse {
namespace soak {

// How many of the streams have reached each stage.
class BurstTally {
 public:
  // The stage counters WaitFor can wait on.
  enum Stage { kReady, kFilled, kDone };
  void Count(Stage stage);
  // Waits (at most `timeout`) until `count` streams reached `stage`.
  bool WaitFor(Stage stage, size_t count, absl::Duration timeout);
  size_t count(Stage stage);

 private:
  absl::Mutex mu_;
  size_t counts_[3] ABSL_GUARDED_BY(mu_) = {0, 0, 0};
};

class BurstStream final : public grpc::ClientReadReactor<v1::WatchExpirationsResponse> {
 public:
  // Starts the stream. `stub` and `tally` must outlive it.
  BurstStream(load::Stub* stub, const v1::WatchExpirationsRequest& request, size_t events,
              BurstTally* tally);
  // Cancels the stream; the tally counts kDone once it has ended.
  void Close() { context_.TryCancel(); }

  void OnReadInitialMetadataDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  const size_t want_;
  BurstTally* const tally_;
  grpc::ClientContext context_;
  v1::WatchExpirationsResponse response_;
  size_t seen_ = 0;
};

}  // namespace soak
}  // namespace lapse

#endif  // LAPSE_BENCH_SOAK_BURST_STREAM_H_
