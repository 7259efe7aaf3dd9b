// StreamWrites end to end: operations applied and answered in order, a bad
// operation answered with its error while the stream goes on, more
// operations in flight than the server reads ahead, and draining; and with
// a store that answers later, from another thread (a durable server whose
// log writes are held), cancellation and shutdown while it has not answered.
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "testing/disk_fault.h"
#include "testing/temp_dir.h"
#include "testing/test_server.h"

namespace lapse::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using Stream = grpc::ClientReaderWriter<v1::StreamWritesRequest, v1::StreamWritesResponse>;

// A one-member put with a TTL of `ttl_s` seconds, added to `request`.
void AddPut(const std::string& collection, const std::string& key, int64_t ttl_s,
            v1::StreamWritesRequest* request) {
  v1::PutMembersRequest* put = request->add_operations()->mutable_put_members();
  put->set_collection(collection);
  v1::MemberWrite* write = put->add_members();
  write->set_key(key);
  write->set_value(absl::StrCat("v:", key));
  write->mutable_ttl()->set_seconds(ttl_s);
}

v1::StreamWritesRequest Put(const std::string& collection, const std::string& key, int64_t ttl_s) {
  v1::StreamWritesRequest request;
  AddPut(collection, key, ttl_s, &request);
  return request;
}

// The only result of a response to a one-operation request.
v1::WriteOperationResult Only(const v1::StreamWritesResponse& response) {
  EXPECT_EQ(response.results_size(), 1);
  return response.results_size() == 1 ? response.results(0) : v1::WriteOperationResult();
}

class WriteStreamTest : public ::testing::Test {
 protected:
  WriteStreamTest() {
    GuardDeadline(&context_);
    stream_ = server_.stub().StreamWrites(&context_);
  }

  v1::StreamWritesResponse Read() {
    v1::StreamWritesResponse response;
    EXPECT_TRUE(stream_->Read(&response));
    return response;
  }

  bool Found(const std::string& collection, const std::string& key) {
    v1::GetMembersResponse got;
    EXPECT_TRUE(Call(server_.stub(), &v1::LapseService::Stub::GetMembers,
                     KeysRequest<v1::GetMembersRequest>(collection, {key}), &got)
                    .ok());
    return got.results_size() == 1 && got.results(0).found();
  }

  TestServer server_;
  grpc::ClientContext context_;
  std::unique_ptr<Stream> stream_;
};

TEST_F(WriteStreamTest, OperationsAreAnsweredInOrderAndABadOneWritesNothingWhileTheStreamGoesOn) {
  ASSERT_TRUE(stream_->Write(Put("orders", "a", 10)));
  ASSERT_TRUE(stream_->Write(Put("orders", "bad", -1)));
  v1::StreamWritesRequest empty_operation;
  empty_operation.add_operations();
  ASSERT_TRUE(stream_->Write(empty_operation));
  ASSERT_TRUE(stream_->Write(Put("orders", "a", 20)));
  ASSERT_TRUE(stream_->WritesDone());

  const v1::WriteOperationResult created = Only(Read());
  EXPECT_EQ(created.code(), 0);
  ASSERT_EQ(created.put_members().results_size(), 1);
  EXPECT_EQ(created.put_members().results(0).outcome(), v1::PUT_OUTCOME_CREATED);

  const v1::WriteOperationResult bad = Only(Read());
  EXPECT_EQ(bad.code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.message(), StartsWith("members[0].ttl: "));
  EXPECT_FALSE(bad.has_put_members());

  const v1::WriteOperationResult empty = Only(Read());
  EXPECT_EQ(empty.code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(empty.message(), StartsWith("operations[0]: "));

  const v1::WriteOperationResult replaced = Only(Read());
  EXPECT_EQ(replaced.code(), 0);
  EXPECT_EQ(replaced.put_members().results(0).outcome(), v1::PUT_OUTCOME_REPLACED);
  EXPECT_EQ(replaced.put_members().results(0).expire_time().seconds(),
            absl::ToUnixSeconds(StartTime() + absl::Seconds(20)));

  v1::StreamWritesResponse none;
  EXPECT_FALSE(stream_->Read(&none));
  EXPECT_TRUE(stream_->Finish().ok());
  EXPECT_TRUE(Found("orders", "a"));
  EXPECT_FALSE(Found("orders", "bad"));
}

TEST_F(WriteStreamTest, OperationsOfOneRequestAreAppliedInOrderWithOneResultEach) {
  v1::StreamWritesRequest request;
  AddPut("orders", "a", 10, &request);
  AddPut("orders", "b", 0, &request);
  AddPut("orders", "a", 30, &request);
  ASSERT_TRUE(stream_->Write(request));
  ASSERT_TRUE(stream_->Write(v1::StreamWritesRequest()));
  ASSERT_TRUE(stream_->WritesDone());

  const v1::StreamWritesResponse response = Read();
  ASSERT_EQ(response.results_size(), 3);
  EXPECT_EQ(response.results(0).put_members().results(0).outcome(), v1::PUT_OUTCOME_CREATED);
  EXPECT_EQ(response.results(1).code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(response.results(1).message(), StartsWith("members[0].ttl: "));
  EXPECT_EQ(response.results(2).put_members().results(0).outcome(), v1::PUT_OUTCOME_REPLACED);
  EXPECT_EQ(response.results(2).put_members().results(0).expire_time().seconds(),
            absl::ToUnixSeconds(StartTime() + absl::Seconds(30)));
  EXPECT_EQ(Read().results_size(), 0);
  EXPECT_TRUE(stream_->Finish().ok());
  EXPECT_FALSE(Found("orders", "b"));
}

TEST_F(WriteStreamTest, ManyMoreOperationsThanTheServerReadsAheadAreAllAnsweredInOrder) {
  constexpr int kOps = 1000;
  for (int i = 0; i < kOps; ++i) {
    ASSERT_TRUE(stream_->Write(Put(absl::StrCat("c", i % 7), absl::StrCat("k", i), 60)));
  }
  ASSERT_TRUE(stream_->WritesDone());
  for (int i = 0; i < kOps; ++i) {
    const v1::WriteOperationResult response = Only(Read());
    ASSERT_EQ(response.code(), 0) << response.message();
    ASSERT_EQ(response.put_members().results(0).key(), absl::StrCat("k", i));
  }
  EXPECT_TRUE(stream_->Finish().ok());
}

// A request that is not a StreamWritesRequest (here a key that is not UTF-8)
// ends the stream INVALID_ARGUMENT saying what is wrong, after the requests
// read before it are answered; nothing after it is applied.
TEST_F(WriteStreamTest, AMalformedRequestEndsTheStreamInvalidArgumentNamingTheField) {
  std::shared_ptr<grpc::Channel> channel = server_.NewChannel();
  grpc::ClientContext context;
  GuardDeadline(&context);
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> raw(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel.get(),
          grpc::internal::RpcMethod("/lapse.v1.LapseService/StreamWrites",
                                    grpc::internal::RpcMethod::BIDI_STREAMING),
          &context));
  auto write = [&](const std::string& bytes) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer buffer(&slice, 1);
    return raw->Write(buffer);
  };
  ASSERT_TRUE(write(Put("orders", "a", 10).SerializeAsString()));
  // operations[0].put_members.members[0].key = "\xc3\x28"
  ASSERT_TRUE(write(std::string("\x0a\x08\x0a\x06\x12\x04\x0a\x02\xc3\x28", 10)));
  // Fails when the server has already ended the stream; never applied either way.
  write(Put("orders", "after", 10).SerializeAsString());
  raw->WritesDone();

  grpc::ByteBuffer answer;
  ASSERT_TRUE(raw->Read(&answer));
  v1::StreamWritesResponse response;
  ASSERT_TRUE(
      grpc::SerializationTraits<v1::StreamWritesResponse>::Deserialize(&answer, &response).ok());
  EXPECT_EQ(Only(response).code(), 0);
  EXPECT_FALSE(raw->Read(&answer));
  const grpc::Status status = raw->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(),
              StartsWith("request: not a valid lapse.v1.StreamWritesRequest: "));
  EXPECT_THAT(status.error_message(),
              HasSubstr("field lapse.v1.MemberWrite.key is not valid UTF-8"));
  EXPECT_TRUE(Found("orders", "a"));
  EXPECT_FALSE(Found("orders", "after"));
}

TEST_F(WriteStreamTest, ShutdownEndsAnOpenStreamUnavailable) {
  ASSERT_TRUE(stream_->Write(Put("orders", "a", 10)));
  EXPECT_EQ(Only(Read()).code(), 0);
  server_.server().Shutdown(absl::Seconds(30));
  v1::StreamWritesResponse none;
  EXPECT_FALSE(stream_->Read(&none));
  EXPECT_EQ(stream_->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

// One request's puts are applied one after another and written to the log
// together, in one write: under everysec a put's own thread would otherwise
// write each as it is applied.
TEST(WriteStreamDurableTest, TheOperationsOfOneRequestShareOneLogWrite) {
  TempDir dir;
  DiskFault disk;
  ServerOptions options = TestOptions();
  options.store.data_dir = dir.path();
  options.store.fsync = FsyncPolicy::kEverySecond;
  options.store.disk_fault_for_testing = disk.Hook();
  TestServer server(options);
  // Writes what the server logged at start-up, so that only the request's
  // writes are counted below.
  v1::PutMembersRequest first;
  first.set_collection("orders");
  first.add_members()->set_key("first");
  CallOk(server.stub(), &v1::LapseService::Stub::PutMembers, first);
  const int writes = disk.calls(DiskOp::kWrite);

  grpc::ClientContext context;
  GuardDeadline(&context);
  std::unique_ptr<Stream> stream = server.stub().StreamWrites(&context);
  constexpr int kPuts = 16;
  v1::StreamWritesRequest request;
  for (int i = 0; i < kPuts; ++i) AddPut("orders", absl::StrCat("k", i), 60, &request);
  ASSERT_TRUE(stream->Write(request));
  v1::StreamWritesResponse response;
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_EQ(response.results_size(), kPuts);
  for (int i = 0; i < kPuts; ++i) {
    EXPECT_EQ(response.results(i).code(), 0) << response.results(i).message();
    EXPECT_EQ(response.results(i).put_members().results(0).key(), absl::StrCat("k", i));
  }
  EXPECT_EQ(disk.calls(DiskOp::kWrite), writes + 1);
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());
}

// A stream to a durable server whose log writes can be held: a put is
// answered once its write is let go, from the log's flusher thread.
class WriteStreamHeldStoreTest : public ::testing::Test {
 protected:
  WriteStreamHeldStoreTest() : server_(Options(dir_, &disk_)) {
    GuardDeadline(&context_);
    stream_ = server_.stub().StreamWrites(&context_);
  }
  ~WriteStreamHeldStoreTest() override { disk_.Release(); }

  static ServerOptions Options(const TempDir& dir, DiskFault* disk) {
    ServerOptions options = TestOptions();
    options.store.data_dir = dir.path();
    options.store.fsync = FsyncPolicy::kAlways;
    options.store.disk_fault_for_testing = disk->Hook();
    return options;
  }

  // Sends a put of `key` and waits until the log is writing it, held. A put
  // answered first makes sure the write waited for is this put's: the log
  // writes in order, and the server may write on its own just after it
  // starts (a write counted then, while this stream was not yet open on the
  // server, failed 1 in ~1200 runs under load: the shutdown found no stream).
  void SendHeldPut(const std::string& key) {
    ASSERT_TRUE(stream_->Write(Put("orders", key + ".before", 60)));
    v1::StreamWritesResponse before;
    ASSERT_TRUE(stream_->Read(&before));
    const int writes = disk_.calls(DiskOp::kWrite);
    disk_.Hold({DiskOp::kWrite});
    ASSERT_TRUE(stream_->Write(Put("orders", key, 60)));
    ASSERT_TRUE(disk_.WaitForCalls(DiskOp::kWrite, writes + 1));
  }

  bool Found(const std::string& key) {
    const v1::GetMembersResponse got = CallOk(server_.stub(), &v1::LapseService::Stub::GetMembers,
                                              KeysRequest<v1::GetMembersRequest>("orders", {key}));
    return got.results_size() == 1 && got.results(0).found();
  }

  TempDir dir_;
  DiskFault disk_;
  TestServer server_;
  grpc::ClientContext context_;
  std::unique_ptr<Stream> stream_;
};

TEST_F(WriteStreamHeldStoreTest, RequestsReadWhileTheStoreHoldsAnAnswerAreAnsweredInOrderAfterIt) {
  SendHeldPut("a");
  ASSERT_TRUE(stream_->Write(Put("orders", "b", 60)));
  ASSERT_TRUE(stream_->Write(Put("orders", "c", 60)));
  ASSERT_TRUE(stream_->WritesDone());
  disk_.Release();
  for (const char* key : {"a", "b", "c"}) {
    v1::StreamWritesResponse response;
    ASSERT_TRUE(stream_->Read(&response));
    ASSERT_EQ(response.results_size(), 1);
    EXPECT_EQ(response.results(0).code(), 0) << response.results(0).message();
    EXPECT_EQ(response.results(0).put_members().results(0).key(), key);
  }
  EXPECT_TRUE(stream_->Finish().ok());
}

TEST_F(WriteStreamHeldStoreTest, AStreamCancelledWhileTheStoreHoldsAnAnswerEndsOnceItAnswers) {
  SendHeldPut("a");
  context_.TryCancel();
  EXPECT_EQ(stream_->Finish().error_code(), grpc::StatusCode::CANCELLED);
  disk_.Release();
  // Applied before the cancellation: the put stands.
  EXPECT_TRUE(Found("a"));
  // Nothing of the stream is left behind to hold the shutdown up.
  server_.server().Shutdown(absl::ZeroDuration());
}

TEST_F(WriteStreamHeldStoreTest, ShutdownWhileTheStoreHoldsAnAnswerAnswersItThenEndsUnavailable) {
  SendHeldPut("a");
  std::thread shutdown([this] { server_.server().Shutdown(kPatience); });
  // Draining has begun once a new call is refused.
  grpc::Status refused;
  do {
    grpc::ClientContext context;
    GuardDeadline(&context);
    v1::GetMembersResponse got;
    refused = server_.stub().GetMembers(&context,
                                        KeysRequest<v1::GetMembersRequest>("orders", {"a"}), &got);
  } while (refused.error_code() != grpc::StatusCode::UNAVAILABLE);
  disk_.Release();
  v1::StreamWritesResponse answer;
  ASSERT_TRUE(stream_->Read(&answer));
  ASSERT_EQ(answer.results_size(), 1);
  EXPECT_EQ(answer.results(0).code(), 0) << answer.results(0).message();
  EXPECT_FALSE(stream_->Read(&answer));
  EXPECT_EQ(stream_->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  shutdown.join();
}

}  // namespace
}  // namespace lapse::testing
