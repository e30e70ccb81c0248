"""`DirectClient`: the fake's fastest client. Requests go straight to the service's core in process (the same
`Service`, store, clock and entropy as the fake's WSGI host, which it shares), with no HTTP client and no WSGI
round: the request is built from the method, path, headers and body as a host would build it, and the core's answer
comes back as a `DirectResponse`.

Why next to the `httpx.Client` the fake also offers: in a downstream suite most of a test's time in the fake was
httpx's own (building and merging URLs, headers and cookies, the WSGI environ and back), about twice the service's.
`DirectClient` answers the same requests with the same responses (the core decides every status, header and body;
only the WSGI face's work is skipped: reading a body stream, which it already has whole), at a fraction of the
cost. Its surface is the part of httpx's that tests use: `get/post/put/patch/delete/request` with `json=`,
`content=`, `params=` and `headers=`, and a response with `status_code`, `headers`, `content`, `text`, `json()`,
`is_success` and `raise_for_status()`. It keeps no cookies and follows no redirects (the browser-like OAuth
flows need both): use an `httpx.Client` (`project.client()`) there, and where your own code needs one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import orjson

from identity_proto import Request

if TYPE_CHECKING:
    from identity_testing.fake import IdentityFake

__all__ = ["DirectClient", "DirectResponse", "DirectStatusError"]


class DirectStatusError(AssertionError):
    """`raise_for_status()` on a 4xx or 5xx answer (an AssertionError: in a test, a failed expectation)."""

    def __init__(self, response: DirectResponse) -> None:
        super().__init__(f"{response.method} {response.path} -> {response.status_code}: {response.text[:1000]}")
        self.response = response


class DirectResponse:
    """The service's answer to one `DirectClient` request."""

    __slots__ = ("content", "headers", "method", "path", "status_code")

    def __init__(self, method: str, path: str, status_code: int, headers: dict[str, str], content: bytes) -> None:
        self.method = method
        self.path = path
        self.status_code = status_code
        #: header name (lower case) -> value (repeated headers joined with ", ", as httpx's `headers[name]` does)
        self.headers = headers
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    def json(self) -> Any:
        return orjson.loads(self.content)

    def raise_for_status(self) -> DirectResponse:
        if self.status_code >= 400:
            raise DirectStatusError(self)
        return self

    def __repr__(self) -> str:
        return f"<DirectResponse [{self.status_code}] {self.method} {self.path}>"


class DirectClient:
    """Requests to the fake's service in process, without HTTP (see the module's docstring). `headers` go with
    every request (a request's own `headers=` are added to them, and win)."""

    def __init__(self, fake: IdentityFake, headers: Mapping[str, str] | None = None, host: str = "") -> None:
        self._fake = fake
        self._host = host
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        content: bytes | str | None = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> DirectResponse:
        sent = dict(self.headers)
        if headers:
            sent.update((k.lower(), v) for k, v in headers.items())
        body = b""
        if json is not None:
            body = orjson.dumps(json)
            sent.setdefault("content-type", "application/json")
        elif content is not None:
            body = content.encode() if isinstance(content, str) else content
        if body:
            sent["content-length"] = str(len(body))
        path, _, query = path.partition("?")
        if params:
            query = "&".join(part for part in (query, urlencode(params, doseq=True)) if part)
        sent.setdefault("host", self._host)
        request = Request(
            method=method.upper(),
            path=path,
            headers=tuple(sent.items()),
            body=body,
            query=query,
            client="127.0.0.1",
        )
        response = self._fake.answer(request)
        found: dict[str, str] = {}
        for name, value in response.headers:
            found[name] = f"{found[name]}, {value}" if name in found else value
        return DirectResponse(request.method, path, response.status, found, response.body)

    def get(self, path: str, **kw: Any) -> DirectResponse:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> DirectResponse:
        return self.request("POST", path, **kw)

    def put(self, path: str, **kw: Any) -> DirectResponse:
        return self.request("PUT", path, **kw)

    def patch(self, path: str, **kw: Any) -> DirectResponse:
        return self.request("PATCH", path, **kw)

    def delete(self, path: str, **kw: Any) -> DirectResponse:
        return self.request("DELETE", path, **kw)

    def __enter__(self) -> DirectClient:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def close(self) -> None:
        return None
