// The real lapsed binary: starts on a free port, serves, and exits 0 on
// SIGTERM; refuses nonsense flags with exit status 2.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "server/storage/embedded_store.h"
#include "server/storage/files.h"
#include "server/storage/snapshot.h"
#include "server/storage/wal.h"
#include "testing/lapsed_process.h"
#include "testing/temp_dir.h"
#include "testing/test_server.h"

namespace lapse::testing {
namespace {

using ::testing::HasSubstr;

TEST(LapsedTest, ServesOnAFreePortAndExitsCleanlyOnSigterm) {
  // A short grace: an idle client connection that this process does not poll
  // would otherwise hold up the server's shutdown for the whole grace period.
  LapsedProcess lapsed(LAPSED_PATH, {"--shards=2", "--shutdown_grace=500ms"});
  ASSERT_TRUE(lapsed.spawned());
  ASSERT_GT(lapsed.port(), 0) << lapsed.Wait().err;
  const std::string& line = lapsed.start_line();
  EXPECT_THAT(line, HasSubstr("memory-only"));
  EXPECT_THAT(line, HasSubstr(lapsed.address()));

  std::unique_ptr<v1::LapseService::Stub> stub = v1::LapseService::NewStub(
      grpc::CreateChannel(lapsed.address(), grpc::InsecureChannelCredentials()));
  v1::PutMembersRequest request;
  request.set_collection("smoke");
  v1::MemberWrite* write = request.add_members();
  write->set_key("k");
  write->mutable_ttl()->set_seconds(60);
  v1::PutMembersResponse response;
  const grpc::Status status = Call(*stub, &v1::LapseService::Stub::PutMembers, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.results(0).outcome(), v1::PUT_OUTCOME_CREATED);

  // An open watch stream is ended, with where to resume, before lapsed exits.
  Watcher watcher(*stub, AllEvents());
  lapsed.Signal(SIGTERM);
  const grpc::Status watch_status = watcher.WaitForEnd();
  EXPECT_EQ(watch_status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(watch_status.error_message(),
              HasSubstr("server shutting down; last delivered sequence"));
  EXPECT_EQ(lapsed.Wait().exit_code, 0);
}

TEST(LapsedTest, RefusesNonsenseFlagsWithExitStatus2) {
  for (const char* flag :
       {"--shards=0", "--max_page_size=0", "--heartbeat_interval=-1s", "--log_level=loud",
        "--default_page_size=5000", "--fsync=sometimes", "--wal_segment_bytes=10"}) {
    LapsedProcess lapsed(LAPSED_PATH, {flag});
    ASSERT_TRUE(lapsed.spawned());
    EXPECT_EQ(lapsed.Wait().exit_code, 2) << flag;
  }
}

TEST(LapsedTest, RefusesFlagsUnderWhichAnAnswerCouldNotFitInAMessage) {
  // 1000 echoed keys of 64 KiB do not fit in the default 16 MiB message.
  LapsedProcess lapsed(LAPSED_PATH, {"--max_key_bytes=65536"});
  ASSERT_TRUE(lapsed.spawned());
  ASSERT_EQ(lapsed.port(), 0) << "lapsed started";
  const ChildProcess::Result result = lapsed.Wait();
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--max_message_bytes=16777216 cannot hold an answer"));
  EXPECT_THAT(result.err, HasSubstr("max_members_per_request"));
}

// Puts one member through a fresh connection; the RPC's status.
grpc::Status PutOne(int port, const std::string& key) {
  std::unique_ptr<v1::LapseService::Stub> stub = v1::LapseService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  return PutPersistent(*stub, "durable", key);
}

TEST(LapsedTest, DurableServerNamesItsDirectoryAndLocksIt) {
  TempDir temp;
  ASSERT_FALSE(temp.path().empty());
  const std::string dir = absl::StrCat(temp.path(), "/store");
  const std::string link = absl::StrCat(temp.path(), "/link");
  ASSERT_TRUE(files::EnsureDir(dir).ok());
  ASSERT_EQ(::symlink(dir.c_str(), link.c_str()), 0);
  LapsedProcess first(
      LAPSED_PATH, {"--shutdown_grace=500ms", absl::StrCat("--data-dir=", dir), "--fsync=always"});
  ASSERT_GT(first.port(), 0) << first.Wait().err;
  EXPECT_THAT(first.start_line(), HasSubstr(absl::StrCat("durable in ", dir, " (fsync always)")));
  ASSERT_TRUE(PutOne(first.port(), "k").ok());

  // Neither deleting a lock file nor another path to the directory gets round
  // the lock.
  ASSERT_TRUE(files::Remove(absl::StrCat(dir, "/LOCK")).ok());
  for (const std::string& path : {dir, link}) {
    LapsedProcess second(LAPSED_PATH, {absl::StrCat("--data_dir=", path)});
    const ChildProcess::Result refused = second.Wait();
    EXPECT_EQ(refused.exit_code, 1) << "the directory is locked by the first server: " << path;
    EXPECT_THAT(refused.err, HasSubstr("in use"));
  }

  first.Signal(SIGTERM);
  EXPECT_EQ(first.Wait().exit_code, 0);
}

TEST(LapsedTest, AFirstLogSegmentThatCannotBeCreatedExitsWithStatus1AndAMessage) {
  TempDir temp;
  // A directory whose own path, and its lock's, fit in PATH_MAX but whose
  // log segment's path does not: creating the segment fails (ENAMETOOLONG),
  // for root too.
  std::string dir = temp.path();
  while (dir.size() < 4080) {
    dir += "/" + std::string(std::min<size_t>(200, 4080 - dir.size() - 1), 'd');
    ASSERT_TRUE(files::EnsureDir(dir).ok()) << dir.size();
  }
  LapsedProcess lapsed(LAPSED_PATH, {absl::StrCat("--data-dir=", dir)});
  ASSERT_TRUE(lapsed.spawned());
  const ChildProcess::Result result = lapsed.Wait();
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_THAT(result.err, HasSubstr(Wal::SegmentName(1)));
  EXPECT_THAT(result.err, HasSubstr("File name too long"));
}

TEST(LapsedTest, ADamagedSnapshotIsReportedAndPassedOverLosingNoWrite) {
  TempDir temp;
  const std::string& dir = temp.path();
  ASSERT_FALSE(dir.empty());
  const std::vector<std::string> flags = {"--shutdown_grace=500ms",
                                          absl::StrCat("--data-dir=", dir)};
  const std::vector<std::string> keys = {"k0", "k1", "k2"};
  {
    LapsedProcess lapsed(LAPSED_PATH, flags);
    ASSERT_GT(lapsed.port(), 0) << lapsed.Wait().err;
    for (const std::string& key : keys) ASSERT_TRUE(PutOne(lapsed.port(), key).ok());
    ASSERT_EQ(lapsed.Stop(), 0);
  }
  {
    absl::StatusOr<std::unique_ptr<EmbeddedStore>> store =
        EmbeddedStore::Open({.data_dir = dir}, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->durable()->TakeSnapshot().ok());
  }
  absl::StatusOr<std::vector<std::string>> names = files::List(dir);
  ASSERT_TRUE(names.ok());
  std::string snapshot;
  for (const std::string& name : *names) {
    uint64_t lsn;
    if (ParseSnapshotName(name, &lsn)) snapshot = name;
  }
  ASSERT_FALSE(snapshot.empty());
  absl::StatusOr<std::string> data = files::ReadAll(absl::StrCat(dir, "/", snapshot));
  ASSERT_TRUE(data.ok());
  std::string damaged = *data;
  damaged[damaged.size() / 2] ^= 0x40;
  ASSERT_TRUE(files::WriteAtomically(dir, snapshot, damaged).ok());

  LapsedProcess lapsed(LAPSED_PATH, flags);
  ASSERT_GT(lapsed.port(), 0) << lapsed.Wait().err;
  std::unique_ptr<v1::LapseService::Stub> stub = v1::LapseService::NewStub(
      grpc::CreateChannel(lapsed.address(), grpc::InsecureChannelCredentials()));
  v1::GetMembersResponse response;
  ASSERT_TRUE(Call(*stub, &v1::LapseService::Stub::GetMembers,
                   KeysRequest<v1::GetMembersRequest>("durable", keys), &response)
                  .ok());
  ASSERT_EQ(response.results_size(), 3);
  for (const v1::GetMemberResult& result : response.results()) {
    EXPECT_TRUE(result.found()) << result.member().key();
  }
  lapsed.Signal(SIGTERM);
  const ChildProcess::Result ended = lapsed.Wait();
  EXPECT_EQ(ended.exit_code, 0);
  EXPECT_THAT(ended.err, HasSubstr("DAMAGED"));
  EXPECT_THAT(ended.err, HasSubstr(snapshot));
}

TEST(LapsedTest, ADamagedLogRefusesToStartUnlessToldToTruncate) {
  TempDir temp;
  const std::string& dir = temp.path();
  ASSERT_FALSE(dir.empty());
  const std::vector<std::string> flags = {"--shutdown_grace=500ms",
                                          absl::StrCat("--data-dir=", dir)};
  {
    LapsedProcess lapsed(LAPSED_PATH, flags);
    ASSERT_GT(lapsed.port(), 0) << lapsed.Wait().err;
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(PutOne(lapsed.port(), absl::StrCat("k", i)).ok());
    ASSERT_EQ(lapsed.Stop(), 0);
  }
  // Damage the first segment in its middle.
  absl::StatusOr<std::vector<std::string>> names = files::List(dir);
  ASSERT_TRUE(names.ok());
  std::string segment;
  for (const std::string& name : *names) {
    uint64_t lsn;
    if (segment.empty() && Wal::ParseSegmentName(name, &lsn))
      segment = absl::StrCat(dir, "/", name);
  }
  absl::StatusOr<std::string> data = files::ReadAll(segment);
  ASSERT_TRUE(data.ok());
  ASSERT_GT(data->size(), 100u);
  std::string damaged = *data;
  damaged[damaged.size() / 3] ^= 0x40;
  ASSERT_TRUE(files::Remove(segment).ok());
  ASSERT_TRUE(files::WriteAtomically(dir, segment.substr(dir.size() + 1), damaged).ok());

  LapsedProcess refused(LAPSED_PATH, flags);
  EXPECT_EQ(refused.Wait().exit_code, 1);

  std::vector<std::string> anyway = flags;
  anyway.push_back("--wal_truncate_damaged");
  LapsedProcess started(LAPSED_PATH, anyway);
  ASSERT_GT(started.port(), 0) << started.Wait().err;
  EXPECT_TRUE(PutOne(started.port(), "after").ok());
}

}  // namespace
}  // namespace lapse::testing
