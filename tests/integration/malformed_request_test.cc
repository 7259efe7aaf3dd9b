// Requests whose bytes are not the message their RPC takes: every RPC answers
// INVALID_ARGUMENT naming the message type (and the field, when protobuf
// tells), not gRPC's UNIMPLEMENTED with an empty message, and the log does
// not get a line per request.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "testing/captured_log.h"
#include "testing/test_server.h"

namespace lapse::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Every RPC of lapse.v1.LapseService; field 1 of each request is a string.
constexpr const char* kMethods[] = {
    "PutMembers",  "GetMembers",    "RemoveMembers",   "ExpireMembers",    "PersistMembers",
    "ListMembers", "GetCollection", "ListCollections", "DeleteCollection", "WatchExpirations"};

// The name of field 1 of each method's request, in kMethods' order.
constexpr const char* kFieldOne[] = {"collection", "collection", "collection", "collection",
                                     "collection", "collection", "name",       "prefix",
                                     "name",       "collections"};

// Field 1, length-delimited, 2 bytes that are not UTF-8.
const std::string kInvalidUtf8("\x0a\x02\xc3\x28", 4);
// Field 1, length-delimited, 5 bytes announced, 1 sent.
const std::string kTruncated("\x0a\x05\x61", 3);
// Field 1 with wire type 7, which does not exist.
const std::string kBadWireType("\x0f", 1);

// Sends `bytes` as the request of `method` and returns the call's status.
grpc::Status CallWithBytes(TestServer& server, const std::string& method,
                           const std::string& bytes) {
  grpc::GenericStub stub(server.NewChannel());
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext context;
  GuardDeadline(&context);
  Mutex mu;
  CondVar cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&context, absl::StrCat("/lapse.v1.LapseService/", method), grpc::StubOptions(),
                 &request, &response, [&](grpc::Status s) {
                   MutexLock lock(&mu);
                   status = std::move(s);
                   done = true;
                   cv.Signal();
                 });
  MutexLock lock(&mu);
  if (!WaitWithPatience(mu, cv, [&] { return done; })) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "no answer");
  }
  return status;
}

class MalformedRequestTest : public ::testing::TestWithParam<int> {
 protected:
  std::string method() const { return kMethods[GetParam()]; }
  std::string request_type() const { return absl::StrCat("lapse.v1.", method(), "Request"); }

  TestServer server_;
};

TEST_P(MalformedRequestTest, InvalidUtf8InAStringFieldIsInvalidArgumentNamingTheField) {
  const grpc::Status status = CallWithBytes(server_, method(), kInvalidUtf8);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), StartsWith("request: not a valid " + request_type() + ": "));
  EXPECT_THAT(status.error_message(),
              HasSubstr(absl::StrCat("field ", request_type(), ".", kFieldOne[GetParam()],
                                     " is not valid UTF-8")));
}

TEST_P(MalformedRequestTest, TruncatedBytesAreInvalidArgumentNamingTheType) {
  const grpc::Status status = CallWithBytes(server_, method(), kTruncated);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), StartsWith("request: not a valid " + request_type() + ": "));
  EXPECT_THAT(status.error_message(), HasSubstr("malformed protobuf wire format"));
}

TEST_P(MalformedRequestTest, AnInvalidWireTypeIsInvalidArgumentNamingTheType) {
  const grpc::Status status = CallWithBytes(server_, method(), kBadWireType);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), StartsWith("request: not a valid " + request_type() + ": "));
}

INSTANTIATE_TEST_SUITE_P(EveryRpc, MalformedRequestTest,
                         ::testing::Range(0, static_cast<int>(std::size(kMethods))),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(kMethods[info.param]);
                         });

TEST(MalformedRequestLogTest, AFloodOfMalformedRequestsWritesAFewLines) {
  CapturedLog log;
  {
    TestServer server;
    for (int i = 0; i < 30; ++i) {
      ASSERT_EQ(CallWithBytes(server, "PutMembers", kInvalidUtf8).error_code(),
                grpc::StatusCode::INVALID_ARGUMENT);
    }
  }
  const std::string written = log.Text();
  // At most 10 a minute; the test may straddle two minutes' budgets.
  const std::vector<std::string> lines = absl::StrSplit(written, '\n', absl::SkipEmpty());
  EXPECT_LE(lines.size(), 21u) << written;
  EXPECT_THAT(written, HasSubstr("refused a malformed request from"));
}

}  // namespace
}  // namespace lapse::testing
