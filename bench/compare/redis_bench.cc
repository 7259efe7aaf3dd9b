// lapse-redis-bench: lapse-bench's put, expiry-latency and drain scenarios
// against the Redis recipes users would pick instead of lapse, with the same
// members (client/load/members.h), the same batch (one pipelined batch per
// lapse RPC), the same concurrency (batches in flight) and the same output
// (tables and a RESULT line that bench/compare/run.sh collects).
//
//   lapse-redis-bench put --port=6390 --mode=classic --batch=1000 --members=1000000
//   lapse-redis-bench expiry-latency --port=6390 --poll-interval=10ms --members=100000
//   lapse-redis-bench drain --port=6390 --mode=hfe --members=100000
//
// --mode=classic is the recipe from the field: each collection's values in a
// hash (HSET), every deadline in one sorted set (ZADD, member
// "<collection>\t<key>"), and a poller that every --poll-interval runs a Lua
// script removing what is due (ZRANGEBYSCORE -inf now LIMIT, HMGET + HDEL per
// collection, ZREMRANGEBYRANK) and PUBLISHes it (collection, key, value and
// deadline) to a channel that the watcher SUBSCRIBEs to. The script takes at
// most --poll-limit members per call and the poller calls it again at once
// while a call comes back full, so a backlog drains without waiting a tick.
//
// --mode=hfe is native hash-field expiration (Redis >= 7.4, Valkey >= 9): HSET
// then HPEXPIREAT ... FIELDS, and the watcher SUBSCRIBEs to the `hexpired`
// keyspace event. That event names only the hash (the collection), not the
// field and not the value; the watcher credits each one with every member of
// that collection whose deadline has passed and that no earlier event
// covered, which is the most a client can infer without reading the hash
// again (so it flatters Redis's latency).
//
// Exits 0 when the scenario saw no error and lost no notification, 1
// otherwise, 2 on bad flags.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/compare/redis_conn.h"
#include "bench/common/args.h"
#include "bench/common/ledger.h"
#include "bench/common/members.h"
#include "bench/common/report.h"
#include "bench/common/stats.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Redis host");
ABSL_FLAG(int32_t, port, 6379, "Redis port");
ABSL_FLAG(std::string, peer, "", "Name on the RESULT line (default redis-<mode>)");
ABSL_FLAG(std::string, mode, "classic",
          "classic (hash + sorted set + poller + PUBLISH) or hfe (native "
          "hash-field expiration + hexpired keyspace events)");
ABSL_FLAG(int32_t, connections, 1, "Connections the writes are spread over");
ABSL_FLAG(int32_t, concurrency, 16, "Pipelined batches in flight (over all connections)");
ABSL_FLAG(int32_t, batch, 100, "Members per pipelined batch (one collection)");
ABSL_FLAG(int32_t, key_bytes, 16, "Bytes per member key (at least 8)");
ABSL_FLAG(int32_t, value_bytes, 16, "Bytes per member value");
ABSL_FLAG(int64_t, collections, 1000, "Collections (hashes) the members are spread over");
ABSL_FLAG(int64_t, members, 0,
          "Members to write; 0: put 500000 (unless --duration), expiry-latency "
          "100000, drain 100000");
ABSL_FLAG(absl::Duration, duration, absl::ZeroDuration(),
          "put: write for this long instead of --members");
ABSL_FLAG(absl::Duration, ttl, absl::Hours(1), "put: TTL of written members");
ABSL_FLAG(absl::Duration, spread, absl::Seconds(10),
          "expiry-latency: deadlines are spread uniformly over this window");
ABSL_FLAG(absl::Duration, lead, absl::ZeroDuration(),
          "From the start of loading to the first deadline; 0 picks 2s + 1s "
          "per 100k members");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(5),
          "How long after the last deadline to wait for notifications");
ABSL_FLAG(absl::Duration, reconnect_at, absl::ZeroDuration(),
          "expiry-latency: this long after the first deadline the subscriber "
          "disconnects, and reconnects after --reconnect-pause; 0: never");
ABSL_FLAG(absl::Duration, reconnect_pause, absl::Seconds(1),
          "How long the subscriber stays disconnected");
ABSL_FLAG(absl::Duration, poll_interval, absl::Milliseconds(100),
          "classic: how often the poller looks for due members");
ABSL_FLAG(int32_t, poll_limit, 1000, "classic: members removed per script call");
ABSL_FLAG(std::string, publish, "batch",
          "classic: PUBLISH one message per script call (batch) or per member");
ABSL_FLAG(std::string, prefix, "",
          "Key prefix of this run (default rb<pid>.<scenario>.)");

namespace lapse {
namespace compare {
namespace {

using load::Delivery;
using load::ExpiryLedger;
using load::FormatCount;
using load::FormatMs;
using load::LatencySummary;
using load::NowMicros;
using load::NowMillis;
using load::Table;

enum class Mode { kClassic, kHfe };

struct Options {
  std::string host;
  int port = 6379;
  std::string peer;
  Mode mode = Mode::kClassic;
  int connections = 1;
  int concurrency = 16;
  size_t batch = 100;
  size_t key_bytes = 16;
  size_t value_bytes = 16;
  uint64_t collections = 1000;
  uint64_t members = 0;
  absl::Duration duration;
  absl::Duration ttl;
  absl::Duration spread;
  absl::Duration lead;
  absl::Duration drain_timeout;
  absl::Duration reconnect_at;
  absl::Duration reconnect_pause;
  absl::Duration poll_interval;
  int poll_limit = 1000;
  bool publish_per_member = false;
  std::string prefix;
  // classic: the sorted set of deadlines and the notification channel.
  std::string deadlines_key;
  std::string channel;
};

// The poller's script. KEYS[1]: the deadline sorted set. ARGV: now (ms),
// limit, channel, "member" or "batch". Returns how many members it removed.
// Members whose hash field is already gone (removed by a client) are dropped
// without a notification.
constexpr char kPollScript[] = R"lua(
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES',
                       'LIMIT', 0, tonumber(ARGV[2]))
local n = #due / 2
if n == 0 then return 0 end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
local groups, order = {}, {}
for i = 1, #due, 2 do
  local m = due[i]
  local tab = string.find(m, '\t', 1, true)
  local coll = string.sub(m, 1, tab - 1)
  local g = groups[coll]
  if g == nil then
    g = {keys = {}, deadlines = {}}
    groups[coll] = g
    order[#order + 1] = coll
  end
  g.keys[#g.keys + 1] = string.sub(m, tab + 1)
  g.deadlines[#g.deadlines + 1] = due[i + 1]
end
local out = {}
for _, coll in ipairs(order) do
  local g = groups[coll]
  local values = redis.call('HMGET', coll, unpack(g.keys))
  redis.call('HDEL', coll, unpack(g.keys))
  for j = 1, #g.keys do
    if values[j] then
      out[#out + 1] = coll .. '\t' .. g.keys[j] .. '\t' .. values[j] .. '\t' .. g.deadlines[j]
    end
  end
end
if ARGV[4] == 'member' then
  for _, line in ipairs(out) do redis.call('PUBLISH', ARGV[3], line) end
elseif #out > 0 then
  redis.call('PUBLISH', ARGV[3], table.concat(out, '\n'))
end
return n
)lua";

std::string Seconds(absl::Duration d) {
  return absl::StrFormat("%.2f", absl::ToDoubleSeconds(d));
}

absl::Duration AutoLead(uint64_t members) {
  return absl::Seconds(2) +
         absl::Microseconds(static_cast<int64_t>(members) * 1'000'000 / 100'000);
}

void SleepUntilMillis(int64_t ms) {
  const int64_t now = NowMillis();
  if (ms > now) absl::SleepFor(absl::Milliseconds(ms - now));
}

void AddLatencyRows(Table* table, const std::string& what, const LatencySummary& s) {
  table->Add({what + " p50 (ms)", FormatMs(s.p50_us)});
  table->Add({what + " p90 (ms)", FormatMs(s.p90_us)});
  table->Add({what + " p99 (ms)", FormatMs(s.p99_us)});
  table->Add({what + " p99.9 (ms)", FormatMs(s.p999_us)});
  table->Add({what + " max (ms)", FormatMs(s.max_us)});
}

// ---- Writes ----------------------------------------------------------------

struct WritePlan {
  uint64_t members = 0;  // 0: for `duration`
  absl::Duration duration;
  absl::Duration ttl;
  // Absolute deadline per member index; when unset, now + ttl per batch.
  std::function<int64_t(uint64_t)> deadline_ms;
};

struct WriteOutcome {
  uint64_t members = 0;
  uint64_t batches = 0;
  uint64_t errors = 0;
  std::string first_error;
  absl::Duration elapsed;
  LatencySummary batch_latency;
};

// Writes batches over `o.connections` connections, each keeping
// concurrency / connections batches pipelined.
class Writer {
 public:
  Writer(const Options& o, const WritePlan& plan)
      : o_(o),
        plan_(plan),
        total_batches_(plan.members == 0 ? UINT64_MAX
                                         : (plan.members + o.batch - 1) / o.batch) {}

  WriteOutcome Run(bool progress_lines) {
    const absl::Time start = absl::Now();
    end_ = plan_.members == 0 ? start + plan_.duration : absl::InfiniteFuture();
    std::unique_ptr<load::Progress> progress;
    if (progress_lines) {
      progress = std::make_unique<load::Progress>([this, start] {
        const uint64_t n = members_.load();
        return absl::StrCat("put: ", FormatCount(static_cast<double>(n)), " members, ",
                            FormatCount(static_cast<double>(n) /
                                        absl::ToDoubleSeconds(absl::Now() - start)),
                            "/s");
      });
    }
    const int connections = std::max(1, o_.connections);
    const size_t window =
        static_cast<size_t>(std::max(1, o_.concurrency / connections));
    std::vector<std::thread> threads;
    for (int c = 0; c < connections; ++c) {
      threads.emplace_back([this, window] { Connection(window); });
    }
    for (std::thread& t : threads) t.join();
    progress.reset();
    WriteOutcome out;
    out.elapsed = absl::Now() - start;
    out.members = members_.load();
    out.batches = batches_.load();
    out.errors = errors_.load();
    out.batch_latency = latency_.Summarize();
    absl::MutexLock lock(&mu_);
    out.first_error = first_error_;
    return out;
  }

 private:
  struct InFlight {
    size_t members;
    // Replies still to come.
    int replies;
    int64_t started_us;
    bool ok;
  };

  void Error(const std::string& error) {
    errors_.fetch_add(1);
    stop_.store(true);
    absl::MutexLock lock(&mu_);
    if (first_error_.empty()) first_error_ = error;
  }

  void Connection(size_t window) {
    absl::StatusOr<std::unique_ptr<RedisConn>> conn = RedisConn::Connect(o_.host, o_.port);
    if (!conn.ok()) {
      Error(std::string(conn.status().message()));
      return;
    }
    std::deque<InFlight> in_flight;
    BatchArgs args;
    while (true) {
      while (in_flight.size() < window && !stop_.load()) {
        const uint64_t batch = next_batch_.fetch_add(1);
        if (batch >= total_batches_ || absl::Now() >= end_) {
          stop_.store(true);
          break;
        }
        const size_t n = Fill(batch, &args);
        const int replies = AppendBatch(**conn, args, n);
        in_flight.push_back({n, replies, NowMicros(), true});
      }
      if (in_flight.empty()) return;
      // One blocking read (which first sends everything appended), then
      // every reply that read brought in, so the window is refilled with one
      // write rather than one per batch.
      ReplyPtr reply = (*conn)->Reply();
      if (reply == nullptr) {
        Error(absl::StrCat("redis: ", (*conn)->error()));
        return;
      }
      while (reply != nullptr) {
        InFlight& front = in_flight.front();
        if (reply->type == REDIS_REPLY_ERROR) {
          front.ok = false;
          Error(ReplyError(reply.get()));
        }
        if (--front.replies == 0) {
          latency_.Record(NowMicros() - front.started_us);
          batches_.fetch_add(1);
          if (front.ok) members_.fetch_add(front.members);
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
    const uint64_t first = batch * o_.batch;
    const uint64_t end = plan_.members == 0
                             ? first + o_.batch
                             : std::min<uint64_t>(first + o_.batch, plan_.members);
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
  const WritePlan plan_;
  const uint64_t total_batches_;
  // Set once by Run before the threads start.
  absl::Time end_;

  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> next_batch_{0};
  std::atomic<uint64_t> members_{0};
  std::atomic<uint64_t> batches_{0};
  std::atomic<uint64_t> errors_{0};
  load::LatencyRecorder latency_;

  absl::Mutex mu_;
  std::string first_error_ ABSL_GUARDED_BY(mu_);
};

// ---- The classic recipe's poller -----------------------------------------

class Poller {
 public:
  explicit Poller(const Options& o) : o_(o) {}
  ~Poller() { Stop(); }
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  absl::Status Start() {
    absl::StatusOr<std::unique_ptr<RedisConn>> conn = RedisConn::Connect(o_.host, o_.port);
    if (!conn.ok()) return conn.status();
    conn_ = std::move(*conn);
    ReplyPtr sha = conn_->Command({"SCRIPT", "LOAD", kPollScript});
    if (sha == nullptr || sha->type != REDIS_REPLY_STRING) {
      return absl::UnavailableError(absl::StrCat("SCRIPT LOAD: ", ReplyError(sha.get()),
                                                 conn_->error()));
    }
    sha_.assign(sha->str, sha->len);
    thread_ = std::thread([this] { Run(); });
    return absl::OkStatus();
  }

  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }

  uint64_t calls() const { return calls_.load(); }
  uint64_t removed() const { return removed_.load(); }
  uint64_t errors() const { return errors_.load(); }
  // Time spent inside the script calls (ms).
  double busy_ms() const { return static_cast<double>(busy_us_.load()) / 1000.0; }
  std::string first_error() const {
    absl::MutexLock lock(&mu_);
    return first_error_;
  }

 private:
  void Run() {
    const std::string limit = absl::StrCat(o_.poll_limit);
    const std::string key = o_.deadlines_key;
    const std::string channel = o_.channel;
    const char* publish = o_.publish_per_member ? "member" : "batch";
    absl::Time next = absl::Now();
    while (true) {
      while (true) {
        const std::string now = absl::StrCat(NowMillis());
        const int64_t t0 = NowMicros();
        ReplyPtr reply =
            conn_->Command({"EVALSHA", sha_, "1", key, now, limit, channel, publish});
        busy_us_.fetch_add(NowMicros() - t0);
        calls_.fetch_add(1);
        if (reply == nullptr || reply->type != REDIS_REPLY_INTEGER) {
          errors_.fetch_add(1);
          absl::MutexLock lock(&mu_);
          if (first_error_.empty()) {
            first_error_ = absl::StrCat("poll: ", ReplyError(reply.get()), conn_->error());
          }
          if (reply == nullptr) return;
          break;
        }
        removed_.fetch_add(static_cast<uint64_t>(reply->integer));
        if (reply->integer < o_.poll_limit) break;
      }
      next += o_.poll_interval;
      const absl::Time now = absl::Now();
      if (next < now) next = now;  // Overran a tick: do not try to catch up.
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithDeadline(absl::Condition(&stopping_), next)) return;
    }
  }

  // Constant after construction.
  const Options o_;
  std::unique_ptr<RedisConn> conn_;
  std::string sha_;

  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> removed_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<int64_t> busy_us_{0};

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::string first_error_ ABSL_GUARDED_BY(mu_);

  std::thread thread_;
};

// ---- hfe: crediting per-collection notifications to members ---------------

// Which members each collection holds, by deadline, and how far the
// collection's notifications have covered them.
class HfeAttribution {
 public:
  HfeAttribution(const Options& o, uint64_t members,
                 const std::function<int64_t(uint64_t)>& deadline_ms)
      : prefix_(o.prefix + "c") {
    by_collection_.resize(o.collections);
    for (uint64_t i = 0; i < members; ++i) {
      const uint64_t c = (i / o.batch) % o.collections;
      by_collection_[c].members.push_back({deadline_ms(i), i});
    }
    for (Collection& c : by_collection_) {
      std::sort(c.members.begin(), c.members.end());
    }
  }

  // One `hexpired` event for `collection`, received at `received_us`.
  std::vector<Delivery> Credit(absl::string_view collection, int64_t received_us) {
    std::vector<Delivery> out;
    uint64_t c;
    if (!absl::ConsumePrefix(&collection, prefix_) || !absl::SimpleAtoi(collection, &c) ||
        c >= by_collection_.size()) {
      return out;
    }
    Collection& col = by_collection_[c];
    while (col.next < col.members.size() &&
           col.members[col.next].first * 1000 <= received_us) {
      const auto& [deadline, index] = col.members[col.next++];
      out.push_back({index, deadline * 1000, received_us});
    }
    return out;
  }

 private:
  struct Collection {
    std::vector<std::pair<int64_t, uint64_t>> members;
    size_t next = 0;
  };
  const std::string prefix_;
  std::vector<Collection> by_collection_;
};

// ---- The watcher: a SUBSCRIBE client ---------------------------------------

class Subscriber {
 public:
  // `attribution` is used (and must be set) in hfe mode only.
  Subscriber(const Options& o, ExpiryLedger* ledger, HfeAttribution* attribution)
      : o_(o), ledger_(ledger), attribution_(attribution) {}
  ~Subscriber() { Stop(); }
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Connects, subscribes, and returns once Redis confirmed the subscription.
  absl::Status Start() {
    absl::StatusOr<std::unique_ptr<RedisConn>> conn = RedisConn::Connect(o_.host, o_.port);
    if (!conn.ok()) return conn.status();
    const std::string channel =
        o_.mode == Mode::kClassic ? o_.channel : "__keyevent@0__:hexpired";
    ReplyPtr reply = (*conn)->Command({"SUBSCRIBE", channel});
    if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) {
      return absl::UnavailableError(absl::StrCat("SUBSCRIBE: ", ReplyError(reply.get()),
                                                 (*conn)->error()));
    }
    {
      absl::MutexLock lock(&mu_);
      stopping_ = false;
    }
    conn_ = std::move(*conn);
    thread_ = std::thread([this] { Run(); });
    return absl::OkStatus();
  }

  // Disconnects; what is published meanwhile is lost (that is pub/sub).
  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (thread_.joinable()) thread_.join();
    conn_.reset();
  }

  uint64_t messages() const { return messages_.load(); }
  uint64_t errors() const { return errors_.load(); }

 private:
  bool stopping() {
    absl::MutexLock lock(&mu_);
    return stopping_;
  }

  void Run() {
    std::vector<Delivery> deliveries;
    while (!stopping()) {
      ReplyPtr reply = conn_->ReplyWithin(absl::Milliseconds(50));
      if (reply == nullptr) {
        if (!conn_->error().empty()) {
          errors_.fetch_add(1);
          return;
        }
        continue;
      }
      const int64_t received_us = NowMicros();
      if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
          absl::string_view(reply->element[0]->str, reply->element[0]->len) != "message") {
        continue;
      }
      messages_.fetch_add(1);
      const absl::string_view payload(reply->element[2]->str, reply->element[2]->len);
      deliveries.clear();
      if (o_.mode == Mode::kHfe) {
        deliveries = attribution_->Credit(payload, received_us);
      } else {
        ParseClassic(payload, received_us, &deliveries);
      }
      ledger_->Deliver(deliveries);
    }
  }

  // Lines of "collection \t key \t value \t deadline_ms".
  void ParseClassic(absl::string_view payload, int64_t received_us,
                    std::vector<Delivery>* out) {
    for (absl::string_view line : absl::StrSplit(payload, '\n', absl::SkipEmpty())) {
      std::vector<absl::string_view> f = absl::StrSplit(line, '\t');
      uint64_t index;
      int64_t deadline_ms;
      if (f.size() != 4 || !load::IndexOfKey(f[1], &index) ||
          !absl::SimpleAtoi(f[3], &deadline_ms)) {
        ledger_->DeliverUnknown();
        continue;
      }
      if (f[2] != load::ValueFor(index, o_.value_bytes)) errors_.fetch_add(1);
      out->push_back({index, deadline_ms * 1000, received_us});
    }
  }

  // Constant after construction.
  const Options o_;
  ExpiryLedger* const ledger_;
  HfeAttribution* const attribution_;

  std::unique_ptr<RedisConn> conn_;
  std::atomic<uint64_t> messages_{0};
  std::atomic<uint64_t> errors_{0};

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::thread thread_;
};

// ---- Scenarios -------------------------------------------------------------

void PrintShape(const char* scenario, const Options& o) {
  std::printf("== %s %s: concurrency %d over %d connection(s), batch %zu, key %zu B, "
              "value %zu B, %llu collections, %s:%d",
              o.peer.c_str(), scenario, o.concurrency, o.connections, o.batch, o.key_bytes,
              o.value_bytes, static_cast<unsigned long long>(o.collections), o.host.c_str(),
              o.port);
  if (o.mode == Mode::kClassic) {
    std::printf(", poll every %s (%d per call, publish per %s)",
                absl::FormatDuration(o.poll_interval).c_str(), o.poll_limit,
                o.publish_per_member ? "member" : "call");
  } else {
    std::printf(", native hash-field expiration");
  }
  std::printf("\n");
}

bool RunPut(const Options& o) {
  PrintShape("put", o);
  WritePlan plan;
  plan.members = o.members;
  plan.duration = o.duration;
  plan.ttl = o.ttl;
  Writer writer(o, plan);
  const WriteOutcome out = writer.Run(true);
  const double secs = absl::ToDoubleSeconds(out.elapsed);
  const double rate = static_cast<double>(out.members) / secs;
  Table table({"put", "value"});
  table.Add({"members written", absl::StrCat(out.members)});
  table.Add({"elapsed (s)", Seconds(out.elapsed)});
  table.Add({"members/s", FormatCount(rate)});
  table.Add({"batches/s", FormatCount(static_cast<double>(out.batches) / secs)});
  AddLatencyRows(&table, "batch latency", out.batch_latency);
  table.Add({"errors", absl::StrCat(out.errors)});
  table.Print();
  if (!out.first_error.empty()) std::printf("  first error: %s\n", out.first_error.c_str());
  load::Result result(o.peer, "put");
  result.Add("members", out.members);
  result.Add("elapsed_s", secs);
  result.Add("members_per_s", rate);
  result.Add("batch", static_cast<uint64_t>(o.batch));
  result.Add("concurrency", static_cast<int64_t>(o.concurrency));
  result.AddLatency("rpc", out.batch_latency);
  result.Add("errors", out.errors);
  result.Print();
  return out.errors == 0;
}

// Loads `n` members with `deadline_ms`, watches, waits; shared by
// expiry-latency (spread deadlines) and drain (one deadline).
struct WatchRun {
  WriteOutcome load;
  uint64_t poll_errors = 0;
  uint64_t poll_calls = 0;
  double poll_busy_ms = 0;
  uint64_t messages = 0;
  uint64_t watch_errors = 0;
  std::string first_error;
  bool loaded = false;
};

WatchRun LoadAndWatch(const Options& o, uint64_t n, int64_t first_deadline_ms,
                      int64_t last_deadline_ms,
                      const std::function<int64_t(uint64_t)>& deadline_ms,
                      ExpiryLedger* ledger, const char* what) {
  WatchRun run;
  std::unique_ptr<HfeAttribution> attribution;
  if (o.mode == Mode::kHfe) attribution = std::make_unique<HfeAttribution>(o, n, deadline_ms);
  Subscriber subscriber(o, ledger, attribution.get());
  if (absl::Status s = subscriber.Start(); !s.ok()) {
    run.first_error = std::string(s.message());
    return run;
  }
  Poller poller(o);
  if (o.mode == Mode::kClassic) {
    if (absl::Status s = poller.Start(); !s.ok()) {
      run.first_error = std::string(s.message());
      return run;
    }
  }
  WritePlan plan;
  plan.members = n;
  plan.deadline_ms = deadline_ms;
  Writer writer(o, plan);
  run.load = writer.Run(false);
  if (run.load.errors > 0) {
    run.first_error = run.load.first_error;
    return run;
  }
  run.loaded = true;
  std::printf("  loaded %llu members in %ss (%s/s); first deadline in %lld ms\n",
              static_cast<unsigned long long>(run.load.members), Seconds(run.load.elapsed).c_str(),
              FormatCount(static_cast<double>(run.load.members) /
                          absl::ToDoubleSeconds(run.load.elapsed)).c_str(),
              static_cast<long long>(first_deadline_ms - NowMillis()));
  {
    load::Progress progress([ledger, n, what] {
      return absl::StrCat(what, ": ", ledger->received(), " / ", n, " notifications");
    });
    if (o.reconnect_at > absl::ZeroDuration()) {
      SleepUntilMillis(first_deadline_ms + absl::ToInt64Milliseconds(o.reconnect_at));
      std::printf("  subscriber disconnects after %llu members, reconnects in %ss\n",
                  static_cast<unsigned long long>(ledger->received()),
                  Seconds(o.reconnect_pause).c_str());
      subscriber.Stop();
      absl::SleepFor(o.reconnect_pause);
      if (absl::Status s = subscriber.Start(); !s.ok()) {
        run.first_error = std::string(s.message());
      }
    }
    ledger->WaitForAll(absl::FromUnixMillis(last_deadline_ms) + o.drain_timeout);
  }
  poller.Stop();
  subscriber.Stop();
  run.poll_errors = poller.errors();
  run.poll_calls = poller.calls();
  run.poll_busy_ms = poller.busy_ms();
  if (run.first_error.empty()) run.first_error = poller.first_error();
  run.messages = subscriber.messages();
  run.watch_errors = subscriber.errors();
  return run;
}

bool RunExpiryLatency(const Options& o) {
  PrintShape("expiry-latency", o);
  const uint64_t n = o.members;
  ExpiryLedger ledger(n);
  const absl::Duration lead = o.lead > absl::ZeroDuration() ? o.lead : AutoLead(n);
  const int64_t start_ms = NowMillis() + absl::ToInt64Milliseconds(lead);
  const int64_t spread_ms = absl::ToInt64Milliseconds(o.spread);
  const auto deadline = [start_ms, spread_ms](uint64_t i) {
    return load::SpreadDeadlineMs(start_ms, spread_ms, i);
  };
  const WatchRun run =
      LoadAndWatch(o, n, start_ms, start_ms + spread_ms, deadline, &ledger, "expiry-latency");
  if (!run.loaded) {
    std::printf("  failed: %s\n", run.first_error.c_str());
    return false;
  }
  const LatencySummary s = ledger.Summarize();
  const uint64_t lost = n - std::min(n, ledger.received());
  const uint64_t errors = run.poll_errors + run.watch_errors + ledger.unknown();
  Table table({"expiry-latency", "value"});
  table.Add({"members (pending at first deadline)", absl::StrCat(n)});
  table.Add({"load members/s", FormatCount(static_cast<double>(run.load.members) /
                                           absl::ToDoubleSeconds(run.load.elapsed))});
  table.Add({"members expected", absl::StrCat(n)});
  table.Add({"members notified", absl::StrCat(ledger.received())});
  table.Add({"members lost", absl::StrCat(lost)});
  table.Add({"duplicates", absl::StrCat(ledger.duplicates())});
  AddLatencyRows(&table, "received - deadline", s);
  table.Add({"received - deadline min (ms)", FormatMs(s.min_us)});
  table.Add({"notification messages", absl::StrCat(run.messages)});
  if (o.mode == Mode::kClassic) {
    table.Add({"poller script calls", absl::StrCat(run.poll_calls)});
    table.Add({"poller busy (ms)", absl::StrFormat("%.0f", run.poll_busy_ms)});
  }
  table.Add({"errors", absl::StrCat(errors)});
  table.Print();
  if (!run.first_error.empty()) std::printf("  first error: %s\n", run.first_error.c_str());
  load::Result result(o.peer, o.reconnect_at > absl::ZeroDuration() ? "reconnect"
                                                                     : "expiry-latency");
  result.Add("members", n);
  result.Add("spread_s", absl::ToDoubleSeconds(o.spread));
  result.Add("received", ledger.received());
  result.Add("lost", lost);
  result.Add("duplicates", ledger.duplicates());
  result.AddLatency("event", s);
  result.Add("errors", errors);
  result.Print();
  return lost == 0 && ledger.duplicates() == 0 && errors == 0;
}

bool RunDrain(const Options& o) {
  PrintShape("drain", o);
  const uint64_t n = o.members;
  ExpiryLedger ledger(n);
  const absl::Duration lead = o.lead > absl::ZeroDuration() ? o.lead : AutoLead(n);
  const int64_t deadline_ms = NowMillis() + absl::ToInt64Milliseconds(lead);
  const WatchRun run = LoadAndWatch(
      o, n, deadline_ms, deadline_ms, [deadline_ms](uint64_t) { return deadline_ms; },
      &ledger, "drain");
  if (!run.loaded) {
    std::printf("  failed: %s\n", run.first_error.c_str());
    return false;
  }
  const uint64_t lost = n - std::min(n, ledger.received());
  const int64_t first_us = ledger.first_received_us() - deadline_ms * 1000;
  const int64_t all_us = ledger.last_received_us() - deadline_ms * 1000;
  const double rate =
      all_us > 0 ? static_cast<double>(ledger.received()) * 1e6 / static_cast<double>(all_us)
                 : 0;
  const uint64_t errors = run.poll_errors + run.watch_errors + ledger.unknown();
  Table table({"drain", "value"});
  table.Add({"members sharing the deadline", absl::StrCat(n)});
  table.Add({"first notification after deadline (ms)", FormatMs(first_us)});
  table.Add({lost == 0 ? "all notified after deadline (ms)" : "last notified after deadline (ms)",
             FormatMs(all_us)});
  table.Add({"members/s notified", FormatCount(rate)});
  table.Add({"members notified", absl::StrCat(ledger.received())});
  table.Add({"members lost", absl::StrCat(lost)});
  table.Add({"notification messages", absl::StrCat(run.messages)});
  table.Add({"errors", absl::StrCat(errors)});
  table.Print();
  if (!run.first_error.empty()) std::printf("  first error: %s\n", run.first_error.c_str());
  load::Result result(o.peer, "drain");
  result.Add("members", n);
  result.Add("first_ms", static_cast<double>(first_us) / 1000.0);
  result.Add("all_ms", static_cast<double>(all_us) / 1000.0);
  result.Add("events_per_s", rate);
  result.Add("received", ledger.received());
  result.Add("lost", lost);
  result.Add("duplicates", ledger.duplicates());
  result.Add("errors", errors);
  result.Print();
  return lost == 0 && ledger.duplicates() == 0 && errors == 0;
}

// Whether the server has native hash-field expiration.
absl::Status CheckHfe(const Options& o) {
  absl::StatusOr<std::unique_ptr<RedisConn>> conn = RedisConn::Connect(o.host, o.port);
  if (!conn.ok()) return conn.status();
  ReplyPtr info = (*conn)->Command({"COMMAND", "INFO", "HPEXPIREAT"});
  if (info == nullptr || info->type != REDIS_REPLY_ARRAY || info->elements != 1 ||
      info->element[0]->type != REDIS_REPLY_ARRAY) {
    return absl::FailedPreconditionError(
        "the server has no HPEXPIREAT: native hash-field expiration needs Redis >= 7.4 "
        "or Valkey >= 9");
  }
  ReplyPtr config = (*conn)->Command({"CONFIG", "SET", "notify-keyspace-events", "Eh"});
  if (config == nullptr || config->type == REDIS_REPLY_ERROR) {
    return absl::FailedPreconditionError(
        absl::StrCat("CONFIG SET notify-keyspace-events: ", ReplyError(config.get())));
  }
  return absl::OkStatus();
}

bool Fail(const std::string& message) {
  std::fprintf(stderr, "lapse-redis-bench: %s\n", message.c_str());
  return false;
}

bool OptionsFromFlags(const std::string& scenario, Options* o) {
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "classic") {
    o->mode = Mode::kClassic;
  } else if (mode == "hfe") {
    o->mode = Mode::kHfe;
  } else {
    return Fail("--mode must be classic or hfe");
  }
  const std::string publish = absl::GetFlag(FLAGS_publish);
  if (publish != "batch" && publish != "member") return Fail("--publish must be batch or member");
  const int32_t batch = absl::GetFlag(FLAGS_batch);
  const int32_t key_bytes = absl::GetFlag(FLAGS_key_bytes);
  const int32_t value_bytes = absl::GetFlag(FLAGS_value_bytes);
  if (batch < 1 || batch > 1'000'000) return Fail("--batch must be in [1, 1000000]");
  if (key_bytes < static_cast<int32_t>(load::kMinKeyBytes) || key_bytes > 4096) {
    return Fail("--key_bytes must be in [8, 4096]");
  }
  if (value_bytes < 0 || value_bytes > (64 << 20)) return Fail("--value_bytes out of range");
  if (absl::GetFlag(FLAGS_concurrency) < 1 || absl::GetFlag(FLAGS_connections) < 1) {
    return Fail("--concurrency and --connections must be positive");
  }
  if (absl::GetFlag(FLAGS_collections) < 1) return Fail("--collections must be positive");
  if (absl::GetFlag(FLAGS_poll_limit) < 1) return Fail("--poll_limit must be positive");
  if (absl::GetFlag(FLAGS_poll_interval) <= absl::ZeroDuration()) {
    return Fail("--poll_interval must be positive");
  }
  o->host = absl::GetFlag(FLAGS_host);
  o->port = absl::GetFlag(FLAGS_port);
  o->peer = absl::GetFlag(FLAGS_peer);
  if (o->peer.empty()) o->peer = absl::StrCat("redis-", mode);
  o->connections = absl::GetFlag(FLAGS_connections);
  o->concurrency = absl::GetFlag(FLAGS_concurrency);
  o->batch = static_cast<size_t>(batch);
  o->key_bytes = static_cast<size_t>(key_bytes);
  o->value_bytes = static_cast<size_t>(value_bytes);
  o->collections = static_cast<uint64_t>(absl::GetFlag(FLAGS_collections));
  o->members = static_cast<uint64_t>(std::max<int64_t>(0, absl::GetFlag(FLAGS_members)));
  o->duration = absl::GetFlag(FLAGS_duration);
  o->ttl = absl::GetFlag(FLAGS_ttl);
  o->spread = absl::GetFlag(FLAGS_spread);
  o->lead = absl::GetFlag(FLAGS_lead);
  o->drain_timeout = absl::GetFlag(FLAGS_drain_timeout);
  o->reconnect_at = absl::GetFlag(FLAGS_reconnect_at);
  o->reconnect_pause = absl::GetFlag(FLAGS_reconnect_pause);
  o->poll_interval = absl::GetFlag(FLAGS_poll_interval);
  o->poll_limit = absl::GetFlag(FLAGS_poll_limit);
  o->publish_per_member = publish == "member";
  o->prefix = absl::GetFlag(FLAGS_prefix);
  if (o->prefix.empty()) o->prefix = absl::StrCat("rb", getpid(), ".", scenario, ".");
  o->deadlines_key = o->prefix + "deadlines";
  o->channel = o->prefix + "expired";
  if (scenario == "put") {
    if (o->members == 0 && o->duration == absl::ZeroDuration()) o->members = 500'000;
  } else if (scenario == "expiry-latency" || scenario == "drain") {
    if (o->members == 0) o->members = 100'000;
  } else {
    return Fail(absl::StrCat("unknown scenario \"", scenario,
                             "\": expected put, expiry-latency or drain"));
  }
  return true;
}

}  // namespace
}  // namespace compare
}  // namespace lapse

int main(int argc, char** argv) {
  // Line-buffered even into a pipe, so tables and errors interleave in order.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  absl::SetProgramUsageMessage(
      "lapse-redis-bench SCENARIO [flags]: put, expiry-latency or drain against "
      "Redis (the classic recipe, or native hash-field expiration)");
  std::vector<std::string> storage;
  std::vector<char*> args = lapse::load::DashesToUnderscores(argc, argv, &storage);
  std::vector<char*> positional = absl::ParseCommandLine(argc, args.data());
  if (positional.size() != 2) {
    std::fprintf(stderr, "usage: lapse-redis-bench put|expiry-latency|drain [flags]\n");
    return 2;
  }
  const std::string scenario = positional[1];
  lapse::compare::Options options;
  if (!lapse::compare::OptionsFromFlags(scenario, &options)) return 2;
  if (options.mode == lapse::compare::Mode::kHfe) {
    if (absl::Status s = lapse::compare::CheckHfe(options); !s.ok()) {
      std::printf("== %s: not measured: %s\n", options.peer.c_str(),
                  std::string(s.message()).c_str());
      return 3;
    }
  }
  bool ok = false;
  if (scenario == "put") {
    ok = lapse::compare::RunPut(options);
  } else if (scenario == "expiry-latency") {
    ok = lapse::compare::RunExpiryLatency(options);
  } else {
    ok = lapse::compare::RunDrain(options);
  }
  if (!ok) {
    std::fprintf(stderr, "lapse-redis-bench: %s saw errors or lost notifications\n",
                 scenario.c_str());
  }
  return ok ? 0 : 1;
}
