// lapsectl watch: streams expiry events until a stop signal, with its flags
// and help beside the function that runs it.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/lapsectl/cli_args.h"
#include "client/lapsectl/cli_output.h"
#include "client/lapsectl/command.h"
#include "lapse/client.h"

namespace lapse::cli {
namespace {

using client::Client;

// Written by the stop signals' handler (and by the watch's error handler) to
// wake the main thread; a pipe because write() is async-signal-safe.
int g_wake_fd = -1;

void OnStopSignal(int) {
  const char byte = 's';
  if (write(g_wake_fd, &byte, 1) < 0) {
    // Nothing to do: the pipe already holds a wake-up.
  }
}

int RunWatch(const Invocation& in) {
  const ParsedArgs& args = in.args;
  client::WatchOptions options;
  if (absl::Status filter = FilterFlags(args, &options.collections, &options.collection_prefix);
      !filter.ok()) {
    return UsageError("watch", filter.message());
  }
  options.include_values = args.Has("values");
  if (args.Has("from") + args.Has("oldest") + args.Has("resume-token") > 1) {
    return UsageError("watch", "use at most one of --from, --oldest and --resume-token");
  }
  std::string start = "new events";
  if (const std::optional<std::string> text = args.Value("resume-token")) {
    absl::StatusOr<std::string> token = ParseHexFlag("resume-token", *text);
    if (!token.ok()) return UsageError("watch", token.status().message());
    options.start = client::StartPosition::kAfterToken;
    options.resume_token = *std::move(token);
    start = "the resume token";
  } else if (const std::optional<std::string> from = args.Value("from")) {
    absl::StatusOr<uint64_t> sequence = ParseNumberFlag("from", *from, 0, UINT64_MAX);
    if (!sequence.ok()) return UsageError("watch", sequence.status().message());
    options.start = client::StartPosition::kAfterSequence;
    options.after_sequence = *sequence;
    start = absl::StrCat("after sequence ", *sequence);
  } else if (args.Has("oldest")) {
    options.start = client::StartPosition::kOldest;
    start = "the oldest retained event";
  }

  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    return Fail("watch", absl::InternalError(std::strerror(errno)));
  }
  g_wake_fd = wake[1];
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  // The handlers run on the subscription's thread, one at a time; the main
  // thread reads what they wrote only after Cancel() has joined that thread.
  uint64_t events = 0;
  int connections = 0;
  absl::Status error;
  const bool json = in.json;
  const bool values = options.include_values;
  const std::string address = in.address;
  client::WatchHandlers handlers;
  handlers.on_event = [&events, json, values](const client::ExpiryEvent& event) {
    WriteStdout(EventLine(event, json, values));
    std::fflush(stdout);
    ++events;
  };
  handlers.on_connected = [&connections, address, start] {
    if (connections++ == 0) {
      std::fprintf(stderr, "%s: watching %s from %s; stop with Ctrl-C\n", kProgram, address.c_str(),
                   start.c_str());
    } else {
      std::fprintf(stderr, "%s: reconnected\n", kProgram);
    }
  };
  handlers.on_reconnecting = [](const absl::Status& status) {
    std::fprintf(stderr, "%s: stream interrupted (%s); reconnecting\n", kProgram,
                 status.ToString().c_str());
  };
  handlers.on_error = [&error](const absl::Status& status) {
    error = status;
    OnStopSignal(0);
  };

  if (!json) {
    WriteStdout(EventHeader(values));
    std::fflush(stdout);
  }
  std::unique_ptr<Client> client = in.NewClient();
  absl::StatusOr<std::unique_ptr<client::Subscription>> subscription =
      client->Watch(options, std::move(handlers));
  if (!subscription.ok()) return Fail("watch", subscription.status());
  char byte;
  while (read(wake[0], &byte, 1) < 0 && errno == EINTR) {
  }
  (*subscription)->Cancel();

  const uint64_t position = (*subscription)->position();
  const std::string token = (*subscription)->resume_token();
  std::fprintf(stderr, "%s: received %llu event%s", kProgram,
               static_cast<unsigned long long>(events), events == 1 ? "" : "s");
  if (!token.empty()) {
    std::fprintf(stderr, "; resume with --resume-token=%s", absl::BytesToHexString(token).c_str());
  }
  if (position != 0) {
    std::fprintf(stderr, "%s --from=%llu", token.empty() ? "; resume with" : " (or",
                 static_cast<unsigned long long>(position));
    if (!token.empty()) std::fputc(')', stderr);
  }
  std::fputc('\n', stderr);
  if (!error.ok()) return Fail("watch", error);
  return kOk;
}

}  // namespace

Command WatchCommand() {
  return {{"watch",
           "",
           "Stream expiry events (WatchExpirations)",
           "Streams until Ctrl-C (SIGINT) or SIGTERM, then prints on stderr how many "
           "events\narrived and the --resume-token (and --from) that resumes after them, "
           "and exits 0.\nReconnects by itself after a broken connection or a server "
           "restart, with no gap\nand no duplicate; exits 2 if the server no longer holds "
           "events it needs, or\nserves another store than the token's (OUT_OF_RANGE). "
           "With --json each event is\na line (sequence as a string), flushed at once.\n",
           {{"collections", "A,B", "Only these collections"},
            {"prefix", "PREFIX", "Only collections starting with PREFIX"},
            {"values", "", "Include member values"},
            {"from", "SEQUENCE", "Start right after SEQUENCE (resume)"},
            {"resume-token", "HEX", "Start right after the token a watch printed (resume)"},
            {"oldest", "", "Start from the oldest event the server holds"}},
           0,
           0},
          &RunWatch};
}

}  // namespace lapse::cli
