"""What operators see, through the ASGI host in process (`identity_hosting.observability`): the liveness and
readiness probes, the Prometheus metrics (requests by route template, status and access type, latency, rate-limit
refusals, conflicts re-run, store operations and the circuit breaker, webhook attempts and backlog) and the access
log. prometheus-client is a dependency: without it these tests fail, they do not skip. The metrics across several
Hypercorn workers, and the access log of a real server, are tested in tests/e2e/test_operations_http.py."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from asgi_app import IdentityASGI
from backends.memory import AsyncMemoryStore, MemoryStore
from backends.redis import AsyncRedisStore
from identity_hosting.observability import Metrics
from identity_hosting.settings import ConfigurationError, Settings
from identity_hosting.wsgi import IdentityWSGI
from identity_proto import SeededEntropy, StorageUnavailable
from identity_proto.effects import StorageEffect
from identity_proto.effects.commit import Commit, Conflict
from identity_proto.effects.webhooks import SendWebhooks, WebhookResult
from identity_proto.flows.webhook_delivery import PassReport
from identity_proto.service import MAX_COMMIT_ATTEMPTS
from tests.processes import free_port
from tests.support import admin_headers, client_headers, server_headers

TOKEN = "scrape-token-0123456789"


def _app(store: Any = None, **settings: Any) -> IdentityASGI:
    return IdentityASGI(Settings(**settings), store=store, entropy=SeededEntropy(1))


def _exchange(app: IdentityASGI, *requests: tuple[str, str, dict[str, Any]]) -> list[httpx.Response]:
    """The answers to `requests` (method, path, httpx keyword arguments), sent one after another."""

    async def main() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return [await client.request(method, path, **kwargs) for method, path, kwargs in requests]

    return asyncio.run(main())


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a scrape, by name and labels."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


# ----------------------------------------------------------------------------------------------------------------
# Probes


def test_liveness_answers_without_touching_the_store() -> None:
    app = _app(store=_DownStore())
    (live,) = _exchange(app, ("GET", "/health/live", {}))
    assert (live.status_code, live.json()) == (200, {"status": "live"})
    assert not app._started  # nothing was bootstrapped through the store


def test_readiness_answers_200_when_the_store_answers() -> None:
    (ready,) = _exchange(_app(), ("GET", "/health/ready", {}))
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})


class _DownStore(AsyncMemoryStore):
    async def apply(self, effect: StorageEffect[Any]) -> Any:
        raise StorageUnavailable("down")


def test_readiness_answers_503_when_the_store_does_not_answer() -> None:
    app = _app(store=_DownStore())
    ready, again = _exchange(app, ("GET", "/health/ready", {}), ("GET", "/health/ready", {}))
    assert (ready.status_code, ready.json()["code"]) == (503, "STORAGE_UNAVAILABLE")
    assert again.status_code == 503
    app._started = True  # started, then the store went away
    (later,) = _exchange(app, ("GET", "/health/ready", {}))
    assert later.status_code == 503


def test_readiness_with_redis_down_answers_fast_once_the_circuit_is_open() -> None:
    store = AsyncRedisStore.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_timeout=0.5)  # nobody listens
    app = _app(store=store)
    app._started = True
    began = time.monotonic()
    answers = _exchange(app, *[("GET", "/health/ready", {})] * 20)
    elapsed = time.monotonic() - began
    assert {a.status_code for a in answers} == {503}
    assert elapsed < 1.0, elapsed  # the first attempt fails; the circuit refuses the rest at once


def test_the_probes_are_served_under_a_mount_prefix_and_not_in_the_openapi_document() -> None:
    async def main() -> tuple[httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(app=_app(), root_path="/auth")
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.get("/auth/health/live"), await client.get("/auth/api/v1/openapi.json")

    live, document = asyncio.run(main())
    assert live.status_code == 200
    assert not [path for path in document.json()["paths"] if path.startswith(("/health/", "/metrics"))]


# ----------------------------------------------------------------------------------------------------------------
# Metrics


def test_metrics_are_off_by_default() -> None:
    (scrape,) = _exchange(_app(), ("GET", "/metrics", {}))
    assert scrape.status_code == 404


def test_requests_are_counted_by_route_template_status_and_access_type() -> None:
    app = _app(metrics=True)
    user = "0f1e2d3c-4b5a-4678-9abc-def012345678"
    *_, scrape = _exchange(
        app,
        ("GET", "/api/v1", {"headers": server_headers()}),
        ("GET", "/api/v1", {}),
        ("GET", f"/api/v1/users/{user}", {"headers": server_headers()}),
        ("GET", "/api/v1/users/somebody-else", {"headers": server_headers()}),
        ("GET", "/api/v1/users", {"headers": client_headers()}),
        ("GET", "/no/such/path", {}),
        ("OPTIONS", "/api/v1/users", {"headers": {"origin": "http://localhost:3000"}}),
        ("GET", "/health/live", {}),
        ("GET", "/metrics", {}),
    )
    assert scrape.status_code == 200
    assert scrape.headers["content-type"].startswith("text/plain")
    samples = _samples(scrape.text)
    count = "identity_http_requests_total"
    assert _value(samples, count, route="/api/v1", method="GET", status="200", access_type="server") == 1
    assert _value(samples, count, route="/api/v1", method="GET", status="200", access_type="none") == 1
    # one label for every user id: the template, never the path
    by_id = {"route": "/api/v1/users/{user_id}", "method": "GET", "access_type": "server"}
    assert _value(samples, count, **by_id, status="404") == 1  # no such user
    assert _value(samples, count, **by_id, status="400") == 1  # not an id
    assert not [labels for (_name, labels) in samples if ("route", f"/api/v1/users/{user}") in labels]
    assert _value(samples, count, route="/api/v1/users", method="GET", status="401", access_type="client") == 1
    assert _value(samples, count, route="(unmatched)", method="GET", status="404", access_type="none") == 1
    assert _value(samples, count, route="(preflight)", method="OPTIONS", status="200", access_type="none") == 1
    assert _value(samples, count, route="/health/live", method="GET", status="200", access_type="none") == 1
    histogram = "identity_http_request_duration_seconds_count"
    assert _value(samples, histogram, route="/api/v1", method="GET") == 2
    assert (
        _value(samples, "identity_http_request_duration_seconds_bucket", route="/api/v1", method="GET", le="+Inf") == 2
    )


def test_a_scrape_needs_the_token_when_one_is_set() -> None:
    app = _app(metrics=True, metrics_token=TOKEN)
    none, wrong, right = _exchange(
        app,
        ("GET", "/metrics", {}),
        ("GET", "/metrics", {"headers": {"authorization": "Bearer not-the-token-at-all"}}),
        ("GET", "/metrics", {"headers": {"authorization": f"Bearer {TOKEN}"}}),
    )
    assert (none.status_code, wrong.status_code, right.status_code) == (401, 401, 200)
    assert TOKEN not in none.text + wrong.text
    assert "identity_http_requests_total" in right.text


def test_rate_limit_refusals_are_counted_by_route() -> None:
    app = _app(metrics=True, rate_limits=True)
    sign_up = ("POST", "/api/v1/auth/anonymous/sign-up", {"headers": client_headers(), "json": {}})
    answers = _exchange(app, *[sign_up] * 12)
    assert answers[-1].status_code == 429, [a.status_code for a in answers]
    refused = sum(a.status_code == 429 for a in answers)
    (scrape,) = _exchange(app, ("GET", "/metrics", {}))
    samples = _samples(scrape.text)
    assert _value(samples, "identity_rate_limit_refusals_total", route="/api/v1/auth/anonymous/sign-up") == refused


class _Contended(AsyncMemoryStore):
    """Its next `conflicts` guarded commits are refused, as if a concurrent write had broken their first guard."""

    conflicts = 0

    async def apply(self, effect: StorageEffect[Any]) -> Any:
        if isinstance(effect, Commit) and effect.guards and self.conflicts > 0:
            self.conflicts -= 1
            return Conflict(0)
        return await super().apply(effect)


def test_conflicts_re_run_and_given_up_are_counted_by_route() -> None:
    store = _Contended()
    app = _app(store=store, metrics=True)
    (created,) = _exchange(app, ("POST", "/api/v1/users", {"headers": server_headers(), "json": {}}))
    assert created.status_code == 201, created.text
    patch = (
        "PATCH",
        f"/api/v1/users/{created.json()['id']}",
        {"headers": server_headers(), "json": {"primary_email": "grace@example.com"}},
    )
    store.conflicts = 2
    (once,) = _exchange(app, patch)
    store.conflicts = MAX_COMMIT_ATTEMPTS
    (given_up,) = _exchange(app, patch)
    assert once.status_code == 200
    assert (given_up.status_code, given_up.headers["x-service-known-error"]) == (503, "WRITE_CONFLICT")
    (scrape,) = _exchange(app, ("GET", "/metrics", {}))
    samples = _samples(scrape.text)
    route = "/api/v1/users/{user_id}"
    assert _value(samples, "identity_commit_reruns_total", route=route) == 2 + MAX_COMMIT_ATTEMPTS - 1
    assert _value(samples, "identity_write_conflicts_total", route=route) == 1


def test_webhook_passes_attempts_and_backlog_are_measured() -> None:
    metrics = Metrics()
    metrics.delivery_pass(PassReport(fanned_out=2, attempted=5, succeeded=3))
    metrics.delivery_pass(None)
    metrics.webhook_backlog.set(7)
    samples = _samples(metrics.exposition()[0].decode())
    assert _value(samples, "identity_webhook_delivery_attempts_total", outcome="succeeded") == 3
    assert _value(samples, "identity_webhook_delivery_attempts_total", outcome="failed") == 2
    assert _value(samples, "identity_webhook_delivery_passes_total", outcome="ok") == 1
    assert _value(samples, "identity_webhook_delivery_passes_total", outcome="failed") == 1
    assert _value(samples, "identity_webhook_backlog") == 7


class _Refused:
    """A webhook sender whose every POST finds no receiver (the deliveries stay pending, due again later)."""

    async def send(self, effect: SendWebhooks) -> tuple[WebhookResult, ...]:
        return tuple(WebhookResult(None, 1, "connection refused") for _ in effect.requests)

    async def aclose(self) -> None:
        pass


def test_the_delivery_loop_reports_its_attempts_and_a_scrape_counts_the_backlog() -> None:
    app = IdentityASGI(Settings(metrics=True), entropy=SeededEntropy(1), webhook_sender=_Refused())

    async def main() -> str:
        await app.startup()
        try:
            assert app.webhook_loop is not None
            await app.webhook_loop.stop()  # passes run here, one at a time
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                endpoint = {"url": "http://127.0.0.1:9/hook"}
                made = await client.post("/api/v1/webhook-endpoints", headers=admin_headers(), json=endpoint)
                assert made.status_code == 201, made.text
                for name in ("Ada", "Grace"):  # two events: user.created
                    created = await client.post("/api/v1/users", headers=server_headers(), json={"display_name": name})
                    assert created.status_code == 201, created.text
                await app.webhook_loop.run_pass()
                return (await client.get("/metrics")).text
        finally:
            await app.shutdown()

    samples = _samples(asyncio.run(main()))
    assert _value(samples, "identity_webhook_delivery_passes_total", outcome="ok") == 1
    assert _value(samples, "identity_webhook_delivery_attempts_total", outcome="failed") == 2
    assert _value(samples, "identity_webhook_delivery_attempts_total", outcome="succeeded") == 0
    assert _value(samples, "identity_webhook_backlog") == 2  # both due again later


# ----------------------------------------------------------------------------------------------------------------
# Access log


@pytest.fixture
def access_lines(capsys: pytest.CaptureFixture[str]) -> Callable[[], list[str]]:
    """The access-log lines written to standard error so far (the only lines there in these tests)."""
    capsys.readouterr()
    return lambda: capsys.readouterr().err.splitlines()


def test_the_access_log_is_off_by_default(access_lines: Callable[[], list[str]]) -> None:
    _exchange(_app(), ("GET", "/api/v1", {}))
    assert access_lines() == []


def test_one_json_line_per_request_with_its_request_id_and_no_secret(access_lines: Callable[[], list[str]]) -> None:
    app = _app(access_log="json", trusted_proxy_header="x-forwarded-for")
    secret_code = "ABC123-secret-code-value"
    answers = _exchange(
        app,
        ("GET", f"/api/v1/users/me?code={secret_code}", {"headers": server_headers()}),
        ("POST", "/api/v1/auth/otp/sign-in", {"headers": client_headers(), "json": {"code": secret_code}}),
        ("GET", "/api/v1", {"headers": {"x-forwarded-for": "10.0.0.1, 203.0.113.7", "authorization": secret_code}}),
        ("GET", "/health/live", {}),
    )
    lines = access_lines()
    assert len(lines) == len(answers)
    records = [json.loads(line) for line in lines]
    for answer, record in zip(answers, records, strict=True):
        assert record["status"] == answer.status_code
        assert record["request_id"] == answer.headers.get("x-service-request-id")
        assert set(record) == {
            "time",
            "method",
            "route",
            "status",
            "duration_ms",
            "request_id",
            "access_type",
            "client",
            "error",
        }
    assert records[0]["route"] == "/api/v1/users/me"
    assert records[0]["access_type"] == "server"
    assert records[1]["route"] == "/api/v1/auth/otp/sign-in"
    assert records[2]["client"] == "203.0.113.7"  # the trusted proxy's header, its last address
    assert records[3]["route"] == "/health/live"
    keys = server_headers() | client_headers()
    for line in lines:
        assert secret_code not in line
        assert "code=" not in line
        for name, value in keys.items():
            if "key" in name:
                assert value not in line


def test_a_text_line_says_the_same(access_lines: Callable[[], list[str]]) -> None:
    (answer,) = _exchange(_app(access_log="text"), ("GET", "/api/v1/users/me", {"headers": server_headers()}))
    (line,) = access_lines()
    time = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
    rest = r'127\.0\.0\.1 "GET /api/v1/users/me" \d{3} [0-9.]+ms access=server request_id=\w+( error=\w+)?'
    assert re.fullmatch(f"{time} {rest}", line), line
    assert answer.headers["x-service-request-id"] in line


# ----------------------------------------------------------------------------------------------------------------
# Settings


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"IDENTITY_ACCESS_LOG": "yes"}, "IDENTITY_ACCESS_LOG"),
        ({"IDENTITY_METRICS": "1"}, "IDENTITY_METRICS must"),
        ({"IDENTITY_METRICS": "on", "IDENTITY_METRICS_TOKEN": "short"}, "IDENTITY_METRICS_TOKEN"),
        ({"IDENTITY_METRICS_TOKEN": TOKEN}, "IDENTITY_METRICS is not 'on'"),
        ({"IDENTITY_METRICS": "on", "PROMETHEUS_MULTIPROC_DIR": "/no/such/directory"}, "PROMETHEUS_MULTIPROC_DIR"),
    ],
)
def test_bad_operator_settings_are_refused(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Settings.from_env(environ)


def test_operator_settings_are_read() -> None:
    settings = Settings.from_env(
        {"IDENTITY_ACCESS_LOG": "JSON", "IDENTITY_METRICS": "on", "IDENTITY_METRICS_TOKEN": TOKEN}
    )
    assert (settings.access_log, settings.metrics, settings.metrics_token) == ("json", True, TOKEN)
    assert TOKEN not in repr(settings)
    assert (Settings.from_env({}).access_log, Settings.from_env({}).metrics) == ("", False)


# ----------------------------------------------------------------------------------------------------------------
# The WSGI host: the same paths, metrics and lines


def _wsgi(store: Any = None, **settings: Any) -> IdentityWSGI:
    return IdentityWSGI(Settings(**settings), store=store, entropy=SeededEntropy(1), webhook_delivery=False)


def _wsgi_exchange(app: IdentityWSGI, *requests: tuple[str, str, dict[str, Any]]) -> list[httpx.Response]:
    with httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://test") as client:
        return [client.request(method, path, **kwargs) for method, path, kwargs in requests]


class _SyncDownStore(MemoryStore):
    def apply(self, effect: StorageEffect[Any]) -> Any:
        raise StorageUnavailable("down")


def test_the_wsgi_host_serves_the_probes() -> None:
    live, ready = _wsgi_exchange(_wsgi(), ("GET", "/health/live", {}), ("GET", "/health/ready", {}))
    assert (live.status_code, ready.status_code, ready.json()) == (200, 200, {"status": "ready"})
    down = _wsgi(store=_SyncDownStore())
    live, ready = _wsgi_exchange(down, ("GET", "/health/live", {}), ("GET", "/health/ready", {}))
    assert (live.status_code, ready.status_code, ready.json()["code"]) == (200, 503, "STORAGE_UNAVAILABLE")


def test_the_wsgi_host_counts_requests_and_writes_one_line_each(access_lines: Callable[[], list[str]]) -> None:
    app = _wsgi(metrics=True, metrics_token=TOKEN, access_log="json")
    answers = _wsgi_exchange(
        app,
        ("GET", "/api/v1/users/0f1e2d3c-4b5a-4678-9abc-def012345678", {"headers": server_headers()}),
        ("GET", "/metrics", {}),
        ("GET", "/metrics", {"headers": {"authorization": f"Bearer {TOKEN}"}}),
    )
    assert [a.status_code for a in answers] == [404, 401, 200]
    samples = _samples(answers[-1].text)
    labels = {"route": "/api/v1/users/{user_id}", "method": "GET", "status": "404", "access_type": "server"}
    assert _value(samples, "identity_http_requests_total", **labels) == 1
    refused = {"route": "/metrics", "method": "GET", "status": "401", "access_type": "none"}
    assert _value(samples, "identity_http_requests_total", **refused) == 1
    records = [json.loads(line) for line in access_lines()]
    assert [r["status"] for r in records] == [404, 401, 200]
    assert records[0]["request_id"] == answers[0].headers["x-service-request-id"]
    assert records[0]["route"] == "/api/v1/users/{user_id}"
    assert TOKEN not in "".join(access_lines())


def test_metrics_on_without_prometheus_client_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "prometheus_client" else real(name, *a)
    )
    with pytest.raises(ConfigurationError, match="prometheus-client"):
        Settings.from_env({"IDENTITY_METRICS": "on"})
    assert Settings.from_env({}).metrics is False  # off, it is never looked for
