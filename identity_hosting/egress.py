"""The hosts' guard on outbound requests to configured URLs (webhook deliveries, OAuth provider calls): the address
rule of `identity_proto.egress`, applied to the URL as written and, at connect time, to every address its host
resolves to.

`GuardedTransport` / `AsyncGuardedTransport` are httpx transports:

- Before anything else, each request's URL is checked as written (`url_refusal`: the scheme, https only with
  `require_https`; an IP literal that is not global unicast; a local name such as `localhost`).
- Their connections are opened by a network backend that resolves the host itself, refuses the connection unless
  *every* address it resolves to is allowed, and then connects to those checked addresses (never resolving again):
  a DNS answer that changes between a check and the connection cannot lead inside. The URL, the Host header, TLS
  server name and certificate check stay the URL's.
- A refusal raises `AddressNotAllowed` (an `httpx.ConnectError`), before any connection is attempted.

With `allow_private` (dev mode, or the operator's `IDENTITY_ALLOW_PRIVATE_ADDRESSES=1`) addresses are not checked;
`require_https` still holds. `network` (tests) replaces the real network behind the as-written check.

Where the code is: `identity_hosting.egress_async` (the asyncio transport, the source),
`identity_hosting.egress_sync` (generated from it by `scripts/generate_sync`: edit the source), and
`identity_hosting.egress_check` (the checks both make, and resolution: a hand-written pair).
"""

from __future__ import annotations

from identity_hosting.egress_async import AsyncGuardedTransport
from identity_hosting.egress_check import AddressNotAllowed
from identity_hosting.egress_sync import GuardedTransport

__all__ = ["AddressNotAllowed", "AsyncGuardedTransport", "GuardedTransport"]
