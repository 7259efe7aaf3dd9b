#include "client/cpp/write_stream.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "client/cpp/convert.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"

namespace lapse::client::internal {

// Operations queued while a request is in flight go together in the next, up
// to this many bytes (well under the 4 MiB a server takes by default).
constexpr size_t kMaxRequestBytes = 1 << 20;

// One operation: its request, and its answer once it has come.
struct WriteStream::Op {
  v1::PutMembersRequest request;
  // Its caller waits on it, with the WriteStream's mu_.
  CondVar cv;
  // Its caller gave up (deadline): not sent if it has not been yet.
  bool abandoned = false;
  bool answered = false;
  absl::Status status;
  v1::PutMembersResponse response;
};

// One StreamWrites stream. Its state is guarded by the WriteStream's mu_; it
// deletes itself in OnDone, after answering every operation left.
class WriteStream::Call final
    : public grpc::ClientBidiReactor<v1::StreamWritesRequest, v1::StreamWritesResponse> {
 public:
  explicit Call(WriteStream* owner) : owner_(owner) {}

  // The context, for the metadata the stream is opened with.
  grpc::ClientContext* context() { return &context_; }

  // Opens the stream.
  void Start() {
    owner_->stub_->async()->StreamWrites(&context_, this);
    StartRead(&response_);
    StartCall();
  }

  // Sends `op` after the operations before it. REQUIRES: owner_->mu_, which
  // WriteStream::Put holds as its own mu_, a name the analysis cannot match.
  void Send(std::shared_ptr<Op> op) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    unsent_.push_back(std::move(op));
    if (!writing_) WriteNext();
  }

  // Ends the stream; OnDone follows.
  void Cancel() { context_.TryCancel(); }

  void OnWriteDone(bool ok) override {
    MutexLock lock(&owner_->mu_);
    writing_ = false;
    // A failed write ends the stream: OnDone answers what is left.
    if (ok && !unsent_.empty()) WriteNext();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // The stream is ending: OnDone follows.
    MutexLock lock(&owner_->mu_);
    if (!sent_.empty()) {
      std::vector<std::shared_ptr<Op>>& ops = sent_.front();
      for (size_t i = 0; i < ops.size(); ++i) {
        Op& op = *ops[i];
        if (i >= static_cast<size_t>(response_.results_size())) {
          op.status = absl::InternalError("the server's response has no result for this write");
        } else if (v1::WriteOperationResult& result = *response_.mutable_results(i);
                   result.code() == 0) {
          op.response = std::move(*result.mutable_put_members());
        } else {
          op.status = FromGrpcStatus(
              grpc::Status(static_cast<grpc::StatusCode>(result.code()), result.message()));
        }
        op.answered = true;
        op.cv.Signal();
      }
      sent_.pop_front();
    }
    response_.Clear();
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    MutexLock lock(&owner_->mu_);
    const absl::Status ended = status.ok()
                                   ? absl::UnavailableError("the write stream ended; write again")
                                   : FromGrpcStatus(status);
    const auto fail = [&ended](const std::shared_ptr<Op>& op) {
      op->status = ended;
      op->answered = true;
      op->cv.Signal();
    };
    for (const std::vector<std::shared_ptr<Op>>& ops : sent_) {
      for (const std::shared_ptr<Op>& op : ops) fail(op);
    }
    for (const std::shared_ptr<Op>& op : unsent_) fail(op);
    sent_.clear();
    unsent_.clear();
    if (owner_->call_ == this) owner_->call_ = nullptr;
    --owner_->live_calls_;
    owner_->call_done_.SignalAll();
    delete this;
  }

 private:
  // Writes the operations waiting, as many as fit in one request.
  void WriteNext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(owner_->mu_) {
    request_.Clear();
    std::vector<std::shared_ptr<Op>> ops;
    size_t bytes = 0;
    while (!unsent_.empty() && (ops.empty() || bytes < kMaxRequestBytes)) {
      std::shared_ptr<Op> op = std::move(unsent_.front());
      unsent_.pop_front();
      if (op->abandoned) continue;
      bytes += op->request.ByteSizeLong();
      *request_.add_operations()->mutable_put_members() = std::move(op->request);
      ops.push_back(std::move(op));
    }
    if (ops.empty()) return;
    writing_ = true;
    StartWrite(&request_);
    sent_.push_back(std::move(ops));
  }

  WriteStream* const owner_;
  grpc::ClientContext context_;
  v1::StreamWritesResponse response_;
  // Guarded by owner_->mu_: operations waiting to be written, and those
  // written and not yet answered, one entry per request, oldest first.
  // request_ carries sent_.back() while writing_.
  std::deque<std::shared_ptr<Op>> unsent_;
  std::deque<std::vector<std::shared_ptr<Op>>> sent_;
  v1::StreamWritesRequest request_;
  bool writing_ = false;
};

WriteStream::WriteStream(v1::LapseService::Stub* stub, BearerToken* token)
    : stub_(stub), token_(token) {}

WriteStream::~WriteStream() {
  MutexLock lock(&mu_);
  if (call_ != nullptr) call_->Cancel();
  while (live_calls_ > 0) call_done_.WaitWithTimeout(&mu_, absl::InfiniteDuration());
}

absl::StatusOr<v1::PutMembersResponse> WriteStream::Put(const v1::PutMembersRequest& request,
                                                        absl::Time deadline) {
  auto op = std::make_shared<Op>();
  op->request = request;
  MutexLock lock(&mu_);
  if (call_ == nullptr) {
    auto call = std::make_unique<Call>(this);
    if (absl::Status added = token_->AddTo(call->context()); !added.ok()) return added;
    ++live_calls_;
    call_ = call.release();
    call_->Start();
  }
  call_->Send(op);
  while (!op->answered) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      op->abandoned = true;
      return absl::DeadlineExceededError(
          "no answer before the call's deadline; the write may or may not have been applied");
    }
    op->cv.WaitWithTimeout(&mu_, left);
  }
  if (!op->status.ok()) return op->status;
  return std::move(op->response);
}

}  // namespace lapse::client::internal
