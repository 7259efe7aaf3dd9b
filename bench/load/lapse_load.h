// lapse_load: the two halves of every lapse-bench scenario, on the generated
// stubs.
//
// RunPuts keeps `concurrency` PutMembers RPCs in flight on the callback API
// (one thread, many RPCs), each carrying one batch of members (see members.h
// for what member i looks like), until it has written `members` members or
// `duration` has passed.
//
// EventWatcher reads one WatchExpirations stream, on its own thread, filtered
// on the run's collection prefix, and hands every event to an ExpiryLedger.
// Reconnect() drops the stream and resumes it by sequence after a pause, the
// way a client would after a network blip.
//
//   std::vector<std::unique_ptr<v1::LapseService::Stub>> stubs =
//       lapse::load::MakeStubs("127.0.0.1:50051", 1);
//   lapse::load::ExpiryLedger ledger(n);
//   lapse::load::EventWatcher watcher(stubs[0].get(), {.prefix = "run1."}, &ledger);
//   if (!watcher.Start(absl::Seconds(5)).ok()) ...
//   lapse::load::LoadPlan plan{.members = n, ...};
//   lapse::load::LoadOutcome out = lapse::load::RunPuts(stubs, shape, plan);
//
// Thread-safety: RunPuts is a blocking call; EventWatcher is thread-safe.
#ifndef LAPSE_BENCH_LOAD_LAPSE_LOAD_H_
#define LAPSE_BENCH_LOAD_LAPSE_LOAD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/common/ledger.h"
#include "bench/common/load_plan.h"
#include "bench/common/stats.h"
#include "grpcpp/security/credentials.h"
#include "lapse/v1/lapse.grpc.pb.h"

namespace lapse {
namespace load {

using Stub = v1::LapseService::Stub;

// How the channels reach lapsed: plaintext, or TLS (ChannelSecurityFor).
struct ChannelSecurity {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  // The name the server's certificate carries, when not the address's host.
  std::string server_name;
  // Sent with every call when not empty ("authorization: Bearer ..."), for a
  // lapsed with --auth_file.
  std::string bearer_token;
};

// TLS from PEM files, as lapsectl's --tls-* flags: `ca_file` verifies the
// server (empty: the system's roots), `cert_file` and `key_file` (both or
// neither) are the client's for mTLS. INVALID_ARGUMENT naming the file that
// cannot be read.
absl::StatusOr<ChannelSecurity> ChannelSecurityFor(const std::string& ca_file,
                                                   const std::string& cert_file,
                                                   const std::string& key_file,
                                                   const std::string& server_name);

// `channels` stubs, each on its own HTTP/2 connection to `addr`. `addr` may
// list several lapsed replicas, comma-separated: stub i then goes to the
// (i mod n)-th, and there are at least as many stubs as addresses, so
// RunPuts' round-robin spreads the load over them and a watcher on stubs[0]
// watches the first. A positive `lookahead_bytes` sets the per-stream
// receive window the client grants (gRPC's
// GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES); 0 keeps gRPC's default.
std::vector<std::unique_ptr<Stub>> MakeStubs(const std::string& addr, int channels,
                                             int lookahead_bytes = 0,
                                             const ChannelSecurity& security = ChannelSecurity());

// Microseconds since the Unix epoch (an event's deadline).
int64_t TimestampMicros(const google::protobuf::Timestamp& ts);

// `d` as a google.protobuf.Duration (a member's TTL).
void SetDuration(absl::Duration d, google::protobuf::Duration* out);

// What the members look like and where they go.
struct Shape {
  // Prefix of every collection name this run writes (and watches).
  std::string prefix;
  uint64_t collections = 1000;
  size_t batch = 100;
  size_t key_bytes = 16;
  size_t value_bytes = 16;
  int concurrency = 16;
  absl::Duration rpc_timeout = absl::Seconds(30);
  // Members sharing a TTL: false sends it once per request (default_ttl) and
  // asks for the results of members not created only (omit_created_results);
  // true sends it in every member and takes every result.
  bool per_member_ttl = false;
};

// Writes per `plan` (see load_plan.h), spreading RPCs over `stubs`
// round-robin. Blocks until every RPC has completed; the outcome's requests
// are RPCs.
LoadOutcome RunPuts(const std::vector<std::unique_ptr<Stub>>& stubs, const Shape& shape,
                    const LoadPlan& plan);

class EventWatcher {
 public:
  struct Options {
    std::string prefix;
    bool include_values = true;
    size_t key_bytes = 16;
    size_t value_bytes = 16;
  };

  // Does not start reading: see Start. `stub` and `ledger` must outlive the
  // watcher.
  EventWatcher(Stub* stub, Options options, ExpiryLedger* ledger);
  // Cancels the stream and waits for it to end.
  ~EventWatcher();
  EventWatcher(const EventWatcher&) = delete;
  EventWatcher& operator=(const EventWatcher&) = delete;

  // Opens the stream (new events only) and waits until the server has it in
  // place, so no event appended after Start returns is missed.
  absl::Status Start(absl::Duration timeout);
  // Drops the stream, waits `pause`, and resumes after the last
  // examined_sequence received, then waits until the new stream is in place.
  absl::Status Reconnect(absl::Duration pause, absl::Duration timeout);
  // Cancels the stream and waits for it to end.
  void Stop();

  // Stream failures other than our own cancellation, and events whose value
  // was not the one written.
  uint64_t errors() const;
  std::string first_error() const;
  uint64_t responses() const;

 private:
  absl::Status Open(v1::WatchExpirationsRequest request, absl::Duration timeout);
  // Reads one stream until it ends; runs on reader_. A thread blocked in a
  // synchronous Read is always polling the connection, so an event is picked
  // up the moment it arrives (the callback API's reactor, in gRPC 1.51, was
  // seen to leave a burst in the socket for ~70 ms after an idle second).
  void Read(v1::WatchExpirationsRequest request);
  void OnResponse(const v1::WatchExpirationsResponse& response);

  // Constant after construction.
  Stub* const stub_;
  const Options options_;
  ExpiryLedger* const ledger_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  // The live stream's context (owned by the reader thread), or null.
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelling_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t examined_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t errors_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t responses_ ABSL_GUARDED_BY(mu_) = 0;
  std::string first_error_ ABSL_GUARDED_BY(mu_);

  // Started by Open, joined by Stop.
  std::thread reader_;
};

}  // namespace load
}  // namespace lapse

#endif  // LAPSE_BENCH_LOAD_LAPSE_LOAD_H_
