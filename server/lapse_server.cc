#include "server/lapse_server.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpc/grpc.h"
#include "grpc/health/v1/health.pb.h"
#include "grpc/support/log.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "server/accept_guard.h"
#include "server/base/log.h"
#include "server/base/mutex.h"
#include "server/engine/limits.h"
#include "server/listen_address.h"
#include "server/service/operation.h"
#include "server/service/proto_convert.h"

namespace lapse {
namespace {

WatchHub::Options HubOptions(const ServerOptions& options) {
  WatchHub::Options hub;
  hub.heartbeat_interval = options.heartbeat_interval;
  hub.read_limits.max_events = options.watch_batch_max_events;
  hub.read_limits.max_bytes = options.watch_batch_max_bytes;
  hub.max_streams = options.max_watch_streams;
  hub.max_pinned_bytes = options.watch_pinned_bytes;
  hub.stall_timeout = options.watch_stall_timeout;
  hub.dispatcher_priority = options.expiry_thread_priority;
  return hub;
}

// How often the message arenas' pool is offered to give its kept blocks
// back while it has any: a burst's blocks go between one and two periods
// after its last request, well within the second after it that
// bench/compare/run.sh waits before it reads the resident set. An idle
// server is not woken for it (BlockReleaser).
constexpr absl::Duration kMemoryReleasePeriod = absl::Milliseconds(250);

// How long gRPC gets to end the calls it cancels at the shutdown deadline
// before the connections are shut down under it.
constexpr absl::Duration kCancelledCallsGrace = absl::Milliseconds(500);

// Shuts down (shutdown(2), not close(2): gRPC still owns them) every TCP
// connection this process accepted on `port`. gRPC 1.51 puts off closing a
// connection until its pending socket write completes, and the write of a
// client that stopped reading completes only when the kernel gives up on the
// peer (TCP_USER_TIMEOUT, 20 s in gRPC): grpc::Server::Shutdown would wait
// that long past its deadline. A shut-down socket fails the write at once.
void ShutDownConnectionsOn(int port) {
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return;
  while (const dirent* entry = readdir(fds)) {
    int fd;
    if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == dirfd(fds)) continue;
    sockaddr_storage local = {};
    socklen_t length = sizeof(local);
    int listening = 0;
    socklen_t flag_length = sizeof(listening);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &flag_length) != 0 || listening) {
      continue;
    }
    int local_port = -1;
    if (local.ss_family == AF_INET) {
      local_port = ntohs(reinterpret_cast<const sockaddr_in*>(&local)->sin_port);
    } else if (local.ss_family == AF_INET6) {
      local_port = ntohs(reinterpret_cast<const sockaddr_in6*>(&local)->sin6_port);
    }
    if (local_port == port) shutdown(fd, SHUT_RDWR);
  }
  closedir(fds);
}

// Some of gRPC's lines any client can cause (a failed TLS handshake), so
// they are rate-limited.
void LogGrpcLine(gpr_log_func_args* args) {
  static RateLimitedLog* const log = new RateLimitedLog(20, absl::Minutes(1));
  const LogLevel level =
      args->severity == GPR_LOG_SEVERITY_ERROR ? LogLevel::kError : LogLevel::kInfo;
  log->Log(level, "grpc: %s (%s:%d)", args->message, args->file, args->line);
}

}  // namespace

void RouteGrpcLogs() { gpr_set_log_function(&LogGrpcLine); }

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
  if (absl::StatusOr<ListenAddress> address = ParseListenAddress(options_.listen_address);
      !address.ok()) {
    return address.status();
  }
  if (!options_.health_listen.empty()) {
    absl::StatusOr<ListenAddress> health = ParseListenAddress(options_.health_listen);
    if (!health.ok()) return health.status();
  }
  if (absl::Status tls = CheckTlsFiles(options_.tls); !tls.ok()) return tls;
  if (absl::Status guarded = InstallAcceptGuard(options_.reserved_fds); !guarded.ok()) {
    return guarded;
  }
  RouteGrpcLogs();
  absl::StatusOr<size_t> response_bytes = ResponseBytesFor(options_);
  if (!response_bytes.ok()) return response_bytes.status();
  EmbeddedStore::Options store_options = options_.store;
  store_options.limits.max_response_bytes = *response_bytes;
  store_options.expirer_priority = options_.expiry_thread_priority;
  if (!options_.auth_file.empty()) {
    absl::StatusOr<std::unique_ptr<AuthFile>> auth =
        AuthFile::Open(options_.auth_file, options_.auth_poll_interval);
    if (!auth.ok()) return auth.status();
    auth_ = *std::move(auth);
  }
  hub_ = std::make_unique<WatchHub>(HubOptions(options_));
  group_hub_ = std::make_unique<GroupHub>(
      GroupHub::Options{.max_waiting_polls = options_.max_waiting_polls,
                        .max_consume_streams = options_.max_consume_streams,
                        .heartbeat_interval = options_.heartbeat_interval,
                        .clock = options_.store.clock});
  store_options.on_group_readable = [groups = group_hub_.get()](absl::string_view group) {
    groups->OnGroupReadable(group);
  };
  if (!options_.metrics_listen.empty()) {
    metrics_ = std::make_unique<ServerMetrics>();
    store_options.on_event = [m = metrics_.get()](const ExpiryEventView& e) {
      m->OnExpiryEvent(e);
    };
    store_options.on_wal_io = [m = metrics_.get()](WalIo io, absl::Duration took) {
      m->OnWalIo(io, took);
    };
  }
  EventsReadableListener on_readable = [hub = hub_.get(),
                                        groups = group_hub_.get()](uint64_t last) {
    hub->OnReadable(last);
    groups->OnEventsReadable();
  };
  if (options_.redis_cluster.has_value()) {
    redis::RedisClusterStoreOptions redis_options = *options_.redis_cluster;
    redis_options.limits = store_options.limits;
    redis_options.clock = options_.store.clock;
    redis_options.event_buffer_events = options_.store.event_retention_events;
    redis_options.event_buffer_bytes = options_.store.event_retention_bytes;
    redis_options.on_events_readable = std::move(on_readable);
    redis_options.on_event = store_options.on_event;
    redis_options.on_group_readable = store_options.on_group_readable;
    absl::StatusOr<std::unique_ptr<redis::RedisClusterStore>> store =
        redis::RedisClusterStore::Open(std::move(redis_options));
    if (!store.ok()) {
      return absl::Status(store.status().code(),
                          absl::StrCat("cannot open the Redis Cluster store (nodes ",
                                       absl::StrJoin(options_.redis_cluster->router.seeds, ","),
                                       "): ", store.status().message()));
    }
    redis_ = store->get();
    store_ = *std::move(store);
  } else {
    absl::StatusOr<std::unique_ptr<EmbeddedStore>> store =
        EmbeddedStore::Open(store_options, std::move(on_readable),
                            [this](const absl::Status& status) { OnWritableChanged(status); });
    if (!store.ok()) return store.status();
    embedded_ = store->get();
    store_ = *std::move(store);
  }
  service_ =
      std::make_unique<LapseServiceImpl>(store_.get(), hub_.get(), group_hub_.get(), auth_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // gRPC's own health service does not register its proto with the
  // descriptor pool; linking ours in lets reflection describe it.
  grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options_.listen_address, ServerCredentialsFor(options_.tls), &port);
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  builder.SetMaxSendMessageSize(options_.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options_.max_concurrent_streams);
  builder.RegisterService(service_.get());
  if (options_.park_callback_thread) {
    parking_ = std::make_unique<CallbackThreadParking>();
    builder.RegisterCallbackGenericService(parking_.get());
  }
  if (metrics_ != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(metrics_->InterceptorFactory());
    builder.experimental().SetInterceptorCreators(std::move(creators));
  }
  server_ = builder.BuildAndStart();
  if (server_ != nullptr && port == 0) {
    server_->Shutdown();
    server_.reset();
  }
  if (server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.listen_address));
  }
  if (parking_ != nullptr) {
    parking_->Park(server_.get());
    parking_governor_ =
        std::make_unique<ParkingGovernor>(parking_.get(), server_.get(), ParkingPolicy::Options());
  }
  if (!options_.health_listen.empty()) {
    grpc::ServerBuilder health_builder;
    health_builder.AddListeningPort(options_.health_listen, grpc::InsecureServerCredentials(),
                                    &health_port_);
    health_server_ = health_builder.BuildAndStart();
    if (health_server_ == nullptr || health_port_ == 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", options_.health_listen, " (health_listen)"));
    }
  }
  {
    MutexLock lock(&health_mu_);
    health_.push_back(server_->GetHealthCheckService());
    if (health_server_ != nullptr) health_.push_back(health_server_->GetHealthCheckService());
    for (grpc::HealthCheckServiceInterface* health : health_) {
      health->SetServingStatus("", true);
      health->SetServingStatus(v1::LapseService::service_full_name(), writable_.ok());
    }
  }
  if (metrics_ != nullptr) {
    absl::StatusOr<int> metrics_port = redis_ != nullptr
                                           ? metrics_->Serve(options_.metrics_listen, redis_)
                                           : metrics_->Serve(options_.metrics_listen, embedded_);
    if (!metrics_port.ok()) return metrics_port.status();
    metrics_port_ = *metrics_port;
  }
  memory_release_ = std::make_unique<BlockReleaser>(&MessageArenaBlocks(), kMemoryReleasePeriod);
  port_ = port;
  return port;
}

EmbeddedStore& LapseServer::embedded_store() {
  assert(embedded_ != nullptr && "embedded_store() needs the embedded store");
  return *embedded_;
}

void LapseServer::OnWritableChanged(const absl::Status& status) {
  MutexLock lock(&health_mu_);
  writable_ = status;
  for (grpc::HealthCheckServiceInterface* health : health_) {
    health->SetServingStatus(v1::LapseService::service_full_name(), status.ok());
  }
}

void LapseServer::Shutdown(absl::Duration grace) {
  if (shut_down_ || service_ == nullptr) return;
  shut_down_ = true;
  service_->StartDraining();
  if (server_ != nullptr) {
    {
      MutexLock lock(&health_mu_);
      health_.clear();
    }
    // NOT_SERVING for every service, for good.
    server_->GetHealthCheckService()->Shutdown();
    if (health_server_ != nullptr) health_server_->GetHealthCheckService()->Shutdown();
  }
  const absl::Time deadline = absl::Now() + grace;
  hub_->Shutdown();
  group_hub_->Shutdown();
  if (server_ != nullptr) {
    // At the deadline gRPC cancels the calls left. If it has not finished
    // shortly after, a connection it cannot close by itself holds it up:
    // those are shut down from here.
    const absl::Time stuck = deadline + kCancelledCallsGrace;
    Mutex mu;
    CondVar cv;
    bool stopped = false;
    std::thread reaper([&] {
      MutexLock lock(&mu);
      while (!stopped && absl::Now() < stuck) cv.WaitWithTimeout(&mu, stuck - absl::Now());
      if (!stopped) ShutDownConnectionsOn(port_);
    });
    // The parked call would hold Shutdown up; the thread serves the drain.
    // The governor goes first: it would park it again.
    if (parking_governor_ != nullptr) parking_governor_->Stop();
    if (parking_ != nullptr) parking_->Release();
    server_->Shutdown(absl::ToChronoTime(deadline));
    {
      MutexLock lock(&mu);
      stopped = true;
      cv.Signal();
    }
    reaper.join();
  }
  // Probes see NOT_SERVING until the drain ends.
  if (health_server_ != nullptr) health_server_->Shutdown(absl::ToChronoTime(absl::Now()));
  if (embedded_ != nullptr) embedded_->StopExpiring();
  if (metrics_ != nullptr) metrics_->StopServing();
  memory_release_.reset();
}

}  // namespace lapse
