"""The fake's webhooks: receivers in process (a Python callable, a WSGI app or an ASGI app, no port) and the sender
that delivers to them, signed exactly as real deliveries are (`identity_testing.fake.IdentityFake.deliver_webhooks`
runs the service's own delivery passes with it).

A receiver is a real endpoint of the project (`POST /webhook-endpoints`, so it has a secret, event types and
deliveries like any other) whose URL, `http://receiver-<n>.webhooks.test<path>`, names no machine: the sender hands
each POST to the receiver registered for that origin instead of the network. Any other URL gets the attempt's error
"no in-process receiver at this URL" (the fake never opens a connection).

What a receiver answers decides the delivery as it would over HTTP: a 2xx succeeds, anything else is retried on the
service's schedule (by the fake's clock). A receiver that raises counts as a failed attempt (error "receiver
raised ..."), and the exception is kept in `InProcessWebhookSender.errors` for the test to look at.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from identity_proto.effects.webhooks import SendWebhooks, WebhookRequest, WebhookResult

__all__ = [
    "InProcessWebhookSender",
    "ReceivedWebhook",
    "RecordingReceiver",
    "WebhookReceiver",
    "receiver_kind",
]

#: What a receiver may be: a callable `(headers, body) -> status`, or a WSGI or an ASGI application.
ReceiverKind = Literal["callable", "wsgi", "asgi"]

RECEIVER_DOMAIN = "webhooks.test"


def receiver_kind(target: Any) -> ReceiverKind:
    """What `target` is: an ASGI app (a coroutine function, or an object whose `__call__` is one, taking scope,
    receive and send), a WSGI app (taking environ and start_response, or a framework app object such as Flask's or
    Django's), else a callable `(headers, body) -> status`. Pass `kind=` to `add_webhook_receiver` where this guess
    would be wrong."""
    if not callable(target):
        raise TypeError(f"a webhook receiver must be callable, not {type(target).__name__}")
    call = target if inspect.isroutine(target) else target.__call__
    if inspect.iscoroutinefunction(call):
        return "asgi"
    try:
        names = list(inspect.signature(call).parameters)
    except (TypeError, ValueError):
        names = []
    if len(names) == 3:
        return "asgi"
    if names[:2] in (["environ", "start_response"], ["env", "start_response"]) or hasattr(target, "wsgi_app"):
        return "wsgi"
    return "callable"


@dataclass
class WebhookReceiver:
    """A receiver registered with the fake: the endpoint the service knows it as, and what it delivers to."""

    endpoint_id: str
    url: str
    #: The endpoint's signing secret (`whsec_...`): what the receiver verifies signatures with.
    secret: str = field(repr=False)
    target: Any
    kind: ReceiverKind


@dataclass(frozen=True)
class ReceivedWebhook:
    """One POST a `RecordingReceiver` accepted: its message id, the payload's `type` and `data`, the headers and
    the raw body."""

    id: str
    type: str
    data: Any
    headers: Mapping[str, str]
    body: bytes


class RecordingReceiver:
    """A receiver (a callable) that verifies every POST with the `standardwebhooks` package, as a receiver of
    yours would, and records it: `received` (what verified, in order) and `rejected` (what did not, with the
    verifier's error). It answers `status` (200; set another to make deliveries fail)."""

    def __init__(self) -> None:
        # Checked here, not at the first delivery: there an ImportError would only fail the attempt, and the
        # test would see nothing received and no reason.
        try:
            import standardwebhooks  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "RecordingReceiver verifies each delivery with the `standardwebhooks` package, which is not "
                "installed: pip install standardwebhooks"
            ) from exc
        #: Set when it is registered (`add_webhook_receiver`): its endpoint's id and signing secret.
        self.endpoint_id: str | None = None
        self.secret: str | None = None
        self.status = 200
        self.received: list[ReceivedWebhook] = []
        self.rejected: list[tuple[Mapping[str, str], bytes, str]] = []
        self._lock = threading.Lock()

    @property
    def events(self) -> list[dict[str, Any]]:
        """What verified, as `{"id", "type", "data"}` dicts, in the order it arrived."""
        return [{"id": got.id, "type": got.type, "data": got.data} for got in self.received]

    def types(self) -> list[str]:
        """The event types received, in order."""
        return [got.type for got in self.received]

    def __call__(self, headers: Mapping[str, str], body: bytes) -> int:
        from standardwebhooks import Webhook  # the standard verifier: an optional dependency of the fake

        if self.secret is None:
            raise RuntimeError("this receiver is not registered with a fake (add_webhook_receiver)")
        try:
            payload = Webhook(self.secret).verify(body, dict(headers))
        except Exception as exc:
            with self._lock:
                self.rejected.append((dict(headers), body, f"{type(exc).__name__}: {exc}"))
            return 400
        with self._lock:
            self.received.append(
                ReceivedWebhook(headers["webhook-id"], payload["type"], payload["data"], dict(headers), body)
            )
        return self.status


class InProcessWebhookSender:
    """Performs `SendWebhooks` for the fake (the `WebhookSender` protocol of `identity_proto.drivers`): each
    request goes to the in-process receiver registered for its URL's origin."""

    def __init__(self) -> None:
        self._receivers: dict[str, WebhookReceiver] = {}
        self._count = 0
        self._lock = threading.Lock()
        #: Exceptions receivers raised, in order (each also failed its attempt).
        self.errors: list[BaseException] = []

    def new_url(self, path: str = "/") -> str:
        """A URL no other receiver of this sender has: `http://receiver-<n>.webhooks.test<path>`."""
        if not path.startswith("/"):
            raise ValueError("path must start with /")
        with self._lock:
            self._count += 1
            return f"http://receiver-{self._count}.{RECEIVER_DOMAIN}{path}"

    def register(self, receiver: WebhookReceiver) -> None:
        with self._lock:
            self._receivers[_origin(receiver.url)] = receiver

    def unregister(self, url: str) -> None:
        with self._lock:
            self._receivers.pop(_origin(url), None)

    def send(self, effect: SendWebhooks) -> tuple[WebhookResult, ...]:
        return tuple(self._send_one(request) for request in effect.requests)

    def close(self) -> None:
        """Nothing to close: no connection is ever opened."""

    def _send_one(self, request: WebhookRequest) -> WebhookResult:
        with self._lock:
            receiver = self._receivers.get(_origin(request.url))
        if receiver is None:
            return WebhookResult(None, 0, "no in-process receiver at this URL (the fake does not use the network)")
        started = time.perf_counter()
        try:
            status = _deliver(receiver, request)
        except Exception as exc:
            self.errors.append(exc)
            return WebhookResult(None, _ms_since(started), f"receiver raised {type(exc).__name__}: {exc}")
        latency = _ms_since(started)
        if 200 <= status < 300:
            return WebhookResult(status, latency)
        return WebhookResult(status, latency, f"HTTP {status}")


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def _ms_since(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def _deliver(receiver: WebhookReceiver, request: WebhookRequest) -> int:
    headers = dict(request.headers)
    if receiver.kind == "callable":
        status = receiver.target(headers, request.body)
        if not isinstance(status, int):
            raise TypeError(f"a webhook receiver must return an HTTP status (int), not {type(status).__name__}")
        return status
    if receiver.kind == "wsgi":
        import httpx  # only for an app receiver: a test that receives no webhook never loads it

        with httpx.Client(transport=httpx.WSGITransport(app=receiver.target)) as client:
            return client.post(request.url, content=request.body, headers=headers).status_code
    return _post_asgi(receiver.target, request.url, headers, request.body)


def _post_asgi(app: Callable[..., Any], url: str, headers: dict[str, str], body: bytes) -> int:
    """POST to an ASGI app in process, from sync code that may itself run inside an event loop: in a fresh loop on
    a thread of its own."""

    import httpx

    async def post() -> int:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as client:
            return (await client.post(url, content=body, headers=headers)).status_code

    outcome: list[int] = []
    failure: list[BaseException] = []

    def main() -> None:
        try:
            outcome.append(asyncio.run(post()))
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=main, name="identity-fake-asgi-receiver")
    worker.start()
    worker.join()
    if failure:
        raise failure[0]
    return outcome[0]
