#include "server/lapse_server.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace lapse {
namespace {

EventLog::Options LogOptions(const ServerOptions& options) {
  EventLog::Options log;
  // A durable store shows an event only once it is on disk.
  log.visible_on_append = options.data_dir.empty();
  // Never 0: "after the sequence before the first" must stay representable.
  log.first_sequence = static_cast<uint64_t>(
      std::max<int64_t>(1, absl::ToUnixNanos(options.clock->Now())));
  log.max_events = options.event_retention_events;
  log.max_bytes = options.event_retention_bytes;
  return log;
}

Engine::Options EngineOptions(const ServerOptions& options, Journal* journal,
                              ExpirerWakeup& wakeup) {
  Engine::Options engine;
  engine.shards = options.shards;
  engine.limits = options.limits;
  engine.journal = journal;
  engine.earlier_deadline_listener = wakeup.Listener();
  return engine;
}

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

absl::Status LapseServer::OpenStore() {
  DurableStore::Options store;
  store.dir = options_.data_dir;
  store.fsync = options_.fsync;
  store.segment_bytes = options_.wal_segment_bytes;
  store.snapshot_after_bytes = options_.snapshot_after_bytes;
  store.truncate_damaged_wal = options_.wal_truncate_damaged;
  absl::StatusOr<std::unique_ptr<DurableStore>> opened = DurableStore::Open(store);
  if (!opened.ok()) return opened.status();
  store_ = *std::move(opened);
  return absl::OkStatus();
}

absl::StatusOr<int> LapseServer::Start() {
  event_log_ = std::make_unique<EventLog>(LogOptions(options_));
  if (!options_.data_dir.empty()) {
    if (absl::Status s = OpenStore(); !s.ok()) return s;
  }
  engine_ = std::make_unique<Engine>(EngineOptions(options_, store_.get(), expirer_wakeup_),
                                     options_.clock, event_log_.get());
  if (store_ != nullptr) {
    absl::StatusOr<RecoveryStats> recovered = store_->Recover(engine_.get(), event_log_.get());
    if (!recovered.ok()) return recovered.status();
    recovery_ = *std::move(recovered);
  }
  hub_ = std::make_unique<WatchHub>(event_log_.get(), HubOptions(options_));
  service_ = std::make_unique<LapseServiceImpl>(engine_.get(), event_log_.get(), hub_.get(),
                                                store_.get());
  // Members that came due while the server was down expire now, with events.
  expirer_ = std::make_unique<Expirer>(engine_.get(), options_.clock, &expirer_wakeup_);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options_.listen_address,
                           grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  builder.SetMaxSendMessageSize(options_.max_message_bytes);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ != nullptr && port == 0) {
    server_->Shutdown();
    server_.reset();
  }
  if (server_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options_.listen_address));
  }
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus("", true);
  health->SetServingStatus(v1::LapseService::service_full_name(), true);
  return port;
}

void LapseServer::Shutdown(absl::Duration grace) {
  if (shut_down_ || service_ == nullptr) return;
  shut_down_ = true;
  service_->StartDraining();
  if (server_ != nullptr) {
    // NOT_SERVING for every service, for good.
    server_->GetHealthCheckService()->Shutdown();
  }
  hub_->Shutdown();
  if (server_ != nullptr) {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  }
  expirer_.reset();
}

}  // namespace lapse
