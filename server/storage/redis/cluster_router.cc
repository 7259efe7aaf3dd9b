#include "server/storage/redis/cluster_router.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <deque>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "server/storage/redis/key_slot.h"

namespace lapse::redis {
namespace {

// hiredis 0.14 reads at most this much per read event.
constexpr size_t kReadChunk = 16 * 1024;

RedisReply Copy(const redisReply& r) {
  RedisReply out;
  switch (r.type) {
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r.integer;
      break;
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.elements.reserve(r.elements);
      for (size_t i = 0; i < r.elements; ++i) out.elements.push_back(Copy(*r.element[i]));
      break;
    default:
      break;
  }
  return out;
}

// Error replies after which the call is sent again later.
bool IsTransient(absl::string_view error) {
  for (absl::string_view prefix :
       {"TRYAGAIN", "CLUSTERDOWN", "LOADING", "MASTERDOWN", "READONLY"}) {
    if (absl::StartsWith(error, prefix)) return true;
  }
  return false;
}

// Error replies that mean the password is missing or wrong: NOAUTH (a
// command on a connection without a good AUTH), WRONGPASS (Redis 6's answer to
// a wrong AUTH), "ERR invalid password" (Redis 5's). Not transient: sending
// the call again cannot help.
bool IsAuthenticationError(absl::string_view error) {
  // Redis 7 answers a call of more than 10 arguments (most scripts' EVALSHA)
  // on a connection whose AUTH it refused with "ERR Protocol error:
  // unauthenticated multibulk length", and closes the connection.
  return absl::StartsWith(error, "NOAUTH") || absl::StartsWith(error, "WRONGPASS") ||
         absl::StartsWith(error, "ERR invalid password") ||
         absl::StartsWith(error, "ERR Protocol error: unauthenticated");
}

// "MOVED 3999 127.0.0.1:6381" → slot and address.
bool ParseRedirect(absl::string_view error, int& slot, std::string& address) {
  std::vector<absl::string_view> parts = absl::StrSplit(error, ' ');
  return parts.size() == 3 && absl::SimpleAtoi(parts[1], &slot) && slot >= 0 &&
         slot < kClusterSlots && (address = std::string(parts[2]), true);
}

}  // namespace

RedisCall RedisCall::Command(std::string key, std::vector<std::string> args) {
  RedisCall call;
  call.key_ = std::move(key);
  call.args_ = std::move(args);
  return call;
}

RedisCall RedisCall::Eval(const RedisScript& script, std::vector<std::string> keys,
                          std::vector<std::string> args) {
  RedisCall call;
  call.script_ = &script;
  call.key_ = keys.empty() ? "" : keys.front();
  call.args_ = {"EVALSHA", script.sha1(), absl::StrCat(keys.size())};
  for (std::string& k : keys) call.args_.push_back(std::move(k));
  for (std::string& a : args) call.args_.push_back(std::move(a));
  return call;
}

RedisCall RedisCall::WaitForReplicas(int replicas, absl::Duration timeout) && {
  wait_replicas_ = replicas;
  wait_timeout_ = timeout;
  return std::move(*this);
}

RedisCall RedisCall::Idempotent() && {
  idempotent_ = true;
  return std::move(*this);
}

struct ClusterRouter::Node final : EventLoop::Handler {
  int fd() const override { return context == nullptr ? -1 : context->c.fd; }
  short events() const override {
    return static_cast<short>((want_read ? POLLIN : 0) | (want_write ? POLLOUT : 0));
  }
  void OnEvents(short revents) override {
    if (context != nullptr && (revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      int available = 0;
      ioctl(context->c.fd, FIONREAD, &available);
      bytes_since_reply += std::min(static_cast<size_t>(std::max(available, 0)), kReadChunk);
      redisAsyncHandleRead(context);
      if (context != nullptr && bytes_since_reply > router->options_.max_reply_bytes) {
        reply_too_big = true;
        redisAsyncFree(context);
      }
    }
    if (context != nullptr && want_write && (revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
      redisAsyncHandleWrite(context);
    }
  }

  ClusterRouter* router = nullptr;
  std::string address;
  std::string host;
  int port = 0;
  redisAsyncContext* context = nullptr;
  // Whether `context` ever connected: a call on a connection that never did
  // was never written.
  bool connected = false;
  bool want_read = false;
  bool want_write = false;
  size_t in_flight = 0;
  size_t bytes_since_reply = 0;
  // The next call to fail on the closed connection is the one whose reply was
  // too big.
  bool reply_too_big = false;
  // Calls written since the last WAIT that want one; null: none.
  std::unique_ptr<WaitBatch> unwaited;
  // WAITs sent and not answered.
  int waits_in_flight = 0;
};

// The calls one WAIT answers.
struct ClusterRouter::WaitBatch {
  int replicas = 0;
  absl::Duration timeout;
  std::vector<Request*> requests;
};

struct ClusterRouter::Request {
  enum class Next { kFinish, kRetry };

  RedisCall call;
  Done done;
  absl::Time deadline;
  int backoffs = 0;
  int redirects = 0;
  // Send ASKING first, to this node.
  Node* ask = nullptr;
  // Send SCRIPT LOAD first; set once, after a NOSCRIPT.
  bool load_script = false;
  bool script_loaded = false;
  absl::Status last_error = absl::UnavailableError("no attempt yet");

  // While written: where, how many hiredis callbacks are still to come, and
  // what to do once they have.
  Node* node = nullptr;
  int callbacks = 0;
  Next next = Next::kFinish;
  absl::Time retry_at;
  absl::StatusOr<RedisReply> outcome;
};

struct ClusterRouter::Subscription {
  std::string channel;
  int slot = 0;
  absl::AnyInvocable<void(absl::string_view)> on_message;
  absl::AnyInvocable<void()> on_subscribed;
  // The connection it is subscribed (or being subscribed) on; null: none.
  Subscriber* on = nullptr;
};

struct ClusterRouter::Subscriber final : EventLoop::Handler {
  int fd() const override { return context == nullptr ? -1 : context->fd; }
  short events() const override {
    return context == nullptr ? 0 : static_cast<short>(POLLIN | (want_write ? POLLOUT : 0));
  }
  void OnEvents(short revents) override { router->OnSubscriberEvents(*this, revents); }

  ClusterRouter* router = nullptr;
  Node* node = nullptr;
  // A non-blocking plain context: written on POLLOUT, read on POLLIN.
  redisContext* context = nullptr;
  bool want_write = false;
  // The subscriptions whose SSUBSCRIBE is not answered yet, in order.
  std::deque<Subscription*> pending;
  // The first reply on the connection answers its AUTH.
  bool auth_pending = false;
};

ClusterRouter::ClusterRouter(RouterOptions options)
    : options_(std::move(options)), slots_(kClusterSlots, nullptr) {
  loop_.Post([this] {
    for (const std::string& seed : options_.seeds) NodeAt(seed);
    RefreshSlots();
  });
}

ClusterRouter::~ClusterRouter() {
  loop_.Post([this] { Shutdown(); });
}

void ClusterRouter::Send(RedisCall call, Done done) {
  calls_.fetch_add(1, std::memory_order_relaxed);
  if (pending_.fetch_add(1) >= options_.max_calls) {
    pending_.fetch_sub(1);
    failures_[static_cast<size_t>(absl::StatusCode::kResourceExhausted)].fetch_add(
        1, std::memory_order_relaxed);
    loop_.Post([done = std::move(done), limit = options_.max_calls]() mutable {
      std::move(done)(absl::ResourceExhaustedError(
          absl::StrCat(limit, " Redis calls are pending, the limit (max_calls): retry later")));
    });
    return;
  }
  auto request = std::make_unique<Request>();
  request->call = std::move(call);
  request->done = std::move(done);
  request->deadline = absl::Now() + options_.retry_budget;
  loop_.Post([this, request = std::move(request)]() mutable { Dispatch(std::move(request)); });
}

ClusterRouter::Node& ClusterRouter::NodeAt(const std::string& address) {
  std::unique_ptr<Node>& node = nodes_[address];
  if (node == nullptr) {
    node = std::make_unique<Node>();
    node->router = this;
    node->address = address;
    const size_t colon = address.rfind(':');
    node->host = address.substr(0, colon);
    if (colon == std::string::npos ||
        !absl::SimpleAtoi(absl::string_view(address).substr(colon + 1), &node->port)) {
      node->port = 0;
    }
    loop_.Watch(node.get());
  }
  return *node;
}

bool ClusterRouter::Connect(Node& node) {
  if (node.context != nullptr) return true;
  if (node.port <= 0) return false;
  redisAsyncContext* context = redisAsyncConnect(node.host.c_str(), node.port);
  if (context == nullptr) return false;
  if (context->err != 0) {
    redisAsyncFree(context);
    return false;
  }
  node.context = context;
  node.connected = false;
  node.bytes_since_reply = 0;
  node.reply_too_big = false;
  context->data = &node;
  context->ev.data = &node;
  context->ev.addRead = [](void* n) { static_cast<Node*>(n)->want_read = true; };
  context->ev.delRead = [](void* n) { static_cast<Node*>(n)->want_read = false; };
  context->ev.addWrite = [](void* n) { static_cast<Node*>(n)->want_write = true; };
  context->ev.delWrite = [](void* n) { static_cast<Node*>(n)->want_write = false; };
  context->ev.cleanup = [](void* n) {
    Node* node = static_cast<Node*>(n);
    node->want_read = node->want_write = false;
    node->context = nullptr;
    node->connected = false;
  };
  redisAsyncSetConnectCallback(context, [](const redisAsyncContext* c, int status) {
    if (status == REDIS_OK) static_cast<Node*>(c->data)->connected = true;
  });
  // Queued ahead of every call on the connection: a refused password shows
  // in the calls' own replies (NOAUTH), which OnAuth's answer explains.
  const std::string& password = options_.password;
  if (!password.empty()) {
    redisAsyncCommand(context, &Callback<Request, &ClusterRouter::OnAuth>, nullptr, "AUTH %b",
                      password.data(), password.size());
  }
  return true;
}

void ClusterRouter::OnAuth(Node&, Request*, const RedisReply* reply) {
  if (reply != nullptr && reply->type == RedisReply::Type::kError) auth_refusal_ = reply->str;
}

absl::Status ClusterRouter::Unauthenticated(absl::string_view error) const {
  if (options_.password.empty()) {
    return absl::UnauthenticatedError(
        absl::StrCat("the Redis Cluster wants a password and none was given: ", error));
  }
  return absl::UnauthenticatedError(absl::StrCat(
      "the Redis Cluster refused the password", options_.password_origin.empty() ? "" : " in ",
      options_.password_origin, ": ", auth_refusal_.empty() ? error : auth_refusal_));
}

void ClusterRouter::Dispatch(std::unique_ptr<Request> request) {
  if (shutting_down_) {
    Finish(std::move(request), absl::UnavailableError("the Redis router is shutting down"));
    return;
  }
  Node* node = request->ask;
  if (node == nullptr) node = slots_[KeySlot(request->call.key_)];
  const absl::Time now = absl::Now();
  if (node == nullptr && IsAuthenticationError(slots_error_)) {
    Finish(std::move(request), Unauthenticated(slots_error_));
    return;
  }
  if (node == nullptr) {
    request->last_error = absl::UnavailableError(
        absl::StrCat("no Redis node is known to serve the slot",
                     slots_error_.empty() ? "" : "; CLUSTER SLOTS answered: ", slots_error_));
    RefreshSlots();
    const absl::Time when = BackoffFrom(now, *request);
    Retry(std::move(request), when);
    return;
  }
  if (node->in_flight >= options_.max_in_flight_per_node) {
    Finish(std::move(request),
           absl::ResourceExhaustedError(
               absl::StrCat(node->in_flight, " calls are in flight to Redis node ", node->address,
                            ", the limit (max_in_flight_per_node): retry later")));
    return;
  }
  if (!Connect(*node)) {
    request->last_error =
        absl::UnavailableError(absl::StrCat("cannot connect to Redis node ", node->address));
    RefreshSlots();
    const absl::Time when = BackoffFrom(now, *request);
    Retry(std::move(request), when);
    return;
  }
  redisAsyncContext* context = node->context;
  if (request->ask != nullptr) redisAsyncCommand(context, nullptr, nullptr, "ASKING");
  if (request->load_script) {
    const std::string& body = request->call.script_->body();
    redisAsyncCommand(context, nullptr, nullptr, "SCRIPT LOAD %b", body.data(), body.size());
  }
  request->ask = nullptr;
  request->load_script = false;
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::string& a : request->call.args_) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  Request* raw = request.get();
  if (redisAsyncCommandArgv(context, &Callback<Request, &ClusterRouter::OnReply>, raw,
                            static_cast<int>(argv.size()), argv.data(),
                            lengths.data()) != REDIS_OK) {
    request->last_error = absl::UnavailableError(
        absl::StrCat("the connection to Redis node ", node->address, " is closing"));
    const absl::Time when = now + options_.min_backoff;
    Retry(std::move(request), when);
    return;
  }
  raw->callbacks = 1;
  raw->node = node;
  raw->next = Request::Next::kFinish;
  ++node->in_flight;
  in_flight_[raw] = std::move(request);
  if (raw->call.wait_replicas_ > 0) AwaitReplicas(*node, *raw);
}

void ClusterRouter::AwaitReplicas(Node& node, Request& request) {
  if (node.unwaited != nullptr && (node.unwaited->replicas != request.call.wait_replicas_ ||
                                   node.unwaited->timeout != request.call.wait_timeout_)) {
    SendWait(node);
  }
  if (node.unwaited == nullptr) {
    node.unwaited = std::make_unique<WaitBatch>();
    node.unwaited->replicas = request.call.wait_replicas_;
    node.unwaited->timeout = request.call.wait_timeout_;
    // After the calls posted meanwhile, which join this batch.
    loop_.Post([this, node = &node] {
      if (node->waits_in_flight == 0) SendWait(*node);
    });
  }
  node.unwaited->requests.push_back(&request);
  request.callbacks = 2;
}

void ClusterRouter::SendWait(Node& node) {
  if (node.unwaited == nullptr) return;
  std::unique_ptr<WaitBatch> batch = std::move(node.unwaited);
  WaitBatch* raw = batch.get();
  const std::string replicas = absl::StrCat(batch->replicas);
  const std::string timeout_ms =
      absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(batch->timeout)));
  wait_batches_[raw] = std::move(batch);
  ++node.waits_in_flight;
  // A connection that closed since has answered the calls' replies null;
  // its WAIT is answered null as well.
  if (node.context == nullptr ||
      redisAsyncCommand(node.context, &Callback<WaitBatch, &ClusterRouter::OnWaitBatchReply>, raw,
                        "WAIT %s %s", replicas.c_str(), timeout_ms.c_str()) != REDIS_OK) {
    OnWaitBatchReply(node, raw, nullptr);
  }
}

void ClusterRouter::OnWaitBatchReply(Node& node, WaitBatch* raw, const RedisReply* reply) {
  auto it = wait_batches_.find(raw);
  std::unique_ptr<WaitBatch> batch = std::move(it->second);
  wait_batches_.erase(it);
  --node.waits_in_flight;
  for (Request* request : batch->requests) OnWaitReply(node, request, reply);
  // The calls written while this WAIT held the connection: their WAIT now.
  if (node.waits_in_flight == 0) SendWait(node);
}

void ClusterRouter::Retry(std::unique_ptr<Request> request, absl::Time when) {
  if (when > request->deadline) {
    const absl::Status last = request->last_error;
    Finish(std::move(request),
           absl::UnavailableError(absl::StrCat("Redis did not answer within the retry budget (",
                                               absl::FormatDuration(options_.retry_budget),
                                               "): ", last.message())));
    return;
  }
  retries_.fetch_add(1, std::memory_order_relaxed);
  parked_.emplace_back(when, std::move(request));
  loop_.RunAt(when, [this] { DispatchParked(); });
}

void ClusterRouter::DispatchParked() {
  const absl::Time now = absl::Now();
  std::vector<std::unique_ptr<Request>> due;
  auto kept = parked_.begin();
  for (auto& [when, request] : parked_) {
    if (when <= now || shutting_down_) {
      due.push_back(std::move(request));
    } else {
      *kept++ = {when, std::move(request)};
    }
  }
  parked_.erase(kept, parked_.end());
  for (std::unique_ptr<Request>& request : due) Dispatch(std::move(request));
}

void ClusterRouter::Finish(std::unique_ptr<Request> request, absl::StatusOr<RedisReply> result) {
  pending_.fetch_sub(1);
  if (!result.ok()) {
    const size_t code = static_cast<size_t>(result.status().code());
    if (code < kStatusCodes) failures_[code].fetch_add(1, std::memory_order_relaxed);
  }
  std::move(request->done)(std::move(result));
}

void ClusterRouter::RefreshSlots() {
  if (refreshing_ || shutting_down_ || nodes_.empty()) return;
  const absl::Time now = absl::Now();
  const absl::Time earliest = last_refresh_ + options_.min_backoff;
  if (now < earliest) {
    refreshing_ = true;
    loop_.RunAt(earliest, [this] {
      refreshing_ = false;
      last_refresh_ = absl::InfinitePast();
      RefreshSlots();
    });
    return;
  }
  last_refresh_ = now;
  // Ask the nodes in turn, so a dead one is not asked twice in a row.
  auto it = nodes_.begin();
  std::advance(it, next_refresh_node_++ % nodes_.size());
  Node& node = *it->second;
  if (!Connect(node) || redisAsyncCommand(node.context, &Callback<Request, &ClusterRouter::OnSlots>,
                                          nullptr, "CLUSTER SLOTS") != REDIS_OK) {
    OnSlots(node, nullptr, nullptr);
    return;
  }
  refreshing_ = true;
}

void ClusterRouter::OnSlots(Node& node, Request*, const RedisReply* reply) {
  refreshing_ = false;
  if (shutting_down_) return;
  if (reply != nullptr && reply->type == RedisReply::Type::kError) slots_error_ = reply->str;
  if (reply == nullptr || reply->type != RedisReply::Type::kArray) {
    // Another node is asked next, soon, while calls are waiting.
    if (!parked_.empty()) {
      loop_.RunAt(absl::Now() + options_.min_backoff, [this] { RefreshSlots(); });
    }
    return;
  }
  slots_error_.clear();
  std::vector<Node*> slots(kClusterSlots, nullptr);
  for (const RedisReply& range : reply->elements) {
    if (range.elements.size() < 3 || range.elements[2].elements.size() < 2) continue;
    const RedisReply& master = range.elements[2];
    const std::string host = master.elements[0].str.empty() ? node.host : master.elements[0].str;
    Node* owner = &NodeAt(absl::StrCat(host, ":", master.elements[1].integer));
    const int64_t first = std::max<int64_t>(0, range.elements[0].integer);
    const int64_t last = std::min<int64_t>(kClusterSlots - 1, range.elements[1].integer);
    for (int64_t slot = first; slot <= last; ++slot) slots[slot] = owner;
  }
  slots_ = std::move(slots);
  // Subscriptions whose slot moved follow it.
  for (auto& [channel, subscription] : subscriptions_) {
    if (subscription->on != nullptr && subscription->on->node != slots_[subscription->slot]) {
      subscription->on = nullptr;
    }
  }
  Resubscribe();
}

void ClusterRouter::OnReply(Node& node, Request* request, const RedisReply* reply) {
  --request->callbacks;
  const absl::Time now = absl::Now();
  if (reply == nullptr) {
    if (shutting_down_) {
      request->outcome = absl::UnavailableError("the Redis router is shutting down");
    } else if (node.reply_too_big) {
      node.reply_too_big = false;
      request->outcome = absl::ResourceExhaustedError(absl::StrCat(
          "a reply from Redis node ", node.address, " exceeded ", options_.max_reply_bytes,
          " bytes (max_reply_bytes): ask for less per call"));
    } else if (!node.connected || request->call.idempotent_) {
      request->last_error = absl::UnavailableError(
          absl::StrCat("Redis node ", node.address, " cannot be reached: ",
                       node.context != nullptr ? node.context->errstr : "connection closed"));
      request->next = Request::Next::kRetry;
      request->retry_at = BackoffFrom(now, *request);
      RefreshSlots();
    } else {
      request->outcome = absl::UnavailableError(
          absl::StrCat("the connection to Redis node ", node.address,
                       " was lost after the command was sent: its outcome is unknown"));
    }
  } else if (reply->type == RedisReply::Type::kError) {
    int slot = 0;
    std::string address;
    if ((absl::StartsWith(reply->str, "MOVED ") || absl::StartsWith(reply->str, "ASK ")) &&
        ParseRedirect(reply->str, slot, address)) {
      request->last_error = absl::UnavailableError(reply->str);
      redirections_.fetch_add(1, std::memory_order_relaxed);
      if (++request->redirects > options_.max_redirects) {
        request->outcome = absl::UnavailableError(absl::StrCat(
            "more than ", options_.max_redirects, " Redis redirections; the last: ", reply->str));
      } else {
        Node& target = NodeAt(address);
        if (absl::StartsWith(reply->str, "ASK ")) {
          request->ask = &target;
        } else {
          slots_[slot] = &target;
          RefreshSlots();
        }
        request->next = Request::Next::kRetry;
        request->retry_at = now;
      }
    } else if (absl::StartsWith(reply->str, "NOSCRIPT") && request->call.script_ != nullptr &&
               !request->script_loaded) {
      request->load_script = request->script_loaded = true;
      request->next = Request::Next::kRetry;
      request->retry_at = now;
    } else if (IsAuthenticationError(reply->str)) {
      request->outcome = Unauthenticated(reply->str);
    } else if (IsTransient(reply->str)) {
      request->last_error = absl::UnavailableError(reply->str);
      request->next = Request::Next::kRetry;
      request->retry_at = BackoffFrom(now, *request);
      RefreshSlots();
    } else {
      request->outcome = *reply;
    }
  } else {
    request->outcome = *reply;
  }
  if (request->callbacks == 0) Complete(request);
}

void ClusterRouter::OnWaitReply(Node& node, Request* request, const RedisReply* reply) {
  --request->callbacks;
  if (request->next == Request::Next::kFinish && request->outcome.ok()) {
    const int wanted = request->call.wait_replicas_;
    if (reply == nullptr) {
      request->outcome = absl::UnavailableError(
          absl::StrCat("the connection to Redis node ", node.address,
                       " was lost before WAIT confirmed the write: its outcome is unknown"));
    } else if (reply->type != RedisReply::Type::kInteger || reply->integer < wanted) {
      request->outcome = absl::UnavailableError(absl::StrCat(
          "WAIT on Redis node ", node.address, " confirmed the write on ",
          reply->type == RedisReply::Type::kInteger ? reply->integer : 0, " of ", wanted,
          " replicas within ", absl::FormatDuration(request->call.wait_timeout_),
          ": its outcome is unknown (a failover may lose it)"));
    }
  }
  if (request->callbacks == 0) Complete(request);
}

void ClusterRouter::Complete(Request* raw) {
  auto it = in_flight_.find(raw);
  std::unique_ptr<Request> request = std::move(it->second);
  in_flight_.erase(it);
  --request->node->in_flight;
  request->node = nullptr;
  if (request->next == Request::Next::kRetry) {
    const absl::Time when = request->retry_at;
    Retry(std::move(request), when);
  } else {
    absl::StatusOr<RedisReply> outcome = std::move(request->outcome);
    Finish(std::move(request), std::move(outcome));
  }
}

ClusterRouter::Stats ClusterRouter::stats() const {
  Stats stats;
  stats.calls = calls_.load(std::memory_order_relaxed);
  stats.redirections = redirections_.load(std::memory_order_relaxed);
  stats.retries = retries_.load(std::memory_order_relaxed);
  for (size_t code = 0; code < kStatusCodes; ++code) {
    stats.failures[code] = failures_[code].load(std::memory_order_relaxed);
  }
  return stats;
}

absl::Time ClusterRouter::BackoffFrom(absl::Time now, Request& request) const {
  const int doublings = std::min(request.backoffs++, 16);
  return now + std::min(options_.max_backoff, options_.min_backoff * (1 << doublings));
}

void ClusterRouter::Shutdown() {
  shutting_down_ = true;
  for (auto& [node, subscriber] : subscribers_) {
    if (subscriber->context != nullptr) redisFree(subscriber->context);
    subscriber->context = nullptr;
    loop_.Unwatch(subscriber.get());
  }
  for (auto& [address, node] : nodes_) {
    // Its WAIT too is answered null when the connection is freed.
    SendWait(*node);
    if (node->context != nullptr) redisAsyncFree(node->context);
    loop_.Unwatch(node.get());
  }
  DispatchParked();
}

void ClusterRouter::Subscribe(std::string channel,
                              absl::AnyInvocable<void(absl::string_view)> on_message,
                              absl::AnyInvocable<void()> on_subscribed) {
  loop_.Post([this, channel = std::move(channel), on_message = std::move(on_message),
              on_subscribed = std::move(on_subscribed)]() mutable {
    std::unique_ptr<Subscription>& subscription = subscriptions_[channel];
    if (subscription != nullptr || shutting_down_) return;
    subscription = std::make_unique<Subscription>();
    subscription->slot = KeySlot(channel);
    subscription->channel = std::move(channel);
    subscription->on_message = std::move(on_message);
    subscription->on_subscribed = std::move(on_subscribed);
    Resubscribe();
  });
}

void ClusterRouter::Resubscribe() {
  if (shutting_down_) return;
  bool missing = false;
  for (auto& [channel, subscription] : subscriptions_) {
    if (subscription->on != nullptr) continue;
    Node* node = slots_[subscription->slot];
    if (node == nullptr || node->port <= 0) {
      missing = true;
      continue;
    }
    std::unique_ptr<Subscriber>& subscriber = subscribers_[node];
    if (subscriber == nullptr) {
      subscriber = std::make_unique<Subscriber>();
      subscriber->router = this;
      subscriber->node = node;
      loop_.Watch(subscriber.get());
    }
    if (subscriber->context == nullptr) {
      redisContext* context = redisConnectNonBlock(node->host.c_str(), node->port);
      if (context == nullptr || context->err != 0) {
        if (context != nullptr) redisFree(context);
        missing = true;
        continue;
      }
      subscriber->context = context;
      const std::string& password = options_.password;
      if (!password.empty()) {
        redisAppendCommand(context, "AUTH %b", password.data(), password.size());
        subscriber->want_write = true;
        subscriber->auth_pending = true;
      }
    }
    const char* argv[] = {"SSUBSCRIBE", channel.data()};
    const size_t lengths[] = {10, channel.size()};
    if (redisAppendCommandArgv(subscriber->context, 2, argv, lengths) != REDIS_OK) {
      missing = true;
      continue;
    }
    subscriber->want_write = true;
    subscriber->pending.push_back(subscription.get());
    subscription->on = subscriber.get();
  }
  if (missing) ResubscribeLater();
}

void ClusterRouter::ResubscribeLater() {
  if (resubscribe_scheduled_ || shutting_down_) return;
  resubscribe_scheduled_ = true;
  RefreshSlots();
  loop_.RunAt(absl::Now() + options_.max_backoff, [this] {
    resubscribe_scheduled_ = false;
    Resubscribe();
  });
}

void ClusterRouter::OnSubscriberEvents(Subscriber& subscriber, short revents) {
  redisContext* context = subscriber.context;
  if (subscriber.want_write && (revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
    int done = 0;
    if (redisBufferWrite(context, &done) != REDIS_OK) {
      DropSubscriber(subscriber);
      return;
    }
    subscriber.want_write = done == 0;
  }
  if ((revents & (POLLIN | POLLERR | POLLHUP)) == 0) return;
  if (redisBufferRead(context) != REDIS_OK) {
    DropSubscriber(subscriber);
    return;
  }
  while (subscriber.context != nullptr) {
    void* reply = nullptr;
    if (redisGetReplyFromReader(context, &reply) != REDIS_OK) {
      DropSubscriber(subscriber);
      return;
    }
    if (reply == nullptr) return;
    const RedisReply copy = Copy(*static_cast<redisReply*>(reply));
    freeReplyObject(reply);
    OnSubscriberReply(subscriber, copy);
  }
}

void ClusterRouter::OnSubscriberReply(Subscriber& subscriber, const RedisReply& reply) {
  if (subscriber.auth_pending) {
    subscriber.auth_pending = false;
    // Refused: the subscriptions are tried again on a new connection later.
    if (reply.type == RedisReply::Type::kError) DropSubscriber(subscriber);
    return;
  }
  if (reply.type == RedisReply::Type::kError) {
    // The answer to the oldest SSUBSCRIBE: typically MOVED.
    if (subscriber.pending.empty()) return;
    Subscription* subscription = subscriber.pending.front();
    subscriber.pending.pop_front();
    if (subscription->on == &subscriber) subscription->on = nullptr;
    int slot = 0;
    std::string address;
    if (absl::StartsWith(reply.str, "MOVED ") && ParseRedirect(reply.str, slot, address)) {
      slots_[slot] = &NodeAt(address);
    }
    ResubscribeLater();
    return;
  }
  if (reply.type != RedisReply::Type::kArray || reply.elements.size() < 3) return;
  const std::string kind = absl::AsciiStrToLower(reply.elements[0].str);
  auto it = subscriptions_.find(reply.elements[1].str);
  if (it == subscriptions_.end()) return;
  Subscription& subscription = *it->second;
  if (kind == "smessage") {
    subscription.on_message(reply.elements[2].str);
  } else if (kind == "ssubscribe") {
    if (!subscriber.pending.empty()) subscriber.pending.pop_front();
    if (subscription.on == &subscriber) subscription.on_subscribed();
  } else if (kind == "sunsubscribe" && subscription.on == &subscriber) {
    // The node no longer serves the channel's slot.
    subscription.on = nullptr;
    ResubscribeLater();
  }
}

void ClusterRouter::DropSubscriber(Subscriber& subscriber) {
  redisFree(subscriber.context);
  subscriber.context = nullptr;
  subscriber.want_write = false;
  subscriber.auth_pending = false;
  subscriber.pending.clear();
  for (auto& [channel, subscription] : subscriptions_) {
    if (subscription->on == &subscriber) subscription->on = nullptr;
  }
  ResubscribeLater();
}

template <typename T, void (ClusterRouter::*kHandle)(ClusterRouter::Node&, T*, const RedisReply*)>
void ClusterRouter::Callback(redisAsyncContext* context, void* reply, void* privdata) {
  Node& node = *static_cast<Node*>(context->data);
  auto* data = static_cast<T*>(privdata);
  if (reply == nullptr) {
    (node.router->*kHandle)(node, data, nullptr);
    return;
  }
  node.bytes_since_reply = 0;
  const RedisReply copy = Copy(*static_cast<redisReply*>(reply));
  (node.router->*kHandle)(node, data, &copy);
}

}  // namespace lapse::redis
