"""The WSGI host: the same service for Flask, Django and any WSGI server, on the sync driver.

    gunicorn identity_hosting.wsgi:app   # or mount `IdentityWSGI(...)` inside your own WSGI application

It mirrors `asgi_app`: a body limit (413; never more than the limit plus one byte is read), malformed requests
and Content-Length headers (400), a last guard (500 with a request id), a lazy, thread-safe start (the first
request bootstraps the configured projects), and the operators' view (`identity_hosting.observability`: the health
probes, `/metrics` and the access log; under a server with several worker processes, the metrics need
`PROMETHEUS_MULTIPROC_DIR` as under Hypercorn). The store must be sync here: the memory store, or Redis through
`redis.Redis`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from identity_hosting import observability
from identity_hosting.settings import (
    ConfigurationError,
    Settings,
    SystemEntropy,
    body_too_large,
    build_sync_store,
    configure_logging,
    declared_body_length,
    report_configuration_error,
    settings_or_exit,
    wall_clock_ms,
)
from identity_hosting.webhook_loops import BusyMeter, DeliveryThread
from identity_proto import (
    Entropy,
    ErrorCode,
    KnownError,
    MalformedRequest,
    Request,
    RequestNote,
    Response,
    Service,
    StorageUnavailable,
    Store,
    new_request_id,
    run,
)
from identity_proto.context import forwarded_client
from identity_proto.drivers import Mailer

if TYPE_CHECKING:  # loaded on first use: most apps never talk to a provider, and the fake delivers webhooks itself
    from identity_hosting.oauth_client import ProviderHttpClient
    from identity_hosting.webhook_sender import WebhookHttpSender

__all__ = ["IdentityWSGI", "app"]

logger = logging.getLogger("identity_service")

StartResponse = Callable[..., Any]


class IdentityWSGI:
    """The service as a WSGI application."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        store: Store | None = None,
        service: Service | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        entropy: Entropy | None = None,
        mailer: Mailer | None = None,
        configure_logs: bool = False,
        provider: ProviderHttpClient | None = None,
        webhook_sender: WebhookHttpSender | None = None,
        webhook_delivery: bool = True,
    ) -> None:
        self.settings = settings or Settings()
        self.service = service or Service(self.settings.service_options())
        self.clock = clock
        self.entropy: Entropy = entropy or SystemEntropy()
        self.store = store
        self.mailer = mailer if mailer is not None else self.settings.mailers().sync
        self._started = False
        #: The dashboard, the API explorer and dev mode's home page (`identity_hosting.pages`).
        self.pages = self.settings.pages()
        #: Standalone (the module's `app`): send the service's log lines to stderr at start-up. Embedded: leave
        #: logging to the embedding application.
        self._configure_logs = configure_logs
        self._start_lock = threading.Lock()
        # OAuth: the client that talks to providers (built when first needed, closed by `close`; the service's own
        # mock provider is served by this app in process). One given here is the caller's to close.
        self._provider = provider
        self._owns_provider = provider is None
        # webhooks: delivery
        # The delivery thread (started with the host, stopped by `close`) and its HTTP sender (one given here is the
        # caller's to close); requests in flight, which the thread lets go first.
        self._webhook_sender = webhook_sender
        self._owns_webhook_sender = webhook_sender is None
        self.webhook_thread: DeliveryThread | None = None
        #: False: no delivery thread (the in-process fake delivers itself, at its test's pace).
        self._webhook_delivery = webhook_delivery
        self._busy = BusyMeter()  # webhooks: the delivery thread defers to requests
        # operators: probes, metrics, access log (`identity_hosting.observability`)
        self.metrics = observability.Metrics() if self.settings.metrics else None
        self._operator_paths = observability.OperatorPaths(self.metrics, self.settings.metrics_token)
        access_log = observability.AccessLog(self.settings.access_log) if self.settings.access_log else None
        self._observer = observability.RequestObserver(self.metrics, access_log) if self.metrics or access_log else None
        # the access log's: the first name the service stamps the request id under
        self._request_id_header = self.service.options.request_id_headers[0] if access_log else ""
        trusted = self.settings.trusted_proxy_header
        self._trusted_key = "HTTP_" + trusted.upper().replace("-", "_") if trusted else None

    @classmethod
    def from_env(cls) -> IdentityWSGI:
        """The app as the environment configures it, for a host's module scope: a bad environment ends the process
        with one line naming the variable and status 3 (`settings.settings_or_exit`). To handle the error
        yourself, build `IdentityWSGI(Settings.from_env())`, which raises `ConfigurationError`."""
        return cls(settings_or_exit())

    def startup(self) -> None:
        """Build the store and bootstrap the configured projects (once, whichever thread comes first)."""
        with self._start_lock:
            if self._started:
                return
            if self.store is None:
                self.store = build_sync_store(self.settings)
            if self.metrics is not None and hasattr(self.store, "observe"):
                self.store.observe(self.metrics)  # the Redis store's operations and circuit breaker
            if self._configure_logs:
                configure_logging(self.settings.log_level)
            flow = self.settings.start_up(self.service, now_ms=self.clock(), entropy=self.entropy)
            run(flow, self.store)
            self._started = True
            if self._webhook_delivery:
                self._start_webhook_delivery()

    # webhooks: delivery
    def _start_webhook_delivery(self) -> None:
        assert self.store is not None
        if self._webhook_sender is None:
            from identity_hosting.webhook_sender import WebhookHttpSender

            self._webhook_sender = WebhookHttpSender(
                allow_private=self.settings.may_reach_private_addresses, timeout_s=self.settings.webhook_timeout_s
            )
        self.webhook_thread = DeliveryThread(
            self.service,
            self.store,
            self._webhook_sender,
            clock=self.clock,
            entropy=self.entropy,
            poll_s=self.settings.webhook_poll_s,
            busy=self._busy,
            observer=self.metrics,
        )
        self.webhook_thread.start()

    def _stop_webhook_delivery(self) -> None:
        with self._start_lock:
            thread, self.webhook_thread = self.webhook_thread, None
            sender, self._webhook_sender = self._webhook_sender, None
        if thread is not None:
            thread.stop()
        if sender is not None and self._owns_webhook_sender:
            sender.close()

    def close(self) -> None:
        """Stop the webhook delivery thread, close the store, the webhook sender and the OAuth provider client."""
        self._stop_webhook_delivery()
        if self.store is not None:
            self.store.close()
        with self._start_lock:
            provider, self._provider = self._provider, None
        if provider is not None and self._owns_provider:
            provider.close()
        if self.metrics is not None:
            self.metrics.process_ended()

    def provider_client(self) -> ProviderHttpClient:
        """The OAuth provider client (`IDENTITY_OAUTH_TIMEOUT_SECONDS`), built on first use (once, whichever
        thread comes first)."""
        provider = self._provider
        if provider is None:
            with self._start_lock:
                if self._provider is None:
                    from identity_hosting.oauth_client import ProviderHttpClient

                    self._provider = ProviderHttpClient(
                        timeout_s=self.settings.oauth_timeout_s,
                        base_url=self.settings.base_url,
                        local_app=self if self.settings.dev_mode else None,
                        allow_private=self.settings.may_reach_private_addresses,
                        require_https=not self.settings.dev_mode,
                    )
                provider = self._provider
        return provider

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        self._busy.started()
        observer = self._observer
        began = observability.monotonic() if observer is not None else 0.0
        note = RequestNote() if observer is not None else None
        try:
            response = self._respond(environ, note)
        except Exception:
            response = self.host_error()
        finally:
            self._busy.finished()
        reason = HTTPStatus(response.status).phrase
        start_response(f"{response.status} {reason}", list(response.headers))
        if observer is not None and note is not None:
            # Once the answer is handed to the server: the time it takes to send the body is the server's.
            observer.answered(
                environ.get("REQUEST_METHOD", "GET"),
                note,
                response.status,
                observability.monotonic() - began,
                lambda: next((v for k, v in response.headers if k == self._request_id_header), None),
                lambda: forwarded_client(
                    environ.get(self._trusted_key) if self._trusted_key else None, environ.get("REMOTE_ADDR") or None
                ),
            )
        return [response.body]

    def host_error(self) -> Response:
        """The 500 for an error raised while answering (call it in the `except`: it logs the exception with the
        request id it answers with; nothing of the error reaches the client)."""
        request_id = new_request_id(self.entropy)
        logger.exception("host error (request %s)", request_id)
        error = KnownError(ErrorCode.INTERNAL_ERROR, context={"request_id": request_id})
        return self.service.error_response(error, request_id)

    def _operator_response(self, environ: dict[str, Any], note: RequestNote | None) -> Response | None:
        """The answer to a probe or a scrape (`identity_hosting.observability`); None for any other request."""
        path: str = environ.get("PATH_INFO", "") or "/"
        script_name = environ.get("SCRIPT_NAME", "").rstrip("/")
        if script_name and path.startswith(script_name + "/"):
            path = path[len(script_name) :]
        kind = self._operator_paths.kind(environ.get("REQUEST_METHOD", "GET"), path)
        if kind is None:
            return None
        if note is not None:
            note.route = path
        if kind == "live":
            return observability.liveness()
        if kind == "metrics":
            refused = self._operator_paths.scrape_refused(environ.get("HTTP_AUTHORIZATION"))
            if refused is not None:
                return refused
            backlog = None
            if self._started and self.store is not None:
                with contextlib.suppress(StorageUnavailable):  # the store's own metrics say so
                    backlog = run(observability.webhook_backlog(), self.store)
            return self._operator_paths.scrape(backlog)
        try:
            if not self._started:
                self.startup()
            assert self.store is not None
            return run(observability.readiness(), self.store)
        except StorageUnavailable:  # the start-up's bootstrap found no store
            return observability.not_ready()

    def _respond(self, environ: dict[str, Any], note: RequestNote | None = None) -> Response:
        if (environ.get("PATH_INFO") or "/").endswith(observability.ENDINGS):
            operator = self._operator_response(environ, note)
            if operator is not None:
                return operator
        try:
            body = self._read_body(environ)
            request = _request_from_environ(environ, body)
        except MalformedRequest as exc:
            error = KnownError(ErrorCode.MALFORMED_REQUEST, context={"message": str(exc)})
            return self.service.error_response(error, new_request_id(self.entropy))
        except KnownError as refused:  # the body is over the limit
            return self.service.error_response(refused, new_request_id(self.entropy))
        return self.answer(request, note)

    def answer(self, request: Request, note: RequestNote | None = None) -> Response:
        """The answer to a request already read and parsed (what the WSGI call does once it has the body; the
        in-process fake's `DirectClient` calls it with requests it builds itself). Errors propagate."""
        if not self._started:
            self.startup()
        assert self.store is not None
        static = self.pages.response(request)
        if static is not None:
            return static
        provider = self.provider_client().for_request(request, self.service.options)
        return run(self.service.handle(request, self.clock(), self.entropy, note), self.store, self.mailer, provider)

    def _read_body(self, environ: dict[str, Any]) -> bytes:
        """The whole body, never reading more than the limit plus one byte of `wsgi.input` (the server's stream).

        A malformed or negative Content-Length raises `MalformedRequest` before anything is read; a body over the
        limit (declared, or found by reading) raises REQUEST_BODY_TOO_LARGE; a body that ends before its declared
        length (the client went away) is malformed. Without a Content-Length there is a body only when the server
        says its stream ends where the body does (PEP 3333's `wsgi.input_terminated`, e.g. a chunked body)."""
        limit = self.settings.max_body_bytes
        length = declared_body_length(environ.get("CONTENT_LENGTH") or None)
        stream = environ["wsgi.input"]
        if length is None:
            body = _read_at_most(stream, limit + 1) if environ.get("wsgi.input_terminated") else b""
            if len(body) > limit:
                raise body_too_large(limit)
            return body
        if length > limit:
            raise body_too_large(limit)
        body = _read_at_most(stream, length)
        if len(body) != length:
            raise MalformedRequest("the body is shorter than its Content-Length")
        return body


def _read_at_most(stream: Any, size: int) -> bytes:
    """Up to `size` bytes of `stream`, fewer only at its end (a read may return less than it was asked for)."""
    chunks: list[bytes] = []
    remaining = size
    while remaining > 0:
        chunk: bytes = stream.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _request_from_environ(environ: dict[str, Any], body: bytes) -> Request:
    headers: list[tuple[str, str]] = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            headers.append((key[5:].replace("_", "-").lower(), value))
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            headers.append((key.replace("_", "-").lower(), value))
    # PEP 3333: PATH_INFO holds the raw bytes decoded as latin-1; the path is UTF-8 on the wire.
    raw_path = environ.get("PATH_INFO", "") or "/"
    script_name = environ.get("SCRIPT_NAME", "").rstrip("/")  # where an embedding application mounted us
    if script_name and raw_path.startswith(script_name + "/"):  # a server that left the mount prefix in PATH_INFO
        raw_path = raw_path[len(script_name) :]
    try:
        path = raw_path.encode("latin-1").decode("utf-8")
        root_path = script_name.encode("latin-1").decode("utf-8")
    except UnicodeError:
        raise MalformedRequest("the request path is not UTF-8") from None
    return Request(
        method=environ.get("REQUEST_METHOD", "GET"),
        path=path,
        headers=tuple(headers),
        body=body,
        query=environ.get("QUERY_STRING", ""),
        client=environ.get("REMOTE_ADDR") or None,
        root_path=root_path,
        scheme=environ.get("wsgi.url_scheme", "http"),
    )


class _FromEnvironment:
    """The service as the environment configures it, built at the first request (once, under a lock) rather than
    when imported. A configuration error is reported in one line, and requests are answered 500 while it stands."""

    def __init__(self) -> None:
        self._app: IdentityWSGI | None = None
        self._error: ConfigurationError | None = None
        self._lock = threading.Lock()

    def _build(self) -> IdentityWSGI:
        with self._lock:
            if self._app is None:
                if self._error is not None:
                    raise self._error
                try:
                    self._app = IdentityWSGI(Settings.from_env(), configure_logs=True)
                except ConfigurationError as exc:
                    self._error = exc
                    report_configuration_error(exc)
                    raise
            return self._app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        try:
            app = self._build()
        except ConfigurationError:
            request_id = new_request_id(SystemEntropy())
            error = KnownError(ErrorCode.INTERNAL_ERROR, context={"request_id": request_id})
            response = Service().error_response(error, request_id)
            start_response(f"{response.status} {HTTPStatus(response.status).phrase}", list(response.headers))
            return [response.body]
        return app(environ, start_response)


#: The application a WSGI server serves: `identity_hosting.wsgi:app`, configured from the environment at the first
#: request.
app = _FromEnvironment()
