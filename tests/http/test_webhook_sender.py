"""The hosts' webhook senders against a real receiver on a loopback port: results for every kind of failure, a
timeout that holds, no redirect followed, and the SSRF guard of production mode."""

from __future__ import annotations

import asyncio
import http.server
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from identity_hosting.webhook_sender import AsyncWebhookHttpSender, WebhookHttpSender, is_public_address
from identity_proto.effects.webhooks import SendWebhooks, WebhookRequest, WebhookResult
from tests.processes import free_port
from tests.webhook_receivers import running_receiver


def _request(url: str, body: bytes = b'{"type":"team.deleted","data":{"id":"t1"}}') -> WebhookRequest:
    return WebhookRequest(url=url, headers=(("content-type", "application/json"), ("webhook-id", "msg_1")), body=body)


def _send_both(effect: SendWebhooks, *, allow_private: bool = True) -> list[tuple[WebhookResult, ...]]:
    """The effect performed by the sync and by the async sender."""
    sync = WebhookHttpSender(allow_private=allow_private)
    try:
        first = sync.send(effect)
    finally:
        sync.close()

    async def send_async() -> tuple[WebhookResult, ...]:
        sender = AsyncWebhookHttpSender(allow_private=allow_private)
        try:
            return await sender.send(effect)
        finally:
            await sender.aclose()

    return [first, asyncio.run(send_async())]


def test_a_2xx_is_a_success_with_its_latency_and_the_body_arrives_unchanged() -> None:
    with running_receiver() as receiver:
        for results in _send_both(SendWebhooks((_request(receiver.url),), timeout_s=5)):
            (result,) = results
            assert result.status_code == 200
            assert result.error is None
            assert result.latency_ms >= 0
        assert [item.body for item in receiver.received] == [b'{"type":"team.deleted","data":{"id":"t1"}}'] * 2
        assert receiver.received[0].headers["webhook-id"] == "msg_1"


def test_a_500_is_a_failed_attempt_named_by_its_status() -> None:
    with running_receiver() as receiver:
        receiver.status = 500
        for (result,) in _send_both(SendWebhooks((_request(receiver.url),), timeout_s=5)):
            assert (result.status_code, result.error) == (500, "HTTP 500")


def test_a_closed_port_is_connection_refused() -> None:
    url = f"http://127.0.0.1:{free_port()}/hook"
    for (result,) in _send_both(SendWebhooks((_request(url),), timeout_s=5)):
        assert (result.status_code, result.error) == (None, "connection refused")


def test_a_receiver_hanging_past_the_timeout_is_a_timeout_within_about_the_timeout() -> None:
    with running_receiver() as receiver:
        receiver.hang_s = 3.0
        started = time.monotonic()
        for (result,) in _send_both(SendWebhooks((_request(receiver.url),), timeout_s=0.3)):
            assert (result.status_code, result.error) == (None, "timeout")
        assert time.monotonic() - started < 2.5


@pytest.fixture
def redirecting_server() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(307)
            self.send_header("location", "http://127.0.0.1:1/elsewhere")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_a_redirect_is_not_followed_and_counts_as_a_failure(redirecting_server: str) -> None:
    for (result,) in _send_both(SendWebhooks((_request(redirecting_server),), timeout_s=5)):
        assert (result.status_code, result.error) == (307, "HTTP 307")


def test_requests_are_sent_concurrently_and_answered_in_order() -> None:
    with running_receiver() as ok, running_receiver() as failing:
        failing.status = 503
        ok.hang_s = 0.4
        failing.hang_s = 0.4
        effect = SendWebhooks(tuple(_request(r.url) for r in (ok, failing, ok, failing)), timeout_s=5)
        started = time.monotonic()
        for results in _send_both(effect):
            assert [r.status_code for r in results] == [200, 503, 200, 503]
        # Four POSTs of 0.4 s each, twice: one after the other that would take 3.2 s.
        assert time.monotonic() - started < 2.4


def test_in_production_a_loopback_receiver_is_refused_before_any_connection() -> None:
    with running_receiver() as receiver:
        for (result,) in _send_both(SendWebhooks((_request(receiver.url),), timeout_s=5), allow_private=False):
            assert (result.status_code, result.error) == (None, "address not allowed")
        localhost = receiver.url.replace("127.0.0.1", "localhost")
        for (result,) in _send_both(SendWebhooks((_request(localhost),), timeout_s=5), allow_private=False):
            assert result.error == "address not allowed"
        assert receiver.received == []


@pytest.mark.parametrize("address", ["100.64.0.1", "100.100.100.200", "10.0.0.8", "127.0.0.1"])
def test_in_production_a_name_resolving_to_a_non_global_address_is_refused_before_any_connection(
    monkeypatch: pytest.MonkeyPatch, address: str
) -> None:
    """The resolver is patched at its boundary (`socket.getaddrinfo`, which the asyncio loop's resolver calls too):
    `hooks.example.com` resolves to `address`, as a DNS answer could. The sender refuses it without connecting."""
    resolve = socket.getaddrinfo
    connects: list[object] = []

    def hosts(host: str | bytes, port: object, *args: Any, **kwargs: Any) -> list[Any]:
        if host in ("hooks.example.com", b"hooks.example.com"):  # anyio passes the IDNA-encoded bytes
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port or 443)))]  # type: ignore[call-overload]
        return resolve(host, port, *args, **kwargs)  # type: ignore[arg-type]

    def no_connection(*args: Any, **kwargs: Any) -> None:
        connects.append(args)
        raise OSError("no connection may be made here")

    monkeypatch.setattr(socket, "getaddrinfo", hosts)
    monkeypatch.setattr(socket, "create_connection", no_connection)
    effect = SendWebhooks((_request("https://hooks.example.com/hook"), _request("http://hooks.example.com:8080/")), 3)
    for results in _send_both(effect, allow_private=False):
        assert [(r.status_code, r.error) for r in results] == [(None, "address not allowed")] * 2
    assert connects == []


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),  # the cloud metadata address
        ("0.0.0.0", False),  # noqa: S104
        ("::1", False),
        ("fe80::1", False),
        ("fc00::1", False),
        ("::ffff:127.0.0.1", False),
        ("224.0.0.1", False),
        ("100.64.0.1", False),  # shared address space (CGNAT): not global
        ("100.100.100.200", False),  # a cloud metadata address in it
        ("64:ff9b::7f00:1", False),  # NAT64 of 127.0.0.1
        ("2002:7f00:1::1", False),  # 6to4 of 127.0.0.1
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
    ],
)
def test_which_addresses_count_as_public(address: str, public: bool) -> None:
    assert is_public_address(address) is public


def test_in_production_a_public_address_is_connected_to_by_the_checked_address() -> None:
    """The guard pins the connection to the address it checked; the Host header stays the URL's."""
    import httpx

    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    sender = WebhookHttpSender(allow_private=False, transport=httpx.MockTransport(handler))
    try:
        (result,) = sender.send(SendWebhooks((_request("http://93.184.216.34:8080/hook"),), timeout_s=5))
    finally:
        sender.close()
    assert result.status_code == 204
    assert seen[0].url.host == "93.184.216.34"
    assert seen[0].headers["host"] == "93.184.216.34:8080"
