#include "bench/common/load_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/common/members.h"

ABSL_FLAG(int32_t, batch, 100,
          "Members per batch: one PutMembers RPC or one pipelined Redis batch, in one "
          "collection (mixed: also keys per get/expire/remove)");
ABSL_FLAG(int32_t, key_bytes, 16, "Bytes per member key (at least 8)");
ABSL_FLAG(int32_t, value_bytes, 16, "Bytes per member value");
ABSL_FLAG(int64_t, collections, 1000, "Collections (Redis: hashes) the members are spread over");
ABSL_FLAG(int64_t, members, 0,
          "Members to write; 0: put 500000 (unless --duration), expiry-latency "
          "100000, drain 100000, group 20000");
ABSL_FLAG(absl::Duration, spread, absl::Seconds(10),
          "expiry-latency: deadlines are spread uniformly over this window");
ABSL_FLAG(absl::Duration, lead, absl::ZeroDuration(),
          "expiry-latency, drain: from the start of loading to the first "
          "deadline; 0 picks 2s + 1s per 100k members");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(5),
          "How long after the last deadline to wait for expiry notifications");
ABSL_FLAG(absl::Duration, reconnect_at, absl::ZeroDuration(),
          "expiry-latency: this long after the first deadline the watcher drops "
          "its stream (lapse: and resumes by sequence) or the subscriber "
          "disconnects (Redis), for --reconnect-pause; 0: never");
ABSL_FLAG(absl::Duration, reconnect_pause, absl::Seconds(1),
          "How long the watcher or subscriber stays disconnected");
ABSL_FLAG(int32_t, consumers, 3, "group: consumers in the group, each on its own connection");
ABSL_FLAG(int32_t, max_in_flight, 100,
          "group: events a consumer holds unacknowledged at most (lapse: the Consume "
          "stream's max_in_flight; Redis: XREADGROUP's COUNT)");
ABSL_FLAG(absl::Duration, visibility_timeout, absl::Seconds(1),
          "group: how long a delivered event stays with its consumer before another may take "
          "it (lapse: the group's visibility timeout; Redis: XAUTOCLAIM's min-idle-time)");
ABSL_FLAG(bool, kill_consumer, false,
          "group: consumer 0 dies without acknowledging once it holds --max-in-flight "
          "events; reports how long until each was acknowledged by another consumer");

namespace lapse {
namespace load {

absl::Status CheckLoadFlags() {
  const int32_t batch = absl::GetFlag(FLAGS_batch);
  const int32_t key_bytes = absl::GetFlag(FLAGS_key_bytes);
  const int32_t value_bytes = absl::GetFlag(FLAGS_value_bytes);
  if (batch < 1 || batch > 1'000'000) {
    return absl::InvalidArgumentError("--batch must be in [1, 1000000]");
  }
  if (key_bytes < static_cast<int32_t>(kMinKeyBytes) || key_bytes > 4096) {
    return absl::InvalidArgumentError("--key_bytes must be in [8, 4096]");
  }
  if (value_bytes < 0 || value_bytes > (64 << 20)) {
    return absl::InvalidArgumentError("--value_bytes out of range");
  }
  if (absl::GetFlag(FLAGS_collections) < 1) {
    return absl::InvalidArgumentError("--collections must be positive");
  }
  return absl::OkStatus();
}

absl::StatusOr<GroupShape> GroupShapeFromFlags() {
  GroupShape shape;
  shape.consumers = absl::GetFlag(FLAGS_consumers);
  shape.max_in_flight = absl::GetFlag(FLAGS_max_in_flight);
  shape.visibility_timeout = absl::GetFlag(FLAGS_visibility_timeout);
  shape.kill_consumer = absl::GetFlag(FLAGS_kill_consumer);
  if (shape.consumers < 1 || shape.consumers > 1000) {
    return absl::InvalidArgumentError("--consumers must be in [1, 1000]");
  }
  if (shape.kill_consumer && shape.consumers < 2) {
    return absl::InvalidArgumentError(
        "--kill-consumer needs --consumers of 2 or more: someone must take over");
  }
  if (shape.max_in_flight < 1 || shape.max_in_flight > 1000) {
    return absl::InvalidArgumentError("--max_in_flight must be in [1, 1000]");
  }
  if (shape.visibility_timeout < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError("--visibility_timeout must be at least 1ms");
  }
  return shape;
}

ExpiryTiming ExpiryTimingFromFlags() {
  ExpiryTiming timing;
  timing.spread = absl::GetFlag(FLAGS_spread);
  timing.lead = absl::GetFlag(FLAGS_lead);
  timing.drain_timeout = absl::GetFlag(FLAGS_drain_timeout);
  timing.reconnect_at = absl::GetFlag(FLAGS_reconnect_at);
  timing.reconnect_pause = absl::GetFlag(FLAGS_reconnect_pause);
  return timing;
}

uint64_t MembersFor(absl::string_view scenario, uint64_t members, absl::Duration duration) {
  if (members != 0) return members;
  if (scenario == "put") return duration == absl::ZeroDuration() ? 500'000 : 0;
  if (scenario == "expiry-latency" || scenario == "drain") return 100'000;
  if (scenario == "group") return 20'000;
  return 0;
}

}  // namespace load
}  // namespace lapse
