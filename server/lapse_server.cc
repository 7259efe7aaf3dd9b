#include "server/lapse_server.h"

#include <algorithm>
#include <cassert>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "server/engine/limits.h"
#include "server/service/proto_convert.h"

namespace lapse {
namespace {

WatchHub::Options HubOptions(const ServerOptions& options) {
  WatchHub::Options hub;
  hub.heartbeat_interval = options.heartbeat_interval;
  hub.read_limits.max_events = options.watch_batch_max_events;
  hub.read_limits.max_bytes = options.watch_batch_max_bytes;
  return hub;
}

}  // namespace

absl::StatusOr<size_t> ResponseBytesFor(const ServerOptions& options) {
  const Limits& limits = options.store.limits;
  const size_t message = static_cast<size_t>(options.max_message_bytes);
  const size_t token = MaxPageTokenBytes(limits);
  const size_t largest_entry =
      std::max(limits.max_key_bytes + limits.max_value_bytes, limits.max_collection_name_bytes) +
      kResponseEntryOverhead;
  const size_t largest_echo =
      limits.max_members_per_request * (limits.max_key_bytes + kResponseEntryOverhead);
  const size_t needed = token + std::max(largest_entry, largest_echo);
  if (needed > message) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_message_bytes=", message, " cannot hold an answer of up to ", needed,
        " bytes (one member of max_key_bytes + max_value_bytes, or max_members_per_request keys "
        "of max_key_bytes, with framing); raise it or lower max_value_bytes, max_key_bytes or "
        "max_members_per_request"));
  }
  return message - token;
}

LapseServer::LapseServer(const ServerOptions& options) : options_(options) {}

LapseServer::~LapseServer() { Shutdown(absl::ZeroDuration()); }

absl::StatusOr<int> LapseServer::Start() {
  assert(hub_ == nullptr && "Start is called at most once");
  absl::StatusOr<size_t> response_bytes = ResponseBytesFor(options_);
  if (!response_bytes.ok()) return response_bytes.status();
  EmbeddedStore::Options store_options = options_.store;
  store_options.limits.max_response_bytes = *response_bytes;
  hub_ = std::make_unique<WatchHub>(HubOptions(options_));
  absl::StatusOr<std::unique_ptr<EmbeddedStore>> store = EmbeddedStore::Open(
      store_options, [hub = hub_.get()](uint64_t last) { hub->OnReadable(last); },
      [this](const absl::Status& status) { OnWritableChanged(status); });
  if (!store.ok()) return store.status();
  store_ = *std::move(store);
  service_ = std::make_unique<LapseServiceImpl>(store_.get(), hub_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // gRPC's own health service does not register its proto with the
  // descriptor pool; linking ours in lets reflection describe it.
  grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options_.listen_address, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  builder.SetMaxSendMessageSize(options_.max_message_bytes);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ != nullptr && port == 0) {
    server_->Shutdown();
    server_.reset();
  }
  if (server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.listen_address));
  }
  MutexLock lock(&health_mu_);
  health_ = server_->GetHealthCheckService();
  health_->SetServingStatus("", true);
  health_->SetServingStatus(v1::LapseService::service_full_name(), writable_.ok());
  return port;
}

void LapseServer::OnWritableChanged(const absl::Status& status) {
  MutexLock lock(&health_mu_);
  writable_ = status;
  if (health_ != nullptr) {
    health_->SetServingStatus(v1::LapseService::service_full_name(), status.ok());
  }
}

void LapseServer::Shutdown(absl::Duration grace) {
  if (shut_down_ || service_ == nullptr) return;
  shut_down_ = true;
  service_->StartDraining();
  if (server_ != nullptr) {
    {
      MutexLock lock(&health_mu_);
      health_ = nullptr;
    }
    // NOT_SERVING for every service, for good.
    server_->GetHealthCheckService()->Shutdown();
  }
  hub_->Shutdown();
  if (server_ != nullptr) {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  }
  store_->StopExpiring();
}

}  // namespace lapse
