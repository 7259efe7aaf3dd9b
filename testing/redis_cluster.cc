#include "testing/redis_cluster.h"

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "testing/test_util.h"

namespace lapse::testing {
namespace {

// Between two looks at something that is coming (a log line, a cluster
// state); the wait as a whole is bounded by kPatience.
constexpr absl::Duration kPollInterval = absl::Milliseconds(20);
constexpr int kBusPortOffset = 10000;
// A node's port is in [10000, 15000), its bus port in [20000, 25000): clear
// of the kernel's ephemeral range and of the single Redis servers of
// bench/compare/run.sh ([25000, ephemeral start)), which run beside these
// tests and so never take the port a test restarts a node on.
constexpr int kLowestPort = 10000;
constexpr int kPortsEnd = 15000;

struct ContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextFree>;
struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

absl::StatusOr<Context> Connect(int port) {
  const timeval timeout = {5, 0};
  Context c(redisConnectWithTimeout("127.0.0.1", port, timeout));
  if (c == nullptr || c->err != 0) {
    return absl::UnavailableError(absl::StrCat("cannot connect to 127.0.0.1:", port, ": ",
                                               c == nullptr ? "out of memory" : c->errstr));
  }
  redisSetTimeout(c.get(), timeout);
  return c;
}

absl::StatusOr<Reply> Run(int port, const std::string& password,
                          const std::vector<std::string>& args) {
  absl::StatusOr<Context> c = Connect(port);
  if (!c.ok()) return c.status();
  if (!password.empty()) {
    Reply auth(static_cast<redisReply*>(
        redisCommand(c->get(), "AUTH %b", password.data(), password.size())));
    if (auth == nullptr || auth->type == REDIS_REPLY_ERROR) {
      return absl::UnauthenticatedError(
          absl::StrCat("127.0.0.1:", port, " refused the password: ",
                       auth == nullptr ? (*c)->errstr : std::string(auth->str, auth->len)));
    }
  }
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  Reply reply(static_cast<redisReply*>(
      redisCommandArgv(c->get(), static_cast<int>(argv.size()), argv.data(), lengths.data())));
  if (reply == nullptr) {
    return absl::UnavailableError(absl::StrCat("127.0.0.1:", port, ": ", (*c)->errstr));
  }
  return reply;
}

std::string Text(const redisReply& r) {
  switch (r.type) {
    case REDIS_REPLY_INTEGER:
      return absl::StrCat(r.integer);
    case REDIS_REPLY_NIL:
      return "";
    case REDIS_REPLY_ARRAY: {
      std::vector<std::string> parts;
      for (size_t i = 0; i < r.elements; ++i) parts.push_back(Text(*r.element[i]));
      return absl::StrJoin(parts, "\n");
    }
    default:
      return std::string(r.str, r.len);
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// Whether a socket can be bound to [::1]:0.
bool HasIpv6Loopback() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in6 address = {};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  const bool bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return bound;
}

// The first port of the kernel's ephemeral range.
int EphemeralPortsStart() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768;
  in >> low;
  return low;
}

}  // namespace

RedisCluster::RedisCluster(RedisClusterOptions options)
    : options_(std::move(options)), nodes_(kNodes) {
  if (options_.ipv6 && !HasIpv6Loopback()) {
    status_ = absl::FailedPreconditionError("this host has no ::1");
    return;
  }
  for (int i = 0; i < kNodes && status_.ok(); ++i) status_ = StartNode(nodes_[i], i);
  if (status_.ok()) status_ = CreateCluster();
}

RedisCluster::~RedisCluster() {
  for (Node& node : nodes_) {
    if (node.process == nullptr) continue;
    node.process->Signal(SIGKILL);
    node.process->Wait();
  }
}

absl::Status RedisCluster::StartNode(Node& node, int index) {
  const int end = std::min(EphemeralPortsStart() - kBusPortOffset, kPortsEnd);
  if (end <= kLowestPort) return absl::FailedPreconditionError("no port range for Redis nodes");
  std::random_device seed;
  std::mt19937 random(seed());
  std::uniform_int_distribution<int> ports(kLowestPort, end - 1);
  constexpr int kAttempts = 20;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    node.port = ports(random);
    node.dir = absl::StrCat(dir_.path(), "/node", index, "-", node.port);
    if (mkdir(node.dir.c_str(), 0700) != 0) {
      return absl::InternalError(absl::StrCat("cannot create ", node.dir));
    }
    absl::Status launched = Launch(node);
    if (!absl::IsAlreadyExists(launched)) return launched;
  }
  return absl::UnavailableError(
      absl::StrCat("no free port pair for a Redis node after ", kAttempts, " attempts"));
}

absl::Status RedisCluster::Launch(Node& node) {
  const std::string log = absl::StrCat(node.dir, "/redis.log");
  // A restarted node appends to the log of its previous run.
  const size_t logged = ReadFile(log).size();
  // repl-diskless-sync-delay 0: a replica's full sync starts at once, not
  // after Redis's default 5 s.
  // ::1 too where the host has it ('-': optional), for tests of IPv6 seeds.
  std::vector<std::string> args = {"--bind",
                                   "127.0.0.1",
                                   "-::1",
                                   "--port",
                                   absl::StrCat(node.port),
                                   "--dir",
                                   node.dir,
                                   "--logfile",
                                   log,
                                   "--daemonize",
                                   "no",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "yes",
                                   "--cluster-enabled",
                                   "yes",
                                   "--cluster-config-file",
                                   "nodes.conf",
                                   "--cluster-node-timeout",
                                   absl::StrCat(kNodeTimeoutMs),
                                   "--repl-diskless-sync-delay",
                                   "0"};
  if (options_.ipv6) {
    for (const char* a : {"--cluster-announce-ip", "::1"}) args.push_back(a);
  }
  if (!options_.password.empty()) {
    for (const char* option : {"--requirepass", "--masterauth"}) {
      args.push_back(option);
      args.push_back(options_.password);
    }
  }
  node.process = std::make_unique<ChildProcess>(LAPSE_REDIS_SERVER_PATH, args);
  if (!node.process->spawned()) {
    node.process = nullptr;
    return absl::InternalError(absl::StrCat("cannot run ", LAPSE_REDIS_SERVER_PATH));
  }
  const absl::Time deadline = absl::Now() + kPatience;
  std::string content;
  while (absl::Now() < deadline) {
    content = ReadFile(log).substr(logged);
    if (absl::StrContains(content, "Ready to accept connections") ||
        absl::StrContains(content, "Address already in use")) {
      break;
    }
    absl::SleepFor(kPollInterval);
  }
  if (absl::StrContains(content, "Ready to accept connections")) return absl::OkStatus();
  node.process->Signal(SIGKILL);
  node.process->Wait();
  node.process = nullptr;
  if (absl::StrContains(content, "Address already in use")) {
    return absl::AlreadyExistsError(absl::StrCat("port ", node.port, " or its bus port is taken"));
  }
  return absl::UnavailableError(
      absl::StrCat("redis-server on port ", node.port, " did not start: ", content));
}

absl::Status RedisCluster::CreateCluster() {
  std::vector<std::string> args = {"--cluster", "create"};
  for (const std::string& seed : seeds()) args.push_back(seed);
  for (const char* a : {"--cluster-replicas", "1", "--cluster-yes"}) args.push_back(a);
  if (!options_.password.empty()) {
    for (const std::string& a :
         {std::string("-a"), options_.password, std::string("--no-auth-warning")}) {
      args.push_back(a);
    }
  }
  ChildProcess::Result created = RunToCompletion(LAPSE_REDIS_CLI_PATH, args);
  if (created.exit_code != 0) {
    return absl::UnavailableError(
        absl::StrCat("redis-cli --cluster create failed: ", created.out, created.err));
  }
  if (!WaitForClusterOk() || !WaitForReplicasLinked()) {
    return absl::UnavailableError("the Redis cluster did not become ready in time");
  }
  return absl::OkStatus();
}

std::vector<std::string> RedisCluster::seeds() const {
  std::vector<std::string> out;
  const char* host = options_.ipv6 ? "::1" : "127.0.0.1";
  for (const Node& node : nodes_) out.push_back(absl::StrCat(host, ":", node.port));
  return out;
}

std::vector<int> RedisCluster::MasterPorts() const {
  for (const Node& node : nodes_) {
    if (node.process == nullptr) continue;
    absl::StatusOr<std::vector<int>> ports = MasterPortsSeenBy(node.port);
    if (ports.ok()) return *ports;
  }
  return {};
}

absl::StatusOr<std::vector<int>> RedisCluster::MasterPortsSeenBy(int port) const {
  absl::StatusOr<Reply> slots = Run(port, options_.password, {"CLUSTER", "SLOTS"});
  if (!slots.ok()) return slots.status();
  if ((*slots)->type != REDIS_REPLY_ARRAY) {
    return absl::UnavailableError(absl::StrCat("CLUSTER SLOTS on port ", port, " failed"));
  }
  std::vector<std::pair<long long, int>> ranges;
  for (size_t i = 0; i < (*slots)->elements; ++i) {
    const redisReply& range = *(*slots)->element[i];
    ranges.emplace_back(range.element[0]->integer,
                        static_cast<int>(range.element[2]->element[1]->integer));
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<int> ports;
  for (const auto& [start, master] : ranges) {
    if (std::find(ports.begin(), ports.end(), master) == ports.end()) ports.push_back(master);
  }
  return ports;
}

int RedisCluster::OwnerOf(int slot) const {
  for (const Node& node : nodes_) {
    if (node.process == nullptr) continue;
    absl::StatusOr<Reply> slots = Run(node.port, options_.password, {"CLUSTER", "SLOTS"});
    if (!slots.ok() || (*slots)->type != REDIS_REPLY_ARRAY) continue;
    for (size_t i = 0; i < (*slots)->elements; ++i) {
      const redisReply& range = *(*slots)->element[i];
      if (range.element[0]->integer <= slot && slot <= range.element[1]->integer) {
        return static_cast<int>(range.element[2]->element[1]->integer);
      }
    }
    return 0;
  }
  return 0;
}

std::vector<pid_t> RedisCluster::NodePids() const {
  std::vector<pid_t> pids;
  for (const Node& node : nodes_) {
    if (node.process != nullptr) pids.push_back(node.process->pid());
  }
  return pids;
}

absl::Status RedisCluster::FlushAll() const {
  for (int port : MasterPorts()) {
    absl::StatusOr<std::string> flushed = Command(port, {"FLUSHALL"});
    if (!flushed.ok()) return flushed.status();
    if (*flushed != "OK") {
      return absl::UnavailableError(absl::StrCat("FLUSHALL on 127.0.0.1:", port, ": ", *flushed));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RedisCluster::Command(int port,
                                                  const std::vector<std::string>& args) const {
  absl::StatusOr<Reply> reply = Run(port, options_.password, args);
  if (!reply.ok()) return reply.status();
  return Text(**reply);
}

absl::Status RedisCluster::ChangePassword(int port, const std::string& password) const {
  // The connections left are closed from one that gives the new password.
  absl::StatusOr<Reply> changed =
      Run(port, options_.password, {"CONFIG", "SET", "requirepass", password});
  if (!changed.ok()) return changed.status();
  absl::StatusOr<Context> c = Connect(port);
  if (!c.ok()) return c.status();
  Reply auth(static_cast<redisReply*>(
      redisCommand(c->get(), "AUTH %b", password.data(), password.size())));
  Reply killed(
      static_cast<redisReply*>(redisCommand(c->get(), "CLIENT KILL TYPE normal SKIPME yes")));
  if (auth == nullptr || auth->type == REDIS_REPLY_ERROR || killed == nullptr ||
      killed->type == REDIS_REPLY_ERROR) {
    return absl::UnavailableError(
        absl::StrCat("127.0.0.1:", port, ": cannot close its clients' connections"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RedisCluster::CommandOnOwner(
    absl::string_view key, const std::vector<std::string>& args) const {
  for (int port : MasterPorts()) {
    absl::StatusOr<std::string> reply = Command(port, args);
    if (reply.ok() && !absl::StartsWith(*reply, "MOVED")) return reply;
  }
  return absl::UnavailableError(absl::StrCat("no master answered for key ", key));
}

int RedisCluster::MasterOf(const std::string& key) const {
  for (int port : MasterPorts()) {
    absl::StatusOr<std::string> reply = Command(port, {"EXISTS", key});
    if (reply.ok() && !absl::StartsWith(*reply, "MOVED")) return port;
  }
  return 0;
}

int RedisCluster::AnotherMaster(int port) const {
  for (int other : MasterPorts()) {
    if (other != port) return other;
  }
  return 0;
}

int RedisCluster::ReplicaOf(int master_port) const {
  absl::StatusOr<std::string> info = Command(master_port, {"INFO", "replication"});
  if (!info.ok()) return 0;
  for (absl::string_view line : absl::StrSplit(*info, absl::ByAnyChar("\r\n,"))) {
    int port = 0;
    if (absl::ConsumePrefix(&line, "port=") && absl::SimpleAtoi(line, &port)) return port;
  }
  return 0;
}

void RedisCluster::Kill(int port) {
  for (Node& node : nodes_) {
    if (node.port != port || node.process == nullptr) continue;
    node.process->Signal(SIGKILL);
    node.process->Wait();
    node.process = nullptr;
  }
}

void RedisCluster::Signal(int port, int signal_number) {
  for (Node& node : nodes_) {
    if (node.port == port && node.process != nullptr) node.process->Signal(signal_number);
  }
}

absl::Status RedisCluster::Restart(int port) {
  for (Node& node : nodes_) {
    if (node.port != port) continue;
    if (node.process != nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("the node on port ", port, " runs"));
    }
    return Launch(node);
  }
  return absl::NotFoundError(absl::StrCat("no node on port ", port));
}

absl::Status RedisCluster::MigrateSlot(int slot, int target_port,
                                       absl::FunctionRef<void(int)> moved,
                                       absl::Span<const std::string> first) {
  const int source_port = OwnerOf(slot);
  if (source_port == 0) return absl::UnavailableError(absl::StrCat("no node serves slot ", slot));
  if (source_port == target_port) {
    return absl::InvalidArgumentError(absl::StrCat("slot ", slot, " is on port ", target_port));
  }
  absl::StatusOr<std::string> source_id = Command(source_port, {"CLUSTER", "MYID"});
  absl::StatusOr<std::string> target_id = Command(target_port, {"CLUSTER", "MYID"});
  if (!source_id.ok()) return source_id.status();
  if (!target_id.ok()) return target_id.status();
  const std::string s = absl::StrCat(slot);
  // Each step answers OK, or says why not.
  auto step = [&](int port, const std::vector<std::string>& args) -> absl::Status {
    absl::StatusOr<std::string> reply = Command(port, args);
    if (!reply.ok()) return reply.status();
    if (*reply != "OK") {
      return absl::InternalError(
          absl::StrCat(absl::StrJoin(args, " "), " on port ", port, " answered ", *reply));
    }
    return absl::OkStatus();
  };
  absl::Status status = step(target_port, {"CLUSTER", "SETSLOT", s, "IMPORTING", *source_id});
  if (status.ok()) status = step(source_port, {"CLUSTER", "SETSLOT", s, "MIGRATING", *target_id});
  size_t next_first = 0;
  for (int count = 0; status.ok();) {
    std::string key;
    while (key.empty() && next_first < first.size()) {
      const std::string& wanted = first[next_first++];
      absl::StatusOr<std::string> exists = Command(source_port, {"EXISTS", wanted});
      if (!exists.ok()) return exists.status();
      if (*exists == "1") key = wanted;
    }
    if (key.empty()) {
      absl::StatusOr<std::string> any = Command(source_port, {"CLUSTER", "GETKEYSINSLOT", s, "1"});
      if (!any.ok()) return any.status();
      if (any->empty()) break;
      key = *std::move(any);
    }
    absl::StatusOr<std::string> migrated =
        Command(source_port,
                {"MIGRATE", "127.0.0.1", absl::StrCat(target_port), "", "0", "5000", "KEYS", key});
    if (!migrated.ok()) return migrated.status();
    if (*migrated != "OK" && *migrated != "NOKEY") {
      return absl::InternalError(absl::StrCat("MIGRATE of ", key, " answered ", *migrated));
    }
    moved(++count);
  }
  // The target first, so that it serves the slot before the source stops.
  if (status.ok()) status = step(target_port, {"CLUSTER", "SETSLOT", s, "NODE", *target_id});
  if (status.ok()) status = step(source_port, {"CLUSTER", "SETSLOT", s, "NODE", *target_id});
  for (int port : MasterPorts()) {
    if (!status.ok()) break;
    if (port != source_port && port != target_port) {
      status = step(port, {"CLUSTER", "SETSLOT", s, "NODE", *target_id});
    }
  }
  return status;
}

absl::Status RedisCluster::MoveSlotSplitAfter(absl::Span<const std::string> first,
                                              absl::FunctionRef<void()> during) {
  if (first.empty()) return absl::InvalidArgumentError("no key to move first");
  const int source = MasterOf(first[0]);
  std::string slot;
  for (const std::string& key : first) {
    absl::StatusOr<std::string> key_slot = Command(source, {"CLUSTER", "KEYSLOT", key});
    absl::StatusOr<std::string> exists = Command(source, {"EXISTS", key});
    if (!key_slot.ok()) return key_slot.status();
    if (!exists.ok()) return exists.status();
    if (slot.empty()) slot = *key_slot;
    if (*key_slot != slot) {
      return absl::InvalidArgumentError(absl::StrCat(key, " is not in slot ", slot));
    }
    if (*exists != "1") return absl::FailedPreconditionError(absl::StrCat(key, " does not exist"));
  }
  int slot_number = 0;
  if (!absl::SimpleAtoi(slot, &slot_number)) {
    return absl::InternalError(absl::StrCat("CLUSTER KEYSLOT answered ", slot));
  }
  const int target = AnotherMaster(source);
  if (target == 0) return absl::FailedPreconditionError("no other master");
  const int64_t tryagain_before = ErrorReplies("TRYAGAIN");
  bool tryagain = false;
  absl::Status moved = MigrateSlot(
      slot_number, target,
      [&](int count) {
        if (count != static_cast<int>(first.size())) return;
        during();
        tryagain = WaitForErrorReplies("TRYAGAIN", tryagain_before);
      },
      first);
  if (moved.ok() && !tryagain) {
    moved = absl::FailedPreconditionError(
        absl::StrCat("no node answered TRYAGAIN while slot ", slot, " was split"));
  }
  return moved;
}

int64_t RedisCluster::ErrorReplies(const std::string& code) const {
  // A line per error code: "errorstat_TRYAGAIN:count=3".
  const std::string field = absl::StrCat("errorstat_", code, ":count=");
  int64_t total = 0;
  for (const Node& node : nodes_) {
    if (node.process == nullptr) continue;
    absl::StatusOr<std::string> info = Command(node.port, {"INFO", "errorstats"});
    if (!info.ok()) continue;
    for (absl::string_view line : absl::StrSplit(*info, absl::ByAnyChar("\r\n"))) {
      int64_t count = 0;
      if (absl::ConsumePrefix(&line, field) && absl::SimpleAtoi(line, &count)) total += count;
    }
  }
  return total;
}

bool RedisCluster::WaitForErrorReplies(const std::string& code, int64_t above) const {
  const absl::Time deadline = absl::Now() + kPatience;
  while (absl::Now() < deadline) {
    if (ErrorReplies(code) > above) return true;
    absl::SleepFor(kPollInterval);
  }
  return false;
}

bool RedisCluster::WaitForClusterOk() const {
  const absl::Time deadline = absl::Now() + kPatience;
  const std::string size = absl::StrCat("cluster_size:", kMasters);
  while (absl::Now() < deadline) {
    bool ok = true;
    for (const Node& node : nodes_) {
      if (node.process == nullptr) continue;
      absl::StatusOr<std::string> info = Command(node.port, {"CLUSTER", "INFO"});
      ok = ok && info.ok() && absl::StrContains(*info, "cluster_state:ok") &&
           absl::StrContains(*info, size);
      // Right after a kill the others still count the dead master: it has
      // to have been failed over, its slots served by a live node.
      absl::StatusOr<std::vector<int>> masters = MasterPortsSeenBy(node.port);
      ok = ok && masters.ok() && std::all_of(masters->begin(), masters->end(), [&](int port) {
             return std::any_of(nodes_.begin(), nodes_.end(), [&](const Node& n) {
               return n.port == port && n.process != nullptr;
             });
           });
    }
    if (ok) return true;
    absl::SleepFor(kPollInterval);
  }
  return false;
}

bool RedisCluster::WaitForReplicasLinked() const {
  const absl::Time deadline = absl::Now() + kPatience;
  while (absl::Now() < deadline) {
    bool ok = true;
    for (const Node& node : nodes_) {
      if (node.process == nullptr) continue;
      absl::StatusOr<std::string> info = Command(node.port, {"INFO", "replication"});
      ok = ok && info.ok() &&
           (absl::StrContains(*info, "role:master")
                ? absl::StrContains(*info, "connected_slaves:1")
                : absl::StrContains(*info, "master_link_status:up"));
    }
    if (ok) return true;
    absl::SleepFor(kPollInterval);
  }
  return false;
}

}  // namespace lapse::testing
