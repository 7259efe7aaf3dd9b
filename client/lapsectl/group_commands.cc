// lapsectl's consumer-group commands: group create, ls, info, rm and reset,
// each with its flags and help beside the function that runs it.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/lapsectl/cli_args.h"
#include "client/lapsectl/cli_output.h"
#include "client/lapsectl/command.h"
#include "lapse/client.h"

namespace lapse::cli {
namespace {

using client::Client;
using client::ConsumerGroupInfo;

// "a,b", "prefix*" or "*" (every collection).
std::string FilterText(const ConsumerGroupInfo& group) {
  if (!group.collections.empty()) return absl::StrJoin(group.collections, ",");
  return absl::StrCat(group.collection_prefix, "*");
}

const std::vector<std::string>& GroupHeader() {
  static const std::vector<std::string>* const header = new std::vector<std::string>{
      "NAME",      "FILTER", "VISIBILITY", "MAX_DELIVERIES", "MAX_UNACKED",
      "POSITION",  "LAG",    "PENDING",    "REDELIVERY",     "DEAD_LETTERED",
      "DELIVERED", "ACKED",  "LOST",       "CONSUMERS"};
  return *header;
}

void AddGroupRow(const ConsumerGroupInfo& group, Answer& answer) {
  const uint64_t consumers = group.consumers.size();
  answer.Row(
      {DisplayValue(group.name), DisplayValue(FilterText(group)),
       absl::FormatDuration(group.visibility_timeout), absl::StrCat(group.max_deliveries),
       absl::StrCat(group.max_unacked_per_consumer), absl::StrCat(group.position),
       absl::StrCat(group.lag), absl::StrCat(group.pending),
       absl::StrCat(group.awaiting_redelivery), absl::StrCat(group.dead_lettered),
       absl::StrCat(group.delivered_total), absl::StrCat(group.acked_total),
       absl::StrCat(group.lost_sequences_total), absl::StrCat(consumers)},
      JsonObject()
          .AddBytes("name", group.name)
          .AddBytes("collections", absl::StrJoin(group.collections, ","))
          .AddBytes("collection_prefix", group.collection_prefix)
          .Add("include_values", group.include_values)
          .Add("visibility_timeout_ms",
               static_cast<int64_t>(absl::ToInt64Milliseconds(group.visibility_timeout)))
          .Add("max_deliveries", static_cast<uint64_t>(group.max_deliveries))
          .Add("max_unacked_per_consumer", static_cast<uint64_t>(group.max_unacked_per_consumer))
          // Sequences exceed 2^53, so they are strings, as in protobuf's JSON.
          .Add("position", absl::StrCat(group.position))
          .Add("lag", group.lag)
          .Add("pending", group.pending)
          .Add("awaiting_redelivery", group.awaiting_redelivery)
          .Add("dead_lettered", group.dead_lettered)
          .Add("delivered_total", group.delivered_total)
          .Add("acked_total", group.acked_total)
          .Add("lost_sequences_total", group.lost_sequences_total)
          .Add("consumer_count", consumers));
}

int PrintGroup(const absl::StatusOr<ConsumerGroupInfo>& group, absl::string_view command,
               bool json) {
  if (!group.ok()) return Fail(command, group.status());
  Answer answer(json, GroupHeader());
  AddGroupRow(*group, answer);
  answer.Print();
  return kOk;
}

// --from=SEQUENCE or --oldest; neither: new events only.
absl::Status StartFlags(const ParsedArgs& args, client::StartPosition* start,
                        uint64_t* after_sequence) {
  if (args.Has("from") && args.Has("oldest")) {
    return absl::InvalidArgumentError("use at most one of --from and --oldest");
  }
  *start = client::StartPosition::kNew;
  if (const std::optional<std::string> from = args.Value("from")) {
    absl::StatusOr<uint64_t> sequence = ParseNumberFlag("from", *from, 0, UINT64_MAX);
    if (!sequence.ok()) return sequence.status();
    *start = client::StartPosition::kAfterSequence;
    *after_sequence = *sequence;
  } else if (args.Has("oldest")) {
    *start = client::StartPosition::kOldest;
  }
  return absl::OkStatus();
}

const std::vector<FlagSpec>& StartFlagSpecs() {
  static const std::vector<FlagSpec>* const flags =
      new std::vector<FlagSpec>{{"from", "SEQUENCE", "Start right after SEQUENCE"},
                                {"oldest", "", "Start from the oldest event the server holds"}};
  return *flags;
}

absl::StatusOr<uint32_t> CountFlag(const ParsedArgs& args, absl::string_view flag) {
  const std::optional<std::string> text = args.Value(flag);
  if (!text.has_value()) return 0;
  absl::StatusOr<uint64_t> n = ParseNumberFlag(flag, *text, 1, UINT32_MAX);
  if (!n.ok()) return n.status();
  return static_cast<uint32_t>(*n);
}

int RunGroupCreate(const Invocation& in) {
  constexpr char kCommand[] = "group create";
  const ParsedArgs& args = in.args;
  client::ConsumerGroupOptions options;
  options.name = in.positional()[0];
  if (absl::Status filter = FilterFlags(args, &options.collections, &options.collection_prefix);
      !filter.ok()) {
    return UsageError(kCommand, filter.message());
  }
  options.include_values = args.Has("values");
  if (absl::Status start = StartFlags(args, &options.start, &options.after_sequence); !start.ok()) {
    return UsageError(kCommand, start.message());
  }
  if (const std::optional<std::string> text = args.Value("visibility-timeout")) {
    absl::StatusOr<absl::Duration> timeout = ParseDurationFlag("visibility-timeout", *text);
    if (!timeout.ok()) return UsageError(kCommand, timeout.status().message());
    options.visibility_timeout = *timeout;
  }
  absl::StatusOr<uint32_t> max_deliveries = CountFlag(args, "max-deliveries");
  if (!max_deliveries.ok()) return UsageError(kCommand, max_deliveries.status().message());
  options.max_deliveries = *max_deliveries;
  absl::StatusOr<uint32_t> max_unacked = CountFlag(args, "max-unacked");
  if (!max_unacked.ok()) return UsageError(kCommand, max_unacked.status().message());
  options.max_unacked_per_consumer = *max_unacked;
  return PrintGroup(in.NewClient()->CreateConsumerGroup(options), kCommand, in.json);
}

Command GroupCreateCommand() {
  std::vector<FlagSpec> flags = {
      {"collections", "A,B", "Only these collections"},
      {"prefix", "PREFIX", "Only collections starting with PREFIX"},
      {"values", "", "Carry member values in deliveries"},
      {"visibility-timeout", "DURATION",
       "How long a delivery stays leased to its consumer (server default 30s)"},
      {"max-deliveries", "N", "Deliveries before an event is dead-lettered (default 5)"},
      {"max-unacked", "N", "Events one consumer may hold unacknowledged (default 100)"}};
  flags.insert(flags.end(), StartFlagSpecs().begin(), StartFlagSpecs().end());
  return {{"group create", "NAME", "Create a consumer group (CreateConsumerGroup)",
           "Without --from or --oldest the group receives only events that expire from now "
           "on.\nExit status 2 when the name is taken (ALREADY_EXISTS).\n",
           std::move(flags), 1, 1},
          &RunGroupCreate};
}

int RunGroupList(const Invocation& in) {
  absl::StatusOr<Paging> paging = PagingFlags(in.args);
  if (!paging.ok()) return UsageError("group ls", paging.status().message());
  client::ListConsumerGroupsOptions options;
  options.page_size = paging->page_size;
  std::unique_ptr<Client> client = in.NewClient();
  Answer answer(in.json, GroupHeader());
  return ShowPages(
      "group ls", paging->limit, &options.page_token, &client::ConsumerGroupPage::groups,
      [&] { return client->ListConsumerGroups(options); },
      [&](const ConsumerGroupInfo& group) { AddGroupRow(group, answer); }, answer);
}

Command GroupListCommand() {
  return {{"group ls",
           "",
           "List consumer groups (ListConsumerGroups)",
           "",
           {{"limit", "N", "Stop after N groups"}, {"page-size", "N", "Groups per call"}},
           0,
           0},
          &RunGroupList};
}

int RunGroupInfo(const Invocation& in) {
  constexpr char kCommand[] = "group info";
  absl::StatusOr<uint32_t> leases = CountFlag(in.args, "leases");
  if (!leases.ok()) return UsageError(kCommand, leases.status().message());
  absl::StatusOr<ConsumerGroupInfo> group =
      in.NewClient()->GetConsumerGroup(in.positional()[0], *leases);
  if (const int printed = PrintGroup(group, kCommand, in.json); printed != kOk) return printed;
  if (!group->consumers.empty()) {
    if (!in.json) WriteStdout("\n");
    Answer consumers(in.json, {"CONSUMER", "UNACKED", "LAST_SEEN"});
    for (const client::GroupConsumer& consumer : group->consumers) {
      consumers.Row({DisplayValue(consumer.name), absl::StrCat(consumer.unacked),
                     FormatTimestamp(consumer.last_seen)},
                    JsonObject()
                        .AddBytes("consumer", consumer.name)
                        .Add("unacked", consumer.unacked)
                        .AddTime("last_seen", consumer.last_seen));
    }
    consumers.Print();
  }
  if (!group->leases.empty()) {
    if (!in.json) WriteStdout("\n");
    Answer rows(in.json, {"LEASE_SEQUENCE", "CONSUMER", "DELIVERY", "DEADLINE"});
    for (const client::GroupLease& lease : group->leases) {
      rows.Row({absl::StrCat(lease.sequence), DisplayValue(lease.consumer),
                absl::StrCat(lease.delivery_count), FormatTimestamp(lease.deadline)},
               JsonObject()
                   .Add("lease_sequence", absl::StrCat(lease.sequence))
                   .AddBytes("consumer", lease.consumer)
                   .Add("delivery_count", static_cast<uint64_t>(lease.delivery_count))
                   .AddTime("deadline", lease.deadline));
    }
    rows.Print();
  }
  return kOk;
}

Command GroupInfoCommand() {
  return {{"group info",
           "NAME",
           "Show a consumer group: counts, consumers, leases (GetConsumerGroup)",
           "Prints the group's row, then its consumers and, with --leases, its leases (with\n"
           "--json: one object for the group, then one per consumer and per lease).\n"
           "Exit status 1 when the group does not exist.\n",
           {{"leases", "N", "Also list up to N leases (at most 1000)"}},
           1,
           1},
          &RunGroupInfo};
}

int RunGroupRemove(const Invocation& in) {
  return PrintGroup(in.NewClient()->DeleteConsumerGroup(in.positional()[0]), "group rm", in.json);
}

Command GroupRemoveCommand() {
  return {{"group rm",
           "NAME",
           "Delete a consumer group, with its leases and dead letters (DeleteConsumerGroup)",
           "Prints the group as it was. Exit status 1 when it does not exist.\n",
           {},
           1,
           1},
          &RunGroupRemove};
}

int RunGroupReset(const Invocation& in) {
  constexpr char kCommand[] = "group reset";
  client::StartPosition start;
  uint64_t after_sequence = 0;
  if (absl::Status flags = StartFlags(in.args, &start, &after_sequence); !flags.ok()) {
    return UsageError(kCommand, flags.message());
  }
  return PrintGroup(in.NewClient()->ResetConsumerGroup(in.positional()[0], start, after_sequence),
                    kCommand, in.json);
}

Command GroupResetCommand() {
  return {{"group reset", "NAME",
           "Move a consumer group's position; its pending events are dropped "
           "(ResetConsumerGroup)",
           "Without --from or --oldest the group continues with new events only.\n"
           "Exit status 1 when the group does not exist.\n",
           StartFlagSpecs(), 1, 1},
          &RunGroupReset};
}

}  // namespace

std::vector<Command> GroupCommands() {
  return {GroupCreateCommand(), GroupListCommand(), GroupInfoCommand(), GroupRemoveCommand(),
          GroupResetCommand()};
}

}  // namespace lapse::cli
