"""TLS, mTLS and bearer tokens against a real lapsed (--tls_*, --auth_file),
with certificates made by testing/test_certs.sh."""

import grpc
import pytest
from lapse_testing import PAST, LapsedProcess, make_certs, take, write_auth_file

import lapse
from lapse.v1 import lapse_pb2 as pb


@pytest.fixture
def certs(tmp_path):
    return make_certs(tmp_path)


@pytest.fixture
def authorizing(tmp_path):
    """lapsed with an auth file: "s3cret" may read, write and watch orders:."""
    write_auth_file(tmp_path / "auth", {"s3cret": "read,write,watch orders:"})
    process = LapsedProcess([f"--auth_file={tmp_path / 'auth'}"])
    yield process
    process.kill()


def test_a_token_the_auth_file_grants_is_accepted_by_calls_and_watches(authorizing):
    options = lapse.ClientOptions(bearer_token="s3cret")
    with lapse.Client(authorizing.address, options) as client:
        with client.watch(prefix="orders:", start=lapse.Start.OLDEST) as watch:
            client.put("orders:1", {"a": b"1"})
            client.expire("orders:1", ["a"], deadline=PAST)
            assert [e.key for e in take(watch, 1)] == ["a"]
        # The generated stub goes through the same channel: its streams too.
        put = pb.PutMembersRequest(collection="orders:2", members=[pb.MemberWrite(key="b")])
        request = pb.StreamWritesRequest(operations=[pb.WriteOperation(put_members=put)])
        (response,) = list(client.stub.StreamWrites(iter([request]), timeout=10))
        assert response.results[0].code == 0


def test_a_wrong_token_is_unauthenticated_and_a_grant_missing_permission_denied(authorizing):
    with lapse.Client(authorizing.address, lapse.ClientOptions(bearer_token="wrong")) as client:
        with pytest.raises(lapse.LapseError) as wrong:
            client.get("orders:1", ["a"])
        assert wrong.value.code == grpc.StatusCode.UNAUTHENTICATED
    with lapse.Client(authorizing.address) as client:
        with pytest.raises(lapse.LapseError) as none:
            client.get("orders:1", ["a"])
        assert none.value.code == grpc.StatusCode.UNAUTHENTICATED
    with lapse.Client(authorizing.address, lapse.ClientOptions(bearer_token="s3cret")) as client:
        with pytest.raises(lapse.LapseError) as denied:
            client.delete("orders:1")
        assert denied.value.code == grpc.StatusCode.PERMISSION_DENIED
        assert "admin" in denied.value.details


def test_a_token_file_is_read_again_when_it_changes(authorizing, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("wrong\n")
    options = lapse.ClientOptions(bearer_token_file=str(token_file))
    with lapse.Client(authorizing.address, options) as client:
        with pytest.raises(lapse.LapseError) as wrong:
            client.get("orders:1", ["a"])
        assert wrong.value.code == grpc.StatusCode.UNAUTHENTICATED
        rotated = tmp_path / "token.next"
        rotated.write_text("  s3cret\n")
        rotated.rename(token_file)
        assert client.get("orders:1", ["a"])[0].found is False
        token_file.unlink()
        with pytest.raises(lapse.LapseError) as unreadable:
            client.get("orders:1", ["a"])
        assert unreadable.value.code == grpc.StatusCode.UNAUTHENTICATED
        assert str(token_file) in unreadable.value.details


def test_mtls_with_a_client_certificate_works_and_without_one_fails(certs):
    lapsed = LapsedProcess(
        [
            f"--tls_cert={certs.server_cert}",
            f"--tls_key={certs.server_key}",
            f"--tls_client_ca={certs.ca}",
        ]
    )
    try:
        mtls = lapse.TlsOptions(
            ca_file=certs.ca, cert_file=certs.client_cert, key_file=certs.client_key
        )
        with lapse.Client(lapsed.address, lapse.ClientOptions(tls=mtls)) as client:
            assert client.put("orders", {"a": b"1"})[0].outcome == lapse.PutOutcome.CREATED
        by_name = lapse.TlsOptions(
            ca_file=certs.ca,
            cert_file=certs.client_cert,
            key_file=certs.client_key,
            server_name="localhost",
        )
        with lapse.Client(lapsed.address, lapse.ClientOptions(tls=by_name)) as client:
            assert client.get("orders", ["a"])[0].found
        no_certificate = lapse.ClientOptions(tls=lapse.TlsOptions(ca_file=certs.ca), max_attempts=1)
        with lapse.Client(lapsed.address, no_certificate) as client:
            with pytest.raises(lapse.LapseError) as refused:
                client.get("orders", ["a"], timeout=5)
            assert refused.value.code == grpc.StatusCode.UNAVAILABLE
    finally:
        lapsed.kill()


def test_tls_files_that_cannot_be_read_are_invalid_argument_naming_the_field(tmp_path):
    missing = str(tmp_path / "missing.crt")
    with pytest.raises(lapse.InvalidArgumentError, match="tls.ca_file"):
        lapse.Client("127.0.0.1:1", lapse.ClientOptions(tls=lapse.TlsOptions(ca_file=missing)))
    with pytest.raises(lapse.InvalidArgumentError, match="tls.cert_file, tls.key_file"):
        lapse.Client("127.0.0.1:1", lapse.ClientOptions(tls=lapse.TlsOptions(cert_file=missing)))
