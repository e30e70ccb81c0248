"""User and team API keys (reference part 2 §5): create, list, read, update (describe, revoke) and check.

Rules, in the order every endpoint applies them:
1. the project's switch for the family (`allow_user_api_keys`, `allow_team_api_keys`; off by default), also for
   `check`: off -> 400 plain "User API keys are not enabled for this project." ("Team ...");
2. the key (read, update: 404 API_KEY_NOT_FOUND when there is none) or the owner named in the request (create,
   list);
3. who may manage the owner's keys: server and admin any; a client only with a user (401
   USER_AUTHENTICATION_REQUIRED), its own user's keys (403 plain "Client can only manage their own api keys"), and a
   team's keys only with `$manage_api_keys` in that team (404 API_KEY_NOT_FOUND otherwise, which does not tell
   whether the team exists).

A key's text (102 characters, the original's format) is `<sk|pk>_`, 45 random lower-case Crockford characters, the
key's id without dashes, `user` or `team`, a flag character, the marker `574ck4u7h`, and the CRC32 of all that as 8
hex digits (so secret scanners can recognise it). It is shown once, in the answer to its creation; the store keeps
its SHA-256 and its last four characters only, and `check` hashes the key it is given and looks that up (the
original keeps keys in plaintext).

"Plain" errors are text bodies without a known-error header, as the original sends them: `errors.PlainError`.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from identity_proto.auth import AccessType
from identity_proto.context import RequestContext
from identity_proto.effects import (
    ApiKeyIs,
    ApiKeyOwnerExists,
    ApiKeyWrite,
    Commit,
    Conflict,
    FindApiKeyByHash,
    Flow,
    ListApiKeys,
    LoadApiKey,
    LoadMembership,
    PatchApiKey,
    PutApiKey,
    perform,
)
from identity_proto.effects.commit import commit
from identity_proto.errors import ErrorCode, KnownError, PlainError
from identity_proto.flows.teams import effective_permissions
from identity_proto.http import Response
from identity_proto.records import ApiKey, ApiKeyType, replaced
from identity_proto.render import json_response, render_api_key
from identity_proto.schemas import UserApiKeyCreateBody, UserApiKeysQuery
from identity_proto.tokens import CROCKFORD_ALPHABET, Entropy, hash_secret, new_uuid, random_string

if TYPE_CHECKING:
    from identity_proto.schemas import (
        ApiKeyCheckBody,
        ApiKeyIdParams,
        ApiKeyUpdateBody,
        TeamApiKeyCreateBody,
        TeamApiKeysQuery,
    )

__all__ = [
    "API_KEY_MARKER",
    "MANAGE_API_KEYS",
    "NewApiKey",
    "change_api_key",
    "check_team_api_key",
    "check_user_api_key",
    "create_team_api_key",
    "create_user_api_key",
    "get_team_api_key",
    "get_user_api_key",
    "list_team_api_keys",
    "list_user_api_keys",
    "new_api_key",
    "patch_api_key",
    "store_api_key",
    "update_team_api_key",
    "update_user_api_key",
]

#: The original's marker, which secret scanners look for.
API_KEY_MARKER = "574ck4u7h"
SECRET_LENGTH = 45
#: The team permission a client needs to manage its team's keys.
MANAGE_API_KEYS = "$manage_api_keys"


B = TypeVar("B")
Q = TypeVar("Q")
P = TypeVar("P")


def _answering_refusals(
    endpoint: Callable[[RequestContext[B, Q, P], ApiKeyType], Flow[Response]], key_type: ApiKeyType, name: str
) -> Callable[[RequestContext[B, Q, P]], Flow[Response]]:
    """The route's flow `name`: `endpoint` for one family of keys. Its `plain_errors` attribute lists the statuses
    of its plain errors (for the OpenAPI document): 400 (the switch), and 403 (another user's keys) where a client
    names a user's keys."""

    def flow(ctx: RequestContext[B, Q, P]) -> Flow[Response]:
        return (yield from endpoint(ctx, key_type))

    functools.update_wrapper(flow, endpoint)
    flow.__name__ = flow.__qualname__ = name
    other_users = key_type is ApiKeyType.USER and endpoint is not _check
    flow.__dict__["plain_errors"] = (400, 403) if other_users else (400,)
    return flow


# --------------------------------------------------------------------------------------------------------------
# The key's text


class NewApiKey:
    """A key just made: its text (shown once, never stored) and the record to store."""

    __slots__ = ("record", "text")

    def __init__(self, text: str, record: ApiKey) -> None:
        self.text = text
        self.record = record


def api_key_text(entropy: Entropy, key_id: str, key_type: ApiKeyType, *, is_public: bool) -> str:
    """The text of a new key in the original's format (see the module docstring). The flag character is
    `(cloud ? 0 : 1) + (public ? 2 : 0)` as a Crockford digit; this service is never the original's cloud."""
    prefix = "pk" if is_public else "sk"
    flag = CROCKFORD_ALPHABET[1 + (2 if is_public else 0)]
    body = f"{prefix}_{random_string(entropy, SECRET_LENGTH)}{key_id.replace('-', '')}{key_type.value}{flag}"
    body += API_KEY_MARKER
    return body + format(zlib.crc32(body.encode()), "08x")


def new_api_key(
    entropy: Entropy,
    now_ms: int,
    key_type: ApiKeyType,
    owner_id: str,
    *,
    description: str,
    expires_at_millis: int | None = None,
    is_public: bool = False,
) -> NewApiKey:
    """A fresh key for `owner_id` (a user's or a team's id, by `key_type`) and its record (hash and last four)."""
    key_id = new_uuid(entropy)
    text = api_key_text(entropy, key_id, key_type, is_public=is_public)
    record = ApiKey(
        id=key_id,
        type=key_type,
        owner_id=owner_id,
        description=description,
        is_public=is_public,
        created_at_millis=now_ms,
        key_hash=hash_secret(text),
        last_four=text[-4:],
        # The original stores no expiry for a falsy `expires_at_millis` (null, and 0 too).
        expires_at_millis=expires_at_millis or None,
    )
    return NewApiKey(text, record)


# --------------------------------------------------------------------------------------------------------------
# The rules every endpoint applies


def _require_enabled(ctx: RequestContext, key_type: ApiKeyType) -> None:
    """Rule 1: the project's switch for this family."""
    config = ctx.require_auth().project.config
    if key_type is ApiKeyType.USER and not config.allow_user_api_keys:
        raise PlainError(400, "User API keys are not enabled for this project.")
    if key_type is ApiKeyType.TEAM and not config.allow_team_api_keys:
        raise PlainError(400, "Team API keys are not enabled for this project.")


def _require_manager(ctx: RequestContext, key_type: ApiKeyType, owner_id: str) -> Flow[None]:
    """Rule 3: whether the caller may manage the keys of `owner_id`."""
    auth = ctx.require_auth()
    if auth.access_type is not AccessType.CLIENT:
        return
    user_id = auth.user_id
    if user_id is None:
        raise KnownError(ErrorCode.USER_AUTHENTICATION_REQUIRED)
    if key_type is ApiKeyType.USER:
        if owner_id != user_id:
            raise PlainError(403, "Client can only manage their own api keys")
        return
    membership = yield from perform(LoadMembership(auth.project.id, owner_id, user_id))
    if membership is None or MANAGE_API_KEYS not in effective_permissions(auth.project.config, membership):
        # The original answers 404 here, so that a client cannot tell a team it may not see from a missing one.
        raise KnownError(ErrorCode.API_KEY_NOT_FOUND)


def _load_key(ctx: RequestContext[object, object, ApiKeyIdParams], key_type: ApiKeyType) -> Flow[ApiKey]:
    """Rule 2 for read and update: the key of the path, of this family. (The original fails with 500 on a key of
    the other family through this path; a careful caller expects it not to be found here, as it is not one of
    this family's keys.)"""
    key = yield from perform(LoadApiKey(ctx.require_auth().project.id, ctx.params.api_key_id))
    if key is None or key.type is not key_type:
        raise KnownError(ErrorCode.API_KEY_NOT_FOUND)
    return key


# --------------------------------------------------------------------------------------------------------------
# Endpoints


def _create(ctx: RequestContext[UserApiKeyCreateBody | TeamApiKeyCreateBody], key_type: ApiKeyType) -> Flow[Response]:
    """POST /user-api-keys, /team-api-keys -> 200 with the whole key, shown this once."""
    _require_enabled(ctx, key_type)
    auth = ctx.require_auth()
    body = ctx.body  # a UserApiKeyCreateBody or a TeamApiKeyCreateBody, by the family
    owner_id = ctx.resolve_user_id(body.user_id) if isinstance(body, UserApiKeyCreateBody) else body.team_id
    yield from _require_manager(ctx, key_type, owner_id)
    made = new_api_key(
        ctx.entropy,
        ctx.now_ms,
        key_type,
        owner_id,
        description=body.description,
        expires_at_millis=body.expires_at_millis,
        is_public=body.is_public,
    )
    created = yield from store_api_key(auth.project.id, made.record)
    if created is ApiKeyWrite.OWNER_NOT_FOUND:
        # The original fails with 500 on a missing owner (server access); the owner's own not-found error says why.
        if key_type is ApiKeyType.USER:
            raise KnownError(ErrorCode.USER_NOT_FOUND)
        raise KnownError(ErrorCode.TEAM_NOT_FOUND, details={"team_id": owner_id})
    return json_response(200, render_api_key(made.record, full_key=made.text))


def _list(ctx: RequestContext[None, UserApiKeysQuery | TeamApiKeysQuery], key_type: ApiKeyType) -> Flow[Response]:
    """GET /user-api-keys?user_id=, /team-api-keys?team_id=: the owner's keys, newest first, revoked and expired
    ones included."""
    _require_enabled(ctx, key_type)
    auth = ctx.require_auth()
    query = ctx.query
    if isinstance(query, UserApiKeysQuery):
        if query.user_id is None:
            # The original's words, as the whole message (reference part 2 §5).
            message = "user_id is required for user API keys"
            raise KnownError(ErrorCode.SCHEMA_ERROR, details={"message": message})
        owner_id = ctx.resolve_user_id(query.user_id)
    else:
        owner_id = query.team_id
    yield from _require_manager(ctx, key_type, owner_id)
    keys = yield from perform(ListApiKeys(auth.project.id, key_type, owner_id))
    return json_response(200, {"items": [render_api_key(key) for key in keys], "is_paginated": False})


def _get(ctx: RequestContext[None, object, ApiKeyIdParams], key_type: ApiKeyType) -> Flow[Response]:
    """GET /user-api-keys/{id}, /team-api-keys/{id}?team_id= (the key's own owner decides who may read it)."""
    _require_enabled(ctx, key_type)
    key = yield from _load_key(ctx, key_type)
    yield from _require_manager(ctx, key_type, key.owner_id)
    return json_response(200, render_api_key(key))


def _update(ctx: RequestContext[ApiKeyUpdateBody, object, ApiKeyIdParams], key_type: ApiKeyType) -> Flow[Response]:
    """PATCH /user-api-keys/{id}, /team-api-keys/{id}?team_id= `{description?, revoked?: true}`: a revoked key
    keeps the time of its first revocation."""
    _require_enabled(ctx, key_type)
    auth = ctx.require_auth()
    body: ApiKeyUpdateBody = ctx.body
    key = yield from _load_key(ctx, key_type)
    yield from _require_manager(ctx, key_type, key.owner_id)
    revoke_at = ctx.now_ms if body.revoked else None
    updated = yield from patch_api_key(auth.project.id, key, body.description, revoke_at)
    return json_response(200, render_api_key(updated))


def store_api_key(project_id: str, key: ApiKey) -> Flow[ApiKey | ApiKeyWrite]:
    """Store a new key, in one commit, only if its owner exists (OWNER_NOT_FOUND otherwise: the guard is the
    check, so a refusal is an answer, not a conflict to re-run)."""
    answer = yield from perform(Commit(project_id, (ApiKeyOwnerExists(key.type, key.owner_id),), (PutApiKey(key),)))
    return ApiKeyWrite.OWNER_NOT_FOUND if isinstance(answer, Conflict) else key


def change_api_key(
    project_id: str, key_id: str, description: str | None = None, revoke_at_millis: int | None = None
) -> Flow[ApiKey | None]:
    """`patch_api_key` of the key with this id, read first; None when there is none."""
    key = yield from perform(LoadApiKey(project_id, key_id))
    if key is None:
        return None
    return (yield from patch_api_key(project_id, key, description, revoke_at_millis))


def patch_api_key(project_id: str, key: ApiKey, description: str | None, revoke_at_millis: int | None) -> Flow[ApiKey]:
    """Set the `description` (when not None) of the key as read and, with `revoke_at_millis`, revoke it unless it
    is revoked already (a key is revoked once: a second revocation keeps the first time). One commit guarded on the
    key's changeable fields as read: a concurrent change or deletion re-runs the flow (`CommitConflict`). The key
    as stored afterwards."""
    changes: dict[str, object] = {}
    if description is not None:
        changes["description"] = description
    if revoke_at_millis is not None and key.manually_revoked_at_millis is None:
        changes["manually_revoked_at_millis"] = revoke_at_millis
    if not changes:
        return key
    yield from commit(project_id, (ApiKeyIs(key),), (PatchApiKey(key.id, tuple(changes.items())),))
    return replaced(key, changes)


def _check(ctx: RequestContext[ApiKeyCheckBody], key_type: ApiKeyType) -> Flow[Response]:
    """POST /user-api-keys/check, /team-api-keys/check `{api_key}` (server, admin): the key, if it is one of this
    family's and valid now; else 404 API_KEY_NOT_FOUND, 400 WRONG_API_KEY_TYPE, 401 API_KEY_REVOKED or 401
    API_KEY_EXPIRED, in that order."""
    _require_enabled(ctx, key_type)
    body: ApiKeyCheckBody = ctx.body
    key = yield from perform(FindApiKeyByHash(ctx.require_auth().project.id, hash_secret(body.api_key)))
    if key is None:
        raise KnownError(ErrorCode.API_KEY_NOT_FOUND)
    if key.type is not key_type:
        raise KnownError(
            ErrorCode.WRONG_API_KEY_TYPE, details={"expected_type": key_type.value, "actual_type": key.type.value}
        )
    if key.manually_revoked_at_millis is not None:
        raise KnownError(ErrorCode.API_KEY_REVOKED)
    if key.expires_at_millis is not None and ctx.now_ms >= key.expires_at_millis:
        raise KnownError(ErrorCode.API_KEY_EXPIRED)
    return json_response(200, render_api_key(key))


create_user_api_key = _answering_refusals(_create, ApiKeyType.USER, "create_user_api_key")
create_team_api_key = _answering_refusals(_create, ApiKeyType.TEAM, "create_team_api_key")
list_user_api_keys = _answering_refusals(_list, ApiKeyType.USER, "list_user_api_keys")
list_team_api_keys = _answering_refusals(_list, ApiKeyType.TEAM, "list_team_api_keys")
get_user_api_key = _answering_refusals(_get, ApiKeyType.USER, "get_user_api_key")
get_team_api_key = _answering_refusals(_get, ApiKeyType.TEAM, "get_team_api_key")
update_user_api_key = _answering_refusals(_update, ApiKeyType.USER, "update_user_api_key")
update_team_api_key = _answering_refusals(_update, ApiKeyType.TEAM, "update_team_api_key")
check_user_api_key = _answering_refusals(_check, ApiKeyType.USER, "check_user_api_key")
check_team_api_key = _answering_refusals(_check, ApiKeyType.TEAM, "check_team_api_key")
