"""Webhook receivers for tests: a real HTTP server on a loopback port (`http.server`, in a thread) whose behaviour a
test scripts (answer a status, hang, verify signatures with `svix` or `standardwebhooks`), recording every POST.
Bounded and self-stopping: the server thread ends with the `with` block."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass(frozen=True)
class Received:
    """One POST as the receiver got it."""

    path: str
    headers: dict[str, str]
    body: bytes
    #: What the verifier made of it: None when it accepted the signature, else the error's text.
    rejected: str | None = None

    @property
    def message_id(self) -> str:
        return self.headers["webhook-id"]

    @property
    def payload(self) -> Any:
        return orjson.loads(self.body)


@dataclass
class Receiver:
    """A running receiver: its URL, what it got, and what it does next (`status`, `hang_s`)."""

    url: str
    received: list[Received] = field(default_factory=list)
    #: The status answered to the next POSTs (a verifier that rejects answers 400 whatever this says).
    status: int = 200
    #: Seconds to sleep before answering (past the sender's timeout: a hanging receiver).
    hang_s: float = 0.0
    #: Verifies a POST (body, headers); raises when it rejects it.
    verify: Callable[[bytes, dict[str, str]], Any] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def accepted(self) -> list[Received]:
        with self.lock:
            return [item for item in self.received if item.rejected is None and item.headers.get("x-answered") != "0"]

    def wait_for(self, predicate: Callable[[list[Received]], bool], timeout_s: float = 15.0) -> list[Received]:
        """Wait (bounded) until `predicate(received)` holds; return what was received."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self.lock:
                snapshot = list(self.received)
            if predicate(snapshot):
                return snapshot
            if time.monotonic() > deadline:
                raise AssertionError(f"the receiver did not get what was expected in {timeout_s} s: {snapshot!r}")
            time.sleep(0.02)


@contextmanager
def running_receiver(verify: Callable[[bytes, dict[str, str]], Any] | None = None, port: int = 0) -> Iterator[Receiver]:
    """A receiver on a loopback port (`port`, or a free one) for the duration of the block."""
    receiver_box: list[Receiver] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            receiver = receiver_box[0]
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            headers = {name.lower(): value for name, value in self.headers.items()}
            rejected = None
            if receiver.verify is not None:
                try:
                    receiver.verify(body, headers)
                except Exception as exc:
                    rejected = f"{type(exc).__name__}: {exc}"
            status = 400 if rejected is not None else receiver.status
            hang = receiver.hang_s
            answered = "0" if hang > 0 or not 200 <= status < 300 else "1"
            with receiver.lock:
                receiver.received.append(Received(self.path, {**headers, "x-answered": answered}, body, rejected))
            if hang:
                time.sleep(hang)
            reply = b'{"ok":true}'
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)
            except OSError:  # the sender gave up (timeout) and closed the connection
                pass

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    class Server(http.server.ThreadingHTTPServer):
        # The service POSTs up to 50 deliveries at once: socketserver's default listen backlog (5) would refuse
        # connections a real receiver's server accepts.
        request_queue_size = 128

    server = Server(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    receiver = Receiver(url=f"http://127.0.0.1:{server.server_address[1]}/hook", verify=verify)
    receiver_box.append(receiver)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.hang_s = 0
        server.shutdown()
        server.server_close()
        thread.join(5)


def svix_verifier(secret: str) -> Callable[[bytes, dict[str, str]], Any]:
    """A receiver's check with the `svix` library, as its documentation shows it (timestamp within 5 min)."""
    import svix.webhooks

    return lambda body, headers: svix.webhooks.Webhook(secret).verify(body, headers)


def standard_verifier(secret: str) -> Callable[[bytes, dict[str, str]], Any]:
    """A receiver's check with the `standardwebhooks` library (the `webhook-*` headers alone)."""
    import standardwebhooks.webhooks

    def verify(body: bytes, headers: dict[str, str]) -> Any:
        only = {name: value for name, value in headers.items() if not name.startswith("svix-")}
        return standardwebhooks.webhooks.Webhook(secret).verify(body, only)

    return verify


def signed_at_its_timestamp(secret: str) -> Callable[[bytes, dict[str, str]], None]:
    """The signature check of `standardwebhooks` without its tolerance on the timestamp: for tests that move the
    service's clock far from the real one (the headers carry the service's time)."""
    from datetime import UTC, datetime

    import standardwebhooks.webhooks

    def verify(body: bytes, headers: dict[str, str]) -> None:
        stamp = datetime.fromtimestamp(int(headers["webhook-timestamp"]), tz=UTC)
        expected = standardwebhooks.webhooks.Webhook(secret).sign(headers["webhook-id"], stamp, body.decode())
        if expected not in headers["webhook-signature"].split(" "):
            raise ValueError("no signature matches")

    return verify
