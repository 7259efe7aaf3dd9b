#include "server/lapse_server.h"

#include <cassert>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

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

LapseServer::LapseServer(const ServerOptions& options) : options_(options) {}

LapseServer::~LapseServer() { Shutdown(absl::ZeroDuration()); }

absl::StatusOr<int> LapseServer::Start() {
  assert(hub_ == nullptr && "Start is called at most once");
  hub_ = std::make_unique<WatchHub>(HubOptions(options_));
  absl::StatusOr<std::unique_ptr<EmbeddedStore>> store = EmbeddedStore::Open(
      options_.store, [hub = hub_.get()](uint64_t last) { hub->OnReadable(last); },
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
