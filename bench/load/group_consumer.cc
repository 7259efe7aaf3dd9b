#include "bench/load/group_consumer.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "bench/common/members.h"
#include "bench/common/stats.h"
#include "grpcpp/support/sync_stream.h"

namespace lapse {
namespace load {

GroupConsumer::GroupConsumer(Stub* stub, Options options, GroupLedger* ledger)
    : stub_(stub), options_(std::move(options)), ledger_(ledger) {}

GroupConsumer::~GroupConsumer() { Stop(); }

void GroupConsumer::Start() {
  reader_ = std::thread([this] { Consume(); });
}

void GroupConsumer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    cancelling_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  if (reader_.joinable()) reader_.join();
}

uint64_t GroupConsumer::responses() const {
  absl::MutexLock lock(&mu_);
  return responses_;
}

void GroupConsumer::Consume() {
  grpc::ClientContext context;
  {
    absl::MutexLock lock(&mu_);
    context_ = &context;
    if (cancelling_) context.TryCancel();
  }
  std::unique_ptr<grpc::ClientReaderWriter<v1::ConsumeRequest, v1::ConsumeResponse>> stream =
      stub_->Consume(&context);
  v1::ConsumeRequest start;
  start.mutable_start()->set_group(options_.group);
  start.mutable_start()->set_consumer(options_.name);
  start.mutable_start()->set_max_in_flight(options_.max_in_flight);
  start.mutable_start()->set_max_batch(options_.max_in_flight);
  stream->Write(start);

  // Sequence -> the member it carries, from delivery to accepted ack.
  absl::flat_hash_map<uint64_t, GroupAck> leased;
  std::vector<uint64_t> held;
  bool died = false;
  v1::ConsumeResponse response;
  while (!died && stream->Read(&response)) {
    const int64_t now_us = NowMicros();
    v1::ConsumeRequest ack;
    for (const v1::Delivery& d : response.deliveries()) {
      const v1::ExpiryEvent& event = d.event();
      uint64_t index;
      if (!IndexOfKey(event.key(), &index)) {
        ledger_->Error(absl::StrCat("an event named no member of this run: ", event.key()));
        continue;
      }
      if (options_.include_values && event.value() != ValueFor(index, options_.value_bytes)) {
        ledger_->Error("an event carried the wrong value");
      }
      if (options_.dies) {
        held.push_back(index);
        continue;
      }
      leased[event.sequence()] = {index, TimestampMicros(event.expire_time()), 0};
      v1::LeaseRef* ref = ack.add_ack();
      ref->set_sequence(event.sequence());
      ref->set_delivery_count(d.delivery_count());
    }
    if (options_.dies && held.size() >= options_.max_in_flight) {
      ledger_->Died(held, NowMicros());
      context.TryCancel();
      died = true;
    }
    if (ack.ack_size() > 0) stream->Write(ack);
    std::vector<GroupAck> acked;
    for (const v1::LeaseResult& result : response.ack_results()) {
      auto it = leased.find(result.sequence());
      if (it == leased.end()) {
        ledger_->Error(
            absl::StrCat("an ack result for sequence ", result.sequence(), " that was not acked"));
        continue;
      }
      if (result.code() == 0) {
        it->second.acked_us = now_us;
        acked.push_back(it->second);
      } else {
        ledger_->Error(absl::StrCat("ack refused: code ", result.code(), ": ", result.message()));
      }
      leased.erase(it);
    }
    ledger_->Acked(options_.index, acked);
    absl::MutexLock lock(&mu_);
    ++responses_;
  }
  const grpc::Status status = stream->Finish();
  absl::MutexLock lock(&mu_);
  context_ = nullptr;
  if ((cancelling_ || died) && status.error_code() == grpc::StatusCode::CANCELLED) return;
  ledger_->Error(absl::StrCat("Consume (", options_.name, ") ended: code ", status.error_code(),
                              ": ", status.error_message()));
}

}  // namespace load
}  // namespace lapse
