// LapseClient against a real lapsed (LAPSED, from CMake): every unary RPC,
// errors as LapseException with the status code; and against an in-process
// fake: retries of idempotent calls only, per-call deadlines.
package dev.lapse.client;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import com.google.protobuf.ByteString;
import dev.lapse.testing.LapsedProcess;
import dev.lapse.v1.ExpireCondition;
import dev.lapse.v1.ExpireMembersRequest;
import dev.lapse.v1.ExpireOutcome;
import dev.lapse.v1.GetCollectionResponse;
import dev.lapse.v1.GetMembersRequest;
import dev.lapse.v1.GetMembersResponse;
import dev.lapse.v1.LapseServiceGrpc;
import dev.lapse.v1.ListCollectionsRequest;
import dev.lapse.v1.ListMembersRequest;
import dev.lapse.v1.ListMembersResponse;
import dev.lapse.v1.MemberOrder;
import dev.lapse.v1.MemberWrite;
import dev.lapse.v1.PersistMembersRequest;
import dev.lapse.v1.PersistOutcome;
import dev.lapse.v1.PutCondition;
import dev.lapse.v1.PutMembersRequest;
import dev.lapse.v1.PutMembersResponse;
import dev.lapse.v1.PutOutcome;
import dev.lapse.v1.RemoveMembersRequest;
import dev.lapse.v1.RemoveMembersResponse;
import io.grpc.Server;
import io.grpc.ServerCallHandler;
import io.grpc.ServerMethodDefinition;
import io.grpc.ServerServiceDefinition;
import io.grpc.ServiceDescriptor;
import io.grpc.Status;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.stub.ServerCalls;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.junit.AfterClass;
import org.junit.BeforeClass;
import org.junit.Test;

public class LapseClientTest {
  private static LapsedProcess lapsed;
  private static LapseClient client;

  @BeforeClass
  public static void startLapsed() throws Exception {
    lapsed = LapsedProcess.start(List.of());
    client = new LapseClient(lapsed.address(), new LapseClient.Options());
  }

  @AfterClass
  public static void stopLapsed() throws Exception {
    client.close();
    assertEquals(0, lapsed.stop());
    lapsed.close();
  }

  private static MemberWrite.Builder member(String key, String value) {
    return MemberWrite.newBuilder().setKey(key).setValue(ByteString.copyFromUtf8(value));
  }

  @Test
  public void putsWithTtlOrInstantOrNoneAndReadsTheDeadlinesBack() {
    Instant at = Instant.now().plus(Duration.ofHours(1)).truncatedTo(ChronoUnit.MILLIS);
    PutMembersResponse put = client.putMembers(PutMembersRequest.newBuilder()
        .setCollection("put")
        .addMembers(Expiration.ttl(Duration.ofMinutes(1)).applyTo(member("ttl", "a")))
        .addMembers(Expiration.at(at).applyTo(member("at", "b")))
        .addMembers(member("none", "c"))
        .build());
    assertEquals(List.of(PutOutcome.PUT_OUTCOME_CREATED, PutOutcome.PUT_OUTCOME_CREATED,
        PutOutcome.PUT_OUTCOME_CREATED),
        put.getResultsList().stream().map(r -> r.getOutcome()).collect(Collectors.toList()));
    assertTrue(Expiration.toInstant(put.getResults(0).getExpireTime())
        .isAfter(Instant.now().plusSeconds(50)));
    assertEquals(at, Expiration.toInstant(put.getResults(1).getExpireTime()));
    assertFalse(put.getResults(2).hasExpireTime());

    GetMembersResponse got = client.getMembers(GetMembersRequest.newBuilder()
        .setCollection("put").addKeys("at").addKeys("missing").build());
    assertTrue(got.getResults(0).getFound());
    assertEquals("b", got.getResults(0).getMember().getValue().toStringUtf8());
    assertFalse(got.getResults(1).getFound());
  }

  @Test
  public void skipsAnIfAbsentWriteAndRefusesOnePastMaxMembers() {
    client.putMembers(PutMembersRequest.newBuilder().setCollection("cond")
        .addMembers(member("a", "1")).addMembers(member("b", "1")).setMaxMembers(2).build());
    PutMembersResponse skipped = client.putMembers(PutMembersRequest.newBuilder()
        .setCollection("cond")
        .addMembers(member("a", "2").setCondition(PutCondition.PUT_CONDITION_IF_ABSENT))
        .build());
    assertEquals(PutOutcome.PUT_OUTCOME_SKIPPED, skipped.getResults(0).getOutcome());
    LapseException refused = assertThrows(LapseException.class,
        () -> client.putMembers(PutMembersRequest.newBuilder().setCollection("cond")
            .addMembers(member("c", "1")).setMaxMembers(2).build()));
    assertEquals(Status.Code.FAILED_PRECONDITION, refused.getCode());
    assertEquals(2, client.getCollection("cond").getCollection().getMemberCount());
  }

  @Test
  public void removesExpiresRefreshesAndPersistsMembers() {
    client.putMembers(PutMembersRequest.newBuilder().setCollection("life")
        .addMembers(Expiration.ttl(Duration.ofMinutes(1)).applyTo(member("a", "")))
        .addMembers(member("b", "")).addMembers(member("c", "")).addMembers(member("d", ""))
        .build());
    RemoveMembersResponse removed = client.removeMembers(RemoveMembersRequest.newBuilder()
        .setCollection("life").addKeys("d").addKeys("d2").build());
    assertTrue(removed.getResults(0).getExisted());
    assertFalse(removed.getResults(1).getExisted());

    ExpireMembersRequest.Builder later = ExpireMembersRequest.newBuilder().setCollection("life")
        .addKeys("a").addKeys("b").setCondition(ExpireCondition.EXPIRE_CONDITION_IF_HAS_EXPIRATION);
    assertEquals(List.of(ExpireOutcome.EXPIRE_OUTCOME_UPDATED,
        ExpireOutcome.EXPIRE_OUTCOME_CONDITION_NOT_MET),
        client.expireMembers(Expiration.ttl(Duration.ofMinutes(2)).applyTo(later).build())
            .getResultsList().stream().map(r -> r.getOutcome()).collect(Collectors.toList()));
    ExpireMembersRequest.Builder now = ExpireMembersRequest.newBuilder().setCollection("life")
        .addKeys("c");
    assertEquals(ExpireOutcome.EXPIRE_OUTCOME_EXPIRED, client.expireMembers(
        Expiration.at(Instant.now().minusSeconds(1)).applyTo(now).build())
        .getResults(0).getOutcome());

    Instant refreshed = Instant.now().plus(Duration.ofHours(2))
        .truncatedTo(ChronoUnit.MILLIS);
    GetMembersResponse got = client.getMembers(Expiration.at(refreshed)
        .refresh(GetMembersRequest.newBuilder().setCollection("life").addKeys("a")).build());
    assertEquals(refreshed, Expiration.toInstant(got.getResults(0).getMember().getExpireTime()));

    assertEquals(List.of(PersistOutcome.PERSIST_OUTCOME_PERSISTED,
        PersistOutcome.PERSIST_OUTCOME_NO_EXPIRATION, PersistOutcome.PERSIST_OUTCOME_NOT_FOUND),
        client.persistMembers(PersistMembersRequest.newBuilder().setCollection("life")
            .addKeys("a").addKeys("b").addKeys("c").build())
            .getResultsList().stream().map(r -> r.getOutcome()).collect(Collectors.toList()));
  }

  @Test
  public void pagesThroughMembersAndCollectionsAndDeletesACollection() {
    client.putMembers(PutMembersRequest.newBuilder().setCollection("list")
        .addMembers(Expiration.ttl(Duration.ofMinutes(3)).applyTo(member("k1", "v")))
        .addMembers(Expiration.ttl(Duration.ofMinutes(1)).applyTo(member("k2", "v")))
        .addMembers(member("k3", "v")).build());
    ListMembersResponse first = client.listMembers(
        ListMembersRequest.newBuilder().setCollection("list").setPageSize(2).build());
    assertEquals(2, first.getMembersCount());
    ListMembersResponse rest = client.listMembers(ListMembersRequest.newBuilder()
        .setCollection("list").setPageSize(2).setPageToken(first.getNextPageToken()).build());
    assertEquals("k3", rest.getMembers(0).getKey());
    assertEquals("", rest.getNextPageToken());
    ListMembersResponse byTime = client.listMembers(ListMembersRequest.newBuilder()
        .setCollection("list").setOrderBy(MemberOrder.MEMBER_ORDER_EXPIRE_TIME).build());
    assertEquals(List.of("k2", "k1", "k3"),
        byTime.getMembersList().stream().map(m -> m.getKey()).collect(Collectors.toList()));

    GetCollectionResponse info = client.getCollection("list");
    assertEquals(3, info.getCollection().getMemberCount());
    assertEquals(2, info.getCollection().getExpiringCount());
    assertEquals("list", client.listCollections(
        ListCollectionsRequest.newBuilder().setPrefix("lis").build()).getCollections(0).getName());

    assertEquals(3, client.deleteCollection("list"));
    assertEquals(0, client.deleteCollection("list"));
    assertEquals(Status.Code.NOT_FOUND,
        assertThrows(LapseException.class, () -> client.getCollection("list")).getCode());
  }

  @Test
  public void mapsBadInputToLapseExceptionInvalidArgumentNamingTheField() {
    LapseException e = assertThrows(LapseException.class,
        () -> client.putMembers(PutMembersRequest.newBuilder().setCollection("bad")
            .addMembers(member("a", ""))
            .addMembers(Expiration.ttl(Duration.ofSeconds(-5)).applyTo(member("b", "")))
            .build()));
    assertEquals(Status.Code.INVALID_ARGUMENT, e.getCode());
    assertTrue(e.getMessage(), e.getStatus().getDescription().contains("members[1].ttl"));
  }

  // An in-process LapseService whose every method fails UNAVAILABLE (or, with
  // `hang`, never answers), counting calls per method.
  private static final class FakeServer implements AutoCloseable {
    final Map<String, AtomicInteger> calls = new ConcurrentHashMap<>();
    final Server server;
    final String name = "fake-" + System.nanoTime();

    FakeServer(boolean hang) throws Exception {
      ServiceDescriptor service = LapseServiceGrpc.getServiceDescriptor();
      ServerServiceDefinition.Builder definition = ServerServiceDefinition.builder(service);
      for (io.grpc.MethodDescriptor<?, ?> method : service.getMethods()) {
        addMethod(definition, method, hang);
      }
      server = InProcessServerBuilder.forName(name).addService(definition.build()).build().start();
    }

    private <Q, R> void addMethod(ServerServiceDefinition.Builder definition,
        io.grpc.MethodDescriptor<Q, R> method, boolean hang) {
      ServerCalls.UnaryMethod<Q, R> unary = (request, observer) -> {
        calls.computeIfAbsent(method.getBareMethodName(), k -> new AtomicInteger())
            .incrementAndGet();
        if (!hang) {
          observer.onError(Status.UNAVAILABLE.withDescription("fake").asRuntimeException());
        }
      };
      ServerCallHandler<Q, R> handler = ServerCalls.asyncUnaryCall(unary);
      definition.addMethod(ServerMethodDefinition.create(method, handler));
    }

    LapseClient client() {
      LapseClient.Options options = new LapseClient.Options();
      options.retryBackoff = new Backoff.Policy(Duration.ofMillis(1), Duration.ofMillis(2), 2.0);
      return new LapseClient(InProcessChannelBuilder.forName(name).build(), options);
    }

    int count(String method) {
      return calls.getOrDefault(method, new AtomicInteger()).get();
    }

    @Override
    public void close() {
      server.shutdownNow();
    }
  }

  private static Status.Code codeOf(Runnable call) {
    return assertThrows(LapseException.class, call::run).getCode();
  }

  @Test
  public void retriesIdempotentCallsOnUnavailableUpToMaxAttempts() throws Exception {
    try (FakeServer fake = new FakeServer(false); LapseClient c = fake.client()) {
      codeOf(() -> c.removeMembers(RemoveMembersRequest.newBuilder().addKeys("k").build()));
      codeOf(() -> c.getMembers(GetMembersRequest.newBuilder().addKeys("k").build()));
      codeOf(() -> c.persistMembers(PersistMembersRequest.newBuilder().addKeys("k").build()));
      codeOf(() -> c.listMembers(ListMembersRequest.getDefaultInstance()));
      codeOf(() -> c.getCollection("c"));
      codeOf(() -> c.listCollections(ListCollectionsRequest.getDefaultInstance()));
      assertEquals(Status.Code.UNAVAILABLE, codeOf(() -> c.deleteCollection("c")));
      for (String method : List.of("RemoveMembers", "GetMembers", "PersistMembers", "ListMembers",
          "GetCollection", "ListCollections", "DeleteCollection")) {
        assertEquals(method, 4, fake.count(method));
      }
    }
  }

  @Test
  public void attemptsWritesWhoseRepetitionCouldChangeTheOutcomeExactlyOnce() throws Exception {
    try (FakeServer fake = new FakeServer(false); LapseClient c = fake.client()) {
      codeOf(() -> c.putMembers(PutMembersRequest.getDefaultInstance()));
      codeOf(() -> c.expireMembers(Expiration.ttl(Duration.ofSeconds(1))
          .applyTo(ExpireMembersRequest.newBuilder()).build()));
      codeOf(() -> c.getMembers(Expiration.ttl(Duration.ofSeconds(1))
          .refresh(GetMembersRequest.newBuilder()).build()));
      assertEquals(1, fake.count("PutMembers"));
      assertEquals(1, fake.count("ExpireMembers"));
      assertEquals(1, fake.count("GetMembers"));
    }
  }

  @Test
  public void endsACallThatGetsNoAnswerAtItsOwnDeadline() throws Exception {
    try (FakeServer fake = new FakeServer(true); LapseClient c = fake.client()) {
      assertEquals(Status.Code.DEADLINE_EXCEEDED,
          codeOf(() -> c.withTimeout(Duration.ofMillis(100)).getCollection("c")));
    }
  }
}
