// lapsectl consume: takes a consumer group's events as one named consumer
// over the Consume stream (lapse::client::Consumer), prints them and
// acknowledges each printed one on the stream, until a stop signal or --max;
// its flags and help beside the function that runs it.
#include <signal.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/lapsectl/cli_args.h"
#include "client/lapsectl/cli_output.h"
#include "client/lapsectl/command.h"
#include "lapse/client.h"
#include "lapse/consumer.h"

namespace lapse::cli {
namespace {

constexpr char kCommand[] = "consume";
// How long one Next waits for a delivery: also how soon a stop signal is
// noticed while the group is idle.
constexpr absl::Duration kNextWait = absl::Seconds(1);
// Deliveries in flight at most: the Consume stream's window.
constexpr uint64_t kMaxInFlight = 100;

volatile std::sig_atomic_t g_stop = 0;

void StopConsuming(int) { g_stop = 1; }

int RunConsume(const Invocation& in) {
  const ParsedArgs& args = in.args;
  const std::optional<std::string> group = args.Value("group");
  const std::optional<std::string> consumer = args.Value("consumer");
  if (!group.has_value() || !consumer.has_value()) {
    return UsageError(kCommand, "--group and --consumer are required");
  }
  uint64_t max = UINT64_MAX;
  if (const std::optional<std::string> text = args.Value("max")) {
    absl::StatusOr<uint64_t> n = ParseNumberFlag("max", *text, 1, UINT64_MAX);
    if (!n.ok()) return UsageError(kCommand, n.status().message());
    max = *n;
  }
  const bool ack = !args.Has("no-ack");
  const bool values = args.Has("values");

  struct sigaction action = {};
  action.sa_handler = StopConsuming;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  std::unique_ptr<client::Client> client = in.NewClient();
  client::ConsumerOptions options;
  options.group = *group;
  options.consumer = *consumer;
  // No more in flight than will be printed: the rest stay with the group.
  options.max_in_flight = static_cast<uint32_t>(std::min(kMaxInFlight, max));
  client::Consumer stream(*client, options);
  std::fprintf(stderr, "%s: consuming group %s as %s; stop with Ctrl-C\n", kProgram,
               DisplayValue(*group).c_str(), DisplayValue(*consumer).c_str());
  if (!in.json) {
    WriteStdout(EventHeader(values));
    std::fflush(stdout);
  }
  uint64_t printed = 0;
  uint64_t refused = 0;
  int exit_code = kOk;
  while (g_stop == 0 && printed < max) {
    absl::StatusOr<client::Delivery> delivery = stream.Next(kNextWait);
    if (absl::IsDeadlineExceeded(delivery.status())) continue;
    if (absl::IsDataLoss(delivery.status())) {
      std::fprintf(stderr, "%s %s: %s\n", kProgram, kCommand,
                   std::string(delivery.status().message()).c_str());
      continue;
    }
    if (!delivery.ok()) {
      exit_code = Fail(kCommand, delivery.status());
      break;
    }
    WriteStdout(EventLine(delivery->event, in.json, values));
    std::fflush(stdout);
    ++printed;
    if (!ack) continue;
    const absl::Status acked = stream.Ack(*delivery);
    if (absl::IsFailedPrecondition(acked)) {
      // The lease was lost: the event may be handled twice.
      ++refused;
      std::fprintf(stderr, "%s %s: event %llu not acknowledged (%s): it may be handled twice\n",
                   kProgram, kCommand, static_cast<unsigned long long>(delivery->event.sequence),
                   std::string(acked.message()).c_str());
    } else if (!acked.ok()) {
      exit_code = Fail(kCommand, acked);
      break;
    }
  }
  // Sends the acks owed and releases what was received and not printed.
  stream.Stop();
  std::fprintf(stderr, "%s: received %llu event%s%s\n", kProgram,
               static_cast<unsigned long long>(printed), printed == 1 ? "" : "s",
               ack ? absl::StrCat(", acknowledged ", printed - refused).c_str() : "");
  if (exit_code == kOk && refused > 0) return kUnmet;
  return exit_code;
}

}  // namespace

Command ConsumeCommand() {
  return {{"consume",
           "",
           "Take a consumer group's events as one consumer and acknowledge them (Consume)",
           "Prints each event as watch does and acknowledges it once printed, until Ctrl-C\n"
           "(SIGINT), SIGTERM or --max events; then prints on stderr how many arrived and\n"
           "exits 0. With --no-ack the events stay leased until the group's visibility\n"
           "timeout, then go to another consumer. A consumer is known by its name: run it\n"
           "again with the same --consumer to keep its leases. Exit status 1 when the group\n"
           "does not exist or an ack was refused (the lease was lost: that event may be\n"
           "handled twice), 2 on another error.\n",
           {{"group", "NAME", "The consumer group (required)"},
            {"consumer", "NAME", "This consumer's name (required)"},
            {"max", "N", "Stop after N events"},
            {"no-ack", "", "Do not acknowledge the events"},
            {"values", "", "Print member values (the group must carry them)"}},
           0,
           0},
          &RunConsume};
}

}  // namespace lapse::cli
