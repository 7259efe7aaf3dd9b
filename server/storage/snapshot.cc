#include "server/storage/snapshot.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "server/base/coding.h"
#include "server/storage/files.h"
#include "server/storage/frame.h"

namespace lapse {
namespace {

constexpr absl::string_view kHeaderMagic = "lapse-snapshot-1";
constexpr absl::string_view kFooterMagic = "end";
constexpr size_t kMembersPerChunk = 256;
constexpr size_t kEventsPerChunk = 4096;
constexpr size_t kGroupRecordBatchBytes = 1 << 20;
constexpr size_t kWriteBufferBytes = 1 << 20;
constexpr size_t kReadBytes = 1 << 20;

// Streams frames to a file, numbering them.
class FrameWriter {
 public:
  explicit FrameWriter(files::AtomicFile* file) : file_(file) {}

  absl::Status Add(absl::string_view payload) {
    AppendFrame(&buffer_, next_index_++, payload);
    return buffer_.size() >= kWriteBufferBytes ? Flush() : absl::OkStatus();
  }
  absl::Status Flush() {
    absl::Status s = file_->Append(buffer_);
    bytes_ += buffer_.size();
    buffer_.clear();
    return s;
  }
  uint64_t bytes() const { return bytes_; }

 private:
  files::AtomicFile* const file_;
  std::string buffer_;
  uint64_t next_index_ = 0;
  uint64_t bytes_ = 0;
};

absl::Status WriteContents(FrameWriter& out, uint64_t replay_from_lsn, Engine* engine,
                           const EventFeed& log, const ConsumerGroups* groups,
                           SnapshotStats* stats) {
  std::string header(kHeaderMagic);
  PutFixed64(&header, replay_from_lsn);
  if (absl::Status s = out.Add(header); !s.ok()) return s;

  Engine::ScanCursor cursor;
  BatchEncoder members;
  bool more = true;
  while (more) {
    const absl::Time start = absl::Now();
    more = engine->Scan(
        &cursor, kMembersPerChunk,
        [&](absl::string_view collection, absl::string_view key, absl::string_view value,
            int64_t deadline_ms) { members.Put(collection, key, value, deadline_ms); });
    stats->longest_lock_hold = std::max(stats->longest_lock_hold, absl::Now() - start);
    stats->members += members.count();
    if (!members.empty()) {
      if (absl::Status s = out.Add(members.Finish(0)); !s.ok()) return s;
    }
  }

  EventFilter all;
  all.include_values = true;
  ReadLimits limits;
  limits.max_events = kEventsPerChunk;
  limits.max_examined = kEventsPerChunk;
  limits.max_bytes = size_t{16} << 20;
  uint64_t after = log.oldest_retained_sequence() - 1;
  while (true) {
    absl::StatusOr<EventBatch> batch = log.Read(after, all, limits);
    if (!batch.ok()) {
      // Trimmed while we read: those events are out of retention anyway.
      after = log.oldest_retained_sequence() - 1;
      continue;
    }
    if (batch->events.empty()) break;
    BatchEncoder events;
    for (const ExpiryEvent& e : batch->events) events.Event(e);
    stats->events += events.count();
    if (absl::Status s = out.Add(events.Finish(0)); !s.ok()) return s;
    after = batch->examined_sequence;
  }

  std::vector<std::string> group_batches;
  if (groups != nullptr) {
    BatchEncoder records;
    absl::Status copied = groups->ForEachStateRecord([&](const JournalRecord& r) {
      records.GroupRecord(r);
      ++stats->group_records;
      if (records.size() >= kGroupRecordBatchBytes) group_batches.emplace_back(records.Finish(0));
      return absl::OkStatus();
    });
    if (!copied.ok()) return copied;
    if (!records.empty()) group_batches.emplace_back(records.Finish(0));
  }
  for (const std::string& batch : group_batches) {
    if (absl::Status s = out.Add(batch); !s.ok()) return s;
  }

  std::string footer(kFooterMagic);
  PutFixed64(&footer, stats->members);
  PutFixed64(&footer, stats->events);
  PutFixed64(&footer, std::max(after, log.last_sequence()) + 1);
  PutFixed64(&footer, stats->group_records);
  if (absl::Status s = out.Add(footer); !s.ok()) return s;
  return out.Flush();
}

}  // namespace

std::string SnapshotName(uint64_t replay_from_lsn) {
  return absl::StrFormat("snapshot-%020d.snap", replay_from_lsn);
}

bool ParseSnapshotName(absl::string_view name, uint64_t* replay_from_lsn) {
  if (!absl::ConsumePrefix(&name, "snapshot-") || !absl::ConsumeSuffix(&name, ".snap")) {
    return false;
  }
  return name.size() == 20 && absl::SimpleAtoi(name, replay_from_lsn);
}

bool ParseSnapshotTempName(absl::string_view name, uint64_t* replay_from_lsn) {
  std::string target;
  return files::ParseTempName(name, &target) && ParseSnapshotName(target, replay_from_lsn);
}

namespace {

// Reads the snapshot at `path` frame by frame, a piece of the file at a time,
// so that it needs memory for one frame, not the file; passes each record to
// `fn` when there is one.
absl::StatusOr<SnapshotContents> Walk(const std::string& path,
                                      const std::function<void(const JournalRecord&)>* fn) {
  absl::StatusOr<files::Reader> in = files::Reader::Open(path);
  if (!in.ok()) return in.status();
  std::string buffer;
  size_t pos = 0;       // Of the next frame, in `buffer`.
  uint64_t offset = 0;  // Of the next frame, in the file.
  bool at_end = false;
  auto damaged = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrFormat("snapshot %s is damaged at offset %d: %s", path, offset, why));
  };
  // Reads more of the file after what `buffer` holds from `pos` on. A read
  // error (EIO from a bad sector) is damage too.
  auto read_more = [&]() -> absl::Status {
    buffer.erase(0, pos);
    pos = 0;
    absl::StatusOr<size_t> n = in->Read(kReadBytes, &buffer);
    if (!n.ok()) return damaged(n.status().message());
    at_end = *n == 0;
    return absl::OkStatus();
  };
  SnapshotContents contents;
  uint64_t index = 0;
  bool footer_seen = false;
  uint64_t members = 0;
  uint64_t events = 0;
  uint64_t group_records = 0;
  while (!footer_seen) {
    Frame frame;
    const FrameStatus fs = ParseFrame(buffer, pos, &frame);
    if ((fs == FrameStatus::kEnd || fs == FrameStatus::kTruncated) && !at_end) {
      if (absl::Status s = read_more(); !s.ok()) return s;
      continue;
    }
    if (fs == FrameStatus::kEnd) return damaged("it ends before its footer");
    if (fs != FrameStatus::kOk || frame.lsn != index) return damaged("bad frame");
    absl::string_view payload = frame.payload;
    if (index == 0) {
      if (!absl::ConsumePrefix(&payload, kHeaderMagic) ||
          !GetFixed64(&payload, &contents.replay_from_lsn)) {
        return damaged("not a lapse snapshot");
      }
    } else if (absl::ConsumePrefix(&payload, kFooterMagic) &&
               (payload.size() == 24 || payload.size() == 32)) {
      GetFixed64(&payload, &contents.members);
      GetFixed64(&payload, &contents.events);
      GetFixed64(&payload, &contents.next_event_sequence);
      GetFixed64(&payload, &contents.group_records);  // Leaves 0 in an older footer.
      footer_seen = true;
    } else {
      absl::Status s = DecodeBatch(frame.payload, [&](const JournalRecord& r) {
        if (r.type == RecordType::kPut) {
          ++members;
        } else if (r.type == RecordType::kEvent) {
          ++events;
        } else if (IsGroupRecord(r.type)) {
          ++group_records;
        } else {
          return absl::DataLossError("unexpected record type");
        }
        if (fn != nullptr) (*fn)(r);
        return absl::OkStatus();
      });
      if (!s.ok()) return damaged(s.message());
    }
    pos += frame.size;
    offset += frame.size;
    ++index;
  }
  while (pos == buffer.size() && !at_end) {
    if (absl::Status s = read_more(); !s.ok()) return s;
  }
  if (pos != buffer.size()) return damaged("bytes after the footer");
  if (members != contents.members || events != contents.events ||
      group_records != contents.group_records) {
    return damaged("the footer's counts do not match the contents");
  }
  contents.bytes = offset;
  return contents;
}

}  // namespace

absl::StatusOr<SnapshotStats> WriteSnapshot(const std::string& dir, uint64_t replay_from_lsn,
                                            Engine* engine, const EventFeed& log,
                                            const ConsumerGroups* groups,
                                            const std::function<absl::Status()>& before_publish) {
  const absl::Time start = absl::Now();
  absl::StatusOr<files::AtomicFile> file =
      files::AtomicFile::Create(dir, SnapshotName(replay_from_lsn));
  if (!file.ok()) return file.status();
  SnapshotStats stats;
  FrameWriter out(&*file);
  if (absl::Status s = WriteContents(out, replay_from_lsn, engine, log, groups, &stats); !s.ok())
    return s;
  if (before_publish) {
    if (absl::Status s = before_publish(); !s.ok()) return s;
  }
  if (absl::Status s = file->Commit(); !s.ok()) return s;
  if (absl::StatusOr<SnapshotContents> check = LoadSnapshot(file->path(), nullptr); !check.ok()) {
    files::Remove(file->path()).IgnoreError();
    return check.status();
  }
  stats.bytes = out.bytes();
  stats.took = absl::Now() - start;
  return stats;
}

absl::StatusOr<SnapshotContents> LoadSnapshot(const std::string& path,
                                              const std::function<void(const JournalRecord&)>& fn) {
  absl::StatusOr<SnapshotContents> checked = Walk(path, nullptr);
  if (!checked.ok() || !fn) return checked;
  absl::StatusOr<SnapshotContents> loaded = Walk(path, &fn);
  if (!loaded.ok()) {
    return absl::InternalError(absl::StrCat(loaded.status().message(),
                                            "; it had read back whole a moment before, so the "
                                            "file changed or the disk fails while it is loaded"));
  }
  return loaded;
}

}  // namespace lapse
