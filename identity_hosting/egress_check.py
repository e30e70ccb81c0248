"""What both egress transports (`identity_hosting.egress`) share: the address rule applied to the URL as written and
to the addresses a host resolves to, and resolving (a hand-written pair: `resolve` blocks the calling thread,
`async_resolve` goes through the event loop's resolver with the connect timeout)."""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any

import anyio
import httpcore
import httpx

from identity_proto.egress import is_allowed_address, url_refusal


class AddressNotAllowed(httpx.ConnectError):
    """The URL, or an address its host resolves to, is one the address rule refuses (no connection was made)."""


def _checked(host: str, infos: Iterable[Any]) -> list[str]:
    """The addresses of a `getaddrinfo` answer, in its order and once each, when every one is allowed."""
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses or not all(is_allowed_address(address) for address in addresses):
        raise AddressNotAllowed(f"{host} resolves to an address that is not allowed")
    return addresses


def resolve(host: str, port: int, timeout: float | None) -> list[str]:
    """The addresses `host` resolves to, when every one is allowed (else `AddressNotAllowed`)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise httpcore.ConnectError(f"cannot resolve {host}") from exc
    return _checked(host, infos)


async def async_resolve(host: str, port: int, timeout: float | None) -> list[str]:
    """`resolve` through the event loop's resolver, within `timeout`."""
    try:
        with anyio.fail_after(timeout):
            infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except TimeoutError as exc:
        raise httpcore.ConnectTimeout(f"resolving {host} timed out") from exc
    except OSError as exc:
        raise httpcore.ConnectError(f"cannot resolve {host}") from exc
    return _checked(host, infos)


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
