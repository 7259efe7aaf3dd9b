// Helpers for the integration tests: a real LapseServer on 127.0.0.1:0 with a
// FakeClock, real channels to it, and a Watcher that reads a
// WatchExpirations stream on its own thread so tests can wait for what
// arrives (with a generous timeout that only guards against hangs).
//
//   lapse::testing::TestServer server;
//   PutTtl(server.stub(), "orders", {"a", "b"}, absl::Seconds(1));
//   lapse::testing::Watcher watcher(server.stub(), AllEvents());
//   server.ExpireAfter(absl::Seconds(2));
//   ASSERT_TRUE(watcher.WaitForEvents(2));
#ifndef LAPSE_TESTING_TEST_SERVER_H_
#define LAPSE_TESTING_TEST_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "lapse/v1/lapse.grpc.pb.h"
#include "server/base/clock.h"
#include "server/base/mutex.h"
#include "server/lapse_server.h"
#include "testing/temp_dir.h"
#include "testing/test_util.h"

namespace lapse::testing {

// The fake clock's start: a round second, so deadlines are easy to read.
inline absl::Time StartTime() { return absl::FromUnixSeconds(1'700'000'000); }

// The time a response gave; fails the test on a malformed Timestamp.
absl::Time TimeOf(const google::protobuf::Timestamp& timestamp);

// Options with small, test-friendly defaults (heartbeats effectively off).
ServerOptions TestOptions();

// Makes the next TestServer serve a new store (a new store_id, no events).
// With LAPSE_TEST_STORE=redis, a test's servers are replicas of one store
// over the shared cluster: this empties the cluster, so call it only once
// the test's earlier servers have stopped. Elsewhere every TestServer is a
// store of its own already, and this does nothing.
void StartNewStore();

class TestServer {
 public:
  // Starts on 127.0.0.1:0 with `options` (listen address and clock are
  // replaced). With LAPSE_TEST_STORE=durable in the environment and no
  // options.store.data_dir, the server is durable in a TempDir of its own,
  // removed after the server stops. With LAPSE_TEST_STORE=redis (and neither
  // a data_dir nor options.redis_cluster), it serves the Redis Cluster store
  // over one cluster shared by the test process, emptied when a test starts
  // its first server, with the clock as the scripts' and the reaper's.
  explicit TestServer(ServerOptions options = TestOptions());
  ~TestServer();
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  v1::LapseService::Stub& stub() { return *stub_; }
  // A channel on its own connection, for a client independent of stub().
  std::shared_ptr<grpc::Channel> NewChannel() const;
  FakeClock& clock() { return clock_; }
  LapseServer& server() { return server_; }
  int port() const { return port_; }

  // Moves the clock and makes the expirer (or the Redis store's reaper) look
  // at it.
  void ExpireAfter(absl::Duration d);
  // Moves the clock and makes the store's lease expiry look at it.
  void ExpireLeasesAfter(absl::Duration d);

 private:
  FakeClock clock_;
  // Only in the durable run; outlives server_.
  std::unique_ptr<TempDir> data_dir_;
  LapseServer server_;
  int port_ = 0;
  std::unique_ptr<v1::LapseService::Stub> stub_;
};

// A client context with a deadline that only guards against hangs.
void GuardDeadline(grpc::ClientContext* context);

// Calls the unary RPC `rpc` (e.g. &v1::LapseService::Stub::GetMembers) under
// GuardDeadline and returns its status:
//   ASSERT_TRUE(Call(stub, &v1::LapseService::Stub::GetMembers, request, &response).ok());
template <typename Request, typename Response>
grpc::Status Call(v1::LapseService::Stub& stub,
                  grpc::Status (v1::LapseService::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                              Response*),
                  const Request& request, Response* response) {
  grpc::ClientContext context;
  GuardDeadline(&context);
  return (stub.*rpc)(&context, request, response);
}

// Call that expects OK and returns the response:
//   const v1::GetMembersResponse got = CallOk(stub, &v1::LapseService::Stub::GetMembers, request);
template <typename Request, typename Response>
Response CallOk(v1::LapseService::Stub& stub,
                grpc::Status (v1::LapseService::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                            Response*),
                const Request& request) {
  Response response;
  const grpc::Status status = Call(stub, rpc, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

// A request naming `keys` in `collection`, as Get, Remove, Expire and Persist
// requests do.
template <typename Request>
Request KeysRequest(const std::string& collection, const std::vector<std::string>& keys) {
  Request request;
  request.set_collection(collection);
  for (const std::string& key : keys) request.add_keys(key);
  return request;
}

// The request that puts `keys` (value "v:<key>") into `collection` with `ttl`.
v1::PutMembersRequest PutTtlRequest(const std::string& collection,
                                    const std::vector<std::string>& keys, absl::Duration ttl);

// Sends PutTtlRequest; expects OK.
void PutTtl(v1::LapseService::Stub& stub, const std::string& collection,
            const std::vector<std::string>& keys, absl::Duration ttl);

// Puts `key` (no value, no expiration) into `collection`; returns the RPC's
// status so a test can ASSERT on it.
grpc::Status PutPersistent(v1::LapseService::Stub& stub, const std::string& collection,
                           const std::string& key);

// Expires `keys` now through ExpireMembers with a past expire_time, which
// appends their events before the RPC returns.
void ExpireNow(v1::LapseService::Stub& stub, const std::string& collection,
               const std::vector<std::string>& keys, absl::Time now);

// Puts 16 members with values of 256 KiB into each of "big0" to "big3" and
// expires them (ExpireNow): 64 events with 16 MiB of values, far more than
// the sockets of a loopback connection hold.
void ExpireLargeValues(v1::LapseService::Stub& stub, absl::Time now);

// The visibility timeout of the groups CreateGroup creates by default.
constexpr absl::Duration kGroupVisibility = absl::Seconds(30);

// Creates consumer group `name` over every event with `visibility` and room
// for 1000 unacknowledged events per consumer; expects OK.
void CreateGroup(v1::LapseService::Stub& stub, const std::string& name,
                 absl::Duration visibility = kGroupVisibility);

// Puts `n` members "order-0", "order-1", ... into "orders" with a TTL of 1 s,
// 1000 per request; returns their keys.
std::vector<std::string> PutExpiring(v1::LapseService::Stub& stub, int n);

v1::WatchExpirationsRequest AllEvents();
// START_POSITION_AFTER_SEQUENCE from `sequence`; START_POSITION_AFTER_TOKEN
// from `token`.
v1::WatchExpirationsRequest After(uint64_t sequence);
v1::WatchExpirationsRequest AfterToken(const std::string& token);

// A WatchExpirations stream read on its own thread (or not read at all).
// Thread-safe.
class Watcher {
 public:
  enum class Reading { kRead, kDoNotRead };

  // Returns once the server has sent the stream's headers, i.e. once the
  // stream's start position is fixed. The stream has no deadline: it lasts
  // until the Watcher is destroyed (a test's length depends on the
  // machine's load), and each wait gives up when nothing moves for
  // kPatience instead.
  Watcher(v1::LapseService::Stub& stub, const v1::WatchExpirationsRequest& request,
          Reading reading = Reading::kRead);
  // Cancels the stream if it is still open.
  ~Watcher();
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  // Each waits until the condition holds; false once the stream ended, or
  // once no event arrived for kPatience, without it.
  bool WaitForEvents(size_t count);
  bool WaitForResponses(size_t count);
  bool WaitFor(const std::function<bool(const std::vector<v1::WatchExpirationsResponse>&)>& done);
  // Waits for the stream to end and returns its status.
  grpc::Status WaitForEnd();

  std::vector<v1::WatchExpirationsResponse> responses();
  std::vector<v1::ExpiryEvent> events();
  void Cancel() { context_.TryCancel(); }

 private:
  void ReadAll();
  // Waits until done() or the stream's end, giving up once no event arrived
  // for kPatience; done()'s last value.
  bool WaitWhileProgressing(const std::function<bool()>& done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<v1::WatchExpirationsResponse>> reader_;
  std::thread reader_thread_;

  // Signalled on every response and at the end.
  Mutex mu_;
  CondVar cv_;
  std::vector<v1::WatchExpirationsResponse> responses_ ABSL_GUARDED_BY(mu_);
  size_t event_count_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

// Sequences of `events`, in order.
std::vector<uint64_t> Sequences(const std::vector<v1::ExpiryEvent>& events);

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_TEST_SERVER_H_
