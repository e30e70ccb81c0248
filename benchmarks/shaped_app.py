"""The floor: the baseline app (benchmarks/baseline_app.py) answering every request in the service's shape.

Loaded with the service's own requests (headers, bodies) by the benchmark, it measures what Hypercorn alone costs
for messages of our shape: the ceiling any application speaking this API could reach on this server. (A module
of its own, so the baseline itself imports nothing of the service.)
"""

from __future__ import annotations

from typing import Any

from benchmarks.baseline_app import app as baseline
from identity_proto.render import BASE_HEADERS, JSON_CONTENT_TYPE


def _json_of_size(size: int) -> bytes:
    body = b'{"padding":"' + b"x" * (size - 14) + b'"}'
    assert len(body) == size
    return body


def _headers(body: bytes) -> list[tuple[bytes, bytes]]:
    """A service answer's headers: JSON content type, the base headers, a request id, the length."""
    return [
        (b"content-type", JSON_CONTENT_TYPE.encode()),
        *((name.encode(), value.encode()) for name, value in BASE_HEADERS),
        (b"x-service-request-id", b"0123456789abcdef"),
        (b"content-length", str(len(body)).encode()),
    ]


#: Between the rendered users the service answers `GET` (~720 B) and `PATCH /users/me` (~970 B) with.
BODY = _json_of_size(850)
HEADERS = _headers(BODY)
#: The OTP sign-in's two answers: the code's nonce (51 B), and the tokens with the user id (~1,050 B).
ANSWERS = {
    "/api/v1/auth/otp/send-sign-in-code": (_headers(_json_of_size(51)), _json_of_size(51)),
    "/api/v1/auth/otp/sign-in": (_headers(_json_of_size(1050)), _json_of_size(1050)),
}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        await baseline(scope, receive, send)
        return
    while (await receive()).get("more_body"):
        pass
    headers, body = ANSWERS.get(scope["path"], (HEADERS, BODY))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
