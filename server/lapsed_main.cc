// lapsed: the lapse server.
//
//   lapsed --listen=0.0.0.0:50051 --shards=16 --max_ttl=720h
//
//   lapsed --data-dir=/var/lib/lapse --fsync=everysec
//
//   # one stateless replica of many over a Redis Cluster (issue #11):
//   lapsed --store=redis-cluster --redis_nodes=10.0.0.1:7000,10.0.0.2:7000
//          --redis_password_file=/etc/lapse/redis-password
//
//   lapsed --metrics_listen=0.0.0.0:9090    # Prometheus /metrics
//
//   # mTLS, and plaintext health for probes that cannot speak TLS:
//   lapsed --tls_cert=tls.crt --tls_key=tls.key --tls_client_ca=ca.crt
//          --health_listen=0.0.0.0:50052
//
// Raises its soft open-file limit to the hard one and keeps --reserved_fds of
// them free of connections (server/accept_guard.h). Prints one line when it
// serves (address, bound port, plaintext/TLS/mTLS, store, the metrics address
// and port with --metrics_listen, the health address and port with
// --health_listen), drains and exits 0 on SIGTERM or SIGINT, exits 2 on
// invalid flags (an unreadable --redis_password_file too) and 1 when it
// cannot listen, read its TLS files (or they do not match), recover its data
// directory or reach the Redis Cluster (at once, naming
// --redis_password_file, when the cluster refuses the password).
// Without --data_dir the store is
// memory-only: a restart starts empty. Flag names may be written with dashes
// or underscores (--data-dir, --data_dir).
#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpc/grpc.h"
#include "server/accept_guard.h"
#include "server/base/log.h"
#include "server/base/thread_priority.h"
#include "server/lapse_server.h"
#include "server/listen_address.h"
#include "server/tls_credentials.h"

namespace {

const lapse::ServerOptions& Defaults() {
  static const lapse::ServerOptions* const defaults = new lapse::ServerOptions;
  return *defaults;
}

}  // namespace

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "Address to serve on: HOST:PORT, [IPV6]:PORT or unix:/PATH; "
          "0.0.0.0:50051 in a container, port 0 picks a free port");
// Optional, so that --store=redis-cluster can refuse it even at the default.
ABSL_FLAG(std::optional<int64_t>, shards, std::nullopt,
          absl::StrCat("Lock shards of the embedded store (default ", Defaults().store.shards,
                       "; refused with --store=redis-cluster)"));
ABSL_FLAG(int64_t, event_retention_events,
          static_cast<int64_t>(Defaults().store.event_retention_events),
          "Expiry events kept for watchers to resume from");
ABSL_FLAG(int64_t, event_retention_bytes,
          static_cast<int64_t>(Defaults().store.event_retention_bytes),
          "Bytes of expiry events kept for watchers to resume from");
ABSL_FLAG(int64_t, max_collection_name_bytes,
          static_cast<int64_t>(Defaults().store.limits.max_collection_name_bytes),
          "Longest collection name");
ABSL_FLAG(int64_t, max_key_bytes, static_cast<int64_t>(Defaults().store.limits.max_key_bytes),
          "Longest member key");
ABSL_FLAG(int64_t, max_value_bytes, static_cast<int64_t>(Defaults().store.limits.max_value_bytes),
          "Largest member value");
ABSL_FLAG(int64_t, max_members_per_request,
          static_cast<int64_t>(Defaults().store.limits.max_members_per_request),
          "Members or keys in one request");
ABSL_FLAG(int64_t, default_page_size, Defaults().store.limits.default_page_size,
          "Page size when a request leaves page_size at 0");
ABSL_FLAG(int64_t, max_page_size, Defaults().store.limits.max_page_size,
          "Largest page; bigger page_size values are coerced to it");
ABSL_FLAG(absl::Duration, max_ttl, Defaults().store.limits.max_ttl,
          "Furthest deadline accepted, from now");
ABSL_FLAG(int64_t, max_total_members,
          static_cast<int64_t>(Defaults().store.limits.max_total_members),
          "Live members across all collections");
ABSL_FLAG(int64_t, max_watch_collections,
          static_cast<int64_t>(Defaults().store.limits.max_watch_collections),
          "Collections named in one WatchExpirations request");
ABSL_FLAG(int64_t, max_consumer_groups,
          static_cast<int64_t>(Defaults().store.limits.max_consumer_groups),
          "Consumer groups that may exist at once");
ABSL_FLAG(int64_t, max_consumers_per_group,
          static_cast<int64_t>(Defaults().store.limits.max_consumers_per_group),
          "Consumers one group remembers; an idle one makes room for a new one");
ABSL_FLAG(int64_t, max_group_pending,
          static_cast<int64_t>(Defaults().store.limits.max_group_pending),
          "Events one consumer group holds leased or awaiting redelivery");
ABSL_FLAG(int64_t, max_group_dead_letters,
          static_cast<int64_t>(Defaults().store.limits.max_group_dead_letters),
          "Dead letters one consumer group keeps");
ABSL_FLAG(int64_t, max_group_bytes, static_cast<int64_t>(Defaults().store.limits.max_group_bytes),
          "Bytes of the events one consumer group keeps, pending and dead-lettered");
ABSL_FLAG(int64_t, max_unacked_per_consumer,
          static_cast<int64_t>(Defaults().store.limits.max_unacked_per_consumer),
          "Largest max_unacked_per_consumer a consumer group may ask for");
ABSL_FLAG(int64_t, max_deliveries, static_cast<int64_t>(Defaults().store.limits.max_deliveries),
          "Largest max_deliveries a consumer group may ask for");
ABSL_FLAG(absl::Duration, max_visibility_timeout, Defaults().store.limits.max_visibility_timeout,
          "Longest visibility timeout, or lease extension, of a consumer group");
ABSL_FLAG(int64_t, max_poll_events, static_cast<int64_t>(Defaults().store.limits.max_poll_events),
          "Events one Poll leases at most; more are coerced down");
ABSL_FLAG(int64_t, max_waiting_polls, static_cast<int64_t>(Defaults().max_waiting_polls),
          "Polls with a wait that may wait at once");
ABSL_FLAG(int64_t, max_consume_streams, static_cast<int64_t>(Defaults().max_consume_streams),
          "Consume streams that may be open at once");
ABSL_FLAG(absl::Duration, heartbeat_interval, Defaults().heartbeat_interval,
          "An idle watch stream gets an empty batch this often");
ABSL_FLAG(int64_t, watch_batch_max_events, static_cast<int64_t>(Defaults().watch_batch_max_events),
          "Events in one watch batch");
ABSL_FLAG(int64_t, watch_batch_max_bytes, static_cast<int64_t>(Defaults().watch_batch_max_bytes),
          "Bytes of names, keys and values in one watch batch");
ABSL_FLAG(int64_t, max_watch_streams, static_cast<int64_t>(Defaults().max_watch_streams),
          "WatchExpirations streams open at once; more are refused with RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, watch_pinned_bytes, static_cast<int64_t>(Defaults().watch_pinned_bytes),
          "Bytes of watch batches being written, across all streams; a stream whose next "
          "batch does not fit waits");
ABSL_FLAG(absl::Duration, watch_stall_timeout, Defaults().watch_stall_timeout,
          "A watch stream whose write has not completed for this long (its client stopped "
          "reading) is cancelled");
ABSL_FLAG(int64_t, max_concurrent_streams, Defaults().max_concurrent_streams,
          "RPCs one client connection may have open at once (HTTP/2 "
          "SETTINGS_MAX_CONCURRENT_STREAMS); more wait in the client");
ABSL_FLAG(bool, park_callback_thread, true,
          "Hold one of gRPC's callback threads out of the server's work while lapsed uses "
          "less than a core: small requests (single puts) cost less CPU, without the "
          "poller's hand-off between two threads; while lapsed is busier the thread is let "
          "go, and held again 5 s later (server/callback_threads.h)");
ABSL_FLAG(int64_t, max_message_bytes, Defaults().max_message_bytes,
          "Largest gRPC message received or sent");
ABSL_FLAG(int64_t, reserved_fds, Defaults().reserved_fds,
          "Descriptors kept free below the open-file limit (raised to the hard "
          "limit at start-up) for the store and gRPC: a connection that would "
          "take one is reset at once");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(5),
          "On SIGTERM, how long in-flight RPCs get before they are cancelled");
ABSL_FLAG(std::string, data_dir, "",
          "Keep state in this directory (write-ahead log + snapshots); empty "
          "runs memory-only");
ABSL_FLAG(std::string, store, "embedded",
          "embedded (this process, memory-only or --data_dir) or redis-cluster (a Redis "
          "Cluster named by --redis_nodes; any number of lapsed replicas may serve it)");
ABSL_FLAG(std::string, redis_nodes, "",
          "With --store=redis-cluster: HOST:PORT or [IPV6]:PORT,... of some nodes of the cluster; "
          "the rest are learned");
ABSL_FLAG(std::string, redis_password_file, "",
          "With --store=redis-cluster: a file holding the cluster's password (requirepass), "
          "read at start, a trailing newline stripped; empty: no AUTH");
ABSL_FLAG(int64_t, redis_partitions, 64,
          "With --store=redis-cluster: partitions of a store created now (1-16384); a store "
          "already in the cluster keeps the count recorded there");
ABSL_FLAG(int64_t, redis_wait_replicas, 1,
          "With --store=redis-cluster: replicas WAIT must count before a write is acknowledged "
          "and an event delivered (0 acknowledges once the master has it)");
ABSL_FLAG(absl::Duration, redis_wait_timeout, absl::Seconds(1),
          "With --store=redis-cluster: how long WAIT waits; a write it does not confirm fails "
          "UNAVAILABLE, its outcome unknown");
ABSL_FLAG(absl::Duration, redis_heartbeat_interval, absl::Seconds(1),
          "With --store=redis-cluster: this replica renews its registration this often; a "
          "replica that dies has its partitions expired by others within 4 intervals");
ABSL_FLAG(int64_t, redis_event_retention, 1'000'000,
          "With --store=redis-cluster: expiry events each partition's stream keeps (MAXLEN ~)");
ABSL_FLAG(std::string, fsync, "everysec",
          "With --data_dir: always (fsync before each answer, with group "
          "commit), everysec (answer once written; fsync every second) or "
          "never (leave it to the OS)");
ABSL_FLAG(std::string, expiry_thread_priority, "normal",
          "How soon the expirer and the watch dispatcher run once due: realtime "
          "(SCHED_FIFO 1, ahead of other processes; needs CAP_SYS_NICE or an "
          "RLIMIT_RTPRIO, else falls back), short_slice (a 100 us time slice, "
          "Linux >= 6.12, else falls back) or normal");
ABSL_FLAG(absl::Duration, wal_group_wait, absl::Milliseconds(1),
          "With --fsync=always: how long a write may wait for as many writers as "
          "the last fsync covered, so that one fsync covers them all (0 to "
          "10ms; 0 never waits). A writer is one RPC or one StreamWrites "
          "request: a lone client never waits; many clients with one write "
          "each in flight share an fsync");
ABSL_FLAG(int64_t, snapshot_after_bytes,
          static_cast<int64_t>(Defaults().store.snapshot_after_bytes),
          "With --data_dir: write-ahead log bytes that trigger a snapshot; 0 "
          "turns automatic snapshots off");
ABSL_FLAG(int64_t, wal_segment_bytes, static_cast<int64_t>(Defaults().store.wal_segment_bytes),
          "With --data_dir: size at which a log segment is closed");
ABSL_FLAG(bool, wal_truncate_damaged, false,
          "With --data_dir: start even if the log is damaged in the middle, "
          "DISCARDING everything from the damage on (the start-up error names "
          "the file and offset)");
ABSL_FLAG(std::string, metrics_listen, "",
          "Serve Prometheus metrics on http://HOST:PORT/metrics; port 0 picks a "
          "free port; empty serves none");
ABSL_FLAG(std::string, tls_cert, "",
          "Serve TLS with this PEM certificate chain (needs --tls_key); re-read "
          "every --tls_refresh_interval, so it can be rotated in place");
ABSL_FLAG(std::string, tls_key, "", "With --tls_cert: its PEM private key");
ABSL_FLAG(std::string, tls_client_ca, "",
          "With --tls_cert: mTLS, every client must present a certificate that "
          "chains to one of these PEM CA certificates");
ABSL_FLAG(absl::Duration, tls_refresh_interval, Defaults().tls.refresh_interval,
          "How often the --tls_* files are read again, in whole seconds");
ABSL_FLAG(std::string, health_listen, "",
          "Also serve grpc.health.v1 alone, in plaintext, on HOST:PORT: for "
          "probes that cannot speak TLS (the kubelet's); empty serves none");
ABSL_FLAG(std::string, log_level, "info",
          "error, warning or info; gRPC's own logging follows GRPC_VERBOSITY");
ABSL_FLAG(std::string, log_format, "text",
          "text (\"lapsed LEVEL: message\" lines) or json (one {\"time\", \"level\", "
          "\"message\"} object per line), on stderr");
ABSL_FLAG(std::string, auth_file, "",
          "Grants per collection prefix to bearer tokens and SPIFFE IDs (README.md, Security); "
          "re-read when it changes. Empty: anyone who can reach the port may do anything");

namespace {

using lapse::Log;
using lapse::LogLevel;

// Checks that the value of the flag `name` is within [min, max]; the error
// names the flag.
bool InRange(absl::string_view name, int64_t value, int64_t min, int64_t max, std::string* error) {
  if (value >= min && value <= max) return true;
  *error = absl::StrCat("--", name, "=", value, " is out of range [", min, ", ", max, "]");
  return false;
}

bool InRange(const absl::Flag<int64_t>& flag, int64_t min, int64_t max, std::string* error) {
  return InRange(absl::GetFlagReflectionHandle(flag).Name(), absl::GetFlag(flag), min, max, error);
}

// An optional flag not given is in range.
bool InRange(const absl::Flag<std::optional<int64_t>>& flag, int64_t min, int64_t max,
             std::string* error) {
  const std::optional<int64_t> value = absl::GetFlag(flag);
  return !value.has_value() ||
         InRange(absl::GetFlagReflectionHandle(flag).Name(), *value, min, max, error);
}

// Checks that `flag`'s duration is within [min, max]; the error names the flag.
bool InRange(const absl::Flag<absl::Duration>& flag, absl::Duration min, absl::Duration max,
             std::string* error) {
  const absl::Duration value = absl::GetFlag(flag);
  if (value >= min && value <= max) return true;
  *error = absl::StrCat("--", absl::GetFlagReflectionHandle(flag).Name(), "=",
                        absl::FormatDuration(value), " is out of range [",
                        absl::FormatDuration(min), ", ", absl::FormatDuration(max), "]");
  return false;
}

// The bounds on watch streams and connections, from their flags.
absl::Status WatchBoundsFromFlags(lapse::ServerOptions* options) {
  std::string error;
  const bool ok =
      InRange(FLAGS_max_watch_streams, 1, 1'000'000, &error) &&
      InRange(FLAGS_watch_pinned_bytes, 1, INT64_MAX, &error) &&
      InRange(FLAGS_watch_stall_timeout, absl::Milliseconds(100), absl::Hours(1), &error) &&
      InRange(FLAGS_max_concurrent_streams, 1, INT32_MAX, &error);
  if (!ok) return absl::InvalidArgumentError(error);
  options->max_watch_streams = static_cast<size_t>(absl::GetFlag(FLAGS_max_watch_streams));
  options->watch_pinned_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_watch_pinned_bytes));
  options->watch_stall_timeout = absl::GetFlag(FLAGS_watch_stall_timeout);
  options->max_concurrent_streams = static_cast<int>(absl::GetFlag(FLAGS_max_concurrent_streams));
  options->park_callback_thread = absl::GetFlag(FLAGS_park_callback_thread);
  return absl::OkStatus();
}

// TLS and the plaintext health port, from their flags; the files themselves
// are read by LapseServer::Start.
absl::Status TlsFromFlags(lapse::ServerOptions* options) {
  std::string error;
  if (!InRange(FLAGS_tls_refresh_interval, absl::Seconds(1), absl::Hours(1), &error)) {
    return absl::InvalidArgumentError(error);
  }
  options->tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  options->tls.key_file = absl::GetFlag(FLAGS_tls_key);
  options->tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  options->tls.refresh_interval = absl::GetFlag(FLAGS_tls_refresh_interval);
  if (absl::Status tls = lapse::CheckTlsOptions(options->tls); !tls.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", tls.message()));
  }
  options->health_listen = absl::GetFlag(FLAGS_health_listen);
  if (options->health_listen.empty()) return absl::OkStatus();
  absl::StatusOr<lapse::ListenAddress> health = lapse::ParseListenAddress(options->health_listen);
  if (!health.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--health_listen=", health.status().message()));
  }
  if (health->is_unix()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--health_listen=", options->health_listen,
                     ": expected HOST:PORT or [IPV6]:PORT (probes reach the pod over TCP)"));
  }
  return absl::OkStatus();
}

// The bounds on consumer groups and their consumers, from their flags.
absl::Status GroupBoundsFromFlags(lapse::ServerOptions* options) {
  std::string error;
  const bool ok =
      InRange(FLAGS_max_consumer_groups, 1, 1'000'000, &error) &&
      InRange(FLAGS_max_consumers_per_group, 1, 1'000'000, &error) &&
      InRange(FLAGS_max_group_pending, 1, INT32_MAX, &error) &&
      InRange(FLAGS_max_group_dead_letters, 0, INT32_MAX, &error) &&
      InRange(FLAGS_max_group_bytes, 1, INT64_MAX, &error) &&
      InRange(FLAGS_max_unacked_per_consumer, 1, INT32_MAX, &error) &&
      InRange(FLAGS_max_deliveries, 1, INT32_MAX, &error) &&
      InRange(FLAGS_max_visibility_timeout, absl::Milliseconds(1), absl::Hours(24 * 365), &error) &&
      InRange(FLAGS_max_poll_events, 1, 1'000'000, &error) &&
      InRange(FLAGS_max_waiting_polls, 1, 1'000'000, &error) &&
      InRange(FLAGS_max_consume_streams, 1, 1'000'000, &error);
  if (!ok) return absl::InvalidArgumentError(error);
  lapse::Limits* limits = &options->store.limits;
  limits->max_consumer_groups = static_cast<size_t>(absl::GetFlag(FLAGS_max_consumer_groups));
  limits->max_consumers_per_group =
      static_cast<size_t>(absl::GetFlag(FLAGS_max_consumers_per_group));
  limits->max_group_pending = static_cast<size_t>(absl::GetFlag(FLAGS_max_group_pending));
  limits->max_group_dead_letters = static_cast<size_t>(absl::GetFlag(FLAGS_max_group_dead_letters));
  limits->max_group_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_max_group_bytes));
  limits->max_unacked_per_consumer =
      static_cast<uint32_t>(absl::GetFlag(FLAGS_max_unacked_per_consumer));
  limits->max_deliveries = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_deliveries));
  limits->max_visibility_timeout = absl::GetFlag(FLAGS_max_visibility_timeout);
  limits->max_poll_events = static_cast<size_t>(absl::GetFlag(FLAGS_max_poll_events));
  options->max_waiting_polls = static_cast<size_t>(absl::GetFlag(FLAGS_max_waiting_polls));
  options->max_consume_streams = static_cast<size_t>(absl::GetFlag(FLAGS_max_consume_streams));
  return absl::OkStatus();
}

// The longest password file read.
constexpr size_t kMaxPasswordBytes = 4096;

// The password in `path`, without a trailing newline.
absl::StatusOr<std::string> ReadPasswordFile(const std::string& path) {
  const std::string flag = absl::StrCat("--redis_password_file=", path);
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot read it: ", std::strerror(errno)));
  }
  std::string password(kMaxPasswordBytes + 1, '\0');
  const size_t read = std::fread(password.data(), 1, password.size(), file);
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read it"));
  if (read > kMaxPasswordBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": longer than ", kMaxPasswordBytes, " bytes"));
  }
  password.resize(read);
  // One trailing newline (\n or \r\n), as editors and `echo` leave it.
  if (absl::EndsWith(password, "\n")) {
    password.pop_back();
    if (absl::EndsWith(password, "\r")) password.pop_back();
  }
  if (password.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, ": it is empty"));
  return password;
}

// The Redis Cluster store's options from the --redis_* flags; none with
// --store=embedded, where those flags are refused.
absl::Status RedisFromFlags(lapse::ServerOptions* options) {
  const std::string store = absl::GetFlag(FLAGS_store);
  const std::string nodes = absl::GetFlag(FLAGS_redis_nodes);
  const std::string password_file = absl::GetFlag(FLAGS_redis_password_file);
  if (store == "embedded") {
    for (const auto& [flag, value] :
         {std::pair<const char*, const std::string&>{"redis_nodes", nodes},
          {"redis_password_file", password_file}}) {
      if (!value.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("--", flag, " needs --store=redis-cluster"));
      }
    }
    return absl::OkStatus();
  }
  if (store != "redis-cluster") {
    return absl::InvalidArgumentError(
        absl::StrCat("--store=", store, ": expected embedded or redis-cluster"));
  }
  if (!options->store.data_dir.empty()) {
    return absl::InvalidArgumentError(
        "--data_dir is for --store=embedded: with --store=redis-cluster the state is in Redis");
  }
  // Given at all, even at its default: it would be ignored.
  if (absl::GetFlag(FLAGS_shards).has_value()) {
    return absl::InvalidArgumentError(
        "--shards is for --store=embedded (its lock shards): with --store=redis-cluster the "
        "collections are spread over --redis_partitions");
  }
  if (nodes.empty()) {
    return absl::InvalidArgumentError(
        "--store=redis-cluster needs --redis_nodes=HOST:PORT,... (some nodes of the cluster)");
  }
  std::string error;
  const bool ok =
      InRange(FLAGS_redis_partitions, 1, 16384, &error) &&
      InRange(FLAGS_redis_wait_replicas, 0, 100, &error) &&
      InRange(FLAGS_redis_wait_timeout, absl::Milliseconds(1), absl::Minutes(1), &error) &&
      InRange(FLAGS_redis_heartbeat_interval, absl::Milliseconds(10), absl::Minutes(10), &error) &&
      InRange(FLAGS_redis_event_retention, 1, 1'000'000'000, &error);
  if (!ok) return absl::InvalidArgumentError(error);
  lapse::redis::RedisClusterStoreOptions redis;
  constexpr size_t kMaxNodes = 1000;
  for (absl::string_view node : absl::StrSplit(nodes, ',', absl::SkipWhitespace())) {
    node = absl::StripAsciiWhitespace(node);
    // The forms lapsed listens on, less unix: and port 0.
    absl::StatusOr<lapse::ListenAddress> address = lapse::ParseListenAddress(node);
    if (!address.ok() || address->is_unix() || address->port == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--redis_nodes=", nodes, ": \"", node,
                                                     "\" is not HOST:PORT or [IPV6]:PORT"));
    }
    // The router takes an IPv6 address bare: it splits at the last colon.
    absl::string_view host = address->host;
    if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
    redis.router.seeds.push_back(absl::StrCat(host, ":", address->port));
  }
  if (redis.router.seeds.size() > kMaxNodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--redis_nodes: more than ", kMaxNodes, " nodes; a few are enough"));
  }
  if (!password_file.empty()) {
    absl::StatusOr<std::string> password = ReadPasswordFile(password_file);
    if (!password.ok()) return password.status();
    redis.router.password = *std::move(password);
    redis.router.password_origin = absl::StrCat("--redis_password_file=", password_file);
  }
  redis.partitions = static_cast<int>(absl::GetFlag(FLAGS_redis_partitions));
  redis.wait_replicas = static_cast<int>(absl::GetFlag(FLAGS_redis_wait_replicas));
  redis.wait_timeout = absl::GetFlag(FLAGS_redis_wait_timeout);
  redis.heartbeat_interval = absl::GetFlag(FLAGS_redis_heartbeat_interval);
  redis.event_retention = static_cast<size_t>(absl::GetFlag(FLAGS_redis_event_retention));
  options->redis_cluster = std::move(redis);
  return absl::OkStatus();
}

// Builds the server's options from the flags, or explains what is wrong.
absl::StatusOr<lapse::ServerOptions> OptionsFromFlags() {
  constexpr int64_t kMax = INT64_MAX;
  constexpr absl::Duration kMaxTtl = absl::Hours(24 * 365 * 100);
  const int64_t max_message = absl::GetFlag(FLAGS_max_message_bytes);
  const int64_t max_page = absl::GetFlag(FLAGS_max_page_size);
  std::string error;
  const bool ok =
      InRange(FLAGS_shards, 1, 65536, &error) &&
      InRange(FLAGS_event_retention_events, 1, kMax, &error) &&
      InRange(FLAGS_event_retention_bytes, 1, kMax, &error) &&
      InRange(FLAGS_max_collection_name_bytes, 1, 1 << 20, &error) &&
      InRange(FLAGS_max_key_bytes, 1, 1 << 20, &error) &&
      InRange(FLAGS_max_value_bytes, 0, INT32_MAX, &error) &&
      InRange(FLAGS_max_members_per_request, 1, 1'000'000, &error) &&
      InRange(FLAGS_max_page_size, 1, INT32_MAX, &error) &&
      InRange(FLAGS_default_page_size, 1, max_page, &error) &&
      // Deadlines stay far inside what a millisecond count and a
      // google.protobuf.Timestamp (up to year 9999) can hold.
      InRange(FLAGS_max_ttl, absl::Milliseconds(1), kMaxTtl, &error) &&
      InRange(FLAGS_max_total_members, 1, kMax, &error) &&
      InRange(FLAGS_max_watch_collections, 1, 1'000'000, &error) &&
      InRange(FLAGS_heartbeat_interval, absl::Milliseconds(10), absl::Hours(1), &error) &&
      InRange(FLAGS_watch_batch_max_events, 1, 1'000'000, &error) &&
      InRange(FLAGS_watch_batch_max_bytes, 1, INT32_MAX, &error) &&
      InRange(FLAGS_max_message_bytes, 4096, INT32_MAX, &error) &&
      InRange(FLAGS_reserved_fds, 16, 1 << 20, &error) &&
      InRange(FLAGS_shutdown_grace, absl::ZeroDuration(), absl::Hours(1), &error) &&
      InRange(FLAGS_snapshot_after_bytes, 0, kMax, &error) &&
      InRange(FLAGS_wal_segment_bytes, 4096, kMax, &error) &&
      InRange(FLAGS_wal_group_wait, absl::ZeroDuration(), absl::Milliseconds(10), &error);
  if (!ok) return absl::InvalidArgumentError(error);
  absl::StatusOr<lapse::ListenAddress> listen =
      lapse::ParseListenAddress(absl::GetFlag(FLAGS_listen));
  if (!listen.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--listen=", listen.status().message()));
  }
  // Prometheus' exposer (civetweb) listens on TCP only.
  if (const std::string metrics = absl::GetFlag(FLAGS_metrics_listen); !metrics.empty()) {
    absl::StatusOr<lapse::ListenAddress> parsed = lapse::ParseListenAddress(metrics);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--metrics_listen=", parsed.status().message()));
    }
    if (parsed->is_unix()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--metrics_listen=", metrics, ": expected HOST:PORT or [IPV6]:PORT"));
    }
  }
  absl::StatusOr<lapse::FsyncPolicy> fsync = lapse::ParseFsyncPolicy(absl::GetFlag(FLAGS_fsync));
  if (!fsync.ok()) return absl::InvalidArgumentError(absl::StrCat("--", fsync.status().message()));

  lapse::ThreadPriority expiry_priority;
  if (!lapse::ParseThreadPriority(absl::GetFlag(FLAGS_expiry_thread_priority), &expiry_priority)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--expiry_thread_priority=", absl::GetFlag(FLAGS_expiry_thread_priority),
                     ": expected realtime, short_slice or normal"));
  }

  lapse::ServerOptions options;
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.expiry_thread_priority = expiry_priority;
  options.store.shards = absl::GetFlag(FLAGS_shards).value_or(Defaults().store.shards);
  options.store.event_retention_events = absl::GetFlag(FLAGS_event_retention_events);
  options.store.event_retention_bytes = absl::GetFlag(FLAGS_event_retention_bytes);
  options.store.limits.max_collection_name_bytes = absl::GetFlag(FLAGS_max_collection_name_bytes);
  options.store.limits.max_key_bytes = absl::GetFlag(FLAGS_max_key_bytes);
  options.store.limits.max_value_bytes = absl::GetFlag(FLAGS_max_value_bytes);
  options.store.limits.max_members_per_request = absl::GetFlag(FLAGS_max_members_per_request);
  options.store.limits.default_page_size = static_cast<int>(absl::GetFlag(FLAGS_default_page_size));
  options.store.limits.max_page_size = static_cast<int>(max_page);
  options.store.limits.max_ttl = absl::GetFlag(FLAGS_max_ttl);
  options.store.limits.max_total_members = absl::GetFlag(FLAGS_max_total_members);
  options.store.limits.max_watch_collections = absl::GetFlag(FLAGS_max_watch_collections);
  options.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  options.watch_batch_max_events = absl::GetFlag(FLAGS_watch_batch_max_events);
  options.watch_batch_max_bytes = absl::GetFlag(FLAGS_watch_batch_max_bytes);
  options.max_message_bytes = static_cast<int>(max_message);
  options.reserved_fds = static_cast<int>(absl::GetFlag(FLAGS_reserved_fds));
  options.store.data_dir = absl::GetFlag(FLAGS_data_dir);
  options.store.fsync = *fsync;
  options.store.wal_group_wait = absl::GetFlag(FLAGS_wal_group_wait);
  options.store.snapshot_after_bytes = absl::GetFlag(FLAGS_snapshot_after_bytes);
  options.store.wal_segment_bytes = absl::GetFlag(FLAGS_wal_segment_bytes);
  options.store.wal_truncate_damaged = absl::GetFlag(FLAGS_wal_truncate_damaged);
  options.store.wal_truncate_damaged_name = "--wal_truncate_damaged";
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.auth_file = absl::GetFlag(FLAGS_auth_file);
  if (absl::Status watch = WatchBoundsFromFlags(&options); !watch.ok()) return watch;
  if (absl::Status tls = TlsFromFlags(&options); !tls.ok()) return tls;
  if (absl::Status groups = GroupBoundsFromFlags(&options); !groups.ok()) return groups;
  if (absl::Status redis = RedisFromFlags(&options); !redis.ok()) return redis;

  // A watch batch holds up to watch_batch_max_bytes of names, keys and values
  // (or one event, if larger) plus per-event framing; it must fit in a
  // message or the stream would fail on send.
  const int64_t largest_event = static_cast<int64_t>(
      options.store.limits.max_collection_name_bytes + options.store.limits.max_key_bytes +
      options.store.limits.max_value_bytes);
  constexpr int64_t kFramingPerEvent = 64;
  const int64_t largest_batch =
      std::max<int64_t>(options.watch_batch_max_bytes, largest_event) +
      static_cast<int64_t>(options.watch_batch_max_events) * kFramingPerEvent;
  if (largest_batch > max_message) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_message_bytes=", max_message,
                     " cannot hold a watch batch of up "
                     "to ",
                     largest_batch,
                     " bytes; raise it or lower "
                     "--watch_batch_max_bytes, --watch_batch_max_events or --max_value_bytes"));
  }
  if (absl::StatusOr<size_t> response_bytes = lapse::ResponseBytesFor(options);
      !response_bytes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", response_bytes.status().message()));
  }
  return options;
}

// absl::ParseCommandLine exits 1 on an unknown flag or a value it cannot
// parse; lapsed's flag errors all exit 2, so its flags are checked here first
// (each value is parsed again, to the same result, by absl). absl's own flags
// (--help, --flagfile, ...) are left to absl.
bool IsUsageFlag(absl::string_view name) {
  for (absl::string_view usage : {"help", "helpfull", "helpshort", "helppackage", "helpon",
                                  "helpmatch", "version", "only_check_args"}) {
    if (name == usage) return true;
  }
  return false;
}

bool CheckFlagSyntax(int argc, char** argv, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (!absl::ConsumePrefix(&arg, "-")) continue;
    absl::ConsumePrefix(&arg, "-");
    if (arg.empty()) break;  // "--" ends the flags.
    const size_t equals = arg.find('=');
    absl::string_view name = arg.substr(0, equals);
    // absl's usage flags are not in the registry FindCommandLineFlag reads.
    if (IsUsageFlag(name)) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && absl::ConsumePrefix(&name, "no")) {
      flag = absl::FindCommandLineFlag(name);
      if (flag != nullptr && flag->IsOfType<bool>() && equals == absl::string_view::npos) continue;
      flag = nullptr;
    }
    if (flag == nullptr) {
      *error =
          absl::StrCat("--", arg.substr(0, equals), ": no such flag; lapsed --help lists them");
      return false;
    }
    if (!absl::EndsWith(flag->Filename(), "lapsed_main.cc")) continue;
    std::string value;
    if (equals != absl::string_view::npos) {
      value = std::string(arg.substr(equals + 1));
    } else if (flag->IsOfType<bool>()) {
      continue;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      *error = absl::StrCat("--", name, ": needs a value");
      return false;
    }
    std::string why;
    if (!flag->ParseFrom(value, &why)) {
      *error = absl::StrCat("--", name, "=", value, ": ", why);
      return false;
    }
  }
  return true;
}

// Lets flags be written --data-dir as well as --data_dir: dashes in a flag's
// name (not its value) become underscores.
void UnderscoreFlagNames(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    char* arg = argv[i];
    if (arg[0] != '-' || arg[1] != '-') continue;
    if (arg[2] == '\0') break;  // "--" ends the flags.
    for (char* c = arg + 2; *c != '\0' && *c != '='; ++c) {
      if (*c == '-') *c = '_';
    }
  }
}

// Says what the expiry threads got of --expiry_thread_priority, and why
// when less.
void LogExpiryThreadPriority(const lapse::ServerOptions& options, lapse::LapseServer& server) {
  std::vector<std::pair<std::string, lapse::AppliedPriority>> threads = {
      {"watch dispatcher", server.watch_hub().dispatcher_priority()}};
  if (server.redis_store() == nullptr) {
    threads.emplace_back("expirer", server.embedded_store().expirer().priority());
  }
  for (const auto& [name, got] : threads) {
    if (got.refused.empty()) {
      Log(LogLevel::kInfo, "%s thread: %s priority", name, lapse::ThreadPriorityName(got.priority));
    } else {
      Log(LogLevel::kWarning, "%s thread: %s priority, not --expiry_thread_priority=%s (%s)", name,
          lapse::ThreadPriorityName(got.priority),
          lapse::ThreadPriorityName(options.expiry_thread_priority), got.refused);
    }
  }
}

// The start line's store: what is true of the store in use (lock shards are
// the embedded store's; the Redis Cluster store has partitions instead).
std::string StoreDescription(const lapse::ServerOptions& options, lapse::LapseServer& server) {
  if (const lapse::redis::RedisClusterStore* redis = server.redis_store(); redis != nullptr) {
    return absl::StrCat("redis-cluster at ",
                        absl::StrJoin(options.redis_cluster->router.seeds, ","), " (",
                        redis->partitions(), " partitions, WAIT ",
                        options.redis_cluster->wait_replicas, " replicas, heartbeat ",
                        absl::FormatDuration(options.redis_cluster->heartbeat_interval), ")");
  }
  const std::string shards = absl::StrCat("; shards ", options.store.shards);
  if (options.store.data_dir.empty()) {
    return absl::StrCat("memory-only (no --data-dir: nothing survives a restart)", shards);
  }
  const char* fsync = options.store.fsync == lapse::FsyncPolicy::kAlways        ? "always"
                      : options.store.fsync == lapse::FsyncPolicy::kEverySecond ? "everysec"
                                                                                : "never";
  return absl::StrCat("durable in ", options.store.data_dir, " (fsync ", fsync, ")", shards);
}

}  // namespace

int main(int argc, char** argv) {
  // Debian builds Abseil without NDEBUG, so every absl::Mutex (gRPC's locks;
  // lapse's own are lapse::Mutex) would keep a lock-order graph for deadlock
  // detection, 2-3 % of the CPU (docs/benchmarks.md, perfsingle4).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(
      "lapse server: expiring collections over gRPC (lapse.v1.LapseService)");
  UnderscoreFlagNames(argc, argv);
  if (std::string error; !CheckFlagSyntax(argc, argv, &error)) {
    std::fprintf(stderr, "lapsed: %s\n", error.c_str());
    return 2;
  }
  absl::ParseCommandLine(argc, argv);

  LogLevel log_level;
  if (!lapse::ParseLogLevel(absl::GetFlag(FLAGS_log_level), &log_level)) {
    std::fprintf(stderr, "lapsed: --log_level=%s: expected error, warning or info\n",
                 absl::GetFlag(FLAGS_log_level).c_str());
    return 2;
  }
  lapse::SetMinLogLevel(log_level);
  lapse::LogFormat log_format;
  if (!lapse::ParseLogFormat(absl::GetFlag(FLAGS_log_format), &log_format)) {
    std::fprintf(stderr, "lapsed: --log_format=%s: expected text or json\n",
                 absl::GetFlag(FLAGS_log_format).c_str());
    return 2;
  }
  lapse::SetLogFormat(log_format);
  absl::StatusOr<lapse::ServerOptions> options = OptionsFromFlags();
  if (!options.ok()) {
    std::fprintf(stderr, "lapsed: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }

  // Block the stop signals before any thread starts so every thread inherits
  // the mask; this thread then takes them synchronously with sigwait, which
  // keeps all shutdown work out of a signal handler.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  if (absl::StatusOr<lapse::FileLimit> limit = lapse::RaiseFileLimit(); !limit.ok()) {
    Log(LogLevel::kWarning, "cannot raise the open-file limit: %s", limit.status().message());
  } else if (limit->after > limit->before) {
    Log(LogLevel::kInfo, "raised the open-file limit from %d to %d (the hard limit)", limit->before,
        limit->after);
  } else {
    Log(LogLevel::kInfo, "open-file limit %d (the hard limit)", limit->after);
  }

  // Held until the process exits, so that destroying the server skips
  // gRPC's library shutdown: that joins gRPC's threads, and after a client
  // stopped reading, one of them (a backup poller) may sleep in epoll for up
  // to 10 s more; the exit would overrun --shutdown_grace.
  lapse::RouteGrpcLogs();
  grpc_init();
  lapse::LapseServer server(*options);
  absl::StatusOr<int> port = server.Start();
  if (!port.ok() && port.status().code() == absl::StatusCode::kUnauthenticated) {
    // The Redis Cluster refused the password (the message names the file:
    // RouterOptions::password_origin), or wants one: the flag to give.
    const std::string file = absl::GetFlag(FLAGS_redis_password_file);
    Log(LogLevel::kError, "%s%s", port.status().message(),
        file.empty() ? "; give its password with --redis_password_file" : "");
    return 1;
  }
  if (!port.ok()) {
    Log(LogLevel::kError, "%s", port.status().message());
    return 1;
  }
  // Only the embedded store recovers anything.
  const std::optional<lapse::RecoveryStats> recovered =
      server.redis_store() == nullptr ? server.embedded_store().recovery() : std::nullopt;
  if (recovered.has_value()) {
    Log(LogLevel::kInfo,
        "recovered %d members and %d retained events from %s + %d log batches in %s",
        recovered->members, recovered->events,
        recovered->snapshot.empty() ? "no snapshot" : recovered->snapshot,
        recovered->batches_replayed, absl::FormatDuration(recovered->took));
    if (!recovered->damaged_snapshots.empty()) {
      Log(LogLevel::kError, "passed over DAMAGED snapshots, recovered from %s instead: %s",
          recovered->snapshot.empty() ? "the whole log" : recovered->snapshot,
          recovered->damaged_snapshots);
    }
    if (!recovered->torn_tail.empty()) {
      Log(LogLevel::kWarning, "cut a torn write-ahead log tail: %s", recovered->torn_tail);
    }
    if (!recovered->discarded.empty()) {
      Log(LogLevel::kError, "--wal_truncate_damaged DISCARDED the log from %s on",
          recovered->discarded);
    }
  }
  LogExpiryThreadPriority(*options, server);
  if (options->auth_file.empty()) {
    Log(LogLevel::kWarning,
        "no --auth_file: anyone who can reach %s may read, write and delete every collection",
        options->listen_address);
  } else {
    Log(LogLevel::kInfo, "authorization by --auth_file=%s (re-read when it changes)",
        options->auth_file);
  }
  const lapse::ListenAddress listen = *lapse::ParseListenAddress(options->listen_address);
  const std::string port_note = listen.is_unix() ? "" : absl::StrCat(" (port ", *port, ")");
  const std::string metrics =
      options->metrics_listen.empty()
          ? std::string("metrics off")
          : absl::StrCat(
                "metrics on http://",
                lapse::ParseListenAddress(options->metrics_listen)->WithPort(server.metrics_port()),
                "/metrics (metrics port ", server.metrics_port(), ")");
  const std::string tls = !options->tls.enabled()               ? "plaintext"
                          : options->tls.client_ca_file.empty() ? "TLS"
                                                                : "mTLS";
  const std::string health =
      options->health_listen.empty()
          ? ""
          : absl::StrCat(
                "; plaintext health on ",
                lapse::ParseListenAddress(options->health_listen)->WithPort(server.health_port()),
                " (health port ", server.health_port(), ")");
  std::printf("lapsed listening on %s%s (%s); store: %s; %s%s\n", listen.WithPort(*port).c_str(),
              port_note.c_str(), tls.c_str(), StoreDescription(*options, server).c_str(),
              metrics.c_str(), health.c_str());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  const absl::Duration grace = absl::GetFlag(FLAGS_shutdown_grace);
  Log(LogLevel::kInfo, "received %s; draining (grace %s)",
      signal_number == SIGTERM ? "SIGTERM" : "SIGINT", absl::FormatDuration(grace));
  server.Shutdown(grace);
  Log(LogLevel::kInfo, "stopped");
  return 0;
}
