"""Passkeys (WebAuthn): registering one for the signed-in user, and signing in with it (the original's passkey
routes, `auth/passkey/*`).

    initiate-passkey-registration (signed in) -> {options_json, code}
        browser: navigator.credentials.create(options, rp.id = its host)
    register {credential, code}               -> {user_handle}       the passkey stored on the user
    initiate-passkey-authentication           -> {options_json, code}
        browser: navigator.credentials.get(options, rpId = its host)
    sign-in {authentication_response, code}   -> the tokens (or the second factor), as every sign-in

Each `code` is a one-time code (`flows.codes`: stored as a hash, bound to the project and its purpose, a
registration's to its user, 65 seconds, used once); the WebAuthn challenge is derived from it
(`identity_proto.passkeys.challenge_of`). The relying party's rules are in `identity_proto.passkeys`: the browser's
origin must be one the project trusts (`flows.otp.callback_is_trusted`) and the RP ID that origin's host.

A user holds one passkey, as in the original (a new registration replaces it); the stored credential is its public
key, id, signature counter, transports, AAGUID and creation time. `PATCH /users/{id} {"passkey_auth_enabled":
false}` removes it (`flows.users`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from identity_proto.context import RequestContext
from identity_proto.effects import Flow, LoadUser, find_user_by_passkey, perform
from identity_proto.effects.commit import DropIndex, FieldsAre, IndexIs, IndexName, SetIndex, Write, commit
from identity_proto.effects.passkeys import SetPasskeys
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.flows.codes import create_code, present_code
from identity_proto.flows.otp import callback_is_trusted
from identity_proto.flows.sessions import start_session
from identity_proto.flows.signin import require_second_factor, rerun_on_conflict, signed_in
from identity_proto.http import Response
from identity_proto.passkeys import (
    CHALLENGE_LIFETIME_MS,
    PasskeyRejected,
    authentication_options,
    challenge_of,
    client_origin,
    expected_rp_id,
    registration_options,
    verify_authentication,
    verify_registration,
)
from identity_proto.records import CodePurpose, Passkey, Project, User, replaced
from identity_proto.render import json_response
from identity_proto.schemas import schema_error

if TYPE_CHECKING:
    from identity_proto.schemas import PasskeyRegisterBody, PasskeySignInBody, UserIdParams

__all__ = [
    "initiate_authentication",
    "initiate_registration",
    "list_user_passkeys",
    "register_passkey",
    "render_passkey",
    "sign_in_with_passkey",
]

_REGISTRATION, _AUTHENTICATION = CodePurpose.PASSKEY_REGISTRATION, CodePurpose.PASSKEY_AUTHENTICATION


def _require_passkeys(project: Project) -> None:
    if not project.config.passkey_enabled:
        raise KnownError(ErrorCode.PASSKEY_AUTHENTICATION_NOT_ENABLED)


def _signed_in_user_id(ctx: RequestContext) -> str:
    """The signed-in user's id; without one, the original's schema error (its routes require `auth.user`)."""
    user_id = ctx.require_auth().user_id
    if user_id is None:
        raise schema_error(ctx.request.method, ctx.request.path, ["auth.user must be defined"])
    return user_id


def _trusted_origin(project: Project, credential: dict[str, object], failure: ErrorCode) -> tuple[str, str]:
    """The browser's origin, when the project trusts it, and the RP ID it implies (its host); else `failure`
    with the original's text."""
    origin = client_origin(credential)
    rp_id = None if origin is None else expected_rp_id(origin)
    if origin is None or rp_id is None or not callback_is_trusted(origin, project.config):
        kind = "registration" if failure is ErrorCode.PASSKEY_REGISTRATION_FAILED else "authentication"
        raise KnownError(failure, message=f"Passkey {kind} failed because the origin is not allowed")
    return origin, rp_id


def initiate_registration(ctx: RequestContext) -> Flow[Response]:
    """POST /auth/passkey/initiate-passkey-registration (signed in): the creation options for the signed-in user
    and the code that carries their challenge."""
    project = ctx.require_auth().project
    user_id = _signed_in_user_id(ctx)
    _require_passkeys(project)
    user = yield from perform(LoadUser(project.id, user_id))
    if user is None:
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    code = yield from create_code(ctx, project.id, _REGISTRATION, CHALLENGE_LIFETIME_MS, user_id=user.id)
    options = registration_options(project.display_name, user, challenge_of(code.code))
    return json_response(200, {"options_json": options, "code": code.code})


def register_passkey(ctx: RequestContext[PasskeyRegisterBody]) -> Flow[Response]:
    """POST /auth/passkey/register {credential, code} (signed in): verify the browser's answer to the code's
    options and store the passkey as the user's (replacing the one they had), in the passkey index under its
    credential id. The code is consumed first: a refused answer cannot be tried again with it."""
    project = ctx.require_auth().project
    body: PasskeyRegisterBody = ctx.body
    user_id = _signed_in_user_id(ctx)
    _require_passkeys(project)
    attempt = yield from present_code(ctx, project.id, body.code, _REGISTRATION, consume=True)
    if attempt.code is None or attempt.code.user_id != user_id:  # another user's code names no challenge of ours
        raise KnownError(ErrorCode.VERIFICATION_CODE_NOT_FOUND)
    origin, rp_id = _trusted_origin(project, body.credential, ErrorCode.PASSKEY_REGISTRATION_FAILED)
    try:
        passkey = verify_registration(body.credential, challenge_of(body.code), origin, rp_id, ctx.now_ms)
    except PasskeyRejected:
        raise KnownError(
            ErrorCode.PASSKEY_REGISTRATION_FAILED,
            message="Passkey registration failed because the verification response is invalid",
        ) from None
    yield from rerun_on_conflict(lambda _first: _store_passkey(project.id, user_id, passkey))
    return json_response(200, {"user_handle": passkey.credential_id})


def _store_passkey(project_id: str, user_id: str, passkey: Passkey) -> Flow[None]:
    """Make `passkey` the user's only one, in one commit guarded on the passkeys read and on its credential id
    being free (or the user's already: registering the same authenticator again)."""
    user = yield from perform(LoadUser(project_id, user_id))
    if user is None:
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    holder = yield from perform(find_user_by_passkey(project_id, passkey.credential_id))
    if holder is not None and holder.id != user.id:
        raise KnownError(
            ErrorCode.PASSKEY_REGISTRATION_FAILED,
            message="Passkey registration failed because the credential is registered already",
        )
    writes: list[Write] = [
        DropIndex(IndexName.PASSKEY, old.credential_id)
        for old in user.passkeys
        if old.credential_id != passkey.credential_id
    ]
    writes += [SetIndex(IndexName.PASSKEY, passkey.credential_id, user.id), SetPasskeys(user.id, (passkey,))]
    guards = (
        FieldsAre(user, ("passkeys",)),
        IndexIs(IndexName.PASSKEY, passkey.credential_id, None if holder is None else user.id),
    )
    yield from commit(project_id, guards, tuple(writes))


def initiate_authentication(ctx: RequestContext) -> Flow[Response]:
    """POST /auth/passkey/initiate-passkey-authentication: the request options and the code that carries their
    challenge (no user yet: the credential will name them)."""
    project = ctx.require_auth().project
    _require_passkeys(project)
    code = yield from create_code(ctx, project.id, _AUTHENTICATION, CHALLENGE_LIFETIME_MS)
    return json_response(200, {"options_json": authentication_options(challenge_of(code.code)), "code": code.code})


def sign_in_with_passkey(ctx: RequestContext[PasskeySignInBody]) -> Flow[Response]:
    """POST /auth/passkey/sign-in {authentication_response, code}: verify the browser's answer against the stored
    passkey its credential id names, store the authenticator's new signature counter, and sign its user in (the
    second factor first when they have one, as every sign-in). The code is consumed first; the rest re-runs on a
    concurrent change of the passkey (a concurrent sign-in with it then finds its counter taken: refused)."""
    project = ctx.require_auth().project
    body: PasskeySignInBody = ctx.body
    _require_passkeys(project)
    yield from present_code(ctx, project.id, body.code, _AUTHENTICATION, consume=True)
    response = body.authentication_response
    credential_id = response.get("id")
    return (
        yield from rerun_on_conflict(
            lambda _first: _sign_in(ctx, project, response, credential_id, challenge_of(body.code))
        )
    )


#: The original's text for an answer that does not verify.
_UNVERIFIED = (
    "The signature of the authentication response could not be verified with the stored public key tied to this "
    "credential ID"
)
#: A signature counter that did not go up: the original's library throws (a 500 there); here a refusal that says why.
_CLONED = (
    "Passkey authentication failed because the authenticator's signature counter did not increase (a cloned or "
    "replayed authenticator)"
)


def _sign_in(
    ctx: RequestContext, project: Project, response: dict[str, object], credential_id: object, challenge: bytes
) -> Flow[Response]:
    holder = None
    if isinstance(credential_id, str) and credential_id:
        holder = yield from perform(find_user_by_passkey(project.id, credential_id))
    passkey = None if holder is None else next((p for p in holder.passkeys if p.credential_id == credential_id), None)
    if holder is None or passkey is None:
        raise KnownError(ErrorCode.PASSKEY_AUTHENTICATION_FAILED, message="Passkey not found")
    origin, rp_id = _trusted_origin(project, response, ErrorCode.PASSKEY_AUTHENTICATION_FAILED)
    try:
        sign_count = verify_authentication(response, challenge, origin, rp_id, passkey)
    except PasskeyRejected as rejected:
        raise KnownError(
            ErrorCode.PASSKEY_AUTHENTICATION_FAILED,
            message=_CLONED if rejected.cloned else _UNVERIFIED,
        ) from None
    counted = SetPasskeys(holder.id, _counted(holder, passkey, sign_count))
    if holder.totp_secret_base64 is not None:
        # the assertion is spent either way: its counter is stored before the second factor is asked for
        yield from commit(project.id, (FieldsAre(holder, ("passkeys", "totp_secret_base64")),), (counted,))
        yield from require_second_factor(ctx, project, holder, is_new_user=False)
    tokens = yield from start_session(
        ctx, project, holder, decided_on=("passkeys", "totp_secret_base64"), touch=True, writes=(counted,)
    )
    return signed_in(holder, tokens, is_new_user=False)


def _counted(user: User, passkey: Passkey, sign_count: int) -> tuple[Passkey, ...]:
    """The user's passkeys with `passkey`'s counter set to `sign_count`."""
    updated = replaced(passkey, {"sign_count": sign_count})
    return tuple(updated if p.credential_id == passkey.credential_id else p for p in user.passkeys)


def render_passkey(passkey: Passkey) -> dict[str, object]:
    """A passkey as the listing shows it: what identifies it and where it signs in (its public key is of no use to
    a reader; nothing stored is secret)."""
    return {
        "id": passkey.credential_id,
        "rp_id": passkey.rp_id,
        "transports": list(passkey.transports),
        "aaguid": passkey.aaguid,
        "sign_count": passkey.sign_count,
        "created_at_millis": passkey.created_at_millis,
    }


def list_user_passkeys(ctx: RequestContext[None, None, UserIdParams]) -> Flow[Response]:
    """GET /users/{user_id}/passkeys (server, admin; a route of this service's own): the user's passkeys, for the
    dashboard. `PATCH /users/{user_id}` with `passkey_auth_enabled: false` removes them."""
    project = ctx.require_auth().project
    user = yield from perform(LoadUser(project.id, ctx.resolve_user_id(ctx.params.user_id)))
    if user is None:
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    return json_response(200, {"items": [render_passkey(p) for p in user.passkeys], "is_paginated": False})
