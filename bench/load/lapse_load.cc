#include "bench/load/lapse_load.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/common/load_counters.h"
#include "bench/common/members.h"
#include "bench/common/report.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_interceptor.h"
#include "grpcpp/support/sync_stream.h"
#include "proto/recycle.h"

namespace lapse {
namespace load {
namespace {

void SetDeadlineMs(int64_t ms, google::protobuf::Timestamp* ts) {
  ts->set_seconds(ms / 1000);
  ts->set_nanos(static_cast<int32_t>(ms % 1000) * 1'000'000);
}

// Keeps shape.concurrency PutMembers in flight. Each slot owns one request
// that it refills in place (keys are fixed-width, so refilling only rewrites
// digits) to keep the generator's own cost low.
class PutDriver {
 public:
  PutDriver(const std::vector<std::unique_ptr<Stub>>& stubs, const Shape& shape,
            const LoadPlan& plan)
      : shape_(shape),
        plan_(plan),
        counters_(plan, shape.batch),
        slots_(static_cast<size_t>(std::max(1, shape.concurrency))) {
    for (size_t i = 0; i < slots_.size(); ++i) {
      slots_[i].stub = stubs[i % stubs.size()].get();
    }
  }

  LoadOutcome Run() {
    std::unique_ptr<Progress> progress;
    if (plan_.progress) {
      progress = std::make_unique<Progress>([this] {
        return absl::StrCat(counters_.ProgressLine(), ", errors ", counters_.errors());
      });
    }
    {
      absl::MutexLock lock(&mu_);
      active_ = slots_.size();
    }
    for (Slot& slot : slots_) Issue(slot);
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](size_t* active) { return *active == 0; }, &active_));
    }
    progress.reset();
    return counters_.Outcome();
  }

 private:
  struct Slot {
    Stub* stub = nullptr;
    v1::PutMembersRequest request;
    v1::PutMembersResponse response;
    std::unique_ptr<grpc::ClientContext> context;
    int64_t started_us = 0;
    size_t members = 0;
  };

  void Issue(Slot& slot) {
    const std::optional<uint64_t> batch = counters_.NextBatch();
    if (!batch.has_value()) {
      absl::MutexLock lock(&mu_);
      --active_;
      return;
    }
    Fill(*batch, &slot);
    slot.response.Clear();
    slot.context = std::make_unique<grpc::ClientContext>();
    slot.context->set_deadline(absl::ToChronoTime(absl::Now() + shape_.rpc_timeout));
    slot.started_us = NowMicros();
    slot.stub->async()->PutMembers(slot.context.get(), &slot.request, &slot.response,
                                   [this, &slot](grpc::Status status) { OnDone(slot, status); });
  }

  void Fill(uint64_t batch, Slot* slot) {
    const auto [first, end] = plan_.BatchMembers(shape_.batch, batch);
    const int n = static_cast<int>(end - first);
    v1::PutMembersRequest& request = slot->request;
    request.set_collection(CollectionFor(shape_.prefix, batch, shape_.collections));
    const bool shared_ttl = !plan_.deadline_ms && !shape_.per_member_ttl;
    if (shared_ttl) {
      SetDuration(plan_.ttl, request.mutable_default_ttl());
      request.set_omit_created_results(true);
    }
    auto* members = request.mutable_members();
    if (members->size() > n) members->DeleteSubrange(n, members->size() - n);
    while (members->size() < n) {
      v1::MemberWrite* write = members->Add();
      write->mutable_key()->assign(shape_.key_bytes, '0');
      write->mutable_value()->assign(shape_.value_bytes, '0');
      if (!plan_.deadline_ms && !shared_ttl) {
        SetDuration(plan_.ttl, write->mutable_ttl());
      }
    }
    for (int k = 0; k < n; ++k) {
      const uint64_t index = first + static_cast<uint64_t>(k);
      v1::MemberWrite* write = members->Mutable(k);
      WriteDigits('k', index, write->mutable_key()->data(), shape_.key_bytes);
      WriteDigits('v', index, write->mutable_value()->data(), shape_.value_bytes);
      if (plan_.deadline_ms) {
        SetDeadlineMs(plan_.deadline_ms(index), write->mutable_expire_time());
      }
    }
    slot->members = static_cast<size_t>(n);
  }

  void OnDone(Slot& slot, const grpc::Status& status) {
    counters_.Finished(slot.started_us, slot.members, status.ok());
    if (!status.ok()) {
      counters_.Failed(
          absl::StrCat("PutMembers: code ", status.error_code(), ": ", status.error_message()));
    }
    Issue(slot);
  }

  // Constant after construction.
  const Shape shape_;
  const LoadPlan plan_;

  LoadCounters counters_;
  std::vector<Slot> slots_;

  absl::Mutex mu_;
  // Slots still issuing RPCs.
  size_t active_ ABSL_GUARDED_BY(mu_) = 0;
};

// Adds "authorization: Bearer TOKEN" to every call of a channel.
class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* const header_;
};

class BearerTokenFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenFactory(const std::string& token) : header_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new BearerTokenInterceptor(&header_);
  }

 private:
  const std::string header_;
};

}  // namespace

int64_t TimestampMicros(const google::protobuf::Timestamp& ts) {
  return ts.seconds() * 1'000'000 + ts.nanos() / 1000;
}

void SetDuration(absl::Duration d, google::protobuf::Duration* out) {
  out->set_seconds(absl::ToInt64Seconds(d));
  out->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(d % absl::Seconds(1))));
}

absl::StatusOr<ChannelSecurity> ChannelSecurityFor(const std::string& ca_file,
                                                   const std::string& cert_file,
                                                   const std::string& key_file,
                                                   const std::string& server_name) {
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert and --tls_key go together: give both, or neither");
  }
  grpc::SslCredentialsOptions pem;
  for (auto [flag, path, into] : {std::make_tuple("tls_ca", &ca_file, &pem.pem_root_certs),
                                  std::make_tuple("tls_cert", &cert_file, &pem.pem_cert_chain),
                                  std::make_tuple("tls_key", &key_file, &pem.pem_private_key)}) {
    if (path->empty()) continue;
    std::ifstream in(*path);
    std::stringstream text;
    text << in.rdbuf();
    if (!in.is_open() || in.bad()) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", *path, ": cannot read it"));
    }
    *into = text.str();
  }
  ChannelSecurity security;
  security.credentials = grpc::SslCredentials(pem);
  security.server_name = server_name;
  return security;
}

std::vector<std::unique_ptr<Stub>> MakeStubs(const std::string& addr, int channels,
                                             int lookahead_bytes, const ChannelSecurity& security) {
  const std::vector<std::string> addrs = absl::StrSplit(addr, ',', absl::SkipEmpty());
  std::vector<std::unique_ptr<Stub>> stubs;
  const int n = std::max({1, channels, static_cast<int>(addrs.size())});
  for (int i = 0; i < n; ++i) {
    grpc::ChannelArguments args;
    // Without these, channels with equal arguments would share one connection.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("lapse.bench.channel", i);
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    if (lookahead_bytes > 0) args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, lookahead_bytes);
    if (!security.server_name.empty()) args.SetSslTargetNameOverride(security.server_name);
    std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> creators;
    if (!security.bearer_token.empty()) {
      creators.push_back(std::make_unique<BearerTokenFactory>(security.bearer_token));
    }
    stubs.push_back(
        v1::LapseService::NewStub(grpc::experimental::CreateCustomChannelWithInterceptors(
            addrs.empty() ? addr : addrs[i % addrs.size()], security.credentials, args,
            std::move(creators))));
  }
  return stubs;
}

LoadOutcome RunPuts(const std::vector<std::unique_ptr<Stub>>& stubs, const Shape& shape,
                    const LoadPlan& plan) {
  PutDriver driver(stubs, shape, plan);
  return driver.Run();
}

EventWatcher::EventWatcher(Stub* stub, Options options, ExpiryLedger* ledger)
    : stub_(stub), options_(std::move(options)), ledger_(ledger) {}

EventWatcher::~EventWatcher() { Stop(); }

absl::Status EventWatcher::Start(absl::Duration timeout) {
  v1::WatchExpirationsRequest request;
  request.set_collection_prefix(options_.prefix);
  request.set_include_values(options_.include_values);
  request.set_start_position(v1::START_POSITION_NEW);
  return Open(std::move(request), timeout);
}

absl::Status EventWatcher::Reconnect(absl::Duration pause, absl::Duration timeout) {
  Stop();
  absl::SleepFor(pause);
  uint64_t after;
  {
    absl::MutexLock lock(&mu_);
    after = examined_sequence_;
  }
  v1::WatchExpirationsRequest request;
  request.set_collection_prefix(options_.prefix);
  request.set_include_values(options_.include_values);
  if (after == 0) {
    // Nothing received yet, so no sequence to resume from: everything still
    // retained under this run's prefix is this run's.
    request.set_start_position(v1::START_POSITION_OLDEST);
  } else {
    request.set_start_position(v1::START_POSITION_AFTER_SEQUENCE);
    request.set_after_sequence(after);
  }
  return Open(std::move(request), timeout);
}

absl::Status EventWatcher::Open(v1::WatchExpirationsRequest request, absl::Duration timeout) {
  Stop();
  {
    absl::MutexLock lock(&mu_);
    reading_ = true;
    ready_ = false;
    cancelling_ = false;
  }
  reader_ = std::thread([this, request = std::move(request)] { Read(request); });
  absl::MutexLock lock(&mu_);
  const auto settled = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return ready_ || !reading_; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&settled), timeout)) {
    return absl::DeadlineExceededError("WatchExpirations: no stream headers in time");
  }
  if (!ready_) {
    return absl::UnavailableError(absl::StrCat("WatchExpirations: ", first_error_));
  }
  return absl::OkStatus();
}

void EventWatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    cancelling_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  if (reader_.joinable()) reader_.join();
}

void EventWatcher::Read(v1::WatchExpirationsRequest request) {
  grpc::ClientContext context;
  {
    absl::MutexLock lock(&mu_);
    context_ = &context;
    if (cancelling_) context.TryCancel();
  }
  std::unique_ptr<grpc::ClientReader<v1::WatchExpirationsResponse>> reader =
      stub_->WatchExpirations(&context, request);
  // lapsed sends headers as soon as the stream's start position is fixed.
  reader->WaitForInitialMetadata();
  {
    absl::MutexLock lock(&mu_);
    ready_ = true;
  }
  // Each response is read into the events and Timestamps of the last.
  v1::WatchExpirationsResponse response;
  while (reader->Read(&response)) {
    OnResponse(response);
    RecycleEvents(&response);
  }
  const grpc::Status status = reader->Finish();
  absl::MutexLock lock(&mu_);
  context_ = nullptr;
  reading_ = false;
  ready_ = false;
  const bool ours = cancelling_ && status.error_code() == grpc::StatusCode::CANCELLED;
  if (!ours) {
    ++errors_;
    if (first_error_.empty()) {
      first_error_ = absl::StrCat("WatchExpirations ended: code ", status.error_code(), ": ",
                                  status.error_message());
    }
  }
}

void EventWatcher::OnResponse(const v1::WatchExpirationsResponse& response) {
  const int64_t received_us = NowMicros();
  std::vector<Delivery> deliveries;
  deliveries.reserve(static_cast<size_t>(response.events_size()));
  uint64_t unknown = 0;
  uint64_t bad_values = 0;
  for (const v1::ExpiryEvent& event : response.events()) {
    uint64_t index;
    if (!IndexOfKey(event.key(), &index)) {
      ++unknown;
      continue;
    }
    if (options_.include_values && event.value() != ValueFor(index, options_.value_bytes)) {
      ++bad_values;
    }
    deliveries.push_back({index, TimestampMicros(event.expire_time()), received_us,
                          TimestampMicros(event.expired_at())});
  }
  ledger_->Deliver(deliveries);
  if (unknown > 0) ledger_->DeliverUnknown(unknown);
  absl::MutexLock lock(&mu_);
  ++responses_;
  examined_sequence_ = std::max(examined_sequence_, response.examined_sequence());
  if (bad_values > 0) {
    errors_ += bad_values;
    if (first_error_.empty()) first_error_ = "an event carried the wrong value";
  }
}

uint64_t EventWatcher::errors() const {
  absl::MutexLock lock(&mu_);
  return errors_;
}

std::string EventWatcher::first_error() const {
  absl::MutexLock lock(&mu_);
  return first_error_;
}

uint64_t EventWatcher::responses() const {
  absl::MutexLock lock(&mu_);
  return responses_;
}

}  // namespace load
}  // namespace lapse
