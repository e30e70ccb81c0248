"""The asyncio webhook sender, `AsyncWebhookHttpSender` (the ASGI host's delivery task), and the source of the sync
one, `WebhookHttpSender` (the WSGI host's delivery thread: `identity_hosting.webhook_sender_sync`, which
`scripts/generate_sync` writes from this module). What they do is told in `identity_hosting.webhook_sender`; what
they share that is no I/O, and the pairs of primitives where they differ, is in `identity_hosting.webhook_common`.
"""

from __future__ import annotations

import time

import httpx

from identity_hosting.egress_async import AsyncGuardedTransport
from identity_hosting.egress_check import AddressNotAllowed
from identity_hosting.webhook_common import (
    MAX_RESPONSE_BYTES,
    AsyncFanOut,
    _client_options,
    _failure,
    _limits,
    _result,
    async_deadline,
)
from identity_proto.effects.webhooks import SendWebhooks, WebhookRequest, WebhookResult

__all__ = ["AsyncWebhookHttpSender"]


class AsyncWebhookHttpSender:
    """Performs `SendWebhooks` for a host's delivery loop."""

    def __init__(
        self,
        *,
        allow_private: bool,
        timeout_s: float = 15.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.allow_private = allow_private
        guarded = AsyncGuardedTransport(allow_private=allow_private, network=transport, limits=_limits())
        self._client = httpx.AsyncClient(transport=guarded, **_client_options(timeout_s))
        self._posts = AsyncFanOut()

    async def send(self, effect: SendWebhooks) -> tuple[WebhookResult, ...]:
        """POST every request of `effect`, concurrently; one result each, in order."""
        return await self._posts.map(lambda request: self._post(request, effect.timeout_s), effect.requests)

    async def _post(self, request: WebhookRequest, timeout_s: float) -> WebhookResult:
        started = time.perf_counter()
        try:
            async with (
                async_deadline(timeout_s + 1),
                self._client.stream(
                    "POST",
                    request.url,
                    content=request.body,
                    headers=dict(request.headers),
                    timeout=httpx.Timeout(timeout_s),
                ) as response,
            ):
                await _drain(response)
                return _result(response.status_code, started)
        except (httpx.HTTPError, AddressNotAllowed, OSError) as exc:  # OSError: TimeoutError too
            return _result(None, started, _failure(exc))

    async def aclose(self) -> None:
        """Close the connections (and the sync sender's thread pool)."""
        await self._posts.aclose()
        await self._client.aclose()


async def _drain(response: httpx.Response) -> None:
    if response.is_stream_consumed:  # a transport that read it already (a test double)
        return
    read = 0
    async for chunk in response.aiter_raw():
        read += len(chunk)
        if read >= MAX_RESPONSE_BYTES:
            break
