#include "server/service/write_stream_reactor.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/service/proto_convert.h"

namespace lapse {

// One request of the stream and its response, on their own arena.
class WriteStreamReactor::Op final {
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

  explicit Op(WriteStreamReactor* stream)
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
  WriteStreamReactor* const stream_;
  google::protobuf::Arena arena_;
  v1::StreamWritesRequest* const request_;
  v1::StreamWritesResponse* const response_;
  std::vector<Part> parts_;
};

bool WriteStreams::Add(WriteStreamReactor* stream) {
  MutexLock lock(&mu_);
  if (draining_) return false;
  open_.insert(stream);
  return true;
}

void WriteStreams::Remove(WriteStreamReactor* stream) {
  MutexLock lock(&mu_);
  open_.erase(stream);
}

void WriteStreams::StartDraining() {
  // Held while draining each stream: a stream leaves in OnDone, before it is
  // deleted, so every stream here is alive.
  MutexLock lock(&mu_);
  draining_ = true;
  for (WriteStreamReactor* stream : open_) stream->Drain();
}

WriteStreamReactor::WriteStreamReactor(Store* store, PutHandler put, WriteStreams* streams,
                                       const absl::Status& refusal)
    : store_(store), put_(std::move(put)), streams_(streams) {
  if (!refusal.ok()) {
    MutexLock lock(&mu_);
    finished_ = true;
    Finish(ToGrpcStatus(refusal));
    return;
  }
  // Not under mu_: draining takes the registry's lock, then each stream's.
  const bool added = streams_->Add(this);
  MutexLock lock(&mu_);
  if (!added) {
    finished_ = true;
    Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
    return;
  }
  // Drained since it was added: already finished.
  if (finished_) return;
  ReadNext();
}

WriteStreamReactor::~WriteStreamReactor() = default;

void WriteStreamReactor::ReadNext() {
  reading_ = std::make_unique<Op>(this);
  StartRead(reading_->request());
}

void WriteStreamReactor::OnReadDone(bool ok) {
  Op* op = nullptr;
  {
    MutexLock lock(&mu_);
    // After the end, or on a broken call, an operation read is not applied:
    // it would never be answered.
    if (!ok || finished_ || broken_) {
      reading_.reset();
      reads_done_ = true;
      MaybeFinish();
      return;
    }
    op = reading_.get();
    op->Prepare();
    op->pending = static_cast<size_t>(op->request()->operations_size());
    ops_.push_back(std::move(reading_));
    if (op->pending > 0) ++running_;
  }
  // Not under mu_: the store may answer at once, calling Ended.
  Run(op);
  MutexLock lock(&mu_);
  if (!draining_ && !broken_ && !finished_ && ops_.size() < kMaxRequestsInFlight) {
    ReadNext();
  } else {
    read_paused_ = true;
  }
  MaybeWrite();  // A request without operations is answered at once.
  MaybeFinish();
}

void WriteStreamReactor::Run(Op* op) {
  const v1::StreamWritesRequest& request = *op->request();
  // Once the last operation has ended, `op` may be written and freed on
  // another thread: nothing of it is read after that.
  const int n = request.operations_size();
  // In order: the store applies each operation when it is called, and makes
  // the request's changes durable together once all are applied (one log
  // write, one fdatasync), not one by one.
  store_->StartTogether([&] {
    for (int i = 0; i < n; ++i) {
      const v1::WriteOperation& operation = request.operations(i);
      v1::WriteOperationResult* result = op->response()->mutable_results(i);
      absl::Status status;
      switch (operation.operation_case()) {
        case v1::WriteOperation::kPutMembers:
          status =
              put_(*store_, operation.put_members(), result->mutable_put_members(), op->part(i));
          break;
        case v1::WriteOperation::OPERATION_NOT_SET:
          status = absl::InvalidArgumentError(
              absl::StrCat("operations[", i, "]: one of put_members must be set"));
          break;
      }
      if (!status.ok()) op->part(i)->End(status);
    }
  });
}

void WriteStreamReactor::Ended(Op* op, int index, const absl::Status& status) {
  MutexLock lock(&mu_);
  if (!status.ok()) {
    const grpc::Status answer = ToGrpcStatus(status);
    v1::WriteOperationResult* result = op->response()->mutable_results(index);
    result->clear_result();
    result->set_code(static_cast<int32_t>(answer.error_code()));
    result->set_message(answer.error_message());
  }
  if (--op->pending > 0) return;
  --running_;
  MaybeWrite();
  MaybeFinish();
}

void WriteStreamReactor::MaybeWrite() {
  if (writing_ || broken_ || finished_ || ops_.empty() || ops_.front()->pending > 0) return;
  writing_ = true;
  StartWrite(ops_.front()->response());
}

void WriteStreamReactor::OnWriteDone(bool ok) {
  MutexLock lock(&mu_);
  writing_ = false;
  if (ok) {
    ops_.pop_front();
    if (read_paused_ && !draining_ && !broken_ && !finished_ &&
        ops_.size() < kMaxRequestsInFlight) {
      read_paused_ = false;
      ReadNext();
    }
  } else {
    broken_ = true;
  }
  MaybeWrite();
  MaybeFinish();
}

void WriteStreamReactor::OnCancel() {
  MutexLock lock(&mu_);
  broken_ = true;
  MaybeFinish();
}

void WriteStreamReactor::Drain() {
  MutexLock lock(&mu_);
  draining_ = true;
  MaybeFinish();
}

void WriteStreamReactor::MaybeFinish() {
  // The operations the store has not answered hold a pointer to this
  // reactor: it must outlive them.
  if (finished_ || writing_ || running_ > 0) return;
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
  finished_ = true;
  Finish(status);
}

void WriteStreamReactor::OnDone() {
  streams_->Remove(this);
  delete this;
}

}  // namespace lapse
