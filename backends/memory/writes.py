"""The memory store: the guards and writes of a `Commit` that are a resource's own (`commit.py` has the generic ones,
and checks and applies them all under the store's lock)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any

from backends.memory.commit import applies, checks, records
from backends.memory.store import Tenant
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
from identity_proto.effects.oauth import DropProviderTokens, PutProviderTokens, SetOAuthAccounts
from identity_proto.effects.passkeys import SetPasskeys
from identity_proto.effects.permissions import DropProjectGrants
from identity_proto.effects.sessions import UserSessionsAre
from identity_proto.effects.teams import UserTeamsAre
from identity_proto.records import (
    ApiKeyType,
    VerificationCode,
    replaced,
)

#: The guards that a set of ids is exactly the ids stored: those the tenant holds, and those the guard names.
_HOLDS: dict[type[Any], tuple[Callable[[Tenant, Any], Iterable[str]], Callable[[Any], tuple[str, ...]]]] = {
    UserSessionsAre: (lambda t, g: t.user_sessions.get(g.user_id, ()), attrgetter("session_ids")),
    TeamMembersAre: (lambda t, g: [user for team, user in t.memberships if team == g.team_id], attrgetter("user_ids")),
    UserTeamsAre: (lambda t, g: [team for team, user in t.memberships if user == g.user_id], attrgetter("team_ids")),
    TeamApiKeysAre: (lambda t, g: t.owner_api_keys.get((ApiKeyType.TEAM, g.team_id), ()), attrgetter("key_ids")),
    UserApiKeysAre: (lambda t, g: t.owner_api_keys.get((ApiKeyType.USER, g.user_id), ()), attrgetter("key_ids")),
}


def _holds_exactly(tenant: Tenant, guard: Any) -> bool:
    held, named = _HOLDS[type(guard)]
    found, ids = set(held(tenant, guard)), named(guard)
    return found == set(ids) and len(ids) == len(found)


for _type in _HOLDS:
    checks(_type)(_holds_exactly)


@checks(ProjectConfigIs)
def _project_config_is(tenant: Tenant, guard: ProjectConfigIs) -> bool:
    stored = tenant.store.projects.get(tenant.project_id)
    return stored is not None and all(getattr(stored.config, name) == value for name, value in guard.expected)


@applies(PutProject)
def _put_project(tenant: Tenant, write: PutProject) -> None:
    tenant.store.projects[write.project.id] = write.project


@applies(PatchProject)
def _patch_project(tenant: Tenant, write: PatchProject) -> None:
    stored = tenant.store.projects[write.project_id]
    changes: dict[str, Any] = {"config": write.config.apply(stored.config)}
    if write.display_name is not None:
        changes["display_name"] = write.display_name
    if write.keys is not None:
        changes["keys"] = write.keys
    tenant.store.projects[write.project_id] = replaced(stored, changes)


def _exists(tenant: Tenant, guard: Exists | RecordExists) -> bool:
    return guard.id in records(tenant, guard.kind)


checks(Exists)(_exists)
checks(RecordExists)(_exists)


@applies(DropUser)
def _drop_user(tenant: Tenant, write: DropUser) -> None:
    user = tenant.users.pop(write.user_id)
    tenant.user_order.remove((user.signed_up_at_millis, user.id))


@applies(DropSession)
def _apply_drop_session(tenant: Tenant, write: DropSession) -> None:
    tenant.drop_session(write.session.id)


@applies(EndSession)
def _apply_end_session(tenant: Tenant, write: EndSession) -> None:
    tenant.drop_session(write.session_id)


@checks(SessionExists)
def _session_exists(tenant: Tenant, guard: SessionExists) -> bool:
    return guard.session_id in tenant.sessions


@checks(MembershipIsAbsent)
def _membership_is_absent(tenant: Tenant, guard: MembershipIsAbsent) -> bool:
    return (guard.team_id, guard.user_id) not in tenant.memberships


@checks(MembershipFieldsAre)
def _membership_fields_are(tenant: Tenant, guard: MembershipFieldsAre) -> bool:
    read = guard.record
    stored = tenant.memberships.get((read.team_id, read.user_id))
    return stored is not None and all(getattr(stored, name) == getattr(read, name) for name in guard.names)


@applies(PatchMembership)
def _patch_membership(tenant: Tenant, write: PatchMembership) -> None:
    key = (write.team_id, write.user_id)
    tenant.memberships[key] = write.changes.apply(tenant.memberships[key])


@applies(DropMembership)
def _drop_membership(tenant: Tenant, write: DropMembership) -> None:
    del tenant.memberships[(write.team_id, write.user_id)]


@applies(DropTeam)
def _drop_team(tenant: Tenant, write: DropTeam) -> None:
    del tenant.teams[write.team_id]
    tenant.drop_api_keys(ApiKeyType.TEAM, write.team_id)  # exactly `write.api_keys`: guarded by TeamApiKeysAre


@checks(ApiKeyOwnerExists)
def _api_key_owner_exists(tenant: Tenant, guard: ApiKeyOwnerExists) -> bool:
    owners = tenant.users if guard.type is ApiKeyType.USER else tenant.teams
    return guard.owner_id in owners


@checks(ApiKeyIs)
def _api_key_is(tenant: Tenant, guard: ApiKeyIs) -> bool:
    stored = tenant.api_keys.get(guard.key.id)
    return stored is not None and all(getattr(stored, n) == getattr(guard.key, n) for n in guard.names)


@applies(PutApiKey)
def _put_api_key(tenant: Tenant, write: PutApiKey) -> None:
    key = write.key
    tenant.api_keys[key.id] = key
    tenant.api_key_by_hash[key.key_hash] = key.id
    tenant.owner_api_keys.setdefault((key.type, key.owner_id), set()).add(key.id)


@applies(PatchApiKey)
def _patch_api_key(tenant: Tenant, write: PatchApiKey) -> None:
    tenant.api_keys[write.key_id] = replaced(tenant.api_keys[write.key_id], dict(write.changes))


@applies(DropApiKey)
def _drop_api_key(tenant: Tenant, write: DropApiKey) -> None:
    key = write.key
    tenant.api_keys.pop(key.id, None)
    if tenant.api_key_by_hash.get(key.key_hash) == key.id:
        del tenant.api_key_by_hash[key.key_hash]
    owner = (key.type, key.owner_id)
    held = tenant.owner_api_keys.get(owner, set())
    held.discard(key.id)
    if not held:
        tenant.owner_api_keys.pop(owner, None)


#: Ids whose code is gone (swept by `_put_code` once expired) are dropped every this many new invitations.
_PRUNE_EVERY = 256


@checks(InvitationIsStored)
def _invitation_is_stored(tenant: Tenant, guard: InvitationIsStored) -> bool:
    return guard.code_hash in tenant.codes


@applies(PutInvitation)
def _put_invitation(tenant: Tenant, write: PutInvitation) -> None:
    code = write.code
    _keep_code(tenant, code)
    tenant.team_invitations[code.id or ""] = code.code_hash
    if len(tenant.team_invitations) % _PRUNE_EVERY == 0:
        for gone in [i for i, code_hash in tenant.team_invitations.items() if code_hash not in tenant.codes]:
            del tenant.team_invitations[gone]


@applies(DropInvitation)
def _drop_invitation(tenant: Tenant, write: DropInvitation) -> None:
    code = write.code
    tenant.drop_codes([code.code_hash])
    tenant.team_invitations.pop(code.id or "", None)


@checks(ChannelsAre)
def _channels_are(tenant: Tenant, guard: ChannelsAre) -> bool:
    return tenant.channels.get(guard.user_id, {}) == {c.id: c for c in guard.stored}


@applies(PutChannel)
def _put_channel(tenant: Tenant, write: PutChannel) -> None:
    channel = replaced(write.channel, {"is_primary": False})
    tenant.channels.setdefault(channel.user_id, {})[channel.id] = channel


@applies(DropChannel)
def _drop_channel(tenant: Tenant, write: DropChannel) -> None:
    stored = tenant.channels.get(write.user_id, {})
    stored.pop(write.channel_id, None)
    if not stored:
        tenant.channels.pop(write.user_id, None)


def _code_is_unused(tenant: Tenant, guard: CodeIsUnused | InvitationIsUnused) -> bool:
    code = tenant.codes.get(guard.code_hash)
    return code is not None and not code.used


checks(CodeIsUnused)(_code_is_unused)
checks(InvitationIsUnused)(_code_is_unused)


def _use_code(tenant: Tenant, write: UseCode | UseInvitation) -> None:
    tenant.codes[write.code_hash] = replaced(tenant.codes[write.code_hash], {"used": True})


applies(UseCode)(_use_code)
applies(UseInvitation)(_use_code)


#: Expired codes are swept every this many new codes (the core judges expiry; this only frees memory).
_CODES_SWEEP_EVERY = 1024


def _keep_code(tenant: Tenant, code: VerificationCode) -> None:
    """Store a code; its nonce's count, from 0 unless attempts came first, now lasts as long as a code has it."""
    tenant.codes[code.code_hash] = code
    tenant.nonce_attempts.setdefault(code.nonce_hash, 0)
    tenant.orphan_nonces.pop(code.nonce_hash, None)


@applies(PutCode)
def _put_code(tenant: Tenant, write: PutCode) -> None:
    code = write.code
    _keep_code(tenant, code)
    tenant.codes_created += 1
    if tenant.codes_created % _CODES_SWEEP_EVERY == 0:
        now = code.created_at_millis
        tenant.drop_codes([h for h, c in tenant.codes.items() if c.expires_at_millis <= now])


@applies(PutMail)
def _put_mail(tenant: Tenant, write: PutMail) -> None:
    tenant.outbox.appendleft(write.mail)
    while len(tenant.outbox) > write.keep:
        tenant.outbox.pop()


@applies(PutProviderTokens)
def _put_provider_tokens(tenant: Tenant, write: PutProviderTokens) -> None:
    tenant.provider_tokens[write.account_row_id] = write.sealed


@applies(DropProviderTokens)
def _drop_provider_tokens(tenant: Tenant, write: DropProviderTokens) -> None:
    tenant.provider_tokens.pop(write.account_row_id, None)


@applies(SetOAuthAccounts)
def _set_oauth_accounts(tenant: Tenant, write: SetOAuthAccounts) -> None:
    tenant.users[write.user_id] = replaced(tenant.users[write.user_id], {"oauth_accounts": write.accounts})


@applies(SetPasskeys)
def _set_passkeys(tenant: Tenant, write: SetPasskeys) -> None:
    tenant.users[write.user_id] = replaced(tenant.users[write.user_id], {"passkeys": write.passkeys})


@checks(ProjectGrantIs)
def _project_grant_is(tenant: Tenant, guard: ProjectGrantIs) -> bool:
    held = tenant.project_grants.get(guard.user_id, set())
    return guard.permission_id in held and len(held) == guard.held


@applies(RevokePermission)
def _revoke_permission(tenant: Tenant, write: RevokePermission) -> None:
    held = tenant.project_grants[write.user_id]
    held.discard(write.permission_id)
    if write.last:
        del tenant.project_grants[write.user_id]


@applies(DropProjectGrants)
def _drop_project_grants(tenant: Tenant, write: DropProjectGrants) -> None:
    tenant.project_grants.pop(write.user_id, None)
