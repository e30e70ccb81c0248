"""Endpoints about the API itself."""

from __future__ import annotations

from identity_proto.context import RequestContext
from identity_proto.effects import Flow
from identity_proto.http import Response
from identity_proto.render import text_response

__all__ = ["welcome"]


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
