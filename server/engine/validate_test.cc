#include "server/engine/validate.h"

#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/base/deadline.h"

namespace lapse {
namespace {

const absl::Time kNow = absl::FromUnixMillis(1'700'000'000'000);

// Small limits, so every boundary is cheap to reach.
Limits SmallLimits() {
  Limits limits;
  limits.max_collection_name_bytes = 8;
  limits.max_key_bytes = 6;
  limits.max_value_bytes = 10;
  limits.max_members_per_request = 3;
  limits.default_page_size = 5;
  limits.max_page_size = 20;
  limits.max_ttl = absl::Hours(1);
  return limits;
}

MATCHER_P(IsInvalid, message, "") {
  return arg.code() == absl::StatusCode::kInvalidArgument && arg.message() == message;
}

absl::Status StatusOf(const absl::StatusOr<int64_t>& s) { return s.status(); }

// ---- Names ----

TEST(ValidateNameTest, AcceptsPrintableAsciiUpToTheLimit) {
  EXPECT_TRUE(ValidateName("collection", "!~az09:_", SmallLimits()).ok());
  EXPECT_TRUE(ValidateName("collection", "a", SmallLimits()).ok());
}

TEST(ValidateNameTest, RejectsEmptyAndOversizedNamesNamingTheField) {
  EXPECT_THAT(ValidateName("collection", "", SmallLimits()),
              IsInvalid("collection: must not be empty"));
  EXPECT_THAT(ValidateName("name", "123456789", SmallLimits()),
              IsInvalid("name: 9 bytes exceeds the limit of 8"));
}

TEST(ValidateNameTest, RejectsSpacesControlsAndNonAsciiWithTheOffset) {
  EXPECT_THAT(ValidateName("prefix", "a b", SmallLimits()),
              IsInvalid("prefix: invalid byte 0x20 at offset 1; names are printable ASCII "
                        "without spaces"));
  EXPECT_THAT(ValidateName("name", "ab\x7f", SmallLimits()),
              IsInvalid("name: invalid byte 0x7f at offset 2; names are printable ASCII "
                        "without spaces"));
  EXPECT_THAT(ValidateName("name", "\xc3\xa9", SmallLimits()),
              IsInvalid("name: invalid byte 0xc3 at offset 0; names are printable ASCII "
                        "without spaces"));
}

// ---- UTF-8 ----

// The offset of the first byte that makes a key invalid UTF-8 or a control
// character; kValid when there is none.
struct KeyByteCase {
  absl::string_view key;
  size_t invalid_at;
};

constexpr size_t kValid = absl::string_view::npos;

void PrintTo(const KeyByteCase& c, std::ostream* os) {
  *os << '"' << absl::CHexEscape(c.key) << '"';
  if (c.invalid_at == kValid) {
    *os << " is valid";
  } else {
    *os << " is invalid at " << c.invalid_at;
  }
}

const KeyByteCase kKeyByteCases[] = {
    // Valid UTF-8 of every length.
    {"plain ascii ~", kValid},
    {"\xc2\xa0", kValid},          // U+00A0
    {"caf\xc3\xa9", kValid},       // é
    {"\xe2\x82\xac", kValid},      // €
    {"\xef\xbf\xbf", kValid},      // U+FFFF
    {"\xf0\x9f\x98\x80", kValid},  // emoji
    {"\xf4\x8f\xbf\xbf", kValid},  // U+10FFFF
    // Control characters, at their offset.
    {absl::string_view("a\0b", 3), 1},
    {"ab\x1f", 2},
    {"\x7f", 0},
    {"a\xc2\x80", 1},  // U+0080, C1
    {"\xc2\x9f", 0},   // U+009F, C1
    // Overlong encodings.
    {"ab\xc0\x80", 2},
    {"\xc1\xbf", 0},
    {"\xe0\x80\x80", 0},
    {"\xe0\x9f\xbf", 0},
    {"\xf0\x80\x80\x80", 0},
    {"\xf0\x8f\xbf\xbf", 0},
    // Surrogates and code points past the last.
    {"\xed\xa0\x80", 0},       // U+D800
    {"\xed\xbf\xbf", 0},       // U+DFFF
    {"\xed\x9f\xbf", kValid},  // U+D7FF
    {"\xf4\x90\x80\x80", 0},   // U+110000
    // Bad lead bytes and truncated sequences.
    {"a\x80", 1},
    {"\xf8\x88\x80\x80\x80", 0},
    {"\xff", 0},
    {"ok\xe2\x82", 2},
    {"\xe2\x28\xa1", 0},
};

class FindInvalidKeyByteTest : public ::testing::TestWithParam<KeyByteCase> {};

TEST_P(FindInvalidKeyByteTest, FindsTheFirstInvalidByte) {
  EXPECT_EQ(FindInvalidKeyByte(GetParam().key), GetParam().invalid_at);
}

INSTANTIATE_TEST_SUITE_P(Utf8, FindInvalidKeyByteTest, ::testing::ValuesIn(kKeyByteCases));

// Names and keys are read eight bytes at a time while they are printable
// ASCII: every byte value at every place of a 24-byte string, and a second
// bad byte after the first, must give what a byte-by-byte reading gives.
TEST(ValidateNameTest, FindsEveryBadByteAtEveryOffsetOfALongName) {
  Limits limits;
  limits.max_collection_name_bytes = 64;
  for (int b = 0; b < 256; ++b) {
    for (size_t at = 0; at < 24; ++at) {
      std::string name(24, 'a');
      name[at] = static_cast<char>(b);
      const absl::Status s = ValidateName("name", name, limits);
      if (b >= 0x21 && b <= 0x7e) {
        EXPECT_TRUE(s.ok()) << b << " at " << at;
        continue;
      }
      EXPECT_THAT(s, IsInvalid(absl::StrFormat("name: invalid byte 0x%02x at offset %d; names "
                                               "are printable ASCII without spaces",
                                               b, at)))
          << b << " at " << at;
      for (size_t later = at + 1; later < 24; ++later) {
        name[later] = '\x01';
        EXPECT_FALSE(ValidateName("name", name, limits).ok());
        EXPECT_THAT(ValidateName("name", name, limits).message(),
                    ::testing::HasSubstr(absl::StrFormat("at offset %d;", at)));
        name[later] = 'a';
      }
    }
  }
}

TEST(FindInvalidKeyByteTest, FindsEveryBadByteAtEveryOffsetOfALongKey) {
  for (int b = 0; b < 256; ++b) {
    for (size_t at = 0; at < 24; ++at) {
      std::string key(24, 'a');
      key[at] = static_cast<char>(b);
      // A byte of 0x80 or more alone is never UTF-8.
      const size_t expected = b >= 0x20 && b <= 0x7e ? absl::string_view::npos : at;
      EXPECT_EQ(FindInvalidKeyByte(key), expected) << b << " at " << at;
      for (size_t later = at + 1; later < 24; ++later) {
        key[later] = '\x7f';
        EXPECT_EQ(FindInvalidKeyByte(key), expected == absl::string_view::npos ? later : at)
            << b << " at " << at << ", 0x7f at " << later;
        key[later] = 'a';
      }
    }
  }
}

// ---- Keys ----

TEST(ValidateKeyTest, AcceptsKeysUpToTheLimitInBytes) {
  EXPECT_TRUE(ValidateKey("keys[0]", "abcdef", SmallLimits()).ok());
  EXPECT_TRUE(ValidateKey("keys[0]", "caf\xc3\xa9", SmallLimits()).ok());
}

TEST(ValidateKeyTest, RejectsEmptyOversizedAndInvalidKeysNamingTheField) {
  EXPECT_THAT(ValidateKey("keys[0]", "", SmallLimits()), IsInvalid("keys[0]: must not be empty"));
  EXPECT_THAT(ValidateKey("keys[1]", "abcdefg", SmallLimits()),
              IsInvalid("keys[1]: 7 bytes exceeds the limit of 6"));
  EXPECT_THAT(ValidateKey("members[2].key", "ab\xc0\x80", SmallLimits()),
              IsInvalid("members[2].key: invalid UTF-8 or control character at offset 2"));
}

TEST(ValidateCountTest, RequiresAtLeastOneAndAtMostTheLimit) {
  EXPECT_THAT(ValidateCount("keys", 0, SmallLimits()), IsInvalid("keys: at least one is required"));
  EXPECT_TRUE(ValidateCount("keys", 1, SmallLimits()).ok());
  EXPECT_TRUE(ValidateCount("keys", 3, SmallLimits()).ok());
  EXPECT_THAT(ValidateCount("members", 4, SmallLimits()),
              IsInvalid("members: 4 entries exceed the limit of 3"));
}

TEST(ValidateKeysTest, NamesTheBadKeyByItsIndex) {
  std::vector<absl::string_view> keys = {"a", "b", ""};
  EXPECT_THAT(ValidateKeys(keys, SmallLimits()), IsInvalid("keys[2]: must not be empty"));
}

TEST(ValidateKeysTest, RejectsDuplicatesNamingBothIndexes) {
  std::vector<absl::string_view> keys = {"a", "b", "a"};
  EXPECT_THAT(ValidateKeys(keys, SmallLimits()), IsInvalid("keys[2]: duplicates keys[0]"));
}

TEST(ValidateKeyListTest, NamesKeysWithTheSuffix) {
  const std::vector<std::string> keys = {"x", "x"};
  auto key_of = [&](size_t i) { return absl::string_view(keys[i]); };
  EXPECT_THAT(ValidateKeyList("members", keys.size(), key_of, ".key", SmallLimits()),
              IsInvalid("members[1].key: duplicates members[0].key"));
  EXPECT_THAT(ValidateKeyList("members", 0, key_of, ".key", SmallLimits()),
              IsInvalid("members: at least one is required"));
}

// ---- Pages ----

TEST(PageSizeTest, NegativeIsInvalidZeroIsTheDefaultAndLargeIsCoerced) {
  EXPECT_THAT(ValidatePageSize(-1), IsInvalid("page_size: must not be negative"));
  EXPECT_TRUE(ValidatePageSize(0).ok());
  EXPECT_EQ(EffectivePageSize(0, SmallLimits()), 5u);
  EXPECT_EQ(EffectivePageSize(1, SmallLimits()), 1u);
  EXPECT_EQ(EffectivePageSize(20, SmallLimits()), 20u);
  EXPECT_EQ(EffectivePageSize(21, SmallLimits()), 20u);
}

// ---- Deadlines ----

TEST(DeadlineOfTest, NoExpirationIsNoDeadline) {
  EXPECT_EQ(*DeadlineOf(Expiration::None(), "", kNow, PastDeadline::kRejected, SmallLimits()),
            kNoDeadlineMs);
}

TEST(DeadlineOfTest, TtlRoundsUpToTheMillisecond) {
  EXPECT_EQ(*DeadlineOf(Expiration::Ttl(absl::Microseconds(1500)), "", kNow,
                        PastDeadline::kRejected, SmallLimits()),
            FloorMillis(kNow) + 2);
  EXPECT_EQ(*DeadlineOf(Expiration::Ttl(absl::Hours(1)), "", kNow, PastDeadline::kRejected,
                        SmallLimits()),
            FloorMillis(kNow + absl::Hours(1)));
}

TEST(DeadlineOfTest, TtlMustBePositiveAndAtMostTheMaximum) {
  const Limits limits = SmallLimits();
  EXPECT_THAT(StatusOf(DeadlineOf(Expiration::Ttl(absl::ZeroDuration()), "", kNow,
                                  PastDeadline::kRejected, limits)),
              IsInvalid("ttl: must be positive"));
  EXPECT_THAT(StatusOf(DeadlineOf(Expiration::Ttl(-absl::Seconds(1)), "refresh_", kNow,
                                  PastDeadline::kRejected, limits)),
              IsInvalid("refresh_ttl: must be positive"));
  EXPECT_THAT(StatusOf(DeadlineOf(Expiration::Ttl(absl::Hours(1) + absl::Nanoseconds(1)), "", kNow,
                                  PastDeadline::kRejected, limits)),
              IsInvalid("ttl: exceeds the maximum of 1h"));
}

TEST(DeadlineOfTest, RefusesDeadlinesAfterTheLatestAMemberKeeps) {
  Limits limits = SmallLimits();
  limits.max_ttl = absl::Hours(24 * 365 * 10'000);
  const absl::Time latest = absl::FromUnixMillis(kLatestDeadlineMs);
  EXPECT_EQ(*DeadlineOf(Expiration::At(latest), "", kNow, PastDeadline::kRejected, limits),
            kLatestDeadlineMs);
  EXPECT_THAT(StatusOf(DeadlineOf(Expiration::At(latest + absl::Milliseconds(1)), "default_", kNow,
                                  PastDeadline::kRejected, limits)),
              IsInvalid("default_expire_time: ends after the latest deadline lapse keeps (the "
                        "year 6429)"));
  EXPECT_THAT(StatusOf(DeadlineOf(Expiration::Ttl(latest - kNow + absl::Milliseconds(1)), "", kNow,
                                  PastDeadline::kRejected, limits)),
              IsInvalid("ttl: ends after the latest deadline lapse keeps (the year 6429)"));
}

TEST(DeadlineOfTest, ExpireTimeMustBeFiniteAndWithinTheMaximum) {
  const Limits limits = SmallLimits();
  EXPECT_THAT(StatusOf(DeadlineOf(Expiration::At(absl::InfiniteFuture()), "", kNow,
                                  PastDeadline::kAllowed, limits)),
              IsInvalid("expire_time: must be a finite time"));
  EXPECT_THAT(StatusOf(DeadlineOf(Expiration::At(absl::InfinitePast()), "", kNow,
                                  PastDeadline::kAllowed, limits)),
              IsInvalid("expire_time: must be a finite time"));
  EXPECT_EQ(
      *DeadlineOf(Expiration::At(kNow + absl::Hours(1)), "", kNow, PastDeadline::kRejected, limits),
      FloorMillis(kNow + absl::Hours(1)));
  EXPECT_THAT(StatusOf(DeadlineOf(Expiration::At(kNow + absl::Hours(1) + absl::Nanoseconds(1)), "",
                                  kNow, PastDeadline::kRejected, limits)),
              IsInvalid("expire_time: is more than 1h in the future"));
}

TEST(DeadlineOfTest, PastExpireTimeIsRejectedForWritesAndAllowedForExpire) {
  const Limits limits = SmallLimits();
  EXPECT_THAT(
      StatusOf(DeadlineOf(Expiration::At(kNow), "refresh_", kNow, PastDeadline::kRejected, limits)),
      IsInvalid("refresh_expire_time: must be in the future"));
  EXPECT_EQ(*DeadlineOf(Expiration::At(kNow + absl::Nanoseconds(1)), "", kNow,
                        PastDeadline::kRejected, limits),
            FloorMillis(kNow) + 1);
  EXPECT_EQ(*DeadlineOf(Expiration::At(kNow - absl::Seconds(5)), "", kNow, PastDeadline::kAllowed,
                        limits),
            FloorMillis(kNow) - 5000);
}

// ---- Put members ----

TEST(ValidateMemberWriteTest, ErrorsNameTheMemberAndItsField) {
  const Limits limits = SmallLimits();
  EXPECT_THAT(StatusOf(ValidateMemberWrite(2, "v", Expiration::Ttl(absl::ZeroDuration()), false,
                                           kNow, limits)),
              IsInvalid("members[2].ttl: must be positive"));
  EXPECT_THAT(StatusOf(ValidateMemberWrite(0, "v", Expiration::At(kNow), false, kNow, limits)),
              IsInvalid("members[0].expire_time: must be in the future"));
  EXPECT_THAT(
      StatusOf(ValidateMemberWrite(1, "v", Expiration::Ttl(absl::Seconds(1)), true, kNow, limits)),
      IsInvalid("members[1].keep_expiration: cannot be combined with ttl or "
                "expire_time"));
}

TEST(ValidateMemberWriteTest, ValuesAreBoundedInBytes) {
  const Limits limits = SmallLimits();
  EXPECT_TRUE(ValidateMemberWrite(0, "0123456789", Expiration::None(), false, kNow, limits).ok());
  EXPECT_THAT(
      StatusOf(ValidateMemberWrite(3, "0123456789a", Expiration::None(), false, kNow, limits)),
      IsInvalid("members[3].value: 11 bytes exceeds the limit of 10"));
}

TEST(ValidateMemberWriteTest, ReturnsTheDeadlineAskedFor) {
  const Limits limits = SmallLimits();
  EXPECT_EQ(*ValidateMemberWrite(0, "v", Expiration::Ttl(absl::Seconds(1)), false, kNow, limits),
            FloorMillis(kNow) + 1000);
  EXPECT_EQ(*ValidateMemberWrite(0, "v", Expiration::None(), true, kNow, limits), kNoDeadlineMs);
}

}  // namespace
}  // namespace lapse
