// ClusterRouter: sends commands to the master of a Redis Cluster that owns
// their key's slot, asynchronously, over hiredis — the small cluster client
// Debian lacks (its hiredis 0.14 has no cluster support).
//
//   ClusterRouter router({.seeds = {"10.0.0.1:7000", "10.0.0.2:7000"}});
//   router.Send(RedisCall::Eval(kPutScript, {values_key, deadlines_key}, {args...})
//                   .WaitForReplicas(1, absl::Seconds(1)),
//               [](absl::StatusOr<RedisReply> reply) { ... });
//
// What it does for a call:
// - Routing. The slot map comes from CLUSTER SLOTS (asked of any known node);
//   a call goes to the master of KeySlot(call.key), on one pipelined
//   connection per master, opened on first use and again after it breaks.
// - Redirections. MOVED: the slot's owner is updated at once, the whole map
//   refreshed, and the call sent to the named node. ASK: ASKING + the call on
//   the named node. TRYAGAIN, CLUSTERDOWN, LOADING, MASTERDOWN, READONLY and a
//   node that cannot be reached: the call is retried after a backoff (doubling from
//   min_backoff to max_backoff) with a fresh slot map, for at most
//   retry_budget, then fails UNAVAILABLE with the last error. After
//   max_redirects redirections it fails UNAVAILABLE.
// - Scripts. A script call is EVALSHA; a node that answers NOSCRIPT gets
//   SCRIPT LOAD and the EVALSHA again, pipelined on one connection.
// - Durability. WaitForReplicas(n, timeout) has WAIT n timeout sent after
//   the call on the connection that wrote it; the call succeeds only if WAIT
//   counts n replicas, else it fails UNAVAILABLE saying the outcome is
//   unknown (the write was made on the master but may be lost in a
//   failover). Calls share WAITs: Redis holds a connection's later commands
//   while its WAIT blocks, so a WAIT per call would make a master whose
//   replica is gone answer its queue one `timeout` per call. The calls
//   written to a connection while no WAIT is in flight on it get one WAIT
//   once the loop has run what was posted meanwhile, the calls written while
//   one is in flight one more when it is answered (WAIT counts the replicas
//   that have every write of the connection up to it): a call waits at most
//   two WAITs.
// - A connection lost after the call was written: the call may or may not
//   have run, so it fails UNAVAILABLE ("outcome unknown") unless it is
//   Idempotent(), which is sent again. A call never written (the node
//   refused the connection) is always sent again.
// - Bounds. At most max_calls calls are pending in the router and at most
//   max_in_flight_per_node written to one node and unanswered; past either,
//   a call fails RESOURCE_EXHAUSTED. A reply larger than max_reply_bytes
//   fails its call RESOURCE_EXHAUSTED (the connection is closed and the other
//   calls on it are treated as above).
// - Sharded pub/sub. Subscribe(channel) SSUBSCRIBEs on the master of the
//   channel's slot, over a connection per master that carries nothing else
//   (hiredis's plain reader on the loop, not its asynchronous context, whose
//   0.14 knows no SSUBSCRIBE), and subscribes again wherever the slot is
//   served after an error reply (MOVED), a SUNSUBSCRIBE from the node, a lost
//   connection (a failover) or a slot map that moved the slot: at once when
//   the new master is known, else every max_backoff with a fresh map.
// - Authentication. With a password, AUTH goes first on every connection
//   (call or subscription). A password refused, or missing where the cluster
//   wants one (NOAUTH, WRONGPASS, "ERR invalid password", or "ERR Protocol
//   error: unauthenticated ..." to a call of many arguments, from a call or
//   from CLUSTER SLOTS), is not transient: the calls fail UNAUTHENTICATED at once,
//   with Redis's answer, instead of spending their retry budget; the
//   subscriptions are tried again.
// - Completion. `done` is called exactly once, on the router's I/O thread,
//   with the reply (an error reply of the script or command is a reply, not
//   an error status) or a status. It must not block. The destructor fails
//   every pending call with UNAVAILABLE.
//
// Thread safety: Send and Subscribe may be called from any thread; the destructor must not
// run concurrently with Send.
#ifndef LAPSE_SERVER_STORAGE_REDIS_CLUSTER_ROUTER_H_
#define LAPSE_SERVER_STORAGE_REDIS_CLUSTER_ROUTER_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/storage/redis/event_loop.h"
#include "server/storage/redis/redis_reply.h"
#include "server/storage/redis/redis_script.h"

struct redisAsyncContext;

namespace lapse::redis {

// absl::StatusCode values are 0 to 16.
inline constexpr size_t kStatusCodes = 17;

struct RouterOptions {
  // "host:port" of some nodes of the cluster; the rest are learned.
  std::vector<std::string> seeds;
  // Sent with AUTH first on every connection the router opens (calls and
  // subscriptions) when not empty: the nodes' requirepass.
  std::string password;
  // Where the password comes from, in the words of whoever configured the
  // router (lapsed names its flag and file); a refusal names it. May be empty.
  std::string password_origin;
  size_t max_calls = 100000;
  size_t max_in_flight_per_node = 10000;
  size_t max_reply_bytes = size_t{64} << 20;
  int max_redirects = 16;
  absl::Duration retry_budget = absl::Seconds(15);
  absl::Duration min_backoff = absl::Milliseconds(5);
  absl::Duration max_backoff = absl::Milliseconds(500);
};

// One command for the router, and how to run it.
class RedisCall final {
 public:
  // `args` is the whole command ("GET", key); `key` decides the slot.
  static RedisCall Command(std::string key, std::vector<std::string> args);
  // EVALSHA of `script` (which must outlive the call) with `keys`, which
  // must share one slot, and `args`.
  static RedisCall Eval(const RedisScript& script, std::vector<std::string> keys,
                        std::vector<std::string> args);

  RedisCall WaitForReplicas(int replicas, absl::Duration timeout) &&;
  // Sent again after a lost connection: running it twice does no harm.
  RedisCall Idempotent() &&;

 private:
  friend class ClusterRouter;
  RedisCall() = default;

  std::string key_;
  std::vector<std::string> args_;
  const RedisScript* script_ = nullptr;
  int wait_replicas_ = 0;
  absl::Duration wait_timeout_;
  bool idempotent_ = false;
};

class ClusterRouter final {
 public:
  using Done = absl::AnyInvocable<void(absl::StatusOr<RedisReply>) &&>;

  // What the router did since it started, for metrics.
  struct Stats {
    // Calls given to Send.
    uint64_t calls = 0;
    // MOVED and ASK redirections followed.
    uint64_t redirections = 0;
    // Calls sent again: after a redirection, a NOSCRIPT, a transient error
    // (TRYAGAIN, CLUSTERDOWN, ...), an unknown slot or a lost connection.
    uint64_t retries = 0;
    // Calls that failed with a status (not an error reply), by its code.
    std::array<uint64_t, kStatusCodes> failures{};
  };

  // Starts the I/O thread; connects on first use.
  explicit ClusterRouter(RouterOptions options);
  ~ClusterRouter();
  ClusterRouter(const ClusterRouter&) = delete;
  ClusterRouter& operator=(const ClusterRouter&) = delete;

  void Send(RedisCall call, Done done);

  // Subscribes to the sharded channel `channel` (see above) for the router's
  // lifetime; a channel already subscribed is not subscribed again (the call
  // does nothing). `on_message` gets the payload of each message;
  // `on_subscribed` runs each time the subscription is (re)established —
  // messages published while it was not are lost, so catch up then. Both run
  // on the I/O thread and must not block.
  void Subscribe(std::string channel, absl::AnyInvocable<void(absl::string_view)> on_message,
                 absl::AnyInvocable<void()> on_subscribed);

  // Cheap (atomic loads); from any thread.
  Stats stats() const;

 private:
  struct Node;
  struct Request;
  struct WaitBatch;
  struct Subscriber;
  struct Subscription;

  // Loop thread only, below.
  void Dispatch(std::unique_ptr<Request> request);
  // Parks `request` to be dispatched at `when`, or fails it when that is past
  // its retry budget.
  void Retry(std::unique_ptr<Request> request, absl::Time when);
  void DispatchParked();
  void Finish(std::unique_ptr<Request> request, absl::StatusOr<RedisReply> result);
  Node& NodeAt(const std::string& address);
  // Connects `node` if it has no connection; false if hiredis cannot even
  // start connecting.
  bool Connect(Node& node);
  void RefreshSlots();
  // The answer to CLUSTER SLOTS; `request` is null.
  void OnSlots(Node& node, Request* request, const RedisReply* reply);
  // The answer to AUTH; `request` is null.
  void OnAuth(Node& node, Request* request, const RedisReply* reply);
  // UNAUTHENTICATED for a call refused by `error` (NOAUTH ...), with AUTH's
  // own refusal when there was one.
  absl::Status Unauthenticated(absl::string_view error) const;
  void OnReply(Node& node, Request* request, const RedisReply* reply);
  void OnWaitReply(Node& node, Request* request, const RedisReply* reply);
  // Adds `request`, just written to `node`, to the calls the node's next
  // WAIT answers (see "Durability" above).
  void AwaitReplicas(Node& node, Request& request);
  // Sends the WAIT of the calls written to `node` since its last one, if
  // any.
  void SendWait(Node& node);
  void OnWaitBatchReply(Node& node, WaitBatch* batch, const RedisReply* reply);
  // Once every callback of a written request has come: finishes or retries it.
  void Complete(Request* request);
  // When to try `request` again after a transient failure: a backoff doubling
  // with each.
  absl::Time BackoffFrom(absl::Time now, Request& request) const;
  void Shutdown();

  // Sharded pub/sub, loop thread only: SSUBSCRIBEs every subscription that
  // is on no connection; when one cannot be, tries again in max_backoff.
  void Resubscribe();
  void ResubscribeLater();
  void OnSubscriberEvents(Subscriber& subscriber, short revents);
  void OnSubscriberReply(Subscriber& subscriber, const RedisReply& reply);
  // Closes its connection; its subscriptions are subscribed again later.
  void DropSubscriber(Subscriber& subscriber);

  // A hiredis reply callback: the reply copied out of hiredis (null when the
  // connection closed first) handed to `kHandle` on the loop thread.
  template <typename T, void (ClusterRouter::*kHandle)(Node&, T*, const RedisReply*)>
  static void Callback(redisAsyncContext* context, void* reply, void* privdata);

  // Constant after construction.
  const RouterOptions options_;

  // Calls accepted and not finished, for the max_calls bound.
  std::atomic<size_t> pending_{0};
  // Stats, counted as things happen.
  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> redirections_{0};
  std::atomic<uint64_t> retries_{0};
  std::array<std::atomic<uint64_t>, kStatusCodes> failures_{};

  // Loop thread only.
  absl::flat_hash_map<std::string, std::unique_ptr<Node>> nodes_;
  // The master of each slot; null when unknown.
  std::vector<Node*> slots_;
  // Requests written and not yet answered, owned here while hiredis holds
  // pointers to them.
  absl::flat_hash_map<Request*, std::unique_ptr<Request>> in_flight_;
  // WAITs sent and not yet answered, owned here while hiredis holds pointers
  // to them.
  absl::flat_hash_map<WaitBatch*, std::unique_ptr<WaitBatch>> wait_batches_;
  // Requests waiting for a retry or for the slot map, with when to send them.
  std::vector<std::pair<absl::Time, std::unique_ptr<Request>>> parked_;
  bool refreshing_ = false;
  // The error reply of the last CLUSTER SLOTS that failed with one (NOAUTH),
  // for the calls that fail for want of a slot map; empty after a good one.
  std::string slots_error_;
  // The error reply of the last AUTH refused (WRONGPASS ...).
  std::string auth_refusal_;
  absl::Time last_refresh_ = absl::InfinitePast();
  size_t next_refresh_node_ = 0;
  bool shutting_down_ = false;
  absl::flat_hash_map<std::string, std::unique_ptr<Subscription>> subscriptions_;
  absl::flat_hash_map<Node*, std::unique_ptr<Subscriber>> subscribers_;
  bool resubscribe_scheduled_ = false;

  // Last: its thread runs the members above, so it stops first.
  EventLoop loop_;
};

}  // namespace lapse::redis

#endif  // LAPSE_SERVER_STORAGE_REDIS_CLUSTER_ROUTER_H_
