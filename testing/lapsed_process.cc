#include "testing/lapsed_process.h"

#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace lapse::client::testing {
namespace {

std::vector<std::string> WithTestFlags(std::vector<std::string> flags,
                                       int port) {
  flags.push_back(absl::StrCat("--listen=127.0.0.1:", port));
  flags.push_back("--log_level=error");
  // Clients that tests leave connected must not hold up a stop.
  flags.push_back("--shutdown_grace=200ms");
  return flags;
}

}  // namespace

LapsedProcess::LapsedProcess(const std::string& path,
                             std::vector<std::string> flags, int port)
    : process_(path, WithTestFlags(std::move(flags), port)) {
  const std::string line =
      process_.WaitForLine(ChildProcess::kStdout, "listening on");
  const size_t at = line.find("(port ");
  if (at == std::string::npos) return;
  const size_t end = line.find(')', at);
  if (!absl::SimpleAtoi(line.substr(at + 6, end - at - 6), &port_)) port_ = 0;
}

std::string LapsedProcess::address() const {
  return absl::StrCat("127.0.0.1:", port_);
}

int LapsedProcess::Stop() {
  process_.Signal(SIGTERM);
  return process_.Wait().exit_code;
}

TempDir::TempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string pattern =
      absl::StrCat(base != nullptr ? base : "/tmp", "/lapse_client_XXXXXX");
  if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

}  // namespace lapse::client::testing
