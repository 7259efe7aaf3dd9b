#include "bench/soak/mixed_writer.h"

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"

namespace lapse {
namespace soak {
namespace {

constexpr int kKeysPerCall = 10;

}  // namespace

MixedWriter::MixedWriter(load::Stub* stub, const Options& options)
    : stub_(stub), options_(options) {}

void MixedWriter::Run(const std::atomic<bool>& stop) {
  std::mt19937_64 rng(options_.seed);
  std::uniform_int_distribution<int> collection(0, options_.collections - 1);
  std::uniform_int_distribution<int> key(0, options_.keys_per_collection - 1);
  std::uniform_real_distribution<double> unit(0, 1);
  const std::string value(options_.value_bytes, 'v');
  const absl::Duration pace = absl::Seconds(1 / options_.ops_per_second);
  absl::Time next = absl::Now();
  while (!stop.load(std::memory_order_relaxed)) {
    next += pace;
    absl::SleepFor(next - absl::Now());
    const std::string name = absl::StrCat("soak.", collection(rng));
    // Keys in one request must differ: a run of consecutive ones.
    const int first_key = key(rng);
    const auto key_name = [this, first_key](int i) {
      return absl::StrCat("k", (first_key + i) % options_.keys_per_collection);
    };
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    grpc::Status status;
    const double op = unit(rng);
    if (op < 0.6) {
      v1::PutMembersRequest request;
      request.set_collection(name);
      for (int i = 0; i < kKeysPerCall; ++i) {
        v1::MemberWrite* write = request.add_members();
        write->set_key(key_name(i));
        write->set_value(value);
        // One member in twenty stays until it is removed.
        if (unit(rng) >= 0.05) {
          load::SetDuration(absl::Milliseconds(50) + options_.max_ttl * unit(rng),
                            write->mutable_ttl());
        }
      }
      v1::PutMembersResponse response;
      status = stub_->PutMembers(&context, request, &response);
    } else if (op < 0.8) {
      v1::GetMembersRequest request;
      request.set_collection(name);
      for (int i = 0; i < kKeysPerCall; ++i) request.add_keys(key_name(i));
      v1::GetMembersResponse response;
      status = stub_->GetMembers(&context, request, &response);
    } else {
      v1::RemoveMembersRequest request;
      request.set_collection(name);
      for (int i = 0; i < kKeysPerCall / 2; ++i) request.add_keys(key_name(i));
      v1::RemoveMembersResponse response;
      status = stub_->RemoveMembers(&context, request, &response);
    }
    ops_.fetch_add(1, std::memory_order_relaxed);
    if (!status.ok()) errors_.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace soak
}  // namespace lapse
