// JdkAlpnSslContexts against a JDK TLS server, in memory (two EmbeddedChannels
// passing each other's bytes): the client offers h2 by ALPN and reports the
// server's choice to SslHandler, where grpc-java reads it; a server without
// ALPN leaves none, which grpc-java refuses. Certificates: test_certs.sh
// (TEST_CERTS, from CMake).
package io.netty.handler.ssl;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import dev.lapse.testing.LapsedProcess;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.embedded.EmbeddedChannel;
import java.util.List;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLParameters;
import org.junit.BeforeClass;
import org.junit.Test;

public class JdkAlpnSslContextsTest {
  private static LapsedProcess.Certs certs;

  @BeforeClass
  public static void makeCerts() throws Exception {
    certs = LapsedProcess.makeCerts();
  }

  // A client SslHandler for localhost from JdkAlpnSslContexts.
  private static SslHandler client() throws Exception {
    SslContext context = JdkAlpnSslContexts.http2Client((JdkSslContext) SslContextBuilder
        .forClient().sslProvider(SslProvider.JDK).trustManager(certs.ca.toFile()).build());
    return new SslHandler(context.newEngine(ByteBufAllocator.DEFAULT, "localhost", 443));
  }

  // A JDK TLS server's SslHandler choosing among `protocols` by ALPN (none:
  // no ALPN).
  private static SslHandler server(String... protocols) throws Exception {
    SSLEngine engine = SslContextBuilder
        .forServer(certs.serverCert.toFile(), certs.serverKey.toFile())
        .sslProvider(SslProvider.JDK).build().newEngine(ByteBufAllocator.DEFAULT);
    SSLParameters parameters = engine.getSSLParameters();
    parameters.setApplicationProtocols(protocols);
    engine.setSSLParameters(parameters);
    return new SslHandler(engine);
  }

  // Passes the two channels' bytes to each other until both handshakes are
  // over.
  private static void handshake(SslHandler client, SslHandler server) {
    EmbeddedChannel clientChannel = new EmbeddedChannel(client);
    EmbeddedChannel serverChannel = new EmbeddedChannel(server);
    for (int round = 0; round < 100; round++) {
      if (client.handshakeFuture().isDone() && server.handshakeFuture().isDone()) return;
      pass(clientChannel, serverChannel);
      pass(serverChannel, clientChannel);
    }
    throw new AssertionError("the handshake did not finish in 100 rounds");
  }

  private static void pass(EmbeddedChannel from, EmbeddedChannel to) {
    for (Object bytes = from.readOutbound(); bytes != null; bytes = from.readOutbound()) {
      to.writeInbound(bytes);
    }
  }

  @Test
  public void offersOnlyH2() throws Exception {
    SslContext context = JdkAlpnSslContexts.http2Client((JdkSslContext) SslContextBuilder
        .forClient().sslProvider(SslProvider.JDK).build());
    assertTrue(context.isClient());
    assertEquals(List.of("h2"), context.applicationProtocolNegotiator().protocols());
  }

  @Test(timeout = LapsedProcess.PATIENCE_SECONDS * 1000)
  public void reportsTheH2TheServerChose() throws Exception {
    SslHandler client = client();
    handshake(client, server("h2"));
    assertTrue(client.handshakeFuture().isSuccess());
    assertEquals("h2", client.applicationProtocol());
  }

  @Test(timeout = LapsedProcess.PATIENCE_SECONDS * 1000)
  public void reportsNoProtocolWhenTheServerHasNoAlpn() throws Exception {
    SslHandler client = client();
    handshake(client, server());
    assertTrue(client.handshakeFuture().isSuccess());
    assertNull(client.applicationProtocol());
  }

  @Test
  public void refusesAServerContext() throws Exception {
    JdkSslContext server = (JdkSslContext) SslContextBuilder
        .forServer(certs.serverCert.toFile(), certs.serverKey.toFile())
        .sslProvider(SslProvider.JDK).build();
    assertThrows(IllegalArgumentException.class, () -> JdkAlpnSslContexts.http2Client(server));
  }
}
