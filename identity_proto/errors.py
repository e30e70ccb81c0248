"""The one error hierarchy of the service.

    IdentityError                      root; never raised itself
    ├── KnownError                     the caller's fault or a domain outcome; rendered as
    │                                  {"code", "error", "details"?} with header X-Service-Known-Error
    ├── PlainError                     an error the original answers as plain text (its status and message,
    │                                  no known-error header): the reference's "plain" errors
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

__all__ = ["ErrorCode", "IdentityError", "KnownError", "PlainError", "StorageUnavailable"]


@unique  # two codes with equal (status, template) would silently become one member
class ErrorCode(Enum):
    """Known-error codes: value is (HTTP status, default message template)."""

    # request machinery (reference §0)
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
    #: The write met a concurrent change of the same data on every attempt (`service.MAX_COMMIT_ATTEMPTS`); retrying
    #: later is safe: nothing was written.
    WRITE_CONFLICT = (503, "The data changed concurrently while this request was answered; please retry.")

    # request authentication (reference §1.2, in the order they are checked)
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
    #: Dev/test mode's import (`flows.portability`): a record of the document exists in the project already;
    #: nothing was written.
    IMPORT_CONFLICT = (409, "Not imported: {message}")
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

    # rate limits (our spec: 429 with headers telling when to retry)
    RATE_LIMITED = (429, "Too many requests ({rule}). Retry in {retry_after_seconds} seconds.")

    # projects
    PROJECT_NOT_FOUND = (404, "Project {project_id} not found.")

    # users (reference §3, §6)
    CANNOT_GET_OWN_USER_WITHOUT_USER = (
        400,
        "You have specified 'me' as a userId, but did not provide authentication for a user.",
    )
    USER_AUTHENTICATION_REQUIRED = (401, "User authentication required for this endpoint.")
    USER_NOT_FOUND = (404, "User not found.")
    USER_ID_DOES_NOT_EXIST = (400, "The given user with the ID {user_id} does not exist.")
    USER_EMAIL_ALREADY_EXISTS = (409, 'A user with email "{email}" already exists.')
    CANNOT_SET_BOTH_PASSWORD_AND_HASH = (400, "Cannot set both password and password_hash at the same time.")
    INVALID_PASSWORD_HASH = (
        400,
        "Invalid password hash. Make sure it's a supported algorithm in Modular Crypt Format.",
    )
    PRIMARY_EMAIL_REQUIRED = (400, "{field} cannot be true without primary_email")
    OTP_AUTH_NOT_ENABLED = (400, "OTP auth not enabled in the project")
    PASSKEY_AUTH_CANNOT_BE_ENABLED = (
        400,
        "Cannot manually enable passkey auth, it is enabled iff there is a passkey auth method",
    )
    INVALID_PROFILE_IMAGE_URL = (400, "Invalid profile image URL")
    # passkeys (`identity_proto.flows.passkeys`; the original's texts: the two failures carry the reason as message)
    PASSKEY_AUTHENTICATION_NOT_ENABLED = (400, "Passkey authentication is not enabled for this project.")
    PASSKEY_REGISTRATION_FAILED = (400, "Passkey registration failed.")
    PASSKEY_AUTHENTICATION_FAILED = (400, "Passkey authentication failed.")
    CLIENT_USER_DELETION_NOT_ENABLED = (400, "Client user deletion is not enabled for this project")
    OAUTH_PROVIDER_NOT_FOUND = (400, "OAuth provider {provider_id} not found")
    ONLY_ANONYMOUS_REQUIRES_INCLUDE_ANONYMOUS = (400, "only_anonymous=true requires include_anonymous=true")
    SIGN_UP_NOT_ENABLED = (
        400,
        "Creation of new accounts is not enabled for this project. Please ask the project owner to enable it.",
    )

    # teams (reference §5)
    TEAM_NOT_FOUND = (404, "Team {team_id} not found.")
    TEAM_MEMBERSHIP_NOT_FOUND = (404, "User {user_id} is not found in team {team_id}.")
    TEAM_MEMBERSHIP_ALREADY_EXISTS = (409, "Team membership already exists.")
    TEAM_PERMISSION_REQUIRED = (401, "User {user_id} does not have permission {permission_id} in team {team_id}.")
    TEAM_PERMISSION_NOT_FOUND = (401, "User {user_id} does not have permission {permission_id} in team {team_id}")
    CLIENT_TEAM_CREATION_DISABLED = (403, "Client team creation is disabled for this project")
    CANNOT_CREATE_TEAM_FOR_OTHER_USER = (
        403,
        "You cannot create a team as a user that is not yourself. Make sure you set the creator_user_id to 'me'.",
    )
    CLIENT_CAN_ONLY_LIST_OWN_TEAMS = (
        403,
        'Client can only list teams for their own user. user_id must be either "me" or the ID of the current user',
    )
    CANNOT_UPDATE_OTHER_USERS_PROFILE = (403, "Cannot update another user's profile")
    TEAM_ID_REQUIRED_FOR_CLIENT = (400, "team_id is required for access type client")

    # permissions (reference part 2 §6, §9)
    PERMISSION_NOT_FOUND = (404, 'Permission "{permission_id}" not found. Make sure you created it on the dashboard.')
    WRONG_PERMISSION_SCOPE = (
        404,
        'Permission "{permission_id}" not found. (It was found for a different scope "{actual_scope}", but scope '
        '"{expected_scope}" was expected.)',
    )
    CONTAINED_PERMISSION_NOT_FOUND = (
        400,
        'Contained permission with ID "{permission_id}" not found. Make sure you created it on the dashboard.',
    )
    PERMISSION_ID_ALREADY_EXISTS = (400, 'Permission with ID "{permission_id}" already exists. Choose a different ID.')

    # one-time codes and sign-in (reference §2)
    OTP_SIGN_IN_NOT_ENABLED = (403, "OTP sign-in is not enabled for this project.")
    REDIRECT_URL_NOT_WHITELISTED = (
        400,
        "The callback URL is not trusted by this project: add its domain to the project's domains "
        "(or allow localhost).",
    )
    VERIFICATION_CODE_NOT_FOUND = (404, "The verification code does not exist for this project.")
    VERIFICATION_CODE_EXPIRED = (400, "The verification code has expired.")
    VERIFICATION_CODE_ALREADY_USED = (409, "The verification link has already been used.")
    VERIFICATION_CODE_MAX_ATTEMPTS_REACHED = (
        400,
        "The verification code nonce has reached the maximum number of attempts. This code is not valid anymore.",
    )
    MULTI_FACTOR_AUTHENTICATION_REQUIRED = (400, "Multi-factor authentication is required for this user.")
    INVALID_TOTP_CODE = (400, "The TOTP code is invalid. Please try again.")
    EMAIL_DELIVERY_FAILED = (
        502,
        "The e-mail could not be delivered, so no code was sent. Please try again later.",
    )

    # passwords
    PASSWORD_AUTHENTICATION_NOT_ENABLED = (400, "Password authentication is not enabled for this project.")
    PASSWORD_TOO_SHORT = (400, "Password too short. Minimum length is {min_length}.")
    PASSWORD_TOO_LONG = (400, "Password too long. Maximum length is {maxLength} characters (and 72 bytes).")
    EMAIL_PASSWORD_MISMATCH = (400, "Wrong e-mail or password.")
    USER_DOES_NOT_HAVE_PASSWORD = (400, "This user does not have password authentication enabled.")
    # passwords (reference part 2 §1): a wrong old password on POST /auth/password/update
    PASSWORD_CONFIRMATION_MISMATCH = (400, "Passwords do not match.")

    # sessions (reference §1.4)
    REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED = (
        401,
        "Refresh token not found for this project, or the session has expired/been revoked.",
    )
    CANNOT_DELETE_CURRENT_SESSION = (400, "Cannot delete the current session.")
    SESSION_NOT_FOUND = (404, "Session not found.")
    CLIENT_CAN_ONLY_LIST_OWN_SESSIONS = (403, "Client can only list sessions for their own user.")

    # API keys (reference part 2 §5, §9)
    API_KEY_NOT_FOUND = (404, "API key not found.")
    API_KEY_REVOKED = (401, "API key has been revoked.")
    API_KEY_EXPIRED = (401, "API key has expired.")
    WRONG_API_KEY_TYPE = (
        400,
        "This endpoint is for {expected_type} API keys, but a {actual_type} API key was provided.",
    )

    # team invitations (reference part 2 §3)
    TEAM_INVITATION_RESTRICTED_USER_NOT_ALLOWED = (
        403,
        "Restricted users cannot accept team invitations. Reason: {reason}. Please complete the onboarding process "
        "before accepting team invitations.",
    )

    # contact channels (reference part 2 §2, §9)
    CONTACT_CHANNEL_ALREADY_USED_FOR_AUTH_BY_SOMEONE_ELSE = (
        409,
        'This {type} "({contact_channel_value})" is already used for authentication by another account.',
    )
    EMAIL_ALREADY_VERIFIED = (409, "The e-mail is already verified.")
    EMAIL_IS_NOT_PRIMARY_EMAIL = (
        400,
        "The given e-mail ({email}) must equal the user's primary e-mail ({primary_email}).",
    )

    # OAuth sign-in (reference part 2 §7.2-7.5, §9; messages quoted from the original)
    INVALID_OAUTH_CLIENT_ID_OR_SECRET = (
        400,
        "The OAuth client ID or secret is invalid. The client ID must be equal to the project ID (potentially with a "
        "hash and a branch ID), and the client secret must be a publishable client key.",
    )
    INVALID_AUTHORIZATION_CODE = (400, "The given authorization code is invalid.")
    OAUTH_PROVIDER_NOT_FOUND_OR_NOT_ENABLED = (400, "The OAuth provider is not found or not enabled.")
    OAUTH_EXTRA_SCOPE_NOT_AVAILABLE_WITH_SHARED_OAUTH_KEYS = (
        400,
        "Extra scopes are not available with shared OAuth keys. Please add your own OAuth keys on the Stack "
        "dashboard to use extra scopes.",
    )
    OAUTH_CONNECTION_ALREADY_CONNECTED_TO_ANOTHER_USER = (
        409,
        "The OAuth connection is already connected to another user.",
    )
    OAUTH_PROVIDER_ACCESS_DENIED = (400, "The OAuth provider denied access to the user.")
    OAUTH_PROVIDER_TEMPORARILY_UNAVAILABLE = (
        503,
        "The OAuth provider is temporarily unavailable. Please try signing in again.",
    )
    OUTER_OAUTH_TIMEOUT = (408, "The OAuth flow has timed out. Please sign in again.")
    # OAuth accounts: linked and connected accounts (reference part 2 §7.6, §9)
    OAUTH_CONNECTION_NOT_CONNECTED_TO_USER = (400, "The OAuth connection is not connected to any user.")
    OAUTH_CONNECTION_DOES_NOT_HAVE_REQUIRED_SCOPE = (400, "The OAuth connection does not have the required scope.")
    OAUTH_PROVIDER_ACCOUNT_ID_ALREADY_USED_FOR_SIGN_IN = (
        400,
        "A provider with the same account ID is already used for signing in.",
    )
    # webhook endpoints (ours: the original keeps endpoints in Svix)
    WEBHOOK_ENDPOINT_NOT_FOUND = (404, "Webhook endpoint not found.")
    #: details.reason says why (the service's own origin, a private address or local name in production).
    WEBHOOK_URL_NOT_ALLOWED = (400, "This webhook URL is not allowed: {reason}")
    WEBHOOK_MESSAGE_NOT_FOUND = (404, "Webhook message {message_id} not found for this endpoint.")

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
        self._fields = {**(context or {}), **(self.details or {})}
        if message is None:
            message = code.template.format_map(self._fields)
        self.message = message
        self.headers = headers
        super().__init__(f"{code.name}: {message}")

    def in_original_words(self) -> KnownError | PlainError:
        """This error as the original answers it (compatibility mode): a code the original lacks (its SDK throws on
        a code it does not know) as the plain text of `ORIGINAL_PLAIN`; the others with its text for the codes of
        `ORIGINAL_TEXTS`, else ours with the headers named `x-stack-` (SCHEMA_ERROR's `details.message` too)."""
        if self.code in ORIGINAL_PLAIN:
            plain = ORIGINAL_PLAIN[self.code]
            return PlainError(self.status, plain.format_map(self._fields) if plain else self.message, self.headers)
        template = ORIGINAL_TEXTS.get(self.code)
        message = template.format_map(self._fields) if template else self.message.replace("x-service-", "x-stack-")
        if message == self.message:
            return self
        details = self.details
        if details is not None and self.code is ErrorCode.SCHEMA_ERROR:
            details = {**details, "message": message}
        return KnownError(self.code, message=message, details=details, headers=self.headers)

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


_DOCS = (
    "\n\nFor more information, see the docs on REST API authentication: "
    "https://docs.stack-auth.com/rest-api/overview#authentication"
)
#: The original's texts of errors whose texts name request headers or differ otherwise (`KnownError.in_original_words`).
ORIGINAL_TEXTS: dict[ErrorCode, str] = {
    ErrorCode.PROJECT_KEY_WITHOUT_ACCESS_TYPE: "Either an API key or an admin access token was provided, but the "
    "x-stack-access-type header is missing. Set it to 'client', 'server', or 'admin' as appropriate.",
    ErrorCode.ACCESS_TYPE_REQUIRED: "You must specify an access level for this Stack project. Make sure project API "
    "keys are provided (eg. x-stack-publishable-client-key) and you set the x-stack-access-type header to 'client', "
    "'server', or 'admin'." + _DOCS,
    ErrorCode.INVALID_ACCESS_TYPE: "The x-stack-access-type header must be 'client', 'server', or 'admin', but was "
    "'{access_type}'.",
    ErrorCode.ACCESS_TYPE_WITHOUT_PROJECT_ID: "The x-stack-access-type header was '{request_type}', but the "
    "x-stack-project-id header was not provided." + _DOCS,
    ErrorCode.CURRENT_PROJECT_NOT_FOUND: "The current project with ID {project_id} was not found. Please check the "
    "value of the x-stack-project-id header.",
    ErrorCode.ANONYMOUS_AUTHENTICATION_NOT_ALLOWED: "X-Stack-Access-Token is for an anonymous user, but anonymous "
    "users are not enabled. Set the X-Stack-Allow-Anonymous-User header of this request to 'true' to allow "
    "anonymous users.",
    ErrorCode.REDIRECT_URL_NOT_WHITELISTED: "Redirect URL not whitelisted. Did you forget to add this domain to the "
    "trusted domains list on the Stack Auth dashboard?",
    ErrorCode.RESTRICTED_USER_NOT_ALLOWED: "The user in the access token is in restricted state. Reason: {reason}. "
    "Please pass the X-Stack-Allow-Restricted-User header if this is intended.",
    # The key errors name the project as JSON does (its ids need no escaping: the project was found by it).
    ErrorCode.PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT: "Publishable client keys are required for this project. "
    "Create one in Project Keys, or disable this requirement there to allow keyless client access.",
    ErrorCode.INVALID_PUBLISHABLE_CLIENT_KEY: 'The publishable key is not valid for the project "{project_id}". Does '
    "the project and/or the key exist?",
    ErrorCode.INVALID_SECRET_SERVER_KEY: 'The secret server key is not valid for the project "{project_id}". Does the '
    "project and/or the key exist?",
    ErrorCode.INVALID_SUPER_SECRET_ADMIN_KEY: 'The super secret admin key is not valid for the project "{project_id}". '
    "Does the project and/or the key exist?",
}

#: Compatibility mode: the codes the original's known errors (packages/stack-shared/src/known-errors.tsx) lack,
#: answered as it answers them: its status, a text/plain body (its text; None: ours) and no known-error header.
#: Codes of ours that it has no counterpart of (the store, rate limits, webhooks) are plain too: its SDK retries a
#: plain 429 with Retry-After, and throws on any other plain error, as on the original's own.
ORIGINAL_PLAIN: dict[ErrorCode, str | None] = {
    ErrorCode.INTERNAL_ERROR: "Something went wrong. Please make sure the data you entered is correct.\n\n"
    "Request ID: {request_id}",
    ErrorCode.ROUTE_NOT_FOUND: "404 — this page does not exist in Stack Auth's API.\n\nPlease see the API "
    "documentation at https://docs.stack-auth.com, or visit the Stack Auth dashboard at https://app.stack-auth.com."
    "\n\nURL: {path}",
    ErrorCode.OTP_SIGN_IN_NOT_ENABLED: "OTP sign-in is not enabled for this project",
    **dict.fromkeys(
        (
            ErrorCode.MALFORMED_REQUEST,
            ErrorCode.METHOD_NOT_ALLOWED,
            ErrorCode.REQUEST_BODY_TOO_LARGE,
            ErrorCode.STORAGE_UNAVAILABLE,
            ErrorCode.WRITE_CONFLICT,
            ErrorCode.IMPORT_CONFLICT,
            ErrorCode.RATE_LIMITED,
            ErrorCode.CANNOT_SET_BOTH_PASSWORD_AND_HASH,
            ErrorCode.INVALID_PASSWORD_HASH,
            ErrorCode.PRIMARY_EMAIL_REQUIRED,
            ErrorCode.OTP_AUTH_NOT_ENABLED,
            ErrorCode.PASSKEY_AUTH_CANNOT_BE_ENABLED,
            ErrorCode.INVALID_PROFILE_IMAGE_URL,
            ErrorCode.CLIENT_USER_DELETION_NOT_ENABLED,
            ErrorCode.OAUTH_PROVIDER_NOT_FOUND,
            ErrorCode.ONLY_ANONYMOUS_REQUIRES_INCLUDE_ANONYMOUS,
            ErrorCode.CLIENT_TEAM_CREATION_DISABLED,
            ErrorCode.CANNOT_CREATE_TEAM_FOR_OTHER_USER,
            ErrorCode.CLIENT_CAN_ONLY_LIST_OWN_TEAMS,
            ErrorCode.CANNOT_UPDATE_OTHER_USERS_PROFILE,
            ErrorCode.TEAM_ID_REQUIRED_FOR_CLIENT,
            ErrorCode.EMAIL_DELIVERY_FAILED,
            ErrorCode.SESSION_NOT_FOUND,
            ErrorCode.CLIENT_CAN_ONLY_LIST_OWN_SESSIONS,
            ErrorCode.WEBHOOK_ENDPOINT_NOT_FOUND,
            ErrorCode.WEBHOOK_URL_NOT_ALLOWED,
            ErrorCode.WEBHOOK_MESSAGE_NOT_FOUND,
        )
    ),
}


class PlainError(IdentityError):
    """An error the original answers with its status and a text/plain body holding only `message`, and no
    known-error header (reference part 1 §0: "plain status errors"). Clients cannot match on a code: use these
    only where the reference says "plain"."""

    def __init__(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        self.status = status
        self.message = message
        self.headers = headers
        super().__init__(f"{status}: {message}")


class StorageUnavailable(IdentityError):
    """The store could not be reached or did not answer in time (raised by backends only). `quiet`: the store has
    said so already (a refusal while it knows the store is down, logged once per outage): the service logs the
    request at debug level only."""

    def __init__(self, message: str = "", *, quiet: bool = False) -> None:
        super().__init__(message)
        self.quiet = quiet
