#include "bench/soak/churning_watcher.h"

#include <algorithm>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"

namespace lapse {
namespace soak {

ChurningWatcher::ChurningWatcher(load::Stub* stub, const Options& options)
    : stub_(stub), options_(options) {}

void ChurningWatcher::Run(const std::atomic<bool>& stop) {
  std::mt19937_64 rng(options_.seed);
  std::uniform_real_distribution<double> unit(0, 1);
  std::uniform_int_distribution<int> collection(0, options_.collections - 1);
  while (!stop.load(std::memory_order_relaxed)) {
    v1::WatchExpirationsRequest request;
    const double filter = unit(rng);
    if (filter < 0.3) {
      request.set_collection_prefix(absl::StrCat("soak.", collection(rng) % 10));
    } else if (filter < 0.5) {
      for (int i = 0; i < 5; ++i) request.add_collections(absl::StrCat("soak.", collection(rng)));
    }
    request.set_include_values(unit(rng) < 0.5);
    const absl::Time end = absl::Now() + options_.max_life * unit(rng);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(end));
    std::unique_ptr<grpc::ClientReader<v1::WatchExpirationsResponse>> reader =
        stub_->WatchExpirations(&context, request);
    streams_.fetch_add(1, std::memory_order_relaxed);
    if (options_.stall) {
      // Reads nothing; wakes now and then only to notice a stop.
      while (!stop.load(std::memory_order_relaxed) && absl::Now() < end) {
        absl::SleepFor(std::min(absl::Milliseconds(200), end - absl::Now()));
      }
      context.TryCancel();
    } else {
      v1::WatchExpirationsResponse response;
      while (!stop.load(std::memory_order_relaxed) && reader->Read(&response)) {
        events_.fetch_add(static_cast<uint64_t>(response.events_size()), std::memory_order_relaxed);
      }
      if (stop.load(std::memory_order_relaxed)) context.TryCancel();
    }
    if (reader->Finish().error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      refused_.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

}  // namespace soak
}  // namespace lapse
