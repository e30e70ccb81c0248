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

Where the code is: `identity_hosting.webhook_sender_async` (`AsyncWebhookHttpSender`, the source),
`identity_hosting.webhook_sender_sync` (`WebhookHttpSender`, generated from it by `scripts/generate_sync`: edit the
source), `identity_hosting.webhook_common` (what both share that is no I/O; the hand-written pairs where they differ:
`FanOut` / `AsyncFanOut`, `deadline` / `async_deadline`).
"""

from __future__ import annotations

from identity_hosting.egress_check import AddressNotAllowed
from identity_hosting.webhook_common import MAX_RESPONSE_BYTES, is_public_address
from identity_hosting.webhook_sender_async import AsyncWebhookHttpSender
from identity_hosting.webhook_sender_sync import WebhookHttpSender

__all__ = [
    "MAX_RESPONSE_BYTES",
    "AddressNotAllowed",
    "AsyncWebhookHttpSender",
    "WebhookHttpSender",
    "is_public_address",
]
