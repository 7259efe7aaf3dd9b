// Expiration's conversions between java.time and protobuf's Duration and
// Timestamp.
package dev.lapse.client;

import static org.junit.Assert.assertEquals;

import com.google.protobuf.Timestamp;
import dev.lapse.v1.MemberWrite;
import java.time.Duration;
import java.time.Instant;
import org.junit.Test;

public class ExpirationTest {
  @Test
  public void negativeDurationsKeepSecondsAndNanosOfOneSign() {
    com.google.protobuf.Duration d = Expiration.toProto(Duration.ofMillis(-1500));
    assertEquals(-1, d.getSeconds());
    assertEquals(-500_000_000, d.getNanos());
    com.google.protobuf.Duration p = Expiration.toProto(Duration.ofMillis(1500));
    assertEquals(1, p.getSeconds());
    assertEquals(500_000_000, p.getNanos());
  }

  @Test
  public void instantsRoundTripThroughTimestamps() {
    Instant at = Instant.parse("2026-11-23T17:30:00.123Z");
    Timestamp t = Expiration.toProto(at);
    assertEquals(at.getEpochSecond(), t.getSeconds());
    assertEquals(at, Expiration.toInstant(t));
  }

  @Test
  public void appliesATtlOrAnInstantToTheOneofOfAWrite() {
    MemberWrite ttl =
        Expiration.ttl(Duration.ofMinutes(30)).applyTo(MemberWrite.newBuilder()).build();
    assertEquals(MemberWrite.ExpirationCase.TTL, ttl.getExpirationCase());
    assertEquals(1800, ttl.getTtl().getSeconds());
    MemberWrite at = Expiration.at(Instant.EPOCH.plusSeconds(7)).applyTo(MemberWrite.newBuilder())
        .build();
    assertEquals(MemberWrite.ExpirationCase.EXPIRE_TIME, at.getExpirationCase());
    assertEquals(7, at.getExpireTime().getSeconds());
  }
}
