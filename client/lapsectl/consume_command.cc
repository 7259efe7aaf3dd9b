// lapsectl consume: takes a consumer group's events as one named consumer,
// prints them and acknowledges each printed one, until a stop signal or
// --max; its flags and help beside the function that runs it.
#include <signal.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/lapsectl/cli_args.h"
#include "client/lapsectl/cli_output.h"
#include "client/lapsectl/command.h"
#include "lapse/client.h"

namespace lapse::cli {
namespace {

constexpr char kCommand[] = "consume";
// How long one Poll waits for an event: also how soon a stop signal is
// noticed while the group is idle.
constexpr absl::Duration kPollWait = absl::Seconds(1);
constexpr uint64_t kMaxBatch = 100;

volatile std::sig_atomic_t g_stop = 0;

void OnStopSignal(int) { g_stop = 1; }

// Tells on stderr about the acks the server refused: their events may be
// handled twice. Returns how many were refused.
uint64_t ReportRefusedAcks(const std::vector<client::LeaseResult>& results) {
  uint64_t refused = 0;
  for (const client::LeaseResult& result : results) {
    if (result.status.ok()) continue;
    ++refused;
    std::fprintf(stderr, "%s %s: event %llu not acknowledged (%s): it may be handled twice\n",
                 kProgram, kCommand, static_cast<unsigned long long>(result.sequence),
                 std::string(result.status.message()).c_str());
  }
  return refused;
}

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
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  std::unique_ptr<client::Client> client = in.NewClient();
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
    client::PollOptions poll;
    poll.max_events = static_cast<uint32_t>(std::min(kMaxBatch, max - printed));
    poll.wait = kPollWait;
    const absl::Time asked = absl::Now();
    absl::StatusOr<client::PollResult> result = client->Poll(*group, *consumer, poll);
    if (!result.ok()) {
      exit_code = Fail(kCommand, result.status());
      break;
    }
    if (result->lost_first_sequence != 0) {
      std::fprintf(stderr,
                   "%s %s: events %llu to %llu were discarded by the server's retention before "
                   "the group received them\n",
                   kProgram, kCommand, static_cast<unsigned long long>(result->lost_first_sequence),
                   static_cast<unsigned long long>(result->lost_last_sequence));
    }
    if (result->deliveries.empty()) {
      // A server that answers at once instead of waiting (one without the
      // long poll) is asked again after the wait, not in a busy loop.
      absl::SleepFor(kPollWait - (absl::Now() - asked));
      continue;
    }
    std::vector<client::LeaseRef> leases;
    for (const client::Delivery& delivery : result->deliveries) {
      WriteStdout(EventLine(delivery.event, in.json, values));
      leases.push_back({delivery.event.sequence, delivery.delivery_count});
    }
    std::fflush(stdout);
    printed += leases.size();
    if (!ack) continue;
    absl::StatusOr<std::vector<client::LeaseResult>> acked = client->Ack(*group, *consumer, leases);
    if (!acked.ok()) {
      exit_code = Fail(kCommand, acked.status());
      break;
    }
    refused += ReportRefusedAcks(*acked);
  }
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
           "Take a consumer group's events as one consumer and acknowledge them (Poll, Ack)",
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
