# Generated from identity_hosting/egress_async.py by scripts/generate_sync: do not edit.
"""The sync twin of `identity_hosting.egress_async`, generated from it: its docstring tells of both."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from identity_hosting.egress_check import AddressNotAllowed, _install, _refuse_as_written, resolve

__all__ = ["GuardedTransport"]


class _GuardedBackend(httpcore.NetworkBackend):
    """httpcore's network backend, connecting only to checked addresses."""

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
        failure: Exception | None = None
        for address in resolve(host, port, timeout):
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


class GuardedTransport(httpx.BaseTransport):
    """An httpx transport that applies the address rule (see `identity_hosting.egress`)."""

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
