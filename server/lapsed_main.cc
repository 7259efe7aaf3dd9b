// lapsed: the lapse server.
//
//   lapsed --listen=0.0.0.0:50051 --shards=16 --max_ttl=720h
//
//   lapsed --data-dir=/var/lib/lapse --fsync=everysec
//
// Prints one line when it serves (address, bound port, store), drains and
// exits 0 on SIGTERM or SIGINT, exits 2 on invalid flags and 1 when it cannot
// listen or recover its data directory. Without --data_dir the store is
// memory-only: a restart starts empty. Flag names may be written with dashes
// or underscores (--data-dir, --data_dir).
#include <pthread.h>

#include <algorithm>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/base/log.h"
#include "server/lapse_server.h"

namespace {

const lapse::ServerOptions& Defaults() {
  static const lapse::ServerOptions* const defaults = new lapse::ServerOptions;
  return *defaults;
}

}  // namespace

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "Address to serve on; 0.0.0.0:50051 in a container, port 0 picks a "
          "free port");
ABSL_FLAG(int64_t, shards, static_cast<int64_t>(Defaults().store.shards),
          "Lock shards of the store");
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
ABSL_FLAG(absl::Duration, heartbeat_interval, Defaults().heartbeat_interval,
          "An idle watch stream gets an empty batch this often");
ABSL_FLAG(int64_t, watch_batch_max_events, static_cast<int64_t>(Defaults().watch_batch_max_events),
          "Events in one watch batch");
ABSL_FLAG(int64_t, watch_batch_max_bytes, static_cast<int64_t>(Defaults().watch_batch_max_bytes),
          "Bytes of names, keys and values in one watch batch");
ABSL_FLAG(int64_t, max_message_bytes, Defaults().max_message_bytes,
          "Largest gRPC message received or sent");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(5),
          "On SIGTERM, how long in-flight RPCs get before they are cancelled");
ABSL_FLAG(std::string, data_dir, "",
          "Keep state in this directory (write-ahead log + snapshots); empty "
          "runs memory-only");
ABSL_FLAG(std::string, fsync, "everysec",
          "With --data_dir: always (fsync before each answer, with group "
          "commit), everysec (answer once written; fsync every second) or "
          "never (leave it to the OS)");
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
ABSL_FLAG(std::string, log_level, "info",
          "error, warning or info; gRPC's own logging follows GRPC_VERBOSITY");

namespace {

using lapse::Log;
using lapse::LogLevel;

// Checks that `flag`'s value is within [min, max].
bool InRange(absl::string_view flag, int64_t value, int64_t min, int64_t max, std::string* error) {
  if (value >= min && value <= max) return true;
  *error = absl::StrCat("--", flag, "=", value, " is out of range [", min, ", ", max, "]");
  return false;
}

bool Positive(absl::string_view flag, absl::Duration value, std::string* error) {
  if (value > absl::ZeroDuration() && value < absl::InfiniteDuration()) {
    return true;
  }
  *error = absl::StrCat("--", flag, "=", absl::FormatDuration(value),
                        " must be a positive, finite duration");
  return false;
}

// Builds the server's options from the flags, or explains what is wrong.
absl::StatusOr<lapse::ServerOptions> OptionsFromFlags() {
  constexpr int64_t kMax = INT64_MAX;
  const int64_t max_message = absl::GetFlag(FLAGS_max_message_bytes);
  const int64_t max_page = absl::GetFlag(FLAGS_max_page_size);
  std::string error;
  const bool ok =
      InRange("shards", absl::GetFlag(FLAGS_shards), 1, 65536, &error) &&
      InRange("event_retention_events", absl::GetFlag(FLAGS_event_retention_events), 1, kMax,
              &error) &&
      InRange("event_retention_bytes", absl::GetFlag(FLAGS_event_retention_bytes), 1, kMax,
              &error) &&
      InRange("max_collection_name_bytes", absl::GetFlag(FLAGS_max_collection_name_bytes), 1,
              1 << 20, &error) &&
      InRange("max_key_bytes", absl::GetFlag(FLAGS_max_key_bytes), 1, 1 << 20, &error) &&
      InRange("max_value_bytes", absl::GetFlag(FLAGS_max_value_bytes), 0, INT32_MAX, &error) &&
      InRange("max_members_per_request", absl::GetFlag(FLAGS_max_members_per_request), 1, 1'000'000,
              &error) &&
      InRange("max_page_size", max_page, 1, INT32_MAX, &error) &&
      InRange("default_page_size", absl::GetFlag(FLAGS_default_page_size), 1, max_page, &error) &&
      Positive("max_ttl", absl::GetFlag(FLAGS_max_ttl), &error) &&
      InRange("max_total_members", absl::GetFlag(FLAGS_max_total_members), 1, kMax, &error) &&
      InRange("max_watch_collections", absl::GetFlag(FLAGS_max_watch_collections), 1, 1'000'000,
              &error) &&
      Positive("heartbeat_interval", absl::GetFlag(FLAGS_heartbeat_interval), &error) &&
      InRange("watch_batch_max_events", absl::GetFlag(FLAGS_watch_batch_max_events), 1, 1'000'000,
              &error) &&
      InRange("watch_batch_max_bytes", absl::GetFlag(FLAGS_watch_batch_max_bytes), 1, INT32_MAX,
              &error) &&
      InRange("max_message_bytes", max_message, 4096, INT32_MAX, &error) &&
      Positive("shutdown_grace", absl::GetFlag(FLAGS_shutdown_grace), &error) &&
      InRange("snapshot_after_bytes", absl::GetFlag(FLAGS_snapshot_after_bytes), 0, kMax, &error) &&
      InRange("wal_segment_bytes", absl::GetFlag(FLAGS_wal_segment_bytes), 4096, kMax, &error);
  if (!ok) return absl::InvalidArgumentError(error);
  absl::StatusOr<lapse::FsyncPolicy> fsync = lapse::ParseFsyncPolicy(absl::GetFlag(FLAGS_fsync));
  if (!fsync.ok()) return absl::InvalidArgumentError(absl::StrCat("--", fsync.status().message()));

  lapse::ServerOptions options;
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.store.shards = absl::GetFlag(FLAGS_shards);
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
  options.store.data_dir = absl::GetFlag(FLAGS_data_dir);
  options.store.fsync = *fsync;
  options.store.snapshot_after_bytes = absl::GetFlag(FLAGS_snapshot_after_bytes);
  options.store.wal_segment_bytes = absl::GetFlag(FLAGS_wal_segment_bytes);
  options.store.wal_truncate_damaged = absl::GetFlag(FLAGS_wal_truncate_damaged);

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

std::string StoreDescription(const lapse::ServerOptions& options) {
  if (options.store.data_dir.empty()) {
    return "memory-only (no --data-dir: nothing survives a restart)";
  }
  const char* fsync = options.store.fsync == lapse::FsyncPolicy::kAlways        ? "always"
                      : options.store.fsync == lapse::FsyncPolicy::kEverySecond ? "everysec"
                                                                                : "never";
  return absl::StrCat("durable in ", options.store.data_dir, " (fsync ", fsync, ")");
}

// "host:port" with the port actually bound.
std::string BoundAddress(const std::string& listen, int port) {
  const size_t colon = listen.rfind(':');
  const std::string host = colon == std::string::npos ? listen : listen.substr(0, colon);
  return absl::StrCat(host, ":", port);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "lapse server: expiring collections over gRPC (lapse.v1.LapseService)");
  UnderscoreFlagNames(argc, argv);
  absl::ParseCommandLine(argc, argv);

  LogLevel log_level;
  if (!lapse::ParseLogLevel(absl::GetFlag(FLAGS_log_level), &log_level)) {
    std::fprintf(stderr, "lapsed: --log_level=%s: expected error, warning or info\n",
                 absl::GetFlag(FLAGS_log_level).c_str());
    return 2;
  }
  lapse::SetMinLogLevel(log_level);
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

  lapse::LapseServer server(*options);
  absl::StatusOr<int> port = server.Start();
  if (!port.ok()) {
    Log(LogLevel::kError, "%s", port.status().message());
    return 1;
  }
  if (const auto& recovered = server.embedded_store().recovery(); recovered.has_value()) {
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
  std::printf("lapsed listening on %s (port %d); store: %s; shards %zu\n",
              BoundAddress(options->listen_address, *port).c_str(), *port,
              StoreDescription(*options).c_str(), options->store.shards);
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
