#include "testing/lapsed_process.h"

#include <signal.h>

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

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

// The number N in "(<label> N)" in `line`; 0 if there is none.
int PortIn(const std::string& line, absl::string_view label) {
  const std::string opening = absl::StrCat("(", label, " ");
  const size_t at = line.find(opening);
  if (at == std::string::npos) return 0;
  const size_t start = at + opening.size();
  int port = 0;
  if (!absl::SimpleAtoi(line.substr(start, line.find(')', start) - start), &port)) return 0;
  return port;
}

}  // namespace

LapsedProcess::LapsedProcess(const std::string& path, std::vector<std::string> flags, int port,
                             int open_file_limit)
    : process_(open_file_limit > 0 ? kPrlimit : path,
               Arguments(path, WithTestFlags(std::move(flags), port), open_file_limit)) {
  start_line_ = process_.WaitForLine(ChildProcess::kStdout, "listening on");
  port_ = PortIn(start_line_, "port");
}

std::string LapsedProcess::address() const { return absl::StrCat("127.0.0.1:", port_); }

std::unique_ptr<v1::LapseService::Stub> LapsedProcess::NewStub() const {
  return v1::LapseService::NewStub(
      grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
}

int LapsedProcess::metrics_port() const { return PortIn(start_line_, "metrics port"); }

int LapsedProcess::Stop() {
  process_.Signal(SIGTERM);
  return process_.Wait().exit_code;
}

}  // namespace lapse::testing
