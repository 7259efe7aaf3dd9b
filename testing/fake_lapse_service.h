// FakeLapseService: a LapseService whose answers a test scripts, served on
// 127.0.0.1:0 by FakeServer, for what a real server will not do on demand:
// fail the first N calls with UNAVAILABLE, never answer, or end a watch stream
// at a chosen point. StreamWrites is refused (UNIMPLEMENTED) unless held:
// then it reads requests and answers them only when told to.
//
//   FakeServer server;
//   server.service().FailFirst(2, grpc::Status(grpc::StatusCode::UNAVAILABLE, "x"));
//   lapse::client::Client client(server.address());
//   client.GetCollection("c");                    // retried: 3 calls
//   EXPECT_EQ(server.service().calls("GetCollection"), 3);
//
// Unary calls past the failures succeed with an empty response. Each
// WatchExpirations call plays the next scripted Stream; a call beyond the
// script stays open (after its headers) until the client cancels it.
// Thread-safe.
#ifndef LAPSE_TESTING_FAKE_LAPSE_SERVICE_H_
#define LAPSE_TESTING_FAKE_LAPSE_SERVICE_H_

#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"
#include "lapse/v1/lapse.grpc.pb.h"
#include "server/base/mutex.h"
#include "testing/test_util.h"

namespace lapse::testing {

class HeldWriteStream;

class FakeLapseService final : public v1::LapseService::CallbackService {
 public:
  struct Stream {
    // Without headers the refusal is trailers-only, like a real rejected call.
    bool send_headers = true;
    std::vector<v1::WatchExpirationsResponse> responses;
    // How the stream ends after its responses; unset: it stays open.
    std::optional<grpc::Status> end;
  };

  // The next `count` unary calls (of any method) fail with `status`.
  void FailFirst(int count, const grpc::Status& status);
  // From now on unary calls are never answered; they end when the client
  // gives up (deadline or cancel).
  void HoldUnaryCalls();
  // From now on StreamWrites calls read every request, recording how many
  // operations it carries (stream_write_sizes), and answer none until
  // AnswerStreamWrites; they end when the client cancels them.
  void HoldStreamWrites();
  // Answers every request the held StreamWrites calls have read and not
  // answered: each operation OK with an empty response.
  void AnswerStreamWrites();
  // The operations of each request the held StreamWrites calls read, in the
  // order read.
  std::vector<int> stream_write_sizes();
  // The same requests as the first member key of each of their operations.
  std::vector<std::vector<std::string>> stream_write_keys();
  // Waits (at most kPatience) until `count` such requests have been read.
  bool WaitForStreamWriteRequests(size_t count);
  // Appends a stream to the script.
  void AddStream(Stream stream);

  // Calls received by `method` ("GetMembers", "WatchExpirations", ...).
  int calls(absl::string_view method);
  // Waits (at most kPatience) until `method` has received `count` calls.
  bool WaitForCalls(absl::string_view method, int count);
  std::vector<v1::WatchExpirationsRequest> watch_requests();
  // Waits (at most kPatience) until `count` watch calls have arrived.
  bool WaitForWatchCalls(size_t count);

  grpc::ServerUnaryReactor* PutMembers(grpc::CallbackServerContext* context,
                                       const v1::PutMembersRequest*,
                                       v1::PutMembersResponse*) override;
  grpc::ServerUnaryReactor* GetMembers(grpc::CallbackServerContext* context,
                                       const v1::GetMembersRequest*,
                                       v1::GetMembersResponse*) override;
  grpc::ServerUnaryReactor* RemoveMembers(grpc::CallbackServerContext* context,
                                          const v1::RemoveMembersRequest*,
                                          v1::RemoveMembersResponse*) override;
  grpc::ServerUnaryReactor* ExpireMembers(grpc::CallbackServerContext* context,
                                          const v1::ExpireMembersRequest*,
                                          v1::ExpireMembersResponse*) override;
  grpc::ServerUnaryReactor* PersistMembers(grpc::CallbackServerContext* context,
                                           const v1::PersistMembersRequest*,
                                           v1::PersistMembersResponse*) override;
  grpc::ServerUnaryReactor* ListMembers(grpc::CallbackServerContext* context,
                                        const v1::ListMembersRequest*,
                                        v1::ListMembersResponse*) override;
  grpc::ServerUnaryReactor* GetCollection(grpc::CallbackServerContext* context,
                                          const v1::GetCollectionRequest*,
                                          v1::GetCollectionResponse*) override;
  grpc::ServerUnaryReactor* ListCollections(grpc::CallbackServerContext* context,
                                            const v1::ListCollectionsRequest*,
                                            v1::ListCollectionsResponse*) override;
  grpc::ServerUnaryReactor* DeleteCollection(grpc::CallbackServerContext* context,
                                             const v1::DeleteCollectionRequest*,
                                             v1::DeleteCollectionResponse*) override;
  grpc::ServerWriteReactor<v1::WatchExpirationsResponse>* WatchExpirations(
      grpc::CallbackServerContext* context, const v1::WatchExpirationsRequest* request) override;
  grpc::ServerBidiReactor<v1::StreamWritesRequest, v1::StreamWritesResponse>* StreamWrites(
      grpc::CallbackServerContext* context) override;

 private:
  friend class HeldWriteStream;

  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, absl::string_view method);

  // Signalled when a call arrives.
  Mutex mu_;
  CondVar cv_;
  std::map<std::string, int, std::less<>> calls_ ABSL_GUARDED_BY(mu_);
  int failures_left_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::Status failure_ ABSL_GUARDED_BY(mu_);
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_writes_ ABSL_GUARDED_BY(mu_) = false;
  // The held StreamWrites calls not yet done, and what they read.
  std::set<HeldWriteStream*> held_writes_ ABSL_GUARDED_BY(mu_);
  std::vector<int> stream_write_sizes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<std::string>> stream_write_keys_ ABSL_GUARDED_BY(mu_);
  std::deque<Stream> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::WatchExpirationsRequest> watch_requests_ ABSL_GUARDED_BY(mu_);
};

// A FakeLapseService served on 127.0.0.1:0.
class FakeServer final {
 public:
  FakeServer();
  // Cancels whatever is still open.
  ~FakeServer();
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  FakeLapseService& service() { return service_; }
  // "127.0.0.1:<port>".
  std::string address() const;

 private:
  FakeLapseService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// A WatchExpirations response carrying events with these sequences (in
// collection "c", keys "k<sequence>") and `examined`.
v1::WatchExpirationsResponse Batch(const std::vector<uint64_t>& sequences, uint64_t examined);

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_FAKE_LAPSE_SERVICE_H_
