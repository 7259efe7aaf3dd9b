#include "server/service/write_stream_reactor.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/service/proto_convert.h"

namespace lapse {

// One request of the stream and its operations' answers.
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

  explicit Op(WriteStreamReactor* stream) : stream_(stream) {}
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  // Where the read puts the request's bytes.
  grpc::ByteBuffer* bytes() { return &bytes_; }

  // Reads the request from its bytes: one Part, one result and one answer
  // per operation.
  absl::Status Prepare() {
    absl::Status parsed = ParseRequest(bytes_, &request_);
    bytes_.Clear();  // The request holds what it needs of them.
    if (!parsed.ok()) return parsed;
    const size_t n = request_.operations.size();
    parts_.reserve(n);
    for (size_t i = 0; i < n; ++i) parts_.emplace_back(this, static_cast<int>(i));
    results_.resize(n);
    answers_.resize(n);
    return absl::OkStatus();
  }

  const StreamWritesView& request() const { return request_; }
  Part* part(int index) { return &parts_[static_cast<size_t>(index)]; }

  // Where operation `index` writes its serialized PutMembersResponse, before
  // it ends.
  std::string* answer(int index) { return &answers_[static_cast<size_t>(index)]; }
  // Operation `index` answers with `status` instead.
  void Fail(int index, const grpc::Status& status) {
    results_[static_cast<size_t>(index)].code = static_cast<int32_t>(status.error_code());
    answers_[static_cast<size_t>(index)] = status.error_message();
  }

  // The response, once every operation has ended.
  grpc::ByteBuffer* Encode() {
    for (size_t i = 0; i < results_.size(); ++i) {
      (results_[i].code == 0 ? results_[i].put_members : results_[i].message) = answers_[i];
    }
    response_ = EncodeStreamWritesResponse(results_);
    return &response_;
  }

  // Guarded by the stream's mu_, set before the request joins ops_:
  // operations whose End has not come.
  size_t pending = 0;

 private:
  WriteStreamReactor* const stream_;
  grpc::ByteBuffer bytes_;
  StreamWritesView request_;
  std::vector<Part> parts_;
  std::vector<WriteResultView> results_;
  // Each operation's serialized PutMembersResponse, or its error's message.
  std::vector<std::string> answers_;
  grpc::ByteBuffer response_;
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
  StartRead(reading_->bytes());
}

void WriteStreamReactor::OnReadDone(bool ok) {
  std::unique_ptr<Op> read;
  {
    MutexLock lock(&mu_);
    read = std::move(reading_);
    // After the end, or on a broken call, an operation read is not applied:
    // it would never be answered.
    if (!ok || finished_ || broken_) {
      reads_done_ = true;
      MaybeFinish();
      return;
    }
  }
  // Not under mu_: reading is the request's work, not the stream's.
  const absl::Status parsed = read->Prepare();
  Op* const op = read.get();
  {
    MutexLock lock(&mu_);
    if (!parsed.ok() || finished_ || broken_) {
      if (!parsed.ok()) malformed_ = parsed;
      reads_done_ = true;
      MaybeFinish();
      return;
    }
    op->pending = op->request().operations.size();
    ops_.push_back(std::move(read));
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
  const StreamWritesView& request = op->request();
  // Once the last operation has ended, `op` may be written and freed on
  // another thread: nothing of it is read after that.
  const int n = static_cast<int>(request.operations.size());
  // In order: the store applies each operation when it is called, and makes
  // the request's changes durable together once all are applied (one log
  // write, one fdatasync), not one by one.
  store_->StartTogether([&] {
    for (int i = 0; i < n; ++i) {
      const StreamWritesView::Operation& operation = request.operations[static_cast<size_t>(i)];
      absl::Status status;
      if (operation.has_put_members) {
        status = put_(*store_, operation.put_members, op->answer(i), op->part(i));
      } else {
        status = absl::InvalidArgumentError(
            absl::StrCat("operations[", i, "]: one of put_members must be set"));
      }
      if (!status.ok()) op->part(i)->End(status);
    }
  });
}

void WriteStreamReactor::Ended(Op* op, int index, const absl::Status& status) {
  MutexLock lock(&mu_);
  if (!status.ok()) op->Fail(index, ToGrpcStatus(status));
  if (--op->pending > 0) return;
  --running_;
  MaybeWrite();
  MaybeFinish();
}

void WriteStreamReactor::MaybeWrite() {
  if (writing_ || broken_ || finished_ || ops_.empty() || ops_.front()->pending > 0) return;
  writing_ = true;
  StartWrite(ops_.front()->Encode());
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
  } else if (!malformed_.ok()) {
    status = ToGrpcStatus(malformed_);
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
