#include "testing/redis_cluster.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "testing/test_util.h"

namespace lapse::testing {
namespace {

// Between two looks at something that is coming (a log line, a cluster
// state); the wait as a whole is bounded by kPatience.
constexpr absl::Duration kPollInterval = absl::Milliseconds(20);
constexpr int kBusPortOffset = 10000;
constexpr int kLowestPort = 10000;
// Redis refuses a port whose bus port (port + 10000) would not fit.
constexpr int kHighestBusPort = 55535;

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
  const int end = std::min(EphemeralPortsStart(), kHighestBusPort + 1) - kBusPortOffset;
  if (end <= kLowestPort) return absl::FailedPreconditionError("no port range for Redis nodes");
  std::random_device seed;
  std::mt19937 random(seed());
  std::uniform_int_distribution<int> ports(kLowestPort, end - 1);
  constexpr int kAttempts = 20;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    node.port = ports(random);
    node.dir = absl::StrCat(dir_.path(), "/node", index, "-", node.port);
    const std::string log = absl::StrCat(node.dir, "/redis.log");
    std::vector<std::string> args = {"--bind",
                                     "127.0.0.1",
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
                                     absl::StrCat(kNodeTimeoutMs)};
    if (!options_.password.empty()) {
      for (const char* option : {"--requirepass", "--masterauth"}) {
        args.push_back(option);
        args.push_back(options_.password);
      }
    }
    if (mkdir(node.dir.c_str(), 0700) != 0) {
      return absl::InternalError(absl::StrCat("cannot create ", node.dir));
    }
    node.process = std::make_unique<ChildProcess>(LAPSE_REDIS_SERVER_PATH, args);
    if (!node.process->spawned()) {
      return absl::InternalError(absl::StrCat("cannot run ", LAPSE_REDIS_SERVER_PATH));
    }
    const absl::Time deadline = absl::Now() + kPatience;
    std::string content;
    while (absl::Now() < deadline) {
      content = ReadFile(log);
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
    if (!absl::StrContains(content, "Address already in use")) {
      return absl::UnavailableError(
          absl::StrCat("redis-server on port ", node.port, " did not start: ", content));
    }
  }
  return absl::UnavailableError(
      absl::StrCat("no free port pair for a Redis node after ", kAttempts, " attempts"));
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
  for (const Node& node : nodes_) out.push_back(absl::StrCat("127.0.0.1:", node.port));
  return out;
}

std::vector<int> RedisCluster::MasterPorts() const {
  for (const Node& node : nodes_) {
    if (node.process == nullptr) continue;
    absl::StatusOr<Reply> slots = Run(node.port, options_.password, {"CLUSTER", "SLOTS"});
    if (!slots.ok() || (*slots)->type != REDIS_REPLY_ARRAY) continue;
    std::vector<std::pair<long long, int>> ranges;
    for (size_t i = 0; i < (*slots)->elements; ++i) {
      const redisReply& range = *(*slots)->element[i];
      ranges.emplace_back(range.element[0]->integer,
                          static_cast<int>(range.element[2]->element[1]->integer));
    }
    std::sort(ranges.begin(), ranges.end());
    std::vector<int> ports;
    for (const auto& [start, port] : ranges) {
      if (std::find(ports.begin(), ports.end(), port) == ports.end()) ports.push_back(port);
    }
    return ports;
  }
  return {};
}

absl::StatusOr<std::string> RedisCluster::Command(int port,
                                                  const std::vector<std::string>& args) const {
  absl::StatusOr<Reply> reply = Run(port, options_.password, args);
  if (!reply.ok()) return reply.status();
  return Text(**reply);
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
