"""Applications that embed the identity service under /auth, as a user's would: a Starlette app and a FastAPI app
(ASGI mounts), a Flask app and a Django project (WSGI, through werkzeug's DispatcherMiddleware). Their own routes
answer beside the service's."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
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


def create_fastapi_app(identity: IdentityASGI) -> FastAPI:
    """A todo app with the identity service mounted at /auth."""
    app = FastAPI()

    @app.get("/", response_class=PlainTextResponse)
    def home() -> str:
        return "the todo app"

    app.mount(MOUNT_POINT, identity)
    return app


def create_django_app(identity: IdentityWSGI) -> Any:
    """A Django project (its wsgi.py) with the identity service mounted at /auth in front of Django's own app."""
    import django
    from django.conf import settings
    from django.core.wsgi import get_wsgi_application

    if not settings.configured:
        settings.configure(
            DEBUG=False,
            SECRET_KEY="django-test-secret",
            ALLOWED_HOSTS=["127.0.0.1", "localhost"],
            ROOT_URLCONF="tests.downstream.django_urls",
            MIDDLEWARE=[],
            INSTALLED_APPS=[],
        )
        django.setup()
    return DispatcherMiddleware(get_wsgi_application(), {MOUNT_POINT: identity})


def create_flask_app(identity: IdentityWSGI) -> Flask:
    """A shop app with the identity service mounted at /auth."""
    app = Flask("shop")

    @app.get("/")
    def home() -> Any:
        return "the shop"

    app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {MOUNT_POINT: identity})
    return app
