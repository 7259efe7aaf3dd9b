#include "testing/lapsed_process.h"

#include <signal.h>

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace lapse::testing {
namespace {

constexpr char kPrlimit[] = "/usr/bin/prlimit";

// lapsed's path and arguments, behind prlimit if there is a limit to set.
std::vector<std::string> Arguments(const std::string& path, std::vector<std::string> flags,
                                   int open_file_limit) {
  if (open_file_limit <= 0) return flags;
  std::vector<std::string> all = {absl::StrCat("--nofile=", open_file_limit), path};
  all.insert(all.end(), std::make_move_iterator(flags.begin()),
             std::make_move_iterator(flags.end()));
  return all;
}

std::vector<std::string> WithTestFlags(std::vector<std::string> flags, int port) {
  // First, so that the test's own flags win (the last occurrence of a flag
  // counts).
  std::vector<std::string> all = {absl::StrCat("--listen=127.0.0.1:", port), "--log_level=error",
                                  // Clients that tests leave connected must
                                  // not hold up a stop.
                                  "--shutdown_grace=200ms"};
  all.insert(all.end(), std::make_move_iterator(flags.begin()),
             std::make_move_iterator(flags.end()));
  return all;
}

}  // namespace

LapsedProcess::LapsedProcess(const std::string& path, std::vector<std::string> flags, int port,
                             int open_file_limit)
    : process_(open_file_limit > 0 ? kPrlimit : path,
               Arguments(path, WithTestFlags(std::move(flags), port), open_file_limit)) {
  start_line_ = process_.WaitForLine(ChildProcess::kStdout, "listening on");
  const size_t at = start_line_.find("(port ");
  if (at == std::string::npos) return;
  const size_t end = start_line_.find(')', at);
  if (!absl::SimpleAtoi(start_line_.substr(at + 6, end - at - 6), &port_)) port_ = 0;
}

std::string LapsedProcess::address() const { return absl::StrCat("127.0.0.1:", port_); }

int LapsedProcess::Stop() {
  process_.Signal(SIGTERM);
  return process_.Wait().exit_code;
}

}  // namespace lapse::testing
