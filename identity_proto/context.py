"""What a flow is given: the request, its validated inputs, the caller, the time and entropy, the options."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from identity_proto.auth import AccessType, Auth, HeaderReader
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.http import Request
from identity_proto.tokens import Entropy

__all__ = ["RequestContext", "ServiceOptions"]


@dataclass(frozen=True, slots=True)
class ServiceOptions:
    """How one service instance behaves; hosts build it from their configuration."""

    #: Header prefixes accepted on requests and used on responses: ours, plus `x-stack-` in compatibility mode.
    header_prefixes: tuple[str, ...] = ("x-service-",)
    #: The public base URL (scheme, host, port), used in token issuers and magic links. Empty: taken from the
    #: request's Host header.
    base_url: str = ""
    #: Dev/test mode: development conveniences are on (never in a production configuration).
    dev_mode: bool = True

    @property
    def headers(self) -> HeaderReader:
        """Reads request headers under every accepted prefix."""
        return HeaderReader(self.header_prefixes)

    @property
    def known_error_headers(self) -> tuple[str, ...]:
        """Names of the known-error response header, one per prefix."""
        return tuple(f"{prefix}known-error" for prefix in self.header_prefixes)

    @property
    def request_id_headers(self) -> tuple[str, ...]:
        """Names of the request-id response header, one per prefix."""
        return tuple(f"{prefix}request-id" for prefix in self.header_prefixes)


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Everything one endpoint flow may use. Inputs are already validated against the route's models."""

    request: Request
    now_ms: int
    entropy: Entropy
    request_id: str
    options: ServiceOptions
    auth: Auth | None
    params: Any
    query: Any
    body: Any

    @property
    def access_type(self) -> AccessType | None:
        """The caller's access type, or None for an unauthenticated request."""
        return None if self.auth is None else self.auth.access_type

    def require_auth(self) -> Auth:
        """The caller's `Auth`; routes that allow access types only ever run with one."""
        if self.auth is None:
            raise KnownError(ErrorCode.ACCESS_TYPE_REQUIRED)
        return self.auth
