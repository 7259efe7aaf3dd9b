// The real lapsed binary: starts on a free port, serves, and exits 0 on
// SIGTERM; refuses nonsense flags with exit status 2.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/integration/test_server.h"

extern char** environ;

namespace lapse::testing {
namespace {

using ::testing::HasSubstr;

// A child process running lapsed with its stdout on a pipe.
class Lapsed {
 public:
  explicit Lapsed(const std::vector<std::string>& flags) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) std::abort();
    stdout_ = fds[0];
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    std::vector<std::string> args = {LAPSED_PATH};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    spawned_ = posix_spawn(&pid_, LAPSED_PATH, &actions, nullptr, argv.data(),
                           environ) == 0;
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
  }

  ~Lapsed() {
    if (spawned_ && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(stdout_);
  }

  bool spawned() const { return spawned_; }

  // The first line lapsed prints, or "" if none comes within kPatience.
  std::string ReadLine() {
    std::string line;
    const absl::Time deadline = absl::Now() + kPatience;
    while (line.empty() || line.back() != '\n') {
      pollfd fd = {stdout_, POLLIN, 0};
      const int timeout_ms =
          static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
      if (timeout_ms <= 0 || poll(&fd, 1, timeout_ms) <= 0) return "";
      char c;
      if (read(stdout_, &c, 1) != 1) return "";
      line.push_back(c);
    }
    return line;
  }

  void Signal(int signal_number) { kill(pid_, signal_number); }

  // Waits for the process to exit; its wait status, or -1 on timeout.
  int Wait() {
    absl::Notification exited;
    int status = -1;
    std::thread waiter([&] {
      int s;
      if (waitpid(pid_, &s, 0) == pid_) status = s;
      exited.Notify();
    });
    if (!exited.WaitForNotificationWithTimeout(kPatience)) kill(pid_, SIGKILL);
    waiter.join();
    reaped_ = true;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int stdout_ = -1;
  bool spawned_ = false;
  bool reaped_ = false;
};

TEST(LapsedTest, ServesOnAFreePortAndExitsCleanlyOnSigterm) {
  // A short grace: an idle client connection that this process does not poll
  // would otherwise hold up the server's shutdown for the whole grace period.
  Lapsed lapsed({"--listen=127.0.0.1:0", "--shards=2", "--log_level=error",
                 "--shutdown_grace=500ms"});
  ASSERT_TRUE(lapsed.spawned());
  const std::string line = lapsed.ReadLine();
  EXPECT_THAT(line, HasSubstr("memory-only"));
  const size_t at = line.find("(port ");
  ASSERT_NE(at, std::string::npos) << line;
  const size_t end = line.find(')', at);
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(line.substr(at + 6, end - at - 6), &port)) << line;
  ASSERT_GT(port, 0);
  EXPECT_THAT(line, HasSubstr(absl::StrCat("127.0.0.1:", port)));

  std::unique_ptr<v1::LapseService::Stub> stub =
      v1::LapseService::NewStub(grpc::CreateChannel(
          absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  v1::PutMembersRequest request;
  request.set_collection("smoke");
  v1::MemberWrite* write = request.add_members();
  write->set_key("k");
  write->mutable_ttl()->set_seconds(60);
  grpc::ClientContext context;
  GuardDeadline(&context);
  v1::PutMembersResponse response;
  const grpc::Status status = stub->PutMembers(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.results(0).outcome(), v1::PUT_OUTCOME_CREATED);

  // An open watch stream is ended, with where to resume, before lapsed exits.
  Watcher watcher(*stub, AllEvents());
  lapsed.Signal(SIGTERM);
  const grpc::Status watch_status = watcher.WaitForEnd();
  EXPECT_EQ(watch_status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(watch_status.error_message(),
              HasSubstr("server shutting down; last delivered sequence"));
  const int wait_status = lapsed.Wait();
  ASSERT_TRUE(WIFEXITED(wait_status)) << wait_status;
  EXPECT_EQ(WEXITSTATUS(wait_status), 0);
}

TEST(LapsedTest, RefusesNonsenseFlagsWithExitStatus2) {
  for (const char* flag :
       {"--shards=0", "--max_page_size=0", "--heartbeat_interval=-1s",
        "--log_level=loud", "--default_page_size=5000"}) {
    Lapsed lapsed({"--listen=127.0.0.1:0", flag});
    ASSERT_TRUE(lapsed.spawned());
    const int wait_status = lapsed.Wait();
    ASSERT_TRUE(WIFEXITED(wait_status)) << flag;
    EXPECT_EQ(WEXITSTATUS(wait_status), 2) << flag;
  }
}

}  // namespace
}  // namespace lapse::testing
