"""Passkeys: the answers a browser's authenticator gives, passed on whole (py_webauthn reads them)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from identity_proto.schemas.base import Body


class PasskeyRegisterBody(Body):
    """POST /auth/passkey/register: `navigator.credentials.create()`'s answer as JSON (`RegistrationResponseJSON`),
    and the code returned with the options."""

    credential: dict[str, Any]
    code: str = Field(max_length=128)


class PasskeySignInBody(Body):
    """POST /auth/passkey/sign-in: `navigator.credentials.get()`'s answer as JSON (`AuthenticationResponseJSON`),
    and the code returned with the options."""

    authentication_response: dict[str, Any]
    code: str = Field(max_length=128)
