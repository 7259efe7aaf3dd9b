#include "bench/compare/redis_writer.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "bench/common/load_counters.h"
#include "bench/common/members.h"
#include "bench/common/report.h"
#include "bench/common/stats.h"
#include "bench/compare/redis_conn.h"

namespace lapse {
namespace compare {
namespace {

using load::LoadOutcome;
using load::LoadPlan;
using load::NowMicros;
using load::NowMillis;

// concurrency / connections batches pipelined.
class Writer {
 public:
  Writer(const Options& o, const LoadPlan& plan) : o_(o), plan_(plan), counters_(plan, o.batch) {}

  LoadOutcome Run() {
    std::unique_ptr<load::Progress> progress;
    if (plan_.progress) {
      progress = std::make_unique<load::Progress>([this] { return counters_.ProgressLine(); });
    }
    const int connections = std::max(1, o_.connections);
    const size_t window = static_cast<size_t>(std::max(1, o_.concurrency / connections));
    std::vector<std::thread> threads;
    for (int c = 0; c < connections; ++c) {
      threads.emplace_back([this, window] { Connection(window); });
    }
    for (std::thread& t : threads) t.join();
    progress.reset();
    return counters_.Outcome();
  }

 private:
  struct InFlight {
    size_t members;
    // Replies still to come.
    int replies;
    int64_t started_us;
    bool ok;
  };

  void Connection(size_t window) {
    absl::StatusOr<std::unique_ptr<RedisConn>> conn = RedisConn::Connect(o_.host, o_.port);
    if (!conn.ok()) {
      counters_.Failed(std::string(conn.status().message()));
      return;
    }
    std::deque<InFlight> in_flight;
    BatchArgs args;
    while (true) {
      while (in_flight.size() < window) {
        const std::optional<uint64_t> batch = counters_.NextBatch();
        if (!batch.has_value()) break;
        const size_t n = Fill(*batch, &args);
        const int replies = AppendBatch(**conn, args, n);
        in_flight.push_back({n, replies, NowMicros(), true});
      }
      if (in_flight.empty()) return;
      // One blocking read (which first sends everything appended), then
      // every reply that read brought in, so the window is refilled with one
      // write rather than one per batch.
      ReplyPtr reply = (*conn)->Reply();
      if (reply == nullptr) {
        counters_.Failed(absl::StrCat("redis: ", (*conn)->error()));
        return;
      }
      while (reply != nullptr) {
        InFlight& front = in_flight.front();
        if (reply->type == REDIS_REPLY_ERROR) {
          front.ok = false;
          counters_.Failed(ReplyError(reply.get()));
        }
        if (--front.replies == 0) {
          counters_.Finished(front.started_us, front.members, front.ok);
          in_flight.pop_front();
        }
        if (in_flight.empty()) break;
        reply = (*conn)->BufferedReply();
      }
    }
  }

  // The strings of one batch; views into them are handed to hiredis.
  struct BatchArgs {
    std::string collection;
    std::vector<std::string> keys, values, deadlines, zmembers;
    std::vector<absl::string_view> argv;
  };

  size_t Fill(uint64_t batch, BatchArgs* a) {
    const auto [first, end] = plan_.BatchMembers(o_.batch, batch);
    const size_t n = static_cast<size_t>(end - first);
    a->collection = load::CollectionFor(o_.prefix, batch, o_.collections);
    a->keys.resize(n);
    a->values.resize(n);
    a->deadlines.resize(n);
    a->zmembers.resize(n);
    const int64_t ttl_deadline = NowMillis() + absl::ToInt64Milliseconds(plan_.ttl);
    for (size_t k = 0; k < n; ++k) {
      const uint64_t index = first + k;
      a->keys[k] = load::KeyFor(index, o_.key_bytes);
      a->values[k] = load::ValueFor(index, o_.value_bytes);
      a->deadlines[k] = absl::StrCat(plan_.deadline_ms ? plan_.deadline_ms(index) : ttl_deadline);
      if (o_.mode == Mode::kClassic) a->zmembers[k] = absl::StrCat(a->collection, "\t", a->keys[k]);
    }
    return n;
  }

  // Queues the batch's commands; returns how many replies they will get.
  int AppendBatch(RedisConn& conn, BatchArgs& a, size_t n) {
    std::vector<absl::string_view>& argv = a.argv;
    argv.assign({"HSET", a.collection});
    for (size_t k = 0; k < n; ++k) {
      argv.push_back(a.keys[k]);
      argv.push_back(a.values[k]);
    }
    conn.Append(argv);
    if (o_.mode == Mode::kClassic) {
      argv.assign({"ZADD", o_.deadlines_key});
      for (size_t k = 0; k < n; ++k) {
        argv.push_back(a.deadlines[k]);
        argv.push_back(a.zmembers[k]);
      }
      conn.Append(argv);
      return 2;
    }
    // Native hash-field expiration: one HPEXPIREAT per distinct deadline.
    int replies = 1;
    size_t k = 0;
    while (k < n) {
      size_t j = k;
      while (j < n && a.deadlines[j] == a.deadlines[k]) ++j;
      const std::string count = absl::StrCat(j - k);
      argv.assign({"HPEXPIREAT", a.collection, a.deadlines[k], "FIELDS", count});
      for (size_t f = k; f < j; ++f) argv.push_back(a.keys[f]);
      conn.Append(argv);
      ++replies;
      k = j;
    }
    return replies;
  }

  // Constant after construction.
  const Options o_;
  const LoadPlan plan_;

  load::LoadCounters counters_;
};

}  // namespace

load::LoadOutcome WriteMembers(const Options& o, const load::LoadPlan& plan) {
  Writer writer(o, plan);
  return writer.Run();
}

}  // namespace compare
}  // namespace lapse
