#include "server/engine/event_source.h"

namespace lapse {

absl::StatusOr<uint64_t> EventSource::ReadEach(uint64_t after, const EventFilter& filter,
                                               const ReadLimits& limits, EventVisitor visit) const {
  absl::StatusOr<EventBatch> batch = Read(after, filter, limits);
  if (!batch.ok()) return batch.status();
  for (const ExpiryEvent& event : batch->events) visit(event.sequence, ViewOf(event));
  return batch->examined_sequence;
}

}  // namespace lapse
