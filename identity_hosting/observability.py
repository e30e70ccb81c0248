"""What operators see of a running service: health probes, Prometheus metrics and the access log. The hosts serve
and write them; the core only says what it found out about each request (`identity_proto.RequestNote`), and the
Redis store what each of its operations did (`backends.redis.runner.StoreObserver`).

Paths (answered by the host before the API's routes; none of them is in the OpenAPI document, which describes the
API that clients call, and none is rate-limited or authenticated with project keys):

- `GET /health/live`: 200 while the process serves requests (liveness). It touches nothing.
- `GET /health/ready`: 200 when the store answers a read of the internal project, else 503 (readiness). While
  Redis is known to be down the store's circuit breaker refuses at once, so the 503 comes in microseconds.
- `GET /metrics`: the Prometheus text format, when `IDENTITY_METRICS=on` (else the path is the API's: 404). With
  `IDENTITY_METRICS_TOKEN` set, only a request with `Authorization: Bearer <token>` is answered (else 401).

Several worker processes (`hypercorn --workers N`, `identity-service`): a scrape reaches one worker, so per-worker
counters would jump between scrapes. prometheus_client's multiprocess mode is used instead whenever
`PROMETHEUS_MULTIPROC_DIR` names a directory: every worker writes its values to files there (one per process and
kind of metric, memory-mapped) and whichever worker answers a scrape sums the files of all of them. The directory
must be emptied before the server starts (values of an earlier run would be added) and shared by the workers of
one server only; `identity-service` makes a fresh one when the variable is not set. It must be set before
prometheus_client is imported, so in the environment the server starts with, never from the application.

The access log (`IDENTITY_ACCESS_LOG=text|json`, default off): one line per request on standard error, after the
answer was sent: method, route template (never the path: it names users, and
a mistaken client may put a secret in it), status, duration, request id, access type, client address (the trusted
proxy's header when one is configured, as rate limits count), and the known error's code. Never the query string,
a header, the body: tokens, codes and keys travel there.
"""

from __future__ import annotations

import hmac
import logging
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TextIO

import orjson

from identity_proto import AccessType, ErrorCode, Flow, RequestNote, Response, StorageUnavailable
from identity_proto.context import forwarded_client
from identity_proto.effects import Together, perform
from identity_proto.effects.projects import LoadProject
from identity_proto.effects.webhooks import CountPendingDeliveries, ListWebhookProjects
from identity_proto.render import json_response, text_response

if TYPE_CHECKING:
    from identity_proto.flows.webhook_delivery import PassReport

__all__ = [
    "LIVE_PATH",
    "METRICS_PATH",
    "READY_PATH",
    "AccessLog",
    "Metrics",
    "OperatorPaths",
    "RequestObserver",
    "readiness",
]

LIVE_PATH = "/health/live"
READY_PATH = "/health/ready"
METRICS_PATH = "/metrics"
#: How each of them ends: a request whose path ends otherwise is the API's (checked first, on every request).
ENDINGS = ("/live", "/ready", "/metrics")

#: The metric label of a request no route matched (404, 405, an answer the host gave before routing: 400, 408,
#: 413), and of a CORS preflight on a known path.
UNMATCHED = "(unmatched)"
PREFLIGHT = "(preflight)"

#: Seconds; the defaults of prometheus_client with the millisecond range that most requests fall in.
_DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def readiness() -> Flow[Response]:
    """GET /health/ready: 200 when the store answers a read (the internal project, which every store has), 503
    `STORAGE_UNAVAILABLE` when it does not."""
    try:
        yield from perform(LoadProject("internal"))
    except StorageUnavailable:
        return not_ready()
    return json_response(200, {"status": "ready"})


def not_ready() -> Response:
    """GET /health/ready while the store does not answer."""
    return json_response(503, {"status": "unavailable", "code": ErrorCode.STORAGE_UNAVAILABLE.name})


def liveness() -> Response:
    """GET /health/live: the process answers."""
    return json_response(200, {"status": "live"})


class OperatorPaths:
    """Which of the operators' paths a request names: `kind(method, path)` is "live", "ready", "metrics" or None
    (any other request, for the API)."""

    def __init__(self, metrics: Metrics | None, token: str | None) -> None:
        self.metrics = metrics
        self._token = token
        self._paths = {LIVE_PATH: "live", READY_PATH: "ready"}
        if metrics is not None:
            self._paths[METRICS_PATH] = "metrics"

    def kind(self, method: str, path: str) -> str | None:
        return self._paths.get(path) if method == "GET" else None

    def scrape_refused(self, authorization: str | None) -> Response | None:
        """401 when a token is configured and `authorization` does not carry it; else None."""
        if self._token is None:
            return None
        expected = f"Bearer {self._token}".encode()
        if authorization is not None and hmac.compare_digest(authorization.encode("latin-1"), expected):
            return None
        return text_response(401, "The metrics need Authorization: Bearer <IDENTITY_METRICS_TOKEN>.\n")

    def scrape(self, backlog: int | None) -> Response:
        """The metrics, with the webhook backlog as just counted (`webhook_backlog`; None: not counted)."""
        assert self.metrics is not None
        if backlog is not None:
            self.metrics.webhook_backlog.set(backlog)
        body, content_type = self.metrics.exposition()
        return Response(200, (("content-type", content_type), ("cache-control", "no-store")), body)


def webhook_backlog() -> Flow[int]:
    """The deliveries pending in every project with a webhook endpoint (counted when metrics are scraped: the
    store is shared, so the worker that answers counts for all)."""
    project_ids = yield from perform(ListWebhookProjects())
    if not project_ids:
        return 0
    counts = yield Together(tuple(CountPendingDeliveries(project_id) for project_id in project_ids))
    return sum(counts)


def multiprocess_directory() -> str | None:
    """`PROMETHEUS_MULTIPROC_DIR` when it is set: the metrics are then kept in files there, for every worker."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


class Metrics:
    """The service's Prometheus metrics (prometheus_client, imported here and only when metrics are on).

    Single process: the metrics live in a registry of their own (several apps in one process, tests, each count
    their own). Multiprocess mode (`multiprocess_directory()`): the values go to that directory's files, and
    `exposition` sums those of every process."""

    def __init__(self) -> None:
        import prometheus_client as prom  # a missing package fails here, at start-up, when metrics are on

        self._prom = prom
        self._directory = multiprocess_directory()
        if self._directory is None and multiprocessing.parent_process() is not None:
            logging.getLogger("identity_service").warning(
                "metrics: this process is a worker (of Hypercorn?) and PROMETHEUS_MULTIPROC_DIR is not set: with "
                "several workers each scrape sees one worker's counts; identity-service sets it for you"
            )
        self.registry = prom.CollectorRegistry(auto_describe=True)
        registry = None if self._directory else self.registry
        self.requests = prom.Counter(
            "identity_http_requests",
            "HTTP requests answered, by route template, method, status and access type.",
            ("route", "method", "status", "access_type"),
            registry=registry,
        )
        self.duration = prom.Histogram(
            "identity_http_request_duration_seconds",
            "Time from the request's arrival to its answer being sent, by route template and method.",
            ("route", "method"),
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self.rate_limited = prom.Counter(
            "identity_rate_limit_refusals",
            "Requests refused with 429 RATE_LIMITED, by route template.",
            ("route",),
            registry=registry,
        )
        self.reruns = prom.Counter(
            "identity_commit_reruns",
            "Runs of a route's flow again after its commit met a concurrent write, by route template.",
            ("route",),
            registry=registry,
        )
        self.write_conflicts = prom.Counter(
            "identity_write_conflicts",
            "Requests answered 503 WRITE_CONFLICT: every run of the flow met a concurrent write.",
            ("route",),
            registry=registry,
        )
        self.store_operations = prom.Counter(
            "identity_store_operations",
            "Operations of the Redis store (one per effect: a read, a commit, a counter), by effect and outcome "
            "(ok; unavailable: Redis did not answer, or the circuit breaker refused at once; error: an error reply).",
            ("operation", "outcome"),
            registry=registry,
        )
        self.store_duration = prom.Histogram(
            "identity_store_operation_duration_seconds",
            "Time the Redis store took for one operation (its round trips to Redis).",
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self.circuit_open = prom.Gauge(
            "identity_store_circuit_open",
            "1 while the Redis store's circuit breaker refuses requests at once (Redis known to be down).",
            registry=registry,
            multiprocess_mode="livemax",
        )
        self.webhook_attempts = prom.Counter(
            "identity_webhook_delivery_attempts",
            "Webhook POSTs made, by outcome (succeeded: a 2xx answer; failed: another status, a timeout, no "
            "connection: the delivery is retried on its schedule).",
            ("outcome",),
            registry=registry,
        )
        self.webhook_passes = prom.Counter(
            "identity_webhook_delivery_passes",
            "Passes of the webhook delivery loop, by outcome (ok, failed: the store was unavailable).",
            ("outcome",),
            registry=registry,
        )
        self.webhook_backlog = prom.Gauge(
            "identity_webhook_backlog",
            "Webhook deliveries pending (not yet succeeded or given up) in every project, counted at the scrape.",
            registry=registry,
            multiprocess_mode="mostrecent",
        )
        # Children by label values: `labels()` costs a lock and a tuple per call; the label sets are bounded.
        self._request_children: dict[tuple[str, str, int, str], tuple[Any, Any]] = {}
        self._store_children: dict[tuple[str, str], Any] = {}

    def exposition(self) -> tuple[bytes, str]:
        """The metrics in the Prometheus text format, and its content type."""
        prom = self._prom
        if self._directory:
            from prometheus_client import multiprocess

            _forget_dead_workers(self._directory)
            registry = prom.CollectorRegistry()
            multiprocess.MultiProcessCollector(registry, path=self._directory)  # type: ignore[no-untyped-call]
            return prom.generate_latest(registry), prom.CONTENT_TYPE_LATEST
        return prom.generate_latest(self.registry), prom.CONTENT_TYPE_LATEST

    def request(self, route: str, method: str, status: int, access_type: str, seconds: float) -> None:
        key = (route, method, status, access_type)
        children = self._request_children.get(key)
        if children is None:
            children = self._request_children[key] = (
                self.requests.labels(route, method, str(status), access_type),
                self.duration.labels(route, method),
            )
        children[0].inc()
        children[1].observe(seconds)

    def noted(self, route: str, note: RequestNote) -> None:
        """What the core noted beyond the status: conflicts re-run, a rate-limit refusal, a conflict given up."""
        if note.reruns:
            self.reruns.labels(route).inc(note.reruns)
        if note.error is ErrorCode.RATE_LIMITED:
            self.rate_limited.labels(route).inc()
        elif note.error is ErrorCode.WRITE_CONFLICT:
            self.write_conflicts.labels(route).inc()

    # backends.redis.runner.StoreObserver
    def performed(self, operation: str, outcome: str, seconds: float) -> None:
        key = (operation, outcome)
        child = self._store_children.get(key)
        if child is None:
            child = self._store_children[key] = self.store_operations.labels(operation, outcome)
        child.inc()
        self.store_duration.observe(seconds)

    def circuit(self, is_open: bool) -> None:
        self.circuit_open.set(1 if is_open else 0)

    # identity_hosting.webhook_loops: the delivery loop's observer
    def delivery_pass(self, report: PassReport | None) -> None:
        """A pass ended: with its report, or None when it failed."""
        if report is None:
            self.webhook_passes.labels("failed").inc()
            return
        self.webhook_passes.labels("ok").inc()
        if report.attempted:
            self.webhook_attempts.labels("succeeded").inc(report.succeeded)
            self.webhook_attempts.labels("failed").inc(report.attempted - report.succeeded)

    def process_ended(self) -> None:
        """This worker stops: in multiprocess mode, its live gauges no longer count."""
        if self._directory:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(os.getpid(), self._directory)  # type: ignore[no-untyped-call]


def _forget_dead_workers(directory: str) -> None:
    """Drop the live gauges of workers that are gone without saying so (SIGKILL, the OOM killer: a worker stopped
    gracefully says so itself, `Metrics.process_ended`), so that a scrape does not report, say, a circuit open in
    a worker that no longer exists. Their counters and histograms stay: those must never go back."""
    from prometheus_client import multiprocess

    for name in os.listdir(directory):
        if name.startswith("gauge_live") and name.endswith(".db"):
            pid = name[: -len(".db")].rpartition("_")[2]
            if pid.isdigit() and not _alive(int(pid)):
                multiprocess.mark_process_dead(int(pid), directory)  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


class AccessLog:
    """One line per request on standard error (`format`: "text" or "json"), written whole, in one write: lines of
    several workers sharing the stream never interleave. Not through `logging`: a log record costs several times
    what the rest of the line does (its caller lookup, its thread and process names), on every request."""

    __slots__ = ("_second", "_stream", "format")

    def __init__(self, format: str, stream: TextIO | None = None) -> None:
        self.format = format
        self._stream = stream  # None: `sys.stderr` as it is at each write
        #: The last second formatted, and its text: one tuple, replaced whole (threads of a WSGI server share it).
        self._second: tuple[int, str] = (-1, "")

    def write(
        self,
        *,
        method: str,
        route: str,
        status: int,
        seconds: float,
        request_id: str | None,
        access_type: str,
        client: str | None,
        error: ErrorCode | None,
    ) -> None:
        duration_ms = round(seconds * 1000, 3)
        if self.format == "json":
            fields = {
                "time": self._now(),
                "method": method,
                "route": route,
                "status": status,
                "duration_ms": duration_ms,
                "request_id": request_id,
                "access_type": access_type,
                "client": client,
                "error": None if error is None else error.name,
            }
            line = orjson.dumps(fields, option=orjson.OPT_APPEND_NEWLINE).decode()
        else:
            line = (
                f'{self._now()} {client or "-"} "{method} {route}" {status} {duration_ms}ms access={access_type} '
                f"request_id={request_id or '-'}{f' error={error.name}' if error else ''}\n"
            )
        (self._stream or sys.stderr).write(line)

    def _now(self) -> str:
        """The time in UTC, ISO 8601 to the millisecond (the date and second formatted once a second)."""
        now = time.time()
        second, text = self._second
        if int(now) != second:
            second = int(now)
            text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, text)
        return f"{text}.{int((now - second) * 1000):03d}Z"


class RequestObserver:
    """What a host does once a request was answered: count it in the metrics, write its access-log line (either may
    be None: off)."""

    __slots__ = ("access_log", "metrics")

    def __init__(self, metrics: Metrics | None, access_log: AccessLog | None) -> None:
        self.metrics = metrics
        self.access_log = access_log

    def answered(
        self,
        method: str,
        note: RequestNote,
        status: int,
        seconds: float,
        request_id: Callable[[], str | None],
        client: Callable[[], str | None],
    ) -> None:
        """`request_id` and `client` are asked only when a line is written."""
        route = route_label(note, method, status)
        access = _ACCESS_LABELS[note.access_type]
        if self.metrics is not None:
            self.metrics.request(route, method, status, access, seconds)
            self.metrics.noted(route, note)
        if self.access_log is not None:
            self.access_log.write(
                method=method,
                route=route,
                status=status,
                seconds=seconds,
                request_id=request_id(),
                access_type=access,
                client=client(),
                error=note.error,
            )


def request_id_of(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The request id among a response's ASGI headers."""
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


def client_of(headers: Iterable[tuple[bytes, bytes]], peer: str | None, trusted_header: bytes | None) -> str | None:
    """The client's address as rate limits count it (`identity_proto.context.forwarded_client`), from ASGI headers."""
    forwarded = None
    if trusted_header:
        for key, value in headers:
            if key == trusted_header:
                forwarded = value.decode("latin-1")
    return forwarded_client(forwarded, peer)


def route_label(note: RequestNote, method: str, status: int) -> str:
    if note.route is not None:
        return note.route
    return PREFLIGHT if method == "OPTIONS" and status == 200 else UNMATCHED


#: Access types as labels (`AccessType.value` is a property: slower than a dict on every request).
_ACCESS_LABELS: dict[AccessType | None, str] = {None: "none", **{access: access.value for access in AccessType}}


def monotonic() -> float:
    return time.perf_counter()
