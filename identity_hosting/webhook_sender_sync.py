# Generated from identity_hosting/webhook_sender_async.py by scripts/generate_sync: do not edit.
"""The sync twin of `identity_hosting.webhook_sender_async`, generated from it: its docstring tells of both."""

from __future__ import annotations

import time

import httpx

from identity_hosting.egress import GuardedTransport
from identity_hosting.egress_check import AddressNotAllowed
from identity_hosting.webhook_common import (
    MAX_RESPONSE_BYTES,
    FanOut,
    _client_options,
    _failure,
    _limits,
    _result,
    deadline,
)
from identity_proto.effects.webhooks import SendWebhooks, WebhookRequest, WebhookResult

__all__ = ["WebhookHttpSender"]


class WebhookHttpSender:
    """Performs `SendWebhooks` for a host's delivery loop."""

    def __init__(
        self,
        *,
        allow_private: bool,
        timeout_s: float = 15.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.allow_private = allow_private
        guarded = GuardedTransport(allow_private=allow_private, network=transport, limits=_limits())
        self._client = httpx.Client(transport=guarded, **_client_options(timeout_s))
        self._posts = FanOut()

    def send(self, effect: SendWebhooks) -> tuple[WebhookResult, ...]:
        """POST every request of `effect`, concurrently; one result each, in order."""
        return self._posts.map(lambda request: self._post(request, effect.timeout_s), effect.requests)

    def _post(self, request: WebhookRequest, timeout_s: float) -> WebhookResult:
        started = time.perf_counter()
        try:
            with (
                deadline(timeout_s + 1),
                self._client.stream(
                    "POST",
                    request.url,
                    content=request.body,
                    headers=dict(request.headers),
                    timeout=httpx.Timeout(timeout_s),
                ) as response,
            ):
                _drain(response)
                return _result(response.status_code, started)
        except (httpx.HTTPError, AddressNotAllowed, OSError) as exc:  # OSError: TimeoutError too
            return _result(None, started, _failure(exc))

    def close(self) -> None:
        """Close the connections (and the sync sender's thread pool)."""
        self._posts.close()
        self._client.close()


def _drain(response: httpx.Response) -> None:
    if response.is_stream_consumed:  # a transport that read it already (a test double)
        return
    read = 0
    for chunk in response.iter_raw():
        read += len(chunk)
        if read >= MAX_RESPONSE_BYTES:
            break
