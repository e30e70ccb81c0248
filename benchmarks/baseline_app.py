"""The baseline: a raw ASGI app that answers every request with a fixed 60-byte JSON body.

Served by the same Hypercorn with the same settings as the service, it is the ceiling our figures are divided by.
"""

from __future__ import annotations

from typing import Any

BODY = b'{"status":"ok","service":"baseline","padding":"xxxxxxxxxxx"}'
assert len(BODY) == 60
#: With its length, as the service sends every body (the server then needs no chunked framing).
HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"60")]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    elif scope["type"] == "http":
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        await send({"type": "http.response.body", "body": BODY})
