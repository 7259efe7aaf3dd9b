#include "server/accept_guard.h"

#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "gtest/gtest.h"
#include "server/base/log.h"

namespace lapse {
namespace {

// A loopback listener, clients connected to it (the kernel completes their
// handshakes into the listener's queue), and the process's open-file limit
// lowered to just above what is open; everything is put back afterwards.
class AcceptGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The refusal warnings are not what these tests check, and they would be
    // written with the descriptor table full, where UBSan's checks (which
    // need a descriptor) misreport.
    SetMinLogLevel(LogLevel::kError);
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved_limit_), 0);
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_GE(listener_, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    socklen_t length = sizeof(address);
    ASSERT_EQ(getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length), 0);
    address_ = address;
    ASSERT_EQ(listen(listener_, 16), 0);
  }

  void TearDown() override {
    for (int fd : fillers_) close(fd);
    for (int fd : clients_) close(fd);
    if (listener_ >= 0) close(listener_);
    setrlimit(RLIMIT_NOFILE, &saved_limit_);
    // The guard's bound follows the limit it was installed under.
    EXPECT_TRUE(InstallAcceptGuard(0).ok());
    SetMinLogLevel(LogLevel::kInfo);
  }

  // A client connected to the listener; -1 on failure.
  int Connect() {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, reinterpret_cast<const sockaddr*>(&address_), sizeof(address_)) != 0) {
      close(fd);
      return -1;
    }
    clients_.push_back(fd);
    return fd;
  }

  // Lowers the soft limit to `headroom` descriptors above the highest one
  // open now.
  void LowerLimit(int headroom) {
    const int probe = dup(0);
    ASSERT_GE(probe, 0);
    close(probe);
    rlimit lowered = saved_limit_;
    lowered.rlim_cur = static_cast<rlim_t>(probe + headroom);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  }

  // Opens descriptors until the table is full.
  void FillTheTable() {
    int fd;
    while ((fd = dup(0)) >= 0) fillers_.push_back(fd);
    ASSERT_EQ(errno, EMFILE);
  }

  void FreeTheTable() {
    for (int fd : fillers_) close(fd);
    fillers_.clear();
  }

  // Whether `client` learned that its connection was closed or reset.
  static bool WasRefused(int client) {
    char byte;
    const ssize_t n = recv(client, &byte, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE));
  }

  int Accept() { return accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC); }

  rlimit saved_limit_ = {};
  int listener_ = -1;
  sockaddr_in address_ = {};
  std::vector<int> clients_;
  std::vector<int> fillers_;
};

TEST_F(AcceptGuardTest, AFullDescriptorTableRefusesPendingConnectionsAndAsksToRetry) {
  LowerLimit(32);
  ASSERT_TRUE(InstallAcceptGuard(0).ok());
  const int first = Connect();
  const int second = Connect();
  ASSERT_GE(first, 0);
  ASSERT_GE(second, 0);
  FillTheTable();

  // gRPC re-arms its listener on EAGAIN; on EMFILE it would stop for good.
  EXPECT_EQ(Accept(), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_TRUE(WasRefused(first));
  EXPECT_TRUE(WasRefused(second));

  FreeTheTable();
  ASSERT_GE(Connect(), 0);
  const int accepted = Accept();
  EXPECT_GE(accepted, 0);
  if (accepted >= 0) close(accepted);
}

TEST_F(AcceptGuardTest, AConnectionThatWouldTakeAReservedDescriptorIsRefused) {
  LowerLimit(32);
  ASSERT_TRUE(InstallAcceptGuard(8).ok());
  const int client = Connect();
  ASSERT_GE(client, 0);
  FillTheTable();
  // Free two of the top eight: the lowest free descriptor is a reserved one.
  close(fillers_.back());
  fillers_.pop_back();
  close(fillers_.back());
  fillers_.pop_back();

  EXPECT_EQ(Accept(), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_TRUE(WasRefused(client));
}

TEST_F(AcceptGuardTest, ALimitWithNothingBeyondTheReserveIsRefused) {
  LowerLimit(4);
  rlimit limit;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  const absl::Status status = InstallAcceptGuard(static_cast<int>(limit.rlim_cur));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("--reserved_fds"), absl::string_view::npos);
}

TEST(RaiseFileLimitTest, RaisesTheSoftLimitToTheHardOne) {
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit lowered = saved;
  lowered.rlim_cur = saved.rlim_max / 2;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);

  absl::StatusOr<FileLimit> raised = RaiseFileLimit();
  rlimit now;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  setrlimit(RLIMIT_NOFILE, &saved);
  ASSERT_TRUE(raised.ok()) << raised.status();
  EXPECT_EQ(raised->before, lowered.rlim_cur);
  EXPECT_EQ(raised->after, saved.rlim_max);
  EXPECT_EQ(raised->hard, saved.rlim_max);
  EXPECT_EQ(now.rlim_cur, saved.rlim_max);
}

}  // namespace
}  // namespace lapse
