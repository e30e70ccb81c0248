"""The hosts' webhook senders: perform `SendWebhooks` (the delivery loop's POSTs) over HTTP with httpx.

- `WebhookHttpSender` (sync: the WSGI host's delivery thread; concurrent through a small thread pool) and
  `AsyncWebhookHttpSender` (the ASGI host's delivery task; concurrent on the event loop). Each holds one httpx
  client (keep-alive pool), closed with the host.
- Every POST has a timeout (`IDENTITY_WEBHOOK_TIMEOUT_SECONDS`, each of connect, write and read; the async sender
  also bounds the whole exchange), follows no redirect (a 3xx is a failed attempt, as with Svix), and reads at most
  `MAX_RESPONSE_BYTES` of the answer, which it ignores: only the status counts.
- A receiver's failure is a result, never an exception: `WebhookResult(status_code, latency_ms, error)` with error
  "timeout", "connection refused", "connection failed", "HTTP <status>" or "address not allowed".
- SSRF guard (production): the address rule every outbound request follows (`identity_proto.egress`: global
  unicast only), through the guarded transport of `identity_hosting.egress`: the URL as written, then every address
  its host resolves to, checked before the connection, which goes to those checked addresses only (the Host header
  and TLS server name stay the URL's), so a DNS answer that changes between the check and the connection cannot
  lead inside. `allow_private` (dev mode, or `IDENTITY_ALLOW_PRIVATE_ADDRESSES=1`) turns the guard off.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from identity_hosting.egress import AddressNotAllowed, AsyncGuardedTransport, GuardedTransport
from identity_proto.effects.webhooks import SendWebhooks, WebhookRequest, WebhookResult
from identity_proto.egress import is_allowed_address

__all__ = [
    "MAX_RESPONSE_BYTES",
    "AddressNotAllowed",
    "AsyncWebhookHttpSender",
    "WebhookHttpSender",
    "is_public_address",
]

logger = logging.getLogger("identity_service.webhooks")

#: At most this much of a receiver's answer is read (and then dropped): only the status counts.
MAX_RESPONSE_BYTES = 4096
#: Concurrent POSTs of the sync sender.
_SYNC_CONCURRENCY = 16
#: The connection pool of each sender.
_LIMITS = httpx.Limits(max_connections=64, max_keepalive_connections=16)


def is_public_address(address: str) -> bool:
    """Whether `address` (an IP address) is one a production service may POST to (`identity_proto.egress`)."""
    return is_allowed_address(address)


def _failure(exc: Exception) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, AddressNotAllowed):
        return "address not allowed"
    if isinstance(exc, httpx.ConnectError):
        return "connection refused" if _refused(exc) else "connection failed"
    return "connection failed"


def _refused(exc: BaseException) -> bool:
    """Whether a connection error comes from a refused connection (somewhere down its chain of causes; the async
    transport wraps each address's attempt in a group)."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError) or "refused" in str(current).lower():
            return True
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
    return False


def _result(status: int | None, started: float, error: str | None = None) -> WebhookResult:
    latency = max(0, int((time.perf_counter() - started) * 1000))
    if error is None and status is not None and not 200 <= status < 300:
        error = f"HTTP {status}"
    return WebhookResult(status_code=status, latency_ms=latency, error=error)


def _client_options(timeout_s: float) -> dict[str, Any]:
    return {"timeout": httpx.Timeout(timeout_s), "follow_redirects": False, "trust_env": False}


class WebhookHttpSender:
    """Performs `SendWebhooks` for sync hosts (the WSGI host's delivery thread)."""

    def __init__(
        self,
        *,
        allow_private: bool,
        timeout_s: float = 15.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.allow_private = allow_private
        guarded = GuardedTransport(allow_private=allow_private, network=transport, limits=_LIMITS)
        self._client = httpx.Client(transport=guarded, **_client_options(timeout_s))
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def send(self, effect: SendWebhooks) -> tuple[WebhookResult, ...]:
        """POST every request of `effect`, concurrently; one result each, in order."""
        if len(effect.requests) == 1:
            return (self._post(effect.requests[0], effect.timeout_s),)
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(_SYNC_CONCURRENCY, thread_name_prefix="webhook-post")
            pool = self._pool
        return tuple(pool.map(lambda request: self._post(request, effect.timeout_s), effect.requests))

    def _post(self, request: WebhookRequest, timeout_s: float) -> WebhookResult:
        started = time.perf_counter()
        try:
            with self._client.stream(
                "POST",
                request.url,
                content=request.body,
                headers=dict(request.headers),
                timeout=httpx.Timeout(timeout_s),
            ) as response:
                _drain_sync(response)
                return _result(response.status_code, started)
        except (httpx.HTTPError, AddressNotAllowed, OSError) as exc:
            return _result(None, started, _failure(exc))

    def close(self) -> None:
        """Close the connections and the thread pool."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        self._client.close()


class AsyncWebhookHttpSender:
    """Performs `SendWebhooks` for the ASGI host's delivery task."""

    def __init__(
        self,
        *,
        allow_private: bool,
        timeout_s: float = 15.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.allow_private = allow_private
        guarded = AsyncGuardedTransport(allow_private=allow_private, network=transport, limits=_LIMITS)
        self._client = httpx.AsyncClient(transport=guarded, **_client_options(timeout_s))

    async def send(self, effect: SendWebhooks) -> tuple[WebhookResult, ...]:
        """POST every request of `effect`, concurrently; one result each, in order."""
        return tuple(await asyncio.gather(*(self._post(request, effect.timeout_s) for request in effect.requests)))

    async def _post(self, request: WebhookRequest, timeout_s: float) -> WebhookResult:
        started = time.perf_counter()
        try:
            # The whole exchange is bounded too: a receiver trickling its answer byte by byte cannot hold it.
            async with asyncio.timeout(timeout_s + 1):
                async with self._client.stream(
                    "POST",
                    request.url,
                    content=request.body,
                    headers=dict(request.headers),
                    timeout=httpx.Timeout(timeout_s),
                ) as response:
                    await _drain_async(response)
                    return _result(response.status_code, started)
        except TimeoutError:
            return _result(None, started, "timeout")
        except (httpx.HTTPError, AddressNotAllowed, OSError) as exc:
            return _result(None, started, _failure(exc))

    async def aclose(self) -> None:
        """Close the connections."""
        await self._client.aclose()


def _drain_sync(response: httpx.Response) -> None:
    if response.is_stream_consumed:  # a transport that read it already (a test double)
        return
    read = 0
    for chunk in response.iter_raw():
        read += len(chunk)
        if read >= MAX_RESPONSE_BYTES:
            break


async def _drain_async(response: httpx.Response) -> None:
    if response.is_stream_consumed:
        return
    read = 0
    async for chunk in response.aiter_raw():
        read += len(chunk)
        if read >= MAX_RESPONSE_BYTES:
            break
