// WriteStream: PutMembers calls of many threads carried as operations of one
// StreamWrites stream (lapse.proto), which costs the server and the network
// far less per call than a unary call each.
//
// Calls are sent in the order they arrive, one write in flight: the calls
// that arrive while a request is in flight go together in the next one (up
// to 1 MiB), so 16 callers cost the server a few messages, not 16. Each
// caller waits for its own answer (the stream answers in order). The stream
// is opened by the first call and kept open; when it ends (the server shuts
// down, the connection drops) every call waiting on it fails UNAVAILABLE
// (an operation already sent may or may not have been applied, as with a
// unary call that fails so), and the next call opens a new stream. A caller
// whose deadline passes gets DEADLINE_EXCEEDED; its operation is not sent if
// it has not been yet, and its answer is dropped if it has.
//
//   internal::WriteStream writes(&stub, &token);
//   absl::StatusOr<v1::PutMembersResponse> r = writes.Put(request, deadline);
//
// Thread-safe. Destroying it cancels the open stream and waits for it to end.
#ifndef LAPSE_CLIENT_CPP_WRITE_STREAM_H_
#define LAPSE_CLIENT_CPP_WRITE_STREAM_H_

#include <cstddef>
#include <deque>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cpp/bearer_token.h"
#include "lapse/v1/lapse.grpc.pb.h"
#include "server/base/mutex.h"

namespace lapse::client::internal {

class WriteStream final {
 public:
  // `stub` and `token` (sent when a stream is opened) must outlive the
  // WriteStream.
  WriteStream(v1::LapseService::Stub* stub, BearerToken* token);
  ~WriteStream();
  WriteStream(const WriteStream&) = delete;
  WriteStream& operator=(const WriteStream&) = delete;

  // Sends `request` as the stream's next operation and waits, until
  // `deadline`, for its answer: the response, or the operation's error.
  absl::StatusOr<v1::PutMembersResponse> Put(const v1::PutMembersRequest& request,
                                             absl::Time deadline);

 private:
  struct Op;
  class Call;

  // Constant after construction.
  v1::LapseService::Stub* const stub_;
  BearerToken* const token_;

  Mutex mu_;
  // Signalled when a Call is gone.
  CondVar call_done_;
  // The open stream, or null; a Call that ended clears it.
  Call* call_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Calls not yet done (OnDone); the destructor waits for none.
  size_t live_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lapse::client::internal

#endif  // LAPSE_CLIENT_CPP_WRITE_STREAM_H_
