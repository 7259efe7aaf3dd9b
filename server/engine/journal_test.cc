#include "server/engine/journal.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace lapse {
namespace {

// The records' views point into `batch`.
std::vector<JournalRecord> Decode(absl::string_view batch) {
  std::vector<JournalRecord> records;
  EXPECT_TRUE(DecodeBatch(batch, [&](const JournalRecord& r) {
                records.push_back(r);
                return absl::OkStatus();
              }).ok());
  return records;
}

// Strings whose length prefixes take one, two and three bytes.
const std::string kLong(200, 'l');
const std::string kLonger(20000, 'L');

TEST(BatchEncoderTest, EachRecordDecodesToWhatWasEncoded) {
  BatchEncoder encoder;
  encoder.Put("orders:42", "a", kLong, 1234);
  encoder.Remove(kLonger, "b");
  encoder.SetDeadline("c", kLong, kNoDeadlineMs);
  encoder.DeleteCollection(kLonger);
  encoder.Expiry("d", "e", "", -5, 99);
  ExpiryEvent event{.sequence = 7,
                    .collection = "f",
                    .key = kLong,
                    .value = "v",
                    .expire_time = absl::FromUnixMillis(1000),
                    .expired_at = absl::FromUnixNanos(1000000123)};
  encoder.Event(event);
  EXPECT_EQ(encoder.count(), 6u);
  const std::string batch(encoder.Finish(3));
  EXPECT_TRUE(encoder.empty());

  const std::vector<JournalRecord> r = Decode(batch);
  ASSERT_EQ(r.size(), 6u);
  EXPECT_EQ(r[0].type, RecordType::kPut);
  EXPECT_EQ(r[0].collection, "orders:42");
  EXPECT_EQ(r[0].key, "a");
  EXPECT_EQ(r[0].value, kLong);
  EXPECT_EQ(r[0].deadline_ms, 1234);
  EXPECT_EQ(r[1].type, RecordType::kRemove);
  EXPECT_EQ(r[1].collection, kLonger);
  EXPECT_EQ(r[1].key, "b");
  EXPECT_EQ(r[2].type, RecordType::kSetDeadline);
  EXPECT_EQ(r[2].collection, "c");
  EXPECT_EQ(r[2].key, kLong);
  EXPECT_EQ(r[2].deadline_ms, kNoDeadlineMs);
  EXPECT_EQ(r[3].type, RecordType::kDeleteCollection);
  EXPECT_EQ(r[3].collection, kLonger);
  EXPECT_EQ(r[4].type, RecordType::kExpiry);
  EXPECT_EQ(r[4].collection, "d");
  EXPECT_EQ(r[4].key, "e");
  EXPECT_EQ(r[4].value, "");
  EXPECT_EQ(r[4].deadline_ms, -5);
  EXPECT_EQ(r[4].expired_at_ns, 99);
  // The batch's first expiry sequence numbers its kExpiry records.
  EXPECT_EQ(r[4].sequence, 3u);
  EXPECT_EQ(r[5].type, RecordType::kEvent);
  const ExpiryEvent decoded = EventOf(r[5]);
  EXPECT_EQ(decoded.sequence, event.sequence);
  EXPECT_EQ(decoded.collection, event.collection);
  EXPECT_EQ(decoded.key, event.key);
  EXPECT_EQ(decoded.value, event.value);
  EXPECT_EQ(decoded.expire_time, event.expire_time);
  EXPECT_EQ(decoded.expired_at, event.expired_at);
}

TEST(BatchEncoderTest, ABatchOfManyRecordsDecodesInOrder) {
  BatchEncoder encoder;
  for (int i = 0; i < 1000; ++i) {
    encoder.Put(absl::StrCat("c", i % 7), absl::StrCat("k", i), std::string(i % 300, 'v'), i);
  }
  const std::string batch(encoder.Finish(0));
  const std::vector<JournalRecord> r = Decode(batch);
  ASSERT_EQ(r.size(), 1000u);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(r[i].collection, absl::StrCat("c", i % 7));
    EXPECT_EQ(r[i].key, absl::StrCat("k", i));
    EXPECT_EQ(r[i].value.size(), static_cast<size_t>(i % 300));
    EXPECT_EQ(r[i].deadline_ms, i);
  }
}

TEST(BatchEncoderTest, AKeptBufferHoldsEachFinishedBatchAloneAndKeepsItsCapacity) {
  std::string buffer = "left over";
  std::string first;
  const char* data = nullptr;
  {
    BatchEncoder encoder(&buffer);
    encoder.Put("c", "a", kLong, 1);
    encoder.Remove("c", "b");
    const absl::string_view finished = encoder.Finish(0);
    EXPECT_EQ(finished.data(), buffer.data()) << "the batch is the buffer itself";
    first = std::string(finished);
    EXPECT_TRUE(encoder.empty());
    EXPECT_EQ(encoder.size(), BatchEncoder().size()) << "a finished encoder is empty";
    data = buffer.data();

    // The next record starts a new batch; the finished one is gone from it.
    encoder.NextSequence(9);
    const std::vector<JournalRecord> next = Decode(encoder.Finish(0));
    ASSERT_EQ(next.size(), 1u);
    EXPECT_EQ(next[0].type, RecordType::kNextSequence);
    EXPECT_EQ(next[0].sequence, 9u);
  }
  ASSERT_EQ(Decode(first).size(), 2u);

  // A later encoder over the same buffer starts from nothing, in the memory
  // the first one grew.
  BatchEncoder again(&buffer);
  EXPECT_TRUE(again.empty());
  again.Remove("c", "a");
  const std::vector<JournalRecord> r = Decode(again.Finish(0));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].type, RecordType::kRemove);
  EXPECT_EQ(buffer.data(), data) << "a batch no larger than the last allocated";
}

TEST(BatchEncoderTest, ABatchWrittenOverALongerOneIsExactlyItsOwnRecords) {
  std::string buffer(4096, 'x');
  BatchEncoder encoder(&buffer);
  encoder.Put("c", "a", kLong, 1);
  const std::string long_batch(encoder.Finish(0));
  JournalRecord ack;
  ack.type = RecordType::kGroupAck;
  ack.group = "g";
  ack.sequence = 5;
  encoder.Remove("c", "b");
  encoder.GroupRecord(ack);
  encoder.NextSequence(6);
  const absl::string_view short_batch = encoder.Finish(7);

  BatchEncoder alone;
  alone.Remove("c", "b");
  alone.GroupRecord(ack);
  alone.NextSequence(6);
  EXPECT_EQ(short_batch, alone.Finish(7)) << "nothing of the longer batch or the old buffer";
  EXPECT_EQ(short_batch.data(), buffer.data());
  EXPECT_EQ(buffer.size(), 4096u) << "the buffer's room is kept, not cut to the batch";
  ASSERT_EQ(Decode(long_batch).size(), 1u);
}

TEST(BatchEncoderTest, ABatchCutShortIsDataLoss) {
  BatchEncoder encoder;
  encoder.Put("c", "k", kLong, 1);
  const std::string batch(encoder.Finish(0));
  for (size_t cut : {size_t{0}, size_t{11}, size_t{13}, batch.size() - 1}) {
    EXPECT_TRUE(absl::IsDataLoss(DecodeBatch(batch.substr(0, cut), [](const JournalRecord&) {
      return absl::OkStatus();
    }))) << cut;
  }
}

}  // namespace
}  // namespace lapse
