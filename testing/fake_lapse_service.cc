#include "testing/fake_lapse_service.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace lapse::testing {
namespace {

// A unary call that is never answered: it finishes when the client cancels
// it (or its deadline passes).
class HeldCall final : public grpc::ServerUnaryReactor {
 public:
  void OnCancel() override { Finish(grpc::Status::CANCELLED); }
  void OnDone() override { delete this; }
};

// Plays one scripted stream: headers, the responses one write at a time,
// then its end (or stays open until cancelled).
class ScriptedWatch final : public grpc::ServerWriteReactor<v1::WatchExpirationsResponse> {
 public:
  explicit ScriptedWatch(FakeLapseService::Stream stream) : stream_(std::move(stream)) {
    if (!stream_.send_headers) {
      Finish(stream_.end.value_or(grpc::Status::OK));
      return;
    }
    StartSendInitialMetadata();
    MutexLock lock(&mu_);
    WriteNextLocked();
  }

  void OnWriteDone(bool ok) override {
    MutexLock lock(&mu_);
    if (!ok) {
      FinishOnceLocked(grpc::Status::CANCELLED);
      return;
    }
    WriteNextLocked();
  }
  void OnCancel() override {
    MutexLock lock(&mu_);
    FinishOnceLocked(grpc::Status::CANCELLED);
  }
  void OnDone() override { delete this; }

 private:
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (next_ < stream_.responses.size()) {
      StartWrite(&stream_.responses[next_++]);
    } else if (stream_.end.has_value()) {
      FinishOnceLocked(*stream_.end);
    }
  }
  void FinishOnceLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  const FakeLapseService::Stream stream_;
  Mutex mu_;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

void FakeLapseService::FailFirst(int count, const grpc::Status& status) {
  MutexLock lock(&mu_);
  failures_left_ = count;
  failure_ = status;
}

void FakeLapseService::HoldUnaryCalls() {
  MutexLock lock(&mu_);
  hold_ = true;
}

void FakeLapseService::HoldStreamWrites() {
  MutexLock lock(&mu_);
  hold_writes_ = true;
}

void FakeLapseService::AddStream(Stream stream) {
  MutexLock lock(&mu_);
  streams_.push_back(std::move(stream));
}

int FakeLapseService::calls(absl::string_view method) {
  MutexLock lock(&mu_);
  auto it = calls_.find(method);
  return it == calls_.end() ? 0 : it->second;
}

std::vector<v1::WatchExpirationsRequest> FakeLapseService::watch_requests() {
  MutexLock lock(&mu_);
  return watch_requests_;
}

bool FakeLapseService::WaitForWatchCalls(size_t count) {
  MutexLock lock(&mu_);
  auto arrived = [&]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return watch_requests_.size() >= count; };
  return WaitWithPatience(mu_, cv_, arrived);
}

bool FakeLapseService::WaitForCalls(absl::string_view method, int count) {
  MutexLock lock(&mu_);
  auto arrived = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = calls_.find(method);
    return it != calls_.end() && it->second >= count;
  };
  return WaitWithPatience(mu_, cv_, arrived);
}

grpc::ServerUnaryReactor* FakeLapseService::Answer(grpc::CallbackServerContext* context,
                                                   absl::string_view method) {
  MutexLock lock(&mu_);
  ++calls_[std::string(method)];
  cv_.SignalAll();
  if (hold_) return new HeldCall();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (failures_left_ > 0) {
    --failures_left_;
    reactor->Finish(failure_);
  } else {
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerUnaryReactor* FakeLapseService::PutMembers(grpc::CallbackServerContext* context,
                                                       const v1::PutMembersRequest*,
                                                       v1::PutMembersResponse*) {
  return Answer(context, "PutMembers");
}

grpc::ServerUnaryReactor* FakeLapseService::GetMembers(grpc::CallbackServerContext* context,
                                                       const v1::GetMembersRequest*,
                                                       v1::GetMembersResponse*) {
  return Answer(context, "GetMembers");
}

grpc::ServerUnaryReactor* FakeLapseService::RemoveMembers(grpc::CallbackServerContext* context,
                                                          const v1::RemoveMembersRequest*,
                                                          v1::RemoveMembersResponse*) {
  return Answer(context, "RemoveMembers");
}

grpc::ServerUnaryReactor* FakeLapseService::ExpireMembers(grpc::CallbackServerContext* context,
                                                          const v1::ExpireMembersRequest*,
                                                          v1::ExpireMembersResponse*) {
  return Answer(context, "ExpireMembers");
}

grpc::ServerUnaryReactor* FakeLapseService::PersistMembers(grpc::CallbackServerContext* context,
                                                           const v1::PersistMembersRequest*,
                                                           v1::PersistMembersResponse*) {
  return Answer(context, "PersistMembers");
}

grpc::ServerUnaryReactor* FakeLapseService::ListMembers(grpc::CallbackServerContext* context,
                                                        const v1::ListMembersRequest*,
                                                        v1::ListMembersResponse*) {
  return Answer(context, "ListMembers");
}

grpc::ServerUnaryReactor* FakeLapseService::GetCollection(grpc::CallbackServerContext* context,
                                                          const v1::GetCollectionRequest*,
                                                          v1::GetCollectionResponse*) {
  return Answer(context, "GetCollection");
}

grpc::ServerUnaryReactor* FakeLapseService::ListCollections(grpc::CallbackServerContext* context,
                                                            const v1::ListCollectionsRequest*,
                                                            v1::ListCollectionsResponse*) {
  return Answer(context, "ListCollections");
}

grpc::ServerUnaryReactor* FakeLapseService::DeleteCollection(grpc::CallbackServerContext* context,
                                                             const v1::DeleteCollectionRequest*,
                                                             v1::DeleteCollectionResponse*) {
  return Answer(context, "DeleteCollection");
}

grpc::ServerWriteReactor<v1::WatchExpirationsResponse>* FakeLapseService::WatchExpirations(
    grpc::CallbackServerContext* context, const v1::WatchExpirationsRequest* request) {
  Stream stream;
  {
    MutexLock lock(&mu_);
    ++calls_["WatchExpirations"];
    watch_requests_.push_back(*request);
    cv_.SignalAll();
    if (!streams_.empty()) {
      stream = std::move(streams_.front());
      streams_.pop_front();
    }
  }
  return new ScriptedWatch(std::move(stream));
}

FakeServer::FakeServer() {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(&service_);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    std::fprintf(stderr, "fake server failed to start\n");
    std::abort();
  }
}

FakeServer::~FakeServer() { server_->Shutdown(absl::ToChronoTime(absl::Now())); }

std::string FakeServer::address() const { return absl::StrCat("127.0.0.1:", port_); }

v1::WatchExpirationsResponse Batch(const std::vector<uint64_t>& sequences, uint64_t examined) {
  v1::WatchExpirationsResponse response;
  for (uint64_t sequence : sequences) {
    v1::ExpiryEvent* event = response.add_events();
    event->set_sequence(sequence);
    event->set_collection("c");
    event->set_key(absl::StrCat("k", sequence));
  }
  response.set_examined_sequence(examined);
  return response;
}

// A StreamWrites call: refused at once, or held (see HoldStreamWrites). Its
// own mu_ is taken after the service's, never before.
class HeldWriteStream final
    : public grpc::ServerBidiReactor<v1::StreamWritesRequest, v1::StreamWritesResponse> {
 public:
  // REQUIRES: service->mu_, to register a held call.
  HeldWriteStream(FakeLapseService* service, bool hold) ABSL_NO_THREAD_SAFETY_ANALYSIS
      : service_(service) {
    if (!hold) {
      finished_ = true;
      Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "StreamWrites"));
      return;
    }
    service_->held_writes_.insert(this);
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    // Held for an answer before it is counted: a test that saw the count
    // can have it answered.
    {
      MutexLock lock(&mu_);
      read_.push_back(request_.operations_size());
    }
    {
      MutexLock lock(&service_->mu_);
      service_->stream_write_sizes_.push_back(request_.operations_size());
      std::vector<std::string>& keys = service_->stream_write_keys_.emplace_back();
      for (const v1::WriteOperation& operation : request_.operations()) {
        const auto& members = operation.put_members().members();
        keys.push_back(members.empty() ? "" : members[0].key());
      }
      service_->cv_.SignalAll();
    }
    StartRead(&request_);
  }

  // Queues an answer to every request read and not answered.
  void AnswerAll() {
    MutexLock lock(&mu_);
    if (finished_) return;
    for (int operations : read_) {
      v1::StreamWritesResponse response;
      for (int i = 0; i < operations; ++i) response.add_results()->mutable_put_members();
      unwritten_.push_back(std::move(response));
    }
    read_.clear();
    if (!writing_) WriteNext();
  }

  void OnWriteDone(bool ok) override {
    MutexLock lock(&mu_);
    writing_ = false;
    unwritten_.pop_front();
    if (ok) WriteNext();
  }

  void OnCancel() override {
    MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
    Finish(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    {
      MutexLock lock(&service_->mu_);
      service_->held_writes_.erase(this);
    }
    delete this;
  }

 private:
  void WriteNext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || unwritten_.empty()) return;
    writing_ = true;
    StartWrite(&unwritten_.front());
  }

  FakeLapseService* const service_;
  v1::StreamWritesRequest request_;
  Mutex mu_;
  // Operations per request read and not yet answered.
  std::vector<int> read_ ABSL_GUARDED_BY(mu_);
  // Answers to write, the one being written first.
  std::deque<v1::StreamWritesResponse> unwritten_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

grpc::ServerBidiReactor<v1::StreamWritesRequest, v1::StreamWritesResponse>*
FakeLapseService::StreamWrites(grpc::CallbackServerContext*) {
  MutexLock lock(&mu_);
  ++calls_["StreamWrites"];
  return new HeldWriteStream(this, hold_writes_);
}

void FakeLapseService::AnswerStreamWrites() {
  MutexLock lock(&mu_);
  for (HeldWriteStream* stream : held_writes_) stream->AnswerAll();
}

std::vector<int> FakeLapseService::stream_write_sizes() {
  MutexLock lock(&mu_);
  return stream_write_sizes_;
}

std::vector<std::vector<std::string>> FakeLapseService::stream_write_keys() {
  MutexLock lock(&mu_);
  return stream_write_keys_;
}

bool FakeLapseService::WaitForStreamWriteRequests(size_t count) {
  MutexLock lock(&mu_);
  auto arrived = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stream_write_sizes_.size() >= count;
  };
  return WaitWithPatience(mu_, cv_, arrived);
}

}  // namespace lapse::testing
