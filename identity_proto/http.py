"""HTTP value objects: the parsed request a host hands to the core, and the response it gets back.

Rules of this module (the h11 way):
- Both are frozen and validate themselves on construction: a `Request` that exists is well formed.
- Header names are lower-cased ASCII; header values are `str` without control characters (CR, LF, NUL and the
  rest of C0 except tab). A host that receives anything else has a malformed request, which is the *client's*
  fault: `Request` raises `MalformedRequest` and the host answers 400 through `identity_proto.error_response`.
- The body is raw bytes; parsing it is the core's job (content types, JSON, size of nesting), not the host's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

__all__ = ["Headers", "MalformedRequest", "Request", "Response"]

Headers = tuple[tuple[str, str], ...]

# Tab is allowed inside header values by RFC 9110; every other C0 control character and DEL is not.
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9a-z]+$")
_METHOD = re.compile(r"^[A-Z]+$")


class MalformedRequest(ValueError):
    """The bytes a host received cannot form a `Request`: the client's fault, answered with 400."""


@dataclass(frozen=True, slots=True)
class Request:
    """One parsed HTTP request, as the core sees it.

    `path` is the percent-decoded path without the query; `query` the raw query string (without `?`).
    `client` is the peer address as the host saw it (used for rate limits and logs), or None.
    """

    method: str
    path: str
    headers: Headers = ()
    body: bytes = b""
    query: str = ""
    client: str | None = None
    _index: dict[str, str] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not _METHOD.match(self.method):
            raise MalformedRequest(f"invalid method {self.method!r}")
        if not self.path.startswith("/") or _CONTROL_CHARS.search(self.path):
            raise MalformedRequest("invalid request path")
        index: dict[str, str] = {}
        for name, value in self.headers:
            if not _TOKEN.match(name):
                raise MalformedRequest(f"invalid header name {name!r} (names are lower-case tokens)")
            if _CONTROL_CHARS.search(value):
                raise MalformedRequest(f"header {name} contains control characters")
            # Repeated headers are joined as RFC 9110 allows for list-valued fields; for the single-valued
            # headers the core reads, a repeat makes the value invalid, which the reader then rejects.
            index[name] = f"{index[name]}, {value}" if name in index else value
        object.__setattr__(self, "_index", index)

    def header(self, name: str) -> str | None:
        """The value of header `name` (lower-case), or None when it is absent."""
        return self._index.get(name)

    @property
    def content_type(self) -> str | None:
        """The media type of the body, lower-cased, without parameters; None when absent or empty."""
        raw = self._index.get("content-type")
        if raw is None:
            return None
        media_type = raw.split(";", 1)[0].strip().lower()
        return media_type or None

    def query_items(self) -> list[tuple[str, str]]:
        """The query string as (name, value) pairs, in order, blanks kept."""
        return parse_qsl(self.query, keep_blank_values=True)


@dataclass(frozen=True, slots=True)
class Response:
    """One HTTP response produced by the core. Header names are lower-case."""

    status: int
    headers: Headers = ()
    body: bytes = b""

    def __post_init__(self) -> None:
        if not 100 <= self.status <= 599:
            raise ValueError(f"invalid status {self.status}")
        for name, value in self.headers:
            if not _TOKEN.match(name) or _CONTROL_CHARS.search(value):
                raise ValueError(f"invalid response header {name!r}")

    def header(self, name: str) -> str | None:
        """The first value of header `name` (lower-case), or None."""
        for key, value in self.headers:
            if key == name:
                return value
        return None
