// LapseClient: lapse.v1.LapseService from Java. One blocking method per RPC,
// taking the request message of lapse.proto (stubs generated from proto/ at
// build time; Expiration builds its expirations) and returning the response
// message; failures throw LapseException, which carries the gRPC Status.
//
// Every call has a deadline: Options.timeout, or withTimeout()'s. Calls that
// are safe to repeat are retried on UNAVAILABLE with exponential backoff and
// jitter, within that deadline; writes whose repetition could change the
// outcome (putMembers, expireMembers, a refreshing getMembers) are attempted
// exactly once. Other errors are never retried, RESOURCE_EXHAUSTED included.
// These are the C++ client's rules (client/cpp/include/lapse/client.h).
//
//   try (LapseClient client = new LapseClient("127.0.0.1:50051", new LapseClient.Options())) {
//     client.putMembers(PutMembersRequest.newBuilder()
//         .setCollection("unpaid:user-42").setMaxMembers(3)
//         .addMembers(Expiration.ttl(Duration.ofMinutes(30))
//             .applyTo(MemberWrite.newBuilder().setKey("order-17")))
//         .build());
//     try (ExpiryWatch watch = client.watch(WatchExpirationsRequest.newBuilder()
//         .setCollectionPrefix("unpaid:").build())) {
//       while (watch.hasNext()) handle(watch.next());
//     }
//   }
//
// Security (README's Security section), as the C++ client's ClientOptions:
// Options.tls (a TlsOptions: caFile, certFile, keyFile, serverName) turns TLS
// on (no caFile: the system's CAs; certFile and keyFile: mTLS);
// Options.bearerToken, or Options.bearerTokenFile (read again at every call,
// so a rotated token is picked up), is sent as "authorization: Bearer TOKEN"
// with every call and watch. Options.credentials (grpc ChannelCredentials)
// replaces tls for anything else. Consumer groups: the group calls below and
// worker() (see Worker). Thread-safe; an ExpiryWatch is not.
package dev.lapse.client;

import dev.lapse.v1.AckRequest;
import dev.lapse.v1.AckResponse;
import dev.lapse.v1.ConsumerGroup;
import dev.lapse.v1.CreateConsumerGroupRequest;
import dev.lapse.v1.DeleteCollectionRequest;
import dev.lapse.v1.DeleteConsumerGroupRequest;
import dev.lapse.v1.ExtendLeasesRequest;
import dev.lapse.v1.ExtendLeasesResponse;
import dev.lapse.v1.GetConsumerGroupRequest;
import dev.lapse.v1.ListConsumerGroupsRequest;
import dev.lapse.v1.ListConsumerGroupsResponse;
import dev.lapse.v1.NackRequest;
import dev.lapse.v1.NackResponse;
import dev.lapse.v1.PollRequest;
import dev.lapse.v1.PollResponse;
import dev.lapse.v1.ResetConsumerGroupRequest;
import dev.lapse.v1.DeleteCollectionResponse;
import dev.lapse.v1.ExpireMembersRequest;
import dev.lapse.v1.ExpireMembersResponse;
import dev.lapse.v1.GetCollectionRequest;
import dev.lapse.v1.GetCollectionResponse;
import dev.lapse.v1.GetMembersRequest;
import dev.lapse.v1.GetMembersResponse;
import dev.lapse.v1.LapseServiceGrpc;
import dev.lapse.v1.ListCollectionsRequest;
import dev.lapse.v1.ListCollectionsResponse;
import dev.lapse.v1.ListMembersRequest;
import dev.lapse.v1.ListMembersResponse;
import dev.lapse.v1.PersistMembersRequest;
import dev.lapse.v1.PersistMembersResponse;
import dev.lapse.v1.PutMembersRequest;
import dev.lapse.v1.PutMembersResponse;
import dev.lapse.v1.RemoveMembersRequest;
import dev.lapse.v1.RemoveMembersResponse;
import dev.lapse.v1.WatchExpirationsRequest;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.Deadline;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.netty.handler.codec.http2.Http2SecurityUtil;
import io.netty.handler.ssl.JdkAlpnSslContexts;
import io.netty.handler.ssl.JdkSslContext;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslProvider;
import io.netty.handler.ssl.SupportedCipherSuiteFilter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;
import javax.net.ssl.SSLException;

public final class LapseClient implements AutoCloseable {
  // Settings, with the C++ client's defaults.
  public static final class Options {
    // The deadline of a call (all its attempts) unless the call says otherwise.
    public Duration timeout = Duration.ofSeconds(10);
    // Attempts of a retryable call, the first included; 1 disables retries.
    public int maxAttempts = 4;
    public Backoff.Policy retryBackoff =
        new Backoff.Policy(Duration.ofMillis(50), Duration.ofSeconds(2), 2.0);
    // Between reconnects of a watch; reset by every response.
    public Backoff.Policy watchBackoff =
        new Backoff.Policy(Duration.ofMillis(100), Duration.ofSeconds(10), 2.0);
    // Match the server's --max_message_bytes.
    public int maxMessageBytes = 16 << 20;
    // HTTP/2 keepalive pings while calls are open, so a dead connection under
    // an idle watch is noticed; null disables them (the server must allow the
    // interval).
    public Duration keepaliveTime = null;
    // TLS; null: plaintext (or `credentials`).
    public TlsOptions tls = null;
    // The bearer token, or the file holding it; at most one.
    public String bearerToken = null;
    public Path bearerTokenFile = null;
    // Channel credentials other than tls'; null: plaintext unless tls is set.
    public ChannelCredentials credentials = null;
    // A worker's pause after an empty poll that the server answered sooner
    // than half the wait (it did not wait); reset by every delivery.
    public Backoff.Policy idlePollBackoff =
        new Backoff.Policy(Duration.ofMillis(200), Duration.ofSeconds(2), 2.0);

    public Options copy() {
      Options copy = new Options();
      copy.timeout = timeout;
      copy.maxAttempts = maxAttempts;
      copy.retryBackoff = retryBackoff;
      copy.watchBackoff = watchBackoff;
      copy.maxMessageBytes = maxMessageBytes;
      copy.keepaliveTime = keepaliveTime;
      copy.tls = tls;
      copy.bearerToken = bearerToken;
      copy.bearerTokenFile = bearerTokenFile;
      copy.credentials = credentials;
      copy.idlePollBackoff = idlePollBackoff;
      return copy;
    }
  }

  // The files of a TLS connection (PEM), as lapsectl's --tls-* flags.
  public static final class TlsOptions {
    // The CA to trust; null: the system's.
    public Path caFile = null;
    // The client certificate and its key, for mTLS; both or neither.
    public Path certFile = null;
    public Path keyFile = null;
    // The name to check the server's certificate against; null: the target's
    // host.
    public String serverName = null;
  }

  private final ManagedChannel channel;
  private final Options options;
  // The watches on this channel, which close() ends; shared with every
  // withTimeout() view.
  private final Set<ExpiryWatch> watches;
  private final BearerToken token;
  private final LapseServiceGrpc.LapseServiceBlockingStub stub;

  // A channel to `target` ("host:port" or any gRPC target).
  public LapseClient(String target, Options options) {
    this(channel(target, options), options);
  }

  private static ManagedChannel channel(String target, Options options) {
    if (options.tls != null && options.credentials != null) {
      throw invalidOption("tls: set tls or credentials, not both");
    }
    ManagedChannelBuilder<?> builder;
    if (options.tls != null) {
      builder = NettyChannelBuilder.forTarget(target).sslContext(http2SslContext(options.tls));
    } else if (options.credentials != null) {
      builder = Grpc.newChannelBuilder(target, options.credentials);
    } else {
      builder = Grpc.newChannelBuilder(target, InsecureChannelCredentials.create());
    }
    builder.maxInboundMessageSize(options.maxMessageBytes);
    if (options.tls != null && options.tls.serverName != null) {
      builder.overrideAuthority(options.tls.serverName);
    }
    if (options.keepaliveTime != null) {
      builder.keepAliveTime(options.keepaliveTime.toNanos(), TimeUnit.NANOSECONDS);
    }
    return builder.build();
  }

  private static LapseException invalidOption(String what) {
    return new LapseException(
        Status.INVALID_ARGUMENT.withDescription("Options." + what).asRuntimeException());
  }

  // TLS with `tls`'s files over the JDK's own TLS, offering HTTP/2 by ALPN.
  // Built by hand because Debian's Netty 4.1.48 cannot configure ALPN for the
  // JDK provider, which is all grpc-java's TlsChannelCredentials would use
  // (see JdkAlpnSslContexts); grpc-java still checks that the server chose h2.
  private static SslContext http2SslContext(TlsOptions tls) {
    if ((tls.certFile == null) != (tls.keyFile == null)) {
      throw invalidOption("tls: certFile and keyFile go together (mTLS)");
    }
    SslContextBuilder builder = SslContextBuilder.forClient().sslProvider(SslProvider.JDK)
        .ciphers(Http2SecurityUtil.CIPHERS, SupportedCipherSuiteFilter.INSTANCE);
    try {
      if (tls.caFile != null) builder.trustManager(tls.caFile.toFile());
      if (tls.certFile != null) builder.keyManager(tls.certFile.toFile(), tls.keyFile.toFile());
      return JdkAlpnSslContexts.http2Client((JdkSslContext) builder.build());
    } catch (IllegalArgumentException | SSLException e) {
      throw invalidOption("tls: cannot read " + e.getMessage());
    }
  }

  // Adds "authorization: Bearer TOKEN" to every call, from Options.
  private static final class BearerToken implements ClientInterceptor {
    private static final Metadata.Key<String> AUTHORIZATION =
        Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
    private final String token;
    private final Path file;

    BearerToken(Options options) {
      if (options.bearerToken != null && options.bearerTokenFile != null) {
        throw invalidOption("bearerToken: set bearerToken or bearerTokenFile, not both");
      }
      this.token = options.bearerToken;
      this.file = options.bearerTokenFile;
    }

    // The token; UNAUTHENTICATED naming the file when it cannot be read or is
    // empty.
    private String token() {
      if (file == null) return token;
      String read;
      try {
        read = Files.readString(file).trim();
      } catch (IOException e) {
        throw Status.UNAUTHENTICATED
            .withDescription("cannot read the bearer token file " + file + ": " + e)
            .asRuntimeException();
      }
      if (read.isEmpty()) {
        throw Status.UNAUTHENTICATED
            .withDescription("the bearer token file " + file + " is empty: write the token into it")
            .asRuntimeException();
      }
      return read;
    }

    @Override
    public <Q, R> ClientCall<Q, R> interceptCall(
        MethodDescriptor<Q, R> method, CallOptions callOptions, Channel next) {
      String current = token();
      return new ForwardingClientCall.SimpleForwardingClientCall<Q, R>(
          next.newCall(method, callOptions)) {
        @Override
        public void start(Listener<R> listener, Metadata headers) {
          if (current != null) headers.put(AUTHORIZATION, "Bearer " + current);
          super.start(listener, headers);
        }
      };
    }
  }

  // Over `channel`, which the client then owns and closes.
  public LapseClient(ManagedChannel channel, Options options) {
    this(channel, options, ConcurrentHashMap.newKeySet());
  }

  private LapseClient(ManagedChannel channel, Options options, Set<ExpiryWatch> watches) {
    this.channel = channel;
    this.options = options;
    this.watches = watches;
    this.token = new BearerToken(options);
    this.stub = LapseServiceGrpc.newBlockingStub(channel).withInterceptors(token);
  }

  Options options() {
    return options;
  }

  // The same client (same channel) whose calls have `timeout` as their
  // deadline: client.withTimeout(Duration.ofSeconds(1)).getCollection(name).
  public LapseClient withTimeout(Duration timeout) {
    Options changed = options.copy();
    changed.timeout = timeout;
    return new LapseClient(channel, changed, watches);
  }

  // Closes the watches of this client (their hasNext() returns false) and
  // shuts the channel down, for this client and every withTimeout() view.
  @Override
  public void close() {
    for (ExpiryWatch watch : watches) watch.close();
    channel.shutdownNow();
  }

  // Never retried.
  public PutMembersResponse putMembers(PutMembersRequest request) {
    return call(LapseServiceGrpc.LapseServiceBlockingStub::putMembers, request, false);
  }

  // Retried unless it refreshes deadlines.
  public GetMembersResponse getMembers(GetMembersRequest request) {
    boolean idempotent =
        request.getRefreshExpirationCase()
            == GetMembersRequest.RefreshExpirationCase.REFRESHEXPIRATION_NOT_SET;
    return call(LapseServiceGrpc.LapseServiceBlockingStub::getMembers, request, idempotent);
  }

  // Retried.
  public RemoveMembersResponse removeMembers(RemoveMembersRequest request) {
    return call(LapseServiceGrpc.LapseServiceBlockingStub::removeMembers, request, true);
  }

  // A deadline in the past expires the members now, with their events. Never
  // retried.
  public ExpireMembersResponse expireMembers(ExpireMembersRequest request) {
    return call(LapseServiceGrpc.LapseServiceBlockingStub::expireMembers, request, false);
  }

  // Retried.
  public PersistMembersResponse persistMembers(PersistMembersRequest request) {
    return call(LapseServiceGrpc.LapseServiceBlockingStub::persistMembers, request, true);
  }

  // One page; only an empty next_page_token ends the listing. Retried.
  public ListMembersResponse listMembers(ListMembersRequest request) {
    return call(LapseServiceGrpc.LapseServiceBlockingStub::listMembers, request, true);
  }

  // NOT_FOUND when the collection has no live member. Retried.
  public GetCollectionResponse getCollection(String name) {
    return call(
        LapseServiceGrpc.LapseServiceBlockingStub::getCollection,
        GetCollectionRequest.newBuilder().setName(name).build(),
        true);
  }

  // Retried.
  public ListCollectionsResponse listCollections(ListCollectionsRequest request) {
    return call(LapseServiceGrpc.LapseServiceBlockingStub::listCollections, request, true);
  }

  // How many live members the collection had (0 if none). Retried.
  public long deleteCollection(String name) {
    DeleteCollectionResponse response =
        call(
            LapseServiceGrpc.LapseServiceBlockingStub::deleteCollection,
            DeleteCollectionRequest.newBuilder().setName(name).build(),
            true);
    return response.getRemovedCount();
  }

  // A blocking iterator of expiry events that resumes by itself (see
  // ExpiryWatch); `listener` may be null.
  public ExpiryWatch watch(WatchExpirationsRequest request, ExpiryWatch.Listener listener) {
    ExpiryWatch watch =
        new ExpiryWatch(
            LapseServiceGrpc.newBlockingStub(channel).withInterceptors(token),
            request,
            options.watchBackoff,
            listener,
            watches::remove);
    watches.add(watch);
    return watch;
  }

  public ExpiryWatch watch(WatchExpirationsRequest request) {
    return watch(request, null);
  }

  // Creates a consumer group; ALREADY_EXISTS if it exists. Never retried.
  public ConsumerGroup createConsumerGroup(CreateConsumerGroupRequest request) {
    return call(LapseServiceGrpc.LapseServiceBlockingStub::createConsumerGroup, request, false)
        .getGroup();
  }

  // The group with up to `maxLeases` of its leases; NOT_FOUND. Retried.
  public ConsumerGroup getConsumerGroup(String name, int maxLeases) {
    return call(
            LapseServiceGrpc.LapseServiceBlockingStub::getConsumerGroup,
            GetConsumerGroupRequest.newBuilder().setName(name).setMaxLeases(maxLeases).build(),
            true)
        .getGroup();
  }

  // One page; only an empty next_page_token ends the listing. Retried.
  public ListConsumerGroupsResponse listConsumerGroups(ListConsumerGroupsRequest request) {
    return call(LapseServiceGrpc.LapseServiceBlockingStub::listConsumerGroups, request, true);
  }

  // The group as it was; NOT_FOUND. Never retried.
  public ConsumerGroup deleteConsumerGroup(String name) {
    return call(
            LapseServiceGrpc.LapseServiceBlockingStub::deleteConsumerGroup,
            DeleteConsumerGroupRequest.newBuilder().setName(name).build(),
            false)
        .getGroup();
  }

  // Moves the group, dropping its pending events. Never retried.
  public ConsumerGroup resetConsumerGroup(ResetConsumerGroupRequest request) {
    return call(LapseServiceGrpc.LapseServiceBlockingStub::resetConsumerGroup, request, false)
        .getGroup();
  }

  // Leases events, waiting up to request.wait for one (the long poll; the
  // call's deadline is Options.timeout after the wait). Never retried: a lost
  // answer would leave its events leased until their visibility timeout.
  public PollResponse poll(PollRequest request) {
    Duration wait = Duration.ofSeconds(request.getWait().getSeconds(), request.getWait().getNanos());
    return withTimeout(options.timeout.plus(wait))
        .call(LapseServiceGrpc.LapseServiceBlockingStub::poll, request, false);
  }

  // Per lease, code 0 (OK) or 9 (FAILED_PRECONDITION: the lease is no longer
  // held; the event may be handled twice). Retried.
  public AckResponse ack(AckRequest request) {
    return call(LapseServiceGrpc.LapseServiceBlockingStub::ack, request, true);
  }

  // Releases leases for redelivery; results as ack's. Retried.
  public NackResponse nack(NackRequest request) {
    return call(LapseServiceGrpc.LapseServiceBlockingStub::nack, request, true);
  }

  // Results as ack's. Retried.
  public ExtendLeasesResponse extendLeases(ExtendLeasesRequest request) {
    return call(LapseServiceGrpc.LapseServiceBlockingStub::extendLeases, request, true);
  }

  // A Worker of `group` named `consumer` handing each event to `handler`;
  // call its run().
  public Worker worker(String group, String consumer, Worker.Handler handler,
      Worker.Options workerOptions) {
    return new Worker(this, group, consumer, handler, workerOptions);
  }

  // Calls `method` until it succeeds, fails with anything but UNAVAILABLE, is
  // not `idempotent`, has used up maxAttempts, or the next backoff would end
  // past the deadline.
  private <Q, R> R call(
      BiFunction<LapseServiceGrpc.LapseServiceBlockingStub, Q, R> method,
      Q request,
      boolean idempotent) {
    Deadline deadline = Deadline.after(options.timeout.toNanos(), TimeUnit.NANOSECONDS);
    Backoff backoff = new Backoff(options.retryBackoff);
    for (int attempts = 1; ; ++attempts) {
      try {
        return method.apply(stub.withDeadline(deadline), request);
      } catch (StatusRuntimeException e) {
        if (!idempotent
            || e.getStatus().getCode() != Status.Code.UNAVAILABLE
            || attempts >= options.maxAttempts) {
          throw new LapseException(e);
        }
        Duration delay = backoff.next();
        if (deadline.timeRemaining(TimeUnit.NANOSECONDS) <= delay.toNanos()) {
          throw new LapseException(e);
        }
        try {
          Thread.sleep(delay.toMillis(), delay.toNanosPart() % 1_000_000);
        } catch (InterruptedException interrupted) {
          Thread.currentThread().interrupt();
          throw new LapseException(
              Status.CANCELLED.withDescription("interrupted between retries").asRuntimeException());
        }
      }
    }
  }
}
