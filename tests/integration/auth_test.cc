// Authorization by an auth file (--auth_file) through a real LapseServer:
// who is refused (UNAUTHENTICATED), what each RPC needs per collection prefix
// (PERMISSION_DENIED), watches, reloading, and what stays open; and SPIFFE
// identities through the service behind a real mTLS handshake.
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "lapse/client.h"
#include "server/auth/auth_file.h"
#include "server/auth/auth_policy.h"
#include "server/service/lapse_service.h"
#include "server/service/watch_hub.h"
#include "server/storage/embedded_store.h"
#include "testing/auth_grants.h"
#include "testing/temp_dir.h"
#include "testing/test_certs.h"
#include "testing/test_server.h"
#include "testing/test_util.h"

namespace lapse::testing {
namespace {

using ::testing::HasSubstr;

// An auth file in a TempDir, replaced the way Kubernetes and editors do it.
class AuthFileOnDisk {
 public:
  explicit AuthFileOnDisk(const std::string& text) { Write(text); }
  void Write(const std::string& text) { WriteAuthFile(path_, text); }
  const std::string& path() const { return path_; }

 private:
  TempDir dir_;
  const std::string path_ = dir_.path() + "/auth";
};

const std::string kGrants =
    absl::StrCat(TokenGrant("reader", "read orders:"), TokenGrant("writer", "read,write orders:"),
                 TokenGrant("deleter", "admin orders:"), TokenGrant("watcher", "watch orders:"),
                 TokenGrant("worker", "consume orders:"), TokenGrant("root", "all *"),
                 TokenGrant("nobody", "read nothing-here:"));

ServerOptions AuthOptions(const std::string& path) {
  ServerOptions options = TestOptions();
  options.auth_file = path;
  options.auth_poll_interval = absl::ZeroDuration();
  return options;
}

// A context carrying `token` (none if empty) and a guard deadline.
void WithToken(grpc::ClientContext* context, const std::string& token) {
  GuardDeadline(context);
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
}

class AuthTest : public ::testing::Test {
 protected:
  AuthFileOnDisk file_{kGrants};
  TestServer server_{AuthOptions(file_.path())};
};

// Calls every method of lapse.v1.LapseService, from its descriptor (so a new
// RPC is covered without being listed here), with an empty request (to
// StreamWrites, one put operation, whose status stands for the call's), and
// returns each one's status.
std::vector<std::pair<std::string, grpc::Status>> CallEveryMethod(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& token) {
  grpc::GenericStub stub(channel);
  const google::protobuf::ServiceDescriptor* service =
      v1::PutMembersRequest::descriptor()->file()->FindServiceByName("LapseService");
  std::vector<std::pair<std::string, grpc::Status>> results;
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string method =
        absl::StrCat("/", service->full_name(), "/", service->method(i)->name());
    grpc::ClientContext context;
    WithToken(&context, token);
    // A StreamWrites stream is refused per operation: send it one.
    v1::StreamWritesRequest writes;
    v1::PutMembersRequest* put = writes.add_operations()->mutable_put_members();
    put->set_collection("orders:1");
    put->add_members()->set_key("k");
    grpc::Slice bytes(service->method(i)->name() == "StreamWrites" ? writes.SerializeAsString()
                                                                   : std::string());
    grpc::ByteBuffer request(&bytes, 1);
    grpc::ByteBuffer response;
    Mutex mu;
    CondVar cv;
    bool done = false;
    grpc::Status status;
    stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
      MutexLock lock(&mu);
      status = std::move(s);
      done = true;
      cv.SignalAll();
    });
    MutexLock lock(&mu);
    EXPECT_TRUE(WaitWithPatience(mu, cv, [&] { return done; })) << method;
    v1::StreamWritesResponse answered;
    if (status.ok() && service->method(i)->name() == "StreamWrites" &&
        grpc::SerializationTraits<v1::StreamWritesResponse>::Deserialize(&response, &answered)
            .ok() &&
        answered.results_size() == 1 && answered.results(0).code() != 0) {
      status = grpc::Status(static_cast<grpc::StatusCode>(answered.results(0).code()),
                            answered.results(0).message());
    }
    results.emplace_back(method, status);
  }
  return results;
}

TEST_F(AuthTest, EveryMethodRefusesACallerWithoutCredentials) {
  const auto results = CallEveryMethod(server_.NewChannel(), "");
  ASSERT_EQ(results.size(), 23u);
  for (const auto& [method, status] : results) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method;
    EXPECT_THAT(status.error_message(), HasSubstr("no credentials")) << method;
  }
}

TEST_F(AuthTest, EveryMethodRefusesAnUnknownToken) {
  for (const auto& [method, status] : CallEveryMethod(server_.NewChannel(), "guess")) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method;
    EXPECT_THAT(status.error_message(), HasSubstr("not in the server's --auth_file")) << method;
    EXPECT_THAT(status.error_message(), ::testing::Not(HasSubstr("guess"))) << method;
  }
}

TEST_F(AuthTest, EveryMethodRefusesAKnownCallerOutsideItsPrefixes) {
  for (const auto& [method, status] : CallEveryMethod(server_.NewChannel(), "nobody")) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << method;
    EXPECT_THAT(status.error_message(), HasSubstr("lacks permission")) << method;
  }
}

// One RPC on `collection` with a valid request.
using Rpc = std::function<grpc::Status(v1::LapseService::Stub&, grpc::ClientContext*,
                                       const std::string& collection)>;

struct RpcCase {
  std::string name;
  // The tokens allowed; of reader, writer, deleter, watcher.
  std::vector<std::string> allowed;
  // The permission named when it is refused.
  std::string permission;
  Rpc rpc;
};

std::vector<RpcCase> RpcCases() {
  return {
      {"PutMembers",
       {"writer"},
       "write",
       [](v1::LapseService::Stub& stub, grpc::ClientContext* context, const std::string& c) {
         v1::PutMembersRequest request;
         request.set_collection(c);
         request.add_members()->set_key("k");
         v1::PutMembersResponse response;
         return stub.PutMembers(context, request, &response);
       }},
      {"GetMembers",
       {"reader", "writer"},
       "read",
       [](v1::LapseService::Stub& stub, grpc::ClientContext* context, const std::string& c) {
         v1::GetMembersResponse response;
         return stub.GetMembers(context, KeysRequest<v1::GetMembersRequest>(c, {"k"}), &response);
       }},
      // Needs read and write: refused outside, read is the first missing.
      {"GetMembers refreshing deadlines",
       {"writer"},
       "read",
       [](v1::LapseService::Stub& stub, grpc::ClientContext* context, const std::string& c) {
         v1::GetMembersRequest request = KeysRequest<v1::GetMembersRequest>(c, {"k"});
         request.mutable_refresh_ttl()->set_seconds(60);
         v1::GetMembersResponse response;
         return stub.GetMembers(context, request, &response);
       }},
      {"RemoveMembers",
       {"writer"},
       "write",
       [](v1::LapseService::Stub& stub, grpc::ClientContext* context, const std::string& c) {
         v1::RemoveMembersResponse response;
         return stub.RemoveMembers(context, KeysRequest<v1::RemoveMembersRequest>(c, {"k"}),
                                   &response);
       }},
      {"ExpireMembers",
       {"writer"},
       "write",
       [](v1::LapseService::Stub& stub, grpc::ClientContext* context, const std::string& c) {
         v1::ExpireMembersRequest request = KeysRequest<v1::ExpireMembersRequest>(c, {"k"});
         request.mutable_ttl()->set_seconds(60);
         v1::ExpireMembersResponse response;
         return stub.ExpireMembers(context, request, &response);
       }},
      {"PersistMembers",
       {"writer"},
       "write",
       [](v1::LapseService::Stub& stub, grpc::ClientContext* context, const std::string& c) {
         v1::PersistMembersResponse response;
         return stub.PersistMembers(context, KeysRequest<v1::PersistMembersRequest>(c, {"k"}),
                                    &response);
       }},
      {"ListMembers",
       {"reader", "writer"},
       "read",
       [](v1::LapseService::Stub& stub, grpc::ClientContext* context, const std::string& c) {
         v1::ListMembersRequest request;
         request.set_collection(c);
         v1::ListMembersResponse response;
         return stub.ListMembers(context, request, &response);
       }},
      {"GetCollection",
       {"reader", "writer"},
       "read",
       [](v1::LapseService::Stub& stub, grpc::ClientContext* context, const std::string& c) {
         v1::GetCollectionRequest request;
         request.set_name(c);
         v1::GetCollectionResponse response;
         return stub.GetCollection(context, request, &response);
       }},
      {"ListCollections",
       {"reader", "writer"},
       "read",
       [](v1::LapseService::Stub& stub, grpc::ClientContext* context, const std::string& c) {
         v1::ListCollectionsRequest request;
         request.set_prefix(c);
         v1::ListCollectionsResponse response;
         return stub.ListCollections(context, request, &response);
       }},
      {"DeleteCollection",
       {"deleter"},
       "admin",
       [](v1::LapseService::Stub& stub, grpc::ClientContext* context, const std::string& c) {
         v1::DeleteCollectionRequest request;
         request.set_name(c);
         v1::DeleteCollectionResponse response;
         return stub.DeleteCollection(context, request, &response);
       }},
  };
}

TEST_F(AuthTest, EachRpcIsAllowedOnlyWithItsPermissionWithinAGrantedPrefix) {
  for (const RpcCase& rpc : RpcCases()) {
    for (const std::string token : {"reader", "writer", "deleter", "watcher"}) {
      const bool allowed =
          std::find(rpc.allowed.begin(), rpc.allowed.end(), token) != rpc.allowed.end();
      grpc::ClientContext inside;
      WithToken(&inside, token);
      const grpc::Status in = rpc.rpc(server_.stub(), &inside, "orders:42");
      if (allowed) {
        EXPECT_NE(in.error_code(), grpc::StatusCode::PERMISSION_DENIED)
            << rpc.name << " by " << token << ": " << in.error_message();
        EXPECT_NE(in.error_code(), grpc::StatusCode::UNAUTHENTICATED) << rpc.name;
      } else {
        EXPECT_EQ(in.error_code(), grpc::StatusCode::PERMISSION_DENIED)
            << rpc.name << " by " << token;
      }
      grpc::ClientContext outside;
      WithToken(&outside, token);
      const grpc::Status out = rpc.rpc(server_.stub(), &outside, "users:7");
      EXPECT_EQ(out.error_code(), grpc::StatusCode::PERMISSION_DENIED)
          << rpc.name << " by " << token;
      if (allowed) {
        EXPECT_THAT(out.error_message(),
                    HasSubstr(absl::StrCat("lacks permission \"", rpc.permission, "\"")))
            << rpc.name;
        EXPECT_THAT(out.error_message(), HasSubstr("users:7")) << rpc.name;
        EXPECT_THAT(out.error_message(), ::testing::Not(HasSubstr(token))) << rpc.name;
      }
    }
  }
}

// A consumer group is reached by its name and reads what its filter says:
// both must be within the caller's consume grants, and a filter wider than
// them is refused, as a watch's is.
TEST_F(AuthTest, ConsumerGroupsNeedConsumeOnTheirNameAndOnWhatTheyRead) {
  auto create = [&](const std::string& token, const std::string& name, const std::string& prefix) {
    grpc::ClientContext context;
    WithToken(&context, token);
    v1::CreateConsumerGroupRequest request;
    request.set_name(name);
    request.set_collection_prefix(prefix);
    request.mutable_visibility_timeout()->set_seconds(30);
    v1::CreateConsumerGroupResponse response;
    return server_.stub().CreateConsumerGroup(&context, request, &response);
  };
  EXPECT_EQ(create("worker", "orders:cancel", "orders:").error_code(), grpc::StatusCode::OK);
  EXPECT_EQ(create("worker", "orders:everything", "").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(create("worker", "users:cancel", "orders:").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(create("watcher", "orders:watched", "orders:").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  auto poll = [&](const std::string& token) {
    grpc::ClientContext context;
    WithToken(&context, token);
    v1::PollRequest request;
    request.set_group("orders:cancel");
    request.set_consumer("c1");
    request.set_max_events(10);
    v1::PollResponse response;
    return server_.stub().Poll(&context, request, &response);
  };
  EXPECT_EQ(poll("worker").error_code(), grpc::StatusCode::OK);
  const grpc::Status refused = poll("watcher");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(), HasSubstr("lacks permission \"consume\""));

  // A Consume stream, by its start: refused at once, or open until the
  // client closes it.
  auto consume = [&](const std::string& token) {
    grpc::ClientContext context;
    WithToken(&context, token);
    auto stream = server_.stub().Consume(&context);
    v1::ConsumeRequest start;
    start.mutable_start()->set_group("orders:cancel");
    start.mutable_start()->set_consumer("c1");
    stream->Write(start);
    stream->WritesDone();
    v1::ConsumeResponse response;
    while (stream->Read(&response)) {
    }
    return stream->Finish();
  };
  EXPECT_EQ(consume("worker").error_code(), grpc::StatusCode::OK);
  const grpc::Status refused_stream = consume("watcher");
  EXPECT_EQ(refused_stream.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused_stream.error_message(), HasSubstr("lacks permission \"consume\""));

  auto remove = [&](const std::string& token) {
    grpc::ClientContext context;
    WithToken(&context, token);
    v1::DeleteConsumerGroupRequest request;
    request.set_name("orders:cancel");
    v1::DeleteConsumerGroupResponse response;
    return server_.stub().DeleteConsumerGroup(&context, request, &response);
  };
  EXPECT_EQ(remove("worker").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(remove("deleter").error_code(), grpc::StatusCode::OK);
}

TEST_F(AuthTest, ARefusedWriteWritesNothing) {
  grpc::ClientContext context;
  WithToken(&context, "reader");
  v1::PutMembersRequest request;
  request.set_collection("orders:1");
  request.add_members()->set_key("k");
  v1::PutMembersResponse response;
  EXPECT_EQ(server_.stub().PutMembers(&context, request, &response).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  grpc::ClientContext read;
  WithToken(&read, "root");
  v1::GetCollectionRequest get;
  get.set_name("orders:1");
  v1::GetCollectionResponse collection;
  EXPECT_EQ(server_.stub().GetCollection(&read, get, &collection).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// The status a watch by `token` with `request` starts or ends with: OK once
// its first response (an event) arrives.
grpc::Status WatchStatus(TestServer& server, const std::string& token,
                         const v1::WatchExpirationsRequest& request) {
  grpc::ClientContext context;
  WithToken(&context, token);
  std::unique_ptr<grpc::ClientReader<v1::WatchExpirationsResponse>> reader =
      server.stub().WatchExpirations(&context, request);
  v1::WatchExpirationsResponse response;
  if (reader->Read(&response)) {
    context.TryCancel();
    reader->Finish().IgnoreError();
    return grpc::Status::OK;
  }
  return reader->Finish();
}

TEST_F(AuthTest, AWatchFilterMustStayWithinTheCallersWatchPrefixes) {
  grpc::ClientContext put_context;
  WithToken(&put_context, "writer");
  v1::PutMembersResponse put_response;
  ASSERT_TRUE(server_.stub()
                  .PutMembers(&put_context, PutTtlRequest("orders:1", {"a"}, absl::Seconds(1)),
                              &put_response)
                  .ok());
  server_.ExpireAfter(absl::Seconds(2));

  v1::WatchExpirationsRequest within;
  within.set_start_position(v1::START_POSITION_OLDEST);
  within.set_collection_prefix("orders:");
  EXPECT_TRUE(WatchStatus(server_, "watcher", within).ok());

  v1::WatchExpirationsRequest everything;
  everything.set_start_position(v1::START_POSITION_OLDEST);
  const grpc::Status all = WatchStatus(server_, "watcher", everything);
  EXPECT_EQ(all.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(all.error_message(), HasSubstr("\"watch\" on every collection"));

  v1::WatchExpirationsRequest wider;
  wider.set_collection_prefix("order");
  EXPECT_EQ(WatchStatus(server_, "watcher", wider).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  v1::WatchExpirationsRequest named;
  named.add_collections("orders:1");
  named.add_collections("users:1");
  const grpc::Status mixed = WatchStatus(server_, "watcher", named);
  EXPECT_EQ(mixed.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(mixed.error_message(), HasSubstr("collection \"users:1\""));

  EXPECT_EQ(WatchStatus(server_, "reader", within).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(WatchStatus(server_, "root", everything).ok());
}

TEST_F(AuthTest, ListCollectionsNeedsReadOnItsPrefix) {
  grpc::ClientContext context;
  WithToken(&context, "reader");
  v1::ListCollectionsRequest everything;
  v1::ListCollectionsResponse response;
  const grpc::Status status = server_.stub().ListCollections(&context, everything, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("\"read\" on every collection"));
}

TEST_F(AuthTest, HealthAndReflectionStayOpen) {
  std::unique_ptr<grpc::health::v1::Health::Stub> health =
      grpc::health::v1::Health::NewStub(server_.NewChannel());
  grpc::ClientContext context;
  GuardDeadline(&context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service("lapse.v1.LapseService");
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(health->Check(&context, request, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(AuthTest, AChangedFileTakesEffectAndABadOneKeepsTheOld) {
  file_.Write(TokenGrant("rotated", "read orders:"));
  ASSERT_TRUE(server_.server().auth_file()->ReloadIfChanged().ok());
  grpc::ClientContext old_token;
  WithToken(&old_token, "reader");
  v1::ListMembersRequest request;
  request.set_collection("orders:1");
  v1::ListMembersResponse response;
  EXPECT_EQ(server_.stub().ListMembers(&old_token, request, &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext new_token;
  WithToken(&new_token, "rotated");
  EXPECT_TRUE(server_.stub().ListMembers(&new_token, request, &response).ok());

  file_.Write("not a grant\n");
  EXPECT_FALSE(server_.server().auth_file()->ReloadIfChanged().ok());
  grpc::ClientContext still;
  WithToken(&still, "rotated");
  EXPECT_TRUE(server_.stub().ListMembers(&still, request, &response).ok());
}

// A SPIFFE identity over a real mTLS handshake with a LapseServer that has
// both --tls_client_ca and --auth_file: gRPC reads the client certificate's
// URI SAN into the AuthContext and the service finds it there.
class SpiffeAuthTest : public ::testing::Test {
 protected:
  static constexpr char kSpiffeId[] = "spiffe://shop.test/ns/shop/sa/billing";

  SpiffeAuthTest()
      : ca_(certs_dir_.path(), "ca"),
        server_cert_(ca_.Issue("server", TestCa::kLoopbackNames)),
        client_cert_(ca_.Issue("billing", {absl::StrCat("URI:", kSpiffeId)})),
        server_(Options()) {}

  ServerOptions Options() {
    ServerOptions options = AuthOptions(file_.path());
    options.tls.cert_file = server_cert_.cert_file;
    options.tls.key_file = server_cert_.key_file;
    options.tls.client_ca_file = ca_.cert_file();
    return options;
  }

  // A stub over TLS, presenting the client certificate.
  std::unique_ptr<v1::LapseService::Stub> Stub() {
    client::ClientOptions options;
    options.tls.emplace();
    options.tls->ca_file = ca_.cert_file();
    options.tls->cert_file = client_cert_.cert_file;
    options.tls->key_file = client_cert_.key_file;
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        client::NewChannel(absl::StrCat("127.0.0.1:", server_.port()), options);
    EXPECT_TRUE(channel.ok()) << channel.status();
    return v1::LapseService::NewStub(*channel);
  }

  TempDir certs_dir_;
  TestCa ca_;
  TestCa::Issued server_cert_;
  TestCa::Issued client_cert_;
  AuthFileOnDisk file_{absl::StrCat(kSpiffeId, " read,write orders:\n")};
  TestServer server_;
};

TEST_F(SpiffeAuthTest, TheClientCertificatesSpiffeIdIsGrantedItsPrefixes) {
  std::unique_ptr<v1::LapseService::Stub> stub = Stub();
  grpc::ClientContext put_context;
  GuardDeadline(&put_context);
  v1::PutMembersRequest put;
  put.set_collection("orders:1");
  put.add_members()->set_key("k");
  v1::PutMembersResponse put_response;
  const grpc::Status written = stub->PutMembers(&put_context, put, &put_response);
  EXPECT_TRUE(written.ok()) << written.error_message();

  grpc::ClientContext delete_context;
  GuardDeadline(&delete_context);
  v1::DeleteCollectionRequest remove;
  remove.set_name("orders:1");
  v1::DeleteCollectionResponse removed;
  const grpc::Status denied = stub->DeleteCollection(&delete_context, remove, &removed);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(),
              HasSubstr(absl::StrCat(kSpiffeId, " lacks permission \"admin\"")));

  grpc::ClientContext outside_context;
  GuardDeadline(&outside_context);
  put.set_collection("users:1");
  EXPECT_EQ(stub->PutMembers(&outside_context, put, &put_response).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(SpiffeAuthTest, AnIdentityTheFileDoesNotNameIsUnauthenticated) {
  file_.Write("spiffe://shop.test/ns/shop/sa/someone-else read *\n");
  ASSERT_TRUE(server_.server().auth_file()->ReloadIfChanged().ok());
  grpc::ClientContext context;
  GuardDeadline(&context);
  v1::GetCollectionRequest request;
  request.set_name("orders:1");
  v1::GetCollectionResponse response;
  const grpc::Status status = Stub()->GetCollection(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(status.error_message(), HasSubstr("not in the server's --auth_file"));
}

TEST(AuthStartTest, ABadAuthFileStopsTheServerFromStarting) {
  AuthFileOnDisk file("token:sha256:0 read *\n");
  LapseServer server(AuthOptions(file.path()));
  absl::StatusOr<int> port = server.Start();
  EXPECT_EQ(port.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(port.status().message(), HasSubstr("line 1"));
}

}  // namespace
}  // namespace lapse::testing
