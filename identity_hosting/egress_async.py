"""The asyncio egress transport, `AsyncGuardedTransport`, and the source of the sync one, `GuardedTransport`
(`identity_hosting.egress_sync`, which `scripts/generate_sync` writes from this module). What they do is told in
`identity_hosting.egress`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from identity_hosting.egress_check import AddressNotAllowed, _install, _refuse_as_written, async_resolve

__all__ = ["AsyncGuardedTransport"]


class _AsyncGuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, connecting only to checked addresses."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        failure: Exception | None = None
        for address in await async_resolve(host, port, timeout):
            try:
                return await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise AddressNotAllowed("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class AsyncGuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that applies the address rule (see `identity_hosting.egress`)."""

    def __init__(
        self,
        *,
        allow_private: bool,
        require_https: bool = False,
        network: httpx.AsyncBaseTransport | None = None,
        **http_options: Any,
    ) -> None:
        self.allow_private = allow_private
        self.require_https = require_https
        if network is None:
            transport = httpx.AsyncHTTPTransport(**http_options)
            if not allow_private:
                _install(transport._pool, _AsyncGuardedBackend)
            network = transport
        self._network = network

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        _refuse_as_written(request, allow_private=self.allow_private, require_https=self.require_https)
        return await self._network.handle_async_request(request)

    async def aclose(self) -> None:
        await self._network.aclose()
