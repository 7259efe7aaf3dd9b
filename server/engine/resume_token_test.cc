#include "server/engine/resume_token.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/base/coding.h"

namespace lapse {
namespace {

using ::testing::HasSubstr;

constexpr StoreId kStore = {.high = 0x0123456789abcdef, .low = 0xfedcba9876543210};

TEST(ResumeTokenTest, RoundTripsOnePartition) {
  const std::string token =
      EncodeResumeToken({.store = kStore, .partitions = {{0, 1795000000000000748}}});
  absl::StatusOr<ResumePosition> position = DecodeResumeToken(token);
  ASSERT_TRUE(position.ok()) << position.status();
  EXPECT_EQ(position->store, kStore);
  ASSERT_EQ(position->partitions.size(), 1u);
  EXPECT_EQ(position->partitions[0].partition, 0u);
  EXPECT_EQ(position->partitions[0].sequence, 1795000000000000748u);
}

TEST(ResumeTokenTest, RoundTripsManyPartitionsInTheSameFormat) {
  ResumePosition many{.store = kStore};
  for (uint32_t p = 0; p < 1000; ++p) many.partitions.push_back({p * 3, uint64_t{p} * 1000});
  absl::StatusOr<ResumePosition> position = DecodeResumeToken(EncodeResumeToken(many));
  ASSERT_TRUE(position.ok()) << position.status();
  ASSERT_EQ(position->partitions.size(), 1000u);
  EXPECT_EQ(position->partitions[999].partition, 2997u);
  EXPECT_EQ(position->partitions[999].sequence, 999000u);
  EXPECT_EQ(static_cast<uint8_t>(EncodeResumeToken(many)[0]), kResumeTokenVersion);
}

TEST(ResumeTokenTest, StoreIdIsThirtyTwoHexDigits) {
  EXPECT_EQ(kStore.ToString(), "0123456789abcdeffedcba9876543210");
  EXPECT_NE(StoreId::Random(), StoreId::Random());
}

void ExpectInvalid(absl::string_view token, absl::string_view why) {
  absl::StatusOr<ResumePosition> position = DecodeResumeToken(token);
  EXPECT_EQ(position.status().code(), absl::StatusCode::kInvalidArgument) << why;
  EXPECT_THAT(position.status().message(), HasSubstr("resume_token: "));
  EXPECT_THAT(position.status().message(), HasSubstr(why));
}

TEST(ResumeTokenTest, RefusesMalformedTokensNamingTheField) {
  const std::string good = EncodeResumeToken({.store = kStore, .partitions = {{0, 7}}});
  ExpectInvalid("", "empty");
  ExpectInvalid(good.substr(0, good.size() - 1), "truncated");
  ExpectInvalid(good.substr(0, 10), "truncated");
  ExpectInvalid(good + "x", "1 bytes after its end");
  std::string newer = good;
  newer[0] = 2;
  ExpectInvalid(newer, "format version 2 is not known");

  std::string none(1, static_cast<char>(kResumeTokenVersion));
  PutFixed64(&none, kStore.high);
  PutFixed64(&none, kStore.low);
  std::string too_many = none;
  PutVarint32(&none, 0);
  ExpectInvalid(none, "names 0 partitions");
  PutVarint32(&too_many, kMaxTokenPartitions + 1);
  ExpectInvalid(too_many, "names 65537 partitions");

  std::string unordered(1, static_cast<char>(kResumeTokenVersion));
  PutFixed64(&unordered, kStore.high);
  PutFixed64(&unordered, kStore.low);
  PutVarint32(&unordered, 2);
  for (uint32_t partition : {3u, 3u}) {
    PutVarint32(&unordered, partition);
    PutVarint64(&unordered, 1);
  }
  ExpectInvalid(unordered, "partitions out of order");
}

}  // namespace
}  // namespace lapse
