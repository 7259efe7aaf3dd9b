#include "server/metrics/server_metrics.h"

#include <cstdint>
#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "prometheus/client_metric.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "server/metrics/rpc_interceptor.h"

namespace lapse {
namespace {

using prometheus::Histogram;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Expiry lag: 1 ms (the deadlines' resolution) to a minute (a backlog after
// a restart).
Histogram::BucketBoundaries LagBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

// A write() or fdatasync(): 10 µs to 2.5 s.
Histogram::BucketBoundaries IoBuckets() {
  return {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
          0.01,    0.025,    0.05,    0.1,    0.25,    0.5,    1,     2.5};
}

Histogram& AddHistogram(prometheus::Registry& registry, const std::string& name,
                        const std::string& help, const Histogram::BucketBoundaries& buckets) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add({}, buckets);
}

MetricFamily OneValue(std::string name, std::string help, MetricType type, double value) {
  MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  prometheus::ClientMetric metric;
  if (type == MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
  return family;
}

MetricFamily Gauge(std::string name, std::string help, double value) {
  return OneValue(std::move(name), std::move(help), MetricType::Gauge, value);
}

// One value per consumer group, labelled group="NAME".
struct PerGroup {
  MetricFamily family;

  PerGroup(std::string name, std::string help, MetricType type) {
    family.name = std::move(name);
    family.help = std::move(help);
    family.type = type;
  }
  void Add(const std::string& group, double value) {
    prometheus::ClientMetric metric;
    metric.label.push_back({"group", group});
    if (family.type == MetricType::Counter) {
      metric.counter.value = value;
    } else {
      metric.gauge.value = value;
    }
    family.metric.push_back(std::move(metric));
  }
};

// The consumer groups' gauges and counters: as many series as groups, which
// --max_consumer_groups bounds.
void AddConsumerGroups(ConsumerGroups& groups, std::vector<MetricFamily>* families) {
  PerGroup lag("lapse_consumer_group_lag",
               "Event sequences after the group's position: an upper bound on the matching "
               "events it has not received",
               MetricType::Gauge);
  PerGroup pending("lapse_consumer_group_pending",
                   "Events of the group leased or awaiting redelivery", MetricType::Gauge);
  PerGroup dead("lapse_consumer_group_dead_lettered", "Events in the group's dead-letter list",
                MetricType::Gauge);
  PerGroup lost("lapse_consumer_group_lost_sequences_total",
                "Sequences retention discarded before the group received them",
                MetricType::Counter);
  PerGroup delivered("lapse_consumer_group_delivered_total",
                     "Deliveries of the group's events to its consumers (Poll and Consume), "
                     "redeliveries included",
                     MetricType::Counter);
  PerGroup acked("lapse_consumer_group_acked_total", "Events of the group acknowledged",
                 MetricType::Counter);
  std::string after;
  while (true) {
    absl::StatusOr<ConsumerGroups::Page> page = groups.List(1000, after);
    if (!page.ok()) break;
    for (const ConsumerGroupInfo& info : page->groups) {
      lag.Add(info.name, static_cast<double>(info.lag));
      pending.Add(info.name, static_cast<double>(info.pending));
      dead.Add(info.name, static_cast<double>(info.dead_lettered));
      lost.Add(info.name, static_cast<double>(info.lost_sequences_total));
      delivered.Add(info.name, static_cast<double>(info.delivered_total));
      acked.Add(info.name, static_cast<double>(info.acked_total));
    }
    if (!page->next_after.has_value()) break;
    after = *page->next_after;
  }
  for (PerGroup* metric : {&lag, &pending, &dead, &lost, &delivered, &acked}) {
    families->push_back(std::move(metric->family));
  }
}

// The store's state, read on each scrape.
class StoreGauges final : public prometheus::Collectable {
 public:
  explicit StoreGauges(EmbeddedStore* store) : store_(store) {}

  std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> families;
    const Engine::Counts counts = store_->engine().CountCollections();
    families.push_back(Gauge("lapse_members", "Live members across all collections",
                             static_cast<double>(store_->engine().total_members())));
    families.push_back(Gauge("lapse_collections", "Collections with at least one member",
                             static_cast<double>(counts.collections)));
    families.push_back(Gauge("lapse_pending_deadlines", "Members with a deadline not yet expired",
                             static_cast<double>(counts.pending_deadlines)));
    const EventFeed& feed = store_->event_feed();
    const EventFeed::Retained retained = feed.retained();
    families.push_back(Gauge("lapse_event_log_retained_events",
                             "Expiry events held for watchers to read and resume from",
                             static_cast<double>(retained.events)));
    families.push_back(Gauge("lapse_event_log_retained_bytes",
                             "Bytes of the expiry events held for watchers",
                             static_cast<double>(retained.bytes)));
    families.push_back(Gauge("lapse_event_log_oldest_sequence",
                             "Oldest sequence a watcher can still resume after",
                             static_cast<double>(feed.oldest_retained_sequence())));
    families.push_back(Gauge("lapse_event_log_last_sequence",
                             "Newest expiry event sequence visible to watchers",
                             static_cast<double>(feed.last_sequence())));
    AddConsumerGroups(store_->consumer_groups(), &families);
    if (DurableStore* durable = store_->durable(); durable != nullptr) {
      AddDurable(*durable, &families);
    }
    if (const std::optional<RecoveryStats>& recovery = store_->recovery(); recovery.has_value()) {
      families.push_back(Gauge("lapse_recovery_duration_seconds",
                               "How long start-up recovery of the data directory took",
                               absl::ToDoubleSeconds(recovery->took)));
    }
    return families;
  }

 private:
  static void AddDurable(DurableStore& durable, std::vector<MetricFamily>* families) {
    const WalStats wal = durable.wal_stats();
    families->push_back(OneValue("lapse_wal_bytes_written_total",
                                 "Bytes written to the write-ahead log", MetricType::Counter,
                                 static_cast<double>(wal.bytes_written)));
    families->push_back(Gauge("lapse_wal_refusing_writes",
                              "1 while the write-ahead log refuses writes (e.g. the disk is "
                              "full; they resume by themselves), else 0",
                              wal.refusing ? 1 : 0));
    families->push_back(OneValue("lapse_wal_write_failures_total",
                                 "Failed writes or fsyncs of the write-ahead log, each starting a "
                                 "spell of refused writes",
                                 MetricType::Counter, static_cast<double>(wal.write_failures)));
    families->push_back(OneValue("lapse_wal_batches_rolled_back_total",
                                 "Changes undone because their log write failed (their requests "
                                 "were answered with the error)",
                                 MetricType::Counter,
                                 static_cast<double>(wal.batches_rolled_back)));
    families->push_back(OneValue("lapse_snapshots_skipped_for_space_total",
                                 "Snapshots not taken because the disk had no room for them",
                                 MetricType::Counter,
                                 static_cast<double>(durable.snapshots_skipped_for_space())));
    if (const std::optional<SnapshotStats> snapshot = durable.last_snapshot();
        snapshot.has_value()) {
      families->push_back(Gauge("lapse_snapshot_last_duration_seconds",
                                "How long the last snapshot took to write",
                                absl::ToDoubleSeconds(snapshot->took)));
      families->push_back(Gauge("lapse_snapshot_last_bytes", "Size of the last snapshot",
                                static_cast<double>(snapshot->bytes)));
    }
  }

  EmbeddedStore* const store_;
};

MetricFamily Counter(std::string name, std::string help, uint64_t value) {
  return OneValue(std::move(name), std::move(help), MetricType::Counter,
                  static_cast<double>(value));
}

// The Redis Cluster store's figures, read on each scrape.
class RedisGauges final : public prometheus::Collectable {
 public:
  explicit RedisGauges(redis::RedisClusterStore* store) : store_(store) {}

  std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> families;
    families.push_back(Gauge("lapse_redis_partitions", "Partitions of the store",
                             static_cast<double>(store_->partitions())));
    if (const redis::Reaper* reaper = store_->reaper(); reaper != nullptr) {
      const redis::Reaper::Stats stats = reaper->stats();
      families.push_back(Counter("lapse_redis_reaper_passes_total",
                                 "Reap script calls on the partitions this replica owns",
                                 stats.passes));
      families.push_back(Counter("lapse_redis_reaper_reaped_total",
                                 "Members this replica's reaper expired", stats.reaped));
      families.push_back(Gauge("lapse_redis_reaper_partitions_owned",
                               "Partitions this replica reaps now",
                               static_cast<double>(stats.owned)));
      families.push_back(Counter("lapse_redis_reaper_partitions_gained_total",
                                 "Partitions this replica took on: at start, and from replicas "
                                 "that stopped or died (takeovers)",
                                 stats.partitions_gained));
      families.push_back(Gauge("lapse_redis_replicas_live",
                               "Live lapsed replicas, as this replica's last heartbeat saw them",
                               static_cast<double>(stats.live_replicas)));
      families.push_back(Counter("lapse_redis_reaper_watermark_advances_total",
                                 "Delivery watermarks this replica advanced after WAIT",
                                 stats.watermark_advances));
      families.push_back(Counter("lapse_redis_reaper_wait_failures_total",
                                 "Reap passes whose WAIT did not count the replicas asked for "
                                 "(the watermark held; retried)",
                                 stats.wait_failures));
      families.push_back(Counter("lapse_redis_reaper_failures_total",
                                 "Reap passes and heartbeats that failed (retried)",
                                 stats.failures));
    }
    return families;
  }

 private:
  redis::RedisClusterStore* const store_;
};

}  // namespace

ServerMetrics::ServerMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      expiry_events_(prometheus::BuildCounter()
                         .Name("lapse_expiry_events_total")
                         .Help("Expiry events emitted")
                         .Register(*registry_)
                         .Add({})),
      expiry_lag_(AddHistogram(*registry_, "lapse_expiry_lag_seconds",
                               "How late members expired: expired_at - deadline", LagBuckets())),
      wal_write_(AddHistogram(*registry_, "lapse_wal_write_seconds",
                              "One write() of appended batches to the write-ahead log",
                              IoBuckets())),
      wal_fsync_(AddHistogram(*registry_, "lapse_wal_fsync_seconds",
                              "One fdatasync() of the write-ahead log", IoBuckets())),
      rpc_duration_(prometheus::BuildHistogram()
                        .Name("lapse_rpc_duration_seconds")
                        .Help("RPCs by method and status code, from start to status (a watch "
                              "stream: its lifetime)")
                        .Register(*registry_)),
      rpcs_in_flight_(prometheus::BuildGauge()
                          .Name("lapse_rpcs_in_flight")
                          .Help("RPCs started and not yet ended, by method (WatchExpirations: "
                                "the open watch streams)")
                          .Register(*registry_)),
      auth_denied_(prometheus::BuildCounter()
                       .Name("lapse_auth_denied_total")
                       .Help("Calls refused by the --auth_file, by status code "
                             "(UNAUTHENTICATED, PERMISSION_DENIED)")
                       .Register(*registry_)) {}

ServerMetrics::~ServerMetrics() { StopServing(); }

void ServerMetrics::OnExpiryEvent(const ExpiryEvent& event) {
  expiry_events_.Increment();
  expiry_lag_.Observe(absl::ToDoubleSeconds(event.expired_at - event.expire_time));
}

void ServerMetrics::OnWalIo(WalIo io, absl::Duration took) {
  (io == WalIo::kWrite ? wal_write_ : wal_fsync_).Observe(absl::ToDoubleSeconds(took));
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
ServerMetrics::InterceptorFactory() {
  return std::make_unique<RpcMetricsFactory>(rpc_duration_, rpcs_in_flight_, auth_denied_);
}

absl::StatusOr<int> ServerMetrics::Serve(const std::string& address, EmbeddedStore* store) {
  return ServeWith(address, std::make_shared<StoreGauges>(store));
}

absl::StatusOr<int> ServerMetrics::Serve(const std::string& address,
                                         redis::RedisClusterStore* store) {
  return ServeWith(address, std::make_shared<RedisGauges>(store));
}

absl::StatusOr<int> ServerMetrics::ServeWith(
    const std::string& address, std::shared_ptr<prometheus::Collectable> store_gauges) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address, ": ", e.what(),
                                               "; pick another --metrics_listen address"));
  }
  store_gauges_ = std::move(store_gauges);
  exposer_->RegisterCollectable(registry_);
  exposer_->RegisterCollectable(store_gauges_);
  const std::vector<int> ports = exposer_->GetListeningPorts();
  if (ports.empty()) {
    StopServing();
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address));
  }
  return ports.front();
}

void ServerMetrics::StopServing() {
  exposer_.reset();
  store_gauges_.reset();
}

}  // namespace lapse
