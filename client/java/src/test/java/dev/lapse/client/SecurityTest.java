// LapseClient's TLS and bearer-token options against a real lapsed (LAPSED,
// from CMake) with --auth_file: a granted token works, an unknown one fails
// UNAUTHENTICATED, one outside its grants PERMISSION_DENIED, a token file is
// read at each call; over TLS (--tls_cert/--tls_key), where grpc-java refuses
// a connection whose ALPN did not pick h2, calls and watches work with the
// test CA, fail UNAVAILABLE with another CA or a server name the certificate
// does not hold; with --tls_client_ca (mTLS) a client with a certificate
// connects, one without cannot.
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
import org.junit.BeforeClass;
import org.junit.Test;

public class SecurityTest {
  private static LapsedProcess lapsed;
  private static LapsedProcess tlsLapsed;
  private static LapsedProcess mtlsLapsed;
  private static LapsedProcess.Certs certs;

  @BeforeClass
  public static void startLapsed() throws Exception {
    certs = LapsedProcess.makeCerts();
    Path auth = LapsedProcess.writeAuthFile(Map.of("s3cret", "all *", "reader", "read orders:"));
    lapsed = LapsedProcess.start(List.of("--auth_file=" + auth));
    tlsLapsed = LapsedProcess.start(List.of("--tls_cert=" + certs.serverCert,
        "--tls_key=" + certs.serverKey, "--auth_file=" + auth));
    mtlsLapsed = LapsedProcess.start(List.of("--tls_cert=" + certs.serverCert,
        "--tls_key=" + certs.serverKey, "--tls_client_ca=" + certs.ca, "--auth_file=" + auth));
  }

  @AfterClass
  public static void stopLapsed() throws Exception {
    assertEquals(0, lapsed.stop());
    lapsed.close();
    assertEquals(0, tlsLapsed.stop());
    tlsLapsed.close();
    assertEquals(0, mtlsLapsed.stop());
    mtlsLapsed.close();
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

  // A client of `server` at localhost, over TLS.
  private static LapseClient tlsClient(LapsedProcess server, LapseClient.TlsOptions tls) {
    LapseClient.Options options = options("s3cret");
    options.tls = tls;
    return new LapseClient("localhost:" + server.port(), options);
  }

  private static LapseClient.TlsOptions trusting(Path ca) {
    LapseClient.TlsOptions tls = new LapseClient.TlsOptions();
    tls.caFile = ca;
    return tls;
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
  public void callsAndWatchesOverTlsTrustingTheServersCa() {
    try (LapseClient c = tlsClient(tlsLapsed, trusting(certs.ca));
        ExpiryWatch watch = c.watch(WatchExpirationsRequest.newBuilder()
            .setCollectionPrefix("orders:").setStartPosition(StartPosition.START_POSITION_OLDEST)
            .build())) {
      c.putMembers(put("tls"));
      assertTrue(c.getMembers(get("tls")).getResults(0).getFound());
      c.expireMembers(Expiration.at(Instant.now().minusSeconds(1)).applyTo(
          ExpireMembersRequest.newBuilder().setCollection("orders:1").addKeys("tls")).build());
      assertEquals("tls", watch.next().getKey());
    }
  }

  @Test(timeout = LapsedProcess.PATIENCE_SECONDS * 1000)
  public void failsUnavailableWhenTheServersCertificateIsFromAnotherCa() throws Exception {
    LapsedProcess.Certs other = LapsedProcess.makeCerts();
    try (LapseClient c = tlsClient(tlsLapsed, trusting(other.ca))) {
      assertEquals(Status.Code.UNAVAILABLE,
          assertThrows(LapseException.class, () -> c.getMembers(get("a"))).getCode());
    }
  }

  @Test(timeout = LapsedProcess.PATIENCE_SECONDS * 1000)
  public void failsUnavailableWhenTheCertificateDoesNotNameTheServer() {
    LapseClient.TlsOptions tls = trusting(certs.ca);
    tls.serverName = "elsewhere.example";
    try (LapseClient c = tlsClient(tlsLapsed, tls)) {
      assertEquals(Status.Code.UNAVAILABLE,
          assertThrows(LapseException.class, () -> c.getMembers(get("a"))).getCode());
    }
  }

  @Test(timeout = LapsedProcess.PATIENCE_SECONDS * 1000)
  public void connectsOverMtlsWithAClientCertificateAndNotWithout() {
    LapseClient.TlsOptions tls = trusting(certs.ca);
    try (LapseClient c = tlsClient(mtlsLapsed, tls)) {
      assertEquals(Status.Code.UNAVAILABLE,
          assertThrows(LapseException.class, () -> c.getMembers(get("a"))).getCode());
    }
    tls.certFile = certs.clientCert;
    tls.keyFile = certs.clientKey;
    try (LapseClient c = tlsClient(mtlsLapsed, tls)) {
      assertFalse(c.getMembers(get("nothing")).getResults(0).getFound());
    }
  }

  @Test
  public void refusesATlsFileThatHoldsNoCertificateNamingTheOption() throws Exception {
    Path notPem = LapsedProcess.tempDir().resolve("ca.crt");
    Files.writeString(notPem, "not a certificate\n");
    LapseClient.Options options = new LapseClient.Options();
    options.tls = trusting(notPem);
    LapseException e = assertThrows(LapseException.class, () -> client(options));
    assertEquals(Status.Code.INVALID_ARGUMENT, e.getCode());
    assertTrue(e.getMessage(), e.getMessage().contains("Options.tls"));
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
