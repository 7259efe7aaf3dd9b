// JdkAlpnSslContexts: a client SslContext that negotiates HTTP/2 by ALPN over
// the JDK's own TLS (Java 9 and later), for Debian's Netty 4.1.48, which has
// no public way to build one.
//
// Why this file is in Netty's package: Debian's netty-handler 4.1.48 leaves
// out JdkAlpnApplicationProtocolNegotiator (with the Jetty ALPN and Conscrypt
// support it was written for), so JdkSslContext refuses an ALPN
// ApplicationProtocolConfig ("JDK provider does not support ALPN protocol"),
// and grpc-java's TLS with it. The jar still holds the Java 9 path that class
// used: Java9SslEngine, which puts the protocols on the JDK SSLEngine
// (SSLParameters.setApplicationProtocols), checks the server's choice and
// reports it to SslHandler through ApplicationProtocolAccessor (what
// grpc-java's handshake check reads), and the JdkSslContext constructor that
// takes a negotiator. Both are package-private; this class, compiled into the
// same package on the classpath, joins them as upstream Netty does on Java 9+.
// A Netty with its own ALPN support makes it unnecessary.
//
//   SslContext h2 = JdkAlpnSslContexts.http2Client((JdkSslContext) SslContextBuilder.forClient()
//       .sslProvider(SslProvider.JDK).trustManager(caFile).build());
//   ManagedChannel channel = NettyChannelBuilder.forTarget(target).sslContext(h2).build();
//
// Thread-safe: it holds nothing.
package io.netty.handler.ssl;

import java.util.List;

// JdkApplicationProtocolNegotiator is deprecated, but it is what JdkSslContext
// takes.
@SuppressWarnings("deprecation")
public final class JdkAlpnSslContexts {
  private JdkAlpnSslContexts() {}

  // A client context with `tls`'s SSLContext and cipher suites whose engines
  // offer "h2" by ALPN. A server that picks another protocol fails the
  // handshake; one that picks none leaves no negotiated protocol, which
  // grpc-java refuses ("Failed ALPN negotiation").
  public static SslContext http2Client(JdkSslContext tls) {
    if (!tls.isClient()) {
      throw new IllegalArgumentException("JdkAlpnSslContexts.http2Client: a server context");
    }
    JdkApplicationProtocolNegotiator h2 = new JdkBaseApplicationProtocolNegotiator(
        (engine, negotiator, isServer) -> new Java9SslEngine(engine, negotiator, isServer),
        JdkBaseApplicationProtocolNegotiator.FAIL_SELECTOR_FACTORY,
        JdkBaseApplicationProtocolNegotiator.FAIL_SELECTION_LISTENER_FACTORY,
        List.of(ApplicationProtocolNames.HTTP_2));
    return new JdkSslContext(tls.context(), /*isClient=*/true, tls.cipherSuites(),
        IdentityCipherSuiteFilter.INSTANCE, h2, ClientAuth.NONE, /*protocols=*/null,
        /*startTls=*/false);
  }
}
