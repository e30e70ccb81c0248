"""How the guards and writes of a `Commit` that are a resource's own become the commit script's ops (`commit.py` has
the generic ones and the script).

The project index is in another slot, so it cannot be written in the commit that writes a record: a commit's
`PutProject`, and a `PatchProject` of its key hashes (start-up's), add the id to it before the commit, whatever
the commit then finds (SADD is idempotent), so a retried create or the next start repairs an entry a crash lost.
A user's linked OAuth accounts (its ``oauth_accounts`` field, one JSON array) are written exactly as the user
codec writes them, so `FieldsAre` compares the same text."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import orjson

from backends.redis.codecs import (
    _change_fields,
    _config_fields,
    _email_json,
    _flat,
    _json,
    _json_fields,
    _record_fields,
)
from backends.redis.commit import Ops, guards, writes
from backends.redis.keys import GRACE_MS, KeySpace
from backends.redis.plan import Call
from identity_proto.changes import ProjectConfigChanges
from identity_proto.effects import (
    ApiKeyIs,
    ApiKeyOwnerExists,
    ChannelsAre,
    CodeIsUnused,
    DropChannel,
    DropInvitation,
    DropMembership,
    DropSession,
    DropTeam,
    DropUser,
    EndSession,
    Exists,
    InvitationIsStored,
    InvitationIsUnused,
    MembershipFieldsAre,
    MembershipIsAbsent,
    PatchApiKey,
    PatchMembership,
    PatchProject,
    ProjectConfigIs,
    ProjectGrantIs,
    PutApiKey,
    PutChannel,
    PutCode,
    PutInvitation,
    PutMail,
    PutProject,
    RecordExists,
    RevokePermission,
    SessionExists,
    TeamApiKeysAre,
    TeamMembersAre,
    UseCode,
    UseInvitation,
)
from identity_proto.effects.api_keys import DropApiKey, UserApiKeysAre
from identity_proto.effects.commit import RecordKind
from identity_proto.effects.oauth import DropProviderTokens, PutProviderTokens, SetOAuthAccounts
from identity_proto.effects.passkeys import SetPasskeys
from identity_proto.effects.permissions import DropProjectGrants
from identity_proto.effects.sessions import UserSessionsAre
from identity_proto.effects.teams import UserTeamsAre
from identity_proto.records import (
    ApiKeyType,
    ContactChannel,
    ProjectConfig,
    VerificationCode,
    contact_channel_to_json,
)

_DEFAULTS = ProjectConfig()  # what a record without a config field holds


#: The guards that a set of ids is exactly the ids stored (`Ops.exactly`): the index (a ZSET, or "s": a SET; the
#: user's sessions may hold ids of sessions gone by TTL, which ListSessions prunes: the set is what is guarded),
#: and the ids the guard names.
_HOLDS: dict[type[Any], tuple[Callable[[KeySpace, str, Any], str], str, str]] = {
    UserSessionsAre: (lambda k, p, g: k.user_sessions(p, g.user_id), "session_ids", "s"),
    TeamMembersAre: (lambda k, p, g: k.team_members(p, g.team_id), "user_ids", "z"),
    UserTeamsAre: (lambda k, p, g: k.user_teams(p, g.user_id), "team_ids", "z"),
    TeamApiKeysAre: (lambda k, p, g: k.owner_api_keys(p, "team", g.team_id), "key_ids", "z"),
    UserApiKeysAre: (lambda k, p, g: k.owner_api_keys(p, "user", g.user_id), "key_ids", "z"),
}


def _holds_exactly(ops: Ops, position: int, guard: Any) -> None:
    index, named, kind = _HOLDS[type(guard)]
    ops.exactly(position, index(ops.space, ops.project_id, guard), getattr(guard, named), kind)


for _type in _HOLDS:
    guards(_type)(_holds_exactly)


@guards(ProjectConfigIs)
def _project_config_is(ops: Ops, position: int, guard: ProjectConfigIs) -> None:
    record = ops.record_key(RecordKind.PROJECT, ops.project_id)
    defaults = _config_fields(ProjectConfigChanges.of((name, getattr(_DEFAULTS, name)) for name, _ in guard.expected))
    for (field, text), (_, default) in zip(_config_fields(guard.expected), defaults, strict=True):
        ops.guards.append([position, "hget", record, field, [text, False] if text == default else text])


@writes(PutProject)
def _put_project(ops: Ops, write: PutProject) -> None:
    project = write.project
    record = ops.record_key(RecordKind.PROJECT, project.id)
    ops.writes += [["del", record], ["hset", record, *_flat(_record_fields(project))]]
    ops.before.append(Call("SADD", ops.space.index, project.id))  # also when its id is taken: a repair


@writes(PatchProject)
def _patch_project(ops: Ops, write: PatchProject) -> None:
    fields = _config_fields(write.config)
    if write.display_name is not None:
        fields.insert(0, ("display_name", write.display_name))
    if write.keys is not None:
        fields.append(("keys", _json(dataclasses.asdict(write.keys))))
        ops.before.append(Call("SADD", ops.space.index, write.project_id))
    if fields:
        ops.writes.append(["hset", ops.record_key(RecordKind.PROJECT, write.project_id), *_flat(fields)])


def _exists(ops: Ops, position: int, guard: Exists | RecordExists) -> None:
    ops.guards.append([position, "exists", ops.record_key(guard.kind, guard.id), 1])


guards(Exists)(_exists)
guards(RecordExists)(_exists)


@writes(DropUser)
def _drop_user(ops: Ops, write: DropUser) -> None:
    ops.writes.append(["del", ops.record_key(RecordKind.USER, write.user_id)])
    ops.writes.append(["zrem", ops.key(ops.space.user_order(ops.project_id)), write.user_id])


@writes(DropSession)
def _drop_session(ops: Ops, write: DropSession) -> None:
    space, p, session = ops.space, ops.project_id, write.session
    ops.writes.append(["del", ops.key(space.session(p, session.id))])
    ops.writes.append(["del", ops.key(space.session_by_token(p, session.refresh_token_hash))])
    ops.writes.append(["srem", ops.key(space.user_sessions(p, session.user_id)), session.id])


@writes(EndSession)
def _end_session(ops: Ops, write: EndSession) -> None:
    # The token entry and the user's set are named by the session's own fields, read (JSON-decoded) in the script.
    space, p = ops.space, ops.project_id
    session_key = ops.key(space.session(p, write.session_id))
    ops.writes.append(["hget", session_key, "refresh_token_hash", "token", "json"])
    ops.writes.append(["hget", session_key, "user_id", "owner", "json"])
    ops.writes.append(["del", session_key])
    ops.writes.append(["del", {"p": space.session_by_token(p, ""), "v": "token"}])
    ops.writes.append(["srem", {"p": space.user_sessions(p, ""), "v": "owner"}, write.session_id])


@guards(SessionExists)
def _session_exists(ops: Ops, position: int, guard: SessionExists) -> None:
    ops.guards.append([position, "exists", ops.key(ops.space.session(ops.project_id, guard.session_id)), 1])


# A membership's record is keyed by its sequence number, the score of its user in the team's member index: a guard
# binds it (`zscore` with a name), a write looks it up (`zscore` write op).
def _membership_seq(ops: Ops, team_id: str, user_id: str) -> dict[str, str]:
    """Write ops that make the membership's sequence number a value; its record's key, naming that value."""
    name = f"w{len(ops.writes)}"
    ops.writes.append(["zscore", ops.key(ops.space.team_members(ops.project_id, team_id)), user_id, name])
    return {"p": ops.space.membership(ops.project_id, ""), "v": name}


@guards(MembershipIsAbsent)
def _membership_is_absent(ops: Ops, position: int, guard: MembershipIsAbsent) -> None:
    members = ops.key(ops.space.team_members(ops.project_id, guard.team_id))
    ops.guards.append([position, "zscore", members, guard.user_id, False])


@guards(MembershipFieldsAre)
def _membership_fields_are(ops: Ops, position: int, guard: MembershipFieldsAre) -> None:
    read, name = guard.record, f"g{position}"
    members = ops.key(ops.space.team_members(ops.project_id, read.team_id))
    ops.guards.append([position, "zscore", members, read.user_id, True, name])
    ops.fields_are(position, {"p": ops.space.membership(ops.project_id, ""), "v": name}, read, guard.names)


@writes(PatchMembership)
def _patch_membership(ops: Ops, write: PatchMembership) -> None:
    fields = _change_fields(write.changes)
    if fields:
        ops.writes.append(["hset", _membership_seq(ops, write.team_id, write.user_id), *_flat(fields)])


@writes(DropMembership)
def _drop_membership(ops: Ops, write: DropMembership) -> None:
    space, p = ops.space, ops.project_id
    record = _membership_seq(ops, write.team_id, write.user_id)
    ops.writes.append(["del", record])
    ops.writes.append(["zrem", ops.key(space.team_members(p, write.team_id)), write.user_id])
    ops.writes.append(["zrem", ops.key(space.user_teams(p, write.user_id)), write.team_id])
    ops.writes.append(["zrem", ops.key(space.membership_order(p)), {"v": record["v"]}])


@writes(DropTeam)
def _drop_team(ops: Ops, write: DropTeam) -> None:
    space, p, team_id = ops.space, ops.project_id, write.team_id
    ops.writes.append(["del", ops.key(space.team(p, team_id))])
    ops.writes.append(["zrem", ops.key(space.team_order(p)), team_id])
    ops.writes.append(["del", ops.key(space.team_members(p, team_id))])
    for api_key in write.api_keys:
        ops.writes.append(["hdel", ops.key(space.api_key_by_hash(p)), api_key.key_hash])
        ops.writes.append(["del", ops.key(space.api_key(p, api_key.id))])
    ops.writes.append(["del", ops.key(space.owner_api_keys(p, "team", team_id))])


@guards(ApiKeyOwnerExists)
def _api_key_owner_exists(ops: Ops, position: int, guard: ApiKeyOwnerExists) -> None:
    kind = RecordKind.USER if guard.type is ApiKeyType.USER else RecordKind.TEAM
    ops.guards.append([position, "exists", ops.record_key(kind, guard.owner_id), 1])


@guards(ApiKeyIs)
def _api_key_is(ops: Ops, position: int, guard: ApiKeyIs) -> None:
    key_key = ops.key(ops.space.api_key(ops.project_id, guard.key.id))
    ops.guards.append([position, "exists", key_key, 1])
    ops.fields_are(position, key_key, guard.key, guard.names)


@writes(PutApiKey)
def _put_api_key(ops: Ops, write: PutApiKey) -> None:
    key, p, space = write.key, ops.project_id, ops.space
    key_key = ops.key(space.api_key(p, key.id))
    ops.put(key_key, _json_fields(key))
    ops.writes.append(["hset", ops.key(space.api_key_by_hash(p)), key.key_hash, key.id])
    owner_index = ops.key(space.owner_api_keys(p, key.type.value, key.owner_id))
    ops.writes.append(["zadd", owner_index, str(key.created_at_millis), key.id])


@writes(PatchApiKey)
def _patch_api_key(ops: Ops, write: PatchApiKey) -> None:
    fields = [(name, _json(value)) for name, value in write.changes]
    ops.writes.append(["hset", ops.key(ops.space.api_key(ops.project_id, write.key_id)), *_flat(fields)])


@writes(DropApiKey)
def _drop_api_key(ops: Ops, write: DropApiKey) -> None:
    key, p, space = write.key, ops.project_id, ops.space
    ops.writes.append(["del", ops.key(space.api_key(p, key.id))])
    ops.writes.append(["hdel", ops.key(space.api_key_by_hash(p)), key.key_hash])
    ops.writes.append(["zrem", ops.key(space.owner_api_keys(p, key.type.value, key.owner_id)), key.id])


@guards(InvitationIsStored)
def _invitation_is_stored(ops: Ops, position: int, guard: InvitationIsStored) -> None:
    ops.guards.append([position, "exists", ops.key(ops.space.code(ops.project_id, guard.code_hash)), 1])


@writes(PutInvitation)
def _put_invitation(ops: Ops, write: PutInvitation) -> None:
    # The code as PutCode stores it; the id entry and both index entries expire with it, and index entries whose
    # keys expired more than the grace ago are dropped on the way.
    space, p, code = ops.space, ops.project_id, write.code
    expires = _store_code(ops, code)
    invitation_key = ops.key(space.invitation(p, code.id or ""))
    ops.writes += [["set", invitation_key, code.code_hash], ["pexpireat", invitation_key, expires]]
    drop_before = f"({code.created_at_millis - GRACE_MS}"
    for index in (space.team_invitations(p, code.team_id or ""), space.invitations_to(p, code.email or "")):
        index_key = ops.key(index)
        ops.writes.append(["zremrangebyscore", index_key, "-inf", drop_before])
        ops.writes.append(["zadd", index_key, str(code.expires_at_millis), code.id or ""])
        ops.writes.append(["extend", index_key, expires])


@writes(DropInvitation)
def _drop_invitation(ops: Ops, write: DropInvitation) -> None:
    space, p, code = ops.space, ops.project_id, write.code
    ops.writes.append(["del", ops.key(space.code(p, code.code_hash))])
    ops.writes.append(["del", ops.key(space.invitation(p, code.id or ""))])
    ops.writes.append(["zrem", ops.key(space.team_invitations(p, code.team_id or "")), code.id or ""])
    ops.writes.append(["zrem", ops.key(space.invitations_to(p, code.email or "")), code.id or ""])


def channel_text(channel: ContactChannel) -> str:
    """A stored channel's JSON text, as every write stores it (so a guard can compare it)."""
    return orjson.dumps(contact_channel_to_json(channel)).decode()


@guards(ChannelsAre)
def _channels_are(ops: Ops, position: int, guard: ChannelsAre) -> None:
    channels_key = ops.key(ops.space.user_channels(ops.project_id, guard.user_id))
    ops.guards.append([position, "hlen", channels_key, len(guard.stored)])
    for channel in guard.stored:
        ops.guards.append([position, "hget", channels_key, channel.id, channel_text(channel)])


@writes(PutChannel)
def _put_channel(ops: Ops, write: PutChannel) -> None:
    channel = write.channel
    channels_key = ops.key(ops.space.user_channels(ops.project_id, channel.user_id))
    ops.writes.append(["hset", channels_key, channel.id, channel_text(channel)])


@writes(DropChannel)
def _drop_channel(ops: Ops, write: DropChannel) -> None:
    ops.writes.append(["hdel", ops.key(ops.space.user_channels(ops.project_id, write.user_id)), write.channel_id])


def _code_is_unused(ops: Ops, position: int, guard: CodeIsUnused | InvitationIsUnused) -> None:
    ops.guards.append([position, "hget", ops.key(ops.space.code(ops.project_id, guard.code_hash)), "used", "false"])


guards(CodeIsUnused)(_code_is_unused)
guards(InvitationIsUnused)(_code_is_unused)


def _use_code(ops: Ops, write: UseCode | UseInvitation) -> None:
    ops.writes.append(["hset", ops.key(ops.space.code(ops.project_id, write.code_hash)), "used", "true"])


writes(UseCode)(_use_code)
writes(UseInvitation)(_use_code)


@writes(PutCode)
def _put_code(ops: Ops, write: PutCode) -> None:
    _store_code(ops, write.code)


def _store_code(ops: Ops, code: VerificationCode) -> str:
    """Writes that store a one-time code, and its nonce's attempt counter unless attempts came first; returns when
    they expire. TTLs collect garbage only: `GRACE_MS` past the code's expiry (`keys.py`), the counter's at least
    that."""
    space, p = ops.space, ops.project_id
    expires = str(code.expires_at_millis + GRACE_MS)
    code_key, nonce_key = ops.key(space.code(p, code.code_hash)), ops.key(space.nonce(p, code.nonce_hash))
    ops.put(code_key, _json_fields(code))
    ops.writes.append(["pexpireat", code_key, expires])
    ops.writes += [["set", nonce_key, "0", "NX"], ["extend", nonce_key, expires]]
    return expires


@writes(PutMail)
def _put_mail(ops: Ops, write: PutMail) -> None:
    outbox = ops.key(ops.space.outbox(ops.project_id))
    if write.keep <= 0:
        ops.writes.append(["del", outbox])
        return
    ops.writes += [["lpush", outbox, _email_json(write.mail)], ["ltrim", outbox, "0", str(write.keep - 1)]]


@writes(PutProviderTokens)
def _put_provider_tokens(ops: Ops, write: PutProviderTokens) -> None:
    key = ops.key(ops.space.provider_tokens(ops.project_id))
    ops.writes.append(["hset", key, write.account_row_id, write.sealed])


@writes(DropProviderTokens)
def _drop_provider_tokens(ops: Ops, write: DropProviderTokens) -> None:
    ops.writes.append(["hdel", ops.key(ops.space.provider_tokens(ops.project_id)), write.account_row_id])


@writes(SetOAuthAccounts)
def _set_oauth_accounts(ops: Ops, write: SetOAuthAccounts) -> None:
    # The list's JSON as a whole user's fields hold it (`FieldsAre` compares this text).
    accounts = _json([dataclasses.asdict(account) for account in write.accounts])
    ops.writes.append(["hset", ops.key(ops.space.user(ops.project_id, write.user_id)), "oauth_accounts", accounts])


@writes(SetPasskeys)
def _set_passkeys(ops: Ops, write: SetPasskeys) -> None:
    # The list's JSON as a whole user's fields hold it (`FieldsAre` compares this text).
    passkeys = _json([dataclasses.asdict(passkey) for passkey in write.passkeys])
    ops.writes.append(["hset", ops.key(ops.space.user(ops.project_id, write.user_id)), "passkeys", passkeys])


@guards(ProjectGrantIs)
def _project_grant_is(ops: Ops, position: int, guard: ProjectGrantIs) -> None:
    grants = ops.key(ops.space.user_permissions(ops.project_id, guard.user_id))
    ops.guards.append([position, "sismember", grants, guard.permission_id, 1])
    ops.guards.append([position, "scard", grants, guard.held])


@writes(RevokePermission)
def _revoke_permission(ops: Ops, write: RevokePermission) -> None:
    space, p = ops.space, ops.project_id
    ops.writes.append(["srem", ops.key(space.user_permissions(p, write.user_id)), write.permission_id])
    if write.last:
        ops.writes.append(["srem", ops.key(space.permission_users(p)), write.user_id])


@writes(DropProjectGrants)
def _drop_project_grants(ops: Ops, write: DropProjectGrants) -> None:
    space, p = ops.space, ops.project_id
    ops.writes.append(["del", ops.key(space.user_permissions(p, write.user_id))])
    ops.writes.append(["srem", ops.key(space.permission_users(p)), write.user_id])
