#include "bench/compare/redis_stream_consumer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/common/stats.h"
#include "bench/compare/redis_poller.h"

namespace lapse {
namespace compare {
namespace {

absl::string_view Str(const redisReply* r) { return absl::string_view(r->str, r->len); }

// How long one XREADGROUP blocks: short enough that the reclaimer runs on
// time and Stop is prompt.
absl::Duration BlockFor(const Options& o) {
  return std::min(o.claim_interval, absl::Milliseconds(100));
}

}  // namespace

StreamConsumer::StreamConsumer(const Options& o, std::string group, int index, bool dies,
                               load::GroupLedger* ledger)
    : o_(o),
      group_(std::move(group)),
      name_(absl::StrCat("c", index)),
      index_(index),
      dies_(dies),
      ledger_(ledger) {}

absl::Status StreamConsumer::Start() {
  absl::StatusOr<std::unique_ptr<RedisConn>> conn = RedisConn::Connect(o_.host, o_.port);
  if (!conn.ok()) return conn.status();
  conn_ = std::move(*conn);
  thread_.Start([this] { Run(); });
  return absl::OkStatus();
}

void StreamConsumer::Stop() { thread_.Stop(); }

void StreamConsumer::Run() {
  const std::string count = absl::StrCat(o_.group.max_in_flight);
  const std::string block = absl::StrCat(absl::ToInt64Milliseconds(BlockFor(o_)));
  absl::Time next_claim = absl::Now() + o_.claim_interval;
  while (!thread_.stopping()) {
    if (!dies_ && absl::Now() >= next_claim) {
      Claim();
      next_claim = std::max(next_claim + o_.claim_interval, absl::Now());
    }
    ReplyPtr reply = conn_->Command({"XREADGROUP", "GROUP", group_, name_, "COUNT", count, "BLOCK",
                                     block, "STREAMS", o_.channel, ">"});
    if (reply == nullptr || reply->type == REDIS_REPLY_ERROR) {
      ledger_->Error(absl::StrCat("XREADGROUP: ", ReplyError(reply.get()), conn_->error()));
      return;
    }
    if (reply->type != REDIS_REPLY_ARRAY) continue;  // Nil: nothing within BLOCK.
    for (size_t s = 0; s < reply->elements; ++s) {
      const redisReply* stream = reply->element[s];
      if (stream->type == REDIS_REPLY_ARRAY && stream->elements == 2 &&
          !Handle(stream->element[1])) {
        return;
      }
    }
  }
}

bool StreamConsumer::Handle(const redisReply* entries) {
  if (entries == nullptr || entries->type != REDIS_REPLY_ARRAY) return true;
  std::vector<load::GroupAck> pending;
  std::vector<absl::string_view> ids;
  for (size_t i = 0; i < entries->elements; ++i) {
    const redisReply* entry = entries->element[i];
    if (entry->type != REDIS_REPLY_ARRAY || entry->elements != 2) continue;
    const redisReply* fields = entry->element[1];
    PolledMember member;
    if (fields->type != REDIS_REPLY_ARRAY || fields->elements != 2 ||
        !ParsePolledLine(Str(fields->element[1]), o_.value_bytes, &member)) {
      ledger_->Error("a stream entry named no member of this run");
      continue;
    }
    if (!member.value_ok) ledger_->Error("a stream entry carried the wrong value");
    if (dies_) {
      held_.push_back(member.index);
      continue;
    }
    pending.push_back({member.index, member.deadline_ms * 1000, 0});
    ids.push_back(Str(entry->element[0]));
  }
  if (dies_) {
    if (held_.size() < static_cast<size_t>(o_.group.max_in_flight)) return true;
    ledger_->Died(held_, load::NowMicros());
    conn_.reset();
    return false;
  }
  for (absl::string_view id : ids) conn_->Append({"XACK", o_.channel, group_, id});
  std::vector<load::GroupAck> acked;
  for (size_t i = 0; i < ids.size(); ++i) {
    ReplyPtr reply = conn_->Reply();
    if (reply == nullptr || reply->type != REDIS_REPLY_INTEGER) {
      ledger_->Error(absl::StrCat("XACK: ", ReplyError(reply.get()), conn_->error()));
      continue;
    }
    if (reply->integer != 1) {
      ledger_->Error("XACK of an entry no longer pending: it may be handled twice");
      continue;
    }
    pending[i].acked_us = load::NowMicros();
    acked.push_back(pending[i]);
  }
  ledger_->Acked(index_, acked);
  return true;
}

void StreamConsumer::Claim() {
  const std::string min_idle = absl::StrCat(absl::ToInt64Milliseconds(o_.group.visibility_timeout));
  const std::string count = absl::StrCat(o_.group.max_in_flight);
  std::string cursor = "0-0";
  do {
    ReplyPtr reply =
        conn_->Command({"XAUTOCLAIM", o_.channel, group_, name_, min_idle, cursor, "COUNT", count});
    if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements < 2) {
      ledger_->Error(absl::StrCat("XAUTOCLAIM: ", ReplyError(reply.get()), conn_->error()));
      return;
    }
    cursor = std::string(Str(reply->element[0]));
    Handle(reply->element[1]);
  } while (cursor != "0-0");
}

}  // namespace compare
}  // namespace lapse
