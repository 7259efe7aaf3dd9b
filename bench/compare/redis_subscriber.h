// Subscriber: the watcher of the Redis peers, a SUBSCRIBE client on a thread
// of its own that hands what it hears to an ExpiryLedger: in classic mode the
// poller's messages (lines of "collection \t key \t value \t deadline_ms"),
// in hfe mode the `hexpired` keyspace events, credited by an HfeAttribution.
//
//   lapse::compare::Subscriber subscriber(options, &ledger, attribution.get());
//   if (!subscriber.Start().ok()) ...
//   subscriber.Stop();   // what is published meanwhile is lost (pub/sub)
//   subscriber.Start();  // subscribes again
//
// Start and Stop are called from one thread; the counters are thread-safe.
#ifndef LAPSE_BENCH_COMPARE_REDIS_SUBSCRIBER_H_
#define LAPSE_BENCH_COMPARE_REDIS_SUBSCRIBER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "bench/common/ledger.h"
#include "bench/common/stoppable_thread.h"
#include "bench/compare/hfe_attribution.h"
#include "bench/compare/redis_conn.h"
#include "bench/compare/redis_options.h"

namespace lapse {
namespace compare {

class Subscriber {
 public:
  // `attribution` is used (and must be set) in hfe mode only.
  Subscriber(const Options& o, load::ExpiryLedger* ledger, HfeAttribution* attribution)
      : o_(o), ledger_(ledger), attribution_(attribution) {}
  ~Subscriber() { Stop(); }
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Connects, subscribes, and returns once Redis confirmed the subscription.
  absl::Status Start();

  // Disconnects; what is published meanwhile is lost (that is pub/sub).
  void Stop();

  uint64_t messages() const { return messages_.load(); }
  uint64_t errors() const { return errors_.load(); }

 private:
  void Run();

  // Lines of "collection \t key \t value \t deadline_ms".
  void ParseClassic(absl::string_view payload, int64_t received_us,
                    std::vector<load::Delivery>* out);

  // Constant after construction.
  const Options o_;
  load::ExpiryLedger* const ledger_;
  HfeAttribution* const attribution_;

  std::unique_ptr<RedisConn> conn_;
  std::atomic<uint64_t> messages_{0};
  std::atomic<uint64_t> errors_{0};

  load::StoppableThread thread_;
};

}  // namespace compare
}  // namespace lapse

#endif  // LAPSE_BENCH_COMPARE_REDIS_SUBSCRIBER_H_
