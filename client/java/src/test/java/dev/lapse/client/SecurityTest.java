// LapseClient's TLS and bearer-token options against a real lapsed (LAPSED,
// from CMake) with --auth_file: a granted token works, an unknown one fails
// UNAUTHENTICATED, one outside its grants PERMISSION_DENIED, a token file is
// read at each call; and with --tls_cert/--tls_key/--tls_client_ca (mTLS) a
// client with a certificate connects, one without cannot. Debian's Netty
// 4.1.48 has no JDK ALPN, which gRPC's TLS needs: on such a classpath the TLS
// tests are skipped (JUnit's assumption) after checking that the client says
// so (UNIMPLEMENTED naming Options.tls).
package dev.lapse.client;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import dev.lapse.testing.LapsedProcess;
import dev.lapse.v1.ExpireMembersRequest;
import dev.lapse.v1.GetMembersRequest;
import dev.lapse.v1.MemberWrite;
import dev.lapse.v1.PutMembersRequest;
import dev.lapse.v1.StartPosition;
import dev.lapse.v1.WatchExpirationsRequest;
import io.grpc.Status;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import org.junit.AfterClass;
import org.junit.Assume;
import org.junit.BeforeClass;
import org.junit.Test;

public class SecurityTest {
  private static LapsedProcess lapsed;
  private static LapsedProcess tlsLapsed;
  private static LapsedProcess.Certs certs;

  @BeforeClass
  public static void startLapsed() throws Exception {
    certs = LapsedProcess.makeCerts();
    Path auth = LapsedProcess.writeAuthFile(Map.of("s3cret", "all *", "reader", "read orders:"));
    lapsed = LapsedProcess.start(List.of("--auth_file=" + auth));
    tlsLapsed = LapsedProcess.start(List.of("--tls_cert=" + certs.serverCert,
        "--tls_key=" + certs.serverKey, "--tls_client_ca=" + certs.ca, "--auth_file=" + auth));
  }

  @AfterClass
  public static void stopLapsed() throws Exception {
    assertEquals(0, lapsed.stop());
    lapsed.close();
    assertEquals(0, tlsLapsed.stop());
    tlsLapsed.close();
  }

  private static LapseClient.Options options(String token) {
    LapseClient.Options options = new LapseClient.Options();
    options.bearerToken = token;
    options.maxAttempts = 1;
    return options;
  }

  private static LapseClient client(LapseClient.Options options) {
    return new LapseClient(lapsed.address(), options);
  }

  private static LapseClient withToken(String token) {
    return client(options(token));
  }

  // A client of the mTLS lapsed; skips the test where Netty has no ALPN.
  private static LapseClient tlsClient(LapseClient.TlsOptions tls) {
    LapseClient.Options options = options("s3cret");
    options.tls = tls;
    try {
      return new LapseClient("localhost:" + tlsLapsed.port(), options);
    } catch (LapseException e) {
      assertEquals(Status.Code.UNIMPLEMENTED, e.getCode());
      assertTrue(e.getMessage(), e.getMessage().contains("Options.tls"));
      Assume.assumeNoException("this classpath's Netty has no JDK ALPN", e);
      throw e;
    }
  }

  private static GetMembersRequest get(String key) {
    return GetMembersRequest.newBuilder().setCollection("orders:1").addKeys(key).build();
  }

  private static PutMembersRequest put(String key) {
    return PutMembersRequest.newBuilder().setCollection("orders:1")
        .addMembers(MemberWrite.newBuilder().setKey(key)).build();
  }

  @Test(timeout = LapsedProcess.PATIENCE_SECONDS * 1000)
  public void acceptsAGrantedTokenAndWatchesWithIt() {
    try (LapseClient c = withToken("s3cret");
        ExpiryWatch watch = c.watch(WatchExpirationsRequest.newBuilder()
            .setCollectionPrefix("orders:").setStartPosition(StartPosition.START_POSITION_OLDEST)
            .build())) {
      c.putMembers(put("a"));
      c.expireMembers(Expiration.at(Instant.now().minusSeconds(1)).applyTo(
          ExpireMembersRequest.newBuilder().setCollection("orders:1").addKeys("a")).build());
      assertEquals("a", watch.next().getKey());
    }
  }

  @Test(timeout = LapsedProcess.PATIENCE_SECONDS * 1000)
  public void readsTheTokenFromBearerTokenFileAtEachCall() throws Exception {
    Path file = LapsedProcess.tempDir().resolve("token");
    Files.writeString(file, "wrong\n");
    LapseClient.Options options = options(null);
    options.bearerTokenFile = file;
    try (LapseClient c = client(options)) {
      assertEquals(Status.Code.UNAUTHENTICATED,
          assertThrows(LapseException.class, () -> c.getMembers(get("a"))).getCode());
      Files.writeString(file, "s3cret\n");
      assertFalse(c.getMembers(get("nothing")).getResults(0).getFound());
    }
  }

  @Test(timeout = LapsedProcess.PATIENCE_SECONDS * 1000)
  public void failsUnauthenticatedForAnUnknownTokenAndPermissionDeniedOutsideTheGrants() {
    try (LapseClient unknown = withToken("guess")) {
      assertEquals(Status.Code.UNAUTHENTICATED,
          assertThrows(LapseException.class, () -> unknown.getMembers(get("a"))).getCode());
    }
    try (LapseClient reader = withToken("reader");
        ExpiryWatch watch = reader.watch(WatchExpirationsRequest.newBuilder()
            .setCollectionPrefix("orders:").build())) {
      reader.getMembers(get("a"));
      LapseException denied = assertThrows(LapseException.class, () -> reader.putMembers(put("b")));
      assertEquals(Status.Code.PERMISSION_DENIED, denied.getCode());
      assertTrue(denied.getMessage(), denied.getMessage().contains("write"));
      assertEquals(Status.Code.PERMISSION_DENIED,
          assertThrows(LapseException.class, watch::hasNext).getCode());
    }
  }

  @Test(timeout = LapsedProcess.PATIENCE_SECONDS * 1000)
  public void connectsOverMtlsWithAClientCertificateAndNotWithout() {
    LapseClient.TlsOptions tls = new LapseClient.TlsOptions();
    tls.caFile = certs.ca;
    try (LapseClient c = tlsClient(tls)) {
      assertEquals(Status.Code.UNAVAILABLE,
          assertThrows(LapseException.class, () -> c.getMembers(get("a"))).getCode());
    }
    tls.certFile = certs.clientCert;
    tls.keyFile = certs.clientKey;
    try (LapseClient c = tlsClient(tls)) {
      assertFalse(c.getMembers(get("nothing")).getResults(0).getFound());
    }
  }

  @Test
  public void refusesACertificateWithoutItsKeyNamingTheOption() {
    LapseClient.Options options = new LapseClient.Options();
    options.tls = new LapseClient.TlsOptions();
    options.tls.certFile = certs.clientCert;
    LapseException e = assertThrows(LapseException.class, () -> client(options));
    assertEquals(Status.Code.INVALID_ARGUMENT, e.getCode());
    assertTrue(e.getMessage(), e.getMessage().contains("Options.tls"));
  }
}
