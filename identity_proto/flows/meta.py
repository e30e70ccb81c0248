"""Endpoints about the API itself."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from identity_proto.context import RequestContext
from identity_proto.effects import Flow, perform
from identity_proto.effects.projects import LoadProject
from identity_proto.effects.users import LoadUser
from identity_proto.http import Response
from identity_proto.render import json_response, text_response

if TYPE_CHECKING:
    from identity_proto.routing import Route
    from identity_proto.schemas import HealthQuery

__all__ = ["backend_urls", "health", "openapi", "welcome"]


def welcome(ctx: RequestContext) -> Flow[Response]:
    """GET /api/v1: a short text naming the service and how the caller authenticated (no headers needed). In
    compatibility mode the original's text: its greeting, no final newline, and the user's primary e-mail where
    it has one."""
    compat = ctx.options.compat
    lines = [
        "Welcome to the Stack API endpoint! Please refer to the documentation at https://docs.stack-auth.com."
        if compat
        else "Welcome to the identity service REST API (version 1).",
        "",
    ]
    if ctx.auth is None:
        lines.append("Authentication: None")
    else:
        user = ctx.auth.user_id
        if compat and user is not None:
            found = yield from perform(LoadUser(ctx.auth.project.id, user))
            if found is not None and found.primary_email:
                user = found.primary_email
        lines += [
            f"Authentication: {ctx.auth.access_type.value.capitalize()}",
            f"  Project: {ctx.auth.project.id}",
            f"  User: {user or 'None'}",
        ]
    return text_response(200, "\n".join(lines) + ("" if compat else "\n"))


def health(ctx: RequestContext[None, HealthQuery]) -> Flow[Response]:
    """GET /health: `{"status": "ok"}`, as the original answers (its SDK fetches it after a network error to tell
    the developer whether the service is reachable). With `?db=...` the store must answer too: it reads the
    internal project, so a store that is down answers 503 `STORAGE_UNAVAILABLE` like any other request."""
    if ctx.query is not None and ctx.query.db is not None:
        yield from perform(LoadProject("internal"))
    return json_response(200, {"status": "ok"})


def backend_urls(ctx: RequestContext) -> Flow[Response]:
    """GET /api/v1/internal/backend-urls: the URLs a client may fail over between, best first. The original's SDK
    fetches it on every page load when it was given no explicit base URL; this service has one public URL."""
    return json_response(200, {"urls": [ctx.base_url]})
    yield  # a flow, even though this one needs no effect


def openapi(ctx: RequestContext) -> Flow[Response]:
    """GET /api/v1/openapi.json: the OpenAPI 3.1 document of the route table serving the request (test-only
    routes only in dev mode). The table comes with the request, so this module needs no import of it."""
    return json_response(200, _document(ctx.routes))
    yield  # a flow, even though this one needs no effect


#: Documents built, by route table (tables live as long as their service; a handful exist per process).
_documents: dict[int, tuple[tuple[Route, ...], dict[str, Any]]] = {}
_documents_lock = threading.Lock()


def _document(routes: tuple[Route, ...]) -> dict[str, Any]:
    """Built once per route table: a table does not change while the process runs. (Building it imports pydantic's
    JSON Schema generator and builds every model the table names: left to the first request for the document.)"""
    found = _documents.get(id(routes))
    if found is None or found[0] is not routes:
        from identity_proto.openapi import openapi_document

        with _documents_lock:
            found = _documents[id(routes)] = (routes, openapi_document(routes))
    return found[1]
