"""OAuth sign-in (reference part 2 §7.2-7.5): the authorize query, the provider's callback, the token exchange.

The authorize query and the callback tolerate unknown parameters (browsers and providers add their own: `ttclid`,
`iss`, `session_state`, ...), as the original does; the token body does not.
"""

from __future__ import annotations

from typing import ClassVar, Literal, Self

from pydantic import ConfigDict, Field, field_validator, model_validator

from identity_proto.schemas.base import WEB_URL_PATTERN, Body, Query, _web_url, documented

__all__ = [
    "CrossDomainAuthorizeBody",
    "OAuthAuthorizeQuery",
    "OAuthCallbackForm",
    "OAuthCallbackInput",
    "OAuthProviderIdParams",
    "OAuthTokenGrantBody",
]


@documented({"pattern": WEB_URL_PATTERN})
def _redirect_url(value: str | None) -> str | None:
    """A redirect URL (reference §7.2 e2e: "contains spaces", "is not a valid URL"), normalised, fragment dropped:
    what is stored and compared at the token exchange is what every parser reads alike."""
    if value is None:
        return None
    if any(c.isspace() for c in value):
        # As the original's two checks answer: also "is not a valid URL" unless the spaces were all that was wrong
        # (a URL parser would have encoded them in a path or query).
        try:
            _web_url("".join(value.split()))
        except ValueError:
            raise ValueError("contains spaces\nis not a valid URL") from None
        raise ValueError("contains spaces")
    href = _web_url(value.split("#", 1)[0])
    return href


class OAuthProviderIdParams(Query):
    """Path parameters naming a project's OAuth provider."""

    provider_id: str = Field(min_length=1, max_length=64)


class OAuthAuthorizeQuery(Query):
    """GET /auth/oauth/authorize/{provider_id} (reference §7.2)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    client_id: str = Field(max_length=128)
    client_secret: str = Field(max_length=256)
    redirect_uri: str = Field(max_length=2048)
    scope: str = Field(max_length=256)
    state: str = Field(max_length=2048)
    grant_type: Literal["authorization_code"]
    code_challenge: str = Field(min_length=1, max_length=256)
    # (inferred) the original lets any value through to its OAuth library, which refuses others at the callback;
    # refusing them here changes nothing for a client that works and tells one that does not at once.
    code_challenge_method: Literal["S256", "plain"]
    response_type: Literal["code"]
    type: Literal["authenticate", "link"] = "authenticate"
    token: str = Field(default="", max_length=8192)
    provider_scope: str | None = Field(default=None, max_length=1024)
    error_redirect_uri: str | None = Field(default=None, max_length=2048)
    #: Deprecated spelling of `error_redirect_uri` (the SDK still sends it).
    error_redirect_url: str | None = Field(default=None, max_length=2048)
    after_callback_redirect_url: str | None = Field(default=None, max_length=2048)
    stack_response_mode: Literal["json", "redirect"] = "redirect"
    bot_challenge_token: str | None = None
    bot_challenge_phase: Literal["invisible", "visible"] | None = None
    bot_challenge_unavailable: Literal["true"] | None = None

    _urls = field_validator("redirect_uri", "error_redirect_uri", "error_redirect_url", "after_callback_redirect_url")(
        _redirect_url
    )


class OAuthCallbackInput(Query):
    """The provider's redirect back (query, or a form body for `response_mode=form_post`): only `state` is ours;
    the rest is the provider's."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    state: str | None = Field(default=None, max_length=2048)
    code: str | None = Field(default=None, max_length=4096)
    error: str | None = Field(default=None, max_length=256)


class OAuthCallbackForm(Body):
    """The provider's redirect back as a form body (`response_mode=form_post`): as `OAuthCallbackInput`."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    body_required: ClassVar[bool] = False  # the query may carry the fields instead

    state: str | None = Field(default=None, max_length=2048)
    code: str | None = Field(default=None, max_length=4096)
    error: str | None = Field(default=None, max_length=256)


class OAuthTokenGrantBody(Body):
    """POST /auth/oauth/token, form-encoded from the SDK, JSON in the original's e2e (reference §7.5,
    official-sdk §3.8): the refresh grant or the authorization-code grant, each with the fields it needs."""

    # `_grant_fields` in the document: each grant with the fields it needs
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {
                    "properties": {"grant_type": {"const": "refresh_token"}},
                    "required": ["refresh_token", "client_secret"],
                },
                {"properties": {"grant_type": {"const": "authorization_code"}}, "required": ["code"]},
            ]
        }
    )

    grant_type: Literal["refresh_token", "authorization_code"]
    client_id: str = Field(min_length=1, max_length=128)
    client_secret: str | None = Field(default=None, min_length=1, max_length=256)
    scope: str | None = None
    # the refresh grant
    refresh_token: str | None = Field(default=None, min_length=1, max_length=256)
    # the authorization-code grant
    code: str | None = Field(default=None, min_length=1, max_length=256)
    redirect_uri: str | None = Field(default=None, max_length=2048)
    code_verifier: str | None = Field(default=None, max_length=256)

    @field_validator("redirect_uri")
    @classmethod
    @documented({"pattern": WEB_URL_PATTERN})
    def _redirect(cls, value: str | None) -> str | None:
        # Normalised as at the authorize endpoint, so the same URL compares equal; one that does not parse cannot
        # be the one the code was issued for (the plain "Invalid redirect URI" error, in the flow).
        try:
            return _redirect_url(value)
        except ValueError:
            return ""

    @model_validator(mode="after")
    def _grant_fields(self) -> Self:
        missing: list[str] = []
        if self.grant_type == "refresh_token":
            missing = [name for name in ("refresh_token", "client_secret") if getattr(self, name) is None]
        elif self.code is None:
            missing = ["code"]
        if missing:
            raise ValueError("\n".join(f"body.{name} must be defined" for name in missing))
        return self


class CrossDomainAuthorizeBody(Body):
    """POST /auth/oauth/cross-domain/authorize: the outer flow's redirect URI, state and PKCE challenge."""

    redirect_uri: str = Field(max_length=2048)
    state: str = Field(min_length=1, max_length=512)
    code_challenge: str = Field(pattern=r"^[A-Za-z0-9._~-]{43,128}$")
    code_challenge_method: Literal["S256"] = "S256"
    after_callback_redirect_url: str | None = Field(default=None, max_length=2048)

    _urls = field_validator("redirect_uri", "after_callback_redirect_url")(_redirect_url)
