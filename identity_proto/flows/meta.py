"""Endpoints about the API itself."""

from __future__ import annotations

import functools
from typing import Any

from identity_proto.context import RequestContext
from identity_proto.effects import Flow
from identity_proto.http import Response
from identity_proto.render import json_response, text_response

__all__ = ["openapi", "welcome"]


def welcome(ctx: RequestContext) -> Flow[Response]:
    """GET /api/v1: a short text naming the service and how the caller authenticated (no headers needed)."""
    lines = ["Welcome to the identity service REST API (version 1).", ""]
    if ctx.auth is None:
        lines.append("Authentication: None")
    else:
        lines += [
            f"Authentication: {ctx.auth.access_type.value.capitalize()}",
            f"  Project: {ctx.auth.project.id}",
            f"  User: {ctx.auth.user_id or 'None'}",
        ]
    return text_response(200, "\n".join(lines) + "\n")
    yield  # a flow, even though this one needs no effect


def openapi(ctx: RequestContext) -> Flow[Response]:
    """GET /api/v1/openapi.json: the OpenAPI 3.1 document of this service (test-only routes only in dev mode)."""
    return json_response(200, _document(ctx.options.dev_mode))
    yield  # a flow, even though this one needs no effect


@functools.cache
def _document(dev_mode: bool) -> dict[str, Any]:
    """Built once per mode: the route table does not change while the process runs."""
    # Imported here: the document describes the route table, and the route table imports this module.
    from identity_proto.openapi import openapi_document
    from identity_proto.routes import ROUTES, TESTING_ROUTES

    return openapi_document(ROUTES + TESTING_ROUTES if dev_mode else ROUTES)
