"""Applications that embed the identity service under /auth, as a user's would: a Starlette app (the same mount
works in FastAPI: `app.mount("/auth", identity)`) and a Flask app (werkzeug's DispatcherMiddleware). Their own
routes answer beside the service's."""

from __future__ import annotations

from typing import Any

from flask import Flask
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from asgi_app import IdentityASGI
from identity_hosting.wsgi import IdentityWSGI

MOUNT_POINT = "/auth"


async def _notes_home(request: Request) -> PlainTextResponse:
    return PlainTextResponse("the notes app")


def create_starlette_app(identity: IdentityASGI) -> Starlette:
    """A notes app with the identity service mounted at /auth."""
    return Starlette(routes=[Route("/", _notes_home), Mount(MOUNT_POINT, app=identity)])


def create_flask_app(identity: IdentityWSGI) -> Flask:
    """A shop app with the identity service mounted at /auth."""
    app = Flask("shop")

    @app.get("/")
    def home() -> Any:
        return "the shop"

    app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {MOUNT_POINT: identity})
    return app
