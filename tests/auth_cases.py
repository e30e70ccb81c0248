"""The request-authentication matrix of reference §1.2, as data: run in process and over real HTTP."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.support import KEYS, PROJECT_ID, admin_headers, client_headers, server_headers

UNKNOWN_PROJECT = "11111111-1111-4111-8111-111111111111"
CURRENT = "/api/v1/projects/current"


@dataclass(frozen=True)
class AuthCase:
    name: str
    headers: dict[str, str]
    status: int
    code: str | None
    method: str = "GET"
    path: str = CURRENT
    body: bytes = b""
    content_type: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def _without(headers: dict[str, str], *names: str) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k not in names}


AUTH_CASES: list[AuthCase] = [
    AuthCase("no headers at all", {}, 400, "ACCESS_TYPE_REQUIRED"),
    AuthCase(
        "a key but no access type",
        {"x-service-project-id": PROJECT_ID, "x-service-secret-server-key": KEYS.secret_server_key},
        400,
        "PROJECT_KEY_WITHOUT_ACCESS_TYPE",
    ),
    AuthCase("unknown access type", {**client_headers(), "x-service-access-type": "root"}, 400, "INVALID_ACCESS_TYPE"),
    AuthCase(
        "access type without project id",
        _without(client_headers(), "x-service-project-id"),
        400,
        "ACCESS_TYPE_WITHOUT_PROJECT_ID",
        details={"request_type": "client"},
    ),
    AuthCase(
        "unknown project",
        {**client_headers(), "x-service-project-id": UNKNOWN_PROJECT},
        400,
        "CURRENT_PROJECT_NOT_FOUND",
        details={"project_id": UNKNOWN_PROJECT},
    ),
    AuthCase(
        "unparsable access token is checked before the project",
        {**client_headers(), "x-service-project-id": UNKNOWN_PROJECT, "x-service-access-token": "12341234"},
        401,
        "UNPARSABLE_ACCESS_TOKEN",
    ),
    AuthCase(
        "wrong publishable client key",
        {**client_headers(), "x-service-publishable-client-key": "pck_wrong"},
        401,
        "INVALID_PUBLISHABLE_CLIENT_KEY",
        details={"project_id": PROJECT_ID},
    ),
    AuthCase(
        "client without a key is allowed by default",
        _without(client_headers(), "x-service-publishable-client-key"),
        200,
        None,
    ),
    AuthCase(
        "client ignores a wrong server key",
        {**client_headers(), "x-service-secret-server-key": "ssk_wrong"},
        200,
        None,
    ),
    AuthCase(
        "server without a key",
        _without(server_headers(), "x-service-secret-server-key"),
        401,
        "SERVER_AUTHENTICATION_REQUIRED",
    ),
    AuthCase(
        "server with an empty key",
        {**server_headers(), "x-service-secret-server-key": ""},
        401,
        "SERVER_AUTHENTICATION_REQUIRED",
    ),
    AuthCase(
        "server with only the client key",
        {
            **_without(server_headers(), "x-service-secret-server-key"),
            "x-service-publishable-client-key": KEYS.publishable_client_key,
        },
        401,
        "SERVER_AUTHENTICATION_REQUIRED",
    ),
    AuthCase(
        "wrong secret server key",
        {**server_headers(), "x-service-secret-server-key": "ssk_wrong"},
        401,
        "INVALID_SECRET_SERVER_KEY",
        details={"project_id": PROJECT_ID},
    ),
    AuthCase("server with the right key", server_headers(), 200, None),
    AuthCase(
        "admin without a key",
        _without(admin_headers(), "x-service-super-secret-admin-key"),
        401,
        "ADMIN_AUTHENTICATION_REQUIRED",
    ),
    AuthCase(
        "admin with the server key as admin key",
        {**admin_headers(), "x-service-super-secret-admin-key": KEYS.secret_server_key},
        401,
        "INVALID_SUPER_SECRET_ADMIN_KEY",
        details={"project_id": PROJECT_ID},
    ),
    AuthCase(
        "admin access tokens are refused, not ignored",
        {**admin_headers(), "x-service-admin-access-token": "x"},
        401,
        "UNPARSABLE_ADMIN_ACCESS_TOKEN",
    ),
    AuthCase(
        "other branch",
        {**client_headers(), "x-service-branch-id": "dev"},
        400,
        "BRANCH_DOES_NOT_EXIST",
        details={"branch_id": "dev"},
    ),
    AuthCase(
        "client may not configure the project",
        client_headers(),
        401,
        "INSUFFICIENT_ACCESS_TYPE",
        method="PATCH",
        body=b'{"unknown": 1}',
        content_type="application/json",
        details={"actual_access_type": "client", "allowed_access_types": ["admin"]},
    ),
    AuthCase(
        "server may not configure the project",
        server_headers(),
        401,
        "INSUFFICIENT_ACCESS_TYPE",
        method="PATCH",
        body=b"{}",
        content_type="application/json",
        details={"actual_access_type": "server", "allowed_access_types": ["admin"]},
    ),
    AuthCase(
        "body parsing runs before authentication",
        {},
        400,
        "BODY_PARSING_ERROR",
        method="PATCH",
        body=b"{not json",
        content_type="application/json",
    ),
    AuthCase(
        "unknown content type",
        admin_headers(),
        400,
        "BODY_PARSING_ERROR",
        method="PATCH",
        body=b"<x/>",
        content_type="application/xml",
    ),
    AuthCase(
        "unknown body field is a schema error",
        admin_headers(),
        400,
        "SCHEMA_ERROR",
        method="PATCH",
        body=b'{"display_name": "x", "colour": "red"}',
        content_type="application/json",
        details={
            "message": "Request validation failed on PATCH /api/v1/projects/current:\n"
            "  - body contains unknown properties: colour"
        },
    ),
    AuthCase(
        "a project's admin is not the internal project's",
        admin_headers(),
        401,
        "EXPECTED_INTERNAL_PROJECT",
        path="/api/v1/internal/projects",
    ),
    AuthCase(
        "a client cannot manage projects",
        {**_without(client_headers(), "x-service-publishable-client-key"), "x-service-project-id": "internal"},
        401,
        "INSUFFICIENT_ACCESS_TYPE",
        path="/api/v1/internal/projects",
    ),
    AuthCase("the welcome text needs no headers", {}, 200, None, path="/api/v1"),
    AuthCase(
        "the welcome text still checks headers given",
        {**server_headers(), "x-service-secret-server-key": "ssk_x"},
        401,
        "INVALID_SECRET_SERVER_KEY",
        path="/api/v1",
    ),
    AuthCase("unknown path", client_headers(), 404, "ROUTE_NOT_FOUND", path="/api/v1/nothing-here"),
    AuthCase("wrong method", client_headers(), 405, "METHOD_NOT_ALLOWED", method="DELETE"),
]
