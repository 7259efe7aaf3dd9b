// memory_probe: how much memory a member costs. Inserts --members members
// (16-byte keys and values, deadlines spread uniformly over one hour on a
// FakeClock; see bench/workload.h) round-robin over --collections collections,
// --batch members per Put call, and reports the growth of the resident set.
//
//   memory_probe                                   # 10M members, 1M collections
//   memory_probe --members=100000 --collections=10000
//   # lapse-bench put's 1000 collections of 1000 (one TTL per call):
//   memory_probe --members=1000000 --collections=1000 --batch=1000 --shared_ttl
//
// Both RSS readings are taken right after malloc_trim(0), which hands pages
// that glibc's malloc holds but no longer uses (for instance the old arrays
// left behind when hash tables grow) back to the kernel. Without it the
// "after" reading would charge the members for memory the engine has already
// freed. The untrimmed reading and the heap bytes malloc reports in use are
// printed too, so nothing is hidden.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bench/common/workload.h"
#include "server/base/clock.h"
#include "server/engine/engine.h"
#include "server/engine/event_feed.h"

ABSL_FLAG(uint64_t, members, 10'000'000, "Members to insert.");
ABSL_FLAG(uint64_t, collections, 1'000'000, "Collections to spread the members over, round-robin.");
ABSL_FLAG(uint64_t, batch, 1, "Members per Put call (consecutive members of one collection).");
ABSL_FLAG(uint64_t, shards, 16, "Engine shards.");
ABSL_FLAG(bool, shared_ttl, false,
          "One TTL for every member of a Put call (as a request's default_ttl gives them, "
          "lapse-bench put's way), so that a call's members share a deadline; otherwise each "
          "member has its own.");

namespace lapse {
namespace {

using bench::kNameBytes;

// Resident set size in bytes, from /proc/self/statm (second field, pages).
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size_pages = 0;
  int64_t resident_pages = 0;
  statm >> size_pages >> resident_pages;
  return resident_pages * sysconf(_SC_PAGESIZE);
}

// Peak resident set size in bytes (VmHWM in /proc/self/status).
int64_t PeakResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    int64_t kib = 0;
    if (std::sscanf(line.c_str(), "VmHWM: %ld kB", &kib) == 1) {
      return kib * 1024;
    }
  }
  return -1;
}

// Bytes glibc's malloc has handed out and not had back (arenas + mmapped).
int64_t HeapInUseBytes() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
}

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// 10000000 -> "10,000,000": the counts here are long enough to misread.
std::string Thousands(uint64_t n) {
  std::string digits = absl::StrFormat("%d", n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

int Run() {
  const uint64_t members = absl::GetFlag(FLAGS_members);
  const uint64_t collections = absl::GetFlag(FLAGS_collections);
  const uint64_t batch = absl::GetFlag(FLAGS_batch);
  const bool shared_ttl = absl::GetFlag(FLAGS_shared_ttl);
  if (members == 0 || collections == 0 || collections > members || batch == 0) {
    absl::FPrintF(stderr, "need 0 < --collections <= --members and --batch > 0\n");
    return 2;
  }

  FakeClock clock(bench::StartTime());
  EventFeed log({});
  Engine::Options options;
  options.shards = absl::GetFlag(FLAGS_shards);
  options.limits.max_total_members = std::max(options.limits.max_total_members, members);
  options.limits.max_members_per_request =
      std::max<size_t>(options.limits.max_members_per_request, batch);
  Engine engine(options, &clock, &log);

  // Scratch for one call's names; the views in `writes` point into it.
  std::vector<char> names((2 * batch + 1) * kNameBytes);
  std::vector<MemberWrite> writes(batch);

  malloc_trim(0);
  const int64_t rss_before = ResidentBytes();
  const int64_t heap_before = HeapInUseBytes();
  const auto start = std::chrono::steady_clock::now();

  // Collection c holds members c, c + C, c + 2C, ...; position j of each
  // collection is written in round j / batch, so with --batch=1 consecutive
  // calls go to different collections.
  const uint64_t per_collection = (members + collections - 1) / collections;
  uint64_t calls = 0;
  for (uint64_t round = 0; round < per_collection; round += batch) {
    for (uint64_t c = 0; c < collections; ++c) {
      size_t n = 0;
      for (uint64_t j = round; j < round + batch; ++j) {
        const uint64_t i = c + j * collections;
        if (i >= members) break;
        char* key = &names[(2 * n) * kNameBytes];
        char* value = &names[(2 * n + 1) * kNameBytes];
        writes[n] =
            MemberWrite{bench::FormatName('k', i, key), bench::FormatName('v', i, value),
                        Expiration::Ttl(bench::TtlFor(shared_ttl ? c + round * collections : i))};
        ++n;
      }
      if (n == 0) continue;
      char* name = &names[2 * batch * kNameBytes];
      absl::StatusOr<std::vector<PutResult>> result =
          engine.Put(bench::FormatName('c', c, name), absl::MakeConstSpan(writes.data(), n), {});
      if (!result.ok()) {
        absl::FPrintF(stderr, "Put failed: %s\n", result.status().ToString());
        return 1;
      }
      ++calls;
    }
  }

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t rss_untrimmed = ResidentBytes();
  malloc_trim(0);
  const int64_t rss_after = ResidentBytes();
  const int64_t heap_after = HeapInUseBytes();

  if (engine.total_members() != members) {
    absl::FPrintF(stderr, "engine holds %d members, expected %d\n", engine.total_members(),
                  members);
    return 1;
  }

  const int64_t rss_delta = rss_after - rss_before;
  const double per_member = static_cast<double>(rss_delta) / members;
  const double heap_per_member = static_cast<double>(heap_after - heap_before) / members;
  const auto row = [](absl::string_view name, const std::string& value) {
    absl::PrintF("  %-36s %16s\n", name, value);
  };
  absl::PrintF("lapse memory probe (%d shards)\n", options.shards);
  row("members", Thousands(members));
  row("collections", Thousands(collections));
  row("members per Put", absl::StrFormat("%d", batch));
  row("TTL", shared_ttl ? "one per Put" : "one per member");
  row("key + value bytes per member", absl::StrFormat("%d", 2 * kNameBytes));
  row("collection name bytes", absl::StrFormat("%d", kNameBytes));
  row("insert time", absl::StrFormat("%.2f s", seconds));
  row("puts/s (members)", Thousands(static_cast<uint64_t>(members / seconds)));
  row("Put calls/s", Thousands(static_cast<uint64_t>(calls / seconds)));
  row("RSS before (trimmed)", absl::StrFormat("%.1f MiB", MiB(rss_before)));
  row("RSS after, untrimmed", absl::StrFormat("%.1f MiB", MiB(rss_untrimmed)));
  row("RSS after (trimmed)", absl::StrFormat("%.1f MiB", MiB(rss_after)));
  row("peak RSS (VmHWM)", absl::StrFormat("%.1f MiB", MiB(PeakResidentBytes())));
  row("RSS delta", absl::StrFormat("%.1f MiB", MiB(rss_delta)));
  row("bytes per member (RSS)", absl::StrFormat("%.1f", per_member));
  row("  above the 32 key+value bytes", absl::StrFormat("%.1f", per_member - 2 * kNameBytes));
  row("bytes per member (malloc in use)", absl::StrFormat("%.1f", heap_per_member));
  return 0;
}

}  // namespace
}  // namespace lapse

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Measures the resident memory per member of a filled lapse engine.");
  absl::ParseCommandLine(argc, argv);
  return lapse::Run();
}
