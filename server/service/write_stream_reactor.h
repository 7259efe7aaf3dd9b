// WriteStreams: the StreamWrites streams, served through gRPC's completion
// queue API by one thread of their own; WriteStream: one stream.
//
// Why not the callback API like every other RPC: in gRPC 1.51 each callback
// is handed from the thread that polled to a callback thread, a futex wake and
// a context switch per read and per write; a one-member write costs more in
// those than in the store. Here the thread that polls the queue reads each
// request, starts its operations and writes the answer itself.
//
// A stream reads one request at a time and starts its operations in the
// store, in order, as soon as it is read, so operations are applied in the
// order sent. The store answers each, maybe later and from another thread;
// once every operation of a request is answered its response is written,
// responses in the order the requests were read, one write in flight. At
// most kMaxRequestsInFlight requests are read and not yet answered on the
// wire: past that the stream stops reading until the oldest response is
// written, and HTTP/2 flow control holds the client back. An operation that
// fails is answered with its status and the stream goes on.
//
// Each request and its response live on their own protobuf arena, freed when
// the response has been written.
//
// The stream ends OK once the client has closed its side and every response
// is written. Draining (WriteStreams::StartDraining) stops reading: requests
// read before it are answered, later ones are not applied, and the stream
// ends UNAVAILABLE. A stream that breaks (a write fails, the call is
// cancelled, its deadline passes) ends once the store has answered every
// operation it started.
//
//   // LapseServer:
//   std::unique_ptr<grpc::ServerCompletionQueue> cq = builder.AddCompletionQueue();
//   server = builder.BuildAndStart();
//   streams.Serve(std::move(cq));
//   ...
//   streams.StartDraining();
//   server->Shutdown(deadline);
//   streams.Stop();
//
// Never blocks a thread: a stream's mutex guards only its own state and is
// not held while an operation runs in the store. Thread-safe.
#ifndef LAPSE_SERVER_SERVICE_WRITE_STREAM_REACTOR_H_
#define LAPSE_SERVER_SERVICE_WRITE_STREAM_REACTOR_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/async_stream.h"
#include "lapse/v1/lapse.pb.h"
#include "server/base/mutex.h"
#include "server/service/operation.h"
#include "server/storage/store.h"

namespace lapse {

class WriteStream;

class WriteStreams {
 public:
  using Io = grpc::ServerAsyncReaderWriter<v1::StreamWritesResponse, v1::StreamWritesRequest>;
  // Starts a PutMembers operation: the unary RPC's work (lapse_service.cc),
  // after the caller's authorization for it. Called one operation at a time
  // per stream.
  using PutHandler = std::function<absl::Status(Store&, const v1::PutMembersRequest&,
                                                v1::PutMembersResponse*, OperationEnd*)>;
  // Authenticates a stream's caller: how its puts start, or the status the
  // stream ends with at once (e.g. UNAUTHENTICATED), reading nothing.
  using Open = std::function<absl::StatusOr<PutHandler>(const grpc::ServerContext&)>;
  // Asks gRPC for the next StreamWrites call: the generated
  // RequestStreamWrites, with `cq` as both queues.
  using RequestCall =
      std::function<void(grpc::ServerContext*, Io*, grpc::ServerCompletionQueue* cq, void* tag)>;

  static constexpr size_t kMaxRequestsInFlight = 64;

  // `store` must outlive this.
  WriteStreams(Store* store, Open open, RequestCall request);
  // REQUIRES: Stop has returned, if Serve was called.
  ~WriteStreams();
  WriteStreams(const WriteStreams&) = delete;
  WriteStreams& operator=(const WriteStreams&) = delete;

  // Serves the calls that arrive on `cq`, from now until Stop, on a thread
  // of its own. REQUIRES: the server has started; called at most once.
  void Serve(std::unique_ptr<grpc::ServerCompletionQueue> cq);
  // Drains every open stream and any later one. Cannot be undone.
  void StartDraining();
  // REQUIRES: the server's Shutdown has returned. Waits until every stream
  // has ended and the store has answered its operations, then shuts the
  // queue down and joins the thread. Idempotent.
  void Stop();

 private:
  friend class WriteStream;

  // Starts waiting for the next call.
  void Accept();
  // False once draining: the stream must not start.
  bool Add(WriteStream* stream);
  void Remove(WriteStream* stream);
  // The thread's loop.
  void Poll();

  // Constant after construction.
  Store* const store_;
  const Open open_stream_;
  const RequestCall request_;

  // Set by Serve.
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::thread poller_;

  Mutex mu_;
  CondVar all_gone_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  // Every stream not yet deleted, the one waiting for a call included.
  absl::flat_hash_set<WriteStream*> open_ ABSL_GUARDED_BY(mu_);
};

// One StreamWrites call, from the request for it until it is deleted.
class WriteStream final {
 public:
  // Registers with `streams` and asks gRPC for a call. Allocate with new:
  // the stream deletes itself.
  explicit WriteStream(WriteStreams* streams);
  WriteStream(const WriteStream&) = delete;
  WriteStream& operator=(const WriteStream&) = delete;

 private:
  friend class WriteStreams;
  class Op;

  // What a completion queue tag stands for.
  enum class Event { kAccepted, kRead, kWritten, kFinished, kDone };
  struct Tag {
    WriteStream* stream;
    Event event;
  };

  ~WriteStream();

  // The completion of `event`, on the polling thread.
  void On(Event event, bool ok);
  void Accepted(bool ok) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadDone(bool ok) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteDone(bool ok) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

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
  void FinishWith(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Nothing of gRPC's or the store's refers to this stream any more.
  bool Gone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases mu_; deletes the stream if it is gone.
  void UnlockAndMaybeDelete() ABSL_UNLOCK_FUNCTION(mu_);

  // Constant after construction (gRPC takes the tags by non-const pointer).
  WriteStreams* const streams_;
  Tag accepted_tag_{this, Event::kAccepted};
  Tag read_tag_{this, Event::kRead};
  Tag written_tag_{this, Event::kWritten};
  Tag finished_tag_{this, Event::kFinished};
  Tag done_tag_{this, Event::kDone};

  // Used by gRPC from the request for the call to its end.
  grpc::ServerContext context_;
  WriteStreams::Io io_{&context_};

  Mutex mu_;
  // Set on the polling thread once the call has arrived, before the first
  // read; read only there, by Run.
  WriteStreams::PutHandler put_;
  // Each true while gRPC holds that tag.
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool awaiting_done_ ABSL_GUARDED_BY(mu_) = false;
  // The operation the read in flight fills; null between reads.
  std::unique_ptr<Op> read_op_ ABSL_GUARDED_BY(mu_);
  // Requests read and not yet answered on the wire, oldest first.
  std::deque<std::unique_ptr<Op>> ops_ ABSL_GUARDED_BY(mu_);
  // Requests read with operations whose End has not come yet.
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  // No read in flight, none started by ReadDone: the next is up to
  // WriteDone, once fewer than kMaxRequestsInFlight requests wait.
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  // The client closed its side (or the call broke): no more reads.
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  // A write failed or the call was cancelled: answers are dropped.
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lapse

#endif  // LAPSE_SERVER_SERVICE_WRITE_STREAM_REACTOR_H_
