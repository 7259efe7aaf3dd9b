// GroupConsumer: one consumer of a lapse consumer group for lapse-bench's
// group scenario, reading one Consume stream on a thread of its own and
// acknowledging every delivery at once (one ConsumeRequest per response that
// carried deliveries); the server keeps at most max_in_flight unacknowledged
// on the stream. Every acknowledgement the server accepts goes to a
// GroupLedger; one it refuses, or an event that is not this run's, is an
// error.
//
// A consumer made to die (Options::dies) never acknowledges: once it holds
// max_in_flight events it reports them to the ledger with the time and
// cancels its stream, so its leases run out and go to the others.
//
//   lapse::load::GroupLedger ledger(n, 3);
//   lapse::load::GroupConsumer consumer(stub, {.group = "g", .name = "c0"}, &ledger);
//   consumer.Start();
//   ...
//   consumer.Stop();
//
// Thread-safe.
#ifndef LAPSE_BENCH_LOAD_GROUP_CONSUMER_H_
#define LAPSE_BENCH_LOAD_GROUP_CONSUMER_H_

#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "bench/common/group_ledger.h"
#include "bench/load/lapse_load.h"
#include "grpcpp/client_context.h"

namespace lapse {
namespace load {

class GroupConsumer {
 public:
  struct Options {
    std::string group;
    std::string name;
    // This consumer's number in the ledger.
    int index = 0;
    uint32_t max_in_flight = 100;
    bool dies = false;
    // To check each event's value against the one written, when carried.
    bool include_values = true;
    size_t value_bytes = 16;
  };

  // Does not start reading: see Start. `stub` and `ledger` must outlive the
  // consumer.
  GroupConsumer(Stub* stub, Options options, GroupLedger* ledger);
  // Stop.
  ~GroupConsumer();
  GroupConsumer(const GroupConsumer&) = delete;
  GroupConsumer& operator=(const GroupConsumer&) = delete;

  // Opens the stream on a new thread. Call once.
  void Start();
  // Cancels the stream and waits for its thread. Idempotent.
  void Stop();

  uint64_t responses() const;

 private:
  // Runs on reader_ until the stream ends.
  void Consume();

  // Constant after construction.
  Stub* const stub_;
  const Options options_;
  GroupLedger* const ledger_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  // The live stream's context (owned by the reader thread), or null.
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool cancelling_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t responses_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread reader_;
};

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_LOAD_GROUP_CONSUMER_H_
