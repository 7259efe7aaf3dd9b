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
// Options.credentials (grpc ChannelCredentials, plaintext by default) is
// where TLS and call credentials go. Thread-safe; an ExpiryWatch is not.
package dev.lapse.client;

import dev.lapse.v1.DeleteCollectionRequest;
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
import io.grpc.ChannelCredentials;
import io.grpc.Deadline;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;

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
    // TLS and call credentials go here.
    public ChannelCredentials credentials = InsecureChannelCredentials.create();

    public Options copy() {
      Options copy = new Options();
      copy.timeout = timeout;
      copy.maxAttempts = maxAttempts;
      copy.retryBackoff = retryBackoff;
      copy.watchBackoff = watchBackoff;
      copy.maxMessageBytes = maxMessageBytes;
      copy.keepaliveTime = keepaliveTime;
      copy.credentials = credentials;
      return copy;
    }
  }

  private final ManagedChannel channel;
  private final Options options;
  // The watches on this channel, which close() ends; shared with every
  // withTimeout() view.
  private final Set<ExpiryWatch> watches;
  private final LapseServiceGrpc.LapseServiceBlockingStub stub;

  // A channel to `target` ("host:port" or any gRPC target).
  public LapseClient(String target, Options options) {
    this(channel(target, options), options);
  }

  private static ManagedChannel channel(String target, Options options) {
    ManagedChannelBuilder<?> builder =
        Grpc.newChannelBuilder(target, options.credentials)
            .maxInboundMessageSize(options.maxMessageBytes);
    if (options.keepaliveTime != null) {
      builder.keepAliveTime(options.keepaliveTime.toNanos(), TimeUnit.NANOSECONDS);
    }
    return builder.build();
  }

  // Over `channel`, which the client then owns and closes.
  public LapseClient(ManagedChannel channel, Options options) {
    this(channel, options, ConcurrentHashMap.newKeySet());
  }

  private LapseClient(ManagedChannel channel, Options options, Set<ExpiryWatch> watches) {
    this.channel = channel;
    this.options = options;
    this.watches = watches;
    this.stub = LapseServiceGrpc.newBlockingStub(channel);
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
            LapseServiceGrpc.newBlockingStub(channel),
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
