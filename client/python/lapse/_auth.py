"""TLS and bearer-token settings of a Client's channel (ClientOptions.tls,
bearer_token, bearer_token_file), as the C++ client has them.

TlsOptions files are PEM, read when the Client is made; one that cannot be
read is InvalidArgumentError naming the field. A bearer token travels with
every call as "authorization: Bearer TOKEN" metadata; a token file is read
again whenever it changes (device, inode, size, modification time), so a
rotated token is used from the next call on, and a call fails
UNAUTHENTICATED, naming the file, when it cannot be read or is empty.

Thread-safe.
"""

import dataclasses
import os
import threading
from typing import Optional, Tuple

import grpc

from lapse.errors import InvalidArgumentError, LapseError


@dataclasses.dataclass(frozen=True)
class TlsOptions:
    """TLS for a Client's channel; the files are PEM."""

    # CA certificates that verify the server; "": the system's roots.
    ca_file: str = ""
    # mTLS: this client's certificate (chain) and its private key; both or
    # neither.
    cert_file: str = ""
    key_file: str = ""
    # The name the server's certificate must carry, when it is not the
    # target's host (tests; a server reached by IP address).
    server_name: str = ""


def _read(path: str, field: str) -> Optional[bytes]:
    if not path:
        return None
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as error:
        raise InvalidArgumentError(f"tls.{field}: cannot read {path}: {error.strerror}") from None


def channel_credentials(tls: TlsOptions) -> grpc.ChannelCredentials:
    """The credentials of `tls`; InvalidArgumentError naming the field of a
    file that cannot be read, or of a certificate without its key."""
    if bool(tls.cert_file) != bool(tls.key_file):
        raise InvalidArgumentError("tls.cert_file, tls.key_file: give both or neither")
    return grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca_file, "ca_file"),
        private_key=_read(tls.key_file, "key_file"),
        certificate_chain=_read(tls.cert_file, "cert_file"),
    )


def _identity(path: str) -> Optional[Tuple[int, int, int, int]]:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


class BearerToken:
    """The "authorization" metadata of a call: `token`, or what `file` holds
    (surrounding whitespace ignored)."""

    def __init__(self, token: str, file: str):
        self._file = file
        self._lock = threading.Lock()
        self._token = token
        self._identity: Optional[Tuple[int, int, int, int]] = None

    def metadata(self) -> Tuple[Tuple[str, str], ...]:
        if not self._file:
            return (("authorization", f"Bearer {self._token}"),) if self._token else ()
        identity = _identity(self._file)
        with self._lock:
            if identity is None or identity != self._identity:
                try:
                    with open(self._file, "r", encoding="utf-8") as file:
                        self._token = file.read().strip()
                except (OSError, UnicodeDecodeError) as error:
                    raise LapseError(
                        grpc.StatusCode.UNAUTHENTICATED,
                        f"cannot read the bearer token file {self._file}: {error}",
                    ) from None
                self._identity = identity
            if not self._token:
                raise LapseError(
                    grpc.StatusCode.UNAUTHENTICATED,
                    f"the bearer token file {self._file} is empty",
                )
            return (("authorization", f"Bearer {self._token}"),)


class _Details(grpc.ClientCallDetails):
    def __init__(self, details, metadata):
        self.method = details.method
        self.timeout = details.timeout
        self.metadata = metadata
        self.credentials = details.credentials
        self.wait_for_ready = details.wait_for_ready
        self.compression = getattr(details, "compression", None)


class TokenInterceptor(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds the bearer token to every call of the channel (the stub's too)."""

    def __init__(self, token: BearerToken):
        self._token = token

    def _details(self, details):
        return _Details(details, tuple(details.metadata or ()) + self._token.metadata())

    def intercept_unary_unary(self, continuation, client_call_details, request):
        return continuation(self._details(client_call_details), request)

    def intercept_unary_stream(self, continuation, client_call_details, request):
        return continuation(self._details(client_call_details), request)

    def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        return continuation(self._details(client_call_details), request_iterator)

    def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return continuation(self._details(client_call_details), request_iterator)
