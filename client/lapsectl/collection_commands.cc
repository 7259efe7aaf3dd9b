// lapsectl's collection commands: info, collections and drop, each with its
// flags and help beside the function that runs it.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/lapsectl/cli_args.h"
#include "client/lapsectl/cli_output.h"
#include "client/lapsectl/command.h"
#include "lapse/client.h"

namespace lapse::cli {
namespace {

using client::Client;

void AddCollectionRow(const client::CollectionInfo& info, Answer& answer) {
  answer.Row({DisplayValue(info.name), absl::StrCat(info.member_count),
              absl::StrCat(info.expiring_count), FormatExpireTime(info.next_expire_time)},
             JsonObject()
                 .AddBytes("name", info.name)
                 .Add("member_count", info.member_count)
                 .Add("expiring_count", info.expiring_count)
                 .AddTime("next_expire_time", info.next_expire_time));
}

const std::vector<std::string>& CollectionHeader() {
  static const std::vector<std::string>* const header =
      new std::vector<std::string>{"NAME", "MEMBERS", "EXPIRING", "NEXT_EXPIRE_TIME"};
  return *header;
}

int RunInfo(const Invocation& in) {
  absl::StatusOr<client::CollectionInfo> info = in.NewClient()->GetCollection(in.positional()[0]);
  if (!info.ok()) return Fail("info", info.status());
  Answer answer(in.json, CollectionHeader());
  AddCollectionRow(*info, answer);
  answer.Print();
  return kOk;
}

Command InfoCommand() {
  return {{"info",
           "COLLECTION",
           "Show a collection's counts (GetCollection)",
           "Exit status 1 when the collection does not exist.\n",
           {},
           1,
           1},
          &RunInfo};
}

int RunCollections(const Invocation& in) {
  const ParsedArgs& args = in.args;
  client::ListCollectionsOptions options;
  options.prefix = args.Value("prefix").value_or("");
  absl::StatusOr<Paging> paging = PagingFlags(args);
  if (!paging.ok()) return UsageError("collections", paging.status().message());
  options.page_size = paging->page_size;

  std::unique_ptr<Client> client = in.NewClient();
  Answer answer(in.json, CollectionHeader());
  return ShowPages(
      "collections", paging->limit, &options.page_token, &client::CollectionPage::collections,
      [&] { return client->ListCollections(options); },
      [&](const client::CollectionInfo& info) { AddCollectionRow(info, answer); }, answer);
}

Command CollectionsCommand() {
  return {{"collections",
           "",
           "List collections (ListCollections)",
           "",
           {{"prefix", "PREFIX", "Only names starting with PREFIX"},
            {"limit", "N", "Stop after N collections"},
            {"page-size", "N", "Collections per call"}},
           0,
           0},
          &RunCollections};
}

int RunDrop(const Invocation& in) {
  const std::string& name = in.positional()[0];
  absl::StatusOr<uint64_t> removed = in.NewClient()->DeleteCollection(name);
  if (!removed.ok()) return Fail("drop", removed.status());
  Answer answer(in.json, {"COLLECTION", "REMOVED_MEMBERS"});
  answer.Row({DisplayValue(name), absl::StrCat(*removed)},
             JsonObject().AddBytes("collection", name).Add("removed_count", *removed));
  answer.Print();
  if (*removed == 0) {
    std::fprintf(stderr, "%s drop: collection \"%s\" not found\n", kProgram,
                 DisplayValue(name).c_str());
    return kUnmet;
  }
  return kOk;
}

Command DropCommand() {
  return {{"drop",
           "COLLECTION",
           "Delete a collection, without expiry events (DeleteCollection)",
           "Exit status 1 when the collection did not exist.\n",
           {},
           1,
           1},
          &RunDrop};
}

}  // namespace

std::vector<Command> CollectionCommands() {
  return {InfoCommand(), CollectionsCommand(), DropCommand()};
}

}  // namespace lapse::cli
