"""Test support for the Python client and example: a real lapsed as a child
process (like testing/lapsed_process.h) and a patient read of a watch.

    lapsed = LapsedProcess(["--data-dir=" + str(tmp_path)])
    client = lapse.Client(lapsed.address)
    events = take(client.watch(), 2)
    lapsed.stop()                       # SIGTERM, then its exit status

    certs = make_certs(tmp_path)        # testing/test_certs.sh: ca.crt, server.*, client.*
    write_auth_file(tmp_path / "auth", {"s3cret": "read,write orders:"})
    expire_now(client, "orders", ["a", "b"])   # two events, a then b

The lapsed binary is the one CMake passes in the LAPSED environment variable,
the certificate script the one in LAPSE_TEST_CERTS.
"""

import datetime
import hashlib
import os
import pathlib
import queue
import signal
import subprocess
import threading
import time
from typing import Callable, List, Mapping, Sequence, Union

# How long a test waits for something that should happen promptly before it
# calls it a failure (as testing::kPatience).
PATIENCE = 30.0

# A deadline long gone: an expire with it expires the members at once.
PAST = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)


class LapsedProcess:
    """lapsed listening on 127.0.0.1:`port` (0: a port the kernel picks) with
    errors-only logging and a short shutdown grace, then `flags` (which may
    override those). The constructor returns once lapsed printed its start
    line, whose port it reads."""

    def __init__(self, flags: Sequence[str] = (), port: int = 0):
        self._process = subprocess.Popen(
            [
                os.environ["LAPSED"],
                f"--listen=127.0.0.1:{port}",
                "--log_level=error",
                "--shutdown_grace=200ms",
                *flags,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        lines: "queue.Queue[str]" = queue.Queue()
        # Drains stdout for the life of the process, so lapsed never blocks
        # on a full pipe.
        threading.Thread(target=self._drain, args=(lines,), daemon=True).start()
        try:
            line = lines.get(timeout=PATIENCE)
        except queue.Empty:
            self._process.kill()
            raise AssertionError(f"lapsed printed no start line in {PATIENCE} s") from None
        if "(port " not in line:
            self._process.kill()
            raise AssertionError(f"lapsed did not start: {line!r}")
        self.port = int(line.split("(port ", 1)[1].split(")", 1)[0])
        self.address = f"127.0.0.1:{self.port}"

    def _drain(self, lines: "queue.Queue[str]") -> None:
        for line in self._process.stdout:
            if "listening on" in line:
                lines.put(line)
        lines.put("(exited)")

    def stop(self) -> int:
        """SIGTERM, then the exit status."""
        self._process.send_signal(signal.SIGTERM)
        try:
            return self._process.wait(timeout=PATIENCE)
        except subprocess.TimeoutExpired:
            self._process.kill()
            return self._process.wait()

    def kill(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()


def wait_until(condition: Callable[[], bool]) -> None:
    """Asks `condition` until it holds; fails if it does not within
    PATIENCE."""
    deadline = time.monotonic() + PATIENCE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"the condition did not hold within {PATIENCE} s")
        time.sleep(0.01)


def expire_now(client, collection: str, keys: Sequence[str]) -> None:
    """Puts `keys` and expires them at once: one event each, in key order."""
    client.put(collection, {key: key.encode() for key in keys})
    for key in keys:
        client.expire(collection, [key], deadline=PAST)


def take(watch, count: int) -> List:
    """The next `count` events of `watch`; fails (and cancels the watch) if
    they do not come within PATIENCE. An exception the watch raises is
    raised here."""
    results: "queue.Queue" = queue.Queue()

    def read() -> None:
        try:
            results.put([next(watch) for _ in range(count)])
        except BaseException as error:  # noqa: B902 - handed to the test thread
            results.put(error)

    threading.Thread(target=read, daemon=True).start()
    try:
        result = results.get(timeout=PATIENCE)
    except queue.Empty:
        watch.cancel()
        raise AssertionError(f"{count} events did not come within {PATIENCE} s") from None
    if isinstance(result, BaseException):
        raise result
    return result


class Certs:
    """The files testing/test_certs.sh made in `dir`."""

    def __init__(self, dir: Union[str, pathlib.Path]):
        dir = pathlib.Path(dir)
        self.ca = str(dir / "ca.crt")
        self.server_cert, self.server_key = str(dir / "server.crt"), str(dir / "server.key")
        self.client_cert, self.client_key = str(dir / "client.crt"), str(dir / "client.key")


def make_certs(dir: Union[str, pathlib.Path]) -> Certs:
    """A test CA, a server certificate for localhost and 127.0.0.1 and a
    client certificate, in `dir`."""
    result = subprocess.run(
        ["bash", os.environ["LAPSE_TEST_CERTS"], str(dir)], capture_output=True, text=True
    )
    if result.returncode != 0:
        raise AssertionError(f"test_certs.sh failed: {result.stderr}")
    return Certs(dir)


def write_auth_file(path: Union[str, pathlib.Path], grants: Mapping[str, str]) -> None:
    """An --auth_file granting each token its "PERMISSIONS PREFIX..."."""
    lines = [
        f"token:sha256:{hashlib.sha256(token.encode()).hexdigest()} {grant}\n"
        for token, grant in grants.items()
    ]
    pathlib.Path(path).write_text("".join(lines))
    os.chmod(path, 0o600)
