// StreamConsumer: one consumer of a Redis Streams consumer group, the Redis
// peer of lapse-bench's GroupConsumer (bench/load/group_consumer.h), on a
// connection and a thread of its own, run the way users run one:
//   XREADGROUP GROUP <group> <name> COUNT <max_in_flight> BLOCK <ms>
//     STREAMS <stream> >
// then one XACK per entry (pipelined) for everything it read; and, every
// claim interval, the reclaimer loop
//   XAUTOCLAIM <stream> <group> <name> <visibility timeout> <cursor> COUNT ...
// over the whole pending list, acknowledging what it claims the same way.
// Every XACK that answers 1 goes to the GroupLedger; one that answers 0 (the
// entry was no longer pending: handled twice) is an error.
//
// A consumer made to die (dies) never acknowledges: once it holds
// max_in_flight entries it reports them to the ledger with the time and
// closes its connection, leaving them in its pending list.
//
//   lapse::compare::StreamConsumer consumer(options, 0, /*dies=*/false, &ledger);
//   if (!consumer.Start().ok()) ...
//   consumer.Stop();
//
// Start and Stop are called from one thread; errors() is thread-safe.
#ifndef LAPSE_BENCH_COMPARE_REDIS_STREAM_CONSUMER_H_
#define LAPSE_BENCH_COMPARE_REDIS_STREAM_CONSUMER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/common/group_ledger.h"
#include "bench/common/stoppable_thread.h"
#include "bench/compare/redis_conn.h"
#include "bench/compare/redis_options.h"

namespace lapse {
namespace compare {

class StreamConsumer {
 public:
  // Reads o.channel (the stream) in group `group`; `ledger` must outlive it.
  StreamConsumer(const Options& o, std::string group, int index, bool dies,
                 load::GroupLedger* ledger);
  StreamConsumer(const StreamConsumer&) = delete;
  StreamConsumer& operator=(const StreamConsumer&) = delete;

  // Connects and starts reading on a thread of its own.
  absl::Status Start();
  // Stops reading (within one BLOCK) and waits for the thread. Idempotent.
  void Stop();

 private:
  void Run();
  // Acknowledges `entries` (an XREADGROUP or XAUTOCLAIM entry array) or,
  // when this consumer dies, holds them; returns false once it died.
  bool Handle(const redisReply* entries);
  // One reclaimer pass over the pending list.
  void Claim();

  // Constant after construction.
  const Options o_;
  const std::string group_;
  const std::string name_;
  const int index_;
  const bool dies_;
  load::GroupLedger* const ledger_;
  std::unique_ptr<RedisConn> conn_;

  // Touched by the reading thread only.
  std::vector<uint64_t> held_;

  // Declared last: destroying it stops the loop before the rest goes.
  load::StoppableThread thread_;
};

}  // namespace compare
}  // namespace lapse

#endif  // LAPSE_BENCH_COMPARE_REDIS_STREAM_CONSUMER_H_
