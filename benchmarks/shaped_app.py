"""The floor: the baseline app (benchmarks/baseline_app.py) answering every request in the service's shape.

Loaded with the service's own requests (headers, bodies) by the benchmark, it measures what Hypercorn alone costs
for messages of our shape: the ceiling any application speaking this API could reach on this server. (A module
of its own, so the baseline itself imports nothing of the service.)
"""

from __future__ import annotations

from typing import Any

from benchmarks.baseline_app import app as baseline
from identity_proto.render import BASE_HEADERS, JSON_CONTENT_TYPE

#: Between the rendered users the service answers `GET` (~720 B) and `PATCH /users/me` (~970 B) with here.
BODY_BYTES = 850
BODY = b'{"padding":"' + b"x" * (BODY_BYTES - 14) + b'"}'
assert len(BODY) == BODY_BYTES
#: A service answer's headers: JSON content type, the base headers, a request id, the length.
HEADERS = [
    (b"content-type", JSON_CONTENT_TYPE.encode()),
    *((name.encode(), value.encode()) for name, value in BASE_HEADERS),
    (b"x-service-request-id", b"0123456789abcdef"),
    (b"content-length", str(len(BODY)).encode()),
]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        await baseline(scope, receive, send)
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})
