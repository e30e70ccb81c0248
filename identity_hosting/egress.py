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
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any

import anyio
import httpcore
import httpx

from identity_proto.egress import is_allowed_address, url_refusal

__all__ = ["AddressNotAllowed", "AsyncGuardedTransport", "GuardedTransport"]


class AddressNotAllowed(httpx.ConnectError):
    """The URL, or an address its host resolves to, is one the address rule refuses (no connection was made)."""


def _checked(host: str, infos: Iterable[Any]) -> list[str]:
    """The addresses of a `getaddrinfo` answer, in its order and once each, when every one is allowed."""
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses or not all(is_allowed_address(address) for address in addresses):
        raise AddressNotAllowed(f"{host} resolves to an address that is not allowed")
    return addresses


class _GuardedBackend(httpcore.NetworkBackend):
    """httpcore's sync network backend, connecting only to checked addresses."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}") from exc
        failure: Exception | None = None
        for address in _checked(host, infos):
            try:
                return self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise AddressNotAllowed("unix sockets are not allowed")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _AsyncGuardedBackend(httpcore.AsyncNetworkBackend):
    """`_GuardedBackend` for asyncio (resolution through the event loop's resolver)."""

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
        try:
            with anyio.fail_after(timeout):
                infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out") from exc
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}") from exc
        failure: Exception | None = None
        for address in _checked(host, infos):
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


def _refuse_as_written(request: httpx.Request, *, allow_private: bool, require_https: bool) -> None:
    url = str(request.url)
    if allow_private:
        if require_https and request.url.scheme != "https":
            raise AddressNotAllowed(f"{url!r} does not use https", request=request)
        return
    refusal = url_refusal(url, require_https=require_https)
    if refusal is not None:
        raise AddressNotAllowed(refusal, request=request)


def _install(pool: Any, backend: Any) -> None:
    """Put the guarded backend in front of an httpx transport's connection pool (httpx has no parameter for it)."""
    inner = getattr(pool, "_network_backend", None)
    if not isinstance(inner, httpcore.NetworkBackend | httpcore.AsyncNetworkBackend):
        raise RuntimeError("this httpcore keeps its network backend elsewhere: the egress guard cannot be installed")
    pool._network_backend = backend(inner)


class GuardedTransport(httpx.BaseTransport):
    """An httpx transport that applies the address rule (see the module)."""

    def __init__(
        self,
        *,
        allow_private: bool,
        require_https: bool = False,
        network: httpx.BaseTransport | None = None,
        **http_options: Any,
    ) -> None:
        self.allow_private = allow_private
        self.require_https = require_https
        if network is None:
            transport = httpx.HTTPTransport(**http_options)
            if not allow_private:
                _install(transport._pool, _GuardedBackend)
            network = transport
        self._network = network

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        _refuse_as_written(request, allow_private=self.allow_private, require_https=self.require_https)
        return self._network.handle_request(request)

    def close(self) -> None:
        self._network.close()


class AsyncGuardedTransport(httpx.AsyncBaseTransport):
    """`GuardedTransport` for asyncio."""

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
