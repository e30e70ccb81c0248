"""The raw ASGI host: `app`, configured from the environment (see `identity_hosting.settings`), served by Hypercorn.

    hypercorn asgi_app:app

Importing this module reads nothing: `app` reads and checks the environment when it is first served (the lifespan
start-up, or the first request when the server sends no lifespan events). A configuration error is one line on
standard error naming the variable, and the server does not start (non-zero exit status).

It translates ASGI messages into a `Request`, runs the core's flow with the async driver, and writes the
`Response`. It adds nothing of its own but three edge duties:

- the lifespan protocol (start-up bootstraps the projects, then prepares the service in a thread and starts the
  webhook delivery task; shutdown stops that task, waits for the preparation and closes the store, the webhook
  sender and the OAuth provider client).
  Embedders whose framework does not forward lifespan to mounted apps lose nothing: the first request starts the
  service lazily.
- the request body limit: past `IDENTITY_MAX_BODY_BYTES` the answer is 413 and the rest is not read; a malformed
  or negative Content-Length is 400 before any of the body is read.
- a last guard: whatever goes wrong in this host, the client gets a 500 known-error body with a request id,
  never a dropped connection.

and the operators' view (`identity_hosting.observability`): the health probes, `/metrics` and the access log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from identity_hosting import observability
from identity_hosting.pages import hypercorn_bound_url
from identity_hosting.settings import (
    CONFIGURATION_EXIT_STATUS,
    ConfigurationError,
    Settings,
    SystemEntropy,
    body_too_large,
    build_async_store,
    configure_logging,
    declared_body_length,
    end_hypercorn_worker,
    report_configuration_error,
    settings_or_exit,
    wall_clock_ms,
)
from identity_hosting.webhook_loops import AsyncDeliveryLoop, BusyMeter
from identity_proto import (
    AsyncStore,
    ErrorCode,
    KnownError,
    MalformedRequest,
    Request,
    RequestNote,
    Response,
    Service,
    StorageUnavailable,
    arun,
    new_request_id,
)
from identity_proto.effects.oauth_provider import ProviderEffect
from identity_proto.effects.webhooks import SendWebhooks, WebhookResult
from identity_proto.render import text_response

if TYPE_CHECKING:
    # Imported when first needed (`provider_client`, `webhook_sender`): the OAuth client's libraries (authlib,
    # joserfc, cryptography) and the HTTP client (httpx, httpcore) would otherwise cost every worker's start, and its
    # first answer, a few tenths of a second, most of which never need them (tests/unit/test_import_cost.py).
    from identity_hosting.oauth_client import AsyncProviderHttpClient
    from identity_hosting.webhook_sender import AsyncWebhookHttpSender

__all__ = ["IdentityASGI", "app"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

logger = logging.getLogger("identity_service")


class IdentityASGI:
    """The service as an ASGI 3 application."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        store: AsyncStore | None = None,
        service: Service | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        entropy: Any = None,
        configure_logs: bool = False,
        provider: AsyncProviderHttpClient | None = None,
        webhook_sender: AsyncWebhookHttpSender | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.service = service or Service(self.settings.service_options())
        self.clock = clock
        self.entropy = entropy or SystemEntropy()
        self._store = store
        self._mailer = self.settings.mailers().async_
        self._started = False
        #: The dashboard, the API explorer and dev mode's home page (`identity_hosting.pages`).
        self.pages = self.settings.pages()
        #: Standalone (the module's `app`): send the service's log lines to stderr at start-up. Embedded: leave
        #: logging to the embedding application.
        self._configure_logs = configure_logs
        self._start_lock = asyncio.Lock()
        self._preparing: asyncio.Future[None] | None = None
        # OAuth: the client that talks to providers (built when first needed, closed at shutdown; the service's own
        # mock provider is served by this app in process). One given here is the caller's to close.
        self._provider = provider
        self._owns_provider = provider is None
        # webhooks: delivery
        # The delivery task (started with the service, stopped at shutdown) and its HTTP sender (one given here is
        # the caller's to close); requests in flight, which the task lets go first.
        self._webhook_sender = webhook_sender
        self._owns_webhook_sender = webhook_sender is None
        self.webhook_loop: AsyncDeliveryLoop | None = None
        self._busy = BusyMeter()  # webhooks: the delivery loop defers to requests
        # operators: probes, metrics, access log (`identity_hosting.observability`)
        self.metrics = observability.Metrics() if self.settings.metrics else None
        self._operator_paths = observability.OperatorPaths(self.metrics, self.settings.metrics_token)
        access_log = observability.AccessLog(self.settings.access_log) if self.settings.access_log else None
        self._observer = observability.RequestObserver(self.metrics, access_log) if self.metrics or access_log else None
        # the access log's: the first name the service stamps the request id under
        self._request_id_header = self.service.options.request_id_headers[0].encode() if access_log else b""
        trusted = self.settings.trusted_proxy_header
        self._trusted_header = trusted.encode() if trusted else None

    @classmethod
    def from_env(cls) -> IdentityASGI:
        """The app as the environment configures it, for a host's module scope (`app.mount("/auth",
        IdentityASGI.from_env())`): a bad environment ends the process with one line naming the variable and
        status 3, under any server (`settings_or_exit`). To handle the error yourself, build
        `IdentityASGI(Settings.from_env())`, which raises `ConfigurationError`."""
        return cls(settings_or_exit())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)
        else:  # websockets: not spoken here
            await send({"type": "websocket.close", "code": 1000})

    # ----------------------------------------------------------------------------------------------------------

    async def startup(self) -> None:
        """Build the store and bootstrap the configured projects (once)."""
        async with self._start_lock:
            if self._started:
                return
            if self._store is None:
                self._store = build_async_store(self.settings)
            if self.metrics is not None and hasattr(self._store, "observe"):
                self._store.observe(self.metrics)  # the Redis store's operations and circuit breaker
            if self._configure_logs:
                configure_logging(self.settings.log_level)
            flow = self.settings.start_up(
                self.service, now_ms=self.clock(), entropy=self.entropy, bound_url=hypercorn_bound_url()
            )
            await arun(flow, self._store)
            self._started = True
            # What first requests would otherwise build (models, token signing, hashing), built in a thread once the
            # service answers: about 0.2 s of CPU that would otherwise delay the first answer (a readiness probe, a
            # test suite waiting for its server) by as much. A request that needs a model sooner builds it itself
            # (imports are locked per module: never twice, never half).
            self._preparing = asyncio.get_running_loop().run_in_executor(None, self.service.prepare)
            self._start_webhook_delivery()

    # webhooks: delivery
    def _start_webhook_delivery(self) -> None:
        assert self._store is not None
        self.webhook_loop = AsyncDeliveryLoop(
            self.service,
            self._store,
            _WebhookSenderOnDemand(self),
            clock=self.clock,
            entropy=self.entropy,
            poll_s=self.settings.webhook_poll_s,
            busy=self._busy,
            observer=self.metrics,
        )
        self.webhook_loop.start()

    async def _stop_webhook_delivery(self) -> None:
        loop, self.webhook_loop = self.webhook_loop, None
        if loop is not None:
            await loop.stop()
        if self._webhook_sender is not None and self._owns_webhook_sender:
            sender, self._webhook_sender = self._webhook_sender, None
            await sender.aclose()

    async def shutdown(self) -> None:
        """Stop the webhook delivery task, close the store and the OAuth provider client (after the start-up's
        preparation, if it is still running)."""
        await self._stop_webhook_delivery()
        if self._preparing is not None:
            await self._preparing
            self._preparing = None
        if self._store is not None:
            await self._store.aclose()
        if self._provider is not None and self._owns_provider:
            provider, self._provider = self._provider, None
            await provider.aclose()
        if self.metrics is not None:
            self.metrics.process_ended()
        self._started = False

    def webhook_sender(self) -> AsyncWebhookHttpSender:
        """The webhook sender (`IDENTITY_WEBHOOK_TIMEOUT_SECONDS`), built when the delivery task first POSTs."""
        if self._webhook_sender is None:
            from identity_hosting.webhook_sender import AsyncWebhookHttpSender

            self._webhook_sender = AsyncWebhookHttpSender(
                allow_private=self.settings.may_reach_private_addresses, timeout_s=self.settings.webhook_timeout_s
            )
        return self._webhook_sender

    def provider_client(self) -> AsyncProviderHttpClient:
        """The OAuth provider client (`IDENTITY_OAUTH_TIMEOUT_SECONDS`), built on first use (a request whose flow
        talks to a provider)."""
        if self._provider is None:
            from identity_hosting.oauth_client import AsyncProviderHttpClient

            self._provider = AsyncProviderHttpClient(
                timeout_s=self.settings.oauth_timeout_s,
                base_url=self.settings.base_url,
                local_app=self if self.settings.dev_mode else None,
                allow_private=self.settings.may_reach_private_addresses,
                require_https=not self.settings.dev_mode,
            )
        return self._provider

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:
                    logger.exception("start-up failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._busy.started()
        try:
            if self._observer is not None:
                await self._http_observed(scope, receive, send, self._observer)
            else:
                await self._http_in_flight(scope, receive, send, None)
        finally:
            self._busy.finished()

    async def _http_observed(
        self, scope: Scope, receive: Receive, send: Send, observer: observability.RequestObserver
    ) -> None:
        """A request counted in the metrics and written to the access log once its answer was sent."""
        began = observability.monotonic()
        note = RequestNote()
        answer: list[Message] = []

        async def send_seen(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer.append(message)
            await send(message)

        try:
            await self._http_in_flight(scope, receive, send_seen, note)
        finally:
            status = answer[0]["status"] if answer else 499  # no answer: the client went away first
            peer = scope.get("client")
            observer.answered(
                scope["method"],
                note,
                status,
                observability.monotonic() - began,
                lambda: observability.request_id_of(answer[0]["headers"], self._request_id_header) if answer else None,
                lambda: observability.client_of(
                    scope.get("headers", ()), peer[0] if peer else None, self._trusted_header
                ),
            )

    async def _operator_response(self, scope: Scope, note: RequestNote | None) -> Response | None:
        """The answer to a probe or a scrape (`identity_hosting.observability`); None for any other request."""
        path: str = scope["path"]
        root_path: str = scope.get("root_path", "").rstrip("/")
        if root_path and path.startswith(root_path + "/"):  # mounted under a prefix
            path = path[len(root_path) :]
        kind = self._operator_paths.kind(scope["method"], path)
        if kind is None:
            return None
        if note is not None:
            note.route = path
        if kind == "live":
            return observability.liveness()
        if kind == "metrics":
            authorization = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), None)
            refused = self._operator_paths.scrape_refused(None if authorization is None else authorization.decode())
            if refused is not None:
                return refused
            backlog = None
            if self._started and self._store is not None:
                with contextlib.suppress(StorageUnavailable):  # the store's own metrics say so
                    backlog = await arun(observability.webhook_backlog(), self._store)
            return self._operator_paths.scrape(backlog)
        try:
            if not self._started:
                await self.startup()
            assert self._store is not None
            return await arun(observability.readiness(), self._store)
        except StorageUnavailable:  # the start-up's bootstrap found no store
            return observability.not_ready()

    async def _http_in_flight(self, scope: Scope, receive: Receive, send: Send, note: RequestNote | None) -> None:
        started = False

        async def respond(response: Response) -> None:
            nonlocal started
            started = True
            await _send_response(send, response)

        try:
            if scope["path"].endswith(observability.ENDINGS):
                operator = await self._operator_response(scope, note)
                if operator is not None:
                    await respond(operator)
                    return
            if not self._started:
                await self.startup()
            assert self._store is not None
            try:
                try:
                    if _bodiless(scope):  # its end came with its headers: nothing to wait for, no timer to set
                        body = await self._read_body(scope, receive)
                    else:
                        async with asyncio.timeout(self.settings.body_timeout_s):
                            body = await self._read_body(scope, receive)
                except TimeoutError:
                    # Too slow to send what it declared (or a slowloris): 408, and Hypercorn closes the connection.
                    await respond(_body_timeout_response(self.settings.body_timeout_s))
                    return
                if body is None:  # the client went away mid-body: nobody to answer
                    return
                request = _request_from_scope(scope, body)
            except MalformedRequest as exc:
                error = KnownError(ErrorCode.MALFORMED_REQUEST, context={"message": str(exc)})
                await respond(self.service.error_response(error, new_request_id(self.entropy)))
                return
            except KnownError as refused:  # the body is over the limit
                await respond(self.service.error_response(refused, new_request_id(self.entropy)))
                return
            static = self.pages.response(request)
            if static is not None:
                await respond(static)
                return
            provider = _ProviderOnDemand(self, request)
            flow = self.service.handle(request, self.clock(), self.entropy, note)
            response = await arun(flow, self._store, self._mailer, provider)
            await respond(response)
        except Exception:
            request_id = new_request_id(self.entropy)
            logger.exception("host error (request %s)", request_id)
            if not started:
                error = KnownError(ErrorCode.INTERNAL_ERROR, context={"request_id": request_id})
                await respond(self.service.error_response(error, request_id))

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes | None:
        """The whole body, or None when the client disconnected before its end.

        A malformed or negative Content-Length (or two that disagree) raises `MalformedRequest` at once. A body over
        the limit raises REQUEST_BODY_TOO_LARGE once the rest of it has been read and dropped, up to `_DRAIN_BYTES`
        in all within `_DRAIN_S` (a declared length beyond that: at once): most clients (httpx's AsyncClient,
        browsers' fetch) read the answer only after sending the whole body, and a server that answers and closes
        with the body unread resets the connection under them, so they would never see the 413. Nothing of it is
        kept, and an endless body is cut off at the bound."""
        limit = self.settings.max_body_bytes
        declared = {value for name, value in scope.get("headers", ()) if name == b"content-length"}
        if len(declared) > 1:
            raise MalformedRequest("the request has Content-Length headers that disagree")
        length = declared_body_length(declared.pop().decode("latin-1")) if declared else None
        if length is not None and length > limit:
            if length <= _DRAIN_BYTES:
                await _drain(receive, 0)
            raise body_too_large(limit)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                if message.get("more_body", False):
                    await _drain(receive, size)
                raise body_too_large(limit)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


class _ProviderOnDemand:
    """The OAuth provider client as one request's flow sees it (`AsyncProviderHttpClient.for_request`), the host's
    client built only when a flow first talks to a provider: most requests never do."""

    __slots__ = ("_app", "_request")

    def __init__(self, app: IdentityASGI, request: Request) -> None:
        self._app = app
        self._request = request

    async def perform(self, effect: ProviderEffect[object]) -> object:
        app = self._app
        return await app.provider_client().for_request(self._request, app.service.options).perform(effect)


class _WebhookSenderOnDemand:
    """The host's webhook sender as its delivery task sees it, built when the task first POSTs: a worker with no
    delivery due starts without an HTTP client."""

    __slots__ = ("_app",)

    def __init__(self, app: IdentityASGI) -> None:
        self._app = app

    async def send(self, effect: SendWebhooks) -> tuple[WebhookResult, ...]:
        return await self._app.webhook_sender().send(effect)


#: How much of a body over the limit is read (and dropped) before the 413 is sent, and for how long at most: enough
#: for an upload a client might plausibly try (a photo, a document), so that it receives the answer; a longer one
#: is cut off (the connection closes) rather than read.
_DRAIN_BYTES = 32 * 1024 * 1024
_DRAIN_S = 10.0


async def _drain(receive: Receive, received: int) -> None:
    """Read and drop the rest of a request's body (`received` bytes of it already read), within the bounds above."""
    try:
        async with asyncio.timeout(_DRAIN_S):
            while received <= _DRAIN_BYTES:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                received += len(message.get("body", b""))
                if not message.get("more_body", False):
                    return
    except TimeoutError:
        return


def _body_timeout_response(timeout_s: float) -> Response:
    """408 for a body that did not arrive in time: plain text (it is no API answer: nothing was read, and no route
    knows of it), and `Connection: close`, which the server honours by closing once it is sent."""
    return text_response(
        408, f"The request body did not arrive within {timeout_s:g} s.", headers=(("connection", "close"),)
    )


def _bodiless(scope: Scope) -> bool:
    """Whether an HTTP/1 request has no body by its framing (neither Content-Length nor Transfer-Encoding, RFC 9112
    §6.3): the server has its end with its headers, so reading it cannot wait on the client (an HTTP/2 request may
    stream a body without declaring its length)."""
    if scope.get("http_version") not in ("1.1", "1.0"):
        return False
    for name, _value in scope.get("headers", ()):
        if name == b"content-length" or name == b"transfer-encoding":
            return False
    return True


async def _send_response(send: Send, response: Response) -> None:
    headers = [(name.encode(), value.encode("latin-1")) for name, value in response.headers]
    # The body is whole: say its length, so the server need not frame it in chunks.
    headers.append((b"content-length", str(len(response.body)).encode()))
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})


def _request_from_scope(scope: Scope, body: bytes) -> Request:
    path: str = scope["path"]
    root_path: str = scope.get("root_path", "").rstrip("/")
    if root_path and (path == root_path or path.startswith(root_path + "/")):  # mounted under a prefix
        path = path[len(root_path) :] or "/"
    client = scope.get("client")
    return Request.from_wire(
        scope["method"],
        path,
        scope.get("headers", ()),
        body,
        scope.get("query_string", b"").decode("latin-1"),
        client[0] if client else None,
        root_path,
        scope.get("scheme", "http"),
    )


class _FromEnvironment:
    """The service as the environment configures it, built when first served rather than when imported: importing
    `asgi_app` (a test collecting modules, a tool listing entry points) reads and checks nothing.

    The build happens once, under a lock (an ASGI server may call from several threads). A configuration error is
    reported in one line; at the lifespan start-up the server is then told not to start, and requests are answered
    500 (a known-error body with a request id) while the environment stays wrong."""

    def __init__(self) -> None:
        self._app: IdentityASGI | None = None
        self._error: ConfigurationError | None = None
        self._lock = threading.Lock()

    def _build(self) -> IdentityASGI:
        with self._lock:
            if self._app is None:
                if self._error is not None:
                    raise self._error
                try:
                    self._app = IdentityASGI(Settings.from_env(), configure_logs=True)
                except ConfigurationError as exc:
                    self._error = exc
                    report_configuration_error(exc)
                    raise
            return self._app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            app = self._build()
        except ConfigurationError as exc:
            await self._refuse(scope, receive, send, exc)
            return
        await app(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, error: ConfigurationError) -> None:
        if scope["type"] == "lifespan":
            message = await receive()
            if message["type"] == "lifespan.startup":
                end_hypercorn_worker(CONFIGURATION_EXIT_STATUS)
                await send({"type": "lifespan.startup.failed", "message": str(error)})
        elif scope["type"] == "http":
            request_id = new_request_id(SystemEntropy())
            known = KnownError(ErrorCode.INTERNAL_ERROR, context={"request_id": request_id})
            await _send_response(send, Service().error_response(known, request_id))


#: The application Hypercorn serves: `hypercorn asgi_app:app`, configured from the environment when first served.
app = _FromEnvironment()
