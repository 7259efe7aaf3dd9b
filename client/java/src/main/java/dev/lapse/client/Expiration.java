// Expiration: the expiration of a write (AIP-214), a time to live counted
// from the server's clock or an absolute Instant, and the conversions between
// java.time and the protobuf Duration / Timestamp of lapse.proto.
//
//   MemberWrite order = Expiration.ttl(Duration.ofMinutes(30))
//       .applyTo(MemberWrite.newBuilder().setKey("order-17")).build();
//   if (result.hasExpireTime()) deadline = Expiration.toInstant(result.getExpireTime());
package dev.lapse.client;

import com.google.protobuf.Timestamp;
import dev.lapse.v1.ExpireMembersRequest;
import dev.lapse.v1.GetMembersRequest;
import dev.lapse.v1.MemberWrite;
import java.time.Duration;
import java.time.Instant;

public final class Expiration {
  private final Duration ttl;
  private final Instant at;

  private Expiration(Duration ttl, Instant at) {
    this.ttl = ttl;
    this.at = at;
  }

  public static Expiration ttl(Duration ttl) {
    return new Expiration(ttl, null);
  }

  public static Expiration at(Instant at) {
    return new Expiration(null, at);
  }

  public MemberWrite.Builder applyTo(MemberWrite.Builder write) {
    return ttl != null ? write.setTtl(toProto(ttl)) : write.setExpireTime(toProto(at));
  }

  public ExpireMembersRequest.Builder applyTo(ExpireMembersRequest.Builder request) {
    return ttl != null ? request.setTtl(toProto(ttl)) : request.setExpireTime(toProto(at));
  }

  // Slides the deadline of the members a GetMembers finds (never retried).
  public GetMembersRequest.Builder refresh(GetMembersRequest.Builder request) {
    return ttl != null
        ? request.setRefreshTtl(toProto(ttl))
        : request.setRefreshExpireTime(toProto(at));
  }

  // Seconds and nanos with the same sign, as protobuf's Duration wants
  // (java.time keeps nanos positive: -1.5 s is -2 s + 0.5 s).
  public static com.google.protobuf.Duration toProto(Duration d) {
    long seconds = d.getSeconds();
    int nanos = d.getNano();
    if (seconds < 0 && nanos > 0) {
      seconds += 1;
      nanos -= 1_000_000_000;
    }
    return com.google.protobuf.Duration.newBuilder().setSeconds(seconds).setNanos(nanos).build();
  }

  public static Timestamp toProto(Instant t) {
    return Timestamp.newBuilder().setSeconds(t.getEpochSecond()).setNanos(t.getNano()).build();
  }

  public static Instant toInstant(Timestamp t) {
    return Instant.ofEpochSecond(t.getSeconds(), t.getNanos());
  }
}
