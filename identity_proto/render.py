"""Responses: the one JSON encoder, the headers every response carries, and records rendered per access type.

Which fields of a record a caller may see is decided here and nowhere else: each `render_*` function takes the
record and the caller's access type, so no flow can leak a field by building JSON by hand.
"""

from __future__ import annotations

from typing import Any

import orjson

from identity_proto.auth import AccessType
from identity_proto.errors import KnownError
from identity_proto.http import Headers, Response
from identity_proto.records import Project, config_to_json

__all__ = [
    "JSON_CONTENT_TYPE",
    "dump_json",
    "error_response",
    "json_response",
    "render_project",
    "text_response",
]

JSON_CONTENT_TYPE = "application/json; charset=utf-8"

#: Sent on every response: nothing here may be cached (tokens, user data), nor sniffed as another type.
#: CORS is open (reference §0.2): browsers call the API from any origin; credentials travel in headers, not
#: cookies, so `*` exposes nothing a script could not already send.
BASE_HEADERS: Headers = (
    ("cache-control", "no-store, max-age=0"),
    ("x-content-type-options", "nosniff"),
    ("access-control-allow-origin", "*"),
)


def dump_json(value: Any) -> bytes:
    """The one JSON encoder of the service."""
    return orjson.dumps(value)


def json_response(status: int, value: Any, headers: Headers = ()) -> Response:
    """A JSON response with the base headers."""
    return Response(
        status=status,
        headers=(("content-type", JSON_CONTENT_TYPE), *BASE_HEADERS, *headers),
        body=dump_json(value),
    )


def text_response(status: int, text: str, headers: Headers = ()) -> Response:
    """A plain-text response with the base headers."""
    return Response(
        status=status,
        headers=(("content-type", "text/plain; charset=utf-8"), *BASE_HEADERS, *headers),
        body=text.encode(),
    )


def error_response(error: KnownError, *, known_error_headers: tuple[str, ...] = ("x-service-known-error",)) -> Response:
    """A known error as `{"code", "error", "details"?}` with one known-error header per name given."""
    code = error.code.name
    return json_response(
        error.status,
        error.to_json(),
        headers=(*((name, code) for name in known_error_headers), *error.headers),
    )


def render_project(project: Project, access_type: AccessType) -> dict[str, Any]:
    """A project as `access_type` may see it: admin everything but secrets, others the public config."""
    config = project.config
    public_config: dict[str, Any] = {
        "sign_up_enabled": config.sign_up_enabled,
        "credential_enabled": config.credential_enabled,
        "magic_link_enabled": config.magic_link_enabled,
        "passkey_enabled": False,
        "client_team_creation_enabled": config.client_team_creation_enabled,
        "client_user_deletion_enabled": config.client_user_deletion_enabled,
        "allow_localhost": config.allow_localhost,
        "domains": [{"domain": d.domain, "handler_path": d.handler_path} for d in config.domains],
        "allow_team_api_keys": False,
        "allow_user_api_keys": False,
        "enabled_oauth_providers": [],
    }
    if access_type is not AccessType.ADMIN:
        return {"id": project.id, "display_name": project.display_name, "config": public_config}
    return {
        "id": project.id,
        "display_name": project.display_name,
        "created_at_millis": project.created_at_millis,
        "config": {**public_config, **config_to_json(config)},
    }
