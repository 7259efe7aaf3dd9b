// WriteStreamReactor: one StreamWrites stream; WriteStreams: the open ones.
//
// The reactor reads one request at a time and starts its operations in the
// store, in order, as soon as it is read, so operations are applied in the
// order sent. The store answers each, maybe later and from another thread;
// once every operation of a request is answered its response is written,
// responses in the order the requests were read, one write in flight. At
// most kMaxRequestsInFlight requests are read and not yet answered on the wire:
// past that the reactor stops reading until the oldest response is written,
// and HTTP/2 flow control holds the client back. An operation that fails is
// answered with its status and the stream goes on.
//
// Requests arrive as bytes and are read in place (request_parser.h,
// StreamWritesView); a request that is not a valid StreamWritesRequest ends
// the stream INVALID_ARGUMENT saying what is wrong, once the requests read
// before it are answered. Responses are written as bytes, encoded by hand
// (proto_convert.h: each put's answer by PutMembersBytes, the response by
// EncodeStreamWritesResponse), and freed with their request once written.
//
// The stream ends OK once the client has closed its side and every response
// is written. Draining (WriteStreams::StartDraining) stops reading: requests
// read before it are answered, later ones are not applied, and the stream
// ends UNAVAILABLE. A stream that breaks (a write fails, the call is
// cancelled) ends once the store has answered every operation it started.
//
//   // In LapseServiceImpl::StreamWrites:
//   return new lapse::WriteStreamReactor(store, &HandlePutMembers, &streams);
//
// The reactor finishes exactly once and deletes itself in OnDone, after
// leaving WriteStreams. It never blocks: its mutex guards only its own state
// and is not held while an operation runs in the store. Thread-safe.
#ifndef LAPSE_SERVER_SERVICE_WRITE_STREAM_REACTOR_H_
#define LAPSE_SERVER_SERVICE_WRITE_STREAM_REACTOR_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "lapse/v1/lapse.pb.h"
#include "server/base/mutex.h"
#include "server/service/operation.h"
#include "server/service/request_parser.h"
#include "server/storage/store.h"

namespace lapse {

class WriteStreamReactor;

// The open StreamWrites streams. Thread-safe.
class WriteStreams {
 public:
  WriteStreams() = default;
  WriteStreams(const WriteStreams&) = delete;
  WriteStreams& operator=(const WriteStreams&) = delete;

  // False once draining: the stream must not start.
  bool Add(WriteStreamReactor* stream);
  void Remove(WriteStreamReactor* stream);
  // Drains every open stream and refuses new ones. Cannot be undone.
  void StartDraining();

 private:
  Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<WriteStreamReactor*> open_ ABSL_GUARDED_BY(mu_);
};

class WriteStreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Starts a PutMembers operation: the unary RPC's work (lapse_service.cc),
  // after the caller's authorization for it. Called on gRPC's threads, one
  // operation at a time per stream.
  // The answer is a serialized PutMembersResponse.
  using PutHandler =
      std::function<absl::Status(Store&, const PutMembersView&, std::string*, OperationEnd*)>;

  static constexpr size_t kMaxRequestsInFlight = 64;

  // Serves the stream with `store`, starting puts with `put`; registers with
  // `streams`, or finishes UNAVAILABLE when they are draining. A stream whose
  // caller was refused (`refusal` not OK, e.g. UNAUTHENTICATED) finishes with
  // it at once, reading nothing. Allocate with new: the reactor deletes
  // itself. `store` and `streams` must outlive it.
  WriteStreamReactor(Store* store, PutHandler put, WriteStreams* streams,
                     const absl::Status& refusal = absl::OkStatus());
  WriteStreamReactor(const WriteStreamReactor&) = delete;
  WriteStreamReactor& operator=(const WriteStreamReactor&) = delete;

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  friend class WriteStreams;
  class Op;

  ~WriteStreamReactor() override;

  // Stops reading; ends the stream once the operations read are answered.
  void Drain();
  // Operation `index` of `op` is over with `status` (Op::Part::End).
  void Ended(Op* op, int index, const absl::Status& status);
  // Starts `op`'s operations in the store; each ends now or later.
  void Run(Op* op);

  void ReadNext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the oldest answer when it is ready and no write is in flight.
  void MaybeWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finishes once nothing is left to do.
  void MaybeFinish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  Store* const store_;
  const PutHandler put_;
  WriteStreams* const streams_;

  Mutex mu_;
  // The operation the read in flight fills; null between reads.
  std::unique_ptr<Op> reading_ ABSL_GUARDED_BY(mu_);
  // Requests read and not yet answered on the wire, oldest first.
  std::deque<std::unique_ptr<Op>> ops_ ABSL_GUARDED_BY(mu_);
  // Requests read with operations whose End has not come yet.
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  // No read in flight, none started by OnReadDone: the next is up to
  // OnWriteDone, once fewer than kMaxRequestsInFlight requests wait.
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  // The client closed its side (or the call broke): no more reads.
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  // A write failed or the call was cancelled: answers are dropped.
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  // Not OK once a request could not be read: the stream ends with it.
  absl::Status malformed_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_WRITE_STREAM_REACTOR_H_
