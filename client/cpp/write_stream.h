// WriteStream: PutMembers calls carried as operations of one StreamWrites
// stream (lapse.proto), which costs the server and the network far less per
// call than a unary call each. Callers either wait for their answer (Put) or
// are called back with it (PutAsync).
//
// Calls are sent in the order they arrive, one request in flight: the calls
// that arrive while a request waits for its answer go together in the next
// one (up to 1 MiB), written when the answer comes, so 16 calls in flight
// cost the server one or two messages, not 16. That request is written once
// the answer's callbacks have returned, so the calls they make go in it too:
// a client that makes its next call from the last one's callback keeps its
// whole window in each request.
// The stream answers in order. At most `max_in_flight` operations are
// unanswered at a time: a call beyond that waits for room (until its
// deadline), except from inside a PutAsync callback, which never waits. The
// stream is opened by the first call and kept open; when it ends (the server
// shuts down, the connection drops) every call waiting on it fails
// UNAVAILABLE (an operation already sent may or may not have been applied,
// as with a unary call that fails so), and the next call opens a new stream.
// An operation whose deadline passes before it is written is not sent and
// fails DEADLINE_EXCEEDED; a Put whose deadline passes returns
// DEADLINE_EXCEEDED at once and its answer, if one comes, is dropped; a
// PutAsync operation already written is answered by the server or by the
// stream's end.
//
// The stream runs on a completion queue of its own, polled by one thread the
// WriteStream starts with its first stream: reading an answer, handing it
// out and writing the next request happen on that thread, with no hand-off
// between gRPC's threads (a callback-API stream crosses from gRPC's poller to
// its callback threads at every read and write). Callbacks run there too, so
// a Put made from inside one would wait for itself: Connection sends those
// as unary calls (InCallback).
//
// Each operation is encoded by the caller straight into the bytes of the
// request it will go in (Build, write_coding.h), and each answer is read in
// place from the response's bytes: the stream is a generic call
// (grpc::GenericStub) of StreamWrites, and a call builds, serializes and
// parses no protobuf message of its own.
//
//   internal::WriteStream writes(&generic_stub, &token, 1024);
//   absl::StatusOr<std::vector<PutResult>> r = writes.Put(
//       [&](std::string* bytes) { AppendPutMembers(request, bytes); }, deadline);
//   writes.PutAsync([&](std::string* bytes) { ... }, deadline,
//                   [](auto response) { ... });
//
// Thread-safe. Destroying it cancels the open stream, waits for it to end and
// for every callback to return, and joins its thread; it must not be
// destroyed from a callback.
#ifndef LAPSE_CLIENT_CPP_WRITE_STREAM_H_
#define LAPSE_CLIENT_CPP_WRITE_STREAM_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cpp/bearer_token.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/generic/generic_stub.h"
#include "lapse/client.h"
#include "server/base/mutex.h"

namespace lapse::client::internal {

class WriteStream final {
 public:
  // Called once with an operation's answer: the response as the client reads
  // it (FromProto, convert.h), or its error.
  using Done = PutCallback;
  // Appends an operation, one WriteOperation of a StreamWritesRequest as
  // bytes (AppendPutMembers), to the request being built; called once,
  // before Put or PutAsync returns, unless the operation fails before it is
  // queued.
  using Build = absl::FunctionRef<void(std::string*)>;

  // `stub` (a channel's) and `token` (sent when a stream is opened) must
  // outlive the WriteStream. `max_in_flight` >= 1.
  WriteStream(grpc::GenericStub* stub, BearerToken* token, size_t max_in_flight);
  ~WriteStream();
  WriteStream(const WriteStream&) = delete;
  WriteStream& operator=(const WriteStream&) = delete;

  // Sends the request `build` fills as the stream's next operation and
  // waits, until `deadline`, for its answer: the response, or the
  // operation's error.
  absl::StatusOr<std::vector<PutResult>> Put(Build build, absl::Time deadline);

  // Sends the request `build` fills as the stream's next operation and
  // returns once it is queued (after waiting for room, see above); `done` is
  // called with its answer on the stream's thread, or on this one when the
  // operation fails before it is queued. `done` must not block for long: the
  // answers after it wait.
  void PutAsync(Build build, absl::Time deadline, Done done);

  // Whether this thread is running a Done (of any WriteStream).
  static bool InCallback();

 private:
  struct Op;
  class Call;
  // An answer to hand to its operation's Done once mu_ is released.
  struct Answer {
    Done done;
    absl::StatusOr<std::vector<PutResult>> response;
  };

  // Takes one of the max_in_flight_ places for `op` and queues it, built by
  // `build`, on the open stream, opening one if needed; the answers to hand
  // out are added to `answers`. Fails, with `op` not queued, at its deadline
  // or when no stream can be opened.
  absl::Status Enqueue(Op& op, Build build, std::vector<Answer>* answers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees `op`'s place and adds its answer to `answers`.
  void Finish(Op& op, absl::StatusOr<std::vector<PutResult>> response, std::vector<Answer>* answers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands out `answers`; called without mu_.
  static void Deliver(std::vector<Answer> answers);
  // The thread's loop: runs the streams' completions until completions_
  // shuts down.
  void Poll();

  // Constant after construction.
  grpc::GenericStub* const stub_;
  BearerToken* const token_;
  const size_t max_in_flight_;
  // Every stream's completions; shut down by the destructor.
  grpc::CompletionQueue completions_;

  Mutex mu_;
  // Runs Poll; started with the first stream.
  std::thread thread_ ABSL_GUARDED_BY(mu_);
  // Signalled when a Call is gone.
  CondVar call_done_;
  // Signalled when an operation is answered.
  CondVar room_;
  // The open stream, or null; a Call that ended clears it.
  Call* call_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Calls not yet done (OnDone, its callbacks returned); the destructor
  // waits for none.
  size_t live_calls_ ABSL_GUARDED_BY(mu_) = 0;
  // Operations queued and not yet answered.
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // Set by the destructor: no stream is opened any more (a callback run
  // while the last one ends may call PutAsync).
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lapse::client::internal

#endif  // LAPSE_CLIENT_CPP_WRITE_STREAM_H_
