"""Sign-in: by a code sent by e-mail, by password, and the second factor."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from identity_proto.schemas.base import Body, _code_of_45, _email, _no_nul, _sign_in_code, _web_url


class SendSignInCodeBody(Body):
    """POST /auth/otp/send-sign-in-code (reference §2.2)."""

    email: str
    callback_url: str = Field(max_length=2048)
    bot_challenge_token: str | None = None
    bot_challenge_phase: Literal["invisible", "visible"] | None = None
    bot_challenge_unavailable: Literal["true"] | None = None

    _email_rule = field_validator("email")(_email)
    _callback = field_validator("callback_url")(_web_url)


class CodeBody(Body):
    """POST /auth/otp/sign-in and /auth/otp/sign-in/check-code."""

    code: str
    _code = field_validator("code")(_sign_in_code)


class MfaSignInBody(Body):
    """POST /auth/mfa/sign-in (reference §2.5)."""

    type: Literal["totp"]
    totp: str = Field(max_length=64)
    code: str
    _code = field_validator("code")(_code_of_45)


class PasswordSignUpBody(Body):
    """POST /auth/password/sign-up."""

    email: str
    password: str
    verification_callback_url: str | None = Field(default=None, max_length=2048)
    bot_challenge_token: str | None = None
    bot_challenge_phase: Literal["invisible", "visible"] | None = None
    bot_challenge_unavailable: Literal["true"] | None = None
    _password = field_validator("password")(_no_nul)
    _email_rule = field_validator("email")(_email)
    _callback = field_validator("verification_callback_url")(_web_url)


class PasswordSignInBody(Body):
    """POST /auth/password/sign-in."""

    email: str = Field(max_length=256)
    password: str = Field(max_length=256)
    _email_rule = field_validator("email")(_email)
