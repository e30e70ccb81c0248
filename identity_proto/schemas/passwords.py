"""Password flows (reference part 2 §1): sending a reset code, resetting, checking a reset code, changing and
setting a password. Every password field is a string of at most 70 characters (longer: SCHEMA_ERROR, as the
original's schema says); the length rules of the flows (`PASSWORD_TOO_SHORT`) run after validation."""

from __future__ import annotations

from pydantic import Field, field_validator

from identity_proto.passwords import MAX_PASSWORD_LENGTH
from identity_proto.schemas.base import Body, _code_of_45, _email, _no_nul, _web_url


class SendResetCodeBody(Body):
    """POST /auth/password/send-reset-code."""

    email: str
    callback_url: str = Field(max_length=2048)

    _email_rule = field_validator("email")(_email)
    _callback = field_validator("callback_url")(_web_url)


class ResetCodeBody(Body):
    """POST /auth/password/reset/check-code: the 45-character code of the mailed link."""

    code: str
    _code = field_validator("code")(_code_of_45)


class ResetPasswordBody(Body):
    """POST /auth/password/reset."""

    code: str
    password: str = Field(max_length=MAX_PASSWORD_LENGTH)
    _code = field_validator("code")(_code_of_45)
    _password = field_validator("password")(_no_nul)


class UpdatePasswordBody(Body):
    """POST /auth/password/update."""

    old_password: str = Field(max_length=MAX_PASSWORD_LENGTH)
    new_password: str = Field(max_length=MAX_PASSWORD_LENGTH)
    _passwords = field_validator("old_password", "new_password")(_no_nul)


class SetPasswordBody(Body):
    """POST /auth/password/set."""

    password: str = Field(max_length=MAX_PASSWORD_LENGTH)
    _password = field_validator("password")(_no_nul)
