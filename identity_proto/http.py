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
from collections.abc import Sequence
from dataclasses import field
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


__all__ = ["Headers", "MalformedRequest", "Request", "Response", "check_headers"]

Headers = tuple[tuple[str, str], ...]

# Tab is allowed inside header values by RFC 9110; every other C0 control character and DEL is not.
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9a-z]+$")
#: Header names joined by newlines, each a lower-case token: one match checks every name of a message.
_TOKEN_LINES = re.compile(r"(?:[!#$%&'*+\-.^_`|~0-9a-z]+\n)*")
_METHOD = re.compile(r"^[A-Z]+$")
#: The same two rules on a server's raw header bytes (`Request.from_wire`): the bytes of a lower-case token (and
#: the newline that separates names), and the control bytes a value may not hold.
_TOKEN_BYTES = b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz\n"
_CONTROL_BYTES = bytes([*range(0x09), *range(0x0A, 0x20), 0x7F])
_SCHEMES = frozenset({"http", "https"})


def _headers_are_valid(headers: Headers) -> bool:
    """Whether every name is a lower-case token and no value holds a control character (tab aside): two regex
    scans over the joined names and values, not two per header."""
    if not headers:
        return True
    names = "\n".join(name for name, _ in headers) + "\n"
    # A newline inside a name would read as two names: the count of lines must be the count of headers.
    if names.count("\n") != len(headers) or _TOKEN_LINES.fullmatch(names) is None:
        return False
    # Values joined by a space: a printable whole holds no control character (a C-speed test); anything else (a
    # tab, which is allowed, or a non-printable letter) is judged by the exact pattern.
    values = " ".join(value for _, value in headers)
    return values.isprintable() or not _CONTROL_CHARS.search(values)


def check_headers(headers: Headers) -> Headers:
    """`headers`, after checking them as a `Response` would: for constants that are then used with
    `Response.trusted` (checked once, when their module is imported)."""
    if not _headers_are_valid(headers):
        raise ValueError(f"invalid response headers {[name for name, _ in headers]!r}")
    return headers


_set = object.__setattr__


def _index(headers: Headers) -> dict[str, str]:
    index = dict(headers)
    if len(index) < len(headers):
        # Repeated headers are joined as RFC 9110 allows for list-valued fields; for the single-valued headers the
        # core reads, a repeat makes the value invalid, which the reader then rejects.
        index = {}
        for name, value in headers:
            index[name] = f"{index[name]}, {value}" if name in index else value
    return index


class MalformedRequest(ValueError):
    """The bytes a host received cannot form a `Request`: the client's fault, answered with 400."""


@dataclass(frozen=True, slots=True)
class Request:
    """One parsed HTTP request, as the core sees it.

    `path` is the percent-decoded path without the query, below the mount point; `query` the raw query string
    (without `?`). `client` is the peer address as the host saw it (used for rate limits and logs), or None.
    `root_path` is where the service is mounted in an embedding application (ASGI `root_path`, WSGI
    `SCRIPT_NAME`), percent-decoded, without a trailing slash: "" at the root, "/auth" when mounted at /auth.
    `scheme` is the scheme the request came in on (`http` or `https`). With the Host header they make the public
    URL of the service when none is configured (token issuers).
    """

    method: str
    path: str
    headers: Headers = ()
    body: bytes = b""
    query: str = ""
    client: str | None = None
    root_path: str = ""
    scheme: str = "http"
    _index: dict[str, str] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        self._check_target()
        if not _headers_are_valid(self.headers):
            for name, value in self.headers:  # the slow path names the first offender
                if not _TOKEN.match(name):
                    raise MalformedRequest(f"invalid header name {name!r} (names are lower-case tokens)")
                if _CONTROL_CHARS.search(value):
                    raise MalformedRequest(f"header {name} contains control characters")
        object.__setattr__(self, "_index", _index(self.headers))

    @classmethod
    def from_wire(
        cls,
        method: str,
        path: str,
        raw_headers: Sequence[tuple[bytes, bytes]],
        body: bytes = b"",
        query: str = "",
        client: str | None = None,
        root_path: str = "",
        scheme: str = "http",
    ) -> Request:
        """A request from the header bytes a server received (ASGI's `headers`), checked once, on those bytes:
        names are lower-cased and must be tokens, values must hold no control character (tab aside); then
        decoded as Latin-1 (every byte is a character: no failure, no check left to make)."""
        names = b"\n".join([name for name, _ in raw_headers]).lower() + b"\n"
        values = b" ".join([value for _, value in raw_headers])
        # `bytes.translate` deleting the allowed bytes (names) or the forbidden ones (values) decides each rule in
        # one pass in C: a regex walks a 1 KB access token byte by byte in Python's engine, ten times slower.
        if raw_headers and (
            names.count(b"\n") != len(raw_headers)
            or names.translate(None, _TOKEN_BYTES)
            or b"\n\n" in names
            or names.startswith(b"\n")
            or len(values.translate(None, _CONTROL_BYTES)) != len(values)
        ):
            offered = tuple([(n.decode("latin-1").lower(), v.decode("latin-1")) for n, v in raw_headers])
            return cls(method, path, offered, body, query, client, root_path, scheme)  # names the offender
        # The names were lower-cased and checked joined: decoded and split once.
        headers: Headers = ()
        if raw_headers:
            decoded_values = [value.decode("latin-1") for _, value in raw_headers]
            headers = tuple(zip(names[:-1].decode("latin-1").split("\n"), decoded_values, strict=True))
        request = object.__new__(cls)
        _set(request, "method", method)
        _set(request, "path", path)
        _set(request, "headers", headers)
        _set(request, "body", body)
        _set(request, "query", query)
        _set(request, "client", client)
        _set(request, "root_path", root_path)
        _set(request, "scheme", scheme)
        _set(request, "_index", _index(headers))
        request._check_target()
        return request

    def _check_target(self) -> None:
        if not _METHOD.match(self.method):
            raise MalformedRequest(f"invalid method {self.method!r}")
        if not self.path.startswith("/") or _CONTROL_CHARS.search(self.path):
            raise MalformedRequest("invalid request path")
        if self.root_path and (
            not self.root_path.startswith("/") or self.root_path.endswith("/") or _CONTROL_CHARS.search(self.root_path)
        ):
            raise MalformedRequest("invalid mount point (root path)")
        if self.scheme not in _SCHEMES:
            raise MalformedRequest(f"invalid scheme {self.scheme!r}")

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
        if not _headers_are_valid(self.headers):
            bad = next(name for name, value in self.headers if not _headers_are_valid(((name, value),)))
            raise ValueError(f"invalid response header {bad!r}")

    @classmethod
    def trusted(cls, status: int, headers: Headers, body: bytes) -> Response:
        """A response the core builds from headers already known to be valid: constants checked once when their
        module was imported, and values the core generated itself (request ids, lengths, its own error codes).
        Nothing is checked again per response (h11 likewise trusts what it normalised once). A header value that
        comes from a caller or from configuration goes through the constructor instead, which checks it."""
        response = object.__new__(cls)
        object.__setattr__(response, "status", status)
        object.__setattr__(response, "headers", headers)
        object.__setattr__(response, "body", body)
        return response

    def with_headers(self, extra: Headers) -> Response:
        """This response with `extra` headers appended (only those are checked: the rest already were)."""
        if not _headers_are_valid(extra):
            raise ValueError(f"invalid response headers {[name for name, _ in extra]!r}")
        return Response.trusted(self.status, self.headers + extra, self.body)

    def with_trusted_headers(self, extra: Headers) -> Response:
        """This response with `extra` appended unchecked: only for headers `trusted` would accept."""
        return Response.trusted(self.status, self.headers + extra, self.body)

    def header(self, name: str) -> str | None:
        """The first value of header `name` (lower-case), or None."""
        for key, value in self.headers:
            if key == name:
                return value
        return None
