#include "testing/test_server.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "server/base/mutex.h"
#include "server/service/proto_convert.h"
#include "testing/redis_cluster.h"

namespace lapse::testing {
namespace {

// The integration suite is the Store conformance suite: ctest runs it once
// per store, named by LAPSE_TEST_STORE: "memory" (the default), "durable"
// (every change through the write-ahead log) or "redis" (the Redis Cluster
// store over one cluster for the whole process).
enum class StoreUnderTest { kMemory, kDurable, kRedis };

StoreUnderTest TheStoreUnderTest() {
  const char* store = std::getenv("LAPSE_TEST_STORE");
  if (store == nullptr || std::string(store) == "memory") return StoreUnderTest::kMemory;
  if (std::string(store) == "durable") return StoreUnderTest::kDurable;
  if (std::string(store) == "redis") return StoreUnderTest::kRedis;
  std::fprintf(stderr, "LAPSE_TEST_STORE=%s: expected memory, durable or redis\n", store);
  std::abort();
}

std::unique_ptr<TempDir> DurableDataDir(const ServerOptions& options) {
  if (TheStoreUnderTest() != StoreUnderTest::kDurable || !options.store.data_dir.empty()) {
    return nullptr;
  }
  auto dir = std::make_unique<TempDir>();
  if (dir->path().empty()) std::abort();
  return dir;
}

// The shared cluster's nodes, for StopClusterAndDie: a crash runs no
// destructor, and the nodes would outlive the test process.
pid_t g_cluster_pids[RedisCluster::kNodes] = {};

// A crash signal's handler: SIGKILLs the nodes, then dies of the signal.
void StopClusterAndDie(int signal_number) {
  for (pid_t pid : g_cluster_pids) {
    if (pid > 0) kill(pid, SIGKILL);
  }
  raise(signal_number);
}

// The Redis Cluster of a LAPSE_TEST_STORE=redis run: started on first use,
// stopped when the process exits, or crashes.
RedisCluster& SharedCluster() {
  static RedisCluster cluster;
  [[maybe_unused]] static const bool guarded = [] {
    if (!cluster.status().ok()) {
      std::fprintf(stderr, "the Redis Cluster for LAPSE_TEST_STORE=redis did not start: %s\n",
                   cluster.status().ToString().c_str());
      std::abort();
    }
    const std::vector<pid_t> pids = cluster.NodePids();
    std::copy_n(pids.begin(), std::min(pids.size(), std::size(g_cluster_pids)), g_cluster_pids);
    struct sigaction action = {};
    action.sa_handler = &StopClusterAndDie;
    action.sa_flags = SA_RESETHAND;
    for (int signal_number : {SIGSEGV, SIGABRT, SIGBUS, SIGILL, SIGFPE}) {
      sigaction(signal_number, &action, nullptr);
    }
    return true;
  }();
  return cluster;
}

// Empties the shared cluster (FLUSHALL on every master) the first time a
// test starts a server, so that each test sees a new store; a test's further
// servers are more replicas of that store. `again`: empties it even if this
// test did already (StartNewStore).
void FlushForTest(RedisCluster& cluster, bool again) {
  struct Flushed {
    Mutex mu;
    std::string test ABSL_GUARDED_BY(mu);
  };
  static Flushed* const flushed = new Flushed;
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name =
      test == nullptr ? "" : absl::StrCat(test->test_suite_name(), ".", test->name());
  MutexLock lock(&flushed->mu);
  if (name == flushed->test && !again) return;
  flushed->test = name;
  if (const absl::Status emptied = cluster.FlushAll(); !emptied.ok()) {
    std::fprintf(stderr, "emptying the shared Redis Cluster failed: %s\n",
                 emptied.ToString().c_str());
    std::abort();
  }
}

// The Redis Cluster store over the shared cluster, its scripts and reaper
// timed by `clock`.
redis::RedisClusterStoreOptions RedisOptionsForTest(const Clock* clock) {
  RedisCluster& cluster = SharedCluster();
  FlushForTest(cluster, /*again=*/false);
  redis::RedisClusterStoreOptions options;
  options.router.seeds = cluster.seeds();
  options.partitions = 8;
  options.script_clock = clock;
  options.reaper_clock = clock;
  return options;
}

ServerOptions WithTestEndpoints(ServerOptions options, Clock* clock, const TempDir* data_dir) {
  options.listen_address = "127.0.0.1:0";
  options.store.clock = clock;
  if (data_dir != nullptr) {
    options.store.data_dir = data_dir->path();
    options.store.fsync = FsyncPolicy::kNever;
  }
  if (TheStoreUnderTest() == StoreUnderTest::kRedis && options.store.data_dir.empty() &&
      !options.redis_cluster.has_value()) {
    options.redis_cluster = RedisOptionsForTest(clock);
  }
  return options;
}

}  // namespace

void StartNewStore() {
  if (TheStoreUnderTest() == StoreUnderTest::kRedis) FlushForTest(SharedCluster(), /*again=*/true);
}

ServerOptions TestOptions() {
  ServerOptions options;
  options.store.shards = 4;
  // Long enough that no heartbeat shows up unless a test asks for one.
  options.heartbeat_interval = absl::Hours(1);
  return options;
}

TestServer::TestServer(ServerOptions options)
    : clock_(StartTime()),
      data_dir_(DurableDataDir(options)),
      server_(WithTestEndpoints(std::move(options), &clock_, data_dir_.get())) {
  absl::StatusOr<int> port = server_.Start();
  if (!port.ok()) {
    std::fprintf(stderr, "test server failed to start: %s\n",
                 std::string(port.status().message()).c_str());
    std::abort();
  }
  port_ = *port;
  stub_ = v1::LapseService::NewStub(NewChannel());
}

TestServer::~TestServer() { server_.Shutdown(absl::ZeroDuration()); }

std::shared_ptr<grpc::Channel> TestServer::NewChannel() const {
  grpc::ChannelArguments args;
  // Without this, channels to the same target share one connection.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port_),
                                   grpc::InsecureChannelCredentials(), args);
}

void TestServer::ExpireAfter(absl::Duration d) {
  clock_.Advance(d);
  if (redis::RedisClusterStore* redis = server_.redis_store(); redis != nullptr) {
    redis->WakeReaperForTesting();
  } else {
    server_.embedded_store().expirer().Wake();
  }
}

void TestServer::ExpireLeasesAfter(absl::Duration d) {
  clock_.Advance(d);
  if (redis::RedisClusterStore* redis = server_.redis_store(); redis != nullptr) {
    redis->consumer_groups().FireDueAlarmsForTesting();
  } else {
    server_.embedded_store().lease_expirer().Wake();
  }
}

void GuardDeadline(grpc::ClientContext* context) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + kPatience));
}

v1::PutMembersRequest PutTtlRequest(const std::string& collection,
                                    const std::vector<std::string>& keys, absl::Duration ttl) {
  v1::PutMembersRequest request;
  request.set_collection(collection);
  for (const std::string& key : keys) {
    v1::MemberWrite* write = request.add_members();
    write->set_key(key);
    write->set_value(absl::StrCat("v:", key));
    write->mutable_ttl()->set_seconds(absl::ToInt64Seconds(ttl));
    write->mutable_ttl()->set_nanos(static_cast<int32_t>(
        absl::ToInt64Nanoseconds(ttl - absl::Seconds(absl::ToInt64Seconds(ttl)))));
  }
  return request;
}

void PutTtl(v1::LapseService::Stub& stub, const std::string& collection,
            const std::vector<std::string>& keys, absl::Duration ttl) {
  v1::PutMembersResponse response;
  const grpc::Status status = Call(stub, &v1::LapseService::Stub::PutMembers,
                                   PutTtlRequest(collection, keys, ttl), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

absl::Time TimeOf(const google::protobuf::Timestamp& timestamp) {
  absl::StatusOr<absl::Time> time = TimeFromProto(timestamp, "timestamp");
  EXPECT_TRUE(time.ok()) << time.status();
  return time.value_or(absl::InfinitePast());
}

void CreateGroup(v1::LapseService::Stub& stub, const std::string& name, absl::Duration visibility) {
  v1::CreateConsumerGroupRequest request;
  request.set_name(name);
  request.mutable_visibility_timeout()->set_seconds(absl::ToInt64Seconds(visibility));
  request.set_max_unacked_per_consumer(1000);
  v1::CreateConsumerGroupResponse response;
  const grpc::Status status =
      Call(stub, &v1::LapseService::Stub::CreateConsumerGroup, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

std::vector<std::string> PutExpiring(v1::LapseService::Stub& stub, int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(absl::StrCat("order-", i));
  for (size_t first = 0; first < keys.size(); first += 1000) {
    const size_t last = std::min(keys.size(), first + 1000);
    PutTtl(stub, "orders",
           std::vector<std::string>(keys.begin() + static_cast<long>(first),
                                    keys.begin() + static_cast<long>(last)),
           absl::Seconds(1));
  }
  return keys;
}

grpc::Status PutPersistent(v1::LapseService::Stub& stub, const std::string& collection,
                           const std::string& key) {
  v1::PutMembersRequest request;
  request.set_collection(collection);
  request.add_members()->set_key(key);
  v1::PutMembersResponse response;
  return Call(stub, &v1::LapseService::Stub::PutMembers, request, &response);
}

void ExpireNow(v1::LapseService::Stub& stub, const std::string& collection,
               const std::vector<std::string>& keys, absl::Time now) {
  auto request = KeysRequest<v1::ExpireMembersRequest>(collection, keys);
  *request.mutable_expire_time() = *TimeToProto(now - absl::Seconds(1));
  v1::ExpireMembersResponse response;
  const grpc::Status status =
      Call(stub, &v1::LapseService::Stub::ExpireMembers, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  for (const v1::ExpireMemberResult& result : response.results()) {
    EXPECT_EQ(result.outcome(), v1::EXPIRE_OUTCOME_EXPIRED) << result.key();
  }
}

void ExpireLargeValues(v1::LapseService::Stub& stub, absl::Time now) {
  for (int c = 0; c < 4; ++c) {
    v1::PutMembersRequest request;
    request.set_collection(absl::StrCat("big", c));
    std::vector<std::string> keys;
    for (int i = 0; i < 16; ++i) {
      keys.push_back(absl::StrCat("k", i));
      v1::MemberWrite* write = request.add_members();
      write->set_key(keys.back());
      write->set_value(std::string(256 << 10, 'x'));
    }
    v1::PutMembersResponse response;
    const grpc::Status status = Call(stub, &v1::LapseService::Stub::PutMembers, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ExpireNow(stub, request.collection(), keys, now);
  }
}

v1::WatchExpirationsRequest AllEvents() {
  v1::WatchExpirationsRequest request;
  request.set_start_position(v1::START_POSITION_NEW);
  return request;
}

v1::WatchExpirationsRequest After(uint64_t sequence) {
  v1::WatchExpirationsRequest request;
  request.set_start_position(v1::START_POSITION_AFTER_SEQUENCE);
  request.set_after_sequence(sequence);
  return request;
}

v1::WatchExpirationsRequest AfterToken(const std::string& token) {
  v1::WatchExpirationsRequest request;
  request.set_start_position(v1::START_POSITION_AFTER_TOKEN);
  request.set_resume_token(token);
  return request;
}

Watcher::Watcher(v1::LapseService::Stub& stub, const v1::WatchExpirationsRequest& request,
                 Reading reading) {
  reader_ = stub.WatchExpirations(&context_, request);
  reader_->WaitForInitialMetadata();
  if (reading == Reading::kRead) {
    reader_thread_ = std::thread([this] { ReadAll(); });
  }
}

Watcher::~Watcher() {
  context_.TryCancel();
  if (reader_thread_.joinable()) {
    reader_thread_.join();
  } else {
    reader_->Finish().IgnoreError();
  }
}

void Watcher::ReadAll() {
  v1::WatchExpirationsResponse response;
  while (reader_->Read(&response)) {
    MutexLock lock(&mu_);
    event_count_ += response.events_size();
    responses_.push_back(std::move(response));
    cv_.SignalAll();
    response.Clear();
  }
  grpc::Status status = reader_->Finish();
  MutexLock lock(&mu_);
  status_ = std::move(status);
  ended_ = true;
  cv_.SignalAll();
}

bool Watcher::WaitWhileProgressing(const std::function<bool()>& done) {
  while (!done() && !ended_) {
    const size_t seen = event_count_;
    if (!WaitWithPatience(mu_, cv_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return done() || ended_ || event_count_ > seen;
        })) {
      break;
    }
  }
  return done();
}

bool Watcher::WaitForEvents(size_t count) {
  MutexLock lock(&mu_);
  return WaitWhileProgressing(
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return event_count_ >= count; });
}

bool Watcher::WaitForResponses(size_t count) {
  return WaitFor(
      [count](const std::vector<v1::WatchExpirationsResponse>& r) { return r.size() >= count; });
}

bool Watcher::WaitFor(
    const std::function<bool(const std::vector<v1::WatchExpirationsResponse>&)>& done) {
  MutexLock lock(&mu_);
  return WaitWhileProgressing([&]()
                                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done(responses_); });
}

grpc::Status Watcher::WaitForEnd() {
  MutexLock lock(&mu_);
  auto ended = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ended_; };
  if (!WaitWithPatience(mu_, cv_, ended)) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "test: stream did not end");
  }
  return status_;
}

std::vector<v1::WatchExpirationsResponse> Watcher::responses() {
  MutexLock lock(&mu_);
  return responses_;
}

std::vector<v1::ExpiryEvent> Watcher::events() {
  MutexLock lock(&mu_);
  std::vector<v1::ExpiryEvent> events;
  for (const v1::WatchExpirationsResponse& response : responses_) {
    events.insert(events.end(), response.events().begin(), response.events().end());
  }
  return events;
}

std::vector<uint64_t> Sequences(const std::vector<v1::ExpiryEvent>& events) {
  std::vector<uint64_t> sequences;
  for (const v1::ExpiryEvent& event : events) sequences.push_back(event.sequence());
  return sequences;
}

}  // namespace lapse::testing
