// TLS and mTLS end to end: a LapseServer with ServerOptions::tls and the C++
// client with ClientOptions::tls, certificates made by openssl for each test
// (testing/test_certs.h); rotation of the server's files under an open watch.
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lapse/client.h"
#include "testing/lapsed_process.h"
#include "testing/recorder.h"
#include "testing/temp_dir.h"
#include "testing/test_certs.h"
#include "testing/test_server.h"

namespace lapse::testing {
namespace {

using ::testing::ElementsAre;

client::MemberWrite Member(const std::string& key, absl::Duration ttl) {
  client::MemberWrite write;
  write.key = key;
  write.value = "v:" + key;
  write.expiration = client::Expiration::Ttl(ttl);
  return write;
}

class TlsTest : public ::testing::Test {
 protected:
  TlsTest() : ca_(dir_.path(), "ca"), server_cert_(ca_.Issue("server", TestCa::kLoopbackNames)) {}

  ServerOptions Options(bool mutual) {
    ServerOptions options = TestOptions();
    options.tls.cert_file = server_cert_.cert_file;
    options.tls.key_file = server_cert_.key_file;
    if (mutual) options.tls.client_ca_file = ca_.cert_file();
    return options;
  }

  // A client that trusts `ca` and presents `identity`, if any; refusals are
  // not retried.
  static client::ClientOptions ClientTls(const std::string& ca_file,
                                         const TestCa::Issued* identity = nullptr) {
    client::ClientOptions options;
    options.max_attempts = 1;
    options.tls.emplace();
    options.tls->ca_file = ca_file;
    if (identity != nullptr) {
      options.tls->cert_file = identity->cert_file;
      options.tls->key_file = identity->key_file;
    }
    return options;
  }

  static std::string Target(const TestServer& server) {
    return absl::StrCat("127.0.0.1:", server.port());
  }

  static absl::Status Ping(client::Client& client) { return client.ListCollections().status(); }

  TempDir dir_;
  TestCa ca_;
  TestCa::Issued server_cert_;
};

TEST_F(TlsTest, PutAndWatchWorkOverTls) {
  TestServer server(Options(/*mutual=*/false));
  client::Client client(Target(server), ClientTls(ca_.cert_file()));
  Recorder recorder;
  absl::StatusOr<std::unique_ptr<client::Subscription>> watch =
      client.Watch(client::WatchOptions(), recorder.Handlers());
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE(recorder.WaitForConnections(1));
  ASSERT_TRUE(client.PutMembers("orders", {Member("a", absl::Seconds(1))}).ok());
  server.ExpireAfter(absl::Seconds(2));
  ASSERT_TRUE(recorder.WaitForEvents(1));
  EXPECT_THAT(recorder.keys(), ElementsAre("a"));
}

TEST_F(TlsTest, APlaintextClientIsRefusedByATlsServer) {
  TestServer server(Options(/*mutual=*/false));
  client::ClientOptions plaintext;
  plaintext.max_attempts = 1;
  client::Client client(Target(server), plaintext);
  EXPECT_EQ(Ping(client).code(), absl::StatusCode::kUnavailable);
}

TEST_F(TlsTest, AClientThatDoesNotTrustTheServersCaIsRefused) {
  TestServer server(Options(/*mutual=*/false));
  TestCa other(dir_.path(), "other");
  client::Client client(Target(server), ClientTls(other.cert_file()));
  EXPECT_EQ(Ping(client).code(), absl::StatusCode::kUnavailable);
}

TEST_F(TlsTest, MtlsServesAClientCertificateOfItsCaSpiffeIdentitiesIncluded) {
  TestServer server(Options(/*mutual=*/true));
  const TestCa::Issued plain = ca_.Issue("client", {"DNS:client"});
  const TestCa::Issued workload = ca_.Issue("workload", {"URI:spiffe://cluster.local/ns/x/sa/y"});
  for (const TestCa::Issued* identity : {&plain, &workload}) {
    client::Client client(Target(server), ClientTls(ca_.cert_file(), identity));
    EXPECT_TRUE(Ping(client).ok()) << identity->cert_file << ": " << Ping(client);
  }
}

TEST_F(TlsTest, MtlsRefusesAClientWithoutACertificate) {
  TestServer server(Options(/*mutual=*/true));
  client::Client client(Target(server), ClientTls(ca_.cert_file()));
  EXPECT_EQ(Ping(client).code(), absl::StatusCode::kUnavailable);
}

TEST_F(TlsTest, MtlsRefusesACertificateFromAnotherCa) {
  TestServer server(Options(/*mutual=*/true));
  TestCa other(dir_.path(), "other");
  const TestCa::Issued stranger = other.Issue("stranger", {"DNS:stranger"});
  client::Client client(Target(server), ClientTls(ca_.cert_file(), &stranger));
  EXPECT_EQ(Ping(client).code(), absl::StatusCode::kUnavailable);
}

TEST_F(TlsTest, MtlsRefusesAnExpiredCertificate) {
  TestServer server(Options(/*mutual=*/true));
  const TestCa::Issued expired = ca_.Issue(
      "expired", {"DNS:expired"}, absl::Now() - absl::Hours(48), absl::Now() - absl::Hours(24));
  client::Client client(Target(server), ClientTls(ca_.cert_file(), &expired));
  EXPECT_EQ(Ping(client).code(), absl::StatusCode::kUnavailable);
}

TEST_F(TlsTest, AClientWhoseTlsFilesCannotBeReadFailsEveryCallNamingTheFile) {
  client::ClientOptions options = ClientTls(dir_.path() + "/missing.crt");
  client::Client client("127.0.0.1:1", options);
  const absl::Status status = Ping(client);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              ::testing::HasSubstr("tls.ca_file=" + dir_.path() + "/missing.crt"));
  Recorder recorder;
  EXPECT_EQ(client.Watch(client::WatchOptions(), recorder.Handlers()).status(), status);
}

// The server's files live in a directory reached through a symlink that is
// swapped to rotate them, as the kubelet updates a mounted Secret.
TEST_F(TlsTest, RotatedCertificatesServeNewConnectionsWhileAnOpenWatchKeepsReceiving) {
  const std::string live = dir_.path() + "/live";
  const std::string first = dir_.path() + "/first";
  ASSERT_EQ(mkdir(first.c_str(), 0700), 0);
  ASSERT_EQ(rename(server_cert_.cert_file.c_str(), (first + "/tls.crt").c_str()), 0);
  ASSERT_EQ(rename(server_cert_.key_file.c_str(), (first + "/tls.key").c_str()), 0);
  ASSERT_EQ(symlink("first", live.c_str()), 0);
  ServerOptions options = Options(/*mutual=*/false);
  options.tls.cert_file = live + "/tls.crt";
  options.tls.key_file = live + "/tls.key";
  options.tls.refresh_interval = absl::Seconds(1);
  TestServer server(options);

  client::Client old_client(Target(server), ClientTls(ca_.cert_file()));
  Recorder recorder;
  absl::StatusOr<std::unique_ptr<client::Subscription>> watch =
      old_client.Watch(client::WatchOptions(), recorder.Handlers());
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE(recorder.WaitForConnections(1));

  // The new certificate chains only to a new CA.
  TestCa next_ca(dir_.path(), "next-ca");
  const TestCa::Issued next = next_ca.Issue("next", TestCa::kLoopbackNames);
  const std::string second = dir_.path() + "/second";
  ASSERT_EQ(mkdir(second.c_str(), 0700), 0);
  ASSERT_EQ(rename(next.cert_file.c_str(), (second + "/tls.crt").c_str()), 0);
  ASSERT_EQ(rename(next.key_file.c_str(), (second + "/tls.key").c_str()), 0);
  ASSERT_EQ(symlink("second", (live + ".new").c_str()), 0);
  ASSERT_EQ(rename((live + ".new").c_str(), live.c_str()), 0);

  // A client that trusts only the new CA is refused until the server has
  // read the new files; its own retries (and gRPC's reconnects) poll for it.
  client::ClientOptions polling = ClientTls(next_ca.cert_file());
  polling.default_timeout = kPatience;
  polling.max_attempts = INT_MAX;
  polling.retry_backoff = {absl::Milliseconds(50), absl::Milliseconds(200), 2.0};
  polling.reconnect_backoff_initial = absl::Milliseconds(50);
  polling.reconnect_backoff_max = absl::Milliseconds(200);
  client::Client new_client(Target(server), polling);
  ASSERT_TRUE(Ping(new_client).ok());

  ASSERT_TRUE(new_client.PutMembers("orders", {Member("after-rotation", absl::Seconds(1))}).ok());
  server.ExpireAfter(absl::Seconds(2));
  ASSERT_TRUE(recorder.WaitForEvents(1));
  EXPECT_THAT(recorder.keys(), ElementsAre("after-rotation"));
  EXPECT_EQ(recorder.connections(), 1);
  EXPECT_EQ(recorder.reconnects(), 0);
}

// What the first handshake would find out, lapsed finds at start-up.
TEST_F(TlsTest, LapsedExitsWith1AtStartUpOnTlsFilesItCannotUse) {
  const TestCa::Issued other = ca_.Issue("other", TestCa::kLoopbackNames);
  const std::string missing = dir_.path() + "/missing.crt";
  struct Case {
    std::vector<std::string> flags;
    std::string says;
  };
  const Case cases[] = {
      {{"--tls_cert=" + missing, "--tls_key=" + server_cert_.key_file},
       "tls_cert=" + missing + ": cannot read it"},
      {{"--tls_cert=" + server_cert_.key_file, "--tls_key=" + server_cert_.key_file},
       "holds no PEM certificate"},
      {{"--tls_cert=" + server_cert_.cert_file, "--tls_key=" + server_cert_.cert_file},
       "holds no unencrypted PEM private key"},
      {{"--tls_cert=" + server_cert_.cert_file, "--tls_key=" + other.key_file},
       "tls_key=" + other.key_file + " does not match the certificate in tls_cert="},
      {{"--tls_cert=" + server_cert_.cert_file, "--tls_key=" + server_cert_.key_file,
        "--tls_client_ca=" + missing},
       "tls_client_ca=" + missing + ": cannot read it"},
  };
  for (const Case& c : cases) {
    LapsedProcess lapsed(LAPSED_PATH, c.flags);
    ASSERT_TRUE(lapsed.spawned());
    const ChildProcess::Result result = lapsed.Wait();
    EXPECT_EQ(result.exit_code, 1) << c.says << "\n" << result.out << result.err;
    EXPECT_THAT(result.err, ::testing::HasSubstr(c.says));
  }
}

TEST_F(TlsTest, LapsedServesTlsAndSaysSoInItsStartLine) {
  LapsedProcess lapsed(
      LAPSED_PATH, {"--tls_cert=" + server_cert_.cert_file, "--tls_key=" + server_cert_.key_file});
  ASSERT_GT(lapsed.port(), 0) << lapsed.Wait().err;
  EXPECT_THAT(lapsed.start_line(),
              ::testing::HasSubstr(absl::StrCat("(port ", lapsed.port(), ") (TLS)")));
  client::Client client(lapsed.address(), ClientTls(ca_.cert_file()));
  EXPECT_TRUE(Ping(client).ok()) << Ping(client);
  EXPECT_EQ(lapsed.Stop(), 0);
}

}  // namespace
}  // namespace lapse::testing
