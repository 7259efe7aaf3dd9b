#include "server/service/write_stream_reactor.h"

#include <cassert>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/service/proto_convert.h"

namespace lapse {

// One request of the stream and its response, on their own arena.
class WriteStream::Op final {
 public:
  // Where operation `index` of the request ends.
  class Part final : public OperationEnd {
   public:
    Part(Op* op, int index) : op_(op), index_(index) {}
    void End(const absl::Status& status) override { op_->stream_->Ended(op_, index_, status); }

   private:
    Op* const op_;
    const int index_;
  };

  explicit Op(WriteStream* stream)
      : stream_(stream),
        arena_(MessageArenaOptions()),
        request_(google::protobuf::Arena::CreateMessage<v1::StreamWritesRequest>(&arena_)),
        response_(google::protobuf::Arena::CreateMessage<v1::StreamWritesResponse>(&arena_)) {}
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  v1::StreamWritesRequest* request() { return request_; }
  v1::StreamWritesResponse* response() { return response_; }

  // One Part per operation, and a result for each in the response.
  void Prepare() {
    const int n = request_->operations_size();
    parts_.reserve(static_cast<size_t>(n));
    response_->mutable_results()->Reserve(n);
    for (int i = 0; i < n; ++i) {
      parts_.emplace_back(this, i);
      response_->add_results();
    }
  }
  Part* part(int index) { return &parts_[static_cast<size_t>(index)]; }

  // Guarded by the stream's mu_, set before the request joins ops_:
  // operations whose End has not come.
  size_t pending = 0;

 private:
  WriteStream* const stream_;
  google::protobuf::Arena arena_;
  v1::StreamWritesRequest* const request_;
  v1::StreamWritesResponse* const response_;
  std::vector<Part> parts_;
};

WriteStreams::WriteStreams(Store* store, Open open, RequestCall request)
    : store_(store), open_stream_(std::move(open)), request_(std::move(request)) {}

WriteStreams::~WriteStreams() { assert(!poller_.joinable() && "Stop before destroying"); }

void WriteStreams::Serve(std::unique_ptr<grpc::ServerCompletionQueue> cq) {
  assert(cq_ == nullptr && "Serve is called at most once");
  cq_ = std::move(cq);
  Accept();
  poller_ = std::thread([this] { Poll(); });
}

void WriteStreams::Poll() {
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) {
    const auto* what = static_cast<const WriteStream::Tag*>(tag);
    what->stream->On(what->event, ok);
  }
}

void WriteStreams::Accept() { new WriteStream(this); }

bool WriteStreams::Add(WriteStream* stream) {
  MutexLock lock(&mu_);
  open_.insert(stream);
  return !draining_;
}

void WriteStreams::Remove(WriteStream* stream) {
  MutexLock lock(&mu_);
  open_.erase(stream);
  if (open_.empty()) all_gone_.SignalAll();
}

void WriteStreams::StartDraining() {
  // Held while draining each stream: a stream leaves before it is deleted,
  // so every stream here is alive.
  MutexLock lock(&mu_);
  draining_ = true;
  for (WriteStream* stream : open_) stream->Drain();
}

void WriteStreams::Stop() {
  if (!poller_.joinable()) return;
  {
    // The server is down: the call awaited fails, the streams end, and what
    // keeps one is the store's answer to an operation it started.
    MutexLock lock(&mu_);
    while (!open_.empty()) all_gone_.WaitWithTimeout(&mu_, absl::InfiniteDuration());
  }
  cq_->Shutdown();
  poller_.join();
}

WriteStream::WriteStream(WriteStreams* streams) : streams_(streams) {
  // Not under mu_: draining takes the registry's lock, then each stream's.
  const bool open = streams_->Add(this);
  MutexLock lock(&mu_);
  draining_ = !open;
  context_.AsyncNotifyWhenDone(&done_tag_);
  streams_->request_(&context_, &io_, streams_->cq_.get(), &accepted_tag_);
}

WriteStream::~WriteStream() = default;

void WriteStream::On(Event event, bool ok) {
  // Not under mu_: the registry's lock comes first.
  if (event == Event::kAccepted && ok) streams_->Accept();
  mu_.Lock();
  switch (event) {
    case Event::kAccepted:
      Accepted(ok);
      break;
    case Event::kRead:
      ReadDone(ok);
      break;
    case Event::kWritten:
      WriteDone(ok);
      break;
    case Event::kFinished:
      finishing_ = false;
      break;
    case Event::kDone:
      awaiting_done_ = false;
      // Cancelled, or past its deadline: nothing more can be written.
      if (context_.IsCancelled()) broken_ = true;
      MaybeFinish();
      break;
  }
  UnlockAndMaybeDelete();
}

void WriteStream::Accepted(bool ok) {
  accepting_ = false;
  if (!ok) {
    // The server is shutting down: no call came, and there is nothing to
    // finish.
    finished_ = true;
    return;
  }
  awaiting_done_ = true;
  if (draining_) {
    FinishWith(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
    return;
  }
  absl::StatusOr<WriteStreams::PutHandler> put = streams_->open_stream_(context_);
  if (!put.ok()) {
    FinishWith(ToGrpcStatus(put.status()));
    return;
  }
  put_ = *std::move(put);
  ReadNext();
}

void WriteStream::ReadNext() {
  reading_ = true;
  read_op_ = std::make_unique<Op>(this);
  io_.Read(read_op_->request(), &read_tag_);
}

void WriteStream::ReadDone(bool ok) {
  // After the end, or on a broken call, an operation read is not applied:
  // it would never be answered.
  if (!ok || finished_ || broken_) {
    reading_ = false;
    read_op_.reset();
    reads_done_ = true;
    MaybeFinish();
    return;
  }
  Op* op = read_op_.get();
  op->Prepare();
  op->pending = static_cast<size_t>(op->request()->operations_size());
  ops_.push_back(std::move(read_op_));
  if (op->pending > 0) ++running_;
  // Not under mu_: the store may answer at once, calling Ended. reading_
  // stays set until then, so the stream outlives this call.
  mu_.Unlock();
  Run(op);
  mu_.Lock();
  reading_ = false;
  if (!draining_ && !broken_ && !finished_ && ops_.size() < WriteStreams::kMaxRequestsInFlight) {
    ReadNext();
  } else {
    read_paused_ = true;
  }
  MaybeWrite();  // A request without operations is answered at once.
  MaybeFinish();
}

void WriteStream::Run(Op* op) {
  const v1::StreamWritesRequest& request = *op->request();
  // Once the last operation has ended, `op` may be written and freed on
  // another thread: nothing of it is read after that.
  const int n = request.operations_size();
  // In order: the store applies each operation when it is called.
  for (int i = 0; i < n; ++i) {
    const v1::WriteOperation& operation = request.operations(i);
    v1::WriteOperationResult* result = op->response()->mutable_results(i);
    absl::Status status;
    switch (operation.operation_case()) {
      case v1::WriteOperation::kPutMembers:
        status = put_(*streams_->store_, operation.put_members(), result->mutable_put_members(),
                      op->part(i));
        break;
      case v1::WriteOperation::OPERATION_NOT_SET:
        status = absl::InvalidArgumentError(
            absl::StrCat("operations[", i, "]: one of put_members must be set"));
        break;
    }
    if (!status.ok()) op->part(i)->End(status);
  }
}

void WriteStream::Ended(Op* op, int index, const absl::Status& status) {
  mu_.Lock();
  if (!status.ok()) {
    const grpc::Status answer = ToGrpcStatus(status);
    v1::WriteOperationResult* result = op->response()->mutable_results(index);
    result->clear_result();
    result->set_code(static_cast<int32_t>(answer.error_code()));
    result->set_message(answer.error_message());
  }
  if (--op->pending == 0) {
    --running_;
    MaybeWrite();
    MaybeFinish();
  }
  UnlockAndMaybeDelete();
}

void WriteStream::MaybeWrite() {
  if (writing_ || broken_ || finished_ || ops_.empty() || ops_.front()->pending > 0) return;
  writing_ = true;
  io_.Write(*ops_.front()->response(), &written_tag_);
}

void WriteStream::WriteDone(bool ok) {
  writing_ = false;
  if (ok) {
    ops_.pop_front();
    if (read_paused_ && !draining_ && !broken_ && !finished_ &&
        ops_.size() < WriteStreams::kMaxRequestsInFlight) {
      read_paused_ = false;
      ReadNext();
    }
  } else {
    broken_ = true;
  }
  MaybeWrite();
  MaybeFinish();
}

void WriteStream::Drain() {
  MutexLock lock(&mu_);
  draining_ = true;
  MaybeFinish();
}

void WriteStream::MaybeFinish() {
  // The operations the store has not answered hold a pointer to this
  // stream: it must outlive them. A stream not yet accepted starts drained.
  if (finished_ || accepting_ || writing_ || running_ > 0) return;
  grpc::Status status;
  if (broken_) {
    status = grpc::Status(grpc::StatusCode::CANCELLED, "the stream broke");
  } else if (!ops_.empty()) {
    return;
  } else if (draining_) {
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "server shutting down; operations not answered were not applied");
  } else if (!reads_done_) {
    return;
  }
  FinishWith(status);
}

void WriteStream::FinishWith(const grpc::Status& status) {
  finished_ = true;
  finishing_ = true;
  io_.Finish(status, &finished_tag_);
}

bool WriteStream::Gone() const {
  return !accepting_ && !reading_ && !writing_ && !finishing_ && !awaiting_done_ && running_ == 0;
}

void WriteStream::UnlockAndMaybeDelete() {
  const bool gone = Gone();
  mu_.Unlock();
  if (!gone) return;
  streams_->Remove(this);
  delete this;
}

}  // namespace lapse
