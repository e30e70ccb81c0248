"""The one error hierarchy of the service.

    IdentityError                      root; never raised itself
    ├── KnownError                     the caller's fault or a domain outcome; rendered as
    │                                  {"code", "error", "details"?} with header X-Service-Known-Error
    └── StorageUnavailable             raised by backends only (infrastructure); rendered as 503

`MalformedRequest` (identity_proto.http) is a `ValueError` raised while a host builds a `Request`; hosts answer it
with `error_response(KnownError(ErrorCode.MALFORMED_REQUEST, ...))`.

Every known error's status and default message live in one table, `ErrorCode`: clients (the official SDK among
them) match on the code strings, so they are constants here and nowhere else. Messages that the original service
words in a particular way are quoted from it (reference §6); `{name}` placeholders are filled from `details`.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum, unique
from typing import Any

__all__ = ["ErrorCode", "IdentityError", "KnownError", "StorageUnavailable"]


@unique  # two codes with equal (status, template) would silently become one member
class ErrorCode(Enum):
    """Known-error codes: value is (HTTP status, default message template)."""

    # --- request machinery (reference §0) ---
    #: The body could not be parsed for its content type.
    BODY_PARSING_ERROR = (400, "The request body could not be parsed.")
    #: The body, query or path parameters do not match the endpoint's schema; details.message says how.
    SCHEMA_ERROR = (400, "{message}")
    #: The request line or headers are not valid HTTP for us (control characters in a header, say).
    MALFORMED_REQUEST = (400, "The request is malformed: {message}")
    #: No route has this path.
    ROUTE_NOT_FOUND = (404, "No endpoint exists at {method} {path}.")
    #: The path exists but not with this method; the response carries Allow.
    METHOD_NOT_ALLOWED = (405, "Method {method} is not allowed on {path}. Allowed: {allowed}.")
    #: The request body is larger than the host accepts.
    REQUEST_BODY_TOO_LARGE = (413, "The request body is larger than {max_bytes} bytes.")
    #: A bug: nothing internal is shown, only the request id to quote when reporting it.
    INTERNAL_ERROR = (500, "Something went wrong. Please quote this request ID when reporting it: {request_id}")
    #: The store cannot be reached; retrying later is safe.
    STORAGE_UNAVAILABLE = (
        503,
        "The service's storage is unavailable. Please retry shortly (request ID: {request_id}).",
    )

    # --- request authentication (reference §1.2, in the order they are checked) ---
    PROJECT_KEY_WITHOUT_ACCESS_TYPE = (
        400,
        "Project authentication was given, but the x-service-access-type header is missing. "
        "Set it to 'client', 'server', or 'admin'.",
    )
    ACCESS_TYPE_REQUIRED = (
        400,
        "You must specify an access level for this project. Make sure project API keys are provided "
        "(eg. x-service-publishable-client-key) and you set the x-service-access-type header to 'client', "
        "'server', or 'admin'.",
    )
    INVALID_ACCESS_TYPE = (
        400,
        "The x-service-access-type header must be 'client', 'server', or 'admin', but was '{access_type}'.",
    )
    ACCESS_TYPE_WITHOUT_PROJECT_ID = (
        400,
        "The x-service-access-type header was '{request_type}', but the x-service-project-id header was not provided.",
    )
    UNPARSABLE_ACCESS_TOKEN = (401, "Access token is not parsable.")
    ACCESS_TOKEN_EXPIRED = (401, "Access token has expired. Please refresh it and try again.")
    INVALID_PROJECT_FOR_ACCESS_TOKEN = (
        401,
        "Access token not valid for this project. Expected project ID {expected_project_id}, "
        "but the token is for project ID {actual_project_id}.",
    )
    CURRENT_PROJECT_NOT_FOUND = (400, "The current project with ID {project_id} was not found.")
    PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT = (
        401,
        "Publishable client keys are required for project {project_id}.",
    )
    INVALID_PUBLISHABLE_CLIENT_KEY = (
        401,
        "The publishable key is not valid for the project {project_id}. Does the project and/or the key exist?",
    )
    SERVER_AUTHENTICATION_REQUIRED = (401, "The secret server key must be provided.")
    INVALID_SECRET_SERVER_KEY = (
        401,
        "The secret server key is not valid for the project {project_id}. Does the project and/or the key exist?",
    )
    ADMIN_AUTHENTICATION_REQUIRED = (401, "The super secret admin key must be provided.")
    INVALID_SUPER_SECRET_ADMIN_KEY = (
        401,
        "The super secret admin key is not valid for the project {project_id}. Does the project and/or the key exist?",
    )
    BRANCH_DOES_NOT_EXIST = (400, "The branch with ID {branch_id} does not exist.")
    INSUFFICIENT_ACCESS_TYPE = (401, "{message}")
    EXPECTED_INTERNAL_PROJECT = (401, "The project ID is expected to be internal.")
    UNPARSABLE_ADMIN_ACCESS_TOKEN = (
        401,
        "Admin access tokens are not accepted by this service; use the super secret admin key.",
    )
    ANONYMOUS_AUTHENTICATION_NOT_ALLOWED = (
        401,
        "Anonymous users are not allowed to access this endpoint. Send x-service-allow-anonymous-user: true "
        "to accept them.",
    )
    RESTRICTED_USER_NOT_ALLOWED = (
        403,
        "The user is restricted ({reason}) and may not access this endpoint. Send "
        "x-service-allow-restricted-user: true to accept restricted users.",
    )

    # --- projects ---
    PROJECT_NOT_FOUND = (404, "Project {project_id} not found.")

    @property
    def status(self) -> int:
        """The HTTP status this code is sent with."""
        return self.value[0]

    @property
    def template(self) -> str:
        """The default message; `{name}` placeholders come from the error's details."""
        return self.value[1]


class IdentityError(Exception):
    """Root of every error the service raises on purpose."""


class KnownError(IdentityError):
    """An error with a stable code that clients can match on.

    `details` are sent to the client (keep secrets out of them); `message` defaults to the code's template
    filled from `details` and `context` (context is used only for the message, never sent).
    """

    def __init__(
        self,
        code: ErrorCode,
        *,
        message: str | None = None,
        details: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.code = code
        self.details = dict(details) if details is not None else None
        if message is None:
            message = code.template.format_map({**(context or {}), **(self.details or {})})
        self.message = message
        self.headers = headers
        super().__init__(f"{code.name}: {message}")

    @property
    def status(self) -> int:
        """The HTTP status the edge should send (h11's `error_status_hint`)."""
        return self.code.status

    def to_json(self) -> dict[str, Any]:
        """The response body: {"code", "error", "details"?}."""
        body: dict[str, Any] = {"code": self.code.name, "error": self.message}
        if self.details is not None:
            body["details"] = self.details
        return body


class StorageUnavailable(IdentityError):
    """The store could not be reached or did not answer in time (raised by backends only)."""
